//! Requests to, and answers from, the controller: shared by the broker (which asks) and the
//! controller (which answers), so neither depends on the other.

use sluice_protocol::ErrorCode;
use uuid::Uuid;

/// A per-item failure answered to the client: the Kafka error code and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// One topic of a CreateTopics request.
#[derive(Clone, Debug, Default)]
pub struct CreateTopicSpec {
    pub name: String,
    /// -1 for the default.
    pub num_partitions: i32,
    /// -1 for the default.
    pub replication_factor: i16,
    /// Manual assignment: partition index -> replica node ids.
    pub assignments: Vec<(i32, Vec<i32>)>,
    pub configs: Vec<(String, Option<String>)>,
}

/// What a successful (or validated) creation produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatedTopic {
    pub id: Uuid,
    pub num_partitions: i32,
    pub replication_factor: i16,
}

/// A topic named by a DeleteTopics request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopicRef {
    Name(String),
    Id(Uuid),
}

/// The outcome of deleting one topic: its name and id, or why not.
pub type DeleteOutcome = Result<(String, Uuid), ApiError>;

/// A leader's ISR change (AlterPartition): valid only against the leader and partition
/// epochs it was computed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsrChange {
    pub leader: i32,
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub isr: Vec<i32>,
}

/// One partition's outcome of a per-partition request: (topic, partition, done or why not).
pub type PartitionOutcome = (String, i32, Result<(), ApiError>);

/// One partition's ElectLeaders outcome.
pub type ElectionOutcome = PartitionOutcome;

/// One partition of an AlterPartitionReassignments request: (topic, partition, the target
/// replicas, or None to cancel the reassignment in progress).
pub type ReassignTarget = (String, i32, Option<Vec<i32>>);

/// One change of an AlterUserScramCredentials request, validated by the broker with the
/// salted password already turned into its stored form: (user, mechanism code, the
/// credential to store, or None to delete it).
pub type ScramChange = (String, i8, Option<crate::image::ScramEntry>);

/// One user's outcome of a per-user request.
pub type UserOutcome = (String, Result<(), ApiError>);

/// One entity of an AlterClientQuotas request: its quota keys set (Some) or removed (None).
pub type QuotaChange = (crate::image::QuotaEntity, Vec<(String, Option<f64>)>);

/// The metadata quorum as its leader sees it (DescribeQuorum). Offsets are Kafka's:
/// exclusive ends (one past the last entry), timestamps wall-clock ms, -1 when unknown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuorumInfo {
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub high_watermark: i64,
    pub voters: Vec<QuorumReplica>,
    /// Brokers that follow the metadata log without voting (broker-only nodes).
    pub observers: Vec<QuorumReplica>,
    /// The voters' controller endpoints: (id, host, port).
    pub voter_endpoints: Vec<(i32, String, u16)>,
}

/// A controller joining or leaving a dynamic quorum (KIP-853): its id, the directory id of
/// its metadata log and its controller listener endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerSpec {
    pub node_id: i32,
    pub directory_id: Uuid,
    pub endpoints: Vec<crate::record::Endpoint>,
}

/// One replica of the metadata log in [`QuorumInfo`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuorumReplica {
    pub id: i32,
    /// The directory id of its metadata log (all zero when unknown: a static voter, or a
    /// broker).
    pub directory_id: Uuid,
    pub log_end_offset: i64,
    pub last_fetch_ms: i64,
    pub last_caught_up_ms: i64,
}

/// `delegation.token.*` settings: with no secret key, delegation tokens are off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenSettings {
    /// `delegation.token.secret.key` (None or empty: disabled).
    pub secret_key: Option<String>,
    /// `delegation.token.max.lifetime.ms`
    pub max_lifetime_ms: i64,
    /// `delegation.token.expiry.time.ms`
    pub expiry_time_ms: i64,
    /// `delegation.token.expiry.check.interval.ms`
    pub expiry_check_interval_ms: i64,
}

impl Default for TokenSettings {
    /// Kafka's defaults: 7 days, 1 day, 1 hour; off.
    fn default() -> Self {
        Self {
            secret_key: None,
            max_lifetime_ms: 7 * 24 * 3600 * 1000,
            expiry_time_ms: 24 * 3600 * 1000,
            expiry_check_interval_ms: 3600 * 1000,
        }
    }
}

impl TokenSettings {
    /// The secret key, when delegation tokens are on.
    pub fn key(&self) -> Option<&str> {
        self.secret_key.as_deref().filter(|k| !k.is_empty())
    }
}

/// A delegation token request the broker forwards to the controller (principals as
/// `Type:name`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenRequest {
    /// CreateDelegationToken for `owner`, asked by `requester`; `max_lifetime_ms` <= 0 for
    /// the configured maximum.
    Create {
        owner: String,
        requester: String,
        renewers: Vec<String>,
        max_lifetime_ms: i64,
    },
    /// RenewDelegationToken by `principal`.
    Renew {
        hmac: Vec<u8>,
        principal: String,
        period_ms: i64,
    },
    /// ExpireDelegationToken by `principal`; a negative period removes the token now.
    Expire {
        hmac: Vec<u8>,
        principal: String,
        period_ms: i64,
    },
}

/// The token after a [`TokenRequest`] (its new expiry for renew and expire) and its HMAC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenReply {
    pub token: crate::record::TokenRecord,
    pub hmac: Vec<u8>,
}
