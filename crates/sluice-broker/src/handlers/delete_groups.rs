//! DeleteGroups (key 42): only groups without members; their offsets go too.

use bytes::Bytes;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::{HandlerError, RequestContext, Response};

handler!(
    ApiKey::DeleteGroups,
    0,
    2,
    DeleteGroups {
        access: crate::authorizer::Access,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

async fn handle(
    h: &DeleteGroups,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DeleteGroupsRequest = ctx.decode(body)?;
    // DELETE on each group; the others are not touched.
    let acl = h.access.check(ctx);
    let allowed: Vec<bool> = req
        .groups_names
        .iter()
        .map(|g| acl.group(op::DELETE, g))
        .collect();
    let ids: Vec<String> = req
        .groups_names
        .iter()
        .zip(&allowed)
        .filter(|(_, ok)| **ok)
        .map(|(g, _)| g.to_string())
        .collect();
    let result = if ids.is_empty() {
        Ok(Vec::new())
    } else {
        h.groups.delete(ids).await
    };
    let mut resp = DeleteGroupsResponse::default();
    let mut i = 0;
    for (g, ok) in req.groups_names.iter().zip(&allowed) {
        let mut r = DeletableGroupResult::default();
        r.group_id = g.clone();
        r.error_code = match &result {
            _ if !ok => ErrorCode::GroupAuthorizationFailed.code(),
            Ok(per) => {
                i += 1;
                per.get(i - 1).copied().flatten().map_or(0, |c| c.code())
            }
            Err(code) => code.code(),
        };
        resp.results.push(r);
    }
    ctx.respond(&resp)
}
