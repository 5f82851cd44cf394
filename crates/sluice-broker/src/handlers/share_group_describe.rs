//! ShareGroupDescribe (key 77): share groups (KIP-932) with their epochs, members,
//! subscriptions and assignments, as `kafka-share-groups.sh --describe --members` and the
//! Java admin's `describeShareGroups` show them.

use bytes::Bytes;
use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ApiKey, ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName,
};
use sluice_metadata::acl::{op, resource};
use sluice_protocol::ErrorCode;

use super::share_group_heartbeat::share_groups_enabled;
use crate::group::share_group::ShareGroup;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::ShareGroupDescribe,
    1,
    1,
    ShareGroupDescribeHandler {
        access: crate::authorizer::Access,
        metadata: crate::metadata_cache::MetadataCache,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

/// Kafka's "authorized operations not asked for".
const OMITTED: i32 = i32::MIN;

fn members(group: &ShareGroup, image: &sluice_metadata::MetadataImage) -> Vec<Member> {
    group
        .members
        .iter()
        .map(|(id, m)| {
            let mut out = Member::default();
            out.member_id = str_bytes(id.clone());
            out.rack_id = m.rack_id.clone().map(str_bytes);
            out.member_epoch = m.member_epoch;
            out.client_id = str_bytes(m.client_id.clone());
            out.client_host = str_bytes(m.client_host.clone());
            out.subscribed_topic_names = m
                .subscribed
                .iter()
                .map(|t| TopicName(str_bytes(t.clone())))
                .collect();
            let mut a = Assignment::default();
            a.topic_partitions = m
                .assigned
                .iter()
                .filter_map(|(topic, ps)| {
                    let t = image.topic(topic)?;
                    let mut tp = TopicPartitions::default();
                    tp.topic_id = t.id;
                    tp.topic_name = TopicName(str_bytes(topic.clone()));
                    tp.partitions = ps.iter().copied().collect();
                    Some(tp)
                })
                .collect();
            out.assignment = a;
            out
        })
        .collect()
}

async fn handle(
    h: &ShareGroupDescribeHandler,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: ShareGroupDescribeRequest = ctx.decode(body)?;
    let mut resp = ShareGroupDescribeResponse::default();
    let acl = h.access.check(ctx);
    let ids: Vec<String> = req.group_ids.iter().map(|g| g.to_string()).collect();
    let enabled = share_groups_enabled(&h.metadata);
    let asked: Vec<String> = ids
        .iter()
        .filter(|g| enabled && !g.is_empty() && acl.group(op::DESCRIBE, g))
        .cloned()
        .collect();
    let mut found = h.groups.share_describe(asked).await.into_iter();
    let image = h.metadata.current();
    for id in &ids {
        let mut g = DescribedGroup::default();
        g.group_id = str_bytes(id.clone()).into();
        g.authorized_operations = OMITTED;
        if !enabled {
            g.error_code = ErrorCode::UnsupportedVersion.code();
        } else if id.is_empty() {
            g.error_code = ErrorCode::InvalidGroupId.code();
        } else if !acl.group(op::DESCRIBE, id) {
            g.error_code = ErrorCode::GroupAuthorizationFailed.code();
        } else {
            match found.next() {
                None => g.error_code = ErrorCode::CoordinatorNotAvailable.code(),
                Some(Err((code, message))) => {
                    g.error_code = code.code();
                    g.error_message = Some(message).filter(|m| !m.is_empty()).map(str_bytes);
                }
                Some(Ok(group)) => {
                    let hidden = group
                        .members
                        .values()
                        .flat_map(|m| m.assigned.keys())
                        .any(|t| !acl.topic(op::DESCRIBE, t));
                    if hidden {
                        g.error_code = ErrorCode::TopicAuthorizationFailed.code();
                        g.error_message = Some(str_bytes(
                            "The group has described topic(s) that the client is not authorized to describe.".to_string(),
                        ));
                        resp.groups.push(g);
                        continue;
                    }
                    g.group_state = str_bytes(group.state().to_string());
                    g.group_epoch = group.group_epoch;
                    g.assignment_epoch = group.assignment_epoch;
                    g.assignor_name = str_bytes("simple".to_string());
                    if req.include_authorized_operations {
                        g.authorized_operations = acl.authorized_operations(resource::GROUP, id);
                    }
                    g.members = members(&group, &image);
                }
            }
        }
        resp.groups.push(g);
    }
    ctx.respond(&resp)
}
