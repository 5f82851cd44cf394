//! ListGroups (key 16): every group this coordinator owns, optionally filtered by state
//! (v4+) and type (v5+: "classic" or "consumer").

use bytes::Bytes;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ApiKey, GroupId, ListGroupsRequest, ListGroupsResponse};
use sluice_metadata::acl::op;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::ListGroups,
    0,
    5,
    ListGroups {
        access: crate::authorizer::Access,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

async fn handle(
    h: &ListGroups,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: ListGroupsRequest = ctx.decode(body)?;
    let mut resp = ListGroupsResponse::default();
    // DESCRIBE on the cluster lists every group, else those with DESCRIBE on the group.
    let acl = h.access.check(ctx);
    let all = acl.cluster(op::DESCRIBE);
    match h.groups.list().await {
        Ok(groups) => {
            let states: Vec<String> = req
                .states_filter
                .iter()
                .map(|s| s.to_ascii_lowercase())
                .collect();
            let types: Vec<String> = req
                .types_filter
                .iter()
                .map(|s| s.to_ascii_lowercase())
                .collect();
            for (id, protocol_type, state, group_type) in groups {
                if !all && !acl.group(op::DESCRIBE, &id) {
                    continue;
                }
                if !states.is_empty() && !states.contains(&state.to_ascii_lowercase()) {
                    continue;
                }
                if !types.is_empty() && !types.iter().any(|t| t == group_type) {
                    continue;
                }
                let mut g = ListedGroup::default();
                g.group_id = GroupId(str_bytes(id));
                g.protocol_type = str_bytes(protocol_type);
                if ctx.api_version >= 4 {
                    g.group_state = str_bytes(state);
                }
                if ctx.api_version >= 5 {
                    g.group_type = str_bytes(group_type);
                }
                resp.groups.push(g);
            }
        }
        Err(code) => resp.error_code = code.code(),
    }
    ctx.respond(&resp)
}
