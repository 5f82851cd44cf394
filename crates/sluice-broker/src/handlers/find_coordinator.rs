//! FindCoordinator (key 10): the coordinator of a consumer group is the leader of the
//! group's `__consumer_offsets` partition, which is created on first use. Transaction
//! coordinators arrive with transactions (COORDINATOR_NOT_AVAILABLE until then).

use bytes::Bytes;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use sluice_metadata::controller_types::CreateTopicSpec;
use sluice_protocol::ErrorCode;

use crate::broker::Broker;
use crate::group::coordinator::{partition_for, OFFSETS_TOPIC};
use crate::handlers::metadata::brokers_for_listener;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(ApiKey::FindCoordinator, 0, 6, handle);

const KEY_GROUP: i8 = 0;

/// Create `__consumer_offsets` if it does not exist yet (Kafka's settings: compacted,
/// `offsets.topic.num.partitions` partitions, replication capped by live brokers).
pub async fn ensure_offsets_topic(broker: &Broker) -> Result<(), ErrorCode> {
    if broker.metadata.current().topic(OFFSETS_TOPIC).is_some() {
        return Ok(());
    }
    let partitions = broker.groups.config.offsets_partitions;
    let brokers = broker.metadata.current().live_brokers().count().max(1) as i16;
    let rf = broker
        .config
        .value("offsets.topic.replication.factor")
        .and_then(|v| v.parse::<i16>().ok())
        .unwrap_or(3)
        .min(brokers);
    let segment = broker
        .config
        .value("offsets.topic.segment.bytes")
        .unwrap_or_else(|| "104857600".into());
    let spec = CreateTopicSpec {
        name: OFFSETS_TOPIC.into(),
        num_partitions: partitions,
        replication_factor: rf,
        assignments: Vec::new(),
        configs: vec![
            ("cleanup.policy".into(), Some("compact".into())),
            ("compression.type".into(), Some("producer".into())),
            ("segment.bytes".into(), Some(segment)),
        ],
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
    if key_type != KEY_GROUP {
        return Err(ErrorCode::CoordinatorNotAvailable);
    }
    if key.is_empty() {
        return Err(ErrorCode::InvalidRequest);
    }
    ensure_offsets_topic(broker).await?;
    let image = broker.metadata.current();
    let partition = partition_for(key, broker.groups.config.offsets_partitions);
    let leader = image
        .topic(OFFSETS_TOPIC)
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
