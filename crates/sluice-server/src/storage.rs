//! Formatting a node's storage before its first start, as `kafka-storage format` does
//! (`sluice storage format`). A node of a static quorum needs none (its first start writes
//! `meta.properties`); a controller of a dynamic quorum (KIP-853:
//! `controller.quorum.bootstrap.servers` without `controller.quorum.voters`) must be
//! formatted with the quorum it starts from: `--standalone` (itself alone),
//! `--initial-controllers` (a list every initial controller is formatted with) or
//! `--no-initial-controllers` (it joins a running quorum as an observer and is added as a
//! voter later). That choice is kept in the metadata directory's `initial-controllers` file.

use std::path::{Path, PathBuf};

use sluice_metadata::{features, BrokerConfig, Uuid};
use sluice_storage::checkpoint::MetaProperties;

/// In the metadata directory: the quorum a dynamic controller was formatted with, in
/// Kafka's `--initial-controllers` syntax (`id@host:port:directory-id,...`; empty: none).
pub const INITIAL_CONTROLLERS_FILE: &str = "initial-controllers";

/// How `sluice storage format` sets up the controller quorum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuorumStart {
    /// Static voters, or a broker-only node: nothing to record.
    Unset,
    /// This controller is the quorum's only voter.
    Standalone,
    /// These controllers are the initial voters.
    InitialControllers(String),
    /// This controller joins a running quorum.
    NoInitialControllers,
}

/// An initial voter of a dynamic quorum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitialVoter {
    pub id: i32,
    /// `host:port` of its controller listener.
    pub addr: String,
    pub directory_id: Uuid,
}

/// Parse Kafka's `--initial-controllers` list: `id@host:port:directory-id,...`.
pub fn parse_initial_controllers(list: &str) -> Result<Vec<InitialVoter>, String> {
    let mut out: Vec<InitialVoter> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let bad = || format!("'{item}' is not id@host:port:directory-id");
        let (id, rest) = item.split_once('@').ok_or_else(bad)?;
        let (addr, dir) = rest.rsplit_once(':').ok_or_else(bad)?;
        let id: i32 = id.parse().map_err(|_| bad())?;
        let port_ok = addr
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
        if id < 0 || !port_ok {
            return Err(bad());
        }
        let directory_id = parse_uuid(dir)
            .ok_or_else(|| format!("'{dir}' in '{item}' is not a directory id (a base64 UUID)"))?;
        if out.iter().any(|v| v.id == id) {
            return Err(format!("controller {id} is listed twice"));
        }
        out.push(InitialVoter {
            id,
            addr: addr.to_string(),
            directory_id,
        });
    }
    Ok(out)
}

