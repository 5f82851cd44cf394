//! Mirror topics: partitions of this cluster that copy a partition of another cluster, with
//! its offsets, through a cluster link (see `sluice_metadata::config::mirror` for what the
//! metadata log keeps).
//!
//! The leader of each mirror partition does the copying, as a follower of the source
//! partition: it fetches from the source leader as a consumer (read_uncommitted, below the
//! source's high watermark, so nothing it copies can be truncated there short of an unclean
//! election) and appends the batches unchanged at their offsets; this cluster's followers
//! replicate from it as from any leader. A failover on either side resumes where this
//! cluster's log ends: the offsets are the source's, so the log end is the next offset to
//! copy, and an append is made only if the log still ends where the fetch started.
//!
//! # Layout
//! - [`MirrorManager`]: owned by the node; follows metadata, runs one copier task per link
//!   with the mirror partitions this broker leads, and keeps their status (lag) for
//!   DescribeConfigs and `/metrics`.
//! - [`copier`]: one link's copy loop: fetch from the source leaders, append, keep the
//!   partition count and the synced topic configs in step with the source.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_metadata::config::{LinkSettings, MirrorState, MirrorTopic};
use sluice_metadata::MetadataImage;
use sluice_protocol::types::TopicPartition;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::metadata_cache::MetadataCache;
use crate::replica::ReplicaManager;
use crate::services::controller::ControllerClient;

pub mod copier;

/// How often the manager looks at metadata when nothing wakes it.
const RESCAN: Duration = Duration::from_secs(1);

/// One mirror partition this broker leads: the local partition and the source topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mirrored {
    pub tp: TopicPartition,
    pub source_topic: String,
}

/// What one link's copier does: the partitions it copies, the topics whose partition
/// count and configs it keeps in step (those whose partition 0 this broker leads), and every
/// active mirror topic of the link with its source topic (whose groups' offsets it copies,
/// for the groups this broker coordinates). One broker, the live one with the lowest id,
/// also does the link's cluster-wide work (`coordinator`): it creates the mirror topics the
/// link's patterns ask for and copies the source's ACLs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkWork {
    pub partitions: Vec<Mirrored>,
    pub topics: Vec<(String, String)>,
    pub mirrors: Vec<(String, String)>,
    /// The link's mirror topics being promoted (among `mirrors`): each wants a last copy of
    /// the group offsets, reported once made.
    pub promoting: Vec<String>,
    pub coordinator: bool,
}

/// Where one mirror partition stands, as its copier last saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionStatus {
    pub link: String,
    /// The source partition's high watermark at the last fetch (-1 before the first).
    pub source_high_watermark: i64,
    pub log_end_offset: i64,
    /// Records the source has that this partition does not yet.
    pub lag_records: i64,
    /// How long since this partition last had everything the source had (ms).
    pub lag_ms: i64,
    /// When it last had (wall clock, ms).
    pub caught_up_at_ms: i64,
    /// The last error copying it, until the next good fetch.
    pub error: Option<String>,
}

impl PartitionStatus {
    fn new(link: &str, now_ms: i64) -> Self {
        Self {
            link: link.to_string(),
            source_high_watermark: -1,
            log_end_offset: -1,
            lag_records: -1,
            lag_ms: 0,
            caught_up_at_ms: now_ms,
            error: None,
        }
    }

    /// A fetch saw the source at `source_hw` with this partition ending at `log_end`.
    fn fetched(&mut self, source_hw: i64, log_end: i64, now_ms: i64) {
        self.source_high_watermark = source_hw;
        self.log_end_offset = log_end;
        self.lag_records = (source_hw - log_end).max(0);
        if self.lag_records == 0 {
            self.caught_up_at_ms = now_ms;
        }
        self.lag_ms = (now_ms - self.caught_up_at_ms).max(0);
        self.error = None;
    }
}

struct LinkTask {
    settings: LinkSettings,
    work: watch::Sender<LinkWork>,
    handle: JoinHandle<()>,
}

