//! [`ConfigAdmin`]: changes to topic configs and dynamic broker configs, committed through
//! the controller (AlterConfigs and IncrementalAlterConfigs share it). TLS store changes for
//! this broker's listeners are checked here first: the files are this broker's, so only it
//! can say whether they serve (Kafka validates on the broker too).

use std::sync::Arc;

use sluice_metadata::config::{listener_store_key, BrokerConfig, DynamicBrokerConfigs};
use sluice_metadata::image::RESOURCE_BROKER;
use sluice_protocol::ErrorCode;

use super::controller::ControllerClient;
use crate::metadata_cache::MetadataCache;
use crate::tls::ListenerTls;

/// A refusal: Kafka's error code and message.
pub type ConfigError = (ErrorCode, String);

pub struct ConfigAdmin {
    node_id: i32,
    config: Arc<BrokerConfig>,
    metadata: Arc<MetadataCache>,
    controller: Arc<ControllerClient>,
    /// The TLS of each SSL / SASL_SSL client listener (its stores can change at runtime).
    listener_tls: Vec<Arc<ListenerTls>>,
}

/// The SSL listeners whose key or trust store a change replaces, and the config they would
/// then be built from.
type StoreReload = (Vec<Arc<ListenerTls>>, BrokerConfig);

impl ConfigAdmin {
    pub fn new(
        node_id: i32,
        config: Arc<BrokerConfig>,
        metadata: Arc<MetadataCache>,
        controller: Arc<ControllerClient>,
        listener_tls: Vec<Arc<ListenerTls>>,
    ) -> Self {
        Self {
            node_id,
            config,
            metadata,
            controller,
            listener_tls,
        }
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// The static broker config (what DescribeConfigs shows under the dynamic layers).
    pub fn static_config(&self) -> &Arc<BrokerConfig> {
        &self.config
    }

    /// Commit topic config changes through the controller.
    pub async fn alter_topic(
        &self,
        topic: String,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        committed(
            self.controller
                .api()
                .alter_topic_configs(&topic, &changes, validate_only)
                .await,
        )
    }

    /// Commit cluster link config changes. Client settings (all but the link's own) are
    /// checked here as a client would take them; the controller checks the rest.
    pub async fn alter_link(
        &self,
        name: String,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        for (k, v) in &changes {
            let Some(v) = v else { continue };
            if sluice_metadata::config::link_def(k).is_some() {
                continue;
            }
            // The message names the key, never the value (it may be a secret).
            sluice_client::ClientConfig::new("localhost:9092")
                .set(k, v)
                .map_err(|e| (ErrorCode::InvalidConfig, e.to_string()))?;
        }
        committed(
            self.controller
                .api()
                .alter_link_configs(&name, &changes, validate_only)
                .await,
        )
    }

    /// Commit config changes of a resource kept by type (client-metrics subscriptions); the
    /// controller checks them.
    pub async fn alter_resource(
        &self,
        resource_type: i8,
        name: String,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        committed(
            self.controller
                .api()
                .alter_resource_configs(resource_type, &name, &changes, validate_only)
                .await,
        )
    }

    /// Commit dynamic broker config changes (`name` "" = the cluster-wide defaults).
    pub async fn alter_broker(
        &self,
        name: String,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        let reload = self.check_listener_stores(&name, &changes)?;
        match self
            .controller
            .api()
            .alter_broker_configs(&name, &changes, validate_only)
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

    fn check_listener_stores(
        &self,
        name: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<Option<StoreReload>, ConfigError> {
        let named: Vec<&str> = changes
            .iter()
            .filter_map(|(k, _)| listener_store_key(k).map(|(l, _)| l))
            .collect();
        if named.is_empty() || name.is_empty() {
            // The cluster default is refused by the controller, with Kafka's message.
            return Ok(None);
        }
        if name.parse::<i32>().ok() != Some(self.node_id) {
            return Err((
                ErrorCode::InvalidRequest,
                format!(
                    "the TLS stores of broker {name} can only be changed through broker {name}, which checks them (this is broker {})",
                    self.node_id
                ),
            ));
        }
        let image = self.metadata.current();
        let mut dynamic = DynamicBrokerConfigs::from_image(&image, self.node_id);
        for (k, v) in changes {
            match v {
                Some(v) => dynamic.broker.insert(k.clone(), v.clone()),
                None => dynamic.broker.remove(k),
            };
        }
        let config = self.config.with_dynamic(&dynamic);
        let mut listeners = Vec::new();
        for l in named {
            // A listener without TLS (or not there) keeps the setting unchecked and unused,
            // as in Kafka, until it is one with TLS.
            let Some(tls) = self
                .listener_tls
                .iter()
                .find(|t| t.listener().eq_ignore_ascii_case(l))
            else {
                continue;
            };
            tls.check(&config)
                .map_err(|m| (ErrorCode::InvalidConfig, m))?;
            listeners.push(Arc::clone(tls));
        }
        Ok(Some((listeners, config)))
    }
}

/// What the controller answered a config change, as a refusal to give the client.
fn committed(
    answer: Result<Result<(), sluice_metadata::controller_types::ApiError>, String>,
) -> Result<(), ConfigError> {
    match answer {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err((e.code, e.message)),
        Err(e) => Err((ErrorCode::UnknownServerError, e)),
    }
}

/// The answer for a resource type whose configs cannot be altered this way.
pub fn not_alterable(resource_type: i8) -> Result<(), ConfigError> {
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
