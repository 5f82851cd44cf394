use super::*;
use crate::store::StoreConfig;
use sluice_protocol::batch::BatchBuilder;
use sluice_protocol::compression::Compression;
use sluice_protocol::types::TopicPartition;
use sluice_storage::{Log, LogConfig};

const NOW: i64 = 1_700_000_000_000;

/// A closed local segment of `batches` batches (10 records of ~100 bytes each), uploaded.
async fn uploaded(
    dir: &std::path::Path,
    batches: usize,
) -> (RemoteStore, RemoteSegmentRef, Vec<u8>) {
    let config = LogConfig {
        index_interval_bytes: 512,
        ..LogConfig::default()
    };
    let tp = TopicPartition::new("t", 0);
    let mut log = Log::create(&dir.join("logs"), tp, [7; 16], config, NOW).unwrap();
    for b in 0..batches {
        let mut bb = BatchBuilder::new(Compression::None);
        for r in 0..10 {
            let v = format!("batch {b} record {r} {}", "x".repeat(80));
            bb.append(NOW, None, Some(v.as_bytes()), &[]);
        }
        log.append_as_leader(bb.build(0).unwrap(), 0, NOW).unwrap();
    }
    log.roll(NOW).unwrap();
    let seg_dir = log.dir().to_path_buf();
    let store = RemoteStore::open(&StoreConfig {
        uri: format!("file://{}", dir.join("remote").display()),
        request_timeout_ms: 30_000,
        ..StoreConfig::default()
    })
    .unwrap();
    let key = SegmentKey {
        topic: "t".into(),
        topic_id: [7; 16],
        partition: 0,
        base_offset: 0,
        segment_id: [1; 16],
    };
    for suffix in ["log", "index"] {
        let f = seg_dir.join(sluice_storage::segment::file_name(0, suffix));
        store.put_file(&key.object(suffix), &f).await.unwrap();
    }
    let log_bytes =
        std::fs::read(seg_dir.join(sluice_storage::segment::file_name(0, "log"))).unwrap();
    let seg = RemoteSegmentRef {
        key,
        base_offset: 0,
        end_offset: batches as i64 * 10 - 1,
        size_bytes: log_bytes.len() as u64,
    };
    (store, seg, log_bytes)
}

fn reader(store: RemoteStore, dir: &std::path::Path, chunk_bytes: u64) -> RemoteReader {
    RemoteReader::new(
        store,
        &dir.join("cache"),
        ReaderConfig {
            chunk_bytes,
            cache_bytes: 1 << 30,
            index_cache_bytes: 1 << 20,
        },
    )
    .unwrap()
}

fn bytes_of(r: &RemoteRead) -> Vec<u8> {
    let mut out = Vec::new();
    r.slice.read_into(&mut out).unwrap();
    out
}

#[tokio::test]
async fn reading_a_remote_segment_from_every_offset_returns_its_own_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (store, seg, local) = uploaded(dir.path(), 60).await;
    let r = reader(store, dir.path(), 4096);
    // Read the whole segment sequentially, in small fetches: the bytes are the local ones.
    let mut got = Vec::new();
    let mut offset = 0;
    while let Some(read) = r.read(&seg, offset, 3000, i64::MAX, true).await.unwrap() {
        assert!(read.next_offset > offset);
        got.extend(bytes_of(&read));
        offset = read.next_offset;
    }
    assert_eq!(offset, 600);
    assert_eq!(got, local);
    // From an offset inside a batch: the batch holding it comes first.
    let read = r.read(&seg, 355, 1, i64::MAX, true).await.unwrap().unwrap();
    let h = BatchHeader::parse(&bytes_of(&read)[..BATCH_HEADER_LEN]).unwrap();
    assert_eq!((h.base_offset, read.next_offset), (350, 360));
    // Without min_one_batch a budget below one batch reads nothing.
    assert!(r
        .read(&seg, 355, 1, i64::MAX, false)
        .await
        .unwrap()
        .is_none());
    // Past the segment: nothing.
    assert!(r
        .read(&seg, 600, 1000, i64::MAX, true)
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn concurrent_readers_of_a_range_cost_one_get() {
    let dir = tempfile::tempdir().unwrap();
    let (store, seg, _) = uploaded(dir.path(), 60).await;
    let r = reader(store, dir.path(), 1 << 20);
    let reads = futures_util::future::join_all(
        (0..8).map(|i| r.read(&seg, i * 10, 1 << 20, i64::MAX, true)),
    )
    .await;
    assert!(reads.iter().all(|x| matches!(x, Ok(Some(_)))));
    // One GET of the index and one of the (single) chunk.
    assert_eq!(r.fetches(), 2);
}

#[tokio::test]
async fn a_corrupt_remote_segment_is_refused_not_served() {
    let dir = tempfile::tempdir().unwrap();
    let (store, seg, mut local) = uploaded(dir.path(), 20).await;
    // Flip a byte inside the records of the third batch.
    let third = 2 * (local.len() / 20) + 100;
    local[third] ^= 0xff;
    store
        .put(&seg.key.object("log"), Bytes::from(local))
        .await
        .unwrap();
    let r = reader(store, dir.path(), 1 << 20);
    let e = r.read(&seg, 0, 1 << 20, i64::MAX, true).await.unwrap_err();
    assert!(e.is_corrupt(), "{e}");
    // Nothing was cached: the next read asks the store again, and fails again.
    assert!(r.read(&seg, 0, 100, i64::MAX, true).await.is_err());
    assert_eq!(r.cached_bytes(), 0);
}

#[tokio::test]
async fn a_segment_whose_offsets_are_not_the_metadata_s_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut seg, _) = uploaded(dir.path(), 5).await;
    seg.end_offset = 20; // the object holds 0..=49
    let r = reader(store, dir.path(), 1 << 20);
    assert!(r
        .read(&seg, 0, 1 << 20, i64::MAX, true)
        .await
        .unwrap_err()
        .is_corrupt());
}

#[test]
fn chunks_start_at_indexed_batches_and_cover_the_segment() {
    let mut idx = Vec::new();
    for (o, p) in [(5u32, 1000u32), (9, 2100), (14, 3050), (20, 5000)] {
        idx.extend_from_slice(&o.to_be_bytes());
        idx.extend_from_slice(&p.to_be_bytes());
    }
    let seg = RemoteSegmentRef {
        key: SegmentKey {
            topic: "t".into(),
            topic_id: [0; 16],
            partition: 0,
            base_offset: 100,
            segment_id: [0; 16],
        },
        base_offset: 100,
        end_offset: 130,
        size_bytes: 6000,
    };
    let v = OffsetIndexView::new(&idx, &seg).unwrap();
    assert_eq!(v.position_for(99), 0);
    assert_eq!(v.position_for(109), 2100);
    assert_eq!(v.position_for(200), 5000);
    // 2000-byte chunks: starts at 0, 1000 (<=2000), 3050 (<=4000), 5000 (<=6000).
    assert_eq!(v.chunk_around(0, 2000), (0, 1000));
    assert_eq!(v.chunk_around(1000, 2000), (1000, 3050));
    assert_eq!(v.chunk_around(2100, 2000), (1000, 3050));
    assert_eq!(v.chunk_around(3050, 2000), (3050, 5000));
    assert_eq!(v.chunk_around(5000, 2000), (5000, 6000));
    // An index that is not one is refused.
    assert!(OffsetIndexView::new(&idx[..7], &seg).is_err());
    let mut backwards = idx.clone();
    backwards[8..16].copy_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    assert!(OffsetIndexView::new(&backwards, &seg).is_err());
}
