//! [`TopicCreator`]: topics created on a client's behalf — auto-creation of unknown topics
//! (`auto.create.topics.enable`) and the internal topics the coordinators live in, created on
//! first use with Kafka's settings.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_metadata::config::BrokerConfig;
use sluice_metadata::controller_types::CreateTopicSpec;
use sluice_protocol::ErrorCode;

use super::controller::ControllerClient;
use crate::group::coordinator::OFFSETS_TOPIC;
use crate::metadata_cache::MetadataCache;
use crate::txn::coordinator::TXN_TOPIC;

pub struct TopicCreator {
    config: Arc<BrokerConfig>,
    metadata: Arc<MetadataCache>,
    controller: Arc<ControllerClient>,
    /// Streams groups' internal topics being created, and the recent failures (message,
    /// until when it is reported).
    internal: Mutex<InternalCreations>,
}

#[derive(Default)]
struct InternalCreations {
    in_flight: std::collections::HashSet<String>,
    failed: HashMap<String, (String, Instant)>,
}

impl TopicCreator {
    pub fn new(
        config: Arc<BrokerConfig>,
        metadata: Arc<MetadataCache>,
        controller: Arc<ControllerClient>,
    ) -> Self {
        Self {
            config,
            metadata,
            controller,
            internal: Mutex::default(),
        }
    }

    /// Create a streams group's missing internal topics in the background (Kafka's
    /// AutoTopicCreationManager.createStreamsInternalTopics): the heartbeat does not wait;
    /// topics already being created, or that failed within `remember` (reported by
    /// [`Self::creation_failures`] meanwhile), are not asked for again.
    pub fn create_internal_in_background(
        self: &Arc<Self>,
        specs: Vec<CreateTopicSpec>,
        remember: Duration,
    ) {
        let now = Instant::now();
        let specs: Vec<CreateTopicSpec> = {
            let mut st = self.internal.lock().unwrap_or_else(|e| e.into_inner());
            st.failed.retain(|_, (_, until)| *until > now);
            let specs: Vec<CreateTopicSpec> = specs
                .into_iter()
                .filter(|s| !st.in_flight.contains(&s.name) && !st.failed.contains_key(&s.name))
                .collect();
            for s in &specs {
                st.in_flight.insert(s.name.clone());
            }
            specs
        };
        if specs.is_empty() {
            return;
        }
        let me = Arc::clone(self);
        tokio::spawn(async move {
            let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
            let outcome = me.controller.api().create_topics(&specs, false).await;
            let until = Instant::now() + remember;
            let mut st = me.internal.lock().unwrap_or_else(|e| e.into_inner());
            for n in &names {
                st.in_flight.remove(n);
            }
            match outcome {
                Err(e) => {
                    for n in names {
                        st.failed.insert(n, (e.clone(), until));
                    }
                }
                Ok(results) => {
                    for (n, r) in names.into_iter().zip(results) {
                        match r {
                            Err(e) if e.code != ErrorCode::TopicAlreadyExists => {
                                let message = if e.message.is_empty() {
                                    format!("{:?}", e.code)
                                } else {
                                    e.message.clone()
                                };
                                tracing::warn!(
                                    topic = n,
                                    message,
                                    "cannot create a streams group's internal topic"
                                );
                                st.failed.insert(n, (message, until));
                            }
                            _ => {}
                        }
                    }
                }
            }
        });
    }

    /// Recent failures to create these internal topics: (topic, message).
    pub fn creation_failures(&self, names: &[String]) -> Vec<(String, String)> {
        let now = Instant::now();
        let st = self.internal.lock().unwrap_or_else(|e| e.into_inner());
        names
            .iter()
            .filter_map(|n| {
                st.failed
                    .get(n)
                    .filter(|(_, until)| *until > now)
                    .map(|(m, _)| (n.clone(), m.clone()))
            })
            .collect()
    }

    /// Auto-create the named topics with the broker's defaults; failures are left for the
    /// caller to report as unknown topics.
    pub async fn auto_create(&self, names: Vec<String>) {
        if names.is_empty() || !self.config.settings().auto_create_topics {
            return;
        }
        let specs: Vec<CreateTopicSpec> = names
            .into_iter()
            .map(|name| CreateTopicSpec {
                name,
                num_partitions: -1,
                replication_factor: -1,
                ..CreateTopicSpec::default()
            })
            .collect();
        let _ = self.controller.api().create_topics(&specs, false).await;
    }

