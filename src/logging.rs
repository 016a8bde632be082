//! The server log, in Redis's format, through the `log` crate (with `fern`).
//!
//! Server code logs with `log::warn!`/`info!`/`debug!`/`trace!`; the binary
//! installs [`init`], which writes each record as Redis does:
//!
//! ```text
//! 12345:M 01 Dec 2026 02:51:07.889 * Ready to accept connections tcp
//! ```
//!
//! pid, role (`M`, the only role here), local time with milliseconds, a level
//! mark and the message. Redis's levels map onto `log`'s: warning `#` (error
//! and warn), notice `*` (info), verbose `-` (debug), debug `.` (trace).
//! `loglevel` chooses the least important level written (CONFIG SET changes
//! it at once); `logfile` is the file appended to, standard error when empty.
//! A library embedding the server (tests, loadgen) installs no logger, so
//! the records go nowhere unless it installs one.
//!
//! # Source
//! `serverLogRaw`, redis/src/server.c (7.x).

use crate::config::{Config, LogLevel};

/// Install the process-wide logger for `cfg`'s `logfile` and `loglevel`.
///
/// # Errors
/// The log file cannot be opened for appending, or a logger is already installed.
pub fn init(cfg: &Config) -> Result<(), String> {
    let pid = std::process::id();
    let dispatch = fern::Dispatch::new()
        .format(move |out, message, record| {
            out.finish(format_args!(
                "{pid}:M {} {} {message}",
                timestamp(),
                mark(record.level())
            ))
        })
        .level(log::LevelFilter::Trace);
    let dispatch = if cfg.logfile.is_empty() {
        dispatch.chain(std::io::stderr())
    } else {
        let file = fern::log_file(&cfg.logfile)
            .map_err(|e| format!("Can't open the log file {}: {e}", cfg.logfile))?;
        dispatch.chain(file)
    };
    dispatch
        .apply()
        .map_err(|e| format!("cannot install the logger: {e}"))?;
    set_level(cfg.loglevel);
    Ok(())
}

/// Apply a `loglevel` to the installed logger (start-up and CONFIG SET).
pub fn set_level(level: LogLevel) {
    log::set_max_level(level.filter());
}

/// Redis's level mark for a record's level.
fn mark(level: log::Level) -> char {
    match level {
        log::Level::Error | log::Level::Warn => '#',
        log::Level::Info => '*',
        log::Level::Debug => '-',
        log::Level::Trace => '.',
    }
}

/// Local time as Redis prints it: `01 Dec 2026 02:51:07.889`.
fn timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    // SAFETY: `tm` is plain data (all-zero is valid) and localtime_r only
    // writes into it; `secs` outlives the call.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return format!("{}.{:03}", now.as_secs(), now.subsec_millis());
        }
        tm
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        tm.tm_mday,
        MONTHS[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        now.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_looks_like_redis() {
        let t = timestamp();
        // "01 Dec 2026 02:51:07.889"
        let parts: Vec<&str> = t.split(' ').collect();
        assert_eq!(parts.len(), 4, "{t}");
        assert_eq!(parts[0].len(), 2);
        assert_eq!(parts[1].len(), 3);
        assert_eq!(parts[3].len(), 12, "{t}");
    }

    #[test]
    fn levels_map_to_redis_marks() {
        assert_eq!(mark(log::Level::Warn), '#');
        assert_eq!(mark(log::Level::Info), '*');
        assert_eq!(mark(log::Level::Debug), '-');
        assert_eq!(mark(log::Level::Trace), '.');
        assert_eq!(LogLevel::Notice.filter(), log::LevelFilter::Info);
    }
}
