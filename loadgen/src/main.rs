//! `loadgen`: clap → run → print. Exit 0 OK, 1 FAILED (lost, duplicated, errors),
//! 2 setup errors, 3 SATURATED (nothing lost, but the run fell behind its target).

use clap::Parser;

use loadgen::cli::{Cli, Mode};
use loadgen::{latency, plot, report, resolve, xadd};

fn main() {
    let cli = Cli::parse();
    let code = match cli.mode {
        Some(Mode::Xadd(args)) => run_xadd(&args),
        Some(Mode::Delayed(args)) => run_delayed(&args),
        None => run_latency(&cli.latency),
    };
    std::process::exit(code);
}

fn run_latency(args: &loadgen::cli::LatencyArgs) -> i32 {
    // Read the runs to overlay first: a typo should not cost a whole run.
    let mut series = Vec::new();
    for p in &args.compare {
        match plot::load_compare(p) {
            Ok(s) => series.push(s),
            Err(e) => return fail(&e),
        }
    }
    let target = match resolve(&args.target) {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    let result = latency::run(args, &target.url, target.desc.clone());
    if let Some(h) = target.embedded {
        h.shutdown();
    }
    let run = match result {
        Ok(r) => r,
        Err(e) => return fail(&format!("{}: {e}", target.desc)),
    };
    let rep = &run.report;
    print!("{}", rep.render());
    let mut code = rep.exit_code();
    if let Some(p) = &args.json {
        if let Err(e) = report::write_json(p, rep) {
            code = fail(&e);
        }
    }
    if let Some(p) = &args.hdr {
        if let Err(e) = report::write_hdr(p, &run.per_second, run.window_start) {
            code = fail(&e);
        }
    }
    if let Some(p) = &args.plot {
        let rate = if args.rate == 0 {
            format!("closed loop, {:.0} entries/s delivered", rep.rate_delivered)
        } else {
            format!("{} entries/s target", args.rate)
        };
        // With runs to compare, the legend names them; alone, say what was measured.
        let against = if series.is_empty() {
            format!(", {}", rep.target)
        } else {
            String::new()
        };
        let title = format!(
            "XADD -> XREADGROUP latency, {rate}, {} stream(s){against}",
            args.streams
        );
        series.insert(
            0,
            plot::Series {
                label: rep.label.clone(),
                hist: run.hist.clone(),
            },
        );
        if let Err(e) = std::fs::write(p, plot::svg(&series, &title)) {
            code = fail(&format!("{}: {e}", p.display()));
        }
    }
    code
}

fn run_xadd(args: &loadgen::cli::XaddArgs) -> i32 {
    let target = match resolve(&args.target) {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    let result = xadd::run(args, &target.url, target.desc.clone());
    if let Some(h) = target.embedded {
        h.shutdown();
    }
    let rep = match result {
        Ok(r) => r,
        Err(e) => return fail(&format!("{}: {e}", target.desc)),
    };
    print!("{}", rep.render());
    let mut code = if rep.errors == 0 { 0 } else { 1 };
    if let Some(p) = &args.json {
        if let Err(e) = report::write_json(p, &rep) {
            code = fail(&e);
        }
    }
    code
}

fn run_delayed(args: &loadgen::cli::DelayedArgs) -> i32 {
    let target = match resolve(&args.target) {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    let result = loadgen::delayed::run(args, &target.url, target.desc.clone());
    if let Some(h) = target.embedded {
        h.shutdown();
    }
    let rep = match result {
        Ok(r) => r,
        Err(e) => return fail(&format!("{}: {e}", target.desc)),
    };
    print!("{}", rep.render());
    let mut code = rep.exit_code();
    if let Some(p) = &args.json {
        if let Err(e) = report::write_json(p, &rep) {
            code = fail(&e);
        }
    }
    code
}

fn fail(msg: &str) -> i32 {
    eprintln!("loadgen: {msg}");
    2
}
