//! OffsetDelete (key 47): drop a group's offsets for partitions it no longer consumes.

use bytes::Bytes;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::{HandlerError, RequestContext, Response};

handler!(
    ApiKey::OffsetDelete,
    0,
    0,
    OffsetDelete {
        access: crate::authorizer::Access,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

async fn handle(
    h: &OffsetDelete,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: OffsetDeleteRequest = ctx.decode(body)?;
    // DELETE on the group, READ on each topic (others' partitions are not touched).
    let acl = h.access.check(ctx);
    let partitions: Vec<(String, i32)> = req
        .topics
        .iter()
        .filter(|t| acl.topic(op::READ, &t.name))
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.to_string(), p.partition_index))
        })
        .collect();
    let result = if !acl.group(op::DELETE, &req.group_id) {
        Err(ErrorCode::GroupAuthorizationFailed)
    } else if partitions.is_empty() {
        Ok(Vec::new())
    } else {
        h.groups
            .delete_offsets(req.group_id.to_string(), partitions)
            .await
    };
    let mut resp = OffsetDeleteResponse::default();
    match result {
        Err(code) => resp.error_code = code.code(),
        Ok(per) => {
            let mut i = 0;
            for t in &req.topics {
                let mut out = OffsetDeleteResponseTopic::default();
                out.name = t.name.clone();
                let allowed = acl.topic(op::READ, &t.name);
                for p in &t.partitions {
                    let mut r = OffsetDeleteResponsePartition::default();
                    r.partition_index = p.partition_index;
                    r.error_code = if allowed {
                        i += 1;
                        per.get(i - 1).copied().flatten().map_or(0, |c| c.code())
                    } else {
                        ErrorCode::TopicAuthorizationFailed.code()
                    };
                    out.partitions.push(r);
                }
                resp.topics.push(out);
            }
        }
    }
    ctx.respond(&resp)
}
