//! The broker's side of the controller: [`ControllerClient`] sends requests to the active
//! controller (in process when this node is it, else over the controller listener),
//! following NOT_CONTROLLER hints; the heartbeat loop keeps this broker registered; the
//! metadata fetcher feeds broker-only nodes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_broker::controller_api::{Call, ControllerApi, ControllerFailure};
use sluice_broker::metadata_cache::MetadataCache;
use sluice_controller::raft::network::{Conn, KIND_CONTROLLER, KIND_FETCH};
use sluice_controller::rpc::{
    encode_fetch, ControllerRequest, ControllerResponse, FetchResponse, Heartbeat, ReplyBody,
};
use sluice_controller::transport::Transport;
use sluice_controller::QuorumController;
use sluice_metadata::acl::{AclBinding, AclFilter};
use sluice_metadata::controller_types::{
    ApiError, ControllerSpec, CreateTopicSpec, CreatedTopic, DeleteOutcome, ElectionOutcome,
    IsrChange, PartitionOutcome, QuotaChange, ReassignTarget, ScramChange, TokenReply,
    TokenRequest, TopicRef, UserOutcome,
};
use sluice_metadata::MetadataImage;
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// How long a forwarded request keeps looking for an active controller.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Idle controller connections kept for reuse.
const IDLE_CONNS: usize = 4;

pub struct ControllerClient {
    node_id: i32,
    local: Option<Arc<QuorumController>>,
    /// Controller addresses to try (voters or bootstrap servers).
    bootstrap: Vec<String>,
    /// Known voter addresses by id.
    voters: HashMap<i32, String>,
    leader: Mutex<Option<(i32, String)>>,
    next: AtomicUsize,
    /// Idle connections by address. Calls do not share a connection, so a slow or
    /// unanswered one (a paused controller) never holds up the others.
    idle: Mutex<Vec<(String, Conn)>>,
    cache: Arc<MetadataCache>,
    /// Plain TCP or TLS, as the controller listener is.
    transport: Arc<dyn Transport>,
}

impl ControllerClient {
    pub fn new(
        node_id: i32,
        local: Option<Arc<QuorumController>>,
        bootstrap: Vec<String>,
        voters: HashMap<i32, String>,
        cache: Arc<MetadataCache>,
        transport: Arc<dyn Transport>,
    ) -> Arc<Self> {
        Arc::new(Self {
            node_id,
            local,
            bootstrap,
            voters,
            leader: Mutex::new(None),
            next: AtomicUsize::new(0),
            idle: Mutex::new(Vec::new()),
            cache,
            transport,
        })
    }

    fn set_leader(&self, leader: Option<(i32, String)>) {
        // Our own config's address for a voter wins over the one in a hint (which is where
        // the hinting node reaches it).
        let leader = leader.map(|(id, addr)| (id, self.voters.get(&id).cloned().unwrap_or(addr)));
        *self.leader.lock().unwrap_or_else(|e| e.into_inner()) = leader;
    }

