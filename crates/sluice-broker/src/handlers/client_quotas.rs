//! DescribeClientQuotas (key 48) and AlterClientQuotas (key 49): quotas per user, client id
//! or both, `<default>` entities included (a null name), kept in cluster metadata. Altering
//! needs ALTER_CONFIGS on the cluster, describing DESCRIBE_CONFIGS, as in Kafka.

use bytes::Bytes;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;
use sluice_metadata::acl::op;
use sluice_metadata::controller_types::ApiError;
use sluice_metadata::image::QuotaEntity;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

const USER: &str = "user";
const CLIENT_ID: &str = "client-id";
const IP: &str = "ip";

/// A request's entity (type, name or None for the default) as stored.
fn entity(parts: &[(String, Option<String>)]) -> Result<QuotaEntity, ApiError> {
    let bad = |m: String| ApiError::new(ErrorCode::InvalidRequest, m);
    if parts.is_empty() {
        return Err(bad("Invalid empty client quota entity".into()));
    }
    let mut out = QuotaEntity::default();
    for (t, name) in parts {
        if name.as_deref() == Some("") {
            return Err(bad(format!("Empty {t} not supported")));
        }
        let slot = match t.as_str() {
            USER => &mut out.user,
            CLIENT_ID => &mut out.client_id,
            IP => {
                return Err(bad(
                    "IP quotas (connection_creation_rate) are not supported".into(),
                ))
            }
            other => return Err(bad(format!("Unhandled client quota entity type: {other}"))),
        };
        if slot.is_some() {
            return Err(bad(format!(
                "Invalid client quota entity, duplicate entity entry {t}"
            )));
        }
        *slot = Some(name.clone());
    }
    Ok(out)
}

/// The entity as (type, name) pairs, users first.
fn parts(e: &QuotaEntity) -> Vec<(&'static str, Option<StrBytes>)> {
    let mut out = Vec::new();
    if let Some(u) = &e.user {
        out.push((USER, u.as_deref().map(str_bytes)));
    }
    if let Some(c) = &e.client_id {
        out.push((CLIENT_ID, c.as_deref().map(str_bytes)));
    }
    out
}

pub mod alter {
    use super::*;
    use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
    handler!(
        ApiKey::AlterClientQuotas,
        0,
        1,
        AlterClientQuotas {
            access: crate::authorizer::Access,
            controller: crate::services::controller::ControllerClient
        }
    );

    async fn handle(
        h: &AlterClientQuotas,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: AlterClientQuotasRequest = ctx.decode(body)?;
        let allowed = h.access.check(ctx).cluster(op::ALTER_CONFIGS);
        let mut outcomes: Vec<Result<(), ApiError>> = Vec::new();
        let mut changes = Vec::new();
        for e in &req.entries {
            let named: Vec<(String, Option<String>)> = e
                .entity
                .iter()
                .map(|d| {
                    (
                        d.entity_type.to_string(),
                        d.entity_name.as_ref().map(|n| n.to_string()),
                    )
                })
                .collect();
            let parsed = if allowed {
                entity(&named)
            } else {
                Err(ApiError::new(
                    ErrorCode::ClusterAuthorizationFailed,
                    "Cluster authorization failed.",
                ))
            };
            match parsed {
                Ok(ent) => {
                    let ops: Vec<(String, Option<f64>)> = e
                        .ops
                        .iter()
                        .map(|o| (o.key.to_string(), (!o.remove).then_some(o.value)))
                        .collect();
                    changes.push((ent, ops));
                    outcomes.push(Ok(()));
                }
                Err(err) => outcomes.push(Err(err)),
            }
        }
        if !changes.is_empty() {
            let n = changes.len();
            let validate_only = req.validate_only;
            let answers = match h
                .controller
                .api()
                .alter_client_quotas(&changes, validate_only)
                .await
            {
                Ok(v) if v.len() == n => v,
                Ok(_) => vec![Err(ApiError::new(ErrorCode::UnknownServerError, "bad answer")); n],
                Err(e) => vec![Err(ApiError::new(ErrorCode::UnknownServerError, e)); n],
            };
            let mut answers = answers.into_iter();
            for o in outcomes.iter_mut().filter(|o| o.is_ok()) {
                *o = answers.next().unwrap_or(Ok(()));
            }
        }
        let mut resp = AlterClientQuotasResponse::default();
        for (e, outcome) in req.entries.iter().zip(outcomes) {
            let mut r = EntryData::default();
            r.entity = e
                .entity
                .iter()
                .map(|d| {
                    let mut x = EntityData::default();
                    x.entity_type = d.entity_type.clone();
                    x.entity_name = d.entity_name.clone();
                    x
                })
                .collect();
            if let Err(err) = outcome {
                r.error_code = err.code.code();
                r.error_message = Some(str_bytes(err.message));
            }
            resp.entries.push(r);
        }
        ctx.respond(&resp)
    }
}

