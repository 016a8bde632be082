//! Latency by percentile as a small hand-written SVG (HdrHistogram plotter
//! style): x is `log10(1 / (1 − q))`, so 90%, 99%, 99.9% ... are evenly
//! spaced; y is latency in µs.
//!
//! Written by hand rather than with `plotters`: one polyline and a few labels
//! do not justify a plotting stack with font dependencies.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

const W: f64 = 800.0;
const H: f64 = 480.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// Render `h` (µs) as SVG text titled `title`.
pub fn svg(h: &Histogram<u64>, title: &str) -> String {
    // Resolution limited by the sample count: with n samples, 1 − 1/n is the last meaningful q.
    let n = h.len().max(1) as f64;
    let x_max = n.log10().clamp(1.0, 6.0);
    let mut points = Vec::new();
    let steps = (x_max * 40.0) as usize;
    for i in 0..=steps {
        let x = x_max * i as f64 / steps as f64;
        let q = 1.0 - 10f64.powf(-x);
        let v = if h.is_empty() {
            0
        } else {
            h.value_at_quantile(q)
        };
        points.push((x, v as f64));
    }
    let y_top = nice_ceiling(points.iter().map(|p| p.1).fold(1.0, f64::max));
    let px = |x: f64| LEFT + x / x_max * (W - LEFT - RIGHT);
    let py = |y: f64| H - BOTTOM - y / y_top * (H - TOP - BOTTOM);

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        W / 2.0,
        escape(title)
    );
    // Axes and grid.
    for i in 0..=x_max.floor() as usize {
        let x = px(i as f64);
        let label = percentile_label(i);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{label}</text>"##,
            H - BOTTOM,
            H - BOTTOM + 16.0
        );
    }
    for i in 0..=5 {
        let v = y_top * i as f64 / 5.0;
        let y = py(v);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            v.round()
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">percentile</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - 12.0
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">latency (us)</text>"#,
        H / 2.0,
        H / 2.0
    );
    let mut path = String::new();
    for (x, y) in &points {
        let _ = write!(path, "{:.1},{:.1} ", px(*x), py(*y));
    }
    let _ = writeln!(
        s,
        r##"<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{}"/>"##,
        path.trim_end()
    );
    s.push_str("</svg>\n");
    s
}

/// `0%`, `90%`, `99%`, `99.9%`, ... for decade `i` of `1 / (1 − q)`.
fn percentile_label(i: usize) -> String {
    match i {
        0 => "0%".into(),
        _ => format!(
            "{:.*}%",
            i.saturating_sub(2),
            100.0 - 100.0 / 10f64.powi(i as i32)
        ),
    }
}

/// The smallest 1, 2 or 5 × 10^k at or above `v`.
fn nice_ceiling(v: f64) -> f64 {
    let mag = 10f64.powf(v.max(1.0).log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * mag >= v {
            return m * mag;
        }
    }
    10.0 * mag
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::new_histogram;

    #[test]
    fn labels_and_scale() {
        assert_eq!(percentile_label(0), "0%");
        assert_eq!(percentile_label(1), "90%");
        assert_eq!(percentile_label(2), "99%");
        assert_eq!(percentile_label(3), "99.9%");
        assert_eq!(percentile_label(5), "99.999%");
        assert_eq!(nice_ceiling(730.0), 1000.0);
        assert_eq!(nice_ceiling(1200.0), 2000.0);
        assert_eq!(nice_ceiling(4000.0), 5000.0);
    }

    #[test]
    fn svg_is_well_formed_enough() {
        let mut h = new_histogram();
        for v in 1..=1000 {
            h.record(v).unwrap();
        }
        let s = svg(&h, "a < b");
        assert!(s.starts_with("<svg"));
        assert!(s.trim_end().ends_with("</svg>"));
        assert!(s.contains("a &lt; b"));
        assert!(s.contains("99.9%"));
        assert_eq!(s.matches("<polyline").count(), 1);
    }
}
