//! Micro-bench of the packed stream store (harness = false; run with
//! `cargo bench --bench stream_append`). Prints entries/s for appends,
//! paged forward/reverse range scans, and estimated bytes per entry.

use std::hint::black_box;
use std::time::Instant;

use bytes::Bytes;
use shardstream::stream::{IdSpec, NodeLimits, Stream, StreamId};

const N: u64 = 1_000_000;
const PAGE: usize = 100;

fn rate(n: u64, secs: f64) -> String {
    format!("{:>8.2} M entries/s", n as f64 / secs / 1e6)
}

fn main() {
    let limits = NodeLimits::default();
    let payload = Bytes::from(vec![b'x'; 32]);

    // Append: XADD key * ts <13 digits> p <32 bytes>, 1000 entries per ms.
    let mut s = Stream::new();
    let t = Instant::now();
    for i in 0..N {
        let now_ms = 1_700_000_000_000 + i / 1000;
        let fields = [
            (Bytes::from_static(b"ts"), Bytes::from(now_ms.to_string())),
            (Bytes::from_static(b"p"), payload.clone()),
        ];
        black_box(s.append(IdSpec::Auto, &fields, now_ms, limits).unwrap());
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "append          {}  ({N} entries, {:.3} s)",
        rate(N, secs),
        secs
    );
    println!(
        "memory          {:>8.1} bytes/entry ({} nodes)",
        s.memory_usage_bytes() as f64 / N as f64,
        s.node_count()
    );

    // Forward scan in XRANGE-style pages: start = (last id of previous page.
    let t = Instant::now();
    let mut start = StreamId::MIN;
    let mut seen = 0u64;
    loop {
        let page = s.range(start, StreamId::MAX, Some(PAGE), false);
        let Some(last) = page.last() else { break };
        seen += page.len() as u64;
        start = last.id.next().unwrap();
        black_box(&page);
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(seen, N);
    println!("range fwd/{PAGE}   {}", rate(seen, secs));

    // Reverse scan, XREVRANGE-style pages.
    let t = Instant::now();
    let mut end = StreamId::MAX;
    let mut seen = 0u64;
    loop {
        let page = s.range(StreamId::MIN, end, Some(PAGE), true);
        let Some(last) = page.last() else { break };
        seen += page.len() as u64;
        match last.id.prev() {
            Some(p) => end = p,
            None => break,
        }
        black_box(&page);
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(seen, N);
    println!("range rev/{PAGE}   {}", rate(seen, secs));

    // One unbounded iterator pass (no paging / seek cost).
    let t = Instant::now();
    let n = s
        .iter_range(StreamId::MIN, StreamId::MAX, false)
        .map(black_box)
        .count() as u64;
    let secs = t.elapsed().as_secs_f64();
    println!("iter full       {}", rate(n, secs));
}
