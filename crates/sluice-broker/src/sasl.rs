//! SASL authentication of one connection on a SASL_PLAINTEXT or SASL_SSL listener, run by
//! the connection before any other request is routed (Kafka's SaslServerAuthenticator).
//!
//! A client may first ask ApiVersions, then sends SaslHandshake naming a mechanism the
//! listener offers (`sasl.enabled.mechanisms`). With handshake v1 the mechanism's tokens
//! travel in SaslAuthenticate requests; with v0 (the pre-KIP-152 form) as bare
//! size-prefixed frames. PLAIN checks the listener's JAAS users; SCRAM-SHA-256/512 the
//! credentials in cluster metadata (AlterUserScramCredentials); OAUTHBEARER a token as
//! Kafka's default (unsecured) validator or its JWT validator does (see
//! [`crate::oauthbearer`]; an invalid one is
//! answered with RFC 7628's error challenge, and the client's 0x01 reply with the failure).
//! Success makes the connection's principal `User:<name>`. Any failure answers SASL_AUTHENTICATION_FAILED
//! (or UNSUPPORTED_SASL_MECHANISM) with a message and closes the connection; any other
//! request before authentication closes it too, as Kafka does.
//!
//! Re-authentication (KIP-368): with `connections.max.reauth.ms` set, SaslAuthenticate v1+
//! tells the client its session's lifetime (for OAUTHBEARER at most until the token
//! expires); the client re-authenticates on the same connection (SaslHandshake and
//! SaslAuthenticate again, as the same principal) before it ends, and a connection whose
//! session has ended is closed at its next other request, as Kafka does.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use sluice_metadata::config::BrokerConfig;
use sluice_protocol::frame;
use sluice_protocol::scram::{self, Mechanism, ServerFirst};
use sluice_protocol::ErrorCode;

use crate::network::Frontend;
use crate::request::{str_bytes, RequestContext};

/// What a SASL listener offers, from the broker config.
#[derive(Debug, Default)]
pub struct SaslSettings {
    /// `sasl.enabled.mechanisms` of the listener.
    pub mechanisms: Vec<String>,
    /// PLAIN's users: name -> password (the listener's PlainLoginModule options).
    pub plain_users: BTreeMap<String, String>,
    /// OAUTHBEARER's validator (the listener's OAuthBearerLoginModule options).
    pub oauthbearer: Option<crate::oauthbearer::Validator>,
    /// `connections.max.reauth.ms` of the listener (0: sessions never expire).
    pub reauth_ms: i64,
    /// `delegation.token.secret.key`: SCRAM with a delegation token (None: tokens are off).
    pub token_key: Option<String>,
}

impl SaslSettings {
    pub fn from_config(config: &BrokerConfig, listener: &str) -> Result<Self, String> {
        let mechanisms = config.sasl_mechanisms(listener);
        let plain_users = if mechanisms.iter().any(|m| m == "PLAIN") {
            config.plain_users(listener)?
        } else {
            BTreeMap::new()
        };
        let oauthbearer = if mechanisms.iter().any(|m| m == "OAUTHBEARER") {
            use crate::oauthbearer::{jwt::JwtValidator, UnsecuredValidator, Validator};
            match config
                .oauthbearer_jwt(listener)
                .map_err(|e| format!("{}: {}", e.key, e.message))?
            {
                Some(jwt) => Some(Validator::Jwt(JwtValidator::start(jwt)?)),
                None => Some(Validator::Unsecured(UnsecuredValidator::from_options(
                    &config.oauthbearer_options(listener)?,
                )?)),
            }
        } else {
            None
        };
        let reauth_ms = config
            .listener_value(listener, "connections.max.reauth.ms")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(0)
            .max(0);
        Ok(Self {
            mechanisms,
            plain_users,
            oauthbearer,
            reauth_ms,
            token_key: config.token_settings().key().map(str::to_owned),
        })
    }
}

#[derive(Debug)]
enum Mech {
    Plain,
    Scram(Mechanism),
    /// OAUTHBEARER; after an invalid token, why it was refused (the client's next token only
    /// acknowledges the error challenge).
    OAuthBearer(Option<String>),
}

#[derive(Debug)]
enum State {
    /// Expecting ApiVersions or SaslHandshake.
    Start,
    /// Mechanism chosen; expecting its tokens (bare frames when `raw`).
    Tokens {
        mech: Mech,
        raw: bool,
        /// SCRAM between its two rounds (boxed: it is large and short-lived).
        scram: Option<Box<ServerFirst>>,
    },
}

