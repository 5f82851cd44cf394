//! IncrementalAlterConfigs (key 44): SET / DELETE / APPEND / SUBTRACT on topic configs,
//! committed by the controller. Broker configs cannot be set at runtime yet (deleting one
//! is a no-op).

use bytes::Bytes;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use sluice_metadata::acl::op;
use sluice_metadata::config::{topic_value, ConfigType};
use sluice_metadata::image::{RESOURCE_BROKER, RESOURCE_TOPIC};
use sluice_protocol::ErrorCode;

use super::alter_configs::{alter_topic, broker_configs_are_static};
use crate::broker::Broker;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(ApiKey::IncrementalAlterConfigs, 0, 1, handle);

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: IncrementalAlterConfigsRequest = ctx.decode(body)?;
    let image = broker.metadata.current();
    let acl = broker.acl(ctx);
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
            let mut changes = Vec::new();
            let mut bad = None;
            for c in &res.configs {
                let key = c.name.to_string();
                let value = c.value.as_ref().map(|v| v.to_string());
                match c.config_operation {
                    SET => changes.push((key, value)),
                    DELETE => changes.push((key, None)),
                    APPEND | SUBTRACT => {
                        let is_list = sluice_metadata::config::topic_def(&key)
                            .is_some_and(|d| d.def.ty == ConfigType::List);
                        if !is_list {
                            bad = Some((
                                ErrorCode::InvalidConfig,
                                format!("{key} is not a list config"),
                            ));
                            break;
                        }
                        let now = topic_value(&broker.config, &current, &key).unwrap_or_default();
                        let mut items: Vec<String> = now
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
                        changes.push((key, Some(items.join(","))));
                    }
                    other => {
                        bad = Some((
                            ErrorCode::InvalidRequest,
                            format!("unknown config operation {other}"),
                        ));
                        break;
                    }
                }
            }
            match bad {
                Some(e) => Err(e),
                None => alter_topic(broker, name, changes, req.validate_only).await,
            }
        } else if res.resource_type == RESOURCE_BROKER {
            // SET and DELETE (deleting a config that is not set is a no-op: tools clear
            // replication throttles this way after a reassignment).
            let mut changes = Vec::new();
            let mut bad = None;
            for c in &res.configs {
                match c.config_operation {
                    SET => {
                        changes.push((c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
                    }
                    DELETE => changes.push((c.name.to_string(), None)),
                    other => {
                        bad = Some((
                            ErrorCode::InvalidRequest,
                            format!("config operation {other} is not supported for broker configs"),
                        ));
                        break;
                    }
                }
            }
            match bad {
                Some(e) => Err(e),
                None => {
                    super::alter_configs::alter_broker(broker, name, changes, req.validate_only)
                        .await
                }
            }
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
