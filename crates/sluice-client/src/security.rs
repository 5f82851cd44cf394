//! Connecting to a secured listener: `security.protocol` SSL, SASL_PLAINTEXT or SASL_SSL.
//!
//! [`SecurityConfig`] holds the settings under the names Kafka's Java client and librdkafka
//! use (`ssl.truststore.location` / `ssl.ca.location`, `ssl.keystore.location` /
//! `ssl.certificate.location` + `ssl.key.location`, `sasl.mechanism`, `sasl.jaas.config` /
//! `sasl.username` + `sasl.password`); PEM files only. [`Connector`] is built from it once
//! (files read, TLS configured) and opens [`Stream`]s: TCP, then the TLS handshake, then SASL
//! (SaslHandshake v1 and SaslAuthenticate v2 with PLAIN or SCRAM-SHA-256/512, the server's
//! SCRAM signature checked) — all before the first ordinary request.
//!
//! The broker uses the same connector for its own connections to other brokers.

use std::io;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use sluice_protocol::scram::{ClientFirst, Mechanism};
use sluice_protocol::{frame, jaas};
use sluice_rt::net::Stream as TcpStream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// `security.protocol`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SecurityProtocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Self::Plaintext,
            "SSL" => Self::Ssl,
            "SASL_PLAINTEXT" => Self::SaslPlaintext,
            "SASL_SSL" => Self::SaslSsl,
            _ => return None,
        })
    }

    pub fn tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    pub fn sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// The security settings as configured (nothing read yet). `Debug` leaves the password out.
#[derive(Clone, Default)]
pub struct SecurityConfig {
    /// `security.protocol`
    pub protocol: SecurityProtocol,
    /// `ssl.truststore.location` / `ssl.ca.location`: PEM certificates to trust. Without it,
    /// a TLS connection has nothing to verify the broker against and is refused.
    pub truststore: Option<String>,
    /// `ssl.keystore.location`: a PEM file with this client's key and certificate chain.
    pub keystore: Option<String>,
    /// `ssl.certificate.location` (librdkafka): the certificate chain, key elsewhere.
    pub certificate: Option<String>,
    /// `ssl.key.location` (librdkafka): the private key.
    pub key: Option<String>,
    /// `ssl.endpoint.identification.algorithm`: `https` (default) checks the broker's
    /// certificate names the host connected to; empty (or `none`) skips that check.
    pub verify_hostname: Option<bool>,
    /// `sasl.mechanism` (`sasl.mechanisms`)
    pub sasl_mechanism: Option<String>,
    /// `sasl.username` (librdkafka), else the `username` option of `sasl.jaas.config`.
    pub sasl_username: Option<String>,
    /// `sasl.password` (librdkafka), else the `password` option of `sasl.jaas.config`.
    pub sasl_password: Option<String>,
    /// The `tokenauth="true"` option of a ScramLoginModule entry: the user name is a
    /// delegation token's id and the password its HMAC.
    pub sasl_token: bool,
}

impl std::fmt::Debug for SecurityConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecurityConfig")
            .field("protocol", &self.protocol)
            .field("truststore", &self.truststore)
            .field("keystore", &self.keystore)
            .field("certificate", &self.certificate)
            .field("key", &self.key)
            .field("verify_hostname", &self.verify_hostname)
            .field("sasl_mechanism", &self.sasl_mechanism)
            .field("sasl_username", &self.sasl_username)
            .field("sasl_token", &self.sasl_token)
            .field(
                "sasl_password",
                &self.sasl_password.as_ref().map(|_| "[hidden]"),
            )
            .finish()
    }
}

