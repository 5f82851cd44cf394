//! [`Node`]: one Sluice process with the broker and/or controller role (`process.roles`).
//!
//! Startup: identity (`meta.properties`), listeners bound (port 0 picks a free port, and the
//! real port is what gets advertised), the controller quorum member (controller role), then
//! for the broker role: registration through heartbeats until the active controller has
//! unfenced this broker (its metadata caught up), logs loaded and recovered, then client
//! connections accepted. Shutdown reverses it: controlled shutdown (leaderships move away),
//! stop accepting, let in-flight requests finish, stop the chores, close every log (flush,
//! checkpoints, clean-shutdown marker), stop the quorum member.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sluice_broker::broker_conn::InterBroker;
use sluice_broker::group::coordinator::{CoordinatorConfig, GroupCoordinator};
use sluice_broker::handlers::HandlerTable;
use sluice_broker::metadata_cache::{MetadataCache, MetadataPublisher};
use sluice_broker::network::{self, NetworkLimits};
use sluice_broker::replica::fetcher::ReplicaFetcherManager;
use sluice_broker::sasl::SaslSettings;
use sluice_broker::services::config_admin::ConfigAdmin;
use sluice_broker::services::topics::TopicCreator;
use sluice_broker::services::{Identity, Services};
use sluice_broker::tls::DynamicStores;
use sluice_broker::txn::coordinator::{TxnConfig, TxnCoordinator};
use sluice_broker::{now_ms, ReplicaManager};
use sluice_controller::rpc::Heartbeat;
use sluice_controller::{ControllerDefaults, QuorumConfig, QuorumController};
use sluice_metadata::config::{BrokerConfig, SecurityProtocol};
use sluice_metadata::controller_types::ControllerSpec;
use sluice_metadata::record::Endpoint;
use sluice_metadata::{MetadataImage, Uuid};
use sluice_storage::checkpoint::MetaProperties;
use sluice_storage::{LogError, LogManager};
use thiserror::Error;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

use crate::controller_client::{controlled_shutdown, fetch_loop, heartbeat_loop, ControllerClient};

#[derive(Debug, Error)]
pub enum NodeError {
    #[error("{0}")]
    Identity(String),
    #[error("storage: {0}")]
    Storage(#[from] LogError),
    #[error("controller quorum: {0}")]
    Quorum(String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("SASL: {0}")]
    Sasl(String),
    #[error("{0}")]
    InterBroker(String),
    #[error("tiered storage: {0}")]
    Tier(#[from] sluice_remote::RemoteError),
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
    broker: Option<BrokerParts>,
    quorum: Option<Arc<QuorumController>>,
    /// Why the broker can go on no longer (every log directory failed), once it cannot.
    disks_failed: Option<watch::Receiver<Option<String>>>,
}

/// What the broker role adds.
struct BrokerParts {
    replicas: Arc<ReplicaManager>,
    groups: Arc<GroupCoordinator>,
    txns: Arc<TxnCoordinator>,
    client: Arc<ControllerClient>,
    heartbeat: Heartbeat,
    heartbeat_stop: watch::Sender<bool>,
    heartbeats: JoinHandle<()>,
}

/// Read or create this directory's identity.
/// The cluster id a fresh node records: derived from the configured voter set, so every node
/// of one quorum agrees (Kafka has `kafka-storage format --cluster-id` do this); random for
/// a standalone node.
fn fresh_cluster_id(voters: &[(i32, String)]) -> Uuid {
    if voters.is_empty() {
        return sluice_rt::random_uuid();
    }
    let mut sorted: Vec<String> = voters.iter().map(|(id, a)| format!("{id}@{a}")).collect();
    sorted.sort();
    let key = sorted.join(",");
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(4).enumerate() {
        let h = sluice_protocol::murmur2::murmur2(format!("sluice-cluster-{i}:{key}").as_bytes());
        chunk.copy_from_slice(&h.to_be_bytes());
    }
    Uuid::from_bytes(bytes)
}

fn identity(
    dir: &std::path::Path,
    node_id: i32,
    voters: &[(i32, String)],
) -> Result<MetaProperties, NodeError> {
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
                cluster_id: sluice_protocol::base64::encode(fresh_cluster_id(voters).as_bytes()),
                node_id,
                directory_id: sluice_protocol::base64::encode(sluice_rt::random_uuid().as_bytes()),
            };
            meta.write(dir)?;
            Ok(meta)
        }
    }
}

/// Another log directory of this node: formatted for the same cluster and node (its
/// `meta.properties` written now, with its own directory id, if it has none), as Kafka
/// requires of every `log.dirs` entry.
fn same_node(dir: &std::path::Path, meta: &MetaProperties) -> Result<(), NodeError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| NodeError::Identity(format!("cannot create {}: {e}", dir.display())))?;
    match MetaProperties::read(dir)? {
        Some(m) if m.cluster_id != meta.cluster_id => Err(NodeError::Identity(format!(
            "Invalid cluster.id in: {}/meta.properties. Expected {}, but read {}",
            dir.display(),
            meta.cluster_id,
            m.cluster_id
        ))),
        Some(m) if m.node_id != meta.node_id => Err(NodeError::Identity(format!(
            "{} belongs to node.id={} but this node is node.id={}",
            dir.display(),
            m.node_id,
            meta.node_id
        ))),
        Some(_) => Ok(()),
        None => {
            MetaProperties {
                cluster_id: meta.cluster_id.clone(),
                node_id: meta.node_id,
                directory_id: sluice_protocol::base64::encode(sluice_rt::random_uuid().as_bytes()),
            }
            .write(dir)?;
            Ok(())
        }
    }
}

