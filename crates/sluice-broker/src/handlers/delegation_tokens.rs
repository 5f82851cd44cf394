//! Delegation tokens (KIP-48): CreateDelegationToken (key 38), RenewDelegationToken (39),
//! ExpireDelegationToken (40) and DescribeDelegationToken (41), as Kafka 4's KRaft brokers.
//!
//! Tokens live in cluster metadata; create, renew and expire are forwarded to the controller
//! (which needs `delegation.token.secret.key`, else DELEGATION_TOKEN_AUTH_DISABLED), describe
//! is answered from this broker's metadata. None is allowed on a PLAINTEXT listener, on TLS
//! without a client certificate, or on a connection that authenticated with a token itself
//! (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED). Creating a token for another owner needs
//! CREATE_TOKENS on that user (`User:<name>`, DELEGATION_TOKEN_AUTHORIZATION_FAILED);
//! renewers must be `User` principals (INVALID_PRINCIPAL_TYPE). A client authenticates with
//! a token over SCRAM (`tokenauth=true`, the token id and the HMAC's base64 as the user and
//! password; see [`crate::sasl`]) and then acts as the token's owner.

use bytes::Bytes;
use sluice_metadata::acl::{op, resource};
use sluice_metadata::config::SecurityProtocol;
use sluice_metadata::controller_types::{ApiError, TokenReply, TokenRequest};
use sluice_metadata::record::TokenRecord;
use sluice_protocol::ErrorCode;

use crate::authorizer::Access;
use crate::request::{str_bytes, RequestContext};

/// Why this connection may not handle tokens, if it may not (Kafka's `allowTokenRequests`).
fn not_allowed(config: &sluice_metadata::config::BrokerConfig, ctx: &RequestContext) -> bool {
    ctx.token_authenticated
        || match config.security_protocol(&ctx.listener) {
            Ok(SecurityProtocol::Plaintext) | Err(_) => true,
            Ok(SecurityProtocol::Ssl) => &*ctx.principal == crate::tls::ANONYMOUS,
            Ok(SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl) => false,
        }
}

const NOT_ALLOWED: &str = "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.";

/// `Type:name`
fn principal(ty: &str, name: &str) -> String {
    format!("{ty}:{name}")
}

/// (type, name) of a `Type:name` principal.
fn split(p: &str) -> (&str, &str) {
    p.split_once(':').unwrap_or(("User", p))
}

/// Forward a renew or expire; the new expiry, or why not.
async fn change(
    controller: &crate::services::controller::ControllerClient,
    config: &sluice_metadata::config::BrokerConfig,
    ctx: &RequestContext,
    request: TokenRequest,
) -> Result<TokenReply, ApiError> {
    if not_allowed(config, ctx) {
        return Err(ApiError::new(
            ErrorCode::DelegationTokenRequestNotAllowed,
            NOT_ALLOWED,
        ));
    }
    match controller.api().delegation_token(&request).await {
        Ok(r) => r,
        Err(e) => Err(ApiError::new(ErrorCode::UnknownServerError, e)),
    }
}

pub mod create {
    use kafka_protocol::messages::{
        ApiKey, CreateDelegationTokenRequest, CreateDelegationTokenResponse,
    };

    use super::*;
    use crate::request::{HandlerError, Response};

    handler!(
        ApiKey::CreateDelegationToken,
        1,
        3,
        CreateDelegationToken {
            controller: crate::services::controller::ControllerClient,
            config: sluice_metadata::config::BrokerConfig,
            access: Access
        }
    );

