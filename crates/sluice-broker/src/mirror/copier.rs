//! One cluster link's copy loop, run by the broker for the mirror partitions it leads:
//! each round fetches from every source leader at once (as a consumer: replica id -1,
//! read_uncommitted, so below the source's high watermark), appends what came at the
//! offsets it came with, and records each partition's lag. Every `topic.config.sync.ms`
//! it also grows mirror topics whose source gained partitions and copies the synced
//! topic configs, and (on one broker) creates the mirror topics the link's patterns ask for
//! and copies the source's ACLs.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_client::admin::{ConfigResource, OffsetSpec};
use sluice_client::{Admin, ClientConfig};
use sluice_metadata::config::{
    copied_acl_id, LinkSettings, TopicPatterns, MIRROR_LINK, SYNCED_TOPIC_CONFIGS,
};
use sluice_metadata::controller_types::CreateTopicSpec;
use sluice_protocol::acl::{AclBinding, AclFilter};
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::{LinkWork, MirrorManager, Mirrored};

/// Fetch parameters (Kafka's replica fetcher defaults).
const FETCH_MAX_WAIT_MS: i32 = 500;
const FETCH_MAX_BYTES: i32 = 10 * 1024 * 1024;
const PARTITION_MAX_BYTES: i32 = 1024 * 1024;
/// The newest Fetch version that names topics (13 and later name them by id).
const FETCH_VERSION_MAX: i16 = 12;
/// Wait after a round that failed (source unreachable, leaders moving).
const RETRY_BACKOFF: Duration = Duration::from_millis(500);
/// How soon a copy of group offsets that did not complete is tried again.
const GROUP_SYNC_RETRY: Duration = Duration::from_secs(1);
/// Source metadata is looked up again at least this often.
const METADATA_MAX_AGE: Duration = Duration::from_secs(30);

/// The client that reaches the link's source cluster.
pub(super) fn source_admin(settings: &LinkSettings) -> Result<Admin, String> {
    let bootstrap = settings
        .client
        .iter()
        .find(|(k, _)| k == "bootstrap.servers")
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    let config = ClientConfig::new(bootstrap)
        .set("client.id", &format!("sluice-link-{}", settings.name))
        .and_then(|c| {
            c.set_all(
                settings
                    .client
                    .iter()
                    .filter(|(k, _)| k != "bootstrap.servers")
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            )
        })
        .map_err(|e| e.to_string())?;
    Admin::new(config).map_err(|e| e.to_string())
}

pub(super) async fn run(
    manager: Arc<MirrorManager>,
    settings: LinkSettings,
    mut work: watch::Receiver<LinkWork>,
) {
    let admin = match source_admin(&settings) {
        Ok(a) => a,
        Err(e) => {
            warn!(link = settings.name, error = %e, "cluster link settings do not make a client");
            for m in work.borrow().partitions.iter() {
                manager.update_status(&m.tp, &settings.name, |s| s.error = Some(e.clone()));
            }
            return;
        }
    };
    // Patterns were checked when they were set: one that does not compile now is left out.
    let patterns = TopicPatterns::compile(&settings.topic_patterns).unwrap_or_else(|e| {
        warn!(link = settings.name, error = %e, "cluster link topic patterns");
        TopicPatterns::default()
    });
    let mut copier = Copier {
        manager,
        settings,
        admin,
        patterns,
        discovered: None,
        acls_synced: None,
        refreshed: None,
        started: HashSet::new(),
        synced: None,
        groups_synced: None,
        groups_tried: None,
        promotion_synced: BTreeSet::new(),
    };
    info!(link = copier.settings.name, "cluster link copier started");
    loop {
        let current = work.borrow_and_update().clone();
        copier
            .maybe_sync_groups(&current.mirrors, &current.promoting)
            .await;
        if current.coordinator {
            copier.maybe_discover_topics().await;
            copier.maybe_sync_acls().await;
        }
        if current.partitions.is_empty() && current.topics.is_empty() {
            // Nothing to copy here: wait for work, the next group offset sync, or the next
            // look for new source topics.
            let mut wait = Duration::from_millis(copier.settings.offset_sync_ms);
            if current.coordinator {
                wait = wait
                    .min(Duration::from_millis(copier.settings.config_sync_ms))
                    .min(Duration::from_millis(copier.settings.acl_sync_ms));
            }
            if copier.group_sync_wanted(&current.mirrors, &current.promoting) {
                wait = wait.min(GROUP_SYNC_RETRY);
            }
            if let Ok(Err(_)) = tokio::time::timeout(wait, work.changed()).await {
                return;
            }
            continue;
        }
        copier.maybe_sync_topics(&current.topics).await;
        match copier.round(&current.partitions).await {
            Ok(()) => {}
            Err(e) => {
                debug!(link = copier.settings.name, error = %e, "cluster link round failed");
                for m in &current.partitions {
                    copier
                        .manager
                        .update_status(&m.tp, &copier.settings.name, |s| s.error = Some(e.clone()));
                }
                copier.refreshed = None;
                tokio::time::sleep(RETRY_BACKOFF).await;
            }
        }
    }
}