/// What a controller of a dynamic quorum starts from.
struct DynamicStart {
    /// The initial voters it was formatted with (empty: it waits to be added).
    voters: Vec<crate::storage::InitialVoter>,
    /// Its metadata directory's id: its voter key with its node id.
    directory_id: Uuid,
}

fn dynamic_start(
    data_dir: &std::path::Path,
    metadata_dir: &std::path::Path,
    node_id: i32,
) -> Result<DynamicStart, NodeError> {
    let unformatted = || {
        NodeError::Identity(format!(
            "controller.quorum.voters is not set, so node {node_id} is a controller of a dynamic quorum: format its storage first with `sluice storage format --cluster-id <id>` and one of --standalone, --initial-controllers or --no-initial-controllers"
        ))
    };
    let voters = crate::storage::initial_controllers(metadata_dir)
        .map_err(NodeError::Identity)?
        .ok_or_else(unformatted)?;
    if MetaProperties::read(data_dir)?.is_none() {
        return Err(unformatted());
    }
    let directory_id = crate::storage::directory_id(metadata_dir).map_err(|_| unformatted())?;
    Ok(DynamicStart {
        voters,
        directory_id,
    })
}

/// `controller.quorum.bootstrap.servers`.
fn bootstrap_servers(config: &BrokerConfig) -> Vec<String> {
    config
        .value("controller.quorum.bootstrap.servers")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// This node's controller listeners as bound (port 0 and wildcard hosts resolved).
fn controller_endpoints(config: &BrokerConfig, bound: &[BoundListener]) -> Vec<Endpoint> {
    let names = config.controller_listener_names();
    config
        .listeners()
        .into_iter()
        .filter(|l| names.contains(&l.name))
        .filter_map(|l| {
            let b = bound.iter().find(|b| b.name == l.name)?;
            let host = if l.host.is_empty() || l.host == "0.0.0.0" || l.host == "::" {
                if b.addr.ip().is_unspecified() {
                    "localhost".to_string()
                } else {
                    b.addr.ip().to_string()
                }
            } else {
                l.host
            };
            Some(Endpoint {
                name: l.name,
                host,
                port: b.addr.port(),
            })
        })
        .collect()
}

/// What the web console connects to: `admin.http.console.listener`, or the first
/// SASL_PLAINTEXT listener, or else the first PLAINTEXT one (the console is a Kafka client of its own node, so
/// ACLs apply to whoever signs in). None when the console is turned off.
fn console_config<L, T>(
    config: &BrokerConfig,
    listeners: &[(BoundListener, L, T, Option<Arc<SaslSettings>>)],
) -> Option<crate::console::ConsoleConfig> {
    let flag = |key: &str, default: bool| {
        config
            .value(key)
            .map(|v| v.trim().eq_ignore_ascii_case("true"))
            .unwrap_or(default)
    };
    if !flag("admin.http.console.enable", true) {
        return None;
    }
    let read_only = flag("admin.http.console.read.only", false);
    let wanted = config
        .value("admin.http.console.listener")
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty());
    let usable = |b: &BoundListener| {
        matches!(
            config.security_protocol(&b.name),
            Ok(SecurityProtocol::Plaintext | SecurityProtocol::SaslPlaintext)
        )
    };
    // When the cluster authenticates clients, so does the console: a SASL_PLAINTEXT
    // listener is preferred to a PLAINTEXT one.
    let sasl_first = |b: &BoundListener| {
        config.security_protocol(&b.name) != Ok(SecurityProtocol::SaslPlaintext)
    };
    let mut candidates: Vec<_> = listeners.iter().collect();
    candidates.sort_by_key(|(b, ..)| sasl_first(b));
    let chosen = candidates.into_iter().find(|(b, ..)| match &wanted {
        Some(name) => b.name == *name,
        None => usable(b),
    });
    let problem = match (chosen, &wanted) {
        (Some((b, ..)), _) if usable(b) => None,
        (Some((b, ..)), _) => Some(format!(
            "the console's listener {} is not PLAINTEXT or SASL_PLAINTEXT",
            b.name
        )),
        (None, Some(name)) => Some(format!("admin.http.console.listener {name} is not a listener of this node")),
        (None, None) => Some("this node has no PLAINTEXT or SASL_PLAINTEXT listener for the console to connect to (set admin.http.console.listener)".to_string()),
    };
    let (bootstrap, mechanisms) = match chosen {
        Some((b, _, _, sasl)) => {
            let mut addr = b.addr;
            if addr.ip().is_unspecified() {
                addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            let mechanisms = sasl
                .as_ref()
                .map(|s| {
                    s.mechanisms
                        .iter()
                        .filter(|m| {
                            matches!(m.as_str(), "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512")
                        })
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            (addr.to_string(), mechanisms)
        }
        None => (String::new(), Vec::new()),
    };
    Some(crate::console::ConsoleConfig {
        bootstrap,
        sasl_mechanisms: mechanisms,
        sasl: chosen.is_some_and(|(_, _, _, s)| s.is_some()),
        read_only,
        problem,
        registry: None,
    })
}

/// The schema registry's bound listener, and its TLS when it is an `https://` one.
type RegistryListener = (SocketAddr, tokio::net::TcpListener, Option<TlsAcceptor>);

/// Bind `schema.registry.listener` (None when it is `none`: no schema registry). An
/// `https://` listener takes its TLS settings from `listener.name.schema_registry.ssl.*`,
/// else the broker's `ssl.*`.
async fn bind_registry(config: &BrokerConfig) -> Result<Option<RegistryListener>, NodeError> {
    let spec = config.value("schema.registry.listener").unwrap_or_default();
    let spec = spec.trim();
    if spec.is_empty() || spec.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let (addr, tls) = match spec.strip_prefix("https://") {
        Some(addr) => {
            let acceptor =
                sluice_broker::tls::acceptor(config, crate::schema_http::REGISTRY_ENDPOINT)
                    .map_err(NodeError::Tls)?;
            (addr, Some(acceptor))
        }
        None => (spec.strip_prefix("http://").unwrap_or(spec), None),
    };
    let bind_err = |source| NodeError::Bind {
        addr: spec.to_string(),
        source,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(bind_err)?;
    let bound = listener.local_addr().map_err(bind_err)?;
    Ok(Some((bound, listener, tls)))
}

/// Bind `admin.http.listener` (None when it is empty: no admin HTTP).
async fn bind_admin(
    config: &BrokerConfig,
) -> Result<Option<(SocketAddr, tokio::net::TcpListener)>, NodeError> {
    let spec = config.value("admin.http.listener").unwrap_or_default();
    if spec.trim().is_empty() {
        return Ok(None);
    }
    let bind_err = |source| NodeError::Bind {
        addr: spec.clone(),
        source,
    };
    let listener = tokio::net::TcpListener::bind(spec.trim())
        .await
        .map_err(bind_err)?;
    let addr = listener.local_addr().map_err(bind_err)?;
    Ok(Some((addr, listener)))
}

async fn bind_listeners(
    config: &BrokerConfig,
) -> Result<Vec<(BoundListener, sluice_rt::net::Listener)>, NodeError> {
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
        let options = sluice_rt::net::ListenOptions {
            send_buffer: send,
            recv_buffer: recv,
            backlog,
        };
        let listener = sluice_rt::net::bind(addr, options)
            .await
            .map_err(bind_err)?;
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
/// The endpoints a broker registers: its advertised listeners, then its schema registry
/// listener (named `SCHEMA_REGISTRY`, not a Kafka listener: clients never get it, other
/// nodes forward registry requests to it).
fn advertised(
    config: &BrokerConfig,
    bound: &[BoundListener],
    registry: Option<SocketAddr>,
) -> Vec<Endpoint> {
    let mut endpoints = kafka_advertised(config, bound);
    if let Some(addr) = registry {
        let host = if addr.ip().is_unspecified() {
            endpoints
                .first()
                .map_or_else(|| "localhost".to_string(), |e| e.host.clone())
        } else {
            addr.ip().to_string()
        };
        endpoints.push(Endpoint {
            name: crate::schema_http::REGISTRY_ENDPOINT.to_string(),
            host,
            port: addr.port(),
        });
    }
    endpoints
}

fn kafka_advertised(config: &BrokerConfig, bound: &[BoundListener]) -> Vec<Endpoint> {
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
        let started = tokio::time::Instant::now();
        let config = Arc::new(config);
        let node_id = config.node_id();
        let (is_broker, is_controller) = config.roles();
        let (data_dir, metadata_dir) = crate::storage::directories(&config);
        let voters = config.quorum_voters().map_err(NodeError::Identity)?;
        // A controller without static voters belongs to a dynamic quorum (KIP-853), which
        // starts from what `sluice storage format` recorded.
        let dynamic =
            (is_controller && voters.is_empty() && config.explicit("process.roles").is_some())
                .then(|| dynamic_start(&data_dir, &metadata_dir, node_id))
                .transpose()?;
        let meta = identity(&data_dir, node_id, &voters)?;
        let log_dirs = crate::storage::log_dirs(&config);
        for dir in log_dirs.iter().skip(1) {
            same_node(dir, &meta)?;
        }
        let controller_names = config.controller_listener_names();
        crate::admin_http::install_metrics();
        let bound = bind_listeners(&config).await?;
        let admin = bind_admin(&config).await?;
        let registry = if is_broker {
            bind_registry(&config).await?
        } else {
            None
        };
        let admin_shown = admin
            .as_ref()
            .map_or_else(String::new, |(a, _)| format!("admin http://{a}; "))
            + &registry.as_ref().map_or_else(String::new, |(a, _, tls)| {
                let scheme = if tls.is_some() { "https" } else { "http" };
                format!("schema registry {scheme}://{a}; ")
            });
        let listeners: Vec<BoundListener> = bound.iter().map(|(b, _)| b.clone()).collect();
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let (controller_bound, kafka_bound): (Vec<_>, Vec<_>) = bound
            .into_iter()
            .partition(|(b, _)| controller_names.contains(&b.name));
        // SSL listeners' TLS settings are checked (files read) before anything starts.
        let quorum_transport =
            crate::quorum_transport::from_config(&config).map_err(NodeError::Tls)?;
        let mut kafka_listeners = Vec::new();
        for (b, listener) in kafka_bound {
            let protocol = config.security_protocol(&b.name).ok();
            let tls = match protocol {
                Some(SecurityProtocol::Ssl | SecurityProtocol::SaslSsl) => Some(Arc::new(
                    sluice_broker::tls::ListenerTls::new(&config, &b.name)
                        .map_err(NodeError::Tls)?,
                )),
                _ => None,
            };
            let sasl = match protocol {
                Some(SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl) => Some(
                    Arc::new(SaslSettings::from_config(&config, &b.name).map_err(NodeError::Sasl)?),
                ),
                _ => None,
            };
            kafka_listeners.push((b, listener, tls, sasl));
        }

        // The controller role: a voter of the metadata quorum. With no voters configured
        // this is the standalone single-node quorum of `sluice server` (no network).
        let quorum = if is_controller {
            let voter_map: BTreeMap<u64, String> = if let Some(d) = &dynamic {
                d.voters
                    .iter()
                    .map(|v| (v.id as u64, v.addr.clone()))
                    .collect()
            } else if voters.is_empty() {
                BTreeMap::from([(node_id as u64, String::new())])
            } else {
                voters
                    .iter()
                    .map(|(id, a)| (*id as u64, a.clone()))
                    .collect()
            };
            let number = |k: &str| config.number(k);
            let q = QuorumController::start(QuorumConfig {
                node_id,
                transport: Arc::clone(&quorum_transport),
                voters: voter_map,
                dynamic: dynamic.is_some(),
                directories: dynamic
                    .iter()
                    .flat_map(|d| &d.voters)
                    .map(|v| (v.id as u64, v.directory_id))
                    .collect(),
                bootstrap_features: crate::storage::read_bootstrap_features(&metadata_dir)
                    .map_err(NodeError::Identity)?,
                dir: metadata_dir.clone(),
                segment_bytes: number("metadata.log.segment.bytes").max(1024) as u64,
                snapshot_every: (number("metadata.log.max.record.bytes.between.snapshots") / 1024)
                    .max(1) as u64,
                session_timeout_ms: number("broker.session.timeout.ms").max(1) as u64,
                election_timeout_ms: number("controller.quorum.election.timeout.ms").max(1) as u64,
                auto_leader_rebalance: config
                    .value("auto.leader.rebalance.enable")
                    .is_some_and(|v| v.eq_ignore_ascii_case("true")),
                imbalance_check_ms: (number("leader.imbalance.check.interval.seconds").max(1)
                    as u64)
                    .saturating_mul(1000),
                imbalance_pct: number("leader.imbalance.per.broker.percentage"),
                defaults: ControllerDefaults {
                    num_partitions: config.num_partitions(),
                    replication_factor: config.default_replication_factor(),
                    delete_topic_enable: config.delete_topic_enable(),
                    unclean_leader_election: config
                        .value("unclean.leader.election.enable")
                        .is_some_and(|v| v.eq_ignore_ascii_case("true")),
                    min_insync_replicas: config
                        .value("min.insync.replicas")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(1),
                    tokens: config.token_settings(),
                    group_settings: sluice_metadata::config::group::group_broker_keys()
                        .into_iter()
                        .filter_map(|k| config.value(k).map(|v| (k.to_string(), v)))
                        .collect(),
                    broker: config.as_ref().clone(),
                },
            })
            .await
            .map_err(NodeError::Quorum)?;
            for (_, listener) in controller_bound {
                tokio::spawn(Arc::clone(&q).serve(listener, shutdown_rx.clone()));
            }
            q.spawn_liveness(shutdown_rx.clone());
            if let Some(d) = &dynamic {
                let me = ControllerSpec {
                    node_id,
                    directory_id: d.directory_id,
                    endpoints: controller_endpoints(&config, &listeners),
                };
                tokio::spawn(crate::controller_client::observe_quorum(
                    Arc::clone(&q),
                    me,
                    bootstrap_servers(&config),
                    Arc::clone(&quorum_transport),
                    config
                        .value("controller.quorum.auto.join.enable")
                        .is_some_and(|v| v.eq_ignore_ascii_case("true")),
                    shutdown_rx.clone(),
                ));
            }
            Some(q)
        } else {
            None
        };

        let shown: Vec<String> = listeners
            .iter()
            .map(|l| format!("{}://{}", l.name, l.addr))
            .collect();
        if !is_broker {
            info!(
                node_id,
                startup_ms = started.elapsed().as_millis() as u64,
                "Sluice controller {node_id} listening on {} ({admin_shown}data in {})",
                shown.join(","),
                metadata_dir.display()
            );
            let servers = admin
                .map(|(_, l)| {
                    tokio::spawn(crate::admin_http::serve(
                        l,
                        None,
                        None,
                        node_id,
                        shutdown_rx.clone(),
                    ))
                })
                .into_iter()
                .collect();
            return Ok(Node {
                node_id,
                cluster_id: meta.cluster_id,
                data_dir,
                listeners,
                shutdown_tx,
                servers,
                chores: tokio::spawn(async {}),
                broker: None,
                quorum,
                disks_failed: None,
            });
        }

        let cache = Arc::new(MetadataCache::new(
            MetadataImage::empty(),
            Arc::clone(&config),
            node_id,
        ));
        let mut bootstrap: Vec<String> = voters.iter().map(|(_, a)| a.clone()).collect();
        if bootstrap.is_empty() {
            bootstrap = bootstrap_servers(&config);
        }
        let client = ControllerClient::new(
            node_id,
            quorum.clone(),
            bootstrap,
            voters.iter().cloned().collect::<HashMap<i32, String>>(),
            Arc::clone(&cache),
            quorum_transport,
        );
        let images = match &quorum {
            Some(q) => q.images(),
            None => {
                let (tx, rx) = watch::channel(Arc::new(MetadataImage::empty()));
                tokio::spawn(fetch_loop(Arc::clone(&client), tx, shutdown_rx.clone()));
                rx
            }
        };
        let boot = sluice_rt::boot_id();
        let heartbeat = Heartbeat {
            node_id,
            incarnation_id: sluice_rt::random_uuid(),
            endpoints: advertised(&config, &listeners, registry.as_ref().map(|(a, _, _)| *a)),
            rack: config.explicit("broker.rack").map(str::to_owned),
            metadata_offset: -1,
            want_shutdown: false,
            offline_replicas: Vec::new(),
            unclean_shutdown: !LogManager::previous_writes_intact(&log_dirs, boot.as_deref()),
        };
        let (fenced_tx, mut fenced_rx) = watch::channel(true);
        let (offline_tx, offline_rx) = watch::channel(Vec::new());
        // Heartbeats stop before the controlled shutdown, so none can undo it.
        let (heartbeat_stop, heartbeat_stop_rx) = watch::channel(false);
        let heartbeats = tokio::spawn(heartbeat_loop(
            Arc::clone(&client),
            heartbeat.clone(),
            images.clone(),
            Duration::from_millis(config.number("broker.heartbeat.interval.ms").max(1) as u64),
            fenced_tx,
            offline_rx,
            heartbeat_stop_rx,
        ));
        // Serve clients only once registered, caught up and unfenced: the image is then
        // complete, so stray logs can be told from live ones.
        let mut waiting = images.clone();
        loop {
            let ready = !*fenced_rx.borrow() && waiting.borrow().is_live(node_id);
            if ready {
                break;
            }
            let wait = async {
                tokio::select! {
                    _ = fenced_rx.changed() => {}
                    _ = waiting.changed() => {}
                }
            };
            if tokio::time::timeout(Duration::from_secs(10), wait)
                .await
                .is_err()
            {
                info!(
                    node_id,
                    "waiting for the controller quorum to register this broker"
                );
            }
        }
        let image = (**images.borrow()).clone();

        let now = now_ms();
        let logs = Arc::new(LogManager::open_all(&log_dirs)?);
        if let Some(boot) = &boot {
            if let Err(e) = logs.mark_boot(boot) {
                warn!(error = %e, "cannot note the machine boot in the log directories: a restart will count as unclean");
            }
        }
        if !logs.had_clean_shutdown() {
            tracing::debug!(dirs = ?log_dirs, "no clean-shutdown marker: logs are re-validated past their recovery points");
        }
        let inter = InterBroker::from_config(&config).map_err(NodeError::InterBroker)?;
        let replicas = Arc::new(ReplicaManager::new(
            node_id,
            Arc::clone(&logs),
            Arc::clone(&config),
            Arc::clone(&cache),
        ));
        let tier = match &config.settings().tier {
            t if t.enabled => {
                let first = log_dirs
                    .first()
                    .cloned()
                    .unwrap_or_else(|| PathBuf::from("."));
                let tier = Arc::new(sluice_broker::replica::tier::Tier::open(t, &first)?);
                replicas.set_tier(Arc::clone(&tier));
                Some(tier)
            }
            _ => None,
        };
        // Diskless topics, on every broker (a local directory store unless one is configured).
        {
            let first = log_dirs
                .first()
                .cloned()
                .unwrap_or_else(|| PathBuf::from("."));
            let diskless = sluice_broker::diskless::Diskless::start(
                &config.settings().tier,
                &first,
                Arc::clone(&client) as Arc<dyn sluice_broker::controller_api::ControllerApi>,
                Arc::clone(&cache),
            )?;
            replicas.set_diskless(diskless);
        }
        replicas.load_existing(&image, now)?;
        let (failed_dirs_tx, failed_dirs_rx) = tokio::sync::mpsc::unbounded_channel();
        logs.on_dir_failure(Box::new(move |dir| {
            let _ = failed_dirs_tx.send(dir);
        }));
        let (disks_failed_tx, disks_failed) = watch::channel(None);
        tokio::spawn(follow_dir_failures(
            Arc::clone(&replicas),
            failed_dirs_rx,
            offline_tx,
            disks_failed_tx,
        ));
        let publisher = Arc::new(MetadataPublisher::new(
            Arc::clone(&cache),
            Arc::clone(&replicas),
        ));
        publisher.publish(image, now)?;
        tokio::spawn(publish_loop(publisher, images.clone(), shutdown_rx.clone()));
        let groups = GroupCoordinator::start(
            CoordinatorConfig::from_broker(&config),
            Arc::clone(&replicas),
            Arc::clone(&cache),
        );
        let txns = TxnCoordinator::start(
            TxnConfig::from_broker(node_id, &config, inter.clone()),
            Arc::clone(&replicas),
            Arc::clone(&cache),
        );
        let share_inter = inter.clone();
        let fetchers = ReplicaFetcherManager::new(
            node_id,
            Arc::clone(&replicas),
            Arc::clone(&cache),
            &config,
            inter,
        );
        tokio::spawn(fetchers.run(shutdown_rx.clone()));
        let settings = config.settings().clone();
        let controller = Arc::new(sluice_broker::services::controller::ControllerClient::new(
            Arc::clone(&client) as Arc<dyn sluice_broker::controller_api::ControllerApi>,
            node_id,
        ));
        let listener_tls: Vec<_> = kafka_listeners
            .iter()
            .filter_map(|(_, _, tls, _)| tls.clone())
            .collect();
        let quotas = Arc::new(sluice_broker::quota::ClientQuotas::new(
            sluice_broker::quota::QuotaManager::with_mutation_window(
                sluice_broker::quota::Window::from(settings.quota_window),
                sluice_broker::quota::Window::from(settings.controller_quota_window),
            ),
            Arc::clone(&cache),
        ));
        let topic_creator = Arc::new(TopicCreator::new(
            Arc::clone(&config),
            Arc::clone(&cache),
            Arc::clone(&controller),
        ));
        let mirrors = sluice_broker::mirror::MirrorManager::new(
            node_id,
            Arc::clone(&replicas),
            Arc::clone(&cache),
            Arc::clone(&controller),
            Arc::clone(&groups),
            Arc::clone(&topic_creator),
        );
        tokio::spawn(Arc::clone(&mirrors).run(shutdown_rx.clone()));
        let share_state = Arc::new(
            sluice_broker::share::coordinator::ShareCoordinator::from_config(
                Arc::clone(&replicas),
                &config,
            ),
        );
        let persister = Arc::new(sluice_broker::share::persister::Persister::new(
            node_id,
            Arc::clone(&share_state),
            Arc::clone(&cache),
            Arc::clone(&topic_creator),
            share_inter,
        ));
        let services = Arc::new(Services {
            identity: Arc::new(Identity {
                node_id,
                cluster_id: meta.cluster_id.clone(),
            }),
            config: Arc::clone(&config),
            metadata: Arc::clone(&cache),
            replicas: Arc::clone(&replicas),
            controller: Arc::clone(&controller),
            access: Arc::new(sluice_broker::authorizer::Access::new(
                sluice_broker::authorizer::Authorizer::from_config(&config),
                Arc::clone(&cache),
            )),
            quotas: Arc::clone(&quotas),
            schemas: Arc::new(sluice_broker::registry::SchemaRegistry::new(
                node_id,
                Arc::clone(&config),
                Arc::clone(&replicas),
                Arc::clone(&cache),
                Arc::clone(&topic_creator),
            )),
            topics: topic_creator,
            configs: Arc::new(ConfigAdmin::new(
                node_id,
                Arc::clone(&config),
                Arc::clone(&cache),
                Arc::clone(&controller),
                listener_tls.clone(),
            )),
            groups: Arc::clone(&groups),
            txns: Arc::clone(&txns),
            fetch_sessions: Arc::new(sluice_broker::fetch_session::FetchSessionCache::new(
                settings.fetch_session_cache_slots,
            )),
            mirrors,
            telemetry: sluice_broker::telemetry::ClientTelemetry::new(
                Arc::clone(&cache),
                config.telemetry_max_bytes(),
            ),
            shares: Arc::new(sluice_broker::share::SharePartitionManager::new(
                Arc::clone(&replicas),
                Arc::clone(&cache),
                Arc::clone(&persister),
            )),
            share_state,
            persister,
        });
        // Produce validation on a node without a registry listener has no way to the
        // registry's leader either (all nodes' listeners are configured alike).
        if let Some((_, _, tls)) = &registry {
            services
                .schemas
                .set_remote(Box::new(crate::schema_http::HttpRemote::new(
                    &config,
                    Arc::clone(&cache),
                    tls.is_some(),
                )));
        }
        let frontend = Arc::new(network::Frontend {
            node_id,
            config: Arc::clone(&config),
            metadata: Arc::clone(&cache),
            handlers: HandlerTable::new(&services),
            quotas,
            connections: Default::default(),
            budget: sluice_broker::network::budget::RequestBudget::new(
                settings.queued_max_requests,
                settings.queued_max_request_bytes,
            ),
        });
        let stores = DynamicStores {
            metadata: Arc::clone(&cache),
            listeners: listener_tls,
        };
        stores.apply();
        tokio::spawn(stores.follow(shutdown_rx.clone()));

        if let Some(tier) = tier {
            tokio::spawn(sluice_broker::replica::tier::copy::run_tier_tasks(
                Arc::clone(&replicas),
                Arc::clone(controller.api()),
                tier,
                shutdown_rx.clone(),
            ));
        }
        tokio::spawn(sluice_broker::replica::isr::run_isr_checks(
            Arc::clone(&replicas),
            Arc::clone(&cache),
            Arc::clone(controller.api()),
            settings.replica.lag_time_max_ms,
            shutdown_rx.clone(),
        ));
        let limits = NetworkLimits {
            request_max_bytes: settings.socket_request_max_bytes,
            idle_timeout: Duration::from_millis(settings.connections_max_idle_ms),
            sasl_max_receive: settings.sasl_max_receive_bytes,
        };
        let mut servers = Vec::new();
        let inter_broker_listener = config.inter_broker_listener();
        // As Kafka: the inter-broker listener is exempt from max.connections only when
        // clients have listeners of their own.
        let several = kafka_listeners.len() > 1;
        let console = console_config(&config, &kafka_listeners).map(|mut c| {
            c.registry = registry.as_ref().map(|(addr, _, tls)| {
                let scheme = if tls.is_some() { "https" } else { "http" };
                let host = if addr.ip().is_unspecified() {
                    SocketAddr::from(([127, 0, 0, 1], addr.port()))
                } else {
                    *addr
                };
                (
                    format!("{scheme}://{host}"),
                    crate::schema_http::forwarding_client(&config, tls.is_some()),
                )
            });
            c
        });
        for (b, listener, tls, sasl) in kafka_listeners {
            let inter_broker = several && inter_broker_listener.as_deref() == Some(b.name.as_str());
            servers.push(tokio::spawn(network::serve(
                listener,
                b.name,
                inter_broker,
                tls,
                sasl,
                Arc::clone(&frontend),
                limits,
                shutdown_rx.clone(),
            )));
        }
        if let Some((_, l, tls)) = registry {
            servers.push(tokio::spawn(crate::schema_http::serve(
                l,
                tls,
                Arc::clone(&services),
                shutdown_rx.clone(),
            )));
        }
        if let Some((_, l)) = admin {
            servers.push(tokio::spawn(crate::admin_http::serve(
                l,
                Some(Arc::clone(&services)),
                console,
                node_id,
                shutdown_rx.clone(),
            )));
        }
        let chores = tokio::spawn(run_chores(
            Arc::clone(&replicas),
            Arc::clone(&config),
            shutdown_rx,
        ));
        info!(
            node_id,
            cluster_id = %meta.cluster_id,
            startup_ms = started.elapsed().as_millis() as u64,
            "Sluice node {node_id} listening on {} ({admin_shown}data in {})",
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
            broker: Some(BrokerParts {
                replicas,
                groups,
                txns,
                client,
                heartbeat,
                heartbeat_stop,
                heartbeats,
            }),
            quorum,
            disks_failed: Some(disks_failed),
        })
    }

    pub fn listeners(&self) -> &[BoundListener] {
        &self.listeners
    }

    /// This node's own high watermark of a partition it hosts (tools and the simulator's
    /// checkers).
    pub fn high_watermark(&self, topic: &str, partition: i32) -> Option<i64> {
        let tp = sluice_protocol::types::TopicPartition::new(topic, partition);
        let b = self.broker.as_ref()?;
        b.replicas.high_watermark(&tp).map(|o| o.0)
    }

    /// Where this node's local log of a partition starts (above the log start when tiered
    /// storage has freed the older segments), if it hosts the partition.
    pub fn local_log_start(&self, topic: &str, partition: i32) -> Option<i64> {
        let tp = sluice_protocol::types::TopicPartition::new(topic, partition);
        self.broker.as_ref()?.replicas.local_log_start(&tp)
    }

    /// The leader epoch under which this node leads a partition, if it believes it does.
    pub fn leading_epoch(&self, topic: &str, partition: i32) -> Option<i32> {
        let tp = sluice_protocol::types::TopicPartition::new(topic, partition);
        self.broker.as_ref()?.replicas.leading_epoch(&tp)
    }

    /// The controller quorum member on this node, if it has the controller role.
    pub fn quorum(&self) -> Option<&Arc<QuorumController>> {
        self.quorum.as_ref()
    }

    /// Resolves, with the error, once the node can no longer go on: its controller quorum
    /// member stopped on a fatal error (its metadata log cannot be written), or every log
    /// directory of its broker failed. The process should exit then, without a controlled
    /// shutdown, as Kafka's does.
    pub async fn fatal(&self) -> String {
        let quorum = async {
            match &self.quorum {
                Some(q) => q.fatal().await,
                None => std::future::pending().await,
            }
        };
        let disks = async {
            let Some(mut rx) = self.disks_failed.clone() else {
                return std::future::pending().await;
            };
            let why = match rx.wait_for(Option::is_some).await {
                Ok(why) => why.clone().unwrap_or_default(),
                Err(_) => return std::future::pending().await,
            };
            why
        };
        let why = tokio::select! {
            why = quorum => why,
            why = disks => why,
        };
        // An I/O error other than a full disk may have cost writes the page cache could not
        // write back: the next start must not count the files as holding everything.
        if !why.contains("os error 28") {
            if let Some(b) = &self.broker {
                b.replicas.log_manager().forget_boot();
            }
        }
        why
    }

    /// Controlled shutdown (leaderships move away first), then stop accepting, finish
    /// in-flight requests, flush and checkpoint everything, leave the quorum.
    pub async fn shutdown(mut self) -> Result<(), NodeError> {
        info!("shutting down");
        if let Some(b) = &mut self.broker {
            let _ = b.heartbeat_stop.send(true);
            let _ = (&mut b.heartbeats).await;
            let offset = self.quorum.as_ref().map_or(-1, |q| q.image().offset);
            controlled_shutdown(&b.client, b.heartbeat.clone(), offset).await;
        }
        let _ = self.shutdown_tx.send(true);
        let mut result = Ok(());
        if let Some(b) = self.broker {
            // Parked group requests are answered first, so their connections can close.
            b.groups.shutdown().await;
            b.txns.shutdown().await;
            if let Some(d) = b.replicas.diskless() {
                d.shutdown().await;
            }
            for s in self.servers {
                let _ = s.await;
            }
            let _ = self.chores.await;
            let replicas = b.replicas;
            result = sluice_rt::task::spawn_blocking(move || -> Result<(), NodeError> {
                replicas.shutdown(now_ms())?;
                Ok(())
            })
            .await
            .unwrap_or_else(|e| Err(NodeError::Identity(format!("shutdown task failed: {e}"))));
        }
        if let Some(q) = self.quorum {
            q.shutdown().await;
        }
        if result.is_ok() {
            info!("shut down cleanly");
        }
        result
    }
}

/// Apply each new metadata image to the broker, in order.
/// Take the replicas of each failed log directory offline and tell the controller (the
/// heartbeat reports them); once every directory has failed the broker cannot go on (Kafka
/// halts then too).
async fn follow_dir_failures(
    replicas: Arc<ReplicaManager>,
    mut failed: tokio::sync::mpsc::UnboundedReceiver<usize>,
    offline: watch::Sender<Vec<(sluice_metadata::Uuid, i32)>>,
    fatal: watch::Sender<Option<String>>,
) {
    while let Some(dir) = failed.recv().await {
        let count = replicas.take_dir_offline(dir);
        offline.send_replace(replicas.offline_replicas());
        let logs = replicas.log_manager();
        warn!(
            dir = %logs.dirs().get(dir).map(|d| d.display().to_string()).unwrap_or_default(),
            replicas = count,
            "log directory offline; its replicas are reported to the controller"
        );
        if logs.all_offline() {
            let dirs: Vec<String> = logs
                .dirs()
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            fatal.send_replace(Some(format!(
                "every log directory has failed ({})",
                dirs.join(", ")
            )));
        }
    }
}

async fn publish_loop(
    publisher: Arc<MetadataPublisher>,
    mut images: watch::Receiver<Arc<MetadataImage>>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            changed = images.changed() => if changed.is_err() { return },
        }
        let image = (**images.borrow_and_update()).clone();
        let p = Arc::clone(&publisher);
        let result = sluice_rt::task::spawn_blocking(move || p.publish(image, now_ms())).await;
        if let Ok(Err(e)) = result {
            warn!(error = %e, "applying metadata failed");
        }
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
    let mut compaction = tokio::time::interval(period(config.diskless_compaction_interval_ms()));
    let cleaner_enabled = config.cleaner_enabled();
    let flush_ms = config.flush_scheduler_interval_ms();
    let mut flush = tokio::time::interval(period(if flush_ms == i64::MAX {
        3_600_000
    } else {
        flush_ms
    }));
    for t in [
        &mut retention,
        &mut checkpoint,
        &mut flush,
        &mut cleaner,
        &mut compaction,
    ] {
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t.reset();
    }
    loop {
        let mut diskless = false;
        let job: Box<dyn FnOnce(&ReplicaManager) + Send> = tokio::select! {
            _ = shutdown.changed() => return,
            _ = compaction.tick() => {
                // Diskless WAL compaction: reads and writes of the store, and a call to the
                // controller; nothing for the blocking pool.
                replicas.compact_diskless().await;
                continue;
            }
            _ = retention.tick() => {
                diskless = true;
                Box::new(|r: &ReplicaManager| { r.run_retention(now_ms()); })
            }
            _ = checkpoint.tick() => Box::new(|r: &ReplicaManager| {
                if let Err(e) = r.checkpoint() { warn!(error = %e, "checkpoint failed"); }
            }),
            _ = flush.tick() => Box::new(|r: &ReplicaManager| r.flush_due(now_ms())),
            _ = cleaner.tick(), if cleaner_enabled => Box::new(|r: &ReplicaManager| { r.run_cleaner(now_ms()); }),
        };
        let r = Arc::clone(&replicas);
        let _ = sluice_rt::task::spawn_blocking(move || job(&r)).await;
        // Diskless topics' retention and WAL garbage: calls to the controller and the store.
        if diskless {
            replicas.clean_diskless(now_ms()).await;
        }
    }
}
