//! StreamsGroupHeartbeat (key 88): the streams group protocol (KIP-1071). A Kafka Streams
//! member joins with its topology, heartbeats, acknowledges the tasks it reconciled and
//! leaves through this one request; the coordinator configures the topology and assigns
//! tasks ([`crate::group::coordinator`]); this handler checks the request as Kafka's
//! KafkaApis and GroupCoordinatorService do and creates missing internal topics.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::streams_group_heartbeat_request::{self as rq, TaskIds as ReqTasks};
use kafka_protocol::messages::streams_group_heartbeat_response::{
    Endpoint, EndpointToPartitions, Status, TaskIds, TopicPartition,
};
use kafka_protocol::messages::{
    ApiKey, StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse, TopicName,
};
use sluice_metadata::acl::op;
use sluice_metadata::controller_types::CreateTopicSpec;
use sluice_metadata::topic::{is_internal, validate_name};
use sluice_protocol::ErrorCode;

use crate::group::coordinator::StreamsHeartbeatRequest;
use crate::group::streams_group::topology::{
    CopartitionGroup, Subtopology, TopicInfo, Topology, MISSING_INTERNAL_TOPICS,
};
use crate::group::streams_group::{StreamsHeartbeat, TaskSet, Tasks};
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::StreamsGroupHeartbeat,
    0,
    1,
    StreamsGroupHeartbeatHandler {
        access: crate::authorizer::Access,
        config: sluice_metadata::BrokerConfig,
        metadata: crate::metadata_cache::MetadataCache,
        groups: crate::group::coordinator::GroupCoordinator,
        topics: crate::services::topics::TopicCreator
    }
);

/// Kafka 4.4's `group.streams.acceptable.recovery.lag` and
/// `group.streams.task.offset.interval.ms` defaults, told to members (Sluice assigns no
/// warm-up tasks and does not use task offsets, which it accepts and ignores).
const ACCEPTABLE_RECOVERY_LAG: i64 = 10_000;
const TASK_OFFSET_INTERVAL_MS: i32 = 60_000;

/// Whether `group.coordinator.rebalance.protocols` has the streams protocol and the cluster
/// has `streams.version` 1 finalized (Kafka's isStreamsGroupProtocolEnabled).
pub fn streams_protocol_enabled(
    config: &sluice_metadata::BrokerConfig,
    metadata: &crate::metadata_cache::MetadataCache,
) -> bool {
    config
        .value("group.coordinator.rebalance.protocols")
        .is_none_or(|v| v.split(',').any(|p| p.trim() == "streams"))
        && sluice_metadata::features::level(
            &metadata.current(),
            sluice_metadata::features::STREAMS_VERSION,
        ) >= 1
}

fn refused(code: ErrorCode, message: Option<String>) -> StreamsGroupHeartbeatResponse {
    let mut resp = StreamsGroupHeartbeatResponse::default();
    resp.error_code = code.code();
    resp.error_message = message.filter(|m| !m.is_empty()).map(str_bytes);
    resp
}

type Refusal = (ErrorCode, String);

fn invalid(message: impl Into<String>) -> Refusal {
    (ErrorCode::InvalidRequest, message.into())
}

/// GroupCoordinatorService's checks (throwIfStreamsGroupHeartbeatRequestIsInvalid and the
/// features not supported yet).
fn check(req: &StreamsGroupHeartbeatRequest) -> Result<(), Refusal> {
    if let Some(t) = &req.topology {
        if t.subtopologies
            .iter()
            .any(|s| !s.source_topic_regex.is_empty())
        {
            return Err(invalid(
                "Regular expressions for source topics are not supported yet.",
            ));
        }
    }
    let blank = |s: &str| s.trim().is_empty();
    if blank(&req.member_id) {
        return Err(invalid("MemberId can't be empty."));
    }
    if blank(&req.group_id) {
        return Err(invalid("GroupId can't be empty."));
    }
    if req.instance_id.as_deref().is_some_and(blank) {
        return Err(invalid("InstanceId can't be empty."));
    }
    if req.rack_id.as_deref().is_some_and(blank) {
        return Err(invalid("RackId can't be empty."));
    }
    let epoch = req.member_epoch;
    if epoch == 0 {
        if req.rebalance_timeout_ms == -1 {
            return Err(invalid(
                "RebalanceTimeoutMs must be provided in first request.",
            ));
        }
        for (tasks, kind) in [
            (&req.active_tasks, "ActiveTasks"),
            (&req.standby_tasks, "StandbyTasks"),
            (&req.warmup_tasks, "WarmupTasks"),
        ] {
            if tasks.as_ref().is_none_or(|t| !t.is_empty()) {
                return Err(invalid(format!("{kind} must be empty when (re-)joining.")));
            }
        }
        let Some(topology) = &req.topology else {
            return Err(invalid("Topology must be non-null when (re-)joining."));
        };
        for s in &topology.subtopologies {
            for c in &s.state_changelog_topics {
                if c.partitions != 0 {
                    return Err((
                        ErrorCode::StreamsInvalidTopology,
                        format!(
                            "Changelog topic {} must have an undefined partition count, but it is set to {}.",
                            c.name.as_str(),
                            c.partitions
                        ),
                    ));
                }
            }
        }
    } else if epoch == -2 && req.instance_id.is_none() {
        return Err(invalid("InstanceId can't be null."));
    } else if epoch < -2 {
        return Err(invalid(format!(
            "MemberEpoch is {epoch}, but must be greater than or equal to -2."
        )));
    }
    let sent = [&req.active_tasks, &req.standby_tasks, &req.warmup_tasks]
        .iter()
        .filter(|t| t.is_some())
        .count();
    if sent != 0 && sent != 3 {
        return Err(invalid(
            "If one task-type is non-null, all must be non-null.",
        ));
    }
    if epoch != 0 && req.topology.is_some() {
        return Err(invalid("Topology can only be provided when (re-)joining."));
    }
    Ok(())
}

