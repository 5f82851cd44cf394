//! Streams groups (KIP-1071) in the coordinator task: each group is a [`StreamsGroup`]
//! state machine beside the classic and consumer groups; members' sessions, rebalance
//! timeouts and the delay of a new group's first assignment
//! (`streams.initial.rebalance.delay.ms`) are timed here.
//!
//! Every change of a group is written to `__consumer_offsets` as Kafka's records
//! ([`crate::group::streams_group::records`]) before the member is answered, so the
//! coordinator that takes the group's partition over resumes the group where it was.

use std::collections::BTreeMap;

use sluice_metadata::config::group::{group_value, RESOURCE_GROUP};

use super::consumer::{answer_when_replicated, due_members, write_error, MemberTimers};
use super::*;
use crate::group::streams_group::records::{changes, tombstones};
use crate::group::streams_group::topology::Topology;
use crate::group::streams_group::{
    MemberState as StreamsMemberState, Refusal, StreamsAnswer, StreamsGroup, StreamsHeartbeat,
    StreamsSettings, TopicsView,
};

/// A StreamsGroupHeartbeat for the coordinator.
#[derive(Clone, Debug)]
pub struct StreamsHeartbeatRequest {
    pub group_id: String,
    pub req: StreamsHeartbeat,
}

/// A successful heartbeat's answer, with the intervals the member is told.
#[derive(Clone, Debug)]
pub struct StreamsHeartbeatAnswer {
    pub answer: StreamsAnswer,
    pub heartbeat_interval_ms: i32,
}

pub type StreamsHeartbeatResult = Result<StreamsHeartbeatAnswer, Refusal>;

/// A group's effective settings: broker `group.streams.*` configs, overridden by the
/// group's own `streams.*` configs.
struct Settings {
    machine: StreamsSettings,
    session_timeout_ms: i64,
    heartbeat_interval_ms: i32,
    initial_delay_ms: i64,
}

impl Coordinator {
    fn streams_settings(&self, group: &str) -> Settings {
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
        let max_size = broker("group.streams.max.size")
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(usize::MAX);
        let initial_delay_ms = int("streams.initial.rebalance.delay.ms", 3_000).max(0);
        Settings {
            machine: StreamsSettings {
                max_size,
                num_standby: int("streams.num.standby.replicas", 0).clamp(0, 1_000) as usize,
                delay_initial_assignment: initial_delay_ms > 0,
            },
            session_timeout_ms: int("streams.session.timeout.ms", 45_000),
            heartbeat_interval_ms: int("streams.heartbeat.interval.ms", 5_000)
                .clamp(1, i64::from(i32::MAX)) as i32,
            initial_delay_ms,
        }
    }

    /// The topics a topology needs, as the cluster has them now.
    fn streams_topics(&self, g: &StreamsGroup, topology: Option<&Topology>) -> TopicsView {
        let image = self.metadata.current();
        g.required_topics(topology)
            .into_iter()
            .filter_map(|n| {
                let t = image.topic(&n)?;
                let id = u128::from_be_bytes(*t.id.as_bytes());
                Some((n, (id, t.partitions.len() as i32)))
            })
            .collect()
    }

    /// One StreamsGroupHeartbeat (join, heartbeat, acknowledgement or leave), answered once
    /// the group's change is replicated.
    pub(super) fn streams_heartbeat(
        &mut self,
        hb: StreamsHeartbeatRequest,
        tx: oneshot::Sender<StreamsHeartbeatResult>,
        now: i64,
    ) {
        let written = self.streams_heartbeat_write(hb, now);
        answer_when_replicated(&self.replicas, tx, written);
    }