    fn leader(&self) -> Option<(i32, String)> {
        if let Some(l) = self.local.as_ref().and_then(|q| q.leader()) {
            return Some(l);
        }
        self.leader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Where to send the next remote call: the controller's id (when known) and address.
    fn target(&self) -> Option<(Option<i32>, String)> {
        match self.leader() {
            Some((id, _)) if id == self.node_id && self.local.is_some() => None,
            Some((id, addr)) if !addr.is_empty() => Some((Some(id), addr)),
            _ if self.bootstrap.is_empty() => None,
            _ => {
                let i = self.next.fetch_add(1, Ordering::Relaxed);
                Some((None, self.bootstrap[i % self.bootstrap.len()].clone()))
            }
        }
    }

    /// One call on a connection of its own (an idle one reused when there is one). On a
    /// node that is a voter itself, a call to a controller that this node's Raft sees
    /// replaced is abandoned at once instead of waiting out its timeout.
    async fn call(
        &self,
        (leader, addr): (Option<i32>, &str),
        kind: u8,
        payload: &[u8],
    ) -> Result<Vec<u8>, String> {
        let mut conn = {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            match idle.iter().position(|(a, _)| a == addr) {
                Some(i) => idle.swap_remove(i).1,
                None => Conn::new(Arc::clone(&self.transport)),
            }
        };
        let replaced = async {
            match &self.local {
                // Only when the target is this node's own view of the controller.
                Some(q) if leader.is_some() && q.leader().map(|(id, _)| id) == leader => {
                    q.leader_changed(leader).await
                }
                _ => std::future::pending().await,
            }
        };
        let result = tokio::select! {
            r = conn.call(addr, kind, payload, CALL_TIMEOUT) => r.map_err(|e| e.to_string()),
            () = replaced => return Err(format!("{addr} is no longer the active controller")),
        };
        if result.is_ok() {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            if idle.len() < IDLE_CONNS {
                idle.push((addr.to_string(), conn));
            }
        }
        result
    }

    /// Send `req` to the active controller; (committed offset, reply).
    pub async fn request(&self, req: ControllerRequest) -> Result<(i64, ReplyBody), String> {
        let deadline = tokio::time::Instant::now() + REQUEST_TIMEOUT;
        let mut backoff = Duration::from_millis(20);
        let mut last = String::from("no active controller");
        loop {
            // A voter learns who leads from its own Raft: while an election runs, wait for
            // it rather than guess among the voters (a guess can be the paused or dead node
            // that was replaced, and waiting out its timeout costs this broker its session).
            if let Some(q) = self.local.as_ref().filter(|q| q.leader().is_none()) {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let _ = q.wait_for_leader(left).await;
            }
            let answer = match (&self.local, self.target()) {
                (Some(q), None) => Some(q.handle(req.clone()).await),
                (_, Some((id, addr))) => {
                    match self.call((id, &addr), KIND_CONTROLLER, &req.encode()).await {
                        Ok(body) => match ControllerResponse::decode(&body) {
                            Ok(r) => Some(r),
                            Err(e) => return Err(format!("controller {addr}: {e}")),
                        },
                        Err(e) => {
                            debug!(controller = %addr, error = %e, "controller call failed");
                            last = format!("controller {addr}: {e}");
                            self.set_leader(None);
                            None
                        }
                    }
                }
                (None, None) => None,
            };
            match answer {
                Some(ControllerResponse::Ok { offset, body }) => return Ok((offset, body)),
                Some(ControllerResponse::Failed(m)) => return Err(m),
                Some(ControllerResponse::NotController(l)) => {
                    last = "the controller moved".into();
                    self.set_leader(l);
                }
                None => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("no active controller answered: {last}"));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }

    /// Forward a request, then wait until this broker's metadata includes the change, so
    /// the caller sees its own write; `pick` takes the answer apart (or hands it back when
    /// it is not the expected kind).
    fn ask<T: Send + 'static>(
        &self,
        req: ControllerRequest,
        pick: fn(ReplyBody) -> Result<T, ReplyBody>,
    ) -> Call<'_, T> {
        Box::pin(async move {
            let (offset, body) = self.request(req).await?;
            if !self
                .cache
                .wait_for_offset(offset, Duration::from_secs(10))
                .await
            {
                warn!(offset, "metadata did not reach this broker in time");
            }
            pick(body).map_err(unexpected)
        })
    }

    /// One metadata fetch for a broker-only node.
    async fn fetch(&self, offset: i64, wait_ms: u32) -> Result<FetchResponse, String> {
        let (id, addr) = self.target().ok_or("no controller address")?;
        let body = match self
            .call((id, &addr), KIND_FETCH, &encode_fetch(offset, wait_ms))
            .await
        {
            Ok(b) => b,
            Err(e) => {
                self.set_leader(None);
                return Err(e);
            }
        };
        let resp = FetchResponse::decode(&body).map_err(|e| e.to_string())?;
        if resp.leader >= 0 {
            let addr = self.voters.get(&resp.leader).cloned().unwrap_or(addr);
            self.set_leader(Some((resp.leader, addr)));
        }
        Ok(resp)
    }
}

