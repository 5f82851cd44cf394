//! DeleteTopics (key 20): by name (v1-v5) or by name or topic id (v6+).

use bytes::Bytes;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use sluice_metadata::acl::op;
use sluice_metadata::controller_types::TopicRef;
use sluice_metadata::Uuid;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::DeleteTopics,
    1,
    6,
    DeleteTopics {
        metadata: crate::metadata_cache::MetadataCache,
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access,
        quotas: crate::quota::ClientQuotas
    }
);

async fn handle(
    h: &DeleteTopics,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DeleteTopicsRequest = ctx.decode(body)?;
    let targets: Vec<TopicRef> = if ctx.api_version >= 6 {
        req.topics
            .iter()
            .map(|t| match &t.name {
                Some(n) => TopicRef::Name(n.to_string()),
                None => TopicRef::Id(t.topic_id),
            })
            .collect()
    } else {
        req.topic_names
            .iter()
            .map(|n| TopicRef::Name(n.to_string()))
            .collect()
    };
    // DELETE on each topic (by id: on the topic the id names); the others are kept.
    let acl = h.access.check(ctx);
    let image = h.metadata.current();
    let authorized: Vec<bool> = targets
        .iter()
        .map(|t| match t {
            TopicRef::Name(n) => acl.topic(op::DELETE, n),
            TopicRef::Id(id) => image
                .topic_by_id(id)
                .is_none_or(|found| acl.topic(op::DELETE, &found.name)),
        })
        .collect();
    // controller_mutation_rate counts the partitions deleted (strict from v5).
    // A topic that does not exist is not charged (the controller refuses it).
    let charged: Vec<i32> = targets
        .iter()
        .zip(&authorized)
        .map(|(t, ok)| {
            let topic = match t {
                TopicRef::Name(n) => image.topic(n),
                TopicRef::Id(id) => image.topic_by_id(id),
            };
            match ok {
                true => topic.map_or(0, |t| t.partitions.len() as i32),
                false => 0,
            }
        })
        .collect();
    let (throttled, allowed) =
        h.quotas
            .gate_mutations(ctx, &charged, &authorized, ctx.api_version >= 5);
    let call_targets: Vec<TopicRef> = targets
        .iter()
        .zip(&allowed)
        .filter(|(_, ok)| **ok)
        .map(|(t, _)| t.clone())
        .collect();
    let outcomes = if call_targets.is_empty() {
        Ok(Vec::new())
    } else {
        h.controller.api().delete_topics(&call_targets).await
    };
    let mut resp = DeleteTopicsResponse::default();
    let mut j = 0;
    for (i, target) in targets.iter().enumerate() {
        let mut r = DeletableTopicResult::default();
        match target {
            TopicRef::Name(n) => r.name = Some(TopicName(str_bytes(n.clone()))),
            TopicRef::Id(id) => r.topic_id = *id,
        }
        if !authorized[i] {
            r.error_code = ErrorCode::TopicAuthorizationFailed.code();
            r.error_message = Some(str_bytes("Authorization failed."));
            resp.responses.push(r);
            continue;
        }
        if throttled[i] {
            r.error_code = ErrorCode::ThrottlingQuotaExceeded.code();
            r.error_message = Some(str_bytes("The throttling quota has been exceeded."));
            resp.responses.push(r);
            continue;
        }
        j += 1;
        match outcomes.as_ref().map(|o| o.get(j - 1)) {
            Ok(Some(Ok((name, id)))) => {
                r.name = Some(TopicName(str_bytes(name.clone())));
                r.topic_id = *id;
            }
            Ok(Some(Err(e))) => {
                h.quotas.refund_mutations(ctx, charged[i]);
                r.error_code = e.code.code();
                r.error_message = Some(str_bytes(e.message.clone()));
                if r.topic_id != Uuid::nil() {
                    r.name = None;
                }
            }
            Ok(None) | Err(_) => {
                h.quotas.refund_mutations(ctx, charged[i]);
                r.error_code = ErrorCode::UnknownServerError.code();
            }
        }
        resp.responses.push(r);
    }
    resp.throttle_time_ms = ctx.throttled_ms();
    ctx.respond(&resp)
}
