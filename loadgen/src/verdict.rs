//! The verdict of a latency run, decided from counts alone (no clocks, no
//! sockets), so every rule is unit-tested on synthetic inputs.
//!
//! Three outcomes, each with its own exit code:
//! - **OK** (0): every entry XADD acknowledged was delivered exactly once and,
//!   with a target rate, the consumers kept up with it.
//! - **FAILED** (1): entries lost or duplicated, commands failed, or the drain
//!   stalled with entries still undelivered in the group. Losses are counted
//!   only after a drain that waits until the groups are drained (or nothing
//!   arrives for the stall timeout), so a backlog is never called a loss.
//! - **SATURATED** (3): nothing lost, but the consumers (or the producers) fell
//!   behind the target: delivery rate under 95% of it, a growing backlog, or
//!   at least a second of backlog when the producers stopped.

use serde::Serialize;

/// Delivery below this fraction of the target rate is saturation.
pub const MIN_DELIVERED_FRACTION: f64 = 0.95;
/// Backlog growing faster than this fraction of the target rate per second is saturation.
pub const MAX_BACKLOG_GROWTH_FRACTION: f64 = 0.05;

/// What the run ended as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Saturated,
    Failed,
}

impl Status {
    /// Process exit code: 0 OK, 1 FAILED, 3 SATURATED (2 is setup errors).
    pub fn exit_code(self) -> i32 {
        match self {
            Status::Ok => 0,
            Status::Failed => 1,
            Status::Saturated => 3,
        }
    }

    /// `OK`, `SATURATED`, `FAILED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Saturated => "SATURATED",
            Status::Failed => "FAILED",
        }
    }
}

/// How the drain after the producers stopped ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DrainEnd {
    /// Every sent entry was read back.
    Drained,
    /// Consumers received nothing for the stall timeout.
    Stalled,
    /// Consumers were still receiving when the drain's hard limit passed.
    Capped,
}

/// The counts a verdict is made from.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    /// Target rate, entries/s (0 = closed loop).
    pub rate_target: u64,
    /// Length of the measured window, s.
    pub window_s: f64,
    /// XADDs the server accepted (whole run).
    pub sent: u64,
    /// Entries read back, duplicates included.
    pub received: u64,
    /// Distinct entries read back.
    pub unique: u64,
    /// Sum of XACK replies.
    pub acked: u64,
    /// Failed commands.
    pub errors: u64,
    /// Accepted XADDs during the measured window.
    pub sent_in_window: u64,
    /// Entries read during the measured window.
    pub delivered_in_window: u64,
    /// `sent − received` when the producers stopped.
    pub backlog_at_end: u64,
    /// Least-squares slope of the backlog over the window, entries/s.
    pub backlog_growth_per_s: f64,
    pub drain: DrainEnd,
    /// Σ `lag` of the group (XINFO GROUPS) after the drain: entries still in
    /// the streams, never delivered. `None` when the server does not say.
    pub undelivered_in_server: Option<u64>,
    /// `--maxlen` was given: trimming may drop unread entries, so losses only warn.
    pub maxlen: bool,
    /// `--noack`: no XACK to count.
    pub noack: bool,
}

/// The decision and the numbers behind it.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub status: Status,
    /// Acknowledged by XADD, never delivered, and not waiting in the group.
    pub lost: u64,
    /// Still undelivered in the group when the drain ended.
    pub backlog_left: u64,
    /// `received − unique`.
    pub duplicates: u64,
    /// Accepted XADDs per second of the window.
    pub rate_sent: f64,
    /// Entries delivered per second of the window.
    pub rate_delivered: f64,
    /// `rate_delivered` as a percentage of the target (none in closed loop).
    pub delivered_pct_of_target: Option<f64>,
    /// Why it FAILED (empty otherwise).
    pub failures: Vec<String>,
    /// Why it is SATURATED (may be non-empty on a FAILED run too).
    pub saturation: Vec<String>,
    /// Informational lines (losses under `--maxlen`, ...).
    pub notes: Vec<String>,
}

