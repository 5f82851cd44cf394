//! TLS for SSL listeners (rustls, `ring` provider): the acceptor built from a listener's
//! `ssl.*` settings (PEM key store and trust store, `ssl.client.auth`,
//! `ssl.enabled.protocols`), and the principal of a connection — `User:` plus the client
//! certificate's subject as an RFC 2253 distinguished name, which is what Kafka's default
//! principal builder yields (`ssl.principal.mapping.rules=DEFAULT`), or `User:ANONYMOUS`
//! without a certificate.

use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sluice_metadata::BrokerConfig;
use tokio_rustls::TlsAcceptor;

/// The principal of a connection that presented no certificate (and of plaintext ones).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// The TLS acceptor of SSL listener `listener`; a one-line reason when its settings are
/// unusable (missing or unreadable files, a key that does not match, no certificate).
pub fn acceptor(config: &BrokerConfig, listener: &str) -> Result<TlsAcceptor, String> {
    build(config, listener).map(|(a, _)| a)
}

/// The TLS of one SSL listener, whose key and trust stores can be replaced at runtime
/// (`listener.name.<listener>.ssl.keystore.location` / `ssl.truststore.location` as dynamic
/// per-broker configs, as Kafka rotates certificates): connections accepted after a reload
/// use the new stores, open ones keep theirs.
pub struct ListenerTls {
    listener: String,
    /// (acceptor, the store settings it was built from, its certificate's subject)
    current: std::sync::RwLock<(TlsAcceptor, Vec<Option<String>>, Option<String>)>,
    /// Settings that failed to load last (not retried until they change or are forced).
    failed: std::sync::Mutex<Option<Vec<Option<String>>>>,
}

/// The settings a reload looks at.
const STORE_SETTINGS: [&str; 2] = ["ssl.keystore.location", "ssl.truststore.location"];

fn store_settings(config: &BrokerConfig, listener: &str) -> Vec<Option<String>> {
    STORE_SETTINGS
        .iter()
        .map(|k| config.listener_value(listener, k))
        .collect()
}

impl ListenerTls {
    pub fn new(config: &BrokerConfig, listener: &str) -> Result<Self, String> {
        let (acceptor, subject) = build(config, listener)?;
        Ok(Self {
            listener: listener.to_string(),
            current: std::sync::RwLock::new((acceptor, store_settings(config, listener), subject)),
            failed: std::sync::Mutex::new(None),
        })
    }

    pub fn listener(&self) -> &str {
        &self.listener
    }

    /// The acceptor for a new connection.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.read().0.clone()
    }

    fn read(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, (TlsAcceptor, Vec<Option<String>>, Option<String>)> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Build what `config` asks for without using it: the reason it cannot serve, if so.
    /// As in Kafka, a new key store must certify the same subject as the one in use (a
    /// rotated certificate, not another identity).
    pub fn check(&self, config: &BrokerConfig) -> Result<TlsAcceptor, String> {
        let (acceptor, subject) = build(config, &self.listener)?;
        let current = self.read().2.clone();
        if subject != current {
            return Err(format!(
                "listener {}: the new key store's certificate is for {}, the current one for {} (they must match)",
                self.listener,
                subject.as_deref().unwrap_or("no subject"),
                current.as_deref().unwrap_or("no subject"),
            ));
        }
        Ok(acceptor)
    }

    /// Use the stores `config` names if they differ from those in use, or always with
    /// `force` (the same path again re-reads the files, as Kafka does). Ok(true) when
    /// reloaded; on error the stores in use stay.
    pub fn reload(&self, config: &BrokerConfig, force: bool) -> Result<bool, String> {
        let settings = store_settings(config, &self.listener);
        let mut failed = self
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !force && (self.read().1 == settings || failed.as_ref() == Some(&settings)) {
            return Ok(false);
        }
        let acceptor = match self.check(config) {
            Ok(a) => a,
            Err(e) => {
                *failed = Some(settings);
                return Err(e);
            }
        };
        *failed = None;
        let mut current = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        current.0 = acceptor;
        current.1 = settings;
        Ok(true)
    }
}

/// The SSL listeners of this broker and what says which stores they use: the static config
/// and the dynamic per-broker configs in metadata (certificate rotation).
pub struct DynamicStores {
    pub metadata: Arc<crate::metadata_cache::MetadataCache>,
    pub listeners: Vec<Arc<ListenerTls>>,
}

