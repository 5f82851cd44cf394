//! OAUTHBEARER with signed tokens, as Kafka's `OAuthBearerValidatorCallbackHandler` checks them
//! (its `BrokerJwtValidator`, on jose4j): the JWS signature against a key of the identity
//! provider's JWKS (RS256/384/512, PS256/384/512, ES256/384; `alg` none is refused), `exp` and
//! `iat` required, `exp` and `nbf` checked with `sasl.oauthbearer.clock.skew.seconds` of skew,
//! `iss` equal to `sasl.oauthbearer.expected.issuer`, `aud` naming one of
//! `sasl.oauthbearer.expected.audience` (a token with an audience is refused when none is
//! expected, as jose4j does), the principal from `sasl.oauthbearer.sub.claim.name` and scopes
//! from `sasl.oauthbearer.scope.claim.name`.
//!
//! The JWKS is read from `sasl.oauthbearer.jwks.endpoint.url`: a file once at startup, an
//! http(s) endpoint at startup, every `sasl.oauthbearer.jwks.endpoint.refresh.ms`, and soon
//! (at most once per retry backoff) when a token names a key it lacks, so keys the provider
//! rotates in are found. Signature checks use `ring`, already the TLS and SCRAM crypto.

use std::io::{Read, Write};
use std::sync::{Arc, Condvar, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use ring::signature;
use serde_json::Value;
use sluice_metadata::config::JwtSettings;
use sluice_protocol::base64;

/// A verification key of the JWKS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jwk {
    pub kid: Option<String>,
    /// The algorithm the key is for, when the JWKS says.
    pub alg: Option<String>,
    pub key: KeyMaterial,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyMaterial {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// An uncompressed point (0x04 ‖ x ‖ y) on P-256 or P-384.
    Ec {
        curve: &'static str,
        point: Vec<u8>,
    },
}

/// The signing keys of a JWKS document; keys for encryption or of kinds not supported are
/// skipped.
pub fn parse_jwks(json: &[u8]) -> Result<Vec<Jwk>, String> {
    let doc: Value =
        serde_json::from_slice(json).map_err(|e| format!("the JWKS is not JSON: {e}"))?;
    let keys = doc
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("the JWKS has no keys array")?;
    let b64 = |k: &Value, name: &str| -> Option<Vec<u8>> {
        k.get(name).and_then(Value::as_str).and_then(base64::decode)
    };
    let text = |k: &Value, name: &str| k.get(name).and_then(Value::as_str).map(str::to_owned);
    let mut out = Vec::new();
    for k in keys {
        if text(k, "use").is_some_and(|u| u != "sig") {
            continue;
        }
        let key = match k.get("kty").and_then(Value::as_str) {
            Some("RSA") => match (b64(k, "n"), b64(k, "e")) {
                (Some(n), Some(e)) => KeyMaterial::Rsa { n, e },
                _ => continue,
            },
            Some("EC") => {
                let curve = match k.get("crv").and_then(Value::as_str) {
                    Some("P-256") => "P-256",
                    Some("P-384") => "P-384",
                    _ => continue,
                };
                let (Some(x), Some(y)) = (b64(k, "x"), b64(k, "y")) else {
                    continue;
                };
                let mut point = vec![4];
                point.extend(x);
                point.extend(y);
                KeyMaterial::Ec { curve, point }
            }
            _ => continue,
        };
        out.push(Jwk {
            kid: text(k, "kid"),
            alg: text(k, "alg"),
            key,
        });
    }
    Ok(out)
}

/// Verify `signature` of `message` with `key` for JWS algorithm `alg`.
fn verify(alg: &str, key: &KeyMaterial, message: &[u8], sig: &[u8]) -> bool {
    use signature::*;
    match key {
        KeyMaterial::Rsa { n, e } => {
            let params: &RsaParameters = match alg {
                "RS256" => &RSA_PKCS1_2048_8192_SHA256,
                "RS384" => &RSA_PKCS1_2048_8192_SHA384,
                "RS512" => &RSA_PKCS1_2048_8192_SHA512,
                "PS256" => &RSA_PSS_2048_8192_SHA256,
                "PS384" => &RSA_PSS_2048_8192_SHA384,
                "PS512" => &RSA_PSS_2048_8192_SHA512,
                _ => return false,
            };
            RsaPublicKeyComponents { n, e }
                .verify(params, message, sig)
                .is_ok()
        }
        KeyMaterial::Ec { curve, point } => {
            let params: &EcdsaVerificationAlgorithm = match (alg, *curve) {
                ("ES256", "P-256") => &ECDSA_P256_SHA256_FIXED,
                ("ES384", "P-384") => &ECDSA_P384_SHA384_FIXED,
                _ => return false,
            };
            UnparsedPublicKey::new(params, point)
                .verify(message, sig)
                .is_ok()
        }
    }
}

/// Whether a key of this kind can check algorithm `alg`.
fn fits(alg: &str, key: &Jwk) -> bool {
    let kind_fits = match &key.key {
        KeyMaterial::Rsa { .. } => alg.starts_with("RS") || alg.starts_with("PS"),
        KeyMaterial::Ec { curve, .. } => {
            (alg == "ES256" && *curve == "P-256") || (alg == "ES384" && *curve == "P-384")
        }
    };
    kind_fits && key.alg.as_deref().is_none_or(|a| a == alg)
}

/// The JWKS as last read, and the thread that reads it again.
pub struct KeySet {
    url: String,
    keys: RwLock<Vec<Jwk>>,
    /// Set when a token named a key the set lacks; the refresher wakes for it.
    wanted: Mutex<bool>,
    wake: Condvar,
}

impl KeySet {
    fn keys(&self) -> Vec<Jwk> {
        self.keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn want_refresh(&self) {
        *self
            .wanted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        self.wake.notify_all();
    }

    fn load(&self) -> Result<usize, String> {
        let body = fetch(&self.url)?;
        let keys = parse_jwks(&body)?;
        let n = keys.len();
        *self
            .keys
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = keys;
        Ok(n)
    }
}

/// Read the JWKS of an http(s) endpoint again every `refresh`, or after `backoff` (doubling
/// to `backoff_max` while it fails) when asked to, until the key set is dropped.
fn refresher(set: Weak<KeySet>, refresh: Duration, backoff: Duration, backoff_max: Duration) {
    let mut wait = backoff;
    let mut last = Instant::now();
    loop {
        let Some(s) = set.upgrade() else { return };
        let mut wanted = s
            .wanted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let due = if *wanted { wait } else { refresh };
        if last.elapsed() < due {
            // At most a second at a time, to notice the set was dropped.
            let left = (due - last.elapsed()).min(Duration::from_secs(1));
            drop(
                s.wake
                    .wait_timeout(wanted, left)
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            continue;
        }
        *wanted = false;
        drop(wanted);
        last = Instant::now();
        match s.load() {
            Ok(n) => {
                tracing::debug!(url = %s.url, keys = n, "JWKS read");
                wait = backoff;
            }
            Err(e) => {
                tracing::warn!(url = %s.url, error = %e, "JWKS not read; tokens it would check are refused until it is");
                wait = (wait * 2).min(backoff_max);
                s.want_refresh_quietly();
            }
        }
    }
}

impl KeySet {
    /// Ask for a refresh without waking the refresher (it is awake or will be).
    fn want_refresh_quietly(&self) {
        *self
            .wanted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
    }
}

/// Kafka's OAuthBearerValidatorCallbackHandler: signed tokens checked against a JWKS.
pub struct JwtValidator {
    settings: JwtSettings,
    keys: Arc<KeySet>,
}

impl std::fmt::Debug for JwtValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtValidator")
            .field("jwks", &self.settings.jwks_url)
            .finish()
    }
}

impl JwtValidator {
    /// Read the JWKS (a file must be readable now; an endpoint that does not answer yet is
    /// read again in the background) and start refreshing an endpoint's.
    pub fn start(settings: JwtSettings) -> Result<Self, String> {
        let keys = Arc::new(KeySet {
            url: settings.jwks_url.clone(),
            keys: RwLock::new(Vec::new()),
            wanted: Mutex::new(false),
            wake: Condvar::new(),
        });
        if settings.jwks_url.starts_with("file:") {
            keys.load()?;
        } else {
            if let Err(e) = keys.load() {
                tracing::warn!(url = %settings.jwks_url, error = %e, "JWKS not read at startup; retrying");
                keys.want_refresh_quietly();
            }
            let weak = Arc::downgrade(&keys);
            let ms = |v: i64| Duration::from_millis(v.max(1) as u64);
            let (refresh, backoff, max) = (
                ms(settings.refresh_ms),
                ms(settings.retry_backoff_ms),
                ms(settings.retry_backoff_max_ms.max(settings.retry_backoff_ms)),
            );
            std::thread::Builder::new()
                .name("jwks-refresh".into())
                .spawn(move || refresher(weak, refresh, backoff, max))
                .map_err(|e| format!("cannot start the JWKS refresher: {e}"))?;
        }
        Ok(Self { settings, keys })
    }

    /// A validator over fixed keys (tests).
    pub fn with_keys(settings: JwtSettings, keys: Vec<Jwk>) -> Self {
        Self {
            keys: Arc::new(KeySet {
                url: settings.jwks_url.clone(),
                keys: RwLock::new(keys),
                wanted: Mutex::new(false),
                wake: Condvar::new(),
            }),
            settings,
        }
    }

    /// Validate a signed token: the principal's name and when the token expires (ms), or why
    /// it is refused.
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<(String, i64), String> {
        let [header_b64, claims_b64, sig_b64] = super::jws_parts(token)?;
        let json = super::json_part;
        let header = json(header_b64, "header")?;
        let alg = header
            .get("alg")
            .and_then(Value::as_str)
            .ok_or("the token has no alg")?;
        if alg == "none" {
            return Err("the token is not signed (alg none)".into());
        }
        let sig = base64::decode(sig_b64).ok_or("the token's signature is not base64url")?;
        let kid = header.get("kid").and_then(Value::as_str);
        let signed = &token.as_bytes()[..header_b64.len() + 1 + claims_b64.len()];
        let keys = self.keys.keys();
        let candidates: Vec<&Jwk> = keys
            .iter()
            .filter(|k| kid.is_none_or(|id| k.kid.as_deref() == Some(id)) && fits(alg, k))
            .collect();
        if candidates.is_empty() {
            self.keys.want_refresh();
            return Err(match kid {
                Some(id) => format!("no {alg} key with kid {id} in the JWKS"),
                None => format!("no {alg} key in the JWKS"),
            });
        }
        if !candidates.iter().any(|k| verify(alg, &k.key, signed, &sig)) {
            return Err("the token's signature does not verify".into());
        }
        let claims = json(claims_b64, "claims")?;
        self.check_claims(&claims, now_ms)
    }

    fn check_claims(
        &self,
        claims: &serde_json::Map<String, Value>,
        now_ms: i64,
    ) -> Result<(String, i64), String> {
        let s = &self.settings;
        let skew_ms = s.clock_skew_s.saturating_mul(1000);
        let time = |name: &str| super::time_claim(claims, name);
        let exp = time("exp")?.ok_or("the token has no exp claim")?;
        if exp <= now_ms - skew_ms {
            return Err("the token has expired".into());
        }
        time("iat")?.ok_or("the token has no iat claim")?;
        if time("nbf")?.is_some_and(|nbf| nbf > now_ms + skew_ms) {
            return Err("the token is not valid yet (nbf)".into());
        }
        if let Some(issuer) = &s.issuer {
            let iss = claims.get("iss").and_then(Value::as_str);
            if iss != Some(issuer.as_str()) {
                return Err(format!(
                    "the token's issuer {} is not {issuer}",
                    iss.unwrap_or("(none)")
                ));
            }
        }
        let audiences: Vec<&str> = match claims.get("aud") {
            None => Vec::new(),
            Some(Value::String(a)) => vec![a.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err("the aud claim is neither a string nor an array".into()),
        };
        if !s.audiences.is_empty() {
            if !audiences.iter().any(|a| s.audiences.iter().any(|e| e == a)) {
                return Err(format!(
                    "the token's audience [{}] names none of [{}]",
                    audiences.join(", "),
                    s.audiences.join(", ")
                ));
            }
        } else if !audiences.is_empty() {
            return Err(
                "the token has an audience but the broker expects none (sasl.oauthbearer.expected.audience)"
                    .into(),
            );
        }
        let sub = claims
            .get(&s.sub_claim)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("the token has no {} claim", s.sub_claim))?;
        let scopes: Vec<&str> = match claims.get(&s.scope_claim) {
            Some(Value::String(v)) => vec![v.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        for (i, scope) in scopes.iter().enumerate() {
            if scope.trim().is_empty() {
                return Err(format!("the {} claim has an empty scope", s.scope_claim));
            }
            if scopes[..i].iter().any(|o| o.trim() == scope.trim()) {
                return Err(format!("the {} claim repeats {scope}", s.scope_claim));
            }
        }
        Ok((sub.to_string(), exp))
    }
}

/// The body of a GET of `url` (http://, https:// or file:).
pub fn fetch(url: &str) -> Result<Vec<u8>, String> {
    if let Some(path) = url
        .strip_prefix("file://")
        .or_else(|| url.strip_prefix("file:"))
    {
        return std::fs::read(path).map_err(|e| format!("{url}: {e}"));
    }
    let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        return Err(format!("{url}: not an http://, https:// or file: URL"));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (
            h,
            p.parse::<u16>()
                .map_err(|_| format!("{url}: bad port {p}"))?,
        ),
        _ => (authority, if tls { 443 } else { 80 }),
    };
    let host_name = host.trim_start_matches('[').trim_end_matches(']');
    let timeout = Duration::from_secs(10);
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host_name, port))
        .map_err(|e| format!("{url}: {e}"))?
        .next()
        .ok_or_else(|| format!("{url}: no address for {host_name}"))?;
    let tcp =
        std::net::TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{url}: {e}"))?;
    tcp.set_read_timeout(Some(timeout)).ok();
    tcp.set_write_timeout(Some(timeout)).ok();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\nUser-Agent: sluice\r\nConnection: close\r\n\r\n"
    );
    let mut raw = Vec::new();
    if tls {
        let config = https_config()?;
        let name = rustls_pki_types::ServerName::try_from(host_name.to_string())
            .map_err(|e| format!("{url}: {e}"))?;
        let conn =
            rustls::ClientConnection::new(config, name).map_err(|e| format!("{url}: {e}"))?;
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        stream
            .write_all(request.as_bytes())
            .map_err(|e| format!("{url}: {e}"))?;
        read_limited(&mut stream, &mut raw).map_err(|e| format!("{url}: {e}"))?;
    } else {
        let mut stream = tcp;
        stream
            .write_all(request.as_bytes())
            .map_err(|e| format!("{url}: {e}"))?;
        read_limited(&mut stream, &mut raw).map_err(|e| format!("{url}: {e}"))?;
    }
    parse_response(&raw).map_err(|e| format!("{url}: {e}"))
}

