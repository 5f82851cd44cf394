//! Client-metrics subscriptions (KIP-714) as configs: a CLIENT_METRICS resource (config
//! resource type 16) names a subscription, its configs say which metrics, how often, and for
//! which clients. Kept in cluster metadata like any config; Kafka's names, defaults and checks.

use super::*;

/// Config resource type of a client-metrics subscription.
pub const RESOURCE_CLIENT_METRICS: i8 = 16;

/// Metric name prefixes the matching clients push (`*` = every metric).
pub const METRICS: &str = "metrics";
/// How often the matching clients push, in ms.
pub const INTERVAL_MS: &str = "interval.ms";
/// `selector=regex` pairs a client must all match (none = every client).
pub const MATCH: &str = "match";

/// The subscription that asks for every metric.
pub const ALL_METRICS: &str = "*";
/// Kafka's push interval when no subscription sets one (5 minutes).
pub const DEFAULT_INTERVAL_MS: i32 = 300_000;
const MIN_INTERVAL_MS: i32 = 100;
const MAX_INTERVAL_MS: i32 = 3_600_000;

/// What a client is matched on, as Kafka names it.
pub const CLIENT_INSTANCE_ID: &str = "client_instance_id";
pub const CLIENT_ID: &str = "client_id";
pub const CLIENT_SOFTWARE_NAME: &str = "client_software_name";
pub const CLIENT_SOFTWARE_VERSION: &str = "client_software_version";
pub const CLIENT_SOURCE_ADDRESS: &str = "client_source_address";
pub const CLIENT_SOURCE_PORT: &str = "client_source_port";
const SELECTORS: [&str; 6] = [
    CLIENT_INSTANCE_ID,
    CLIENT_ID,
    CLIENT_SOFTWARE_NAME,
    CLIENT_SOFTWARE_VERSION,
    CLIENT_SOURCE_ADDRESS,
    CLIENT_SOURCE_PORT,
];

/// The three settings of a subscription, in the order DescribeConfigs lists them.
pub const CLIENT_METRICS_CONFIGS: &[ConfigDef] = &[
    def(
        INTERVAL_MS,
        ConfigType::Int,
        Some("300000"),
        Check::Any,
        "Metrics push interval in milliseconds",
    ),
    def(
        MATCH,
        ConfigType::List,
        Some(""),
        Check::Any,
        "Client match criteria",
    ),
    def(
        METRICS,
        ConfigType::List,
        Some(""),
        Check::Any,
        "Telemetry metric name prefix list",
    ),
];

/// Why a subscription's configs are refused: Kafka answers some as INVALID_REQUEST and
/// some as INVALID_CONFIG.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    Request(String),
    Config(String),
}

/// A subscription, checked and compiled.
#[derive(Clone, Debug)]
pub struct Subscription {
    pub name: String,
    pub metrics: Vec<String>,
    pub interval_ms: i32,
    /// Selector and the expression its value must match whole; all must match.
    pub matches: Vec<(String, FullMatch)>,
}

impl Subscription {
    /// Whether a client with these attributes (selector → value) is subscribed.
    pub fn matches<'a>(&self, attribute: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.matches
            .iter()
            .all(|(k, re)| attribute(k).is_some_and(|v| re.is_match(v)))
    }
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Check subscription `name` with `configs` (the whole set after a change) as Kafka's
/// controller does, and compile it.
pub fn subscription(
    name: &str,
    configs: &BTreeMap<String, String>,
) -> Result<Subscription, Refusal> {
    if name.is_empty() {
        return Err(Refusal::Request("Subscription name can't be empty".into()));
    }
    if let Some(k) = configs
        .keys()
        .find(|k| !CLIENT_METRICS_CONFIGS.iter().any(|d| d.name == *k))
    {
        return Err(Refusal::Request(format!(
            "Unknown client metrics configuration: {k}"
        )));
    }
    let interval_ms = match configs.get(INTERVAL_MS) {
        None => DEFAULT_INTERVAL_MS,
        Some(v) => {
            validate(&CLIENT_METRICS_CONFIGS[0], v).map_err(Refusal::Config)?;
            let ms: i32 = v.trim().parse().unwrap_or_default();
            if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&ms) {
                return Err(Refusal::Request(format!(
                    "Invalid value {ms} for {INTERVAL_MS}, interval must be between 100 and 3600000 (1 hour)"
                )));
            }
            ms
        }
    };
    let mut matches: Vec<(String, FullMatch)> = Vec::new();
    for pattern in configs.get(MATCH).map(|v| list(v)).unwrap_or_default() {
        let illegal = || Refusal::Config(format!("Illegal client matching pattern: {pattern}"));
        let mut parts = pattern.split('=');
        let (Some(k), Some(re), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(illegal());
        };
        let k = k.trim();
        if !SELECTORS.contains(&k) {
            return Err(illegal());
        }
        let re = FullMatch::new(re.trim()).map_err(|_| illegal())?;
        // A selector named twice: the last one counts, as in Kafka's map.
        matches.retain(|(s, _)| s != k);
        matches.push((k.to_string(), re));
    }
    Ok(Subscription {
        name: name.to_string(),
        metrics: configs.get(METRICS).map(|v| list(v)).unwrap_or_default(),
        interval_ms,
        matches,
    })
}

