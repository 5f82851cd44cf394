//! The consumer group protocol (KIP-848) in the coordinator task: each group is a
//! [`ConsumerGroup`] state machine beside the classic groups; every change is written to the
//! group's `__consumer_offsets` partition in Kafka's records (acks=all, answered once
//! replicated) and read back when a coordinator takes the partition over; members' sessions
//! and rebalance timeouts are timed here.

use std::collections::{BTreeMap, BTreeSet};

use sluice_metadata::config::group::{group_value, RESOURCE_GROUP};
use sluice_metadata::config::mirror::FullMatch;
use sluice_metadata::Uuid;

use super::*;
use crate::group::assignor::{Partitions, ServerAssignor};
use crate::group::consumer_group::records::{changes, tombstones};
use crate::group::consumer_group::{
    ConsumerGroup, GroupSettings, HeartbeatRequest, Refusal, Topics,
};
use crate::group::reconcile::MemberState;

/// A ConsumerGroupHeartbeat for the coordinator.
#[derive(Clone, Debug)]
pub struct ConsumerHeartbeat {
    pub group_id: String,
    pub req: HeartbeatRequest<Uuid>,
}

/// A successful heartbeat's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerHeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    /// -1 on a leave (Kafka sends none then).
    pub heartbeat_interval_ms: i32,
    pub assignment: Option<Partitions<Uuid>>,
}

pub type ConsumerHeartbeatResult = Result<ConsumerHeartbeatAnswer, Refusal>;

/// A consumer group as ConsumerGroupDescribe shows it.
#[derive(Clone, Debug)]
pub struct ConsumerGroupView {
    pub group: ConsumerGroup<Uuid>,
    pub state: &'static str,
    pub assignor: &'static str,
}

/// A member's timers: its session, and its rebalance timeout while it has partitions to
/// revoke (deadline, the member epoch it was armed at).
#[derive(Clone, Copy, Debug)]
pub(super) struct MemberTimers {
    pub(super) session: i64,
    pub(super) rebalance: Option<(i64, i32)>,
}

/// A group's effective settings: broker `group.consumer.*` configs, overridden by the
/// group's own configs.
pub(super) struct ConsumerSettings {
    pub(super) group: GroupSettings,
    session_timeout_ms: i64,
    heartbeat_interval_ms: i32,
}

/// The members to fence now: those whose session ended, and those whose rebalance timeout
/// ended while still revoking at the epoch it was set for (`revoking(group, member,
/// epoch)`); rebalance timeouts that ended are cleared. Shared by consumer and streams
/// groups.
pub(super) fn due_members(
    timers: &mut HashMap<(String, String), MemberTimers>,
    now: i64,
    revoking: impl Fn(&str, &str, i32) -> bool,
) -> Vec<(String, String, &'static str)> {
    let mut fenced = Vec::new();
    for ((group, member), t) in timers.iter_mut() {
        if t.session <= now {
            fenced.push((group.clone(), member.clone(), "session timeout"));
        } else if let Some((_, epoch)) = t.rebalance.filter(|(at, _)| *at <= now) {
            if revoking(group, member, epoch) {
                fenced.push((group.clone(), member.clone(), "rebalance timeout"));
            }
        }
        if t.rebalance.is_some_and(|(at, _)| at <= now) {
            t.rebalance = None;
        }
    }
    fenced
}

/// Kafka's mapping of a failed coordinator write to what a member is told
/// (`CoordinatorOperationExceptionHelper`).
pub(super) fn write_error(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::NotLeaderOrFollower | ErrorCode::KafkaStorageError => ErrorCode::NotCoordinator,
        ErrorCode::NotCoordinator => ErrorCode::NotCoordinator,
        ErrorCode::MessageTooLarge
        | ErrorCode::RecordListTooLarge
        | ErrorCode::InvalidFetchSize => ErrorCode::UnknownServerError,
        _ => ErrorCode::CoordinatorNotAvailable,
    }
}

/// The assignors this broker offers (`group.consumer.assignors`, the first the default).
pub fn offered_assignors(config: &sluice_metadata::BrokerConfig) -> Vec<ServerAssignor> {
    let named: Vec<ServerAssignor> = config
        .value("group.consumer.assignors")
        .unwrap_or_default()
        .split(',')
        .filter_map(|a| ServerAssignor::from_name(a.trim()))
        .collect();
    if named.is_empty() {
        vec![ServerAssignor::Uniform, ServerAssignor::Range]
    } else {
        named
    }
}