/// Owns the copier tasks of this broker; see the module documentation.
pub struct MirrorManager {
    node_id: i32,
    replicas: Arc<ReplicaManager>,
    metadata: Arc<MetadataCache>,
    controller: Arc<ControllerClient>,
    groups: Arc<crate::group::coordinator::GroupCoordinator>,
    /// Creates `__consumer_offsets` when the first group offsets are copied here.
    topics: Arc<crate::services::topics::TopicCreator>,
    status: Mutex<BTreeMap<TopicPartition, PartitionStatus>>,
    /// Per link, the mirror topics being promoted whose last group offset copy this broker
    /// made (see [`MirrorState::Promoting`]).
    promotion_synced: Mutex<HashMap<String, std::collections::BTreeSet<String>>>,
}

impl MirrorManager {
    pub fn new(
        node_id: i32,
        replicas: Arc<ReplicaManager>,
        metadata: Arc<MetadataCache>,
        controller: Arc<ControllerClient>,
        groups: Arc<crate::group::coordinator::GroupCoordinator>,
        topics: Arc<crate::services::topics::TopicCreator>,
    ) -> Arc<Self> {
        Arc::new(Self {
            node_id,
            replicas,
            metadata,
            controller,
            groups,
            topics,
            status: Mutex::new(BTreeMap::new()),
            promotion_synced: Mutex::new(HashMap::new()),
        })
    }

