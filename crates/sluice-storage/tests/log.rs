//! Behaviour of a partition log on disk: append/read, roll, indexes, timestamp lookup,
//! retention, and recovery from crashes that leave torn or corrupt files.

use std::fs::OpenOptions as FsOpen;
use std::io::Write;
use std::path::Path;

use sluice_protocol::batch::{decode_records, BatchBuilder, BatchIter, RecordLimits};
use sluice_protocol::compression::Compression;
use sluice_protocol::types::TopicPartition;
use sluice_storage::log::OpenOptions;
use sluice_storage::{Log, LogConfig, LogError, LogManager};

const NOW: i64 = 1_700_000_000_000;
const TOPIC_ID: [u8; 16] = [1; 16];

fn batch(n: usize, ts: i64, codec: Compression) -> Vec<u8> {
    let mut b = BatchBuilder::new(codec);
    for i in 0..n {
        b.append(
            ts,
            Some(format!("k{i}").as_bytes()),
            Some(&[b'x'; 100]),
            &[],
        );
    }
    b.build(0).unwrap()
}

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 512,
        ..LogConfig::default()
    }
}

/// Read everything from `offset` and decode it.
fn read_all(log: &Log, from: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.log_end_offset() {
        let info = log.read(next, 1 << 20, log.log_end_offset(), true).unwrap();
        let Some(slice) = info.slice else { break };
        let mut buf = Vec::new();
        slice.read_into(&mut buf).unwrap();
        for item in BatchIter::new(&buf) {
            let Ok((h, bytes)) = item else { break };
            for r in decode_records(bytes, RecordLimits::default()).unwrap() {
                if r.offset >= next {
                    out.push(r.offset);
                }
            }
            next = next.max(h.next_offset());
        }
    }
    out
}

fn reopen(dir: &Path, config: LogConfig, clean: bool, recovery_point: i64) -> Log {
    Log::open(
        &dir.join("t-0"),
        tp(),
        config,
        OpenOptions {
            clean_shutdown: clean,
            recovery_point,
            log_start_offset: 0,
            now_ms: NOW,
        },
    )
    .unwrap()
}

#[test]
fn appends_roll_segments_and_read_back_from_any_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    for i in 0..100 {
        let info = log
            .append_as_leader(batch(3, NOW + i, Compression::None), 2, NOW)
            .unwrap();
        assert_eq!(info.first_offset, i * 3);
        assert_eq!(info.last_offset, i * 3 + 2);
    }
    assert_eq!(log.log_end_offset(), 300);
    assert!(
        log.segment_count() > 5,
        "4 KiB segments must roll: {}",
        log.segment_count()
    );
    for name in [
        "00000000000000000000.log",
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
    ] {
        assert!(dir.path().join("t-0").join(name).exists(), "{name}");
    }
    assert_eq!(read_all(&log, 0), (0..300).collect::<Vec<_>>());
    assert_eq!(read_all(&log, 157), (157..300).collect::<Vec<_>>());
    assert!(matches!(
        log.read(301, 100, 301, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert!(log.read(300, 100, 300, true).unwrap().slice.is_none());
    // The upper bound (a high watermark) is respected: nothing at or past it is served.
    let info = log.read(0, 1 << 20, 30, true).unwrap().slice.unwrap();
    let mut buf = Vec::new();
    info.read_into(&mut buf).unwrap();
    let last = BatchIter::new(&buf)
        .map(|b| b.unwrap().0.last_offset())
        .max()
        .unwrap();
    assert!(last < 30);
    assert_eq!(log.leader_epoch_cache().entries(), &[(2, 0)]);
}

/// Reads hand out whole batches only, as many as fit, from the batch holding the start
/// offset: trimming is the log's job, so a reader can send the range as it is.
#[test]
fn reads_are_whole_batches_that_fit() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        index_interval_bytes: 300,
        ..LogConfig::default()
    };
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, config, NOW).unwrap();
    // Batches of 1 to 7 records (about 120 to 800 bytes each).
    let mut batches = Vec::new(); // (base offset, size)
    for i in 0..60usize {
        let b = batch(1 + i % 7, NOW, Compression::None);
        let info = log.append_as_leader(b.clone(), 0, NOW).unwrap();
        batches.push((info.first_offset, b.len() as u64));
    }
    let end = log.log_end_offset();
    for start in [0, 1, 5, 30, 100, end - 1] {
        let first = batches
            .iter()
            .rposition(|(base, _)| *base <= start)
            .unwrap();
        for max in [0u64, 50, 200, 1000, 3000, 1 << 20] {
            for min_one in [false, true] {
                let slice = log.read(start, max, end, min_one).unwrap().slice;
                // What should come back: whole batches from `first` while they fit.
                let mut want = 0u64;
                for (_, size) in &batches[first..] {
                    if want + size > max {
                        break;
                    }
                    want += size;
                }
                if want == 0 && min_one {
                    want = batches[first].1;
                }
                let got = slice.as_ref().map_or(0, |s| s.len);
                assert_eq!(got, want, "start {start} max {max} min_one {min_one}");
                if let Some(slice) = slice {
                    let mut buf = Vec::new();
                    slice.read_into(&mut buf).unwrap();
                    let parsed: u64 = BatchIter::new(&buf)
                        .map(|b| b.unwrap().0.total_size() as u64)
                        .sum();
                    assert_eq!(parsed, got, "only whole batches");
                    let h = BatchIter::new(&buf).next().unwrap().unwrap().0;
                    assert!(h.base_offset <= start && start <= h.last_offset());
                }
            }
        }
    }
}

