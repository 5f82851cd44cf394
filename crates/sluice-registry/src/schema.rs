//! Schema types, references, and what the registry does with a schema's text: parse it
//! (refusing what is not a schema of its type), give its stored form, and check one schema
//! against another under a compatibility level.

use serde_json::{json, Value};

use crate::error::RegistryError;
use crate::{avro, json_schema, protobuf};

/// The largest schema text the registry takes (Confluent has no fixed limit; a record in
/// `_schemas` must stay well under `message.max.bytes`).
pub const SCHEMA_MAX_BYTES: usize = 512 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchemaType {
    Avro,
    Json,
    Protobuf,
}

impl SchemaType {
    pub fn parse(name: &str) -> Option<SchemaType> {
        match name {
            "AVRO" => Some(SchemaType::Avro),
            "JSON" => Some(SchemaType::Json),
            "PROTOBUF" => Some(SchemaType::Protobuf),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Json => "JSON",
            SchemaType::Protobuf => "PROTOBUF",
        }
    }

    /// The types this registry parses and checks (`GET /schemas/types`).
    pub fn supported() -> &'static [SchemaType] {
        &[SchemaType::Avro, SchemaType::Json, SchemaType::Protobuf]
    }
}

/// A schema's reference to a version of another subject (Avro named types, Protobuf
/// imports, JSON `$ref`s).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

impl Reference {
    pub fn to_json(&self) -> Value {
        json!({"name": self.name, "subject": self.subject, "version": self.version})
    }

    pub fn from_json(v: &Value) -> Option<Reference> {
        Some(Reference {
            name: v.get("name")?.as_str()?.to_string(),
            subject: v.get("subject")?.as_str()?.to_string(),
            version: i32::try_from(v.get("version")?.as_i64()?).ok()?,
        })
    }
}

/// Compatibility levels (`/config`), Confluent's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compatibility {
    None,
    Backward,
    BackwardTransitive,
    Forward,
    ForwardTransitive,
    Full,
    FullTransitive,
}

impl Compatibility {
    /// Case-insensitive, as Confluent's server takes it.
    pub fn parse(name: &str) -> Option<Compatibility> {
        Some(match name.to_ascii_uppercase().as_str() {
            "NONE" => Compatibility::None,
            "BACKWARD" => Compatibility::Backward,
            "BACKWARD_TRANSITIVE" => Compatibility::BackwardTransitive,
            "FORWARD" => Compatibility::Forward,
            "FORWARD_TRANSITIVE" => Compatibility::ForwardTransitive,
            "FULL" => Compatibility::Full,
            "FULL_TRANSITIVE" => Compatibility::FullTransitive,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Compatibility::None => "NONE",
            Compatibility::Backward => "BACKWARD",
            Compatibility::BackwardTransitive => "BACKWARD_TRANSITIVE",
            Compatibility::Forward => "FORWARD",
            Compatibility::ForwardTransitive => "FORWARD_TRANSITIVE",
            Compatibility::Full => "FULL",
            Compatibility::FullTransitive => "FULL_TRANSITIVE",
        }
    }

    /// Whether every earlier version is checked, not only the latest.
    pub fn transitive(self) -> bool {
        matches!(
            self,
            Compatibility::BackwardTransitive
                | Compatibility::ForwardTransitive
                | Compatibility::FullTransitive
        )
    }

    fn backward(self) -> bool {
        matches!(
            self,
            Compatibility::Backward
                | Compatibility::BackwardTransitive
                | Compatibility::Full
                | Compatibility::FullTransitive
        )
    }

    fn forward(self) -> bool {
        matches!(
            self,
            Compatibility::Forward
                | Compatibility::ForwardTransitive
                | Compatibility::Full
                | Compatibility::FullTransitive
        )
    }
}

/// A schema that parsed: its type, its stored text (compact JSON for Avro and JSON Schema,
/// the same text for equal schemas whatever their whitespace and key order) and its
/// references, with the referenced schemas' texts it was parsed with.
#[derive(Clone, Debug)]
pub struct ParsedSchema {
    pub schema_type: SchemaType,
    pub text: String,
    pub references: Vec<Reference>,
    /// The referenced schemas' texts, dependencies first.
    pub resolved: Vec<String>,
}

impl ParsedSchema {
    /// Parse `text` of `schema_type`; `resolved` holds the referenced schemas' texts,
    /// dependencies first.
    pub fn parse(
        schema_type: SchemaType,
        text: &str,
        references: Vec<Reference>,
        resolved: Vec<String>,
    ) -> Result<ParsedSchema, RegistryError> {
        if text.len() > SCHEMA_MAX_BYTES {
            return Err(RegistryError::schema_too_large(SCHEMA_MAX_BYTES));
        }
        let stored = match schema_type {
            SchemaType::Avro => avro::parse(text, &resolved)?,
            SchemaType::Json => json_schema::parse(text)?,
            SchemaType::Protobuf => protobuf::parse(text)?,
        };
        Ok(ParsedSchema {
            schema_type,
            text: stored,
            references,
            resolved,
        })
    }

    /// Why `self` (a new schema) breaks `level` against `earlier` (the versions it is
    /// checked against, newest first); empty when it is compatible.
    pub fn incompatibilities(&self, level: Compatibility, earlier: &[ParsedSchema]) -> Vec<String> {
        let against = if level.transitive() {
            earlier
        } else {
            &earlier[..earlier.len().min(1)]
        };
        let mut problems = Vec::new();
        for old in against {
            if old.schema_type != self.schema_type {
                problems.push(format!(
                    "Incompatible because of different schema type: {} and {}",
                    old.schema_type.name(),
                    self.schema_type.name()
                ));
                continue;
            }
            if level.backward() {
                problems.extend(can_read(self, old));
            }
            if level.forward() {
                problems.extend(can_read(old, self));
            }
        }
        problems
    }
}

/// Why `reader` cannot read what `writer` wrote (empty when it can).
fn can_read(reader: &ParsedSchema, writer: &ParsedSchema) -> Vec<String> {
    match reader.schema_type {
        SchemaType::Avro => avro::can_read(
            (&reader.text, &reader.resolved),
            (&writer.text, &writer.resolved),
        ),
        SchemaType::Json => json_schema::can_read(&reader.text, &writer.text),
        SchemaType::Protobuf => protobuf::can_read(&reader.text, &writer.text),
    }
}
