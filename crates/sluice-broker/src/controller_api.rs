//! What the broker asks of the controller. The node implements this over the controller
//! quorum (in-process or over the network). Calls are futures: they append to the metadata
//! log and resolve once the change is committed and published to this broker, so no thread
//! is held while they wait. A call takes what it needs from its arguments when it is made.

use std::future::Future;
use std::pin::Pin;

use sluice_metadata::acl::{AclBinding, AclFilter};
use sluice_metadata::controller_types::{
    ApiError, ControllerSpec, CreateTopicSpec, CreatedTopic, DeleteOutcome, ElectionOutcome,
    IsrChange, PartitionOutcome, QuotaChange, ReassignTarget, ScramChange, TokenReply,
    TokenRequest, TopicRef, UserOutcome,
};
use sluice_metadata::Uuid;

/// A controller failure that is not the request's fault (e.g. the metadata log's disk).
pub type ControllerFailure = String;

/// What a call returns.
pub type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T, ControllerFailure>> + Send + 'a>>;

/// A call this controller does not take.
fn refused<'a, T: Send + 'a>(what: &'static str) -> Call<'a, T> {
    Box::pin(async move { Err(format!("this controller does not {what}")) })
}

pub trait ControllerApi: Send + Sync + 'static {
    /// The active controller's node id, when known.
    fn active_controller(&self) -> Option<i32> {
        None
    }

    fn create_topics(
        &self,
        specs: &[CreateTopicSpec],
        validate_only: bool,
    ) -> Call<'_, Vec<Result<CreatedTopic, ApiError>>>;

    fn delete_topics(&self, targets: &[TopicRef]) -> Call<'_, Vec<DeleteOutcome>>;

    fn create_partitions(
        &self,
        topic: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Call<'_, Result<(), ApiError>>;

    /// Reserve `count` producer ids for this broker; returns the first.
    fn allocate_producer_ids(&self, count: i64) -> Call<'_, i64>;

    fn alter_topic_configs(
        &self,
        topic: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Call<'_, Result<(), ApiError>>;

    /// Set or remove dynamic broker configs of `broker` ("" = cluster-wide defaults).
    fn alter_broker_configs(
        &self,
        broker: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Call<'_, Result<(), ApiError>> {
        let _ = (broker, changes, validate_only);
        refused("take dynamic broker configs")
    }

    /// Set or remove configs of cluster link `link` (removing every one deletes it).
    fn alter_link_configs(
        &self,
        link: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Call<'_, Result<(), ApiError>> {
        let _ = (link, changes, validate_only);
        refused("keep cluster links")
    }

    /// Set or remove configs of a resource kept by type (client-metrics subscriptions).
    fn alter_resource_configs(
        &self,
        resource_type: i8,
        name: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Call<'_, Result<(), ApiError>> {
        let _ = (resource_type, name, changes, validate_only);
        refused("keep client-metrics subscriptions")
    }

    /// Record a remote log segment's new state (tiered storage), as this partition's leader.
    fn remote_log_segment(
        &self,
        segment: &sluice_metadata::remote::RemoteSegment,
    ) -> Call<'_, Result<(), ApiError>> {
        let _ = segment;
        refused("keep remote log metadata")
    }

    /// Commit the batches of a WAL object this broker wrote (diskless topics): per batch its
    /// offsets or why not.
    fn diskless_commit(
        &self,
        object_id: Uuid,
        batches: &[sluice_metadata::diskless::WalBatch],
    ) -> Call<'_, Vec<Result<sluice_metadata::diskless::Sequenced, ApiError>>> {
        let _ = (object_id, batches);
        refused("sequence diskless topics")
    }

    /// Move diskless partitions' log starts (retention, DeleteRecords): per (topic id,
    /// partition, start offset) its outcome.
    fn diskless_trim(&self, trims: &[(Uuid, i32, i64)]) -> Call<'_, Vec<Result<(), ApiError>>> {
        let _ = trims;
        refused("trim diskless topics")
    }

    /// The metadata offset holding everything the quorum committed before this call, confirmed
    /// by a quorum (a barrier before trusting the image for garbage collection).
    fn diskless_barrier(&self) -> Call<'_, i64> {
        refused("vouch for the metadata")
    }

    /// WAL compaction: per (topic id, partition, segment) whether the segment replaced the
    /// batches it was made of.
    fn diskless_compact(
        &self,
        segments: &[(Uuid, i32, sluice_metadata::diskless::SegmentCoord)],
    ) -> Call<'_, Vec<Result<(), ApiError>>> {
        let _ = segments;
        refused("compact diskless topics")
    }

    /// AlterPartition: commit a leader's ISR change.
    fn alter_partition(&self, change: &IsrChange) -> Call<'_, Result<(), ApiError>> {
        let _ = change;
        refused("take ISR changes")
    }

    /// ElectLeaders: preferred or unclean, for `partitions` (None = all).
    fn elect_leaders(
        &self,
        preferred: bool,
        partitions: Option<&[(String, i32)]>,
    ) -> Call<'_, Vec<ElectionOutcome>> {
        let _ = (preferred, partitions);
        refused("elect leaders on request")
    }

    /// UpdateFeatures: (feature, level, upgrade type code) each, all or nothing.
    fn update_features(
        &self,
        updates: &[(String, i16, i8)],
        validate_only: bool,
    ) -> Call<'_, Result<(), ApiError>> {
        let _ = (updates, validate_only);
        refused("update features")
    }

    /// UnregisterBroker: remove a broker's registration.
    fn unregister_broker(&self, node_id: i32) -> Call<'_, Result<(), ApiError>> {
        let _ = node_id;
        refused("unregister a broker")
    }

    /// AddRaftVoter: make a controller a voter of the dynamic quorum.
    fn add_voter(&self, controller: &ControllerSpec) -> Call<'_, Result<(), ApiError>> {
        let _ = controller;
        refused("add a voter")
    }

    /// RemoveRaftVoter: remove a voter (by id and directory id) from the dynamic quorum.
    fn remove_voter(&self, node_id: i32, directory_id: Uuid) -> Call<'_, Result<(), ApiError>> {
        let _ = (node_id, directory_id);
        refused("remove a voter")
    }

    /// DescribeQuorum: the metadata quorum as the active controller sees it.
    fn describe_quorum(&self) -> Call<'_, sluice_metadata::controller_types::QuorumInfo> {
        refused("describe its quorum")
    }

    /// AlterPartitionReassignments: start, replace or (None) cancel reassignments.
    fn alter_reassignments(
        &self,
        targets: &[ReassignTarget],
        allow_rf_change: bool,
    ) -> Call<'_, Vec<PartitionOutcome>> {
        let _ = (targets, allow_rf_change);
        refused("reassign partitions")
    }

    /// AlterUserScramCredentials: store or delete SCRAM credentials; one outcome per user.
    fn alter_scram_credentials(&self, changes: &[ScramChange]) -> Call<'_, Vec<UserOutcome>> {
        let _ = changes;
        refused("store SCRAM credentials")
    }

    /// Create, Renew or ExpireDelegationToken.
    fn delegation_token(&self, request: &TokenRequest) -> Call<'_, Result<TokenReply, ApiError>> {
        let _ = request;
        refused("handle delegation tokens")
    }

    /// AlterClientQuotas: one outcome per entity.
    fn alter_client_quotas(
        &self,
        changes: &[QuotaChange],
        validate_only: bool,
    ) -> Call<'_, Vec<Result<(), ApiError>>> {
        let _ = (changes, validate_only);
        refused("store client quotas")
    }

    /// CreateAcls: one outcome per binding.
    fn create_acls(&self, bindings: &[AclBinding]) -> Call<'_, Vec<Result<(), ApiError>>> {
        let _ = bindings;
        refused("store ACLs")
    }

    /// CreateAcls for ACLs a cluster link copied from its source (ACL sync): their ids say
    /// so (`sluice_metadata::acl::copied_acl_id`). One outcome per binding.
    fn copy_acls(
        &self,
        link: &str,
        bindings: &[AclBinding],
    ) -> Call<'_, Vec<Result<(), ApiError>>> {
        let _ = (link, bindings);
        refused("store ACLs")
    }

    /// DeleteAcls: per filter the ACLs deleted.
    fn delete_acls(
        &self,
        filters: &[AclFilter],
    ) -> Call<'_, Vec<Result<Vec<AclBinding>, ApiError>>> {
        let _ = filters;
        refused("store ACLs")
    }
}