struct Copier {
    manager: Arc<MirrorManager>,
    settings: LinkSettings,
    admin: Admin,
    /// The link's topic patterns, compiled.
    patterns: TopicPatterns,
    /// When the source's topics were last matched against the patterns.
    discovered: Option<tokio::time::Instant>,
    /// When ACLs were last copied, and the source's ACLs then (those this copier may delete
    /// here once the source no longer has them).
    acls_synced: Option<tokio::time::Instant>,
    /// When source metadata was last looked up (None: look it up before the next round).
    refreshed: Option<tokio::time::Instant>,
    /// Partitions whose start was settled (`mirror.start.offset.spec`).
    started: HashSet<TopicPartition>,
    /// When topics were last synced.
    synced: Option<tokio::time::Instant>,
    /// When the last complete copy of group offsets began, and the last try.
    groups_synced: Option<tokio::time::Instant>,
    groups_tried: Option<tokio::time::Instant>,
    /// Topics being promoted whose last group offset copy is made (reported to the manager).
    promotion_synced: BTreeSet<String>,
}

impl Copier {
    async fn refresh(&mut self, partitions: &[Mirrored]) -> Result<(), String> {
        let stale = self
            .refreshed
            .is_none_or(|t| t.elapsed() >= METADATA_MAX_AGE);
        if !stale {
            return Ok(());
        }
        let mut topics: Vec<String> = partitions.iter().map(|m| m.source_topic.clone()).collect();
        topics.sort();
        topics.dedup();
        self.admin
            .core()
            .refresh(&topics)
            .await
            .map_err(|e| format!("source metadata: {e}"))?;
        self.refreshed = Some(tokio::time::Instant::now());
        Ok(())
    }

    /// A mirror that starts at the source's end (`mirror.start.offset.spec=latest`) and has
    /// copied nothing yet starts there.
    async fn settle_start(&mut self, m: &Mirrored) -> Result<(), String> {
        if self.started.contains(&m.tp) {
            return Ok(());
        }
        let Some(p) = self.manager.replicas.get(&m.tp) else {
            return Ok(());
        };
        if self.settings.start_at_latest && p.log_end_offset() == 0 && p.log_start_offset() == 0 {
            let source = TopicPartition::new(m.source_topic.clone(), m.tp.partition.0);
            let end = self.source_offset(&source, OffsetSpec::Latest).await?;
            let now = crate::now_ms();
            sluice_rt::task::spawn_blocking(move || p.truncate_fully_and_start_at(end, now))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
        }
        self.started.insert(m.tp.clone());
        Ok(())
    }