    fn streams_heartbeat_write(
        &mut self,
        hb: StreamsHeartbeatRequest,
        now: i64,
    ) -> Result<(StreamsHeartbeatAnswer, Option<Appended>), Refusal> {
        let group = hb.group_id;
        let req = hb.req;
        let epoch = req.member_epoch;
        let not_streams = || {
            Err((
                ErrorCode::GroupIdNotFound,
                format!("Group {group} is not a streams group."),
            ))
        };
        if self.consumer.contains_key(&group) {
            return not_streams();
        }
        let mut convert_classic = false;
        if let Some(classic) = self.machine.group(&group) {
            if !self.streams.contains_key(&group) {
                if epoch != 0
                    || (classic.state != GroupState::Empty && classic.state != GroupState::Dead)
                {
                    return not_streams();
                }
                // An empty classic group (perhaps only offsets) becomes a streams group,
                // once the join is accepted (below).
                convert_classic = true;
            }
        }
        let settings = self.streams_settings(&group);
        let before = self.streams.get(&group).cloned();
        let mut g = match &before {
            Some(g) => g.clone(),
            None if epoch == 0 => StreamsGroup::new(&group),
            None => {
                return Err((
                    ErrorCode::GroupIdNotFound,
                    format!("Streams group {group} not found."),
                ))
            }
        };
        let new_group = g.group_epoch == 0;
        let answer = if epoch < 0 {
            g.leave(
                &req.member_id,
                req.instance_id.as_deref(),
                epoch,
                req.shutdown_application,
            )?;
            StreamsAnswer {
                member_id: req.member_id.clone(),
                member_epoch: epoch,
                tasks: None,
                status: Vec::new(),
                endpoint_information_epoch: 0,
                endpoints: None,
                to_create: Vec::new(),
            }
        } else {
            let topics = self.streams_topics(&g, req.topology.as_ref());
            g.heartbeat(&req, &topics, &settings.machine)?
        };
        let mut records = Vec::new();
        if convert_classic {
            records.push((
                OffsetsKey::Group {
                    group: group.clone(),
                }
                .encode(),
                None,
            ));
        }
        records.extend(changes(before.as_ref(), &g));
        let appended = if records.is_empty() {
            None
        } else {
            Some(
                self.append_batch(&group, records, None)
                    .map_err(|code| (write_error(code), String::new()))?,
            )
        };
        if convert_classic {
            self.forget_classic(&group);
        }
        if new_group && g.delaying {
            self.streams_delays
                .insert(group.clone(), now + settings.initial_delay_ms);
        }
        // The member's timers.
        let key = (group.clone(), answer.member_id.clone());
        match g.members.get(&answer.member_id) {
            None => {
                if epoch < 0 {
                    info!(group, member = req.member_id, "streams group member left");
                }
                self.streams_timers.remove(&key);
            }
            // A static member that left for a while: its session runs on.
            Some(_) if epoch < 0 => info!(
                group,
                member = req.member_id,
                "static streams group member left temporarily"
            ),
            Some(m) => {
                let rebalance =
                    (m.state == StreamsMemberState::UnrevokedTasks).then(|| {
                        match self.streams_timers.get(&key).and_then(|t| t.rebalance) {
                            Some((at, e)) if e == m.member_epoch => (at, e),
                            _ => (
                                now + i64::from(m.rebalance_timeout_ms.max(0)),
                                m.member_epoch,
                            ),
                        }
                    });
                self.streams_timers.insert(
                    key,
                    MemberTimers {
                        session: now + settings.session_timeout_ms,
                        rebalance,
                    },
                );
            }
        }
        // A static member that replaced another: the old one's timers go.
        self.streams_timers
            .retain(|(gid, m), _| gid != &group || g.members.contains_key(m));
        self.streams.insert(group, g);
        Ok((
            StreamsHeartbeatAnswer {
                answer,
                heartbeat_interval_ms: settings.heartbeat_interval_ms,
            },
            appended,
        ))
    }

    /// Keep a change the coordinator itself made (a timer, a delayed assignment), written
    /// first (a failed write is logged: the partition is moving away, and its next
    /// coordinator reads the group as last written).
    fn streams_keep(&mut self, before: &StreamsGroup, after: StreamsGroup, what: &str) {
        let group = after.group_id.clone();
        let records = changes(Some(before), &after);
        if !records.is_empty() {
            if let Err(code) = self.append(&group, records) {
                warn!(group, ?code, what, "cannot persist a streams group change");
            }
        }
        self.streams.insert(group, after);
    }

