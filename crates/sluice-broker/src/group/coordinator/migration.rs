//! A group moving between the classic and the consumer protocol while its members are
//! restarted one by one (Kafka's online migration, `group.consumer.migration.policy`
//! bidirectional): a consumer-protocol member joining a classic group with members turns it
//! into a consumer group whose existing members keep speaking the classic protocol, and
//! classic JoinGroup / SyncGroup / Heartbeat / LeaveGroup requests are served for them
//! there (see [`crate::group::consumer_group::classic`]). A group whose members all speak
//! the classic protocol again stays a consumer group (Kafka turns it back into a classic
//! group; both serve its members alike).

use sluice_client::group::protocol::{decode_assignment, decode_subscription, encode_assignment};
use sluice_metadata::Uuid;

use super::consumer::{write_error, MemberTimers};
use super::*;
use crate::group::assignor::Partitions;
use crate::group::consumer_group::classic::{ClassicJoin, ClassicSource};
use crate::group::consumer_group::records::changes;

/// Names to topic ids (what the cluster has now; unknown topics are left out).
fn to_ids(
    image: &sluice_metadata::MetadataImage,
    partitions: &[TopicPartition],
) -> Partitions<Uuid> {
    let mut out = Partitions::new();
    for tp in partitions {
        if let Some(t) = image.topic(&tp.topic) {
            out.entry(t.id).or_default().insert(tp.partition.0);
        }
    }
    out
}

fn to_names(
    image: &sluice_metadata::MetadataImage,
    partitions: &Partitions<Uuid>,
) -> Vec<TopicPartition> {
    partitions
        .iter()
        .filter_map(|(id, ps)| image.topic_names.get(id).map(|n| (n, ps)))
        .flat_map(|(n, ps)| ps.iter().map(move |p| TopicPartition::new(n.clone(), *p)))
        .collect()
}

impl Coordinator {
    /// The classic group `group` as a consumer group (its members on the classic protocol,
    /// each keeping its assignment), or why it cannot be converted.
    pub(super) fn convert_classic(
        &self,
        group: &str,
    ) -> Result<ConsumerGroup<Uuid>, consumer_group::Refusal> {
        let not = |why: &str| {
            Err((
                ErrorCode::GroupIdNotFound,
                format!("Cannot upgrade classic group {group} to consumer group because {why}."),
            ))
        };
        let Some(classic) = self.machine.group(group) else {
            return not("it does not exist");
        };
        if classic.protocol_type.as_deref() != Some("consumer") {
            return not("the group does not use the consumer embedded protocol");
        }
        let image = self.metadata.current();
        let mut members = Vec::new();
        for m in classic.members.values() {
            let chosen = classic
                .protocol
                .as_deref()
                .and_then(|p| m.protocols.iter().find(|(n, _)| n == p))
                .or(m.protocols.first());
            let Some(subscription) = chosen.and_then(|(_, b)| decode_subscription(b).ok()) else {
                return not("the embedded consumer protocol is malformed");
            };
            let Ok(assigned) = decode_assignment(&m.assignment) else {
                return not("the embedded consumer protocol is malformed");
            };
            members.push(ClassicSource {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocols: m
                    .protocols
                    .iter()
                    .map(|(n, b)| (n.clone(), b.to_vec()))
                    .collect(),
                topics: subscription.topics,
                rack_id: None,
                assigned: to_ids(&image, &assigned),
            });
        }
        let names: Vec<String> = members.iter().flat_map(|m| m.topics.clone()).collect();
        let empty = ConsumerGroup::new(group);
        let topics = self.subscribed_topics(&empty, Some(&names));
        info!(
            group,
            generation = classic.generation,
            "converting a classic group to a consumer group"
        );
        Ok(ConsumerGroup::from_classic(
            group,
            classic.generation,
            members,
            &topics,
        ))
    }

