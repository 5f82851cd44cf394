//! IncrementalAlterConfigs (key 44): SET / DELETE / APPEND / SUBTRACT on topic configs and
//! SET / DELETE on dynamic broker configs, committed by the controller; SET / DELETE on this
//! broker's log levels (BROKER_LOGGER, applied here and now, see [`crate::loggers`]); SET /
//! DELETE on cluster links (removing every config deletes the link); all four on client-metrics
//! subscriptions (KIP-714) and on group configs, checked by the controller as a whole.

use bytes::Bytes;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use sluice_metadata::acl::op;
use sluice_metadata::config::client_metrics::CLIENT_METRICS_CONFIGS;
use sluice_metadata::config::group::{group_config_def, group_value};
use sluice_metadata::config::{topic_value, ConfigType, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP};
use sluice_metadata::image::{
    RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLUSTER_LINK, RESOURCE_TOPIC,
};
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};
use crate::services::config_admin::not_alterable;

handler!(
    ApiKey::IncrementalAlterConfigs,
    0,
    1,
    IncrementalAlterConfigs {
        identity: crate::services::Identity,
        config: sluice_metadata::config::BrokerConfig,
        metadata: crate::metadata_cache::MetadataCache,
        access: crate::authorizer::Access,
        configs: crate::services::config_admin::ConfigAdmin
    }
);

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

async fn handle(
    h: &IncrementalAlterConfigs,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: IncrementalAlterConfigsRequest = ctx.decode(body)?;
    let image = h.metadata.current();
    let acl = h.access.check(ctx);
    let mut resp = IncrementalAlterConfigsResponse::default();
    for res in req.resources {
        let mut out = AlterConfigsResourceResponse::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name.clone();
        let name = res.resource_name.to_string();
        let allowed = acl.config_resource(op::ALTER_CONFIGS, res.resource_type, &name);
        let result: Result<(), (ErrorCode, String)> = if allowed.is_err() {
            allowed
        } else if res.resource_type == RESOURCE_TOPIC {
            let current = image.topic_configs(&name);
            let is_list = |k: &str| {
                sluice_metadata::config::topic_def(k).is_some_and(|d| d.def.ty == ConfigType::List)
            };
            let now = |k: &str| topic_value(&h.config, &current, k).unwrap_or_default();
            match changes(&res.configs, is_list, now) {
                Err(e) => Err(e),
                Ok(changes) => {
                    h.configs
                        .alter_topic(name, changes, req.validate_only)
                        .await
                }
            }
        } else if res.resource_type == RESOURCE_CLIENT_METRICS {
            let current = image
                .configs
                .get(&(RESOURCE_CLIENT_METRICS, name.clone()))
                .cloned()
                .unwrap_or_default();
            let is_list = |k: &str| {
                CLIENT_METRICS_CONFIGS
                    .iter()
                    .any(|d| d.name == k && d.ty == ConfigType::List)
            };
            let now = |k: &str| current.get(k).cloned().unwrap_or_default();
            match changes(&res.configs, is_list, now) {
                Err(e) => Err(e),
                Ok(changes) => {
                    h.configs
                        .alter_resource(RESOURCE_CLIENT_METRICS, name, changes, req.validate_only)
                        .await
                }
            }
        } else if res.resource_type == RESOURCE_GROUP {
            let current = image
                .configs
                .get(&(RESOURCE_GROUP, name.clone()))
                .cloned()
                .unwrap_or_default();
            let is_list =
                |k: &str| group_config_def(k).is_some_and(|d| d.def.ty == ConfigType::List);
            let broker = |k: &str| h.config.value(k);
            let now = |k: &str| group_value(&current, &broker, k).unwrap_or_default();
            match changes(&res.configs, is_list, now) {
                Err(e) => Err(e),
                Ok(changes) => {
                    h.configs
                        .alter_resource(RESOURCE_GROUP, name, changes, req.validate_only)
                        .await
                }
            }
        } else if res.resource_type == RESOURCE_BROKER {
            // SET and DELETE (deleting a config that is not set is a no-op: tools clear
            // replication throttles this way after a reassignment).
            match set_and_delete(&res.configs, "broker configs") {
                Err(e) => Err(e),
                Ok(changes) => {
                    h.configs
                        .alter_broker(name, changes, req.validate_only)
                        .await
                }
            }
        } else if res.resource_type == RESOURCE_CLUSTER_LINK {
            match set_and_delete(&res.configs, "cluster links") {
                Err(e) => Err(e),
                Ok(changes) => h.configs.alter_link(name, changes, req.validate_only).await,
            }
        } else if res.resource_type == RESOURCE_BROKER_LOGGER {
            alter_loggers(h.identity.node_id, &name, &res.configs, req.validate_only)
        } else {
            not_alterable(res.resource_type)
        };
        if let Err((code, message)) = result {
            out.error_code = code.code();
            out.error_message = Some(str_bytes(message));
        }
        resp.responses.push(out);
    }
    ctx.respond(&resp)
}

