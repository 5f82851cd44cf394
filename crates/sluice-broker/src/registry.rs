//! [`SchemaRegistry`]: the node's side of the built-in schema registry. The registry's
//! records live in the compacted, one-partition `_schemas` topic (Confluent's format, see
//! `sluice_registry::records`); the broker that leads `_schemas`-0 is the registry's only
//! writer, as Confluent's registry has one elected leader: it reads the partition into a
//! [`RegistryState`], plans each change against it, appends the records with acks=all and
//! answers once they are committed and applied. Other nodes forward requests to it (the
//! node's HTTP layer does, to the leader's registry listener). Ids are therefore allocated
//! by one writer that has read every committed record first: a new leader reads the whole
//! partition after its log is committed in its epoch (as the group coordinator loads), and
//! a deposed leader's appends fail, so no id is given twice.
//!
//! Owned by the node (one per broker), shared by the HTTP handlers; one change at a time
//! (the view's mutex is held across the append, which also keeps reads after a write
//! consistent with it).

use std::sync::Arc;
use std::time::Duration;

use sluice_protocol::batch::{BatchBuilder, RecordLimits};
use sluice_protocol::compression::Compression;
use sluice_protocol::types::TopicPartition;
use sluice_registry::state::Planned;
use sluice_registry::{RegistryError, RegistryState, SCHEMAS_TOPIC};
use tokio::sync::Mutex;

use crate::metadata_cache::MetadataCache;
use crate::replica::append::AppendEntry;
use crate::replica::{Acks, AppendOrigin, ReplicaManager};
use crate::services::topics::TopicCreator;

/// How long a request waits for `_schemas` to exist and have a leader, for a new leader's
/// log to be committed, or for a write to be replicated.
const REGISTRY_WAIT: Duration = Duration::from_secs(10);

/// Where a registry request must go when this node cannot answer it.
#[derive(Debug)]
pub enum Unserved {
    /// Another broker leads `_schemas`-0: forward to it.
    Leader(i32),
    Error(RegistryError),
}

impl From<RegistryError> for Unserved {
    fn from(e: RegistryError) -> Self {
        Unserved::Error(e)
    }
}

/// The registry as this node last read it from `_schemas`-0.
#[derive(Default)]
struct View {
    state: RegistryState,
    /// The leader epoch it was read in (None: read it again).
    epoch: Option<i32>,
    /// The offset after the last record applied.
    next: i64,
}

/// How a broker asks the registry's leader, on another node, which subject versions use a
/// schema id (`GET /schemas/ids/{id}/versions` on its listener). The node supplies it: the
/// HTTP client lives with the listener.
pub trait RemoteRegistry: Send + Sync {
    fn versions_by_id(&self, leader: i32, id: i32) -> RemoteAnswer<'_>;
}

/// What [`RemoteRegistry::versions_by_id`] answers: the (subject, version) pairs.
pub type RemoteAnswer<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Vec<(String, i32)>, RegistryError>> + Send + 'a>,
>;

/// The (subject, id) pairs produce validation found registered: ids are never given to
/// another schema, so a pair found stays true. Bounded; emptied when full.
const KNOWN_IDS_MAX: usize = 100_000;

pub struct SchemaRegistry {
    node_id: i32,
    remote: std::sync::OnceLock<Box<dyn RemoteRegistry>>,
    known_ids: std::sync::Mutex<std::collections::HashSet<(String, i32)>>,
    config: Arc<sluice_metadata::config::BrokerConfig>,
    replicas: Arc<ReplicaManager>,
    metadata: Arc<MetadataCache>,
    topics: Arc<TopicCreator>,
    view: Mutex<View>,
}

fn tp() -> TopicPartition {
    TopicPartition::new(SCHEMAS_TOPIC, 0)
}

impl SchemaRegistry {
    pub fn new(
        node_id: i32,
        config: Arc<sluice_metadata::config::BrokerConfig>,
        replicas: Arc<ReplicaManager>,
        metadata: Arc<MetadataCache>,
        topics: Arc<TopicCreator>,
    ) -> Self {
        Self {
            node_id,
            remote: std::sync::OnceLock::new(),
            known_ids: std::sync::Mutex::default(),
            config,
            replicas,
            metadata,
            topics,
            view: Mutex::default(),
        }
    }