    async fn handle(
        h: &CreateDelegationToken,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: CreateDelegationTokenRequest = ctx.decode(body)?;
        let requester = ctx.principal.to_string();
        let owner = match (&req.owner_principal_type, &req.owner_principal_name) {
            (Some(ty), Some(name)) if !name.is_empty() => principal(ty, name),
            (None, Some(name)) if !name.is_empty() => principal("User", name),
            _ => requester.clone(),
        };
        let renewers: Vec<String> = req
            .renewers
            .iter()
            .map(|r| principal(&r.principal_type, &r.principal_name))
            .collect();
        let outcome = if not_allowed(&h.config, ctx) {
            Err(ApiError::new(
                ErrorCode::DelegationTokenRequestNotAllowed,
                NOT_ALLOWED,
            ))
        } else if owner != requester
            && !h
                .access
                .check(ctx)
                .allows(op::CREATE_TOKENS, resource::USER, &owner)
        {
            Err(ApiError::new(
                ErrorCode::DelegationTokenAuthorizationFailed,
                format!("{requester} may not create tokens for {owner}"),
            ))
        } else if let Some(r) = renewers.iter().find(|r| split(r).0 != "User") {
            Err(ApiError::new(
                ErrorCode::InvalidPrincipalType,
                format!("Renewer principal type is not supported: {r}"),
            ))
        } else {
            let request = TokenRequest::Create {
                owner: owner.clone(),
                requester: requester.clone(),
                renewers,
                max_lifetime_ms: req.max_lifetime_ms,
            };
            match h.controller.api().delegation_token(&request).await {
                Ok(r) => r,
                Err(e) => Err(ApiError::new(ErrorCode::UnknownServerError, e)),
            }
        };
        let mut resp = CreateDelegationTokenResponse::default();
        let (owner_type, owner_name) = split(&owner);
        resp.principal_type = str_bytes(owner_type);
        resp.principal_name = str_bytes(owner_name);
        if ctx.api_version >= 3 {
            let (ty, name) = split(&requester);
            resp.token_requester_principal_type = str_bytes(ty);
            resp.token_requester_principal_name = str_bytes(name);
        }
        match outcome {
            Ok(TokenReply { token, hmac }) => {
                resp.issue_timestamp_ms = token.issue_ms;
                resp.expiry_timestamp_ms = token.expiry_ms;
                resp.max_timestamp_ms = token.max_ms;
                resp.token_id = str_bytes(token.token_id);
                resp.hmac = hmac.into();
            }
            Err(e) => {
                tracing::debug!(error = %e.message, "CreateDelegationToken refused");
                resp.error_code = e.code.code();
                resp.issue_timestamp_ms = -1;
                resp.expiry_timestamp_ms = -1;
                resp.max_timestamp_ms = -1;
            }
        }
        ctx.respond(&resp)
    }
}

pub mod renew {
    use kafka_protocol::messages::{
        ApiKey, RenewDelegationTokenRequest, RenewDelegationTokenResponse,
    };

    use super::*;
    use crate::request::{HandlerError, Response};

    handler!(
        ApiKey::RenewDelegationToken,
        1,
        2,
        RenewDelegationToken {
            controller: crate::services::controller::ControllerClient,
            config: sluice_metadata::config::BrokerConfig
        }
    );

    async fn handle(
        h: &RenewDelegationToken,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: RenewDelegationTokenRequest = ctx.decode(body)?;
        let request = TokenRequest::Renew {
            hmac: req.hmac.to_vec(),
            principal: ctx.principal.to_string(),
            period_ms: req.renew_period_ms,
        };
        let mut resp = RenewDelegationTokenResponse::default();
        match change(&h.controller, &h.config, ctx, request).await {
            Ok(r) => resp.expiry_timestamp_ms = r.token.expiry_ms,
            Err(e) => {
                resp.error_code = e.code.code();
                resp.expiry_timestamp_ms = -1;
            }
        }
        ctx.respond(&resp)
    }
}

pub mod expire {
    use kafka_protocol::messages::{
        ApiKey, ExpireDelegationTokenRequest, ExpireDelegationTokenResponse,
    };

    use super::*;
    use crate::request::{HandlerError, Response};

    handler!(
        ApiKey::ExpireDelegationToken,
        1,
        2,
        ExpireDelegationToken {
            controller: crate::services::controller::ControllerClient,
            config: sluice_metadata::config::BrokerConfig
        }
    );

    async fn handle(
        h: &ExpireDelegationToken,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: ExpireDelegationTokenRequest = ctx.decode(body)?;
        let request = TokenRequest::Expire {
            hmac: req.hmac.to_vec(),
            principal: ctx.principal.to_string(),
            period_ms: req.expiry_time_period_ms,
        };
        let mut resp = ExpireDelegationTokenResponse::default();
        match change(&h.controller, &h.config, ctx, request).await {
            Ok(r) => resp.expiry_timestamp_ms = r.token.expiry_ms,
            Err(e) => {
                resp.error_code = e.code.code();
                resp.expiry_timestamp_ms = -1;
            }
        }
        ctx.respond(&resp)
    }
}

pub mod describe {
    use kafka_protocol::messages::describe_delegation_token_response::{
        DescribedDelegationToken, DescribedDelegationTokenRenewer,
    };
    use kafka_protocol::messages::{
        ApiKey, DescribeDelegationTokenRequest, DescribeDelegationTokenResponse,
    };

    use super::*;
    use crate::request::{HandlerError, Response};

