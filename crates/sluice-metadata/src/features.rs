//! Feature flags (KIP-584), as Kafka's ApiVersions, DescribeFeatures and UpdateFeatures show
//! them: the versions this build supports and the levels the cluster has finalized (kept in
//! the metadata log as [`crate::MetadataRecord::FeatureLevel`]).
//!
//! Sluice supports `metadata.version` 3.3-IV3 (7) to 3.9-IV0 (21). Its metadata records are its
//! own, so the level names the Kafka release whose client-facing behaviour it matches: 3.9-IV0,
//! the last before Kafka 4.0's metadata changes (ELR among them), which Sluice does not have.
//!
//! `group.version` 1 is the consumer group protocol (KIP-848), `streams.version` 1 the
//! streams group protocol (KIP-1071) and `share.version` 1 share groups (KIP-932; Kafka 4.4's
//! level 2, dead-letter queues, is not supported): finalized by default, as on a new Kafka 4.4
//! cluster; a
//! cluster formatted with `--release-version` (3.9 or older, which had neither) starts at 0,
//! as Kafka's would. At 0 the broker answers the protocol's requests UNSUPPORTED_VERSION, as
//! Kafka does; the groups already there stay in `__consumer_offsets` for when it is back.
//!
//! `transaction.version` 2 is transactions v2 (KIP-890 part 2): a client that sees it finalized
//! adds partitions to its transaction by producing to them, and every commit or abort bumps
//! its epoch. A cluster is at 0 until upgraded (a new Kafka 4 cluster is formatted at 2): a
//! node that finalized 2 by default while older nodes of a rolling upgrade still accept
//! Produce v12 without adding the partition would leave transactions open for good. It may be
//! downgraded again (1 is treated as 0), after which clients keep to transactions v1 from
//! their next transaction on. The broker decides by each request's version, so a transaction
//! in flight finishes either way.
//!
//! `eligible.leader.replicas.version` 1 is KIP-966: the controller keeps each partition's
//! eligible leader replicas (replicas out of an ISR below `min.insync.replicas`, which hold
//! every committed record because the high watermark stays while the ISR is that small),
//! lets the ISR empty, elects from the ELR when it is, and takes a broker back from an
//! unclean shutdown out of both. A cluster is at 0 until upgraded (or formatted with it).
//!
//! `kraft.version` 1 is the dynamic controller quorum (KIP-853): finalized when the quorum
//! was formatted without static voters, and reachable from a static quorum by upgrading it;
//! never downgraded, as in Kafka.

use std::collections::BTreeMap;

use crate::MetadataImage;

pub const METADATA_VERSION: &str = "metadata.version";
pub const KRAFT_VERSION: &str = "kraft.version";
pub const TRANSACTION_VERSION: &str = "transaction.version";
pub const GROUP_VERSION: &str = "group.version";
pub const STREAMS_VERSION: &str = "streams.version";
pub const SHARE_VERSION: &str = "share.version";
pub const ELR_VERSION: &str = "eligible.leader.replicas.version";

/// (feature, lowest, highest) level this build supports.
pub const SUPPORTED: &[(&str, i16, i16)] = &[
    (ELR_VERSION, 0, 1),
    (GROUP_VERSION, 0, 1),
    (KRAFT_VERSION, 0, 1),
    (METADATA_VERSION, 7, 21),
    (SHARE_VERSION, 0, 1),
    (STREAMS_VERSION, 0, 1),
    (TRANSACTION_VERSION, 0, 2),
];

/// The levels of features a cluster has until its log sets them (a level set to 0 stays 0).
const DEFAULT_LEVELS: &[(&str, i16)] = &[
    (METADATA_VERSION, DEFAULT_METADATA_VERSION),
    (GROUP_VERSION, 1),
    (SHARE_VERSION, 1),
    (STREAMS_VERSION, 1),
];

/// The levels `storage format --release-version` adds for features its release did not have
/// (every release Sluice names predates them).
pub const BEFORE_4_0: &[(&str, i16)] = &[
    (ELR_VERSION, 0),
    (GROUP_VERSION, 0),
    (SHARE_VERSION, 0),
    (STREAMS_VERSION, 0),
];

/// The finalized level of `feature` (0: off).
pub fn level(image: &MetadataImage, feature: &str) -> i16 {
    finalized(image).get(feature).copied().unwrap_or(0)
}

/// Whether partitions keep eligible leader replicas (KIP-966).
pub fn elr_enabled(image: &MetadataImage) -> bool {
    level(image, ELR_VERSION) >= 1
}

/// Whether the controller quorum takes voters added and removed at runtime (KIP-853).
pub fn dynamic_quorum(image: &MetadataImage) -> bool {
    image.features.get(KRAFT_VERSION).is_some_and(|l| *l >= 1)
}