fn unexpected(body: ReplyBody) -> ControllerFailure {
    format!("unexpected controller reply {body:?}")
}

impl ControllerApi for ControllerClient {
    fn active_controller(&self) -> Option<i32> {
        self.leader().map(|(id, _)| id)
    }

    fn create_topics(
        &self,
        specs: &[CreateTopicSpec],
        validate_only: bool,
    ) -> Call<'_, Vec<Result<CreatedTopic, ApiError>>> {
        self.ask(
            ControllerRequest::CreateTopics {
                specs: specs.to_vec(),
                validate_only,
            },
            |b| match b {
                ReplyBody::Created(v) => Ok(v),
                other => Err(other),
            },
        )
    }

    fn delete_topics(&self, targets: &[TopicRef]) -> Call<'_, Vec<DeleteOutcome>> {
        self.ask(
            ControllerRequest::DeleteTopics(targets.to_vec()),
            |b| match b {
                ReplyBody::Deleted(v) => Ok(v),
                other => Err(other),
            },
        )
    }

    fn create_partitions(
        &self,
        topic: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Call<'_, Result<(), ApiError>> {
        self.ask(
            ControllerRequest::CreatePartitions {
                topic: topic.into(),
                count,
                assignments: assignments.map(<[Vec<i32>]>::to_vec),
                validate_only,
            },
            |b| match b {
                ReplyBody::Done(r) => Ok(r),
                other => Err(other),
            },
        )
    }

    fn allocate_producer_ids(&self, count: i64) -> Call<'_, i64> {
        self.ask(
            ControllerRequest::AllocateProducerIds {
                node_id: self.node_id,
                count,
            },
            |b| match b {
                ReplyBody::ProducerIds(first) => Ok(first),
                other => Err(other),
            },
        )
    }

    fn update_features(
        &self,
        updates: &[(String, i16, i8)],
        validate_only: bool,
    ) -> Call<'_, Result<(), ApiError>> {
        self.ask(
            ControllerRequest::UpdateFeatures {
                updates: updates.to_vec(),
                validate_only,
            },
            |b| match b {
                ReplyBody::Done(r) => Ok(r),
                other => Err(other),
            },
        )
    }

    fn remote_log_segment(
        &self,
        segment: &sluice_metadata::remote::RemoteSegment,
    ) -> Call<'_, Result<(), ApiError>> {
        self.ask(
            ControllerRequest::RemoteLogSegment {
                node_id: self.node_id,
                segment: segment.clone(),
            },
            |b| match b {
                ReplyBody::Done(r) => Ok(r),
                other => Err(other),
            },
        )
    }

    fn diskless_commit(
        &self,
        object_id: sluice_metadata::Uuid,
        batches: &[sluice_metadata::diskless::WalBatch],
    ) -> Call<'_, Vec<Result<sluice_metadata::diskless::Sequenced, ApiError>>> {
        self.ask(
            ControllerRequest::DisklessCommit {
                node_id: self.node_id,
                object_id,
                batches: batches.to_vec(),
            },
            |b| match b {
                ReplyBody::Sequenced(v) => Ok(v),
                other => Err(other),
            },
        )
    }

    fn diskless_compact(
        &self,
        segments: &[(
            sluice_metadata::Uuid,
            i32,
            sluice_metadata::diskless::SegmentCoord,
        )],
    ) -> Call<'_, Vec<Result<(), ApiError>>> {
        self.ask(
            ControllerRequest::DisklessCompact {
                node_id: self.node_id,
                segments: segments.to_vec(),
            },
            |b| match b {
                ReplyBody::PerItem(v) => Ok(v),
                other => Err(other),
            },
        )
    }

    fn diskless_barrier(&self) -> Call<'_, i64> {
        Box::pin(async move {
            let req = ControllerRequest::MetadataBarrier {
                node_id: self.node_id,
            };
            match self.request(req).await? {
                (offset, ReplyBody::PerItem(_)) => Ok(offset),
                (_, other) => Err(unexpected(other)),
            }
        })
    }

    fn diskless_trim(
        &self,
        trims: &[(sluice_metadata::Uuid, i32, i64)],
    ) -> Call<'_, Vec<Result<(), ApiError>>> {
        self.ask(
            ControllerRequest::DisklessTrim {
                node_id: self.node_id,
                trims: trims.to_vec(),
            },
            |b| match b {
                ReplyBody::PerItem(v) => Ok(v),
                other => Err(other),
            },
        )
    }

    fn unregister_broker(&self, node_id: i32) -> Call<'_, Result<(), ApiError>> {
        self.ask(ControllerRequest::UnregisterBroker(node_id), |b| match b {
            ReplyBody::Done(r) => Ok(r),
            other => Err(other),
        })
    }

    fn add_voter(&self, controller: &ControllerSpec) -> Call<'_, Result<(), ApiError>> {
        self.ask(
            ControllerRequest::AddVoter(controller.clone()),
            |b| match b {
                ReplyBody::Done(r) => Ok(r),
                other => Err(other),
            },
        )
    }

    fn remove_voter(
        &self,
        node_id: i32,
        directory_id: sluice_metadata::Uuid,
    ) -> Call<'_, Result<(), ApiError>> {
        self.ask(
            ControllerRequest::RemoveVoter {
                node_id,
                directory_id,
            },
            |b| match b {
                ReplyBody::Done(r) => Ok(r),
                other => Err(other),
            },
        )
    }

    fn describe_quorum(&self) -> Call<'_, sluice_metadata::controller_types::QuorumInfo> {
        self.ask(ControllerRequest::DescribeQuorum, |b| match b {
            ReplyBody::Quorum(q) => Ok(q),
            other => Err(other),
        })
    }

    fn elect_leaders(
        &self,
        preferred: bool,
        partitions: Option<&[(String, i32)]>,
    ) -> Call<'_, Vec<ElectionOutcome>> {
        self.ask(
            ControllerRequest::ElectLeaders {
                preferred,
                partitions: partitions.map(<[(String, i32)]>::to_vec),
            },
            |b| match b {
                ReplyBody::PerPartition(v) => Ok(v),
                other => Err(other),
            },
        )
    }

    fn alter_reassignments(
        &self,
        targets: &[ReassignTarget],
        allow_rf_change: bool,
    ) -> Call<'_, Vec<PartitionOutcome>> {
        self.ask(
            ControllerRequest::AlterReassignments {
                targets: targets.to_vec(),
                allow_rf_change,
            },
            |b| match b {
                ReplyBody::PerPartition(v) => Ok(v),
                other => Err(other),
            },
        )
    }

    fn alter_client_quotas(
        &self,
        changes: &[QuotaChange],
        validate_only: bool,
    ) -> Call<'_, Vec<Result<(), ApiError>>> {
        self.ask(
            ControllerRequest::AlterClientQuotas {
                changes: changes.to_vec(),
                validate_only,
            },
            |b| match b {
                ReplyBody::PerItem(v) => Ok(v),
                other => Err(other),
            },
        )
    }

    fn create_acls(&self, bindings: &[AclBinding]) -> Call<'_, Vec<Result<(), ApiError>>> {
        self.ask(
            ControllerRequest::CreateAcls(bindings.to_vec()),
            |b| match b {
                ReplyBody::PerItem(v) => Ok(v),
                other => Err(other),
            },
        )
    }

    fn copy_acls(
        &self,
        link: &str,
        bindings: &[AclBinding],
    ) -> Call<'_, Vec<Result<(), ApiError>>> {
        self.ask(
            ControllerRequest::CopyAcls {
                link: link.to_string(),
                bindings: bindings.to_vec(),
            },
            |b| match b {
                ReplyBody::PerItem(v) => Ok(v),
                other => Err(other),
            },
        )
    }

    fn delete_acls(
        &self,
        filters: &[AclFilter],
    ) -> Call<'_, Vec<Result<Vec<AclBinding>, ApiError>>> {
        self.ask(
            ControllerRequest::DeleteAcls(filters.to_vec()),
            |b| match b {
                ReplyBody::AclsDeleted(v) => Ok(v),
                other => Err(other),
            },
        )
    }

    fn delegation_token(&self, request: &TokenRequest) -> Call<'_, Result<TokenReply, ApiError>> {
        self.ask(
            ControllerRequest::DelegationToken(request.clone()),
            |b| match b {
                ReplyBody::Token(t) => Ok(*t),
                other => Err(other),
            },
        )
    }

    fn alter_scram_credentials(&self, changes: &[ScramChange]) -> Call<'_, Vec<UserOutcome>> {
        self.ask(
            ControllerRequest::AlterScramCredentials(changes.to_vec()),
            |b| match b {
                ReplyBody::PerUser(v) => Ok(v),
                other => Err(other),
            },
        )
    }

    fn alter_partition(&self, change: &IsrChange) -> Call<'_, Result<(), ApiError>> {
        self.ask(
            ControllerRequest::AlterPartition(change.clone()),
            |b| match b {
                ReplyBody::Done(r) => Ok(r),
                other => Err(other),
            },
        )
    }

    fn alter_broker_configs(
        &self,
        broker: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Call<'_, Result<(), ApiError>> {
        self.ask(
            ControllerRequest::AlterBrokerConfigs {
                broker: broker.into(),
                changes: changes.to_vec(),
                validate_only,
            },
            |b| match b {
                ReplyBody::Done(r) => Ok(r),
                other => Err(other),
            },
        )
    }

    fn alter_link_configs(
        &self,
        link: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Call<'_, Result<(), ApiError>> {
        self.ask(
            ControllerRequest::AlterLinkConfigs {
                link: link.into(),
                changes: changes.to_vec(),
                validate_only,
            },
            |b| match b {
                ReplyBody::Done(r) => Ok(r),
                other => Err(other),
            },
        )
    }

    fn alter_resource_configs(
        &self,
        resource_type: i8,
        name: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Call<'_, Result<(), ApiError>> {
        self.ask(
            ControllerRequest::AlterResourceConfigs {
                resource_type,
                name: name.into(),
                changes: changes.to_vec(),
                validate_only,
            },
            |b| match b {
                ReplyBody::Done(r) => Ok(r),
                other => Err(other),
            },
        )
    }

    fn alter_topic_configs(
        &self,
        topic: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Call<'_, Result<(), ApiError>> {
        self.ask(
            ControllerRequest::AlterTopicConfigs {
                topic: topic.into(),
                changes: changes.to_vec(),
                validate_only,
            },
            |b| match b {
                ReplyBody::Done(r) => Ok(r),
                other => Err(other),
            },
        )
    }
}

