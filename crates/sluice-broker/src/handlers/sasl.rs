//! SaslHandshake (key 17) and SaslAuthenticate (key 36) outside authentication. On a SASL
//! listener the connection itself runs the exchange before any request reaches the router
//! (see `crate::sasl`); what arrives here is a handshake on a connection that needs none
//! (a PLAINTEXT or SSL listener) or one already authenticated. Kafka answers both with
//! ILLEGAL_SASL_STATE; so re-authentication (KIP-368) is declined: authenticated sessions
//! report `session_lifetime_ms` 0, so clients never attempt it.

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

pub mod handshake {
    use super::*;
    handler!(ApiKey::SaslHandshake, 0, 1, SaslHandshake {}, sync);

    fn handle(
        _: &SaslHandshake,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let _: SaslHandshakeRequest = ctx.decode(body)?;
        let mut resp = SaslHandshakeResponse::default();
        resp.error_code = ErrorCode::IllegalSaslState.code();
        ctx.respond(&resp)
    }
}

pub mod authenticate {
    use super::*;
    handler!(ApiKey::SaslAuthenticate, 0, 2, SaslAuthenticate {}, sync);

    fn handle(
        _: &SaslAuthenticate,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let _: SaslAuthenticateRequest = ctx.decode(body)?;
        let mut resp = SaslAuthenticateResponse::default();
        resp.error_code = ErrorCode::IllegalSaslState.code();
        resp.error_message = Some(str_bytes(
            "SaslAuthenticate outside a SASL authentication (not a SASL listener, or already authenticated)",
        ));
        ctx.respond(&resp)
    }
}