    handler!(
        ApiKey::DescribeDelegationToken,
        1,
        3,
        DescribeDelegationToken {
            metadata: crate::metadata_cache::MetadataCache,
            config: sluice_metadata::config::BrokerConfig,
            access: Access
        },
        sync
    );

    /// Whether the caller sees `t`: it is its owner, requester or a renewer, or may DESCRIBE
    /// the token or DESCRIBE_TOKENS of its owner (Kafka's `filterToken`); with `owners`, only
    /// tokens one of them owns, requested or renews.
    fn visible(
        t: &TokenRecord,
        caller: &str,
        owners: Option<&[String]>,
        may: impl Fn(i8, i8, &str) -> bool,
    ) -> bool {
        let involves =
            |p: &str| t.owner == p || t.requester == p || t.renewers.iter().any(|r| r == p);
        if owners.is_some_and(|o| !o.iter().any(|p| involves(p))) {
            return false;
        }
        involves(caller)
            || may(op::DESCRIBE, resource::DELEGATION_TOKEN, &t.token_id)
            || may(op::DESCRIBE_TOKENS, resource::USER, &t.owner)
    }

    fn handle(
        h: &DescribeDelegationToken,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: DescribeDelegationTokenRequest = ctx.decode(body)?;
        let mut resp = DescribeDelegationTokenResponse::default();
        let settings = h.config.token_settings();
        let Some(key) = settings.key().filter(|_| !not_allowed(&h.config, ctx)) else {
            resp.error_code = if not_allowed(&h.config, ctx) {
                ErrorCode::DelegationTokenRequestNotAllowed
            } else {
                ErrorCode::DelegationTokenAuthDisabled
            }
            .code();
            return ctx.respond(&resp);
        };
        let owners: Option<Vec<String>> = req.owners.map(|o| {
            o.iter()
                .map(|p| principal(&p.principal_type, &p.principal_name))
                .collect()
        });
        let image = h.metadata.current();
        let check = h.access.check(ctx);
        let may =
            |operation, resource_type, name: &str| check.allows(operation, resource_type, name);
        for t in image.tokens.values() {
            if !visible(t, &ctx.principal, owners.as_deref(), may) {
                continue;
            }
            let mut d = DescribedDelegationToken::default();
            let (ty, name) = split(&t.owner);
            d.principal_type = str_bytes(ty);
            d.principal_name = str_bytes(name);
            if ctx.api_version >= 3 {
                let (ty, name) = split(&t.requester);
                d.token_requester_principal_type = str_bytes(ty);
                d.token_requester_principal_name = str_bytes(name);
            }
            d.issue_timestamp = t.issue_ms;
            d.expiry_timestamp = t.expiry_ms;
            d.max_timestamp = t.max_ms;
            d.token_id = str_bytes(&t.token_id);
            d.hmac = sluice_protocol::scram::token_hmac(key, &t.token_id).into();
            for r in &t.renewers {
                let (ty, name) = split(r);
                let mut renewer = DescribedDelegationTokenRenewer::default();
                renewer.principal_type = str_bytes(ty);
                renewer.principal_name = str_bytes(name);
                d.renewers.push(renewer);
            }
            resp.tokens.push(d);
        }
        ctx.respond(&resp)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_token_is_seen_by_those_it_involves_or_who_may_describe_it() {
            let t = TokenRecord {
                token_id: "tok".into(),
                owner: "User:alice".into(),
                requester: "User:admin".into(),
                renewers: vec!["User:bob".into()],
                issue_ms: 0,
                max_ms: 2,
                expiry_ms: 1,
            };
            let nobody = |_: i8, _: i8, _: &str| false;
            for who in ["User:alice", "User:admin", "User:bob"] {
                assert!(visible(&t, who, None, nobody), "{who}");
            }
            assert!(!visible(&t, "User:eve", None, nobody));
            let describe_token = |o: i8, r: i8, n: &str| {
                o == op::DESCRIBE && r == resource::DELEGATION_TOKEN && n == "tok"
            };
            assert!(visible(&t, "User:eve", None, describe_token));
            let owner_tokens = |o: i8, r: i8, n: &str| {
                o == op::DESCRIBE_TOKENS && r == resource::USER && n == "User:alice"
            };
            assert!(visible(&t, "User:eve", None, owner_tokens));
            // Owners named: only tokens one of them is involved in.
            let bob = ["User:bob".to_string()];
            let carol = ["User:carol".to_string()];
            assert!(visible(&t, "User:alice", Some(&bob), nobody));
            assert!(!visible(&t, "User:alice", Some(&carol), nobody));
            assert!(!visible(&t, "User:alice", Some(&[]), nobody));
        }
    }
}