    async fn source_offset(&self, tp: &TopicPartition, spec: OffsetSpec) -> Result<i64, String> {
        let got = self
            .admin
            .list_offsets(&[(tp.clone(), spec)])
            .await
            .map_err(|e| format!("source offsets: {e}"))?;
        match got.into_iter().next() {
            Some((_, Ok(o))) => Ok(o.offset),
            Some((_, Err(e))) => Err(format!("source offsets of {tp}: {e}")),
            None => Err(format!("no source offsets for {tp}")),
        }
    }

    /// One fetch from every source leader at once, and the appends.
    async fn round(&mut self, partitions: &[Mirrored]) -> Result<(), String> {
        self.refresh(partitions).await?;
        let mut by_leader: BTreeMap<i32, Vec<(Mirrored, i64)>> = BTreeMap::new();
        for m in partitions {
            self.settle_start(m).await?;
            let source = TopicPartition::new(m.source_topic.clone(), m.tp.partition.0);
            let Some(leader) = self.admin.core().leader(&source).filter(|l| *l >= 0) else {
                self.refreshed = None;
                self.manager.update_status(&m.tp, &self.settings.name, |s| {
                    s.error = Some(format!("the source has no leader for {source}"))
                });
                continue;
            };
            let Some(p) = self.manager.replicas.get(&m.tp) else {
                continue;
            };
            by_leader
                .entry(leader)
                .or_default()
                .push((m.clone(), p.log_end_offset()));
        }
        if by_leader.is_empty() {
            tokio::time::sleep(RETRY_BACKOFF).await;
            return Ok(());
        }
        let mut fetches = tokio::task::JoinSet::new();
        for (leader, wanted) in by_leader {
            let core = Arc::clone(self.admin.core());
            fetches.spawn(async move {
                let r = fetch(&core, leader, &wanted).await;
                (wanted, r)
            });
        }
        let mut failed = None;
        let mut errors = false;
        while let Some(joined) = fetches.join_next().await {
            let Ok((wanted, r)) = joined else { continue };
            match r {
                Ok(resp) => errors |= self.apply(&wanted, resp).await,
                Err(e) => failed = Some(e),
            }
        }
        if errors && failed.is_none() {
            // Some partitions answered an error (leaders moving, a topic being made): not
            // again at once.
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
        failed.map_or(Ok(()), Err)
    }

    /// Append what one leader answered, and note each partition's lag. Returns whether a
    /// partition failed.
    async fn apply(&mut self, wanted: &[(Mirrored, i64)], resp: FetchResponse) -> bool {
        let now = crate::now_ms();
        let mut errors = false;
        let mut answers: HashMap<(String, i32), _> = HashMap::new();
        for t in resp.responses {
            for p in t.partitions {
                answers.insert((t.topic.0.to_string(), p.partition_index), p);
            }
        }
        for (m, offset) in wanted {
            let Some(d) = answers.remove(&(m.source_topic.clone(), m.tp.partition.0)) else {
                continue;
            };
            let Some(p) = self.manager.replicas.get(&m.tp) else {
                continue;
            };
            let link = self.settings.name.clone();
            match ErrorCode::try_from_code(d.error_code) {
                None => {
                    let records = d.records.unwrap_or_default();
                    let (p2, offset) = (Arc::clone(&p), *offset);
                    let appended = if records.is_empty() {
                        Ok(Some(offset))
                    } else {
                        let buf = BytesMut::from(&records[..]);
                        sluice_rt::task::spawn_blocking(move || {
                            p2.append_as_mirror(buf, offset, now)
                        })
                        .await
                        .unwrap_or_else(|e| {
                            Err(crate::replica::partition::AppendError::Code(
                                ErrorCode::UnknownServerError,
                                e.to_string(),
                            ))
                        })
                    };
                    match appended {
                        Ok(Some(_)) => {
                            let end = p.log_end_offset();
                            self.manager.update_status(&m.tp, &link, |s| {
                                s.fetched(d.high_watermark, end, now)
                            });
                        }
                        Ok(None) => debug!(partition = %m.tp, "dropping a stale mirror fetch"),
                        Err(e) => {
                            warn!(partition = %m.tp, error = %e.message(), "cannot append mirrored records");
                            errors = true;
                            self.manager
                                .update_status(&m.tp, &link, |s| s.error = Some(e.message()));
                        }
                    }
                }
                Some(ErrorCode::OffsetOutOfRange) => {
                    self.out_of_range(m, &p, *offset, d.log_start_offset).await
                }
                Some(code) => {
                    // Leaders moved, a topic is being created: new metadata next round.
                    errors = true;
                    self.refreshed = None;
                    self.manager.update_status(&m.tp, &link, |s| {
                        s.error = Some(format!("the source answered {code:?}"))
                    });
                }
            }
        }
        errors
    }

    /// The source no longer has the offset this mirror would copy next: behind its log
    /// start (retention), start over there; beyond its end (a source truncated or
    /// recreated), stop with an error rather than lose or mix records.
    async fn out_of_range(
        &mut self,
        m: &Mirrored,
        p: &Arc<crate::replica::partition::Partition>,
        offset: i64,
        source_start: i64,
    ) {
        let link = self.settings.name.clone();
        if source_start >= 0 && offset < source_start {
            info!(partition = %m.tp, from = offset, to = source_start, "the source deleted what the mirror still misses: starting at its log start");
            let (p, now) = (Arc::clone(p), crate::now_ms());
            let r = sluice_rt::task::spawn_blocking(move || {
                p.truncate_fully_and_start_at(source_start, now)
            })
            .await;
            if !matches!(r, Ok(Ok(()))) {
                warn!(partition = %m.tp, "cannot restart the mirror partition at the source's log start");
            }
            return;
        }
        let message = format!(
            "the source partition ends below offset {offset} that this mirror already has: was the source topic truncated or recreated?"
        );
        warn!(partition = %m.tp, "{message}");
        self.manager
            .update_status(&m.tp, &link, |s| s.error = Some(message));
        tokio::time::sleep(RETRY_BACKOFF).await;
    }

    /// Every `consumer.offset.sync.ms` (with `consumer.offset.sync.enable`): the committed
    /// offsets of the chosen source groups on the link's mirror topics, copied as they are
    /// (the offsets are the same here), for the groups this broker coordinates. The commit
    /// is made from outside the group (generation -1), which the coordinator refuses while
    /// the group has members here: once consumers run on this cluster, their offsets are
    /// theirs. A topic that starts being promoted gets a copy at once, and once one has
    /// been made in full it is reported as synced (at once without offset sync).
    async fn maybe_sync_groups(&mut self, mirrors: &[(String, String)], promoting: &[String]) {
        let before = self.promotion_synced.len();
        self.promotion_synced.retain(|t| promoting.contains(t));
        let unsynced: Vec<String> = promoting
            .iter()
            .filter(|t| !self.promotion_synced.contains(*t))
            .cloned()
            .collect();
        let retry = self
            .groups_tried
            .is_none_or(|t| t.elapsed() >= GROUP_SYNC_RETRY);
        if self.group_sync_wanted(mirrors, promoting) && retry {
            let now = tokio::time::Instant::now();
            self.groups_tried = Some(now);
            if self.sync_groups(mirrors).await {
                self.groups_synced = Some(now);
                self.promotion_synced.extend(unsynced);
            }
        } else if !self.settings.offset_sync {
            self.promotion_synced.extend(unsynced);
        }
        if self.promotion_synced.len() != before || !promoting.is_empty() {
            self.manager
                .set_promotion_synced(&self.settings.name, self.promotion_synced.clone());
        }
    }

    /// Whether a copy of group offsets is owed: the last complete one is older than
    /// `consumer.offset.sync.ms`, or a topic being promoted has not had its last one.
    fn group_sync_wanted(&self, mirrors: &[(String, String)], promoting: &[String]) -> bool {
        let period = Duration::from_millis(self.settings.offset_sync_ms);
        self.settings.offset_sync
            && !mirrors.is_empty()
            && (self.groups_synced.is_none_or(|t| t.elapsed() >= period)
                || promoting.iter().any(|t| !self.promotion_synced.contains(t)))
    }

    /// One copy of the chosen groups' offsets (see [`Self::maybe_sync_groups`]); false if
    /// the source's groups could not be listed or a group's offsets not copied.
    async fn sync_groups(&mut self, mirrors: &[(String, String)]) -> bool {
        let image = self.manager.metadata.current();
        let Some(offsets_partitions) = image
            .topic(crate::group::coordinator::OFFSETS_TOPIC)
            .map(|t| t.partitions.len() as i32)
            .filter(|n| *n > 0)
        else {
            // No group has been stored here yet: the offsets topic comes first (created as
            // FindCoordinator would); the copy is made on the next try.
            if let Err(e) = self.manager.topics.ensure_offsets_topic().await {
                debug!(link = self.settings.name, error = ?e, "creating the offsets topic");
            }
            return false;
        };
        let coordinated = |group: &str| {
            let p = crate::group::coordinator::partition_for(group, offsets_partitions);
            self.manager
                .replicas
                .get(&TopicPartition::new(
                    crate::group::coordinator::OFFSETS_TOPIC,
                    p,
                ))
                .is_some_and(|p| p.is_leader())
        };
        let Ok(listed) = self.admin.list_groups(&[]).await else {
            return false;
        };
        let mut complete = true;
        for g in listed {
            if !self.settings.syncs_group(&g.group_id) || !coordinated(&g.group_id) {
                continue;
            }
            let Ok(rows) = self.admin.list_group_offsets(&g.group_id, None).await else {
                complete = false;
                continue;
            };
            let mut wanted: Vec<(String, i32, i64, i32, Option<String>)> = Vec::new();
            for (tp, committed) in rows {
                let Some(c) = committed else { continue };
                for (mirror, _) in mirrors.iter().filter(|(_, s)| *s == tp.topic) {
                    wanted.push((
                        mirror.clone(),
                        tp.partition.0,
                        c.offset,
                        -1,
                        c.metadata.clone(),
                    ));
                }
            }
            if wanted.is_empty() {
                continue;
            }
            let topics: Vec<(String, Vec<i32>)> = {
                let mut by: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for (t, p, ..) in &wanted {
                    by.entry(t.clone()).or_default().push(*p);
                }
                by.into_iter().collect()
            };
            let have = self
                .manager
                .groups
                .fetch(g.group_id.clone(), Some(topics), false, (None, -1))
                .await
                .unwrap_or_default();
            wanted.retain(|(t, p, o, ..)| {
                !have.iter().any(|(ht, hp, v)| {
                    ht == t && hp == p && matches!(v, Ok(Some(v)) if v.offset == *o)
                })
            });
            if wanted.is_empty() {
                continue;
            }
            let count = wanted.len();
            let r = self
                .manager
                .groups
                .commit(crate::group::coordinator::CommitRequest {
                    group_id: g.group_id.clone(),
                    generation: -1,
                    member_id: String::new(),
                    instance_id: None,
                    version: 8,
                    offsets: wanted,
                })
                .await;
            match r {
                Ok(codes) if codes.iter().all(Option::is_none) => {
                    debug!(
                        group = g.group_id,
                        count, "copied group offsets from the source"
                    )
                }
                Ok(codes) => {
                    // Refused because the group is alive here: its offsets are its own now.
                    debug!(group = g.group_id, ?codes, "group offsets not copied")
                }
                Err(e) => {
                    debug!(group = g.group_id, error = ?e, "group offsets not copied");
                    complete = false;
                }
            }
        }
        complete
    }

    /// Every `topic.config.sync.ms`: each source topic whose name matches one of the link's
    /// patterns and that has no topic of its name here gets a mirror topic (internal topics
    /// never: they are each cluster's own).
    async fn maybe_discover_topics(&mut self) {
        let due = self
            .discovered
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(self.settings.config_sync_ms));
        if !due || self.patterns.is_empty() {
            return;
        }
        self.discovered = Some(tokio::time::Instant::now());
        let names = match self.admin.list_topics(false).await {
            Ok(n) => n,
            Err(e) => {
                debug!(link = self.settings.name, error = %e, "listing the source's topics");
                return;
            }
        };
        let image = self.manager.metadata.current();
        for name in names {
            if name.starts_with("__")
                || !self.patterns.matches(&name)
                || image.topic(&name).is_some()
            {
                continue;
            }
            let mut spec = CreateTopicSpec {
                name: name.clone(),
                num_partitions: -1,
                replication_factor: -1,
                assignments: Vec::new(),
                configs: vec![(MIRROR_LINK.to_string(), Some(self.settings.name.clone()))],
            };
            if let Err((code, e)) = super::prepare_mirror_spec(&image, &mut spec).await {
                debug!(link = self.settings.name, topic = name, ?code, error = %e, "not mirroring a matching source topic yet");
                continue;
            }
            let created = self
                .manager
                .controller
                .api()
                .create_topics(std::slice::from_ref(&spec), false)
                .await;
            match created.as_ref().map(|v| v.first()) {
                Ok(Some(Ok(_))) => {
                    info!(
                        link = self.settings.name,
                        topic = name,
                        "mirroring a source topic that matches the link's patterns"
                    )
                }
                other => {
                    debug!(link = self.settings.name, topic = name, result = ?other, "could not create a mirror topic for a matching source topic")
                }
            }
        }
    }

