//! The `shardstream` binary: command line → configuration → server.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;

use shardstream::config::{Cli, Config};

fn main() {
    // A panic in any shard thread or the acceptor would leave a half-dead server whose
    // clients hang: log it and exit non-zero instead. (server::start installs
    // the same for server threads when the library is embedded.)
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        eprintln!("shardstream: fatal: a thread panicked; exiting");
        std::process::exit(shardstream::server::PANIC_EXIT_CODE);
    }));
    let cli = Cli::parse();
    let (config, warnings) = match Config::from_cli(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("shardstream: {e}");
            std::process::exit(1);
        }
    };
    for w in warnings {
        eprintln!("shardstream: warning: {w}");
    }
    let (bind, port, shards) = (config.bind.clone(), config.port, config.shards);
    let handle = match shardstream::server::start(config) {
        Ok(h) => h,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            eprintln!("shardstream: {e}");
            std::process::exit(1);
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            eprintln!("shardstream: cannot start: {e}");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("shardstream: cannot listen on {bind}:{port}: {e}");
            std::process::exit(1);
        }
    };
    eprintln!(
        "shardstream {} ready on {} with {shards} shards (pid {})",
        env!("CARGO_PKG_VERSION"),
        handle.addr(),
        std::process::id()
    );
    let term = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, term.clone());
    }
    let shared = handle.shared.clone();
    while !term.load(Ordering::SeqCst) && !shared.shutdown.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("shardstream: shutting down");
    handle.shutdown();
}
