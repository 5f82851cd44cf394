//! moto's S3-compatible server (`pip install 'moto[server]'`), started by a test on a port of
//! its own: the real S3 protocol for the object-store tests, never a fake of our own.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Wait (polling, up to `secs`) until `done` holds.
fn wait_until(secs: u64, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// moto's S3 server, on a port of its own, for as long as this lives.
pub struct Moto {
    child: Child,
    port: u16,
}

impl Moto {
    pub fn start_on(port: u16) -> Moto {
        let child = Command::new("python3")
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto's server (pip install 'moto[server]')");
        let m = Moto { child, port };
        wait_until(60, "moto listens", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        m
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Broker overrides that make `bucket` (under `cluster/`) the object store of tiered
    /// storage and diskless topics, retried once, 3 s a request.
    pub fn store_overrides(&self, bucket: &str) -> Vec<String> {
        vec![
            format!("remote.log.storage.uri=s3://{bucket}/cluster"),
            format!("remote.log.storage.s3.endpoint={}", self.endpoint()),
            "remote.log.storage.s3.region=us-east-1".into(),
            "remote.log.storage.s3.access.key.id=test".into(),
            "remote.log.storage.s3.secret.access.key=test".into(),
            "remote.log.storage.s3.path.style.access=true".into(),
            "remote.log.storage.retries=1".into(),
            "remote.log.storage.request.timeout.ms=3000".into(),
        ]
    }

    /// An HTTP request to the server: (status, body).
    pub fn http(&self, method: &str, path: &str) -> (u16, String) {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )
        .unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (status, body.to_string())
    }

    pub fn create_bucket(&self, bucket: &str) {
        assert_eq!(self.http("PUT", &format!("/{bucket}")).0, 200);
    }

    /// Keys of the bucket's objects (the first 1,000).
    pub fn keys(&self, bucket: &str) -> Vec<String> {
        let (status, body) = self.http("GET", &format!("/{bucket}?list-type=2"));
        assert_eq!(status, 200, "{body}");
        body.split("<Key>")
            .skip(1)
            .filter_map(|k| k.split_once("</Key>").map(|(k, _)| k.to_string()))
            .collect()
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.stop();
    }
}
