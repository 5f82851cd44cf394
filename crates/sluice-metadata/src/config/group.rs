//! Group configs (KIP-848's dynamic group configs): a GROUP resource (config resource type
//! 32) names a group, its configs override the broker-wide `group.*` settings for that
//! group. Kept in cluster metadata like any config; Kafka 4.4's names, defaults, checks and
//! messages (the controller checks the whole set after each change against its own
//! `group.*` bounds, as Kafka's `GroupConfig.validate`).

use super::*;

/// Config resource type of a group.
pub const RESOURCE_GROUP: i8 = 32;

/// A group config: its definition, the broker config that supplies its default (None: the
/// definition's own default), and the broker configs bounding it ("must be in the range").
#[derive(Clone, Copy, Debug)]
pub struct GroupConfigDef {
    pub def: ConfigDef,
    pub broker: Option<&'static str>,
    pub bounds: Bounds,
}

/// Where a group config's value must lie, from the broker's configs.
#[derive(Clone, Copy, Debug)]
pub enum Bounds {
    None,
    /// Broker keys of the inclusive minimum and maximum.
    Range(&'static str, &'static str),
    /// Broker key of the inclusive maximum ("must be less than or equal to").
    AtMost(&'static str),
    /// A name the broker key's list holds (the registered assignors).
    Registered(&'static str),
}

const fn group_def(
    name: &'static str,
    ty: ConfigType,
    default: &'static str,
    check: Check,
    broker: Option<&'static str>,
    bounds: Bounds,
    doc: &'static str,
) -> GroupConfigDef {
    GroupConfigDef {
        def: ConfigDef {
            name,
            ty,
            default: Some(default),
            check,
            dynamic: true,
            doc,
        },
        broker,
        bounds,
    }
}

use Bounds::{AtMost, Range, Registered};
use ConfigType::{Boolean, Int, List, String as Str};

/// Every group config Kafka 4.4 has, in the order DescribeConfigs lists them.
pub const GROUP_CONFIGS: &[GroupConfigDef] = &[
    group_def(
        "consumer.assignment.interval.ms",
        Int,
        "1000",
        Check::AtLeast(0),
        Some("group.consumer.assignment.interval.ms"),
        Range(
            "group.consumer.min.assignment.interval.ms",
            "group.consumer.max.assignment.interval.ms",
        ),
        "The minimum interval between assignment computations of a consumer group.",
    ),
    group_def(
        "consumer.heartbeat.interval.ms",
        Int,
        "5000",
        Check::AtLeast(1),
        Some("group.consumer.heartbeat.interval.ms"),
        Range(
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        ),
        "The heartbeat interval given to the members of a consumer group.",
    ),
    group_def(
        "consumer.session.timeout.ms",
        Int,
        "45000",
        Check::AtLeast(1),
        Some("group.consumer.session.timeout.ms"),
        Range(
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        ),
        "The timeout to detect client failures when using the consumer group protocol.",
    ),
    group_def(
        "errors.deadletterqueue.copy.record.enable",
        Boolean,
        "false",
        Check::Any,
        None,
        Bounds::None,
        "Whether a share group's dead-letter records copy the original record.",
    ),
    group_def(
        "errors.deadletterqueue.topic.name",
        Str,
        "",
        Check::Any,
        None,
        Bounds::None,
        "The dead-letter topic of a share group.",
    ),
    group_def(
        "share.assignment.interval.ms",
        Int,
        "1000",
        Check::AtLeast(0),
        Some("group.share.assignment.interval.ms"),
        Range(
            "group.share.min.assignment.interval.ms",
            "group.share.max.assignment.interval.ms",
        ),
        "The minimum interval between assignment computations of a share group.",
    ),
    group_def(
        "share.auto.offset.reset",
        Str,
        "latest",
        Check::Custom(share_auto_offset_reset),
        None,
        Bounds::None,
        "The strategy to initialize the share-partition start offset.",
    ),
    group_def(
        "share.delivery.count.limit",
        Int,
        "5",
        Check::AtLeast(2),
        Some("group.share.delivery.count.limit"),
        Range(
            "group.share.min.delivery.count.limit",
            "group.share.max.delivery.count.limit",
        ),
        "The maximum number of delivery attempts for a record delivered to a share group.",
    ),
    group_def(
        "share.heartbeat.interval.ms",
        Int,
        "5000",
        Check::AtLeast(1),
        Some("group.share.heartbeat.interval.ms"),
        Range(
            "group.share.min.heartbeat.interval.ms",
            "group.share.max.heartbeat.interval.ms",
        ),
        "The heartbeat interval given to the members of a share group.",
    ),
    group_def(
        "share.isolation.level",
        Str,
        "read_uncommitted",
        Check::OneOf(&["read_committed", "read_uncommitted"]),
        None,
        Bounds::None,
        "Controls how a share group reads records written transactionally.",
    ),
    group_def(
        "share.partition.max.record.locks",
        Int,
        "2000",
        Check::AtLeast(100),
        Some("group.share.partition.max.record.locks"),
        Range(
            "group.share.min.partition.max.record.locks",
            "group.share.max.partition.max.record.locks",
        ),
        "Share-group record locks per share-partition.",
    ),
    group_def(
        "share.record.lock.duration.ms",
        Int,
        "30000",
        Check::AtLeast(1000),
        Some("group.share.record.lock.duration.ms"),
        Range(
            "group.share.min.record.lock.duration.ms",
            "group.share.max.record.lock.duration.ms",
        ),
        "The record acquisition lock duration of a share group.",
    ),
    group_def(
        "share.renew.acknowledge.enable",
        Boolean,
        "true",
        Check::Any,
        None,
        Bounds::None,
        "Whether share consumers may renew their acquisition locks.",
    ),
    group_def(
        "share.session.timeout.ms",
        Int,
        "45000",
        Check::AtLeast(1),
        Some("group.share.session.timeout.ms"),
        Range(
            "group.share.min.session.timeout.ms",
            "group.share.max.session.timeout.ms",
        ),
        "The timeout to detect client failures when using the share group protocol.",
    ),
    group_def(
        "streams.assignment.interval.ms",
        Int,
        "1000",
        Check::AtLeast(0),
        Some("group.streams.assignment.interval.ms"),
        Range(
            "group.streams.min.assignment.interval.ms",
            "group.streams.max.assignment.interval.ms",
        ),
        "The minimum interval between assignment computations of a streams group.",
    ),
    group_def(
        "streams.assignor.name",
        Str,
        "sticky",
        Check::Any,
        Some("group.streams.assignors"),
        Registered("group.streams.assignors"),
        "The task assignor of a streams group.",
    ),
    group_def(
        "streams.heartbeat.interval.ms",
        Int,
        "5000",
        Check::AtLeast(1),
        Some("group.streams.heartbeat.interval.ms"),
        Range(
            "group.streams.min.heartbeat.interval.ms",
            "group.streams.max.heartbeat.interval.ms",
        ),
        "The heartbeat interval given to the members of a streams group.",
    ),
    group_def(
        "streams.initial.rebalance.delay.ms",
        Int,
        "3000",
        Check::AtLeast(0),
        Some("group.streams.initial.rebalance.delay.ms"),
        Bounds::None,
        "The delay before the first assignment of a streams group.",
    ),
    group_def(
        "streams.num.standby.replicas",
        Int,
        "0",
        Check::AtLeast(0),
        Some("group.streams.num.standby.replicas"),
        AtMost("group.streams.max.standby.replicas"),
        "The number of standby replicas for each task of a streams group.",
    ),
    group_def(
        "streams.rack.aware.assignment.tags",
        List,
        "",
        Check::Any,
        Some("group.streams.rack.aware.assignment.tags"),
        Bounds::None,
        "The client tags the rack-aware assignment of a streams group uses.",
    ),
    group_def(
        "streams.session.timeout.ms",
        Int,
        "45000",
        Check::AtLeast(1),
        Some("group.streams.session.timeout.ms"),
        Range(
            "group.streams.min.session.timeout.ms",
            "group.streams.max.session.timeout.ms",
        ),
        "The timeout to detect client failures when using the streams group protocol.",
    ),
];

/// `share.auto.offset.reset`: earliest, latest or `by_duration:<ISO-8601 duration>`.
fn share_auto_offset_reset(v: &str) -> Result<(), String> {
    let ok = match v.split_once(':') {
        None => v.eq_ignore_ascii_case("earliest") || v.eq_ignore_ascii_case("latest"),
        Some((kind, duration)) => kind == "by_duration" && iso_duration(duration),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "Invalid value `{v}` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
        ))
    }
}