    /// Drop the classic group `group` (it became a consumer group): its parked JoinGroup and
    /// SyncGroup requests are told to rejoin.
    pub(super) fn forget_classic(&mut self, group: &str) {
        self.answer_parked(&|g| g == group, ErrorCode::RebalanceInProgress);
        self.machine.forget(group);
    }

    /// Write a consumer group's change (from `before`) and keep it; the answer is sent once
    /// the write is replicated (`fail` builds the answer for an error).
    fn commit_consumer_change<A: Send + 'static>(
        &mut self,
        before: &ConsumerGroup<Uuid>,
        after: ConsumerGroup<Uuid>,
        answer: A,
        fail: fn(ErrorCode) -> A,
        tx: oneshot::Sender<A>,
    ) {
        let group = after.group_id.clone();
        let records = changes(Some(before), &after);
        let appended = if records.is_empty() {
            None
        } else {
            match self.append_batch(&group, records, None) {
                Ok(a) => Some(a),
                Err(code) => return drop(tx.send(fail(write_error(code)))),
            }
        };
        self.consumer.insert(group, after);
        let Some(appended) = appended else {
            return drop(tx.send(answer));
        };
        let replicas = Arc::clone(&self.replicas);
        tokio::spawn(async move {
            let outcome = replicas
                .await_replication(&[&appended], OFFSETS_COMMIT_TIMEOUT)
                .await;
            let _ = tx.send(match outcome.first().and_then(|o| o.error()) {
                None => answer,
                Some(code) => fail(write_error(code)),
            });
        });
    }

    /// The session of a classic member (its own timeout) starts again.
    fn touch_classic(&mut self, group: &str, member: &str, session_ms: i32, now: i64) {
        let t = self
            .consumer_timers
            .entry((group.to_string(), member.to_string()))
            .or_insert(MemberTimers {
                session: now,
                rebalance: None,
            });
        t.session = now + i64::from(session_ms);
    }

    /// JoinGroup from a classic member of a consumer group.
    pub(super) fn consumer_classic_join(
        &mut self,
        req: JoinRequest,
        tx: oneshot::Sender<JoinOutcome>,
        now: i64,
    ) {
        let Some(before) = self.consumer.get(&req.group_id).cloned() else {
            return drop(tx.send(join_error(ErrorCode::UnknownMemberId, &req.member_id)));
        };
        let mut member_id = req.member_id.clone();
        if member_id.is_empty() {
            member_id = Uuid::new_v4().to_string();
            if req.version >= 4 && req.instance_id.is_none() {
                // KIP-394: the member rejoins with the id it is given.
                return drop(tx.send(join_error(ErrorCode::MemberIdRequired, &member_id)));
            }
        }
        let image = self.metadata.current();
        let Some(subscription) = req
            .protocols
            .first()
            .and_then(|(_, b)| decode_subscription(b).ok())
        else {
            return drop(tx.send(join_error(ErrorCode::InconsistentGroupProtocol, &member_id)));
        };
        let join = ClassicJoin {
            member_id: member_id.clone(),
            instance_id: req.instance_id.clone(),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocol_type: req.protocol_type.clone(),
            protocols: req
                .protocols
                .iter()
                .map(|(n, b)| (n.clone(), b.to_vec()))
                .collect(),
            topics: subscription.topics.clone(),
            owned: to_ids(&image, &subscription.owned),
            rack_id: None,
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
        };
        let settings = self.consumer_settings(&req.group_id);
        let mut g = before.clone();
        self.resolve_regexes(&mut g, None);
        let topics = self.subscribed_topics(&g, Some(&join.topics));
        let (epoch, protocol) = match g.classic_join(&join, &topics, &settings.group) {
            Ok(r) => r,
            Err((code, _)) => return drop(tx.send(join_error(code, &member_id))),
        };
        tracing::debug!(
            group = req.group_id,
            member = member_id,
            epoch,
            "classic member joined a consumer group"
        );
        self.touch_classic(&req.group_id, &member_id, req.session_timeout_ms, now);
        let outcome = JoinOutcome {
            error: None,
            generation: epoch,
            protocol_type: Some("consumer".into()),
            protocol: Some(protocol),
            leader: String::new(),
            member_id: member_id.clone(),
            skip_assignment: false,
            members: Vec::new(),
        };
        self.commit_consumer_change(&before, g, outcome, |code| join_error(code, ""), tx);
    }

    /// SyncGroup from a classic member of a consumer group: its current assignment.
    pub(super) fn consumer_classic_sync(
        &mut self,
        req: SyncRequest,
        tx: oneshot::Sender<SyncOutcome>,
        now: i64,
    ) {
        let Some(g) = self.consumer.get(&req.group_id) else {
            return drop(tx.send(sync_error(ErrorCode::UnknownMemberId)));
        };
        let synced = g.classic_sync(
            &req.member_id,
            req.instance_id.as_deref(),
            req.generation,
            req.protocol_type.as_deref(),
            req.protocol_name.as_deref(),
        );
        let session = g
            .members
            .get(&req.member_id)
            .and_then(|m| m.classic.as_ref())
            .map(|c| c.session_timeout_ms);
        let outcome = match synced {
            Err(code) => sync_error(code),
            Ok((protocol, assigned)) => {
                let image = self.metadata.current();
                match encode_assignment(&to_names(&image, &assigned)) {
                    Ok(bytes) => SyncOutcome {
                        error: None,
                        protocol_type: Some("consumer".into()),
                        protocol: Some(protocol),
                        assignment: bytes,
                    },
                    Err(_) => sync_error(ErrorCode::UnknownServerError),
                }
            }
        };
        if let (None, Some(session)) = (outcome.error, session) {
            self.touch_classic(&req.group_id, &req.member_id, session, now);
        }
        let _ = tx.send(outcome);
    }

    /// Heartbeat from a classic member of a consumer group (None: not a consumer group).
    pub(super) fn consumer_classic_heartbeat(
        &mut self,
        group: &str,
        generation: i32,
        member: &str,
        instance: Option<&str>,
        now: i64,
    ) -> Option<Option<ErrorCode>> {
        let g = self.consumer.get(group)?;
        let result = g.classic_heartbeat(member, instance, generation);
        let session = g
            .members
            .get(member)
            .and_then(|m| m.classic.as_ref())
            .map(|c| c.session_timeout_ms);
        if let (Ok(()) | Err(ErrorCode::RebalanceInProgress), Some(session)) = (&result, session) {
            self.touch_classic(group, member, session, now);
        }
        Some(result.err())
    }

    /// LeaveGroup of members of a consumer group (classic members leaving, or an admin
    /// removing members): each leaves as with epoch -1.
    pub(super) fn consumer_classic_leave(
        &mut self,
        group: &str,
        members: &[(String, Option<String>)],
        tx: oneshot::Sender<Result<Vec<Option<ErrorCode>>, ErrorCode>>,
    ) {
        let Some(before) = self.consumer.get(group).cloned() else {
            return drop(tx.send(Err(ErrorCode::UnknownMemberId)));
        };
        let mut g = before.clone();
        let results: Vec<Option<ErrorCode>> = members
            .iter()
            .map(|(member, instance)| {
                let id = match instance {
                    Some(i) if member.is_empty() => g
                        .members
                        .values()
                        .find(|m| m.instance_id.as_deref() == Some(i.as_str()))
                        .map(|m| m.member_id.clone())
                        .unwrap_or_default(),
                    _ => member.clone(),
                };
                match g.leave(&id, instance.as_deref(), -1) {
                    Ok(_) => {
                        self.consumer_timers.remove(&(group.to_string(), id));
                        None
                    }
                    Err((code, _)) => Some(code),
                }
            })
            .collect();
        self.commit_consumer_change(&before, g, Ok(results), Err, tx);
    }
}