    /// The mirror topics of `link` being promoted whose last group offset copy is made here.
    pub fn promotion_synced(&self, link: &str) -> Vec<String> {
        self.promotion_synced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(link)
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// A copier's report: of `link`'s topics being promoted, `synced` have had their last
    /// group offset copy here.
    fn set_promotion_synced(&self, link: &str, synced: std::collections::BTreeSet<String>) {
        let mut all = self
            .promotion_synced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if synced.is_empty() {
            all.remove(link);
        } else {
            all.insert(link.to_string(), synced);
        }
    }

    /// The status of every mirror partition this broker copies (optionally of one link).
    pub fn status(&self, link: Option<&str>) -> Vec<(TopicPartition, PartitionStatus)> {
        self.lock_status()
            .iter()
            .filter(|(_, s)| link.is_none_or(|l| s.link == l))
            .map(|(tp, s)| (tp.clone(), s.clone()))
            .collect()
    }

    fn lock_status(&self) -> std::sync::MutexGuard<'_, BTreeMap<TopicPartition, PartitionStatus>> {
        self.status
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn update_status(&self, tp: &TopicPartition, link: &str, f: impl FnOnce(&mut PartitionStatus)) {
        let now = crate::now_ms();
        let mut all = self.lock_status();
        f(all
            .entry(tp.clone())
            .or_insert_with(|| PartitionStatus::new(link, now)));
    }

    /// What each link's copier should do now, by link name.
    fn plan(&self, image: &MetadataImage) -> HashMap<String, (LinkSettings, LinkWork)> {
        let coordinator = image.live_brokers().map(|b| b.node_id).min() == Some(self.node_id);
        let mut out: HashMap<String, (LinkSettings, LinkWork)> = image
            .links()
            .map(|(name, configs)| {
                let settings = LinkSettings::from_configs(name, configs);
                let work = LinkWork {
                    coordinator: coordinator
                        && !settings.paused
                        && (settings.acl_sync || !settings.topic_patterns.is_empty()),
                    ..LinkWork::default()
                };
                (name.to_string(), (settings, work))
            })
            .collect();
        for (name, t) in &image.topics {
            let Some(m) = MirrorTopic::of(name, &image.topic_configs(name)) else {
                continue;
            };
            let Some((settings, work)) = out.get_mut(&m.link) else {
                continue;
            };
            if !matches!(m.state, MirrorState::Active | MirrorState::Promoting) || settings.paused {
                continue;
            }
            work.mirrors.push((name.clone(), m.source_topic.clone()));
            if m.state == MirrorState::Promoting {
                work.promoting.push(name.clone());
            }
            for (id, reg) in &t.partitions {
                if reg.leader != self.node_id {
                    continue;
                }
                let tp = TopicPartition::new(name, *id);
                if !self.replicas.get(&tp).is_some_and(|p| p.is_leader()) {
                    continue;
                }
                work.partitions.push(Mirrored {
                    tp,
                    source_topic: m.source_topic.clone(),
                });
                if *id == 0 {
                    work.topics.push((name.clone(), m.source_topic.clone()));
                }
            }
        }
        out
    }

    /// Follow metadata until shutdown: start, update and stop the link copiers.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut images = self.metadata.subscribe();
        let mut tick = tokio::time::interval(RESCAN);
        let mut links: HashMap<String, LinkTask> = HashMap::new();
        // Promoted partitions led here whose copied open transactions are aborted, with the
        // leader epoch in which that was done (a new leadership looks again).
        let mut settled: HashMap<TopicPartition, i32> = HashMap::new();
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                r = images.changed() => if r.is_err() { break },
                _ = tick.tick() => {}
            }
            let image = self.metadata.current();
            let mut plan = self.plan(&image);
            links.retain(|name, task| {
                let keep = plan
                    .get(name)
                    .is_some_and(|(s, _)| *s == task.settings && !task.handle.is_finished());
                if !keep {
                    task.handle.abort();
                }
                keep
            });
            for (name, (settings, work)) in plan.drain() {
                if let Some(task) = links.get(&name) {
                    task.work.send_if_modified(|w| {
                        let changed = *w != work;
                        *w = work;
                        changed
                    });
                    continue;
                }
                let (tx, rx) = watch::channel(work);
                let handle = tokio::spawn(copier::run(Arc::clone(&self), settings.clone(), rx));
                links.insert(
                    name,
                    LinkTask {
                        settings,
                        work: tx,
                        handle,
                    },
                );
            }
            // Forget the status of partitions no copier has any more.
            let copied: std::collections::HashSet<TopicPartition> = links
                .values()
                .flat_map(|t| {
                    t.work
                        .borrow()
                        .partitions
                        .iter()
                        .map(|m| m.tp.clone())
                        .collect::<Vec<_>>()
                })
                .collect();
            self.lock_status().retain(|tp, _| copied.contains(tp));
            self.abort_copied_transactions(&image, &mut settled).await;
            self.export_metrics();
        }
        for task in links.into_values() {
            task.handle.abort();
        }
    }

    /// Abort, in each promoted mirror partition this broker leads, the source's transactions
    /// left open in it (see [`crate::replica::Partition::abort_copied_transactions`]): once
    /// per leadership, whether or not this broker did the copying, and again after a restart
    /// (the promotion epoch is in metadata). Those that cannot be written yet (ISR too small,
    /// promotion epoch not here yet) are tried on the next pass.
    async fn abort_copied_transactions(
        &self,
        image: &MetadataImage,
        settled: &mut HashMap<TopicPartition, i32>,
    ) {
        let mut led = std::collections::HashSet::new();
        for (name, t) in &image.topics {
            let Some(epoch) = MirrorTopic::of(name, &image.topic_configs(name))
                .filter(|m| m.state == MirrorState::Stopped)
                .and_then(|m| m.promoted_epoch)
            else {
                continue;
            };
            for id in t.partitions.keys() {
                let tp = TopicPartition::new(name, *id);
                let Some(p) = self.replicas.get(&tp).filter(|p| p.is_leader()) else {
                    continue;
                };
                let leader_epoch = p.leader_epoch();
                led.insert(tp.clone());
                if settled.get(&tp) == Some(&leader_epoch) {
                    continue;
                }
                let now = crate::now_ms();
                let done = sluice_rt::task::spawn_blocking(move || {
                    p.abort_copied_transactions(epoch, now)
                })
                .await;
                match done {
                    Ok(Ok(n)) => {
                        if n > 0 {
                            tracing::info!(partition = %tp, transactions = n, "aborted the source's transactions left open in a promoted mirror");
                        }
                        settled.insert(tp, leader_epoch);
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(partition = %tp, error = %e.message(), "open source transactions not aborted yet")
                    }
                    Err(e) => {
                        tracing::warn!(partition = %tp, error = %e, "aborting open source transactions")
                    }
                }
            }
        }
        settled.retain(|tp, _| led.contains(tp));
    }

    /// Link lag on `/metrics`, per partition this broker copies.
    fn export_metrics(&self) {
        for (tp, s) in self.lock_status().iter() {
            let labels = [
                ("link", s.link.clone()),
                ("topic", tp.topic.to_string()),
                ("partition", tp.partition.0.to_string()),
            ];
            metrics::gauge!("sluice_mirror_lag_records", &labels).set(s.lag_records.max(0) as f64);
            metrics::gauge!("sluice_mirror_lag_seconds", &labels).set(s.lag_ms as f64 / 1000.0);
        }
    }
}

