//! Configuration keys with Kafka's names, types, defaults and validators; the typed
//! [`BrokerConfig`] built from a properties file, `SLUICE_*` environment variables and
//! `--override` flags; and topic config resolution (override > broker synonym > default) as
//! DescribeConfigs reports it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

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

const fn def(
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

const fn dynamic(mut d: ConfigDef) -> ConfigDef {
    d.dynamic = true;
    d
}

use Check::*;
use ConfigType as T;

const LONG_MAX: &str = "9223372036854775807";
const HOUR_MS: i64 = 3_600_000;
const MINUTE_MS: i64 = 60_000;
const CODECS: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
const CLEANUP: &[&str] = &["compact", "delete"];
const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];

/// `*`, or `partition:broker` pairs separated by commas (Kafka's ThrottledReplicaListValidator).
fn throttled_replicas(v: &str) -> Result<(), String> {
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
fn per_ip_overrides(v: &str) -> Result<(), String> {
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

fn host_port_or_empty(v: &str) -> Result<(), String> {
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

fn no_reauthentication(v: &str) -> Result<(), String> {
    match v.parse::<i64>() {
        Ok(0) => Ok(()),
        _ => Err(
            "SASL re-authentication (KIP-368) is not supported: leave connections.max.reauth.ms at 0"
                .into(),
        ),
    }
}

fn gzip_level(v: &str) -> Result<(), String> {
    match v.parse::<i32>() {
        Ok(-1) | Ok(1..=9) => Ok(()),
        _ => Err("must be -1 or between 1 and 9".into()),
    }
}

fn roles(v: &str) -> Result<(), String> {
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

fn listener_list(v: &str) -> Result<(), String> {
    parse_listeners(v).map(|_| ())
}

/// Every topic-level config Kafka 4 defines.
pub static TOPIC_CONFIGS: &[TopicConfigDef] = &[
    TopicConfigDef {
        def: def(
            "cleanup.policy",
            T::List,
            Some("delete"),
            EachOf(CLEANUP),
            "Retention policy for old log segments: delete and/or compact.",
        ),
        broker_synonyms: &[("log.cleanup.policy", 1)],
    },
    TopicConfigDef {
        def: def(
            "compression.gzip.level",
            T::Int,
            Some("-1"),
            Custom(gzip_level),
            "Compression level when compression.type is gzip.",
        ),
        broker_synonyms: &[("compression.gzip.level", 1)],
    },
    TopicConfigDef {
        def: def(
            "compression.lz4.level",
            T::Int,
            Some("9"),
            Between(1, 17),
            "Compression level when compression.type is lz4.",
        ),
        broker_synonyms: &[("compression.lz4.level", 1)],
    },
    TopicConfigDef {
        def: def(
            "compression.type",
            T::String,
            Some("producer"),
            OneOf(CODECS),
            "Final codec of the topic's data; producer keeps the producer's codec.",
        ),
        broker_synonyms: &[("compression.type", 1)],
    },
    TopicConfigDef {
        def: def(
            "compression.zstd.level",
            T::Int,
            Some("3"),
            Between(-131_072, 22),
            "Compression level when compression.type is zstd.",
        ),
        broker_synonyms: &[("compression.zstd.level", 1)],
    },
    TopicConfigDef {
        def: def(
            "delete.retention.ms",
            T::Long,
            Some("86400000"),
            AtLeast(0),
            "How long delete tombstones are kept on compacted topics.",
        ),
        broker_synonyms: &[("log.cleaner.delete.retention.ms", 1)],
    },
    TopicConfigDef {
        def: def(
            "file.delete.delay.ms",
            T::Long,
            Some("60000"),
            AtLeast(0),
            "Delay before a deleted segment's files are removed.",
        ),
        broker_synonyms: &[("log.segment.delete.delay.ms", 1)],
    },
    TopicConfigDef {
        def: def(
            "flush.messages",
            T::Long,
            Some(LONG_MAX),
            AtLeast(1),
            "Records after which the log is fsynced.",
        ),
        broker_synonyms: &[("log.flush.interval.messages", 1)],
    },
    TopicConfigDef {
        def: def(
            "flush.ms",
            T::Long,
            Some(LONG_MAX),
            AtLeast(0),
            "Time after which unflushed data is fsynced.",
        ),
        broker_synonyms: &[
            ("log.flush.interval.ms", 1),
            ("log.flush.scheduler.interval.ms", 1),
        ],
    },
    TopicConfigDef {
        def: def(
            "follower.replication.throttled.replicas",
            T::List,
            Some(""),
            Custom(throttled_replicas),
            "Replicas throttled on the follower side.",
        ),
        broker_synonyms: &[],
    },
    TopicConfigDef {
        def: def(
            "index.interval.bytes",
            T::Int,
            Some("4096"),
            AtLeast(0),
            "Bytes of log between two offset index entries.",
        ),
        broker_synonyms: &[("log.index.interval.bytes", 1)],
    },
    TopicConfigDef {
        def: def(
            "leader.replication.throttled.replicas",
            T::List,
            Some(""),
            Custom(throttled_replicas),
            "Replicas throttled on the leader side.",
        ),
        broker_synonyms: &[],
    },
    TopicConfigDef {
        def: def(
            "local.retention.bytes",
            T::Long,
            Some("-2"),
            AtLeast(-2),
            "Local retention size with tiered storage; -2 follows retention.bytes.",
        ),
        broker_synonyms: &[("log.local.retention.bytes", 1)],
    },
    TopicConfigDef {
        def: def(
            "local.retention.ms",
            T::Long,
            Some("-2"),
            AtLeast(-2),
            "Local retention time with tiered storage; -2 follows retention.ms.",
        ),
        broker_synonyms: &[("log.local.retention.ms", 1)],
    },
    TopicConfigDef {
        def: def(
            "max.compaction.lag.ms",
            T::Long,
            Some(LONG_MAX),
            AtLeast(1),
            "Longest a record stays uncompacted.",
        ),
        broker_synonyms: &[("log.cleaner.max.compaction.lag.ms", 1)],
    },
    TopicConfigDef {
        def: def(
            "max.message.bytes",
            T::Int,
            Some("1048588"),
            AtLeast(0),
            "Largest record batch the topic accepts.",
        ),
        broker_synonyms: &[("message.max.bytes", 1)],
    },
    TopicConfigDef {
        def: def(
            "message.timestamp.after.max.ms",
            T::Long,
            Some("3600000"),
            AtLeast(0),
            "How far in the future a CreateTime timestamp may be.",
        ),
        broker_synonyms: &[("log.message.timestamp.after.max.ms", 1)],
    },
    TopicConfigDef {
        def: def(
            "message.timestamp.before.max.ms",
            T::Long,
            Some(LONG_MAX),
            AtLeast(0),
            "How far in the past a CreateTime timestamp may be.",
        ),
        broker_synonyms: &[("log.message.timestamp.before.max.ms", 1)],
    },
    TopicConfigDef {
        def: def(
            "message.timestamp.type",
            T::String,
            Some("CreateTime"),
            OneOf(TIMESTAMP_TYPES),
            "Whether record timestamps are the producer's or the broker's append time.",
        ),
        broker_synonyms: &[("log.message.timestamp.type", 1)],
    },
    TopicConfigDef {
        def: def(
            "min.cleanable.dirty.ratio",
            T::Double,
            Some("0.5"),
            DoubleBetween(0.0, 1.0),
            "Dirty ratio that makes a compacted log eligible for cleaning.",
        ),
        broker_synonyms: &[("log.cleaner.min.cleanable.ratio", 1)],
    },
    TopicConfigDef {
        def: def(
            "min.compaction.lag.ms",
            T::Long,
            Some("0"),
            AtLeast(0),
            "Shortest a record stays uncompacted.",
        ),
        broker_synonyms: &[("log.cleaner.min.compaction.lag.ms", 1)],
    },
    TopicConfigDef {
        def: def(
            "min.insync.replicas",
            T::Int,
            Some("1"),
            AtLeast(1),
            "In-sync replicas required for an acks=all write.",
        ),
        broker_synonyms: &[("min.insync.replicas", 1)],
    },
    TopicConfigDef {
        def: def(
            "preallocate",
            T::Boolean,
            Some("false"),
            Any,
            "Preallocate segment files.",
        ),
        broker_synonyms: &[("log.preallocate", 1)],
    },
    TopicConfigDef {
        def: def(
            "remote.log.copy.disable",
            T::Boolean,
            Some("false"),
            Any,
            "Stop copying segments to tiered storage.",
        ),
        broker_synonyms: &[],
    },
    TopicConfigDef {
        def: def(
            "remote.log.delete.on.disable",
            T::Boolean,
            Some("false"),
            Any,
            "Delete tiered data when tiered storage is disabled.",
        ),
        broker_synonyms: &[],
    },
    TopicConfigDef {
        def: def(
            "remote.storage.enable",
            T::Boolean,
            Some("false"),
            Custom(no_remote_storage),
            "Tiered storage for the topic (not supported).",
        ),
        broker_synonyms: &[],
    },
    TopicConfigDef {
        def: def(
            "retention.bytes",
            T::Long,
            Some("-1"),
            Any,
            "Largest size of a partition before old segments are deleted; -1 is unlimited.",
        ),
        broker_synonyms: &[("log.retention.bytes", 1)],
    },
    TopicConfigDef {
        def: def(
            "retention.ms",
            T::Long,
            Some("604800000"),
            AtLeast(-1),
            "Longest a segment is kept; -1 is unlimited.",
        ),
        broker_synonyms: &[
            ("log.retention.ms", 1),
            ("log.retention.minutes", MINUTE_MS),
            ("log.retention.hours", HOUR_MS),
        ],
    },
    TopicConfigDef {
        def: def(
            "segment.bytes",
            T::Int,
            Some("1073741824"),
            AtLeast(14),
            "Size at which a segment rolls.",
        ),
        broker_synonyms: &[("log.segment.bytes", 1)],
    },
    TopicConfigDef {
        def: def(
            "segment.index.bytes",
            T::Int,
            Some("10485760"),
            AtLeast(4),
            "Size of a segment's offset and time index files.",
        ),
        broker_synonyms: &[("log.index.size.max.bytes", 1)],
    },
    TopicConfigDef {
        def: def(
            "segment.jitter.ms",
            T::Long,
            Some("0"),
            AtLeast(0),
            "Random jitter subtracted from segment.ms.",
        ),
        broker_synonyms: &[
            ("log.roll.jitter.ms", 1),
            ("log.roll.jitter.hours", HOUR_MS),
        ],
    },
    TopicConfigDef {
        def: def(
            "segment.ms",
            T::Long,
            Some("604800000"),
            AtLeast(1),
            "Age at which a segment rolls.",
        ),
        broker_synonyms: &[("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)],
    },
    TopicConfigDef {
        def: def(
            "unclean.leader.election.enable",
            T::Boolean,
            Some("false"),
            Any,
            "Allow an out-of-sync replica to become leader.",
        ),
        broker_synonyms: &[("unclean.leader.election.enable", 1)],
    },
];

fn no_remote_storage(v: &str) -> Result<(), String> {
    if v.eq_ignore_ascii_case("true") {
        Err("Tiered Storage functionality is disabled in the broker".into())
    } else {
        Ok(())
    }
}

/// The broker configs Sluice knows. Keys outside this list are reported as unknown.
pub static BROKER_CONFIGS: &[ConfigDef] = &[
    def("node.id", T::Int, Some("0"), AtLeast(0), "This node's id."),
    def(
        "broker.id",
        T::Int,
        None,
        AtLeast(-1),
        "Synonym of node.id.",
    ),
    def(
        "process.roles",
        T::List,
        Some("broker,controller"),
        Custom(roles),
        "broker, controller, or both (combined mode).",
    ),
    def(
        "listeners",
        T::String,
        Some("PLAINTEXT://127.0.0.1:9092"),
        Custom(listener_list),
        "Comma-separated NAME://host:port listeners; port 0 picks a free port.",
    ),
    def(
        "advertised.listeners",
        T::String,
        None,
        Custom(listener_list),
        "Listeners given to clients in metadata; defaults to listeners.",
    ),
    def(
        "listener.security.protocol.map",
        T::String,
        Some("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
        Any,
        "Listener name to security protocol.",
    ),
    def(
        "controller.listener.names",
        T::String,
        None,
        Any,
        "Listeners used by the controller quorum.",
    ),
    def(
        "controller.quorum.voters",
        T::List,
        Some(""),
        Any,
        "id@host:port of each controller voter.",
    ),
    def(
        "controller.quorum.bootstrap.servers",
        T::List,
        Some(""),
        Any,
        "host:port of controllers to bootstrap from.",
    ),
    def(
        "broker.session.timeout.ms",
        T::Int,
        Some("9000"),
        AtLeast(1),
        "A broker that has not heartbeated for this long is fenced.",
    ),
    def(
        "broker.heartbeat.interval.ms",
        T::Int,
        Some("2000"),
        AtLeast(1),
        "How often a broker heartbeats to the active controller.",
    ),
    def(
        "controller.quorum.election.timeout.ms",
        T::Int,
        Some("1000"),
        AtLeast(1),
        "How long a voter waits for the leader before starting an election.",
    ),
    def(
        "metadata.log.segment.bytes",
        T::Int,
        Some("1073741824"),
        AtLeast(1024),
        "Segment size of the metadata log.",
    ),
    def(
        "metadata.log.max.record.bytes.between.snapshots",
        T::Long,
        Some("20971520"),
        AtLeast(1),
        "Metadata log bytes between snapshots (counted as 1 KiB per entry).",
    ),
    def(
        "producer.id.expiration.ms",
        T::Int,
        Some("86400000"),
        AtLeast(1),
        "How long an idempotent producer may stay silent before its state is forgotten.",
    ),
    def(
        "ssl.keystore.type",
        T::String,
        Some("PEM"),
        OneOf(&["PEM"]),
        "Format of the key store: PEM (JKS and PKCS12 stores are not read; convert them to PEM).",
    ),
    def(
        "ssl.keystore.location",
        T::String,
        None,
        Any,
        "PEM file with this broker's certificate chain and its unencrypted private key.",
    ),
    def(
        "ssl.key.password",
        T::Password,
        None,
        Any,
        "Password of an encrypted private key (not supported: use an unencrypted PEM key).",
    ),
    def(
        "ssl.truststore.type",
        T::String,
        Some("PEM"),
        OneOf(&["PEM"]),
        "Format of the trust store: PEM.",
    ),
    def(
        "ssl.truststore.location",
        T::String,
        None,
        Any,
        "PEM file with the CA certificates that client certificates must chain to.",
    ),
    def(
        "ssl.client.auth",
        T::String,
        Some("none"),
        OneOf(&["required", "requested", "none"]),
        "Whether clients of SSL listeners must (required) or may (requested) present a certificate.",
    ),
    def(
        "ssl.enabled.protocols",
        T::List,
        Some("TLSv1.2,TLSv1.3"),
        EachOf(&["TLSv1.2", "TLSv1.3"]),
        "TLS versions SSL listeners accept.",
    ),
    def(
        "authorizer.class.name",
        T::String,
        Some(""),
        OneOf(&[
            "",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "kafka.security.authorizer.AclAuthorizer",
        ]),
        "Empty: no authorization. StandardAuthorizer (or AclAuthorizer): every request is checked against the ACLs in cluster metadata.",
    ),
    def(
        "super.users",
        T::String,
        Some(""),
        Any,
        "Principals that every ACL check allows, separated by ';' (e.g. User:admin;User:ANONYMOUS).",
    ),
    def(
        "allow.everyone.if.no.acl.found",
        T::Boolean,
        Some("false"),
        Any,
        "Whether a resource no ACL matches is open to everyone (true) or to super users only.",
    ),
    def(
        "admin.http.listener",
        T::String,
        Some("127.0.0.1:9644"),
        Custom(host_port_or_empty),
        "Address of the admin HTTP listener (/metrics, /health, /ready, /api/...); empty for none.",
    ),
    def(
        "quota.window.num",
        T::Int,
        Some("11"),
        AtLeast(1),
        "Samples kept in memory for client quotas.",
    ),
    def(
        "quota.window.size.seconds",
        T::Int,
        Some("1"),
        AtLeast(1),
        "Time span of each client quota sample.",
    ),
    def(
        "controller.quota.window.num",
        T::Int,
        Some("11"),
        AtLeast(1),
        "Samples of the controller mutation quota: its bucket holds the rate times this \
         many windows.",
    ),
    def(
        "controller.quota.window.size.seconds",
        T::Int,
        Some("1"),
        AtLeast(1),
        "Time span of each controller mutation quota sample.",
    ),
    def(
        "sasl.enabled.mechanisms",
        T::List,
        Some("GSSAPI"),
        Any,
        "SASL mechanisms SASL listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI and OAUTHBEARER are not supported).",
    ),
    def(
        "sasl.jaas.config",
        T::Password,
        None,
        Any,
        "Per listener and mechanism (listener.name.<listener>.plain.sasl.jaas.config): the PlainLoginModule entry whose user_<name>=\"<password>\" options are the PLAIN users.",
    ),
    def(
        "sasl.mechanism.inter.broker.protocol",
        T::String,
        Some("GSSAPI"),
        Any,
        "SASL mechanism brokers authenticate to each other with on a SASL inter-broker listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); the credentials are the username and password options of listener.name.<listener>.<mechanism>.sasl.jaas.config.",
    ),
    def(
        "ssl.endpoint.identification.algorithm",
        T::String,
        Some("https"),
        Any,
        "https (any case): a broker connecting to another over TLS checks that its certificate names the host it connected to; empty: only that the certificate chains to the trust store.",
    ),
    def(
        "sasl.server.max.receive.size",
        T::Int,
        Some("524288"),
        AtLeast(1),
        "Largest request a client may send before it has authenticated.",
    ),
    def(
        "connections.max.reauth.ms",
        T::Long,
        Some("0"),
        Custom(no_reauthentication),
        "SASL re-authentication (KIP-368) is not supported: 0, so sessions never expire and clients are told so.",
    ),
    def(
        "inter.broker.listener.name",
        T::String,
        None,
        Any,
        "Listener brokers use among themselves.",
    ),
    def(
        "log.dirs",
        T::String,
        None,
        Any,
        "Directory holding the log data.",
    ),
    def(
        "log.dir",
        T::String,
        Some("./sluice-data"),
        Any,
        "Directory holding the log data, when log.dirs is unset.",
    ),
    def(
        "metadata.log.dir",
        T::String,
        None,
        Any,
        "Directory of the metadata log; defaults to the log directory.",
    ),
    def(
        "num.partitions",
        T::Int,
        Some("1"),
        AtLeast(1),
        "Default partition count of new topics.",
    ),
    def(
        "default.replication.factor",
        T::Int,
        Some("1"),
        AtLeast(1),
        "Default replication factor of new topics.",
    ),
    def(
        "auto.create.topics.enable",
        T::Boolean,
        Some("true"),
        Any,
        "Create topics on first Metadata or Produce request.",
    ),
    def(
        "delete.topic.enable",
        T::Boolean,
        Some("true"),
        Any,
        "Allow DeleteTopics.",
    ),
    dynamic(def(
        "message.max.bytes",
        T::Int,
        Some("1048588"),
        AtLeast(0),
        "Largest record batch accepted (topic max.message.bytes default).",
    )),
    dynamic(def(
        "min.insync.replicas",
        T::Int,
        Some("1"),
        AtLeast(1),
        "Default min.insync.replicas of topics.",
    )),
    dynamic(def(
        "compression.type",
        T::String,
        Some("producer"),
        OneOf(CODECS),
        "Default compression.type of topics.",
    )),
    dynamic(def(
        "compression.gzip.level",
        T::Int,
        Some("-1"),
        Custom(gzip_level),
        "Default gzip level.",
    )),
    dynamic(def(
        "compression.lz4.level",
        T::Int,
        Some("9"),
        Between(1, 17),
        "Default lz4 level.",
    )),
    dynamic(def(
        "compression.zstd.level",
        T::Int,
        Some("3"),
        Between(-131_072, 22),
        "Default zstd level.",
    )),
    dynamic(def(
        "unclean.leader.election.enable",
        T::Boolean,
        Some("false"),
        Any,
        "Default unclean.leader.election.enable of topics.",
    )),
    dynamic(def(
        "log.segment.bytes",
        T::Int,
        Some("1073741824"),
        AtLeast(14),
        "Default segment.bytes.",
    )),
    dynamic(def(
        "log.roll.ms",
        T::Long,
        None,
        AtLeast(1),
        "Default segment.ms; overrides log.roll.hours.",
    )),
    def(
        "log.roll.hours",
        T::Int,
        Some("168"),
        AtLeast(1),
        "Default segment.ms in hours.",
    ),
    dynamic(def(
        "log.roll.jitter.ms",
        T::Long,
        None,
        AtLeast(0),
        "Default segment.jitter.ms.",
    )),
    def(
        "log.roll.jitter.hours",
        T::Int,
        Some("0"),
        AtLeast(0),
        "Default segment.jitter.ms in hours.",
    ),
    dynamic(def(
        "log.retention.ms",
        T::Long,
        None,
        AtLeast(-1),
        "Default retention.ms; overrides minutes and hours.",
    )),
    def(
        "log.retention.minutes",
        T::Int,
        None,
        Any,
        "Default retention.ms in minutes.",
    ),
    def(
        "log.retention.hours",
        T::Int,
        Some("168"),
        Any,
        "Default retention.ms in hours.",
    ),
    dynamic(def(
        "log.retention.bytes",
        T::Long,
        Some("-1"),
        Any,
        "Default retention.bytes.",
    )),
    def(
        "log.retention.check.interval.ms",
        T::Long,
        Some("300000"),
        AtLeast(1),
        "How often retention runs.",
    ),
    dynamic(def(
        "log.cleanup.policy",
        T::List,
        Some("delete"),
        EachOf(CLEANUP),
        "Default cleanup.policy.",
    )),
    dynamic(def(
        "log.index.size.max.bytes",
        T::Int,
        Some("10485760"),
        AtLeast(4),
        "Default segment.index.bytes.",
    )),
    dynamic(def(
        "log.index.interval.bytes",
        T::Int,
        Some("4096"),
        AtLeast(0),
        "Default index.interval.bytes.",
    )),
    dynamic(def(
        "log.flush.interval.messages",
        T::Long,
        Some(LONG_MAX),
        AtLeast(1),
        "Default flush.messages.",
    )),
    dynamic(def(
        "log.flush.interval.ms",
        T::Long,
        None,
        AtLeast(0),
        "Default flush.ms.",
    )),
    def(
        "log.flush.scheduler.interval.ms",
        T::Long,
        Some(LONG_MAX),
        Any,
        "How often logs are checked for a due flush.",
    ),
    def(
        "log.flush.offset.checkpoint.interval.ms",
        T::Int,
        Some("60000"),
        AtLeast(0),
        "How often recovery points are checkpointed.",
    ),
    def(
        "log.flush.start.offset.checkpoint.interval.ms",
        T::Int,
        Some("60000"),
        AtLeast(0),
        "How often log start offsets are checkpointed.",
    ),
    dynamic(def(
        "log.segment.delete.delay.ms",
        T::Long,
        Some("60000"),
        AtLeast(0),
        "Default file.delete.delay.ms.",
    )),
    dynamic(def(
        "log.preallocate",
        T::Boolean,
        Some("false"),
        Any,
        "Default preallocate.",
    )),
    dynamic(def(
        "log.message.timestamp.type",
        T::String,
        Some("CreateTime"),
        OneOf(TIMESTAMP_TYPES),
        "Default message.timestamp.type.",
    )),
    dynamic(def(
        "log.message.timestamp.before.max.ms",
        T::Long,
        Some(LONG_MAX),
        AtLeast(0),
        "Default message.timestamp.before.max.ms.",
    )),
    dynamic(def(
        "log.message.timestamp.after.max.ms",
        T::Long,
        Some("3600000"),
        AtLeast(0),
        "Default message.timestamp.after.max.ms.",
    )),
    dynamic(def(
        "log.local.retention.ms",
        T::Long,
        Some("-2"),
        AtLeast(-2),
        "Default local.retention.ms.",
    )),
    dynamic(def(
        "log.local.retention.bytes",
        T::Long,
        Some("-2"),
        AtLeast(-2),
        "Default local.retention.bytes.",
    )),
    def(
        "log.cleaner.enable",
        T::Boolean,
        Some("true"),
        Any,
        "Run the log cleaner for compacted topics.",
    ),
    dynamic(def(
        "log.cleaner.backoff.ms",
        T::Long,
        Some("15000"),
        AtLeast(0),
        "Pause between log cleaner passes.",
    )),
    dynamic(def(
        "log.cleaner.delete.retention.ms",
        T::Long,
        Some("86400000"),
        AtLeast(0),
        "Default delete.retention.ms.",
    )),
    dynamic(def(
        "log.cleaner.min.compaction.lag.ms",
        T::Long,
        Some("0"),
        AtLeast(0),
        "Default min.compaction.lag.ms.",
    )),
    dynamic(def(
        "log.cleaner.max.compaction.lag.ms",
        T::Long,
        Some(LONG_MAX),
        AtLeast(1),
        "Default max.compaction.lag.ms.",
    )),
    dynamic(def(
        "log.cleaner.min.cleanable.ratio",
        T::Double,
        Some("0.5"),
        DoubleBetween(0.0, 1.0),
        "Default min.cleanable.dirty.ratio.",
    )),
    def(
        "socket.request.max.bytes",
        T::Int,
        Some("104857600"),
        AtLeast(1),
        "Largest request frame accepted.",
    ),
    def(
        "socket.send.buffer.bytes",
        T::Int,
        Some("102400"),
        Any,
        "SO_SNDBUF of client sockets; -1 keeps the OS default.",
    ),
    def(
        "socket.receive.buffer.bytes",
        T::Int,
        Some("102400"),
        Any,
        "SO_RCVBUF of client sockets; -1 keeps the OS default.",
    ),
    def(
        "socket.listen.backlog.size",
        T::Int,
        Some("50"),
        AtLeast(1),
        "Accept backlog of each listener.",
    ),
    def(
        "queued.max.requests",
        T::Int,
        Some("500"),
        AtLeast(1),
        "Requests the broker holds read and not yet answered or parked; past it, it stops \
         reading from connections.",
    ),
    def(
        "queued.max.request.bytes",
        T::Long,
        Some("-1"),
        Any,
        "Bytes of requests the broker holds read and not yet answered or parked; past it, it \
         stops reading from connections. -1: no bound beyond queued.max.requests.",
    ),
    dynamic(def(
        "num.network.threads",
        T::Int,
        Some("3"),
        AtLeast(1),
        "Accepted for compatibility; Sluice sizes its runtime by cores.",
    )),
    dynamic(def(
        "num.io.threads",
        T::Int,
        Some("8"),
        AtLeast(1),
        "Accepted for compatibility; Sluice sizes its runtime by cores.",
    )),
    dynamic(def(
        "num.recovery.threads.per.data.dir",
        T::Int,
        Some("2"),
        AtLeast(1),
        "Accepted for compatibility.",
    )),
    def(
        "connections.max.idle.ms",
        T::Long,
        Some("600000"),
        Any,
        "Idle connections are closed after this long.",
    ),
    dynamic(def(
        "max.connections",
        T::Int,
        Some("2147483647"),
        AtLeast(0),
        "Most concurrent connections on the broker's listeners together; at the limit new \
         connections wait to be accepted (the inter-broker listener's are always taken).",
    )),
    dynamic(def(
        "max.connections.per.ip",
        T::Int,
        Some("2147483647"),
        AtLeast(0),
        "Most concurrent connections from one address; more are closed at once.",
    )),
    dynamic(def(
        "max.connections.per.ip.overrides",
        T::String,
        Some(""),
        Custom(per_ip_overrides),
        "Per-address exceptions to max.connections.per.ip, as host:count pairs.",
    )),
    def(
        "request.timeout.ms",
        T::Int,
        Some("30000"),
        Any,
        "Upper bound of a request's server-side wait.",
    ),
    def(
        "fetch.max.bytes",
        T::Int,
        Some("57671680"),
        AtLeast(1024),
        "Largest fetch response served.",
    ),
    def(
        "max.incremental.fetch.session.cache.slots",
        T::Int,
        Some("1000"),
        AtLeast(0),
        "Incremental fetch sessions (KIP-227) kept; below 8, none.",
    ),
    def(
        "offsets.topic.num.partitions",
        T::Int,
        Some("50"),
        AtLeast(1),
        "Partitions of __consumer_offsets.",
    ),
    def(
        "offsets.topic.replication.factor",
        T::Short,
        Some("3"),
        AtLeast(1),
        "Replication factor of __consumer_offsets (capped by live brokers).",
    ),
    def(
        "transaction.state.log.num.partitions",
        T::Int,
        Some("50"),
        AtLeast(1),
        "Partitions of __transaction_state.",
    ),
    def(
        "transaction.state.log.replication.factor",
        T::Short,
        Some("3"),
        AtLeast(1),
        "Replication factor of __transaction_state (capped by live brokers).",
    ),
    def(
        "transaction.state.log.min.isr",
        T::Int,
        Some("2"),
        AtLeast(1),
        "min.insync.replicas of __transaction_state (capped by its replication factor).",
    ),
    def(
        "transaction.state.log.segment.bytes",
        T::Int,
        Some("104857600"),
        AtLeast(1),
        "segment.bytes of __transaction_state.",
    ),
    def(
        "transaction.max.timeout.ms",
        T::Int,
        Some("900000"),
        AtLeast(1),
        "Longest transaction.timeout.ms a producer may ask for.",
    ),
    def(
        "transactional.id.expiration.ms",
        T::Int,
        Some("604800000"),
        AtLeast(1),
        "A transactional id with no transaction for this long is forgotten.",
    ),
    def(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        T::Int,
        Some("10000"),
        AtLeast(1),
        "How often open transactions are checked against their timeouts.",
    ),
    def(
        "offsets.topic.segment.bytes",
        T::Int,
        Some("104857600"),
        AtLeast(1),
        "segment.bytes of __consumer_offsets.",
    ),
    def(
        "offsets.retention.minutes",
        T::Int,
        Some("10080"),
        AtLeast(1),
        "How long offsets of an empty group are kept.",
    ),
    def(
        "offsets.retention.check.interval.ms",
        T::Long,
        Some("600000"),
        AtLeast(1),
        "How often expired offsets are removed.",
    ),
    def(
        "offset.metadata.max.bytes",
        T::Int,
        Some("4096"),
        Any,
        "Largest metadata string of a committed offset.",
    ),
    def(
        "group.min.session.timeout.ms",
        T::Int,
        Some("6000"),
        Any,
        "Smallest session timeout a member may ask for.",
    ),
    def(
        "group.max.session.timeout.ms",
        T::Int,
        Some("1800000"),
        Any,
        "Largest session timeout a member may ask for.",
    ),
    def(
        "group.max.size",
        T::Int,
        Some("2147483647"),
        AtLeast(1),
        "Most members of a consumer group.",
    ),
    def(
        "group.initial.rebalance.delay.ms",
        T::Int,
        Some("3000"),
        Any,
        "Delay before the first rebalance of an empty group.",
    ),
    def(
        "replica.lag.time.max.ms",
        T::Long,
        Some("30000"),
        Any,
        "Time a follower may lag before leaving the ISR.",
    ),
    def(
        "replica.fetch.max.bytes",
        T::Int,
        Some("1048576"),
        AtLeast(0),
        "Bytes a follower asks for per partition in one fetch.",
    ),
    def(
        "replica.fetch.response.max.bytes",
        T::Int,
        Some("10485760"),
        AtLeast(0),
        "Bytes a follower asks for in one fetch.",
    ),
    def(
        "replica.fetch.wait.max.ms",
        T::Int,
        Some("500"),
        AtLeast(0),
        "How long the leader may hold a follower's fetch waiting for data.",
    ),
    def(
        "replica.socket.timeout.ms",
        T::Int,
        Some("30000"),
        AtLeast(1),
        "How long a broker waits for another to accept a connection (TLS and SASL included) or to answer a replica fetch beyond its wait.",
    ),
    def(
        "replica.fetch.backoff.ms",
        T::Int,
        Some("1000"),
        AtLeast(0),
        "Pause after a failed replica fetch.",
    ),
    def(
        "auto.leader.rebalance.enable",
        T::Boolean,
        Some("true"),
        Any,
        "Move leadership back to preferred replicas when brokers are imbalanced.",
    ),
    def(
        "leader.imbalance.check.interval.seconds",
        T::Long,
        Some("300"),
        AtLeast(1),
        "How often the active controller checks leader imbalance.",
    ),
    def(
        "leader.imbalance.per.broker.percentage",
        T::Int,
        Some("10"),
        AtLeast(0),
        "Misplaced leaderships a broker may have, in percent, before a rebalance.",
    ),
    dynamic(def(
        "num.replica.fetchers",
        T::Int,
        Some("1"),
        AtLeast(1),
        "Fetchers (each with its own connection) per source broker; partitions are spread \
         over them by a hash of topic and partition.",
    )),
    dynamic(def(
        "leader.replication.throttled.rate",
        T::Long,
        Some(LONG_MAX),
        AtLeast(0),
        "Bytes per second this broker sends, as leader, to out-of-sync replicas named in \
         the topics' leader.replication.throttled.replicas.",
    )),
    dynamic(def(
        "follower.replication.throttled.rate",
        T::Long,
        Some(LONG_MAX),
        AtLeast(0),
        "Bytes per second this broker fetches, as an out-of-sync follower, for replicas \
         named in the topics' follower.replication.throttled.replicas.",
    )),
    def(
        "replication.quota.window.num",
        T::Int,
        Some("11"),
        AtLeast(1),
        "Samples the replication quotas are measured over.",
    ),
    def(
        "replication.quota.window.size.seconds",
        T::Int,
        Some("1"),
        AtLeast(1),
        "Time span of each replication quota sample.",
    ),
];

pub fn broker_def(name: &str) -> Option<&'static ConfigDef> {
    BROKER_CONFIGS.iter().find(|d| d.name == name)
}

pub fn topic_def(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.def.name == name)
}

fn type_name(ty: ConfigType) -> &'static str {
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

/// How a listener secures its connections (`listener.security.protocol.map`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(v: &str) -> Option<Self> {
        Some(match v {
            "PLAINTEXT" => Self::Plaintext,
            "SSL" => Self::Ssl,
            "SASL_PLAINTEXT" => Self::SaslPlaintext,
            "SASL_SSL" => Self::SaslSsl,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }
}

/// `listener.name.<listener>.<key>` overrides: `ssl.*` settings may differ per listener.
const LISTENER_OVERRIDABLE: &[&str] = &[
    "max.connections",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
];

/// How a broker connects to the other brokers (see [`BrokerConfig::inter_broker_client`]).
/// `Debug` leaves the password out.
#[derive(Clone, PartialEq, Eq)]
pub struct InterBrokerClient {
    /// The listener's name (None: the broker has no listener for other brokers).
    pub listener: Option<String>,
    pub protocol: SecurityProtocol,
    /// PEM trust store (TLS).
    pub truststore: Option<String>,
    /// PEM key store presented as the client certificate (TLS), when the listener has one.
    pub keystore: Option<String>,
    /// Whether the other broker's certificate must name the host.
    pub verify_hostname: bool,
    /// (mechanism, username, password) for SASL.
    pub sasl: Option<(String, String, String)>,
}

impl fmt::Debug for InterBrokerClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InterBrokerClient")
            .field("listener", &self.listener)
            .field("protocol", &self.protocol)
            .field("truststore", &self.truststore)
            .field("keystore", &self.keystore)
            .field("verify_hostname", &self.verify_hostname)
            .field(
                "sasl",
                &self.sasl.as_ref().map(|(m, u, _)| (m, u, "[hidden]")),
            )
            .finish()
    }
}

impl Default for InterBrokerClient {
    fn default() -> Self {
        Self {
            listener: None,
            protocol: SecurityProtocol::Plaintext,
            truststore: None,
            keystore: None,
            verify_hostname: true,
            sasl: None,
        }
    }
}

/// The SASL mechanisms Sluice implements.
pub const SASL_MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

fn plain_jaas_key(listener: &str) -> String {
    format!(
        "listener.name.{}.plain.sasl.jaas.config",
        listener.to_lowercase()
    )
}

pub use sluice_protocol::jaas::parse as parse_jaas;

/// The setting a `listener.name.<listener>.<key>` key overrides, if it is one.
fn listener_override(key: &str) -> Option<(&str, &'static ConfigDef)> {
    let rest = key.strip_prefix("listener.name.")?;
    let (listener, setting) = rest.split_once('.')?;
    // `<mechanism>.sasl.jaas.config`: a login module per SASL mechanism.
    let setting = match setting.split_once(".sasl.jaas.config") {
        Some((mech, "")) if !mech.is_empty() && !mech.contains('.') => "sasl.jaas.config",
        _ => setting,
    };
    let def = broker_def(setting).filter(|d| LISTENER_OVERRIDABLE.contains(&d.name))?;
    (!listener.is_empty()).then_some((listener, def))
}

/// A listener: `NAME://host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

pub fn parse_listeners(v: &str) -> Result<Vec<Listener>, String> {
    let mut out = Vec::new();
    for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, rest) = item
            .split_once("://")
            .ok_or_else(|| format!("listener {item} is not of the form NAME://host:port"))?;
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("listener {item} has no port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("listener {item} has an invalid port"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if out.iter().any(|l: &Listener| l.name == name) {
            return Err(format!("listener name {name} appears more than once"));
        }
        out.push(Listener {
            name: name.to_string(),
            host,
            port,
        });
    }
    Ok(out)
}

/// A startup configuration error: stops the server with one line naming the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.contains(&self.key) {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// Where a setting came from, lowest precedence first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    File,
    Env,
    Override,
}

