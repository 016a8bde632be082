//! Instantaneous rates for INFO stats: `instantaneous_ops_per_sec`,
//! `instantaneous_input_kbps`, `instantaneous_output_kbps`.
//!
//! Shard 0 samples the server's running totals (commands processed, network
//! bytes in and out) on its timer, at most every [`SAMPLE_PERIOD_MS`] ms; each
//! sample is the rate since the previous one, and a rate is the mean of the
//! last [`SAMPLES`] samples — about the last 1.6 s at the default `hz 10`.
//! The used-memory peak (INFO `used_memory_peak`) is raised on the same timer.
//!
//! # Source
//! `trackInstantaneousMetric` / `getInstantaneousMetric` (redis/src/server.c,
//! `STATS_METRIC_SAMPLES` 16, sampled every 100 ms by `serverCron`), and the
//! INFO stats fields of redis.io "INFO" (units: operations per second,
//! KiB per second).

use std::sync::Mutex;

/// Samples a rate is the mean of (Redis's `STATS_METRIC_SAMPLES`).
pub const SAMPLES: usize = 16;

/// Shortest time between two samples, ms (Redis's `run_with_period(100)`).
pub const SAMPLE_PERIOD_MS: u64 = 100;

/// One sampled counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Commands processed (INFO `total_commands_processed`).
    Commands = 0,
    /// Bytes read from clients (INFO `total_net_input_bytes`).
    NetInput = 1,
    /// Bytes written to clients (INFO `total_net_output_bytes`).
    NetOutput = 2,
}

const METRICS: usize = 3;

/// The running totals at one instant, indexed by [`Metric`].
pub type Totals = [u64; METRICS];

#[derive(Default)]
struct Ring {
    /// When the last sample was taken, ms on the caller's clock, and the
    /// totals then (`None` before the first sample).
    last: Option<(u64, Totals)>,
    /// Per metric: the last [`SAMPLES`] rates, per second.
    rates: [[f64; SAMPLES]; METRICS],
    /// Where the next sample goes.
    next: usize,
}

/// The sampled rates, shared by the sampling shard thread and INFO readers.
#[derive(Default)]
pub struct InstantMetrics {
    ring: Mutex<Ring>,
}

impl InstantMetrics {
    /// Rates for a server whose totals were all zero at time 0 (its
    /// start): the first sample then counts everything since the start,
    /// even work done before the sampling timer first ran.
    pub fn from_start() -> Self {
        let m = InstantMetrics::default();
        m.sample(0, [0; METRICS]);
        m
    }

    /// Take a sample of `totals` at `now_ms` if [`SAMPLE_PERIOD_MS`] passed
    /// since the last one. Returns whether it did.
    pub fn sample(&self, now_ms: u64, totals: Totals) -> bool {
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let Some((then, before)) = ring.last else {
            ring.last = Some((now_ms, totals));
            return true;
        };
        let elapsed = now_ms.saturating_sub(then);
        if elapsed < SAMPLE_PERIOD_MS {
            return false;
        }
        let at = ring.next;
        for m in 0..METRICS {
            let delta = totals[m].saturating_sub(before[m]);
            ring.rates[m][at] = delta as f64 * 1000.0 / elapsed as f64;
        }
        ring.next = (at + 1) % SAMPLES;
        ring.last = Some((now_ms, totals));
        true
    }

    /// Mean rate of `metric` over the last [`SAMPLES`] samples, per second
    /// (samples not taken yet count as 0, as in Redis).
    pub fn per_sec(&self, metric: Metric) -> f64 {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        ring.rates[metric as usize].iter().sum::<f64>() / SAMPLES as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_the_mean_of_the_last_samples() {
        let m = InstantMetrics::default();
        assert!(m.sample(1_000, [0, 0, 0]));
        // Too soon: not a sample.
        assert!(!m.sample(1_050, [10, 10, 10]));
        // 100 commands and 2048 bytes in 100 ms: 1000/s and 20480 B/s.
        assert!(m.sample(1_100, [100, 2048, 0]));
        assert_eq!(m.per_sec(Metric::Commands), 1000.0 / SAMPLES as f64);
        assert_eq!(m.per_sec(Metric::NetInput), 20480.0 / SAMPLES as f64);
        // A full ring of the same rate reads as that rate.
        let mut t = 1_100;
        let mut ops = 100;
        for _ in 0..SAMPLES {
            t += 200;
            ops += 400;
            assert!(m.sample(t, [ops, 2048, 0]));
        }
        assert_eq!(m.per_sec(Metric::Commands), 2000.0);
        assert_eq!(m.per_sec(Metric::NetInput), 0.0);
    }

    #[test]
    fn work_before_the_first_timer_tick_counts() {
        let m = InstantMetrics::from_start();
        // 3200 commands done in the first 50 ms, sampled at 200 ms.
        assert!(m.sample(200, [3200, 0, 0]));
        assert_eq!(m.per_sec(Metric::Commands), 16_000.0 / SAMPLES as f64);
    }

    #[test]
    fn a_counter_going_backwards_reads_as_no_change() {
        let m = InstantMetrics::default();
        m.sample(0, [50, 0, 0]);
        m.sample(100, [10, 0, 0]);
        assert_eq!(m.per_sec(Metric::Commands), 0.0);
    }
}