/// What the connection does with a frame while authenticating.
#[derive(Debug)]
pub enum Outcome {
    /// Not for SASL (ApiVersions before the handshake): route it as usual.
    Route(Bytes),
    /// Send this and carry on authenticating.
    Continue(BytesMut),
    /// Authenticated; send this last answer.
    Authenticated(BytesMut, Authenticated),
    /// Send this (if anything), then close the connection, logging the reason.
    Close(Option<BytesMut>, String),
}

/// Who a connection authenticated as.
#[derive(Debug)]
pub struct Authenticated {
    pub principal: Arc<str>,
    /// The session's length in ms (0: no end).
    pub lifetime_ms: i64,
    /// With a delegation token (SCRAM `tokenauth`): such a connection may not create,
    /// renew, expire or describe tokens.
    pub token: bool,
}

/// One connection's authentication in progress.
#[derive(Debug)]
pub struct SaslSession {
    settings: Arc<SaslSettings>,
    state: State,
}

fn fail(resp: Option<BytesMut>, reason: impl Into<String>) -> Outcome {
    Outcome::Close(resp, reason.into())
}

impl SaslSession {
    pub fn new(settings: Arc<SaslSettings>) -> Self {
        Self {
            settings,
            state: State::Start,
        }
    }

    pub async fn handle(
        &mut self,
        broker: &Frontend,
        listener: &str,
        peer: SocketAddr,
        frame: Bytes,
    ) -> Outcome {
        if let State::Tokens { raw: true, .. } = self.state {
            return self.token(broker, frame, None);
        }
        let peek = match frame::peek_request(&frame) {
            Ok(p) => p,
            Err(e) => return fail(None, e.to_string()),
        };
        let expected = match self.state {
            State::Start if peek.api_key == ApiKey::ApiVersions as i16 => {
                return Outcome::Route(frame)
            }
            State::Start => ApiKey::SaslHandshake,
            State::Tokens { .. } => ApiKey::SaslAuthenticate,
        };
        if peek.api_key != expected as i16 {
            return fail(
                None,
                format!(
                    "unexpected request (api key {}) during SASL authentication: expected {expected:?}",
                    peek.api_key
                ),
            );
        }
        let Some(handler) = broker.handlers.get(peek.api_key).map(|r| r.spec) else {
            return fail(None, format!("{expected:?} is not served"));
        };
        if !handler.supports(peek.api_version) {
            return fail(
                None,
                format!("unsupported version {} of {expected:?}", peek.api_version),
            );
        }
        let mut body = frame;
        let header = match frame::decode_request_header(&mut body, expected, peek.api_version) {
            Ok(h) => h,
            Err(e) => return fail(None, e.to_string()),
        };
        let ctx = RequestContext {
            api_key: expected,
            api_version: peek.api_version,
            correlation_id: peek.correlation_id,
            client_id: header.client_id.map(|c| c.to_string()),
            listener: listener.to_string(),
            principal: crate::tls::ANONYMOUS.into(),
            token_authenticated: false,
            peer,
            throttle_ms: Default::default(),
            reservation: Default::default(),
            connection: Default::default(),
        };
        match expected {
            ApiKey::SaslHandshake => self.handshake(&ctx, body),
            _ => match ctx.decode::<SaslAuthenticateRequest>(body) {
                Ok(req) => self.token(broker, req.auth_bytes, Some(&ctx)),
                Err(e) => fail(None, e.to_string()),
            },
        }
    }

    fn handshake(&mut self, ctx: &RequestContext, body: Bytes) -> Outcome {
        let req: SaslHandshakeRequest = match ctx.decode(body) {
            Ok(r) => r,
            Err(e) => return fail(None, e.to_string()),
        };
        let name = req.mechanism.to_string();
        let mut resp = SaslHandshakeResponse::default();
        resp.mechanisms = self.settings.mechanisms.iter().map(str_bytes).collect();
        let mech = if !self.settings.mechanisms.contains(&name) {
            None
        } else if name == "PLAIN" {
            Some(Mech::Plain)
        } else if name == "OAUTHBEARER" && self.settings.oauthbearer.is_some() {
            Some(Mech::OAuthBearer(None))
        } else {
            Mechanism::from_name(&name).map(Mech::Scram)
        };
        let Some(mech) = mech else {
            resp.error_code = ErrorCode::UnsupportedSaslMechanism.code();
            return fail(
                ctx.encode(&resp).ok(),
                format!(
                    "client asked for SASL mechanism {name:?}, which this listener does not offer"
                ),
            );
        };
        self.state = State::Tokens {
            mech,
            raw: ctx.api_version == 0,
            scram: None,
        };
        match ctx.encode(&resp) {
            Ok(out) => Outcome::Continue(out),
            _ => fail(None, "cannot encode the SaslHandshake response"),
        }
    }