fn tasks(list: &[ReqTasks]) -> Tasks {
    let mut out = Tasks::new();
    for t in list {
        if !t.partitions.is_empty() {
            out.entry(t.subtopology_id.to_string())
                .or_default()
                .extend(t.partitions.iter().copied());
        }
    }
    out
}

fn topic_info(t: &rq::TopicInfo) -> TopicInfo {
    TopicInfo {
        name: t.name.to_string(),
        partitions: t.partitions,
        replication_factor: t.replication_factor,
        configs: t
            .topic_configs
            .iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect(),
    }
}

fn topology(t: &rq::Topology) -> Topology {
    let mut subtopologies: Vec<Subtopology> = t
        .subtopologies
        .iter()
        .map(|s| Subtopology {
            id: s.subtopology_id.to_string(),
            source_topics: s.source_topics.iter().map(|n| n.to_string()).collect(),
            state_changelog_topics: s.state_changelog_topics.iter().map(topic_info).collect(),
            repartition_sink_topics: s
                .repartition_sink_topics
                .iter()
                .map(|n| n.to_string())
                .collect(),
            repartition_source_topics: s.repartition_source_topics.iter().map(topic_info).collect(),
            copartition_groups: s
                .copartition_groups
                .iter()
                .map(|g| CopartitionGroup {
                    source_topics: g.source_topics.clone(),
                    repartition_source_topics: g.repartition_source_topics.clone(),
                })
                .collect(),
        })
        .collect();
    subtopologies.sort_by(|a, b| a.id.cmp(&b.id));
    Topology {
        epoch: t.epoch,
        subtopologies,
    }
}

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

fn topic_partitions(by_topic: &BTreeMap<String, BTreeSet<i32>>) -> Vec<TopicPartition> {
    by_topic
        .iter()
        .map(|(t, ps)| {
            let mut tp = TopicPartition::default();
            tp.topic = TopicName(str_bytes(t.clone()));
            tp.partitions = ps.iter().copied().collect();
            tp
        })
        .collect()
}

