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