    /// One token of the mechanism's exchange; `ctx` is the SaslAuthenticate request it came
    /// in (None: a bare v0 token).
    fn token(&mut self, broker: &Frontend, token: Bytes, ctx: Option<&RequestContext>) -> Outcome {
        let State::Tokens { mech, scram, .. } = &mut self.state else {
            return fail(None, "SASL token before the handshake");
        };
        let now = sluice_rt::wall_ms();
        // The session's end, before connections.max.reauth.ms: an OAuth token's expiry.
        let mut token_expiry: Option<i64> = None;
        // With a delegation token: when it expires (its session ends then at the latest).
        let mut delegation_expiry: Option<i64> = None;
        // Ok((reply token, Some(user) when done)) or the failure message.
        let step: Result<(Vec<u8>, Option<String>), String> = match mech {
            Mech::Plain => plain(&self.settings.plain_users, &token).map(|u| (Vec::new(), Some(u))),
            Mech::OAuthBearer(refused) => match (refused.take(), &self.settings.oauthbearer) {
                (Some(why), _) => Err(why),
                (None, None) => Err("OAUTHBEARER is not enabled".into()),
                (None, Some(v)) => match v.authenticate(&token, now) {
                    Ok((user, expiry)) => {
                        token_expiry = Some(expiry);
                        Ok((Vec::new(), Some(user)))
                    }
                    Err(why) => {
                        *refused = Some(format!("Authentication failed: {why}"));
                        Ok((crate::oauthbearer::INVALID_TOKEN_CHALLENGE.to_vec(), None))
                    }
                },
            },
            Mech::Scram(m) => match scram.take() {
                None => {
                    let image = broker.metadata.current();
                    let key = self.settings.token_key.as_deref();
                    let lookup = |user: &str, token: bool| {
                        if token {
                            return key
                                .filter(|_| image.tokens.contains_key(user))
                                .map(|key| token_credential(*m, key, user));
                        }
                        image
                            .scram
                            .get(&(user.to_string(), m.code()))
                            .map(|c| scram::Credential {
                                salt: c.salt.clone(),
                                iterations: c.iterations,
                                stored_key: c.stored_key.clone(),
                                server_key: c.server_key.clone(),
                            })
                    };
                    match ServerFirst::new(*m, &token, lookup) {
                        Ok((state, reply)) => {
                            *scram = Some(Box::new(state));
                            Ok((reply, None))
                        }
                        Err(e) => Err(e.to_string()),
                    }
                }
                Some(state) => {
                    let delegation = state.token_auth();
                    match state.finish(&token) {
                        Err(e) => Err(e.to_string()),
                        Ok((user, reply)) if !delegation => Ok((reply, Some(user))),
                        // The connection acts as the token's owner (by name, as Kafka).
                        Ok((token_id, reply)) => {
                            match broker.metadata.current().tokens.get(&token_id) {
                                Some(t) => {
                                    delegation_expiry = Some(t.expiry_ms);
                                    let owner =
                                        t.owner.split_once(':').map_or(&*t.owner, |(_, n)| n);
                                    Ok((reply, Some(owner.to_string())))
                                }
                                None => Err(format!(
                                    "Token Authentication failed: Invalid tokenId : {token_id}"
                                )),
                            }
                        }
                    }
                }
            },
        };
        let lifetime_ms = match (self.settings.reauth_ms, token_expiry, delegation_expiry) {
            // A delegation token's session ends when the token expires, as in Kafka (whose
            // SCRAM server gives its expiry as the credential's lifetime).
            (0, _, Some(expiry)) => (expiry - now).max(1),
            (max, _, Some(expiry)) => max.min(expiry - now).max(1),
            (0, _, None) => 0,
            (max, None, None) => max,
            (max, Some(expiry), None) => max.min(expiry - now).max(1),
        };
        let reply = |error: Option<&str>, auth: Vec<u8>| -> Option<BytesMut> {
            match ctx {
                Some(ctx) => {
                    let mut resp = SaslAuthenticateResponse::default();
                    resp.auth_bytes = auth.into();
                    if error.is_none() && ctx.api_version >= 1 {
                        resp.session_lifetime_ms = lifetime_ms;
                    }
                    if let Some(m) = error {
                        resp.error_code = ErrorCode::SaslAuthenticationFailed.code();
                        resp.error_message = Some(str_bytes(m));
                    }
                    ctx.encode(&resp).ok()
                }
                // v0: bare size-prefixed tokens, and a failure just closes.
                None if error.is_some() => None,
                None => {
                    let mut out = BytesMut::with_capacity(4 + auth.len());
                    out.put_i32(auth.len() as i32);
                    out.put_slice(&auth);
                    Some(out)
                }
            }
        };
        match step {
            Err(message) => fail(
                reply(Some(&message), Vec::new()),
                format!("SASL authentication failed: {message}"),
            ),
            Ok((auth, None)) => match reply(None, auth) {
                Some(out) => Outcome::Continue(out),
                None => fail(None, "cannot encode the SaslAuthenticate response"),
            },
            Ok((auth, Some(user))) => match reply(None, auth) {
                Some(out) => Outcome::Authenticated(
                    out,
                    Authenticated {
                        principal: format!("User:{user}").into(),
                        lifetime_ms,
                        token: delegation_expiry.is_some(),
                    },
                ),
                None => fail(None, "cannot encode the SaslAuthenticate response"),
            },
        }
    }
}

