//! Merge, summarise and print: the docs' bucket table, percentiles in µs,
//! counts, and the JSON / HdrHistogram-log outputs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::cli::LatencyArgs;

/// Most rows printed in the table; later buckets are folded into one row.
pub const MAX_ROWS: usize = 40;

/// Latency percentiles, µs. JSON keys: `p50`, `p90`, `p99`, `p99.9`, `p99.99`, `max`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    #[serde(rename = "p99.9")]
    pub p99_9: u64,
    #[serde(rename = "p99.99")]
    pub p99_99: u64,
    pub max: u64,
    pub min: u64,
    pub mean: f64,
    /// Entries recorded (those scheduled inside the measured window).
    pub count: u64,
}

/// Percentiles of `h` (all zero for an empty histogram).
pub fn percentiles(h: &Histogram<u64>) -> Percentiles {
    if h.is_empty() {
        return Percentiles::default();
    }
    Percentiles {
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        p99_9: h.value_at_quantile(0.999),
        p99_99: h.value_at_quantile(0.9999),
        max: h.max(),
        min: h.min(),
        mean: h.mean(),
        count: h.len(),
    }
}

/// One row of the table: entries with latency in `[from_us, to_us)`;
/// `to_us = None` for the folded tail ("and above").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bucket {
    pub from_us: u64,
    pub to_us: Option<u64>,
    pub count: u64,
    pub percent: f64,
}

/// Non-empty buckets of width `width_us`, in order; past `max_rows` rows the
/// rest are folded into one open-ended row.
pub fn buckets(h: &Histogram<u64>, width_us: u64, max_rows: usize) -> Vec<Bucket> {
    let width = width_us.max(1);
    let total = h.len();
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    for v in h.iter_recorded() {
        // All values in one hdr sub-bucket are "equivalent"; file them by the lowest.
        let value = h.lowest_equivalent(v.value_iterated_to());
        *counts.entry(value / width).or_default() += v.count_at_value();
    }
    let pct = |c: u64| {
        if total == 0 {
            0.0
        } else {
            c as f64 * 100.0 / total as f64
        }
    };
    let mut rows: Vec<Bucket> = counts
        .iter()
        .map(|(&b, &c)| Bucket {
            from_us: b * width,
            to_us: Some((b + 1) * width),
            count: c,
            percent: pct(c),
        })
        .collect();
    if rows.len() > max_rows.max(1) {
        let keep = max_rows.max(1) - 1;
        let tail: u64 = rows[keep..].iter().map(|r| r.count).sum();
        let from_us = rows[keep].from_us;
        rows.truncate(keep);
        rows.push(Bucket {
            from_us,
            to_us: None,
            count: tail,
            percent: pct(tail),
        });
    }
    rows
}

/// The Redis docs' table: `Processed between 0 and 1 ms -> 74.11%`, in ms
/// when the width is a whole number of ms, else in µs (`us`).
pub fn format_table(rows: &[Bucket], width_us: u64) -> String {
    let ms = width_us.is_multiple_of(1000);
    let unit = |us: u64| {
        if ms {
            (us / 1000).to_string()
        } else {
            us.to_string()
        }
    };
    let u = if ms { "ms" } else { "us" };
    let mut out = String::new();
    for r in rows {
        let _ = match r.to_us {
            Some(to) => writeln!(
                out,
                "Processed between {} and {} {u} -> {:.2}%",
                unit(r.from_us),
                unit(to),
                r.percent
            ),
            None => writeln!(
                out,
                "Processed in {} {u} or more -> {:.2}%",
                unit(r.from_us),
                r.percent
            ),
        };
    }
    out
}

/// Counts gathered by the run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    /// XADDs the server accepted.
    pub sent: u64,
    /// Entries scheduled that producers never got to send (they fell behind).
    pub unsent: u64,
    /// Entries read back, duplicates included.
    pub received: u64,
    /// Distinct entries read back.
    pub unique: u64,
    /// Sum of XACK replies.
    pub acked: u64,
    /// Failed commands.
    pub errors: u64,
    /// The first few error messages.
    pub error_samples: Vec<String>,
    /// From the first scheduled send to the last accepted XADD, seconds.
    pub elapsed_s: f64,
}

/// Everything about one latency run; serialised as the `--json` output.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyReport {
    pub config: LatencyArgs,
    /// What was measured: URL, or the embedded server's address.
    pub target: String,
    /// The target's `INFO server` section.
    pub server_info: BTreeMap<String, String>,
    #[serde(flatten)]
    pub totals: Totals,
    /// `sent − unique` (never negative).
    pub lost: u64,
    /// `received − unique`.
    pub duplicates: u64,
    /// Target rate, entries/s (0 = closed loop).
    pub rate_target: u64,
    /// Entries accepted per second of sending.
    pub rate_achieved: f64,
    pub latency_us: Percentiles,
    pub bucket_us: u64,
    pub buckets: Vec<Bucket>,
    /// False when entries were lost or duplicated, or commands failed.
    pub passed: bool,
    /// Why it did not pass.
    pub failures: Vec<String>,
}

