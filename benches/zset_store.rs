//! Micro-bench of the sorted-set store alone (harness = false; run with
//! `cargo bench --bench zset_store`). Prints operations/s for the delayed
//! job pattern on one large set: ZADD of due times, ZSCORE, ZRANK, the
//! earliest due range (ZRANGE BYSCORE LIMIT), ZPOPMIN, and bytes per member.

use std::hint::black_box;
use std::time::Instant;

use shardstream::zset::score::parse_score_range;
use shardstream::zset::{AddFlags, EncodingLimits, SortedSet};

const N: u64 = 1_000_000;

fn rate(n: u64, secs: f64) -> String {
    format!("{:>8.2} M ops/s", n as f64 / secs / 1e6)
}

/// A member and a due time in ms, spread over about 17 minutes.
fn job(i: u64) -> (Vec<u8>, f64) {
    let due = 1_800_000_000_000 + (i.wrapping_mul(2_654_435_761) % 1_000_003);
    (format!("job:{i:08}").into_bytes(), due as f64)
}

fn main() {
    let limits = EncodingLimits::default();
    let mut z = SortedSet::default();
    let t = Instant::now();
    for i in 0..N {
        let (m, s) = job(i);
        black_box(z.add(&m, s, AddFlags::default(), limits));
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "zadd            {}  ({N} members, {secs:.3} s)",
        rate(N, secs)
    );
    println!(
        "memory          {:>8.1} bytes/member (MEMORY USAGE estimate)",
        z.memory_usage_bytes() as f64 / N as f64
    );

    let lookups = 200_000;
    let t = Instant::now();
    for i in 0..lookups {
        let (m, _) = job(i * 7 % N);
        black_box(z.score(&m));
    }
    println!(
        "zscore          {}",
        rate(lookups, t.elapsed().as_secs_f64())
    );

    let t = Instant::now();
    for i in 0..lookups {
        let (m, _) = job(i * 13 % N);
        black_box(z.rank(&m));
    }
    println!(
        "zrank           {}",
        rate(lookups, t.elapsed().as_secs_f64())
    );

    let range = parse_score_range(b"-inf", b"1800000000500").expect("range");
    let t = Instant::now();
    for _ in 0..lookups {
        let (start, end) = z.score_span(&range);
        black_box(z.range(start, (start + 10).min(end), false));
    }
    println!(
        "due range (10)  {}",
        rate(lookups, t.elapsed().as_secs_f64())
    );

    let pops = 200_000;
    let t = Instant::now();
    for _ in 0..pops {
        black_box(z.remove_range(0, 1));
    }
    println!("zpopmin         {}", rate(pops, t.elapsed().as_secs_f64()));
}
