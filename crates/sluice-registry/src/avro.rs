//! Avro schemas through Apache's `apache-avro` crate: parse (with the named types of
//! referenced schemas) and reader/writer compatibility, the check Confluent's registry makes
//! with Java Avro's `SchemaCompatibility.checkReaderWriterCompatibility`.

use apache_avro::schema_compatibility::SchemaCompatibility;
use apache_avro::Schema;

use crate::error::RegistryError;

/// Parse `text` with the referenced schemas `resolved` (dependencies first); the stored form
/// is the compact JSON of the text.
pub fn parse(text: &str, resolved: &[String]) -> Result<String, RegistryError> {
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(RegistryError::invalid_schema)?;
    load(text, resolved).map_err(RegistryError::invalid_schema)?;
    Ok(json.to_string())
}

fn load(text: &str, resolved: &[String]) -> Result<Schema, String> {
    if resolved.is_empty() {
        return Schema::parse_str(text).map_err(|e| e.to_string());
    }
    let deps: Vec<&str> = resolved.iter().map(String::as_str).collect();
    Schema::parse_str_with_list(text, &deps)
        .map(|(schema, _)| schema)
        .map_err(|e| e.to_string())
}

/// Why data written with `writer` may fail to decode with `reader`; empty when it cannot.
pub fn can_read(reader: (&str, &[String]), writer: (&str, &[String])) -> Vec<String> {
    let (r, w) = match (load(reader.0, reader.1), load(writer.0, writer.1)) {
        (Ok(r), Ok(w)) => (r, w),
        (Err(e), _) | (_, Err(e)) => return vec![format!("cannot parse: {e}")],
    };
    match SchemaCompatibility::can_read(&w, &r) {
        Ok(_) => Vec::new(),
        Err(e) => vec![format!(
            "{{errorType:'READER_INCOMPATIBLE', description:'{e}', readerSchema:'{}', writerSchema:'{}'}}",
            reader.0, writer.0
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(fields: &str) -> String {
        format!(r#"{{"type":"record","name":"User","fields":[{fields}]}}"#)
    }

    #[test]
    fn the_stored_form_ignores_whitespace_and_bad_schemas_are_refused() {
        let a = parse(&record(r#"{"name":"a","type":"int"}"#), &[]).unwrap();
        let b = parse(
            "{ \"type\": \"record\",\n \"name\": \"User\", \"fields\": [ {\"name\": \"a\", \"type\": \"int\"} ] }",
            &[],
        )
        .unwrap();
        assert_eq!(a, b);
        for bad in [
            "{",
            r#"{"type":"record","name":"X"}"#,
            r#""nosuchtype""#,
            r#"{"type":"enum","name":"E","symbols":["A","A"]}"#,
        ] {
            assert_eq!(parse(bad, &[]).unwrap_err().code, 42201, "{bad}");
        }
    }

    #[test]
    fn readers_need_defaults_for_fields_the_writer_lacks() {
        let v1 = record(r#"{"name":"a","type":"int"}"#);
        let added_with_default =
            record(r#"{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}"#);
        let added_without = record(r#"{"name":"a","type":"int"},{"name":"b","type":"string"}"#);
        let promoted = record(r#"{"name":"a","type":"long"}"#);
        let none: &[String] = &[];
        assert!(can_read((&added_with_default, none), (&v1, none)).is_empty());
        assert!(!can_read((&added_without, none), (&v1, none)).is_empty());
        assert!(can_read((&v1, none), (&added_without, none)).is_empty());
        assert!(can_read((&promoted, none), (&v1, none)).is_empty());
        assert!(!can_read((&v1, none), (&promoted, none)).is_empty());
    }
}
