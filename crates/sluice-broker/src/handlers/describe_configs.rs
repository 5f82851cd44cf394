//! DescribeConfigs (key 32): topic configs (override > broker synonym > default, with
//! sources and synonyms), this broker's static configs, client-metrics subscriptions (every
//! setting, at Kafka's default where not set) and cluster links (see
//! [`crate::mirror::describe_link`]).

use bytes::Bytes;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use sluice_metadata::acl::op;
use sluice_metadata::config::{
    describe_broker_with, describe_client_metrics, describe_group, describe_topic_with,
    is_mirror_key, ConfigSource, ConfigType, DescribedConfig, DynamicBrokerConfigs,
    RESOURCE_CLIENT_METRICS, RESOURCE_GROUP,
};
use sluice_metadata::image::{
    RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLUSTER_LINK, RESOURCE_TOPIC,
};
use sluice_metadata::topic;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::DescribeConfigs,
    1,
    4,
    DescribeConfigs {
        identity: crate::services::Identity,
        config: sluice_metadata::config::BrokerConfig,
        metadata: crate::metadata_cache::MetadataCache,
        access: crate::authorizer::Access,
        mirrors: crate::mirror::MirrorManager
    },
    sync
);

/// This process's loggers and their levels (KIP-412).
fn loggers() -> Vec<DescribedConfig> {
    crate::loggers::control()
        .map(|c| c.levels())
        .unwrap_or_default()
        .into_iter()
        .map(|(name, level)| DescribedConfig {
            name,
            value: Some(level),
            source: ConfigSource::DynamicBrokerLoggerConfig,
            read_only: false,
            sensitive: false,
            ty: ConfigType::String,
            doc: "A logger's level: OFF, FATAL, ERROR, WARN, INFO, DEBUG or TRACE.",
            synonyms: Vec::new(),
        })
        .collect()
}

fn entry(d: DescribedConfig, synonyms: bool, docs: bool) -> DescribeConfigsResourceResult {
    let mut r = DescribeConfigsResourceResult::default();
    r.name = str_bytes(d.name);
    r.value = if d.sensitive {
        None
    } else {
        d.value.map(str_bytes)
    };
    r.read_only = d.read_only;
    r.config_source = d.source as i8;
    r.is_sensitive = d.sensitive;
    r.config_type = d.ty as i8;
    if docs {
        r.documentation = Some(str_bytes(d.doc));
    }
    if synonyms {
        r.synonyms = d
            .synonyms
            .into_iter()
            .map(|(name, value, source)| {
                let mut s = DescribeConfigsSynonym::default();
                s.name = str_bytes(name);
                s.value = if d.sensitive {
                    None
                } else {
                    value.map(str_bytes)
                };
                s.source = source as i8;
                s
            })
            .collect();
    }
    r
}

fn handle(
    h: &DescribeConfigs,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DescribeConfigsRequest = ctx.decode(body)?;
    let image = h.metadata.current();
    let acl = h.access.check(ctx);
    let mut resp = DescribeConfigsResponse::default();
    for res in req.resources {
        let mut out = DescribeConfigsResult::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name.clone();
        let name = res.resource_name.to_string();
        let allowed = acl.config_resource(op::DESCRIBE_CONFIGS, res.resource_type, &name);
        let described: Result<Vec<DescribedConfig>, (ErrorCode, String)> = match res.resource_type {
            _ if allowed.is_err() => allowed.map(|()| Vec::new()),
            RESOURCE_TOPIC => {
                if topic::validate_name(&name).is_err() {
                    Err((
                        ErrorCode::InvalidTopicException,
                        format!("Topic name {name} is invalid"),
                    ))
                } else if image.topic(&name).is_none() {
                    Err((
                        ErrorCode::UnknownTopicOrPartition,
                        format!("Topic {name} does not exist"),
                    ))
                } else {
                    let dynamic = DynamicBrokerConfigs::from_image(&image, h.identity.node_id);
                    let overrides = image.topic_configs(&name);
                    let mut rows = describe_topic_with(&h.config, &dynamic, &overrides);
                    // A mirror topic's own keys, read-only (the mirror tool changes them).
                    rows.extend(overrides.iter().filter(|(k, _)| is_mirror_key(k)).map(
                        |(k, v)| DescribedConfig {
                            name: k.clone(),
                            value: Some(v.clone()),
                            source: ConfigSource::TopicConfig,
                            read_only: true,
                            sensitive: false,
                            ty: ConfigType::String,
                            doc: "Mirror topic: the cluster link, source topic and state.",
                            synonyms: Vec::new(),
                        },
                    ));
                    Ok(rows)
                }
            }
            // The cluster-wide default: its dynamic values only.
            RESOURCE_BROKER if name.is_empty() => {
                let dynamic = DynamicBrokerConfigs {
                    broker: Default::default(),
                    ..DynamicBrokerConfigs::from_image(&image, h.identity.node_id)
                };
                Ok(describe_broker_with(&h.config, &dynamic)
                    .into_iter()
                    .filter(|d| d.source == ConfigSource::DynamicDefaultBrokerConfig)
                    .collect())
            }
            RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => match name.parse::<i32>() {
                Ok(id) if id == h.identity.node_id => Ok(if res.resource_type == RESOURCE_BROKER {
                    let dynamic = DynamicBrokerConfigs::from_image(&image, h.identity.node_id);
                    describe_broker_with(&h.config, &dynamic)
                } else {
                    loggers()
                }),
                _ => Err((
                    ErrorCode::InvalidRequest,
                    format!("Unexpected broker id, expected {}", h.identity.node_id),
                )),
            },
            RESOURCE_CLUSTER_LINK => crate::mirror::describe_link(&image, &h.mirrors, &name),
            RESOURCE_CLIENT_METRICS if name.is_empty() => Err((
                ErrorCode::InvalidRequest,
                "Client metrics subscription name must not be empty".into(),
            )),
            RESOURCE_CLIENT_METRICS => Ok(describe_client_metrics(
                image
                    .configs
                    .get(&(RESOURCE_CLIENT_METRICS, name.clone()))
                    .unwrap_or(&Default::default()),
            )),
            RESOURCE_GROUP => Ok(describe_group(
                image
                    .configs
                    .get(&(RESOURCE_GROUP, name.clone()))
                    .unwrap_or(&Default::default()),
                &|k| h.config.value(k),
            )),
            other => Err((
                ErrorCode::InvalidRequest,
                format!("Unsupported resource type {other}"),
            )),
        };
        match described {
            Ok(entries) => {
                let wanted = res.configuration_keys.as_ref().filter(|k| !k.is_empty());
                out.configs = entries
                    .into_iter()
                    .filter(|e| wanted.is_none_or(|keys| keys.iter().any(|k| **k == *e.name)))
                    .map(|e| entry(e, req.include_synonyms, req.include_documentation))
                    .collect();
            }
            Err((code, message)) => {
                out.error_code = code.code();
                out.error_message = Some(str_bytes(message));
            }
        }
        resp.results.push(out);
    }
    ctx.respond(&resp)
}
