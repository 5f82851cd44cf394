//! Sockets: TCP through tokio, or the simulated network when a [`crate::World`] is
//! installed. [`Stream`] and [`Listener`] are enums, so the real path is a direct call
//! (one branch per read or write), never a virtual one.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use crate::BoxFuture;

/// A simulated connection.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static> Io for T {}

/// A simulated listening socket.
pub trait Accept: Send + Sync + 'static {
    fn accept(&self) -> BoxFuture<'_, io::Result<(Box<dyn Io>, SocketAddr)>>;
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// A connection.
pub enum Stream {
    Tcp(TcpStream),
    Sim(Box<dyn Io>),
}

/// Connect to `addr` (`host:port`), with Nagle off (Kafka's protocol is request/response).
pub async fn connect(addr: &str) -> io::Result<Stream> {
    match crate::simulated() {
        None => {
            let s = TcpStream::connect(addr).await?;
            let _ = s.set_nodelay(true);
            Ok(Stream::Tcp(s))
        }
        Some(w) => Ok(Stream::Sim(w.connect(addr.to_string()).await?)),
    }
}

impl Stream {
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nodelay(on),
            Stream::Sim(_) => Ok(()),
        }
    }
}

/// Implement `AsyncRead` and `AsyncWrite` for an enum whose every variant holds a stream, by
/// passing each call to the variant's stream (a branch, no virtual call).
/// `delegate_io!(Stream { Stream::Tcp, Stream::Sim });`
#[macro_export]
macro_rules! delegate_io {
    ($ty:ty { $($variant:path),+ $(,)? }) => {
        impl $crate::net::__io::AsyncRead for $ty {
            #[inline]
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &mut $crate::net::__io::ReadBuf<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                match self.get_mut() {
                    $($variant(s) => $crate::net::__io::AsyncRead::poll_read(::std::pin::Pin::new(s), cx, buf),)+
                }
            }
        }

        impl $crate::net::__io::AsyncWrite for $ty {
            #[inline]
            fn poll_write(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &[u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                match self.get_mut() {
                    $($variant(s) => $crate::net::__io::AsyncWrite::poll_write(::std::pin::Pin::new(s), cx, buf),)+
                }
            }

            #[inline]
            fn poll_write_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &[::std::io::IoSlice<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                match self.get_mut() {
                    $($variant(s) => $crate::net::__io::AsyncWrite::poll_write_vectored(::std::pin::Pin::new(s), cx, bufs),)+
                }
            }

            #[inline]
            fn is_write_vectored(&self) -> bool {
                match self {
                    $($variant(s) => $crate::net::__io::AsyncWrite::is_write_vectored(s),)+
                }
            }

            #[inline]
            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                match self.get_mut() {
                    $($variant(s) => $crate::net::__io::AsyncWrite::poll_flush(::std::pin::Pin::new(s), cx),)+
                }
            }

            #[inline]
            fn poll_shutdown(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                match self.get_mut() {
                    $($variant(s) => $crate::net::__io::AsyncWrite::poll_shutdown(::std::pin::Pin::new(s), cx),)+
                }
            }
        }
    };
}

#[doc(hidden)]
pub use tokio::io as __io;

delegate_io!(Stream { Stream::Tcp, Stream::Sim });

/// How a listening socket is set up (the real one; the simulated network ignores these).
#[derive(Clone, Copy, Debug)]
pub struct ListenOptions {
    /// `socket.send.buffer.bytes`; -1 keeps the OS default.
    pub send_buffer: i32,
    /// `socket.receive.buffer.bytes`; -1 keeps the OS default.
    pub recv_buffer: i32,
    /// `socket.listen.backlog.size`
    pub backlog: u32,
}

impl Default for ListenOptions {
    fn default() -> Self {
        Self {
            send_buffer: -1,
            recv_buffer: -1,
            backlog: 1024,
        }
    }
}

/// A listening socket.
pub enum Listener {
    Tcp(TcpListener),
    Sim(Box<dyn Accept>),
}

/// Listen on `addr` (address reuse on, as Kafka's acceptor).
pub async fn bind(addr: SocketAddr, options: ListenOptions) -> io::Result<Listener> {
    if let Some(w) = crate::simulated() {
        return Ok(Listener::Sim(w.bind(addr).await?));
    }
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    if options.send_buffer > 0 {
        socket.set_send_buffer_size(options.send_buffer as u32)?;
    }
    if options.recv_buffer > 0 {
        socket.set_recv_buffer_size(options.recv_buffer as u32)?;
    }
    socket.bind(addr)?;
    Ok(Listener::Tcp(socket.listen(options.backlog)?))
}

impl Listener {
    /// The next connection and its peer's address (cancel-safe).
    pub async fn accept(&self) -> io::Result<(Stream, SocketAddr)> {
        match self {
            Listener::Tcp(l) => l.accept().await.map(|(s, a)| (Stream::Tcp(s), a)),
            Listener::Sim(l) => l.accept().await.map(|(s, a)| (Stream::Sim(s), a)),
        }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr(),
            Listener::Sim(l) => l.local_addr(),
        }
    }
}

impl From<TcpListener> for Listener {
    fn from(l: TcpListener) -> Self {
        Listener::Tcp(l)
    }
}