fn refusal(code: ErrorCode) -> Refusal {
    (code, String::new())
}

/// Answer a group heartbeat once what it wrote is replicated (as Kafka's coordinator does
/// after its write), or with the write's error mapped as Kafka maps it.
pub(super) fn answer_when_replicated<T: Send + 'static>(
    replicas: &Arc<ReplicaManager>,
    tx: oneshot::Sender<Result<T, Refusal>>,
    written: Result<(T, Option<Appended>), Refusal>,
) {
    match written {
        Err(r) => drop(tx.send(Err(r))),
        Ok((answer, None)) => drop(tx.send(Ok(answer))),
        Ok((answer, Some(appended))) => {
            let replicas = Arc::clone(replicas);
            tokio::spawn(async move {
                let outcome = replicas
                    .await_replication(&[&appended], OFFSETS_COMMIT_TIMEOUT)
                    .await;
                let result = match outcome.first().and_then(|o| o.error()) {
                    None => Ok(answer),
                    Some(code) => Err(refusal(write_error(code))),
                };
                let _ = tx.send(result);
            });
        }
    }
}

impl Coordinator {
    pub(super) fn consumer_settings(&self, group: &str) -> ConsumerSettings {
        let config = self.metadata.config();
        let broker = |k: &str| config.value(k);
        let image = self.metadata.current();
        let empty = BTreeMap::new();
        let own = image
            .configs
            .get(&(RESOURCE_GROUP, group.to_string()))
            .unwrap_or(&empty);
        let int = |key: &str, default: i64| {
            group_value(own, &broker, key)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(default)
        };
        let assignors = offered_assignors(&config);
        let max_size = broker("group.consumer.max.size")
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(usize::MAX);
        ConsumerSettings {
            group: GroupSettings {
                assignors,
                max_size,
            },
            session_timeout_ms: int("consumer.session.timeout.ms", 45_000),
            heartbeat_interval_ms: int("consumer.heartbeat.interval.ms", 5_000)
                .clamp(1, i64::from(i32::MAX)) as i32,
        }
    }

    /// Resolve the regular expressions `g`'s members (and `extra`) use against the topics
    /// the cluster has now (whole names, as RE2J's `matches`; internal topics included, as
    /// in Kafka), each compiled and matched once per metadata image.
    pub(super) fn resolve_regexes(&mut self, g: &mut ConsumerGroup<Uuid>, extra: Option<&str>) {
        let image = self.metadata.current();
        let used: BTreeSet<String> = g
            .members
            .values()
            .filter_map(|m| m.subscribed_topic_regex.clone())
            .chain(extra.filter(|r| !r.is_empty()).map(str::to_string))
            .collect();
        g.resolved = used
            .into_iter()
            .map(|regex| {
                let matched = match self.regex_cache.get(&regex) {
                    Some((at, matched)) if *at == image.offset => matched.clone(),
                    _ => {
                        let matched: BTreeSet<String> = match FullMatch::new(&regex) {
                            Ok(re) => image
                                .topics
                                .keys()
                                .filter(|t| re.is_match(t))
                                .cloned()
                                .collect(),
                            Err(_) => BTreeSet::new(),
                        };
                        self.regex_cache
                            .insert(regex.clone(), (image.offset, matched.clone()));
                        matched
                    }
                };
                (regex, matched)
            })
            .collect();
        let resolved = &g.resolved;
        self.regex_cache.retain(|r, _| {
            resolved.contains_key(r) || self.consumer.values().any(|g| g.resolved.contains_key(r))
        });
    }

    /// The topics `g`'s members and `names` subscribe to (names and what their expressions
    /// match), as the cluster has them now.
    pub(super) fn subscribed_topics(
        &self,
        g: &ConsumerGroup<Uuid>,
        names: Option<&[String]>,
    ) -> Topics<Uuid> {
        let image = self.metadata.current();
        let wanted: BTreeSet<&str> = g
            .members
            .values()
            .flat_map(|m| g.member_topics(m))
            .chain(g.resolved.values().flatten())
            .map(String::as_str)
            .chain(names.unwrap_or_default().iter().map(String::as_str))
            .collect();
        wanted
            .into_iter()
            .filter_map(|n| {
                image
                    .topic(n)
                    .map(|t| (n.to_string(), (t.id, t.partitions.len() as i32)))
            })
            .collect()
    }

