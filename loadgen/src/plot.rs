//! Latency by percentile as SVG, in the style of HdrHistogram's plotter: x is
//! `log10(1 / (1 − q))`, so 90%, 99%, 99.9% ... are evenly spaced; y is
//! latency on a log scale; p50, p99, p99.9 and max are marked; several runs
//! (this one and `--compare` files) share one picture with a legend.
//!
//! Each line stops at `q = 1 − 1/n`: n samples say nothing about rarer latencies.
//!
//! Written by hand rather than with `plotters`: a few polylines and labels do
//! not justify a plotting stack with font dependencies. The tests parse the
//! output with an XML parser and check the geometry.

use std::fmt::Write as _;
use std::path::Path;

use hdrhistogram::Histogram;

use crate::report::{decode_histogram, fmt_us, nice_ceiling, read_hdr};

const W: f64 = 900.0;
const H: f64 = 540.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 70.0;
/// Points per decade of `1 / (1 − q)`.
const STEPS_PER_DECADE: f64 = 50.0;
const COLOURS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

/// One line of the plot.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    /// Latencies, µs.
    pub hist: Histogram<u64>,
}

/// A run to overlay: a loadgen `--json` report (its `histogram` and `label`)
/// or an HdrHistogram interval log (all intervals summed, named after the file).
pub fn load_compare(path: &Path) -> Result<Series, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let stem = path
        .file_stem()
        .map_or_else(|| "compare".into(), |s| s.to_string_lossy().into_owned());
    let err = |e: String| format!("{}: {e}", path.display());
    if path.extension().is_some_and(|e| e == "json") {
        let v: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| err(e.to_string()))?;
        let text = v["histogram"]
            .as_str()
            .ok_or_else(|| err("no \"histogram\" (written by an older loadgen?)".into()))?;
        let label = v["label"].as_str().map_or(stem, str::to_string);
        Ok(Series {
            label,
            hist: decode_histogram(text).map_err(err)?,
        })
    } else {
        Ok(Series {
            label: stem,
            hist: read_hdr(&bytes).map_err(err)?,
        })
    }
}

/// x of quantile `q`: `log10(1 / (1 − q))`.
fn x_of(q: f64) -> f64 {
    -(1.0 - q).max(1e-12).log10()
}

/// How far right a line with `n` samples may go: `q = 1 − 1/n`.
fn x_limit(n: u64) -> f64 {
    (n.max(1) as f64).log10()
}

/// The largest 1, 2 or 5 × 10^k at or below `v` (at least 1).
fn nice_floor(v: f64) -> f64 {
    let mag = 10f64.powf(v.max(1.0).log10().floor());
    for m in [5.0, 2.0, 1.0] {
        if m * mag <= v {
            return m * mag;
        }
    }
    mag
}

