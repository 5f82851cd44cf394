//! Per-request context and the helpers every handler uses to decode its request and encode
//! its response at the negotiated version.

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use sluice_protocol::frame;
use thiserror::Error;

use crate::network::budget::Reservation;
use crate::network::writer::Reply;

/// Who sent a request and how: what a handler may need beyond the body.
#[derive(Clone, Debug)]
pub struct RequestContext {
    pub api_key: ApiKey,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    pub listener: String,
    /// Who is asking: `User:ANONYMOUS`, or `User:<certificate subject>` over mutual TLS.
    pub principal: std::sync::Arc<str>,
    /// The principal authenticated with a delegation token (SCRAM `tokenauth`).
    pub token_authenticated: bool,
    pub peer: SocketAddr,
    /// How long the connection is muted after this request (a quota violation), in ms.
    pub throttle_ms: std::sync::Arc<std::sync::atomic::AtomicI32>,
    /// The request's share of the broker's request budget (`queued.max.request*`).
    pub reservation: std::sync::Arc<std::sync::Mutex<Reservation>>,
    /// What the connection it came on knows of its client.
    pub connection: std::sync::Arc<Connection>,
}

/// Something to do when a connection closes.
type CloseHook = Box<dyn FnOnce() + Send>;

/// What a connection knows of its client beyond one request, and what to do when it closes.
pub struct Connection {
    id: u64,
    /// The client's software name and version, as ApiVersions named them (KIP-511).
    software: std::sync::Mutex<Option<(String, String)>>,
    /// What to run when it closes, each under a key it is registered once for.
    on_close: std::sync::Mutex<Vec<(u128, CloseHook)>>,
}

impl Default for Connection {
    fn default() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            software: Default::default(),
            on_close: Default::default(),
        }
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("id", &self.id).finish()
    }
}

impl Connection {
    /// Unique among this process's connections.
    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn set_software(&self, name: &str, version: &str) {
        *self
            .software
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((name.to_string(), version.to_string()));
    }

    pub fn software(&self) -> Option<(String, String)> {
        self.software
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Run `f` once the connection has closed (and its last request is done), unless
    /// something was already registered under `key`.
    pub fn on_close(&self, key: u128, f: impl FnOnce() + Send + 'static) {
        let mut hooks = self
            .on_close
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !hooks.iter().any(|(k, _)| *k == key) {
            hooks.push((key, Box::new(f)));
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let hooks = std::mem::take(
            self.on_close
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for (_, f) in hooks {
            f();
        }
    }
}

/// A request that cannot be answered: the connection is closed with this reason logged.
#[derive(Debug, Error)]
pub enum HandlerError {
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error("cannot encode response: {0}")]
    Encode(String),
}

/// A complete response, or nothing (acks=0 produce).
pub type Response = Option<Reply>;

impl RequestContext {
    /// Mute the connection for `ms` after this request (the longest throttle wins).
    pub fn throttle(&self, ms: i32) {
        self.throttle_ms
            .fetch_max(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// The request no longer holds its bytes (it is parked, or they were written): give its
    /// share of the request budget back so other connections may be read.
    pub fn release_budget(&self) {
        self.reservation
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .release();
    }

    pub fn throttled_ms(&self) -> i32 {
        self.throttle_ms.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn decode<T: Decodable>(&self, mut body: Bytes) -> Result<T, HandlerError> {
        frame::decode(&mut body, self.api_version, "request body")
            .map_err(|e| HandlerError::Malformed(e.to_string()))
    }

    /// Encode `body` as this request's response frame.
    pub fn respond<T: Encodable>(&self, body: &T) -> Result<Response, HandlerError> {
        self.encode(body).map(|out| Some(Reply::Frame(out)))
    }

    /// `body` as this request's response frame, in bytes.
    pub fn encode<T: Encodable>(&self, body: &T) -> Result<BytesMut, HandlerError> {
        let mut out = BytesMut::new();
        frame::encode_response(
            &mut out,
            self.api_key,
            self.api_version,
            self.correlation_id,
            body,
        )
        .map_err(|e| HandlerError::Encode(e.to_string()))?;
        Ok(out)
    }
}

pub fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Kafka's "authorized operations not requested" sentinel.
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// Per-partition outcomes grouped by topic, topics in first-seen order (how per-partition
/// responses are laid out on the wire).
pub fn by_topic<R>(outcomes: Vec<(String, i32, R)>) -> Vec<(String, Vec<(i32, R)>)> {
    let mut out: Vec<(String, Vec<(i32, R)>)> = Vec::new();
    for (topic, partition, r) in outcomes {
        match out.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, ps)) => ps.push((partition, r)),
            None => out.push((topic, vec![(partition, r)])),
        }
    }
    out
}
