//! What the broker asks of the controller. The node implements this over the in-process
//! controller; calls block (they append to the metadata log), so handlers run them on the
//! blocking pool. A call returns once the change is committed and published to this broker.

use sluice_metadata::acl::{AclBinding, AclFilter};
use sluice_metadata::controller_types::{
    ApiError, CreateTopicSpec, CreatedTopic, DeleteOutcome, ElectionOutcome, IsrChange,
    PartitionOutcome, QuotaChange, ReassignTarget, ScramChange, TopicRef, UserOutcome,
};

/// A controller failure that is not the request's fault (e.g. the metadata log's disk).
pub type ControllerFailure = String;

pub trait ControllerApi: Send + Sync + 'static {
    /// The active controller's node id, when known.
    fn active_controller(&self) -> Option<i32> {
        None
    }

    fn create_topics(
        &self,
        specs: &[CreateTopicSpec],
        validate_only: bool,
    ) -> Result<Vec<Result<CreatedTopic, ApiError>>, ControllerFailure>;

    fn delete_topics(&self, targets: &[TopicRef]) -> Result<Vec<DeleteOutcome>, ControllerFailure>;

    fn create_partitions(
        &self,
        topic: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<Result<(), ApiError>, ControllerFailure>;

    /// Reserve `count` producer ids for this broker; returns the first.
    fn allocate_producer_ids(&self, count: i64) -> Result<i64, ControllerFailure>;

    fn alter_topic_configs(
        &self,
        topic: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<Result<(), ApiError>, ControllerFailure>;

    /// Set or remove dynamic broker configs of `broker` ("" = cluster-wide defaults).
    fn alter_broker_configs(
        &self,
        broker: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<Result<(), ApiError>, ControllerFailure> {
        let _ = (broker, changes, validate_only);
        Err("this controller does not take dynamic broker configs".into())
    }

    /// AlterPartition: commit a leader's ISR change.
    fn alter_partition(
        &self,
        change: &IsrChange,
    ) -> Result<Result<(), ApiError>, ControllerFailure> {
        let _ = change;
        Err("this controller does not take ISR changes".into())
    }

    /// ElectLeaders: preferred or unclean, for `partitions` (None = all).
    fn elect_leaders(
        &self,
        preferred: bool,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<ElectionOutcome>, ControllerFailure> {
        let _ = (preferred, partitions);
        Err("this controller does not elect leaders on request".into())
    }

    /// AlterPartitionReassignments: start, replace or (None) cancel reassignments.
    fn alter_reassignments(
        &self,
        targets: &[ReassignTarget],
        allow_rf_change: bool,
    ) -> Result<Vec<PartitionOutcome>, ControllerFailure> {
        let _ = (targets, allow_rf_change);
        Err("this controller does not reassign partitions".into())
    }

    /// AlterUserScramCredentials: store or delete SCRAM credentials; one outcome per user.
    fn alter_scram_credentials(
        &self,
        changes: &[ScramChange],
    ) -> Result<Vec<UserOutcome>, ControllerFailure> {
        let _ = changes;
        Err("this controller does not store SCRAM credentials".into())
    }

    /// AlterClientQuotas: one outcome per entity.
    fn alter_client_quotas(
        &self,
        changes: &[QuotaChange],
        validate_only: bool,
    ) -> Result<Vec<Result<(), ApiError>>, ControllerFailure> {
        let _ = (changes, validate_only);
        Err("this controller does not store client quotas".into())
    }

    /// CreateAcls: one outcome per binding.
    fn create_acls(
        &self,
        bindings: &[AclBinding],
    ) -> Result<Vec<Result<(), ApiError>>, ControllerFailure> {
        let _ = bindings;
        Err("this controller does not store ACLs".into())
    }

    /// DeleteAcls: per filter the ACLs deleted.
    fn delete_acls(
        &self,
        filters: &[AclFilter],
    ) -> Result<Vec<Result<Vec<AclBinding>, ApiError>>, ControllerFailure> {
        let _ = filters;
        Err("this controller does not store ACLs".into())
    }
}