#[test]
fn min_one_batch_returns_a_whole_oversized_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, LogConfig::default(), NOW).unwrap();
    let b = batch(50, NOW, Compression::None);
    let size = b.len() as u64;
    log.append_as_leader(b, 0, NOW).unwrap();
    let slice = log.read(0, 10, 50, true).unwrap().slice.unwrap();
    assert_eq!(slice.len, size);
    // Without min_one_batch nothing fits: only whole batches are handed out.
    assert!(log.read(0, 10, 50, false).unwrap().slice.is_none());
}

#[test]
fn timestamp_lookup_uses_the_time_index_and_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    for i in 0..50 {
        // Each batch of 2 records: timestamps NOW + 10*i and NOW + 10*i (same).
        log.append_as_leader(batch(2, NOW + 10 * i, Compression::Lz4), 0, NOW + 1000)
            .unwrap();
    }
    assert_eq!(
        log.offset_for_timestamp(NOW).unwrap().map(|t| (t.0, t.1)),
        Some((0, NOW))
    );
    assert_eq!(
        log.offset_for_timestamp(NOW + 105)
            .unwrap()
            .map(|t| (t.0, t.1)),
        Some((22, NOW + 110))
    );
    assert_eq!(
        log.offset_for_timestamp(NOW + 490).unwrap().map(|t| t.0),
        Some(98)
    );
    assert_eq!(log.offset_for_timestamp(NOW + 491).unwrap(), None);
    assert_eq!(
        log.offset_of_max_timestamp().unwrap().map(|t| (t.0, t.1)),
        Some((98, NOW + 490))
    );
}

#[test]
fn clean_reopen_keeps_everything_and_trims_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    for i in 0..40 {
        log.append_as_leader(batch(2, NOW + i, Compression::Gzip), 0, NOW)
            .unwrap();
    }
    log.close(NOW).unwrap();
    let rp = log.recovery_point();
    assert_eq!(rp, 80);
    drop(log);
    let log = reopen(dir.path(), small_segments(), true, rp);
    assert_eq!(log.log_end_offset(), 80);
    assert_eq!(read_all(&log, 0), (0..80).collect::<Vec<_>>());
    assert_eq!(log.topic_id(), Some(TOPIC_ID));
}

#[test]
fn crash_with_torn_tail_truncates_to_the_last_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, LogConfig::default(), NOW).unwrap();
    for i in 0..10 {
        log.append_as_leader(batch(5, NOW + i, Compression::Snappy), 0, NOW)
            .unwrap();
    }
    drop(log); // no close: the preallocated index keeps its zero tail, as after kill -9
    let seg = dir.path().join("t-0/00000000000000000000.log");
    // A half-written 11th batch.
    let partial = batch(5, NOW, Compression::None);
    FsOpen::new()
        .append(true)
        .open(&seg)
        .unwrap()
        .write_all(&partial[..partial.len() / 2])
        .unwrap();
    let mut log = reopen(dir.path(), LogConfig::default(), false, 0);
    assert_eq!(log.log_end_offset(), 50);
    assert_eq!(read_all(&log, 0), (0..50).collect::<Vec<_>>());
    // The log keeps working after recovery.
    let info = log
        .append_as_leader(batch(1, NOW, Compression::None), 0, NOW)
        .unwrap();
    assert_eq!(info.first_offset, 50);
}

#[test]
fn crash_with_corrupt_batch_truncates_it_and_everything_after() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    for i in 0..60 {
        log.append_as_leader(batch(2, NOW + i, Compression::None), 0, NOW)
            .unwrap();
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 3);
    let rp = bases[1]; // everything from the second segment on is "unflushed"
    drop(log);
    // Flip a byte inside the second segment's third batch.
    let seg = dir.path().join(format!("t-0/{:020}.log", bases[1]));
    let mut bytes = std::fs::read(&seg).unwrap();
    let batch_len = BatchIter::new(&bytes).next().unwrap().unwrap().1.len();
    bytes[batch_len * 2 + 70] ^= 0x55;
    std::fs::write(&seg, &bytes).unwrap();
    let log = reopen(dir.path(), small_segments(), false, rp);
    assert_eq!(log.log_end_offset(), bases[1] + 4);
    assert_eq!(log.segment_base_offsets(), bases[..2].to_vec());
    assert_eq!(read_all(&log, 0), (0..bases[1] + 4).collect::<Vec<_>>());
}

#[test]
fn missing_or_garbage_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    for i in 0..10 {
        log.append_as_leader(batch(2, NOW + i, Compression::None), 0, NOW)
            .unwrap();
    }
    log.close(NOW).unwrap();
    drop(log);
    let idx = dir.path().join("t-0/00000000000000000000.index");
    std::fs::write(&idx, [0xffu8; 24]).unwrap();
    let log = reopen(dir.path(), small_segments(), true, 20);
    assert_eq!(read_all(&log, 7), (7..20).collect::<Vec<_>>());
}

