//! DescribeTopicPartitions (key 75, KIP-966): topics with their partitions' leaders, replicas
//! and ISR, paged. Topics come sorted by name; an answer holds at most
//! `min(response_partition_limit, max.request.partition.size.limit)` partitions (at least one),
//! and `next_cursor` names the first partition left out, which the client sends back to read
//! on. As Kafka 4.4 answers (checked on the wire): an empty topic list means every topic the
//! principal may describe; a named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION,
//! one it may not describe TOPIC_AUTHORIZATION_FAILED; a cursor naming a topic outside the
//! requested list makes every topic INVALID_REQUEST. Eligible leader replicas are empty lists
//! (never null: the Java admin client reads them): Sluice does not keep ELR, and a Kafka cluster
//! without `eligible.leader.replicas.version` answers the same.

use bytes::Bytes;
use kafka_protocol::messages::describe_topic_partitions_response::Cursor;
use kafka_protocol::messages::describe_topic_partitions_response::{
    DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use sluice_metadata::acl::{op, resource};
use sluice_metadata::image::TopicImage;
use sluice_metadata::{topic, MetadataImage, Uuid};
use sluice_protocol::ErrorCode;

use crate::request::{
    str_bytes, HandlerError, RequestContext, Response, AUTHORIZED_OPERATIONS_OMITTED,
};

handler!(
    ApiKey::DescribeTopicPartitions,
    0,
    0,
    DescribeTopicPartitions {
        config: sluice_metadata::config::BrokerConfig,
        metadata: crate::metadata_cache::MetadataCache,
        access: crate::authorizer::Access
    },
    sync
);

/// A topic answered with an error alone.
fn errored(name: &str, code: ErrorCode) -> DescribeTopicPartitionsResponseTopic {
    let mut t = DescribeTopicPartitionsResponseTopic::default();
    t.name = Some(TopicName(str_bytes(name)));
    t.topic_id = Uuid::nil();
    t.error_code = code.code();
    t.topic_authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
    t
}

/// `t`'s entry with its partitions from `first` on, at most `room` of them.
fn described(
    image: &MetadataImage,
    t: &TopicImage,
    ops: i32,
    first: i32,
    room: usize,
) -> DescribeTopicPartitionsResponseTopic {
    let mut out = DescribeTopicPartitionsResponseTopic::default();
    out.name = Some(TopicName(str_bytes(t.name.clone())));
    out.topic_id = t.id;
    out.is_internal = topic::is_internal(&t.name);
    out.topic_authorized_operations = ops;
    out.partitions = t
        .partitions
        .range(first..)
        .take(room)
        .map(|(index, reg)| {
            let mut p = DescribeTopicPartitionsResponsePartition::default();
            p.partition_index = *index;
            p.leader_id = BrokerId(reg.leader);
            p.leader_epoch = reg.leader_epoch;
            p.replica_nodes = reg.replicas.iter().map(|r| BrokerId(*r)).collect();
            p.isr_nodes = reg.isr.iter().map(|r| BrokerId(*r)).collect();
            // KIP-966 (empty while `eligible.leader.replicas.version` is 0, as Kafka's).
            let ids = |v: &[i32]| Some(v.iter().map(|r| BrokerId(*r)).collect());
            p.eligible_leader_replicas = ids(&reg.elr.eligible);
            p.last_known_elr = ids(&reg.elr.last_known);
            p.offline_replicas = reg
                .replicas
                .iter()
                .filter(|r| !image.is_live(**r))
                .map(|r| BrokerId(*r))
                .collect();
            if reg.leader < 0 {
                p.error_code = ErrorCode::LeaderNotAvailable.code();
            }
            p
        })
        .collect();
    out
}

fn handle(
    h: &DescribeTopicPartitions,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DescribeTopicPartitionsRequest = ctx.decode(body)?;
    let image = h.metadata.current();
    let acl = h.access.check(ctx);
    let all = req.topics.is_empty();
    // The names to answer, sorted and without repeats.
    let mut names: Vec<String> = if all {
        image
            .topics
            .keys()
            .filter(|n| acl.topic(op::DESCRIBE, n))
            .cloned()
            .collect()
    } else {
        req.topics.iter().map(|t| t.name.to_string()).collect()
    };
    names.sort_unstable();
    names.dedup();
    let mut resp = DescribeTopicPartitionsResponse::default();
    let cursor = req
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.to_string(), c.partition_index.max(0)));
    if let Some((cursor_topic, _)) = &cursor {
        if !all && names.binary_search(cursor_topic).is_err() {
            resp.topics = names
                .iter()
                .map(|n| errored(n, ErrorCode::InvalidRequest))
                .collect();
            return ctx.respond(&resp);
        }
    }
    let limit = req
        .response_partition_limit
        .min(h.config.settings().max_request_partition_size_limit)
        .max(1) as usize;
    let mut room = limit;
    // Topics before the cursor's were answered by earlier pages.
    let start = cursor
        .as_ref()
        .map_or(0, |(t, _)| names.partition_point(|n| n < t));
    let mut rest = names[start..].iter().peekable();
    while let Some(name) = rest.next() {
        let found = image.topic(name);
        let entry = match found {
            _ if !acl.topic(op::DESCRIBE, name) => {
                errored(name, ErrorCode::TopicAuthorizationFailed)
            }
            None => {
                let mut e = errored(name, ErrorCode::UnknownTopicOrPartition);
                e.topic_authorized_operations = acl.authorized_operations(resource::TOPIC, name);
                e
            }
            Some(t) => {
                let first = match &cursor {
                    Some((ct, p)) if ct == name => *p,
                    _ => 0,
                };
                let ops = acl.authorized_operations(resource::TOPIC, name);
                let entry = described(&image, t, ops, first, room);
                room -= entry.partitions.len();
                // Partitions of this topic left over: the next page starts with them.
                if let Some(last) = entry.partitions.last() {
                    if t.partitions
                        .range(last.partition_index + 1..)
                        .next()
                        .is_some()
                    {
                        resp.next_cursor = Some(cursor_at(name, last.partition_index + 1));
                        resp.topics.push(entry);
                        break;
                    }
                }
                entry
            }
        };
        resp.topics.push(entry);
        if room == 0 {
            if let Some(next) = rest.peek() {
                resp.next_cursor = Some(cursor_at(next, 0));
            }
            break;
        }
    }
    ctx.respond(&resp)
}

fn cursor_at(topic: &str, partition: i32) -> Cursor {
    let mut c = Cursor::default();
    c.topic_name = TopicName(str_bytes(topic));
    c.partition_index = partition;
    c
}
