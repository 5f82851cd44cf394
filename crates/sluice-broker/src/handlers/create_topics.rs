//! CreateTopics (key 19): validated and committed by the controller; v5+ answers carry the
//! new topic's partition count, replication factor and full config. A topic created with
//! `mirror.link` is a mirror topic: its partition count is its source topic's.

use bytes::Bytes;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse};
use sluice_metadata::acl::op;
use sluice_metadata::config::describe_topic;
use sluice_metadata::controller_types::CreateTopicSpec;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::CreateTopics,
    2,
    7,
    CreateTopics {
        config: sluice_metadata::config::BrokerConfig,
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access,
        quotas: crate::quota::ClientQuotas,
        metadata: crate::metadata_cache::MetadataCache
    }
);

async fn handle(
    h: &CreateTopics,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: CreateTopicsRequest = ctx.decode(body)?;
    let mut specs: Vec<CreateTopicSpec> = req
        .topics
        .iter()
        .map(|t| CreateTopicSpec {
            name: t.name.to_string(),
            num_partitions: t.num_partitions,
            replication_factor: t.replication_factor,
            assignments: t
                .assignments
                .iter()
                .map(|a| {
                    (
                        a.partition_index,
                        a.broker_ids.iter().map(|b| b.0).collect(),
                    )
                })
                .collect(),
            configs: t
                .configs
                .iter()
                .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
                .collect(),
        })
        .collect();
    let validate_only = req.validate_only;
    // CREATE on the cluster, or on the topic; the others are not created.
    let acl = h.access.check(ctx);
    let may_create = acl.cluster(op::CREATE);
    let authorized: Vec<bool> = specs
        .iter()
        .map(|s| may_create || acl.topic(op::CREATE, &s.name))
        .collect();
    // A mirror topic takes its partition count from its source topic, asked through the link.
    let mut prepared: Vec<Option<(ErrorCode, String)>> = vec![None; specs.len()];
    let image = h.metadata.current();
    for (i, spec) in specs.iter_mut().enumerate() {
        if authorized[i] && crate::mirror::is_mirror_spec(spec) {
            prepared[i] = crate::mirror::prepare_mirror_spec(&image, spec).await.err();
        }
    }
    let authorized: Vec<bool> = authorized
        .iter()
        .zip(&prepared)
        .map(|(ok, p)| *ok && p.is_none())
        .collect();
    // controller_mutation_rate counts the partitions of each topic to create (strict from
    // v6: once the quota is spent, topics are refused until it refills). As in Kafka only
    // what passes validation is charged: with a quota in force the controller checks the
    // topics first (a validate-only call), and what it still refuses is given back below.
    let default_partitions = h.config.num_partitions();
    let mut chargeable = authorized.clone();
    if !validate_only && h.quotas.mutation_quota_applies(ctx) {
        let checked: Vec<CreateTopicSpec> = specs
            .iter()
            .zip(&authorized)
            .filter(|(_, ok)| **ok)
            .map(|(s, _)| s.clone())
            .collect();
        let verdicts = h
            .controller
            .api()
            .create_topics(&checked, true)
            .await
            .unwrap_or_default();
        let mut verdicts = verdicts.iter();
        for ok in chargeable.iter_mut().filter(|ok| **ok) {
            *ok = matches!(verdicts.next(), Some(Ok(_)));
        }
    }
    let charged: Vec<i32> = specs
        .iter()
        .zip(&chargeable)
        .map(|(s, ok)| {
            let partitions = match (s.num_partitions, s.assignments.len()) {
                (-1, 0) => default_partitions,
                (-1, n) => n as i32,
                (n, _) => n,
            };
            if *ok && !validate_only {
                partitions.max(0)
            } else {
                0
            }
        })
        .collect();
    let (throttled, allowed) =
        h.quotas
            .gate_mutations(ctx, &charged, &authorized, ctx.api_version >= 6);
    let call_specs: Vec<CreateTopicSpec> = specs
        .iter()
        .zip(&allowed)
        .filter(|(_, ok)| **ok)
        .map(|(s, _)| s.clone())
        .collect();
    let outcomes = if call_specs.is_empty() {
        Ok(Vec::new())
    } else {
        h.controller
            .api()
            .create_topics(&call_specs, validate_only)
            .await
    };
    let mut resp = CreateTopicsResponse::default();
    let mut j = 0;
    for (i, t) in req.topics.iter().enumerate() {
        let mut r = CreatableTopicResult::default();
        r.name = t.name.clone();
        r.num_partitions = -1;
        r.replication_factor = -1;
        if let Some((code, message)) = &prepared[i] {
            r.error_code = code.code();
            r.error_message = Some(str_bytes(message.clone()));
            resp.topics.push(r);
            continue;
        }
        if !authorized[i] {
            r.error_code = ErrorCode::TopicAuthorizationFailed.code();
            r.error_message = Some(str_bytes("Authorization failed."));
            resp.topics.push(r);
            continue;
        }
        if throttled[i] {
            r.error_code = ErrorCode::ThrottlingQuotaExceeded.code();
            r.error_message = Some(str_bytes("The throttling quota has been exceeded."));
            resp.topics.push(r);
            continue;
        }
        j += 1;
        match outcomes.as_ref().map(|o| o.get(j - 1)) {
            Ok(Some(Ok(created))) => {
                r.topic_id = created.id;
                r.num_partitions = created.num_partitions;
                r.replication_factor = created.replication_factor;
                let overrides = specs[i]
                    .configs
                    .iter()
                    .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
                    .collect();
                // Configs are returned only to those who may describe them.
                let describable = acl.topic(op::DESCRIBE_CONFIGS, &t.name);
                if !describable {
                    r.topic_config_error_code = ErrorCode::TopicAuthorizationFailed.code();
                }
                r.configs = describable.then(|| {
                    describe_topic(&h.config, &overrides)
                        .into_iter()
                        .map(|d| {
                            let mut c = CreatableTopicConfigs::default();
                            c.name = str_bytes(d.name);
                            c.value = d.value.map(str_bytes);
                            c.read_only = d.read_only;
                            c.config_source = d.source as i8;
                            c.is_sensitive = d.sensitive;
                            c
                        })
                        .collect()
                });
            }
            Ok(Some(Err(e))) => {
                h.quotas.refund_mutations(ctx, charged[i]);
                r.error_code = e.code.code();
                r.error_message = Some(str_bytes(e.message.clone()));
            }
            Ok(None) | Err(_) => {
                h.quotas.refund_mutations(ctx, charged[i]);
                r.error_code = ErrorCode::UnknownServerError.code();
                r.error_message = outcomes.as_ref().err().map(|e| str_bytes(e.clone()));
            }
        }
        resp.topics.push(r);
    }
    resp.throttle_time_ms = ctx.throttled_ms();
    ctx.respond(&resp)
}