#[test]
fn retention_by_time_and_size_deletes_old_segments_only() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_ms: 60_000,
        ..small_segments()
    };
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, config.clone(), NOW).unwrap();
    // Old records first, then fresh ones.
    for i in 0..40 {
        log.append_as_leader(batch(2, NOW - 600_000 + i, Compression::None), 0, NOW)
            .unwrap();
    }
    let old_end = log.log_end_offset();
    log.roll(NOW).unwrap();
    for i in 0..5 {
        log.append_as_leader(batch(2, NOW + i, Compression::None), 0, NOW)
            .unwrap();
    }
    let before = log.segment_count();
    let deleted = log.delete_old_segments(log.log_end_offset(), NOW).unwrap();
    assert_eq!(deleted, before - 1);
    assert_eq!(log.log_start_offset(), old_end);
    assert!(matches!(
        log.read(0, 100, 100, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert_eq!(
        read_all(&log, old_end),
        (old_end..old_end + 10).collect::<Vec<_>>()
    );
    // Deleted segment files are gone from disk.
    assert!(!dir.path().join("t-0/00000000000000000000.log").exists());

    // retention.bytes keeps the newest segments within the limit.
    let dir2 = tempfile::tempdir().unwrap();
    let by_size = LogConfig {
        retention_bytes: 8192,
        ..small_segments()
    };
    let mut log = Log::create(dir2.path(), tp(), TOPIC_ID, by_size, NOW).unwrap();
    for i in 0..100 {
        log.append_as_leader(batch(2, NOW + i, Compression::None), 0, NOW)
            .unwrap();
    }
    log.delete_old_segments(log.log_end_offset(), NOW).unwrap();
    assert!(log.size_bytes() <= 8192 + 4096, "size {}", log.size_bytes());
    assert!(log.log_start_offset() > 0);
}

#[test]
fn expired_active_segment_is_rolled_then_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_ms: 1000,
        ..LogConfig::default()
    };
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, config, NOW).unwrap();
    log.append_as_leader(batch(3, NOW, Compression::None), 0, NOW)
        .unwrap();
    assert_eq!(log.delete_old_segments(3, NOW + 5000).unwrap(), 1);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (3, 3));
    assert_eq!(log.segment_base_offsets(), vec![3]);
}

#[test]
fn truncate_to_removes_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    for i in 0..60 {
        log.append_as_leader(batch(2, NOW + i, Compression::None), 0, NOW)
            .unwrap();
    }
    log.truncate_to(31, NOW).unwrap();
    // Truncation is to a batch boundary at or below the offset.
    assert_eq!(log.log_end_offset(), 30);
    assert_eq!(read_all(&log, 0), (0..30).collect::<Vec<_>>());
    assert_eq!(
        log.append_as_leader(batch(1, NOW, Compression::None), 0, NOW)
            .unwrap()
            .first_offset,
        30
    );
}

#[test]
fn log_manager_checkpoints_and_detects_unclean_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mgr = LogManager::open(dir.path()).unwrap();
        assert!(!mgr.had_clean_shutdown());
        let log = mgr
            .get_or_create(&tp(), TOPIC_ID, LogConfig::default(), NOW)
            .unwrap();
        log.write()
            .unwrap()
            .append_as_leader(batch(4, NOW, Compression::None), 0, NOW)
            .unwrap();
        mgr.shutdown(NOW).unwrap();
    }
    {
        let mgr = LogManager::open(dir.path()).unwrap();
        assert!(mgr.had_clean_shutdown());
        let found = mgr.scan().unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].topic_id, Some(TOPIC_ID));
        let log = mgr.load(&tp(), LogConfig::default(), NOW).unwrap();
        assert_eq!(log.read().unwrap().log_end_offset(), 4);
        assert_eq!(log.read().unwrap().recovery_point(), 4);
        // No shutdown this time: the next open must see an unclean shutdown.
    }
    let mgr = LogManager::open(dir.path()).unwrap();
    assert!(!mgr.had_clean_shutdown());
    mgr.delete(&tp()).unwrap();
    assert!(mgr.scan().unwrap().is_empty());
    assert!(!dir.path().join("t-0").exists());
}

/// What a broker reports when it registers (KIP-966's unclean shutdown): its files hold
/// everything its last process wrote after a clean shutdown, or after a process that
/// stopped in the machine boot this one runs in; not after a power loss (another boot), in
/// a directory that never ran, or after an I/O error other than a full disk.
#[test]
fn previous_writes_are_intact_after_a_clean_shutdown_or_in_the_same_boot() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let dirs = vec![a.path().to_path_buf(), b.path().to_path_buf()];
    assert!(!LogManager::previous_writes_intact(&dirs, Some("boot-1")));
    let mgr = LogManager::open_all(&dirs).unwrap();
    mgr.mark_boot("boot-1").unwrap();
    // kill -9: the same boot says so, another (a power loss since) or none does not.
    assert!(LogManager::previous_writes_intact(&dirs, Some("boot-1")));
    assert!(!LogManager::previous_writes_intact(&dirs, Some("boot-2")));
    assert!(!LogManager::previous_writes_intact(&dirs, None));
    // A clean shutdown says so in any boot.
    mgr.shutdown(NOW).unwrap();
    drop(mgr);
    assert!(LogManager::previous_writes_intact(&dirs, Some("boot-2")));
    assert!(LogManager::previous_writes_intact(&dirs, None));
    // A fatal I/O error forgets the boot.
    let mgr = LogManager::open_all(&dirs).unwrap();
    mgr.mark_boot("boot-2").unwrap();
    mgr.forget_boot();
    assert!(!LogManager::previous_writes_intact(&dirs, Some("boot-2")));
}

