//! Frames on the wire: `[i32 BE size][size bytes]`, a request header then a body, and the
//! matching response framing. Decoding of bodies is delegated to `kafka-protocol`; this
//! module only decides header versions and checks sizes.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use thiserror::Error;

/// Bytes of the size prefix in front of every frame.
pub const SIZE_PREFIX_LEN: usize = 4;

#[derive(Debug, Error)]
pub enum FrameError {
    #[error("frame of {0} bytes is too short for a request header")]
    TooShort(usize),
    #[error("malformed {what}: {reason}")]
    Malformed { what: &'static str, reason: String },
    #[error("could not encode {what}: {reason}")]
    Encode { what: &'static str, reason: String },
}

/// The fixed prefix of every request header (v0..v2 alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestPeek {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

/// Read api key, version and correlation id without consuming anything.
pub fn peek_request(frame: &[u8]) -> Result<RequestPeek, FrameError> {
    if frame.len() < 8 {
        return Err(FrameError::TooShort(frame.len()));
    }
    Ok(RequestPeek {
        api_key: i16::from_be_bytes([frame[0], frame[1]]),
        api_version: i16::from_be_bytes([frame[2], frame[3]]),
        correlation_id: i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
    })
}

/// Decode a message from untrusted bytes. A panic inside the decoder (a bug in it) becomes an
/// error, so one bad frame can never take the process down.
pub fn decode<T: Decodable>(
    buf: &mut Bytes,
    version: i16,
    what: &'static str,
) -> Result<T, FrameError> {
    match catch_unwind(AssertUnwindSafe(|| T::decode(buf, version))) {
        Ok(Ok(msg)) => Ok(msg),
        Ok(Err(e)) => Err(FrameError::Malformed {
            what,
            reason: format!("{e:#}"),
        }),
        Err(_) => Err(FrameError::Malformed {
            what,
            reason: "decoder panicked".into(),
        }),
    }
}

/// Decode the request header of a frame whose api key is known, leaving `frame` at the body.
pub fn decode_request_header(
    frame: &mut Bytes,
    api_key: ApiKey,
    version: i16,
) -> Result<RequestHeader, FrameError> {
    let header_version = api_key.request_header_version(version);
    decode(frame, header_version, "request header")
}

/// Encode `body` as a complete response frame (size prefix, header, body) appended to `out`.
pub fn encode_response<T: Encodable>(
    out: &mut BytesMut,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Result<(), FrameError> {
    let start = out.len();
    out.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(out, api_key.response_header_version(version))
        .map_err(|e| FrameError::Encode {
            what: "response header",
            reason: e.to_string(),
        })?;
    body.encode(out, version).map_err(|e| FrameError::Encode {
        what: "response body",
        reason: format!("{e:#}"),
    })?;
    let size = (out.len() - start - SIZE_PREFIX_LEN) as i32;
    out[start..start + SIZE_PREFIX_LEN].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

/// Encode a request frame (size prefix, header, body): the client side of the same framing.
pub fn encode_request<T: Encodable>(
    out: &mut BytesMut,
    header: &RequestHeader,
    body: &T,
) -> Result<(), FrameError> {
    let api_key = ApiKey::try_from(header.request_api_key).map_err(|_| FrameError::Encode {
        what: "request header",
        reason: format!("unknown api key {}", header.request_api_key),
    })?;
    let version = header.request_api_version;
    let start = out.len();
    out.put_i32(0);
    header
        .encode(out, api_key.request_header_version(version))
        .map_err(|e| FrameError::Encode {
            what: "request header",
            reason: e.to_string(),
        })?;
    body.encode(out, version).map_err(|e| FrameError::Encode {
        what: "request body",
        reason: format!("{e:#}"),
    })?;
    let size = (out.len() - start - SIZE_PREFIX_LEN) as i32;
    out[start..start + SIZE_PREFIX_LEN].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

/// Decode a response frame's header for `api_key`/`version`, leaving `frame` at the body.
pub fn decode_response_header(
    frame: &mut Bytes,
    api_key: ApiKey,
    version: i16,
) -> Result<ResponseHeader, FrameError> {
    decode(
        frame,
        api_key.response_header_version(version),
        "response header",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn request_round_trips_through_the_framing() {
        for version in [0i16, 9, 12] {
            let header = RequestHeader::default()
                .with_request_api_key(ApiKey::Metadata as i16)
                .with_request_api_version(version)
                .with_correlation_id(77)
                .with_client_id(Some(StrBytes::from_static_str("test")));
            let mut out = BytesMut::new();
            encode_request(&mut out, &header, &MetadataRequest::default()).unwrap();
            let size = i32::from_be_bytes([out[0], out[1], out[2], out[3]]) as usize;
            assert_eq!(size + 4, out.len());
            let mut frame = out.freeze().slice(4..);
            let peek = peek_request(&frame).unwrap();
            assert_eq!(
                (peek.api_key, peek.api_version, peek.correlation_id),
                (3, version, 77)
            );
            let decoded = decode_request_header(&mut frame, ApiKey::Metadata, version).unwrap();
            assert_eq!(decoded.client_id.as_deref(), Some("test"));
            let _: MetadataRequest = decode(&mut frame, version, "metadata").unwrap();
        }
    }

    #[test]
    fn response_frame_has_size_and_correlation_id() {
        let mut out = BytesMut::new();
        encode_response(
            &mut out,
            ApiKey::Metadata,
            12,
            5,
            &MetadataResponse::default(),
        )
        .unwrap();
        let mut frame = out.freeze().slice(4..);
        let h = decode_response_header(&mut frame, ApiKey::Metadata, 12).unwrap();
        assert_eq!(h.correlation_id, 5);
    }

    #[test]
    fn truncated_bodies_are_errors() {
        let mut out = BytesMut::new();
        encode_response(
            &mut out,
            ApiKey::Metadata,
            12,
            5,
            &MetadataResponse::default(),
        )
        .unwrap();
        let full = out.freeze();
        for cut in 0..full.len() {
            let mut b = full.slice(4..cut.max(4));
            let _ = decode_response_header(&mut b, ApiKey::Metadata, 12)
                .and_then(|_| decode::<MetadataResponse>(&mut b, 12, "metadata"));
        }
    }
}
