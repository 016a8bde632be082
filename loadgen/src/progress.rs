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
    measure_from_ns: u64,
    end_ns: u64,
    last_ns: u64,
    last_sent: u64,
}

impl Progress {
    /// A display for a run measured from `measure_from_ns` whose producers stop at `end_ns`.
    pub fn new(quiet: bool, measure_from_ns: u64, end_ns: u64, shared: Arc<Shared>) -> Progress {
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
            measure_from_ns,
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
        // `None` until a latency arrived: never print "p99 0 us".
        let p99 = self.shared.live.lock().ok().and_then(|mut h| {
            let p = (!h.is_empty()).then(|| h.value_at_quantile(0.99));
            h.reset();
            p
        });
        let errors = self.shared.errors.load(Ordering::Relaxed);
        let msg = progress_line(ProgressLine {
            phase: if now < self.measure_from_ns {
                "warmup"
            } else if now < self.end_ns {
                "measure"
            } else {
                "drain"
            },
            rate_per_s: rate,
            p99_us: p99,
            sent,
            received,
            errors,
        });
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

/// The figures of one progress line.
#[derive(Debug, Clone, Copy)]
pub struct ProgressLine {
    /// `warmup`, `measure` or `drain`.
    pub phase: &'static str,
    /// XADDs accepted per second since the last line.
    pub rate_per_s: f64,
    /// p99 of the latencies since the last line, `None` if there were none.
    pub p99_us: Option<u64>,
    pub sent: u64,
    pub received: u64,
    pub errors: u64,
}

/// `measure   10012/s  p99 1.27 ms  sent 52000 recv 51990 backlog 10`.
pub fn progress_line(l: ProgressLine) -> String {
    let p99 = l
        .p99_us
        .map_or_else(|| "-".to_string(), crate::report::fmt_us);
    let mut msg = format!(
        "{:<7} {:>8.0}/s  p99 {p99}  sent {} recv {} backlog {}",
        l.phase,
        l.rate_per_s,
        l.sent,
        l.received,
        l.sent.saturating_sub(l.received)
    );
    if l.errors > 0 {
        msg.push_str(&format!("  errors {}", l.errors));
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_zero_p99_before_the_first_latency() {
        let line = ProgressLine {
            phase: "warmup",
            rate_per_s: 10_000.0,
            p99_us: None,
            sent: 5000,
            received: 4990,
            errors: 0,
        };
        let s = progress_line(line);
        assert!(s.starts_with("warmup"), "{s}");
        assert!(s.contains("p99 -") && !s.contains("0 us"), "{s}");
        assert!(s.contains("backlog 10"), "{s}");
        let s = progress_line(ProgressLine {
            p99_us: Some(1270),
            errors: 2,
            ..line
        });
        assert!(s.contains("p99 1.27 ms") && s.ends_with("errors 2"), "{s}");
    }
}