async fn handle(
    h: &StreamsGroupHeartbeatHandler,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: StreamsGroupHeartbeatRequest = ctx.decode(body)?;
    if !streams_protocol_enabled(&h.config, &h.metadata) {
        return ctx.respond(&refused(ErrorCode::UnsupportedVersion, None));
    }
    let acl = h.access.check(ctx);
    if !acl.group(op::READ, &req.group_id) {
        return ctx.respond(&refused(ErrorCode::GroupAuthorizationFailed, None));
    }
    let declared = req.topology.as_ref().map(topology);
    if let Some(t) = &declared {
        let names = t.all_topics();
        let internal: Vec<&str> = names.iter().copied().filter(|n| is_internal(n)).collect();
        if !internal.is_empty() {
            return ctx.respond(&refused(
                ErrorCode::StreamsInvalidTopology,
                Some(format!(
                    "Use of Kafka internal topics {} in a Kafka Streams topology is prohibited.",
                    internal.join(",")
                )),
            ));
        }
        let bad: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| validate_name(n).is_err())
            .collect();
        if !bad.is_empty() {
            return ctx.respond(&refused(
                ErrorCode::StreamsInvalidTopology,
                Some(format!(
                    "Topic names {} are not valid topic names.",
                    bad.join(",")
                )),
            ));
        }
        if names.iter().any(|n| !acl.topic(op::DESCRIBE, n)) {
            return ctx.respond(&refused(ErrorCode::TopicAuthorizationFailed, None));
        }
    }
    if let Err((code, message)) = check(&req) {
        return ctx.respond(&refused(code, Some(message)));
    }
    let owned = match (&req.active_tasks, &req.standby_tasks, &req.warmup_tasks) {
        (Some(a), Some(s), Some(w)) => Some(TaskSet {
            active: tasks(a),
            standby: tasks(s),
            warmup: tasks(w),
        }),
        _ => None,
    };
    let hb = StreamsHeartbeatRequest {
        group_id: req.group_id.to_string(),
        req: StreamsHeartbeat {
            member_id: req.member_id.to_string(),
            member_epoch: req.member_epoch,
            endpoint_information_epoch: req.endpoint_information_epoch,
            instance_id: req.instance_id.as_ref().map(|s| s.to_string()),
            rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            topology: declared,
            owned,
            process_id: req.process_id.as_ref().map(|s| s.to_string()),
            user_endpoint: req
                .user_endpoint
                .as_ref()
                .map(|e| (e.host.to_string(), e.port)),
            client_tags: req.client_tags.as_ref().map(|tags| {
                tags.iter()
                    .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                    .collect()
            }),
            shutdown_application: req.shutdown_application,
            client_id: ctx.client_id.clone().unwrap_or_default(),
            client_host: format!("/{}", ctx.peer.ip()),
        },
    };
    let a = match h.groups.streams_heartbeat(hb).await {
        Err((code, message)) => return ctx.respond(&refused(code, Some(message))),
        Ok(a) => a,
    };
    let mut answer = a.answer;
    // Missing internal topics: the broker creates them (with CREATE on the cluster or on
    // each topic), in the background; the members learn at a later heartbeat.
    if !answer.to_create.is_empty() {
        let unauthorized: Vec<&str> = if acl.cluster(op::CREATE) {
            Vec::new()
        } else {
            answer
                .to_create
                .iter()
                .map(|t| t.name.as_str())
                .filter(|n| !acl.topic(op::CREATE, n))
                .collect()
        };
        let extra = if unauthorized.is_empty() {
            let specs = answer
                .to_create
                .iter()
                .map(|t| CreateTopicSpec {
                    name: t.name.clone(),
                    num_partitions: t.partitions,
                    replication_factor: t.replication_factor,
                    assignments: Vec::new(),
                    configs: t
                        .configs
                        .iter()
                        .map(|(k, v)| (k.clone(), Some(v.clone())))
                        .collect(),
                })
                .collect();
            let remember = Duration::from_millis(2 * a.heartbeat_interval_ms.max(0) as u64);
            h.topics.create_internal_in_background(specs, remember);
            let names: Vec<String> = answer.to_create.iter().map(|t| t.name.clone()).collect();
            let failed = h.topics.creation_failures(&names);
            (!failed.is_empty()).then(|| {
                let list: Vec<String> = failed
                    .into_iter()
                    .map(|(t, m)| format!("{t} ({m})"))
                    .collect();
                format!("Creation failed: {}.", list.join(", "))
            })
        } else {
            Some(format!(
                "Unauthorized to CREATE on topics {}.",
                unauthorized.join(", ")
            ))
        };
        if let Some(extra) = extra {
            match answer
                .status
                .iter_mut()
                .find(|(code, _)| *code == MISSING_INTERNAL_TOPICS)
            {
                Some((_, detail)) => {
                    detail.push_str("; ");
                    detail.push_str(&extra);
                }
                None => answer.status.push((MISSING_INTERNAL_TOPICS, extra)),
            }
        }
    }
    let mut resp = StreamsGroupHeartbeatResponse::default();
    resp.member_id = str_bytes(answer.member_id);
    resp.member_epoch = answer.member_epoch;
    resp.heartbeat_interval_ms = a.heartbeat_interval_ms;
    // The same setting, an int32 in v0 and an int64 from v1.
    if ctx.api_version == 0 {
        resp.acceptable_recovery_lag_legacy = ACCEPTABLE_RECOVERY_LAG as i32;
    } else {
        resp.acceptable_recovery_lag = ACCEPTABLE_RECOVERY_LAG;
    }
    resp.task_offset_interval_ms = TASK_OFFSET_INTERVAL_MS;
    if req.member_epoch >= 0 {
        resp.status = Some(
            answer
                .status
                .into_iter()
                .map(|(code, detail)| {
                    let mut s = Status::default();
                    s.status_code = code;
                    s.status_detail = str_bytes(detail);
                    s
                })
                .collect(),
        );
    }
    if let Some(t) = answer.tasks {
        resp.active_tasks = Some(task_ids(&t.active));
        resp.standby_tasks = Some(task_ids(&t.standby));
        resp.warmup_tasks = Some(task_ids(&t.warmup));
    }
    resp.endpoint_information_epoch = answer.endpoint_information_epoch;
    resp.partitions_by_user_endpoint = answer.endpoints.map(|eps| {
        eps.into_iter()
            .map(|e| {
                let mut out = EndpointToPartitions::default();
                let mut endpoint = Endpoint::default();
                endpoint.host = str_bytes(e.endpoint.0);
                endpoint.port = e.endpoint.1;
                out.user_endpoint = endpoint;
                out.active_partitions = topic_partitions(&e.active);
                out.standby_partitions = topic_partitions(&e.standby);
                out
            })
            .collect()
    });
    ctx.respond(&resp)
}
