//! [`Node`]: one Sluice process (broker and controller roles combined).
//!
//! Startup: identity (`meta.properties`), controller replay of the metadata log, listeners
//! bound (port 0 picks a free port, and the real port is what gets advertised), broker
//! registration, logs loaded and recovered, then connections accepted. Shutdown reverses it:
//! stop accepting, let in-flight requests finish, stop the chores, close every log (flush,
//! checkpoints, clean-shutdown marker), close the metadata log.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sluice_broker::group::coordinator::{CoordinatorConfig, GroupCoordinator};
use sluice_broker::handlers::HandlerTable;
use sluice_broker::metadata_cache::{MetadataCache, MetadataPublisher};
use sluice_broker::network::{self, NetworkLimits};
use sluice_broker::{now_ms, Broker, ReplicaManager};
use sluice_controller::{Controller, ControllerDefaults, ControllerError};
use sluice_metadata::config::BrokerConfig;
use sluice_metadata::record::Endpoint;
use sluice_metadata::{MetadataImage, Uuid};
use sluice_storage::checkpoint::MetaProperties;
use sluice_storage::{LogError, LogManager};
use thiserror::Error;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::local_controller::LocalController;

#[derive(Debug, Error)]
pub enum NodeError {
    #[error("{0}")]
    Identity(String),
    #[error("storage: {0}")]
    Storage(#[from] LogError),
    #[error("controller: {0}")]
    Controller(#[from] ControllerError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

/// A listener as bound: its name and the actual local address.
#[derive(Clone, Debug)]
pub struct BoundListener {
    pub name: String,
    pub addr: SocketAddr,
}

pub struct Node {
    pub node_id: i32,
    pub cluster_id: String,
    pub data_dir: PathBuf,
    listeners: Vec<BoundListener>,
    shutdown_tx: watch::Sender<bool>,
    servers: Vec<JoinHandle<()>>,
    chores: JoinHandle<()>,
    replicas: Arc<ReplicaManager>,
    controller: Arc<LocalController>,
    groups: Arc<GroupCoordinator>,
}

/// Read or create this directory's identity.
fn identity(dir: &std::path::Path, node_id: i32) -> Result<MetaProperties, NodeError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| NodeError::Identity(format!("cannot create {}: {e}", dir.display())))?;
    match MetaProperties::read(dir)? {
        Some(meta) if meta.node_id != node_id => Err(NodeError::Identity(format!(
            "{} belongs to node.id={} but this node is node.id={node_id}",
            dir.display(),
            meta.node_id
        ))),
        Some(meta) => Ok(meta),
        None => {
            let meta = MetaProperties {
                cluster_id: sluice_protocol::base64::encode(Uuid::new_v4().as_bytes()),
                node_id,
                directory_id: sluice_protocol::base64::encode(Uuid::new_v4().as_bytes()),
            };
            meta.write(dir)?;
            Ok(meta)
        }
    }
}

async fn bind_listeners(
    config: &BrokerConfig,
) -> Result<Vec<(BoundListener, tokio::net::TcpListener)>, NodeError> {
    let (send, recv) = config.socket_buffer_bytes();
    let backlog = config
        .value("socket.listen.backlog.size")
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let mut out = Vec::new();
    for l in config.listeners() {
        let host = if l.host.is_empty() {
            "0.0.0.0".to_string()
        } else {
            l.host.clone()
        };
        let spec = format!("{host}:{}", l.port);
        let bind_err = |source| NodeError::Bind {
            addr: spec.clone(),
            source,
        };
        let addr = tokio::net::lookup_host(&spec)
            .await
            .map_err(bind_err)?
            .next()
            .ok_or_else(|| {
                bind_err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no address",
                ))
            })?;
        let listener = network::bind(addr, send, recv, backlog).map_err(bind_err)?;
        let local = listener.local_addr().map_err(bind_err)?;
        out.push((
            BoundListener {
                name: l.name.clone(),
                addr: local,
            },
            listener,
        ));
    }
    Ok(out)
}

/// What clients are told: advertised listeners, with port 0 and wildcard hosts resolved
/// to what was actually bound.
fn advertised(config: &BrokerConfig, bound: &[BoundListener]) -> Vec<Endpoint> {
    config
        .advertised_listeners()
        .into_iter()
        .map(|l| {
            let actual = bound.iter().find(|b| b.name == l.name);
            let port = match (l.port, actual) {
                (0, Some(b)) => b.addr.port(),
                (p, _) => p,
            };
            let host = if l.host.is_empty() || l.host == "0.0.0.0" || l.host == "::" {
                match actual.map(|b| b.addr.ip()) {
                    Some(ip) if !ip.is_unspecified() => ip.to_string(),
                    _ => "localhost".to_string(),
                }
            } else {
                l.host
            };
            Endpoint {
                name: l.name,
                host,
                port,
            }
        })
        .collect()
}

