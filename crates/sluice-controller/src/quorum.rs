//! [`QuorumController`]: one controller node of the Raft metadata quorum. Every controller
//! replicates the metadata log and applies it; the Raft leader is the active controller:
//! it alone plans changes (with [`Controller`]), appends them (`client_write` commits
//! only with a majority, so a deposed leader's writes are rejected by term) and runs
//! broker liveness — registration, heartbeats, fencing on session expiry, unfencing once
//! a broker has caught up, controlled shutdown.
//!
//! It also serves the controller listener: Raft RPCs, forwarded broker requests and
//! metadata fetches from broker-only nodes.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, SnapshotPolicy};
use sluice_metadata::controller_types::{ApiError, ControllerSpec, QuorumInfo, QuorumReplica};
use sluice_metadata::features;
use sluice_metadata::record::Endpoint;
use sluice_metadata::{MetadataImage, MetadataRecord, Uuid};
use sluice_protocol::ErrorCode;
use sluice_rt::net::Listener as TcpListener;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::controller::{Controller, ControllerDefaults};
use crate::raft::network::{
    decode_append, decode_snapshot, decode_vote, encode_append_response, encode_snapshot_response,
    encode_vote_response, read_frame, write_frame, NetworkFactory, KIND_APPEND, KIND_CONTROLLER,
    KIND_FETCH, KIND_SNAPSHOT, KIND_VOTE,
};
use crate::raft::store::{Changes, LogStore, Shared, StateMachine};
use crate::raft::{Command, Raft};
use crate::rpc::{
    decode_fetch, ControllerRequest, ControllerResponse, FetchResponse, Heartbeat, ReplyBody,
};
use crate::transport::{BoxStream, Transport};

/// How long AddRaftVoter waits for the new voter to catch up with the metadata log (the
/// forwarding broker's call to this controller gives up after 5 s).
const VOTER_CATCH_UP: Duration = Duration::from_secs(4);

/// A controller's Raft address: its first controller listener endpoint.
fn controller_addr(endpoints: &[Endpoint]) -> Option<String> {
    endpoints.first().map(|e| format!("{}:{}", e.host, e.port))
}

/// A controller endpoint for a Raft address (`host:port`) under Kafka's default listener name.
fn controller_endpoints(addr: &str) -> Vec<Endpoint> {
    addr.rsplit_once(':')
        .and_then(|(host, port)| {
            Some(vec![Endpoint {
                name: "CONTROLLER".into(),
                host: host.to_string(),
                port: port.parse().ok()?,
            }])
        })
        .unwrap_or_default()
}

/// A failed Raft write: NOT_CONTROLLER with the leader's hint when this node no longer
/// leads.
fn write_error(
    what: &str,
    e: RaftError<u64, ClientWriteError<u64, BasicNode>>,
) -> ControllerResponse {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
            ControllerResponse::NotController(
                f.leader_id
                    .map(|id| (id as i32, f.leader_node.map(|n| n.addr).unwrap_or_default())),
            )
        }
        e => ControllerResponse::Failed(format!("{what}: {e}")),
    }
}

fn no_endpoint() -> ApiError {
    ApiError::new(
        ErrorCode::InvalidRequest,
        "The request names no controller listener endpoint",
    )
}

/// How long a node connecting to the controller listener has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct QuorumConfig {
    pub node_id: i32,
    /// Voter id -> controller listener address. A single voter may have an empty address
    /// (the standalone single-node quorum needs no network). In a dynamic quorum, the
    /// voters it was formatted with (empty: this controller waits to be added).
    pub voters: BTreeMap<u64, String>,
    /// A dynamic quorum (KIP-853, `controller.quorum.bootstrap.servers` without static
    /// voters): voters are added and removed at runtime, and each is reached at the address
    /// the membership in the log records.
    pub dynamic: bool,
    /// The metadata log directory ids of a dynamic quorum's initial voters.
    pub directories: BTreeMap<u64, Uuid>,
    /// Feature levels this controller was formatted with (`storage format --feature`):
    /// finalized by the first active controller of a log with no feature level yet.
    pub bootstrap_features: Vec<(String, i16)>,
    pub dir: PathBuf,
    /// `metadata.log.segment.bytes`
    pub segment_bytes: u64,
    /// Entries between snapshots.
    pub snapshot_every: u64,
    /// `broker.session.timeout.ms`
    pub session_timeout_ms: u64,
    /// `controller.quorum.election.timeout.ms`
    pub election_timeout_ms: u64,
    pub defaults: ControllerDefaults,
    /// `auto.leader.rebalance.enable`, `leader.imbalance.check.interval.seconds` (as ms),
    /// `leader.imbalance.per.broker.percentage`.
    pub auto_leader_rebalance: bool,
    pub imbalance_check_ms: u64,
    pub imbalance_pct: i64,
    /// How connections to and from the other voters are made (plain TCP, or TLS).
    pub transport: Arc<dyn Transport>,
}

struct Session {
    incarnation: Uuid,
    last_seen: Instant,
    /// A fenced broker is unfenced once its metadata reaches this offset.
    caught_up_at: i64,
    /// It asked for a controlled shutdown: this incarnation stays fenced.
    shutting_down: bool,
    /// The offset of its metadata image at its last heartbeat, when that was (wall clock,
    /// ms) and when it last had all of this controller's metadata (-1: not yet): what
    /// DescribeQuorum shows of it as an observer.
    metadata_offset: i64,
    heard_ms: i64,
    synced_ms: i64,
}

impl Session {
    fn new(incarnation: Uuid, now: Instant, caught_up_at: i64) -> Self {
        Self {
            incarnation,
            last_seen: now,
            caught_up_at,
            shutting_down: false,
            metadata_offset: -1,
            heard_ms: -1,
            synced_ms: -1,
        }
    }
}

/// A voter's replication of the metadata log as the leader saw it last: the last entry it
/// has, when that last moved, and when it last had everything the leader had (wall clock,
/// ms; -1: not seen). openraft reports progress, not each fetch: a follower that has
/// everything on an idle log shows when it last caught up.
#[derive(Clone, Copy, Debug)]
struct VoterProgress {
    matched: Option<u64>,
    fetch_ms: i64,
    caught_up_ms: i64,
}

type Progress = Arc<std::sync::Mutex<HashMap<u64, VoterProgress>>>;

