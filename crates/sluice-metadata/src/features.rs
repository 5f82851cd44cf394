//! Feature flags (KIP-584), as Kafka's ApiVersions, DescribeFeatures and UpdateFeatures show
//! them: the versions this build supports and the levels the cluster has finalized (kept in
//! the metadata log as [`crate::MetadataRecord::FeatureLevel`]).
//!
//! Sluice supports `metadata.version` 3.3-IV3 (7) to 4.4-IV2 (33), Kafka 4.4's latest. Its
//! metadata records are its own, so a level names the Kafka release whose client-facing
//! behaviour it matches; what each 4.x level added in Kafka is either here under Sluice's
//! own records (ELR fields, bootstrap of the newer features) or carries nothing Sluice keeps
//! (see [`METADATA_VERSION_NAMES`]).
//!
//! A new cluster starts where a new Kafka 4.4 cluster does: `metadata.version` 4.4-IV2 and
//! every other feature at the highest level whose release is at or below it (Kafka's
//! bootstrap levels, [`bootstrap_levels`]): `transaction.version` 2, `group.version` 1,
//! `eligible.leader.replicas.version` 1, `share.version` 1 (Kafka 4.4 has 2, dead-letter
//! queues, which Sluice does not support), `streams.version` 1. `storage format
//! --release-version` picks the levels of that release instead. A cluster whose log holds no
//! feature level at all (formatted by a Sluice before this) keeps the levels it had:
//! [`DEFAULT_LEVELS`].
//!
//! `group.version` 1 is the consumer group protocol (KIP-848), `streams.version` 1 the
//! streams group protocol (KIP-1071) and `share.version` 1 share groups (KIP-932; Kafka 4.4's
//! level 2, dead-letter queues, is not supported): a cluster formatted with
//! `--release-version` of a release that had none of them starts at 0, as Kafka's would. At 0 the broker answers the protocol's requests UNSUPPORTED_VERSION, as
//! Kafka does; the groups already there stay in `__consumer_offsets` for when it is back.
//!
//! `transaction.version` 2 is transactions v2 (KIP-890 part 2): a client that sees it finalized
//! adds partitions to its transaction by producing to them, and every commit or abort bumps
//! its epoch. A new cluster starts at 2; one formatted for 3.9 or older, or by an older
//! Sluice, is at 0 until upgraded (never by default: older nodes of a rolling upgrade that
//! still accept Produce v12 without adding the partition would leave transactions open for
//! good). It may be
//! downgraded again (1 is treated as 0), after which clients keep to transactions v1 from
//! their next transaction on. The broker decides by each request's version, so a transaction
//! in flight finishes either way.
//!
//! `eligible.leader.replicas.version` 1 is KIP-966: the controller keeps each partition's
//! eligible leader replicas (replicas out of an ISR below `min.insync.replicas`, which hold
//! every committed record because the high watermark stays while the ISR is that small),
//! lets the ISR empty, elects from the ELR when it is, and takes a broker back from an
//! unclean shutdown out of both. On in a new cluster; level 1 needs `metadata.version`
//! 4.0-IV1 or later, as in Kafka.
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
    (METADATA_VERSION, 7, LATEST_METADATA_VERSION),
    (SHARE_VERSION, 0, 1),
    (STREAMS_VERSION, 0, 1),
    (TRANSACTION_VERSION, 0, 2),
];

/// The levels of features a cluster has until its log sets them (a level set to 0 stays 0):
/// those of a cluster formatted by a Sluice that wrote no levels when it bootstrapped.
pub const DEFAULT_LEVELS: &[(&str, i16)] = &[
    (METADATA_VERSION, DEFAULT_METADATA_VERSION),
    (GROUP_VERSION, 1),
    (SHARE_VERSION, 1),
    (STREAMS_VERSION, 1),
];

