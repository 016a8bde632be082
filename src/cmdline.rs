//! redis-server's command line: `shardstream [config-file] [--directive value ...] [-]`.
//!
//! Scripts, CI jobs, compose files and service units start Redis with
//! command lines such as
//! `redis-server --port 0 --unixsocket /tmp/r.sock --save "" --appendonly no`;
//! shardstream takes the same ones. Every directive a config file accepts
//! may be given as `--name value...`, and is applied after the file, in
//! order, exactly as if it were a line appended to it.
//!
//! How the arguments become directives (redis-server 7.x's documented and
//! observed behaviour, checked against redis-server 7.0.15):
//! * the first argument is a config file unless it starts with `-`; `-`
//!   (first or last) reads more directives from standard input;
//! * `--name` starts a directive; the following arguments are its values,
//!   each one word even if it holds spaces (`--requirepass "a b"`), `""` an
//!   empty one, until the next `--name`;
//! * an argument that starts with `--` right after a `--name` that has no
//!   value yet is that value (`--port --foo` sets port to `--foo`, which
//!   then fails), except after `--save`, which alone means `save ""`, and
//!   after shardstream's flag `--no-pin`, which alone means `no-pin yes`;
//! * a single argument holding name and values (`"--port 7000"`) is split
//!   as a config line;
//! * `-h`/`--help` and `-v`/`--version` as the first argument print and exit.
//!
//! Clap, which parsed the command line before, cannot express these rules
//! (values that start with `--`, any number of values per flag, names known
//! only to [`Config::apply_directive`]), so the parser is written by hand.
//!
//! # Source
//! `main` argument handling and `loadServerConfigFromString`,
//! redis/src/server.c and redis/src/config.c (7.x); `sdssplitargs`,
//! redis/src/sds.c for config-line quoting.

use std::io::Read;
use std::path::PathBuf;

use crate::config::Config;

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    /// Print usage and exit 0.
    Help,
    /// Print the version and exit 0.
    Version,
    /// Run a server with this configuration.
    Run(Box<Startup>),
}

/// A configuration built from the command line, and what to report about it.
#[derive(Debug)]
pub struct Startup {
    pub config: Config,
    /// The config file given, if any (INFO `config_file`).
    pub config_file: Option<PathBuf>,
    /// Ignored directives and deprecated settings, to log at start.
    pub warnings: Vec<String>,
}

/// One directive from the command line: `--name args...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgDirective {
    pub name: String,
    pub args: Vec<String>,
}

/// Usage text (`--help`).
pub const USAGE: &str = "\
Usage: shardstream [/path/to/redis.conf] [options] [-]
       shardstream -v or --version
       shardstream -h or --help

A Redis-compatible server for Redis Streams: a shared-nothing engine with one
thread per shard. Options are redis.conf directives given as --name value
(several values allowed, \"\" for an empty one), applied after the config file;
`-` reads more directives from standard input.

Examples:
       shardstream                      (listen on 127.0.0.1:6379)
       shardstream /etc/shardstream.conf
       shardstream --port 7777 --shards 4
       shardstream --port 0 --unixsocket /tmp/redis.sock --unixsocketperm 700 \\
                   --save \"\" --appendonly no --dir /tmp
       shardstream /etc/shardstream.conf --loglevel verbose -

Some directives (see the README, \"Command line and configuration\"):
       --bind ADDR --port N (0 = no TCP) --unixsocket PATH --unixsocketperm OCTAL
       --shards N --pin-threads yes|no --cluster-config FILE
       --dir DIR --appendonly yes|no --appendfsync always|everysec|no
       --requirepass PASS --maxclients N --maxmemory BYTES --databases N
       --logfile FILE --loglevel debug|verbose|notice|warning --pidfile FILE
";

/// Parse the arguments after the program name and build the configuration
/// (reading the config file and standard input when asked).
///
/// # Errors
/// A message for the user: an unreadable file, or the first bad directive
/// with where it came from (file line or command-line option).
pub fn parse(args: &[String]) -> Result<Invocation, String> {
    match args.first().map(String::as_str) {
        Some("-h" | "--help") => return Ok(Invocation::Help),
        Some("-v" | "--version") => return Ok(Invocation::Version),
        _ => {}
    }
    let mut rest = args;
    let mut config_file = None;
    let mut stdin = false;
    if let Some(first) = rest.first() {
        if first == "-" {
            stdin = true;
            rest = &rest[1..];
        } else if !first.starts_with('-') {
            config_file = Some(PathBuf::from(first));
            rest = &rest[1..];
        }
    }
    if rest.last().is_some_and(|a| a == "-") {
        stdin = true;
        rest = &rest[..rest.len() - 1];
    }
    let directives = split_directives(rest)?;

    let mut config = Config::default();
    let mut warnings = Vec::new();
    if let Some(path) = &config_file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "Fatal error, can't open config file '{}': {e}",
                path.display()
            )
        })?;
        let w = config.apply_file_text(&text).map_err(|e| {
            fatal(&format!(
                "Reading the configuration file {}, {e}",
                path.display()
            ))
        })?;
        warnings.extend(w.into_iter().map(|w| format!("{}: {w}", path.display())));
    }
    if stdin {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read directives from standard input: {e}"))?;
        let w = config
            .apply_file_text(&text)
            .map_err(|e| fatal(&format!("Reading standard input, {e}")))?;
        warnings.extend(w.into_iter().map(|w| format!("stdin: {w}")));
    }
    for d in &directives {
        match config.apply_directive(&d.name, &d.args) {
            Ok(Some(w)) => warnings.push(format!("--{}: {w}", d.name)),
            Ok(None) => {}
            Err(why) => {
                return Err(fatal(&format!(
                    "Reading the command line, at option --{}\n>>> '{}'\n{why}",
                    d.name,
                    d.display()
                )))
            }
        }
    }
    warnings.extend(config.check_startup()?);
    config.config_file.clone_from(&config_file);
    Ok(Invocation::Run(Box::new(Startup {
        config,
        config_file,
        warnings,
    })))
}