/// Environment variables with the `SLUICE_` prefix that are not broker configs.
pub const NON_CONFIG_ENV: &[&str] = &[
    "SLUICE_BOOTSTRAP",
    "SLUICE_LOG",
    "SLUICE_DATA_DIR_FOR_TESTS",
];

/// `SLUICE_LOG_SEGMENT_BYTES` -> `log.segment.bytes` (`__` -> `_`, `___` -> `-`, as Kafka's
/// container images map `KAFKA_*`).
pub fn env_key_to_config(var: &str) -> Option<String> {
    let rest = var.strip_prefix("SLUICE_")?;
    if NON_CONFIG_ENV.contains(&var) || rest.is_empty() {
        return None;
    }
    let lower = rest.to_ascii_lowercase();
    Some(
        lower
            .replace("___", "\u{1}")
            .replace("__", "\u{2}")
            .replace('_', ".")
            .replace('\u{1}', "-")
            .replace('\u{2}', "_"),
    )
}

/// The broker's static configuration: explicitly set keys plus Kafka's defaults.
#[derive(Clone, Debug, Default)]
pub struct BrokerConfig {
    set: BTreeMap<String, String>,
}

impl BrokerConfig {
    /// Merge settings (later origins win), validate every known key, and report unknown ones.
    /// Returns the config and one warning per unknown key.
    pub fn build(
        settings: &[(Origin, String, String)],
    ) -> Result<(Self, Vec<String>), ConfigError> {
        let mut ordered: Vec<&(Origin, String, String)> = settings.iter().collect();
        ordered.sort_by_key(|(o, _, _)| *o as u8);
        let mut set = BTreeMap::new();
        let mut warnings = Vec::new();
        for (_, k, v) in ordered {
            set.insert(k.trim().to_string(), v.trim().to_string());
        }
        for (k, v) in &set {
            match broker_def(k).or_else(|| listener_override(k).map(|(_, d)| d)) {
                Some(d) => validate(d, v).map_err(|message| ConfigError {
                    key: k.clone(),
                    message,
                })?,
                None => warnings.push(format!("unknown configuration key '{k}' is ignored")),
            }
        }
        let cfg = Self { set };
        cfg.check_consistency()?;
        Ok((cfg, warnings))
    }

