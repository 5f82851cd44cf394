//! One connection to one broker (TCP, or TLS over it; SASL done before the first request).
//! Requests are pipelined: a writer task sends frames in order, a reader task matches each
//! response to the oldest outstanding request (Kafka answers in order on a connection).
//! Versions are negotiated once with ApiVersions.
//!
//! Owned by the [`crate::cluster::ClusterCore`]'s connection map; dropping the last `Arc`
//! stops both tasks.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use sluice_protocol::frame;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::security::{Connector, Stream};

/// The highest version this client sends of each API, and the lowest it can use.
pub fn client_versions(key: ApiKey) -> (i16, i16) {
    match key {
        ApiKey::Produce => (3, 11),
        ApiKey::Fetch => (4, 12),
        // v8/v9: earliest-local (-4) and latest-tiered (-5), which older versions refuse.
        ApiKey::ListOffsets => (1, 9),
        ApiKey::Metadata => (1, 12),
        ApiKey::ApiVersions => (0, 3),
        ApiKey::CreateTopics => (2, 7),
        ApiKey::DeleteTopics => (1, 5),
        ApiKey::DeleteRecords => (0, 2),
        ApiKey::DescribeConfigs => (1, 4),
        ApiKey::AlterConfigs => (0, 2),
        ApiKey::IncrementalAlterConfigs => (0, 1),
        ApiKey::CreatePartitions => (0, 3),
        ApiKey::DescribeCluster => (0, 1),
        ApiKey::DescribeLogDirs => (1, 4),
        ApiKey::InitProducerId => (0, 4),
        ApiKey::FindCoordinator => (1, 4),
        ApiKey::JoinGroup => (4, 9),
        ApiKey::SyncGroup => (3, 5),
        ApiKey::Heartbeat => (3, 4),
        ApiKey::LeaveGroup => (0, 5),
        ApiKey::OffsetCommit => (2, 9),
        ApiKey::OffsetFetch => (1, 9),
        ApiKey::ListGroups => (0, 5),
        ApiKey::DescribeGroups => (0, 5),
        ApiKey::ConsumerGroupDescribe => (0, 1),
        ApiKey::DeleteGroups => (0, 2),
        ApiKey::OffsetDelete => (0, 0),
        ApiKey::AddPartitionsToTxn => (0, 3),
        ApiKey::AddOffsetsToTxn => (0, 3),
        ApiKey::EndTxn => (0, 3),
        ApiKey::TxnOffsetCommit => (0, 3),
        ApiKey::ListTransactions => (0, 2),
        ApiKey::CreateAcls | ApiKey::DescribeAcls | ApiKey::DeleteAcls => (1, 3),
        ApiKey::DescribeQuorum => (0, 2),
        ApiKey::UpdateFeatures => (0, 2),
        ApiKey::UnregisterBroker => (0, 0),
        // Kafka 4.4 serves share groups from v1 (v0 was the early-access version).
        ApiKey::ShareGroupDescribe => (1, 1),
        ApiKey::ShareGroupHeartbeat | ApiKey::ShareFetch | ApiKey::ShareAcknowledge => (1, 1),
        _ => (0, 0),
    }
}

struct Pending {
    correlation_id: i32,
    api_key: ApiKey,
    version: i16,
    reply: oneshot::Sender<Result<Bytes>>,
}

struct Outgoing {
    frame: BytesMut,
    pending: Option<Pending>,
}

