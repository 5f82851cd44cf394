//! ListOffsets (key 2): offsets by time. -1 latest (high watermark, or last stable offset
//! for read_committed), -2 earliest (log start, the remote tier's with tiered storage), -3
//! the record with the largest timestamp (local segments, as Kafka), -4 earliest local
//! (v8+), -5 latest tiered (v9+; none: -1); otherwise the first record whose timestamp is at
//! or after the given one, looked for in the remote tier first.

use bytes::Bytes;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};
use sluice_metadata::acl::op;
use sluice_protocol::types::{LeaderEpoch, Offset, TopicPartition};
use sluice_protocol::ErrorCode;

use crate::replica::queries::OffsetSpec;
use crate::request::{HandlerError, RequestContext, Response};

handler!(
    ApiKey::ListOffsets,
    1,
    10,
    ListOffsets {
        replicas: crate::replica::ReplicaManager,
        access: crate::authorizer::Access
    }
);

fn answer(
    index: i32,
    code: ErrorCode,
    offset: i64,
    timestamp: i64,
    epoch: i32,
) -> ListOffsetsPartitionResponse {
    let mut r = ListOffsetsPartitionResponse::default();
    r.partition_index = index;
    r.error_code = code.code();
    r.offset = offset;
    r.timestamp = timestamp;
    r.leader_epoch = epoch;
    r
}

/// The oldest ListOffsets version that may ask for `timestamp` (Kafka's
/// `timestampMinSupportedVersion`).
fn min_version(timestamp: i64) -> i16 {
    match timestamp {
        -4 => 8,
        -5 => 9,
        _ => 0,
    }
}

async fn handle(
    h: &ListOffsets,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: ListOffsetsRequest = ctx.decode(body)?;
    let acl = h.access.check(ctx);
    let mut resp = ListOffsetsResponse::default();
    for topic in req.topics {
        let mut out = ListOffsetsTopicResponse::default();
        out.name = topic.name.clone();
        let allowed = acl.topic(op::DESCRIBE, &topic.name);
        for part in topic.partitions {
            let tp = TopicPartition::new(topic.name.to_string(), part.partition_index);
            let result = if !allowed {
                Err(ErrorCode::TopicAuthorizationFailed)
            } else {
                match OffsetSpec::from_wire(part.timestamp) {
                    _ if ctx.api_version < min_version(part.timestamp) => {
                        Err(ErrorCode::UnsupportedVersion)
                    }
                    None => Err(ErrorCode::InvalidRequest),
                    Some(spec) => {
                        let local = h.replicas.list_offset(
                            &tp,
                            spec,
                            LeaderEpoch(part.current_leader_epoch),
                            req.isolation_level == 1,
                        );
                        match (spec, &local) {
                            (OffsetSpec::Timestamp(t), Ok(_)) => h
                                .replicas
                                .remote_offset_for_timestamp(&tp, t, req.isolation_level == 1)
                                .await
                                .map_or(local, |(o, ts, e)| Ok((Offset(o), ts, LeaderEpoch(e)))),
                            _ => local,
                        }
                    }
                }
            };
            let mut r = match result {
                Ok((offset, ts, epoch)) => {
                    let mut r = answer(
                        part.partition_index,
                        ErrorCode::UnknownServerError,
                        offset.0,
                        ts,
                        epoch.0,
                    );
                    r.error_code = 0;
                    r
                }
                Err(code) => answer(part.partition_index, code, -1, -1, -1),
            };
            if ctx.api_version < 4 {
                r.leader_epoch = -1;
            }
            out.partitions.push(r);
        }
        resp.topics.push(out);
    }
    ctx.respond(&resp)
}