/// The `metadata.version` a cluster starts at (and has while its log records none).
pub const DEFAULT_METADATA_VERSION: i16 = 21;

/// Kafka's names of the `metadata.version` levels Sluice supports, by level.
const METADATA_VERSION_NAMES: &[(i16, &str)] = &[
    (7, "3.3-IV3"),
    (8, "3.4-IV0"),
    (9, "3.5-IV0"),
    (10, "3.5-IV1"),
    (11, "3.5-IV2"),
    (12, "3.6-IV0"),
    (13, "3.6-IV1"),
    (14, "3.6-IV2"),
    (15, "3.7-IV0"),
    (16, "3.7-IV1"),
    (17, "3.7-IV2"),
    (18, "3.7-IV3"),
    (19, "3.7-IV4"),
    (20, "3.8-IV0"),
    (21, "3.9-IV0"),
];

/// The name of `metadata.version` level `level` ("3.9-IV0"), or the number for others.
pub fn metadata_version_name(level: i16) -> String {
    METADATA_VERSION_NAMES
        .iter()
        .find(|(l, _)| *l == level)
        .map_or_else(|| level.to_string(), |(_, n)| (*n).to_string())
}

/// The level of a `metadata.version` given as Kafka's tools take it: a release ("3.9"
/// names its latest level), a level name ("3.7-IV2") or a number.
pub fn parse_metadata_version(s: &str) -> Option<i16> {
    if let Ok(level) = s.parse::<i16>() {
        return Some(level);
    }
    if let Some((l, _)) = METADATA_VERSION_NAMES.iter().find(|(_, n)| *n == s) {
        return Some(*l);
    }
    METADATA_VERSION_NAMES
        .iter()
        .filter(|(_, n)| n.split('-').next() == Some(s))
        .map(|(l, _)| *l)
        .max()
}

/// The finalized levels of the cluster in `image`: every feature at a level above 0.
pub fn finalized(image: &MetadataImage) -> BTreeMap<String, i16> {
    let mut out = image.features.clone();
    for (feature, level) in DEFAULT_LEVELS {
        out.entry(feature.to_string()).or_insert(*level);
    }
    out.retain(|_, level| *level > 0);
    out
}

/// How an UpdateFeatures request may move a feature's level (Kafka's upgrade types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
}

impl UpgradeType {
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            1 => Some(Self::Upgrade),
            2 => Some(Self::SafeDowngrade),
            3 => Some(Self::UnsafeDowngrade),
            _ => None,
        }
    }
}

