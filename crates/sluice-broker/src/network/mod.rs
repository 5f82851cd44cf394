//! Listeners and connections. Each connection is one task that reads size-prefixed frames,
//! handles them strictly in order (as Kafka does: one request in flight per connection) and
//! writes responses back ([`writer`]: batched, record sets by `sendfile` on plain TCP).
//!
//! A frame over `socket.request.max.bytes`, a negative size, an unknown api key, an
//! unsupported version (other than ApiVersions, which gets a v0 error answer), or a body that
//! does not decode closes that connection with the reason logged; nothing else is affected.
//! A frame's body is read only once the broker-wide [`budget`] admits it, so memory for
//! requests is bounded by `queued.max.request.bytes` / `queued.max.requests`.
//!
//! # Layout
//! - [`writer`]: responses as frames or spliced fetch frames, and the transports that send
//!   file ranges (`sendfile`, or a pooled buffer under TLS).
//! - [`budget`]: the broker-wide request budget.

pub mod budget;
pub mod writer;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use sluice_protocol::frame::{self, SIZE_PREFIX_LEN};
use sluice_rt::net::Listener as TcpListener;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::connection_quotas::ConnectionQuotas;
use crate::handlers::api_versions::unsupported_version_response;
use crate::handlers::HandlerTable;
use crate::metadata_cache::MetadataCache;
use crate::quota::{ClientQuotas, QuotaKind};
use crate::request::{RequestContext, Response};
use crate::sasl::{Authenticated, Outcome, SaslSession, SaslSettings};
use budget::{RequestBudget, Reservation};
use writer::{Reply, ResponseWriter, Transport};

/// What connections are served with: the router, and what every request meets on the way
/// in (connection limits, the request budget, request-time quotas).
pub struct Frontend {
    pub node_id: i32,
    pub config: Arc<sluice_metadata::config::BrokerConfig>,
    pub metadata: Arc<MetadataCache>,
    pub handlers: HandlerTable,
    pub quotas: Arc<ClientQuotas>,
    /// `max.connections` and `max.connections.per.ip`, over every listener.
    pub connections: Arc<ConnectionQuotas>,
    /// `queued.max.requests` / `queued.max.request.bytes`, over every connection.
    pub budget: Arc<RequestBudget>,
}

/// Connection limits, from the broker config.
#[derive(Clone, Copy, Debug)]
pub struct NetworkLimits {
    /// `socket.request.max.bytes`
    pub request_max_bytes: usize,
    /// `connections.max.idle.ms`
    pub idle_timeout: Duration,
    /// `sasl.server.max.receive.size`: the largest frame before SASL authentication.
    pub sasl_max_receive: usize,
}