/// Render `series` (the first is this run) as SVG text titled `title`.
pub fn svg(series: &[Series], title: &str) -> String {
    let non_empty: Vec<&Series> = series.iter().filter(|s| !s.hist.is_empty()).collect();
    let x_max = non_empty
        .iter()
        .map(|s| x_limit(s.hist.len()))
        .fold(1.0, f64::max)
        .ceil()
        .min(7.0);
    let v_min = non_empty
        .iter()
        .map(|s| s.hist.min())
        .min()
        .unwrap_or(1)
        .max(1) as f64;
    let v_max = non_empty.iter().map(|s| s.hist.max()).max().unwrap_or(1) as f64;
    let (y_lo, mut y_hi) = (nice_floor(v_min).log10(), nice_ceiling(v_max).log10());
    if y_hi <= y_lo {
        y_hi = y_lo + 1.0;
    }
    let px = |x: f64| LEFT + x / x_max * (W - LEFT - RIGHT);
    let py = |v: f64| {
        let l = v.max(1.0).log10();
        H - BOTTOM - (l - y_lo) / (y_hi - y_lo) * (H - TOP - BOTTOM)
    };

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="26" text-anchor="middle" font-size="15">{}</text>"#,
        W / 2.0,
        escape(title)
    );
    // x grid: one line per decade of 1 / (1 − q).
    for i in 0..=x_max as usize {
        let x = px(i as f64);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            H - BOTTOM,
            H - BOTTOM + 16.0,
            percentile_label(i)
        );
    }
    // y grid: 1, 2, 5 × 10^k µs inside the range, labelled in µs / ms / s.
    let mut tick = 10f64.powf(y_lo.floor());
    while tick <= 10f64.powf(y_hi) * 1.0001 {
        for m in [1.0, 2.0, 5.0] {
            let v = tick * m;
            if v.log10() < y_lo - 1e-9 || v.log10() > y_hi + 1e-9 {
                continue;
            }
            let y = py(v);
            let stroke = if m == 1.0 { "#ccc" } else { "#eee" };
            let _ = writeln!(
                s,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="{stroke}"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                W - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                fmt_tick(v.round() as u64)
            );
        }
        tick *= 10.0;
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">percentile (each line stops at 1 - 1/samples)</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - BOTTOM + 36.0
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">latency (log scale)</text>"#,
        H / 2.0,
        H / 2.0
    );

    for (idx, se) in non_empty.iter().enumerate() {
        let colour = COLOURS[idx % COLOURS.len()];
        let h = &se.hist;
        let limit = x_limit(h.len()).min(x_max);
        let steps = (limit * STEPS_PER_DECADE).ceil().max(1.0) as usize;
        let mut path = String::new();
        for i in 0..=steps {
            let x = limit * i as f64 / steps as f64;
            let v = h.value_at_quantile(1.0 - 10f64.powf(-x));
            let _ = write!(path, "{:.1},{:.1} ", px(x), py(v as f64));
        }
        let _ = writeln!(
            s,
            r#"<polyline class="series" data-label="{}" fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            escape(&se.label),
            path.trim_end()
        );
        // Marks: p50, p99, p99.9 where the sample count supports them, and max.
        let mut marks: Vec<(&str, f64, u64)> = [("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)]
            .iter()
            .filter(|(_, q)| x_of(*q) <= limit + 1e-9)
            .map(|&(name, q)| (name, x_of(q), h.value_at_quantile(q)))
            .collect();
        marks.push(("max", limit, h.max()));
        for (name, x, v) in marks {
            let (cx, cy) = (px(x), py(v as f64));
            // Labels of the first run above the line, of the others below;
            // below too where above would run into the title.
            let mut dy = if idx == 0 {
                -8.0
            } else {
                16.0 + 12.0 * (idx - 1) as f64
            };
            if cy + dy < TOP + 12.0 {
                dy = 16.0;
            }
            // The max label goes right of its point when there is room.
            let anchor = if name == "max" && cx + 90.0 > W - RIGHT {
                "end"
            } else {
                "start"
            };
            let _ = writeln!(
                s,
                r#"<circle class="mark" cx="{cx:.1}" cy="{cy:.1}" r="3.5" fill="{colour}"/><text x="{:.1}" y="{:.1}" fill="{colour}" text-anchor="{anchor}">{name} {}</text>"#,
                cx + if anchor == "end" { -4.0 } else { 4.0 },
                cy + dy,
                fmt_us(v)
            );
        }
    }

    // Legend, sized to its longest line (~6.6 px a character at 12 px).
    let legend: Vec<String> = non_empty
        .iter()
        .map(|se| {
            let h = &se.hist;
            format!(
                "{}: {} samples, p50 {}, p99 {}, max {}",
                se.label,
                h.len(),
                fmt_us(h.value_at_quantile(0.5)),
                fmt_us(h.value_at_quantile(0.99)),
                fmt_us(h.max())
            )
        })
        .collect();
    let longest = legend.iter().map(|l| l.chars().count()).max().unwrap_or(10) as f64;
    let rows = non_empty.len().max(1) as f64;
    // Bottom right: latency-by-percentile lines rise to the right, so that corner is free.
    let (legend_w, legend_h) = (
        (50.0 + 6.6 * longest).min(W - LEFT - RIGHT - 20.0),
        8.0 + 18.0 * rows,
    );
    let (lx, ly) = (W - RIGHT - 10.0 - legend_w, H - BOTTOM - 10.0 - legend_h);
    let _ = writeln!(
        s,
        r##"<rect class="legend" x="{lx:.1}" y="{ly:.1}" width="{legend_w:.0}" height="{legend_h}" fill="white" fill-opacity="0.85" stroke="#999"/>"##
    );
    if non_empty.is_empty() {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}">no samples</text>"#,
            lx + 10.0,
            ly + 18.0
        );
    }
    for (idx, line) in legend.iter().enumerate() {
        let colour = COLOURS[idx % COLOURS.len()];
        let y = ly + 14.0 + 18.0 * idx as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{colour}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 8.0,
            lx + 32.0,
            lx + 40.0,
            y + 4.0,
            escape(line)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// An axis tick (1, 2 or 5 × 10^k µs): `500 us`, `2 ms`, `1 s`.
fn fmt_tick(us: u64) -> String {
    match us {
        0..=999 => format!("{us} us"),
        1_000..=999_999 => format!("{} ms", us / 1000),
        _ => format!("{} s", us / 1_000_000),
    }
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

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::new_histogram;

    fn series(label: &str, n: u64, scale: u64) -> Series {
        let mut hist = new_histogram();
        for v in 1..=n {
            hist.record(v * scale / n + 50).unwrap();
        }
        Series {
            label: label.into(),
            hist,
        }
    }

    fn points(poly: roxmltree::Node) -> Vec<(f64, f64)> {
        poly.attribute("points")
            .unwrap()
            .split_whitespace()
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn labels_and_scale() {
        assert_eq!(percentile_label(0), "0%");
        assert_eq!(percentile_label(1), "90%");
        assert_eq!(percentile_label(2), "99%");
        assert_eq!(percentile_label(3), "99.9%");
        assert_eq!(percentile_label(5), "99.999%");
        assert_eq!(nice_floor(730.0), 500.0);
        assert_eq!(nice_floor(1200.0), 1000.0);
        assert_eq!(x_limit(1000), 3.0);
        assert!((x_of(0.99) - 2.0).abs() < 1e-9);
    }

    /// Parse the SVG as XML and check what a reader relies on: one line per
    /// run inside the plot area, non-decreasing latency, each line stopping
    /// where its sample count stops, marks and a legend naming every run.
    #[test]
    fn svg_parses_and_overlays_runs() {
        let runs = [
            series("shardstream <0.1>", 100_000, 5_000),
            series("redis 7.0.15", 100, 2_000_000),
        ];
        let text = svg(&runs, "XADD -> XREADGROUP latency, closed loop & more");
        let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        assert_eq!(root.attribute("viewBox"), Some("0 0 900 540"));
        let lines: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].attribute("data-label"), Some("shardstream <0.1>"));
        let (a, b) = (points(lines[0]), points(lines[1]));
        for pts in [&a, &b] {
            for w in pts.windows(2) {
                assert!(w[1].0 > w[0].0, "x increases");
                assert!(w[1].1 <= w[0].1 + 1e-9, "latency never decreases");
            }
            for &(x, y) in pts.iter() {
                assert!(
                    (LEFT..=W - RIGHT).contains(&x) && (TOP - 0.5..=H - BOTTOM + 0.5).contains(&y)
                );
            }
        }
        // 100 samples reach 99% (x = 2 of 5 decades); 100 000 reach 99.999%.
        assert!((a.last().unwrap().0 - px_of(5.0, 5.0)).abs() < 0.2);
        assert!((b.last().unwrap().0 - px_of(2.0, 5.0)).abs() < 0.2);
        let texts: Vec<String> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(str::to_string))
            .collect();
        let has = |p: &str| texts.iter().any(|t| t.starts_with(p));
        assert!(has("XADD -> XREADGROUP latency, closed loop & more"));
        assert!(has("p50 ") && has("p99 ") && has("p99.9 ") && has("max "));
        assert!(has("shardstream <0.1>: 100000 samples, p50 "), "{texts:?}");
        assert!(has("redis 7.0.15: 100 samples"));
        assert!(has("99.999%"));
        // The 100-sample run gets no p99.9 mark: 2 runs × (p50, p99, max) + p99.9 once.
        let marks = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("mark"))
            .count();
        assert_eq!(marks, 7);
        // Log y axis: decade labels, and the top is near the max (2 s), not far above.
        assert!(
            has("50 us") && has("1 ms") && has("1 s") && has("5 s"),
            "{texts:?}"
        );
        assert!(!has("10 s"), "{texts:?}");
    }

    fn px_of(x: f64, x_max: f64) -> f64 {
        LEFT + x / x_max * (W - LEFT - RIGHT)
    }

    #[test]
    fn empty_histogram_still_renders() {
        let text = svg(
            &[Series {
                label: "none".into(),
                hist: new_histogram(),
            }],
            "t",
        );
        let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
        assert!(doc.descendants().any(|n| n.text() == Some("no samples")));
    }

    #[test]
    fn compare_reads_json_and_hlog() {
        let dir = std::env::temp_dir();
        let run = series("x", 1000, 3000);
        let json = dir.join(format!("loadgen-cmp-{}.json", std::process::id()));
        let body = serde_json::json!({
            "label": "redis 7.0.15",
            "histogram": crate::report::encode_histogram(&run.hist),
        });
        std::fs::write(&json, body.to_string()).unwrap();
        let s = load_compare(&json).unwrap();
        assert_eq!(s.label, "redis 7.0.15");
        assert_eq!(s.hist.len(), 1000);
        let hlog = dir.join(format!("loadgen-cmp-{}.hlog", std::process::id()));
        crate::report::write_hdr(
            &hlog,
            &[run.hist.clone(), run.hist.clone()],
            std::time::SystemTime::now(),
        )
        .unwrap();
        let s = load_compare(&hlog).unwrap();
        assert_eq!(s.hist.len(), 2000);
        assert!(s.label.starts_with("loadgen-cmp-"));
        std::fs::write(&json, "{}").unwrap();
        assert!(load_compare(&json)
            .unwrap_err()
            .contains("no \"histogram\""));
        let _ = std::fs::remove_file(json);
        let _ = std::fs::remove_file(hlog);
    }
}
