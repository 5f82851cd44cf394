//! The records of the `_schemas` topic, in Confluent Schema Registry's format, so a
//! Confluent Schema Registry or Karapace pointed at the same cluster reads what Sluice
//! wrote and the other way round.
//!
//! Keys and values are UTF-8 JSON. Keys keep Confluent's field order (`@JsonPropertyOrder`
//! of `SchemaKey`, `ConfigKey`, ...), because compaction compares key bytes:
//!
//! | keytype | key | value |
//! |---|---|---|
//! | SCHEMA | `{"keytype":"SCHEMA","subject":s,"version":v,"magic":1}` | `{"subject","version","id","schema","schemaType"?,"references"?,"deleted"}`; null = permanently deleted |
//! | CONFIG | `{"keytype":"CONFIG","subject":s\|null,"magic":0}` | `{"subject"?,"compatibilityLevel":"BACKWARD"}`; null = removed |
//! | MODE | `{"keytype":"MODE","subject":s\|null,"magic":0}` | `{"subject"?,"mode":"READONLY"}`; null = removed |
//! | DELETE_SUBJECT | `{"keytype":"DELETE_SUBJECT","subject":s,"magic":0}` | `{"subject":s,"version":<latest>}`: versions up to it soft-deleted |
//! | CLEAR_SUBJECT | `{"keytype":"CLEAR_SUBJECT","subject":s,"magic":0}` | `{"subject":s}`: the subject's versions removed |
//! | NOOP | `{"keytype":"NOOP","magic":0}` | null |
//!
//! A missing `schemaType` is AVRO (Karapace and Redpanda omit it; Confluent writes it).
//! Sluice writes it always, as Confluent does.

use serde_json::{json, Map, Value};

use crate::schema::{Reference, SchemaType};

/// What a `_schemas` record is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    Schema {
        subject: String,
        version: i32,
    },
    /// `None` is the global setting.
    Config {
        subject: Option<String>,
    },
    Mode {
        subject: Option<String>,
    },
    DeleteSubject {
        subject: String,
    },
    ClearSubject {
        subject: String,
    },
    Noop,
    /// A key type Sluice does not use (contexts, associations, ...): read past.
    Other(String),
}

/// The value of a SCHEMA record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaValue {
    pub subject: String,
    pub version: i32,
    pub id: i32,
    pub schema: String,
    pub schema_type: SchemaType,
    pub references: Vec<Reference>,
    pub deleted: bool,
}

/// One record to write: its key and value (None = a tombstone).
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub key: Key,
    pub value: Option<Value>,
}

impl Key {
    /// The key's bytes, in Confluent's field order.
    pub fn encode(&self) -> Vec<u8> {
        let text = match self {
            Key::Schema { subject, version } => format!(
                "{{\"keytype\":\"SCHEMA\",\"subject\":{},\"version\":{version},\"magic\":1}}",
                Value::from(subject.as_str())
            ),
            Key::Config { subject } => format!(
                "{{\"keytype\":\"CONFIG\",\"subject\":{},\"magic\":0}}",
                opt_str(subject)
            ),
            Key::Mode { subject } => format!(
                "{{\"keytype\":\"MODE\",\"subject\":{},\"magic\":0}}",
                opt_str(subject)
            ),
            Key::DeleteSubject { subject } => format!(
                "{{\"keytype\":\"DELETE_SUBJECT\",\"subject\":{},\"magic\":0}}",
                Value::from(subject.as_str())
            ),
            Key::ClearSubject { subject } => format!(
                "{{\"keytype\":\"CLEAR_SUBJECT\",\"subject\":{},\"magic\":0}}",
                Value::from(subject.as_str())
            ),
            Key::Noop => "{\"keytype\":\"NOOP\",\"magic\":0}".to_string(),
            Key::Other(raw) => raw.clone(),
        };
        text.into_bytes()
    }

    /// Read a key; None when it is not a registry key at all (not JSON, no keytype).
    pub fn decode(bytes: &[u8]) -> Option<Key> {
        let v: Value = serde_json::from_slice(bytes).ok()?;
        let keytype = v.get("keytype")?.as_str()?;
        let subject = v.get("subject").and_then(Value::as_str).map(str::to_string);
        Some(match keytype {
            "SCHEMA" => Key::Schema {
                subject: subject?,
                version: i32::try_from(v.get("version")?.as_i64()?).ok()?,
            },
            "CONFIG" => Key::Config { subject },
            "MODE" => Key::Mode { subject },
            "DELETE_SUBJECT" => Key::DeleteSubject { subject: subject? },
            "CLEAR_SUBJECT" => Key::ClearSubject { subject: subject? },
            "NOOP" => Key::Noop,
            other => Key::Other(other.to_string()),
        })
    }
}