/// (feature, level, the first `metadata.version` a new cluster gets it at): Kafka 4.4's
/// bootstrap levels of the features Sluice supports (`share.version` 2 came with 4.4-IV0).
const BOOTSTRAP_FROM: &[(&str, i16, i16)] = &[
    (ELR_VERSION, 1, 26),
    (GROUP_VERSION, 1, 22),
    (SHARE_VERSION, 1, 28),
    (STREAMS_VERSION, 1, 29),
    (TRANSACTION_VERSION, 2, 24),
];

/// (feature, level, the lowest `metadata.version` it may be finalized with): Kafka's
/// feature dependencies.
const NEEDS_METADATA_VERSION: &[(&str, i16, i16)] = &[(ELR_VERSION, 1, 23)];

/// The levels a new cluster starts with, from what `storage format` was given (`given`:
/// `--release-version` as `metadata.version` and `--feature`s, possibly none): the given
/// levels, `metadata.version` [`LATEST_METADATA_VERSION`] unless given, and every other
/// feature at its bootstrap level for that `metadata.version`. `metadata.version` first.
pub fn bootstrap_levels(given: &[(String, i16)]) -> Result<Vec<(String, i16)>, String> {
    let given_level = |f: &str| given.iter().find(|(n, _)| n == f).map(|(_, l)| *l);
    let mv = given_level(METADATA_VERSION).unwrap_or(LATEST_METADATA_VERSION);
    let mut out = vec![(METADATA_VERSION.to_string(), mv)];
    for (feature, _, _) in SUPPORTED {
        if *feature == METADATA_VERSION || *feature == KRAFT_VERSION {
            continue;
        }
        let level = given_level(feature).unwrap_or_else(|| {
            BOOTSTRAP_FROM
                .iter()
                .filter(|(f, _, from)| f == feature && *from <= mv)
                .map(|(_, l, _)| *l)
                .max()
                .unwrap_or(0)
        });
        check_dependencies(feature, level, mv)?;
        out.push((feature.to_string(), level));
    }
    Ok(out)
}

/// Whether the levels a cluster would have after an update of the `changed` features meet
/// their dependencies (all of them when `metadata.version` changes).
pub fn check_update_dependencies(
    levels: &BTreeMap<String, i16>,
    changed: &[&str],
) -> Result<(), String> {
    let mv = levels
        .get(METADATA_VERSION)
        .copied()
        .unwrap_or(DEFAULT_METADATA_VERSION);
    levels
        .iter()
        .filter(|(f, _)| changed.contains(&METADATA_VERSION) || changed.contains(&f.as_str()))
        .try_for_each(|(feature, level)| check_dependencies(feature, *level, mv))
}

/// Whether `feature` at `level` may be finalized with `metadata.version` `mv`.
fn check_dependencies(feature: &str, level: i16, mv: i16) -> Result<(), String> {
    match NEEDS_METADATA_VERSION
        .iter()
        .find(|(f, l, _)| *f == feature && *l <= level)
    {
        Some((_, _, needs)) if mv < *needs => Err(format!(
            "Invalid update version {level} for feature {feature}. {feature} {level} needs metadata.version {} or later (it is {})",
            metadata_version_name(*needs),
            metadata_version_name(mv)
        )),
        _ => Ok(()),
    }
}

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

/// The `metadata.version` of a cluster whose log records none (formatted by an older Sluice).
pub const DEFAULT_METADATA_VERSION: i16 = 21;

/// The highest `metadata.version`, Kafka 4.4's latest (4.4-IV2): where a new cluster starts.
pub const LATEST_METADATA_VERSION: i16 = 33;

