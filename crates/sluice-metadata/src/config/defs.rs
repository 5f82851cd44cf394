//! Config definitions: names, types, Kafka's defaults, validators, and the checks every
//! value passes (Kafka's `ConfigDef`).

use super::*;

/// Wire codes of DescribeConfigs' `config_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Class = 8,
    Password = 9,
}

/// Wire codes of DescribeConfigs' `config_source`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    TopicConfig = 1,
    DynamicBrokerConfig = 2,
    DynamicDefaultBrokerConfig = 3,
    StaticBrokerConfig = 4,
    DefaultConfig = 5,
    DynamicBrokerLoggerConfig = 6,
    ClientMetricsConfig = 7,
    GroupConfig = 8,
}

/// A value constraint beyond the type.
#[derive(Clone, Copy, Debug)]
pub enum Check {
    Any,
    AtLeast(i64),
    Between(i64, i64),
    DoubleBetween(f64, f64),
    OneOf(&'static [&'static str]),
    /// A list whose every element is one of these.
    EachOf(&'static [&'static str]),
    Custom(fn(&str) -> Result<(), String>),
}

#[derive(Clone, Copy, Debug)]
pub struct ConfigDef {
    pub name: &'static str,
    pub ty: ConfigType,
    /// Kafka's default as a string; None where Kafka has no default (null).
    pub default: Option<&'static str>,
    pub check: Check,
    /// Whether Kafka can change it at runtime (DescribeConfigs reports read_only otherwise).
    pub dynamic: bool,
    pub doc: &'static str,
}

/// A topic config and the broker keys that supply its default, highest priority first,
/// each with the factor that converts it to the topic config's unit.
#[derive(Clone, Copy, Debug)]
pub struct TopicConfigDef {
    pub def: ConfigDef,
    pub broker_synonyms: &'static [(&'static str, i64)],
}

pub(crate) const fn def(
    name: &'static str,
    ty: ConfigType,
    default: Option<&'static str>,
    check: Check,
    doc: &'static str,
) -> ConfigDef {
    ConfigDef {
        name,
        ty,
        default,
        check,
        dynamic: false,
        doc,
    }
}

pub(crate) const fn dynamic(mut d: ConfigDef) -> ConfigDef {
    d.dynamic = true;
    d
}

use Check::*;
use ConfigType as T;

pub(crate) const LONG_MAX: &str = "9223372036854775807";
pub(crate) const HOUR_MS: i64 = 3_600_000;
pub(crate) const MINUTE_MS: i64 = 60_000;
pub(crate) const CODECS: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
pub(crate) const CLEANUP: &[&str] = &["compact", "delete"];
pub(crate) const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];

/// `file:///absolute/dir` or `s3://bucket[/prefix]`.
pub(crate) fn remote_storage_uri(v: &str) -> Result<(), String> {
    let ok = match (v.strip_prefix("file://"), v.strip_prefix("s3://")) {
        (Some(dir), _) => dir.starts_with('/'),
        (_, Some(rest)) => !rest.is_empty() && !rest.starts_with('/'),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err("expected file:///absolute/dir or s3://bucket/optional/prefix".into())
    }
}

/// `*`, or `partition:broker` pairs separated by commas (Kafka's ThrottledReplicaListValidator).
pub(crate) fn throttled_replicas(v: &str) -> Result<(), String> {
    if v.trim() == "*" {
        return Ok(());
    }
    let pair = |item: &str| {
        let (p, b) = item.trim().split_once(':')?;
        p.trim().parse::<i32>().ok()?;
        b.trim().parse::<i32>().ok()
    };
    match v
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .all(|i| pair(i).is_some())
    {
        true => Ok(()),
        false => Err(
            "must be the literal '*' or a list of replicas in the following format: \
                      [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                .into(),
        ),
    }
}

/// Whether a throttled-replicas list (`leader.replication.throttled.replicas` and its
/// follower twin) names `partition` on broker `node`: `*` names every one; items that do
/// not parse name nothing (validation refuses them before they are stored).
pub fn names_replica(list: &str, partition: i32, node: i32) -> bool {
    let list = list.trim();
    list == "*"
        || list.split(',').any(|item| {
            item.split_once(':').is_some_and(|(p, b)| {
                p.trim().parse() == Ok(partition) && b.trim().parse() == Ok(node)
            })
        })
}

/// `host:count` pairs separated by commas (`max.connections.per.ip.overrides`).
pub(crate) fn per_ip_overrides(v: &str) -> Result<(), String> {
    match parse_per_ip_overrides(v) {
        Some(_) => Ok(()),
        None => Err("must be a list of host:count pairs, counts at least 0".into()),
    }
}

/// The `max.connections.per.ip.overrides` pairs; None if one is malformed.
pub fn parse_per_ip_overrides(v: &str) -> Option<Vec<(String, usize)>> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| {
            let (host, n) = item.rsplit_once(':')?;
            let host = host.trim();
            (!host.is_empty()).then_some(())?;
            Some((host.to_string(), n.trim().parse::<u32>().ok()? as usize))
        })
        .collect()
}

