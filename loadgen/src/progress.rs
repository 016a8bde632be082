//! Live progress: an indicatif bar with rate and recent p99 on a terminal, a
//! plain line per second on stderr otherwise, nothing with `--quiet`.

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};

use crate::latency::Shared;

/// Progress display, driven by the main thread's `tick()` calls.
pub struct Progress {
    shared: Arc<Shared>,
    bar: Option<ProgressBar>,
    plain: bool,
    end_ns: u64,
    last_ns: u64,
    last_sent: u64,
}

impl Progress {
    /// A display for a run whose producers stop at `end_ns`.
    pub fn new(quiet: bool, end_ns: u64, shared: Arc<Shared>) -> Progress {
        let tty = std::io::stderr().is_terminal();
        let bar = (!quiet && tty).then(|| {
            let b = ProgressBar::new(end_ns / 1_000_000);
            b.set_style(
                ProgressStyle::with_template("{elapsed:>4} [{bar:30}] {percent:>3}% {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            b
        });
        let last_ns = shared.now_ns();
        Progress {
            shared,
            bar,
            plain: !quiet && !tty,
            end_ns,
            last_ns,
            last_sent: 0,
        }
    }

    /// Update at most every ~250 ms (bar) or 1 s (plain).
    pub fn tick(&mut self) {
        if self.bar.is_none() && !self.plain {
            return;
        }
        let now = self.shared.now_ns();
        let every = if self.plain {
            1_000_000_000
        } else {
            250_000_000
        };
        if now - self.last_ns < every {
            return;
        }
        let sent = self.shared.sent.load(Ordering::Relaxed);
        let received = self.shared.received.load(Ordering::Relaxed);
        let rate = (sent - self.last_sent) as f64 * 1e9 / (now - self.last_ns) as f64;
        let p99 = self
            .shared
            .live
            .lock()
            .map(|mut h| {
                let p = if h.is_empty() {
                    0
                } else {
                    h.value_at_quantile(0.99)
                };
                h.reset();
                p
            })
            .unwrap_or(0);
        let errors = self.shared.errors.load(Ordering::Relaxed);
        let msg = format!(
            "{rate:>8.0}/s  p99 {p99} us  sent {sent} recv {received}{}",
            if errors > 0 {
                format!("  errors {errors}")
            } else {
                String::new()
            }
        );
        if let Some(b) = &self.bar {
            b.set_position((now / 1_000_000).min(self.end_ns / 1_000_000));
            b.set_message(msg);
        } else {
            eprintln!("[{:>5.1}s] {msg}", now as f64 / 1e9);
        }
        self.last_ns = now;
        self.last_sent = sent;
    }

    /// Clear the bar.
    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}