/// Several directories: new logs go to the emptier one; a log moved to another directory
/// keeps every record and its appends (through the same handle), is found there after a
/// restart, and a move a crash interrupted is settled: a whole future copy with no current
/// log becomes the log, a future copy beside the current log is dropped.
#[test]
fn logs_are_placed_across_directories_and_move_between_them() {
    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().join("a"), root.path().join("b")];
    let other = TopicPartition::new("u", 0);
    {
        let mgr = LogManager::open_all(&dirs).unwrap();
        let log = mgr
            .get_or_create(&tp(), TOPIC_ID, small_segments(), NOW)
            .unwrap();
        mgr.get_or_create(&other, TOPIC_ID, small_segments(), NOW)
            .unwrap();
        assert_eq!(mgr.dir_of(&tp()), Some(dirs[0].as_path()));
        assert_eq!(mgr.dir_of(&other), Some(dirs[1].as_path()));
        for _ in 0..20 {
            log.write()
                .unwrap()
                .append_as_leader(batch(5, NOW, Compression::Lz4), 0, NOW)
                .unwrap();
        }
        assert!(mgr.begin_move(&tp(), 1));
        assert!(!mgr.begin_move(&tp(), 1), "already on its way");
        assert_eq!(mgr.moving().len(), 1);
        mgr.move_log(&tp(), NOW).unwrap();
        assert!(mgr.moving().is_empty());
        assert_eq!(mgr.dir_of(&tp()), Some(dirs[1].as_path()));
        assert!(!dirs[0].join("t-0").exists());
        assert_eq!(
            read_all(&log.read().unwrap(), 0),
            (0..100).collect::<Vec<_>>()
        );
        log.write()
            .unwrap()
            .append_as_leader(batch(5, NOW, Compression::None), 0, NOW)
            .unwrap();
        assert!(!mgr.begin_move(&tp(), 1), "already there");
        mgr.shutdown(NOW).unwrap();
    }
    {
        let mgr = LogManager::open_all(&dirs).unwrap();
        assert_eq!(mgr.scan().unwrap().len(), 2);
        let log = mgr.load(&tp(), small_segments(), NOW).unwrap();
        assert_eq!(mgr.dir_of(&tp()), Some(dirs[1].as_path()));
        assert_eq!(log.read().unwrap().log_end_offset(), 105);
        mgr.shutdown(NOW).unwrap();
    }
    // A crash after the current log was renamed away: its whole future copy takes over.
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    };
    let future = dirs[0].join("t-0.7-1-future");
    copy(&dirs[1].join("t-0"), &future);
    std::fs::rename(dirs[1].join("t-0"), dirs[1].join("t-0.7-1-delete")).unwrap();
    {
        let mgr = LogManager::open_all(&dirs).unwrap();
        assert_eq!(mgr.scan().unwrap().len(), 2);
        let log = mgr.load(&tp(), small_segments(), NOW).unwrap();
        assert_eq!(mgr.dir_of(&tp()), Some(dirs[0].as_path()));
        assert_eq!(log.read().unwrap().log_end_offset(), 105);
        assert!(!dirs[1].join("t-0.7-1-delete").exists());
        mgr.shutdown(NOW).unwrap();
    }
    // A crash while copying: the partial future copy goes, the current log stays.
    std::fs::create_dir_all(dirs[1].join("t-0.7-2-future")).unwrap();
    let mgr = LogManager::open_all(&dirs).unwrap();
    assert_eq!(mgr.scan().unwrap().len(), 2);
    assert!(!dirs[1].join("t-0.7-2-future").exists());
    assert!(dirs[0].join("t-0").exists());
    // The same partition in two directories cannot be told apart: refused.
    copy(&dirs[0].join("t-0"), &dirs[1].join("t-0"));
    let mgr = LogManager::open_all(&dirs).unwrap();
    let err = mgr.scan().unwrap_err().to_string();
    assert!(err.contains("duplicate log directories for t-0"), "{err}");
}

#[test]
fn segment_ms_rolls_by_age_of_the_first_record() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_ms: 60_000,
        ..LogConfig::default()
    };
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, config, NOW).unwrap();
    log.append_as_leader(batch(1, NOW, Compression::None), 0, NOW)
        .unwrap();
    log.append_as_leader(batch(1, NOW, Compression::None), 0, NOW + 59_000)
        .unwrap();
    assert_eq!(log.segment_count(), 1);
    log.append_as_leader(batch(1, NOW + 61_000, Compression::None), 0, NOW + 61_000)
        .unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
}