    /// The SASL listeners of the cluster's Kafka listeners: when there is one, registry
    /// requests must authenticate as one of the users those listeners know (HTTP basic).
    fn sasl_listeners(&self) -> Vec<String> {
        self.config
            .listeners()
            .into_iter()
            .filter(|l| {
                matches!(
                    self.config.security_protocol(&l.name),
                    Ok(sluice_metadata::config::SecurityProtocol::SaslPlaintext
                        | sluice_metadata::config::SecurityProtocol::SaslSsl)
                )
            })
            .map(|l| l.name)
            .collect()
    }

    /// Whether registry requests must carry HTTP basic credentials (the cluster has SASL).
    pub fn authentication_required(&self) -> bool {
        !self.sasl_listeners().is_empty()
    }

    /// The principal (`User:<name>`) of HTTP basic credentials, if they are a SASL user's:
    /// a SCRAM credential in the cluster's metadata (either mechanism) or a PLAIN user of a
    /// SASL listener.
    pub fn authenticate(&self, user: &str, password: &str) -> Option<String> {
        use sluice_protocol::scram::{self, Mechanism};
        let image = self.metadata.current();
        for mech in [Mechanism::Sha256, Mechanism::Sha512] {
            let Some(c) = image.scram.get(&(user.to_string(), mech.code())) else {
                continue;
            };
            let iterations = u32::try_from(c.iterations).ok()?;
            let salted = scram::salted_password(mech, password.as_bytes(), &c.salt, iterations);
            let derived = scram::credential_from_salted(mech, &c.salt, &salted, c.iterations);
            if same(&derived.stored_key, &c.stored_key) {
                return Some(format!("User:{user}"));
            }
        }
        for listener in self.sasl_listeners() {
            if !self
                .config
                .sasl_mechanisms(&listener)
                .iter()
                .any(|m| m == "PLAIN")
            {
                continue;
            }
            let users = self.config.plain_users(&listener).unwrap_or_default();
            if users
                .get(user)
                .is_some_and(|p| same(p.as_bytes(), password.as_bytes()))
            {
                return Some(format!("User:{user}"));
            }
        }
        None
    }

    /// Set how this node reaches the registry's leader elsewhere (once, at start).
    pub fn set_remote(&self, remote: Box<dyn RemoteRegistry>) {
        let _ = self.remote.set(remote);
    }

    /// Whether schema `id` is registered under `subject` (any version, soft-deleted ones
    /// too, as a record written before a soft delete stays valid): produce validation.
    pub async fn id_in_subject(&self, subject: &str, id: i32) -> Result<bool, RegistryError> {
        let key = (subject.to_string(), id);
        if self.known().contains(&key) {
            return Ok(true);
        }
        let uses = match self.read(|s| s.versions_by_id(id, true)).await {
            Ok(Ok(uses)) => uses,
            Ok(Err(_)) => Vec::new(),
            Err(Unserved::Error(e)) => return Err(e),
            Err(Unserved::Leader(leader)) => match self.remote.get() {
                None => {
                    return Err(RegistryError::unknown_leader(
                        "no way to reach the registry",
                    ))
                }
                Some(r) => match r.versions_by_id(leader, id).await {
                    Ok(uses) => uses,
                    Err(e) if e.code == 40403 => Vec::new(),
                    Err(e) => return Err(e),
                },
            },
        };
        let found = uses.iter().any(|(s, _)| s == subject);
        if found {
            let mut known = self.known();
            if known.len() >= KNOWN_IDS_MAX {
                known.clear();
            }
            known.insert(key);
        }
        Ok(found)
    }

