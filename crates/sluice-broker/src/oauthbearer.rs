//! SASL/OAUTHBEARER (RFC 7628, KIP-255) with what Kafka's default server-side handler does,
//! its unsecured validator (`OAuthBearerUnsecuredValidatorCallbackHandler`): the client's
//! token is an unsecured JWS (`alg` "none", no signature); its principal claim (`sub`, or the
//! listener JAAS option `unsecuredValidatorPrincipalClaimName`) names the principal; `exp` is
//! required and must not have passed, `iat`, when present, must not be in the future (both
//! give or take `unsecuredValidatorAllowableClockSkewMs`); the scopes of
//! `unsecuredValidatorRequiredScope` must all be in the token's `scope`. It is meant for
//! development, as in Kafka: anyone can make such a token. Signed tokens (a JWKS endpoint) are
//! refused at startup rather than accepted unchecked.

pub mod jwt;

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_protocol::base64;

/// A listener's OAUTHBEARER validator: Kafka's default (unsecured tokens) or its JWT
/// validator (signed tokens, a JWKS).
#[derive(Debug)]
pub enum Validator {
    Unsecured(UnsecuredValidator),
    Jwt(jwt::JwtValidator),
}

impl Validator {
    /// The client's first message: the principal's name and when the token expires (ms),
    /// or why it is refused.
    pub fn authenticate(&self, client_first: &[u8], now_ms: i64) -> Result<(String, i64), String> {
        let token = bearer_token(client_first)?;
        match self {
            Validator::Unsecured(v) => v.validate(token, now_ms),
            Validator::Jwt(v) => v.validate(token, now_ms),
        }
    }
}

/// The unsecured validator's options (the listener's OAuthBearerLoginModule options).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsecuredValidator {
    pub principal_claim: String,
    pub required_scopes: Vec<String>,
    pub clock_skew_ms: i64,
}

impl Default for UnsecuredValidator {
    fn default() -> Self {
        Self {
            principal_claim: "sub".into(),
            required_scopes: Vec::new(),
            clock_skew_ms: 0,
        }
    }
}

impl UnsecuredValidator {
    pub fn from_options(options: &BTreeMap<String, String>) -> Result<Self, String> {
        let mut v = Self::default();
        if let Some(c) = options.get("unsecuredValidatorPrincipalClaimName") {
            if !c.trim().is_empty() {
                v.principal_claim = c.trim().to_string();
            }
        }
        if let Some(s) = options.get("unsecuredValidatorRequiredScope") {
            v.required_scopes = s
                .split([',', ' '])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
        }
        if let Some(ms) = options.get("unsecuredValidatorAllowableClockSkewMs") {
            v.clock_skew_ms = ms
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|ms| *ms >= 0)
                .ok_or_else(|| {
                    format!("unsecuredValidatorAllowableClockSkewMs must be a non-negative number: {ms}")
                })?;
        }
        Ok(v)
    }

    /// The client's first message: the principal's name and when the token expires (ms), or
    /// why it is refused.
    pub fn authenticate(&self, client_first: &[u8], now_ms: i64) -> Result<(String, i64), String> {
        let token = bearer_token(client_first)?;
        self.validate(token, now_ms)
    }

    /// Validate an unsecured JWS: the principal's name and when the token expires (ms), or
    /// why it is refused.
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<(String, i64), String> {
        let [header, claims, signature] = jws_parts(token)?;
        if !signature.is_empty() {
            return Err("the token is signed; only unsecured tokens are accepted".into());
        }
        let json = json_part;
        let header = json(header, "header")?;
        if header.get("alg").and_then(Value::as_str) != Some("none") {
            return Err("the token's alg is not \"none\"".into());
        }
        let claims = json(claims, "claims")?;
        let time = |name: &str| time_claim(&claims, name);
        let exp = time("exp")?.ok_or("the token has no exp claim")?;
        if exp <= now_ms - self.clock_skew_ms {
            return Err("the token has expired".into());
        }
        if time("iat")?.is_some_and(|iat| iat > now_ms + self.clock_skew_ms) {
            return Err("the token was issued in the future".into());
        }
        let principal = claims
            .get(&self.principal_claim)
            .and_then(Value::as_str)
            .filter(|p| !p.trim().is_empty())
            .ok_or_else(|| format!("the token has no {} claim", self.principal_claim))?;
        let scopes: Vec<&str> = match claims.get("scope") {
            Some(Value::String(s)) => s.split(' ').filter(|s| !s.is_empty()).collect(),
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if let Some(missing) = self
            .required_scopes
            .iter()
            .find(|s| !scopes.contains(&s.as_str()))
        {
            return Err(format!("the token lacks the required scope {missing}"));
        }
        Ok((principal.to_string(), exp))
    }
}

/// The three parts of a JWS in compact form: header, claims, signature (base64url each).
fn jws_parts(token: &str) -> Result<[&str; 3], String> {
    let parts: Vec<&str> = token.split('.').collect();
    <[&str; 3]>::try_from(parts)
        .map_err(|_| "the token is not a JWS compact serialization (three parts)".to_string())
}

/// A JWS part that must be a JSON object (`what` names it in the refusal).
fn json_part(part: &str, what: &str) -> Result<serde_json::Map<String, Value>, String> {
    let bytes =
        base64::decode(part).ok_or_else(|| format!("the token's {what} is not base64url"))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(format!("the token's {what} is not a JSON object")),
    }
}

