//! Small durable files, in Kafka's formats, always replaced atomically
//! (write `<name>.tmp`, fsync, rename over, fsync the directory).
//!
//! Offset checkpoints (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
//! `replication-offset-checkpoint`):
//! ```text
//! 0                      version
//! 2                      number of entries
//! orders 0 1234          topic partition offset
//! orders 1 99
//! ```
//! `leader-epoch-checkpoint` is the same with `epoch offset` pairs. `partition.metadata` is
//! `version: 0` and `topic_id: <base64 uuid>` lines. `meta.properties` is a Java properties
//! file.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use sluice_protocol::types::TopicPartition;

use sluice_rt::disk::{self, DiskOp};

use crate::error::{IoContext, LogError};

/// Replace `path` with `contents` so that a crash leaves either the old or the new file.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), LogError> {
    let tmp = path.with_extension(match path.extension() {
        Some(ext) => format!("{}.tmp", ext.to_string_lossy()),
        None => "tmp".to_string(),
    });
    {
        disk::check(DiskOp::Write {
            path: &tmp,
            len: contents.len() as u64,
        })
        .at(&tmp)?;
        let mut f = File::create(&tmp).at(&tmp)?;
        f.write_all(contents).at(&tmp)?;
        disk::sync_all(&f, &tmp).at(&tmp)?;
    }
    disk::rename(&tmp, path).at(path)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// fsync a directory so a create/rename/delete inside it is durable.
pub fn sync_dir(dir: &Path) -> Result<(), LogError> {
    disk::sync_dir(dir).at(dir)
}

fn invalid(path: &Path, msg: impl Into<String>) -> LogError {
    LogError::io(path, io::Error::new(io::ErrorKind::InvalidData, msg.into()))
}

/// Read a checkpoint body: version 0, a count, then that many whitespace-separated lines.
fn read_lines(path: &Path) -> Result<Vec<Vec<String>>, LogError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(LogError::io(path, e)),
    };
    parse_lines(&text).map_err(|m| invalid(path, m))
}

fn parse_lines(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("0") {
        return Err("unsupported checkpoint version".into());
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("bad entry count")?;
    let rows: Vec<Vec<String>> = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect();
    if rows.len() != count {
        return Err(format!("expected {count} entries, found {}", rows.len()));
    }
    Ok(rows)
}

/// `a b` integer pairs from a checkpoint's text (a leader epoch checkpoint read from the
/// remote tier).
pub fn parse_pairs(text: &str) -> Result<Vec<(i64, i64)>, String> {
    parse_lines(text)?
        .into_iter()
        .map(|row| match row.as_slice() {
            [a, b] => Ok((
                a.parse().map_err(|_| "bad number")?,
                b.parse().map_err(|_| "bad number")?,
            )),
            _ => Err("expected two columns".to_string()),
        })
        .collect()
}

/// The text of a checkpoint of `a b` pairs.
pub fn format_pairs(pairs: &[(i64, i64)]) -> String {
    let rows: Vec<String> = pairs.iter().map(|(a, b)| format!("{a} {b}")).collect();
    format_lines(&rows)
}

fn format_lines(rows: &[String]) -> String {
    let mut body = format!("0\n{}\n", rows.len());
    for r in rows {
        body.push_str(r);
        body.push('\n');
    }
    body
}

fn write_lines(path: &Path, rows: &[String]) -> Result<(), LogError> {
    write_atomically(path, format_lines(rows).as_bytes())
}

/// Read `a b` integer pairs (leader epoch checkpoint).
pub fn read_pairs(path: &Path) -> Result<Vec<(i64, i64)>, LogError> {
    match fs::read_to_string(path) {
        Ok(text) => parse_pairs(&text).map_err(|m| invalid(path, m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(LogError::io(path, e)),
    }
}

pub fn write_pairs(path: &Path, pairs: &[(i64, i64)]) -> Result<(), LogError> {
    write_atomically(path, format_pairs(pairs).as_bytes())
}

/// Read a `topic partition offset` checkpoint.
pub fn read_offsets(path: &Path) -> Result<HashMap<TopicPartition, i64>, LogError> {
    read_lines(path)?
        .into_iter()
        .map(|row| match row.as_slice() {
            [topic, partition, offset] => Ok((
                TopicPartition::new(
                    topic.clone(),
                    partition
                        .parse()
                        .map_err(|_| invalid(path, "bad partition"))?,
                ),
                offset.parse().map_err(|_| invalid(path, "bad offset"))?,
            )),
            _ => Err(invalid(path, "expected three columns")),
        })
        .collect()
}

pub fn write_offsets(path: &Path, offsets: &BTreeMap<TopicPartition, i64>) -> Result<(), LogError> {
    let rows: Vec<String> = offsets
        .iter()
        .map(|(tp, o)| format!("{} {} {}", tp.topic, tp.partition.0, o))
        .collect();
    write_lines(path, &rows)
}

pub const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// Write `partition.metadata` with the topic id (16 bytes).
pub fn write_partition_metadata(dir: &Path, topic_id: [u8; 16]) -> Result<(), LogError> {
    let body = format!(
        "version: 0\ntopic_id: {}\n",
        sluice_protocol::base64::encode(&topic_id)
    );
    write_atomically(&dir.join(PARTITION_METADATA_FILE), body.as_bytes())
}

/// Read the topic id from `partition.metadata`, if the file exists.
pub fn read_partition_metadata(dir: &Path) -> Result<Option<[u8; 16]>, LogError> {
    let path = dir.join(PARTITION_METADATA_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io(path, e)),
    };
    let id = text
        .lines()
        .find_map(|l| l.strip_prefix("topic_id:"))
        .and_then(|v| sluice_protocol::base64::decode(v.trim()))
        .and_then(|b| <[u8; 16]>::try_from(b).ok())
        .ok_or_else(|| invalid(&path, "no valid topic_id"))?;
    Ok(Some(id))
}

/// Parse a Java properties file: `key=value` or `key: value` lines, `#`/`!` comments,
/// backslash line continuations and escapes.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut logical = String::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((lineno, raw)) = lines.next() {
        let line = raw.trim_start();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        // An odd number of trailing backslashes continues the line.
        let trailing = line.chars().rev().take_while(|c| *c == '\\').count();
        if trailing % 2 == 1 {
            logical.push_str(&line[..line.len() - 1]);
            if lines.peek().is_some() {
                continue;
            }
        } else {
            logical.push_str(line);
        }
        let entry = std::mem::take(&mut logical);
        let (key, value) = split_property(&entry);
        if key.is_empty() {
            return Err(format!("line {}: missing key", lineno + 1));
        }
        out.push((unescape(&key), unescape(value.trim_start())));
    }
    Ok(out)
}

