//! OffsetDelete (key 47): drop a group's offsets for partitions it no longer consumes.

use bytes::Bytes;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse};

use crate::broker::Broker;
use crate::request::{HandlerError, RequestContext, Response};

handler!(ApiKey::OffsetDelete, 0, 0, handle);

async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: OffsetDeleteRequest = ctx.decode(body)?;
    let partitions: Vec<(String, i32)> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.to_string(), p.partition_index))
        })
        .collect();
    let result = broker
        .groups
        .delete_offsets(req.group_id.to_string(), partitions)
        .await;
    let mut resp = OffsetDeleteResponse::default();
    match result {
        Err(code) => resp.error_code = code.code(),
        Ok(per) => {
            let mut i = 0;
            for t in &req.topics {
                let mut out = OffsetDeleteResponseTopic::default();
                out.name = t.name.clone();
                for p in &t.partitions {
                    let mut r = OffsetDeleteResponsePartition::default();
                    r.partition_index = p.partition_index;
                    r.error_code = per.get(i).copied().flatten().map_or(0, |c| c.code());
                    i += 1;
                    out.partitions.push(r);
                }
                resp.topics.push(out);
            }
        }
    }
    ctx.respond(&resp)
}
