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

use crate::request::{HandlerError, RequestContext, Response};

handler!(
    ApiKey::DeleteRecords,
    0,
    2,
    DeleteRecords {
        replicas: crate::replica::ReplicaManager,
        access: crate::authorizer::Access
    }
);

async fn handle(
    h: &DeleteRecords,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DeleteRecordsRequest = ctx.decode(body)?;
    let acl = h.access.check(ctx);
    let mut resp = DeleteRecordsResponse::default();
    for t in req.topics {
        let mut out = DeleteRecordsTopicResult::default();
        out.name = t.name.clone();
        let allowed = acl.topic(op::DELETE, &t.name);
        for part in t.partitions {
            let tp = TopicPartition::new(t.name.to_string(), part.partition_index);
            let result = if allowed {
                h.replicas
                    .delete_records(&tp, part.offset)
                    .await
                    .map(|o| o.0)
            } else {
                Err(ErrorCode::TopicAuthorizationFailed)
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