/// Check one update against the supported range and Kafka's rules: an upgrade may only go
/// up; `metadata.version` cannot be disabled and is never downgraded (Kafka refuses a safe
/// downgrade it cannot prove lossless, and Sluice has no metadata it could drop); other
/// features follow their range.
pub fn check_update(
    image: &MetadataImage,
    feature: &str,
    level: i16,
    how: UpgradeType,
) -> Result<(), String> {
    let Some((_, min, max)) = SUPPORTED.iter().find(|(f, ..)| *f == feature) else {
        return Err(format!(
            "Invalid update version {level} for feature {feature}. The controller does not support the given feature."
        ));
    };
    let current = finalized(image).get(feature).copied().unwrap_or(0);
    if feature == METADATA_VERSION {
        if level < *min || level > *max {
            return Err(format!(
                "Invalid update version {level} for feature {feature}. Local controller supports versions {}-{}",
                metadata_version_name(*min),
                metadata_version_name(*max)
            ));
        }
        if level < current {
            return Err(format!(
                "Invalid metadata.version {level}. Refusing to perform the requested downgrade because it might delete metadata information."
            ));
        }
        return Ok(());
    }
    if feature == KRAFT_VERSION && level < current {
        return Err(format!(
            "Invalid update version {level} for feature {feature}. Downgrading kraft.version is not supported."
        ));
    }
    if level != 0 && (level < *min || level > *max) {
        return Err(format!(
            "Invalid update version {level} for feature {feature}. Local controller supports versions {min}-{max}"
        ));
    }
    if level < current && how == UpgradeType::Upgrade {
        return Err(format!(
            "Invalid update version {level} for feature {feature}. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_versions_read_as_kafkas_and_only_move_up() {
        assert_eq!(parse_metadata_version("3.9"), Some(21));
        assert_eq!(parse_metadata_version("3.7"), Some(19));
        assert_eq!(parse_metadata_version("3.7-IV2"), Some(17));
        assert_eq!(parse_metadata_version("14"), Some(14));
        assert_eq!(parse_metadata_version("9.9"), None);
        assert_eq!(metadata_version_name(21), "3.9-IV0");
        let mut image = MetadataImage::empty();
        assert_eq!(finalized(&image).get(METADATA_VERSION), Some(&21));
        assert!(check_update(&image, METADATA_VERSION, 21, UpgradeType::Upgrade).is_ok());
        let down = check_update(&image, METADATA_VERSION, 20, UpgradeType::UnsafeDowngrade);
        assert!(down
            .unwrap_err()
            .contains("Refusing to perform the requested downgrade"));
        assert!(check_update(&image, METADATA_VERSION, 22, UpgradeType::Upgrade).is_err());
        assert!(check_update(&image, METADATA_VERSION, 0, UpgradeType::UnsafeDowngrade).is_err());
        assert!(
            check_update(&image, "unknown.version", 1, UpgradeType::Upgrade)
                .unwrap_err()
                .contains("does not support")
        );
        image.apply(
            5,
            &crate::MetadataRecord::FeatureLevel {
                name: METADATA_VERSION.into(),
                level: 15,
            },
        );
        assert_eq!(finalized(&image).get(METADATA_VERSION), Some(&15));
        assert_eq!(image.features_epoch, 5);
        assert!(check_update(&image, METADATA_VERSION, 20, UpgradeType::Upgrade).is_ok());
        assert!(!dynamic_quorum(&image));
        assert!(check_update(&image, KRAFT_VERSION, 1, UpgradeType::Upgrade).is_ok());
        assert!(check_update(&image, KRAFT_VERSION, 2, UpgradeType::Upgrade).is_err());
        image.apply(
            6,
            &crate::MetadataRecord::FeatureLevel {
                name: KRAFT_VERSION.into(),
                level: 1,
            },
        );
        assert!(dynamic_quorum(&image));
        assert!(
            check_update(&image, KRAFT_VERSION, 0, UpgradeType::UnsafeDowngrade)
                .unwrap_err()
                .contains("not supported")
        );
    }

    #[test]
    fn transaction_version_is_turned_on_and_off_by_updates() {
        let mut image = MetadataImage::empty();
        assert_eq!(finalized(&image).get(TRANSACTION_VERSION), None, "off");
        assert!(check_update(&image, TRANSACTION_VERSION, 3, UpgradeType::Upgrade).is_err());
        assert!(check_update(&image, TRANSACTION_VERSION, 2, UpgradeType::Upgrade).is_ok());
        image.apply(
            2,
            &crate::MetadataRecord::FeatureLevel {
                name: TRANSACTION_VERSION.into(),
                level: 2,
            },
        );
        assert_eq!(finalized(&image).get(TRANSACTION_VERSION), Some(&2));
        assert!(
            check_update(&image, TRANSACTION_VERSION, 0, UpgradeType::Upgrade)
                .unwrap_err()
                .contains("Can't downgrade")
        );
        assert!(check_update(&image, TRANSACTION_VERSION, 0, UpgradeType::SafeDowngrade).is_ok());
        let off = crate::MetadataRecord::FeatureLevel {
            name: TRANSACTION_VERSION.into(),
            level: 0,
        };
        image.apply(3, &off);
        assert_eq!(finalized(&image).get(TRANSACTION_VERSION), None, "off");
        assert_eq!(image.features_epoch, 3);
        // A snapshot keeps it off.
        let mut restored = MetadataImage::empty();
        for (i, r) in image.to_records().iter().enumerate() {
            restored.apply(i as i64, r);
        }
        assert_eq!(finalized(&restored).get(TRANSACTION_VERSION), None);
        assert!(check_update(&image, TRANSACTION_VERSION, 2, UpgradeType::Upgrade).is_ok());
    }

    #[test]
    fn the_group_protocols_are_on_until_turned_off() {
        let mut image = MetadataImage::empty();
        assert_eq!(level(&image, GROUP_VERSION), 1);
        assert_eq!(level(&image, STREAMS_VERSION), 1);
        assert!(check_update(&image, GROUP_VERSION, 2, UpgradeType::Upgrade).is_err());
        assert!(check_update(&image, GROUP_VERSION, 0, UpgradeType::Upgrade).is_err());
        assert!(check_update(&image, GROUP_VERSION, 0, UpgradeType::SafeDowngrade).is_ok());
        image.apply(
            4,
            &crate::MetadataRecord::FeatureLevel {
                name: GROUP_VERSION.into(),
                level: 0,
            },
        );
        assert_eq!(
            level(&image, GROUP_VERSION),
            0,
            "off, not back to its default"
        );
        assert_eq!(finalized(&image).get(GROUP_VERSION), None);
        assert_eq!(level(&image, STREAMS_VERSION), 1);
        // A snapshot keeps it off.
        let mut restored = MetadataImage::empty();
        for (i, r) in image.to_records().iter().enumerate() {
            restored.apply(i as i64, r);
        }
        assert_eq!(level(&restored, GROUP_VERSION), 0);
        assert!(check_update(&restored, GROUP_VERSION, 1, UpgradeType::Upgrade).is_ok());
    }
}
