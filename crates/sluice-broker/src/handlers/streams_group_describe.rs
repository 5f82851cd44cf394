//! StreamsGroupDescribe (key 89): streams groups (KIP-1071) with their topology (as
//! configured: partition counts decided), epochs, members, current and target assignments,
//! as `kafka-streams-groups.sh` shows them.

use bytes::Bytes;
use kafka_protocol::messages::streams_group_describe_response::{
    Assignment, DescribedGroup, Endpoint, KeyValue, Member, Subtopology, TaskIds, TopicInfo,
    Topology,
};
use kafka_protocol::messages::{
    ApiKey, StreamsGroupDescribeRequest, StreamsGroupDescribeResponse, TopicName,
};
use sluice_metadata::acl::{op, resource};
use sluice_protocol::ErrorCode;

use super::streams_group_heartbeat::streams_protocol_enabled;
use crate::group::streams_group::topology::TopicInfo as Declared;
use crate::group::streams_group::{StreamsGroup, TaskSet, Tasks};
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::StreamsGroupDescribe,
    0,
    1,
    StreamsGroupDescribeHandler {
        access: crate::authorizer::Access,
        config: sluice_metadata::BrokerConfig,
        metadata: crate::metadata_cache::MetadataCache,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

/// Kafka's "authorized operations not asked for".
const OMITTED: i32 = i32::MIN;

fn task_ids(tasks: &Tasks) -> Vec<TaskIds> {
    tasks
        .iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(s, ps)| {
            let mut t = TaskIds::default();
            t.subtopology_id = str_bytes(s.clone());
            t.partitions = ps.iter().copied().collect();
            t
        })
        .collect()
}

fn assignment(t: &TaskSet) -> Assignment {
    let mut a = Assignment::default();
    a.active_tasks = task_ids(&t.active);
    a.standby_tasks = task_ids(&t.standby);
    a.warmup_tasks = task_ids(&t.warmup);
    a
}

fn topic_info(t: &Declared, decided: Option<i32>) -> TopicInfo {
    let mut out = TopicInfo::default();
    out.name = TopicName(str_bytes(t.name.clone()));
    out.partitions = decided.unwrap_or(t.partitions);
    out.replication_factor = t.replication_factor;
    let mut configs = t.configs.clone();
    configs.sort();
    out.topic_configs = configs
        .into_iter()
        .map(|(k, v)| {
            let mut kv = KeyValue::default();
            kv.key = str_bytes(k);
            kv.value = str_bytes(v);
            kv
        })
        .collect();
    out
}

/// The topology as configured (partition counts decided) when it is ready, else as
/// declared.
fn topology(g: &StreamsGroup) -> Option<Topology> {
    let t = g.topology.as_ref()?;
    let ready = g.configured.as_ref().filter(|c| c.is_ready());
    let decided = |name: &str| ready.and_then(|c| c.internal.get(name).copied());
    let mut out = Topology::default();
    out.epoch = t.epoch;
    out.subtopologies = Some(
        t.subtopologies
            .iter()
            .map(|s| {
                let mut o = Subtopology::default();
                o.subtopology_id = str_bytes(s.id.clone());
                let mut sources = s.source_topics.clone();
                sources.sort();
                o.source_topics = sources
                    .into_iter()
                    .map(|n| TopicName(str_bytes(n)))
                    .collect();
                let mut sinks = s.repartition_sink_topics.clone();
                sinks.sort();
                o.repartition_sink_topics =
                    sinks.into_iter().map(|n| TopicName(str_bytes(n))).collect();
                o.state_changelog_topics = s
                    .state_changelog_topics
                    .iter()
                    .map(|c| topic_info(c, decided(&c.name)))
                    .collect();
                o.repartition_source_topics = s
                    .repartition_source_topics
                    .iter()
                    .map(|c| topic_info(c, decided(&c.name)))
                    .collect();
                o
            })
            .collect(),
    );
    Some(out)
}

async fn handle(
    h: &StreamsGroupDescribeHandler,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: StreamsGroupDescribeRequest = ctx.decode(body)?;
    let mut resp = StreamsGroupDescribeResponse::default();
    let acl = h.access.check(ctx);
    let ids: Vec<String> = req.group_ids.iter().map(|g| g.to_string()).collect();
    let enabled = streams_protocol_enabled(&h.config, &h.metadata);
    let asked: Vec<String> = ids
        .iter()
        .filter(|g| enabled && !g.is_empty() && acl.group(op::DESCRIBE, g))
        .cloned()
        .collect();
    let mut found = h.groups.streams_describe(asked).await.into_iter();
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
                    let uses_hidden_topic = group.topology.as_ref().is_some_and(|t| {
                        t.all_topics().iter().any(|n| !acl.topic(op::DESCRIBE, n))
                    });
                    if uses_hidden_topic {
                        g.error_code = ErrorCode::TopicAuthorizationFailed.code();
                        g.error_message = Some(str_bytes(
                            "The described group uses topics that the client is not authorized to describe.".to_string(),
                        ));
                        resp.groups.push(g);
                        continue;
                    }
                    g.group_state = str_bytes(group.state().name());
                    g.group_epoch = group.group_epoch;
                    g.assignment_epoch = group.assignment_epoch;
                    g.topology = topology(&group);
                    if ctx.api_version >= 1 {
                        g.assignor_name = Some(str_bytes("sticky".to_string()));
                    }
                    if req.include_authorized_operations {
                        g.authorized_operations = acl.authorized_operations(resource::GROUP, id);
                    }
                    let none = TaskSet::default();
                    g.members = group
                        .members
                        .values()
                        .map(|m| {
                            let mut out = Member::default();
                            out.member_id = str_bytes(m.member_id.clone());
                            out.member_epoch = m.member_epoch;
                            out.instance_id = m.instance_id.clone().map(str_bytes);
                            out.rack_id = m.rack_id.clone().map(str_bytes);
                            out.client_id = str_bytes(m.client_id.clone());
                            out.client_host = str_bytes(m.client_host.clone());
                            out.topology_epoch = m.topology_epoch;
                            out.process_id = str_bytes(m.process_id.clone());
                            out.user_endpoint = m.user_endpoint.as_ref().map(|(host, port)| {
                                let mut e = Endpoint::default();
                                e.host = str_bytes(host.clone());
                                e.port = *port;
                                e
                            });
                            out.client_tags = m
                                .client_tags
                                .iter()
                                .map(|(k, v)| {
                                    let mut kv = KeyValue::default();
                                    kv.key = str_bytes(k.clone());
                                    kv.value = str_bytes(v.clone());
                                    kv
                                })
                                .collect();
                            out.assignment = assignment(&m.assigned);
                            out.target_assignment =
                                assignment(group.target.get(&m.member_id).unwrap_or(&none));
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
