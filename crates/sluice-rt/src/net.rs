//! Sockets: TCP through tokio, or the simulated network when a [`crate::World`] is
//! installed. [`Stream`] and [`Listener`] are enums, so the real path is a direct call
//! (one branch per read or write), never a virtual one.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
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

impl AsyncRead for Stream {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Sim(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Sim(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    #[inline]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Sim(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    #[inline]
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Tcp(s) => s.is_write_vectored(),
            Stream::Sim(s) => s.is_write_vectored(),
        }
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Sim(s) => Pin::new(s).poll_flush(cx),
        }
    }

    #[inline]
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Sim(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

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