    /// One ConsumerGroupHeartbeat (join, heartbeat, acknowledgement or leave): the group's
    /// change is written before the answer is sent.
    pub(super) fn consumer_heartbeat(
        &mut self,
        hb: ConsumerHeartbeat,
        tx: oneshot::Sender<ConsumerHeartbeatResult>,
        now: i64,
    ) {
        let written = self.consumer_heartbeat_write(hb, now);
        answer_when_replicated(&self.replicas, tx, written);
    }

    fn consumer_heartbeat_write(
        &mut self,
        hb: ConsumerHeartbeat,
        now: i64,
    ) -> Result<(ConsumerHeartbeatAnswer, Option<Appended>), Refusal> {
        let group = hb.group_id;
        let req = hb.req;
        let epoch = req.member_epoch;
        let mut records = Vec::new();
        let mut forget_classic = false;
        let mut converted = None;
        if self.streams.contains_key(&group) {
            return Err((
                ErrorCode::GroupIdNotFound,
                format!("Group {group} is not a consumer group."),
            ));
        }
        if let Some(classic) = self.machine.group(&group) {
            if epoch != 0 {
                return Err((
                    ErrorCode::GroupIdNotFound,
                    format!("Consumer group {group} not found."),
                ));
            }
            // An empty classic group (perhaps only offsets) becomes a consumer group; one
            // with members is converted, its members staying on the classic protocol.
            if classic.state != GroupState::Empty && classic.state != GroupState::Dead {
                converted = Some(self.convert_classic(&group)?);
            }
            forget_classic = true;
            records.push((
                OffsetsKey::Group {
                    group: group.clone(),
                }
                .encode(),
                None,
            ));
        }
        let before = match converted {
            Some(_) => None,
            None => self.consumer.get(&group).cloned(),
        };
        if before.is_none() && converted.is_none() && epoch != 0 {
            return Err((
                ErrorCode::GroupIdNotFound,
                format!("Consumer group {group} not found."),
            ));
        }
        let settings = self.consumer_settings(&group);
        let mut g = before
            .clone()
            .or(converted)
            .unwrap_or_else(|| ConsumerGroup::new(&group));
        let converted_members: Vec<(String, i64)> = if forget_classic {
            g.members
                .values()
                .filter_map(|m| {
                    m.classic
                        .as_ref()
                        .map(|c| (m.member_id.clone(), i64::from(c.session_timeout_ms)))
                })
                .collect()
        } else {
            Vec::new()
        };
        let answer = if epoch < 0 {
            g.leave(&req.member_id, req.instance_id.as_deref(), epoch)?;
            ConsumerHeartbeatAnswer {
                member_id: req.member_id.clone(),
                member_epoch: epoch,
                heartbeat_interval_ms: -1,
                assignment: None,
            }
        } else {
            self.resolve_regexes(&mut g, req.subscribed_topic_regex.as_deref());
            let topics = self.subscribed_topics(&g, req.subscribed_topic_names.as_deref());
            let r = g.heartbeat(&req, &topics, &settings.group)?;
            ConsumerHeartbeatAnswer {
                member_id: r.member_id,
                member_epoch: r.member_epoch,
                heartbeat_interval_ms: settings.heartbeat_interval_ms,
                assignment: r.assignment,
            }
        };
        records.extend(changes(before.as_ref(), &g));
        let appended = if records.is_empty() {
            None
        } else {
            Some(
                self.append_batch(&group, records, None)
                    .map_err(|code| refusal(write_error(code)))?,
            )
        };
        if forget_classic {
            self.forget_classic(&group);
            for (member, session) in converted_members {
                self.consumer_timers.insert(
                    (group.clone(), member),
                    MemberTimers {
                        session: now + session,
                        rebalance: None,
                    },
                );
            }
        }
        // Timers of the members this call touched.
        let member = answer.member_id.clone();
        let key = (group.clone(), member.clone());
        match g.members.get(&member) {
            None => {
                self.consumer_timers.remove(&key);
            }
            Some(m) => {
                let old = self.consumer_timers.get(&key).and_then(|t| t.rebalance);
                let rebalance =
                    (m.assignment.state == MemberState::UnrevokedPartitions).then(|| match old {
                        Some((at, e)) if e == m.assignment.member_epoch => (at, e),
                        _ => (
                            now + i64::from(m.rebalance_timeout_ms.max(0)),
                            m.assignment.member_epoch,
                        ),
                    });
                let session = if epoch == -2 {
                    // A static member that left keeps its place until its session ends.
                    self.consumer_timers
                        .get(&key)
                        .map_or(now + settings.session_timeout_ms, |t| t.session)
                } else {
                    now + settings.session_timeout_ms
                };
                self.consumer_timers
                    .insert(key, MemberTimers { session, rebalance });
            }
        }
        // A static member that replaced another: the old one's timers go.
        self.consumer_timers
            .retain(|(gid, m), _| gid != &group || g.members.contains_key(m));
        self.consumer.insert(group, g);
        Ok((answer, appended))
    }

