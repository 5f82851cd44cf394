//! [`ShareSessions`]: the share sessions (KIP-932) a partition leader keeps for ShareFetch and
//! ShareAcknowledge, one per (group, member). A pure table: epochs and partition sets only.
//!
//! Epoch 0 opens a session (replacing the member's old one, whose records stay acquired
//! until their locks expire); each later request must carry the session's next epoch, and
//! both APIs advance the same counter; -1 closes it, after which the member's acquired records
//! are released. Kafka's rules (SharePartitionManager.newContext / acknowledgeSessionUpdate).

use std::collections::{BTreeSet, HashMap};

use sluice_metadata::Uuid;
use sluice_protocol::ErrorCode;

/// A partition of a share session: topic id and index.
pub type SharePartitionKey = (Uuid, i32);

struct Session {
    /// The epoch the next request must carry.
    next_epoch: i32,
    /// The connection that opened it: when that closes, so does the session.
    connection: u64,
    partitions: BTreeSet<SharePartitionKey>,
}

/// What a ShareFetch may do after its session was settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchSession {
    /// Every partition of the session (what the fetch reads).
    pub partitions: Vec<SharePartitionKey>,
    /// The session closed (epoch -1): acknowledge, release, fetch nothing.
    pub closed: bool,
    /// The session was opened by this request (every partition is answered).
    pub opened: bool,
}

/// All share sessions of one broker.
pub struct ShareSessions {
    sessions: HashMap<(String, String), Session>,
    /// `group.share.max.share.sessions` (2,000).
    max_sessions: usize,
}

