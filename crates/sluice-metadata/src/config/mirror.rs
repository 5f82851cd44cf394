//! Cluster links and mirror topics: what the metadata log keeps of them.
//!
//! A **cluster link** is a config resource of type [`RESOURCE_CLUSTER_LINK`] (64, the code
//! Confluent's clients use for it) named by the link: its configs are the client settings
//! that reach the source cluster (`bootstrap.servers`, `security.protocol`, `sasl.*`,
//! `ssl.*`, checked by the broker as a client would) and the link settings of
//! [`LINK_CONFIGS`]. A link exists while it has `bootstrap.servers`.
//!
//! A **mirror topic** is a topic with the configs [`MIRROR_LINK`] and [`MIRROR_SOURCE_TOPIC`]:
//! its leaders copy the source partition's batches with their offsets, and it refuses
//! writes until [`MIRROR_STATE`] says `stopped` (promoted). These keys are Sluice's own,
//! set by CreateTopics and changed only as the mirror tool does (state transitions).

use super::*;
use crate::image::RESOURCE_CLUSTER_LINK as LINK;
use Check::*;
use ConfigType as T;

pub use crate::image::RESOURCE_CLUSTER_LINK;

/// The link a mirror topic copies through.
pub const MIRROR_LINK: &str = "mirror.link";
/// The topic on the source cluster it copies (by default, the same name).
pub const MIRROR_SOURCE_TOPIC: &str = "mirror.source.topic";
/// `active`, `paused`, `promoting` or `stopped` (promoted: an ordinary writable topic).
pub const MIRROR_STATE: &str = "mirror.state";
/// Set by the controller when the mirror is promoted: every partition's leader epoch was
/// raised to at least this, so a batch stamped below it was copied from the source and one
/// at or above it was written here. This is how any replica, after any restart or leader
/// change, tells the source's transactions left open in the copy (to abort) from local
/// ones.
pub const MIRROR_PROMOTED_EPOCH: &str = "mirror.promoted.leader.epoch";

/// Where a mirror topic stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MirrorState {
    /// Copying from the source; read-only here.
    Active,
    /// Not copying for now; still read-only.
    Paused,
    /// Being promoted: still read-only and copying (until the lag is zero), and each broker
    /// makes a last copy of the link's group offsets, which it reports; then the promoting
    /// tool sets `stopped` (Confluent's PENDING_STOPPED).
    Promoting,
    /// Promoted: no longer copied, writable as any topic.
    Stopped,
}

impl MirrorState {
    pub fn parse(v: &str) -> Option<Self> {
        match v.trim().to_ascii_lowercase().as_str() {
            "active" => Some(Self::Active),
            "paused" => Some(Self::Paused),
            "promoting" => Some(Self::Promoting),
            "stopped" => Some(Self::Stopped),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Paused => "paused",
            Self::Promoting => "promoting",
            Self::Stopped => "stopped",
        }
    }

    /// Whether producers are refused (everything but a promoted mirror).
    pub fn read_only(self) -> bool {
        self != Self::Stopped
    }
}

/// A topic's mirror configs, when it is (or was) a mirror.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorTopic {
    pub link: String,
    pub source_topic: String,
    pub state: MirrorState,
    /// [`MIRROR_PROMOTED_EPOCH`], once promoted.
    pub promoted_epoch: Option<i32>,
}

impl MirrorTopic {
    /// From a topic's config overrides; None for an ordinary topic.
    pub fn of(topic: &str, overrides: &BTreeMap<String, String>) -> Option<Self> {
        let link = overrides.get(MIRROR_LINK)?.clone();
        Some(Self {
            link,
            source_topic: overrides
                .get(MIRROR_SOURCE_TOPIC)
                .cloned()
                .unwrap_or_else(|| topic.to_string()),
            state: overrides
                .get(MIRROR_STATE)
                .and_then(|s| MirrorState::parse(s))
                .unwrap_or(MirrorState::Active),
            promoted_epoch: overrides
                .get(MIRROR_PROMOTED_EPOCH)
                .and_then(|e| e.parse().ok()),
        })
    }
}

/// Whether `key` is one of the mirror topic keys.
pub fn is_mirror_key(key: &str) -> bool {
    matches!(
        key,
        MIRROR_LINK | MIRROR_SOURCE_TOPIC | MIRROR_STATE | MIRROR_PROMOTED_EPOCH
    )
}

