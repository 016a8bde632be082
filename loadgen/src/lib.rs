//! loadgen: end-to-end XADD → XREADGROUP latency, against shardstream or any Redis.
//!
//! # Layout
//! - [`cli`]: options of the latency test and of `loadgen xadd`.
//! - [`target`]: connections, CLUSTER SLOTS routing, MOVED.
//! - [`latency`]: the run: setup, threads on one clock, drain, exactly-once check.
//! - [`producer`]: paced XADD carrying the scheduled send time (no coordinated omission).
//! - [`consumer`]: XREADGROUP BLOCK + XACK, latency into a per-thread histogram.
//! - [`pack`]: pipelines packed into one reused buffer.
//! - [`seen`]: per-producer bitmaps for lost/duplicate detection.
//! - [`verdict`]: OK / SATURATED / FAILED from the counts (pure).
//! - [`report`]: the docs' bucket table, percentiles, JSON, HdrHistogram log.
//! - [`plot`]: latency-by-percentile SVG.
//! - [`xadd`]: throughput mode.
//! - [`delayed`]: delayed-delivery accuracy mode (XSCHEDULE).
//! - [`progress`]: live rate and p99.
//! - [`redact`]: passwords out of every output.

pub mod cli;
pub mod consumer;
pub mod delayed;
pub mod latency;
pub mod pack;
pub mod plot;
pub mod producer;
pub mod progress;
pub mod redact;
pub mod reply;
pub mod report;
pub mod seen;
pub mod target;
pub mod verdict;
pub mod xadd;

use cli::TargetArgs;
use shardstream::server::ServerHandle;

/// Where a run goes: a URL plus, for the embedded default, the server to stop afterwards.
pub struct Resolved {
    pub url: String,
    /// Shown in reports; never holds a password.
    pub desc: String,
    pub embedded: Option<ServerHandle>,
}

/// The URL given, or (with no target) shardstream started in-process on 127.0.0.1:0.
pub fn resolve(target: &TargetArgs) -> Result<Resolved, String> {
    if let Some(url) = target.url() {
        return Ok(Resolved {
            desc: redact::redact_url(&url),
            url,
            embedded: None,
        });
    }
    let mut config = shardstream::config::Config {
        bind: "127.0.0.1".into(),
        port: 0,
        pin: false,
        dir: std::env::temp_dir().join(format!("loadgen-embedded-{}", std::process::id())),
        // A throwaway in-process server: no append-only files (as before AOF existed).
        appendonly: false,
        // `--cluster` routes by CLUSTER SLOTS: present a one-node cluster.
        cluster_emulated: target.cluster,
        ..shardstream::config::Config::default()
    };
    if let Some(s) = target.embedded_shards {
        config.shards = s.max(1);
    }
    let shards = config.shards;
    // `port 0` means "no TCP" to the server (as in Redis): bind a free
    // loopback port here and hand it over.
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("binding a port for embedded shardstream: {e}"))?;
    let handle = shardstream::server::start_on(config, listener)
        .map_err(|e| format!("starting embedded shardstream: {e}"))?;
    let addr = handle.addr();
    Ok(Resolved {
        url: format!("redis://{addr}/"),
        desc: format!(
            "embedded shardstream at {addr} ({shards} shard{})",
            if shards == 1 { "" } else { "s" }
        ),
        embedded: Some(handle),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolved_target_and_config_hide_the_password() {
        use clap::Parser;
        let url = "redis://:hunter2@127.0.0.1:1/";
        let cli = cli::Cli::parse_from(["loadgen", "--url", url]);
        let t = resolve(&cli.latency.target).unwrap();
        assert_eq!(t.url, url, "the connection still uses the password");
        assert_eq!(t.desc, "redis://:***@127.0.0.1:1/");
        let json = serde_json::to_string(&cli.latency).unwrap();
        assert!(
            !json.contains("hunter2") && json.contains(":***@"),
            "{json}"
        );
    }
}
