//! Merge, summarise and print: the docs' bucket table (adaptive rows),
//! percentiles, rates, the verdict, and the JSON / HdrHistogram-log outputs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::cli::LatencyArgs;
use crate::latency::Second;
use crate::verdict::{self, DrainEnd, Evidence, Status};

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

/// How the table's rows are cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    /// Rows of equal width (1 ms as in the Redis docs, or a wider 1/2/5 step).
    Linear { width_us: u64 },
    /// Rows doubling in width: 125 µs, 250 µs, 500 µs, 1 ms, 2 ms, 4 ms, ...
    Log2,
}

/// The smallest 1, 2 or 5 × 10^k at or above `v` (at least 1).
pub fn nice_ceiling(v: f64) -> f64 {
    let mag = 10f64.powf(v.max(1.0).log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * mag >= v {
            return m * mag;
        }
    }
    10.0 * mag
}

/// Pick the table's rows for `h`: `forced_us` if given; else 1 ms rows when
/// min..max fits in `max_rows` of them; else a wider 1/2/5 step giving at most
/// half as many rows when that still spreads the bulk (width at most p50 / 4);
/// else power-of-two rows. Every
/// choice covers p50..max without folding.
pub fn choose_scheme(h: &Histogram<u64>, forced_us: Option<u64>, max_rows: usize) -> Scheme {
    if let Some(w) = forced_us {
        return Scheme::Linear { width_us: w.max(1) };
    }
    if h.is_empty() {
        return Scheme::Linear { width_us: 1000 };
    }
    let (lo, hi) = (h.lowest_equivalent(h.min()), h.max());
    let rows = |w: u64| hi / w - lo / w + 1;
    if rows(1000) <= max_rows as u64 {
        return Scheme::Linear { width_us: 1000 };
    }
    // Wider rows only if at most half as many: a glance, not a scroll.
    let wide_rows = (max_rows / 2).max(2);
    let w = nice_ceiling((hi - lo) as f64 / (wide_rows as f64 - 1.0)) as u64;
    if w * 4 <= h.value_at_quantile(0.5) && rows(w) <= wide_rows as u64 {
        return Scheme::Linear { width_us: w };
    }
    Scheme::Log2
}

/// Row boundaries of the power-of-two scheme: 125 µs × 2^k.
fn log2_floor(v: u64) -> u64 {
    let mut b = 125;
    while b * 2 <= v {
        b *= 2;
    }
    if v < 125 {
        0
    } else {
        b
    }
}