/// Decide. See the module doc for the rules.
pub fn decide(e: &Evidence) -> Verdict {
    let per_s = |n: u64| {
        if e.window_s > 0.0 {
            n as f64 / e.window_s
        } else {
            0.0
        }
    };
    let rate_sent = per_s(e.sent_in_window);
    let rate_delivered = per_s(e.delivered_in_window);
    let missing = e.sent.saturating_sub(e.unique);
    let backlog_left = match (e.drain, e.undelivered_in_server) {
        (DrainEnd::Drained, _) => 0,
        (_, Some(lag)) => lag.min(missing),
        // The server does not report lag: a drain cut off while entries still
        // arrived leaves a backlog; a stalled one means nothing more will come.
        (DrainEnd::Capped, None) => missing,
        (DrainEnd::Stalled, None) => 0,
    };
    let lost = missing - backlog_left;
    let duplicates = e.received.saturating_sub(e.unique);

    let mut failures = Vec::new();
    let mut notes = Vec::new();
    if lost > 0 {
        let msg = format!(
            "{lost} entries acknowledged by XADD were never delivered (the group has none left)"
        );
        if e.maxlen {
            notes.push(format!(
                "{msg}; expected with --maxlen, which trims unread entries"
            ));
        } else {
            failures.push(msg);
        }
    }
    if e.drain == DrainEnd::Stalled && backlog_left > 0 {
        failures.push(format!(
            "drain stalled: {backlog_left} entries still undelivered in the group, but consumers \
             received nothing for the stall timeout"
        ));
    }
    if duplicates > 0 {
        failures.push(format!("{duplicates} entries received more than once"));
    }
    if e.unique > e.sent {
        failures.push(format!(
            "{} entries received that XADD did not acknowledge",
            e.unique - e.sent
        ));
    }
    if e.errors > 0 {
        failures.push(format!("{} commands failed", e.errors));
    }
    if !e.noack && !e.maxlen && e.acked != e.unique {
        failures.push(format!(
            "XACK acknowledged {} entries, {} were received",
            e.acked, e.unique
        ));
    }

    let mut saturation = Vec::new();
    let target = e.rate_target as f64;
    let delivered_pct_of_target = (e.rate_target > 0).then(|| rate_delivered * 100.0 / target);
    if e.rate_target > 0 {
        if rate_delivered < MIN_DELIVERED_FRACTION * target {
            saturation.push(format!(
                "consumers delivered {rate_delivered:.0} entries/s, {:.1}% of the {} entries/s target",
                rate_delivered * 100.0 / target,
                e.rate_target
            ));
        }
        if rate_sent < MIN_DELIVERED_FRACTION * target {
            saturation.push(format!(
                "producers sent {rate_sent:.0} entries/s, {:.1}% of the target (XADD round trips \
                 too slow: try --pipeline or --producers)",
                rate_sent * 100.0 / target
            ));
        }
        if e.backlog_growth_per_s > MAX_BACKLOG_GROWTH_FRACTION * target {
            saturation.push(format!(
                "backlog grew by {:.0} entries/s",
                e.backlog_growth_per_s
            ));
        }
        if e.backlog_at_end >= e.rate_target {
            saturation.push(format!(
                "consumers were {} entries ({:.1} s of the target rate) behind when producers stopped",
                e.backlog_at_end,
                e.backlog_at_end as f64 / target
            ));
        }
    }
    if e.drain == DrainEnd::Capped && backlog_left > 0 {
        saturation.push(format!(
            "{backlog_left} entries still undelivered when the drain's time limit passed"
        ));
    }
    let status = if !failures.is_empty() {
        Status::Failed
    } else if !saturation.is_empty() {
        Status::Saturated
    } else {
        Status::Ok
    };
    Verdict {
        status,
        lost,
        backlog_left,
        duplicates,
        rate_sent,
        rate_delivered,
        delivered_pct_of_target,
        failures,
        saturation,
        notes,
    }
}

