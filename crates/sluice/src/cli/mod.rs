//! The command-line tools: Kafka's scripts as `sluice` subcommands, with Kafka's flag names.
//!
//! # Layout
//! - [`topics`] (`kafka-topics.sh`), [`acls`] (`kafka-acls.sh`), [`produce`] (`kafka-console-producer.sh`), [`consume`]
//!   (`kafka-console-consumer.sh`), [`configs`] (`kafka-configs.sh`), [`offsets`]
//!   (`kafka-get-offsets.sh`), [`groups`] (`kafka-consumer-groups.sh`), [`dump_log`]
//!   (`kafka-dump-log.sh`), [`producers`] (`kafka-transactions.sh describe-producers`), [`transactions`]
//!   (`kafka-transactions.sh list/describe`), [`users`] (`kafka-configs.sh --entity-type
//!   users` for SCRAM credentials), [`perf`]
//!   (`kafka-producer-perf-test.sh` and friends).
//! - This module: the shared connection flags and the error type that decides the exit code
//!   (2 for wrong arguments, 1 for everything else).

pub mod acls;
pub mod configs;
pub mod consume;
pub mod dump_log;
pub mod groups;
pub mod offsets;
pub mod perf;
pub mod produce;
pub mod producers;
pub mod topics;
pub mod transactions;
pub mod users;

use std::time::Duration;

use clap::Args;
use sluice_client::ClientConfig;

/// Flags every client command takes.
#[derive(Args, Debug, Clone)]
pub struct ConnArgs {
    /// Broker(s) to connect to, host:port[,host:port].
    #[arg(
        long = "bootstrap-server",
        env = "SLUICE_BOOTSTRAP",
        default_value = "127.0.0.1:9092",
        value_name = "HOST:PORT"
    )]
    pub bootstrap_server: String,
    /// Give up on an unreachable broker or a request after this many milliseconds.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub timeout: u64,
    /// A client properties file, as Kafka's tools take it: `security.protocol`, `ssl.*`,
    /// `sasl.*` (e.g. `sasl.jaas.config`) and any other client setting.
    #[arg(
        long = "command-config",
        visible_aliases = ["producer.config", "consumer.config"],
        value_name = "FILE"
    )]
    pub command_config: Option<std::path::PathBuf>,
}

impl ConnArgs {
    pub fn client_config(&self) -> Result<ClientConfig, CliError> {
        let mut c = ClientConfig::new(&self.bootstrap_server);
        c.client_id = "sluice-cli".into();
        c.connect_timeout = Duration::from_millis(self.timeout);
        c.request_timeout = Duration::from_millis(self.timeout);
        c.max_block = Duration::from_millis(self.timeout);
        if let Some(path) = &self.command_config {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("--command-config {}: {e}", path.display())))?;
            for (k, v) in properties_file(&text) {
                c = c
                    .set(&k, &v)
                    .map_err(|e| usage(format!("--command-config {}: {e}", path.display())))?;
            }
        }
        Ok(c)
    }
}

/// `key=value` (or `key: value`) lines of a Java properties file: `#` and `!` start comments,
/// a line ending in `\` continues on the next.
pub fn properties_file(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut logical = String::new();
    for line in text.lines() {
        let line = line.trim_start();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => logical.push_str(part),
            None => {
                logical.push_str(line);
                let entry = std::mem::take(&mut logical);
                let split = entry.find(['=', ':']).unwrap_or(entry.len());
                let (k, v) = entry.split_at(split);
                let v = v.get(1..).unwrap_or("");
                out.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
    }
    out
}

/// Why a command failed; decides the exit code.
#[derive(Debug)]
pub enum CliError {
    /// Wrong or missing arguments: exit 2.
    Usage(String),
    /// Anything else: exit 1.
    Failed(String),
}

impl From<sluice_client::Error> for CliError {
    fn from(e: sluice_client::Error) -> Self {
        CliError::Failed(e.to_string())
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Failed(e.to_string())
    }
}

pub type CliResult = Result<(), CliError>;

pub fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}

/// Parse `key=value`.
pub fn key_value(s: &str, flag: &str) -> Result<(String, String), CliError> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| usage(format!("{flag} expects key=value, got '{s}'")))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

/// Properties from repeated `--property k=v` flags (also accepting `k=v,k2=v2`? no: Kafka
/// passes one per flag).
pub fn properties(items: &[String], flag: &str) -> Result<Vec<(String, String)>, CliError> {
    items.iter().map(|s| key_value(s, flag)).collect()
}

/// Escape a string for JSON output.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn properties_files_parse_like_java() {
        let text = "# comment\n! also\n\nsecurity.protocol=SASL_SSL\nsasl.mechanism : SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    username=\"a\" password=\"b=c\";\nempty=\n";
        assert_eq!(
            super::properties_file(text),
            vec![
                ("security.protocol".to_string(), "SASL_SSL".to_string()),
                ("sasl.mechanism".to_string(), "SCRAM-SHA-512".to_string()),
                (
                    "sasl.jaas.config".to_string(),
                    "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\" password=\"b=c\";".to_string()
                ),
                ("empty".to_string(), String::new()),
            ]
        );
    }

    use super::*;

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
