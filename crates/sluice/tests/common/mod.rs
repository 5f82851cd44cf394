//! Helpers shared by the integration tests: a real `sluice` process and librdkafka clients.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
pub use sluice_testkit::TestServer;

pub fn sluice_bin() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_sluice"))
}

/// A loopback port free right now (for a listener that must be known before it starts).
pub fn free_port() -> u16 {
    sluice_testkit::free_port()
}

pub fn start(overrides: &[&str]) -> TestServer {
    TestServer::start(sluice_bin(), overrides)
}

/// Records what librdkafka says about each delivery.
#[derive(Default)]
pub struct Deliveries {
    /// (key, partition, offset) of each acknowledged record.
    pub acked: Mutex<Vec<(Vec<u8>, i32, i64)>>,
    pub failed: AtomicUsize,
    pub last_error: Mutex<Option<String>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(m) => self.acked.lock().unwrap().push((
                m.key().unwrap_or_default().to_vec(),
                m.partition(),
                m.offset(),
            )),
            Err((e, _)) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                *self.last_error.lock().unwrap() = Some(e.to_string());
            }
        }
    }
}

pub fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> BaseProducer<Deliveries> {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", bootstrap)
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000");
    for (k, v) in extra {
        cfg.set(*k, *v);
    }
    cfg.create_with_context(Deliveries::default())
        .expect("producer")
}

/// Send `records` (key, value, timestamp) and wait until all are acknowledged or failed.
pub fn produce_all(
    p: &BaseProducer<Deliveries>,
    topic: &str,
    records: &[(Vec<u8>, Vec<u8>, Option<i64>)],
) {
    for (k, v, ts) in records {
        let mut rec = BaseRecord::to(topic).key(k).payload(v);
        if let Some(ts) = ts {
            rec = rec.timestamp(*ts);
        }
        loop {
            match p.send(rec) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    p.poll(Duration::from_millis(10));
                    rec = r;
                }
                Err((e, _)) => panic!("send failed: {e}"),
            }
        }
    }
    p.flush(Duration::from_secs(120)).expect("flush");
    let ctx = p.context();
    assert_eq!(
        ctx.failed.load(Ordering::Relaxed),
        0,
        "delivery errors: {:?}",
        ctx.last_error.lock().unwrap()
    );
}

pub fn consumer(bootstrap: &str, extra: &[(&str, &str)]) -> BaseConsumer {
    let mut cfg = ClientConfig::new();
    // librdkafka's assign() needs a group id even when no group is joined.
    cfg.set("bootstrap.servers", bootstrap)
        .set("group.id", "sluice-tests")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "100");
    for (k, v) in extra {
        cfg.set(*k, *v);
    }
    cfg.create().expect("consumer")
}

/// A consumed record: (partition, offset, key, value, timestamp).
pub type Consumed = (i32, i64, Option<Vec<u8>>, Option<Vec<u8>>, Option<i64>);

/// Read `count` records from the beginning of every partition of `topic`.
pub fn consume_all(bootstrap: &str, topic: &str, partitions: i32, count: usize) -> Vec<Consumed> {
    let c = consumer(bootstrap, &[]);
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out = Vec::with_capacity(count);
    let deadline = Instant::now() + Duration::from_secs(120);
    while out.len() < count {
        assert!(
            Instant::now() < deadline,
            "consumed only {} of {count}",
            out.len()
        );
        if let Some(m) = c.poll(Duration::from_millis(500)) {
            let m = m.expect("consume error");
            out.push((
                m.partition(),
                m.offset(),
                m.key().map(<[u8]>::to_vec),
                m.payload().map(<[u8]>::to_vec),
                m.timestamp().to_millis(),
            ));
        }
    }
    out
}

pub fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin")
}

pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Create a topic through the Admin API and assert it succeeded.
pub fn create_topic(bootstrap: &str, name: &str, partitions: i32, configs: &[(&str, &str)]) {
    let a = admin(bootstrap);
    let mut t = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        t = t.set(k, v);
    }
    let res = block_on(a.create_topics([&t], &AdminOptions::new())).expect("create_topics");
    for r in res {
        r.unwrap_or_else(|(t, e)| panic!("create {t}: {e:?}"));
    }
}

/// Per-partition record counts.
pub fn by_partition(records: &[Consumed]) -> HashMap<i32, usize> {
    let mut m = HashMap::new();
    for r in records {
        *m.entry(r.0).or_default() += 1;
    }
    m
}

/// Run `sluice <tool> --bootstrap-server <bootstrap> <args>`, which must succeed; its stdout.
pub fn sluice_tool(tool: &str, bootstrap: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(sluice_bin())
        .args([tool, "--bootstrap-server", bootstrap])
        .args(args)
        .output()
        .expect("run sluice");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "sluice {tool} {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// GET `path`: (status code, body).
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    http_request(addr, "GET", path, "")
}

/// `method` `path` with a JSON `body`: (status code, body).
pub fn http_request(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    http_request_with(addr, method, path, body, "")
}

/// `method` `path` with a JSON `body` and `headers` (each ending in CRLF): (status, body).
pub fn http_request_with(
    addr: &str,
    method: &str,
    path: &str,
    body: &str,
    headers: &str,
) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the HTTP listener");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    std::io::Write::write_fmt(
        &mut s,
        format_args!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
    .unwrap();
    let mut raw = String::new();
    std::io::Read::read_to_string(&mut s, &mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n.min(rest.len())]);
        body = rest.get(n + 2..).unwrap_or("");
    }
    out
}

/// The value of sample `name` (exactly as written, labels included) in a `/metrics` scrape.
pub fn metric(scrape: &str, name: &str) -> Option<f64> {
    scrape.lines().find_map(|l| {
        let (k, v) = l.rsplit_once(' ')?;
        (k == name).then(|| v.parse().ok()).flatten()
    })
}
