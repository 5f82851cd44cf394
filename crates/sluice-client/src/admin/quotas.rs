//! Client quotas (what `kafka-configs.sh --entity-type users|clients` does with
//! `producer_byte_rate`, `consumer_byte_rate` and `request_percentage`).

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};

use super::{s, Admin};
use crate::error::{check, Error, Result};

/// A quota entity: each part is absent, the default (`None`), or named.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct QuotaEntity {
    pub user: Option<Option<String>>,
    pub client_id: Option<Option<String>>,
}

impl QuotaEntity {
    fn parts(&self) -> Vec<(&'static str, Option<String>)> {
        let mut out = Vec::new();
        if let Some(u) = &self.user {
            out.push(("user", u.clone()));
        }
        if let Some(c) = &self.client_id {
            out.push(("client-id", c.clone()));
        }
        out
    }

    /// Kafka's way of printing it: `user-principal 'alice', client-id 'app'`.
    pub fn describe(&self) -> String {
        self.parts()
            .into_iter()
            .map(|(t, n)| {
                let t = if t == "user" { "user-principal" } else { t };
                match n {
                    Some(n) => format!("{t} '{n}'"),
                    None => format!("the default {t}"),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// How a DescribeClientQuotas component matches an entity part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuotaMatch {
    /// This name.
    Exact(String),
    /// The `<default>` entity.
    Default,
    /// Any name, or the default.
    Any,
}

impl Admin {
    /// Set (Some) or remove (None) quota values of one entity.
    pub async fn alter_client_quotas(
        &self,
        entity: &QuotaEntity,
        ops: &[(String, Option<f64>)],
    ) -> Result<()> {
        let req = AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
            .with_entity(
                entity
                    .parts()
                    .into_iter()
                    .map(|(t, n)| {
                        EntityData::default()
                            .with_entity_type(s(t))
                            .with_entity_name(n.as_deref().map(s))
                    })
                    .collect(),
            )
            .with_ops(
                ops.iter()
                    .map(|(k, v)| {
                        OpData::default()
                            .with_key(s(k))
                            .with_value(v.unwrap_or(0.0))
                            .with_remove(v.is_none())
                    })
                    .collect(),
            )]);
        let conn = self.core.any_connection().await?;
        let resp: AlterClientQuotasResponse = conn.call(&req).await?;
        let e = resp
            .entries
            .into_iter()
            .next()
            .ok_or_else(|| Error::Protocol("empty AlterClientQuotas response".into()))?;
        check(e.error_code, e.error_message.map(|m| m.to_string()))
    }

    /// Quotas of the entities whose parts match `components` (entity type `user` or
    /// `client-id`, and how); with `strict`, entities with other parts are left out.
    pub async fn describe_client_quotas(
        &self,
        components: &[(&str, QuotaMatch)],
        strict: bool,
    ) -> Result<Vec<(QuotaEntity, Vec<(String, f64)>)>> {
        let req = DescribeClientQuotasRequest::default()
            .with_strict(strict)
            .with_components(
                components
                    .iter()
                    .map(|(t, m)| {
                        let (match_type, name) = match m {
                            QuotaMatch::Exact(n) => (0, Some(s(n))),
                            QuotaMatch::Default => (1, None),
                            QuotaMatch::Any => (2, None),
                        };
                        ComponentData::default()
                            .with_entity_type(s(t))
                            .with_match_type(match_type)
                            .with_match(name)
                    })
                    .collect(),
            );
        let conn = self.core.any_connection().await?;
        let resp: DescribeClientQuotasResponse = conn.call(&req).await?;
        check(resp.error_code, resp.error_message.map(|m| m.to_string()))?;
        Ok(resp
            .entries
            .unwrap_or_default()
            .into_iter()
            .map(|e| {
                let mut entity = QuotaEntity::default();
                for d in e.entity {
                    let name = d.entity_name.map(|n| n.to_string());
                    match d.entity_type.as_str() {
                        "user" => entity.user = Some(name),
                        "client-id" => entity.client_id = Some(name),
                        _ => {}
                    }
                }
                let values = e
                    .values
                    .into_iter()
                    .map(|v| (v.key.to_string(), v.value))
                    .collect();
                (entity, values)
            })
            .collect())
    }
}
