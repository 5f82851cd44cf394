//! [`RegistryState`]: the registry as the `_schemas` records written so far describe it, and
//! the records each change would write. Pure: the broker's registry coordinator reads the
//! topic into it, asks it to plan a change, appends the planned records and applies them
//! once they are committed, through the same [`RegistryState::apply`] as a reader of the log.
//!
//! Invariants: an id names one schema forever (ids are never reused, even after a permanent
//! delete); a subject's versions only grow; a schema registered twice in a subject keeps its
//! version and id; the same schema in another subject gets the same id.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use crate::error::RegistryError;
use crate::records::{self, Key, Record, SchemaValue};
use crate::schema::{Compatibility, ParsedSchema, Reference, SchemaType};

/// The global compatibility level when none is set (Confluent's
/// `schema.compatibility.level` default).
pub const DEFAULT_COMPATIBILITY: Compatibility = Compatibility::Backward;

/// How deep references may nest before a schema is refused (a cycle, or an abuse).
const REFERENCE_DEPTH_MAX: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    ReadWrite,
    ReadOnly,
    ReadOnlyOverride,
    Import,
}

impl Mode {
    pub fn parse(name: &str) -> Option<Mode> {
        Some(match name.to_ascii_uppercase().as_str() {
            "READWRITE" => Mode::ReadWrite,
            "READONLY" => Mode::ReadOnly,
            "READONLY_OVERRIDE" => Mode::ReadOnlyOverride,
            "IMPORT" => Mode::Import,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::ReadWrite => "READWRITE",
            Mode::ReadOnly => "READONLY",
            Mode::ReadOnlyOverride => "READONLY_OVERRIDE",
            Mode::Import => "IMPORT",
        }
    }
}

/// A schema as an id names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredSchema {
    pub schema_type: SchemaType,
    pub text: String,
    pub references: Vec<Reference>,
}

/// One version of a subject, as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubjectVersion {
    pub subject: String,
    pub version: i32,
    pub id: i32,
    pub schema: StoredSchema,
    pub deleted: bool,
}

impl SubjectVersion {
    /// Confluent's Schema entity.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::json!({
            "subject": self.subject,
            "version": self.version,
            "id": self.id,
            "schemaType": self.schema.schema_type.name(),
            "schema": self.schema.text,
        });
        if !self.schema.references.is_empty() {
            v["references"] = self
                .schema
                .references
                .iter()
                .map(Reference::to_json)
                .collect();
        }
        if self.deleted {
            v["deleted"] = true.into();
        }
        v
    }
}

/// Which version a request names: a number, or the latest (`latest` or -1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionSpec {
    Number(i32),
    Latest,
}

