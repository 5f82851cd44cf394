//! Listeners: `listeners`, their security protocols, per-listener overrides, and how this
//! node connects to the others.

use super::*;

/// How a listener secures its connections (`listener.security.protocol.map`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(v: &str) -> Option<Self> {
        Some(match v {
            "PLAINTEXT" => Self::Plaintext,
            "SSL" => Self::Ssl,
            "SASL_PLAINTEXT" => Self::SaslPlaintext,
            "SASL_SSL" => Self::SaslSsl,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }
}

/// `listener.name.<listener>.<key>` overrides: `ssl.*` settings may differ per listener.
pub(crate) const LISTENER_OVERRIDABLE: &[&str] = &[
    "max.connections",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
];

/// How a broker connects to the other brokers (see [`BrokerConfig::inter_broker_client`]).
/// `Debug` leaves the password out.
#[derive(Clone, PartialEq, Eq)]
pub struct InterBrokerClient {
    /// The listener's name (None: the broker has no listener for other brokers).
    pub listener: Option<String>,
    pub protocol: SecurityProtocol,
    /// PEM trust store (TLS).
    pub truststore: Option<String>,
    /// PEM key store presented as the client certificate (TLS), when the listener has one.
    pub keystore: Option<String>,
    /// Whether the other broker's certificate must name the host.
    pub verify_hostname: bool,
    /// (mechanism, username, password) for SASL.
    pub sasl: Option<(String, String, String)>,
}

impl fmt::Debug for InterBrokerClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InterBrokerClient")
            .field("listener", &self.listener)
            .field("protocol", &self.protocol)
            .field("truststore", &self.truststore)
            .field("keystore", &self.keystore)
            .field("verify_hostname", &self.verify_hostname)
            .field(
                "sasl",
                &self.sasl.as_ref().map(|(m, u, _)| (m, u, "[hidden]")),
            )
            .finish()
    }
}

impl Default for InterBrokerClient {
    fn default() -> Self {
        Self {
            listener: None,
            protocol: SecurityProtocol::Plaintext,
            truststore: None,
            keystore: None,
            verify_hostname: true,
            sasl: None,
        }
    }
}

/// The SASL mechanisms Sluice implements.
pub const SASL_MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

/// Mechanisms a broker can authenticate to the others with (it has no OAuth token source).
pub const INTER_BROKER_SASL_MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

pub(crate) fn oauthbearer_jaas_key(listener: &str) -> String {
    format!(
        "listener.name.{}.oauthbearer.sasl.jaas.config",
        listener.to_lowercase()
    )
}

pub(crate) fn plain_jaas_key(listener: &str) -> String {
    format!(
        "listener.name.{}.plain.sasl.jaas.config",
        listener.to_lowercase()
    )
}

pub use sluice_protocol::jaas::parse as parse_jaas;

/// The setting a `listener.name.<listener>.<key>` key overrides, if it is one.
pub(crate) fn listener_override(key: &str) -> Option<(&str, &'static ConfigDef)> {
    let rest = key.strip_prefix("listener.name.")?;
    let (listener, setting) = rest.split_once('.')?;
    // `<mechanism>.sasl.jaas.config`: a login module per SASL mechanism.
    let setting = match setting.split_once(".sasl.jaas.config") {
        Some((mech, "")) if !mech.is_empty() && !mech.contains('.') => "sasl.jaas.config",
        _ => setting,
    };
    // Kafka's TLS and SASL settings Sluice accepts without acting on them may be set per
    // listener too, as in Kafka.
    let def = broker_def(setting).filter(|d| {
        LISTENER_OVERRIDABLE.contains(&d.name)
            || (d.doc == NOT_ACTED_ON
                && (d.name.starts_with("ssl.") || d.name.starts_with("sasl.")))
    })?;
    (!listener.is_empty()).then_some((listener, def))
}

/// A listener: `NAME://host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

pub fn parse_listeners(v: &str) -> Result<Vec<Listener>, String> {
    let mut out = Vec::new();
    for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, rest) = item
            .split_once("://")
            .ok_or_else(|| format!("listener {item} is not of the form NAME://host:port"))?;
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("listener {item} has no port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("listener {item} has an invalid port"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if out.iter().any(|l: &Listener| l.name == name) {
            return Err(format!("listener name {name} appears more than once"));
        }
        out.push(Listener {
            name: name.to_string(),
            host,
            port,
        });
    }
    Ok(out)
}

/// OAUTHBEARER's JWT validation (Kafka's `OAuthBearerValidatorCallbackHandler`) on a listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwtSettings {
    /// `sasl.oauthbearer.jwks.endpoint.url`: http(s):// or file:.
    pub jwks_url: String,
    /// `sasl.oauthbearer.expected.audience` (empty: not checked).
    pub audiences: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer` (None: not checked).
    pub issuer: Option<String>,
    pub clock_skew_s: i64,
    pub scope_claim: String,
    pub sub_claim: String,
    pub refresh_ms: i64,
    pub retry_backoff_ms: i64,
    pub retry_backoff_max_ms: i64,
}
