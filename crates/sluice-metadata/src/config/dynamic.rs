//! Dynamic broker configs: which keys may change at runtime, as stored in metadata (the
//! cluster-wide defaults and each broker's own), and a config with them applied.

use super::*;

/// Broker keys AlterConfigs may change at runtime: the broker-wide defaults of topic configs
/// (`log.retention.ms`, `message.max.bytes`, ...; as in Kafka only the first synonym of
/// each, not `log.retention.hours`), which every partition re-reads when they change, the
/// replication throttles and the connection limits, and the keys whose definition says Kafka
/// changes them at runtime (some of which Sluice accepts without acting on them, such as
/// `num.io.threads`). Other broker keys are read at startup only.
pub fn dynamic_broker_key(key: &str) -> bool {
    RUNTIME_BROKER_KEYS.contains(&key)
        || listener_key(key).is_some()
        || TOPIC_CONFIGS
            .iter()
            .any(|t| t.broker_synonyms.first().is_some_and(|(s, _)| *s == key))
        || broker_def(key).is_some_and(|d| d.dynamic)
        || listener_override(key).is_some_and(|(_, d)| d.dynamic)
}

/// A listener's own TLS, SASL or connection setting (`listener.name.<listener>.<key>`): its
/// definition. As in Kafka, each may be set per broker at runtime, for any listener name; it
/// is kept in metadata and applied at once where the broker can (a TLS listener's key and
/// trust stores, a listener's connection limit), otherwise from the broker's next start
/// (Kafka, too, reconfigures a running listener's stores only).
pub fn listener_key(key: &str) -> Option<&'static ConfigDef> {
    listener_override(key).map(|(_, d)| d)
}

/// Whether a listener's setting may also be set as a cluster-wide default (the rest are per
/// broker, as in Kafka).
pub fn listener_key_cluster_wide(key: &str) -> bool {
    listener_key(key).is_some_and(|d| {
        [
            "max.connections",
            "max.connection.creation.rate",
            "num.network.threads",
        ]
        .contains(&d.name)
    })
}

/// Kafka's key and trust store settings (`SslConfigs.RECONFIGURABLE_CONFIGS`): at runtime
/// they may only be set per listener, with the listener prefix.
pub const PER_LISTENER_ONLY_KEYS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.certificates",
];

/// A listener's TLS store setting that can change at runtime, per broker only (as in Kafka,
/// for certificate rotation): `listener.name.<listener>.ssl.keystore.location` or
/// `….ssl.truststore.location`. Returns (listener, setting).
pub fn listener_store_key(key: &str) -> Option<(&str, &'static str)> {
    let (listener, def) = listener_override(key)?;
    ["ssl.keystore.location", "ssl.truststore.location"]
        .contains(&def.name)
        .then_some((listener, def.name))
}

/// `listener.name.<listener>.max.connections`: one listener's connection limit.
pub fn listener_max_connections_key(key: &str) -> bool {
    listener_override(key).is_some_and(|(_, d)| d.name == "max.connections")
}

/// Broker keys (not topic defaults) the broker applies at runtime when they change.
pub(crate) const RUNTIME_BROKER_KEYS: &[&str] = &[
    "num.replica.fetchers",
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
];

/// Dynamic broker configs as stored: the cluster-wide defaults and one broker's own.
#[derive(Clone, Debug, Default)]
pub struct DynamicBrokerConfigs {
    pub cluster_default: BTreeMap<String, String>,
    pub broker: BTreeMap<String, String>,
}

impl DynamicBrokerConfigs {
    pub fn differs(&self, other: &Self) -> bool {
        self.cluster_default != other.cluster_default || self.broker != other.broker
    }

    pub fn from_image(image: &crate::MetadataImage, node_id: i32) -> Self {
        let get = |name: String| {
            image
                .configs
                .get(&(crate::image::RESOURCE_BROKER, name))
                .cloned()
                .unwrap_or_default()
        };
        Self {
            cluster_default: get(String::new()),
            broker: get(node_id.to_string()),
        }
    }
}
