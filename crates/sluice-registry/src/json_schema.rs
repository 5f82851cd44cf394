//! JSON Schema: parse (a schema is a JSON object or a boolean) and a compatibility check
//! that follows the rules Confluent's registry applies with its default STRICT policy
//! (`json-schema-provider`'s `SchemaDiff.COMPATIBLE_CHANGES`) for the keywords most schemas
//! use: `type`, `properties`, `required`, `additionalProperties`, `enum`, `items`, the
//! length, size and range bounds, `pattern` and `const`. A difference in any other keyword
//! (`oneOf`, `anyOf`, `allOf`, `not`, `$ref`, `dependencies`, ...) is reported as
//! incompatible unless the two are equal: stricter than Confluent, never looser.

use serde_json::{Map, Value};

use crate::error::RegistryError;

/// Parse `text`; the stored form is its compact JSON.
pub fn parse(text: &str) -> Result<String, RegistryError> {
    let v: Value = serde_json::from_str(text).map_err(RegistryError::invalid_schema)?;
    if !(v.is_object() || v.is_boolean()) {
        return Err(RegistryError::invalid_schema(
            "a JSON schema is an object or a boolean",
        ));
    }
    if let Some(t) = v.get("type") {
        let ok = match t {
            Value::String(s) => TYPES.contains(&s.as_str()),
            Value::Array(ts) => ts
                .iter()
                .all(|t| t.as_str().is_some_and(|s| TYPES.contains(&s))),
            _ => false,
        };
        if !ok {
            return Err(RegistryError::invalid_schema(format!("unknown type {t}")));
        }
    }
    Ok(v.to_string())
}

const TYPES: [&str; 7] = [
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// Why a document valid under `writer` may be invalid under `reader` (empty when none).
pub fn can_read(reader: &str, writer: &str) -> Vec<String> {
    let (Ok(r), Ok(w)) = (
        serde_json::from_str::<Value>(reader),
        serde_json::from_str::<Value>(writer),
    ) else {
        return vec!["cannot parse".into()];
    };
    let mut problems = Vec::new();
    check(&r, &w, "#", &mut problems);
    problems
}

fn check(reader: &Value, writer: &Value, path: &str, out: &mut Vec<String>) {
    let (r, w) = match (reader, writer) {
        (Value::Bool(true), _) | (_, Value::Bool(false)) => return,
        (Value::Object(r), _) if r.is_empty() => return,
        (Value::Bool(false), _) => return out.push(format!("{path}: SCHEMA_NARROWED")),
        (Value::Object(r), Value::Bool(true)) => return open_writer(r, path, out),
        (Value::Object(r), Value::Object(w)) => (r, w),
        _ => return out.push(format!("{path}: TYPE_CHANGED")),
    };
    check_types(r, w, path, out);
    check_bounds(r, w, path, out);
    check_enum(r, w, path, out);
    check_object(r, w, path, out);
    if let Some(ri) = r.get("items") {
        let wi = w.get("items").unwrap_or(&Value::Bool(true));
        check(ri, wi, &format!("{path}/items"), out);
    }
    for key in OTHER_KEYWORDS {
        if r.get(key) != w.get(key) && r.get(key).is_some() {
            out.push(format!("{path}: {key} changed"));
        }
    }
}

/// Keywords compared as a whole.
const OTHER_KEYWORDS: [&str; 9] = [
    "oneOf",
    "anyOf",
    "allOf",
    "not",
    "$ref",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "const",
];

/// A writer that allows anything: only a reader that constrains nothing can read it.
fn open_writer(r: &Map<String, Value>, path: &str, out: &mut Vec<String>) {
    if r.keys().any(|k| !ANNOTATIONS.contains(&k.as_str())) {
        out.push(format!("{path}: SCHEMA_NARROWED"));
    }
}

const ANNOTATIONS: [&str; 7] = [
    "$schema",
    "$id",
    "id",
    "title",
    "description",
    "default",
    "examples",
];

fn types(s: &Map<String, Value>) -> Option<Vec<&str>> {
    match s.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(ts) => Some(ts.iter().filter_map(Value::as_str).collect()),
        _ => Some(Vec::new()),
    }
}

fn check_types(r: &Map<String, Value>, w: &Map<String, Value>, path: &str, out: &mut Vec<String>) {
    let Some(rt) = types(r) else { return };
    let Some(wt) = types(w) else {
        return out.push(format!("{path}: TYPE_NARROWED"));
    };
    for t in wt {
        let covered = rt.contains(&t) || (t == "integer" && rt.contains(&"number"));
        if !covered {
            out.push(format!("{path}: TYPE_NARROWED ({t} no longer allowed)"));
        }
    }
}

