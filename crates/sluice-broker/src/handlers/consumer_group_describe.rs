//! ConsumerGroupDescribe (key 69): consumer groups (KIP-848) with their epochs, members,
//! current and target assignments, as Kafka's admin tools show them.

use std::collections::BTreeSet;

use bytes::Bytes;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};
use sluice_metadata::acl::{op, resource};
use sluice_metadata::{MetadataImage, Uuid};
use sluice_protocol::ErrorCode;

use super::consumer_group_heartbeat::consumer_protocol_enabled;
use crate::group::assignor::Partitions;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::ConsumerGroupDescribe,
    0,
    1,
    ConsumerGroupDescribeHandler {
        access: crate::authorizer::Access,
        config: sluice_metadata::BrokerConfig,
        metadata: crate::metadata_cache::MetadataCache,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

/// Kafka's "authorized operations not asked for".
const OMITTED: i32 = i32::MIN;

/// An assignment with topic names; topics the cluster no longer has are left out.
fn assignment(image: &MetadataImage, p: &Partitions<Uuid>) -> Assignment {
    let mut a = Assignment::default();
    a.topic_partitions = p
        .iter()
        .filter_map(|(id, ps)| {
            let name = image.topic_names.get(id)?;
            let mut t = TopicPartitions::default();
            t.topic_id = *id;
            t.topic_name = TopicName(str_bytes(name.clone()));
            t.partitions = ps.iter().copied().collect();
            Some(t)
        })
        .collect();
    a
}

async fn handle(
    h: &ConsumerGroupDescribeHandler,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: ConsumerGroupDescribeRequest = ctx.decode(body)?;
    let mut resp = ConsumerGroupDescribeResponse::default();
    let acl = h.access.check(ctx);
    let ids: Vec<String> = req.group_ids.iter().map(|g| g.to_string()).collect();
    let enabled = consumer_protocol_enabled(&h.config, &h.metadata);
    let asked: Vec<String> = ids
        .iter()
        .filter(|g| enabled && !g.is_empty() && acl.group(op::DESCRIBE, g))
        .cloned()
        .collect();
    let mut found = h.groups.consumer_describe(asked).await.into_iter();
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
                Some(Ok(view)) => {
                    let group = &view.group;
                    let topics: BTreeSet<&String> = group
                        .members
                        .values()
                        .flat_map(|m| group.member_topics(m))
                        .collect();
                    if topics.iter().any(|t| !acl.topic(op::DESCRIBE, t)) {
                        g.error_code = ErrorCode::TopicAuthorizationFailed.code();
                        resp.groups.push(g);
                        continue;
                    }
                    g.group_state = str_bytes(view.state);
                    g.group_epoch = group.group_epoch;
                    g.assignment_epoch = group.assignment_epoch;
                    g.assignor_name = str_bytes(view.assignor);
                    if req.include_authorized_operations {
                        g.authorized_operations = acl.authorized_operations(resource::GROUP, id);
                    }
                    let empty = Partitions::new();
                    g.members = group
                        .members
                        .values()
                        .map(|m| {
                            let mut out = Member::default();
                            out.member_id = str_bytes(m.member_id.clone());
                            out.instance_id = m.instance_id.clone().map(str_bytes);
                            out.rack_id = m.rack_id.clone().map(str_bytes);
                            out.member_epoch = m.assignment.member_epoch;
                            out.client_id = str_bytes(m.client_id.clone());
                            out.client_host = str_bytes(m.client_host.clone());
                            out.subscribed_topic_names = m
                                .subscribed_topic_names
                                .iter()
                                .map(|n| TopicName(str_bytes(n.clone())))
                                .collect();
                            out.subscribed_topic_regex =
                                m.subscribed_topic_regex.clone().map(str_bytes);
                            out.assignment = assignment(&image, &m.assignment.assigned);
                            out.target_assignment = assignment(
                                &image,
                                group.target.get(&m.member_id).unwrap_or(&empty),
                            );
                            // 0: a member still on the classic protocol, 1: the consumer
                            // protocol.
                            out.member_type = if m.classic.is_some() { 0 } else { 1 };
                            out
                        })
                        .collect();
                }
            }
        }
        resp.groups.push(g);
    }
    ctx.respond(&resp)
}