/// Java's `Duration.parse` shape, not negative: `PnDTnHnMn.nS` (each part optional, at least
/// one present).
fn iso_duration(d: &str) -> bool {
    iso_duration_ms(d).is_some()
}

/// The milliseconds of a duration in Java's `Duration.parse` shape (`PnDTnHnMn.nS`, not
/// negative; `share.auto.offset.reset=by_duration:...`); None when it is not one.
pub fn iso_duration_ms(d: &str) -> Option<i64> {
    let rest = d.strip_prefix('P').or_else(|| d.strip_prefix('p'))?;
    let (days, time) = match rest.split_once(['T', 't']) {
        Some((days, time)) if !time.is_empty() => (days, Some(time)),
        Some(_) => return None,
        None => (rest, None),
    };
    // (parts found, their milliseconds)
    let parts = |s: &str, units: &[(char, f64)]| -> Option<(usize, f64)> {
        let mut count = 0;
        let mut ms = 0f64;
        let mut number = String::new();
        let mut next_unit = 0;
        for c in s.chars() {
            if c.is_ascii_digit() || c == '.' {
                number.push(c);
                continue;
            }
            let unit = units[next_unit..]
                .iter()
                .position(|(u, _)| u.eq_ignore_ascii_case(&c))?;
            let (name, scale) = units[next_unit + unit];
            if number.is_empty() || (number.contains('.') && name != 'S') {
                return None;
            }
            ms += number.parse::<f64>().ok()? * scale;
            number.clear();
            next_unit += unit + 1;
            count += 1;
        }
        number.is_empty().then_some((count, ms))
    };
    let (d, day_ms) = parts(days, &[('D', 86_400_000.0)])?;
    let (t, time_ms) = match time {
        Some(t) => match parts(t, &[('H', 3_600_000.0), ('M', 60_000.0), ('S', 1_000.0)]) {
            Some((n, ms)) if n > 0 => (n, ms),
            _ => return None,
        },
        None => (0, 0.0),
    };
    (d + t > 0).then(|| (day_ms + time_ms).min(i64::MAX as f64) as i64)
}

