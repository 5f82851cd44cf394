//! Newtypes for the numbers that must not be mixed. A bare `i64` offset crossing a module
//! boundary is a bug waiting to happen; these make the compiler catch it.

use std::fmt;

macro_rules! newtype {
    ($(#[$m:meta])* $name:ident($inner:ty)) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl From<$inner> for $name {
            fn from(v: $inner) -> Self {
                Self(v)
            }
        }
    };
}

newtype!(
    /// A position in a partition's log: the offset of a record.
    Offset(i64)
);
newtype!(
    /// The epoch of a partition's leader; bumps on every leader change.
    LeaderEpoch(i32)
);
newtype!(
    /// A broker or controller node id (`node.id`).
    NodeId(i32)
);
newtype!(
    /// A partition index within a topic.
    PartitionId(i32)
);
newtype!(
    /// A producer id handed out by InitProducerId.
    ProducerId(i64)
);
newtype!(
    /// A producer id's epoch.
    ProducerEpoch(i16)
);

impl Offset {
    /// Kafka's "no offset" sentinel.
    pub const NONE: Offset = Offset(-1);

    pub fn next(self) -> Offset {
        Offset(self.0 + 1)
    }
}

impl std::ops::Add<i64> for Offset {
    type Output = Offset;
    fn add(self, rhs: i64) -> Offset {
        Offset(self.0 + rhs)
    }
}

impl std::ops::Sub<Offset> for Offset {
    type Output = i64;
    fn sub(self, rhs: Offset) -> i64 {
        self.0 - rhs.0
    }
}

impl LeaderEpoch {
    /// Kafka's "no epoch known" sentinel.
    pub const NONE: LeaderEpoch = LeaderEpoch(-1);
}

/// A topic name plus a partition index.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: PartitionId,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition: PartitionId(partition),
        }
    }

    /// The directory name Kafka uses for this partition: `<topic>-<partition>`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition.0)
    }

    /// Parse `<topic>-<partition>` (the topic itself may contain `-`).
    pub fn parse_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        if topic.is_empty()
            || partition.is_empty()
            || !partition.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        Some(Self::new(topic, partition.parse().ok()?))
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_names_round_trip_with_dashes_in_topic() {
        let tp = TopicPartition::new("my-topic-1", 12);
        assert_eq!(tp.dir_name(), "my-topic-1-12");
        assert_eq!(TopicPartition::parse_dir_name("my-topic-1-12"), Some(tp));
        assert_eq!(TopicPartition::parse_dir_name("nodash"), None);
        assert_eq!(TopicPartition::parse_dir_name("t-"), None);
        assert_eq!(TopicPartition::parse_dir_name("-3"), None);
        assert_eq!(TopicPartition::parse_dir_name("t-3.abc-delete"), None);
    }
}