/// Least-squares slope of `(t_s, value)` points, per second; 0 with fewer than two points.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clean 10 s run at 10k/s.
    fn healthy() -> Evidence {
        Evidence {
            rate_target: 10_000,
            window_s: 10.0,
            sent: 110_000,
            received: 110_000,
            unique: 110_000,
            acked: 110_000,
            errors: 0,
            sent_in_window: 100_000,
            delivered_in_window: 99_990,
            backlog_at_end: 12,
            backlog_growth_per_s: 0.5,
            drain: DrainEnd::Drained,
            undelivered_in_server: Some(0),
            maxlen: false,
            noack: false,
        }
    }

    #[test]
    fn keeping_up_is_ok() {
        let v = decide(&healthy());
        assert_eq!(v.status, Status::Ok, "{v:?}");
        assert_eq!((v.lost, v.backlog_left, v.duplicates), (0, 0, 0));
        assert_eq!(v.rate_sent, 10_000.0);
        assert!((v.delivered_pct_of_target.unwrap() - 99.99).abs() < 1e-9);
        assert_eq!(Status::Ok.exit_code(), 0);
    }

    #[test]
    fn slow_consumers_are_saturated_not_lost() {
        // The 50k/s run of the issue: consumers deliver 31k/s, the backlog grows,
        // and the drain empties it afterwards: nothing is lost.
        let e = Evidence {
            rate_target: 50_000,
            sent: 550_000,
            received: 550_000,
            unique: 550_000,
            acked: 550_000,
            sent_in_window: 500_000,
            delivered_in_window: 310_000,
            backlog_at_end: 190_000,
            backlog_growth_per_s: 19_000.0,
            ..healthy()
        };
        let v = decide(&e);
        assert_eq!(v.status, Status::Saturated, "{v:?}");
        assert_eq!(v.status.exit_code(), 3);
        assert_eq!(v.lost, 0);
        assert!(v.failures.is_empty());
        assert_eq!(v.saturation.len(), 3, "{:?}", v.saturation);
        assert!(v.saturation[0].contains("62.0%"), "{}", v.saturation[0]);
    }

    #[test]
    fn backlog_cut_off_by_the_drain_limit_is_backlog() {
        // The README's old closed-loop failure: the drain gave up while entries
        // were still arriving. With the group's lag known, they are backlog.
        let mut e = Evidence {
            received: 80_000,
            unique: 80_000,
            acked: 80_000,
            drain: DrainEnd::Capped,
            undelivered_in_server: Some(30_000),
            ..healthy()
        };
        let v = decide(&e);
        assert_eq!((v.lost, v.backlog_left), (0, 30_000));
        assert_eq!(v.status, Status::Saturated, "{v:?}");
        // Without lag from the server, a capped drain still counts it as backlog.
        e.undelivered_in_server = None;
        assert_eq!(decide(&e).backlog_left, 30_000);
        assert_eq!(decide(&e).status, Status::Saturated);
    }

    #[test]
    fn entries_the_group_no_longer_has_are_lost() {
        let mut e = Evidence {
            received: 109_990,
            unique: 109_990,
            acked: 109_990,
            drain: DrainEnd::Stalled,
            undelivered_in_server: Some(0),
            ..healthy()
        };
        let v = decide(&e);
        assert_eq!(v.lost, 10);
        assert_eq!(v.status, Status::Failed);
        assert_eq!(v.status.exit_code(), 1);
        // Under --maxlen the same counts only warn.
        e.maxlen = true;
        let v = decide(&e);
        assert_eq!(v.status, Status::Ok, "{v:?}");
        assert_eq!(v.notes.len(), 1);
        // Stalled with entries still waiting in the group: the server stopped delivering.
        e.maxlen = false;
        e.undelivered_in_server = Some(10);
        let v = decide(&e);
        assert_eq!((v.lost, v.backlog_left), (0, 10));
        assert_eq!(v.status, Status::Failed);
        assert!(
            v.failures[0].starts_with("drain stalled"),
            "{:?}",
            v.failures
        );
    }

    #[test]
    fn duplicates_errors_and_acks_fail() {
        let e = Evidence {
            received: 110_002,
            errors: 3,
            acked: 109_000,
            ..healthy()
        };
        let v = decide(&e);
        assert_eq!(v.status, Status::Failed);
        assert_eq!(v.duplicates, 2);
        assert_eq!(v.failures.len(), 3, "{:?}", v.failures);
        // Failing wins over saturation.
        let e = Evidence {
            delivered_in_window: 10,
            errors: 1,
            ..healthy()
        };
        let v = decide(&e);
        assert_eq!(v.status, Status::Failed);
        assert!(!v.saturation.is_empty());
    }

    #[test]
    fn growing_backlog_or_slow_producers_saturate() {
        let v = decide(&Evidence {
            backlog_growth_per_s: 600.0,
            ..healthy()
        });
        assert_eq!(v.status, Status::Saturated);
        let v = decide(&Evidence {
            sent_in_window: 90_000,
            delivered_in_window: 90_000,
            ..healthy()
        });
        assert_eq!(v.status, Status::Saturated);
        assert_eq!(v.saturation.len(), 2, "{:?}", v.saturation);
        let v = decide(&Evidence {
            backlog_at_end: 10_000,
            ..healthy()
        });
        assert_eq!(v.status, Status::Saturated);
    }

    #[test]
    fn closed_loop_is_never_saturated_by_rate() {
        let v = decide(&Evidence {
            rate_target: 0,
            delivered_in_window: 123_456,
            backlog_at_end: 999,
            backlog_growth_per_s: 5.0,
            ..healthy()
        });
        assert_eq!(v.status, Status::Ok, "{v:?}");
        assert_eq!(v.delivered_pct_of_target, None);
        assert!((v.rate_delivered - 12_345.6).abs() < 1e-6);
    }

    #[test]
    fn slope_of_a_line() {
        assert_eq!(slope(&[]), 0.0);
        assert_eq!(slope(&[(0.0, 5.0)]), 0.0);
        let pts: Vec<(f64, f64)> = (0..5).map(|i| (i as f64, 3.0 * i as f64 + 1.0)).collect();
        assert!((slope(&pts) - 3.0).abs() < 1e-9);
    }
}
