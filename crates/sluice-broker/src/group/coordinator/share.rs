//! Share groups (KIP-932) in the coordinator task: each group is a [`ShareGroup`] state
//! machine beside the classic, consumer and streams groups. Members' sessions
//! (`share.session.timeout.ms`) are checked whenever the group is touched: a member that
//! stopped heartbeating is removed at the next heartbeat or describe of its group, which is
//! the only time its absence shows.
//!
//! Share groups are kept in memory: a coordinator failover starts each group empty and its
//! members rejoin at their next heartbeat (UNKNOWN_MEMBER_ID). Writing them to
//! `__consumer_offsets` as Kafka's records 10-15 is still to come.

use std::collections::BTreeMap;

use sluice_metadata::config::group::{group_value, RESOURCE_GROUP};

use super::*;
use crate::group::share_group::{
    ShareAnswer, ShareGroup, ShareHeartbeat, ShareSettings, TopicsView,
};

/// A ShareGroupHeartbeat for the coordinator.
#[derive(Clone, Debug)]
pub struct ShareHeartbeatRequest {
    pub group_id: String,
    pub req: ShareHeartbeat,
}

/// A successful heartbeat's answer, with the interval the member is told and the topic ids
/// of the topics it names.
#[derive(Clone, Debug)]
pub struct ShareHeartbeatAnswer {
    pub answer: ShareAnswer,
    pub heartbeat_interval_ms: i32,
    pub topics: TopicsView,
}

pub type ShareHeartbeatResult = Result<ShareHeartbeatAnswer, consumer_group::Refusal>;

impl Coordinator {
    fn share_settings(&self, group: &str) -> (ShareSettings, i32) {
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
        let max_size = broker("group.share.max.size")
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(200);
        (
            ShareSettings {
                max_size,
                session_timeout_ms: int("share.session.timeout.ms", 45_000),
            },
            int("share.heartbeat.interval.ms", 5_000).clamp(1, i64::from(i32::MAX)) as i32,
        )
    }

    /// The cluster's topics as share groups see them: name → (id, partitions).
    fn share_topics(&self) -> TopicsView {
        let image = self.metadata.current();
        image
            .topics
            .values()
            .map(|t| {
                let id = u128::from_be_bytes(*t.id.as_bytes());
                (t.name.clone(), (id, t.partitions.len() as i32))
            })
            .collect()
    }

    pub(super) fn share_heartbeat(
        &mut self,
        hb: ShareHeartbeatRequest,
        now: i64,
    ) -> ShareHeartbeatResult {
        let group = hb.group_id;
        let other = self.machine.groups().any(|g| g.id == group)
            || self.consumer.contains_key(&group)
            || self.streams.contains_key(&group);
        if other {
            return Err((
                ErrorCode::GroupIdNotFound,
                format!("Group {group} is not a share group."),
            ));
        }
        // A member of a group this coordinator does not have (it lost it in a failover: share
        // groups are not persisted yet) is told UNKNOWN_MEMBER_ID, so that it joins again;
        // Kafka's GROUP_ID_NOT_FOUND would end it.
        let (settings, heartbeat_interval_ms) = self.share_settings(&group);
        let topics = self.share_topics();
        let g = self.share.entry(group.clone()).or_default();
        g.expire(now);
        let answer = g.heartbeat(hb.req, &topics, settings, now);
        if g.members.is_empty() && g.group_epoch == 0 {
            // A join refused before the group had anyone: no group was made.
            self.share.remove(&group);
        }
        Ok(ShareHeartbeatAnswer {
            answer: answer?,
            heartbeat_interval_ms,
            topics,
        })
    }

    pub(super) fn share_describe(
        &mut self,
        group: &str,
        now: i64,
    ) -> Result<ShareGroup, consumer_group::Refusal> {
        self.route(group).map_err(|c| (c, String::new()))?;
        match self.share.get_mut(group) {
            Some(g) => {
                g.expire(now);
                Ok(g.clone())
            }
            None => Err((
                ErrorCode::GroupIdNotFound,
                format!("Group {group} not found."),
            )),
        }
    }

    /// DeleteGroups of a share group (None: not one): only an empty one.
    pub(super) fn share_delete(&mut self, group: &str, now: i64) -> Option<Option<ErrorCode>> {
        let g = self.share.get_mut(group)?;
        g.expire(now);
        if !g.members.is_empty() {
            return Some(Some(ErrorCode::NonEmptyGroup));
        }
        self.share.remove(group);
        Some(None)
    }

    /// Drop the share groups `mine` selects (their partition moved away); how many.
    pub(super) fn share_unload(&mut self, mine: &dyn Fn(&str) -> bool) -> usize {
        let before = self.share.len();
        self.share.retain(|g, _| !mine(g));
        before - self.share.len()
    }
}