#[test]
fn flush_messages_one_leaves_an_fsync_for_the_caller_before_the_append_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_messages: 1,
        ..LogConfig::default()
    };
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, config, NOW).unwrap();
    for i in 0..5 {
        log.append_as_leader(batch(2, NOW, Compression::None), 0, NOW)
            .unwrap();
        // The fsync is owed, to be run without the log's lock; the recovery point only
        // moves past data once it ran.
        let io = log.take_pending_io();
        assert!(!io.is_empty());
        assert_eq!(log.recovery_point(), i * 2);
        io.run().unwrap();
        log.complete_io(&io);
        assert_eq!(log.recovery_point(), (i + 1) * 2);
    }
    // A truncation between planning and completing voids the move.
    log.append_as_leader(batch(2, NOW, Compression::None), 0, NOW)
        .unwrap();
    let stale = log.take_pending_io();
    log.truncate_to(10, NOW).unwrap();
    log.append_as_leader(batch(2, NOW, Compression::None), 0, NOW)
        .unwrap();
    let _not_run_yet = log.take_pending_io();
    stale.run().unwrap();
    log.complete_io(&stale);
    assert_eq!(
        log.recovery_point(),
        10,
        "the new records at 10..12 are not fsynced"
    );
    let mut lazy = Log::create(
        &dir.path().join("b"),
        tp(),
        TOPIC_ID,
        LogConfig::default(),
        NOW,
    )
    .unwrap();
    lazy.append_as_leader(batch(2, NOW, Compression::None), 0, NOW)
        .unwrap();
    assert_eq!(lazy.recovery_point(), 0);
}

#[test]
fn a_follower_copies_the_leaders_batches_unchanged_with_their_epochs() {
    let leader_dir = tempfile::tempdir().unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let mut leader = Log::create(leader_dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    let mut follower =
        Log::create(follower_dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    for (epoch, n) in [(1, 5), (1, 3), (4, 7)] {
        leader
            .append_as_leader(batch(n, NOW, Compression::Lz4), epoch, NOW)
            .unwrap();
    }
    // Copy in two fetches, the first ending with a torn batch (as a byte-capped fetch can).
    let mut bytes = Vec::new();
    leader
        .read(0, 1 << 20, leader.log_end_offset(), true)
        .unwrap()
        .slice
        .unwrap()
        .read_into(&mut bytes)
        .unwrap();
    let first_two: usize = BatchIter::new(&bytes)
        .take(2)
        .map(|b| b.unwrap().1.len())
        .sum();
    let end = follower
        .append_as_follower(&bytes[..first_two + 10], NOW)
        .unwrap();
    assert_eq!(end, 8);
    let rest = &bytes[first_two..];
    assert_eq!(follower.append_as_follower(rest, NOW).unwrap(), 15);
    // Byte for byte the same log, and the same epochs.
    let mut copied = Vec::new();
    follower
        .read(0, 1 << 20, 15, true)
        .unwrap()
        .slice
        .unwrap()
        .read_into(&mut copied)
        .unwrap();
    assert_eq!(copied, bytes);
    assert_eq!(
        follower.leader_epoch_cache().entries(),
        leader.leader_epoch_cache().entries()
    );
    // Replaying what it has, or a corrupted batch, is refused.
    assert!(follower.append_as_follower(&bytes, NOW).is_err());
    let mut bad = rest.to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    follower.truncate_to(8, NOW).unwrap();
    assert!(matches!(
        follower.append_as_follower(&bad, NOW),
        Err(LogError::Corrupt(_))
    ));
    assert_eq!(follower.log_end_offset(), 8);
}

/// A batch of `n` records from producer `pid` (epoch `epoch`) starting at sequence `seq`.
fn idempotent(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).with_producer(pid, epoch, seq);
    for i in 0..n {
        b.append(NOW, None, Some(format!("v{seq}-{i}").as_bytes()), &[]);
    }
    b.build(0).unwrap()
}

#[test]
fn idempotent_retries_are_answered_with_their_offsets_across_rolls_restarts_and_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    let first = log
        .append_as_leader(idempotent(7, 0, 0, 3), 0, NOW)
        .unwrap();
    let second = log
        .append_as_leader(idempotent(7, 0, 3, 2), 0, NOW)
        .unwrap();
    assert_eq!((first.first_offset, second.last_offset), (0, 4));
    // A retry of either is not appended again.
    let again = log
        .append_as_leader(idempotent(7, 0, 0, 3), 0, NOW)
        .unwrap();
    assert!(again.duplicate);
    assert_eq!((again.first_offset, again.last_offset), (0, 2));
    assert_eq!(log.log_end_offset(), 5);
    // A gap, and an older epoch after a newer one, are refused.
    assert!(matches!(
        log.append_as_leader(idempotent(7, 0, 9, 1), 0, NOW),
        Err(LogError::OutOfOrderSequence(_))
    ));
    log.append_as_leader(idempotent(7, 1, 0, 1), 0, NOW)
        .unwrap();
    assert!(matches!(
        log.append_as_leader(idempotent(7, 0, 5, 1), 0, NOW),
        Err(LogError::InvalidProducerEpoch(_))
    ));
    // Enough other traffic to roll segments (each roll writes a snapshot).
    for _ in 0..40 {
        log.append_as_leader(batch(5, NOW, Compression::None), 0, NOW)
            .unwrap();
    }
    let last = log
        .append_as_leader(idempotent(7, 1, 1, 2), 0, NOW)
        .unwrap();
    assert!(log.segment_count() > 2);
    // Crash (no close): the newest snapshot plus the log after it bring the state back.
    drop(log);
    let mut log = reopen(dir.path(), small_segments(), false, 0);
    let retry = log
        .append_as_leader(idempotent(7, 1, 1, 2), 0, NOW)
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.first_offset, last.first_offset);
    // Clean close: the snapshot at the log end alone.
    log.close(NOW).unwrap();
    drop(log);
    let mut log = reopen(dir.path(), small_segments(), true, 0);
    assert!(
        log.append_as_leader(idempotent(7, 1, 1, 2), 0, NOW)
            .unwrap()
            .duplicate
    );
    // Truncated away (a follower diverged): the batch is no longer there, so it is new.
    log.truncate_to(last.first_offset, NOW).unwrap();
    let rewritten = log
        .append_as_leader(idempotent(7, 1, 1, 2), 0, NOW)
        .unwrap();
    assert!(!rewritten.duplicate);
    assert_eq!(rewritten.first_offset, last.first_offset);
}