/// Keep this broker registered: heartbeat every `interval` (quickly while fenced) and
/// publish whether the controller has it fenced. Replicas that go `offline` (a failed log
/// directory) are reported at once, then in every heartbeat.
pub async fn heartbeat_loop(
    client: Arc<ControllerClient>,
    template: Heartbeat,
    images: watch::Receiver<Arc<MetadataImage>>,
    interval: Duration,
    fenced: watch::Sender<bool>,
    mut offline: watch::Receiver<Vec<(sluice_metadata::Uuid, i32)>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut offline_open = true;
    loop {
        let mut hb = template.clone();
        hb.metadata_offset = images.borrow().offset;
        hb.offline_replicas = offline.borrow_and_update().clone();
        let mut wait = interval;
        let answer = tokio::select! {
            _ = shutdown.changed() => return,
            a = client.request(ControllerRequest::Heartbeat(hb)) => a,
        };
        match answer {
            Ok((offset, ReplyBody::Heartbeat { fenced: f, .. })) => {
                if *fenced.borrow() && !f {
                    info!("registered with the controller and unfenced");
                }
                fenced.send_replace(f);
                if f {
                    // Fenced until caught up: heartbeat again as soon as this broker's
                    // metadata reaches the registration.
                    let mut rx = images.clone();
                    let _ = tokio::time::timeout(
                        Duration::from_millis(500),
                        rx.wait_for(|i| i.offset >= offset),
                    )
                    .await;
                    wait = Duration::ZERO;
                }
            }
            Ok((_, other)) => warn!(reply = ?other, "unexpected heartbeat reply"),
            Err(e) => {
                warn!(error = %e, "heartbeat failed");
                wait = wait.min(Duration::from_millis(500));
            }
        }
        if *shutdown.borrow() {
            return;
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(wait) => {}
            changed = offline.changed(), if offline_open => offline_open = changed.is_ok(),
        }
    }
}

