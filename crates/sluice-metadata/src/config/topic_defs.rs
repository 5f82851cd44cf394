//! Every topic config Kafka 4 defines, with the broker keys that supply its default.

use super::*;
use Check::*;
use ConfigType as T;

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
            "confluent.value.schema.validation",
            T::Boolean,
            Some("false"),
            Any,
            "Confluent Server's name: every record's value must be in the schema registry's wire format (magic byte 0, schema id) with an id registered under the subject <topic>-value; a batch with another is refused with INVALID_RECORD.",
        ),
        broker_synonyms: &[],
    },
    TopicConfigDef {
        def: def(
            "confluent.key.schema.validation",
            T::Boolean,
            Some("false"),
            Any,
            "Confluent Server's name: as confluent.value.schema.validation, for record keys and the subject <topic>-key.",
        ),
        broker_synonyms: &[],
    },
    TopicConfigDef {
        def: def(
            "diskless.enable",
            T::Boolean,
            Some("false"),
            Any,
            "Sluice's own (KIP-1150's name): the object store is the topic's log; any broker takes its produce and fetch. Set when the topic is created only.",
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
            Any,
            "Tiered storage: closed segments are copied to the object store and read from there once local retention removed them.",
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
    // Kafka 4.4 topic configs Sluice accepts (so MirrorMaker 2 and tools can copy them) and
    // does not act on: no dead-letter queues for share or streams groups, and tiered storage
    // copies a segment as soon as it closes (no copy lag).
    TopicConfigDef {
        def: def(
            "errors.deadletterqueue.group.enable",
            T::Boolean,
            Some("false"),
            Any,
            NOT_ACTED_ON,
        ),
        broker_synonyms: &[],
    },
    TopicConfigDef {
        def: def(
            "max.decompressed.message.bytes",
            T::Int,
            Some("2147483639"),
            AtLeast(0),
            NOT_ACTED_ON,
        ),
        broker_synonyms: &[],
    },
    TopicConfigDef {
        def: def(
            "remote.copy.lag.bytes",
            T::Long,
            Some("-1"),
            Any,
            NOT_ACTED_ON,
        ),
        broker_synonyms: &[("log.remote.copy.lag.bytes", 1)],
    },
    TopicConfigDef {
        def: def("remote.copy.lag.ms", T::Long, Some("0"), Any, NOT_ACTED_ON),
        broker_synonyms: &[("log.remote.copy.lag.ms", 1)],
    },
];