    fn check_consistency(&self) -> Result<(), ConfigError> {
        if let (Some(b), Some(n)) = (self.set.get("broker.id"), self.set.get("node.id")) {
            if b != n && b != "-1" {
                return Err(ConfigError {
                    key: "broker.id".into(),
                    message: format!("broker.id={b} must equal node.id={n}"),
                });
            }
        }
        if self.listeners().is_empty() {
            return Err(ConfigError {
                key: "listeners".into(),
                message: "at least one listener is required".into(),
            });
        }
        let (broker, controller) = self.roles();
        let voters = self.quorum_voters().map_err(|message| ConfigError {
            key: "controller.quorum.voters".into(),
            message,
        })?;
        let names = self.controller_listener_names();
        let err = |key: &str, message: String| ConfigError {
            key: key.into(),
            message,
        };
        if self.explicit("process.roles").is_some() || !voters.is_empty() {
            let bootstrap = self
                .value("controller.quorum.bootstrap.servers")
                .unwrap_or_default();
            if voters.is_empty() && (controller || bootstrap.trim().is_empty()) {
                return Err(err(
                    "controller.quorum.voters",
                    "a multi-node cluster needs controller.quorum.voters (id@host:port,...); controller.quorum.bootstrap.servers alone (a dynamic quorum) is not supported".into(),
                ));
            }
            if controller {
                if names.is_empty() {
                    return Err(err(
                        "controller.listener.names",
                        "is required when process.roles includes controller".into(),
                    ));
                }
                if !self.listeners().iter().any(|l| names.contains(&l.name)) {
                    return Err(err(
                        "listeners",
                        format!("must include the controller listener {}", names.join(",")),
                    ));
                }
                if !voters.iter().any(|(id, _)| *id == self.node_id()) {
                    return Err(err(
                        "controller.quorum.voters",
                        format!(
                            "node.id={} has the controller role but is not a voter",
                            self.node_id()
                        ),
                    ));
                }
            }
            if broker && !self.listeners().iter().any(|l| !names.contains(&l.name)) {
                return Err(err(
                    "listeners",
                    "a broker needs a listener that is not a controller listener".into(),
                ));
            }
        }
        self.check_security()?;
        if self.log_dirs().len() != 1 {
            return Err(ConfigError {
                key: "log.dirs".into(),
                message: "exactly one log directory is supported".into(),
            });
        }
        Ok(())
    }