/// DescribeConfigs of a cluster link, as this broker answers it: the link's configs
/// (secrets withheld), its settings' defaults, a read-only `mirror.topic.<topic>` entry per
/// mirror topic on the link, and a read-only `mirror.partition.<topic>.<partition>` entry
/// per mirror partition this broker copies (its lag; each broker reports its own, so the
/// mirror tool asks every broker). The link named "" lists every link (name = its
/// `bootstrap.servers`).
pub fn describe_link(
    image: &MetadataImage,
    mirrors: &MirrorManager,
    name: &str,
) -> Result<Vec<sluice_metadata::config::DescribedConfig>, (sluice_protocol::ErrorCode, String)> {
    use sluice_metadata::config::{
        link_def, link_sensitive, ConfigSource, ConfigType, DescribedConfig, LINK_CONFIGS,
    };
    let row = |name: String, value: Option<String>, source, sensitive, doc| DescribedConfig {
        name,
        value,
        source,
        read_only: source != ConfigSource::TopicConfig && source != ConfigSource::DefaultConfig,
        sensitive,
        ty: ConfigType::String,
        doc,
        synonyms: Vec::new(),
    };
    if name.is_empty() {
        return Ok(image
            .links()
            .map(|(n, c)| {
                row(
                    n.to_string(),
                    c.get("bootstrap.servers").cloned(),
                    ConfigSource::StaticBrokerConfig,
                    false,
                    "A cluster link and the source cluster it reaches.",
                )
            })
            .collect());
    }
    let Some(configs) = image
        .links()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| c.clone())
    else {
        return Err((
            sluice_protocol::ErrorCode::InvalidRequest,
            format!("cluster link {name} does not exist"),
        ));
    };
    let mut out: Vec<DescribedConfig> = configs
        .iter()
        .map(|(k, v)| {
            let doc = link_def(k)
                .map_or("A client setting that reaches the source cluster.", |d| {
                    d.doc
                });
            row(
                k.clone(),
                Some(v.clone()),
                ConfigSource::TopicConfig,
                link_sensitive(k),
                doc,
            )
        })
        .collect();
    for d in LINK_CONFIGS
        .iter()
        .filter(|d| !configs.contains_key(d.name))
    {
        out.push(row(
            d.name.to_string(),
            d.default.map(str::to_owned),
            ConfigSource::DefaultConfig,
            false,
            d.doc,
        ));
    }
    for t in image.topics.keys() {
        if let Some(m) = MirrorTopic::of(t, &image.topic_configs(t)).filter(|m| m.link == name) {
            out.push(row(
                format!("mirror.topic.{t}"),
                Some(format!(
                    "source.topic={} state={}",
                    m.source_topic,
                    m.state.name()
                )),
                ConfigSource::StaticBrokerConfig,
                false,
                "A mirror topic on this link: its source topic and state.",
            ));
        }
    }
    for (tp, s) in mirrors.status(Some(name)) {
        let mut v = format!(
            "source.high.watermark={} log.end.offset={} lag.records={} lag.ms={}",
            s.source_high_watermark, s.log_end_offset, s.lag_records, s.lag_ms
        );
        if let Some(e) = &s.error {
            v.push_str(&format!(" error={e}"));
        }
        out.push(row(
            format!("mirror.partition.{}.{}", tp.topic, tp.partition.0),
            Some(v),
            ConfigSource::StaticBrokerConfig,
            false,
            "A mirror partition this broker copies: the source's high watermark at the last fetch, this log's end, and the lag.",
        ));
    }
    for topic in mirrors.promotion_synced(name) {
        out.push(row(
            format!("mirror.promotion.{topic}"),
            Some("group.offsets.synced=true".into()),
            ConfigSource::StaticBrokerConfig,
            false,
            "A mirror topic being promoted whose last copy of group offsets this broker made.",
        ));
    }
    Ok(out)
}