pub(crate) fn host_port_or_empty(v: &str) -> Result<(), String> {
    let v = v.trim();
    if v.is_empty() {
        return Ok(());
    }
    match v.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(()),
        _ => Err(format!(
            "'{v}' is not host:port (or empty for no admin listener)"
        )),
    }
}

pub(crate) fn host_port_or_none(v: &str) -> Result<(), String> {
    let v = v.trim();
    if v.eq_ignore_ascii_case("none") {
        return Ok(());
    }
    let v = v
        .strip_prefix("https://")
        .or_else(|| v.strip_prefix("http://"))
        .unwrap_or(v);
    match v.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(()),
        _ => Err(format!(
            "'{v}' is not [http://|https://]host:port (or none for no listener)"
        )),
    }
}

pub(crate) fn gzip_level(v: &str) -> Result<(), String> {
    match v.parse::<i32>() {
        Ok(-1) | Ok(1..=9) => Ok(()),
        _ => Err("must be -1 or between 1 and 9".into()),
    }
}

pub(crate) fn roles(v: &str) -> Result<(), String> {
    let items: Vec<&str> = v
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        return Err("must contain broker and/or controller".into());
    }
    for r in &items {
        if *r != "broker" && *r != "controller" {
            return Err(format!("unknown role {r}"));
        }
    }
    Ok(())
}

fn list_items(v: &str) -> Vec<&str> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

pub(crate) fn consumer_assignors(v: &str) -> Result<(), String> {
    let items = list_items(v);
    if items.is_empty() {
        return Err("must name at least one assignor".into());
    }
    for (i, a) in items.iter().enumerate() {
        if !matches!(*a, "uniform" | "range") {
            return Err(format!(
                "unknown assignor {a} (this broker has uniform and range)"
            ));
        }
        if items[..i].contains(a) {
            return Err(format!("{a} is listed twice"));
        }
    }
    Ok(())
}

pub(crate) fn rebalance_protocols(v: &str) -> Result<(), String> {
    let items = list_items(v);
    if let Some(p) = items
        .iter()
        .find(|p| !matches!(**p, "classic" | "consumer" | "streams" | "share"))
    {
        return Err(format!("unknown group protocol {p}"));
    }
    if !items.contains(&"classic") {
        return Err("must contain classic".into());
    }
    Ok(())
}

pub(crate) fn listener_list(v: &str) -> Result<(), String> {
    parse_listeners(v).map(|_| ())
}

pub fn broker_def(name: &str) -> Option<&'static ConfigDef> {
    BROKER_CONFIGS
        .iter()
        .chain(accepted_broker_configs())
        .find(|d| d.name == name)
}

pub fn topic_def(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.def.name == name)
}

pub(crate) fn type_name(ty: ConfigType) -> &'static str {
    match ty {
        T::Boolean => "BOOLEAN",
        T::String => "STRING",
        T::Int => "INT",
        T::Short => "SHORT",
        T::Long => "LONG",
        T::Double => "DOUBLE",
        T::List => "LIST",
        T::Class => "CLASS",
        T::Password => "PASSWORD",
    }
}

/// Check `raw` against a definition; the error reads like Kafka's ConfigException.
pub fn validate(d: &ConfigDef, raw: &str) -> Result<(), String> {
    let v = raw.trim();
    let invalid = |why: String| {
        Err(format!(
            "Invalid value {raw} for configuration {}: {why}",
            d.name
        ))
    };
    let number: Option<i64> = match d.ty {
        T::Int => match v.parse::<i32>() {
            Ok(n) => Some(i64::from(n)),
            Err(_) => return invalid(format!("Not a number of type {}", type_name(d.ty))),
        },
        T::Short => match v.parse::<i16>() {
            Ok(n) => Some(i64::from(n)),
            Err(_) => return invalid(format!("Not a number of type {}", type_name(d.ty))),
        },
        T::Long => match v.parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => return invalid(format!("Not a number of type {}", type_name(d.ty))),
        },
        T::Double => {
            if v.parse::<f64>().is_err() {
                return invalid("Not a number of type DOUBLE".into());
            }
            None
        }
        T::Boolean => {
            if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                return invalid("Expected value to be either true or false".into());
            }
            None
        }
        _ => None,
    };
    match d.check {
        Any => Ok(()),
        AtLeast(min) => match number {
            Some(n) if n < min => invalid(format!("Value must be at least {min}")),
            _ => Ok(()),
        },
        Between(lo, hi) => match number {
            Some(n) if n < lo || n > hi => invalid(format!(
                "Value must be no less than {lo} and no more than {hi}"
            )),
            _ => Ok(()),
        },
        DoubleBetween(lo, hi) => match v.parse::<f64>() {
            Ok(x) if x < lo || x > hi => invalid(format!(
                "Value must be no less than {lo} and no more than {hi}"
            )),
            _ => Ok(()),
        },
        OneOf(allowed) => {
            if allowed.contains(&v) {
                Ok(())
            } else {
                invalid(format!("String must be one of: {}", allowed.join(", ")))
            }
        }
        EachOf(allowed) => {
            for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if !allowed.contains(&item) {
                    return invalid(format!(
                        "Invalid value {item}; must be one of [{}]",
                        allowed.join(", ")
                    ));
                }
            }
            Ok(())
        }
        Custom(f) => f(v).or_else(invalid),
    }
}