impl DynamicStores {
    /// Put every SSL listener on the stores the metadata's dynamic configs name for this
    /// broker (a node runs this once before serving, so a restarted broker never presents the
    /// static stores first). A failure keeps the stores in use, logged once per setting.
    pub fn apply(&self) {
        if self.listeners.is_empty() {
            return;
        }
        let effective = self.metadata.config();
        for tls in &self.listeners {
            match tls.reload(&effective, false) {
                Ok(true) => tracing::info!(listener = %tls.listener, "TLS stores reloaded"),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(listener = %tls.listener, error = %e, "keeping the TLS stores in use")
                }
            }
        }
    }

    /// Keep every SSL listener on the stores the metadata's dynamic configs name for this
    /// broker (when another broker's request changed them, or metadata caught up).
    pub async fn follow(self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        if self.listeners.is_empty() {
            return;
        }
        let mut offsets = self.metadata.subscribe();
        loop {
            self.apply();
            tokio::select! {
                _ = shutdown.changed() => return,
                changed = offsets.changed() => if changed.is_err() { return },
            }
        }
    }
}

fn build(config: &BrokerConfig, listener: &str) -> Result<(TlsAcceptor, Option<String>), String> {
    let setting = |key: &str| config.listener_value(listener, key);
    let keystore = setting("ssl.keystore.location")
        .ok_or_else(|| format!("listener {listener}: ssl.keystore.location is not set"))?;
    let certs = read_certs(&keystore)?;
    let subject = certs.first().and_then(|c| subject_dn(c.as_ref()));
    let key = PrivateKeyDer::from_pem_file(&keystore)
        .map_err(|e| format!("ssl.keystore.location {keystore}: no private key ({e})"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut versions = Vec::new();
    for v in setting("ssl.enabled.protocols")
        .unwrap_or_default()
        .split(',')
    {
        match v.trim() {
            "TLSv1.2" => versions.push(&rustls::version::TLS12),
            "TLSv1.3" => versions.push(&rustls::version::TLS13),
            _ => {}
        }
    }
    if versions.is_empty() {
        return Err(format!(
            "listener {listener}: ssl.enabled.protocols names no TLS version"
        ));
    }
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("listener {listener}: {e}"))?;
    let auth = setting("ssl.client.auth").unwrap_or_else(|| "none".into());
    let builder = if auth == "none" {
        builder.with_no_client_auth()
    } else {
        let truststore = setting("ssl.truststore.location").ok_or_else(|| {
            format!("listener {listener}: ssl.client.auth={auth} needs ssl.truststore.location")
        })?;
        let mut roots = RootCertStore::empty();
        for cert in read_certs(&truststore)? {
            roots
                .add(cert)
                .map_err(|e| format!("ssl.truststore.location {truststore}: {e}"))?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        let verifier = if auth == "requested" {
            verifier.allow_unauthenticated()
        } else {
            verifier
        };
        builder.with_client_cert_verifier(
            verifier
                .build()
                .map_err(|e| format!("ssl.truststore.location {truststore}: {e}"))?,
        )
    };
    let server = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("ssl.keystore.location {keystore}: {e}"))?;
    Ok((TlsAcceptor::from(Arc::new(server)), subject))
}

fn read_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{path}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{path}: no certificate in it"));
    }
    Ok(certs)
}

/// The principal of an established TLS connection.
pub fn principal(conn: &ServerConnection) -> String {
    conn.peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|cert| subject_dn(cert.as_ref()))
        .map_or_else(|| ANONYMOUS.to_string(), |dn| format!("User:{dn}"))
}