fn opt_str(s: &Option<String>) -> Value {
    s.as_deref().map_or(Value::Null, Value::from)
}

impl SchemaValue {
    pub fn encode(&self) -> Value {
        let mut m = Map::new();
        m.insert("subject".into(), self.subject.as_str().into());
        m.insert("version".into(), self.version.into());
        m.insert("id".into(), self.id.into());
        m.insert("schema".into(), self.schema.as_str().into());
        m.insert("schemaType".into(), self.schema_type.name().into());
        if !self.references.is_empty() {
            m.insert(
                "references".into(),
                Value::Array(self.references.iter().map(Reference::to_json).collect()),
            );
        }
        m.insert("deleted".into(), self.deleted.into());
        Value::Object(m)
    }

    /// Read a SCHEMA value; the key gives the subject and version when the value lacks them.
    pub fn decode(subject: &str, version: i32, v: &Value) -> Option<SchemaValue> {
        let schema_type = match v.get("schemaType").and_then(Value::as_str) {
            None => SchemaType::Avro,
            Some(t) => SchemaType::parse(t)?,
        };
        let references = match v.get("references") {
            Some(Value::Array(refs)) => refs
                .iter()
                .map(Reference::from_json)
                .collect::<Option<Vec<_>>>()?,
            _ => Vec::new(),
        };
        Some(SchemaValue {
            subject: v
                .get("subject")
                .and_then(Value::as_str)
                .unwrap_or(subject)
                .to_string(),
            version: v
                .get("version")
                .and_then(Value::as_i64)
                .and_then(|x| i32::try_from(x).ok())
                .unwrap_or(version),
            id: i32::try_from(v.get("id")?.as_i64()?).ok()?,
            schema: v.get("schema")?.as_str()?.to_string(),
            schema_type,
            references,
            deleted: v.get("deleted").and_then(Value::as_bool).unwrap_or(false),
        })
    }
}

pub fn config_value(subject: &Option<String>, level: &str) -> Value {
    let mut m = Map::new();
    if let Some(s) = subject {
        m.insert("subject".into(), s.as_str().into());
    }
    m.insert("compatibilityLevel".into(), level.into());
    Value::Object(m)
}

pub fn mode_value(subject: &Option<String>, mode: &str) -> Value {
    let mut m = Map::new();
    if let Some(s) = subject {
        m.insert("subject".into(), s.as_str().into());
    }
    m.insert("mode".into(), mode.into());
    Value::Object(m)
}

pub fn delete_subject_value(subject: &str, version: i32) -> Value {
    json!({"subject": subject, "version": version})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_confluents_field_order_and_read_back() {
        let keys = [
            (
                Key::Schema {
                    subject: "t-value".into(),
                    version: 3,
                },
                r#"{"keytype":"SCHEMA","subject":"t-value","version":3,"magic":1}"#,
            ),
            (
                Key::Config { subject: None },
                r#"{"keytype":"CONFIG","subject":null,"magic":0}"#,
            ),
            (
                Key::Mode {
                    subject: Some("a\"b".into()),
                },
                r#"{"keytype":"MODE","subject":"a\"b","magic":0}"#,
            ),
            (
                Key::DeleteSubject {
                    subject: "s".into(),
                },
                r#"{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}"#,
            ),
            (Key::Noop, r#"{"keytype":"NOOP","magic":0}"#),
        ];
        for (key, text) in keys {
            assert_eq!(String::from_utf8(key.encode()).unwrap(), text);
            assert_eq!(Key::decode(text.as_bytes()), Some(key));
        }
        assert_eq!(Key::decode(b"not json"), None);
        assert_eq!(Key::decode(br#"{"keytype":"SCHEMA","subject":"s"}"#), None);
        assert_eq!(
            Key::decode(br#"{"keytype":"CONTEXT","tenant":"x"}"#),
            Some(Key::Other("CONTEXT".into()))
        );
    }

    #[test]
    fn schema_values_round_trip_and_a_missing_type_is_avro() {
        let v = SchemaValue {
            subject: "s".into(),
            version: 2,
            id: 7,
            schema: "\"string\"".into(),
            schema_type: SchemaType::Json,
            references: vec![Reference {
                name: "a.proto".into(),
                subject: "a".into(),
                version: 1,
            }],
            deleted: true,
        };
        assert_eq!(SchemaValue::decode("x", 9, &v.encode()), Some(v));
        let karapace =
            json!({"subject": "s", "version": 1, "id": 1, "schema": "\"int\"", "deleted": false});
        let read = SchemaValue::decode("s", 1, &karapace).unwrap();
        assert_eq!(read.schema_type, SchemaType::Avro);
        assert!(SchemaValue::decode("s", 1, &json!({"schema": "x"})).is_none());
    }
}