pub mod describe {
    use super::*;
    use kafka_protocol::messages::describe_client_quotas_response::{
        EntityData, EntryData, ValueData,
    };
    handler!(
        ApiKey::DescribeClientQuotas,
        0,
        1,
        DescribeClientQuotas {
            access: crate::authorizer::Access,
            metadata: crate::metadata_cache::MetadataCache
        },
        sync
    );

    const MATCH_EXACT: i8 = 0;
    const MATCH_DEFAULT: i8 = 1;
    const MATCH_SPECIFIED: i8 = 2;

    fn handle(
        h: &DescribeClientQuotas,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: DescribeClientQuotasRequest = ctx.decode(body)?;
        let mut resp = DescribeClientQuotasResponse::default();
        let fail = |resp: &mut DescribeClientQuotasResponse, code: ErrorCode, m: String| {
            resp.error_code = code.code();
            resp.error_message = Some(str_bytes(m));
            resp.entries = None;
        };
        if !h.access.check(ctx).cluster(op::DESCRIBE_CONFIGS) {
            fail(
                &mut resp,
                ErrorCode::ClusterAuthorizationFailed,
                "Cluster authorization failed.".into(),
            );
            return ctx.respond(&resp);
        }
        let mut wanted: Vec<(&str, i8, Option<String>)> = Vec::new();
        for c in &req.components {
            let t = match c.entity_type.as_str() {
                USER => USER,
                CLIENT_ID => CLIENT_ID,
                other => {
                    fail(
                        &mut resp,
                        ErrorCode::InvalidRequest,
                        format!("Unhandled client quota entity type: {other}"),
                    );
                    return ctx.respond(&resp);
                }
            };
            if wanted.iter().any(|(w, _, _)| *w == t) {
                fail(
                    &mut resp,
                    ErrorCode::InvalidRequest,
                    format!("Duplicate filter component entity type {t}"),
                );
                return ctx.respond(&resp);
            }
            if !(MATCH_EXACT..=MATCH_SPECIFIED).contains(&c.match_type)
                || (c.match_type == MATCH_EXACT && c._match.is_none())
            {
                fail(
                    &mut resp,
                    ErrorCode::InvalidRequest,
                    format!("Invalid match type {}", c.match_type),
                );
                return ctx.respond(&resp);
            }
            wanted.push((t, c.match_type, c._match.as_ref().map(|m| m.to_string())));
        }
        let image = h.metadata.current();
        let mut entries = Vec::new();
        for (e, values) in &image.client_quotas {
            let has = |t: &str| -> Option<&Option<String>> {
                match t {
                    USER => e.user.as_ref(),
                    _ => e.client_id.as_ref(),
                }
            };
            let matches = wanted.iter().all(|(t, m, name)| match (has(t), *m) {
                (None, _) => false,
                (Some(n), MATCH_EXACT) => n == name,
                (Some(n), MATCH_DEFAULT) => n.is_none(),
                (Some(_), _) => true,
            });
            let extra = [USER, CLIENT_ID]
                .iter()
                .any(|t| has(t).is_some() && !wanted.iter().any(|(w, _, _)| w == t));
            if !matches || (req.strict && extra) || values.is_empty() {
                continue;
            }
            let mut entry = EntryData::default();
            entry.entity = parts(e)
                .into_iter()
                .map(|(t, n)| {
                    let mut d = EntityData::default();
                    d.entity_type = str_bytes(t);
                    d.entity_name = n;
                    d
                })
                .collect();
            entry.values = values
                .iter()
                .map(|(k, v)| {
                    let mut d = ValueData::default();
                    d.key = str_bytes(k);
                    d.value = v.0;
                    d
                })
                .collect();
            entries.push(entry);
        }
        resp.entries = Some(entries);
        ctx.respond(&resp)
    }
}