/// The most a JWKS answer may be.
const MAX_RESPONSE: u64 = 4 << 20;

fn read_limited(r: &mut impl Read, out: &mut Vec<u8>) -> std::io::Result<()> {
    r.take(MAX_RESPONSE).read_to_end(out).map(|_| ())
}

/// The trust anchors for https JWKS endpoints: the system's (`SSL_CERT_FILE`, else Debian's
/// bundle).
fn https_config() -> Result<Arc<rustls::ClientConfig>, String> {
    let file = std::env::var("SSL_CERT_FILE")
        .unwrap_or_else(|_| "/etc/ssl/certs/ca-certificates.crt".into());
    let mut roots = rustls::RootCertStore::empty();
    use rustls_pki_types::pem::PemObject;
    let certs = rustls_pki_types::CertificateDer::pem_file_iter(&file)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("trusted certificates {file}: {e}"))?;
    roots.add_parsable_certificates(certs);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The body of an HTTP/1.1 response that must be 2xx (chunked or not).
fn parse_response(raw: &[u8]) -> Result<Vec<u8>, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no complete HTTP response")?;
    let head = std::str::from_utf8(&raw[..split]).map_err(|_| "the HTTP head is not text")?;
    let body = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or("no HTTP status")?;
    if !(200..300).contains(&status) {
        return Err(format!("HTTP status {status}"));
    }
    let chunked = lines.any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding")
                && v.trim().eq_ignore_ascii_case("chunked")
        })
    });
    if !chunked {
        return Ok(body.to_vec());
    }
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a truncated chunk")?;
        let size_text = std::str::from_utf8(&rest[..eol]).map_err(|_| "a bad chunk size")?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| "a bad chunk size")?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if rest.len() < size + 2 {
            return Err("a truncated chunk".into());
        }
        out.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// Signing tokens and publishing their keys, as an identity provider does (tests).