/// Redis's banner for configuration errors, around `body`.
fn fatal(body: &str) -> String {
    format!(
        "\n*** FATAL CONFIG FILE ERROR (shardstream {}) ***\n{body}",
        env!("CARGO_PKG_VERSION")
    )
}

impl ArgDirective {
    /// The directive as a config line, values quoted (`port "0" "extra"`).
    pub fn display(&self) -> String {
        let mut out = self.name.clone();
        for a in &self.args {
            out.push_str(&format!(" {a:?}"));
        }
        out
    }
}

/// Directives shardstream lets stand alone on the command line, meaning
/// `yes` (`--no-pin`), or, for `--save`, an empty schedule.
const VALUELESS: &[&str] = &["no-pin", "save"];

/// Group command-line arguments (after the config file) into directives,
/// by the rules in the module documentation.
///
/// # Errors
/// Unbalanced quotes in a single `"--name value"` argument.
pub fn split_directives(args: &[String]) -> Result<Vec<ArgDirective>, String> {
    let mut out: Vec<ArgDirective> = Vec::new();
    // Whether the directive being filled may still take a `--` word as its
    // first value (it has no value yet and is not a stand-alone flag).
    let mut wants_value = false;
    for arg in args {
        let is_option = arg.starts_with("--") && arg.len() > 2;
        if is_option && !wants_value {
            let body = &arg[2..];
            if body.contains(char::is_whitespace) {
                // "--port 7000" in one argument: a whole config line.
                let words = split_config_line(body)?;
                if let Some((name, rest)) = words.split_first() {
                    out.push(ArgDirective {
                        name: name.to_ascii_lowercase(),
                        args: rest.to_vec(),
                    });
                    wants_value = rest.is_empty();
                    continue;
                }
            }
            let name = body.to_ascii_lowercase();
            wants_value = !VALUELESS.contains(&name.as_str());
            out.push(ArgDirective {
                name,
                args: Vec::new(),
            });
            continue;
        }
        wants_value = false;
        match out.last_mut() {
            Some(d) => d.args.push(arg.clone()),
            // A word before any `--name`: it is a directive name, as in a
            // config line (and so an error unless it is one).
            None => out.push(ArgDirective {
                name: arg.to_ascii_lowercase(),
                args: Vec::new(),
            }),
        }
    }
    // `--save --port 0`: the stand-alone flag ended up with no value, which
    // `Config::apply_directive` reads as `save ""` / `no-pin yes`.
    Ok(out)
}

