//! FindCoordinator (key 10): the coordinator of a consumer group is the leader of the
//! group's `__consumer_offsets` partition, that of a transactional id the leader of its
//! `__transaction_state` partition; both topics are created on first use.

use bytes::Bytes;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use sluice_metadata::acl::op;
use sluice_metadata::controller_types::CreateTopicSpec;
use sluice_protocol::ErrorCode;

use crate::broker::Broker;
use crate::group::coordinator::{partition_for, OFFSETS_TOPIC};
use crate::handlers::metadata::brokers_for_listener;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};
use crate::txn::coordinator::TXN_TOPIC;

handler!(ApiKey::FindCoordinator, 0, 6, handle);

const KEY_GROUP: i8 = 0;
const KEY_TRANSACTION: i8 = 1;

/// Create `__consumer_offsets` if it does not exist yet (Kafka's settings: compacted,
/// `offsets.topic.num.partitions` partitions, replication capped by live brokers).
pub async fn ensure_offsets_topic(broker: &Broker) -> Result<(), ErrorCode> {
    ensure_internal_topic(
        broker,
        OFFSETS_TOPIC,
        broker.groups.config.offsets_partitions,
        "offsets.topic.replication.factor",
        "offsets.topic.segment.bytes",
        None,
    )
    .await
}

/// Create `__transaction_state` if it does not exist yet (compacted,
/// `transaction.state.log.*` settings; its `min.insync.replicas` is capped by its
/// replication factor so a single broker can run transactions).
pub async fn ensure_transaction_topic(broker: &Broker) -> Result<(), ErrorCode> {
    ensure_internal_topic(
        broker,
        TXN_TOPIC,
        broker.txns.config.partitions,
        "transaction.state.log.replication.factor",
        "transaction.state.log.segment.bytes",
        Some("transaction.state.log.min.isr"),
    )
    .await
}

async fn ensure_internal_topic(
    broker: &Broker,
    name: &str,
    partitions: i32,
    replication_key: &str,
    segment_key: &str,
    min_isr_key: Option<&str>,
) -> Result<(), ErrorCode> {
    if broker.metadata.current().topic(name).is_some() {
        return Ok(());
    }
    let brokers = broker.metadata.current().live_brokers().count().max(1) as i16;
    let rf = broker
        .config
        .value(replication_key)
        .and_then(|v| v.parse::<i16>().ok())
        .unwrap_or(3)
        .min(brokers);
    let segment = broker
        .config
        .value(segment_key)
        .unwrap_or_else(|| "104857600".into());
    let mut configs = vec![
        ("cleanup.policy".into(), Some("compact".into())),
        ("compression.type".into(), Some("producer".into())),
        ("segment.bytes".into(), Some(segment)),
    ];
    if let Some(key) = min_isr_key {
        let min_isr = broker.config.number(key).clamp(1, i64::from(rf));
        configs.push(("min.insync.replicas".into(), Some(min_isr.to_string())));
    }
    let spec = CreateTopicSpec {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: rf,
        assignments: Vec::new(),
        configs,
    };
    match broker
        .call_controller(move |c| c.create_topics(&[spec], false))
        .await
    {
        Ok(results) => match results.into_iter().next() {
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) if e.code == ErrorCode::TopicAlreadyExists => Ok(()),
            _ => Err(ErrorCode::CoordinatorNotAvailable),
        },
        Err(_) => Err(ErrorCode::CoordinatorNotAvailable),
    }
}

/// Where the coordinator for `key` lives: (node id, host, port) or an error.
async fn locate(
    broker: &Broker,
    ctx: &RequestContext,
    key: &str,
    key_type: i8,
) -> Result<(i32, String, i32), ErrorCode> {
    if key.is_empty() {
        return Err(ErrorCode::InvalidRequest);
    }
    let acl = broker.acl(ctx);
    match key_type {
        KEY_GROUP if !acl.group(op::DESCRIBE, key) => {
            return Err(ErrorCode::GroupAuthorizationFailed)
        }
        KEY_TRANSACTION if !acl.transactional_id(op::DESCRIBE, key) => {
            return Err(ErrorCode::TransactionalIdAuthorizationFailed)
        }
        _ => {}
    }
    let (topic, partition) = match key_type {
        KEY_GROUP => {
            ensure_offsets_topic(broker).await?;
            (
                OFFSETS_TOPIC,
                partition_for(key, broker.groups.config.offsets_partitions),
            )
        }
        KEY_TRANSACTION => {
            ensure_transaction_topic(broker).await?;
            (TXN_TOPIC, broker.txns.partition_for(key))
        }
        _ => return Err(ErrorCode::InvalidRequest),
    };
    let image = broker.metadata.current();
    let leader = image
        .topic(topic)
        .and_then(|t| t.partitions.get(&partition))
        .map(|p| p.leader)
        .filter(|l| *l >= 0)
        .ok_or(ErrorCode::CoordinatorNotAvailable)?;
    brokers_for_listener(&image, &ctx.listener)
        .into_iter()
        .find(|(id, ..)| *id == leader)
        .map(|(id, host, port, _)| (id, host, port))
        .ok_or(ErrorCode::CoordinatorNotAvailable)
}

async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: FindCoordinatorRequest = ctx.decode(body)?;
    let mut resp = FindCoordinatorResponse::default();
    if ctx.api_version >= 4 {
        for key in &req.coordinator_keys {
            let mut c = Coordinator::default();
            c.key = key.clone();
            match locate(broker, ctx, key, req.key_type).await {
                Ok((id, host, port)) => {
                    c.node_id = BrokerId(id);
                    c.host = str_bytes(host);
                    c.port = port;
                }
                Err(code) => {
                    c.node_id = BrokerId(-1);
                    c.port = -1;
                    c.error_code = code.code();
                    c.error_message = Some(str_bytes(format!("{code:?}")));
                }
            }
            resp.coordinators.push(c);
        }
        return ctx.respond(&resp);
    }
    match locate(broker, ctx, &req.key, req.key_type).await {
        Ok((id, host, port)) => {
            resp.node_id = BrokerId(id);
            resp.host = str_bytes(host);
            resp.port = port;
        }
        Err(code) => {
            resp.node_id = BrokerId(-1);
            resp.port = -1;
            resp.error_code = code.code();
            if ctx.api_version >= 1 {
                resp.error_message = Some(str_bytes(format!("{code:?}")));
            }
        }
    }
    ctx.respond(&resp)
}