/// A connection's read buffer to start with: small, so idle connections cost little.
const READ_BUFFER_BYTES: usize = 8 * 1024;
/// How long a client of an SSL listener has to complete its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accept connections until `shutdown` flips, then wait for every connection to finish its
/// in-flight request and close. With `tls` (an SSL or SASL_SSL listener) each connection
/// first completes a TLS handshake; one that fails (a plaintext client, an untrusted or
/// missing client certificate) is closed with the reason logged. With `sasl` (a SASL
/// listener) each connection must authenticate before anything but ApiVersions is served.
/// Connections count against the broker's connection limits ([`crate::connection_quotas`];
/// `inter_broker`: this is the inter-broker listener, exempt from `max.connections`).
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    listener: TcpListener,
    listener_name: String,
    inter_broker: bool,
    tls: Option<Arc<crate::tls::ListenerTls>>,
    sasl: Option<Arc<SaslSettings>>,
    broker: Arc<Frontend>,
    limits: NetworkLimits,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    let quotas = Arc::clone(&broker.connections);
    let name: Arc<str> = listener_name.into();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // At max.connections this waits (and the listener accepts no one else)
                    // until a connection closes or the limit is raised, as Kafka's
                    // acceptor does; new clients wait in the backlog meanwhile.
                    let permit = tokio::select! {
                        _ = shutdown.changed() => break,
                        p = quotas.acquire(&broker, &name, peer.ip(), inter_broker) => p,
                    };
                    let permit = match permit {
                        Ok(p) => p,
                        Err(e) => {
                            info!(%peer, listener = %name, limit = e.limit, "closing connection: max.connections.per.ip reached");
                            continue;
                        }
                    };
                    let broker = Arc::clone(&broker);
                    let shutdown = shutdown.clone();
                    let name = Arc::clone(&name);
                    let tls = tls.as_ref().map(|t| t.acceptor());
                    let sasl = sasl.clone();
                    connections.spawn(async move {
                        let _ = stream.set_nodelay(true);
                        match tls {
                            None => {
                                let principal = crate::tls::ANONYMOUS.into();
                                let auth = Auth::new(principal, sasl);
                                connection(stream, peer, &name, auth, &broker, limits, shutdown).await;
                            }
                            Some(acceptor) => {
                                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                                    Ok(Ok(stream)) => {
                                        let principal = crate::tls::principal(stream.get_ref().1).into();
                                        let auth = Auth::new(principal, sasl);
                                        connection(stream, peer, &name, auth, &broker, limits, shutdown).await;
                                    }
                                    Ok(Err(e)) => info!(%peer, listener = %name, error = %e, "TLS handshake failed"),
                                    Err(_) => info!(%peer, listener = %name, "TLS handshake timed out"),
                                }
                            }
                        }
                        drop(permit);
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// The size of the frame at the front of `buf`, once its size prefix is there.
/// `limit` names the setting `max_bytes` comes from, for the error.
fn frame_size(buf: &[u8], max_bytes: usize, limit: &str) -> Result<Option<usize>, String> {
    if buf.len() < SIZE_PREFIX_LEN {
        return Ok(None);
    }
    let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if size < 0 {
        return Err(format!("negative frame size {size}"));
    }
    let size = size as usize;
    if size > max_bytes {
        return Err(format!("frame of {size} bytes exceeds {limit}={max_bytes}"));
    }
    Ok(Some(size))
}

/// Split the frame of `size` bytes off the front of `buf` if it is all there; otherwise make
/// room for the rest of it. Called once the request budget admitted the frame, so its size
/// is accounted for: the buffer is sized for it exactly (growing it step by step would
/// copy it and could leave twice the room).
fn take_frame(buf: &mut BytesMut, size: usize) -> Option<Bytes> {
    let needed = SIZE_PREFIX_LEN + size;
    if buf.len() < needed {
        if buf.capacity() < needed {
            let mut sized = BytesMut::with_capacity(needed);
            sized.extend_from_slice(buf);
            *buf = sized;
        }
        return None;
    }
    buf.advance(SIZE_PREFIX_LEN);
    let frame = buf.split_to(size).freeze();
    if size > READ_BUFFER_BYTES {
        // The buffer was sized for this frame: the frame alone keeps its allocation (freed
        // with the frame). Otherwise the next read would reclaim it once the frame is
        // dropped, and read up to its size of the next request before the budget admits
        // that, or hold it while the client is idle: 200 clients answered but not yet gone
        // held 4 MiB each.
        let mut fresh = BytesMut::with_capacity(READ_BUFFER_BYTES.max(buf.len()));
        fresh.extend_from_slice(buf);
        *buf = fresh;
    }
    Some(frame)
}

/// A request's principal, whether it authenticated with a delegation token, and its connection.
type Who<'a> = (&'a Arc<str>, bool, &'a Arc<crate::request::Connection>);

/// Who a connection's requests come from: its principal, and the SASL exchange still to
/// complete (None once authenticated, or on a listener without SASL).
struct Auth {
    principal: Arc<str>,
    sasl: Option<SaslSession>,
    /// The listener's SASL settings, for re-authentication (None: no SASL).
    settings: Option<Arc<SaslSettings>>,
    /// When the authenticated session ends (KIP-368; None: never).
    expires: Option<tokio::time::Instant>,
    /// The exchange in progress re-authenticates an authenticated connection.
    reauthenticating: bool,
    /// Authenticated with a delegation token.
    token: bool,
    /// What the connection knows of its client (and does when it closes).
    connection: Arc<crate::request::Connection>,
}

impl Auth {
    fn new(principal: Arc<str>, settings: Option<Arc<SaslSettings>>) -> Self {
        Self {
            principal,
            sasl: settings.clone().map(SaslSession::new),
            settings,
            expires: None,
            reauthenticating: false,
            token: false,
            connection: Default::default(),
        }
    }

    /// The connection's principal, whether it authenticated with a delegation token, and
    /// what it knows of its client.
    fn who(&self) -> Who<'_> {
        (&self.principal, self.token, &self.connection)
    }

    /// Handle one frame: the SASL exchange until it completes, then ordinary requests; on a
    /// SASL listener a SaslHandshake starts re-authentication, and any other request after
    /// the session ended closes the connection.
    async fn process(
        &mut self,
        broker: &Frontend,
        listener: &str,
        peer: SocketAddr,
        frame: Bytes,
        reservation: Reservation,
    ) -> Result<(Response, i32), (Response, String)> {
        if self.sasl.is_none() {
            if let Some(settings) = &self.settings {
                let api_key = sluice_protocol::frame::peek_request(&frame)
                    .map(|p| p.api_key)
                    .unwrap_or(-1);
                // Only a session that ends may be renewed (as Kafka: without an end the
                // handshake is answered as out of place).
                if api_key == kafka_protocol::messages::ApiKey::SaslHandshake as i16
                    && self.expires.is_some()
                {
                    self.sasl = Some(SaslSession::new(Arc::clone(settings)));
                    self.reauthenticating = true;
                } else if self
                    .expires
                    .is_some_and(|e| tokio::time::Instant::now() >= e)
                {
                    return Err((
                        None,
                        "SASL session expired (connections.max.reauth.ms) without re-authentication"
                            .into(),
                    ));
                }
            }
        }
        let Some(session) = self.sasl.as_mut() else {
            return process(broker, listener, self.who(), peer, frame, reservation)
                .await
                .map_err(|r| (None, r));
        };
        match session.handle(broker, listener, peer, frame).await {
            Outcome::Route(frame) => {
                process(broker, listener, self.who(), peer, frame, reservation)
                    .await
                    .map_err(|r| (None, r))
            }
            Outcome::Continue(out) => Ok((Some(Reply::Frame(out)), 0)),
            Outcome::Authenticated(
                out,
                Authenticated {
                    principal,
                    lifetime_ms,
                    token,
                },
            ) => {
                if self.reauthenticating && principal != self.principal {
                    return Err((
                        None,
                        format!(
                            "re-authentication as {principal} on a connection of {}: a connection cannot change principals",
                            self.principal
                        ),
                    ));
                }
                debug!(%peer, %principal, lifetime_ms, reauthentication = self.reauthenticating, "SASL authentication succeeded");
                if self.reauthenticating {
                    // Kafka's successful-reauthentication-total.
                    metrics::counter!("sluice_successful_reauthentication_total", "listener" => listener.to_string())
                        .increment(1);
                }
                self.principal = principal;
                self.token = token;
                self.sasl = None;
                self.reauthenticating = false;
                self.expires = (lifetime_ms > 0).then(|| {
                    tokio::time::Instant::now() + Duration::from_millis(lifetime_ms as u64)
                });
                Ok((Some(Reply::Frame(out)), 0))
            }
            Outcome::Close(out, reason) => Err((out.map(Reply::Frame), reason)),
        }
    }
}