impl LatencyReport {
    /// Summarise a run and decide whether it passed. Losses only warn with
    /// `--maxlen` (trimming may drop entries before they are read).
    pub fn build(
        args: &LatencyArgs,
        target: String,
        server_info: BTreeMap<String, String>,
        hist: &Histogram<u64>,
        totals: Totals,
    ) -> LatencyReport {
        let lost = totals.sent.saturating_sub(totals.unique);
        let duplicates = totals.received.saturating_sub(totals.unique);
        let mut failures = Vec::new();
        if lost > 0 && args.maxlen.is_none() {
            failures.push(format!("{lost} entries sent but never received"));
        }
        if duplicates > 0 {
            failures.push(format!("{duplicates} entries received more than once"));
        }
        if totals.unique > totals.sent {
            failures.push(format!(
                "{} entries received that were not acknowledged as sent",
                totals.unique - totals.sent
            ));
        }
        if totals.errors > 0 {
            failures.push(format!("{} commands failed", totals.errors));
        }
        if !args.noack && args.maxlen.is_none() && totals.acked != totals.unique {
            failures.push(format!(
                "XACK acknowledged {} entries, {} were received",
                totals.acked, totals.unique
            ));
        }
        let rate_achieved = if totals.elapsed_s > 0.0 {
            totals.sent as f64 / totals.elapsed_s
        } else {
            0.0
        };
        LatencyReport {
            config: args.clone(),
            target,
            server_info,
            lost,
            duplicates,
            rate_target: args.rate,
            rate_achieved,
            latency_us: percentiles(hist),
            bucket_us: args.bucket_us.max(1),
            buckets: buckets(hist, args.bucket_us, MAX_ROWS),
            passed: failures.is_empty(),
            failures,
            totals,
        }
    }

    /// The human-readable report.
    pub fn render(&self) -> String {
        let mut out = format_table(&self.buckets, self.bucket_us);
        let l = &self.latency_us;
        let t = &self.totals;
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "latency us: p50 {}  p90 {}  p99 {}  p99.9 {}  p99.99 {}  max {}  (mean {:.1}, {} samples)",
            l.p50, l.p90, l.p99, l.p99_9, l.p99_99, l.max, l.mean, l.count
        );
        let _ = writeln!(
            out,
            "sent {}  received {}  unique {}  acked {}  lost {}  duplicates {}  unsent {}  errors {}",
            t.sent, t.received, t.unique, t.acked, self.lost, self.duplicates, t.unsent, t.errors
        );
        let target = if self.rate_target == 0 {
            "closed loop".to_string()
        } else {
            format!("target {}/s", self.rate_target)
        };
        let _ = writeln!(
            out,
            "rate {:.0} entries/s ({target}) over {:.2} s against {}{}",
            self.rate_achieved,
            t.elapsed_s,
            self.target,
            self.server_info
                .get("redis_version")
                .map(|v| format!(" (redis_version {v})"))
                .unwrap_or_default()
        );
        if t.unsent > 0 {
            let _ = writeln!(
                out,
                "warning: producers fell {} entries behind the schedule (their wait counts as \
                 latency; try --pipeline or --producers)",
                t.unsent
            );
        }
        for e in &t.error_samples {
            let _ = writeln!(out, "error: {e}");
        }
        if self.passed {
            let _ = writeln!(out, "check: OK (every sent entry received exactly once)");
        } else {
            for f in &self.failures {
                let _ = writeln!(out, "check FAILED: {f}");
            }
        }
        out
    }
}

/// Write `value` as pretty JSON to `path`.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

