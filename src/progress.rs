//! Progress bars on stderr, only when stderr is a terminal.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// A bar following `bytes` until dropped.
pub struct Ticker {
    bar: ProgressBar,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}

/// Bytes ingested with throughput and ETA, from the inputs' total size
/// (local files and objects alike; streams count 0: the bar then shows
/// bytes and rate only), under the phase's name: `reading`, or `reading,
/// spilling rows` when the rows go to disk as they are read.
pub fn ingest_bar(quiet: bool, phase: &str, total: u64, bytes: &Arc<AtomicU64>) -> Option<Ticker> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(total.max(1));
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {phase} {{bytes}}/{{total_bytes}} {{bytes_per_sec}} eta {{eta}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (b, s, n) = (bar.clone(), Arc::clone(&stop), Arc::clone(bytes));
    let thread = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            b.set_position(n.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    Some(Ticker {
        bar,
        stop,
        thread: Some(thread),
    })
}

/// Rules done out of total; hidden unless stderr is a terminal.
pub fn rules_bar(show: bool, total: usize) -> ProgressBar {
    if !show || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} auditing: rules {pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// A phase without a measure (writing spilled rows as Parquet): a spinner
/// with its name and the time it has taken, until dropped.
pub fn phase_spinner(quiet: bool, phase: &str) -> Option<Spinner> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(phase.to_string());
    bar.tick();
    bar.enable_steady_tick(Duration::from_millis(100));
    Some(Spinner(bar))
}

/// See [`phase_spinner`].
pub struct Spinner(ProgressBar);

impl Drop for Spinner {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// The run's start, for placing timings on one time line.
static CLOCK: std::sync::LazyLock<std::time::Instant> =
    std::sync::LazyLock::new(std::time::Instant::now);

/// Start the run's clock (the first call to [`timing`] would otherwise).
pub fn start_clock() {
    std::sync::LazyLock::force(&CLOCK);
}

/// With `HVAUDIT_TIMING` set, how long each ingest phase, view and rule
/// took, and from when to when since the run started (which jobs ran side
/// by side, where a core waited), on stderr.
pub fn timing(kind: &str, name: &str, started: std::time::Instant) {
    if std::env::var_os("HVAUDIT_TIMING").is_some() {
        let took = started.elapsed().as_secs_f64();
        let end = CLOCK.elapsed().as_secs_f64();
        eprintln!(
            "timing {kind} {name} {took:.3}s ({:.3}-{end:.3}s)",
            (end - took).max(0.0)
        );
    }
}
