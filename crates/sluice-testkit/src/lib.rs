//! Test harness: runs the real `sluice` binary as a child process on a free port with its
//! own data directory, waits for it to report where it listens (no sleeping), and stops it
//! cleanly (SIGTERM) or brutally (SIGKILL).
//!
//! # Layout
//! - [`TestServer`]: one node process and its captured log.
//! - [`combined_nodes`]: the configs of a three-node combined cluster.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// A loopback port that is free right now, for a listener whose address must be known
/// before it starts (controller voters). Picked below the kernel's ephemeral range, so the
/// outgoing connections of clients and nodes (which take ports from that range) cannot
/// grab it between this check and the node binding it.
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let low_ephemeral: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    let (from, span) = (10_000u16, low_ephemeral.saturating_sub(10_000).max(1));
    if NEXT.load(Ordering::Relaxed) == 0 {
        // A random start per process, so test binaries running at once rarely meet.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let _ = NEXT.compare_exchange(
            0,
            (h.finish() % span as u64) as u16 + 1,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
    for _ in 0..span {
        let port = from + NEXT.fetch_add(1, Ordering::Relaxed) % span;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// The overrides of three combined broker + controller nodes (ids 1-3) on loopback ports
/// picked now, each with `extra` added: one entry per node, for [`TestServer::start_all`].
pub fn combined_nodes(extra: &[&str]) -> Vec<Vec<String>> {
    three_nodes(extra, |controllers| {
        let voters: Vec<String> = controllers
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{}@127.0.0.1:{c}", i + 1))
            .collect();
        format!("controller.quorum.voters={}", voters.join(","))
    })
}

/// Three combined nodes (ids 1-3) of a dynamic quorum (KIP-853): no static voters, each
/// finds the quorum through `controller.quorum.bootstrap.servers` (all three controller
/// listeners). Start them with [`TestServer::start_all_formatted`].
pub fn dynamic_nodes(extra: &[&str]) -> Vec<Vec<String>> {
    three_nodes(extra, |controllers| {
        let servers: Vec<String> = controllers
            .iter()
            .map(|c| format!("127.0.0.1:{c}"))
            .collect();
        format!("controller.quorum.bootstrap.servers={}", servers.join(","))
    })
}

/// Three combined nodes (ids 1-3) on loopback ports picked now; `quorum` gives the line
/// that tells them where the controllers are (their controller ports, by node).
fn three_nodes(extra: &[&str], quorum: impl Fn(&[u16]) -> String) -> Vec<Vec<String>> {
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let controllers: Vec<u16> = ports.iter().map(|(_, c)| *c).collect();
    let quorum = quorum(&controllers);
    ports
        .iter()
        .enumerate()
        .map(|(i, (p, c))| {
            let mut o = vec![
                "process.roles=broker,controller".to_string(),
                format!("node.id={}", i + 1),
                format!("listeners=PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}"),
                "controller.listener.names=CONTROLLER".into(),
                quorum.clone(),
            ];
            o.extend(extra.iter().map(|s| s.to_string()));
            o
        })
        .collect()
}

/// How long a node may take to start listening before the test fails.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

pub struct TestServer {
    binary: PathBuf,
    child: Option<Child>,
    /// `host:port` of the PLAINTEXT listener.
    pub bootstrap: String,
    data: Arc<tempfile::TempDir>,
    /// Everything printed so far, and a signal for each new line.
    log: Arc<(Mutex<String>, Condvar)>,
    overrides: Vec<String>,
}

impl TestServer {
    /// Start a node with a fresh data directory and `overrides` (`key=value`).
    pub fn start(binary: &Path, overrides: &[&str]) -> TestServer {
        let data = Arc::new(tempfile::tempdir().expect("create a temp dir"));
        Self::launch(
            binary,
            data,
            overrides.iter().map(|s| s.to_string()).collect(),
        )
    }

    /// Start several nodes at once (a quorum's members wait for each other); each gets a
    /// fresh data directory and its own overrides.
    pub fn start_all(binary: &Path, nodes: &[Vec<String>]) -> Vec<TestServer> {
        std::thread::scope(|s| {
            let handles: Vec<_> = nodes
                .iter()
                .map(|o| {
                    s.spawn(move || {
                        let data = Arc::new(tempfile::tempdir().expect("create a temp dir"));
                        Self::launch(binary, data, o.clone())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("node start"))
                .collect()
        })
    }

    /// As [`Self::start_all`], after `sluice storage format` with each node's overrides and
    /// its own format arguments (e.g. `--cluster-id`, `--standalone`).
    pub fn start_all_formatted(
        binary: &Path,
        nodes: &[Vec<String>],
        format: &[Vec<String>],
    ) -> Vec<TestServer> {
        let dirs: Vec<Arc<tempfile::TempDir>> = nodes
            .iter()
            .zip(format)
            .map(|(o, args)| {
                let data = Arc::new(tempfile::tempdir().expect("create a temp dir"));
                let mut cmd = Command::new(binary);
                cmd.args(["storage", "format", "--override"])
                    .arg(format!("log.dirs={}", data.path().join("data").display()));
                for o in o {
                    cmd.arg("--override").arg(o);
                }
                let out = cmd.args(args).output().expect("run sluice storage format");
                assert!(
                    out.status.success(),
                    "sluice storage format: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                data
            })
            .collect();
        std::thread::scope(|s| {
            let handles: Vec<_> = nodes
                .iter()
                .zip(dirs)
                .map(|(o, data)| s.spawn(move || Self::launch(binary, data, o.clone())))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("node start"))
                .collect()
        })
    }

    /// Restart several stopped or killed nodes at once, on their data directories.
    pub fn restart_all(nodes: &mut [&mut TestServer]) {
        std::thread::scope(|s| {
            let handles: Vec<_> = nodes
                .iter()
                .map(|n| {
                    let (binary, data, o) =
                        (n.binary.clone(), Arc::clone(&n.data), n.overrides.clone());
                    s.spawn(move || Self::launch(&binary, data, o))
                })
                .collect();
            for (n, h) in nodes.iter_mut().zip(handles) {
                **n = h.join().expect("node restart");
            }
        });
    }

    fn launch(binary: &Path, data: Arc<tempfile::TempDir>, overrides: Vec<String>) -> TestServer {
        let mut cmd = Command::new(binary);
        cmd.arg("server")
            .arg("--override")
            .arg(format!("log.dirs={}", data.path().join("data").display()));
        if !overrides.iter().any(|o| o.starts_with("listeners=")) {
            cmd.arg("--override")
                .arg("listeners=PLAINTEXT://127.0.0.1:0");
        }
        // Many nodes run side by side: the admin HTTP listener takes any free port.
        if !overrides
            .iter()
            .any(|o| o.starts_with("admin.http.listener="))
        {
            cmd.arg("--override").arg("admin.http.listener=127.0.0.1:0");
        }
        if !overrides
            .iter()
            .any(|o| o.starts_with("schema.registry.listener="))
        {
            cmd.arg("--override")
                .arg("schema.registry.listener=127.0.0.1:0");
        }
        for o in &overrides {
            cmd.arg("--override").arg(o);
        }
        cmd.env(
            "RUST_LOG",
            std::env::var("SLUICE_TEST_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn the sluice binary");
        let log = Arc::new((Mutex::new(String::new()), Condvar::new()));
        let (tx, rx) = mpsc::channel::<String>();
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let log = Arc::clone(&log);
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    // Into the log before the start is reported, so `listener()` finds it.
                    {
                        let mut l = log
                            .0
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        l.push_str(&line);
                        l.push('\n');
                    }
                    log.1.notify_all();
                    if let Some(list) = line.split(" listening on ").nth(1) {
                        // The PLAINTEXT listener, else the first (a controller-only node).
                        let list: String =
                            list.chars().take_while(|c| !c.is_whitespace()).collect();
                        let pick = list
                            .split(',')
                            .find(|l| l.starts_with("PLAINTEXT://"))
                            .or_else(|| list.split(',').next())
                            .unwrap_or_default();
                        let addr = pick.split("://").nth(1).unwrap_or(pick).to_string();
                        let _ = tx.send(addr);
                    }
                }
            });
        }
        drop(tx);
        let bootstrap = match rx.recv_timeout(START_TIMEOUT) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let l = log
                    .0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                panic!("sluice did not start listening within {START_TIMEOUT:?}; log:\n{l}");
            }
        };
        TestServer {
            binary: binary.to_path_buf(),
            child: Some(child),
            bootstrap,
            data,
            log,
            overrides,
        }
    }

    /// The node's log directory.
    pub fn data_dir(&self) -> PathBuf {
        self.data.path().join("data")
    }

    /// `host:port` of listener `name` as the node reported it when it started listening.
    pub fn listener(&self, name: &str) -> Option<String> {
        let log = self.log();
        let list = log.lines().find_map(|l| l.split(" listening on ").nth(1))?;
        list.split(|c: char| c == ',' || c.is_whitespace())
            .find_map(|l| l.strip_prefix(name)?.strip_prefix("://").map(str::to_owned))
    }

    /// `host:port` of the admin HTTP listener, as the node reported it when it started.
    pub fn admin(&self) -> Option<String> {
        let log = self.log();
        let line = log.lines().find(|l| l.contains(" listening on "))?;
        let rest = line.split("admin http://").nth(1)?;
        Some(rest.split(';').next()?.to_string())
    }

    /// The URL (`http://host:port` or `https://host:port`) of the schema registry listener,
    /// as the node reported it when it started.
    pub fn registry(&self) -> Option<String> {
        let log = self.log();
        let line = log.lines().find(|l| l.contains(" listening on "))?;
        let rest = line.split("schema registry ").nth(1)?;
        Some(rest.split(';').next()?.to_string())
    }

    /// Everything the process printed so far.
    pub fn log(&self) -> String {
        self.log
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Wait (at most `timeout`) until the log satisfies `done`, woken by each new line;
    /// false on timeout.
    pub fn wait_for_log(&self, timeout: Duration, done: impl Fn(&str) -> bool) -> bool {
        let (lock, lines) = &*self.log;
        let log = lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let waited = lines.wait_timeout_while(log, timeout, |l| !done(l));
        let (_log, result) = waited.unwrap_or_else(std::sync::PoisonError::into_inner);
        !result.timed_out()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// SIGTERM and wait for the exit status (a clean shutdown).
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("server is running");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        child.wait().expect("wait for sluice")
    }

    /// Wait for a process that was already signalled to exit.
    pub fn stop_after_signal(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("server is running");
        child.wait().expect("wait for sluice")
    }

    /// SIGKILL: the process dies mid-whatever, like a crash.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start again on the same data directory and the same port, so connected clients can
    /// reconnect (as to a real broker that restarted).
    pub fn restart_same_port(&mut self) {
        let port = self.bootstrap.rsplit(':').next().unwrap_or("0").to_string();
        self.restart_with("listeners", &format!("PLAINTEXT://127.0.0.1:{port}"));
    }

    /// Start again on the same data directory with `key` set to `value` instead (e.g. a node
    /// whose listeners moved).
    pub fn restart_with(&mut self, key: &str, value: &str) {
        if self.child.is_some() {
            self.stop();
        }
        let prefix = format!("{key}=");
        let mut overrides: Vec<String> = self
            .overrides
            .iter()
            .filter(|o| !o.starts_with(&prefix))
            .cloned()
            .collect();
        overrides.push(format!("{prefix}{value}"));
        let next = Self::launch(&self.binary, Arc::clone(&self.data), overrides);
        *self = next;
    }

    /// Start again on the same data directory (a new port unless the overrides fix it).
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.stop();
        }
        let next = Self::launch(&self.binary, Arc::clone(&self.data), self.overrides.clone());
        *self = next;
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let pid = self.pid();
        self.kill();
        // For chasing a failure after the fact: every node's output, one file per process.
        if let Some(dir) = std::env::var_os("SLUICE_TEST_LOG_DIR") {
            let port = self.bootstrap.rsplit(':').next().unwrap_or("0");
            let path = Path::new(&dir).join(format!("{port}-{pid}.log"));
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(path, self.log());
        }
    }
}