/// One batch per append, as Kafka requires of a produce request (v3+): two batches together
/// are refused whole, and nothing of them is written.
#[test]
fn an_append_of_several_batches_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    let mut two = idempotent(5, 0, 0, 3);
    two.extend(idempotent(5, 0, 3, 2));
    assert!(matches!(
        log.append_as_leader(two, 0, NOW),
        Err(LogError::InvalidRecord(_))
    ));
    assert_eq!(log.log_end_offset(), 0);
    // One at a time, the second continues the first's sequence.
    log.append_as_leader(idempotent(5, 0, 0, 3), 0, NOW)
        .unwrap();
    let info = log
        .append_as_leader(idempotent(5, 0, 3, 2), 0, NOW)
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (3, 4));
    assert!(
        log.append_as_leader(idempotent(5, 0, 3, 2), 0, NOW)
            .unwrap()
            .duplicate
    );
    assert_eq!(log.log_end_offset(), 5);
}

#[test]
fn followers_learn_producer_state_from_what_they_copy() {
    let leader_dir = tempfile::tempdir().unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let mut leader = Log::create(leader_dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    let mut follower =
        Log::create(follower_dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    leader
        .append_as_leader(idempotent(3, 0, 0, 4), 2, NOW)
        .unwrap();
    let mut bytes = Vec::new();
    leader
        .read(0, 1 << 20, leader.log_end_offset(), true)
        .unwrap()
        .slice
        .unwrap()
        .read_into(&mut bytes)
        .unwrap();
    follower.append_as_follower(&bytes, NOW).unwrap();
    // Promoted, the follower recognises the producer's retry.
    let retry = follower
        .append_as_leader(idempotent(3, 0, 0, 4), 3, NOW)
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.first_offset, 0);
    assert!(matches!(
        follower.append_as_leader(idempotent(3, 0, 6, 1), 3, NOW),
        Err(LogError::OutOfOrderSequence(_))
    ));
}

/// A transactional batch of `n` records.
fn transactional(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None)
        .with_producer(pid, epoch, seq)
        .with_transactional(true);
    for i in 0..n {
        b.append(NOW, None, Some(format!("t{seq}-{i}").as_bytes()), &[]);
    }
    b.build(0).unwrap()
}

fn marker(pid: i64, epoch: i16, commit: bool, coordinator_epoch: i32) -> sluice_storage::Marker {
    sluice_storage::Marker {
        producer_id: pid,
        epoch,
        commit,
        coordinator_epoch,
    }
}

