//! The seeded fuzzing loop: each target's kept corpus and seeds first, as they are, then
//! mutations of them drawn from one seed, until the budget is spent. A failing input is
//! written out and reported with the seed and input number that reproduce it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::meter::{measure, Usage};
use crate::mutate::mutate;
use crate::rng::Rng;
use crate::Target;

/// How long one input may run before it counts as a hang.
pub const HANG: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct Budget {
    pub seed: u64,
    /// Stop after this long (mutations only; the corpus and seeds always run whole)...
    pub time: Duration,
    /// ...or after this many mutated inputs, whichever comes first.
    pub inputs: u64,
}

#[derive(Debug, Default)]
pub struct Report {
    /// Corpus files and seeds run as they are.
    pub starting_inputs: usize,
    /// Mutated inputs run.
    pub mutated_inputs: u64,
    pub elapsed: Duration,
    /// The largest peak any input held, and the most any input reserved (uncommitted).
    pub max_peak_bytes: usize,
    pub max_reserved_bytes: usize,
}

#[derive(Debug)]
pub struct Failure {
    pub target: &'static str,
    pub seed: u64,
    /// Which mutated input (None: a corpus file or seed as it is).
    pub input_number: Option<u64>,
    pub what: String,
    pub saved_to: Option<PathBuf>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fuzz target {}: {}", self.target, self.what)?;
        match self.input_number {
            Some(n) => write!(
                f,
                "\n  mutated input {n} of seed {s}; replay with SLUICE_FUZZ_SEED={s} SLUICE_FUZZ_TARGET={t}",
                s = self.seed,
                t = self.target
            )?,
            None => write!(f, "\n  a starting input (corpus or seed), as it is")?,
        }
        if let Some(p) = &self.saved_to {
            write!(
                f,
                "\n  input saved to {} (keep it in the corpus once fixed)",
                p.display()
            )?;
        }
        Ok(())
    }
}

/// The kept corpus of a target: `<dir>/<target>/*`, sorted by name.
pub fn corpus(dir: &Path, target: &str) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir.join(target)) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| std::fs::read(p).ok())
        .collect()
}

/// Watches the input in flight; past [`HANG`], saves it and aborts the process (a hung
/// decoder cannot be stopped from inside).
struct Watchdog {
    started_ms: Arc<AtomicU64>,
    current: Arc<Mutex<Vec<u8>>>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn start(target: &'static str, seed: u64, out_dir: PathBuf) -> Self {
        let started_ms = Arc::new(AtomicU64::new(u64::MAX));
        let current = Arc::new(Mutex::new(Vec::new()));
        let done = Arc::new(AtomicBool::new(false));
        let origin = Instant::now();
        let thread = {
            let (started_ms, current, done) = (
                Arc::clone(&started_ms),
                Arc::clone(&current),
                Arc::clone(&done),
            );
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    let since = started_ms.load(Ordering::Relaxed);
                    let now = origin.elapsed().as_millis() as u64;
                    if since != u64::MAX && now.saturating_sub(since) > HANG.as_millis() as u64 {
                        let input = current.lock().map(|c| c.clone()).unwrap_or_default();
                        let path = save(&out_dir, target, seed, "hang", &input);
                        eprintln!(
                            "fuzz target {target}: an input ran for more than {HANG:?} (seed {seed}); saved to {path:?}"
                        );
                        std::process::abort();
                    }
                }
            })
        };
        Self {
            started_ms,
            current,
            done,
            thread: Some(thread),
        }
    }

    fn begin(&self, input: &[u8], origin: Instant) {
        if let Ok(mut c) = self.current.lock() {
            c.clear();
            c.extend_from_slice(input);
        }
        self.started_ms
            .store(origin.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn end(&self) {
        self.started_ms.store(u64::MAX, Ordering::Relaxed);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn save(dir: &Path, target: &str, seed: u64, tag: &str, input: &[u8]) -> Option<PathBuf> {
    std::fs::create_dir_all(dir).ok()?;
    let path = dir.join(format!("{target}-{seed}-{tag}.bin"));
    std::fs::write(&path, input).ok()?;
    Some(path)
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_string()
    }
}

/// Run one input: None if it passed, else what went wrong.
fn run_one(target: &Target, input: &[u8], report: &mut Report) -> Option<String> {
    let (result, usage): (_, Usage) =
        measure(|| catch_unwind(AssertUnwindSafe(|| (target.run)(input))));
    if let Err(payload) = result {
        return Some(format!("panicked: {}", panic_message(payload)));
    }
    report.max_peak_bytes = report.max_peak_bytes.max(usage.peak_bytes);
    report.max_reserved_bytes = report.max_reserved_bytes.max(usage.reserved_bytes);
    let bound = (target.memory_bound)(input.len());
    (usage.peak_bytes > bound).then(|| {
        format!(
            "held {} bytes at its peak for a {}-byte input (bound {bound})",
            usage.peak_bytes,
            input.len()
        )
    })
}

/// Run one saved input (a reported failure) as the fuzzer ran it.
pub fn replay(target: &Target, input: &[u8]) -> Result<Report, String> {
    let mut report = Report::default();
    match run_one(target, input, &mut report) {
        Some(what) => Err(what),
        None => Ok(report),
    }
}

/// Fuzz `target` within `budget`, starting from `corpus_dir`'s kept inputs and the target's
/// seeds; failing inputs are saved under `out_dir`.
pub fn fuzz(
    target: &Target,
    budget: &Budget,
    corpus_dir: &Path,
    out_dir: &Path,
) -> Result<Report, Failure> {
    let origin = Instant::now();
    let mut report = Report::default();
    let mut pool = corpus(corpus_dir, target.name);
    pool.extend((target.seeds)());
    pool.retain(|s| s.len() <= target.max_len);
    report.starting_inputs = pool.len();
    let watchdog = Watchdog::start(target.name, budget.seed, out_dir.to_path_buf());
    let fail = |what: String, number: Option<u64>, input: &[u8]| {
        let tag = number.map_or("start".to_string(), |n| n.to_string());
        Failure {
            target: target.name,
            seed: budget.seed,
            input_number: number,
            what,
            saved_to: save(out_dir, target.name, budget.seed, &tag, input),
        }
    };
    for input in &pool {
        watchdog.begin(input, origin);
        let failed = run_one(target, input, &mut report);
        watchdog.end();
        if let Some(what) = failed {
            return Err(fail(what, None, input));
        }
    }
    if pool.is_empty() {
        pool.push(Vec::new());
    }
    let mut rng = Rng::new(budget.seed);
    let deadline = Instant::now() + budget.time;
    let mut input = Vec::new();
    for n in 0..budget.inputs {
        if Instant::now() >= deadline {
            break;
        }
        let base = &pool[rng.below(pool.len())];
        let other = &pool[rng.below(pool.len())];
        input.clear();
        input.extend_from_slice(base);
        mutate(&mut rng, &mut input, other, target.max_len);
        watchdog.begin(&input, origin);
        let failed = run_one(target, &input, &mut report);
        watchdog.end();
        report.mutated_inputs = n + 1;
        if let Some(what) = failed {
            return Err(fail(what, Some(n), &input));
        }
    }
    report.elapsed = origin.elapsed();
    Ok(report)
}
