//! CreatePartitions (key 37): grow a topic; a smaller or equal count is INVALID_PARTITIONS.

use bytes::Bytes;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{ApiKey, CreatePartitionsRequest, CreatePartitionsResponse};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::CreatePartitions,
    0,
    3,
    CreatePartitions {
        metadata: crate::metadata_cache::MetadataCache,
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access,
        quotas: crate::quota::ClientQuotas
    }
);

async fn handle(
    h: &CreatePartitions,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: CreatePartitionsRequest = ctx.decode(body)?;
    let acl = h.access.check(ctx);
    let mut resp = CreatePartitionsResponse::default();
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for t in &req.topics {
        *seen.entry(t.name.to_string()).or_default() += 1;
    }
    for t in req.topics {
        let name = t.name.to_string();
        let mut r = CreatePartitionsTopicResult::default();
        r.name = t.name.clone();
        if seen[&name] > 1 {
            r.error_code = ErrorCode::InvalidRequest.code();
            r.error_message = Some(str_bytes("Duplicate topic in request."));
            resp.results.push(r);
            continue;
        }
        if !acl.topic(op::ALTER, &name) {
            r.error_code = ErrorCode::TopicAuthorizationFailed.code();
            r.error_message = Some(str_bytes("Authorization failed."));
            resp.results.push(r);
            continue;
        }
        // controller_mutation_rate counts the partitions added (strict from v3).
        let current = h
            .metadata
            .current()
            .topic(&name)
            .map_or(0, |topic| topic.partitions.len() as i32);
        // Only what passes validation is charged, as in Kafka (with a quota in force the
        // controller checks the change first).
        let added = t.count.saturating_sub(current);
        let mut charged = if req.validate_only || current == 0 || added <= 0 {
            0
        } else {
            added
        };
        if charged > 0 && h.quotas.mutation_quota_applies(ctx) {
            let (topic, count) = (name.clone(), t.count);
            let checked: Option<Vec<Vec<i32>>> = t.assignments.as_ref().map(|a| {
                a.iter()
                    .map(|x| x.broker_ids.iter().map(|b| b.0).collect())
                    .collect()
            });
            let verdict = h
                .controller
                .api()
                .create_partitions(&topic, count, checked.as_deref(), true)
                .await;
            if !matches!(verdict, Ok(Ok(()))) {
                charged = 0;
            }
        }
        if charged > 0
            && !h
                .quotas
                .record_mutations(ctx, charged, ctx.api_version >= 3)
                .accepted
        {
            r.error_code = ErrorCode::ThrottlingQuotaExceeded.code();
            r.error_message = Some(str_bytes("The throttling quota has been exceeded."));
            resp.results.push(r);
            continue;
        }
        let assignments: Option<Vec<Vec<i32>>> = t.assignments.as_ref().map(|a| {
            a.iter()
                .map(|x| x.broker_ids.iter().map(|b| b.0).collect())
                .collect()
        });
        let (count, validate_only) = (t.count, req.validate_only);
        let outcome = h
            .controller
            .api()
            .create_partitions(&name, count, assignments.as_deref(), validate_only)
            .await;
        if !matches!(outcome, Ok(Ok(()))) {
            // Refused: nothing was created, so nothing is spent (Kafka charges only what
            // passed validation).
            h.quotas.refund_mutations(ctx, charged);
        }
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                r.error_code = e.code.code();
                r.error_message = Some(str_bytes(e.message));
            }
            Err(e) => {
                r.error_code = ErrorCode::UnknownServerError.code();
                r.error_message = Some(str_bytes(e));
            }
        }
        resp.results.push(r);
    }
    resp.throttle_time_ms = ctx.throttled_ms();
    ctx.respond(&resp)
}
