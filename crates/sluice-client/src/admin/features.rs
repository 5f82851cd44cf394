//! Feature flags (KIP-584): what `kafka-features describe / upgrade / downgrade` do.

use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::Admin;
use crate::error::{check, Result};

/// One feature: the levels the broker supports and the level the cluster finalized (0 when
/// not finalized).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureDescription {
    pub name: String,
    pub supported_min: i16,
    pub supported_max: i16,
    pub finalized_level: i16,
}

/// The cluster's features and the epoch of their finalized levels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureMetadata {
    pub features: Vec<FeatureDescription>,
    pub finalized_epoch: i64,
}

/// How an update may move a feature's level (Kafka's upgrade types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeatureUpgrade {
    Upgrade = 1,
    SafeDowngrade = 2,
    UnsafeDowngrade = 3,
}

impl Admin {
    /// DescribeFeatures (ApiVersions v4, or v3, of any broker): supported and finalized levels.
    pub async fn describe_features(&self) -> Result<FeatureMetadata> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("sluice-client"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let conn = self.core.any_connection().await?;
        // v4: features whose range starts at 0 are shown only from v4 on (KAFKA-17492); a
        // broker older than Kafka 3.9 answers v3.
        let resp: ApiVersionsResponse = match conn.call_at(&req, 4).await {
            Ok(r) if r.error_code == 0 => r,
            _ => conn.call_at(&req, 3).await?,
        };
        check(resp.error_code, None)?;
        let mut features: Vec<FeatureDescription> = resp
            .supported_features
            .iter()
            .map(|f| FeatureDescription {
                name: f.name.to_string(),
                supported_min: f.min_version,
                supported_max: f.max_version,
                finalized_level: resp
                    .finalized_features
                    .iter()
                    .find(|x| x.name == f.name)
                    .map_or(0, |x| x.max_version_level),
            })
            .collect();
        features.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(FeatureMetadata {
            features,
            finalized_epoch: resp.finalized_features_epoch,
        })
    }

    /// UpdateFeatures: set each feature's finalized level (0 disables it), all or nothing;
    /// `validate_only` checks without changing anything.
    pub async fn update_features(
        &self,
        updates: &[(String, i16, FeatureUpgrade)],
        validate_only: bool,
    ) -> Result<()> {
        let mut req = UpdateFeaturesRequest::default()
            .with_timeout_ms(self.core.config.request_timeout.as_millis() as i32)
            .with_validate_only(validate_only);
        for (name, level, how) in updates {
            req.feature_updates.push(
                FeatureUpdateKey::default()
                    .with_feature(StrBytes::from_string(name.clone()))
                    .with_max_version_level(*level)
                    .with_upgrade_type(*how as i8),
            );
        }
        let conn = self.core.any_connection().await?;
        let resp: UpdateFeaturesResponse = conn.call_at(&req, 1).await?;
        check(resp.error_code, resp.error_message.map(|m| m.to_string()))?;
        for r in resp.results {
            check(r.error_code, r.error_message.map(|m| m.to_string()))?;
        }
        Ok(())
    }
}