    /// The next time a member's session or rebalance timeout ends.
    pub(super) fn consumer_deadline(&self) -> Option<i64> {
        self.consumer_timers
            .values()
            .flat_map(|t| std::iter::once(t.session).chain(t.rebalance.map(|r| r.0)))
            .min()
    }

    /// Fence the members whose session ended, or that did not revoke in time.
    pub(super) fn consumer_tick(&mut self, now: i64) {
        let groups = &self.consumer;
        let fenced = due_members(&mut self.consumer_timers, now, |group, member, epoch| {
            groups
                .get(group)
                .and_then(|g| g.members.get(member))
                .is_some_and(|m| {
                    m.assignment.member_epoch == epoch
                        && m.assignment.state == MemberState::UnrevokedPartitions
                })
        });
        for (group, member, why) in fenced {
            self.consumer_timers
                .remove(&(group.clone(), member.clone()));
            let Some(before) = self.consumer.get(&group).cloned() else {
                continue;
            };
            let mut g = before.clone();
            if !g.remove(&member) {
                continue;
            }
            info!(
                group,
                member,
                why,
                epoch = g.group_epoch,
                "consumer group member fenced"
            );
            let records = changes(Some(&before), &g);
            if let Err(code) = self.append(&group, records) {
                warn!(group, ?code, "cannot persist a fenced member");
            }
            self.consumer.insert(group, g);
        }
    }

    /// Arm every member's session (and the rebalance timeout of those revoking) of groups
    /// just loaded: a member that is gone is fenced after its session, as in Kafka.
    pub(super) fn consumer_loaded(
        &mut self,
        groups: BTreeMap<String, ConsumerGroup<Uuid>>,
        now: i64,
    ) {
        for (id, g) in groups {
            let settings = self.consumer_settings(&id);
            for m in g.members.values() {
                let rebalance =
                    (m.assignment.state == MemberState::UnrevokedPartitions).then(|| {
                        (
                            now + i64::from(m.rebalance_timeout_ms.max(0)),
                            m.assignment.member_epoch,
                        )
                    });
                let session = m.classic.as_ref().map_or(settings.session_timeout_ms, |c| {
                    i64::from(c.session_timeout_ms)
                });
                self.consumer_timers.insert(
                    (id.clone(), m.member_id.clone()),
                    MemberTimers {
                        session: now + session,
                        rebalance,
                    },
                );
            }
            self.machine.forget(&id);
            self.consumer.insert(id, g);
        }
    }

    /// Drop the consumer groups of groups `mine` says moved away.
    pub(super) fn consumer_unload(&mut self, mine: &dyn Fn(&str) -> bool) -> usize {
        let before = self.consumer.len();
        self.consumer.retain(|g, _| !mine(g));
        self.consumer_timers.retain(|(g, _), _| !mine(g));
        before - self.consumer.len()
    }

    /// Offsets of consumer groups without members expire `offsets.retention.minutes` after
    /// they were committed (Kafka's base for consumer groups, which keep no time they
    /// became empty); a group left with neither members nor offsets is deleted, as Kafka's
    /// cleanup does.
    pub(super) fn expire_consumer_offsets(&mut self, now: i64) {
        let empty: Vec<String> = self
            .consumer
            .values()
            .filter(|g| g.members.is_empty())
            .map(|g| g.group_id.clone())
            .collect();
        for group in empty {
            let (expired, mut records) = self.expire_committed(&group, now);
            let no_offsets = self.offsets.get(&group).is_none_or(|c| c.is_empty());
            if no_offsets {
                self.offsets.remove(&group);
                if let Some(g) = self.consumer.remove(&group) {
                    info!(group, "deleting an empty consumer group without offsets");
                    records.extend(tombstones(&g));
                }
            }
            if expired > 0 {
                info!(
                    group,
                    offsets = expired,
                    "expiring offsets of an empty consumer group"
                );
            }
            if !records.is_empty() {
                if let Err(code) = self.append(&group, records) {
                    warn!(
                        group,
                        ?code,
                        "cannot write the tombstones of an empty consumer group"
                    );
                }
            }
        }
    }