    /// Every listener's security protocol is known and supported, and SSL listeners have
    /// what they need; the ways nodes connect to each other are complete.
    fn check_security(&self) -> Result<(), ConfigError> {
        let err = |key: String, message: String| ConfigError { key, message };
        for l in self.listeners() {
            let protocol = self
                .security_protocol(&l.name)
                .map_err(|m| err("listener.security.protocol.map".into(), m))?;
            if matches!(protocol, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl) {
                self.check_ssl(&l.name)?;
            }
            if matches!(
                protocol,
                SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
            ) {
                self.check_sasl(&l.name)?;
            }
        }
        if let Some(name) = self.explicit("inter.broker.listener.name") {
            let name = name.to_string();
            if !self.listeners().iter().any(|l| l.name == name) {
                return Err(err(
                    "inter.broker.listener.name".into(),
                    format!("{name} is not one of the listeners"),
                ));
            }
        }
        for name in self.controller_listener_names() {
            if !matches!(
                self.security_protocol(&name).ok(),
                Some(SecurityProtocol::Plaintext | SecurityProtocol::Ssl)
            ) {
                return Err(err(
                    "controller.listener.names".into(),
                    format!(
                        "controller listener {name} must be PLAINTEXT or SSL: the quorum's own connections do not do SASL (authenticate them with client certificates: SSL with ssl.client.auth=required)"
                    ),
                ));
            }
        }
        self.inter_broker_client()?;
        self.controller_client()?;
        Ok(())
    }