#[test]
fn transactions_hold_the_stable_offset_and_aborts_are_indexed_across_restarts_and_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    log.append_as_leader(batch(2, NOW, Compression::None), 0, NOW)
        .unwrap(); // 0-1
    log.append_as_leader(transactional(5, 0, 0, 3), 0, NOW)
        .unwrap(); // 2-4
    log.append_as_leader(transactional(6, 0, 0, 2), 0, NOW)
        .unwrap(); // 5-6
                   // Both open: nothing from 2 on is stable.
    assert_eq!(log.last_stable_offset(7), 2);
    let abort = log.append_marker(&marker(5, 0, false, 3), 0, NOW).unwrap();
    assert_eq!(abort.first_offset, 7);
    // Producer 6 is still open; the abort is recorded with that stable offset.
    assert_eq!(log.last_stable_offset(8), 5);
    let aborted = log.aborted_txns(0, 8);
    assert_eq!(aborted.len(), 1);
    assert_eq!(
        (
            aborted[0].producer_id,
            aborted[0].first_offset,
            aborted[0].last_offset
        ),
        (5, 2, 7)
    );
    let commit = log.append_marker(&marker(6, 0, true, 3), 0, NOW).unwrap();
    assert_eq!(commit.first_offset, 8);
    // Ended, but the markers are unstable until the high watermark passes them.
    assert_eq!(log.last_stable_offset(8), 5);
    log.on_high_watermark(9);
    assert_eq!(log.last_stable_offset(9), 9);
    // Markers from an older coordinator or an older producer epoch are fenced.
    assert!(matches!(
        log.append_marker(&marker(6, 0, true, 2), 0, NOW),
        Err(LogError::CoordinatorFenced(_))
    ));
    // A marker with a newer epoch (a fenced producer's transaction aborted) moves the epoch.
    log.append_as_leader(transactional(6, 0, 2, 1), 0, NOW)
        .unwrap(); // 9
    log.append_marker(&marker(6, 1, false, 3), 0, NOW).unwrap(); // 10
    assert!(matches!(
        log.append_as_leader(transactional(6, 0, 3, 1), 0, NOW),
        Err(LogError::InvalidProducerEpoch(_))
    ));
    assert!(matches!(
        log.append_marker(&marker(6, 0, false, 3), 0, NOW),
        Err(LogError::InvalidProducerEpoch(_))
    ));
    // An open transaction in a later segment, then a crash: the snapshot at the last roll
    // plus the replay bring back both the open transaction and the aborted ones.
    for _ in 0..20 {
        log.append_as_leader(batch(5, NOW, Compression::None), 0, NOW)
            .unwrap();
    }
    let open = log
        .append_as_leader(transactional(8, 0, 0, 1), 0, NOW)
        .unwrap();
    let late_abort = log.append_marker(&marker(8, 0, false, 3), 0, NOW).unwrap();
    let open_again = log
        .append_as_leader(transactional(8, 0, 1, 1), 0, NOW)
        .unwrap();
    assert!(log.segment_count() > 2);
    let end = log.log_end_offset();
    let expect_aborted = log.aborted_txns(0, end);
    assert_eq!(expect_aborted.len(), 3);
    drop(log);
    let log = reopen(dir.path(), small_segments(), false, 0);
    assert_eq!(log.aborted_txns(0, end), expect_aborted);
    assert_eq!(log.last_stable_offset(end), open_again.first_offset);
    // Only the entries a fetch range needs.
    assert_eq!(log.aborted_txns(late_abort.first_offset, end).len(), 1);
    // Clean close and reopen: the same.
    let mut log = log;
    log.close(NOW).unwrap();
    drop(log);
    let mut log = reopen(dir.path(), small_segments(), true, 0);
    assert_eq!(log.aborted_txns(0, end), expect_aborted);
    assert_eq!(log.last_stable_offset(end), open_again.first_offset);
    // Truncating the late abort away reopens producer 8's first transaction.
    log.truncate_to(late_abort.first_offset, NOW).unwrap();
    assert_eq!(log.aborted_txns(0, end).len(), 2);
    assert_eq!(
        log.last_stable_offset(log.log_end_offset()),
        open.first_offset
    );
    // A follower copying the leader's markers learns the same.
    let mut follower =
        Log::create(&dir.path().join("f"), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    let mut next = 0;
    while next < log.log_end_offset() {
        let slice = log
            .read(next, 1 << 20, log.log_end_offset(), true)
            .unwrap()
            .slice
            .unwrap();
        let mut buf = Vec::new();
        slice.read_into(&mut buf).unwrap();
        next = follower.append_as_follower(&buf, NOW).unwrap();
    }
    assert_eq!(follower.aborted_txns(0, end), log.aborted_txns(0, end));
    assert_eq!(
        follower.last_stable_offset(next),
        log.last_stable_offset(next)
    );
}