/// SET or DELETE log levels of this broker, all or none.
fn alter_loggers(
    node_id: i32,
    name: &str,
    configs: &[kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig],
    validate_only: bool,
) -> Result<(), (ErrorCode, String)> {
    if name.parse::<i32>().ok() != Some(node_id) {
        return Err((
            ErrorCode::InvalidRequest,
            format!("Unexpected broker id, expected {node_id}, but received {name}"),
        ));
    }
    let mut changes = Vec::new();
    for c in configs {
        let logger = c.name.to_string();
        let level = match c.config_operation {
            SET => Some(c.value.as_ref().map(|v| v.to_string()).unwrap_or_default()),
            DELETE => None,
            op => {
                return Err((
                    ErrorCode::InvalidRequest,
                    format!(
                    "{op} is not a valid operation for broker loggers (only SET and DELETE are)"
                ),
                ))
            }
        };
        crate::loggers::validate(&logger, level.as_deref()).map_err(|r| match r {
            crate::loggers::Refusal::Request(m) => (ErrorCode::InvalidRequest, m),
            crate::loggers::Refusal::Config(m) => (ErrorCode::InvalidConfig, m),
        })?;
        changes.push((logger, level));
    }
    let control = crate::loggers::control().ok_or_else(|| {
        (
            ErrorCode::InvalidRequest,
            "this process's log levels cannot be changed at runtime".to_string(),
        )
    })?;
    if validate_only {
        return Ok(());
    }
    control
        .apply(&changes)
        .map_err(|m| (ErrorCode::InvalidConfig, m))
}

/// Config changes: a value to set, None to remove.
type Changes = Vec<(String, Option<String>)>;

/// The changes of a resource that takes all four operations: APPEND and SUBTRACT apply to
/// list configs (`is_list`), on the value `now` gives.
fn changes(
    configs: &[kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig],
    is_list: impl Fn(&str) -> bool,
    now: impl Fn(&str) -> String,
) -> Result<Changes, (ErrorCode, String)> {
    let mut out = Vec::new();
    for c in configs {
        let key = c.name.to_string();
        let value = c.value.as_ref().map(|v| v.to_string());
        match c.config_operation {
            SET => out.push((key, value)),
            DELETE => out.push((key, None)),
            APPEND | SUBTRACT => {
                if !is_list(&key) {
                    return Err((
                        ErrorCode::InvalidConfig,
                        format!("{key} is not a list config"),
                    ));
                }
                let mut items: Vec<String> = now(&key)
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
                for v in value
                    .unwrap_or_default()
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                {
                    if c.config_operation == APPEND {
                        if !items.iter().any(|i| i == v) {
                            items.push(v.to_string());
                        }
                    } else {
                        items.retain(|i| i != v);
                    }
                }
                out.push((key, Some(items.join(","))));
            }
            other => {
                return Err((
                    ErrorCode::InvalidRequest,
                    format!("unknown config operation {other}"),
                ))
            }
        }
    }
    Ok(out)
}

/// The changes of a resource that takes SET and DELETE only (`what` names it in the error).
fn set_and_delete(
    configs: &[kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig],
    what: &str,
) -> Result<Changes, (ErrorCode, String)> {
    configs
        .iter()
        .map(|c| match c.config_operation {
            SET => Ok((c.name.to_string(), c.value.as_ref().map(|v| v.to_string()))),
            DELETE => Ok((c.name.to_string(), None)),
            other => Err((
                ErrorCode::InvalidRequest,
                format!("config operation {other} is not supported for {what}"),
            )),
        })
        .collect()
}
