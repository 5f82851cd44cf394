//! Protobuf schemas. A client sends a `.proto` file's text or, as confluent-kafka's
//! serializers do, the base64 of its serialized `FileDescriptorProto`; the registry keeps
//! the base64 descriptor (without source locations) either way, which is what those clients
//! ask for (`?format=serialized`) and what Confluent's parsers take as well as text.
//!
//! Compatibility follows Confluent's Protobuf rules (`SchemaDiff.COMPATIBLE_CHANGES`), fields
//! matched by number: a removed message, a changed package, a field whose kind, scalar kind
//! (Confluent's wire-compatible groups), named type or numeric label changes, and a required
//! field added or removed are incompatible; added and removed optional fields, enums and
//! enum values, and renames are compatible. Moves into and out of `oneof`s are not checked.

use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto};
use sluice_protocol::base64;

use crate::error::RegistryError;

/// The stored form: base64 of the descriptor.
pub fn parse(text: &str) -> Result<String, RegistryError> {
    let fd = descriptor(text)?;
    Ok(base64::encode_padded(&fd.encode_to_vec()))
}

/// `text` as a descriptor: the base64 of one, else `.proto` source.
pub fn descriptor(text: &str) -> Result<FileDescriptorProto, RegistryError> {
    let trimmed = text.trim();
    let mut fd = match base64::decode_padded(trimmed) {
        Some(bytes) => FileDescriptorProto::decode(bytes.as_slice()).map_err(|e| {
            RegistryError::invalid_schema(format!("not a FileDescriptorProto: {e}"))
        })?,
        None => protox_parse::parse("schema.proto", text)
            .map_err(|e| RegistryError::invalid_schema(format!("{e}")))?,
    };
    if fd.message_type.is_empty() && fd.enum_type.is_empty() && fd.service.is_empty() {
        return Err(RegistryError::invalid_schema(
            "a Protobuf schema must define a message, an enum or a service",
        ));
    }
    fd.source_code_info = None;
    Ok(fd)
}

/// Why data written with `writer` may be misread with `reader` (empty when it cannot).
pub fn can_read(reader: &str, writer: &str) -> Vec<String> {
    let (Ok(r), Ok(w)) = (descriptor(reader), descriptor(writer)) else {
        return vec!["cannot parse".into()];
    };
    let mut out = Vec::new();
    if r.package() != w.package() {
        out.push(format!(
            "PACKAGE_CHANGED: {} -> {}",
            w.package(),
            r.package()
        ));
    }
    let named = Named::of(&r, &w);
    compare_messages(&w.message_type, &r.message_type, "", &named, &mut out);
    out
}

/// The local names of the messages and enums both files define (a text-parsed descriptor
/// leaves a field's `type` unset when it names one).
struct Named {
    enums: Vec<String>,
}

impl Named {
    fn of(a: &FileDescriptorProto, b: &FileDescriptorProto) -> Named {
        let mut enums = Vec::new();
        for f in [a, b] {
            enums.extend(f.enum_type.iter().map(|e| e.name().to_string()));
            collect_enums(&f.message_type, &mut enums);
        }
        Named { enums }
    }
}

fn collect_enums(messages: &[DescriptorProto], out: &mut Vec<String>) {
    for m in messages {
        out.extend(m.enum_type.iter().map(|e| e.name().to_string()));
        collect_enums(&m.nested_type, out);
    }
}

fn compare_messages(
    original: &[DescriptorProto],
    update: &[DescriptorProto],
    scope: &str,
    named: &Named,
    out: &mut Vec<String>,
) {
    for m in original {
        let full = format!("{scope}{}", m.name());
        match update.iter().find(|u| u.name() == m.name()) {
            None => out.push(format!("MESSAGE_REMOVED: {full}")),
            Some(u) => {
                compare_fields(m, u, &full, named, out);
                compare_messages(
                    &m.nested_type,
                    &u.nested_type,
                    &format!("{full}."),
                    named,
                    out,
                );
            }
        }
    }
}

/// What a field holds, in Confluent's terms.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// A scalar, by wire-compatible group.
    Scalar(u8),
    /// A message or enum, by local type name.
    Named(String),
}