/// Check the mirror keys among a topic's overrides (`current` before, `changes` to apply):
/// a link that exists, a known state, and no way back once promoted.
pub fn validate_mirror_changes(
    image: &crate::image::MetadataImage,
    current: &BTreeMap<String, String>,
    changes: &[(String, Option<String>)],
) -> Result<(), String> {
    let was = current
        .get(MIRROR_STATE)
        .and_then(|s| MirrorState::parse(s));
    for (k, v) in changes.iter().filter(|(k, _)| is_mirror_key(k)) {
        match (k.as_str(), v.as_deref()) {
            (MIRROR_PROMOTED_EPOCH, _) => {
                return Err(format!(
                    "{MIRROR_PROMOTED_EPOCH} is set by the controller when the mirror is promoted"
                ))
            }
            (MIRROR_LINK, Some(link)) => {
                if current.get(MIRROR_LINK).is_some_and(|l| l != link) {
                    return Err("the link of a mirror topic cannot change".into());
                }
                if !image.link_exists(link) {
                    return Err(format!("cluster link {link} does not exist"));
                }
            }
            (MIRROR_SOURCE_TOPIC, Some(s))
                if current.get(MIRROR_SOURCE_TOPIC).is_some_and(|c| c != s) =>
            {
                return Err("the source topic of a mirror topic cannot change".into());
            }
            (MIRROR_STATE, Some(s)) => {
                let Some(state) = MirrorState::parse(s) else {
                    return Err(format!(
                        "Invalid value {s} for configuration {MIRROR_STATE}: must be active, paused, promoting or stopped"
                    ));
                };
                if was == Some(MirrorState::Stopped) && state != MirrorState::Stopped {
                    return Err(
                        "a promoted mirror topic is an ordinary topic and cannot mirror again"
                            .into(),
                    );
                }
            }
            (k, None) => return Err(format!("{k} cannot be removed from a mirror topic")),
            _ => {}
        }
    }
    let linked = current.contains_key(MIRROR_LINK) || changes.iter().any(|(k, _)| k == MIRROR_LINK);
    if !linked && changes.iter().any(|(k, _)| is_mirror_key(k)) {
        return Err(format!(
            "{MIRROR_SOURCE_TOPIC} and {MIRROR_STATE} apply to mirror topics only (set {MIRROR_LINK} when the topic is created)"
        ));
    }
    Ok(())
}

/// The id of an ACL that cluster link `link` copied from its source: a hash of the link and
/// the binding (FNV-1a, 128 bits, marked as a version-8 UUID). ACLs made on this cluster get
/// random ids, so the ACL records themselves say which ones the link copied: ACL sync
/// deletes only those once the source deletes them, whichever broker syncs and after any
/// restart.
pub fn copied_acl_id(link: &str, b: &crate::acl::AclBinding) -> crate::Uuid {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut h = OFFSET;
    let mut eat = |bytes: &[u8]| {
        for byte in bytes.iter().chain(&[0xff]) {
            h ^= u128::from(*byte);
            h = h.wrapping_mul(PRIME);
        }
    };
    eat(b"sluice-link-acl");
    eat(link.as_bytes());
    eat(&[
        b.resource_type as u8,
        b.pattern_type as u8,
        b.operation as u8,
        b.permission as u8,
    ]);
    eat(b.resource_name.as_bytes());
    eat(b.principal.as_bytes());
    eat(b.host.as_bytes());
    uuid::Builder::from_custom_bytes(h.to_be_bytes()).into_uuid()
}

/// The link settings besides the client settings that reach the source.
pub static LINK_CONFIGS: &[ConfigDef] = &[
    def(
        "cluster.link.paused",
        T::Boolean,
        Some("false"),
        Any,
        "Stop copying on every mirror topic of the link, and syncing its group offsets.",
    ),
    def(
        "consumer.offset.sync.enable",
        T::Boolean,
        Some("false"),
        Any,
        "Copy the committed offsets of the chosen groups from the source.",
    ),
    def(
        "consumer.offset.sync.ms",
        T::Long,
        Some("30000"),
        AtLeast(1000),
        "How often group offsets are copied.",
    ),
    def(
        "consumer.offset.group.filters",
        T::List,
        Some("*"),
        Any,
        "The groups whose offsets are copied: names, or * for all.",
    ),
    def(
        "topic.config.sync.ms",
        T::Long,
        Some("5000"),
        AtLeast(1000),
        "How often the source's partition count and topic configs are looked up.",
    ),
    def(
        "acl.sync.enable",
        T::Boolean,
        Some("false"),
        Any,
        "Copy the source cluster's ACLs here (and delete those the link copied once the source deletes them).",
    ),
    def(
        "acl.sync.ms",
        T::Long,
        Some("5000"),
        AtLeast(1000),
        "How often ACLs are copied.",
    ),
    def(
        AUTO_MIRROR_PATTERNS,
        T::List,
        Some(""),
        Any,
        "Regular expressions (whole names, Java/RE2 syntax without Unicode classes): every source topic whose name matches one gets a mirror topic of the same name, checked every topic.config.sync.ms.",
    ),
    def(
        "mirror.start.offset.spec",
        T::String,
        Some("earliest"),
        OneOf(&["earliest", "latest"]),
        "Where a new mirror topic starts copying: the source's log start or its end.",
    ),
];

