//! Putting responses on the wire. A response is a frame of encoded bytes, or a fetch frame
//! whose record sets are file ranges ([`Reply::Spliced`]). On a plain TCP connection the
//! ranges go from the page cache to the socket with `sendfile`, never through user space;
//! on a TLS connection each range is read once into a pooled buffer (never zero-filled) and
//! encrypted from there.
//!
//! Small responses are gathered in the connection's write buffer and written together; a
//! record set is preceded by everything gathered before it, so the wire order is the
//! response order.

use std::future::Future;
use std::io;
use std::sync::Mutex;

use bytes::BytesMut;
use sluice_protocol::fetch_frame::{Part, SplicedFrame};
use sluice_storage::FileSlice;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

/// A complete response to one request.
#[derive(Debug)]
pub enum Reply {
    /// Encoded bytes (size prefix included).
    Frame(BytesMut),
    /// A fetch response with its record sets as file ranges.
    Spliced(SplicedFrame<FileSlice>),
}

impl Reply {
    /// Bytes on the wire, size prefix included.
    pub fn len(&self) -> usize {
        match self {
            Reply::Frame(b) => b.len(),
            Reply::Spliced(f) => f.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole frame in memory (tests; callers that must inspect it).
    pub fn into_bytes(self) -> io::Result<Vec<u8>> {
        match self {
            Reply::Frame(b) => Ok(b.to_vec()),
            Reply::Spliced(f) => f.flatten(|slice, out| slice.read_into(out)),
        }
    }
}

/// A connection's byte stream: anything that can also put a file range on the wire.
pub trait Transport: AsyncRead + AsyncWrite + Unpin + Send {
    /// Write `slice` (after everything written before it).
    fn send_file<'a>(
        &'a mut self,
        slice: &'a FileSlice,
    ) -> impl Future<Output = io::Result<()>> + Send + 'a;
}

/// The most one `sendfile` call is asked to move (the kernel caps it near 2 GiB anyway).
const SENDFILE_CHUNK_BYTES: u64 = 1 << 30;

fn truncated() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "a segment file is shorter than the record set being sent (truncated meanwhile)",
    )
}

