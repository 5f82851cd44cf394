//! Clients other than librdkafka-through-Rust: Python confluent-kafka and kafka-python,
//! Debian's kcat (librdkafka 2.0), and the Java client 3.x and 4.x. They run as child
//! processes against a real node; `scripts/test` installs them first.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::*;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Run a command to completion; panic with its output unless it succeeds.
fn must_succeed(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{what}: cannot run ({e}); run scripts/test, which installs it")
    });
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn python_confluent_kafka() {
    let server = start(&[]);
    let script = repo_root().join("interop/python/confluent_kafka_roundtrip.py");
    let out = must_succeed(
        Command::new("python3").arg(script).arg(&server.bootstrap),
        "confluent-kafka",
    );
    assert!(out.contains("confluent-kafka OK"));
}

#[test]
fn python_kafka_python() {
    let server = start(&[]);
    let script = repo_root().join("interop/python/kafka_python_roundtrip.py");
    let out = must_succeed(
        Command::new("python3").arg(script).arg(&server.bootstrap),
        "kafka-python",
    );
    assert!(out.contains("kafka-python OK"));
}

#[test]
fn kcat_produces_consumes_and_queries_offsets() {
    let server = start(&[]);
    let b = server.bootstrap.as_str();
    let version = must_succeed(Command::new("kcat").arg("-V"), "kcat -V");
    println!("{version}");
    let mut child = Command::new("kcat")
        .args(["-b", b, "-P", "-t", "kc", "-K", ":", "-z", "snappy"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("kcat installed (scripts/test installs it)");
    {
        let stdin = child.stdin.as_mut().unwrap();
        for i in 0..1000 {
            writeln!(stdin, "key{i}:value{i}").unwrap();
        }
    }
    assert!(child.wait().unwrap().success());
    let out = must_succeed(
        Command::new("kcat").args([
            "-b",
            b,
            "-C",
            "-t",
            "kc",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%k=%s %o\n",
        ]),
        "kcat consume",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1000, "{out}");
    assert_eq!(lines[0], "key0=value0 0");
    assert_eq!(lines[999], "key999=value999 999");
    let meta = must_succeed(
        Command::new("kcat").args(["-b", b, "-L", "-t", "kc"]),
        "kcat -L",
    );
    assert!(meta.contains("topic \"kc\" with 1 partitions"), "{meta}");
    // Offsets by timestamp: far past -> 0, far future -> end (-1).
    let q = must_succeed(
        Command::new("kcat").args(["-b", b, "-Q", "-t", "kc:0:1"]),
        "kcat -Q",
    );
    assert!(q.contains("offset 0"), "{q}");
}

fn java_client(profile: &str, version: &str) {
    let server = start(&[]);
    let dir = repo_root().join("interop/java");
    must_succeed(
        Command::new("mvn")
            .args(["-q", "-B", &format!("-P{profile}"), "package"])
            .current_dir(&dir),
        "mvn package",
    );
    let cp = format!("target-{version}/classes:target-{version}/lib/*");
    let out = must_succeed(
        Command::new("java")
            .args(["-cp", &cp, "interop.Main", &server.bootstrap, "5000"])
            .current_dir(&dir),
        &format!("java client {version}"),
    );
    assert!(out.contains(" 0 failed"), "{out}");
}

#[test]
fn java_client_3x() {
    java_client("kafka3", "3.9.2");
}

#[test]
fn java_client_4x() {
    java_client("kafka4", "4.4.0");
}
