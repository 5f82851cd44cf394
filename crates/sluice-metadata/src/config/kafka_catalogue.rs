//! Apache Kafka 4.4's broker and topic configs, as a default Kafka 4.4 node describes them
//! (`kafka-4.4-broker-configs.tsv`, `kafka-4.4-topic-configs.tsv`: name, type, sensitive,
//! read-only or dynamic, default; recorded with `interop/kafka/DumpConfigs.java`). A broker
//! config Kafka knows and Sluice has no definition of is accepted (in `server.properties`, and
//! through AlterConfigs where Kafka changes it at runtime) and described with Kafka's type,
//! default, sensitivity and read-only flag, but Sluice does not act on it; the README says so.

use std::sync::OnceLock;

use super::*;

/// One line of a catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KafkaConfig {
    pub name: &'static str,
    pub ty: ConfigType,
    pub sensitive: bool,
    /// Kafka changes it at runtime (DescribeConfigs' read_only is false).
    pub dynamic: bool,
    /// Kafka's default; None where it is null or there is none.
    pub default: Option<&'static str>,
}

/// What a config that Sluice accepts and does not act on says about itself.
pub const NOT_ACTED_ON: &str =
    "A Kafka 4.4 config that Sluice accepts and describes with Kafka's default, but does not act on.";

const BROKER_TSV: &str = include_str!("kafka-4.4-broker-configs.tsv");
const TOPIC_TSV: &str = include_str!("kafka-4.4-topic-configs.tsv");

fn parse_type(name: &str) -> ConfigType {
    match name {
        "BOOLEAN" => ConfigType::Boolean,
        "INT" => ConfigType::Int,
        "SHORT" => ConfigType::Short,
        "LONG" => ConfigType::Long,
        "DOUBLE" => ConfigType::Double,
        "LIST" => ConfigType::List,
        "CLASS" => ConfigType::Class,
        "PASSWORD" => ConfigType::Password,
        _ => ConfigType::String,
    }
}

fn parse(tsv: &'static str) -> Vec<KafkaConfig> {
    tsv.lines()
        .filter_map(|line| {
            let f: Vec<&'static str> = line.split('\t').collect();
            let [name, ty, sensitive, mode, default] = f[..] else {
                return None;
            };
            Some(KafkaConfig {
                name,
                ty: parse_type(ty),
                sensitive: sensitive == "yes",
                dynamic: mode == "dynamic",
                default: (default != "<null>" && default != "<none>").then_some(default),
            })
        })
        .collect()
}

/// Every broker config Kafka 4.4 describes.
pub fn kafka_broker_configs() -> &'static [KafkaConfig] {
    static CATALOGUE: OnceLock<Vec<KafkaConfig>> = OnceLock::new();
    CATALOGUE.get_or_init(|| parse(BROKER_TSV))
}

/// Every topic config Kafka 4.4 describes.
pub fn kafka_topic_configs() -> &'static [KafkaConfig] {
    static CATALOGUE: OnceLock<Vec<KafkaConfig>> = OnceLock::new();
    CATALOGUE.get_or_init(|| parse(TOPIC_TSV))
}

/// The Kafka 4.4 broker configs Sluice has no definition of, as definitions: accepted with
/// any value of their type, described with Kafka's default, not acted on.
pub fn accepted_broker_configs() -> &'static [ConfigDef] {
    static DEFS: OnceLock<Vec<ConfigDef>> = OnceLock::new();
    DEFS.get_or_init(|| {
        kafka_broker_configs()
            .iter()
            .filter(|k| !BROKER_CONFIGS.iter().any(|d| d.name == k.name))
            .map(|k| ConfigDef {
                name: k.name,
                ty: k.ty,
                default: k.default,
                check: Check::Any,
                dynamic: k.dynamic,
                doc: NOT_ACTED_ON,
            })
            .collect()
    })
}