    /// Expire `group`'s offsets committed `offsets.retention.minutes` ago: how many, and
    /// their tombstones.
    pub(super) fn expire_committed(&mut self, group: &str, now: i64) -> (usize, Records) {
        let retention = self.config.offsets_retention_ms;
        let expired: Vec<(String, i32)> = self
            .offsets
            .get(group)
            .map(|c| {
                c.iter()
                    .filter(|(_, v)| now - v.commit_timestamp >= retention)
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        let records = self.tombstones(group, expired.iter().cloned());
        if let Some(c) = self.offsets.get_mut(group) {
            for k in &expired {
                c.remove(k);
            }
        }
        (expired.len(), records)
    }

    /// ConsumerGroupDescribe of one group.
    pub(super) fn consumer_describe(&self, group: &str) -> Result<ConsumerGroupView, Refusal> {
        match self.consumer.get(group) {
            Some(g) => Ok(ConsumerGroupView {
                group: g.clone(),
                state: g.state().name(),
                assignor: g.assignor(&self.consumer_settings(group).group).name(),
            }),
            None if self.machine.group(group).is_some() => Err((
                ErrorCode::GroupIdNotFound,
                format!("Group {group} is not a consumer group."),
            )),
            None => Err((
                ErrorCode::GroupIdNotFound,
                format!("Group {group} not found."),
            )),
        }
    }

    /// DeleteGroups of a consumer group (Some: it is one): only an empty one, with its
    /// offsets.
    pub(super) fn consumer_delete(&mut self, group: &str) -> Option<Option<ErrorCode>> {
        let g = self.consumer.get(group)?;
        if !g.members.is_empty() {
            return Some(Some(ErrorCode::NonEmptyGroup));
        }
        let mut records = tombstones(g);
        let committed = self.offsets.remove(group).unwrap_or_default();
        records.extend(self.tombstones(group, committed.into_keys()));
        self.consumer.remove(group);
        Some(self.append(group, records).err())
    }

    /// A classic JoinGroup for a consumer group: an empty one is deleted (its offsets stay)
    /// so the classic group can start; one with members refuses (the online migration of
    /// a group between the protocols is not built).
    pub(super) fn consumer_delete_for_classic(&mut self, group: &str) -> Result<(), ErrorCode> {
        let Some(g) = self.consumer.get(group) else {
            return Ok(());
        };
        if !g.members.is_empty() {
            return Err(ErrorCode::InconsistentGroupProtocol);
        }
        self.append(group, tombstones(g)).map_err(write_error)?;
        self.consumer.remove(group);
        Ok(())
    }

    /// Kafka's check of an offset commit to a consumer group (None: not a consumer group):
    /// a group without members takes commits without a member; otherwise the member must
    /// exist and commit at its current epoch (STALE_MEMBER_EPOCH; ILLEGAL_GENERATION in a
    /// transaction), through OffsetCommit v9+.
    pub(super) fn consumer_commit_check(
        &self,
        group: &str,
        epoch: i32,
        member_id: &str,
        instance_id: Option<&str>,
        version: Option<i16>,
    ) -> Option<Result<(), ErrorCode>> {
        let g = self.consumer.get(group)?;
        let txn = version.is_none();
        if epoch < 0 && g.members.is_empty() {
            return Some(Ok(()));
        }
        if txn && epoch == -1 && member_id.is_empty() && instance_id.is_none() {
            return Some(Ok(()));
        }
        let Some(m) = g.members.get(member_id) else {
            return Some(Err(ErrorCode::UnknownMemberId));
        };
        let classic = m.classic.is_some();
        if !classic && version.is_some_and(|v| v < 9) {
            return Some(Err(ErrorCode::UnsupportedVersion));
        }
        if epoch != m.assignment.member_epoch {
            return Some(Err(if txn || classic {
                ErrorCode::IllegalGeneration
            } else {
                ErrorCode::StaleMemberEpoch
            }));
        }
        Some(Ok(()))
    }

    /// OffsetFetch v9+ from a member of a consumer group: it must be a member at its epoch.
    pub(super) fn consumer_fetch_check(
        &self,
        group: &str,
        member: Option<&str>,
        epoch: i32,
    ) -> Result<(), ErrorCode> {
        let Some(g) = self.consumer.get(group) else {
            return Ok(());
        };
        if member.is_none() && epoch < 0 {
            return Ok(());
        }
        match g.members.get(member.unwrap_or_default()) {
            None => Err(ErrorCode::UnknownMemberId),
            Some(m) if m.assignment.member_epoch != epoch => Err(ErrorCode::StaleMemberEpoch),
            Some(_) => Ok(()),
        }
    }
}
