//! Metadata (key 3): brokers, controller, topics with their partitions' leaders, replicas
//! and ISR. Unknown topics are auto-created when both the request and
//! `auto.create.topics.enable` allow it.

use bytes::Bytes;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};
use sluice_metadata::acl::{self, op, resource};
use sluice_metadata::image::TopicImage;
use sluice_metadata::{topic, MetadataImage, Uuid};
use sluice_protocol::ErrorCode;

use crate::metadata_cache::brokers_for_listener;
use crate::request::{
    str_bytes, HandlerError, RequestContext, Response, AUTHORIZED_OPERATIONS_OMITTED,
};

handler!(
    ApiKey::Metadata,
    0,
    13,
    Metadata {
        identity: crate::services::Identity,
        config: sluice_metadata::config::BrokerConfig,
        metadata: crate::metadata_cache::MetadataCache,
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access,
        topics: crate::services::topics::TopicCreator
    }
);

/// A topic's entry; `ops` is its authorized-operations field. Any broker serves a diskless
/// topic's partitions: each is shown led by a live broker (of the client's rack, `rack`, when
/// one is) picked by its index, so a client's partitions spread over the brokers as a classic
/// topic's leaders do (and move off a broker once it is fenced).
fn topic_response(
    image: &MetadataImage,
    t: &TopicImage,
    ops: i32,
    rack: Option<&str>,
) -> MetadataResponseTopic {
    let (live, serving) = if crate::diskless::is_diskless(image, &t.name) {
        (
            crate::diskless::serving_brokers(image, None),
            crate::diskless::serving_brokers(image, rack),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let mut out = MetadataResponseTopic::default();
    out.name = Some(TopicName(str_bytes(t.name.clone())));
    out.topic_id = t.id;
    out.is_internal = topic::is_internal(&t.name);
    out.topic_authorized_operations = ops;
    out.partitions = t
        .partitions
        .iter()
        .map(|(index, reg)| {
            let mut p = MetadataResponsePartition::default();
            p.partition_index = *index;
            p.leader_id = BrokerId(reg.leader);
            p.leader_epoch = reg.leader_epoch;
            p.replica_nodes = reg.replicas.iter().map(|r| BrokerId(*r)).collect();
            p.isr_nodes = reg.isr.iter().map(|r| BrokerId(*r)).collect();
            if let Some(leader) = crate::diskless::serving_broker(&serving, &t.id, *index) {
                p.leader_id = BrokerId(leader);
                p.replica_nodes = live.iter().map(|b| BrokerId(*b)).collect();
                p.isr_nodes = p.replica_nodes.clone();
                p.offline_replicas = Vec::new();
                p.error_code = 0;
                return p;
            }
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

fn missing_topic(name: Option<&str>, id: Uuid, code: ErrorCode) -> MetadataResponseTopic {
    let mut out = MetadataResponseTopic::default();
    out.name = name.map(|n| TopicName(str_bytes(n)));
    out.topic_id = id;
    out.error_code = code.code();
    out.topic_authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
    out
}

async fn handle(h: &Metadata, ctx: &RequestContext, body: Bytes) -> Result<Response, HandlerError> {
    let req: MetadataRequest = ctx.decode(body)?;
    // v0: an empty list means all topics; v1+: null means all, empty means none.
    let requested = match req.topics {
        None => None,
        Some(t) if t.is_empty() && ctx.api_version == 0 => None,
        Some(t) => Some(t),
    };
    let allow_auto_create = ctx.api_version < 4 || req.allow_auto_topic_creation;
    // DESCRIBE to see a topic (others are left out of "all topics" and answered
    // TOPIC_AUTHORIZATION_FAILED when named); CREATE (cluster or topic) to auto-create one.
    let acl = h.access.check(ctx);
    let may_create = |n: &str| acl.cluster(op::CREATE) || acl.topic(op::CREATE, n);
    let mut create_denied: Vec<String> = Vec::new();
    if let Some(topics) = &requested {
        let image = h.metadata.current();
        let (to_create, denied): (Vec<String>, Vec<String>) = topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
            .filter(|n| {
                !n.is_empty()
                    && image.topic(n).is_none()
                    && topic::validate_name(n).is_ok()
                    && acl.topic(op::DESCRIBE, n)
            })
            .partition(|n| may_create(n));
        if allow_auto_create && h.config.settings().auto_create_topics {
            create_denied = denied;
            h.topics.auto_create(to_create).await;
        }
    }
    let image = h.metadata.current();
    let mut resp = MetadataResponse::default();
    resp.brokers = brokers_for_listener(&image, &ctx.listener)
        .into_iter()
        .map(|(id, host, port, rack)| {
            let mut b = MetadataResponseBroker::default();
            b.node_id = BrokerId(id);
            b.host = str_bytes(host);
            b.port = port;
            b.rack = rack.map(str_bytes);
            b
        })
        .collect();
    resp.cluster_id = Some(str_bytes(h.identity.cluster_id.clone()));
    resp.controller_id = BrokerId(h.controller.controller_id(&image));
    resp.cluster_authorized_operations =
        if req.include_cluster_authorized_operations && ctx.api_version <= 10 {
            acl.authorized_operations(resource::CLUSTER, acl::CLUSTER_NAME)
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        };
    let ops = |name: &str| {
        if req.include_topic_authorized_operations {
            acl.authorized_operations(resource::TOPIC, name)
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        }
    };
    let rack = crate::diskless::client_id_rack(ctx.client_id.as_deref());
    let seen = |t: &TopicImage| -> MetadataResponseTopic {
        if acl.topic(op::DESCRIBE, &t.name) {
            topic_response(&image, t, ops(&t.name), rack)
        } else {
            missing_topic(
                Some(&t.name),
                Uuid::nil(),
                ErrorCode::TopicAuthorizationFailed,
            )
        }
    };
    resp.topics = match requested {
        None => image
            .topics
            .values()
            .filter(|t| acl.topic(op::DESCRIBE, &t.name))
            .map(|t| topic_response(&image, t, ops(&t.name), rack))
            .collect(),
        Some(topics) => topics
            .iter()
            .map(|t| {
                match t
                    .name
                    .as_ref()
                    .filter(|n| !n.is_empty() || t.topic_id.is_nil())
                {
                    Some(name) => match image.topic(name) {
                        Some(found) => seen(found),
                        None if !acl.topic(op::DESCRIBE, name)
                            || create_denied.iter().any(|d| d.as_str() == name.as_str()) =>
                        {
                            missing_topic(
                                Some(name),
                                Uuid::nil(),
                                ErrorCode::TopicAuthorizationFailed,
                            )
                        }
                        None if topic::validate_name(name).is_err() => {
                            missing_topic(Some(name), Uuid::nil(), ErrorCode::InvalidTopicException)
                        }
                        None => missing_topic(
                            Some(name),
                            Uuid::nil(),
                            ErrorCode::UnknownTopicOrPartition,
                        ),
                    },
                    // v10+: a topic named by id alone (the name is null or empty).
                    None => match image.topic_by_id(&t.topic_id) {
                        Some(found) if !acl.topic(op::DESCRIBE, &found.name) => {
                            missing_topic(None, t.topic_id, ErrorCode::TopicAuthorizationFailed)
                        }
                        Some(found) => seen(found),
                        None => missing_topic(None, t.topic_id, ErrorCode::UnknownTopicId),
                    },
                }
            })
            .collect(),
    };
    ctx.respond(&resp)
}