    /// Every `acl.sync.ms` (with `acl.sync.enable`): the source's ACLs that this cluster
    /// lacks are created; those the link copied and the source has since deleted are deleted.
    /// ACLs made here stay. What the link copied is told by the ACLs' ids
    /// ([`sluice_metadata::config::copied_acl_id`]), so whichever broker syncs, after any
    /// restart, follows deletions made meanwhile.
    async fn maybe_sync_acls(&mut self) {
        let due = self
            .acls_synced
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(self.settings.acl_sync_ms));
        if !due || !self.settings.acl_sync {
            return;
        }
        self.acls_synced = Some(tokio::time::Instant::now());
        let source: HashSet<AclBinding> = match self.admin.describe_acls(&AclFilter::any()).await {
            Ok(a) => a.into_iter().collect(),
            Err(e) => {
                debug!(link = self.settings.name, error = %e, "reading the source's ACLs");
                return;
            }
        };
        let image = self.manager.metadata.current();
        let local: HashSet<&AclBinding> = image.acls.values().collect();
        let missing: Vec<AclBinding> = source
            .iter()
            .filter(|b| !local.contains(b))
            .cloned()
            .collect();
        let link = &self.settings.name;
        let gone: Vec<AclFilter> = image
            .acls
            .iter()
            .filter(|(id, b)| !source.contains(*b) && **id == copied_acl_id(link, b))
            .map(|(_, b)| AclFilter::exact(b))
            .collect();
        let api = self.manager.controller.api();
        if !missing.is_empty() {
            let r = api.copy_acls(link, &missing).await;
            info!(
                link = self.settings.name,
                count = missing.len(),
                ok = matches!(&r, Ok(v) if v.iter().all(Result::is_ok)),
                "copied ACLs from the source"
            );
        }
        if !gone.is_empty() {
            let r = api.delete_acls(&gone).await;
            info!(
                link = self.settings.name,
                count = gone.len(),
                ok = matches!(&r, Ok(v) if v.iter().all(Result::is_ok)),
                "deleted ACLs the source deleted"
            );
        }
    }

    /// Every `topic.config.sync.ms`: mirror topics grow with their source's partition count,
    /// and take the source's synced topic configs.
    async fn maybe_sync_topics(&mut self, topics: &[(String, String)]) {
        let due = self
            .synced
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(self.settings.config_sync_ms));
        if !due || topics.is_empty() {
            return;
        }
        self.synced = Some(tokio::time::Instant::now());
        let names: Vec<String> = topics.iter().map(|(_, s)| s.clone()).collect();
        let Ok(cluster) = self.admin.core().refresh(&names).await else {
            return;
        };
        let image = self.manager.metadata.current();
        for (topic, source) in topics {
            let Some(src) = cluster.topics.get(source).filter(|t| t.error.is_none()) else {
                continue;
            };
            let have = image.topic(topic).map_or(0, |t| t.partitions.len()) as i32;
            let want = src.partitions.len() as i32;
            if want > have {
                info!(
                    topic,
                    from = have,
                    to = want,
                    "the source topic grew: adding partitions to its mirror"
                );
                let r = self
                    .manager
                    .controller
                    .api()
                    .create_partitions(topic, want, None, false)
                    .await;
                if !matches!(r, Ok(Ok(()))) {
                    warn!(topic, result = ?r, "could not add partitions to the mirror topic");
                }
            }
            self.sync_configs(topic, source, &image.topic_configs(topic))
                .await;
        }
    }

    async fn sync_configs(&self, topic: &str, source: &str, local: &BTreeMap<String, String>) {
        let described = self
            .admin
            .describe_configs(&[ConfigResource::Topic(source.to_string())])
            .await;
        let Ok(Some(Ok(entries))) = described.map(|v| v.into_iter().next()) else {
            return;
        };
        let mut changes = Vec::new();
        for key in SYNCED_TOPIC_CONFIGS {
            // Only what the source sets on the topic itself; its broker defaults are its own.
            let theirs = entries
                .iter()
                .find(|e| e.name == *key && e.source == 1)
                .and_then(|e| e.value.clone());
            if theirs.as_ref() != local.get(*key) {
                changes.push((key.to_string(), theirs));
            }
        }
        if changes.is_empty() {
            return;
        }
        debug!(topic, ?changes, "syncing topic configs from the source");
        let r = self
            .manager
            .controller
            .api()
            .alter_topic_configs(topic, &changes, false)
            .await;
        if !matches!(r, Ok(Ok(()))) {
            warn!(topic, result = ?r, "could not sync the mirror topic's configs");
        }
    }
}

