//! DescribeGroups (key 15): state, protocol and members of each group.

use bytes::Bytes;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{ApiKey, DescribeGroupsRequest, DescribeGroupsResponse};
use sluice_metadata::acl::{op, resource};
use sluice_protocol::ErrorCode;

use crate::request::{
    str_bytes, HandlerError, RequestContext, Response, AUTHORIZED_OPERATIONS_OMITTED,
};

handler!(
    ApiKey::DescribeGroups,
    0,
    6,
    DescribeGroups {
        access: crate::authorizer::Access,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

async fn handle(
    h: &DescribeGroups,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DescribeGroupsRequest = ctx.decode(body)?;
    let ids: Vec<String> = req.groups.iter().map(|g| g.to_string()).collect();
    let result = h.groups.describe(ids.clone()).await;
    let acl = h.access.check(ctx);
    let mut resp = DescribeGroupsResponse::default();
    for (i, id) in req.groups.iter().enumerate() {
        let mut g = DescribedGroup::default();
        g.group_id = id.clone();
        g.authorized_operations = if req.include_authorized_operations {
            acl.authorized_operations(resource::GROUP, &ids[i])
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        };
        if !acl.group(op::DESCRIBE, &ids[i]) {
            g.error_code = ErrorCode::GroupAuthorizationFailed.code();
            g.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
            resp.groups.push(g);
            continue;
        }
        match &result {
            Err(code) => g.error_code = code.code(),
            Ok(found) => match found.get(i).cloned().flatten() {
                None => {
                    // An unknown group is described as Dead; v6 also says so with an error.
                    g.group_state = str_bytes("Dead");
                    if ctx.api_version >= 6 {
                        g.error_code = ErrorCode::GroupIdNotFound.code();
                        g.error_message = Some(str_bytes(format!("Group {} not found.", ids[i])));
                    }
                }
                Some(d) if d.consumer => {
                    // Kafka's DescribeGroups sees classic groups only.
                    g.group_state = str_bytes("Dead");
                    if ctx.api_version >= 6 {
                        g.error_code = ErrorCode::GroupIdNotFound.code();
                        g.error_message = Some(str_bytes(format!(
                            "Group {} is not a classic group.",
                            ids[i]
                        )));
                    }
                }
                Some(d) => {
                    g.group_state = str_bytes(d.state);
                    g.protocol_type = str_bytes(d.protocol_type);
                    g.protocol_data = str_bytes(d.protocol);
                    g.members = d
                        .members
                        .into_iter()
                        .map(
                            |(member_id, instance, client_id, host, metadata, assignment)| {
                                let mut m = DescribedGroupMember::default();
                                m.member_id = str_bytes(member_id);
                                if ctx.api_version >= 4 {
                                    m.group_instance_id = instance.map(str_bytes);
                                }
                                m.client_id = str_bytes(client_id);
                                m.client_host = str_bytes(host);
                                m.member_metadata = metadata;
                                m.member_assignment = assignment;
                                m
                            },
                        )
                        .collect();
                }
            },
        }
        resp.groups.push(g);
    }
    ctx.respond(&resp)
}
