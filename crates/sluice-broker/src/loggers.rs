//! Log levels changed at runtime (KIP-412): Kafka's BROKER_LOGGER config resource, named by
//! the broker id. DescribeConfigs lists the loggers with a level; IncrementalAlterConfigs SET
//! gives a logger a level, DELETE puts it back under the root logger's. Loggers are `tracing`
//! targets (`sluice_broker::replica_fetcher`, or a prefix such as `sluice_broker`); `root`
//! is the default level. Levels are Kafka's names. Changes last until the process exits, as
//! in Kafka (they are not kept in cluster metadata).
//!
//! The process that owns the log subscriber (the `sluice` binary) installs a [`LogControl`];
//! without one the resource describes nothing and refuses changes.

use std::sync::OnceLock;

/// The root logger's name.
pub const ROOT: &str = "root";

/// Kafka's log levels, as a client may name them.
pub const LEVELS: &[&str] = &["OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"];

/// Something that can read and change the process's log filter.
pub trait LogControl: Send + Sync {
    /// (logger, Kafka level name) for the root and every logger given a level.
    fn levels(&self) -> Vec<(String, String)>;
    /// Apply `changes` at once: (logger, Some(level)) sets, (logger, None) unsets.
    /// Callers have validated them with [`validate`].
    fn apply(&self, changes: &[(String, Option<String>)]) -> Result<(), String>;
}

static CONTROL: OnceLock<Box<dyn LogControl>> = OnceLock::new();

/// Install the process's log control (once; later calls are ignored).
pub fn install(control: Box<dyn LogControl>) {
    let _ = CONTROL.set(control);
}

pub fn control() -> Option<&'static dyn LogControl> {
    CONTROL.get().map(|b| b.as_ref())
}

/// Kafka's level name for a `tracing` filter level (`warn` → `WARN`, `off` → `OFF`).
pub fn kafka_level(tracing_level: &str) -> String {
    tracing_level.to_ascii_uppercase()
}

/// The `tracing` filter level for a Kafka level name (FATAL has no equal: ERROR).
pub fn tracing_level(kafka: &str) -> Option<&'static str> {
    Some(match kafka.to_ascii_uppercase().as_str() {
        "OFF" => "off",
        "FATAL" | "ERROR" => "error",
        "WARN" => "warn",
        "INFO" => "info",
        "DEBUG" => "debug",
        "TRACE" => "trace",
        _ => return None,
    })
}

/// Check one change the way Kafka does; the error is Kafka's message.
pub fn validate(logger: &str, level: Option<&str>) -> Result<(), String> {
    let well_formed = !logger.is_empty()
        && logger
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '.' | '-'));
    if !well_formed {
        return Err(format!("Logger {logger} does not exist!"));
    }
    match level {
        None if logger == ROOT => {
            Err("Removing the log level of the root logger is not allowed".into())
        }
        None => Ok(()),
        Some(l) if tracing_level(l).is_some() => Ok(()),
        Some(l) => Err(format!(
            "Cannot set the log level of {logger} to {l} as it is not a supported log level. Valid log levels are {}",
            LEVELS.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_levels_and_loggers_are_checked() {
        assert!(validate("sluice_broker::replica_fetcher", Some("debug")).is_ok());
        assert!(validate(ROOT, Some("WARN")).is_ok());
        assert!(validate("kafka.server.ReplicaManager", None).is_ok());
        assert!(validate(ROOT, None).unwrap_err().contains("root logger"));
        assert!(validate("x", Some("LOUD"))
            .unwrap_err()
            .contains("Valid log levels"));
        assert!(validate("a b", Some("INFO")).is_err());
        assert!(validate("", Some("INFO")).is_err());
        assert_eq!(tracing_level("Fatal"), Some("error"));
        assert_eq!(tracing_level("OFF"), Some("off"));
        assert_eq!(kafka_level("debug"), "DEBUG");
    }
}