/// One Fetch to a source leader for `wanted` (partition, offset to copy from).
async fn fetch(
    core: &Arc<sluice_client::cluster::ClusterCore>,
    leader: i32,
    wanted: &[(Mirrored, i64)],
) -> Result<FetchResponse, String> {
    let conn = core
        .connection_to_node(leader)
        .await
        .map_err(|e| format!("source broker {leader}: {e}"))?;
    let version = conn
        .version_for(ApiKey::Fetch)
        .map_err(|e| e.to_string())?
        .min(FETCH_VERSION_MAX);
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (m, offset) in wanted {
        let part = FetchPartition::default()
            .with_partition(m.tp.partition.0)
            .with_current_leader_epoch(-1)
            .with_fetch_offset(*offset)
            .with_log_start_offset(-1)
            .with_partition_max_bytes(PARTITION_MAX_BYTES);
        match topics
            .iter_mut()
            .find(|t| t.topic.0.as_str() == m.source_topic)
        {
            Some(t) => t.partitions.push(part),
            None => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(m.source_topic.clone())))
                    .with_partitions(vec![part]),
            ),
        }
    }
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(FETCH_MAX_WAIT_MS)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_MAX_BYTES)
        .with_isolation_level(0)
        .with_session_epoch(-1)
        .with_topics(topics);
    let resp: FetchResponse = conn
        .call_at(&req, version)
        .await
        .map_err(|e| format!("fetch from source broker {leader}: {e}"))?;
    if let Some(code) = ErrorCode::try_from_code(resp.error_code) {
        return Err(format!("source broker {leader} answered {code:?}"));
    }
    Ok(resp)
}
