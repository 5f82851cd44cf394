//! DeleteRecords (key 21): move each partition's log start offset forward (-1 means the high
//! watermark); whole segments below it are removed at once, the rest is hidden from reads.

use bytes::Bytes;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse};
use sluice_metadata::acl::op;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;

use crate::broker::Broker;
use crate::error_map::log_error_code;
use crate::replica::partition::Partition;
use crate::request::{HandlerError, RequestContext, Response};

handler!(ApiKey::DeleteRecords, 0, 2, sync handle);

fn delete_below(p: &Partition, offset: i64) -> Result<i64, ErrorCode> {
    let hw = p.high_watermark();
    let target = if offset == -1 { hw } else { offset };
    if target < 0 || target > hw {
        return Err(ErrorCode::OffsetOutOfRange);
    }
    let mut log = p
        .log
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    log.advance_log_start_offset(target)
        .map_err(|e| log_error_code(&e))?;
    log.delete_old_segments(hw, crate::now_ms())
        .map_err(|e| log_error_code(&e))?;
    Ok(log.log_start_offset())
}

fn handle(broker: &Broker, ctx: &RequestContext, body: Bytes) -> Result<Response, HandlerError> {
    let req: DeleteRecordsRequest = ctx.decode(body)?;
    let image = broker.metadata.current();
    let acl = broker.acl(ctx);
    let mut resp = DeleteRecordsResponse::default();
    for t in req.topics {
        let mut out = DeleteRecordsTopicResult::default();
        out.name = t.name.clone();
        let allowed = acl.topic(op::DELETE, &t.name);
        for part in t.partitions {
            let tp = TopicPartition::new(t.name.to_string(), part.partition_index);
            let result = match broker.replicas.get(&tp) {
                _ if !allowed => Err(ErrorCode::TopicAuthorizationFailed),
                Some(p) => delete_below(&p, part.offset),
                None if image
                    .topic(&tp.topic)
                    .is_some_and(|x| x.partitions.contains_key(&part.partition_index)) =>
                {
                    Err(ErrorCode::NotLeaderOrFollower)
                }
                None => Err(ErrorCode::UnknownTopicOrPartition),
            };
            let mut r = DeleteRecordsPartitionResult::default();
            r.partition_index = part.partition_index;
            match result {
                Ok(low) => r.low_watermark = low,
                Err(code) => {
                    r.low_watermark = -1;
                    r.error_code = code.code();
                }
            }
            out.partitions.push(r);
        }
        resp.topics.push(out);
    }
    ctx.respond(&resp)
}
