//! Per-consumer-group delivery latency (shardstream's own; no Redis server
//! keeps this): two HDR histograms per group, in milliseconds.
//!
//! * **delivery**: entry added → first delivered to the group, i.e. the
//!   time of a `>` read (XREADGROUP, also with NOACK, and the new-entries
//!   part of XREADGROUP CLAIM) minus the millisecond part of the entry ID.
//!   For auto-generated IDs that is the time the entry was added; explicit
//!   IDs make it whatever their `ms` says (negative spans count as 0).
//! * **ack**: last delivery → XACK / XACKDEL of a pending entry, from the
//!   PEL's delivery time (so after an XCLAIM it measures from the claim).
//!
//! Histograms are created on the first sample (a group that is never read
//! costs one pointer), auto-resizing, 2 significant digits (1% precision).
//! Reported values are HDR's "highest equivalent" of their bucket (at most
//! 1% above the recorded value; exact below 256 ms). They are statistics,
//! not data: not in the AOF or DUMP payloads, equal
//! for `==`, and reset by `XGROUPLATENCY key group RESET`.

use hdrhistogram::Histogram;

/// Significant digits of the histograms (1% value precision).
const SIGFIG: u8 = 2;

/// The two histograms of a group; see the module documentation.
#[derive(Clone)]
struct Hists {
    delivery_ms: Histogram<u64>,
    ack_ms: Histogram<u64>,
}

/// Delivery-latency statistics of one consumer group.
#[derive(Clone, Default)]
pub struct GroupLatency {
    hists: Option<Box<Hists>>,
}

/// Summary of one histogram, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencySummary {
    pub count: u64,
    pub p50_ms: u64,
    pub p99_ms: u64,
    pub p999_ms: u64,
    pub max_ms: u64,
}

impl GroupLatency {
    fn hists(&mut self) -> &mut Hists {
        self.hists.get_or_insert_with(|| {
            let new = || Histogram::<u64>::new(SIGFIG).unwrap_or_else(|_| unreachable!());
            Box::new(Hists {
                delivery_ms: new(),
                ack_ms: new(),
            })
        })
    }

    /// Record a first delivery at `now_ms` of an entry whose ID's `ms` is `id_ms`.
    #[inline]
    pub fn record_delivery(&mut self, id_ms: u64, now_ms: u64) {
        self.record_deliveries(id_ms, now_ms, 1);
    }

    /// Record `n` first deliveries at `now_ms` of entries whose IDs' `ms` is `id_ms`.
    #[inline]
    pub fn record_deliveries(&mut self, id_ms: u64, now_ms: u64, n: u64) {
        record(
            &mut self.hists().delivery_ms,
            now_ms.saturating_sub(id_ms),
            n,
        );
    }

    /// Record an acknowledgement at `now_ms` of an entry last delivered at
    /// `delivered_ms` (0 = released by XNACK, not recorded).
    #[inline]
    pub fn record_ack(&mut self, delivered_ms: u64, now_ms: u64) {
        if delivered_ms != 0 {
            record(
                &mut self.hists().ack_ms,
                now_ms.saturating_sub(delivered_ms),
                1,
            );
        }
    }

    /// Forget every sample.
    pub fn reset(&mut self) {
        self.hists = None;
    }

    /// Whether any sample was recorded since creation or the last reset.
    pub fn is_empty(&self) -> bool {
        self.hists.is_none()
    }

    /// `(delivery, ack)` summaries.
    pub fn summaries(&self) -> (LatencySummary, LatencySummary) {
        let sum = |h: &Histogram<u64>| {
            if h.is_empty() {
                return LatencySummary::default();
            }
            LatencySummary {
                count: h.len(),
                p50_ms: h.value_at_quantile(0.5),
                p99_ms: h.value_at_quantile(0.99),
                p999_ms: h.value_at_quantile(0.999),
                max_ms: h.max(),
            }
        };
        match &self.hists {
            None => Default::default(),
            Some(h) => (sum(&h.delivery_ms), sum(&h.ack_ms)),
        }
    }

    /// Heap bytes held by the histograms.
    pub fn memory_usage_bytes(&self) -> usize {
        self.hists.as_ref().map_or(0, |h| {
            std::mem::size_of::<Hists>()
                + (h.delivery_ms.distinct_values() + h.ack_ms.distinct_values()) * 8
        })
    }
}

/// Record `v` `n` times, growing the histogram as needed; a value past
/// what any histogram can hold is clamped.
#[inline]
fn record(h: &mut Histogram<u64>, v: u64, n: u64) {
    if h.record_n(v, n).is_err() {
        h.saturating_record_n(v, n);
    }
}

impl PartialEq for GroupLatency {
    /// Statistics are not part of a group's state: any two are equal.
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for GroupLatency {}

impl std::fmt::Debug for GroupLatency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (d, a) = self.summaries();
        f.debug_struct("GroupLatency")
            .field("delivery", &d)
            .field("ack", &a)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_summarises() {
        let mut l = GroupLatency::default();
        assert!(l.is_empty());
        assert_eq!(l.summaries(), Default::default());
        for i in 0..1000u64 {
            l.record_delivery(1_000, 1_000 + i);
        }
        l.record_delivery(5_000, 1_000); // clock behind the ID: 0
        l.record_ack(0, 50); // XNACKed entry: not recorded
        l.record_ack(100, 130);
        let (d, a) = l.summaries();
        assert_eq!(d.count, 1001);
        assert!((495..=505).contains(&d.p50_ms), "{d:?}");
        assert!((985..=995).contains(&d.p99_ms), "{d:?}");
        assert!(d.max_ms >= 995 && d.max_ms <= 1003, "{d:?}");
        assert_eq!(
            a,
            LatencySummary {
                count: 1,
                p50_ms: 30,
                p99_ms: 30,
                p999_ms: 30,
                max_ms: 30
            }
        );
        l.reset();
        assert!(l.is_empty());
        // Huge spans are clamped, never an error or a panic.
        l.record_delivery(0, u64::MAX);
        assert_eq!(l.summaries().0.count, 1);
    }
}