/// A log directory whose disk fails (here: the directory replaced by a file, as Kafka's own
/// test does it) is taken offline on the first I/O error in it, the manager's own chores'
/// included: the listener hears of it once, nothing of it is written, flushed, cleaned or
/// checkpointed again, new logs go elsewhere, and the other directory goes on, its clean
/// shutdown included.
#[test]
fn a_failed_directory_goes_offline_and_the_others_go_on() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().join("a"), root.path().join("b")];
    let mgr = LogManager::open_all(&dirs).unwrap();
    let told = Arc::new((AtomicUsize::new(0), AtomicUsize::new(usize::MAX)));
    let t = Arc::clone(&told);
    mgr.on_dir_failure(Box::new(move |dir| {
        t.0.fetch_add(1, Ordering::SeqCst);
        t.1.store(dir, Ordering::SeqCst);
    }));
    let other = TopicPartition::new("u", 0);
    let kept = mgr
        .get_or_create(&tp(), TOPIC_ID, small_segments(), NOW)
        .unwrap();
    let lost = mgr
        .get_or_create(&other, TOPIC_ID, small_segments(), NOW)
        .unwrap();
    assert_eq!(mgr.dir_of(&other), Some(dirs[1].as_path()));
    for log in [&kept, &lost] {
        log.write()
            .unwrap()
            .append_as_leader(batch(5, NOW, Compression::None), 0, NOW)
            .unwrap();
    }
    assert!(!mgr.fail_on(&LogError::InvalidRecord("not the disk".into())));
    assert!(mgr.checkpoint().is_ok());

    std::fs::rename(&dirs[1], root.path().join("b.gone")).unwrap();
    std::fs::write(&dirs[1], b"not a directory").unwrap();
    // The checkpoint of b fails: b goes offline, a's is still written.
    assert!(matches!(mgr.checkpoint(), Err(LogError::Io { .. })));
    assert_eq!(told.0.load(Ordering::SeqCst), 1);
    assert_eq!(told.1.load(Ordering::SeqCst), 1);
    assert!(mgr.is_offline(1) && !mgr.is_offline(0) && !mgr.all_offline());
    // An error of the same directory again (a roll of its log) is seen, not told twice.
    let mut roll_error = None;
    for _ in 0..100 {
        if let Err(e) =
            lost.write()
                .unwrap()
                .append_as_leader(batch(5, NOW, Compression::None), 0, NOW)
        {
            roll_error = Some(e);
            break;
        }
    }
    let roll_error = roll_error.expect("a roll into the failed directory fails");
    assert!(mgr.fail_on(&roll_error));
    assert_eq!(told.0.load(Ordering::SeqCst), 1);
    // From now on: b's log is left out of every chore, and a checkpoint succeeds.
    let names: Vec<TopicPartition> = mgr.all().into_iter().map(|(tp, _)| tp).collect();
    assert_eq!(names, vec![tp()]);
    assert!(mgr.checkpoint().is_ok());
    mgr.flush_due(NOW + 3_600_000);
    // A new log goes to a, though a already has more.
    let third = TopicPartition::new("v", 0);
    mgr.get_or_create(&third, TOPIC_ID, small_segments(), NOW)
        .unwrap();
    assert_eq!(mgr.dir_of(&third), Some(dirs[0].as_path()));
    assert_eq!(mgr.forget_offline(1), vec![other.clone()]);
    assert!(mgr.get(&other).is_none());
    // Deleting a replica of the failed directory leaves its files alone.
    mgr.delete(&other).unwrap();
    assert!(root.path().join("b.gone/u-0").is_dir());
    mgr.shutdown(NOW).unwrap();
    assert!(dirs[0].join(".kafka_cleanshutdown").exists());
    assert!(!root.path().join("b.gone/.kafka_cleanshutdown").exists());
    assert_eq!(
        read_all(&kept.read().unwrap(), 0),
        (0..5).collect::<Vec<_>>()
    );

    // Every directory failed: nothing can be created any more.
    std::fs::rename(&dirs[0], root.path().join("a.gone")).unwrap();
    std::fs::write(&dirs[0], b"not a directory").unwrap();
    assert!(mgr.checkpoint().is_err());
    assert!(mgr.all_offline());
    assert_eq!(told.1.load(Ordering::SeqCst), 0);
    assert!(mgr
        .get_or_create(
            &TopicPartition::new("w", 0),
            TOPIC_ID,
            small_segments(),
            NOW
        )
        .is_err());
}

#[test]
fn recovered_closed_segments_have_trimmed_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, small_segments(), NOW).unwrap();
    for i in 0..40 {
        log.append_as_leader(batch(2, NOW + i, Compression::None), 0, NOW)
            .unwrap();
    }
    assert!(log.segment_count() > 2);
    drop(log); // a crash: nothing flushed, nothing trimmed by a close
    let log = reopen(dir.path(), small_segments(), false, 0);
    for c in log.closed_segments() {
        for (path, entry) in [(&c.index, 8), (&c.time_index, 12)] {
            let len = std::fs::metadata(path).unwrap().len();
            assert_eq!(len % entry, 0);
            let bytes = std::fs::read(path).unwrap();
            // No preallocated zero entries past the real ones.
            assert!(
                bytes.len() < entry as usize
                    || bytes[bytes.len() - entry as usize..]
                        .iter()
                        .any(|b| *b != 0)
                    || c.base_offset == 0 && bytes.len() == entry as usize,
                "{} keeps preallocated space ({len} bytes)",
                path.display()
            );
        }
    }
}

#[test]
fn local_retention_deletes_only_what_the_remote_tier_holds() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        remote_storage: true,
        local_retention_bytes: 1,
        ..small_segments()
    };
    let mut log = Log::create(dir.path(), tp(), TOPIC_ID, config, NOW).unwrap();
    for i in 0..80 {
        log.append_as_leader(batch(2, NOW + i, Compression::None), 0, NOW)
            .unwrap();
    }
    let closed = log.closed_segments();
    assert!(closed.len() >= 3);
    // Nothing copied: nothing deleted, however far past local retention.
    assert_eq!(
        log.delete_old_segments(log.log_end_offset(), NOW).unwrap(),
        0
    );
    // The first two copied: those two go, and the log start moves to the third.
    log.set_remote_highest_offset(closed[1].next_offset - 1);
    assert_eq!(
        log.delete_old_segments(log.log_end_offset(), NOW).unwrap(),
        2
    );
    assert_eq!(log.log_start_offset(), closed[2].base_offset);
    // Copy disabled: the total retention applies again (unlimited here).
    log.set_config(LogConfig {
        remote_copy_disable: true,
        ..log.config().clone()
    })
    .unwrap();
    log.set_remote_highest_offset(log.log_end_offset());
    assert_eq!(
        log.delete_old_segments(log.log_end_offset(), NOW).unwrap(),
        0
    );
}
