//! [`RegistryState`] driven as the coordinator drives it: plan, write (encode), apply.

use crate::records::Record;
use crate::schema::{Compatibility, SchemaType};
use crate::state::{Mode, Planned, RegistryState, VersionSpec};

/// The `_schemas` log: every record written, as bytes.
#[derive(Default)]
struct Log(Vec<(Vec<u8>, Option<Vec<u8>>)>);

impl Log {
    fn write<T>(&mut self, state: &mut RegistryState, planned: Planned<T>) -> T {
        for Record { key, value } in planned.records {
            let k = key.encode();
            let v = value.map(|v| v.to_string().into_bytes());
            state.apply(&k, v.as_deref());
            self.0.push((k, v));
        }
        planned.answer
    }

    fn replay(&self) -> RegistryState {
        let mut s = RegistryState::default();
        for (k, v) in &self.0 {
            s.apply(k, v.as_deref());
        }
        s
    }
}

fn user(extra: &str) -> String {
    format!(r#"{{"type":"record","name":"User","fields":[{{"name":"a","type":"int"}}{extra}]}}"#)
}

fn register(
    state: &mut RegistryState,
    log: &mut Log,
    subject: &str,
    text: &str,
) -> Result<(i32, i32), crate::RegistryError> {
    let parsed = state.parse(SchemaType::Avro, text, Vec::new())?;
    let planned = state.plan_register(subject, &parsed, None, None)?;
    let r = log.write(state, planned);
    Ok((r.id, r.version))
}

#[test]
fn ids_are_shared_by_equal_schemas_and_versions_grow_per_subject() {
    let (mut s, mut log) = (RegistryState::default(), Log::default());
    assert_eq!(register(&mut s, &mut log, "a-value", &user("")), Ok((1, 1)));
    let before = log.0.len();
    let spaced = user("").replace(',', " , ");
    assert_eq!(register(&mut s, &mut log, "a-value", &spaced), Ok((1, 1)));
    assert_eq!(log.0.len(), before, "an existing version writes nothing");
    assert_eq!(register(&mut s, &mut log, "b-value", &user("")), Ok((1, 1)));
    let v2 = user(r#",{"name":"b","type":"string","default":""}"#);
    assert_eq!(register(&mut s, &mut log, "a-value", &v2), Ok((2, 2)));
    let bad = user(r#",{"name":"c","type":"string"}"#);
    let err = register(&mut s, &mut log, "a-value", &bad).unwrap_err();
    assert_eq!((err.status, err.code), (409, 409));
    let plan = s
        .plan_set_compatibility(Some("a-value"), Compatibility::None)
        .unwrap();
    log.write(&mut s, plan);
    assert_eq!(register(&mut s, &mut log, "a-value", &bad), Ok((3, 3)));
    assert_eq!(s.versions("a-value", false, false), Ok(vec![1, 2, 3]));
    assert_eq!(
        s.versions_by_id(1, false).unwrap(),
        vec![("a-value".to_string(), 1), ("b-value".to_string(), 1)]
    );
    let replayed = log.replay();
    assert_eq!(
        replayed.subjects("", false, false),
        s.subjects("", false, false)
    );
    assert_eq!(
        replayed.version("a-value", VersionSpec::Latest, false),
        s.version("a-value", VersionSpec::Latest, false)
    );
    assert_eq!(replayed.compatibility(Some("a-value")), Compatibility::None);
    assert_eq!(replayed.max_id(), 3);
}

#[test]
fn permanent_deletes_need_a_soft_delete_first_and_ids_are_never_reused() {
    let (mut s, mut log) = (RegistryState::default(), Log::default());
    register(&mut s, &mut log, "t-value", &user("")).unwrap();
    let err = s.plan_delete_subject("t-value", true).unwrap_err();
    assert_eq!(err.code, 40405);
    let plan = s.plan_delete_subject("t-value", false).unwrap();
    assert_eq!(log.write(&mut s, plan), vec![1]);
    assert!(s.subjects("", false, false).is_empty());
    assert_eq!(s.subjects("", true, false), vec!["t-value".to_string()]);
    assert_eq!(
        s.plan_delete_subject("t-value", false).unwrap_err().code,
        40404
    );
    assert!(
        s.schema_by_id(1).is_ok(),
        "a soft-deleted version's id still resolves"
    );
    assert_eq!(
        s.version("t-value", VersionSpec::Number(1), false)
            .unwrap_err()
            .code,
        40401
    );
    let plan = s.plan_delete_subject("t-value", true).unwrap();
    assert_eq!(log.write(&mut s, plan), vec![1]);
    assert_eq!(s.schema_by_id(1).unwrap_err().code, 40403);
    assert_eq!(s.versions("t-value", true, false).unwrap_err().code, 40401);
    assert_eq!(register(&mut s, &mut log, "t-value", &user("")), Ok((2, 1)));
    assert_eq!(log.replay().max_id(), 2);
}

#[test]
fn version_deletes_and_modes() {
    let (mut s, mut log) = (RegistryState::default(), Log::default());
    register(&mut s, &mut log, "m", &user("")).unwrap();
    let v2 = user(r#",{"name":"b","type":"long","default":0}"#);
    register(&mut s, &mut log, "m", &v2).unwrap();
    let e = s
        .plan_delete_version("m", VersionSpec::Number(2), true)
        .unwrap_err();
    assert_eq!(e.code, 40407);
    let plan = s
        .plan_delete_version("m", VersionSpec::Number(2), false)
        .unwrap();
    assert_eq!(log.write(&mut s, plan), 2);
    assert_eq!(
        s.version("m", VersionSpec::Latest, false).unwrap().version,
        1
    );
    assert_eq!(s.version("m", VersionSpec::Number(2), true).unwrap().id, 2);
    let plan = s.plan_set_mode(Some("m"), Mode::ReadOnly, false).unwrap();
    log.write(&mut s, plan);
    let e = register(&mut s, &mut log, "m", &user("")).unwrap_err();
    assert_eq!(e.code, 42205);
    assert!(register(&mut s, &mut log, "other", &user("")).is_ok());
    assert_eq!(
        s.plan_set_mode(None, Mode::Import, false).unwrap_err().code,
        42205
    );
    let plan = s.plan_delete_mode(Some("m")).unwrap();
    assert_eq!(log.write(&mut s, plan), Mode::ReadOnly);
    assert_eq!(s.subject_mode("m", false).unwrap_err().code, 40409);
    assert_eq!(log.replay().mode(Some("m")), Mode::ReadWrite);
}

#[test]
fn references_resolve_and_must_exist() {
    let (mut s, mut log) = (RegistryState::default(), Log::default());
    let address = r#"{"type":"record","name":"Address","namespace":"x","fields":[{"name":"city","type":"string"}]}"#;
    register(&mut s, &mut log, "address", address).unwrap();
    let refs = vec![crate::schema::Reference {
        name: "x.Address".into(),
        subject: "address".into(),
        version: 1,
    }];
    let person = r#"{"type":"record","name":"Person","namespace":"x","fields":[{"name":"home","type":"Address"}]}"#;
    let parsed = s.parse(SchemaType::Avro, person, refs.clone()).unwrap();
    let plan = s.plan_register("person", &parsed, None, None).unwrap();
    assert_eq!(log.write(&mut s, plan).id, 2);
    assert_eq!(s.referenced_by("address", 1), vec![2]);
    let plan = s.plan_delete_subject("address", false);
    assert_eq!(plan.unwrap_err().code, 42206);
    let mut missing = refs;
    missing[0].version = 7;
    assert_eq!(
        s.parse(SchemaType::Avro, person, missing).unwrap_err().code,
        42201
    );
}

#[test]
fn records_it_cannot_read_are_passed_over() {
    let mut s = RegistryState::default();
    s.apply(b"garbage", Some(b"{}"));
    s.apply(
        br#"{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}"#,
        Some(b"nope"),
    );
    s.apply(br#"{"keytype":"NOOP","magic":0}"#, None);
    assert!(s.subjects("", true, false).is_empty());
    assert_eq!(s.max_id(), 0);
}

#[test]
fn a_schema_with_references_is_checked_against_its_earlier_version() {
    let (mut s, mut log) = (RegistryState::default(), Log::default());
    let address = r#"{"type":"record","name":"Address","namespace":"x","fields":[{"name":"city","type":"string"}]}"#;
    register(&mut s, &mut log, "address", address).unwrap();
    let refs = vec![crate::schema::Reference {
        name: "x.Address".into(),
        subject: "address".into(),
        version: 1,
    }];
    let person = |extra: &str| {
        format!(
            r#"{{"type":"record","name":"Person","namespace":"x","fields":[{{"name":"home","type":"Address"}}{extra}]}}"#
        )
    };
    for (text, ok) in [
        (person(""), true),
        (person(r#",{"name":"age","type":"int","default":0}"#), true),
        (
            person(r#",{"name":"age","type":"int","default":0},{"name":"nick","type":"string"}"#),
            false,
        ),
    ] {
        let parsed = s.parse(SchemaType::Avro, &text, refs.clone()).unwrap();
        match s.plan_register("person", &parsed, None, None) {
            Ok(plan) => {
                assert!(ok, "{text} was taken");
                log.write(&mut s, plan);
            }
            Err(e) => assert!(!ok && e.status == 409, "{text}: {e:?}"),
        }
    }
    assert_eq!(s.versions("person", false, false), Ok(vec![1, 2]));
}
