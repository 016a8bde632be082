//! `loadgen`: clap → run → print; exit 1 if the exactly-once check failed, 2 on setup errors.

use clap::Parser;

use loadgen::cli::{Cli, Mode};
use loadgen::{latency, plot, report, resolve, xadd};

fn main() {
    let cli = Cli::parse();
    let code = match cli.mode {
        Some(Mode::Xadd(args)) => run_xadd(&args),
        None => run_latency(&cli.latency),
    };
    std::process::exit(code);
}

fn run_latency(args: &loadgen::cli::LatencyArgs) -> i32 {
    let target = match resolve(&args.target) {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    let result = latency::run(args, &target.url, target.desc.clone());
    if let Some(h) = target.embedded {
        h.shutdown();
    }
    let (rep, hist) = match result {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    print!("{}", rep.render());
    let mut code = if rep.passed { 0 } else { 1 };
    if let Some(p) = &args.json {
        if let Err(e) = report::write_json(p, &rep) {
            code = fail(&e);
        }
    }
    if let Some(p) = &args.hdr {
        if let Err(e) = report::write_hdr(p, &hist, rep.totals.elapsed_s) {
            code = fail(&e);
        }
    }
    if let Some(p) = &args.plot {
        let title = format!(
            "XADD -> XREADGROUP latency, {} entries/s, {}",
            args.rate, rep.target
        );
        if let Err(e) = std::fs::write(p, plot::svg(&hist, &title)) {
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
        Err(e) => return fail(&e),
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

fn fail(msg: &str) -> i32 {
    eprintln!("loadgen: {msg}");
    2
}