/// Split one config line into words as Redis does: spaces separate words;
/// `"..."` allows spaces and the escapes `\n \r \t \b \a \\ \" \xHH`;
/// `'...'` allows spaces and only `\'`; a closing quote must be followed by
/// a space or the end of the line.
///
/// # Errors
/// `Unbalanced quotes in configuration line`, Redis's text.
/// # Source
/// `sdssplitargs`, redis/src/sds.c.
pub fn split_config_line(line: &str) -> Result<Vec<String>, String> {
    let unbalanced = || "Unbalanced quotes in configuration line".to_string();
    let b = line.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            return Ok(words);
        }
        let mut cur: Vec<u8> = Vec::new();
        let (mut in_dq, mut in_sq) = (false, false);
        loop {
            if in_dq {
                let Some(&c) = b.get(i) else {
                    return Err(unbalanced());
                };
                if c == b'\\' && b.get(i + 1) == Some(&b'x') {
                    let hex = b
                        .get(i + 2..i + 4)
                        .and_then(|h| std::str::from_utf8(h).ok())
                        .and_then(|h| u8::from_str_radix(h, 16).ok());
                    if let Some(v) = hex {
                        cur.push(v);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < b.len() {
                    cur.push(match b[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                    i += 2;
                    continue;
                }
                if c == b'"' {
                    if b.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                        return Err(unbalanced());
                    }
                    i += 1;
                    break;
                }
                cur.push(c);
                i += 1;
            } else if in_sq {
                let Some(&c) = b.get(i) else {
                    return Err(unbalanced());
                };
                if c == b'\\' && b.get(i + 1) == Some(&b'\'') {
                    cur.push(b'\'');
                    i += 2;
                    continue;
                }
                if c == b'\'' {
                    if b.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                        return Err(unbalanced());
                    }
                    i += 1;
                    break;
                }
                cur.push(c);
                i += 1;
            } else {
                match b.get(i) {
                    None => break,
                    Some(c) if c.is_ascii_whitespace() => break,
                    Some(b'"') => in_dq = true,
                    Some(b'\'') => in_sq = true,
                    Some(&c) => cur.push(c),
                }
                i += 1;
            }
        }
        words.push(String::from_utf8_lossy(&cur).into_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    fn run(s: &[&str]) -> Result<Startup, String> {
        match parse(&argv(s))? {
            Invocation::Run(st) => Ok(*st),
            other => panic!("{other:?}"),
        }
    }

    fn d(name: &str, args: &[&str]) -> ArgDirective {
        ArgDirective {
            name: name.into(),
            args: argv(args),
        }
    }

    #[test]
    fn the_lab_command_line() {
        let st = run(&[
            "--port",
            "0",
            "--unixsocket",
            "/tmp/x/redis.sock",
            "--unixsocketperm",
            "700",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            "/tmp/x",
            "--maxmemory-policy",
            "noeviction",
        ])
        .unwrap();
        let c = st.config;
        assert_eq!(c.port, 0);
        assert_eq!(c.unixsocket, Some(PathBuf::from("/tmp/x/redis.sock")));
        assert_eq!(c.unixsocketperm, 0o700);
        assert!(!c.appendonly);
        assert_eq!(c.dir, PathBuf::from("/tmp/x"));
        assert!(st.warnings.is_empty(), "{:?}", st.warnings);
    }

    /// As redis-server 7.0.15 groups them (checked by running it).
    #[test]
    fn grouping_follows_redis_server() {
        let g = |s: &[&str]| split_directives(&argv(s)).unwrap();
        assert_eq!(
            g(&["--save", "900", "1", "300", "10", "--port", "0"]),
            [d("save", &["900", "1", "300", "10"]), d("port", &["0"])]
        );
        // A bare --save before another option, or last, is `save ""`.
        assert_eq!(
            g(&["--save", "--port", "0"]),
            [d("save", &[]), d("port", &["0"])]
        );
        assert_eq!(
            g(&["--port", "0", "--save"]),
            [d("port", &["0"]), d("save", &[])]
        );
        // Any other bare option takes the next argument, even `--x`.
        assert_eq!(
            g(&["--port", "--logfile", "x"]),
            [d("port", &["--logfile", "x"])]
        );
        // Our flag --no-pin stands alone.
        assert_eq!(
            g(&["--no-pin", "--shards", "2"]),
            [d("no-pin", &[]), d("shards", &["2"])]
        );
        // Values keep their spaces; "" is an empty value.
        assert_eq!(
            g(&["--requirepass", "a b", "--logfile", ""]),
            [d("requirepass", &["a b"]), d("logfile", &[""])]
        );
        // Name and value in one argument.
        assert_eq!(g(&["--port 7000"]), [d("port", &["7000"])]);
        // Names are case-insensitive; negative numbers are values.
        assert_eq!(g(&["--PORT", "-1"]), [d("port", &["-1"])]);
    }

    #[test]
    fn errors_name_the_directive() {
        let e = run(&["--foo", "bar"]).unwrap_err();
        assert!(e.contains("--foo") && e.contains("Bad directive"), "{e}");
        let e = run(&["--port", "0", "extra"]).unwrap_err();
        assert!(
            e.contains("port \"0\" \"extra\"") && e.contains("wrong number of arguments"),
            "{e}"
        );
        let e = run(&["--port"]).unwrap_err();
        assert!(e.contains("wrong number of arguments"), "{e}");
        let e = run(&["--unixsocketperm", "999"]).unwrap_err();
        assert!(e.contains("octal"), "{e}");
        let e = run(&["--loglevel", "blah"]).unwrap_err();
        assert!(e.contains("debug, verbose, notice, warning"), "{e}");
        let e = run(&["--save", "900", "1"]).unwrap_err();
        assert!(e.contains("snapshots") && e.contains("appendonly"), "{e}");
        let e = run(&["--daemonize", "yes"]).unwrap_err();
        assert!(e.contains("daemonize yes is not supported"), "{e}");
        let e = run(&["--rename-command", "FLUSHALL", ""]).unwrap_err();
        assert!(e.contains("rename-command"), "{e}");
        let e = run(&["--shards", "0"]).unwrap_err();
        assert!(e.contains("shards"), "{e}");
    }

    #[test]
    fn accepted_and_ignored_directives() {
        let st = run(&[
            "--daemonize",
            "no",
            "--supervised",
            "systemd",
            "--protected-mode",
            "no",
            "--io-threads",
            "4",
            "--hz",
            "50",
            "--activerehashing",
            "yes",
            "--save",
            "--loglevel",
            "warning",
            "--no-pin",
        ])
        .unwrap();
        assert!(!st.config.pin);
        assert!(!st.config.protected_mode);
        assert_eq!(st.config.supervised, "systemd");
        assert_eq!(st.config.loglevel, crate::config::LogLevel::Warning);
        assert_eq!(st.config.hz, 50);
        assert_eq!(st.warnings.len(), 2, "{:?}", st.warnings);
        assert!(st.warnings.iter().any(|w| w.contains("'activerehashing'")));
        assert!(st.warnings.iter().any(|w| w.contains("io-threads 4")));
    }

    #[test]
    fn pinning_is_opt_in() {
        let run = |args: &[&str]| match parse(&argv(args)).unwrap() {
            Invocation::Run(st) => st.config.pin,
            _ => panic!("not a run"),
        };
        assert!(!run(&["--port", "7000"]));
        assert!(run(&["--pin-threads", "yes"]));
        assert!(!run(&["--pin-threads", "yes", "--no-pin"]));
        let cfg = match parse(&argv(&["--pin-threads", "yes"])).unwrap() {
            Invocation::Run(st) => st.config,
            _ => panic!("not a run"),
        };
        assert_eq!(cfg.get("pin-threads").as_deref(), Some("yes"));
        assert!(parse(&argv(&["--pin-threads", "maybe"])).is_err());
    }

    #[test]
    fn help_and_version() {
        assert!(matches!(parse(&argv(&["--help"])), Ok(Invocation::Help)));
        assert!(matches!(parse(&argv(&["-v"])), Ok(Invocation::Version)));
    }

    #[test]
    fn config_file_then_options() {
        let path = std::env::temp_dir().join(format!("ss-cmdline-{}.conf", std::process::id()));
        std::fs::write(&path, "port 7000\nrequirepass \"s 3\"\nshards 2\n").unwrap();
        let st = run(&[path.to_str().unwrap(), "--port", "7001"]).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(st.config.port, 7001);
        assert_eq!(st.config.shards, 2);
        assert_eq!(st.config.requirepass.as_deref(), Some("s 3"));
        assert_eq!(st.config_file, Some(path));
    }

    /// `sdssplitargs`'s rules, as redis-server reads config lines.
    #[test]
    fn config_line_quoting() {
        let s = |l: &str| split_config_line(l);
        assert_eq!(s("port 7000").unwrap(), ["port", "7000"]);
        assert_eq!(s("  save \"\"  ").unwrap(), ["save", ""]);
        assert_eq!(
            s(r#"requirepass "a b\"c\x41\n""#).unwrap(),
            ["requirepass", "a b\"cA\n"]
        );
        assert_eq!(
            s(r"logfile 'it\'s here'").unwrap(),
            ["logfile", "it's here"]
        );
        assert_eq!(s(r"x 'a\nb'").unwrap(), ["x", "a\\nb"]);
        assert!(s("x \"open").is_err());
        assert!(s("x \"a\"b").is_err());
        assert!(s("x 'a'b").is_err());
        assert_eq!(s("").unwrap(), Vec::<String>::new());
    }
}
