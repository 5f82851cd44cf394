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

/// Diskless topics (`diskless.enable`): set at creation only (a classic topic's data is on
/// brokers' disks, a diskless one's in the object store: neither can become the other in
/// place), and not together with tiered storage or compaction.
pub fn validate_diskless(
    creating: bool,
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> Result<(), String> {
    let flag = |m: &BTreeMap<String, String>, k: &str| {
        m.get(k)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    };
    let on = flag(new, "diskless.enable");
    if !creating && on != flag(old, "diskless.enable") {
        return Err("diskless.enable can only be set when a topic is created.".into());
    }
    if !on {
        return Ok(());
    }
    if flag(new, "remote.storage.enable") {
        return Err(
            "A diskless topic keeps its data in the object store already: \
            remote.storage.enable cannot be set with diskless.enable."
                .into(),
        );
    }
    if new
        .get("cleanup.policy")
        .is_some_and(|p| p.split(',').any(|p| p.trim() == "compact"))
    {
        return Err("Diskless topics do not support cleanup.policy=compact.".into());
    }
    if new
        .get("message.timestamp.type")
        .is_some_and(|t| t.trim() == "LogAppendTime")
    {
        return Err("Diskless topics keep the producer's timestamps: message.timestamp.type=LogAppendTime is not supported.".into());
    }
    Ok(())
}

/// Kafka's checks of a topic's tiered-storage configs (`LogConfig.validateTopicLogConfigValues`
/// and the remote-storage rules), with its messages: `old` is the topic's stored overrides
/// (empty for a new topic), `new` the overrides after the change, `default` the broker's
/// value of a topic config that is not overridden. Kafka runs them on the controller, with
/// the controller's own `remote.log.storage.system.enable`.
pub fn validate_tiered_storage(
    system_enabled: bool,
    default: &dyn Fn(&str) -> Option<String>,
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> Result<(), String> {
    let value = |k: &str| new.get(k).cloned().or_else(|| default(k));
    let flag = |m: &BTreeMap<String, String>, k: &str| {
        m.get(k)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    };
    let long = |k: &str| value(k).and_then(|v| v.trim().parse::<i64>().ok());
    if !flag(new, "remote.storage.enable") {
        if flag(old, "remote.storage.enable") && !flag(new, "remote.log.delete.on.disable") {
            return Err(
                "It is invalid to disable remote storage without deleting remote data. \
                If you want to keep the remote data and turn to read only, please set \
                `remote.storage.enable=true,remote.log.copy.disable=true`. If you want to \
                disable remote storage and delete all remote data, please set \
                `remote.storage.enable=false,remote.log.delete.on.disable=true`."
                    .into(),
            );
        }
        return Ok(());
    }
    if !system_enabled {
        return Err(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be \
            configured with remote log storage."
                .into(),
        );
    }
    let policy = value("cleanup.policy").unwrap_or_default();
    if policy
        .split(',')
        .any(|p| p.trim() != "delete" && !p.trim().is_empty())
    {
        return Err(
            "Remote log storage only supports topics with cleanup.policy=delete or \
            cleanup.policy being an empty list."
                .into(),
        );
    }
    for (local_key, total_key) in [
        ("local.retention.bytes", "retention.bytes"),
        ("local.retention.ms", "retention.ms"),
    ] {
        let (Some(local), Some(total)) = (long(local_key), long(total_key)) else {
            continue;
        };
        if total == -1 || local == -2 {
            continue;
        }
        if local == -1 {
            return Err(format!(
                "Invalid value -1 for configuration {local_key}: Value must not be -1 as \
                 {total_key} value is set as {total}."
            ));
        }
        if local > total {
            return Err(format!(
                "Invalid value {local} for configuration {local_key}: Value must not be more \
                 than {total_key} property value: {total}"
            ));
        }
    }
    if flag(new, "remote.log.copy.disable") {
        for (local_key, total_key) in [
            ("local.retention.bytes", "retention.bytes"),
            ("local.retention.ms", "retention.ms"),
        ] {
            let local = long(local_key).unwrap_or(-2);
            if local != -2 && Some(local) != long(total_key) {
                return Err(format!(
                    "When `remote.log.copy.disable` is set to true, the `{local_key}` and \
                     `{total_key}` must be set to the identical value because there will be \
                     no more logs copied to the remote storage."
                ));
            }
        }
    }
    Ok(())
}
