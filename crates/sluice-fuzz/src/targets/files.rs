//! What a broker reads back from its own directories after a crash or a bad disk: segment
//! logs, offset and time indexes, transaction indexes, producer snapshots, the leader-epoch
//! checkpoint, partition.metadata, the broker-wide offset checkpoints and meta.properties.
//! A directory is fuzzed whole, as a list of files, and opened the way a starting broker
//! opens it.

use std::path::Path;

use bytes::Bytes;
use sluice_protocol::batch::{BatchBuilder, BatchIter, RecordLimits};
use sluice_protocol::compression::Compression;
use sluice_protocol::types::TopicPartition;
use sluice_storage::checkpoint::MetaProperties;
use sluice_storage::log::Marker;
use sluice_storage::{LogConfig, LogManager};

const NOW: i64 = 1_700_000_000_000;

/// The partition whose directory the files may go to (`t-0`).
fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

/// A directory as bytes: `[flags]` then entries `[where: 0 root, else the partition's
/// directory][name len][name]
/// [u16 BE data len][data]`. Flag bit 0: the last shutdown was clean.
pub fn encode_dir(clean: bool, files: &[(bool, String, Vec<u8>)]) -> Vec<u8> {
    let mut out = vec![u8::from(clean)];
    for (in_partition, name, data) in files {
        out.push(u8::from(*in_partition));
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        let len = data.len().min(u16::MAX as usize);
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.extend_from_slice(&data[..len]);
    }
    out
}

fn safe_name(name: &[u8]) -> Option<&str> {
    let name = std::str::from_utf8(name).ok()?;
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    ok.then_some(name)
}

/// Write the files an input describes under `root` and its partition directory `tp`.
pub(crate) fn materialize(data: &[u8], root: &Path, tp: &TopicPartition) -> bool {
    let Some((&flags, mut rest)) = data.split_first() else {
        return false;
    };
    let part = root.join(tp.dir_name());
    if std::fs::create_dir_all(&part).is_err() {
        return false;
    }
    if flags & 1 == 1 {
        let _ = std::fs::write(
            root.join(sluice_storage::log_manager::CLEAN_SHUTDOWN_FILE),
            b"",
        );
    }
    while rest.len() >= 2 {
        let (place, name_len) = (rest[0], rest[1] as usize);
        rest = &rest[2..];
        if rest.len() < name_len {
            break;
        }
        let (name, tail) = rest.split_at(name_len);
        rest = tail;
        if rest.len() < 2 {
            break;
        }
        let len = (u16::from_be_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
        let contents = &rest[2..2 + len];
        rest = &rest[2 + len..];
        let Some(name) = safe_name(name) else {
            continue;
        };
        let dir = if place == 0 { root } else { &part };
        let _ = std::fs::write(dir.join(name), contents);
    }
    true
}

/// Open the directory as a starting broker does and read everything it then serves.
pub fn log_dir(data: &[u8]) {
    let Ok(root) = tempfile::tempdir() else {
        return;
    };
    if !materialize(data, root.path(), &tp()) {
        return;
    }
    let _ = MetaProperties::read(root.path());
    let Ok(manager) = LogManager::open(root.path()) else {
        return;
    };
    let Ok(found) = manager.scan() else { return };
    for f in found {
        let config = LogConfig {
            segment_bytes: 4096,
            index_interval_bytes: 256,
            ..LogConfig::default()
        };
        let Ok(log) = manager.load(&f.tp, config, NOW) else {
            continue;
        };
        let log = log
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        let mut next = start;
        // Every batch served must be whole and parse: the log's reads are what go on the wire.
        for _ in 0..64 {
            let Ok(info) = log.read(next, 1 << 16, end, true) else {
                break;
            };
            let Some(slice) = info.slice else { break };
            let mut buf = Vec::new();
            if slice.read_into(&mut buf).is_err() {
                break;
            }
            let mut advanced = false;
            for item in BatchIter::new(&buf) {
                let Ok((h, batch)) = item else { break };
                let _ = sluice_protocol::batch::for_each_record(batch, small_limits(), |_| Ok(()));
                if h.next_offset() > next {
                    next = h.next_offset();
                    advanced = true;
                }
            }
            if !advanced {
                break;
            }
        }
        let _ = log.offset_for_timestamp(NOW);
        let _ = log.offset_for_timestamp(-1);
        let _ = log.leader_epoch_cache().end_offset_for(0, end, None);
        let _ = log.aborted_txns(start, end);
        let _ = log.last_stable_offset(end);
    }
}

fn small_limits() -> RecordLimits {
    RecordLimits {
        decompressed_bytes_max: 1 << 20,
    }
}

/// Real directories: logs with several segments, every codec, a transaction committed and
/// one aborted (a .txnindex), producer snapshots, epochs, after a clean and an unclean stop.
pub fn log_dir_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for clean in [true, false] {
        let Ok(root) = tempfile::tempdir() else {
            continue;
        };
        if build_log(root.path(), clean).is_err() {
            continue;
        }
        let mut files = Vec::new();
        collect(root.path(), false, &mut files);
        collect(&root.path().join(tp().dir_name()), true, &mut files);
        seeds.push(encode_dir(clean, &files));
    }
    seeds
}

fn collect(dir: &Path, in_partition: bool, out: &mut Vec<(bool, String, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Ok(bytes) = std::fs::read(e.path()) {
            if e.path().is_file() && name.len() < 256 {
                out.push((in_partition, name, bytes));
            }
        }
    }
}

fn build_log(root: &Path, clean: bool) -> Result<(), Box<dyn std::error::Error>> {
    let manager = LogManager::open(root)?;
    let config = LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 128,
        ..LogConfig::default()
    };
    let log = manager.get_or_create(&tp(), [7; 16], config, NOW)?;
    let mut log = log
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for (i, codec) in codecs.iter().cycle().take(15).enumerate() {
        let mut b = BatchBuilder::new(*codec);
        for r in 0..3 {
            let key = format!("k{r}");
            b.append(
                NOW + i as i64,
                Some(key.as_bytes()),
                Some(&[b'v'; 40]),
                &[("h", Some(b"x"))],
            );
        }
        log.append_as_leader(Bytes::from(b.build(0)?), 1 + i as i32 / 5, NOW)?;
    }
    for (pid, commit) in [(11_i64, true), (12, false)] {
        let mut b = BatchBuilder::new(Compression::None).with_producer(pid, 0, 0);
        b.set_transactional(true);
        b.append(NOW, Some(b"tk"), Some(b"tv"), &[]);
        log.append_as_leader(Bytes::from(b.build(0)?), 4, NOW)?;
        let marker = Marker {
            producer_id: pid,
            epoch: 0,
            commit,
            coordinator_epoch: 1,
        };
        log.append_marker(&marker, 4, NOW)?;
    }
    log.roll(NOW)?;
    drop(log);
    if clean {
        manager.shutdown(NOW)?;
    } else {
        manager.checkpoint()?;
    }
    Ok(())
}