fn next(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl ShareSessions {
    pub fn new(max_sessions: usize) -> Self {
        ShareSessions {
            sessions: HashMap::new(),
            max_sessions,
        }
    }

    /// Settle a ShareFetch's session, which came on `connection`: `added` partitions join
    /// it, `forgotten` ones leave.
    #[allow(clippy::too_many_arguments)]
    pub fn fetch(
        &mut self,
        connection: u64,
        group: &str,
        member: &str,
        epoch: i32,
        added: &[SharePartitionKey],
        forgotten: &[SharePartitionKey],
        has_acks: bool,
    ) -> Result<FetchSession, ErrorCode> {
        let key = (group.to_string(), member.to_string());
        match epoch {
            0 => {
                if has_acks {
                    return Err(ErrorCode::InvalidRequest);
                }
                if !self.sessions.contains_key(&key) && self.sessions.len() >= self.max_sessions {
                    return Err(ErrorCode::ShareSessionLimitReached);
                }
                let mut partitions: BTreeSet<SharePartitionKey> = added.iter().copied().collect();
                for f in forgotten {
                    partitions.remove(f);
                }
                let out = partitions.iter().copied().collect();
                self.sessions.insert(
                    key,
                    Session {
                        next_epoch: 1,
                        connection,
                        partitions,
                    },
                );
                Ok(FetchSession {
                    partitions: out,
                    closed: false,
                    opened: true,
                })
            }
            -1 => {
                let s = self
                    .sessions
                    .remove(&key)
                    .ok_or(ErrorCode::ShareSessionNotFound)?;
                let mut partitions = s.partitions;
                partitions.extend(added.iter().copied());
                Ok(FetchSession {
                    partitions: partitions.into_iter().collect(),
                    closed: true,
                    opened: false,
                })
            }
            n => {
                let s = self
                    .sessions
                    .get_mut(&key)
                    .ok_or(ErrorCode::ShareSessionNotFound)?;
                if s.next_epoch != n {
                    return Err(ErrorCode::InvalidShareSessionEpoch);
                }
                s.next_epoch = next(n);
                s.partitions.extend(added.iter().copied());
                // Acknowledgements for a partition being forgotten are still applied: the
                // caller acknowledges what the request names before this removal matters.
                for f in forgotten {
                    s.partitions.remove(f);
                }
                Ok(FetchSession {
                    partitions: s.partitions.iter().copied().collect(),
                    closed: false,
                    opened: false,
                })
            }
        }
    }

    /// Settle a ShareAcknowledge's session. Ok(Some(partitions)) when it closed the session
    /// (their records held by the member are to be released), Ok(None) otherwise.
    pub fn acknowledge(
        &mut self,
        group: &str,
        member: &str,
        epoch: i32,
    ) -> Result<Option<Vec<SharePartitionKey>>, ErrorCode> {
        let key = (group.to_string(), member.to_string());
        match epoch {
            0 => Err(ErrorCode::InvalidShareSessionEpoch),
            -1 => {
                let s = self
                    .sessions
                    .remove(&key)
                    .ok_or(ErrorCode::ShareSessionNotFound)?;
                Ok(Some(s.partitions.into_iter().collect()))
            }
            n => {
                let s = self
                    .sessions
                    .get_mut(&key)
                    .ok_or(ErrorCode::ShareSessionNotFound)?;
                if s.next_epoch != n {
                    return Err(ErrorCode::InvalidShareSessionEpoch);
                }
                s.next_epoch = next(n);
                Ok(None)
            }
        }
    }

    /// Close the member's session if `connection` opened it (that connection closed): its
    /// partitions, whose records the member holds are to be released.
    pub fn connection_closed(
        &mut self,
        connection: u64,
        group: &str,
        member: &str,
    ) -> Option<Vec<SharePartitionKey>> {
        let key = (group.to_string(), member.to_string());
        if self.sessions.get(&key)?.connection != connection {
            return None;
        }
        let s = self.sessions.remove(&key)?;
        Some(s.partitions.into_iter().collect())
    }

    /// Whether a session of `group` reads `partition`.
    pub fn group_reads(&self, group: &str, partition: &SharePartitionKey) -> bool {
        self.sessions
            .iter()
            .any(|((g, _), s)| g == group && s.partitions.contains(partition))
    }

    /// Sessions open now.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> SharePartitionKey {
        (Uuid::from_u128(7), p)
    }

    #[test]
    fn epochs_open_advance_and_close_one_session() {
        let mut s = ShareSessions::new(2);
        let opened = s
            .fetch(1, "g", "m", 0, &[tp(0), tp(1)], &[], false)
            .unwrap();
        assert!(opened.opened && !opened.closed);
        assert_eq!(opened.partitions, vec![tp(0), tp(1)]);
        assert_eq!(
            s.fetch(1, "g", "m", 2, &[], &[], false),
            Err(ErrorCode::InvalidShareSessionEpoch)
        );
        let f = s.fetch(1, "g", "m", 1, &[tp(2)], &[tp(0)], true).unwrap();
        assert_eq!(f.partitions, vec![tp(1), tp(2)]);
        // ShareAcknowledge shares the counter.
        assert_eq!(s.acknowledge("g", "m", 2), Ok(None));
        assert_eq!(
            s.acknowledge("g", "m", 2),
            Err(ErrorCode::InvalidShareSessionEpoch)
        );
        assert_eq!(
            s.acknowledge("g", "m", 0),
            Err(ErrorCode::InvalidShareSessionEpoch)
        );
        let closed = s.fetch(1, "g", "m", -1, &[], &[], true).unwrap();
        assert!(closed.closed);
        assert_eq!(closed.partitions, vec![tp(1), tp(2)]);
        assert_eq!(
            s.fetch(1, "g", "m", -1, &[], &[], false),
            Err(ErrorCode::ShareSessionNotFound)
        );
        assert_eq!(
            s.acknowledge("g", "m", 5),
            Err(ErrorCode::ShareSessionNotFound)
        );
        assert!(s.is_empty());
    }

    #[test]
    fn opening_checks_acknowledgements_and_the_session_limit() {
        let mut s = ShareSessions::new(1);
        assert_eq!(
            s.fetch(1, "g", "a", 0, &[tp(0)], &[], true),
            Err(ErrorCode::InvalidRequest)
        );
        s.fetch(1, "g", "a", 0, &[tp(0)], &[], false).unwrap();
        assert_eq!(
            s.fetch(1, "g", "b", 0, &[tp(0)], &[], false),
            Err(ErrorCode::ShareSessionLimitReached)
        );
        // Reopening one's own session is always allowed, and starts again at epoch 1.
        s.fetch(1, "g", "a", 1, &[], &[], false).unwrap();
        s.fetch(1, "g", "a", 0, &[tp(1)], &[], false).unwrap();
        assert_eq!(s.acknowledge("g", "a", 1), Ok(None));
        assert_eq!(s.acknowledge("g", "a", -1), Ok(Some(vec![tp(1)])));
        assert_eq!(s.len(), 0);
        // A connection's close ends the sessions it opened, not those opened since elsewhere.
        s.fetch(1, "g", "a", 0, &[tp(2)], &[], false).unwrap();
        s.fetch(2, "g", "a", 0, &[tp(3)], &[], false).unwrap();
        assert_eq!(s.connection_closed(1, "g", "a"), None);
        assert_eq!(s.connection_closed(2, "g", "a"), Some(vec![tp(3)]));
        assert!(s.is_empty());
    }
}