impl Node {
    pub async fn start(config: BrokerConfig) -> Result<Node, NodeError> {
        let started = std::time::Instant::now();
        let config = Arc::new(config);
        let node_id = config.node_id();
        let data_dir = config
            .log_dirs()
            .into_iter()
            .next()
            .unwrap_or_else(|| PathBuf::from("./sluice-data"));
        let meta = identity(&data_dir, node_id)?;
        let metadata_dir = config
            .explicit("metadata.log.dir")
            .map_or_else(|| data_dir.clone(), PathBuf::from);
        let now = now_ms();
        let defaults = ControllerDefaults {
            num_partitions: config.num_partitions(),
            replication_factor: config.default_replication_factor(),
            delete_topic_enable: config.delete_topic_enable(),
        };
        let mut controller = Controller::open(&metadata_dir, node_id, defaults, now)?;
        let bound = bind_listeners(&config).await?;
        let listeners: Vec<BoundListener> = bound.iter().map(|(b, _)| b.clone()).collect();
        let rack = config.explicit("broker.rack").map(str::to_owned);
        controller.register_broker(advertised(&config, &listeners), rack, now)?;

        let logs = Arc::new(LogManager::open(&data_dir)?);
        if !logs.had_clean_shutdown() {
            tracing::debug!(dir = %data_dir.display(), "no clean-shutdown marker: logs are re-validated past their recovery points");
        }
        let replicas = Arc::new(ReplicaManager::new(
            node_id,
            Arc::clone(&logs),
            Arc::clone(&config),
        ));
        let image = controller.image().clone();
        replicas.load_existing(&image, now)?;
        let cache = Arc::new(MetadataCache::new(MetadataImage::empty()));
        let publisher = Arc::new(MetadataPublisher::new(
            Arc::clone(&cache),
            Arc::clone(&replicas),
        ));
        publisher.publish(image, now)?;
        let controller = Arc::new(LocalController::new(controller, publisher));
        let groups = GroupCoordinator::start(
            CoordinatorConfig::from_broker(&config),
            Arc::clone(&replicas),
        );
        let broker = Arc::new(Broker {
            node_id,
            cluster_id: meta.cluster_id.clone(),
            config: Arc::clone(&config),
            metadata: cache,
            replicas: Arc::clone(&replicas),
            controller: Arc::clone(&controller)
                as Arc<dyn sluice_broker::controller_api::ControllerApi>,
            handlers: HandlerTable::standard(),
            producer_ids: Default::default(),
            groups: Arc::clone(&groups),
        });

        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let limits = NetworkLimits {
            request_max_bytes: config.socket_request_max_bytes(),
            idle_timeout: Duration::from_millis(config.connections_max_idle_ms().max(1) as u64),
            max_connections: config.max_connections(),
        };
        let servers = bound
            .into_iter()
            .map(|(b, listener)| {
                tokio::spawn(network::serve(
                    listener,
                    b.name,
                    Arc::clone(&broker),
                    limits,
                    shutdown_rx.clone(),
                ))
            })
            .collect();
        let chores = tokio::spawn(run_chores(
            Arc::clone(&replicas),
            Arc::clone(&config),
            shutdown_rx,
        ));
        let shown: Vec<String> = listeners
            .iter()
            .map(|l| format!("{}://{}", l.name, l.addr))
            .collect();
        info!(
            node_id,
            cluster_id = %meta.cluster_id,
            startup_ms = started.elapsed().as_millis() as u64,
            "Sluice node {node_id} listening on {} (data in {})",
            shown.join(","),
            data_dir.display()
        );
        Ok(Node {
            node_id,
            cluster_id: meta.cluster_id,
            data_dir,
            listeners,
            shutdown_tx,
            servers,
            chores,
            replicas,
            controller,
            groups,
        })
    }

    pub fn listeners(&self) -> &[BoundListener] {
        &self.listeners
    }

    /// Stop accepting, finish in-flight requests, flush and checkpoint everything.
    pub async fn shutdown(self) -> Result<(), NodeError> {
        info!("shutting down");
        let _ = self.shutdown_tx.send(true);
        // Parked group requests are answered first, so their connections can close.
        self.groups.shutdown().await;
        for s in self.servers {
            let _ = s.await;
        }
        let _ = self.chores.await;
        let replicas = self.replicas;
        let controller = self.controller;
        let result = tokio::task::spawn_blocking(move || -> Result<(), NodeError> {
            let now = now_ms();
            replicas.shutdown(now)?;
            controller.with(|c| c.shutdown(now))?;
            Ok(())
        })
        .await
        .unwrap_or_else(|e| Err(NodeError::Identity(format!("shutdown task failed: {e}"))));
        if result.is_ok() {
            info!("shut down cleanly");
        }
        result
    }
}

/// Periodic log chores: retention, checkpoints, scheduled flushes, compaction. Each runs on the blocking
/// pool; the loop ends when shutdown is signalled.
async fn run_chores(
    replicas: Arc<ReplicaManager>,
    config: Arc<BrokerConfig>,
    mut shutdown: watch::Receiver<bool>,
) {
    let period = |ms: i64| Duration::from_millis(ms.clamp(1, 24 * 3_600_000) as u64);
    let mut retention = tokio::time::interval(period(config.retention_check_interval_ms()));
    let mut checkpoint = tokio::time::interval(period(config.recovery_checkpoint_interval_ms()));
    let mut cleaner = tokio::time::interval(period(config.cleaner_backoff_ms()));
    let cleaner_enabled = config.cleaner_enabled();
    let flush_ms = config.flush_scheduler_interval_ms();
    let mut flush = tokio::time::interval(period(if flush_ms == i64::MAX {
        3_600_000
    } else {
        flush_ms
    }));
    for t in [&mut retention, &mut checkpoint, &mut flush, &mut cleaner] {
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t.reset();
    }
    loop {
        let job: Box<dyn FnOnce(&ReplicaManager) + Send> = tokio::select! {
            _ = shutdown.changed() => return,
            _ = retention.tick() => Box::new(|r: &ReplicaManager| { r.run_retention(now_ms()); }),
            _ = checkpoint.tick() => Box::new(|r: &ReplicaManager| {
                if let Err(e) = r.checkpoint() { warn!(error = %e, "checkpoint failed"); }
            }),
            _ = flush.tick() => Box::new(|r: &ReplicaManager| r.flush_due(now_ms())),
            _ = cleaner.tick(), if cleaner_enabled => Box::new(|r: &ReplicaManager| { r.run_cleaner(now_ms()); }),
        };
        let r = Arc::clone(&replicas);
        let _ = tokio::task::spawn_blocking(move || job(&r)).await;
    }
}