/// Write `h` (µs values) as an HdrHistogram interval log with one interval,
/// readable by HistogramLogProcessor and other standard tools.
pub fn write_hdr(path: &Path, h: &Histogram<u64>, duration_s: f64) -> Result<(), String> {
    let mut file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut ser = V2DeflateSerializer::new();
    let now = std::time::SystemTime::now();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment("loadgen XADD -> XREADGROUP latency, values in microseconds")
        .with_start_time(now)
        .with_base_time(now)
        .with_max_value_divisor(1000.0)
        .begin_log_with(&mut file, &mut ser)
        .map_err(|e| e.to_string())?;
    log.write_histogram(
        h,
        std::time::Duration::ZERO,
        std::time::Duration::from_secs_f64(duration_s.max(0.0)),
        None,
    )
    .map_err(|e| format!("{e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::new_histogram;

    fn hist(values: &[(u64, u64)]) -> Histogram<u64> {
        let mut h = new_histogram();
        for &(v, n) in values {
            h.record_n(v, n).unwrap();
        }
        h
    }

    #[test]
    fn bucket_table_like_the_docs() {
        let h = hist(&[(300, 7411), (1500, 2580), (2999, 6), (4000, 3)]);
        let rows = buckets(&h, 1000, MAX_ROWS);
        assert_eq!(
            format_table(&rows, 1000),
            "Processed between 0 and 1 ms -> 74.11%\n\
             Processed between 1 and 2 ms -> 25.80%\n\
             Processed between 2 and 3 ms -> 0.06%\n\
             Processed between 4 and 5 ms -> 0.03%\n"
        );
        let rows = buckets(&h, 500, MAX_ROWS);
        assert_eq!(rows[0].from_us, 0);
        assert_eq!(rows[1].from_us, 1500);
        assert!(format_table(&rows, 500).starts_with("Processed between 0 and 500 us -> 74.11%\n"));
    }

    #[test]
    fn bucket_tail_is_folded() {
        let h = hist(&[(10, 1), (2500, 1), (5500, 1), (9000, 1)]);
        let rows = buckets(&h, 1000, 3);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[2].from_us, 5000);
        assert_eq!(rows[2].to_us, None);
        assert_eq!(rows[2].count, 2);
        assert_eq!(
            format_table(&rows[2..], 1000),
            "Processed in 5 ms or more -> 50.00%\n"
        );
        let sum: f64 = rows.iter().map(|r| r.percent).sum();
        assert!((sum - 100.0).abs() < 1e-9);
    }

    #[test]
    fn percentiles_of_uniform() {
        let mut h = new_histogram();
        for v in 1..=10_000 {
            h.record(v).unwrap();
        }
        let p = percentiles(&h);
        assert_eq!(p.count, 10_000);
        assert!((4990..=5010).contains(&p.p50), "{}", p.p50);
        assert!((8990..=9010).contains(&p.p90), "{}", p.p90);
        assert!((9890..=9910).contains(&p.p99), "{}", p.p99);
        assert!((9980..=10_000).contains(&p.p99_9), "{}", p.p99_9);
        assert!(p.max >= 10_000 && p.max <= 10_010);
        assert_eq!(p.min, 1);
        assert_eq!(percentiles(&new_histogram()), Percentiles::default());
    }

    #[test]
    fn json_has_the_documented_keys() {
        use clap::Parser;
        let cli = crate::cli::Cli::parse_from(["loadgen", "--rate", "5000", "--port", "1"]);
        let h = hist(&[(100, 90), (900, 9), (5000, 1)]);
        let totals = Totals {
            sent: 100,
            received: 101,
            unique: 99,
            acked: 99,
            elapsed_s: 2.0,
            ..Totals::default()
        };
        let r = LatencyReport::build(&cli.latency, "t".into(), BTreeMap::new(), &h, totals);
        assert!(!r.passed);
        assert_eq!(r.lost, 1);
        assert_eq!(r.duplicates, 2);
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        for k in ["p50", "p90", "p99", "p99.9", "p99.99", "max"] {
            assert!(v["latency_us"][k].is_u64(), "missing latency_us.{k}");
        }
        assert_eq!(v["latency_us"]["max"], h.max());
        assert_eq!(v["sent"], 100);
        assert_eq!(v["lost"], 1);
        assert_eq!(v["duplicates"], 2);
        assert_eq!(v["rate_achieved"], 50.0);
        assert_eq!(v["config"]["rate"], 5000);
        assert_eq!(v["passed"], false);
        assert_eq!(v["buckets"][0]["from_us"], 0);
        assert_eq!(v["buckets"][0]["count"], 99);
    }

    #[test]
    fn hdr_log_round_trips() {
        use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
        use hdrhistogram::serialization::Deserializer;
        let h = hist(&[(100, 90), (900, 9), (5000, 1)]);
        let path = std::env::temp_dir().join(format!("loadgen-hdr-{}.hlog", std::process::id()));
        write_hdr(&path, &h, 1.5).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let mut found = 0;
        for e in IntervalLogIterator::new(&bytes) {
            if let Ok(LogEntry::Interval(i)) = e {
                let raw = base64_decode(i.encoded_histogram());
                let back: Histogram<u64> = Deserializer::new()
                    .deserialize(&mut raw.as_slice())
                    .unwrap();
                assert_eq!(back.len(), 100);
                assert_eq!(back.max(), h.max());
                found += 1;
            }
        }
        assert_eq!(found, 1);
    }

    /// Minimal base64 decoder for the test (standard alphabet, padding ignored).
    fn base64_decode(s: &str) -> Vec<u8> {
        let val = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        let mut out = Vec::new();
        let (mut acc, mut bits) = (0u32, 0);
        for c in s.bytes().filter(|&c| c != b'=') {
            acc = (acc << 6) | u32::from(val(c));
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        out
    }
}