/// The link setting that lists the patterns of source topics mirrored automatically.
pub const AUTO_MIRROR_PATTERNS: &str = "auto.create.mirror.topics.patterns";

/// A regular expression matched against a whole name (as Java's `Matcher.matches`), compiled
/// to a DFA of bounded size.
#[derive(Clone, Debug)]
pub struct FullMatch(regex_automata::dfa::regex::Regex);

impl FullMatch {
    /// Compile `pattern`; the error is the parser's or the size limit's message.
    pub fn new(pattern: &str) -> Result<Self, String> {
        use regex_automata::dfa::{dense, regex::Regex};
        use regex_automata::util::syntax;
        Regex::builder()
            .syntax(syntax::Config::new().unicode(false).utf8(false))
            .thompson(regex_automata::nfa::thompson::Config::new().utf8(false))
            .dense(
                dense::Config::new()
                    .dfa_size_limit(Some(PATTERN_SIZE_LIMIT))
                    .determinize_size_limit(Some(PATTERN_SIZE_LIMIT)),
            )
            .build(&format!("^(?:{pattern})$"))
            .map(Self)
            .map_err(|e| e.to_string())
    }

    pub fn is_match(&self, name: &str) -> bool {
        self.0.is_match(name.as_bytes())
    }
}

/// Compiled topic patterns: a name matches when one pattern matches all of it.
#[derive(Clone, Debug, Default)]
pub struct TopicPatterns(Vec<FullMatch>);

impl TopicPatterns {
    /// Compile `patterns`; the error names the first one that is not a valid expression.
    pub fn compile(patterns: &[String]) -> Result<Self, String> {
        patterns
            .iter()
            .map(|p| {
                FullMatch::new(p).map_err(|e| {
                    format!("Invalid value {p} for configuration {AUTO_MIRROR_PATTERNS}: {e}")
                })
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, name: &str) -> bool {
        self.0.iter().any(|r| r.is_match(name))
    }
}

/// The most memory one compiled pattern may take (a pattern whose DFA is larger is refused).
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// The definition of a link setting.
pub fn link_def(key: &str) -> Option<&'static ConfigDef> {
    LINK_CONFIGS.iter().find(|d| d.name == key)
}

/// A link config whose value is secret: never shown by DescribeConfigs.
pub fn link_sensitive(key: &str) -> bool {
    key.contains("password") || key.contains("jaas") || key.contains("secret")
}

/// Topic configs copied from the source topic onto its mirror (when the source sets them).
pub const SYNCED_TOPIC_CONFIGS: &[&str] = &[
    "cleanup.policy",
    "max.message.bytes",
    "message.timestamp.type",
    "compression.type",
    "retention.ms",
    "retention.bytes",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "segment.bytes",
    "segment.ms",
];

/// A link's settings, parsed once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkSettings {
    pub name: String,
    pub paused: bool,
    pub offset_sync: bool,
    pub offset_sync_ms: u64,
    /// Empty or `*`: every group.
    pub groups: Vec<String>,
    pub config_sync_ms: u64,
    pub start_at_latest: bool,
    pub acl_sync: bool,
    pub acl_sync_ms: u64,
    /// Source topics mirrored automatically (regular expressions; see [`TopicPatterns`]).
    pub topic_patterns: Vec<String>,
    /// The client settings (`bootstrap.servers`, security) that reach the source.
    pub client: Vec<(String, String)>,
}

