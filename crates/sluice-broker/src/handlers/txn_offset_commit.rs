//! TxnOffsetCommit (key 28): a transactional producer commits a consumer group's offsets
//! inside its transaction. The group coordinator writes them to `__consumer_offsets` as the
//! producer's transactional batch; they become the group's committed offsets when the commit
//! marker arrives, and vanish with an abort. From v5 the client speaks transactions v2 and
//! sends no AddOffsetsToTxn: the group's `__consumer_offsets` partition is added to the
//! transaction here first (KIP-890).

use bytes::Bytes;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::group::coordinator::{partition_for, TxnCommitRequest, OFFSETS_TOPIC};
use crate::request::{HandlerError, RequestContext, Response};
use crate::txn::fenced_as;

handler!(
    ApiKey::TxnOffsetCommit,
    0,
    5,
    TxnOffsetCommit {
        access: crate::authorizer::Access,
        topics: crate::services::topics::TopicCreator,
        groups: crate::group::coordinator::GroupCoordinator,
        txns: crate::txn::coordinator::TxnCoordinator,
        metadata: crate::metadata_cache::MetadataCache
    }
);

async fn handle(
    h: &TxnOffsetCommit,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: TxnOffsetCommitRequest = ctx.decode(body)?;
    // WRITE on the transactional id, READ on the group and on each topic.
    let acl = h.access.check(ctx);
    let denied = if !acl.transactional_id(op::WRITE, &req.transactional_id) {
        Some(ErrorCode::TransactionalIdAuthorizationFailed)
    } else if !acl.group(op::READ, &req.group_id) {
        Some(ErrorCode::GroupAuthorizationFailed)
    } else {
        None
    };
    let refused = super::offset_commit::commit_refusals(
        &h.metadata.current(),
        req.topics.iter().map(|t| {
            (
                t.name.as_str(),
                acl.topic(op::READ, &t.name),
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        }),
    );
    let offsets: Vec<_> = req
        .topics
        .iter()
        .zip(&refused)
        .flat_map(|(t, refused)| {
            t.partitions
                .iter()
                .zip(refused)
                .filter(|(_, r)| r.is_none())
                .map(move |(p, _)| {
                    (
                        t.name.to_string(),
                        p.partition_index,
                        p.committed_offset,
                        if ctx.api_version >= 2 {
                            p.committed_leader_epoch
                        } else {
                            -1
                        },
                        p.committed_metadata.as_ref().map(|m| m.to_string()),
                    )
                })
        })
        .collect();
    let mut ensured = match denied {
        Some(code) => Err(code),
        None => h.topics.ensure_offsets_topic().await,
    };
    if ensured.is_ok() && ctx.api_version >= 5 && !offsets.is_empty() {
        let partition = partition_for(&req.group_id, h.groups.config.offsets_partitions);
        ensured = h
            .txns
            .add_for_producer(
                &req.transactional_id,
                req.producer_id.0,
                req.producer_epoch,
                vec![(OFFSETS_TOPIC.to_string(), partition)],
                false,
            )
            .await
            .map_err(|code| match code {
                // Kafka's group coordinator answers these for a failed add.
                ErrorCode::NetworkException => ErrorCode::CoordinatorLoadInProgress,
                ErrorCode::NotEnoughReplicas
                | ErrorCode::UnknownTopicOrPartition
                | ErrorCode::RequestTimedOut => ErrorCode::CoordinatorNotAvailable,
                ErrorCode::NotLeaderOrFollower => ErrorCode::NotCoordinator,
                // As the partition leader's add answers a fenced producer.
                ErrorCode::ProducerFenced => ErrorCode::InvalidProducerEpoch,
                c => c,
            });
    }
    let result = match ensured {
        Ok(()) if offsets.is_empty() => Ok(Vec::new()),
        Ok(()) => {
            h.groups
                .txn_commit(TxnCommitRequest {
                    group_id: req.group_id.to_string(),
                    producer_id: req.producer_id.0,
                    producer_epoch: req.producer_epoch,
                    generation: if ctx.api_version >= 3 {
                        req.generation_id
                    } else {
                        -1
                    },
                    member_id: req.member_id.to_string(),
                    instance_id: req.group_instance_id.as_ref().map(|i| i.to_string()),
                    offsets,
                })
                .await
        }
        Err(code) => Err(code),
    };
    let mut resp = TxnOffsetCommitResponse::default();
    let mut i = 0usize;
    for (t, refused) in req.topics.iter().zip(&refused) {
        let mut out = TxnOffsetCommitResponseTopic::default();
        out.name = t.name.clone();
        for (p, refusal) in t.partitions.iter().zip(refused) {
            let code = match &result {
                Err(code) => Some(*code),
                _ if refusal.is_some() => *refusal,
                Ok(per) => {
                    i += 1;
                    per.get(i - 1).copied().flatten()
                }
            };
            let mut r = TxnOffsetCommitResponsePartition::default();
            r.partition_index = p.partition_index;
            r.error_code = code.map_or(0, |c| fenced_as(c, ctx.api_version, 3).code());
            out.partitions.push(r);
        }
        resp.topics.push(out);
    }
    ctx.respond(&resp)
}