/// Kafka's names of the `metadata.version` levels Sluice supports, by level. What Kafka's 4.x
/// levels add (Kafka 4.4's MetadataVersion): 4.0-IV0, 4.0-IV2, 4.1-IV0, 4.2-IV0 and 4.2-IV1
/// are where `group.version` 1, `transaction.version` 2, ELR, `share.version` 1 and
/// `streams.version` 1 become a new cluster's levels ([`BOOTSTRAP_FROM`]); 4.0-IV1 the ELR
/// fields of partition records (Sluice's own records carry them at every level); 4.0-IV3,
/// 4.1-IV1 and 4.2-IV1 the ListOffsets and Fetch versions brokers send each other (Sluice's
/// followers take theirs from ApiVersions); 4.3-IV0 cordoned log directories, 4.4-IV0
/// `share.version` 2, 4.4-IV1 CIDR hosts in ACLs, 4.4-IV2 unregistering controllers, none of
/// which Sluice has, so those levels only name the release whose clients it serves.
pub const METADATA_VERSION_NAMES: &[(i16, &str)] = &[
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
    (22, "4.0-IV0"),
    (23, "4.0-IV1"),
    (24, "4.0-IV2"),
    (25, "4.0-IV3"),
    (26, "4.1-IV0"),
    (27, "4.1-IV1"),
    (28, "4.2-IV0"),
    (29, "4.2-IV1"),
    (30, "4.3-IV0"),
    (31, "4.4-IV0"),
    (32, "4.4-IV1"),
    (33, "4.4-IV2"),
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
        assert!(check_update(&image, METADATA_VERSION, 33, UpgradeType::Upgrade).is_ok());
        assert!(check_update(&image, METADATA_VERSION, 34, UpgradeType::Upgrade).is_err());
        assert_eq!(parse_metadata_version("4.4"), Some(33));
        assert_eq!(parse_metadata_version("4.0-IV1"), Some(23));
        assert_eq!(metadata_version_name(26), "4.1-IV0");
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

    /// A new cluster gets Kafka 4.4's levels; a release gets the levels it had; a given
    /// level wins, unless it breaks a dependency.
    #[test]
    fn new_clusters_start_at_the_levels_of_their_release() {
        let levels = |given: &[(&str, i16)]| {
            let given: Vec<(String, i16)> =
                given.iter().map(|(n, l)| (n.to_string(), *l)).collect();
            bootstrap_levels(&given).map(|v| {
                v.into_iter()
                    .map(|(n, l)| format!("{n}={l}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
        };
        assert_eq!(
            levels(&[]).unwrap(),
            "metadata.version=33 eligible.leader.replicas.version=1 group.version=1 \
             share.version=1 streams.version=1 transaction.version=2"
        );
        assert_eq!(
            levels(&[(METADATA_VERSION, 21)]).unwrap(),
            "metadata.version=21 eligible.leader.replicas.version=0 group.version=0 \
             share.version=0 streams.version=0 transaction.version=0"
        );
        // 4.0: the consumer group protocol and transactions v2, not yet ELR.
        assert_eq!(
            levels(&[(METADATA_VERSION, 25)]).unwrap(),
            "metadata.version=25 eligible.leader.replicas.version=0 group.version=1 \
             share.version=0 streams.version=0 transaction.version=2"
        );
        assert_eq!(
            levels(&[
                (METADATA_VERSION, 23),
                (ELR_VERSION, 1),
                (TRANSACTION_VERSION, 0)
            ])
            .unwrap(),
            "metadata.version=23 eligible.leader.replicas.version=1 group.version=1 \
             share.version=0 streams.version=0 transaction.version=0"
        );
        let err = levels(&[(METADATA_VERSION, 22), (ELR_VERSION, 1)]).unwrap_err();
        assert!(err.contains("needs metadata.version 4.0-IV1"), "{err}");
        // An update: ELR alone on 3.9-IV0 is refused, with a metadata.version that has it not.
        let mut after: BTreeMap<String, i16> = [(METADATA_VERSION.to_string(), 21)].into();
        after.insert(ELR_VERSION.into(), 1);
        assert!(check_update_dependencies(&after, &[ELR_VERSION]).is_err());
        assert!(check_update_dependencies(&after, &[GROUP_VERSION]).is_ok());
        after.insert(METADATA_VERSION.into(), 23);
        assert!(check_update_dependencies(&after, &[METADATA_VERSION, ELR_VERSION]).is_ok());
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