/// A subscription's settings as DescribeConfigs reports them: the set ones with their
/// source, the others at Kafka's default (a name never set reads as all defaults, as in Kafka).
pub fn describe_client_metrics(configs: &BTreeMap<String, String>) -> Vec<DescribedConfig> {
    CLIENT_METRICS_CONFIGS
        .iter()
        .map(|d| {
            let set = configs.get(d.name).map(|v| match d.ty {
                ConfigType::List => list(v).join(","),
                _ => v.trim().to_string(),
            });
            let (value, source) = match set {
                Some(v) => (v, ConfigSource::ClientMetricsConfig),
                None => (
                    d.default.unwrap_or_default().to_string(),
                    ConfigSource::DefaultConfig,
                ),
            };
            DescribedConfig {
                name: d.name.to_string(),
                synonyms: if source == ConfigSource::ClientMetricsConfig {
                    vec![(d.name.to_string(), Some(value.clone()), source)]
                } else {
                    Vec::new()
                },
                value: Some(value),
                source,
                read_only: false,
                sensitive: false,
                ty: d.ty,
                doc: d.doc,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn subscriptions_are_checked_as_kafka_checks_them() {
        let s = subscription(
            "s",
            &configs(&[
                (
                    METRICS,
                    "org.apache.kafka.producer., org.apache.kafka.consumer",
                ),
                (INTERVAL_MS, "1000"),
                (
                    MATCH,
                    "client_id=app.*,client_software_name=apache-kafka-java",
                ),
            ]),
        )
        .unwrap();
        assert_eq!(
            s.metrics,
            ["org.apache.kafka.producer.", "org.apache.kafka.consumer"]
        );
        assert_eq!(s.interval_ms, 1000);
        let attrs = |id: &'static str| {
            move |k: &str| match k {
                CLIENT_ID => Some(id),
                CLIENT_SOFTWARE_NAME => Some("apache-kafka-java"),
                _ => None,
            }
        };
        assert!(s.matches(attrs("app-1")));
        // Whole values only, as Java's Matcher.matches.
        assert!(!s.matches(attrs("my-app-1")));
        // A selector the client does not have never matches.
        let by_port = subscription("p", &configs(&[(MATCH, "client_source_port=1.*")])).unwrap();
        assert!(!by_port.matches(|_| None));
        // No match criteria: every client.
        assert!(subscription("all", &configs(&[(METRICS, "*")]))
            .unwrap()
            .matches(|_| None));
        assert_eq!(
            subscription("d", &BTreeMap::new()).unwrap().interval_ms,
            DEFAULT_INTERVAL_MS
        );

        let refused =
            |name: &str, pairs: &[(&str, &str)]| subscription(name, &configs(pairs)).unwrap_err();
        assert_eq!(
            refused("", &[]),
            Refusal::Request("Subscription name can't be empty".into())
        );
        assert_eq!(
            refused("x", &[("push.ms", "1")]),
            Refusal::Request("Unknown client metrics configuration: push.ms".into())
        );
        assert_eq!(
            refused("x", &[(INTERVAL_MS, "5")]),
            Refusal::Request(
                "Invalid value 5 for interval.ms, interval must be between 100 and 3600000 (1 hour)"
                    .into()
            )
        );
        assert_eq!(
            refused("x", &[(INTERVAL_MS, "abc")]),
            Refusal::Config(
                "Invalid value abc for configuration interval.ms: Not a number of type INT".into()
            )
        );
        for bad in ["foo=1", "client_id=a=b", "client_id=(", "client_id"] {
            assert_eq!(
                refused("x", &[(MATCH, bad)]),
                Refusal::Config(format!("Illegal client matching pattern: {bad}"))
            );
        }
    }

    #[test]
    fn described_with_defaults_for_what_is_not_set() {
        let rows = describe_client_metrics(&configs(&[(METRICS, "a, b")]));
        let row = |n: &str| rows.iter().find(|r| r.name == n).unwrap();
        assert_eq!(row(METRICS).value.as_deref(), Some("a,b"));
        assert_eq!(row(METRICS).source, ConfigSource::ClientMetricsConfig);
        assert_eq!(row(METRICS).ty, ConfigType::List);
        assert_eq!(row(INTERVAL_MS).value.as_deref(), Some("300000"));
        assert_eq!(row(INTERVAL_MS).source, ConfigSource::DefaultConfig);
        assert!(row(MATCH).synonyms.is_empty());
    }
}