impl SecurityConfig {
    /// Take one property if it is a security setting: `Ok(false)` when the key is not one.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let v = value.trim();
        let some = || Some(v.to_string()).filter(|v| !v.is_empty());
        match key {
            "security.protocol" => {
                self.protocol = SecurityProtocol::from_name(v).ok_or_else(|| {
                    format!("'{v}' must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
                })?
            }
            "ssl.truststore.location" | "ssl.ca.location" => self.truststore = some(),
            "ssl.keystore.location" => self.keystore = some(),
            "ssl.certificate.location" => self.certificate = some(),
            "ssl.key.location" => self.key = some(),
            "ssl.truststore.type" | "ssl.keystore.type" => {
                if !v.eq_ignore_ascii_case("PEM") {
                    return Err(format!("'{v}' is not supported: only PEM files are"));
                }
            }
            "ssl.key.password" | "ssl.keystore.password" | "ssl.truststore.password" => {
                if key == "ssl.key.password" && !v.is_empty() {
                    return Err("encrypted private keys are not supported".into());
                }
            }
            "ssl.endpoint.identification.algorithm" => {
                self.verify_hostname = Some(match v.to_ascii_lowercase().as_str() {
                    "https" => true,
                    "" | "none" => false,
                    _ => return Err(format!("'{v}' must be https or empty")),
                })
            }
            "sasl.mechanism" | "sasl.mechanisms" => self.sasl_mechanism = some(),
            "sasl.username" => self.sasl_username = some(),
            "sasl.password" => self.sasl_password = Some(v.to_string()),
            "sasl.jaas.config" => {
                let (_, options) =
                    jaas::parse(v).map_err(|e| format!("is not a JAAS entry: {e}"))?;
                if let Some(u) = jaas::option(&options, "username") {
                    self.sasl_username = Some(u.to_string());
                }
                if let Some(p) = jaas::option(&options, "password") {
                    self.sasl_password = Some(p.to_string());
                }
                self.sasl_token = jaas::option(&options, "tokenauth")
                    .is_some_and(|t| t.eq_ignore_ascii_case("true"));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// How to authenticate with SASL.
#[derive(Clone, Debug)]
pub enum SaslMechanism {
    Plain,
    Scram(Mechanism),
}

#[derive(Clone)]
struct Sasl {
    mechanism: SaslMechanism,
    username: String,
    password: String,
    /// SCRAM with a delegation token.
    token: bool,
}

/// Opens connections as configured; cheap to clone.
#[derive(Clone, Default)]
pub struct Connector {
    tls: Option<TlsConnector>,
    sasl: Option<Arc<Sasl>>,
}

/// What went wrong while setting up security: the offending key and why.
pub type ConfigProblem = (&'static str, String);

impl Connector {
    /// Read the files and check the settings; `Err((key, reason))` when they cannot work.
    pub fn new(config: &SecurityConfig) -> Result<Connector, ConfigProblem> {
        let tls = if config.protocol.tls() {
            Some(tls_connector(config)?)
        } else {
            None
        };
        let sasl = if config.protocol.sasl() {
            let name = config.sasl_mechanism.as_deref().unwrap_or("GSSAPI");
            let mechanism = match name {
                "PLAIN" => SaslMechanism::Plain,
                m => match Mechanism::from_name(m) {
                    Some(s) => SaslMechanism::Scram(s),
                    None => {
                        return Err((
                            "sasl.mechanism",
                            format!(
                            "'{name}' is not supported: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
                        ),
                        ))
                    }
                },
            };
            let username = config.sasl_username.clone().ok_or((
                "sasl.jaas.config",
                "SASL needs a user name (username=\"...\" here, or sasl.username)".to_string(),
            ))?;
            let password = config.sasl_password.clone().ok_or((
                "sasl.jaas.config",
                "SASL needs a password (password=\"...\" here, or sasl.password)".to_string(),
            ))?;
            Some(Arc::new(Sasl {
                mechanism,
                username,
                password,
                token: config.sasl_token,
            }))
        } else {
            None
        };
        Ok(Connector { tls, sasl })
    }

    /// TCP connect to `addr` (`host:port`), then TLS and SASL as configured. The caller
    /// bounds the time it takes.
    pub async fn connect(&self, addr: &str, client_id: &str) -> io::Result<Stream> {
        let tcp = sluice_rt::net::connect(addr).await?;
        let mut stream = match &self.tls {
            None => Stream::Plain(tcp),
            Some(tls) => {
                let host = addr
                    .rsplit_once(':')
                    .map_or(addr, |(h, _)| h)
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                let name = ServerName::try_from(host.to_string())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                Stream::Tls(Box::new(tls.connect(name, tcp).await?))
            }
        };
        if let Some(sasl) = &self.sasl {
            authenticate(&mut stream, sasl, client_id).await?;
        }
        Ok(stream)
    }
}

fn read_certs(
    key: &'static str,
    path: &str,
) -> Result<Vec<CertificateDer<'static>>, ConfigProblem> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| (key, format!("{path}: {e}")))?;
    if certs.is_empty() {
        return Err((key, format!("{path}: no certificate in it")));
    }
    Ok(certs)
}

fn tls_connector(config: &SecurityConfig) -> Result<TlsConnector, ConfigProblem> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let truststore = config.truststore.as_deref().ok_or((
        "ssl.truststore.location",
        "TLS needs the certificates to trust the broker by (a PEM file)".to_string(),
    ))?;
    let mut roots = RootCertStore::empty();
    for cert in read_certs("ssl.truststore.location", truststore)? {
        roots
            .add(cert)
            .map_err(|e| ("ssl.truststore.location", format!("{truststore}: {e}")))?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| ("security.protocol", e.to_string()))?;
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| ("ssl.truststore.location", format!("{truststore}: {e}")))?;
    let builder = if config.verify_hostname.unwrap_or(true) {
        builder.with_webpki_verifier(webpki)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyHostname(webpki)))
    };
    // The client's own certificate: one PEM with both (Java), or two files (librdkafka).
    let identity = match (&config.keystore, &config.certificate, &config.key) {
        (Some(ks), _, _) => Some(("ssl.keystore.location", ks.as_str(), ks.as_str())),
        (None, Some(cert), Some(key)) => {
            Some(("ssl.certificate.location", cert.as_str(), key.as_str()))
        }
        (None, Some(_), None) => {
            return Err((
                "ssl.key.location",
                "ssl.certificate.location needs its private key".into(),
            ))
        }
        (None, None, Some(_)) => {
            return Err((
                "ssl.certificate.location",
                "ssl.key.location needs its certificate".into(),
            ))
        }
        (None, None, None) => None,
    };
    let client = match identity {
        None => builder.with_no_client_auth(),
        Some((key_name, cert_path, key_path)) => {
            let certs = read_certs(key_name, cert_path)?;
            let key = PrivateKeyDer::from_pem_file(key_path)
                .map_err(|e| (key_name, format!("{key_path}: no private key ({e})")))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| (key_name, format!("{cert_path}: {e}")))?
        }
    };
    Ok(TlsConnector::from(Arc::new(client)))
}