    /// The next time a streams member's timer or a delayed assignment is due.
    pub(super) fn streams_deadline(&self) -> Option<i64> {
        self.streams_timers
            .values()
            .flat_map(|t| std::iter::once(t.session).chain(t.rebalance.map(|r| r.0)))
            .chain(self.streams_delays.values().copied())
            .min()
    }

    /// Fence members whose session ended or that did not revoke in time; compute the
    /// delayed first assignments that are due.
    pub(super) fn streams_tick(&mut self, now: i64) {
        let due: Vec<String> = self
            .streams_delays
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(g, _)| g.clone())
            .collect();
        for group in due {
            self.streams_delays.remove(&group);
            let Some(before) = self.streams.get(&group).cloned() else {
                continue;
            };
            let mut g = before.clone();
            g.assign_now();
            info!(
                group,
                epoch = g.assignment_epoch,
                "streams group assigned after its initial delay"
            );
            self.streams_keep(&before, g, "delayed assignment");
        }
        let groups = &self.streams;
        let fenced = due_members(&mut self.streams_timers, now, |group, member, epoch| {
            groups
                .get(group)
                .and_then(|g| g.members.get(member))
                .is_some_and(|m| {
                    m.member_epoch == epoch && m.state == StreamsMemberState::UnrevokedTasks
                })
        });
        for (group, member, why) in fenced {
            self.streams_timers.remove(&(group.clone(), member.clone()));
            let Some(before) = self.streams.get(&group).cloned() else {
                continue;
            };
            let mut g = before.clone();
            if g.remove(&member) {
                info!(
                    group,
                    member,
                    why,
                    epoch = g.group_epoch,
                    "streams group member fenced"
                );
                self.streams_keep(&before, g, "fenced member");
            }
        }
    }

    /// Take over the streams groups just loaded: every member's session (and the rebalance
    /// timeout of those revoking) starts again, so a member that is gone is fenced after
    /// its session, as in Kafka; a first assignment still delayed waits its delay again.
    pub(super) fn streams_loaded(&mut self, groups: BTreeMap<String, StreamsGroup>, now: i64) {
        for (id, mut g) in groups {
            let settings = self.streams_settings(&id);
            for m in g.members.values() {
                let rebalance = (m.state == StreamsMemberState::UnrevokedTasks).then(|| {
                    (
                        now + i64::from(m.rebalance_timeout_ms.max(0)),
                        m.member_epoch,
                    )
                });
                self.streams_timers.insert(
                    (id.clone(), m.member_id.clone()),
                    MemberTimers {
                        session: now + settings.session_timeout_ms,
                        rebalance,
                    },
                );
            }
            if g.assignment_epoch == 0 && g.group_epoch > 0 && !g.members.is_empty() {
                g.delaying = true;
                self.streams_delays
                    .insert(id.clone(), now + settings.initial_delay_ms);
            }
            self.machine.forget(&id);
            self.streams.insert(id, g);
        }
    }

    /// Drop the streams groups of groups `mine` says moved away.
    pub(super) fn streams_unload(&mut self, mine: &dyn Fn(&str) -> bool) -> usize {
        let before = self.streams.len();
        self.streams.retain(|g, _| !mine(g));
        self.streams_timers.retain(|(g, _), _| !mine(g));
        self.streams_delays.retain(|g, _| !mine(g));
        before - self.streams.len()
    }

    /// StreamsGroupDescribe of one group.
    pub(super) fn streams_describe(&self, group: &str) -> Result<StreamsGroup, Refusal> {
        match self.streams.get(group) {
            Some(g) => Ok(g.clone()),
            None if self.machine.group(group).is_some() || self.consumer.contains_key(group) => {
                Err((
                    ErrorCode::GroupIdNotFound,
                    format!("Group {group} is not a streams group."),
                ))
            }
            None => Err((
                ErrorCode::GroupIdNotFound,
                format!("Group {group} not found."),
            )),
        }
    }

    /// DeleteGroups of a streams group (Some: it is one): only an empty one, with its
    /// offsets (its internal topics stay, as in Kafka).
    pub(super) fn streams_delete(&mut self, group: &str) -> Option<Option<ErrorCode>> {
        let g = self.streams.get(group)?;
        if !g.members.is_empty() {
            return Some(Some(ErrorCode::NonEmptyGroup));
        }
        let group_records = tombstones(g);
        let committed = self.offsets.remove(group).unwrap_or_default();
        let mut records = self.tombstones(group, committed.into_keys());
        records.extend(group_records);
        self.streams.remove(group);
        self.streams_delays.remove(group);
        Some(self.append(group, records).err())
    }

    /// Kafka's check of an offset commit to a streams group (None: not one): a group without
    /// members takes commits without a member; otherwise the member must exist and commit at
    /// its epoch, or an older one for tasks it had then (STALE_MEMBER_EPOCH; in a
    /// transaction ILLEGAL_GENERATION), through OffsetCommit v9+.
    pub(super) fn streams_commit_check(
        &self,
        group: &str,
        epoch: i32,
        member_id: &str,
        instance_id: Option<&str>,
        version: Option<i16>,
        partitions: &[(String, i32)],
    ) -> Option<Result<(), ErrorCode>> {
        let g = self.streams.get(group)?;
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
        if version.is_some_and(|v| v < 9) {
            return Some(Err(ErrorCode::UnsupportedVersion));
        }
        Some(g.commit_epoch_ok(m, epoch, partitions).map_err(|why| {
            tracing::debug!(group, member_id, why, "stale streams commit");
            if txn {
                ErrorCode::IllegalGeneration
            } else {
                ErrorCode::StaleMemberEpoch
            }
        }))
    }

    /// OffsetFetch v9+ from a member of a streams group: a member at its epoch.
    pub(super) fn streams_fetch_check(
        &self,
        group: &str,
        member: Option<&str>,
        epoch: i32,
    ) -> Result<(), ErrorCode> {
        let Some(g) = self.streams.get(group) else {
            return Ok(());
        };
        if member.is_none() && epoch < 0 {
            return Ok(());
        }
        match g.members.get(member.unwrap_or_default()) {
            None => Err(ErrorCode::UnknownMemberId),
            Some(m) if m.member_epoch != epoch => Err(ErrorCode::StaleMemberEpoch),
            Some(_) => Ok(()),
        }
    }

    /// A classic JoinGroup or a consumer group heartbeat for a streams group: an empty one
    /// is dropped for it (its offsets stay); one with members refuses.
    pub(super) fn streams_make_way(&mut self, group: &str) -> Result<(), ErrorCode> {
        let Some(g) = self.streams.get(group) else {
            return Ok(());
        };
        if !g.members.is_empty() {
            return Err(ErrorCode::InconsistentGroupProtocol);
        }
        self.append(group, tombstones(g)).map_err(write_error)?;
        self.streams.remove(group);
        self.streams_delays.remove(group);
        Ok(())
    }

    /// Offsets of streams groups without members expire `offsets.retention.minutes` after
    /// their commit; a group left with neither members nor offsets is deleted (Kafka's
    /// cleanup).
    pub(super) fn expire_streams_offsets(&mut self, now: i64) {
        let empty: Vec<String> = self
            .streams
            .values()
            .filter(|g| g.members.is_empty())
            .map(|g| g.group_id.clone())
            .collect();
        for group in empty {
            let (expired, records) = self.expire_committed(&group, now);
            if expired > 0 {
                info!(
                    group,
                    offsets = expired,
                    "expiring offsets of an empty streams group"
                );
            }
            let mut records = records;
            if self.offsets.get(&group).is_none_or(|c| c.is_empty()) {
                info!(group, "deleting an empty streams group without offsets");
                self.offsets.remove(&group);
                if let Some(g) = self.streams.remove(&group) {
                    records.extend(tombstones(&g));
                }
                self.streams_delays.remove(&group);
            }
            if !records.is_empty() {
                if let Err(code) = self.append(&group, records) {
                    warn!(
                        group,
                        ?code,
                        "cannot write the tombstones of an empty streams group"
                    );
                }
            }
        }
    }
}