/// Whether CreateTopics asks for a mirror topic (it sets `mirror.link`).
pub fn is_mirror_spec(spec: &sluice_metadata::controller_types::CreateTopicSpec) -> bool {
    spec.configs
        .iter()
        .any(|(k, _)| k == sluice_metadata::config::MIRROR_LINK)
}

/// Complete CreateTopics' spec of a mirror topic: the source topic's partition count (asked
/// of the source through the link), the source topic named, the state active.
pub async fn prepare_mirror_spec(
    image: &MetadataImage,
    spec: &mut sluice_metadata::controller_types::CreateTopicSpec,
) -> Result<(), (sluice_protocol::ErrorCode, String)> {
    use sluice_metadata::config::{MIRROR_LINK, MIRROR_SOURCE_TOPIC, MIRROR_STATE};
    use sluice_protocol::ErrorCode;
    let get = |k: &str| {
        spec.configs
            .iter()
            .find(|(c, _)| c == k)
            .and_then(|(_, v)| v.clone())
    };
    let link = get(MIRROR_LINK).unwrap_or_default();
    let Some((_, configs)) = image.links().find(|(n, _)| *n == link) else {
        return Err((
            ErrorCode::InvalidConfig,
            format!("cluster link {link} does not exist"),
        ));
    };
    if !spec.assignments.is_empty() || spec.num_partitions > 0 {
        return Err((
            ErrorCode::InvalidRequest,
            "a mirror topic takes its partition count from its source topic: give none".into(),
        ));
    }
    let source = get(MIRROR_SOURCE_TOPIC).unwrap_or_else(|| spec.name.clone());
    let settings = LinkSettings::from_configs(&link, configs);
    let admin = copier::source_admin(&settings).map_err(|e| (ErrorCode::InvalidConfig, e))?;
    let cluster = tokio::time::timeout(
        SOURCE_LOOKUP_TIMEOUT,
        admin.core().refresh(std::slice::from_ref(&source)),
    )
    .await
    .map_err(|_| {
        (
            ErrorCode::RequestTimedOut,
            format!("the source cluster of link {link} did not answer"),
        )
    })?
    .map_err(|e| {
        (
            ErrorCode::InvalidRequest,
            format!("the source cluster of link {link}: {e}"),
        )
    })?;
    let partitions = cluster
        .topics
        .get(&source)
        .filter(|t| t.error.is_none() && !t.partitions.is_empty())
        .map(|t| t.partitions.len() as i32)
        .ok_or_else(|| {
            (
                ErrorCode::UnknownTopicOrPartition,
                format!("topic {source} does not exist on the source cluster of link {link}"),
            )
        })?;
    spec.num_partitions = partitions;
    spec.configs
        .retain(|(k, _)| k != MIRROR_SOURCE_TOPIC && k != MIRROR_STATE);
    spec.configs
        .push((MIRROR_SOURCE_TOPIC.to_string(), Some(source)));
    spec.configs.push((
        MIRROR_STATE.to_string(),
        Some(MirrorState::Active.name().to_string()),
    ));
    Ok(())
}

/// How long CreateTopics waits for a mirror topic's source to answer.
const SOURCE_LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);
