//! ConsumerGroupHeartbeat (key 68): the consumer group protocol (KIP-848). A member joins,
//! heartbeats, acknowledges what it reconciled and leaves through this one request; the
//! coordinator computes assignments ([`crate::group::coordinator`]).

use bytes::Bytes;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};
use sluice_metadata::acl::op;
use sluice_metadata::config::mirror::FullMatch;
use sluice_metadata::features;
use sluice_protocol::ErrorCode;

use crate::group::assignor::Partitions;
use crate::group::consumer_group::validate::check_heartbeat;
use crate::group::consumer_group::HeartbeatRequest;
use crate::group::coordinator::{offered_assignors, ConsumerHeartbeat};
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::ConsumerGroupHeartbeat,
    0,
    1,
    ConsumerGroupHeartbeatHandler {
        access: crate::authorizer::Access,
        config: sluice_metadata::BrokerConfig,
        metadata: crate::metadata_cache::MetadataCache,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

/// Whether `group.coordinator.rebalance.protocols` has the consumer protocol and the cluster
/// has `group.version` 1 finalized (Kafka's isConsumerGroupProtocolEnabled).
pub fn consumer_protocol_enabled(
    config: &sluice_metadata::BrokerConfig,
    metadata: &crate::metadata_cache::MetadataCache,
) -> bool {
    config
        .value("group.coordinator.rebalance.protocols")
        .is_none_or(|v| v.split(',').any(|p| p.trim() == "consumer"))
        && features::level(&metadata.current(), features::GROUP_VERSION) >= 1
}

fn refused(code: ErrorCode, message: Option<String>) -> ConsumerGroupHeartbeatResponse {
    let mut resp = ConsumerGroupHeartbeatResponse::default();
    resp.error_code = code.code();
    resp.error_message = message.filter(|m| !m.is_empty()).map(str_bytes);
    resp
}

async fn handle(
    h: &ConsumerGroupHeartbeatHandler,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: ConsumerGroupHeartbeatRequest = ctx.decode(body)?;
    if !consumer_protocol_enabled(&h.config, &h.metadata) {
        return ctx.respond(&refused(ErrorCode::UnsupportedVersion, None));
    }
    let acl = h.access.check(ctx);
    if !acl.group(op::READ, &req.group_id) {
        return ctx.respond(&refused(ErrorCode::GroupAuthorizationFailed, None));
    }
    let names = req.subscribed_topic_names.as_ref();
    if names.is_some_and(|ns| ns.iter().any(|n| !acl.topic(op::DESCRIBE, n))) {
        return ctx.respond(&refused(ErrorCode::TopicAuthorizationFailed, None));
    }
    if let Err((code, message)) =
        check_heartbeat(&req, ctx.api_version, &offered_assignors(&h.config))
    {
        return ctx.respond(&refused(code, Some(message)));
    }
    if let Some(regex) = req
        .subscribed_topic_regex
        .as_ref()
        .filter(|r| !r.is_empty())
    {
        if let Err(e) = FullMatch::new(regex) {
            return ctx.respond(&refused(
                ErrorCode::InvalidRegularExpression,
                Some(format!(
                    "SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}."
                )),
            ));
        }
    }
    // v0 lets the coordinator name a joining member.
    let member_id = if req.member_id.is_empty() && req.member_epoch == 0 {
        sluice_metadata::Uuid::new_v4().to_string()
    } else {
        req.member_id.to_string()
    };
    let owned = req.topic_partitions.as_ref().map(|ts| {
        let mut out = Partitions::new();
        for t in ts {
            if !t.partitions.is_empty() {
                out.entry(t.topic_id)
                    .or_insert_with(Default::default)
                    .extend(t.partitions.iter().copied());
            }
        }
        out
    });
    let hb = ConsumerHeartbeat {
        group_id: req.group_id.to_string(),
        req: HeartbeatRequest {
            member_id,
            member_epoch: req.member_epoch,
            instance_id: req.instance_id.as_ref().map(|s| s.to_string()),
            rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            subscribed_topic_names: names.map(|ns| ns.iter().map(|n| n.to_string()).collect()),
            subscribed_topic_regex: req.subscribed_topic_regex.as_ref().map(|r| r.to_string()),
            server_assignor: req.server_assignor.as_ref().map(|s| s.to_string()),
            owned,
            client_id: ctx.client_id.clone().unwrap_or_default(),
            client_host: format!("/{}", ctx.peer.ip()),
        },
    };
    let resp = match h.groups.consumer_heartbeat(hb).await {
        Err((code, message)) => refused(code, Some(message)),
        Ok(a) => {
            let mut resp = ConsumerGroupHeartbeatResponse::default();
            resp.member_id = Some(str_bytes(a.member_id));
            resp.member_epoch = a.member_epoch;
            resp.heartbeat_interval_ms = a.heartbeat_interval_ms.max(0);
            resp.assignment = a.assignment.map(|p| {
                let mut assignment = Assignment::default();
                assignment.topic_partitions = p
                    .into_iter()
                    .map(|(id, ps)| {
                        let mut t = TopicPartitions::default();
                        t.topic_id = id;
                        t.partitions = ps.into_iter().collect();
                        t
                    })
                    .collect();
                assignment
            });
            resp
        }
    };
    ctx.respond(&resp)
}