/// Upper bounds may only grow, lower bounds only shrink, `pattern` may only go.
fn check_bounds(r: &Map<String, Value>, w: &Map<String, Value>, path: &str, out: &mut Vec<String>) {
    let num = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_f64);
    for key in [
        "maxLength",
        "maxItems",
        "maxProperties",
        "maximum",
        "exclusiveMaximum",
    ] {
        if let Some(rv) = num(r, key) {
            if num(w, key).is_none_or(|wv| rv < wv) {
                out.push(format!("{path}: {key} added or decreased"));
            }
        }
    }
    for key in [
        "minLength",
        "minItems",
        "minProperties",
        "minimum",
        "exclusiveMinimum",
    ] {
        if let Some(rv) = num(r, key) {
            if num(w, key).is_none_or(|wv| rv > wv) {
                out.push(format!("{path}: {key} added or increased"));
            }
        }
    }
    if let Some(rm) = num(r, "multipleOf") {
        let ok = num(w, "multipleOf").is_some_and(|wm| (wm / rm).fract() == 0.0);
        if !ok {
            out.push(format!("{path}: multipleOf added or changed"));
        }
    }
    if r.get("pattern").is_some() && r.get("pattern") != w.get("pattern") {
        out.push(format!("{path}: pattern added or changed"));
    }
    if r.get("uniqueItems") == Some(&Value::Bool(true))
        && w.get("uniqueItems") != Some(&Value::Bool(true))
    {
        out.push(format!("{path}: uniqueItems added"));
    }
}

fn check_enum(r: &Map<String, Value>, w: &Map<String, Value>, path: &str, out: &mut Vec<String>) {
    let Some(Value::Array(re)) = r.get("enum") else {
        return;
    };
    match w.get("enum") {
        Some(Value::Array(we)) if we.iter().all(|v| re.contains(v)) => {}
        _ => out.push(format!("{path}: ENUM_ARRAY_NARROWED")),
    }
}

/// Properties: matched by name; what each model lets through decides the rest.
fn check_object(r: &Map<String, Value>, w: &Map<String, Value>, path: &str, out: &mut Vec<String>) {
    let empty = Map::new();
    let props = |m: &'_ Map<String, Value>| -> Map<String, Value> {
        m.get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty)
            .clone()
    };
    let (rp, wp) = (props(r), props(w));
    let r_additional = r.get("additionalProperties").unwrap_or(&Value::Bool(true));
    let w_additional = w.get("additionalProperties").unwrap_or(&Value::Bool(true));
    let w_closed = w_additional == &Value::Bool(false);
    for (name, ws) in &wp {
        let at = format!("{path}/properties/{name}");
        match rp.get(name) {
            Some(rs) => check(rs, ws, &at, out),
            None => check(r_additional, ws, &at, out),
        }
    }
    for (name, rs) in &rp {
        if wp.contains_key(name) || w_closed {
            continue;
        }
        // The writer let any value through under this name; the reader now constrains it.
        let at = format!("{path}/properties/{name}");
        check(rs, w_additional, &at, out);
    }
    if !(r_additional == &Value::Bool(true) || r_additional.as_object().is_some_and(Map::is_empty))
    {
        check(
            r_additional,
            w_additional,
            &format!("{path}/additionalProperties"),
            out,
        );
    }
    let required = |m: &Map<String, Value>| -> Vec<String> {
        m.get("required")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let wr = required(w);
    for name in required(r) {
        let has_default = rp.get(&name).and_then(|s| s.get("default")).is_some();
        if !wr.contains(&name) && !has_default {
            out.push(format!("{path}: REQUIRED_ATTRIBUTE_ADDED ({name})"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compatible(reader: &str, writer: &str) -> bool {
        can_read(reader, writer).is_empty()
    }

    #[test]
    fn parse_takes_objects_and_booleans_only() {
        assert_eq!(
            parse(r#"{ "type" : "string" }"#).unwrap(),
            r#"{"type":"string"}"#
        );
        assert_eq!(parse("true").unwrap(), "true");
        for bad in ["[1]", "\"string\"", "{", r#"{"type":"strnig"}"#] {
            assert_eq!(parse(bad).unwrap_err().code, 42201, "{bad}");
        }
    }

    #[test]
    fn closed_models_evolve_by_optional_properties_open_ones_by_removal() {
        let closed_v1 = r#"{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false}"#;
        let closed_v2 = r#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"additionalProperties":false}"#;
        let closed_v2_required = r#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"],"additionalProperties":false}"#;
        assert!(compatible(closed_v2, closed_v1));
        assert!(!compatible(closed_v2_required, closed_v1));
        let open_v1 =
            r#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}}}"#;
        let open_v2 = r#"{"type":"object","properties":{"a":{"type":"integer"}}}"#;
        assert!(compatible(open_v2, open_v1), "removing from an open model");
        assert!(
            !compatible(open_v1, open_v2),
            "adding to an open model (STRICT)"
        );
    }

    #[test]
    fn types_may_widen_and_bounds_may_loosen_not_the_reverse() {
        let int = r#"{"type":"integer","maximum":10}"#;
        let num = r#"{"type":["number","null"],"maximum":20}"#;
        assert!(compatible(num, int));
        assert!(!compatible(int, num));
        assert!(compatible(r#"{"enum":["a","b"]}"#, r#"{"enum":["a"]}"#));
        assert!(!compatible(r#"{"enum":["a"]}"#, r#"{"enum":["a","b"]}"#));
        assert!(!compatible(
            r#"{"type":"string","pattern":"^x"}"#,
            r#"{"type":"string"}"#
        ));
        assert!(compatible(
            r#"{"type":"array","items":{"type":"number"}}"#,
            r#"{"type":"array","items":{"type":"integer"}}"#
        ));
    }
}
