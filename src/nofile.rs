//! The open files limit and `maxclients`: each client costs a file
//! descriptor, so the soft `RLIMIT_NOFILE` must leave room for `maxclients`
//! of them plus the server's own. Follows Redis's `adjustOpenFilesLimit`
//! (at start) and `updateMaxclients` (CONFIG SET), redis/src/server.c and
//! config.c.

/// File descriptors the server needs besides its clients': Redis reserves
/// 32 (`CONFIG_MIN_RESERVED_FDS`); each shard thread adds its poll, its
/// waker and its append only file (about 3 measured with 125 shards, AOF on).
pub fn reserved_fds(shards: u16) -> u64 {
    32 + 4 * u64::from(shards)
}

/// What [`fit`] could do for `maxclients` clients.
#[derive(Debug)]
pub enum Fit {
    /// The limit was already high enough.
    Enough,
    /// The soft limit was raised from `from` to `to`.
    Raised { from: u64, to: u64 },
    /// The limit stays at `limit`, room for only `maxclients` clients
    /// (at least 1); `error` is why it could not be raised.
    Short {
        limit: u64,
        maxclients: usize,
        error: Option<std::io::Error>,
    },
    /// `limit` does not even cover the reserve: the server cannot run.
    TooLow { limit: u64 },
    /// `getrlimit` failed.
    Unknown(std::io::Error),
}

/// Raise the soft `RLIMIT_NOFILE` to `maxclients` plus [`reserved_fds`], or
/// as close to it as the system allows: after a refusal, from the kernel's
/// `fs.nr_open` down, 16 at a time (Redis's step), never below the current
/// limit. The hard limit is raised too where the process may. A raise is
/// logged with Redis's line ("Increased maximum number of open files ...").
pub fn fit(maxclients: usize, shards: u16) -> Fit {
    let reserved = reserved_fds(shards);
    let needed = maxclients as u64 + reserved;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Fit::Unknown(std::io::Error::last_os_error());
    }
    let old = lim.rlim_cur;
    if old >= needed {
        return Fit::Enough;
    }
    // No process may go past `fs.nr_open`: after a refusal the descent
    // starts there rather than 16 at a time from a huge maxclients.
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(u64::MAX);
    let mut best = needed;
    let mut error = None;
    while best > old {
        let want = libc::rlimit {
            rlim_cur: best,
            rlim_max: lim.rlim_max.max(best),
        };
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
            break;
        }
        error = Some(std::io::Error::last_os_error());
        best = best.saturating_sub(16).min(nr_open).max(old);
    }
    if best >= needed {
        log::info!(
            "Increased maximum number of open files to {best} (it was originally set to {old})."
        );
        Fit::Raised {
            from: old,
            to: best,
        }
    } else if best <= reserved {
        Fit::TooLow { limit: best }
    } else {
        Fit::Short {
            limit: best,
            maxclients: (best - reserved) as usize,
            error,
        }
    }
}