/// Follow the leader's replication metrics into `progress` (cleared when not leading).
async fn track_progress(raft: Raft, progress: Progress) {
    let mut metrics = raft.metrics();
    loop {
        {
            let m = metrics.borrow_and_update();
            let now = sluice_rt::wall_ms();
            let mut p = progress.lock().unwrap_or_else(|e| e.into_inner());
            match &m.replication {
                Some(replication) if m.state == openraft::ServerState::Leader => {
                    for (id, matched) in replication.iter() {
                        let index = matched.as_ref().map(|l| l.index);
                        let e = p.entry(*id).or_insert(VoterProgress {
                            matched: None,
                            fetch_ms: -1,
                            caught_up_ms: -1,
                        });
                        if index.is_some() && index != e.matched {
                            e.fetch_ms = now;
                        }
                        e.matched = index;
                        if index.is_some() && index >= m.last_log_index {
                            e.caught_up_ms = now;
                        }
                    }
                }
                _ => p.clear(),
            }
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

/// The active controller's state; the lock serializes planning and writing.
#[derive(Default)]
struct Active {
    /// The term this state belongs to: a new term starts afresh.
    term: u64,
    sessions: HashMap<i32, Session>,
    /// This controller lost touch with its quorum (a majority did not confirm its
    /// leadership within two election timeouts): brokers' heartbeats may not have reached
    /// it either.
    cut_off: bool,
}

/// openraft 0.9 draws each voter's election timeout once, at start, and checks it on a
/// tick, so voters started together can time out in the same tick round after round and
/// split the vote for as long (seen: 45 terms, 20 s, on a busy 2-core machine; and in the
/// simulator, seed 143, forever: three voters whose timeouts all fell in the same tick).
/// As KRaft backs off randomly after a failed election, a voter whose term moved on with no
/// leader known holds its timer's elections back and stands itself at a random moment below
/// `max` (not on a tick), unless a leader turned up meanwhile.
async fn election_backoff(raft: Raft, max: Duration) {
    let mut metrics = raft.metrics();
    let mut term = metrics.borrow().current_term;
    loop {
        if metrics.changed().await.is_err() {
            return; // Raft shut down
        }
        let (now_term, leader) = {
            let m = metrics.borrow();
            (m.current_term, m.current_leader)
        };
        if now_term > term && leader.is_none() {
            raft.runtime_config().elect(false);
            let ms = max.as_millis().max(1) as usize;
            let pause = crate::placement::random_start(ms) as u64;
            tokio::time::sleep(Duration::from_millis(pause)).await;
            if raft.metrics().borrow().current_leader.is_none() {
                let _ = raft.trigger().elect().await;
            }
            raft.runtime_config().elect(true);
            // This node's own election moved the term on: not a reason to back off again.
            let m = metrics.borrow_and_update();
            term = term.max(m.current_term);
            continue;
        }
        term = term.max(now_term);
    }
}

pub struct QuorumController {
    node_id: i32,
    raft: Raft,
    shared: Arc<Shared>,
    log: LogStore,
    planner: Controller,
    active: tokio::sync::Mutex<Active>,
    /// Fault injection: when set, Raft traffic to and from this node is dropped.
    isolated: Arc<AtomicBool>,
    session_timeout: Duration,
    /// How long this controller waits for a quorum to confirm its leadership before it
    /// counts itself cut off.
    quorum_gap: Duration,
    rebalance: Option<(Duration, i64)>,
    /// This node's `controller.quorum.voters` addresses (empty in a dynamic quorum).
    voters: BTreeMap<u64, String>,
    dynamic: bool,
    /// The initial voters' directory ids, registered by the first active controller of a
    /// dynamic quorum.
    directories: BTreeMap<u64, Uuid>,
    /// One voter change at a time.
    voter_change: tokio::sync::Mutex<()>,
    bootstrap_features: Vec<(String, i16)>,
    /// This active controller removed itself from the voters and resigned: it writes nothing
    /// more and waits (sending no heartbeats) for the voters to elect another.
    resigned: Arc<AtomicBool>,
    transport: Arc<dyn Transport>,
    /// The voters' replication, while this node leads (see [`VoterProgress`]).
    progress: Progress,
}

type Reply = Result<(i64, ReplyBody), ControllerResponse>;

impl QuorumController {
    pub async fn start(config: QuorumConfig) -> Result<Arc<Self>, String> {
        let shared = Shared::new();
        let isolated = Arc::new(AtomicBool::new(false));
        let log = LogStore::open(&config.dir, config.segment_bytes)?;
        let sm = StateMachine::open(&config.dir, Arc::clone(&shared))?;
        let election = config.election_timeout_ms.max(50);
        let static_voters = if config.dynamic {
            BTreeMap::new()
        } else {
            config.voters.clone()
        };
        let raft_config = openraft::Config {
            cluster_name: "sluice".into(),
            heartbeat_interval: (election / 5).max(10),
            election_timeout_min: election,
            election_timeout_max: election * 2,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(config.snapshot_every.max(1)),
            max_in_snapshot_log_to_keep: 0,
            purge_batch_size: 1,
            ..openraft::Config::default()
        }
        .validate()
        .map_err(|e| format!("raft config: {e}"))?;
        let raft = Raft::new(
            config.node_id as u64,
            Arc::new(raft_config),
            NetworkFactory {
                isolated: Arc::clone(&isolated),
                voters: static_voters.clone(),
                transport: Arc::clone(&config.transport),
            },
            log.clone(),
            sm,
        )
        .await
        .map_err(|e| format!("raft: {e}"))?;
        if config.voters.len() > 1 || config.dynamic {
            tokio::spawn(election_backoff(
                raft.clone(),
                Duration::from_millis(election * 2),
            ));
        }
        let progress = Progress::default();
        tokio::spawn(track_progress(raft.clone(), Arc::clone(&progress)));
        // A controller of a dynamic quorum formatted without initial voters starts empty and
        // learns the log once the active controller adds it as an observer.
        if !config.voters.is_empty() && !raft.is_initialized().await.map_err(|e| e.to_string())? {
            let nodes: BTreeMap<u64, BasicNode> = config
                .voters
                .iter()
                .map(|(id, addr)| (*id, BasicNode { addr: addr.clone() }))
                .collect();
            // Every voter of a pristine quorum proposes the same configuration; those that
            // already learned it from another voter are refused, which is fine.
            if let Err(e) = raft.initialize(nodes).await {
                debug!(error = %e, "quorum already initialized");
            }
        }
        info!(
            node_id = config.node_id,
            voters = ?config.voters.keys().collect::<Vec<_>>(),
            "controller quorum started"
        );
        Ok(Arc::new(Self {
            progress,
            voters: static_voters,
            dynamic: config.dynamic,
            directories: config.directories.clone(),
            voter_change: tokio::sync::Mutex::new(()),
            bootstrap_features: config.bootstrap_features.clone(),
            resigned: Arc::new(AtomicBool::new(false)),
            transport: Arc::clone(&config.transport),
            node_id: config.node_id,
            raft,
            shared,
            log,
            planner: Controller::new(config.defaults),
            active: tokio::sync::Mutex::new(Active::default()),
            isolated,
            session_timeout: Duration::from_millis(config.session_timeout_ms.max(1)),
            quorum_gap: Duration::from_millis(election * 2),
            rebalance: config.auto_leader_rebalance.then(|| {
                (
                    Duration::from_millis(config.imbalance_check_ms.max(1)),
                    config.imbalance_pct,
                )
            }),
        }))
    }

    /// Applied metadata as it changes.
    pub fn images(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.shared.image.subscribe()
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.shared.current()
    }

    /// The Raft term in which this node is the active controller, if it is.
    pub fn leading_term(&self) -> Option<u64> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        (m.state == openraft::ServerState::Leader && !self.resigned.load(Ordering::Relaxed))
            .then_some(m.current_term)
    }

    /// The active controller: (id, controller address), when one is known.
    pub fn leader(&self) -> Option<(i32, String)> {
        let m = self.raft.metrics().borrow().clone();
        let id = m.current_leader?;
        // A leader that removed itself from the voters resigned, but holds its vote until
        // another voter is elected.
        if id == self.node_id as u64
            && (m.state != openraft::ServerState::Leader || self.resigned.load(Ordering::Relaxed))
        {
            return None;
        }
        // Where this node's config says the leader is (see `NetworkFactory::voters`).
        let addr = self.voters.get(&id).cloned().or_else(|| {
            m.membership_config
                .membership()
                .get_node(&id)
                .map(|n| n.addr.clone())
        });
        Some((id as i32, addr.unwrap_or_default()))
    }

    /// Cut this node off from the other voters (or reconnect it): a network partition for
    /// fault-injection tests. Raft RPCs in both directions fail while it is set.
    pub fn set_isolated(&self, isolated: bool) {
        self.isolated.store(isolated, Ordering::Relaxed);
    }

    pub fn is_leader(&self) -> bool {
        self.leader().is_some_and(|(id, _)| id == self.node_id)
    }

    /// (log start, log end, segments) of the metadata log.
    pub fn log_extent(&self) -> (i64, i64, usize) {
        self.log.extent()
    }

    /// Wait until this node is the active controller or knows who is.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Option<(i32, String)> {
        let mut m = self.raft.metrics();
        let _ = tokio::time::timeout(timeout, m.wait_for(|m| m.current_leader.is_some())).await;
        self.leader()
    }

    /// Resolves once this node's view of the active controller is no longer `leader`
    /// (a new one was elected, or the old one lost its quorum).
    pub async fn leader_changed(&self, leader: Option<i32>) {
        let mut m = self.raft.metrics();
        if m.wait_for(|m| m.current_leader.map(|id| id as i32) != leader)
            .await
            .is_err()
        {
            // Raft is shutting down: the leader no longer changes.
            std::future::pending::<()>().await;
        }
    }

    fn not_controller(&self) -> ControllerResponse {
        ControllerResponse::NotController(self.leader().filter(|(id, _)| *id != self.node_id))
    }

    /// Append `records` as one entry; the offset it committed at once applied here. Every
    /// partition change keeps its eligible leader replicas (KIP-966) up to date on the way.
    async fn write(&self, records: Vec<MetadataRecord>) -> Result<i64, ControllerResponse> {
        if records.is_empty() {
            return Ok(self.shared.current().offset);
        }
        let records = self
            .planner
            .settle_elr(&self.shared.current(), records, None);
        match self.raft.client_write(Command(records)).await {
            Ok(resp) => Ok(resp.log_id.index as i64),
            Err(e) => Err(write_error("metadata write", e)),
        }
    }

    /// Make sure this node leads and has applied everything committed before it plans; a
    /// new term starts with fresh broker sessions (every registered broker gets a full
    /// session timeout to reach the new controller).
    async fn lead(&self) -> Result<tokio::sync::MutexGuard<'_, Active>, ControllerResponse> {
        if !self.is_leader() {
            return Err(self.not_controller());
        }
        let mut active = self.active.lock().await;
        let term = self.raft.metrics().borrow().current_term;
        if active.term != term {
            if self.raft.ensure_linearizable().await.is_err() {
                return Err(self.not_controller());
            }
            self.bootstrap_features().await?;
            if self.dynamic {
                self.bootstrap_dynamic().await?;
            }
            active.term = term;
            active.sessions.clear();
            info!(node_id = self.node_id, term, "active controller");
        }
        Ok(active)
    }

    /// The first active controller of a new cluster finalizes the levels it was formatted
    /// with, or a new cluster's levels when it was not (Kafka's bootstrap metadata, see
    /// [`features::bootstrap_levels`]). They include `metadata.version`, which is never
    /// disabled, so a log once bootstrapped (or its snapshot) always holds a level. A log
    /// with brokers or topics but no level was started by an older Sluice that wrote none: it
    /// keeps the levels it has ([`features::DEFAULT_LEVELS`]) until upgraded.
    async fn bootstrap_features(&self) -> Result<(), ControllerResponse> {
        let image = self.shared.current();
        // A log that registered no broker and made no topic is new (what it holds is the
        // quorum's own entries at most).
        let new_log = image.brokers.is_empty() && image.topics.is_empty();
        if image.features_epoch >= 0 || (self.bootstrap_features.is_empty() && !new_log) {
            return Ok(());
        }
        let levels = match features::bootstrap_levels(&self.bootstrap_features) {
            Ok(levels) => levels,
            Err(e) => {
                // `storage format` checked them; a hand-edited file falls back to its own levels.
                warn!(error = %e, "bootstrap feature levels refused; finalizing them as given");
                self.bootstrap_features.clone()
            }
        };
        let records = levels
            .iter()
            .map(|(name, level)| MetadataRecord::FeatureLevel {
                name: name.clone(),
                level: *level,
            })
            .collect();
        self.write(records).await?;
        info!(features = ?levels, "bootstrap feature levels finalized");
        Ok(())
    }

    /// The first active controller of a dynamic quorum finalizes `kraft.version` 1 and
    /// registers the initial voters' directory ids it was formatted with.
    async fn bootstrap_dynamic(&self) -> Result<(), ControllerResponse> {
        let image = self.shared.current();
        let mut records = Vec::new();
        if !features::dynamic_quorum(&image) {
            records.push(MetadataRecord::FeatureLevel {
                name: features::KRAFT_VERSION.into(),
                level: 1,
            });
        }
        let membership = self.raft.metrics().borrow().membership_config.clone();
        for (id, dir) in &self.directories {
            let Some(node) = membership.membership().get_node(id) else {
                continue;
            };
            if image.controllers.contains_key(&(*id as i32)) {
                continue;
            }
            records.push(MetadataRecord::RegisterController {
                node_id: *id as i32,
                directory_id: *dir,
                endpoints: controller_endpoints(&node.addr),
            });
        }
        self.write(records).await.map(|_| ())
    }

    pub async fn handle(&self, req: ControllerRequest) -> ControllerResponse {
        let result = match req {
            // Voter changes wait for replication: they do not hold up the planner.
            ControllerRequest::ObserveQuorum(c) => self.observe(c).await,
            ControllerRequest::AddVoter(c) => self.add_voter(c).await,
            ControllerRequest::UpdateVoter(c) => self.update_voter(c).await,
            ControllerRequest::RemoveVoter {
                node_id,
                directory_id,
            } => self.remove_voter(node_id, directory_id).await,
            req => self.handle_inner(req).await,
        };
        match result {
            Ok((offset, body)) => ControllerResponse::Ok { offset, body },
            Err(resp) => resp,
        }
    }

    /// The active controller of a dynamic quorum, with the image it checks against.
    async fn lead_dynamic(&self, what: &str) -> Result<Arc<MetadataImage>, Reply> {
        drop(self.lead().await.map_err(Err)?);
        let image = self.shared.current();
        if !features::dynamic_quorum(&image) {
            return Err(Ok((
                image.offset,
                ReplyBody::Done(Err(ApiError::new(
                    ErrorCode::UnsupportedVersion,
                    format!("Cluster doesn't support {what} voter because the kraft.version feature is 0"),
                ))),
            )));
        }
        Ok(image)
    }

    /// Register `c` (directory id, endpoints) unless the image already has it so.
    async fn register_controller(
        &self,
        image: &MetadataImage,
        c: &ControllerSpec,
    ) -> Result<i64, ControllerResponse> {
        let known = image.controllers.get(&c.node_id);
        if known.is_some_and(|k| k.directory_id == c.directory_id && k.endpoints == c.endpoints) {
            return Ok(image.offset);
        }
        self.write(vec![MetadataRecord::RegisterController {
            node_id: c.node_id,
            directory_id: c.directory_id,
            endpoints: c.endpoints.clone(),
        }])
        .await
    }

    /// A controller that is not in the quorum yet follows the metadata log as a learner
    /// (Kafka's observer), so that it is caught up when an operator adds it as a voter.
    async fn observe(&self, c: ControllerSpec) -> Reply {
        let image = match self.lead_dynamic("observing").await {
            Ok(image) => image,
            Err(reply) => return reply,
        };
        let Some(addr) = controller_addr(&c.endpoints) else {
            return Ok((image.offset, ReplyBody::Done(Err(no_endpoint()))));
        };
        let known = {
            let m = self.raft.metrics().borrow().membership_config.clone();
            m.membership().get_node(&(c.node_id as u64)).is_some()
        };
        if !known {
            if let Err(e) = self
                .raft
                .add_learner(c.node_id as u64, BasicNode { addr }, false)
                .await
            {
                return Err(self.membership_error(e));
            }
            info!(
                controller = c.node_id,
                "controller observes the metadata quorum"
            );
        }
        let offset = self.register_controller(&image, &c).await?;
        Ok((offset, ReplyBody::Done(Ok(()))))
    }

    /// What adding or updating voter `c` starts with: this controller leads a dynamic quorum,
    /// `c` names a controller endpoint (its address), and no other voter change is under way
    /// (the guard holds off others until this one is done). Else the answer, as Kafka's.
    async fn begin_voter_change(
        &self,
        what: &str,
        c: &ControllerSpec,
    ) -> Result<(Arc<MetadataImage>, String, tokio::sync::MutexGuard<'_, ()>), Reply> {
        let image = self.lead_dynamic(what).await?;
        let done = |r| Err(Ok((image.offset, ReplyBody::Done(Err(r)))));
        let Some(addr) = controller_addr(&c.endpoints) else {
            return done(no_endpoint());
        };
        let Ok(change) = self.voter_change.try_lock() else {
            return done(ApiError::new(
                ErrorCode::RequestTimedOut,
                "Request timed out waiting for the in-progress voter change to complete",
            ));
        };
        Ok((image, addr, change))
    }

    /// AddRaftVoter: once the new controller has caught up as a learner, make it a voter.
    async fn add_voter(&self, c: ControllerSpec) -> Reply {
        let (image, addr, _change) = match self.begin_voter_change("adding", &c).await {
            Ok(begun) => begun,
            Err(reply) => return reply,
        };
        let done = |r| Ok((image.offset, ReplyBody::Done(r)));
        let id = c.node_id as u64;
        if self.membership().voter_ids().any(|v| v == id) {
            return done(Err(ApiError::new(
                ErrorCode::DuplicateVoter,
                format!(
                    "The voter id for ReplicaKey(id={}, directoryId={}) is already part of the set of voters",
                    c.node_id,
                    sluice_protocol::base64::encode(c.directory_id.as_bytes())
                ),
            )));
        }
        // Blocks until the leader sees the learner's log caught up with its own.
        let catch_up = self.raft.add_learner(id, BasicNode { addr }, true);
        match tokio::time::timeout(VOTER_CATCH_UP, catch_up).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(self.membership_error(e)),
            Err(_) => {
                return done(Err(ApiError::new(
                    ErrorCode::RequestTimedOut,
                    format!(
                        "Controller {} did not catch up with the metadata log within {} ms",
                        c.node_id,
                        VOTER_CATCH_UP.as_millis()
                    ),
                )))
            }
        }
        self.register_controller(&image, &c).await?;
        let change = openraft::ChangeMembers::AddVoterIds([id].into());
        match self.raft.change_membership(change, true).await {
            Ok(resp) => {
                info!(voter = c.node_id, "controller added as a voter");
                Ok((resp.log_id.index as i64, ReplyBody::Done(Ok(()))))
            }
            Err(e) => Err(self.membership_error(e)),
        }
    }

    /// UpdateRaftVoter: a voter that restarted with other controller endpoints (the same
    /// replica: its id and, once registered, its directory id) is reached there from now on,
    /// as Kafka's voters update their endpoints with the leader. openraft pushes the log to
    /// its members where the membership says, so until then the leader could not reach it
    /// (Kafka's voters fetch, so there it only matters for the others' view); an observer
    /// (a learner) that moved is updated the same way. The address comes from the controller
    /// itself, never from another replica, which is the split brain openraft's `SetNodes`
    /// warns of.
    async fn update_voter(&self, c: ControllerSpec) -> Reply {
        let (image, addr, _change) = match self.begin_voter_change("updating", &c).await {
            Ok(begun) => begun,
            Err(reply) => return reply,
        };
        let done = |r| Ok((image.offset, ReplyBody::Done(r)));
        let id = c.node_id as u64;
        let membership = self.membership();
        let other_dir = image
            .controllers
            .get(&c.node_id)
            .is_some_and(|k| k.directory_id != c.directory_id);
        if membership.get_node(&id).is_none() || other_dir {
            return done(Err(ApiError::new(
                ErrorCode::VoterNotFound,
                format!(
                    "Cannot update voter ReplicaKey(id={}, directoryId={}) as it is not part of the set of voters",
                    c.node_id,
                    sluice_protocol::base64::encode(c.directory_id.as_bytes())
                ),
            )));
        }
        let mut offset = image.offset;
        if membership.get_node(&id).is_some_and(|n| n.addr != addr) {
            let nodes = [(id, BasicNode { addr: addr.clone() })].into();
            match self
                .raft
                .change_membership(openraft::ChangeMembers::SetNodes(nodes), false)
                .await
            {
                Ok(resp) => {
                    offset = resp.log_id.index as i64;
                    info!(
                        voter = c.node_id,
                        addr, "voter is reached at its new address"
                    );
                }
                Err(e) => return Err(self.membership_error(e)),
            }
        }
        let registered = self.register_controller(&image, &c).await?;
        Ok((offset.max(registered), ReplyBody::Done(Ok(()))))
    }

    /// Whether the quorum knows this controller by other endpoints than `me` has now (it
    /// restarted with another controller listener): then it asks for an UpdateRaftVoter.
    pub fn moved(&self, me: &ControllerSpec) -> bool {
        let Some(addr) = controller_addr(&me.endpoints) else {
            return false;
        };
        let membership = self.membership();
        let Some(node) = membership.get_node(&(me.node_id as u64)) else {
            return false;
        };
        let registered = self.shared.current().controllers.get(&me.node_id).cloned();
        node.addr != addr || registered.is_some_and(|k| k.endpoints != me.endpoints)
    }

    /// RemoveRaftVoter: the voter stays a learner (an observer), as in Kafka; an active
    /// controller that removes itself steps down once the change is committed.
    async fn remove_voter(&self, node_id: i32, directory_id: Uuid) -> Reply {
        let image = match self.lead_dynamic("removing").await {
            Ok(image) => image,
            Err(reply) => return reply,
        };
        let done = |r| Ok((image.offset, ReplyBody::Done(r)));
        let Ok(_change) = self.voter_change.try_lock() else {
            return done(Err(ApiError::new(
                ErrorCode::RequestTimedOut,
                "Request timed out waiting for the in-progress voter change to complete",
            )));
        };
        let id = node_id as u64;
        let voters: Vec<u64> = self.membership().voter_ids().collect();
        // A voter registered with another directory is another replica (Kafka keys voters
        // by id and directory id); one never registered (a static voter) matches any.
        let other_dir = image
            .controllers
            .get(&node_id)
            .is_some_and(|k| k.directory_id != directory_id);
        if !voters.contains(&id) || other_dir {
            return done(Err(ApiError::new(
                ErrorCode::VoterNotFound,
                format!(
                    "Cannot remove voter ReplicaKey(id={node_id}, directoryId={}) as it is not part of the set of voters",
                    sluice_protocol::base64::encode(directory_id.as_bytes())
                ),
            )));
        }
        if voters.len() == 1 {
            return done(Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!("Cannot remove voter {node_id}: it is the only voter"),
            )));
        }
        let change = openraft::ChangeMembers::RemoveVoters([id].into());
        match self.raft.change_membership(change, true).await {
            Ok(resp) => {
                info!(voter = node_id, "controller removed from the voters");
                if node_id == self.node_id {
                    self.resign();
                }
                Ok((resp.log_id.index as i64, ReplyBody::Done(Ok(()))))
            }
            Err(e) => Err(self.membership_error(e)),
        }
    }

    /// Step down after removing this controller from the voters. openraft lets a learner
    /// go on leading (its writes commit with the voters' majority); Kafka's active
    /// controller resigns instead, and so does this one: it stops writing and heartbeating,
    /// so that the voters time out and elect one of them, whose first append makes this
    /// node a follower again.
    fn resign(&self) {
        self.resigned.store(true, Ordering::Relaxed);
        self.raft.runtime_config().heartbeat(false);
        let (raft, resigned, me) = (self.raft.clone(), Arc::clone(&self.resigned), self.node_id);
        tokio::spawn(async move {
            let mut m = raft.metrics();
            let _ = m
                .wait_for(|m| {
                    m.state != openraft::ServerState::Leader
                        || m.current_leader.is_some_and(|l| l != me as u64)
                })
                .await;
            raft.runtime_config().heartbeat(true);
            resigned.store(false, Ordering::Relaxed);
            info!(node_id = me, "resigned controller follows the new one");
        });
    }

    /// Whether this controller is in the quorum's membership (a voter or an observer).
    pub fn in_quorum(&self) -> bool {
        self.membership().get_node(&(self.node_id as u64)).is_some()
    }

    /// Whether this controller votes.
    pub fn is_voter(&self) -> bool {
        self.membership()
            .voter_ids()
            .any(|v| v == self.node_id as u64)
    }

    /// Resolves once this controller is in the quorum's membership.
    pub async fn joined(&self) {
        let mut m = self.raft.metrics();
        let me = self.node_id as u64;
        if m.wait_for(|m| m.membership_config.membership().get_node(&me).is_some())
            .await
            .is_err()
        {
            std::future::pending::<()>().await;
        }
    }

    /// The effective Raft membership (voters and learners).
    fn membership(&self) -> openraft::Membership<u64, BasicNode> {
        let m = self.raft.metrics().borrow().membership_config.clone();
        m.membership().clone()
    }

    fn membership_error(
        &self,
        e: RaftError<u64, ClientWriteError<u64, BasicNode>>,
    ) -> ControllerResponse {
        write_error("voter change", e)
    }

    async fn handle_inner(&self, req: ControllerRequest) -> Reply {
        let mut active = self.lead().await?;
        let image = self.shared.current();
        let p = &self.planner;
        match req {
            ControllerRequest::CreateTopics {
                specs,
                validate_only,
            } => {
                let (out, records) = p.create_topics(&image, &specs, validate_only);
                Ok((self.write(records).await?, ReplyBody::Created(out)))
            }
            ControllerRequest::DeleteTopics(targets) => {
                let (out, records) = p.delete_topics(&image, &targets);
                Ok((self.write(records).await?, ReplyBody::Deleted(out)))
            }
            ControllerRequest::CreatePartitions {
                topic,
                count,
                assignments,
                validate_only,
            } => match p.create_partitions(
                &image,
                &topic,
                count,
                assignments.as_deref(),
                validate_only,
            ) {
                Ok(records) => Ok((self.write(records).await?, ReplyBody::Done(Ok(())))),
                Err(e) => Ok((image.offset, ReplyBody::Done(Err(e)))),
            },
            ControllerRequest::AlterTopicConfigs {
                topic,
                changes,
                validate_only,
            } => match p.alter_topic_configs(&image, &topic, &changes, validate_only) {
                Ok(records) => Ok((self.write(records).await?, ReplyBody::Done(Ok(())))),
                Err(e) => Ok((image.offset, ReplyBody::Done(Err(e)))),
            },
            ControllerRequest::AlterBrokerConfigs {
                broker,
                changes,
                validate_only,
            } => match p.alter_broker_configs(&broker, &changes, validate_only) {
                Ok(records) => Ok((self.write(records).await?, ReplyBody::Done(Ok(())))),
                Err(e) => Ok((image.offset, ReplyBody::Done(Err(e)))),
            },
            ControllerRequest::AlterLinkConfigs {
                link,
                changes,
                validate_only,
            } => match p.alter_link_configs(&image, &link, &changes, validate_only) {
                Ok(records) => Ok((self.write(records).await?, ReplyBody::Done(Ok(())))),
                Err(e) => Ok((image.offset, ReplyBody::Done(Err(e)))),
            },
            ControllerRequest::AlterResourceConfigs {
                resource_type,
                name,
                changes,
                validate_only,
            } => match p.alter_resource_configs(
                &image,
                resource_type,
                &name,
                &changes,
                validate_only,
            ) {
                Ok(records) => Ok((self.write(records).await?, ReplyBody::Done(Ok(())))),
                Err(e) => Ok((image.offset, ReplyBody::Done(Err(e)))),
            },
            ControllerRequest::AllocateProducerIds { node_id, count } => {
                let (first, records) = p.allocate_producer_ids(&image, node_id, count);
                Ok((self.write(records).await?, ReplyBody::ProducerIds(first)))
            }
            ControllerRequest::Heartbeat(h) => self.heartbeat(&mut active, &image, h).await,
            ControllerRequest::ElectLeaders {
                preferred,
                partitions,
            } => {
                let (out, records) = p.elect_leaders(&image, preferred, partitions.as_deref());
                Ok((self.write(records).await?, ReplyBody::PerPartition(out)))
            }
            ControllerRequest::AlterReassignments {
                targets,
                allow_rf_change,
            } => {
                let (out, records) = p.alter_reassignments(&image, &targets, allow_rf_change);
                Ok((self.write(records).await?, ReplyBody::PerPartition(out)))
            }
            ControllerRequest::AlterClientQuotas {
                changes,
                validate_only,
            } => {
                let (out, records) = p.alter_client_quotas(&changes, validate_only);
                Ok((self.write(records).await?, ReplyBody::PerItem(out)))
            }
            ControllerRequest::CreateAcls(bindings) => {
                let (out, records) = p.create_acls(&image, &bindings, None);
                Ok((self.write(records).await?, ReplyBody::PerItem(out)))
            }
            ControllerRequest::UpdateFeatures {
                updates,
                validate_only,
            } => match p.update_features(&image, &updates, validate_only) {
                Ok(records) => Ok((self.write(records).await?, ReplyBody::Done(Ok(())))),
                Err(e) => Ok((image.offset, ReplyBody::Done(Err(e)))),
            },
            ControllerRequest::DescribeQuorum => {
                Ok((image.offset, ReplyBody::Quorum(self.quorum_info(&active))))
            }
            ControllerRequest::UnregisterBroker(node_id) => {
                match p.unregister_broker(&image, node_id) {
                    Ok(records) => {
                        let offset = self.write(records).await?;
                        active.sessions.remove(&node_id);
                        info!(broker = node_id, offset, "broker unregistered");
                        Ok((offset, ReplyBody::Done(Ok(()))))
                    }
                    Err(e) => Ok((image.offset, ReplyBody::Done(Err(e)))),
                }
            }
            ControllerRequest::CopyAcls { link, bindings } => {
                let (out, records) = p.create_acls(&image, &bindings, Some(&link));
                Ok((self.write(records).await?, ReplyBody::PerItem(out)))
            }
            ControllerRequest::DeleteAcls(filters) => {
                let (out, records) = p.delete_acls(&image, &filters);
                Ok((self.write(records).await?, ReplyBody::AclsDeleted(out)))
            }
            ControllerRequest::AlterScramCredentials(changes) => {
                let (out, records) = p.alter_scram_credentials(&image, &changes);
                Ok((self.write(records).await?, ReplyBody::PerUser(out)))
            }
            ControllerRequest::DelegationToken(request) => {
                let (out, records) = p.delegation_token(&image, sluice_rt::wall_ms(), &request);
                let offset = if records.is_empty() {
                    image.offset
                } else {
                    self.write(records).await?
                };
                Ok((offset, ReplyBody::Token(Box::new(out))))
            }
            ControllerRequest::RemoteLogSegment { node_id, segment } => {
                match crate::remote_log::remote_log_segment(&image, node_id, &segment) {
                    Ok(records) => Ok((self.write(records).await?, ReplyBody::Done(Ok(())))),
                    Err(e) => Ok((image.offset, ReplyBody::Done(Err(e)))),
                }
            }
            ControllerRequest::DisklessCommit {
                node_id,
                object_id,
                batches,
            } => {
                let (out, records) = crate::diskless::commit(&image, node_id, object_id, &batches);
                Ok((self.write(records).await?, ReplyBody::Sequenced(out)))
            }
            ControllerRequest::MetadataBarrier { .. } => {
                // See the request: the offset a broker's image must reach to hold
                // everything committed before now, confirmed by a quorum so a deposed
                // controller never vouches for a stale view.
                match tokio::time::timeout(self.quorum_gap, self.raft.ensure_linearizable()).await {
                    Ok(Ok(read)) => Ok((
                        read.map_or(image.offset, |l| l.index as i64)
                            .max(image.offset),
                        ReplyBody::PerItem(Vec::new()),
                    )),
                    _ => Err(self.not_controller()),
                }
            }
            ControllerRequest::DisklessTrim { trims, .. } => {
                let (out, records) = crate::diskless::trim(&image, &trims);
                Ok((self.write(records).await?, ReplyBody::PerItem(out)))
            }
            ControllerRequest::DisklessCompact { segments, .. } => {
                let (out, records) = crate::diskless::compact(&image, &segments);
                Ok((self.write(records).await?, ReplyBody::PerItem(out)))
            }
            ControllerRequest::AlterPartition(c) => match p.alter_partition(&image, &c) {
                Ok(records) => Ok((self.write(records).await?, ReplyBody::Done(Ok(())))),
                Err(e) => Ok((image.offset, ReplyBody::Done(Err(e)))),
            },
            // Answered by `handle` without the planner.
            ControllerRequest::ObserveQuorum(_)
            | ControllerRequest::AddVoter(_)
            | ControllerRequest::UpdateVoter(_)
            | ControllerRequest::RemoveVoter { .. } => Err(ControllerResponse::Failed(
                "a voter change reached the planner".into(),
            )),
        }
    }

    async fn heartbeat(&self, active: &mut Active, image: &MetadataImage, h: Heartbeat) -> Reply {
        let now = Instant::now();
        let reply = |offset, fenced, should_shutdown| {
            Ok((
                offset,
                ReplyBody::Heartbeat {
                    fenced,
                    should_shutdown,
                },
            ))
        };
        let registered = image
            .brokers
            .get(&h.node_id)
            .filter(|b| b.incarnation_id == h.incarnation_id);
        let Some(b) = registered else {
            if h.want_shutdown {
                return reply(image.offset, true, true);
            }
            let records = self.planner.register_broker(
                image,
                h.node_id,
                h.incarnation_id,
                h.endpoints,
                h.rack,
                h.unclean_shutdown,
            );
            let offset = self.write(records).await?;
            info!(
                broker = h.node_id,
                offset,
                unclean_shutdown = h.unclean_shutdown,
                "broker registered (fenced until caught up)"
            );
            active.sessions.insert(
                h.node_id,
                Session {
                    metadata_offset: h.metadata_offset,
                    heard_ms: sluice_rt::wall_ms(),
                    ..Session::new(h.incarnation_id, now, offset)
                },
            );
            return reply(offset, true, false);
        };
        let session = active
            .sessions
            .entry(h.node_id)
            .and_modify(|s| {
                if s.incarnation != h.incarnation_id {
                    s.caught_up_at = image.offset;
                    s.incarnation = h.incarnation_id;
                    s.shutting_down = false;
                }
            })
            .or_insert(Session::new(h.incarnation_id, now, image.offset));
        session.last_seen = now;
        session.metadata_offset = h.metadata_offset;
        session.heard_ms = sluice_rt::wall_ms();
        if h.metadata_offset >= image.offset {
            session.synced_ms = session.heard_ms;
        }
        if h.want_shutdown || session.shutting_down {
            session.shutting_down = true;
            let mut offset = image.offset;
            if !b.fenced {
                offset = self
                    .write(self.planner.fence_broker(image, h.node_id))
                    .await?;
                info!(
                    broker = h.node_id,
                    "controlled shutdown: leaderships moved, broker fenced"
                );
            }
            return reply(offset, true, true);
        }
        if !h.offline_replicas.is_empty() {
            let records = self
                .planner
                .take_replicas_offline(image, h.node_id, &h.offline_replicas);
            if !records.is_empty() {
                let offset = self.write(records).await?;
                warn!(
                    broker = h.node_id,
                    offline = h.offline_replicas.len(),
                    offset,
                    "replicas on a failed log directory: leaderships moved, ISRs shrunk"
                );
            }
        }
        if b.fenced {
            if h.metadata_offset >= session.caught_up_at {
                let offset = self
                    .write(self.planner.unfence_broker(image, h.node_id))
                    .await?;
                info!(broker = h.node_id, offset, "broker caught up: unfenced");
                return reply(offset, false, false);
            }
            return reply(image.offset, true, false);
        }
        reply(image.offset, false, false)
    }

    /// DescribeQuorum, on the active controller: the voters' replication of the metadata
    /// log and the brokers that follow it without voting (their heartbeats say how far).
    fn quorum_info(&self, active: &Active) -> QuorumInfo {
        let m = self.raft.metrics().borrow().clone();
        let image = self.shared.current();
        let now = sluice_rt::wall_ms();
        let end = |index: Option<u64>| index.map_or(0, |i| i as i64 + 1);
        let progress = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        let membership = m.membership_config.membership();
        let directory = |id: i32| {
            image
                .controllers
                .get(&id)
                .map_or(Uuid::nil(), |c| c.directory_id)
        };
        let replica = |id: u64| {
            let p = progress.get(&id);
            QuorumReplica {
                id: id as i32,
                directory_id: directory(id as i32),
                log_end_offset: p.and_then(|p| p.matched).map_or(-1, |i| i as i64 + 1),
                last_fetch_ms: p.map_or(-1, |p| p.fetch_ms),
                last_caught_up_ms: p.map_or(-1, |p| p.caught_up_ms),
            }
        };
        let voter_ids: Vec<u64> = membership.voter_ids().collect();
        let voters = voter_ids
            .iter()
            .map(|id| {
                if *id == self.node_id as u64 {
                    return QuorumReplica {
                        id: *id as i32,
                        directory_id: directory(*id as i32),
                        log_end_offset: end(m.last_log_index),
                        last_fetch_ms: now,
                        last_caught_up_ms: now,
                    };
                }
                replica(*id)
            })
            .collect();
        // Controllers that follow the log without voting, then brokers (by their heartbeats).
        let learners: Vec<u64> = membership.learner_ids().collect();
        let mut observers: Vec<QuorumReplica> = learners.iter().map(|id| replica(*id)).collect();
        observers.extend(
            active
                .sessions
                .iter()
                .filter(|(id, _)| {
                    !voter_ids.contains(&(**id as u64)) && !learners.contains(&(**id as u64))
                })
                .map(|(id, s)| QuorumReplica {
                    id: *id,
                    directory_id: Uuid::nil(),
                    log_end_offset: s.metadata_offset + 1,
                    last_fetch_ms: s.heard_ms,
                    last_caught_up_ms: s.synced_ms,
                }),
        );
        observers.sort_by_key(|r| r.id);
        let voter_endpoints = voter_ids
            .iter()
            .filter_map(|id| {
                let addr = self
                    .voters
                    .get(id)
                    .cloned()
                    .or_else(|| membership.get_node(id).map(|n| n.addr.clone()))?;
                let (host, port) = addr.rsplit_once(':')?;
                Some((*id as i32, host.to_string(), port.parse().ok()?))
            })
            .collect();
        QuorumInfo {
            leader_id: self.node_id,
            leader_epoch: m.current_term as i32,
            high_watermark: end(m.last_applied.map(|l| l.index)),
            voters,
            observers,
            voter_endpoints,
        }
    }

    /// On the active controller: fence every broker whose session expired.
    async fn check_sessions(&self) {
        let Ok(mut active) = self.lead().await else {
            return;
        };
        let now = Instant::now();
        // Cut off from its quorum, this controller heard no heartbeats, and none could
        // reach it: that says nothing of the brokers. Before it fences anyone it makes sure
        // a quorum still answers it; while none does it fences nobody, and once one does
        // again it starts every session afresh, as a newly elected controller does, rather
        // than fence them all for its own isolation (seen in the simulator, seed 405: a
        // controller isolated for 4 s fenced every broker at the heal, which left a replica
        // back from a power loss the last of an ISR).
        let image = self.shared.current();
        let expired = image.live_brokers().any(|b| {
            active
                .sessions
                .get(&b.node_id)
                .is_some_and(|s| now.duration_since(s.last_seen) > self.session_timeout)
        });
        if expired {
            let confirmed =
                tokio::time::timeout(self.quorum_gap, self.raft.ensure_linearizable()).await;
            if !matches!(confirmed, Ok(Ok(_))) {
                active.cut_off = true;
                return;
            }
        }
        if std::mem::take(&mut active.cut_off) {
            info!(
                node_id = self.node_id,
                "in touch with the quorum again: broker sessions start afresh"
            );
            let now = Instant::now();
            for s in active.sessions.values_mut() {
                s.last_seen = now;
            }
            return;
        }
        let image = self.shared.current();
        for b in image.live_brokers() {
            let s = active.sessions.entry(b.node_id).or_insert(Session::new(
                b.incarnation_id,
                now,
                image.offset,
            ));
            if now.duration_since(s.last_seen) > self.session_timeout {
                warn!(
                    broker = b.node_id,
                    timeout_ms = self.session_timeout.as_millis() as u64,
                    "broker session expired: fencing it"
                );
                let latest = self.shared.current();
                let started = Instant::now();
                let written = self
                    .write(self.planner.fence_broker(&latest, b.node_id))
                    .await;
                if let Err(e) = written {
                    warn!(broker = b.node_id, error = ?e, "could not fence broker");
                }
                // One broker per round: heartbeats wait for this state while the write
                // does, so the others' sessions are looked at again once they are in. A
                // write that waited long for its quorum means this controller was cut off.
                if started.elapsed() > self.quorum_gap {
                    active.cut_off = true;
                }
                return;
            }
        }
    }

    /// On the active controller: move leadership back to preferred replicas for brokers
    /// whose share of misplaced leaderships is above the limit.
    async fn check_imbalance(&self, pct: i64) {
        let Ok(_active) = self.lead().await else {
            return;
        };
        let image = self.shared.current();
        let moves = self.planner.imbalanced(&image, pct);
        if moves.is_empty() {
            return;
        }
        let (_, records) = self.planner.elect_leaders(&image, true, Some(&moves));
        match self.write(records).await {
            Ok(_) => info!(
                partitions = moves.len(),
                "leadership moved back to preferred replicas"
            ),
            Err(e) => warn!(error = ?e, "preferred leader election failed"),
        }
    }

    /// Metadata after `offset` for a broker-only node; waits up to `wait` for news.
    pub async fn fetch(&self, offset: i64, wait: Duration) -> FetchResponse {
        let mut rx = self.shared.image.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let leader = self.leader().map_or(-1, |(id, _)| id);
            match self.shared.changes_since(offset) {
                Changes::Snapshot(image) => {
                    return FetchResponse {
                        leader,
                        snapshot: true,
                        entries: vec![(image.offset, image.to_records())],
                    }
                }
                Changes::Entries(entries) if !entries.is_empty() => {
                    return FetchResponse {
                        leader,
                        snapshot: false,
                        entries,
                    }
                }
                Changes::Entries(_) => {}
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                return FetchResponse {
                    leader,
                    snapshot: false,
                    entries: Vec::new(),
                };
            }
        }
    }

    /// Background duties until shutdown: the session checker and the leader rebalancer.
    pub fn spawn_liveness(self: &Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let me = Arc::clone(self);
        let period =
            (self.session_timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        let (rebalance_every, pct) = self
            .rebalance
            .unwrap_or((Duration::from_secs(24 * 3600), -1));
        let tokens = self.planner.token_settings();
        let (sweep_every, sweep) = (
            Duration::from_millis(tokens.expiry_check_interval_ms.max(1) as u64),
            tokens.key().is_some(),
        );
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut rebalance = tokio::time::interval(rebalance_every);
            rebalance.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            rebalance.reset();
            let mut token_sweep = tokio::time::interval(sweep_every);
            token_sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            token_sweep.reset();
            loop {
                tokio::select! {
                    _ = shutdown.changed() => return,
                    _ = tick.tick() => me.check_sessions().await,
                    _ = rebalance.tick(), if pct >= 0 => me.check_imbalance(pct).await,
                    _ = token_sweep.tick(), if sweep => me.remove_expired_tokens().await,
                }
            }
        });
    }

    /// The active controller removes expired delegation tokens (Kafka's
    /// `expireDelegationTokens` task).
    async fn remove_expired_tokens(&self) {
        let Ok(_active) = self.lead().await else {
            return;
        };
        let image = self.shared.current();
        let records = self.planner.expired_tokens(&image, sluice_rt::wall_ms());
        if records.is_empty() {
            return;
        }
        let n = records.len();
        match self.write(records).await {
            Ok(_) => info!(tokens = n, "expired delegation tokens removed"),
            Err(e) => warn!(error = ?e, "removing expired delegation tokens failed"),
        }
    }

    /// Serve the controller listener until shutdown.
    pub async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        let me = Arc::clone(&self);
                        let stop = shutdown.clone();
                        let secured = self.transport.accept(stream);
                        tokio::spawn(async move {
                            match tokio::time::timeout(HANDSHAKE_TIMEOUT, secured).await {
                                Ok(Ok(stream)) => me.connection(stream, stop).await,
                                Ok(Err(e)) => info!(%peer, error = %e, "controller listener: handshake failed"),
                                Err(_) => info!(%peer, "controller listener: handshake timed out"),
                            }
                        });
                    }
                    Err(e) => {
                        warn!(error = %e, "controller listener accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
            }
        }
    }

    async fn connection(&self, mut stream: BoxStream, mut shutdown: watch::Receiver<bool>) {
        loop {
            let frame = tokio::select! {
                _ = shutdown.changed() => return,
                f = read_frame(&mut stream) => f,
            };
            let (kind, payload) = match frame {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => {
                    debug!(error = %e, "controller connection closed");
                    return;
                }
            };
            let (status, body) = match self.dispatch(kind, &payload).await {
                Ok(body) => (0, body),
                Err(message) => (1, message.into_bytes()),
            };
            if write_frame(&mut stream, status, &body).await.is_err() {
                return;
            }
        }
    }

    async fn dispatch(&self, kind: u8, payload: &[u8]) -> Result<Vec<u8>, String> {
        if self.isolated.load(Ordering::Relaxed)
            && matches!(kind, KIND_APPEND | KIND_VOTE | KIND_SNAPSHOT)
        {
            return Err("isolated".into());
        }
        match kind {
            KIND_APPEND => {
                let req = decode_append(payload).map_err(|e| e.to_string())?;
                let resp = self
                    .raft
                    .append_entries(req)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(encode_append_response(&resp))
            }
            KIND_VOTE => {
                let req = decode_vote(payload).map_err(|e| e.to_string())?;
                let resp = self.raft.vote(req).await.map_err(|e| e.to_string())?;
                Ok(encode_vote_response(&resp))
            }
            KIND_SNAPSHOT => {
                let req = decode_snapshot(payload).map_err(|e| e.to_string())?;
                let resp = self
                    .raft
                    .install_snapshot(req)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(encode_snapshot_response(&resp))
            }
            KIND_CONTROLLER => {
                let req = ControllerRequest::decode(payload).map_err(|e| e.to_string())?;
                Ok(self.handle(req).await.encode())
            }
            KIND_FETCH => {
                let (offset, wait_ms) = decode_fetch(payload).map_err(|e| e.to_string())?;
                let wait = Duration::from_millis(u64::from(wait_ms.min(30_000)));
                Ok(self.fetch(offset, wait).await.encode())
            }
            other => Err(format!("unknown internal request kind {other}")),
        }
    }

    /// Resolves, with the error, once the Raft core has stopped on a fatal error (a write or
    /// fsync of the metadata log failed): the node must stop, as Kafka's process exits,
    /// rather than go on with metadata it can no longer keep (it would lead partitions on a
    /// view of the cluster that never changes again). Never resolves otherwise.
    pub async fn fatal(&self) -> String {
        let mut m = self.raft.metrics();
        loop {
            if let Err(e) = &m.borrow_and_update().running_state {
                return e.to_string();
            }
            if m.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            warn!(error = %e, "raft shutdown");
        }
        self.log.close();
    }
}
