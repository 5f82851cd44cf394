//! The command-line tools: Kafka's scripts as `sluice` subcommands, with Kafka's flag names.
//!
//! # Layout
//! - [`topics`] (`kafka-topics.sh`), [`acls`] (`kafka-acls.sh`), [`produce`] (`kafka-console-producer.sh`), [`consume`]
//!   (`kafka-console-consumer.sh`), [`share_consume`] (`kafka-console-share-consumer.sh`),
//!   [`share_groups`] (`kafka-share-groups.sh`), [`configs`] (`kafka-configs.sh`), [`offsets`]
//!   (`kafka-get-offsets.sh`), [`groups`] (`kafka-consumer-groups.sh`), [`dump_log`]
//!   (`kafka-dump-log.sh`), [`producers`] (`kafka-transactions.sh describe-producers`), [`transactions`]
//!   (`kafka-transactions.sh list/describe`), [`users`] (`kafka-configs.sh --entity-type
//!   users` for SCRAM credentials), [`mirror`] (cluster links and mirror topics),
//!   [`metadata_quorum`] (`kafka-metadata-quorum.sh describe`), [`schemas`] (the schema
//!   registry's REST API), [`features`]
//!   (`kafka-features.sh`), [`cluster`] (`kafka-cluster.sh`), [`perf`]
//!   (`kafka-producer-perf-test.sh` and friends).
//! - This module: the shared connection flags and the error type that decides the exit code
//!   (2 for wrong arguments, 1 for everything else).

pub mod acls;
pub mod cluster;
pub mod configs;
pub mod consume;
pub mod dump_log;
pub mod features;
pub mod groups;
pub mod metadata_quorum;
pub mod mirror;
pub mod offsets;
pub mod perf;
pub mod produce;
pub mod producers;
pub mod schemas;
pub mod share_consume;
pub mod share_groups;
pub mod storage;
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

/// The entries of a Java properties file, read as `java.util.Properties` does: `#` and `!`
/// start comment lines; a key ends at the first unescaped `=`, `:` or whitespace, and the
/// value starts after it (and its surrounding blanks); a line ending in an odd number of
/// backslashes continues on the next (leading blanks dropped); `\t`, `\n`, `\r`, `\f`,
/// `\uXXXX` and `\<any>` are escapes.
pub fn properties_file(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut logical = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let line = line.trim_start_matches([' ', '\t', '\x0c']);
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        logical.clear();
        let mut part = line;
        loop {
            let trailing = part.len() - part.trim_end_matches('\\').len();
            if trailing % 2 == 1 {
                logical.push_str(&part[..part.len() - 1]);
                match lines.next() {
                    Some(next) => part = next.trim_start_matches([' ', '\t', '\x0c']),
                    None => break,
                }
            } else {
                logical.push_str(part);
                break;
            }
        }
        out.push(property_entry(&logical));
    }
    out
}

/// Split one logical line into its unescaped key and value.
fn property_entry(line: &str) -> (String, String) {
    let mut chars = line.chars().peekable();
    let mut key = String::new();
    while let Some(c) = chars.next() {
        match c {
            '\\' => unescape(&mut chars, &mut key),
            '=' | ':' => break,
            c if c.is_whitespace() => {
                while chars.next_if(|c| c.is_whitespace()).is_some() {}
                let _ = chars.next_if(|c| *c == '=' || *c == ':');
                break;
            }
            c => key.push(c),
        }
    }
    while chars.next_if(|c| c.is_whitespace()).is_some() {}
    let mut value = String::new();
    while let Some(c) = chars.next() {
        match c {
            '\\' => unescape(&mut chars, &mut value),
            c => value.push(c),
        }
    }
    (key, value)
}

fn unescape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, out: &mut String) {
    match chars.next() {
        Some('t') => out.push('\t'),
        Some('n') => out.push('\n'),
        Some('r') => out.push('\r'),
        Some('f') => out.push('\x0c'),
        Some('u') => {
            let hex: String = (0..4)
                .filter_map(|_| chars.next_if(char::is_ascii_hexdigit))
                .collect();
            match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                Some(c) if hex.len() == 4 => out.push(c),
                _ => {
                    out.push('u');
                    out.push_str(&hex);
                }
            }
        }
        Some(c) => out.push(c),
        None => {}
    }
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

/// `--add-config k1=v1,k2=[a,b]` as kafka-configs.sh reads it: items split on commas
/// outside square brackets; a bracketed value is a list whose commas stay in the value.
pub fn config_items(s: &str, flag: &str) -> Result<Vec<(String, String)>, CliError> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(usage(format!("{flag}: unbalanced ']' in '{s}'")));
        }
    }
    if depth != 0 {
        return Err(usage(format!("{flag}: unclosed '[' in '{s}'")));
    }
    items.push(&s[start..]);
    items
        .into_iter()
        .filter(|i| !i.trim().is_empty())
        .map(|item| {
            let (k, v) = key_value(item, flag)?;
            let v = match v.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
                Some(list) => list.trim().to_string(),
                None => v,
            };
            Ok((k, v))
        })
        .collect()
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
    fn config_items_keep_bracketed_lists_whole() {
        let got = super::config_items(
            "retention.ms=1, leader.replication.throttled.replicas=[0:1,1:2],x=[]",
            "--add-config",
        )
        .unwrap();
        let want = [
            ("retention.ms", "1"),
            ("leader.replication.throttled.replicas", "0:1,1:2"),
            ("x", ""),
        ];
        assert_eq!(
            got,
            want.map(|(k, v)| (k.to_string(), v.to_string())).to_vec()
        );
        for bad in ["a=[1,2", "a=1],b=2", "novalue"] {
            assert!(super::config_items(bad, "--add-config").is_err(), "{bad}");
        }
    }

    #[test]
    fn properties_files_parse_like_java() {
        let text = "# comment\n! also\n\nsecurity.protocol=SASL_SSL\nsasl.mechanism : SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    username=\"a\" password=\"b=c\";\nempty=\nsasl.password secret\\\\\nssl.truststore.location=C:\\\\certs\\\\ca.pem\nkey\\ with\\=odd = v\\u00e9\\tx\nlast=continued \\";
        let got = super::properties_file(text);
        let want: Vec<(&str, &str)> = vec![
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\" password=\"b=c\";",
            ),
            ("empty", ""),
            ("sasl.password", "secret\\"),
            ("ssl.truststore.location", "C:\\certs\\ca.pem"),
            ("key with=odd", "v\u{e9}\tx"),
            ("last", "continued "),
        ];
        let got: Vec<(&str, &str)> = got.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, want);
    }

    use super::*;

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
