//! Broker-to-broker Kafka-protocol connections (replica fetchers, transaction markers), and
//! where another broker listens for them (`inter.broker.listener.name`, else its first
//! listener). On an SSL / SASL listener the connection does TLS and SASL first, with the
//! native client's [`Connector`] (brokers are clients of each other here).

use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use sluice_client::security::{round_trip, Connector, SecurityConfig, SecurityProtocol, Stream};
use sluice_metadata::config::{InterBrokerClient, SecurityProtocol as ListenerProtocol};
use sluice_metadata::{BrokerConfig, MetadataImage};

/// The largest answer another broker may send (a replica fetch of many partitions).
const MAX_RESPONSE: i32 = 256 * 1024 * 1024;

/// Where and how this broker connects to the others.
#[derive(Clone, Default)]
pub struct InterBroker {
    /// The inter-broker listener's name (None: each broker's first listener).
    pub listener: Option<String>,
    pub connector: Connector,
    /// `replica.socket.timeout.ms`: connecting (TLS and SASL included) and answering.
    pub timeout: std::time::Duration,
}

impl std::fmt::Debug for InterBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterBroker")
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

impl InterBroker {
    /// From the broker config; a one-line reason when the settings cannot work (checked
    /// at startup).
    pub fn from_config(config: &BrokerConfig) -> Result<Self, String> {
        let client: InterBrokerClient = config.inter_broker_client().map_err(|e| e.to_string())?;
        let listener = client.listener.clone();
        let connector = connector(client, "inter-broker connections")?;
        // The listener the protocol was taken from is the one connected to, so the two
        // always agree.
        Ok(Self {
            listener,
            connector,
            timeout: std::time::Duration::from_millis(config.settings().replica.socket_timeout_ms),
        })
    }
}

/// The client side of connections to another node's listener, as `client` describes it
/// (`what` names those connections in the error).
pub fn connector(client: InterBrokerClient, what: &str) -> Result<Connector, String> {
    let mut security = SecurityConfig {
        protocol: match client.protocol {
            ListenerProtocol::Plaintext => SecurityProtocol::Plaintext,
            ListenerProtocol::Ssl => SecurityProtocol::Ssl,
            ListenerProtocol::SaslPlaintext => SecurityProtocol::SaslPlaintext,
            ListenerProtocol::SaslSsl => SecurityProtocol::SaslSsl,
        },
        truststore: client.truststore,
        keystore: client.keystore,
        verify_hostname: Some(client.verify_hostname),
        ..SecurityConfig::default()
    };
    if let Some((mechanism, username, password)) = client.sasl {
        security.sasl_mechanism = Some(mechanism);
        security.sasl_username = Some(username);
        security.sasl_password = Some(password);
    }
    Connector::new(&security).map_err(|(key, reason)| format!("{what} ({key}): {reason}"))
}

/// `host:port` of a live (unfenced) broker on `listener` (its first one when None).
pub fn broker_address(image: &MetadataImage, node: i32, listener: Option<&str>) -> Option<String> {
    let b = image.brokers.get(&node).filter(|b| !b.fenced)?;
    let e = match listener {
        Some(name) => b.endpoints.iter().find(|e| e.name == name),
        None => b.endpoints.first(),
    }?;
    Some(format!("{}:{}", e.host, e.port))
}

/// A Kafka-protocol connection to another broker, one request at a time.
pub struct BrokerConn {
    stream: Stream,
    correlation: i32,
    client_id: StrBytes,
}

impl BrokerConn {
    /// Connect, with TLS and SASL as `inter` says, within its timeout.
    pub async fn connect(
        addr: &str,
        client_id: &str,
        inter: &InterBroker,
    ) -> std::io::Result<Self> {
        let stream = tokio::time::timeout(inter.timeout, inter.connector.connect(addr, client_id))
            .await
            .map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no connection to {addr} within {:?}", inter.timeout),
                )
            })??;
        Ok(Self {
            stream,
            correlation: 0,
            client_id: StrBytes::from_string(client_id.to_string()),
        })
    }

    pub async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> std::io::Result<Resp> {
        self.correlation = self.correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(self.client_id.clone()));
        round_trip(&mut self.stream, header, req, MAX_RESPONSE).await
    }
}