/// Every broker config the group configs take defaults or bounds from.
pub fn group_broker_keys() -> Vec<&'static str> {
    let mut keys = Vec::new();
    for d in GROUP_CONFIGS {
        keys.extend(d.broker);
        match d.bounds {
            Range(lo, hi) => keys.extend([lo, hi]),
            AtMost(k) | Registered(k) => keys.push(k),
            Bounds::None => {}
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// The group config named `name`.
pub fn group_config_def(name: &str) -> Option<&'static GroupConfigDef> {
    GROUP_CONFIGS.iter().find(|d| d.def.name == name)
}

fn int(v: &str) -> Option<i64> {
    v.trim().parse().ok()
}

/// Check a group's configs (the whole set after a change) as Kafka 4.4's controller does:
/// every name known, every value of its type and above its floor, then within the bounds
/// the broker configs (`broker`: a `group.*` key to its value here) set. Kafka answers every
/// refusal INVALID_CONFIG.
pub fn check_group_configs(
    configs: &BTreeMap<String, String>,
    broker: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    if let Some(k) = configs.keys().find(|k| group_config_def(k).is_none()) {
        return Err(format!("Unknown group config name: {k}"));
    }
    for (d, v) in configs
        .iter()
        .filter_map(|(k, v)| group_config_def(k).map(|d| (d, v)))
    {
        validate(&d.def, v)?;
    }
    for d in GROUP_CONFIGS {
        let Some(v) = configs.get(d.def.name) else {
            continue;
        };
        let name = d.def.name;
        match d.bounds {
            Bounds::None => {}
            Range(lo, hi) => {
                let (n, lo, hi) = (
                    int(v),
                    broker(lo).and_then(|v| int(&v)),
                    broker(hi).and_then(|v| int(&v)),
                );
                if let (Some(n), Some(lo), Some(hi)) = (n, lo, hi) {
                    if n < lo || n > hi {
                        return Err(format!(
                            "{name} must be in the range {lo} to {hi} inclusive."
                        ));
                    }
                }
            }
            AtMost(hi) => {
                if let (Some(n), Some(hi)) = (int(v), broker(hi).and_then(|v| int(&v))) {
                    if n > hi {
                        return Err(format!("{name} must be less than or equal to {hi}"));
                    }
                }
            }
            Registered(key) => {
                let registered: Vec<String> = broker(key)
                    .unwrap_or_default()
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect();
                if !registered.iter().any(|r| r == v.trim()) {
                    return Err(format!(
                        "{name} '{}' is not a registered task assignor. Registered assignors are: [{}].",
                        v.trim(),
                        registered.join(", ")
                    ));
                }
            }
        }
    }
    // Each session timeout must exceed its heartbeat interval (with the group's or the
    // broker's value of each).
    for kind in ["consumer", "share", "streams"] {
        let value = |suffix: &str| {
            let key = format!("{kind}.{suffix}");
            configs
                .get(&key)
                .cloned()
                .or_else(|| broker(&format!("group.{key}")))
                .and_then(|v| int(&v))
        };
        if let (Some(session), Some(heartbeat)) =
            (value("session.timeout.ms"), value("heartbeat.interval.ms"))
        {
            if session <= heartbeat {
                return Err(format!(
                    "{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms"
                ));
            }
        }
    }
    Ok(())
}

/// The value a group config has for a group: its own, else the broker's, else Kafka's default.
pub fn group_value(
    configs: &BTreeMap<String, String>,
    broker: &dyn Fn(&str) -> Option<String>,
    name: &str,
) -> Option<String> {
    let d = group_config_def(name)?;
    configs
        .get(name)
        .cloned()
        .or_else(|| d.broker.and_then(broker).map(|v| broker_default(d, &v)))
        .or_else(|| d.def.default.map(str::to_owned))
}

/// The broker's value as a group default: the first registered assignor for the assignor.
fn broker_default(d: &GroupConfigDef, v: &str) -> String {
    match d.bounds {
        Registered(_) => v.split(',').next().unwrap_or_default().trim().to_string(),
        _ => v.to_string(),
    }
}

/// A group's configs as DescribeConfigs reports them: every config, set ones as
/// GROUP_CONFIG with the broker's default as a synonym, the others at the broker's value as
/// DEFAULT_CONFIG (named by the broker key, as Kafka shows it). A group never configured
/// reads as all defaults, as in Kafka.
pub fn describe_group(
    configs: &BTreeMap<String, String>,
    broker: &dyn Fn(&str) -> Option<String>,
) -> Vec<DescribedConfig> {
    GROUP_CONFIGS
        .iter()
        .map(|d| {
            let default_name = d.broker.unwrap_or(d.def.name).to_string();
            let default_value = d
                .broker
                .and_then(broker)
                .or_else(|| d.def.default.map(str::to_owned))
                .unwrap_or_default();
            let default = (
                default_name,
                Some(default_value.clone()),
                ConfigSource::DefaultConfig,
            );
            let (value, source, synonyms) = match configs.get(d.def.name) {
                Some(v) => {
                    let v = v.trim().to_string();
                    (
                        v.clone(),
                        ConfigSource::GroupConfig,
                        vec![
                            (d.def.name.to_string(), Some(v), ConfigSource::GroupConfig),
                            default,
                        ],
                    )
                }
                None => (
                    broker_default(d, &default_value),
                    ConfigSource::DefaultConfig,
                    vec![default],
                ),
            };
            DescribedConfig {
                name: d.def.name.to_string(),
                value: Some(value),
                source,
                read_only: false,
                sensitive: false,
                ty: d.def.ty,
                doc: d.def.doc,
                synonyms,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(k: &str) -> Option<String> {
        broker_def(k).and_then(|d| d.default).map(str::to_owned)
    }

    fn check(pairs: &[(&str, &str)]) -> Result<(), String> {
        let configs = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        check_group_configs(&configs, &broker)
    }

    /// Each refusal with the message Kafka 4.4 gives for it (recorded against a Kafka 4.4
    /// node with `kafka-configs.sh --alter --entity-type groups`).
    #[test]
    fn refusals_read_as_kafkas() {
        for (kv, message) in [
            (("foo", "1"), "Unknown group config name: foo"),
            (("consumer.heartbeat.interval.ms", "abc"), "Invalid value abc for configuration consumer.heartbeat.interval.ms: Not a number of type INT"),
            (("consumer.heartbeat.interval.ms", "1000"), "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
            (("consumer.session.timeout.ms", "5000"), "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
            (("consumer.assignment.interval.ms", "999999999"), "consumer.assignment.interval.ms must be in the range 0 to 15000 inclusive."),
            (("share.auto.offset.reset", "foo"), "Invalid value foo for configuration share.auto.offset.reset: Invalid value `foo` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."),
            (("share.isolation.level", "x"), "Invalid value x for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"),
            (("share.delivery.count.limit", "1"), "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
            (("share.delivery.count.limit", "100"), "share.delivery.count.limit must be in the range 2 to 10 inclusive."),
            (("share.partition.max.record.locks", "99999"), "share.partition.max.record.locks must be in the range 100 to 4000 inclusive."),
            (("share.record.lock.duration.ms", "10"), "Invalid value 10 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
            (("share.renew.acknowledge.enable", "maybe"), "Invalid value maybe for configuration share.renew.acknowledge.enable: Expected value to be either true or false"),
            (("streams.assignor.name", "foo"), "streams.assignor.name 'foo' is not a registered task assignor. Registered assignors are: [sticky]."),
            (("streams.num.standby.replicas", "5"), "streams.num.standby.replicas must be less than or equal to 2"),
            (("streams.initial.rebalance.delay.ms", "-1"), "Invalid value -1 for configuration streams.initial.rebalance.delay.ms: Value must be at least 0"),
        ] {
            assert_eq!(check(&[kv]), Err(message.to_string()), "{kv:?}");
        }
        for ok in [
            ("consumer.session.timeout.ms", "50000"),
            ("consumer.assignment.interval.ms", "0"),
            ("share.auto.offset.reset", "by_duration:PT1H"),
            ("share.auto.offset.reset", "by_duration:P1DT2H3M4.5S"),
            ("errors.deadletterqueue.topic.name", "dlq"),
            ("errors.deadletterqueue.copy.record.enable", "true"),
            ("share.assignment.interval.ms", "5"),
            ("streams.rack.aware.assignment.tags", "a,b"),
        ] {
            assert_eq!(check(&[ok]), Ok(()), "{ok:?}");
        }
        for bad in [
            "by_duration:",
            "by_duration:1H",
            "by_duration:PT",
            "by_duration:-PT1H",
        ] {
            assert!(check(&[("share.auto.offset.reset", bad)]).is_err(), "{bad}");
        }
    }

    #[test]
    fn described_with_the_brokers_defaults_and_the_groups_overrides() {
        let configs = [(
            "consumer.session.timeout.ms".to_string(),
            "50000".to_string(),
        )]
        .into_iter()
        .collect();
        let rows = describe_group(&configs, &broker);
        assert_eq!(rows.len(), 21);
        let row = |n: &str| rows.iter().find(|r| r.name == n).unwrap();
        let s = row("consumer.session.timeout.ms");
        assert_eq!(s.value.as_deref(), Some("50000"));
        assert_eq!(s.source, ConfigSource::GroupConfig);
        assert_eq!(
            s.synonyms[1],
            (
                "group.consumer.session.timeout.ms".into(),
                Some("45000".into()),
                ConfigSource::DefaultConfig
            )
        );
        let a = row("streams.assignor.name");
        assert_eq!(a.value.as_deref(), Some("sticky"));
        assert_eq!(a.synonyms[0].0, "group.streams.assignors");
        let t = row("share.auto.offset.reset");
        assert_eq!(t.synonyms[0].0, "share.auto.offset.reset");
        assert_eq!(
            group_value(&configs, &broker, "consumer.heartbeat.interval.ms").as_deref(),
            Some("5000")
        );
    }
}
