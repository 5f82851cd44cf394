//! The leader epoch cache: for each leader epoch, the first offset written in it. Persisted as
//! `leader-epoch-checkpoint` in Kafka's checkpoint format (version 0, then `epoch offset`
//! lines). Used to answer "which epoch wrote this offset" and, with replication,
//! OffsetForLeaderEpoch.

use std::path::{Path, PathBuf};

use crate::checkpoint;
use crate::error::LogError;

pub const FILE_NAME: &str = "leader-epoch-checkpoint";

pub struct LeaderEpochCache {
    path: PathBuf,
    /// (epoch, start offset), both strictly increasing.
    entries: Vec<(i32, i64)>,
}

impl LeaderEpochCache {
    pub fn load(dir: &Path) -> Result<Self, LogError> {
        let path = dir.join(FILE_NAME);
        let entries = checkpoint::read_pairs(&path)?
            .into_iter()
            .filter_map(|(e, o)| Some((i32::try_from(e).ok()?, o)))
            .collect();
        Ok(Self { path, entries })
    }

    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|(e, _)| *e)
    }

    /// Record that `epoch` starts at `start_offset` if it is newer than the latest epoch.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<(), LogError> {
        if epoch < 0 || self.latest_epoch().is_some_and(|e| e >= epoch) {
            return Ok(());
        }
        self.entries.retain(|(_, o)| *o < start_offset);
        self.entries.push((epoch, start_offset));
        self.persist()
    }

    /// OffsetForLeaderEpoch, answered by the leader of epoch `current` for a replica or
    /// consumer whose latest epoch is `epoch`: the largest epoch here not above it and the
    /// offset where that epoch's records end (the start of the next epoch, or `log_end` for
    /// the latest). Kafka's answers, case by case:
    /// - `current` counts as starting at `log_end` when nothing was written in it yet (Kafka
    ///   records that entry when a replica becomes leader; here it is implied);
    /// - an epoch older than every epoch here (say the one a consumer saw on an empty
    ///   partition before a leader change) ends where the first known epoch starts, and is
    ///   answered as itself: the reader lost nothing, and a follower truncates there;
    /// - an epoch newer than every one here gets the latest and the log end;
    /// - a negative epoch has no answer.
    pub fn end_offset_for(
        &self,
        epoch: i32,
        log_end: i64,
        current: Option<i32>,
    ) -> Option<(i32, i64)> {
        if epoch < 0 {
            return None;
        }
        let implied = current
            .filter(|c| self.latest_epoch().is_none_or(|l| *c > l))
            .map(|c| (c, log_end));
        let entries = || self.entries.iter().copied().chain(implied);
        let Some((floor, _)) = entries().rfind(|(e, _)| *e <= epoch) else {
            return entries().next().map(|(_, start)| (epoch, start));
        };
        let end = entries()
            .find(|(e, _)| *e > epoch)
            .map_or(log_end, |(_, o)| o);
        Some((floor, end))
    }

    /// The epoch that wrote `offset` (the latest epoch starting at or before it).
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries
            .iter()
            .rev()
            .find(|(_, o)| *o <= offset)
            .map(|(e, _)| *e)
    }

    /// Forget epochs starting at or after `end_offset` (the log was truncated there).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<(), LogError> {
        let before = self.entries.len();
        self.entries.retain(|(_, o)| *o < end_offset);
        if self.entries.len() != before {
            self.persist()?;
        }
        Ok(())
    }

    fn persist(&self) -> Result<(), LogError> {
        let pairs: Vec<(i64, i64)> = self
            .entries
            .iter()
            .map(|(e, o)| (i64::from(*e), *o))
            .collect();
        checkpoint::write_pairs(&self.path, &pairs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_offsets_for_follower_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(c.end_offset_for(0, 0, None), None);
        c.assign(1, 0).unwrap();
        c.assign(3, 10).unwrap();
        c.assign(4, 25).unwrap();
        // The latest epoch ends at the log end.
        assert_eq!(c.end_offset_for(4, 40, Some(4)), Some((4, 40)));
        // Epoch 3 ends where 4 starts; an unknown epoch 2 maps to 1, which ends at 10.
        assert_eq!(c.end_offset_for(3, 40, Some(4)), Some((3, 25)));
        assert_eq!(c.end_offset_for(2, 40, None), Some((1, 10)));
        // Older than every epoch here: it ends where the first one starts (Kafka's answer).
        assert_eq!(c.end_offset_for(0, 40, None), Some((0, 0)));
        // A follower ahead in epochs (it led later) gets our latest.
        assert_eq!(c.end_offset_for(9, 40, None), Some((4, 40)));
        assert_eq!(c.end_offset_for(-1, 40, Some(4)), None);
        // A leader of epoch 6 that wrote nothing yet: epoch 4 ended at the log end.
        assert_eq!(c.end_offset_for(4, 40, Some(6)), Some((4, 40)));
        assert_eq!(c.end_offset_for(5, 40, Some(6)), Some((4, 40)));
        assert_eq!(c.end_offset_for(6, 40, Some(6)), Some((6, 40)));
    }

    /// The case that made librdkafka reset a reader: it took offset 0 at epoch 0 of an empty
    /// partition; a new leader (epoch 1) wrote nothing yet, or wrote from offset 0 on. Both
    /// times epoch 0 ends at 0, so the position is valid.
    #[test]
    fn an_epoch_that_wrote_nothing_ends_where_the_next_starts() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(c.end_offset_for(0, 0, Some(1)), Some((0, 0)));
        c.assign(1, 0).unwrap();
        assert_eq!(c.end_offset_for(0, 48, Some(1)), Some((0, 0)));
        assert_eq!(c.end_offset_for(1, 48, Some(1)), Some((1, 48)));
    }
}