    /// How this node connects to the controllers (Raft between voters, and a broker's calls
    /// to the active controller): the first controller listener's protocol, and for SSL its
    /// trust store, key store (the client certificate) and host name check, as Kafka does.
    pub fn controller_client(&self) -> Result<InterBrokerClient, ConfigError> {
        let mut client = self.client_of(self.controller_listener_names().into_iter().next())?;
        if let (Some(listener), SecurityProtocol::Ssl) = (client.listener.clone(), client.protocol)
        {
            self.tls_client(&listener, &mut client, "nodes connect to the controllers")?;
        }
        Ok(client)
    }

    /// A client of `listener` with its security protocol (no listener: plaintext).
    fn client_of(&self, listener: Option<String>) -> Result<InterBrokerClient, ConfigError> {
        let Some(listener) = listener else {
            return Ok(InterBrokerClient::default());
        };
        let protocol = self
            .security_protocol(&listener)
            .map_err(|message| ConfigError {
                key: "listener.security.protocol.map".into(),
                message,
            })?;
        Ok(InterBrokerClient {
            listener: Some(listener),
            protocol,
            ..InterBrokerClient::default()
        })
    }

    /// The TLS side of a connection to `listener` (see [`Self::inter_broker_client`]);
    /// `who` says which connections need it, for the error.
    fn tls_client(
        &self,
        listener: &str,
        client: &mut InterBrokerClient,
        who: &str,
    ) -> Result<(), ConfigError> {
        let err = |key: String, message: String| ConfigError { key, message };
        let key = self.listener_key(listener, "ssl.truststore.location");
        client.truststore = Some(self.value(&key).ok_or_else(|| {
            err(
                key.clone(),
                format!("{key} is required: {who} over the TLS listener {listener} and check the certificates against it"),
            )
        })?);
        client.keystore = self.listener_value(listener, "ssl.keystore.location");
        let key = self.listener_key(listener, "ssl.endpoint.identification.algorithm");
        client.verify_hostname = match self.value(&key).unwrap_or_default().trim() {
            "" => false,
            v if v.eq_ignore_ascii_case("https") => true,
            v => return Err(err(key, format!("'{v}' must be https or empty"))),
        };
        Ok(())
    }