/// The SCRAM credential of a delegation token: its password is the padded base64 of its
/// HMAC, salted afresh, with Kafka's 4096 iterations (as Kafka derives it for both
/// mechanisms when it learns of the token).
fn token_credential(mech: Mechanism, key: &str, token_id: &str) -> scram::Credential {
    let password = sluice_protocol::base64::encode_padded(&scram::token_hmac(key, token_id));
    let salt = scram::random_bytes(16);
    let iterations = scram::MIN_ITERATIONS;
    let salted = scram::salted_password(mech, password.as_bytes(), &salt, iterations as u32);
    scram::credential_from_salted(mech, &salt, &salted, iterations)
}

/// PLAIN (RFC 4616): `authzid NUL authcid NUL password`; the user if the password matches.
pub fn plain(users: &BTreeMap<String, String>, token: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(token)
        .map_err(|_| "Authentication failed: PLAIN message is not UTF-8".to_string())?;
    let parts: Vec<&str> = text.split('\0').collect();
    let [authzid, user, password] = parts[..] else {
        return Err("Authentication failed: Invalid SASL/PLAIN response: expected 3 tokens".into());
    };
    if user.is_empty() {
        return Err("Authentication failed: username not specified".into());
    }
    if password.is_empty() {
        return Err("Authentication failed: password not specified".into());
    }
    if !authzid.is_empty() && authzid != user {
        return Err(
            "Authentication failed: Client requested an authorization id that is different from username"
                .into(),
        );
    }
    let expected = users.get(user).map(String::as_bytes);
    // Compare in time independent of where the strings differ.
    let matches = expected.is_some_and(|e| {
        e.len() == password.len()
            && e.iter()
                .zip(password.as_bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    });
    if matches {
        Ok(user.to_string())
    } else {
        Err("Authentication failed: Invalid username or password".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_checks_user_password_and_authzid() {
        let users = BTreeMap::from([("alice".to_string(), "s3cret".to_string())]);
        assert_eq!(plain(&users, b"\0alice\0s3cret").unwrap(), "alice");
        assert_eq!(plain(&users, b"alice\0alice\0s3cret").unwrap(), "alice");
        for bad in [
            &b"\0alice\0wrong"[..],
            b"\0bob\0s3cret",
            b"bob\0alice\0s3cret",
            b"\0alice\0",
            b"\0\0s3cret",
            b"alice",
            b"\0alice\0s3cret\0x",
            b"\xff\0alice\0s3cret",
            b"",
        ] {
            assert!(plain(&users, bad).is_err(), "{bad:?}");
        }
    }
}