/// One DER element: (tag, contents, the bytes after it).
fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |a, b| (a << 8) | *b as usize);
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The subject of an X.509 certificate as RFC 2253 writes it (as Java's
/// `X500Principal.getName()`): last RDN first, `CN=a,OU=b,O=c`.
pub fn subject_dn(cert: &[u8]) -> Option<String> {
    const SEQUENCE: u8 = 0x30;
    let (SEQUENCE, certificate, _) = der(cert)? else {
        return None;
    };
    let (SEQUENCE, mut tbs, _) = der(certificate)? else {
        return None;
    };
    // [0] version (optional), serial, signature algorithm, issuer, validity, subject.
    if tbs.first() == Some(&0xa0) {
        tbs = der(tbs)?.2;
    }
    for _ in 0..4 {
        tbs = der(tbs)?.2;
    }
    let (SEQUENCE, mut name, _) = der(tbs)? else {
        return None;
    };
    let mut rdns = Vec::new();
    while !name.is_empty() {
        let (_, mut set, rest) = der(name)?;
        name = rest;
        let mut parts = Vec::new();
        while !set.is_empty() {
            let (_, atv, rest) = der(set)?;
            set = rest;
            let (0x06, oid, value) = der(atv)? else {
                return None;
            };
            let (tag, text, _) = der(value)?;
            let oid = oid_string(oid)?;
            let key = match oid.as_str() {
                "2.5.4.3" => "CN",
                "2.5.4.6" => "C",
                "2.5.4.7" => "L",
                "2.5.4.8" => "ST",
                "2.5.4.9" => "STREET",
                "2.5.4.10" => "O",
                "2.5.4.11" => "OU",
                "0.9.2342.19200300.100.1.1" => "UID",
                "0.9.2342.19200300.100.1.25" => "DC",
                _ => "",
            };
            let text = match tag {
                // UTF8String, PrintableString, T61String, IA5String
                0x0c | 0x13 | 0x14 | 0x16 if !key.is_empty() => {
                    Some(String::from_utf8_lossy(text).into_owned())
                }
                // BMPString
                0x1e if !key.is_empty() => Some(String::from_utf16_lossy(
                    &text
                        .chunks_exact(2)
                        .map(|c| u16::from_be_bytes([c[0], c[1]]))
                        .collect::<Vec<_>>(),
                )),
                _ => None,
            };
            parts.push(match text {
                Some(t) => format!("{key}={}", escape(&t)),
                // Other attributes: the OID and the value's DER in hex, as RFC 2253 says.
                None => {
                    let whole = &value[..value.len() - der(value)?.2.len()];
                    let hex: String = whole.iter().map(|b| format!("{b:02x}")).collect();
                    format!("{oid}=#{hex}")
                }
            });
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

fn oid_string(bytes: &[u8]) -> Option<String> {
    let (&first, rest) = bytes.split_first()?;
    let mut out = vec![
        (first / 40).min(2) as u64,
        (first - 40 * (first / 40).min(2)) as u64,
    ];
    let mut acc: u64 = 0;
    for b in rest {
        acc = (acc << 7) | (b & 0x7f) as u64;
        if b & 0x80 == 0 {
            out.push(acc);
            acc = 0;
        }
    }
    Some(out.iter().map(u64::to_string).collect::<Vec<_>>().join("."))
}

/// RFC 2253 escaping of an attribute value.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DER of one element.
    fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if body.len() < 0x80 {
            out.push(body.len() as u8);
        } else {
            out.extend([0x82, (body.len() >> 8) as u8, body.len() as u8]);
        }
        out.extend_from_slice(body);
        out
    }

    fn atv(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        let mut body = tlv(0x06, oid);
        body.extend(tlv(tag, value));
        tlv(0x31, &tlv(0x30, &body))
    }

    fn fixture(name: &str) -> String {
        format!(
            "{}/../sluice/tests/fixtures/tls/{name}",
            env!("CARGO_MANIFEST_DIR")
        )
    }

    #[test]
    fn the_principal_of_a_real_certificate_is_its_subject() {
        // scripts/gen-test-certs.sh issues it to /C=US/O=Sluice/CN=writer.
        let certs = read_certs(&fixture("client.pem")).unwrap();
        assert_eq!(
            subject_dn(certs[0].as_ref()).as_deref(),
            Some("CN=writer,O=Sluice,C=US")
        );
        assert!(read_certs(&fixture("missing.pem")).is_err());
    }

    #[test]
    fn subject_is_written_last_rdn_first_with_escapes() {
        let cn = [0x55, 0x04, 0x03];
        let o = [0x55, 0x04, 0x0a];
        let c = [0x55, 0x04, 0x06];
        let email = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01];
        let mut name = atv(&c, 0x13, b"US");
        name.extend(atv(&o, 0x0c, b"Acme, Inc"));
        name.extend(atv(&cn, 0x0c, b"writer"));
        name.extend(atv(&email, 0x16, b"a@b"));
        let mut tbs = tlv(0xa0, &tlv(0x02, &[2]));
        tbs.extend(tlv(0x02, &[1, 2, 3]));
        tbs.extend(tlv(0x30, &tlv(0x06, &[0x2a])));
        tbs.extend(tlv(0x30, &atv(&cn, 0x0c, b"issuer")));
        tbs.extend(tlv(0x30, &[]));
        tbs.extend(tlv(0x30, &name));
        let cert = tlv(0x30, &tlv(0x30, &tbs));
        assert_eq!(
            subject_dn(&cert).unwrap(),
            "1.2.840.113549.1.9.1=#1603614062,CN=writer,O=Acme\\, Inc,C=US"
        );
        // Truncated or garbage input is no principal, never a panic.
        for cut in 0..cert.len() {
            let _ = subject_dn(&cert[..cut]);
        }
        assert_eq!(subject_dn(b"\x30\x84\xff\xff\xff\xff"), None);
        assert_eq!(escape(" #a+b "), "\\ #a\\+b\\ ");
    }
}
