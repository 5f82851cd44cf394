//! Where a remote segment's files live in the store:
//!
//! ```text
//! <topic>-<topic id>/<partition>/<base offset, 20 digits>-<segment id>.<suffix>
//! ```
//!
//! The segment id (a uuid drawn at each upload) keeps two uploads of the same range apart (a
//! leader killed mid-upload and its successor), so the one the metadata commits is never
//! overwritten by the other, and the orphan can be deleted by id. Suffixes are Kafka's
//! local ones: `log`, `index`, `timeindex`, `txnindex`, `snapshot` (producer state at the
//! segment's end) and `leader-epoch-checkpoint`.

use object_store::path::Path;

/// The files of one remote segment.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SegmentKey {
    pub topic: String,
    pub topic_id: [u8; 16],
    pub partition: i32,
    pub base_offset: i64,
    pub segment_id: [u8; 16],
}

/// Every file a remote segment is made of.
pub const SUFFIXES: [&str; 6] = [
    "log",
    "index",
    "timeindex",
    "txnindex",
    "snapshot",
    "leader-epoch-checkpoint",
];

fn hex(b: &[u8; 16]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl SegmentKey {
    /// The folder of one partition's remote segments.
    pub fn partition_prefix(topic: &str, topic_id: &[u8; 16], partition: i32) -> String {
        format!("{topic}-{}/{partition}", hex(topic_id))
    }

    /// The object key of one of its files (relative to the store's prefix).
    pub fn object(&self, suffix: &str) -> String {
        format!(
            "{}/{:020}-{}.{suffix}",
            Self::partition_prefix(&self.topic, &self.topic_id, self.partition),
            self.base_offset,
            hex(&self.segment_id)
        )
    }
}

/// The base offset in an object key of [`SegmentKey::object`]'s form; None for another key.
pub fn base_offset_of(key: &str) -> Option<i64> {
    let name = key.rsplit('/').next()?;
    let (base, _) = name.split_once('-')?;
    (base.len() == 20).then(|| base.parse().ok()).flatten()
}

/// The segment id in an object key of [`SegmentKey::object`]'s form; None for another key.
pub fn segment_id_of(key: &str) -> Option<[u8; 16]> {
    let name = key.rsplit('/').next()?;
    let (stem, _) = name.split_once('.')?;
    let (_, hex) = stem.split_once('-')?;
    if hex.len() != 32 {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, b) in id.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(id)
}

pub(crate) fn join(prefix: &Path, key: &str) -> Path {
    key.split('/')
        .filter(|p| !p.is_empty())
        .fold(prefix.clone(), |p, part| p.join(part))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        let k = SegmentKey {
            topic: "t".into(),
            topic_id: [1; 16],
            partition: 3,
            base_offset: 42,
            segment_id: [0xab; 16],
        };
        assert_eq!(
            k.object("log"),
            "t-01010101010101010101010101010101/3/00000000000000000042-abababababababababababababababab.log"
        );
        let p = join(&Path::from("pre/fix"), &k.object("index"));
        assert!(p.as_ref().starts_with("pre/fix/t-0101"));
        assert!(p.as_ref().ends_with(".index"));
        assert_eq!(segment_id_of(&k.object("log")), Some([0xab; 16]));
        assert_eq!(segment_id_of("t-01/3/notes.txt"), None);
        assert_eq!(base_offset_of(&k.object("log")), Some(k.base_offset));
        assert_eq!(base_offset_of("t-01/3/notes.txt"), None);
    }
}