/// One client connection: requests are read and answered in turn, so one stream serves
/// both directions (no split).
async fn connection<S: Transport>(
    mut stream: S,
    peer: SocketAddr,
    listener: &str,
    mut auth: Auth,
    broker: &Frontend,
    limits: NetworkLimits,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut rbuf = BytesMut::with_capacity(READ_BUFFER_BYTES);
    let mut writer = ResponseWriter::new();
    // The budget admitted for the frame at the front of `rbuf`.
    let mut admitted: Option<Reservation> = None;
    debug!(%peer, "connection opened");
    let reason: String = loop {
        // Until a SASL client has authenticated, only small frames are accepted.
        let (max_frame, limit) =
            if auth.sasl.is_some() && limits.sasl_max_receive < limits.request_max_bytes {
                (limits.sasl_max_receive, "sasl.server.max.receive.size")
            } else {
                (limits.request_max_bytes, "socket.request.max.bytes")
            };
        let size = match frame_size(&rbuf, max_frame, limit) {
            Err(reason) => break reason,
            Ok(size) => size,
        };
        if let (Some(size), None) = (size, &admitted) {
            // Nothing more is read until the budget takes this frame; what is answered
            // meanwhile goes out first.
            if writer.has_pending() {
                if let Err(e) = writer.flush(&mut stream).await {
                    break format!("write failed: {e}");
                }
            }
            tokio::select! {
                r = broker.budget.admit(size) => admitted = Some(r),
                _ = shutdown.changed() => break "broker shutting down".into(),
            }
        }
        if let Some(frame) = size.and_then(|size| take_frame(&mut rbuf, size)) {
            let reservation = admitted.take().unwrap_or_default();
            let (reply, throttle_ms) = match auth
                .process(broker, listener, peer, frame, reservation)
                .await
            {
                Ok(answered) => answered,
                Err((last, reason)) => {
                    // What was answered so far, and the refusal itself, then close.
                    if let Some(last) = last {
                        let _ = writer.push(&mut stream, last).await;
                    }
                    let _ = writer.flush(&mut stream).await;
                    break reason;
                }
            };
            if let Some(reply) = reply {
                if let Err(e) = writer.push(&mut stream, reply).await {
                    break format!("write failed: {e}");
                }
            }
            if throttle_ms > 0 {
                // Over a quota: answer, then read nothing more from this client for the
                // throttle time (the connection is muted).
                if let Err(e) = writer.flush(&mut stream).await {
                    break format!("write failed: {e}");
                }
                debug!(%peer, throttle_ms, "connection muted (quota)");
                let pause = Duration::from_millis(throttle_ms as u64);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = shutdown.changed() => break "broker shutting down".into(),
                }
            }
            continue;
        }
        // Nothing whole to handle: answer what was handled, then read.
        if writer.has_pending() {
            if let Err(e) = writer.flush(&mut stream).await {
                break format!("write failed: {e}");
            }
        }
        if *shutdown.borrow() {
            break "broker shutting down".into();
        }
        if rbuf.capacity() - rbuf.len() < 1024 {
            rbuf.reserve(READ_BUFFER_BYTES);
        }
        let read = tokio::select! {
            r = tokio::time::timeout(limits.idle_timeout, stream.read_buf(&mut rbuf)) => r,
            _ = shutdown.changed() => break "broker shutting down".into(),
        };
        match read {
            Err(_) => break "idle for connections.max.idle.ms".into(),
            Ok(Ok(0)) if rbuf.is_empty() => break String::new(),
            Ok(Ok(0)) => {
                break format!(
                    "connection closed inside a frame ({} bytes buffered)",
                    rbuf.len()
                )
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => break format!("read failed: {e}"),
        }
    };
    let routine =
        reason.is_empty() || reason == "broker shutting down" || reason.contains("reset by peer");
    if routine {
        debug!(%peer, reason, "connection closed");
    } else {
        info!(%peer, reason, "closing connection");
    }
    let _ = stream.shutdown().await;
}