fn kind(f: &FieldDescriptorProto, named: &Named) -> Kind {
    let local = |f: &FieldDescriptorProto| {
        f.type_name()
            .rsplit('.')
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let ty = f.r#type.and_then(|t| Type::try_from(t).ok());
    let group = match ty {
        Some(Type::Int32 | Type::Int64 | Type::Uint32 | Type::Uint64 | Type::Bool | Type::Enum) => {
            0
        }
        Some(Type::Sint32 | Type::Sint64) => 1,
        Some(Type::String | Type::Bytes) => 2,
        Some(Type::Fixed32 | Type::Sfixed32) => 3,
        Some(Type::Fixed64 | Type::Sfixed64) => 4,
        Some(Type::Float) => 5,
        Some(Type::Double) => 6,
        Some(Type::Message | Type::Group) => return Kind::Named(local(f)),
        None if named.enums.contains(&local(f)) => 0,
        None => return Kind::Named(local(f)),
    };
    Kind::Scalar(group)
}

fn is_string_or_bytes(f: &FieldDescriptorProto) -> bool {
    matches!(
        f.r#type.and_then(|t| Type::try_from(t).ok()),
        Some(Type::String | Type::Bytes)
    )
}

fn compare_fields(
    original: &DescriptorProto,
    update: &DescriptorProto,
    message: &str,
    named: &Named,
    out: &mut Vec<String>,
) {
    for f in &original.field {
        let at = format!("{message}.{}", f.name());
        let Some(u) = update.field.iter().find(|u| u.number() == f.number()) else {
            if f.label() == Label::Required {
                out.push(format!("REQUIRED_FIELD_REMOVED: {at}"));
            }
            continue;
        };
        match (kind(f, named), kind(u, named)) {
            (Kind::Scalar(a), Kind::Scalar(b)) if a != b => {
                out.push(format!("FIELD_SCALAR_KIND_CHANGED: {at}"));
            }
            (Kind::Named(a), Kind::Named(b)) if a != b => {
                out.push(format!("FIELD_NAMED_TYPE_CHANGED: {at}"));
            }
            (Kind::Scalar(_), Kind::Named(_)) | (Kind::Named(_), Kind::Scalar(_)) => {
                out.push(format!("FIELD_KIND_CHANGED: {at}"));
            }
            _ => {}
        }
        let repeated = |x: &FieldDescriptorProto| x.label() == Label::Repeated;
        if repeated(f) != repeated(u) && !(is_string_or_bytes(f) && is_string_or_bytes(u)) {
            out.push(format!("FIELD_NUMERIC_LABEL_CHANGED: {at}"));
        }
    }
    for u in &update.field {
        let added = !original.field.iter().any(|f| f.number() == u.number());
        if added && u.label() == Label::Required {
            out.push(format!("REQUIRED_FIELD_ADDED: {message}.{}", u.name()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = r#"syntax = "proto3"; package shop;
        message Order { int64 id = 1; string item = 2; Status status = 3; }
        enum Status { NEW = 0; PAID = 1; }"#;

    fn compatible(reader: &str, writer: &str) -> bool {
        can_read(reader, writer).is_empty()
    }

    #[test]
    fn text_and_its_descriptor_are_stored_alike_and_garbage_is_refused() {
        let stored = parse(V1).unwrap();
        assert_eq!(
            parse(&stored).unwrap(),
            stored,
            "base64 descriptors are taken as they are"
        );
        let fd = descriptor(&stored).unwrap();
        assert_eq!(fd.package(), "shop");
        assert_eq!(fd.message_type[0].field.len(), 3);
        for bad in [
            "message {",
            "syntax = \"proto3\";",
            "AAAA",
            "not proto at all",
        ] {
            assert_eq!(parse(bad).unwrap_err().code, 42201, "{bad}");
        }
    }

    #[test]
    fn fields_are_matched_by_number() {
        let added = V1.replace("Status status = 3;", "Status status = 3; string note = 4;");
        let renamed = V1.replace("string item = 2", "string product = 2");
        let widened = V1.replace("int64 id = 1", "uint64 id = 1");
        let retyped = V1.replace("int64 id = 1", "double id = 1");
        let repeated = V1.replace("int64 id = 1", "repeated int64 id = 1");
        let moved = V1.replace("package shop;", "package store;");
        let removed = V1.replace("message Order", "message Purchase");
        assert!(compatible(&added, V1) && compatible(V1, &added));
        assert!(compatible(&renamed, V1));
        assert!(compatible(&widened, V1));
        assert!(!compatible(&retyped, V1));
        assert!(!compatible(&repeated, V1));
        assert!(!compatible(&moved, V1));
        assert!(!compatible(&removed, V1));
        let as_message = V1.replace("Status status = 3", "Order status = 3");
        assert!(
            !compatible(&as_message, V1),
            "an enum field became a message"
        );
    }
}