/// Aborts the task when dropped, so a connection's tasks never outlive it.
pub(crate) struct TaskGuard(pub(crate) JoinHandle<()>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub struct Connection {
    addr: String,
    client_id: StrBytes,
    outgoing: mpsc::Sender<Outgoing>,
    next_correlation: AtomicI32,
    versions: HashMap<i16, (i16, i16)>,
    closed: Arc<AtomicBool>,
    request_timeout: Duration,
    _tasks: [TaskGuard; 2],
}

impl Connection {
    /// Connect (TLS and SASL as `connector` says), start the I/O tasks and negotiate
    /// versions.
    pub async fn connect(
        addr: &str,
        client_id: &str,
        connector: &Connector,
        connect_timeout: Duration,
        request_timeout: Duration,
    ) -> Result<Connection> {
        let conn_err = |reason: String| Error::Connection {
            addr: addr.to_string(),
            reason,
        };
        let stream = tokio::time::timeout(connect_timeout, connector.connect(addr, client_id))
            .await
            .map_err(|_| {
                conn_err(format!(
                    "no connection within {} ms",
                    connect_timeout.as_millis()
                ))
            })?
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::PermissionDenied => Error::Authentication(e.to_string()),
                _ => conn_err(e.to_string()),
            })?;
        match stream {
            // Plain TCP splits into owned halves (no lock between reader and writer).
            Stream::Plain(sluice_rt::net::Stream::Tcp(tcp)) => {
                let (rd, wr) = tcp.into_split();
                Self::start(addr, client_id, rd, wr, request_timeout).await
            }
            tls => {
                let (rd, wr) = tokio::io::split(tls);
                Self::start(addr, client_id, rd, wr, request_timeout).await
            }
        }
    }

    async fn start<R, W>(
        addr: &str,
        client_id: &str,
        rd: R,
        wr: W,
        request_timeout: Duration,
    ) -> Result<Connection>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let pending: Arc<Mutex<VecDeque<Pending>>> = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<Outgoing>(1024);
        let writer = tokio::spawn(write_loop(
            wr,
            rx,
            Arc::clone(&pending),
            Arc::clone(&closed),
            addr.to_string(),
        ));
        let reader = tokio::spawn(read_loop(
            rd,
            Arc::clone(&pending),
            Arc::clone(&closed),
            addr.to_string(),
        ));
        let mut conn = Connection {
            addr: addr.to_string(),
            client_id: StrBytes::from_string(client_id.to_string()),
            outgoing: tx,
            next_correlation: AtomicI32::new(1),
            versions: HashMap::new(),
            closed,
            request_timeout,
            _tasks: [TaskGuard(writer), TaskGuard(reader)],
        };
        conn.versions = conn.negotiate().await?;
        Ok(conn)
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// The broker's version range for an API, if it serves it.
    pub fn broker_versions(&self, key: ApiKey) -> Option<(i16, i16)> {
        self.versions.get(&(key as i16)).copied()
    }

    /// The version to use for `key`: the highest both sides speak.
    pub fn version_for(&self, key: ApiKey) -> Result<i16> {
        let (our_min, our_max) = client_versions(key);
        let Some((min, max)) = self.broker_versions(key) else {
            return Err(Error::UnsupportedVersion(format!("{key:?} (not offered)")));
        };
        let v = our_max.min(max);
        if v < our_min.max(min) {
            return Err(Error::UnsupportedVersion(format!(
                "{key:?} (broker {min}..={max}, client {our_min}..={our_max})"
            )));
        }
        Ok(v)
    }

    async fn negotiate(&self) -> Result<HashMap<i16, (i16, i16)>> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("sluice-client"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        // v3 first; a broker without it answers in v0 format with UNSUPPORTED_VERSION.
        let resp = match self.call_at::<ApiVersionsRequest>(&req, 3).await {
            Ok(r) if r.error_code == 0 => r,
            _ => {
                self.call_at::<ApiVersionsRequest>(&ApiVersionsRequest::default(), 0)
                    .await?
            }
        };
        crate::error::check(resp.error_code, None)?;
        Ok(resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect())
    }

    fn encode<R: Encodable>(&self, key: ApiKey, version: i16, req: &R) -> Result<(i32, BytesMut)> {
        let id = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(id)
            .with_client_id(Some(self.client_id.clone()));
        let mut out = BytesMut::new();
        frame::encode_request(&mut out, &header, req)
            .map_err(|e| Error::Protocol(e.to_string()))?;
        Ok((id, out))
    }

    /// Send a request at the negotiated version and wait for its response.
    pub async fn call<R: Request>(&self, req: &R) -> Result<R::Response> {
        let key = ApiKey::try_from(R::KEY)
            .map_err(|_| Error::Protocol(format!("unknown api key {}", R::KEY)))?;
        let version = self.version_for(key)?;
        self.call_at(req, version).await
    }

    /// Send a request at an explicit version and wait for its response.
    pub async fn call_at<R: Request>(&self, req: &R, version: i16) -> Result<R::Response> {
        self.call_within(req, version, self.request_timeout).await
    }

    /// [`Connection::call_at`] with its own timeout (JoinGroup waits out a rebalance).
    pub async fn call_within<R: Request>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let body = self.send_at(req, version).await?;
        let mut body = tokio::time::timeout(timeout, body)
            .await
            .map_err(|_| {
                Error::Timeout(format!(
                    "{:?} to {} after {} ms",
                    R::KEY,
                    self.addr,
                    timeout.as_millis()
                ))
            })?
            .map_err(|_| self.disconnected())??;
        frame::decode::<R::Response>(&mut body, version, "response")
            .map_err(|e| Error::Protocol(e.to_string()))
    }

    /// Queue a request; the returned receiver yields the response body (after its header).
    pub async fn send_at<R: Request>(
        &self,
        req: &R,
        version: i16,
    ) -> Result<oneshot::Receiver<Result<Bytes>>> {
        let key = ApiKey::try_from(R::KEY)
            .map_err(|_| Error::Protocol(format!("unknown api key {}", R::KEY)))?;
        let (correlation_id, frame) = self.encode(key, version, req)?;
        let (reply, rx) = oneshot::channel();
        let out = Outgoing {
            frame,
            pending: Some(Pending {
                correlation_id,
                api_key: key,
                version,
                reply,
            }),
        };
        self.outgoing
            .send(out)
            .await
            .map_err(|_| self.disconnected())?;
        Ok(rx)
    }

    /// Send a request that gets no response (acks=0 produce).
    pub async fn send_no_response<R: Request>(&self, req: &R, version: i16) -> Result<()> {
        let key = ApiKey::try_from(R::KEY)
            .map_err(|_| Error::Protocol(format!("unknown api key {}", R::KEY)))?;
        let (_, frame) = self.encode(key, version, req)?;
        self.outgoing
            .send(Outgoing {
                frame,
                pending: None,
            })
            .await
            .map_err(|_| self.disconnected())
    }

    fn disconnected(&self) -> Error {
        Error::Connection {
            addr: self.addr.clone(),
            reason: "connection closed".into(),
        }
    }
}