/// A handler's future, timed: how long it spent being polled (the request's share of the
/// broker's threads, which `request_percentage` quotas limit), not counting waits.
struct Timed<'a> {
    inner: crate::handlers::HandlerFuture<'a>,
    busy: Duration,
}

impl std::future::Future for Timed<'_> {
    type Output = (Result<Response, crate::request::HandlerError>, Duration);

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let started = tokio::time::Instant::now();
        let polled = self.inner.as_mut().poll(cx);
        self.busy += started.elapsed();
        polled.map(|r| (r, self.busy))
    }
}

/// Route one frame to its handler; the answer and how long to mute the connection (ms).
async fn process(
    broker: &Frontend,
    listener: &str,
    (principal, token_authenticated, connection): Who<'_>,
    peer: SocketAddr,
    frame: Bytes,
    reservation: Reservation,
) -> Result<(Response, i32), String> {
    let peek = frame::peek_request(&frame).map_err(|e| e.to_string())?;
    let Some(route) = broker.handlers.get(peek.api_key) else {
        return Err(format!("unknown api key {}", peek.api_key));
    };
    let handler = &route.spec;
    if !handler.supports(peek.api_version) {
        if peek.api_key == ApiKey::ApiVersions as i16 {
            return unsupported_version_response(peek.correlation_id)
                .map(|r| (Some(Reply::Frame(r)), 0))
                .map_err(|e| e.to_string());
        }
        return Err(format!(
            "unsupported version {} of {:?} (supported {}..={})",
            peek.api_version, handler.api_key, handler.min_version, handler.max_version
        ));
    }
    let mut body = frame;
    let header = frame::decode_request_header(&mut body, handler.api_key, peek.api_version)
        .map_err(|e| e.to_string())?;
    let ctx = RequestContext {
        api_key: handler.api_key,
        api_version: peek.api_version,
        correlation_id: peek.correlation_id,
        client_id: header.client_id.map(|c| c.to_string()),
        listener: listener.to_string(),
        principal: Arc::clone(principal),
        token_authenticated,
        peer,
        throttle_ms: Default::default(),
        reservation: Arc::new(std::sync::Mutex::new(reservation)),
        connection: Arc::clone(connection),
    };
    let timed = Timed {
        inner: route.handler.handle(&ctx, body),
        busy: Duration::ZERO,
    };
    let started = tokio::time::Instant::now();
    let (answer, busy) = timed.await;
    broker
        .handlers
        .record(peek.api_key, started.elapsed().as_secs_f64());
    let answer = answer.map_err(|e| format!("{:?} v{}: {e}", ctx.api_key, ctx.api_version))?;
    // request_percentage: seconds of handling × 100, as a rate per second.
    broker
        .quotas
        .record(&ctx, QuotaKind::Request, busy.as_secs_f64() * 100.0);
    Ok((answer, ctx.throttled_ms()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_and_limits_apply() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&3i32.to_be_bytes());
        buf.extend_from_slice(b"ab");
        assert_eq!(frame_size(&buf, 100, "x").unwrap(), Some(3));
        assert_eq!(take_frame(&mut buf, 3), None);
        buf.extend_from_slice(b"c");
        buf.extend_from_slice(&1i32.to_be_bytes());
        assert_eq!(take_frame(&mut buf, 3).as_deref(), Some(&b"abc"[..]));
        assert_eq!(frame_size(&buf, 100, "x").unwrap(), Some(1));
        assert_eq!(take_frame(&mut buf, 1), None);
        assert_eq!(frame_size(&[0, 0], 100, "x").unwrap(), None);
        assert!(frame_size(&200i32.to_be_bytes(), 100, "x").is_err());
        assert!(frame_size(&(-5i32).to_be_bytes(), 100, "x").is_err());
    }

    #[test]
    fn a_large_frame_does_not_leave_its_buffer_to_the_next_read() {
        let size = 64 * READ_BUFFER_BYTES;
        let mut buf = BytesMut::with_capacity(READ_BUFFER_BYTES);
        buf.extend_from_slice(&(size as i32).to_be_bytes());
        buf.extend_from_slice(b"head");
        assert_eq!(take_frame(&mut buf, size), None);
        assert!(
            buf.capacity() >= SIZE_PREFIX_LEN + size,
            "sized for the frame"
        );
        buf.resize(SIZE_PREFIX_LEN + size, b'x');
        // The next frame's prefix arrived with this one's tail.
        buf.extend_from_slice(&3i32.to_be_bytes());
        let frame = take_frame(&mut buf, size).expect("the frame is whole");
        assert_eq!(frame.len(), size);
        assert_eq!(&frame[..4], b"head");
        drop(frame);
        // What is left is the next prefix in a small buffer; making room for the next read
        // does not take back the frame's allocation.
        assert_eq!(&buf[..], &3i32.to_be_bytes());
        buf.reserve(READ_BUFFER_BYTES);
        assert!(
            buf.capacity() < 4 * READ_BUFFER_BYTES,
            "capacity {} after a {size}-byte frame",
            buf.capacity()
        );
    }
}
