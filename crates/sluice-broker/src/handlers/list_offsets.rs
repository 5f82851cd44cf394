//! ListOffsets (key 2): offsets by time. -1 latest (high watermark, or last stable offset
//! for read_committed), -2 earliest (log start), -3 the record with the largest timestamp,
//! -4 earliest local (= earliest here), -5 latest tiered (none: -1); otherwise the first
//! record whose timestamp is at or after the given one.

use bytes::Bytes;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};
use sluice_metadata::acl::op;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;

use crate::broker::Broker;
use crate::error_map::log_error_code;
use crate::replica::partition::Partition;
use crate::request::{HandlerError, RequestContext, Response};

handler!(ApiKey::ListOffsets, 1, 10, sync handle);

pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL: i64 = -4;
pub const LATEST_TIERED: i64 = -5;

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

fn lookup(
    p: &Partition,
    timestamp: i64,
    current_leader_epoch: i32,
    read_committed: bool,
) -> Result<(i64, i64, i32), ErrorCode> {
    p.check_leader_epoch(current_leader_epoch)?;
    let epoch = p.leader_epoch();
    let log = p
        .log
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // What a reader of this isolation level may see.
    let visible = if read_committed {
        log.last_stable_offset(p.high_watermark())
    } else {
        p.high_watermark()
    };
    let epoch_of = |offset: i64| {
        log.leader_epoch_cache()
            .epoch_for_offset(offset)
            .unwrap_or(epoch)
    };
    Ok(match timestamp {
        LATEST => (visible, -1, epoch),
        EARLIEST | EARLIEST_LOCAL => {
            let start = log.log_start_offset();
            (start, -1, epoch_of(start))
        }
        LATEST_TIERED => (-1, -1, -1),
        MAX_TIMESTAMP => match log
            .offset_of_max_timestamp()
            .map_err(|e| log_error_code(&e))?
        {
            Some((offset, ts, e)) => (offset, ts, e.unwrap_or(epoch)),
            None => (-1, -1, -1),
        },
        t if t < 0 => return Err(ErrorCode::InvalidRequest),
        t => match log
            .offset_for_timestamp(t)
            .map_err(|e| log_error_code(&e))?
        {
            Some((offset, ts, e)) if offset < visible => (offset, ts, e.unwrap_or(epoch)),
            _ => (-1, -1, -1),
        },
    })
}

fn handle(broker: &Broker, ctx: &RequestContext, body: Bytes) -> Result<Response, HandlerError> {
    let req: ListOffsetsRequest = ctx.decode(body)?;
    let image = broker.metadata.current();
    let acl = broker.acl(ctx);
    let mut resp = ListOffsetsResponse::default();
    for topic in req.topics {
        let mut out = ListOffsetsTopicResponse::default();
        out.name = topic.name.clone();
        let allowed = acl.topic(op::DESCRIBE, &topic.name);
        for part in topic.partitions {
            let tp = TopicPartition::new(topic.name.to_string(), part.partition_index);
            let result = match broker.replicas.get(&tp) {
                _ if !allowed => Err(ErrorCode::TopicAuthorizationFailed),
                Some(p) => lookup(
                    &p,
                    part.timestamp,
                    part.current_leader_epoch,
                    req.isolation_level == 1,
                ),
                None if image
                    .topic(&tp.topic)
                    .is_some_and(|t| t.partitions.contains_key(&part.partition_index)) =>
                {
                    Err(ErrorCode::NotLeaderOrFollower)
                }
                None => Err(ErrorCode::UnknownTopicOrPartition),
            };
            let mut r = match result {
                Ok((offset, ts, epoch)) => {
                    let mut r = answer(
                        part.partition_index,
                        ErrorCode::UnknownServerError,
                        offset,
                        ts,
                        epoch,
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
