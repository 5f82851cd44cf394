//! The seams between Sluice and the world it runs in: sockets ([`net`]), blocking work and
//! dedicated threads ([`task`]), the disk's durability points ([`disk`]), the wall clock
//! ([`wall_ms`]) and randomness ([`random_u128`]).
//!
//! A server process uses the real world: each seam is a direct call to tokio, the OS or
//! `uuid`, after one check that no simulated world is installed (a single atomic load; the
//! calls behind it, a socket operation or a thread hand-off, cost thousands of times more).
//! The deterministic simulator (`crates/sluice-sim`) installs a [`World`] before it starts
//! any node: its sockets run on a simulated network, blocking work runs inline as a task of
//! the node's own (simulated) runtime (after the node's simulated disk latency), fsyncs
//! and writes are recorded or failed by the simulated disk, the wall clock follows
//! simulated time (with a per-node offset the simulator can jump), and randomness comes from
//! the run's seed.
//! Monotonic time needs no seam: Sluice reads it through `tokio::time::Instant`, which the
//! simulator's paused runtimes already control.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::OnceLock;

pub mod disk;
pub mod net;
pub mod task;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A simulated world: what the simulator provides in place of the OS.
pub trait World: Send + Sync + 'static {
    /// Connect to `addr` (`host:port`) on the simulated network.
    fn connect(&self, addr: String) -> BoxFuture<'static, io::Result<Box<dyn net::Io>>>;
    /// Listen on `addr` on the simulated network.
    fn bind(&self, addr: SocketAddr) -> BoxFuture<'static, io::Result<Box<dyn net::Accept>>>;
    /// Milliseconds since the Unix epoch on the calling node's clock.
    fn wall_ms(&self) -> i64;
    /// 128 random bits from the run's seed.
    fn random_u128(&self) -> u128;
    /// Whether the disk may do `op` (see [`disk`]): record an fsync, or fail it or a write.
    fn disk(&self, op: disk::DiskOp<'_>) -> io::Result<()> {
        let _ = op;
        Ok(())
    }
    /// How long blocking (disk) work of the calling node waits before it runs: a slow disk.
    fn disk_latency(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
    /// The calling node's machine boot: it changes when the machine restarts (a power
    /// loss), not when only the process does.
    fn boot_id(&self) -> Option<String> {
        None
    }
    /// Whether the simulator switched on a deliberately broken behaviour (to show that its
    /// checkers catch it).
    fn broken(&self, what: Broken) -> bool {
        let _ = what;
        false
    }
}

/// Deliberately broken behaviours, for the simulator only (a real world never has them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Broken {
    /// A leader's high watermark advances to its own log end without waiting for the ISR,
    /// so acks=all is answered before any follower has the records.
    HighWatermarkIgnoresIsr,
}

/// Whether a deliberately broken behaviour is on (never outside the simulator).
#[inline]
pub fn broken(what: Broken) -> bool {
    simulated().is_some_and(|w| w.broken(what))
}

static WORLD: OnceLock<Box<dyn World>> = OnceLock::new();

/// Install a simulated world for the rest of the process (the simulator does this once,
/// before any node starts). Fails if one is installed already.
pub fn install(world: Box<dyn World>) -> Result<(), Box<dyn World>> {
    WORLD.set(world)
}

/// The simulated world, if one is installed.
#[inline]
pub fn simulated() -> Option<&'static dyn World> {
    WORLD.get().map(|w| &**w)
}

/// Milliseconds since the Unix epoch.
#[inline]
pub fn wall_ms() -> i64 {
    match simulated() {
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64),
        Some(w) => w.wall_ms(),
    }
}

/// 128 random bits (a v4 UUID's worth of entropy, for ids that must not repeat).
#[inline]
pub fn random_u128() -> u128 {
    match simulated() {
        None => uuid::Uuid::new_v4().as_u128(),
        Some(w) => w.random_u128(),
    }
}

/// This machine's boot (Linux's `/proc/sys/kernel/random/boot_id`): the same for every
/// process until the machine restarts. What a process wrote and did not fsync survives the
/// process (it is in the page cache) but not the machine, so a broker that finds the boot
/// it last ran in knows that its files hold everything its last process wrote. None where
/// the system does not say.
pub fn boot_id() -> Option<String> {
    match simulated() {
        None => std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
        Some(w) => w.boot_id(),
    }
}

/// A random v4 UUID.
pub fn random_uuid() -> uuid::Uuid {
    uuid::Builder::from_random_bytes(random_u128().to_be_bytes()).into_uuid()
}
