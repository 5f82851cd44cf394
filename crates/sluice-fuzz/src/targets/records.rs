//! Record batches as producers, leaders and followers send them: the broker's one-pass
//! produce validation and offset assignment, a follower's and a consumer's walk over fetched
//! batches, for every codec. The input's first byte picks the topic's settings and whether
//! to fix each batch's CRC after mutation, so mutations reach past the checksum.

use bytes::Bytes;
use sluice_protocol::batch::{self, BatchBuilder, BatchIter, RecordLimits, TimestampType};
use sluice_protocol::compression::Compression;
use sluice_protocol::types::TopicPartition;
use sluice_storage::config::CompressionTarget;
use sluice_storage::{validator, LogConfig};

const NOW: i64 = 1_700_000_000_000;
/// Flag: recompute every batch's CRC after mutation.
const FIX_CRC: u8 = 0x80;
/// Most a batch may inflate to here (the broker's default is 256 MiB; the fuzzer keeps
/// inputs small, so a larger inflation is already a bomb).
pub const DECOMPRESSED_MAX: u64 = 4 << 20;

fn config(flags: u8) -> LogConfig {
    let codecs = [
        CompressionTarget::Producer,
        CompressionTarget::Codec(Compression::None),
        CompressionTarget::Codec(Compression::Gzip),
        CompressionTarget::Codec(Compression::Snappy),
        CompressionTarget::Codec(Compression::Lz4),
        CompressionTarget::Codec(Compression::Zstd),
        CompressionTarget::Producer,
        CompressionTarget::Producer,
    ];
    LogConfig {
        cleanup_compact: flags & 1 != 0,
        message_timestamp_type: if flags & 2 != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        compression: codecs[usize::from(flags >> 2) & 7],
        ..LogConfig::default()
    }
}

/// Recompute the CRC of each whole batch in `buf`, front to back.
fn fix_crcs(buf: &mut [u8]) {
    let mut at = 0;
    while let Ok(Some((_, size))) = batch::peek_offset_and_size(&buf[at..]) {
        if size < batch::BATCH_HEADER_LEN || at + size > buf.len() {
            return;
        }
        let b = &mut buf[at..at + size];
        let crc = batch::compute_crc(b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        at += size;
    }
}

pub fn records(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if flags & FIX_CRC != 0 {
        fix_crcs(&mut bytes);
    }
    let bytes = Bytes::from(bytes);
    let config = LogConfig {
        max_message_bytes: 1 << 20,
        ..config(flags)
    };
    let tp = TopicPartition::new("t", 0);
    // A leader taking a produce request.
    if let Ok(checked) = validator::check(bytes.clone(), &tp, NOW, &config) {
        let assigned = validator::assign(checked, 1_000, 5, NOW, &config);
        let mut whole = assigned.header_bytes.to_vec();
        whole.extend_from_slice(&assigned.body);
        // What the leader writes must be a batch every reader accepts.
        assert!(
            batch::verify_crc(&whole).is_ok(),
            "an accepted batch was written with a bad CRC"
        );
        let h = batch::BatchHeader::parse(&whole).expect("an accepted batch parses");
        assert_eq!(h.base_offset, 1_000);
        assert!(batch::for_each_record(&whole, limits(), |_| Ok(())).is_ok());
    }
    // A follower or a consumer walking fetched batches.
    for item in BatchIter::new(&bytes) {
        let Ok((_, b)) = item else { break };
        if batch::verify_crc(b).is_err() {
            continue;
        }
        let _ = batch::for_each_record(b, limits(), |r| {
            let _ = r.headers().count();
            Ok(())
        });
        let _ = batch::decode_records(b, limits());
    }
}

fn limits() -> RecordLimits {
    RecordLimits {
        decompressed_bytes_max: DECOMPRESSED_MAX,
    }
}

/// Well-formed batches: every codec, with and without keys and headers, idempotent,
/// transactional and control batches; each as a produce request would carry it.
pub fn seeds() -> Vec<Vec<u8>> {
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    let mut seeds = Vec::new();
    for (i, codec) in codecs.into_iter().enumerate() {
        for shape in 0..4u8 {
            let mut b = BatchBuilder::new(codec);
            match shape {
                1 => b.set_producer(42, 1, 7),
                2 => {
                    b.set_producer(43, 0, 0);
                    b.set_transactional(true);
                }
                3 => b = b.with_timestamp_type(TimestampType::LogAppendTime),
                _ => {}
            }
            for r in 0..1 + i as i64 {
                let key = format!("key-{r}");
                let key = (shape != 3 || r % 2 == 0).then_some(key.as_bytes());
                b.append(
                    NOW + r,
                    key,
                    Some(b"some value"),
                    &[("h", Some(b"v")), ("n", None)],
                );
            }
            if let Ok(bytes) = b.build(0) {
                // Flags: compacted on odd shapes; recompression to another codec sometimes.
                let flags = FIX_CRC | (shape & 1) | ((i as u8 % 6) << 2);
                let mut seed = vec![flags];
                seed.extend_from_slice(&bytes);
                seeds.push(seed);
            }
        }
    }
    // A control batch (a commit marker) and two batches back to back (a fetch's shape).
    let mut control = BatchBuilder::new(Compression::None).with_control(true);
    control.set_producer(43, 0, -1);
    control.set_transactional(true);
    control.append(NOW, Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0, 3]), &[]);
    if let (Ok(c), Some(first)) = (control.build(5), seeds.first()) {
        let mut seed = vec![FIX_CRC];
        seed.extend_from_slice(&first[1..]);
        seed.extend_from_slice(&c);
        seeds.push(seed);
    }
    seeds
}
