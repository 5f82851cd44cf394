//! Log levels changed at runtime (KIP-412): Kafka's BROKER_LOGGER config resource, named by
//! the broker id. DescribeConfigs lists the loggers with a level; IncrementalAlterConfigs SET
//! gives a logger a level, DELETE puts it back under the root logger's. Loggers are `tracing`
//! targets (`sluice_broker::replica::fetcher`, or a prefix such as `sluice_broker`); `root`
//! is the default level. Levels are Kafka's names. Changes last until the process exits, as
//! in Kafka (they are not kept in cluster metadata).
//!
//! The process that owns the log subscriber (the `sluice` binary) installs a [`LogControl`];
//! without one the resource describes nothing and refuses changes.

use std::sync::OnceLock;

/// The root logger's name.
pub const ROOT: &str = "root";

/// Kafka's log levels (`LogLevelConfig.VALID_LOG_LEVELS`), names as Kafka spells them.
pub const LEVELS: &[&str] = &["FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"];

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
    Some(match kafka {
        "FATAL" | "ERROR" => "error",
        "WARN" => "warn",
        "INFO" => "info",
        "DEBUG" => "debug",
        "TRACE" => "trace",
        _ => return None,
    })
}

/// Why a change is refused, with Kafka's error class.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// INVALID_REQUEST
    Request(String),
    /// INVALID_CONFIG
    Config(String),
}

/// Check one change the way Kafka's RuntimeLoggerManager does.
pub fn validate(logger: &str, level: Option<&str>) -> Result<(), Refusal> {
    let well_formed = !logger.is_empty()
        && logger
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '.' | '-'));
    if !well_formed {
        return Err(Refusal::Config(format!("Logger {logger} does not exist!")));
    }
    match level {
        None if logger == ROOT => Err(Refusal::Request(
            "Removing the log level of the root logger is not allowed".into(),
        )),
        None => Ok(()),
        Some(l) if tracing_level(l).is_some() => Ok(()),
        Some(l) => Err(Refusal::Config(format!(
            "Cannot set the log level of {logger} to {l} as it is not a supported log level. Valid log levels are {}",
            LEVELS.join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_levels_and_loggers_are_checked() {
        assert!(validate("sluice_broker::replica::fetcher", Some("DEBUG")).is_ok());
        assert!(validate(ROOT, Some("WARN")).is_ok());
        assert!(validate("kafka.server.ReplicaManager", None).is_ok());
        assert!(matches!(validate(ROOT, None), Err(Refusal::Request(_))));
        for bad in ["LOUD", "debug", "OFF"] {
            assert!(
                matches!(validate("x", Some(bad)), Err(Refusal::Config(m)) if m.contains("Valid log levels")),
                "{bad}"
            );
        }
        assert!(matches!(validate("a b", None), Err(Refusal::Config(_))));
        assert!(validate("", Some("INFO")).is_err());
        assert_eq!(tracing_level("FATAL"), Some("error"));
        assert_eq!(kafka_level("debug"), "DEBUG");
    }
}
