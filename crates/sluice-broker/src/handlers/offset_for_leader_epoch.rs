//! OffsetForLeaderEpoch (key 23): where a leader epoch ends in the leader's log. Followers
//! ask it before fetching from a new leader and truncate to the answer (KIP-101: truncation
//! by leader epoch, not by high watermark); consumers ask it to detect truncation (KIP-320).
//! Answers: the largest epoch not above the one asked and its end offset (the start of the
//! next epoch, or the log end for the latest); -1/-1 when the log has no such epoch.

use bytes::Bytes;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use sluice_metadata::acl::op;
use sluice_protocol::types::{LeaderEpoch, TopicPartition};
use sluice_protocol::ErrorCode;

use crate::request::{HandlerError, RequestContext, Response};

handler!(
    ApiKey::OffsetForLeaderEpoch,
    2,
    4,
    OffsetForLeaderEpoch {
        replicas: crate::replica::ReplicaManager,
        access: crate::authorizer::Access
    },
    sync
);

fn handle(
    h: &OffsetForLeaderEpoch,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: OffsetForLeaderEpochRequest = ctx.decode(body)?;
    let mut resp = OffsetForLeaderEpochResponse::default();
    // Followers need CLUSTER_ACTION on the cluster, consumers DESCRIBE on each topic.
    let acl = h.access.check(ctx);
    let follower = ctx.api_version >= 3 && req.replica_id.0 >= 0;
    let follower_denied = follower && !acl.cluster(op::CLUSTER_ACTION);
    for topic in req.topics {
        let mut out = OffsetForLeaderTopicResult::default();
        out.topic = topic.topic.clone();
        let denied = follower_denied || (!follower && !acl.topic(op::DESCRIBE, &topic.topic));
        for part in topic.partitions {
            let mut r = EpochEndOffset::default();
            r.partition = part.partition;
            r.leader_epoch = -1;
            r.end_offset = -1;
            let tp = TopicPartition::new(topic.topic.to_string(), part.partition);
            let answer = if denied {
                Err(ErrorCode::TopicAuthorizationFailed)
            } else {
                h.replicas.end_offset_for_epoch(
                    &tp,
                    LeaderEpoch(part.current_leader_epoch),
                    LeaderEpoch(part.leader_epoch),
                )
            };
            match answer {
                Ok(Some((epoch, end))) => {
                    r.leader_epoch = epoch.0;
                    r.end_offset = end.0;
                }
                Ok(None) => {}
                Err(code) => r.error_code = code.code(),
            }
            out.partitions.push(r);
        }
        resp.topics.push(out);
    }
    ctx.respond(&resp)
}