fn show(voters: &[InitialVoter]) -> String {
    voters
        .iter()
        .map(|v| {
            format!(
                "{}@{}:{}",
                v.id,
                v.addr,
                sluice_protocol::base64::encode(v.directory_id.as_bytes())
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A UUID in Kafka's text form (URL-safe base64 of its 16 bytes, unpadded); not the nil one.
pub fn parse_uuid(text: &str) -> Option<Uuid> {
    let bytes = sluice_protocol::base64::decode(text.trim())?;
    let id = Uuid::from_slice(&bytes).ok()?;
    (!id.is_nil()).then_some(id)
}

/// A new random UUID in Kafka's text form (`kafka-storage random-uuid`).
pub fn random_uuid() -> String {
    sluice_protocol::base64::encode(fresh_uuid().as_bytes())
}

/// A random UUID whose text does not start with '-' (which a command line would take for
/// an option), as Kafka's `Uuid.randomUuid` makes them.
fn fresh_uuid() -> Uuid {
    loop {
        let id = sluice_rt::random_uuid();
        if !sluice_protocol::base64::encode(id.as_bytes()).starts_with('-') && !id.is_nil() {
            return id;
        }
    }
}

/// The node's data directory (its first `log.dirs` entry) and metadata directory.
pub fn directories(config: &BrokerConfig) -> (PathBuf, PathBuf) {
    let data = config
        .log_dirs()
        .into_iter()
        .next()
        .unwrap_or_else(|| PathBuf::from("./sluice-data"));
    let metadata = config
        .explicit("metadata.log.dir")
        .map_or_else(|| data.clone(), PathBuf::from);
    (data, metadata)
}

/// Every `log.dirs` entry (the first is the data directory of [`directories`]).
pub fn log_dirs(config: &BrokerConfig) -> Vec<PathBuf> {
    let dirs = config.log_dirs();
    if dirs.is_empty() {
        vec![PathBuf::from("./sluice-data")]
    } else {
        dirs
    }
}

/// This node's controller listener as `host:port`, for `--standalone`.
fn controller_addr(config: &BrokerConfig) -> Result<String, String> {
    let names = config.controller_listener_names();
    let listener = config
        .listeners()
        .into_iter()
        .find(|l| names.contains(&l.name))
        .ok_or("--standalone needs a controller listener (controller.listener.names)")?;
    if listener.port == 0 {
        return Err(format!(
            "--standalone needs the controller listener {} on a fixed port, not 0",
            listener.name
        ));
    }
    let host = if listener.host.is_empty() || listener.host == "0.0.0.0" {
        "localhost".to_string()
    } else {
        listener.host
    };
    Ok(format!("{host}:{}", listener.port))
}

/// The feature levels a formatted cluster starts with (`--release-version`, `--feature` and
/// the bootstrap levels of the rest), written by [`format`] into the metadata directory (a
/// `name=level` line each); the first active controller finalizes them before anything else
/// (as Kafka's bootstrap checkpoint).
pub const BOOTSTRAP_FEATURES_FILE: &str = "bootstrap-features";

/// `--release-version` and `--feature NAME=LEVEL` of `storage format`, checked against
/// the levels this build supports and their dependencies, with every other feature at its
/// bootstrap level: (feature, level) each, `metadata.version` first.
pub fn bootstrap_features(
    release_version: Option<&str>,
    features: &[String],
) -> Result<Vec<(String, i16)>, String> {
    let mut out: Vec<(String, i16)> = Vec::new();
    if let Some(v) = release_version {
        let level = features::parse_metadata_version(v)
            .filter(|l| features::metadata_version_name(*l) != l.to_string())
            .ok_or_else(|| {
                format!(
                    "Unknown release version '{v}': this build supports metadata.version {} to {}",
                    features::metadata_version_name(7),
                    features::metadata_version_name(features::LATEST_METADATA_VERSION)
                )
            })?;
        out.push((features::METADATA_VERSION.into(), level));
    }
    for f in features {
        let (name, level) = f
            .split_once('=')
            .ok_or_else(|| format!("--feature {f}: expected NAME=LEVEL"))?;
        let (name, level) = (name.trim(), level.trim());
        if name == features::KRAFT_VERSION {
            return Err("--feature kraft.version: the quorum's kind sets it (--standalone, --initial-controllers or --no-initial-controllers: 1; controller.quorum.voters: 0)".into());
        }
        let Some((_, min, max)) = features::SUPPORTED.iter().find(|(n, ..)| *n == name) else {
            let known: Vec<&str> = features::SUPPORTED
                .iter()
                .map(|(n, ..)| *n)
                .filter(|n| *n != features::KRAFT_VERSION)
                .collect();
            return Err(format!(
                "--feature {f}: unknown feature {name} (known: {})",
                known.join(", ")
            ));
        };
        let level = if name == features::METADATA_VERSION {
            features::parse_metadata_version(level)
        } else {
            level.parse::<i16>().ok()
        }
        .filter(|l| (*min..=*max).contains(l))
        .ok_or_else(|| format!("--feature {f}: {name} must be between {min} and {max}"))?;
        if out.iter().any(|(n, _)| n == name) {
            return Err(format!(
                "--feature {name} is given more than once (or with --release-version)"
            ));
        }
        out.push((name.to_string(), level));
    }
    // The rest at the levels of the release (the latest when none is named), as Kafka's
    // bootstrap metadata: a release names the levels it had.
    features::bootstrap_levels(&out)
}

/// The feature levels the metadata directory was formatted with (empty: none given).
pub fn read_bootstrap_features(metadata_dir: &Path) -> Result<Vec<(String, i16)>, String> {
    let path = metadata_dir.join(BOOTSTRAP_FEATURES_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                l.split_once('=')
                    .and_then(|(n, v)| Some((n.trim().to_string(), v.trim().parse().ok()?)))
                    .ok_or_else(|| format!("{}: bad line {l:?}", path.display()))
            })
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Format this node's storage; returns what it did, a line per directory.
pub fn format(
    config: &BrokerConfig,
    cluster_id: &str,
    start: &QuorumStart,
    ignore_formatted: bool,
    bootstrap: &[(String, i16)],
) -> Result<Vec<String>, String> {
    if parse_uuid(cluster_id).is_none() {
        return Err(format!(
            "Cluster ID string {cluster_id} does not appear to be a valid UUID (use `sluice storage random-uuid`)"
        ));
    }
    let (_, is_controller) = config.roles();
    let node_id = config.node_id();
    let static_voters = config.quorum_voters()?;
    if *start != QuorumStart::Unset {
        if !is_controller {
            return Err("--standalone, --initial-controllers and --no-initial-controllers apply to controllers (process.roles includes controller)".into());
        }
        if !static_voters.is_empty() {
            return Err("--standalone, --initial-controllers and --no-initial-controllers are for a dynamic quorum: remove controller.quorum.voters and set controller.quorum.bootstrap.servers".into());
        }
    } else if is_controller
        && static_voters.is_empty()
        && config.explicit("process.roles").is_some()
    {
        return Err("Because controller.quorum.voters is not set on this controller, you must specify one of the following: --standalone, --initial-controllers, or --no-initial-controllers.".into());
    }
    let mut directory_id = fresh_uuid();
    let voters = match start {
        QuorumStart::Unset => None,
        QuorumStart::Standalone => Some(vec![InitialVoter {
            id: node_id,
            addr: controller_addr(config)?,
            directory_id,
        }]),
        QuorumStart::InitialControllers(list) => {
            let voters = parse_initial_controllers(list)?;
            if voters.is_empty() {
                return Err("--initial-controllers lists no controller".into());
            }
            // This controller's metadata directory takes the id the list gives it.
            if let Some(me) = voters.iter().find(|v| v.id == node_id) {
                directory_id = me.directory_id;
            }
            Some(voters)
        }
        QuorumStart::NoInitialControllers => Some(Vec::new()),
    };
    let (_, metadata) = directories(config);
    let mut dirs = log_dirs(config);
    if !dirs.contains(&metadata) {
        dirs.push(metadata.clone());
    }
    let mut done = Vec::new();
    for dir in &dirs {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        if MetaProperties::read(dir)
            .map_err(|e| e.to_string())?
            .is_some()
        {
            if ignore_formatted {
                done.push(format!(
                    "{} is already formatted; left as it is",
                    dir.display()
                ));
                continue;
            }
            return Err(format!(
                "Log directory {} is already formatted. Use --ignore-formatted to ignore this directory and format the others.",
                dir.display()
            ));
        }
        // The metadata directory's id is the voter's directory id.
        let id = if *dir == metadata {
            directory_id
        } else {
            fresh_uuid()
        };
        MetaProperties {
            cluster_id: cluster_id.to_string(),
            node_id,
            directory_id: sluice_protocol::base64::encode(id.as_bytes()),
        }
        .write(dir)
        .map_err(|e| e.to_string())?;
        if *dir == metadata {
            if let Some(voters) = &voters {
                let path = dir.join(INITIAL_CONTROLLERS_FILE);
                std::fs::write(&path, format!("{}\n", show(voters)))
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            }
            if !bootstrap.is_empty() {
                let path = dir.join(BOOTSTRAP_FEATURES_FILE);
                let text: String = bootstrap
                    .iter()
                    .map(|(n, l)| format!("{n}={l}\n"))
                    .collect();
                std::fs::write(&path, text)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            }
        }
        let metadata_version = bootstrap
            .iter()
            .find(|(n, _)| n == features::METADATA_VERSION)
            .map_or(features::LATEST_METADATA_VERSION, |(_, l)| *l);
        done.push(format!(
            "Formatted {} with metadata.version {}.",
            dir.display(),
            features::metadata_version_name(metadata_version)
        ));
    }
    Ok(done)
}

/// The directory id `meta.properties` gives `dir` (an error when it is not formatted).
pub fn directory_id(dir: &Path) -> Result<Uuid, String> {
    let meta = MetaProperties::read(dir)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} is not formatted (sluice storage format)", dir.display()))?;
    parse_uuid(&meta.directory_id)
        .ok_or_else(|| format!("{}: meta.properties has no directory.id", dir.display()))
}

/// The quorum a dynamic controller was formatted with (None: not formatted for one).
pub fn initial_controllers(metadata_dir: &Path) -> Result<Option<Vec<InitialVoter>>, String> {
    let path = metadata_dir.join(INITIAL_CONTROLLERS_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_initial_controllers(text.trim())
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_controllers_read_as_kafka_writes_them() {
        let dir = random_uuid();
        let list = format!("1@localhost:9093:{dir},2@10.0.0.2:19093:{dir}");
        let voters = parse_initial_controllers(&list).unwrap();
        assert_eq!(voters.len(), 2);
        assert_eq!(voters[1].addr, "10.0.0.2:19093");
        assert_eq!(show(&voters), list);
        for bad in [
            "1@localhost:9093",
            "x@localhost:9093:AAAAAAAAAAAAAAAAAAAAAA",
            "1@localhost:0:AAAAAAAAAAAAAAAAAAAAAQ",
            "1@localhost:9093:AAAAAAAAAAAAAAAAAAAAAA",
        ] {
            assert!(parse_initial_controllers(bad).is_err(), "{bad}");
        }
        let twice = format!("1@a:1:{dir},1@b:2:{dir}");
        assert!(parse_initial_controllers(&twice).is_err());
        assert!(parse_initial_controllers("").unwrap().is_empty());
    }
}
