//! How the quorum's connections are made (the controller listener, Raft between voters and
//! brokers' calls to the active controller): plain TCP by default; the node supplies TLS when
//! the controller listener is SSL. The controller itself stays free of TLS code.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use sluice_rt::net::Stream as TcpStream;
use tokio::io::{AsyncRead, AsyncWrite};

/// A connection, plain or secured.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static> Stream for T {}

pub type BoxStream = Box<dyn Stream>;
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub trait Transport: Send + Sync + 'static {
    /// Connect to the controller listener at `addr` (`host:port`).
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxStream>>;
    /// Set up an accepted connection (a TLS handshake, say) before it is served.
    fn accept(&self, tcp: TcpStream) -> BoxFuture<'static, io::Result<BoxStream>>;
}

/// Plain TCP (a PLAINTEXT controller listener).
pub struct Tcp;

impl Transport for Tcp {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let s = sluice_rt::net::connect(addr).await?;
            Ok(Box::new(s) as BoxStream)
        })
    }

    fn accept(&self, tcp: TcpStream) -> BoxFuture<'static, io::Result<BoxStream>> {
        Box::pin(async move { Ok(Box::new(tcp) as BoxStream) })
    }
}

pub fn tcp() -> Arc<dyn Transport> {
    Arc::new(Tcp)
}