/// The chain is verified against the trust store as usual; only the check that the
/// certificate names the host is skipped (`ssl.endpoint.identification.algorithm=`).
#[derive(Debug)]
struct AnyHostname(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostname {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

fn auth_failed(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, message.into())
}

/// One request and its response on a stream that carries nothing else at the time (the
/// SASL exchange here; a broker's connection to another, one request at a time). A response
/// frame over `max_response` bytes, or with another correlation id, is an error.
pub async fn round_trip<Req: Encodable, Resp: Decodable>(
    stream: &mut Stream,
    header: RequestHeader,
    req: &Req,
    max_response: i32,
) -> io::Result<Resp> {
    let (key, version, correlation) = (
        ApiKey::try_from(header.request_api_key)
            .map_err(|_| io::Error::other("unknown api key"))?,
        header.request_api_version,
        header.correlation_id,
    );
    let mut out = BytesMut::new();
    frame::encode_request(&mut out, &header, req).map_err(io::Error::other)?;
    stream.write_all(&out).await?;
    let size = stream.read_i32().await?;
    if !(0..=max_response).contains(&size) {
        return Err(io::Error::other(format!(
            "a {key:?} response of {size} bytes (is this a Kafka listener of that protocol?)"
        )));
    }
    let mut buf = vec![0u8; size as usize];
    stream.read_exact(&mut buf).await?;
    let mut body = Bytes::from(buf);
    let h = frame::decode_response_header(&mut body, key, version).map_err(io::Error::other)?;
    if h.correlation_id != correlation {
        return Err(io::Error::other(format!(
            "{key:?}: correlation id {} where {correlation} was expected",
            h.correlation_id
        )));
    }
    Resp::decode(&mut body, version).map_err(io::Error::other)
}

/// The header of a SASL request.
fn sasl_header(key: ApiKey, version: i16, correlation: i32, client_id: &str) -> RequestHeader {
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())))
}

/// SASL messages are small: anything bigger is not a SASL answer.
const SASL_MAX_RESPONSE: i32 = 1024 * 1024;

async fn authenticate(stream: &mut Stream, sasl: &Sasl, client_id: &str) -> io::Result<()> {
    let name = match sasl.mechanism {
        SaslMechanism::Plain => "PLAIN",
        SaslMechanism::Scram(m) => m.name(),
    };
    let hs: SaslHandshakeResponse = round_trip(
        stream,
        sasl_header(ApiKey::SaslHandshake, 1, 1, client_id),
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(name)),
        SASL_MAX_RESPONSE,
    )
    .await?;
    if hs.error_code != 0 {
        let offered: Vec<&str> = hs.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(auth_failed(format!(
            "the broker does not offer SASL mechanism {name} (it offers {})",
            offered.join(", ")
        )));
    }
    let mut correlation = 1;
    match sasl.mechanism {
        SaslMechanism::Plain => {
            let mut token = vec![0u8];
            token.extend_from_slice(sasl.username.as_bytes());
            token.push(0);
            token.extend_from_slice(sasl.password.as_bytes());
            sasl_step(stream, &mut correlation, client_id, token).await?;
        }
        SaslMechanism::Scram(m) => {
            let (first, msg) = if sasl.token {
                ClientFirst::for_token(m, &sasl.username, &sasl.password)
            } else {
                ClientFirst::new(m, &sasl.username, &sasl.password)
            };
            let server_first = sasl_step(stream, &mut correlation, client_id, msg).await?;
            let (last, proof) = first
                .respond(&server_first)
                .map_err(|e| auth_failed(e.to_string()))?;
            let server_final = sasl_step(stream, &mut correlation, client_id, proof).await?;
            last.verify(&server_final)
                .map_err(|e| auth_failed(e.to_string()))?;
        }
    }
    Ok(())
}