/// Non-empty rows of `scheme`, in order; past `max_rows` rows the rest are
/// folded into one open-ended row (only a forced narrow width gets there).
pub fn buckets(h: &Histogram<u64>, scheme: Scheme, max_rows: usize) -> Vec<Bucket> {
    let total = h.len();
    let mut counts: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for v in h.iter_recorded() {
        // All values in one hdr sub-bucket are "equivalent"; file them by the lowest.
        let value = h.lowest_equivalent(v.value_iterated_to());
        let (from, to) = match scheme {
            Scheme::Linear { width_us } => {
                let w = width_us.max(1);
                (value / w * w, value / w * w + w)
            }
            Scheme::Log2 => {
                let from = log2_floor(value);
                (from, if from == 0 { 125 } else { from * 2 })
            }
        };
        counts.entry(from).or_insert((to, 0)).1 += v.count_at_value();
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
        .map(|(&from_us, &(to, c))| Bucket {
            from_us,
            to_us: Some(to),
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

/// A latency for people: `412 us`, `1.27 ms`, `12.3 ms`, `1.46 s`.
pub fn fmt_us(us: u64) -> String {
    let sig3 = |v: f64| {
        if v < 10.0 {
            format!("{v:.2}")
        } else if v < 100.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.0}")
        }
    };
    match us {
        0..=999 => format!("{us} us"),
        1_000..=999_999 => format!("{} ms", sig3(us as f64 / 1e3)),
        _ => format!("{} s", sig3(us as f64 / 1e6)),
    }
}

/// A table bound as (number, unit): whole ms in ms, below 1 ms in µs.
fn bound(us: u64) -> (String, &'static str) {
    if us.is_multiple_of(1000) {
        ((us / 1000).to_string(), "ms")
    } else if us < 1000 {
        (us.to_string(), "us")
    } else {
        let s = format!("{:.3}", us as f64 / 1000.0);
        (s.trim_end_matches('0').to_string(), "ms")
    }
}

/// The Redis docs' table: `Processed between 0 and 1 ms -> 74.11%`; bounds
/// below 1 ms in µs (`Processed between 250 and 500 us`, `... 500 us and 1 ms`).
pub fn format_table(rows: &[Bucket]) -> String {
    let mut out = String::new();
    for r in rows {
        let (a, ua) = bound(r.from_us);
        let _ = match r.to_us {
            Some(to) => {
                let (b, ub) = bound(to);
                // 0 takes the unit of the other bound.
                if ua == ub || r.from_us == 0 {
                    writeln!(
                        out,
                        "Processed between {a} and {b} {ub} -> {:.2}%",
                        r.percent
                    )
                } else {
                    writeln!(
                        out,
                        "Processed between {a} {ua} and {b} {ub} -> {:.2}%",
                        r.percent
                    )
                }
            }
            None => writeln!(out, "Processed in {a} {ua} or more -> {:.2}%", r.percent),
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
    /// The measured window, seconds.
    pub elapsed_s: f64,
    /// How long the drain after the producers stopped took, seconds.
    pub drain_s: f64,
}

/// Everything about one latency run; serialised as the `--json` output.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyReport {
    pub config: LatencyArgs,
    /// What was measured: URL (password redacted), or the embedded server's address.
    pub target: String,
    /// Name of the run in plots: `--label`, or the server and its version.
    pub label: String,
    /// The target's `INFO server` section.
    pub server_info: BTreeMap<String, String>,
    #[serde(flatten)]
    pub totals: Totals,
    /// Acknowledged by XADD, never delivered, and not waiting in the group.
    pub lost: u64,
    /// `received − unique`.
    pub duplicates: u64,
    /// `sent − received` when the producers stopped.
    pub backlog_at_end: u64,
    /// Still undelivered in the group when the drain ended.
    pub backlog_left: u64,
    /// Target rate, entries/s (0 = closed loop).
    pub rate_target: u64,
    /// XADDs accepted per second of the measured window.
    pub rate_achieved: f64,
    /// Entries delivered per second of the measured window.
    pub rate_delivered: f64,
    /// Closed loop: the producers' backlog bound.
    pub max_backlog: Option<u64>,
    /// `ok`, `saturated` or `failed` (exit 0, 3, 1).
    pub verdict: Status,
    pub latency_us: Percentiles,
    /// Row width when the table is linear.
    pub bucket_us: Option<u64>,
    pub bucket_scheme: Scheme,
    pub buckets: Vec<Bucket>,
    /// True when every entry was delivered exactly once and nothing failed.
    pub passed: bool,
    /// Why it FAILED.
    pub failures: Vec<String>,
    /// Why it is SATURATED.
    pub saturation: Vec<String>,
    pub notes: Vec<String>,
    pub drain: DrainEnd,
    /// One row per second: rate, backlog, p50/p99.
    pub timeline: Vec<Second>,
    /// The merged histogram (µs), HdrHistogram V2 + deflate, base64: what
    /// `--compare` reads back.
    pub histogram: String,
}

/// `h` as base64 of its V2 + deflate encoding (the `.hlog` interval format).
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    use base64::Engine as _;
    let mut bytes = Vec::new();
    if V2DeflateSerializer::new().serialize(h, &mut bytes).is_err() {
        return String::new();
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Inverse of [`encode_histogram`].
pub fn decode_histogram(text: &str) -> Result<Histogram<u64>, String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| e.to_string())?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("{e:?}"))
}

/// The plot/legend name of a run against a server with `info`.
pub fn default_label(info: &BTreeMap<String, String>) -> String {
    if let Some(v) = info.get("shardstream_version") {
        format!("shardstream {v}")
    } else if let Some(v) = info.get("redis_version") {
        format!("redis {v}")
    } else {
        "server".into()
    }
}

impl LatencyReport {
    /// Summarise a run; the verdict comes from [`verdict::decide`].
    pub fn build(
        args: &LatencyArgs,
        target: String,
        server_info: BTreeMap<String, String>,
        hist: &Histogram<u64>,
        totals: Totals,
        evidence: Evidence,
        timeline: Vec<Second>,
    ) -> LatencyReport {
        let v = verdict::decide(&evidence);
        let scheme = choose_scheme(hist, args.bucket_us, MAX_ROWS);
        LatencyReport {
            config: args.clone(),
            target,
            label: args
                .label
                .clone()
                .unwrap_or_else(|| default_label(&server_info)),
            server_info,
            lost: v.lost,
            duplicates: v.duplicates,
            backlog_at_end: evidence.backlog_at_end,
            backlog_left: v.backlog_left,
            rate_target: args.rate,
            rate_achieved: v.rate_sent,
            rate_delivered: v.rate_delivered,
            max_backlog: (args.rate == 0).then(|| crate::latency::max_backlog(args)),
            verdict: v.status,
            latency_us: percentiles(hist),
            bucket_us: match scheme {
                Scheme::Linear { width_us } => Some(width_us),
                Scheme::Log2 => None,
            },
            bucket_scheme: scheme,
            buckets: buckets(hist, scheme, MAX_ROWS),
            passed: v.failures.is_empty(),
            failures: v.failures,
            saturation: v.saturation,
            notes: v.notes,
            drain: evidence.drain,
            timeline,
            histogram: encode_histogram(hist),
            totals,
        }
    }

    /// Process exit code of the run: 0 OK, 1 FAILED, 3 SATURATED.
    pub fn exit_code(&self) -> i32 {
        self.verdict.exit_code()
    }

    /// The human-readable report: the table, then one line per concern, then the verdict.
    pub fn render(&self) -> String {
        let mut out = format_table(&self.buckets);
        let l = &self.latency_us;
        let t = &self.totals;
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "latency  p50 {}  p90 {}  p99 {}  p99.9 {}  p99.99 {}  max {}  ({} samples, mean {})",
            fmt_us(l.p50),
            fmt_us(l.p90),
            fmt_us(l.p99),
            fmt_us(l.p99_9),
            fmt_us(l.p99_99),
            fmt_us(l.max),
            l.count,
            fmt_us(l.mean.round() as u64)
        );
        if self.rate_target == 0 {
            let _ = writeln!(
                out,
                "rate     closed loop: {:.0} entries/s delivered (max sustainable), {:.0}/s sent, \
                 backlog bounded at {}",
                self.rate_delivered,
                self.rate_achieved,
                self.max_backlog.unwrap_or(0)
            );
        } else {
            let _ = writeln!(
                out,
                "rate     target {}/s  sent {:.0}/s  delivered {:.0}/s ({:.1}% of target)",
                self.rate_target,
                self.rate_achieved,
                self.rate_delivered,
                self.rate_delivered * 100.0 / self.rate_target as f64
            );
        }
        let _ = writeln!(
            out,
            "entries  sent {}  delivered {}  acked {}  lost {}  duplicates {}  unsent {}  errors {}",
            t.sent, t.unique, t.acked, self.lost, self.duplicates, t.unsent, t.errors
        );
        let drain = match self.drain {
            DrainEnd::Drained => "drained",
            DrainEnd::Stalled => "stalled",
            DrainEnd::Capped => "hit --drain-max",
        };
        let _ = writeln!(
            out,
            "backlog  {} when producers stopped; {drain} in {:.2} s, {} left",
            self.backlog_at_end, t.drain_s, self.backlog_left
        );
        let _ = writeln!(
            out,
            "target   {} ({}), {:.1} s measured",
            self.target, self.label, t.elapsed_s
        );
        for e in &t.error_samples {
            let _ = writeln!(out, "error: {e}");
        }
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        match self.verdict {
            Status::Ok => {
                let kept_up = if self.rate_target == 0 {
                    String::new()
                } else {
                    format!(", consumers kept up with {}/s", self.rate_target)
                };
                let _ = writeln!(
                    out,
                    "verdict  OK: every entry delivered exactly once{kept_up}"
                );
            }
            Status::Saturated => {
                let _ = writeln!(
                    out,
                    "verdict  SATURATED (exit 3): nothing lost, but the run could not keep up; \
                     latency includes the queue"
                );
                for r in &self.saturation {
                    let _ = writeln!(out, "  - {r}");
                }
            }
            Status::Failed => {
                let _ = writeln!(out, "verdict  FAILED (exit 1)");
                for f in &self.failures {
                    let _ = writeln!(out, "  - {f}");
                }
                for r in &self.saturation {
                    let _ = writeln!(out, "  - also saturated: {r}");
                }
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

/// Write one HdrHistogram interval per second (`per_second[i]` covers second
/// `i` of the measured window, µs values), readable by HistogramLogProcessor
/// and other standard tools.
pub fn write_hdr(
    path: &Path,
    per_second: &[Histogram<u64>],
    window_start: SystemTime,
) -> Result<(), String> {
    let mut file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut ser = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment("loadgen XADD -> XREADGROUP latency, values in microseconds")
        .add_comment("one interval per second of the measured window, then of the drain")
        .with_start_time(window_start)
        .with_base_time(window_start)
        .with_max_value_divisor(1000.0)
        .begin_log_with(&mut file, &mut ser)
        .map_err(|e| e.to_string())?;
    for (i, h) in per_second.iter().enumerate() {
        log.write_histogram(
            h,
            Duration::from_secs(i as u64),
            Duration::from_secs(1),
            None,
        )
        .map_err(|e| format!("{e:?}"))?;
    }
    Ok(())
}

/// Every interval of an `.hlog` summed into one histogram.
pub fn read_hdr(bytes: &[u8]) -> Result<Histogram<u64>, String> {
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    let mut total = crate::latency::new_histogram();
    for e in IntervalLogIterator::new(bytes) {
        if let LogEntry::Interval(i) = e.map_err(|e| format!("{e:?}"))? {
            let h = decode_histogram(i.encoded_histogram())?;
            total.add(&h).map_err(|e| format!("{e:?}"))?;
        }
    }
    Ok(total)
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

    const MS1: Scheme = Scheme::Linear { width_us: 1000 };

    #[test]
    fn bucket_table_like_the_docs() {
        let h = hist(&[(300, 7411), (1500, 2580), (2999, 6), (4000, 3)]);
        assert_eq!(choose_scheme(&h, None, MAX_ROWS), MS1);
        let rows = buckets(&h, MS1, MAX_ROWS);
        assert_eq!(
            format_table(&rows),
            "Processed between 0 and 1 ms -> 74.11%\n\
             Processed between 1 and 2 ms -> 25.80%\n\
             Processed between 2 and 3 ms -> 0.06%\n\
             Processed between 4 and 5 ms -> 0.03%\n"
        );
        let forced = choose_scheme(&h, Some(500), MAX_ROWS);
        assert_eq!(forced, Scheme::Linear { width_us: 500 });
        let rows = buckets(&h, forced, MAX_ROWS);
        assert_eq!(rows[0].from_us, 0);
        assert_eq!(rows[1].from_us, 1500);
        let table = format_table(&rows);
        assert!(
            table.starts_with("Processed between 0 and 500 us -> 74.11%\n"),
            "{table}"
        );
        assert!(
            table.contains("Processed between 1.5 and 2 ms -> 25.80%\n"),
            "{table}"
        );
    }

    #[test]
    fn bucket_tail_is_folded() {
        let h = hist(&[(10, 1), (2500, 1), (5500, 1), (9000, 1)]);
        let rows = buckets(&h, MS1, 3);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[2].from_us, 5000);
        assert_eq!(rows[2].to_us, None);
        assert_eq!(rows[2].count, 2);
        assert_eq!(
            format_table(&rows[2..]),
            "Processed in 5 ms or more -> 50.00%\n"
        );
        let sum: f64 = rows.iter().map(|r| r.percent).sum();
        assert!((sum - 100.0).abs() < 1e-9);
    }

    /// Rows of `scheme` for `h` never fold, cover p50..max and sum to 100%.
    fn covers(h: &Histogram<u64>, scheme: Scheme) -> Vec<Bucket> {
        let rows = buckets(h, scheme, MAX_ROWS);
        assert!(rows.len() <= MAX_ROWS, "{} rows", rows.len());
        assert!(rows.iter().all(|r| r.to_us.is_some()), "folded: {rows:?}");
        let p50 = h.value_at_quantile(0.5);
        assert!(rows[0].from_us <= p50);
        assert!(rows.last().unwrap().to_us.unwrap() > h.max());
        let sum: f64 = rows.iter().map(|r| r.percent).sum();
        assert!((sum - 100.0).abs() < 1e-6);
        rows
    }

    #[test]
    fn overloaded_run_gets_a_readable_table() {
        // Everything between 2.6 and 2.7 s (the single-row table).
        let h = hist(&[(2_603_000, 10), (2_652_000, 80), (2_699_000, 10)]);
        let scheme = choose_scheme(&h, None, MAX_ROWS);
        assert_eq!(scheme, Scheme::Linear { width_us: 10_000 });
        let rows = covers(&h, scheme);
        assert!(rows.len() >= 3);
        let table = format_table(&rows);
        assert!(
            table.starts_with("Processed between 2600 and 2610 ms -> 10.00%"),
            "{table}"
        );
    }

    #[test]
    fn wide_spread_gets_power_of_two_rows() {
        // p50 400 µs, tail to 3 s: 1 ms rows would need 3000 of them.
        let h = hist(&[
            (90, 10),
            (400, 700),
            (900, 200),
            (30_000, 80),
            (3_000_000, 10),
        ]);
        let scheme = choose_scheme(&h, None, MAX_ROWS);
        assert_eq!(scheme, Scheme::Log2);
        let rows = covers(&h, scheme);
        let table = format_table(&rows);
        assert!(
            table.starts_with("Processed between 0 and 125 us -> 1.00%\n"),
            "{table}"
        );
        assert!(
            table.contains("Processed between 250 and 500 us -> 70.00%\n"),
            "{table}"
        );
        assert!(
            table.contains("Processed between 500 us and 1 ms -> 20.00%\n"),
            "{table}"
        );
        assert!(
            table.contains("Processed between 2048 and 4096 ms -> 1.00%\n"),
            "{table}"
        );
    }

    #[test]
    fn latencies_for_people() {
        assert_eq!(fmt_us(412), "412 us");
        assert_eq!(fmt_us(1270), "1.27 ms");
        assert_eq!(fmt_us(16_500), "16.5 ms");
        assert_eq!(fmt_us(246_000), "246 ms");
        assert_eq!(fmt_us(1_460_000), "1.46 s");
        assert_eq!(nice_ceiling(730.0), 1000.0);
        assert_eq!(nice_ceiling(1200.0), 2000.0);
        assert_eq!(nice_ceiling(4000.0), 5000.0);
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

    /// A report from synthetic counts, as `latency::run` builds it.
    pub(crate) fn synthetic(args: &[&str], target: &str, e: Evidence) -> LatencyReport {
        use clap::Parser;
        let cli = crate::cli::Cli::parse_from(args);
        let h = hist(&[(100, 90), (900, 9), (5000, 1)]);
        let totals = Totals {
            sent: e.sent,
            received: e.received,
            unique: e.unique,
            acked: e.acked,
            elapsed_s: e.window_s,
            ..Totals::default()
        };
        let mut info = BTreeMap::new();
        info.insert("redis_version".to_string(), "7.0.15".to_string());
        LatencyReport::build(&cli.latency, target.into(), info, &h, totals, e, Vec::new())
    }

    pub(crate) fn evidence(sent: u64, received: u64, unique: u64) -> Evidence {
        Evidence {
            rate_target: 50,
            window_s: 2.0,
            sent,
            received,
            unique,
            acked: unique,
            errors: 0,
            sent_in_window: 100,
            delivered_in_window: 100,
            backlog_at_end: 0,
            backlog_growth_per_s: 0.0,
            drain: DrainEnd::Stalled,
            undelivered_in_server: Some(0),
            maxlen: false,
            noack: false,
        }
    }

    #[test]
    fn json_has_the_documented_keys() {
        let r = synthetic(
            &["loadgen", "--rate", "50", "--port", "1"],
            "t",
            evidence(100, 101, 99),
        );
        assert!(!r.passed);
        assert_eq!(r.exit_code(), 1);
        assert_eq!(r.lost, 1);
        assert_eq!(r.duplicates, 2);
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        for k in ["p50", "p90", "p99", "p99.9", "p99.99", "max"] {
            assert!(v["latency_us"][k].is_u64(), "missing latency_us.{k}");
        }
        assert_eq!(v["latency_us"]["max"], 5003);
        assert_eq!(v["sent"], 100);
        assert_eq!(v["lost"], 1);
        assert_eq!(v["duplicates"], 2);
        assert_eq!(v["rate_achieved"], 50.0);
        assert_eq!(v["rate_delivered"], 50.0);
        assert_eq!(v["verdict"], "failed");
        assert_eq!(v["label"], "redis 7.0.15");
        assert_eq!(v["config"]["rate"], 50);
        assert_eq!(v["passed"], false);
        assert_eq!(v["bucket_us"], 1000);
        assert_eq!(v["buckets"][0]["from_us"], 0);
        assert_eq!(v["buckets"][0]["count"], 99);
        let back = decode_histogram(v["histogram"].as_str().unwrap()).unwrap();
        assert_eq!(back.len(), 100);
        let text = r.render();
        assert!(
            text.contains("verdict  FAILED (exit 1)\n  - 1 entries acknowledged"),
            "{text}"
        );
    }

    #[test]
    fn saturated_summary_names_the_reasons() {
        let e = Evidence {
            delivered_in_window: 40,
            backlog_at_end: 60,
            drain: DrainEnd::Drained,
            ..evidence(100, 100, 100)
        };
        let r = synthetic(&["loadgen", "--rate", "50", "--port", "1"], "t", e);
        assert_eq!(r.exit_code(), 3);
        let text = r.render();
        assert!(
            text.contains("rate     target 50/s  sent 50/s  delivered 20/s (40.0% of target)"),
            "{text}"
        );
        assert!(text.contains("verdict  SATURATED (exit 3)"), "{text}");
        assert!(
            text.contains("  - consumers delivered 20 entries/s, 40.0% of the 50 entries/s target"),
            "{text}"
        );
    }

    #[test]
    fn hdr_log_has_one_interval_per_second() {
        let seconds = vec![
            hist(&[(100, 90), (900, 9)]),
            hist(&[(5000, 1)]),
            hist(&[(200, 10)]),
        ];
        let path = std::env::temp_dir().join(format!("loadgen-hdr-{}.hlog", std::process::id()));
        write_hdr(&path, &seconds, SystemTime::now()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let text = String::from_utf8_lossy(&bytes);
        let starts: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with('"'))
            .map(|l| l.split(',').next().unwrap())
            .collect();
        assert_eq!(starts, ["0.000", "1.000", "2.000"], "{text}");
        let total = read_hdr(&bytes).unwrap();
        assert_eq!(total.len(), 110);
        assert_eq!(total.max(), hist(&[(5000, 1)]).max());
    }
}
