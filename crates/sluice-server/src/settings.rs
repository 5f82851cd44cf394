//! Where configuration comes from: a `server.properties` file, `SLUICE_*` environment
//! variables, then `--override key=value` flags, later ones winning.

use std::path::Path;

use sluice_metadata::config::{env_key_to_config, BrokerConfig, ConfigError, Origin};
use sluice_storage::checkpoint::parse_properties;

/// Gather settings and build the broker config. Returns warnings (unknown keys) to log.
pub fn load(
    config_file: Option<&Path>,
    env: impl IntoIterator<Item = (String, String)>,
    overrides: &[String],
) -> Result<(BrokerConfig, Vec<String>), ConfigError> {
    let mut settings = Vec::new();
    if let Some(path) = config_file {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            key: "--config".into(),
            message: format!("cannot read {}: {e}", path.display()),
        })?;
        let props = parse_properties(&text).map_err(|e| ConfigError {
            key: "--config".into(),
            message: format!("{}: {e}", path.display()),
        })?;
        settings.extend(props.into_iter().map(|(k, v)| (Origin::File, k, v)));
    }
    for (var, value) in env {
        if let Some(key) = env_key_to_config(&var) {
            settings.push((Origin::Env, key, value));
        }
    }
    for o in overrides {
        let (k, v) = o.split_once('=').ok_or_else(|| ConfigError {
            key: "--override".into(),
            message: format!("'{o}' is not of the form key=value"),
        })?;
        settings.push((Origin::Override, k.trim().to_string(), v.trim().to_string()));
    }
    BrokerConfig::build(&settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_env_and_overrides_layer() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("server.properties");
        std::fs::write(
            &file,
            "num.partitions=3\nlog.retention.hours=5\nbogus.key=1\n",
        )
        .unwrap();
        let env = vec![
            ("SLUICE_NUM_PARTITIONS".to_string(), "4".to_string()),
            ("PATH".to_string(), "/bin".to_string()),
        ];
        let (c, warnings) = load(Some(&file), env, &["num.partitions=5".to_string()]).unwrap();
        assert_eq!(c.num_partitions(), 5);
        assert_eq!(c.topic_default("retention.ms").unwrap().0, "18000000");
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("bogus.key"));
        let err = load(None, Vec::new(), &["num.partitions".to_string()]).unwrap_err();
        assert_eq!(err.key, "--override");
        let err = load(None, Vec::new(), &["log.segment.bytes=big".to_string()]).unwrap_err();
        assert_eq!(err.key, "log.segment.bytes");
        assert!(load(Some(&dir.path().join("missing")), Vec::new(), &[]).is_err());
    }
}