fn split_property(entry: &str) -> (String, &str) {
    let mut escaped = false;
    for (i, c) in entry.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => return (entry[..i].trim_end().to_string(), &entry[i + 1..]),
            c if c.is_whitespace() => {
                let rest = entry[i..].trim_start();
                let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
                return (entry[..i].to_string(), rest);
            }
            _ => {}
        }
    }
    (entry.to_string(), "")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(ch);
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

pub const META_PROPERTIES_FILE: &str = "meta.properties";

/// The identity of a log directory: which cluster and node it belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaProperties {
    pub cluster_id: String,
    pub node_id: i32,
    pub directory_id: String,
}

impl MetaProperties {
    pub fn read(dir: &Path) -> Result<Option<Self>, LogError> {
        let path = dir.join(META_PROPERTIES_FILE);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LogError::io(path, e)),
        };
        let props: HashMap<String, String> = parse_properties(&text)
            .map_err(|e| invalid(&path, e))?
            .into_iter()
            .collect();
        let get = |k: &str| {
            props
                .get(k)
                .cloned()
                .ok_or_else(|| invalid(&path, format!("missing {k}")))
        };
        Ok(Some(Self {
            cluster_id: get("cluster.id")?,
            node_id: get("node.id")?
                .parse()
                .map_err(|_| invalid(&path, "bad node.id"))?,
            directory_id: props.get("directory.id").cloned().unwrap_or_default(),
        }))
    }

    pub fn write(&self, dir: &Path) -> Result<(), LogError> {
        let body = format!(
            "#\n#Written by sluice\ncluster.id={}\ndirectory.id={}\nnode.id={}\nversion=1\n",
            self.cluster_id, self.directory_id, self.node_id
        );
        write_atomically(&dir.join(META_PROPERTIES_FILE), body.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_checkpoint_round_trips_in_kafka_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recovery-point-offset-checkpoint");
        let mut m = BTreeMap::new();
        m.insert(TopicPartition::new("a-b", 0), 10);
        m.insert(TopicPartition::new("c", 3), 7);
        write_offsets(&path, &m).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "0\n2\na-b 0 10\nc 3 7\n"
        );
        let back = read_offsets(&path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[&TopicPartition::new("c", 3)], 7);
        assert!(read_offsets(&dir.path().join("missing"))
            .unwrap()
            .is_empty());
        fs::write(&path, "0\n3\na 0 1\n").unwrap();
        assert!(read_offsets(&path).is_err());
    }

    #[test]
    fn properties_parse_like_java() {
        let text = "# comment\n! also\nkey.one=1\nkey.two : two words\nkey.three   3\nlong=a\\\n    b\nesc=x\\=y\\u0041\nempty=\n";
        let p = parse_properties(text).unwrap();
        let expect = [
            ("key.one", "1"),
            ("key.two", "two words"),
            ("key.three", "3"),
            ("long", "ab"),
            ("esc", "x=yA"),
            ("empty", ""),
        ];
        let got: Vec<(&str, &str)> = p.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, expect);
    }

    #[test]
    fn partition_and_meta_properties_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let id = [9u8; 16];
        write_partition_metadata(dir.path(), id).unwrap();
        assert_eq!(read_partition_metadata(dir.path()).unwrap(), Some(id));
        let meta = MetaProperties {
            cluster_id: "abc".into(),
            node_id: 3,
            directory_id: "d".into(),
        };
        meta.write(dir.path()).unwrap();
        assert_eq!(MetaProperties::read(dir.path()).unwrap(), Some(meta));
    }
}