/// One SaslAuthenticate round: send `token`, return the broker's.
async fn sasl_step(
    stream: &mut Stream,
    correlation: &mut i32,
    client_id: &str,
    token: Vec<u8>,
) -> io::Result<Bytes> {
    *correlation += 1;
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    let resp: SaslAuthenticateResponse = round_trip(
        stream,
        sasl_header(ApiKey::SaslAuthenticate, 2, *correlation, client_id),
        &req,
        SASL_MAX_RESPONSE,
    )
    .await?;
    if resp.error_code != 0 {
        return Err(auth_failed(resp.error_message.map_or_else(
            || "SASL authentication failed".into(),
            |m| m.to_string(),
        )));
    }
    Ok(resp.auth_bytes)
}

/// A connection to a broker: plain TCP or TLS over it.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

sluice_rt::delegate_io!(Stream { Stream::Plain, Stream::Tls });

#[cfg(test)]
mod tests {
    use super::*;

    fn config(props: &[(&str, &str)]) -> Result<SecurityConfig, String> {
        let mut c = SecurityConfig::default();
        for (k, v) in props {
            assert!(c.set(k, v)?, "{k} is a security setting");
        }
        Ok(c)
    }

    fn problem(props: &[(&str, &str)]) -> ConfigProblem {
        match Connector::new(&config(props).unwrap()) {
            Ok(_) => panic!("{props:?} should be refused"),
            Err(p) => p,
        }
    }

    #[test]
    fn settings_take_java_and_librdkafka_names() {
        let c = config(&[
            ("security.protocol", "sasl_ssl"),
            ("ssl.ca.location", "/ca.pem"),
            ("sasl.mechanisms", "SCRAM-SHA-256"),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"p w\";",
            ),
            ("ssl.endpoint.identification.algorithm", ""),
            ("ssl.truststore.type", "PEM"),
        ])
        .unwrap();
        assert_eq!(c.protocol, SecurityProtocol::SaslSsl);
        assert_eq!(c.truststore.as_deref(), Some("/ca.pem"));
        assert_eq!(c.sasl_mechanism.as_deref(), Some("SCRAM-SHA-256"));
        assert_eq!(c.sasl_username.as_deref(), Some("u"));
        assert_eq!(c.sasl_password.as_deref(), Some("p w"));
        assert_eq!(c.verify_hostname, Some(false));
        assert!(!SecurityConfig::default().set("linger.ms", "5").unwrap());
    }

    #[test]
    fn unusable_settings_are_refused_without_repeating_secrets() {
        for (k, v) in [
            ("security.protocol", "TLS"),
            ("ssl.keystore.type", "JKS"),
            ("ssl.key.password", "secret"),
            ("ssl.endpoint.identification.algorithm", "ldap"),
            ("sasl.jaas.config", "Module required password=\"secret\""),
        ] {
            let e = SecurityConfig::default().set(k, v).unwrap_err();
            assert!(!e.contains("secret"), "{k}: {e}");
        }
        let sasl = [("security.protocol", "SASL_PLAINTEXT")];
        assert_eq!(problem(&sasl).0, "sasl.mechanism");
        let no_user = [sasl[0], ("sasl.mechanism", "PLAIN")];
        assert_eq!(problem(&no_user).0, "sasl.jaas.config");
        let gssapi = [sasl[0], ("sasl.mechanism", "GSSAPI")];
        assert!(problem(&gssapi).1.contains("GSSAPI"));
        assert_eq!(
            problem(&[("security.protocol", "SSL")]).0,
            "ssl.truststore.location"
        );
        let missing = [
            ("security.protocol", "SSL"),
            ("ssl.truststore.location", "/does/not/exist.pem"),
        ];
        assert!(problem(&missing).1.contains("/does/not/exist.pem"));
        let half = [
            ("security.protocol", "SSL"),
            ("ssl.truststore.location", "/x.pem"),
            ("ssl.certificate.location", "/c.pem"),
        ];
        assert_eq!(problem(&half).0, "ssl.truststore.location");
        assert!(Connector::new(&SecurityConfig::default()).is_ok());
    }
}
