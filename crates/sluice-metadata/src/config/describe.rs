//! DescribeConfigs output: every topic or broker config with its value, source and
//! synonyms, as Kafka reports them.

use super::*;
use ConfigType as T;

/// One entry of a DescribeConfigs answer.
#[derive(Clone, Debug, PartialEq)]
pub struct DescribedConfig {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
    pub ty: ConfigType,
    pub doc: &'static str,
    /// (name, value, source), highest priority first.
    pub synonyms: Vec<(String, Option<String>, ConfigSource)>,
}

/// Every topic config with value, source and synonyms, as DescribeConfigs(TOPIC) reports.
pub fn describe_topic(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<DescribedConfig> {
    describe_topic_with(broker, &DynamicBrokerConfigs::default(), overrides)
}

/// [`describe_topic`] where the broker-wide defaults may be dynamic: `broker` is the static
/// config; values and synonyms come from the dynamic ones first, with their sources.
pub fn describe_topic_with(
    static_config: &BrokerConfig,
    dynamic: &DynamicBrokerConfigs,
    overrides: &BTreeMap<String, String>,
) -> Vec<DescribedConfig> {
    let effective = static_config.with_dynamic(dynamic);
    let broker = &effective;
    TOPIC_CONFIGS
        .iter()
        .map(|t| {
            let mut synonyms = Vec::new();
            if let Some(v) = overrides.get(t.def.name) {
                synonyms.push((
                    t.def.name.to_string(),
                    Some(v.clone()),
                    ConfigSource::TopicConfig,
                ));
            }
            for (syn, _) in t.broker_synonyms {
                let found = [
                    (
                        dynamic.broker.get(*syn).map(String::as_str),
                        ConfigSource::DynamicBrokerConfig,
                    ),
                    (
                        dynamic.cluster_default.get(*syn).map(String::as_str),
                        ConfigSource::DynamicDefaultBrokerConfig,
                    ),
                    (
                        static_config.explicit(syn),
                        ConfigSource::StaticBrokerConfig,
                    ),
                ];
                for (v, source) in found {
                    if let Some(v) = v {
                        synonyms.push((syn.to_string(), Some(v.to_string()), source));
                    }
                }
            }
            if let Some((syn, _)) = t.broker_synonyms.first() {
                if let Some(d) = broker_def(syn).and_then(|d| d.default) {
                    synonyms.push((
                        syn.to_string(),
                        Some(d.to_string()),
                        ConfigSource::DefaultConfig,
                    ));
                }
            }
            let source = synonyms
                .first()
                .map_or(ConfigSource::DefaultConfig, |s| s.2);
            DescribedConfig {
                name: t.def.name.to_string(),
                value: topic_value(broker, overrides, t.def.name),
                source,
                read_only: false,
                sensitive: false,
                ty: t.def.ty,
                doc: t.def.doc,
                synonyms,
            }
        })
        .collect()
}

/// Every broker config, as DescribeConfigs(BROKER) reports; unknown keys set in the file
/// come back as sensitive with no value, as Kafka does.
pub fn describe_broker(broker: &BrokerConfig) -> Vec<DescribedConfig> {
    describe_broker_with(broker, &DynamicBrokerConfigs::default())
}

/// [`describe_broker`] with dynamic values, reported with their sources and synonyms.
pub fn describe_broker_with(
    broker: &BrokerConfig,
    dynamic: &DynamicBrokerConfigs,
) -> Vec<DescribedConfig> {
    let mut out: Vec<DescribedConfig> = BROKER_CONFIGS
        .iter()
        .chain(accepted_broker_configs())
        .map(|d| {
            let mut synonyms = Vec::new();
            for (map, source) in [
                (&dynamic.broker, ConfigSource::DynamicBrokerConfig),
                (
                    &dynamic.cluster_default,
                    ConfigSource::DynamicDefaultBrokerConfig,
                ),
            ] {
                if let Some(v) = map.get(d.name) {
                    synonyms.push((d.name.to_string(), Some(v.clone()), source));
                }
            }
            let explicit = if d.name == "node.id" || d.name == "broker.id" {
                Some(broker.node_id().to_string())
            } else {
                broker.explicit(d.name).map(str::to_owned)
            };
            if let Some(v) = &explicit {
                synonyms.push((
                    d.name.to_string(),
                    Some(v.clone()),
                    ConfigSource::StaticBrokerConfig,
                ));
            }
            if let Some(def) = d.default {
                synonyms.push((
                    d.name.to_string(),
                    Some(def.to_string()),
                    ConfigSource::DefaultConfig,
                ));
            }
            let source = synonyms
                .first()
                .map_or(ConfigSource::DefaultConfig, |s| s.2);
            let value = synonyms.first().and_then(|s| s.1.clone());
            DescribedConfig {
                name: d.name.to_string(),
                value: value.or(explicit).or_else(|| d.default.map(str::to_owned)),
                source,
                read_only: !dynamic_broker_key(d.name),
                sensitive: d.ty == T::Password,
                ty: d.ty,
                doc: d.doc,
                synonyms,
            }
        })
        .collect();
    // Per-listener settings (TLS store locations and connection limits, which change at
    // runtime, and the others): with their values and sources.
    let store_keys: std::collections::BTreeSet<&str> = dynamic
        .broker
        .keys()
        .chain(dynamic.cluster_default.keys())
        .map(String::as_str)
        .chain(broker.explicit_keys().map(|(k, _)| k))
        .filter(|k| listener_override(k).is_some())
        .collect();
    for k in &store_keys {
        let def = listener_override(k).map(|(_, d)| d);
        let synonyms: Vec<_> = [
            (
                dynamic.broker.get(*k).cloned(),
                ConfigSource::DynamicBrokerConfig,
            ),
            (
                dynamic.cluster_default.get(*k).cloned(),
                ConfigSource::DynamicDefaultBrokerConfig,
            ),
            (
                broker.explicit(k).map(str::to_owned),
                ConfigSource::StaticBrokerConfig,
            ),
        ]
        .into_iter()
        .filter_map(|(v, source)| Some((k.to_string(), Some(v?), source)))
        .collect();
        out.push(DescribedConfig {
            name: k.to_string(),
            value: synonyms.first().and_then(|s| s.1.clone()),
            source: synonyms
                .first()
                .map_or(ConfigSource::StaticBrokerConfig, |s| s.2),
            read_only: !dynamic_broker_key(k),
            sensitive: def.is_some_and(|d| d.ty == T::Password),
            ty: if listener_max_connections_key(k) {
                T::Int
            } else {
                def.map_or(T::String, |d| d.ty)
            },
            doc: if listener_max_connections_key(k) {
                "Most concurrent connections on this listener."
            } else if listener_store_key(k).is_some() {
                "A listener's PEM key or trust store; replaceable at runtime per broker."
            } else {
                def.map_or("", |d| d.doc)
            },
            synonyms,
        });
    }
    // Keys no definition knows (a plugin's own settings, as Kafka keeps them): described, as
    // Kafka does, as sensitive, with no value shown.
    let custom: std::collections::BTreeSet<&str> = dynamic
        .broker
        .keys()
        .chain(dynamic.cluster_default.keys())
        .map(String::as_str)
        .chain(broker.explicit_keys().map(|(k, _)| k))
        .filter(|k| broker_def(k).is_none() && !store_keys.contains(k))
        .collect();
    for k in custom {
        let synonyms: Vec<_> = [
            (
                dynamic.broker.contains_key(k),
                ConfigSource::DynamicBrokerConfig,
            ),
            (
                dynamic.cluster_default.contains_key(k),
                ConfigSource::DynamicDefaultBrokerConfig,
            ),
            (
                broker.explicit(k).is_some(),
                ConfigSource::StaticBrokerConfig,
            ),
        ]
        .into_iter()
        .filter(|(set, _)| *set)
        .map(|(_, source)| (k.to_string(), None, source))
        .collect();
        let source = synonyms
            .first()
            .map_or(ConfigSource::StaticBrokerConfig, |s| s.2);
        out.push(DescribedConfig {
            name: k.to_string(),
            value: None,
            source,
            read_only: source == ConfigSource::StaticBrokerConfig,
            sensitive: true,
            ty: T::String,
            doc: "",
            synonyms,
        });
    }
    out
}