impl LinkSettings {
    /// From the link's configs (values already validated when they were set).
    pub fn from_configs(name: &str, configs: &BTreeMap<String, String>) -> Self {
        let get = |k: &str| {
            configs
                .get(k)
                .map(String::as_str)
                .or_else(|| link_def(k).and_then(|d| d.default))
                .unwrap_or_default()
        };
        let num = |k: &str, d: u64| get(k).trim().parse().unwrap_or(d);
        Self {
            name: name.to_string(),
            paused: get("cluster.link.paused").eq_ignore_ascii_case("true"),
            offset_sync: get("consumer.offset.sync.enable").eq_ignore_ascii_case("true"),
            offset_sync_ms: num("consumer.offset.sync.ms", 30_000),
            groups: split_list(get("consumer.offset.group.filters")),
            config_sync_ms: num("topic.config.sync.ms", 5_000),
            start_at_latest: get("mirror.start.offset.spec") == "latest",
            topic_patterns: split_list(get(AUTO_MIRROR_PATTERNS)),
            acl_sync: get("acl.sync.enable").eq_ignore_ascii_case("true"),
            acl_sync_ms: num("acl.sync.ms", 5_000),
            client: configs
                .iter()
                .filter(|(k, _)| link_def(k).is_none())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// Whether the offsets of `group` are copied.
    pub fn syncs_group(&self, group: &str) -> bool {
        self.offset_sync
            && (self.groups.is_empty() || self.groups.iter().any(|g| g == "*" || g == group))
    }
}

/// A comma-separated list's items, trimmed, without empty ones.
pub fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Check a change to link `name`'s configs against what it has: link settings by their
/// definitions (client settings are the broker's to check), `bootstrap.servers` required
/// while the link exists; removing every config deletes the link, refused while a mirror
/// topic still copies through it.
pub fn validate_link_changes(
    image: &crate::image::MetadataImage,
    name: &str,
    changes: &[(String, Option<String>)],
) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 249
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(format!(
            "invalid cluster link name '{name}': use letters, digits, '.', '_' and '-'"
        ));
    }
    let mut after = image
        .configs
        .get(&(LINK, name.to_string()))
        .cloned()
        .unwrap_or_default();
    for (k, v) in changes {
        if let (Some(d), Some(v)) = (link_def(k), v) {
            validate(d, v)?;
            if k == AUTO_MIRROR_PATTERNS {
                TopicPatterns::compile(&split_list(v))?;
            }
        }
        match v {
            Some(v) => after.insert(k.clone(), v.clone()),
            None => after.remove(k),
        };
    }
    if after.is_empty() {
        let users: Vec<&str> = image
            .topics
            .keys()
            .filter(|t| {
                MirrorTopic::of(t, &image.topic_configs(t))
                    .is_some_and(|m| m.link == name && m.state != MirrorState::Stopped)
            })
            .map(String::as_str)
            .collect();
        if !users.is_empty() {
            return Err(format!(
                "cluster link {name} is in use by the mirror topics {}: promote or delete them first",
                users.join(", ")
            ));
        }
        return Ok(());
    }
    if after
        .get("bootstrap.servers")
        .is_none_or(|b| b.trim().is_empty())
    {
        return Err(format!("cluster link {name} needs bootstrap.servers"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{MetadataImage, RESOURCE_TOPIC};
    use crate::record::MetadataRecord;

    fn set(image: &mut MetadataImage, t: i8, name: &str, k: &str, v: Option<&str>) {
        let offset = image.offset + 1;
        image.apply(
            offset,
            &MetadataRecord::Config {
                resource_type: t,
                resource_name: name.into(),
                name: k.into(),
                value: v.map(str::to_owned),
            },
        );
    }

    fn changes(items: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn a_link_needs_its_source_and_valid_settings_and_stays_while_a_mirror_uses_it() {
        let mut image = MetadataImage::empty();
        let bad_name = validate_link_changes(
            &image,
            "a b",
            &changes(&[("bootstrap.servers", Some("x:1"))]),
        );
        assert!(bad_name.is_err());
        let no_source = validate_link_changes(
            &image,
            "dr",
            &changes(&[("cluster.link.paused", Some("true"))]),
        );
        assert_eq!(
            no_source.unwrap_err(),
            "cluster link dr needs bootstrap.servers"
        );
        let bad_value = validate_link_changes(
            &image,
            "dr",
            &changes(&[
                ("bootstrap.servers", Some("x:1")),
                ("consumer.offset.sync.ms", Some("10")),
            ]),
        );
        assert!(bad_value.unwrap_err().contains("consumer.offset.sync.ms"));
        validate_link_changes(
            &image,
            "dr",
            &changes(&[("bootstrap.servers", Some("x:1"))]),
        )
        .unwrap();
        set(&mut image, LINK, "dr", "bootstrap.servers", Some("x:1"));
        assert!(image.link_exists("dr"));
        assert_eq!(image.links().map(|(n, _)| n).collect::<Vec<_>>(), ["dr"]);
        // A mirror topic on it: the link cannot go; once promoted, it can.
        image.apply(
            image.offset + 1,
            &MetadataRecord::Topic {
                name: "orders".into(),
                id: uuid::Uuid::from_u128(7),
            },
        );
        set(
            &mut image,
            RESOURCE_TOPIC,
            "orders",
            MIRROR_LINK,
            Some("dr"),
        );
        let delete = changes(&[("bootstrap.servers", None)]);
        assert!(validate_link_changes(&image, "dr", &delete)
            .unwrap_err()
            .contains("orders"));
        set(
            &mut image,
            RESOURCE_TOPIC,
            "orders",
            MIRROR_STATE,
            Some("stopped"),
        );
        validate_link_changes(&image, "dr", &delete).unwrap();
        let settings = LinkSettings::from_configs("dr", &image.configs[&(LINK, "dr".to_string())]);
        assert!(!settings.paused && !settings.offset_sync && settings.config_sync_ms == 5_000);
        assert_eq!(
            settings.client,
            [("bootstrap.servers".to_string(), "x:1".to_string())]
        );
    }

    #[test]
    fn topic_patterns_match_whole_names_and_bad_ones_are_refused() {
        let p = TopicPatterns::compile(&split_list("orders.*, pay(ments|outs)")).unwrap();
        for yes in ["orders", "orders.eu", "payments", "payouts"] {
            assert!(p.matches(yes), "{yes}");
        }
        for no in ["old-orders", "payments2", "pay", ""] {
            assert!(!p.matches(no), "{no}");
        }
        assert!(!TopicPatterns::compile(&[]).unwrap().matches("orders"));
        let image = MetadataImage::empty();
        let bad = validate_link_changes(
            &image,
            "dr",
            &changes(&[
                ("bootstrap.servers", Some("x:1")),
                (AUTO_MIRROR_PATTERNS, Some("orders.*,(unclosed")),
            ]),
        )
        .unwrap_err();
        assert!(
            bad.starts_with(
                "Invalid value (unclosed for configuration auto.create.mirror.topics.patterns"
            ),
            "{bad}"
        );
        let settings = LinkSettings::from_configs(
            "dr",
            &[(AUTO_MIRROR_PATTERNS.to_string(), " a.* ,b ".to_string())]
                .into_iter()
                .collect(),
        );
        assert_eq!(settings.topic_patterns, ["a.*", "b"]);
    }

    #[test]
    fn mirror_topic_keys_move_forward_only() {
        let mut image = MetadataImage::empty();
        set(&mut image, LINK, "dr", "bootstrap.servers", Some("x:1"));
        let none = BTreeMap::new();
        validate_mirror_changes(&image, &none, &changes(&[(MIRROR_LINK, Some("dr"))])).unwrap();
        assert!(
            validate_mirror_changes(&image, &none, &changes(&[(MIRROR_LINK, Some("nope"))]))
                .is_err()
        );
        assert!(
            validate_mirror_changes(&image, &none, &changes(&[(MIRROR_STATE, Some("paused"))]))
                .is_err(),
            "an ordinary topic cannot become a mirror by its state"
        );
        let mirror: BTreeMap<String, String> = [
            (MIRROR_LINK.to_string(), "dr".to_string()),
            (MIRROR_STATE.to_string(), "active".to_string()),
        ]
        .into();
        validate_mirror_changes(&image, &mirror, &changes(&[(MIRROR_STATE, Some("paused"))]))
            .unwrap();
        assert!(validate_mirror_changes(
            &image,
            &mirror,
            &changes(&[(MIRROR_STATE, Some("gone"))])
        )
        .is_err());
        assert!(
            validate_mirror_changes(&image, &mirror, &changes(&[(MIRROR_LINK, None)])).is_err()
        );
        let promoted: BTreeMap<String, String> = [
            (MIRROR_LINK.to_string(), "dr".to_string()),
            (MIRROR_STATE.to_string(), "stopped".to_string()),
        ]
        .into();
        assert!(validate_mirror_changes(
            &image,
            &promoted,
            &changes(&[(MIRROR_STATE, Some("active"))])
        )
        .is_err());
        let m = MirrorTopic::of("orders", &mirror).unwrap();
        assert_eq!(
            (m.source_topic.as_str(), m.state),
            ("orders", MirrorState::Active)
        );
        assert!(MirrorTopic::of("orders", &none).is_none());
        assert!(
            validate_mirror_changes(
                &image,
                &mirror,
                &changes(&[(MIRROR_PROMOTED_EPOCH, Some("3"))])
            )
            .is_err(),
            "the promotion epoch is the controller's"
        );
    }
}