pub mod testing {
    use ring::rand::SystemRandom;
    use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair};
    use sluice_protocol::base64;

    /// A signing key and its JWKS entry.
    pub enum Signer {
        Es256(EcdsaKeyPair),
        Rs256(RsaKeyPair),
    }

    impl Signer {
        /// A new P-256 key.
        pub fn es256() -> Self {
            let rng = SystemRandom::new();
            let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).expect("P-256 key");
            Signer::Es256(EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).expect("P-256 key"))
        }

        /// An RSA key from PKCS#8 DER.
        pub fn rs256(pkcs8: &[u8]) -> Self {
            Signer::Rs256(RsaKeyPair::from_pkcs8(pkcs8).expect("RSA key"))
        }

        pub fn alg(&self) -> &'static str {
            match self {
                Signer::Es256(_) => "ES256",
                Signer::Rs256(_) => "RS256",
            }
        }

        /// The key's JWKS entry, named `kid`.
        pub fn jwk(&self, kid: &str) -> serde_json::Value {
            match self {
                Signer::Es256(k) => {
                    let p = k.public_key().as_ref();
                    serde_json::json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
                        "alg": "ES256", "x": base64::encode(&p[1..33]), "y": base64::encode(&p[33..65])})
                }
                Signer::Rs256(k) => {
                    let p = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(k.public());
                    serde_json::json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                        "n": base64::encode(&p.n), "e": base64::encode(&p.e)})
                }
            }
        }

        /// A token with `claims`, its header naming `kid`.
        pub fn token(&self, kid: Option<&str>, claims: &serde_json::Value) -> String {
            let mut header = serde_json::json!({"alg": self.alg(), "typ": "JWT"});
            if let Some(kid) = kid {
                header["kid"] = kid.into();
            }
            let signed = format!(
                "{}.{}",
                base64::encode(header.to_string().as_bytes()),
                base64::encode(claims.to_string().as_bytes())
            );
            let rng = SystemRandom::new();
            let sig = match self {
                Signer::Es256(k) => k
                    .sign(&rng, signed.as_bytes())
                    .expect("sign")
                    .as_ref()
                    .to_vec(),
                Signer::Rs256(k) => {
                    let mut sig = vec![0; k.public().modulus_len()];
                    k.sign(
                        &signature::RSA_PKCS1_SHA256,
                        &rng,
                        signed.as_bytes(),
                        &mut sig,
                    )
                    .expect("sign");
                    sig
                }
            };
            format!("{signed}.{}", base64::encode(&sig))
        }
    }

    /// A JWKS document of `keys`.
    pub fn jwks(keys: &[serde_json::Value]) -> String {
        serde_json::json!({ "keys": keys }).to_string()
    }

    /// Validator settings for tests: the JWKS at `url`, audience `kafka`, issuer
    /// `https://idp.test`, Kafka's defaults otherwise.
    pub fn settings(url: &str) -> sluice_metadata::config::JwtSettings {
        sluice_metadata::config::JwtSettings {
            jwks_url: url.into(),
            audiences: vec!["kafka".into()],
            issuer: Some("https://idp.test".into()),
            clock_skew_s: 30,
            scope_claim: "scope".into(),
            sub_claim: "sub".into(),
            refresh_ms: 3_600_000,
            retry_backoff_ms: 100,
            retry_backoff_max_ms: 10_000,
        }
    }

    /// Serve what `body` holds to every HTTP GET, from a thread on an ephemeral port, as
    /// an identity provider's JWKS endpoint; its URL.
    pub fn serve_jwks(body: std::sync::Arc<std::sync::Mutex<String>>) -> String {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let Ok(read) = conn.try_clone() else { continue };
                let mut reader = BufReader::new(read);
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let b = body
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                    b.len()
                );
            }
        });
        format!("http://{addr}/.well-known/jwks.json")
    }
}

#[cfg(test)]
mod tests;