/// Controlled shutdown: ask the controller to move this broker's leaderships away and
/// fence it. Best effort, bounded.
pub async fn controlled_shutdown(client: &ControllerClient, mut hb: Heartbeat, offset: i64) {
    hb.want_shutdown = true;
    hb.metadata_offset = offset;
    match tokio::time::timeout(
        Duration::from_secs(10),
        client.request(ControllerRequest::Heartbeat(hb)),
    )
    .await
    {
        Ok(Ok((offset, _))) => {
            // Let this broker apply the change before it stops applying metadata: its
            // partitions learn they no longer lead, so waiting acks=all requests answer
            // NOT_LEADER_OR_FOLLOWER now instead of timing out during the shutdown.
            if client
                .cache
                .wait_for_offset(offset, Duration::from_secs(5))
                .await
            {
                info!("controlled shutdown: leaderships moved");
            } else {
                warn!(
                    offset,
                    "controlled shutdown: leaderships moved, not yet applied here"
                );
            }
        }
        Ok(Err(e)) => warn!(error = %e, "controlled shutdown failed"),
        Err(_) => warn!("controlled shutdown timed out"),
    }
}

/// Broker-only nodes: pull committed metadata from the controllers.
pub async fn fetch_loop(
    client: Arc<ControllerClient>,
    images: watch::Sender<Arc<MetadataImage>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut image = MetadataImage::empty();
    loop {
        let fetched = tokio::select! {
            _ = shutdown.changed() => return,
            r = client.fetch(image.offset, 1000) => r,
        };
        match fetched {
            Ok(resp) if resp.snapshot => {
                if let Some((offset, records)) = resp.entries.into_iter().next() {
                    let mut fresh = MetadataImage::empty();
                    for r in &records {
                        fresh.apply(offset, r);
                    }
                    fresh.offset = offset;
                    image = fresh;
                    images.send_replace(Arc::new(image.clone()));
                }
            }
            Ok(resp) => {
                if !resp.entries.is_empty() {
                    for (offset, records) in resp.entries {
                        for r in &records {
                            image.apply(offset, r);
                        }
                        image.offset = offset;
                    }
                    images.send_replace(Arc::new(image.clone()));
                }
            }
            Err(e) => {
                debug!(error = %e, "metadata fetch failed");
                tokio::select! {
                    _ = shutdown.changed() => return,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
        }
    }
}

/// A controller of a dynamic quorum that is not in it yet asks the active controller
/// (found through `bootstrap`, following NOT_CONTROLLER hints) to let it follow the
/// metadata log as an observer, until it is in the membership. Kafka's observers fetch on
/// their own; a Raft learner is sent the log, so the leader has to know it. With
/// `auto_join` (`controller.quorum.auto.join.enable`) it then asks to become a voter.
pub async fn observe_quorum(
    quorum: Arc<QuorumController>,
    me: ControllerSpec,
    bootstrap: Vec<String>,
    transport: Arc<dyn Transport>,
    auto_join: bool,
    mut shutdown: watch::Receiver<bool>,
) {
    if bootstrap.is_empty() {
        warn!(
            "controller.quorum.bootstrap.servers is empty: this controller cannot find its quorum"
        );
        return;
    }
    let mut asker = Asker {
        bootstrap,
        transport,
        hint: None,
        next: 0,
    };
    let observe = ControllerRequest::ObserveQuorum(me.clone()).encode();
    while !quorum.in_quorum() {
        let pause = match asker.ask(&observe).await {
            Some(Ok(())) => {
                info!("observing the metadata quorum");
                Duration::from_secs(5)
            }
            Some(Err(e)) => {
                warn!(error = %e.message, "the quorum refused this controller as an observer");
                Duration::from_secs(5)
            }
            None if asker.hint.is_some() => Duration::ZERO,
            None => Duration::from_millis(500),
        };
        tokio::select! {
            () = quorum.joined() => {}
            _ = shutdown.changed() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
    // Restarted with another controller listener: the quorum reaches this controller there
    // once the active controller has updated it (Kafka's UpdateRaftVoter).
    let update = ControllerRequest::UpdateVoter(me.clone()).encode();
    while quorum.moved(&me) {
        let pause = match asker.ask(&update).await {
            Some(Ok(())) => {
                info!("the metadata quorum reaches this controller at its new address");
                break;
            }
            Some(Err(e)) => {
                debug!(error = %e.message, "controller endpoints not updated yet");
                Duration::from_secs(1)
            }
            None if asker.hint.is_some() => Duration::ZERO,
            None => Duration::from_millis(500),
        };
        tokio::select! {
            _ = shutdown.changed() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
    if !auto_join {
        return;
    }
    let add = ControllerRequest::AddVoter(me).encode();
    while !quorum.is_voter() {
        let pause = match asker.ask(&add).await {
            Some(Ok(())) => {
                info!("joined the metadata quorum as a voter (controller.quorum.auto.join.enable)");
                return;
            }
            Some(Err(e)) if e.code == sluice_protocol::ErrorCode::DuplicateVoter => return,
            Some(Err(e)) => {
                debug!(error = %e.message, "not added as a voter yet");
                Duration::from_secs(1)
            }
            None if asker.hint.is_some() => Duration::ZERO,
            None => Duration::from_millis(500),
        };
        tokio::select! {
            _ = shutdown.changed() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// Asks the active controller over the controller listener, starting from bootstrap
/// servers and following NOT_CONTROLLER hints.
struct Asker {
    bootstrap: Vec<String>,
    transport: Arc<dyn Transport>,
    hint: Option<String>,
    next: usize,
}

impl Asker {
    /// The controller's answer to a request answered with `Done`; None when none answered
    /// (the next call tries the hinted controller, or the next bootstrap server).
    async fn ask(&mut self, payload: &[u8]) -> Option<Result<(), ApiError>> {
        let addr = self.hint.take().unwrap_or_else(|| {
            self.next += 1;
            self.bootstrap[self.next % self.bootstrap.len()].clone()
        });
        let mut conn = Conn::new(Arc::clone(&self.transport));
        let answer = conn
            .call(&addr, KIND_CONTROLLER, payload, CALL_TIMEOUT)
            .await
            .map_err(|e| e.to_string())
            .and_then(|b| ControllerResponse::decode(&b).map_err(|e| e.to_string()));
        match answer {
            Ok(ControllerResponse::Ok {
                body: ReplyBody::Done(r),
                ..
            }) => Some(r),
            Ok(ControllerResponse::NotController(Some((_, leader)))) if !leader.is_empty() => {
                self.hint = Some(leader);
                None
            }
            other => {
                debug!(controller = %addr, answer = ?other, "no active controller there");
                None
            }
        }
    }
}