    /// The listener brokers reach each other on: `inter.broker.listener.name`, else the
    /// first listener that is not a controller's.
    pub fn inter_broker_listener(&self) -> Option<String> {
        let names = self.controller_listener_names();
        self.explicit("inter.broker.listener.name").map_or_else(
            || {
                self.listeners()
                    .into_iter()
                    .find(|l| !names.contains(&l.name))
                    .map(|l| l.name)
            },
            |n| Some(n.to_string()),
        )
    }

    /// How this broker connects to the others' inter-broker listener: TLS with the
    /// listener's trust store (and its key store as the client certificate), SASL with
    /// `sasl.mechanism.inter.broker.protocol` and the username/password of that mechanism's
    /// JAAS entry on the listener — as Kafka does.
    pub fn inter_broker_client(&self) -> Result<InterBrokerClient, ConfigError> {
        let err = |key: String, message: String| ConfigError { key, message };
        let mut client = self.client_of(self.inter_broker_listener())?;
        let (Some(listener), protocol) = (client.listener.clone(), client.protocol) else {
            return Ok(client);
        };
        if matches!(protocol, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl) {
            self.tls_client(&listener, &mut client, "brokers connect to each other")?;
        }
        if matches!(
            protocol,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        ) {
            let key = "sasl.mechanism.inter.broker.protocol";
            let mech = self.value(key).unwrap_or_default();
            if !SASL_MECHANISMS.contains(&mech.as_str()) {
                return Err(err(
                    key.into(),
                    format!("{mech} is not supported: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (the inter-broker listener {listener} is SASL)"),
                ));
            }
            if !self.sasl_mechanisms(&listener).contains(&mech) {
                return Err(err(
                    key.into(),
                    format!("{mech} is not in sasl.enabled.mechanisms of the inter-broker listener {listener}"),
                ));
            }
            let jaas_key = format!(
                "listener.name.{}.{}.sasl.jaas.config",
                listener.to_lowercase(),
                mech.to_lowercase()
            );
            let jaas = self.explicit(&jaas_key).ok_or_else(|| {
                err(
                    jaas_key.clone(),
                    format!("{jaas_key} is required: it holds the username and password this broker authenticates to the others with"),
                )
            })?;
            let (_, options) = parse_jaas(jaas).map_err(|m| err(jaas_key.clone(), m))?;
            let option = |name: &str| {
                sluice_protocol::jaas::option(&options, name)
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        err(
                            jaas_key.clone(),
                            format!("{jaas_key} needs a {name}=\"...\" option: the inter-broker credentials"),
                        )
                    })
            };
            client.sasl = Some((mech.clone(), option("username")?, option("password")?));
        }
        Ok(client)
    }

    /// An SSL or SASL_SSL listener has a key store, no encrypted key, and a trust store
    /// when it asks for client certificates.
    fn check_ssl(&self, listener: &str) -> Result<(), ConfigError> {
        let err = |key: String, message: String| ConfigError { key, message };
        let key = self.listener_key(listener, "ssl.keystore.location");
        if self.explicit(&key).is_none() {
            return Err(err(
                key,
                format!("is required for the TLS listener {listener}"),
            ));
        }
        let key = self.listener_key(listener, "ssl.key.password");
        if self.explicit(&key).is_some_and(|v| !v.is_empty()) {
            return Err(err(
                key,
                "encrypted private keys are not supported: give an unencrypted PEM key".into(),
            ));
        }
        let auth = self.listener_value(listener, "ssl.client.auth");
        let trust = self.listener_key(listener, "ssl.truststore.location");
        if auth.as_deref() != Some("none") && self.explicit(&trust).is_none() {
            return Err(err(
                trust,
                format!(
                    "is required with ssl.client.auth={}",
                    auth.unwrap_or_default()
                ),
            ));
        }
        Ok(())
    }

    /// A SASL listener offers only mechanisms Sluice implements, and PLAIN has its users.
    fn check_sasl(&self, listener: &str) -> Result<(), ConfigError> {
        let key = self.listener_key(listener, "sasl.enabled.mechanisms");
        let mechanisms = self.sasl_mechanisms(listener);
        if mechanisms.is_empty() {
            return Err(ConfigError {
                key,
                message: format!("no SASL mechanism enabled for listener {listener}"),
            });
        }
        for m in &mechanisms {
            if !SASL_MECHANISMS.contains(&m.as_str()) {
                return Err(ConfigError {
                    key,
                    message: format!(
                        "{m} is not supported (listener {listener}); enable one or more of {}",
                        SASL_MECHANISMS.join(", ")
                    ),
                });
            }
        }
        if mechanisms.iter().any(|m| m == "PLAIN") {
            self.plain_users(listener).map_err(|message| ConfigError {
                key: plain_jaas_key(listener),
                message,
            })?;
        }
        Ok(())
    }

    /// The SASL mechanisms listener `listener` offers, in the configured order.
    pub fn sasl_mechanisms(&self, listener: &str) -> Vec<String> {
        self.listener_value(listener, "sasl.enabled.mechanisms")
            .unwrap_or_default()
            .split(',')
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .collect()
    }

    /// PLAIN's users on listener `listener`: the `user_<name>="<password>"` options of its
    /// `listener.name.<listener>.plain.sasl.jaas.config` (Kafka's PlainLoginModule format).
    pub fn plain_users(&self, listener: &str) -> Result<BTreeMap<String, String>, String> {
        let key = plain_jaas_key(listener);
        let jaas = self
            .explicit(&key)
            .ok_or_else(|| format!("{key} is required: PLAIN is enabled on listener {listener}"))?;
        let (module, options) = parse_jaas(jaas)?;
        if !module.ends_with("PlainLoginModule") {
            return Err(format!(
                "{key}: expected org.apache.kafka.common.security.plain.PlainLoginModule, got {module}"
            ));
        }
        Ok(options
            .into_iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v)))
            .collect())
    }

    /// The security protocol of listener `name`.
    pub fn security_protocol(&self, name: &str) -> Result<SecurityProtocol, String> {
        let map = self
            .value("listener.security.protocol.map")
            .unwrap_or_default();
        let mut found = None;
        for item in map.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (l, p) = item
                .split_once(':')
                .ok_or_else(|| format!("{item} is not of the form LISTENER:PROTOCOL"))?;
            let protocol = SecurityProtocol::parse(p.trim())
                .ok_or_else(|| format!("unknown security protocol {p} for listener {l}"))?;
            if l.trim() == name {
                found = Some(protocol);
            }
        }
        match found {
            Some(p) => Ok(p),
            // Kafka maps the controller listener to PLAINTEXT when it is not named.
            None if self.controller_listener_names().iter().any(|c| c == name) => {
                Ok(SecurityProtocol::Plaintext)
            }
            None => Err(format!("listener {name} has no security protocol")),
        }
    }

    /// `listener.name.<listener>.<key>` (the listener name in lower case, as Kafka writes it).
    fn listener_key(&self, listener: &str, key: &str) -> String {
        let prefixed = format!("listener.name.{}.{key}", listener.to_lowercase());
        if self.explicit(&prefixed).is_some() {
            prefixed
        } else {
            key.to_string()
        }
    }

    /// A setting for one listener: its `listener.name.<listener>.` override, else the
    /// broker-wide value.
    pub fn listener_value(&self, listener: &str, key: &str) -> Option<String> {
        self.value(&self.listener_key(listener, key))
    }

    /// The explicitly set value of `key`, if any.
    pub fn explicit(&self, key: &str) -> Option<&str> {
        self.set.get(key).map(String::as_str)
    }

    pub fn explicit_keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.set.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Explicit value or Kafka's default.
    pub fn value(&self, key: &str) -> Option<String> {
        self.explicit(key)
            .map(str::to_owned)
            .or_else(|| broker_def(key).and_then(|d| d.default).map(str::to_owned))
    }

    fn int(&self, key: &str) -> i64 {
        self.value(key)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Whether ACLs are enforced (`authorizer.class.name` names Kafka's authorizer).
    pub fn authorizer_enabled(&self) -> bool {
        self.value("authorizer.class.name")
            .is_some_and(|v| !v.is_empty())
    }

    /// `super.users`: principals every check allows.
    pub fn super_users(&self) -> Vec<String> {
        self.value("super.users")
            .unwrap_or_default()
            .split(';')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect()
    }

    pub fn allow_everyone_if_no_acl_found(&self) -> bool {
        self.flag("allow.everyone.if.no.acl.found")
    }

    fn flag(&self, key: &str) -> bool {
        self.value(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    pub fn set_explicit(&mut self, key: &str, value: &str) {
        self.set.insert(key.to_string(), value.to_string());
    }

    pub fn node_id(&self) -> i32 {
        match self.explicit("node.id") {
            Some(v) => v.parse().unwrap_or(0),
            None => self
                .explicit("broker.id")
                .and_then(|v| v.parse().ok())
                .filter(|v| *v >= 0)
                .unwrap_or(0),
        }
    }

    pub fn roles(&self) -> (bool, bool) {
        let v = self.value("process.roles").unwrap_or_default();
        let has = |r: &str| v.split(',').any(|x| x.trim() == r);
        (has("broker"), has("controller"))
    }

    /// `controller.quorum.voters` as (id, host:port).
    pub fn quorum_voters(&self) -> Result<Vec<(i32, String)>, String> {
        let v = self.value("controller.quorum.voters").unwrap_or_default();
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|item| {
                let (id, addr) = item
                    .split_once('@')
                    .ok_or_else(|| format!("'{item}' is not id@host:port"))?;
                let id: i32 = id
                    .trim()
                    .parse()
                    .map_err(|_| format!("'{item}' has no numeric id"))?;
                if !addr.contains(':') || id < 0 {
                    return Err(format!("'{item}' is not id@host:port"));
                }
                Ok((id, addr.trim().to_string()))
            })
            .collect()
    }

    /// `controller.listener.names`.
    pub fn controller_listener_names(&self) -> Vec<String> {
        self.value("controller.listener.names")
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }

    pub fn listeners(&self) -> Vec<Listener> {
        parse_listeners(&self.value("listeners").unwrap_or_default()).unwrap_or_default()
    }

    /// What clients are told: advertised listeners (or listeners), without the
    /// controller listeners.
    pub fn advertised_listeners(&self) -> Vec<Listener> {
        let controller = self.controller_listener_names();
        match self.explicit("advertised.listeners") {
            Some(v) => parse_listeners(v).unwrap_or_default(),
            None => self.listeners(),
        }
        .into_iter()
        .filter(|l| !controller.contains(&l.name))
        .collect()
    }

    pub fn log_dirs(&self) -> Vec<PathBuf> {
        let raw = self
            .explicit("log.dirs")
            .map(str::to_owned)
            .or_else(|| self.value("log.dir"))
            .unwrap_or_default();
        raw.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect()
    }

    pub fn num_partitions(&self) -> i32 {
        self.int("num.partitions") as i32
    }

    pub fn default_replication_factor(&self) -> i16 {
        self.int("default.replication.factor") as i16
    }

    pub fn auto_create_topics(&self) -> bool {
        self.flag("auto.create.topics.enable")
    }

    pub fn delete_topic_enable(&self) -> bool {
        self.flag("delete.topic.enable")
    }

    pub fn socket_request_max_bytes(&self) -> usize {
        self.int("socket.request.max.bytes") as usize
    }

    pub fn queued_max_requests(&self) -> usize {
        self.int("queued.max.requests") as usize
    }

    pub fn connections_max_idle_ms(&self) -> i64 {
        self.int("connections.max.idle.ms")
    }

    pub fn retention_check_interval_ms(&self) -> i64 {
        self.int("log.retention.check.interval.ms")
    }

    pub fn recovery_checkpoint_interval_ms(&self) -> i64 {
        self.int("log.flush.offset.checkpoint.interval.ms")
    }

    pub fn flush_scheduler_interval_ms(&self) -> i64 {
        self.int("log.flush.scheduler.interval.ms")
    }

    /// Numeric setting (explicit or default), for the coordinator's many knobs.
    pub fn number(&self, key: &str) -> i64 {
        self.int(key)
    }

    pub fn cleaner_enabled(&self) -> bool {
        self.flag("log.cleaner.enable")
    }

    pub fn cleaner_backoff_ms(&self) -> i64 {
        self.int("log.cleaner.backoff.ms")
    }

    pub fn fetch_max_bytes(&self) -> i64 {
        self.int("fetch.max.bytes")
    }

    pub fn socket_buffer_bytes(&self) -> (i32, i32) {
        (
            self.int("socket.send.buffer.bytes") as i32,
            self.int("socket.receive.buffer.bytes") as i32,
        )
    }

    /// The broker-level default of a topic config: its highest-priority set synonym
    /// (converted to the topic config's unit), else the topic default.
    pub fn topic_default(
        &self,
        topic_key: &str,
    ) -> Option<(String, Option<(&'static str, ConfigSource)>)> {
        let tdef = topic_def(topic_key)?;
        for (syn, factor) in tdef.broker_synonyms {
            if let Some(v) = self.explicit(syn) {
                return Some((
                    scale(v, *factor),
                    Some((syn, ConfigSource::StaticBrokerConfig)),
                ));
            }
        }
        Some((tdef.def.default.unwrap_or_default().to_string(), None))
    }
}

fn scale(v: &str, factor: i64) -> String {
    if factor == 1 {
        return v.trim().to_string();
    }
    match v.trim().parse::<i64>() {
        Ok(n) if n < 0 => "-1".to_string(),
        Ok(n) => n.saturating_mul(factor).to_string(),
        Err(_) => v.to_string(),
    }
}

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

/// Broker keys AlterConfigs may change at runtime: the broker-wide defaults of topic configs
/// (`log.retention.ms`, `message.max.bytes`, ...), which every partition re-reads when they
/// change, the replication throttles and the connection limits. Other broker keys are read
/// at startup only.
pub fn dynamic_broker_key(key: &str) -> bool {
    RUNTIME_BROKER_KEYS.contains(&key)
        || listener_store_key(key).is_some()
        || listener_max_connections_key(key)
        || TOPIC_CONFIGS
            .iter()
            .any(|t| t.broker_synonyms.iter().any(|(s, _)| *s == key))
}

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
const RUNTIME_BROKER_KEYS: &[&str] = &[
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

impl BrokerConfig {
    /// This config with the dynamic broker configs applied: the cluster-wide defaults, then
    /// this broker's own (Kafka's precedence: broker, cluster default, static, default).
    pub fn with_dynamic(&self, dynamic: &DynamicBrokerConfigs) -> BrokerConfig {
        let mut c = self.clone();
        for (k, v) in dynamic.cluster_default.iter().chain(&dynamic.broker) {
            c.set.insert(k.clone(), v.clone());
        }
        c
    }
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
    // Listener settings that change at runtime (TLS store locations, connection limits):
    // with their values and sources.
    let store_keys: std::collections::BTreeSet<&str> = dynamic
        .broker
        .keys()
        .chain(dynamic.cluster_default.keys())
        .map(String::as_str)
        .chain(broker.explicit_keys().map(|(k, _)| k))
        .filter(|k| listener_store_key(k).is_some() || listener_max_connections_key(k))
        .collect();
    for k in &store_keys {
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
            read_only: false,
            sensitive: false,
            ty: if listener_max_connections_key(k) {
                T::Int
            } else {
                T::String
            },
            doc: if listener_max_connections_key(k) {
                "Most concurrent connections on this listener."
            } else {
                "A listener's PEM key or trust store; replaceable at runtime per broker."
            },
            synonyms,
        });
    }
    for (k, _) in broker.explicit_keys() {
        if broker_def(k).is_none() && !store_keys.contains(k) {
            out.push(DescribedConfig {
                name: k.to_string(),
                value: None,
                source: ConfigSource::StaticBrokerConfig,
                read_only: true,
                sensitive: true,
                ty: T::String,
                doc: "",
                synonyms: vec![(k.to_string(), None, ConfigSource::StaticBrokerConfig)],
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttled_replica_lists_and_per_ip_overrides() {
        let check = |k: &str, v: &str| validate_topic_configs([(k, Some(v))]);
        let key = "leader.replication.throttled.replicas";
        for ok in ["", "*", "0:1", "0:1, 1:2,2:3"] {
            assert!(check(key, ok).is_ok(), "{ok}");
        }
        for bad in ["0", "a:1", "0:1,x", "*,0:1"] {
            assert!(check(key, bad).is_err(), "{bad}");
        }
        assert!(names_replica("*", 5, 9));
        assert!(names_replica("0:1, 1:2", 1, 2));
        assert!(!names_replica("0:1,1:2", 1, 1));
        assert!(!names_replica("", 0, 1));
        let d = broker_def("max.connections.per.ip.overrides").unwrap();
        assert!(validate(d, "127.0.0.1:5,host.example:0").is_ok());
        for bad in ["127.0.0.1", ":3", "h:-1", "h:x"] {
            assert!(validate(d, bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_per_ip_overrides("::1:4, a:2"),
            Some(vec![("::1".to_string(), 4), ("a".to_string(), 2)])
        );
        for k in [
            "leader.replication.throttled.rate",
            "max.connections.per.ip",
            "log.retention.ms",
        ] {
            assert!(dynamic_broker_key(k), "{k}");
        }
        assert!(!dynamic_broker_key("num.io.threads"));
    }

    fn build(pairs: &[(Origin, &str, &str)]) -> Result<(BrokerConfig, Vec<String>), ConfigError> {
        let owned: Vec<(Origin, String, String)> = pairs
            .iter()
            .map(|(o, k, v)| (*o, k.to_string(), v.to_string()))
            .collect();
        BrokerConfig::build(&owned)
    }

    #[test]
    fn defaults_are_kafkas() {
        let (c, w) = build(&[]).unwrap();
        assert!(w.is_empty());
        assert_eq!(c.node_id(), 0);
        assert_eq!(c.num_partitions(), 1);
        assert!(c.auto_create_topics());
        assert_eq!(c.socket_request_max_bytes(), 104_857_600);
        assert_eq!(c.value("log.segment.bytes").as_deref(), Some("1073741824"));
        assert_eq!(c.value("log.index.interval.bytes").as_deref(), Some("4096"));
        assert_eq!(c.topic_default("retention.ms").unwrap().0, "604800000");
        assert_eq!(c.listeners()[0].port, 9092);
        assert_eq!(c.log_dirs(), vec![PathBuf::from("./sluice-data")]);
    }

    #[test]
    fn ssl_settings_may_be_given_per_listener() {
        let o = Origin::Override;
        let (c, w) = build(&[
            (o, "listeners", "PLAINTEXT://:0,INTERNAL://:0,EXTERNAL://:0"),
            (
                o,
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,EXTERNAL:SSL",
            ),
            (o, "ssl.keystore.location", "shared.pem"),
            (o, "listener.name.external.ssl.keystore.location", "ext.pem"),
            (o, "listener.name.external.ssl.client.auth", "required"),
            (
                o,
                "listener.name.external.ssl.truststore.location",
                "ca.pem",
            ),
        ])
        .unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            c.security_protocol("EXTERNAL").unwrap(),
            SecurityProtocol::Ssl
        );
        let v = |l: &str, k: &str| c.listener_value(l, k).unwrap_or_default();
        assert_eq!(v("EXTERNAL", "ssl.keystore.location"), "ext.pem");
        assert_eq!(v("INTERNAL", "ssl.keystore.location"), "shared.pem");
        assert_eq!(v("EXTERNAL", "ssl.client.auth"), "required");
        assert_eq!(v("INTERNAL", "ssl.client.auth"), "none");
        // A per-listener value is checked like the broker-wide one.
        let e = build(&[(o, "listener.name.x.ssl.client.auth", "sometimes")]).unwrap_err();
        assert_eq!(e.key, "listener.name.x.ssl.client.auth");
        // Only ssl.* settings are per listener here.
        let (_, w) = build(&[(o, "listener.name.x.num.partitions", "3")]).unwrap();
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn sasl_listeners_need_supported_mechanisms_and_plain_users() {
        let o = Origin::Override;
        let base = [
            (o, "listeners", "PLAINTEXT://:0,SECURE://:0,INNER://:0"),
            (
                o,
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL,INNER:SASL_PLAINTEXT",
            ),
            (o, "ssl.keystore.location", "server.pem"),
        ];
        let with = |extra: &[(Origin, &'static str, &'static str)]| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            build(&v)
        };
        // Kafka's default mechanism (GSSAPI) is refused with the supported list.
        let e = with(&[]).unwrap_err();
        assert_eq!(e.key, "sasl.enabled.mechanisms");
        assert!(e.message.contains("GSSAPI is not supported"), "{e}");
        let jaas = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" user_admin="a" user_alice="al\"ice";"#;
        let (c, w) = with(&[
            (o, "sasl.enabled.mechanisms", "SCRAM-SHA-512"),
            (
                o,
                "listener.name.inner.sasl.enabled.mechanisms",
                "PLAIN,SCRAM-SHA-256",
            ),
            (o, "listener.name.inner.plain.sasl.jaas.config", jaas),
        ])
        .unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.sasl_mechanisms("SECURE"), vec!["SCRAM-SHA-512"]);
        assert_eq!(c.sasl_mechanisms("INNER"), vec!["PLAIN", "SCRAM-SHA-256"]);
        let users = c.plain_users("INNER").unwrap();
        assert_eq!(users["alice"], "al\"ice");
        assert_eq!(users.len(), 2);
        // PLAIN without its users, a broken JAAS entry, and the SSL half of SASL_SSL.
        let e = with(&[(o, "sasl.enabled.mechanisms", "PLAIN")]).unwrap_err();
        assert_eq!(e.key, "listener.name.secure.plain.sasl.jaas.config");
        let e = with(&[
            (o, "sasl.enabled.mechanisms", "PLAIN"),
            (
                o,
                "listener.name.secure.plain.sasl.jaas.config",
                "Foo required",
            ),
            (o, "listener.name.inner.plain.sasl.jaas.config", jaas),
        ])
        .unwrap_err();
        assert!(e.message.contains("';'"), "{e}");
        let e = build(&[
            (o, "listeners", "PLAINTEXT://:0,SECURE://:0"),
            (
                o,
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL",
            ),
            (o, "sasl.enabled.mechanisms", "SCRAM-SHA-256"),
        ])
        .unwrap_err();
        assert_eq!(e.key, "ssl.keystore.location");
        let e = with(&[
            (o, "sasl.enabled.mechanisms", "SCRAM-SHA-256"),
            (o, "connections.max.reauth.ms", "3600000"),
        ])
        .unwrap_err();
        assert!(e.message.contains("KIP-368"), "{e}");
    }

    #[test]
    fn precedence_unknown_keys_and_invalid_values() {
        let (c, w) = build(&[
            (Origin::Override, "num.partitions", "6"),
            (Origin::File, "num.partitions", "3"),
            (Origin::File, "zookeeper.connect", "x"),
            (Origin::Env, "log.retention.hours", "2"),
        ])
        .unwrap();
        assert_eq!(c.num_partitions(), 6);
        assert_eq!(
            w,
            vec!["unknown configuration key 'zookeeper.connect' is ignored".to_string()]
        );
        assert_eq!(c.topic_default("retention.ms").unwrap().0, "7200000");
        let err = build(&[(Origin::File, "num.partitions", "zero")]).unwrap_err();
        assert_eq!(err.key, "num.partitions");
        assert!(err.to_string().contains("num.partitions"), "{err}");
        assert!(build(&[(Origin::File, "num.partitions", "0")]).is_err());
        assert!(build(&[(Origin::File, "listeners", "nonsense")]).is_err());
        assert!(build(&[(Origin::File, "auto.create.topics.enable", "yes")]).is_err());
    }

    #[test]
    fn env_names_map_like_kafka_images() {
        assert_eq!(
            env_key_to_config("SLUICE_LOG_SEGMENT_BYTES").as_deref(),
            Some("log.segment.bytes")
        );
        assert_eq!(
            env_key_to_config("SLUICE_A__B___C").as_deref(),
            Some("a_b-c")
        );
        assert_eq!(env_key_to_config("SLUICE_BOOTSTRAP"), None);
        assert_eq!(env_key_to_config("OTHER"), None);
    }

    #[test]
    fn topic_config_validation_and_description() {
        assert!(validate_topic_configs([("retention.ms", Some("1000"))]).is_ok());
        assert_eq!(
            validate_topic_configs([("nope", Some("1"))]).unwrap_err(),
            "Unknown topic config name: nope"
        );
        assert!(validate_topic_configs([("retention.ms", Some("x"))])
            .unwrap_err()
            .contains("Not a number"));
        assert!(validate_topic_configs([("cleanup.policy", Some("compact,delete"))]).is_ok());
        assert!(validate_topic_configs([("cleanup.policy", Some("shred"))]).is_err());
        assert!(validate_topic_configs([("compression.type", Some("brotli"))]).is_err());
        let (broker, _) = build(&[(Origin::File, "log.segment.bytes", "2048")]).unwrap();
        let mut overrides = BTreeMap::new();
        overrides.insert("retention.ms".to_string(), "5".to_string());
        let d = describe_topic(&broker, &overrides);
        assert_eq!(d.len(), TOPIC_CONFIGS.len());
        let r = d.iter().find(|e| e.name == "retention.ms").unwrap();
        assert_eq!(
            (r.value.as_deref(), r.source),
            (Some("5"), ConfigSource::TopicConfig)
        );
        let s = d.iter().find(|e| e.name == "segment.bytes").unwrap();
        assert_eq!(
            (s.value.as_deref(), s.source),
            (Some("2048"), ConfigSource::StaticBrokerConfig)
        );
        let m = d.iter().find(|e| e.name == "max.message.bytes").unwrap();
        assert_eq!(
            (m.value.as_deref(), m.source),
            (Some("1048588"), ConfigSource::DefaultConfig)
        );
    }
}
