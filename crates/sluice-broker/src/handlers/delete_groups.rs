//! DeleteGroups (key 42): only groups without members; their offsets go too.

use bytes::Bytes;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse};

use crate::broker::Broker;
use crate::request::{HandlerError, RequestContext, Response};

handler!(ApiKey::DeleteGroups, 0, 2, handle);

async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DeleteGroupsRequest = ctx.decode(body)?;
    let ids: Vec<String> = req.groups_names.iter().map(|g| g.to_string()).collect();
    let result = broker.groups.delete(ids).await;
    let mut resp = DeleteGroupsResponse::default();
    for (i, g) in req.groups_names.iter().enumerate() {
        let mut r = DeletableGroupResult::default();
        r.group_id = g.clone();
        r.error_code = match &result {
            Ok(per) => per.get(i).copied().flatten().map_or(0, |c| c.code()),
            Err(code) => code.code(),
        };
        resp.results.push(r);
    }
    ctx.respond(&resp)
}