impl VersionSpec {
    pub fn parse(s: &str) -> Result<VersionSpec, RegistryError> {
        if s.eq_ignore_ascii_case("latest") || s == "-1" {
            return Ok(VersionSpec::Latest);
        }
        match s.parse::<i32>() {
            Ok(n) if n >= 1 => Ok(VersionSpec::Number(n)),
            _ => Err(RegistryError::invalid_version(s)),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Version {
    id: i32,
    deleted: bool,
}

#[derive(Default, Debug)]
struct Subject {
    versions: BTreeMap<i32, Version>,
    compatibility: Option<Compatibility>,
    mode: Option<Mode>,
}

impl Subject {
    fn live(&self) -> impl DoubleEndedIterator<Item = (&i32, &Version)> {
        self.versions.iter().filter(|(_, v)| !v.deleted)
    }

    fn has_live(&self) -> bool {
        self.live().next().is_some()
    }
}

/// A registration to make: the records to write and what to answer once they are.
#[derive(Debug)]
pub struct Planned<T> {
    pub records: Vec<Record>,
    pub answer: T,
}

impl<T> Planned<T> {
    fn nothing(answer: T) -> Self {
        Planned {
            records: Vec::new(),
            answer,
        }
    }
}

/// What a registration answers: the schema's id and its version in the subject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registered {
    pub id: i32,
    pub version: i32,
}

#[derive(Default, Debug)]
pub struct RegistryState {
    subjects: BTreeMap<String, Subject>,
    schemas: BTreeMap<i32, StoredSchema>,
    by_content: HashMap<(SchemaType, String, Vec<Reference>), i32>,
    uses: BTreeMap<i32, BTreeSet<(String, i32)>>,
    global_compatibility: Option<Compatibility>,
    global_mode: Option<Mode>,
    max_id: i32,
}

impl RegistryState {
    /// Apply one `_schemas` record (key and value bytes; a record that is not the
    /// registry's, or that it cannot read, is passed over as Confluent's reader does).
    pub fn apply(&mut self, key: &[u8], value: Option<&[u8]>) {
        let Some(key) = Key::decode(key) else { return };
        let value: Option<Value> = match value {
            None => None,
            Some(bytes) => match serde_json::from_slice(bytes) {
                Ok(v) => Some(v),
                Err(_) => return,
            },
        };
        match (key, value) {
            (Key::Schema { subject, version }, Some(v)) => {
                if let Some(s) = SchemaValue::decode(&subject, version, &v) {
                    self.put_version(&subject, version, s);
                }
            }
            (Key::Schema { subject, version }, None) => self.remove_version(&subject, version),
            (Key::Config { subject }, v) => {
                let level = v
                    .as_ref()
                    .and_then(|v| v.get("compatibilityLevel"))
                    .and_then(Value::as_str)
                    .and_then(Compatibility::parse);
                match subject {
                    None => self.global_compatibility = level,
                    Some(s) => self.subjects.entry(s).or_default().compatibility = level,
                }
            }
            (Key::Mode { subject }, v) => {
                let mode = v
                    .as_ref()
                    .and_then(|v| v.get("mode"))
                    .and_then(Value::as_str)
                    .and_then(Mode::parse);
                match subject {
                    None => self.global_mode = mode,
                    Some(s) => self.subjects.entry(s).or_default().mode = mode,
                }
            }
            (Key::DeleteSubject { subject }, Some(v)) => {
                let up_to = v
                    .get("version")
                    .and_then(Value::as_i64)
                    .unwrap_or(i64::from(i32::MAX));
                if let Some(s) = self.subjects.get_mut(&subject) {
                    for (_, ver) in s
                        .versions
                        .range_mut(..=up_to.clamp(0, i64::from(i32::MAX)) as i32)
                    {
                        ver.deleted = true;
                    }
                }
            }
            (Key::ClearSubject { subject }, Some(_)) => {
                let versions: Vec<i32> = self
                    .subjects
                    .get(&subject)
                    .map(|s| s.versions.keys().copied().collect())
                    .unwrap_or_default();
                for v in versions {
                    self.remove_version(&subject, v);
                }
            }
            _ => {}
        }
    }

    fn put_version(&mut self, subject: &str, version: i32, v: SchemaValue) {
        let stored = StoredSchema {
            schema_type: v.schema_type,
            text: v.schema,
            references: v.references,
        };
        self.by_content
            .entry((
                stored.schema_type,
                stored.text.clone(),
                stored.references.clone(),
            ))
            .or_insert(v.id);
        self.schemas.entry(v.id).or_insert(stored);
        self.max_id = self.max_id.max(v.id);
        let s = self.subjects.entry(subject.to_string()).or_default();
        if let Some(old) = s.versions.insert(
            version,
            Version {
                id: v.id,
                deleted: v.deleted,
            },
        ) {
            if old.id != v.id {
                self.unuse(old.id, subject, version);
            }
        }
        self.uses
            .entry(v.id)
            .or_default()
            .insert((subject.to_string(), version));
    }

    fn remove_version(&mut self, subject: &str, version: i32) {
        let Some(s) = self.subjects.get_mut(subject) else {
            return;
        };
        if let Some(old) = s.versions.remove(&version) {
            self.unuse(old.id, subject, version);
        }
    }

    /// Forget that `subject`/`version` uses `id`; an id no version uses any more is gone
    /// (404), though it is never given to another schema.
    fn unuse(&mut self, id: i32, subject: &str, version: i32) {
        let Some(users) = self.uses.get_mut(&id) else {
            return;
        };
        users.remove(&(subject.to_string(), version));
        if users.is_empty() {
            self.uses.remove(&id);
            if let Some(s) = self.schemas.remove(&id) {
                self.by_content
                    .remove(&(s.schema_type, s.text, s.references));
            }
        }
    }

    // ----- reads -----

    /// Subjects with live versions (and soft-deleted ones with `deleted`; only those with
    /// `deleted_only`), sorted.
    pub fn subjects(&self, prefix: &str, deleted: bool, deleted_only: bool) -> Vec<String> {
        self.subjects
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .filter(|(_, s)| {
                let live = s.has_live();
                let soft = s.versions.values().any(|v| v.deleted);
                if deleted_only {
                    soft && !live
                } else {
                    live || (deleted && soft)
                }
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    fn subject(&self, name: &str) -> Result<&Subject, RegistryError> {
        self.subjects
            .get(name)
            .filter(|s| !s.versions.is_empty())
            .ok_or_else(|| RegistryError::subject_not_found(name))
    }

    /// A subject's version numbers.
    pub fn versions(
        &self,
        subject: &str,
        deleted: bool,
        deleted_only: bool,
    ) -> Result<Vec<i32>, RegistryError> {
        let s = self.subject(subject)?;
        let versions: Vec<i32> = s
            .versions
            .iter()
            .filter(|(_, v)| {
                if deleted_only {
                    v.deleted
                } else {
                    deleted || !v.deleted
                }
            })
            .map(|(n, _)| *n)
            .collect();
        if versions.is_empty() && !deleted_only {
            return Err(RegistryError::subject_not_found(subject));
        }
        Ok(versions)
    }

    /// One version of a subject (soft-deleted ones only with `deleted`).
    pub fn version(
        &self,
        subject: &str,
        spec: VersionSpec,
        deleted: bool,
    ) -> Result<SubjectVersion, RegistryError> {
        let s = self.subject(subject)?;
        if !deleted && !s.has_live() {
            // A soft-deleted subject is not found, as Confluent answers.
            return Err(RegistryError::subject_not_found(subject));
        }
        let found = match spec {
            VersionSpec::Latest => s.versions.iter().rev().find(|(_, v)| deleted || !v.deleted),
            VersionSpec::Number(n) => s
                .versions
                .get_key_value(&n)
                .filter(|(_, v)| deleted || !v.deleted),
        };
        let Some((&version, v)) = found else {
            if spec == VersionSpec::Latest && !deleted {
                return Err(RegistryError::subject_not_found(subject));
            }
            return Err(RegistryError::version_not_found(match spec {
                VersionSpec::Number(n) => n.to_string(),
                VersionSpec::Latest => "latest".into(),
            }));
        };
        self.subject_version(subject, version, *v)
    }

    fn subject_version(
        &self,
        subject: &str,
        version: i32,
        v: Version,
    ) -> Result<SubjectVersion, RegistryError> {
        let schema = self
            .schemas
            .get(&v.id)
            .ok_or_else(|| RegistryError::schema_id_not_found(v.id))?;
        Ok(SubjectVersion {
            subject: subject.to_string(),
            version,
            id: v.id,
            schema: schema.clone(),
            deleted: v.deleted,
        })
    }

    pub fn schema_by_id(&self, id: i32) -> Result<&StoredSchema, RegistryError> {
        self.schemas
            .get(&id)
            .ok_or_else(|| RegistryError::schema_id_not_found(id))
    }

    /// The (subject, version) pairs that use schema `id`.
    pub fn versions_by_id(
        &self,
        id: i32,
        deleted: bool,
    ) -> Result<Vec<(String, i32)>, RegistryError> {
        let users = self
            .uses
            .get(&id)
            .ok_or_else(|| RegistryError::schema_id_not_found(id))?;
        Ok(users
            .iter()
            .filter(|(s, v)| {
                deleted
                    || self
                        .subjects
                        .get(s)
                        .and_then(|s| s.versions.get(v))
                        .is_some_and(|v| !v.deleted)
            })
            .cloned()
            .collect())
    }

    /// Ids of the schemas whose references name `subject`/`version`.
    pub fn referenced_by(&self, subject: &str, version: i32) -> Vec<i32> {
        self.schemas
            .iter()
            .filter(|(id, s)| {
                self.uses.contains_key(id)
                    && s.references
                        .iter()
                        .any(|r| r.subject == subject && r.version == version)
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// Every live subject version, in subject then version order (`GET /schemas`).
    pub fn all_versions(&self, prefix: &str, deleted: bool) -> Vec<SubjectVersion> {
        self.subjects
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .flat_map(|(name, s)| {
                s.versions
                    .iter()
                    .filter(move |(_, v)| deleted || !v.deleted)
                    .filter_map(move |(n, v)| self.subject_version(name, *n, *v).ok())
            })
            .collect()
    }

    /// The compatibility level in force for `subject` (its own, else the global one).
    pub fn compatibility(&self, subject: Option<&str>) -> Compatibility {
        subject
            .and_then(|s| self.subjects.get(s))
            .and_then(|s| s.compatibility)
            .or(self.global_compatibility)
            .unwrap_or(DEFAULT_COMPATIBILITY)
    }

    /// `GET /config/{subject}`: the subject's own level (40408 without one unless
    /// `default_to_global`).
    pub fn subject_compatibility(
        &self,
        subject: &str,
        default_to_global: bool,
    ) -> Result<Compatibility, RegistryError> {
        match self.subjects.get(subject).and_then(|s| s.compatibility) {
            Some(level) => Ok(level),
            None if default_to_global => Ok(self.compatibility(None)),
            None => Err(RegistryError::subject_config_not_found(subject)),
        }
    }

    pub fn mode(&self, subject: Option<&str>) -> Mode {
        subject
            .and_then(|s| self.subjects.get(s))
            .and_then(|s| s.mode)
            .or(self.global_mode)
            .unwrap_or(Mode::ReadWrite)
    }

    pub fn subject_mode(
        &self,
        subject: &str,
        default_to_global: bool,
    ) -> Result<Mode, RegistryError> {
        match self.subjects.get(subject).and_then(|s| s.mode) {
            Some(m) => Ok(m),
            None if default_to_global => Ok(self.mode(None)),
            None => Err(RegistryError::subject_mode_not_found(subject)),
        }
    }

    pub fn max_id(&self) -> i32 {
        self.max_id
    }

    // ----- parsing with references -----

    /// Parse a schema sent by a client, its references resolved from this registry.
    pub fn parse(
        &self,
        schema_type: SchemaType,
        text: &str,
        references: Vec<Reference>,
    ) -> Result<ParsedSchema, RegistryError> {
        let mut resolved = Vec::new();
        let mut seen = BTreeSet::new();
        for r in &references {
            self.resolve(r, 0, &mut seen, &mut resolved)?;
        }
        ParsedSchema::parse(schema_type, text, references, resolved)
    }

    /// Add `r`'s schema to `out` after its own references (dependencies first).
    fn resolve(
        &self,
        r: &Reference,
        depth: usize,
        seen: &mut BTreeSet<(String, i32)>,
        out: &mut Vec<String>,
    ) -> Result<(), RegistryError> {
        if depth > REFERENCE_DEPTH_MAX {
            return Err(RegistryError::invalid_schema("references nest too deep"));
        }
        let spec = if r.version == -1 {
            VersionSpec::Latest
        } else {
            VersionSpec::Number(r.version)
        };
        let v = self.version(&r.subject, spec, true).map_err(|_| {
            RegistryError::invalid_schema(format!(
                "reference {} to subject '{}' version {} does not exist",
                r.name, r.subject, r.version
            ))
        })?;
        if !seen.insert((v.subject.clone(), v.version)) {
            return Ok(());
        }
        for inner in &v.schema.references {
            self.resolve(inner, depth + 1, seen, out)?;
        }
        out.push(v.schema.text);
        Ok(())
    }

    fn parse_stored(&self, s: &StoredSchema) -> Result<ParsedSchema, RegistryError> {
        self.parse(s.schema_type, &s.text, s.references.clone())
    }

    // ----- changes -----

    fn writable(&self, subject: &str) -> Result<Mode, RegistryError> {
        match self.mode(Some(subject)) {
            m @ (Mode::ReadOnly | Mode::ReadOnlyOverride) => Err(RegistryError::not_permitted(
                format!("Subject {subject} is in read-only mode ({})", m.name()),
            )),
            m => Ok(m),
        }
    }

    /// Register `schema` under `subject`. In IMPORT mode the client gives the id (and may
    /// give the version); otherwise an identical live version answers with its own id and
    /// version, and a new version must pass the subject's compatibility level.
    pub fn plan_register(
        &self,
        subject: &str,
        schema: &ParsedSchema,
        import_id: Option<i32>,
        import_version: Option<i32>,
    ) -> Result<Planned<Registered>, RegistryError> {
        check_subject_name(subject)?;
        let mode = self.writable(subject)?;
        let content = (
            schema.schema_type,
            schema.text.clone(),
            schema.references.clone(),
        );
        let existing_id = self.by_content.get(&content).copied();
        let s = self.subjects.get(subject);
        if let (Some(id), Some(s)) = (existing_id, s) {
            if let Some((v, _)) = s.live().find(|(_, v)| v.id == id) {
                return Ok(Planned::nothing(Registered { id, version: *v }));
            }
        }
        let id = if mode == Mode::Import {
            let id = import_id
                .ok_or_else(|| RegistryError::unprocessable("IMPORT mode needs the schema's id"))?;
            if self.schemas.contains_key(&id) && existing_id != Some(id) {
                return Err(RegistryError::new_id_in_use(id));
            }
            id
        } else {
            let level = self.compatibility(Some(subject));
            if level != Compatibility::None {
                let earlier: Vec<ParsedSchema> = s
                    .into_iter()
                    .flat_map(|s| s.live().rev())
                    .filter_map(|(_, v)| self.schemas.get(&v.id))
                    .map(|stored| self.parse_stored(stored))
                    .collect::<Result<_, _>>()?;
                let problems = schema.incompatibilities(level, &earlier);
                if !problems.is_empty() {
                    return Err(RegistryError::incompatible(subject, &problems));
                }
            }
            existing_id.unwrap_or(self.max_id + 1)
        };
        let next = s
            .and_then(|s| s.versions.keys().next_back())
            .map_or(1, |v| v + 1);
        let version = match (mode, import_version) {
            (Mode::Import, Some(v)) if v >= 1 => v,
            _ => next,
        };
        let value = SchemaValue {
            subject: subject.to_string(),
            version,
            id,
            schema: schema.text.clone(),
            schema_type: schema.schema_type,
            references: schema.references.clone(),
            deleted: false,
        };
        Ok(Planned {
            records: vec![Record {
                key: Key::Schema {
                    subject: subject.to_string(),
                    version,
                },
                value: Some(value.encode()),
            }],
            answer: Registered { id, version },
        })
    }

    /// `POST /subjects/{s}`: the version of `subject` holding this schema.
    pub fn lookup(
        &self,
        subject: &str,
        schema: &ParsedSchema,
        deleted: bool,
    ) -> Result<SubjectVersion, RegistryError> {
        let s = self.subject(subject)?;
        let id = self
            .by_content
            .get(&(
                schema.schema_type,
                schema.text.clone(),
                schema.references.clone(),
            ))
            .ok_or_else(RegistryError::schema_not_found)?;
        let (version, v) = s
            .versions
            .iter()
            .rev()
            .find(|(_, v)| v.id == *id && (deleted || !v.deleted))
            .ok_or_else(RegistryError::schema_not_found)?;
        self.subject_version(subject, *version, *v)
    }

    /// `POST /compatibility/subjects/{s}/versions[/{v}]`: `None` checks against the versions
    /// the subject's level names; a version checks against that one.
    pub fn check_compatibility(
        &self,
        subject: &str,
        schema: &ParsedSchema,
        version: Option<VersionSpec>,
    ) -> Result<Vec<String>, RegistryError> {
        let level = self.compatibility(Some(subject));
        let earlier: Vec<ParsedSchema> = match version {
            Some(spec) => match self.version(subject, spec, false) {
                Ok(v) => vec![self.parse_stored(&v.schema)?],
                Err(e) if e.code == 40401 && spec == VersionSpec::Latest => Vec::new(),
                Err(e) => return Err(e),
            },
            None => match self.subjects.get(subject) {
                None => Vec::new(),
                Some(s) => s
                    .live()
                    .rev()
                    .filter_map(|(_, v)| self.schemas.get(&v.id))
                    .map(|stored| self.parse_stored(stored))
                    .collect::<Result<_, _>>()?,
            },
        };
        if level == Compatibility::None {
            return Ok(Vec::new());
        }
        Ok(schema.incompatibilities(level, &earlier))
    }

    /// `DELETE /subjects/{s}[?permanent=true]`: the versions deleted.
    pub fn plan_delete_subject(
        &self,
        subject: &str,
        permanent: bool,
    ) -> Result<Planned<Vec<i32>>, RegistryError> {
        self.writable(subject)?;
        let s = self.subject(subject)?;
        for (v, _) in s.versions.iter() {
            if !self.referenced_by(subject, *v).is_empty() {
                return Err(RegistryError::referenced(subject, *v));
            }
        }
        if permanent {
            if s.has_live() {
                return Err(RegistryError::subject_not_soft_deleted(subject));
            }
            let versions: Vec<i32> = s.versions.keys().copied().collect();
            let mut records: Vec<Record> = versions
                .iter()
                .rev()
                .map(|v| Record {
                    key: Key::Schema {
                        subject: subject.to_string(),
                        version: *v,
                    },
                    value: None,
                })
                .collect();
            records.extend(self.subject_setting_tombstones(subject, s));
            return Ok(Planned {
                records,
                answer: versions,
            });
        }
        let live: Vec<i32> = s.live().map(|(v, _)| *v).collect();
        let Some(latest) = live.last() else {
            return Err(RegistryError::subject_soft_deleted(subject));
        };
        Ok(Planned {
            records: vec![Record {
                key: Key::DeleteSubject {
                    subject: subject.to_string(),
                },
                value: Some(records::delete_subject_value(subject, *latest)),
            }],
            answer: live,
        })
    }

    fn subject_setting_tombstones(&self, subject: &str, s: &Subject) -> Vec<Record> {
        let mut out = Vec::new();
        if s.compatibility.is_some() {
            out.push(Record {
                key: Key::Config {
                    subject: Some(subject.to_string()),
                },
                value: None,
            });
        }
        if s.mode.is_some() {
            out.push(Record {
                key: Key::Mode {
                    subject: Some(subject.to_string()),
                },
                value: None,
            });
        }
        out
    }

    /// `DELETE /subjects/{s}/versions/{v}[?permanent=true]`: the version deleted.
    pub fn plan_delete_version(
        &self,
        subject: &str,
        spec: VersionSpec,
        permanent: bool,
    ) -> Result<Planned<i32>, RegistryError> {
        self.writable(subject)?;
        let s = self.subject(subject)?;
        let (version, v) = match spec {
            VersionSpec::Latest => s
                .live()
                .next_back()
                .map(|(n, v)| (*n, *v))
                .ok_or_else(|| RegistryError::subject_not_found(subject))?,
            VersionSpec::Number(n) => s
                .versions
                .get(&n)
                .map(|v| (n, *v))
                .ok_or_else(|| RegistryError::version_not_found(n))?,
        };
        if !self.referenced_by(subject, version).is_empty() {
            return Err(RegistryError::referenced(subject, version));
        }
        let key = Key::Schema {
            subject: subject.to_string(),
            version,
        };
        if permanent {
            if !v.deleted {
                return Err(RegistryError::version_not_soft_deleted(subject, version));
            }
            let mut records = vec![Record { key, value: None }];
            if s.versions.len() == 1 {
                records.extend(self.subject_setting_tombstones(subject, s));
            }
            return Ok(Planned {
                records,
                answer: version,
            });
        }
        if v.deleted {
            return Err(RegistryError::version_soft_deleted(subject, version));
        }
        let stored = self.subject_version(subject, version, v)?;
        let value = SchemaValue {
            subject: subject.to_string(),
            version,
            id: v.id,
            schema: stored.schema.text,
            schema_type: stored.schema.schema_type,
            references: stored.schema.references,
            deleted: true,
        };
        Ok(Planned {
            records: vec![Record {
                key,
                value: Some(value.encode()),
            }],
            answer: version,
        })
    }

    /// `PUT /config[/{s}]`.
    pub fn plan_set_compatibility(
        &self,
        subject: Option<&str>,
        level: Compatibility,
    ) -> Result<Planned<Compatibility>, RegistryError> {
        if let Some(s) = subject {
            check_subject_name(s)?;
        }
        let subject = subject.map(str::to_string);
        Ok(Planned {
            records: vec![Record {
                value: Some(records::config_value(&subject, level.name())),
                key: Key::Config { subject },
            }],
            answer: level,
        })
    }

    /// `DELETE /config[/{s}]`: the level removed (the global one falls back to the default).
    pub fn plan_delete_compatibility(
        &self,
        subject: Option<&str>,
    ) -> Result<Planned<Compatibility>, RegistryError> {
        let current = match subject {
            Some(s) => self.subject_compatibility(s, false)?,
            None => self.compatibility(None),
        };
        Ok(Planned {
            records: vec![Record {
                key: Key::Config {
                    subject: subject.map(str::to_string),
                },
                value: None,
            }],
            answer: current,
        })
    }

    /// `PUT /mode[/{s}]`. IMPORT needs no live subject in its scope unless `force`.
    pub fn plan_set_mode(
        &self,
        subject: Option<&str>,
        mode: Mode,
        force: bool,
    ) -> Result<Planned<Mode>, RegistryError> {
        if mode == Mode::Import && !force {
            let busy = match subject {
                Some(s) => self.subjects.get(s).is_some_and(Subject::has_live),
                None => self.subjects.values().any(Subject::has_live),
            };
            if busy {
                return Err(RegistryError::not_permitted(
                    "Cannot import since found existing subjects",
                ));
            }
        }
        let subject = subject.map(str::to_string);
        Ok(Planned {
            records: vec![Record {
                value: Some(records::mode_value(&subject, mode.name())),
                key: Key::Mode { subject },
            }],
            answer: mode,
        })
    }

    /// `DELETE /mode[/{s}]`: the mode removed.
    pub fn plan_delete_mode(&self, subject: Option<&str>) -> Result<Planned<Mode>, RegistryError> {
        let current = match subject {
            Some(s) => self.subject_mode(s, false)?,
            None => self.mode(None),
        };
        Ok(Planned {
            records: vec![Record {
                key: Key::Mode {
                    subject: subject.map(str::to_string),
                },
                value: None,
            }],
            answer: current,
        })
    }
}

/// Subject names Confluent refuses (42208): empty, or holding control characters.
fn check_subject_name(subject: &str) -> Result<(), RegistryError> {
    if subject.is_empty() || subject.chars().any(char::is_control) {
        return Err(RegistryError::invalid_subject(subject));
    }
    Ok(())
}

impl RegistryError {
    fn new_id_in_use(id: i32) -> Self {
        RegistryError {
            status: 422,
            code: 42207,
            message: format!("Schema id {id} already in use by another schema"),
        }
    }
}