    fn known(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<(String, i32)>> {
        self.known_ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Answer a read from the registry's committed state.
    pub async fn read<R>(&self, f: impl FnOnce(&RegistryState) -> R) -> Result<R, Unserved> {
        let mut view = self.view.lock().await;
        self.catch_up(&mut view).await?;
        Ok(f(&view.state))
    }

    /// Make a change: plan it against the committed state, write its records and answer
    /// once they are committed and applied.
    pub async fn write<T>(
        &self,
        plan: impl FnOnce(&RegistryState) -> Result<Planned<T>, RegistryError>,
    ) -> Result<T, Unserved> {
        let mut view = self.view.lock().await;
        self.catch_up(&mut view).await?;
        let planned = plan(&view.state)?;
        if planned.records.is_empty() {
            return Ok(planned.answer);
        }
        let epoch = view.epoch;
        match self.append(planned.records).await {
            Ok(end) => {
                self.catch_up(&mut view).await?;
                if view.epoch != epoch || view.next < end {
                    return Err(RegistryError::store(
                        "the registry's leader changed while writing; retry",
                    )
                    .into());
                }
                Ok(planned.answer)
            }
            Err(e) => {
                // The log may have been truncated under a new leader: read it again.
                view.epoch = None;
                Err(e.into())
            }
        }
    }

    /// Append records to `_schemas`-0 with acks=all; the offset after them once committed.
    async fn append(
        &self,
        records: Vec<sluice_registry::records::Record>,
    ) -> Result<i64, RegistryError> {
        let now = crate::now_ms();
        let mut b = BatchBuilder::new(Compression::None);
        for r in &records {
            let value = r.value.as_ref().map(|v| v.to_string().into_bytes());
            b.append(now, Some(&r.key.encode()), value.as_deref(), &[]);
        }
        let bytes = b
            .build(0)
            .map_err(|e| RegistryError::store(format!("cannot build a batch: {e}")))?;
        let entry = AppendEntry {
            tp: tp(),
            records: bytes.into(),
        };
        let appended = self
            .replicas
            .append(AppendOrigin::Client, Acks::All, vec![entry])
            .await
            .into_iter()
            .next()
            .ok_or_else(|| RegistryError::store("no append result"))?
            .map_err(|e| {
                RegistryError::store(format!("cannot write to {SCHEMAS_TOPIC}: {:?}", e.code()))
            })?;
        let outcome = self
            .replicas
            .await_replication(&[&appended], REGISTRY_WAIT)
            .await;
        match outcome.first().and_then(|o| o.error()) {
            None => Ok(appended.end().0),
            Some(code) => Err(RegistryError::store(format!(
                "the write to {SCHEMAS_TOPIC} was not committed: {code:?}"
            ))),
        }
    }

    /// Bring the view up to the committed end of `_schemas`-0, reading the partition again
    /// when this node just became its leader; or say who leads it.
    async fn catch_up(&self, view: &mut View) -> Result<(), Unserved> {
        let (epoch, log_start) = self.lead().await?;
        if view.epoch != Some(epoch) {
            let committed = tokio::time::timeout(
                REGISTRY_WAIT,
                self.replicas.await_committed_log(&tp(), epoch),
            )
            .await;
            if !matches!(committed, Ok(true)) {
                return Err(RegistryError::unknown_leader(
                    "the registry's leader is still taking over; retry",
                )
                .into());
            }
            *view = View {
                state: RegistryState::default(),
                epoch: Some(epoch),
                next: log_start,
            };
        }
        let replicas = Arc::clone(&self.replicas);
        let from = view.next;
        let mut state = std::mem::take(&mut view.state);
        let (state, next) = sluice_rt::task::spawn_blocking(move || {
            let next = replicas.scan_committed_from(&tp(), epoch, from, |h, bytes| {
                if h.is_control() {
                    return;
                }
                let _ =
                    sluice_protocol::batch::for_each_record(bytes, RecordLimits::default(), |r| {
                        if let Some(key) = r.key {
                            state.apply(key, r.value);
                        }
                        Ok(())
                    });
            });
            (state, next)
        })
        .await
        .map_err(|_| RegistryError::store("the registry's reader stopped"))?;
        view.state = state;
        match next {
            Some(next) => {
                view.next = next;
                Ok(())
            }
            None => {
                view.epoch = None;
                Err(RegistryError::unknown_leader(
                    "the registry's leader changed while reading; retry",
                )
                .into())
            }
        }
    }

    /// This node's leader epoch and log start of `_schemas`-0, creating the topic first if
    /// it does not exist; or the broker that leads it.
    async fn lead(&self) -> Result<(i32, i64), Unserved> {
        let deadline = tokio::time::Instant::now() + REGISTRY_WAIT;
        let mut created = false;
        loop {
            if let Some(led) = self.replicas.led_here(&tp()) {
                return Ok(led);
            }
            let image = self.metadata.current();
            match image
                .topic(SCHEMAS_TOPIC)
                .and_then(|t| t.partitions.get(&0))
            {
                None if !created => {
                    created = true;
                    self.topics.ensure_schemas_topic().await.map_err(|code| {
                        RegistryError::unknown_leader(format!(
                            "cannot create {SCHEMAS_TOPIC}: {code:?}"
                        ))
                    })?;
                }
                Some(p) if p.leader >= 0 && p.leader != self.node_id => {
                    return Err(Unserved::Leader(p.leader));
                }
                _ => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(RegistryError::unknown_leader(format!(
                    "{SCHEMAS_TOPIC} has no leader yet; retry"
                ))
                .into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Equal, compared in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