/// A time claim (seconds since the epoch, maybe fractional) in ms; None when absent.
fn time_claim(claims: &serde_json::Map<String, Value>, name: &str) -> Result<Option<i64>, String> {
    match claims.get(name) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(|s| Some((s * 1000.0) as i64))
            .ok_or_else(|| format!("the {name} claim is not a number")),
    }
}

/// The bearer token of an OAUTHBEARER client first message:
/// `gs2-header %x01 "auth=Bearer " token %x01 *(key=value %x01) %x01`.
fn bearer_token(message: &[u8]) -> Result<&str, String> {
    let text =
        std::str::from_utf8(message).map_err(|_| "the client message is not UTF-8".to_string())?;
    let rest = text
        .strip_suffix("\x01\x01")
        .ok_or("the client message does not end with two 0x01")?;
    let mut parts = rest.split('\x01');
    let gs2 = parts.next().unwrap_or_default();
    if !(gs2.starts_with("n,") || gs2.starts_with("y,")) || !gs2.ends_with(',') {
        return Err("the client message has no GS2 header".into());
    }
    for kv in parts {
        if let Some(auth) = kv.strip_prefix("auth=") {
            let (scheme, token) = auth
                .split_once(' ')
                .ok_or("the auth value is not \"Bearer <token>\"")?;
            if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
                return Err("the auth value is not \"Bearer <token>\"".into());
            }
            return Ok(token.trim());
        }
    }
    Err("the client message has no auth value".into())
}

/// What the server answers an invalid token with, before failing (RFC 7628 §3.2.2).
pub const INVALID_TOKEN_CHALLENGE: &[u8] = br#"{"status":"invalid_token"}"#;

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    fn token(header: &str, claims: &str) -> String {
        format!(
            "{}.{}.",
            base64::encode(header.as_bytes()),
            base64::encode(claims.as_bytes())
        )
    }

    fn first(token: &str) -> Vec<u8> {
        format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes()
    }

    #[test]
    fn unsecured_tokens_are_checked_as_kafkas_default_validator_checks_them() {
        let v = UnsecuredValidator::default();
        let ok = token(
            r#"{"alg":"none"}"#,
            r#"{"sub":"alice","iat":1799999999,"exp":1800000100.5}"#,
        );
        assert_eq!(
            v.authenticate(&first(&ok), NOW).unwrap(),
            ("alice".to_string(), 1_800_000_100_500)
        );
        let with_extension = format!("n,a=alice,\x01auth=Bearer {ok}\x01traceId=7\x01\x01");
        assert_eq!(
            v.authenticate(with_extension.as_bytes(), NOW).unwrap().0,
            "alice"
        );
        let refused = [
            token(r#"{"alg":"none"}"#, r#"{"sub":"alice","exp":1799999999}"#),
            token(r#"{"alg":"none"}"#, r#"{"sub":"alice"}"#),
            token(r#"{"alg":"none"}"#, r#"{"exp":1800000100}"#),
            token(r#"{"alg":"none"}"#, r#"{"sub":"","exp":1800000100}"#),
            token(r#"{"alg":"RS256"}"#, r#"{"sub":"alice","exp":1800000100}"#),
            token(
                r#"{"alg":"none"}"#,
                r#"{"sub":"alice","exp":1800000100,"iat":1800000050}"#,
            ),
            token(r#"{"alg":"none"}"#, r#"{"sub":"alice","exp":"soon"}"#),
            format!("{ok}sig"),
            "not-a-jwt".into(),
            token(r#"["alg"]"#, r#"{"sub":"alice","exp":1800000100}"#),
        ];
        for t in &refused {
            assert!(v.authenticate(&first(t), NOW).is_err(), "{t}");
        }
        for bad in [
            &b""[..],
            b"n,,\x01auth=Bearer\x01\x01",
            b"n,,\x01auth=Basic abc\x01\x01",
            b"n,,\x01host=x\x01\x01",
            b"auth=Bearer x\x01\x01",
            b"n,,\x01auth=Bearer x",
            b"\xff\xfe",
        ] {
            assert!(v.authenticate(bad, NOW).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn options_choose_the_claim_scopes_and_skew() {
        let options = BTreeMap::from([
            (
                "unsecuredValidatorPrincipalClaimName".to_string(),
                "client_id".to_string(),
            ),
            (
                "unsecuredValidatorRequiredScope".to_string(),
                "read,write".to_string(),
            ),
            (
                "unsecuredValidatorAllowableClockSkewMs".to_string(),
                "60000".to_string(),
            ),
        ]);
        let v = UnsecuredValidator::from_options(&options).unwrap();
        let claims = |scope: &str| {
            token(
                r#"{"alg":"none"}"#,
                &format!(r#"{{"client_id":"svc","exp":1799999990,{scope}}}"#),
            )
        };
        // Expired ten seconds ago, within the minute of skew.
        assert_eq!(
            v.validate(&claims(r#""scope":"read write admin""#), NOW)
                .unwrap()
                .0,
            "svc"
        );
        assert_eq!(
            v.validate(&claims(r#""scope":["write","read"]"#), NOW)
                .unwrap()
                .0,
            "svc"
        );
        assert!(v.validate(&claims(r#""scope":"read""#), NOW).is_err());
        let bad = BTreeMap::from([(
            "unsecuredValidatorAllowableClockSkewMs".to_string(),
            "-1".to_string(),
        )]);
        assert!(UnsecuredValidator::from_options(&bad).is_err());
    }
}
