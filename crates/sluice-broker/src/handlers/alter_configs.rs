//! AlterConfigs (key 33, the legacy form): replaces a topic's whole set of overrides — keys
//! not named are reset to their defaults.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, ApiKey};
use sluice_metadata::acl::op;
use sluice_metadata::config::{listener_store_key, BrokerConfig, DynamicBrokerConfigs};
use sluice_metadata::image::{RESOURCE_BROKER, RESOURCE_TOPIC};
use sluice_protocol::ErrorCode;

use crate::broker::Broker;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(ApiKey::AlterConfigs, 0, 2, handle);

/// Commit topic config changes through the controller.
pub(crate) async fn alter_topic(
    broker: &Broker,
    topic: String,
    changes: Vec<(String, Option<String>)>,
    validate_only: bool,
) -> Result<(), (ErrorCode, String)> {
    match broker
        .call_controller(move |c| c.alter_topic_configs(&topic, &changes, validate_only))
        .await
    {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err((e.code, e.message)),
        Err(e) => Err((ErrorCode::UnknownServerError, e)),
    }
}

/// Commit dynamic broker config changes (`broker` "" = the cluster-wide defaults).
pub(crate) async fn alter_broker(
    broker: &Broker,
    name: String,
    changes: Vec<(String, Option<String>)>,
    validate_only: bool,
) -> Result<(), (ErrorCode, String)> {
    let reload = check_listener_stores(broker, &name, &changes)?;
    match broker
        .call_controller(move |c| c.alter_broker_configs(&name, &changes, validate_only))
        .await
    {
        Ok(Ok(())) => {
            if let Some((listeners, config)) = reload.filter(|_| !validate_only) {
                for tls in listeners {
                    // Checked above; the same path again re-reads the files.
                    if let Err(e) = tls.reload(&config, true) {
                        tracing::warn!(listener = tls.listener(), error = %e, "TLS stores not reloaded");
                    }
                }
            }
            Ok(())
        }
        Ok(Err(e)) => Err((e.code, e.message)),
        Err(e) => Err((ErrorCode::UnknownServerError, e)),
    }
}

/// The SSL listeners whose key or trust store `changes` replaces, and the config they
/// would then be built from, after checking here that they can serve with it: the files
/// are this broker's, so only it can say (Kafka validates on the broker too).
type StoreReload = (Vec<Arc<crate::tls::ListenerTls>>, BrokerConfig);

fn check_listener_stores(
    broker: &Broker,
    name: &str,
    changes: &[(String, Option<String>)],
) -> Result<Option<StoreReload>, (ErrorCode, String)> {
    let named: Vec<&str> = changes
        .iter()
        .filter_map(|(k, _)| listener_store_key(k).map(|(l, _)| l))
        .collect();
    if named.is_empty() || name.is_empty() {
        // The cluster default is refused by the controller, with Kafka's message.
        return Ok(None);
    }
    if name.parse::<i32>().ok() != Some(broker.node_id) {
        return Err((
            ErrorCode::InvalidRequest,
            format!(
                "the TLS stores of broker {name} can only be changed through broker {name}, which checks them (this is broker {})",
                broker.node_id
            ),
        ));
    }
    let image = broker.metadata.current();
    let mut dynamic = DynamicBrokerConfigs::from_image(&image, broker.node_id);
    for (k, v) in changes {
        match v {
            Some(v) => dynamic.broker.insert(k.clone(), v.clone()),
            None => dynamic.broker.remove(k),
        };
    }
    let config = broker.config.with_dynamic(&dynamic);
    let mut listeners = Vec::new();
    for l in named {
        let tls = broker
            .listener_tls
            .iter()
            .find(|t| t.listener().eq_ignore_ascii_case(l))
            .ok_or_else(|| {
                (
                    ErrorCode::InvalidConfig,
                    format!("listener {l} of broker {name} does not use TLS"),
                )
            })?;
        tls.check(&config)
            .map_err(|m| (ErrorCode::InvalidConfig, m))?;
        listeners.push(Arc::clone(tls));
    }
    Ok(Some((listeners, config)))
}

/// The answer for a resource type that cannot be altered.
pub(crate) fn broker_configs_are_static(resource_type: i8) -> Result<(), (ErrorCode, String)> {
    if resource_type == RESOURCE_BROKER {
        Err((
            ErrorCode::InvalidConfig,
            "broker configs cannot be changed at runtime yet; set them in server.properties".into(),
        ))
    } else if resource_type == sluice_metadata::image::RESOURCE_BROKER_LOGGER {
        Err((
            ErrorCode::InvalidRequest,
            "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER"
                .into(),
        ))
    } else {
        Err((
            ErrorCode::InvalidRequest,
            format!("unsupported resource type {resource_type}"),
        ))
    }
}

async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: AlterConfigsRequest = ctx.decode(body)?;
    let image = broker.metadata.current();
    let acl = broker.acl(ctx);
    let mut resp = AlterConfigsResponse::default();
    for res in req.resources {
        let mut out = AlterConfigsResourceResponse::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name.clone();
        let name = res.resource_name.to_string();
        let allowed = acl.config_resource(op::ALTER_CONFIGS, res.resource_type, &name);
        let result = if allowed.is_err() {
            allowed
        } else if res.resource_type == RESOURCE_TOPIC {
            let mut changes: Vec<(String, Option<String>)> = res
                .configs
                .iter()
                .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
                .collect();
            for existing in image.topic_configs(&name).keys() {
                if !changes.iter().any(|(k, _)| k == existing) {
                    changes.push((existing.clone(), None));
                }
            }
            alter_topic(broker, name, changes, req.validate_only).await
        } else if res.resource_type == RESOURCE_BROKER {
            // The legacy form replaces the whole dynamic set of that broker (or default).
            let mut changes: Vec<(String, Option<String>)> = res
                .configs
                .iter()
                .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
                .collect();
            if let Some(existing) = image.configs.get(&(RESOURCE_BROKER, name.clone())) {
                for k in existing.keys() {
                    if !changes.iter().any(|(c, _)| c == k) {
                        changes.push((k.clone(), None));
                    }
                }
            }
            alter_broker(broker, name, changes, req.validate_only).await
        } else {
            broker_configs_are_static(res.resource_type)
        };
        if let Err((code, message)) = result {
            out.error_code = code.code();
            out.error_message = Some(str_bytes(message));
        }
        resp.responses.push(out);
    }
    ctx.respond(&resp)
}