impl Transport for TcpStream {
    async fn send_file(&mut self, slice: &FileSlice) -> io::Result<()> {
        let mut offset = slice.position;
        let end = slice.position + slice.len;
        while offset < end {
            self.writable().await?;
            let want = (end - offset).min(SENDFILE_CHUNK_BYTES) as usize;
            let sent = self.try_io(Interest::WRITABLE, || {
                rustix::fs::sendfile(&*self, &*slice.file, Some(&mut offset), want)
                    .map_err(io::Error::from)
            });
            match sent {
                Ok(0) => return Err(truncated()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Transport for sluice_rt::net::Stream {
    async fn send_file(&mut self, slice: &FileSlice) -> io::Result<()> {
        match self {
            sluice_rt::net::Stream::Tcp(s) => s.send_file(slice).await,
            sluice_rt::net::Stream::Sim(s) => copy_through_buffer(s, slice).await,
        }
    }
}

impl<S> Transport for tokio_rustls::server::TlsStream<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    async fn send_file(&mut self, slice: &FileSlice) -> io::Result<()> {
        copy_through_buffer(self, slice).await
    }
}

/// Buffers kept for copying record sets through user space (TLS): at most this many, of
/// this size; each read fills one buffer's spare capacity, so nothing is zero-filled.
const POOLED_BUFFERS: usize = 16;
const POOLED_BUFFER_BYTES: usize = 256 * 1024;

static BUFFER_POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

fn take_buffer() -> Vec<u8> {
    BUFFER_POOL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .pop()
        .unwrap_or_else(|| Vec::with_capacity(POOLED_BUFFER_BYTES))
}

fn give_back(mut buf: Vec<u8>) {
    buf.clear();
    let mut pool = BUFFER_POOL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if pool.len() < POOLED_BUFFERS && buf.capacity() == POOLED_BUFFER_BYTES {
        pool.push(buf);
    }
}

/// Read `slice` in pooled-buffer-sized pieces and write each.
async fn copy_through_buffer<S: AsyncWrite + Unpin>(
    stream: &mut S,
    slice: &FileSlice,
) -> io::Result<()> {
    let mut buf = take_buffer();
    let mut at = slice.position;
    let end = slice.position + slice.len;
    let result = async {
        while at < end {
            let piece = FileSlice {
                file: std::sync::Arc::clone(&slice.file),
                position: at,
                len: (end - at).min(POOLED_BUFFER_BYTES as u64),
            };
            buf.clear();
            piece.read_into(&mut buf)?;
            stream.write_all(&buf).await?;
            at += piece.len;
        }
        Ok(())
    }
    .await;
    give_back(buf);
    result
}

/// Responses gathered for one connection, written in order.
pub struct ResponseWriter {
    pending: BytesMut,
}

/// Gathered bytes are written once there are this many (or no request is waiting).
const WRITE_BATCH_BYTES: usize = 256 * 1024;

impl ResponseWriter {
    pub fn new() -> Self {
        Self {
            pending: BytesMut::new(),
        }
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Queue `reply`: its bytes are gathered, its record sets sent at once (after what was
    /// gathered before them). Large gatherings are written out.
    pub async fn push<S: Transport>(&mut self, stream: &mut S, reply: Reply) -> io::Result<()> {
        match reply {
            Reply::Frame(b) => {
                if self.pending.is_empty() {
                    self.pending = b;
                } else {
                    self.pending.extend_from_slice(&b);
                }
            }
            Reply::Spliced(frame) => {
                for part in frame.parts {
                    match part {
                        Part::Bytes(b) => self.pending.extend_from_slice(&b),
                        Part::Records(slice) => {
                            self.write_pending(stream).await?;
                            stream.send_file(&slice).await?;
                        }
                    }
                }
            }
        }
        if self.pending.len() >= WRITE_BATCH_BYTES {
            self.flush(stream).await?;
        }
        Ok(())
    }

    async fn write_pending<S: Transport>(&mut self, stream: &mut S) -> io::Result<()> {
        if !self.pending.is_empty() {
            stream.write_all(&self.pending).await?;
            self.pending.clear();
            // A buffer grown by one large answer is not kept for the connection's life.
            if self.pending.capacity() > WRITE_BATCH_BYTES * 4 {
                self.pending = BytesMut::new();
            }
        }
        Ok(())
    }

    /// Write everything gathered and flush the stream (a TLS stream holds written bytes
    /// until flushed).
    pub async fn flush<S: Transport>(&mut self, stream: &mut S) -> io::Result<()> {
        self.write_pending(stream).await?;
        stream.flush().await
    }
}

impl Default for ResponseWriter {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;
    use tokio::io::AsyncReadExt;

    fn slice_of(content: &[u8], position: u64, len: u64) -> FileSlice {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(content).unwrap();
        FileSlice {
            file: Arc::new(f),
            position,
            len,
        }
    }

    fn spliced(parts: Vec<Part<FileSlice>>) -> Reply {
        let len = parts
            .iter()
            .map(|p| match p {
                Part::Bytes(b) => b.len(),
                Part::Records(s) => s.len as usize,
            })
            .sum();
        Reply::Spliced(SplicedFrame { parts, len })
    }

    /// Plain TCP (sendfile) and a buffered copy put the same bytes on the wire, in order.
    #[tokio::test]
    async fn record_sets_go_out_in_order_over_tcp() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let content: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let slice = slice_of(&content, 1000, 2_500_000);
        let expected: Vec<u8> = [
            &b"small"[..],
            b"head",
            &content[1000..2_501_000],
            b"tail",
            b"after",
        ]
        .concat();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut w = ResponseWriter::new();
            w.push(&mut s, Reply::Frame(BytesMut::from(&b"small"[..])))
                .await
                .unwrap();
            let reply = spliced(vec![
                Part::Bytes(bytes::Bytes::from_static(b"head")),
                Part::Records(slice),
                Part::Bytes(bytes::Bytes::from_static(b"tail")),
            ]);
            w.push(&mut s, reply).await.unwrap();
            w.push(&mut s, Reply::Frame(BytesMut::from(&b"after"[..])))
                .await
                .unwrap();
            w.flush(&mut s).await.unwrap();
        });
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).await.unwrap();
        server.await.unwrap();
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "bytes differ");
    }

    #[tokio::test]
    async fn a_truncated_file_is_an_error_not_a_short_frame() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let slice = slice_of(b"0123456789", 5, 20);
            s.send_file(&slice).await
        });
        let _c = tokio::net::TcpStream::connect(addr).await.unwrap();
        let err = server.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        let mut sink = tokio::io::sink();
        let slice = slice_of(b"0123456789", 5, 20);
        assert!(copy_through_buffer(&mut sink, &slice).await.is_err());
    }
}