/// Decode a response body of a known version (used with [`Connection::send_at`]).
pub fn decode_response<T: Decodable>(mut body: Bytes, version: i16) -> Result<T> {
    frame::decode::<T>(&mut body, version, "response").map_err(|e| Error::Protocol(e.to_string()))
}

fn fail_all(pending: &Mutex<VecDeque<Pending>>, addr: &str, reason: &str) {
    let drained: Vec<Pending> = pending
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .drain(..)
        .collect();
    for p in drained {
        let _ = p.reply.send(Err(Error::Connection {
            addr: addr.to_string(),
            reason: reason.to_string(),
        }));
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: W,
    mut rx: mpsc::Receiver<Outgoing>,
    pending: Arc<Mutex<VecDeque<Pending>>>,
    closed: Arc<AtomicBool>,
    addr: String,
) {
    let mut buf = BytesMut::new();
    while let Some(first) = rx.recv().await {
        // Coalesce whatever is queued into one write.
        let mut next = Some(first);
        while let Some(out) = next.take() {
            if let Some(p) = out.pending {
                pending
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push_back(p);
            }
            buf.extend_from_slice(&out.frame);
            if buf.len() < 1 << 20 {
                next = rx.try_recv().ok();
            }
        }
        if let Err(e) = wr.write_all(&buf).await {
            closed.store(true, Ordering::Relaxed);
            fail_all(&pending, &addr, &e.to_string());
            return;
        }
        buf.clear();
    }
    let _ = wr.shutdown().await;
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut rd: R,
    pending: Arc<Mutex<VecDeque<Pending>>>,
    closed: Arc<AtomicBool>,
    addr: String,
) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let reason = loop {
        // Parse every whole frame in the buffer.
        while buf.len() >= 4 {
            let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
            if size < 0 {
                closed.store(true, Ordering::Relaxed);
                fail_all(&pending, &addr, "negative frame size from broker");
                return;
            }
            let size = size as usize;
            if buf.len() < 4 + size {
                buf.reserve(4 + size - buf.len());
                break;
            }
            let _ = buf.split_to(4);
            let mut frame = buf.split_to(size).freeze();
            let Some(p) = pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop_front()
            else {
                closed.store(true, Ordering::Relaxed);
                return;
            };
            let result = frame::decode_response_header(&mut frame, p.api_key, p.version)
                .map_err(|e| Error::Protocol(e.to_string()))
                .and_then(|h| {
                    if h.correlation_id == p.correlation_id {
                        Ok(frame)
                    } else {
                        Err(Error::Protocol(format!(
                            "correlation id {} where {} was expected",
                            h.correlation_id, p.correlation_id
                        )))
                    }
                });
            let _ = p.reply.send(result);
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) => break "connection closed by broker".to_string(),
            Ok(_) => {}
            Err(e) => break e.to_string(),
        }
    };
    closed.store(true, Ordering::Relaxed);
    fail_all(&pending, &addr, &reason);
}
