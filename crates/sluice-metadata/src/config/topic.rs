//! Topic configs: validating overrides and resolving a value (override > broker synonym >
//! default).

use super::*;

/// Validate topic config overrides (CreateTopics, AlterConfigs): Kafka's INVALID_CONFIG
/// message on failure.
pub fn validate_topic_configs<'a>(
    overrides: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Result<(), String> {
    for (k, v) in overrides {
        let Some(d) = topic_def(k) else {
            return Err(format!("Unknown topic config name: {k}"));
        };
        let Some(v) = v else {
            return Err(format!("Null value not supported for topic configs: {k}"));
        };
        validate(&d.def, v)?;
    }
    Ok(())
}

/// The effective value of a topic config: override > broker synonym > default.
pub fn topic_value(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
    key: &str,
) -> Option<String> {
    overrides
        .get(key)
        .cloned()
        .or_else(|| broker.topic_default(key).map(|(v, _)| v))
}