    /// Create `__consumer_offsets` if it does not exist yet (Kafka's settings: compacted,
    /// `offsets.topic.num.partitions` partitions, replication capped by live brokers).
    pub async fn ensure_offsets_topic(&self) -> Result<(), ErrorCode> {
        let partitions = self.config.settings().group.offsets_partitions;
        self.ensure_internal(
            OFFSETS_TOPIC,
            partitions,
            "offsets.topic.replication.factor",
            "offsets.topic.segment.bytes",
            None,
            &[("cleanup.policy", "compact")],
        )
        .await
    }

    /// Create `__transaction_state` if it does not exist yet (compacted,
    /// `transaction.state.log.*` settings; its `min.insync.replicas` is capped by its
    /// replication factor so a single broker can run transactions).
    pub async fn ensure_transaction_topic(&self) -> Result<(), ErrorCode> {
        let partitions = self.config.settings().txn.partitions;
        self.ensure_internal(
            TXN_TOPIC,
            partitions,
            "transaction.state.log.replication.factor",
            "transaction.state.log.segment.bytes",
            Some("transaction.state.log.min.isr"),
            &[("cleanup.policy", "compact")],
        )
        .await
    }

    /// Create `__share_group_state` if it does not exist yet: as Kafka's, not compacted but
    /// kept forever (`cleanup.policy=delete`, `retention.ms=-1`; a share partition's state is
    /// its last snapshot and the updates after it, which compaction by key would lose), with
    /// the `share.coordinator.state.topic.*` settings.
    pub async fn ensure_share_state_topic(&self) -> Result<(), ErrorCode> {
        let partitions = self
            .config
            .number("share.coordinator.state.topic.num.partitions")
            .clamp(1, 100_000) as i32;
        self.ensure_internal(
            crate::share::coordinator::STATE_TOPIC,
            partitions,
            "share.coordinator.state.topic.replication.factor",
            "share.coordinator.state.topic.segment.bytes",
            Some("share.coordinator.state.topic.min.isr"),
            &[("cleanup.policy", "delete"), ("retention.ms", "-1")],
        )
        .await
    }

    /// Create `_schemas`, the schema registry's topic, if it does not exist yet: one
    /// compacted partition, as Confluent's registry creates it
    /// (`schema.registry.topic.replication.factor`, capped by live brokers).
    pub async fn ensure_schemas_topic(&self) -> Result<(), ErrorCode> {
        self.ensure_internal(
            sluice_registry::SCHEMAS_TOPIC,
            1,
            "schema.registry.topic.replication.factor",
            "offsets.topic.segment.bytes",
            None,
            &[("cleanup.policy", "compact")],
        )
        .await
    }

    async fn ensure_internal(
        &self,
        name: &str,
        partitions: i32,
        replication_key: &str,
        segment_key: &str,
        min_isr_key: Option<&str>,
        cleanup: &[(&str, &str)],
    ) -> Result<(), ErrorCode> {
        let image = self.metadata.current();
        if image.topic(name).is_some() {
            return Ok(());
        }
        let brokers = image.live_brokers().count().max(1) as i16;
        let rf = self
            .config
            .value(replication_key)
            .and_then(|v| v.parse::<i16>().ok())
            .unwrap_or(3)
            .min(brokers);
        let segment = self
            .config
            .value(segment_key)
            .unwrap_or_else(|| "104857600".into());
        let mut configs: Vec<(String, Option<String>)> = cleanup
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect();
        configs.push(("compression.type".into(), Some("producer".into())));
        configs.push(("segment.bytes".into(), Some(segment)));
        if let Some(key) = min_isr_key {
            let min_isr = self.config.number(key).clamp(1, i64::from(rf));
            configs.push(("min.insync.replicas".into(), Some(min_isr.to_string())));
        }
        let spec = CreateTopicSpec {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: rf,
            assignments: Vec::new(),
            configs,
        };
        match self.controller.api().create_topics(&[spec], false).await {
            Ok(results) => match results.into_iter().next() {
                Some(Ok(_)) => Ok(()),
                Some(Err(e)) if e.code == ErrorCode::TopicAlreadyExists => Ok(()),
                _ => Err(ErrorCode::CoordinatorNotAvailable),
            },
            Err(_) => Err(ErrorCode::CoordinatorNotAvailable),
        }
    }
}
