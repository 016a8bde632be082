//! The per-shard manifest: which files make up a shard's state, in order.
//!
//! Text, one directive per line:
//! ```text
//! shardstream-aof-manifest 1
//! shards 4
//! shard 2
//! base shard-2.base.7.aof
//! incr shard-2.incr.7.aof
//! incr shard-2.incr.8.aof
//! ```
//! It is replaced atomically: written to a temporary name, fsynced, renamed
//! over the old one, and the directory fsynced.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &str = "shardstream-aof-manifest 1";

/// One shard's list of files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// Shard count of the server that wrote it.
    pub shards: u16,
    /// This shard's index.
    pub shard: u16,
    /// Snapshot file, if a rewrite has happened.
    pub base: Option<String>,
    /// Effect files appended after the base, oldest first; the last is written to.
    pub incrs: Vec<String>,
}

/// Path of shard `shard`'s manifest in `dir`.
pub fn manifest_path(dir: &Path, shard: u16) -> PathBuf {
    dir.join(format!("shard-{shard}.manifest"))
}

/// File name of a base file.
pub fn base_name(shard: u16, seq: u64) -> String {
    format!("shard-{shard}.base.{seq}.aof")
}

/// File name of an incr file.
pub fn incr_name(shard: u16, seq: u64) -> String {
    format!("shard-{shard}.incr.{seq}.aof")
}

/// The sequence number in a file name made by [`base_name`] / [`incr_name`].
pub fn seq_of(name: &str) -> u64 {
    name.trim_end_matches(".aof")
        .rsplit('.')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

impl Manifest {
    /// Highest sequence number of any listed file (0 when none).
    pub fn max_seq(&self) -> u64 {
        self.base
            .iter()
            .chain(self.incrs.iter())
            .map(|n| seq_of(n))
            .max()
            .unwrap_or(0)
    }

    /// Every listed file, base first.
    pub fn files(&self) -> impl Iterator<Item = &String> {
        self.base.iter().chain(self.incrs.iter())
    }

    /// Parse manifest text; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        if lines.next().map(str::trim) != Some(MAGIC) {
            return Err("not a shardstream AOF manifest (bad first line)".into());
        }
        let mut m = Manifest::default();
        let mut have = (false, false);
        for line in lines {
            let (key, value) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
            let value = value.trim();
            let bad_name = value.is_empty() || value.contains('/') || value.contains("..");
            match key {
                "shards" => {
                    m.shards = value.parse().map_err(|_| format!("bad line '{line}'"))?;
                    have.0 = true;
                }
                "shard" => {
                    m.shard = value.parse().map_err(|_| format!("bad line '{line}'"))?;
                    have.1 = true;
                }
                "base" if !bad_name && m.base.is_none() && m.incrs.is_empty() => {
                    m.base = Some(value.to_string())
                }
                "incr" if !bad_name => m.incrs.push(value.to_string()),
                _ => return Err(format!("bad line '{line}'")),
            }
        }
        if !(have.0 && have.1) {
            return Err("missing 'shards' or 'shard' line".into());
        }
        Ok(m)
    }

    /// The manifest's text.
    pub fn render(&self) -> String {
        let mut s = format!("{MAGIC}\nshards {}\nshard {}\n", self.shards, self.shard);
        if let Some(b) = &self.base {
            s.push_str(&format!("base {b}\n"));
        }
        for f in &self.incrs {
            s.push_str(&format!("incr {f}\n"));
        }
        s
    }

    /// Read shard `shard`'s manifest from `dir`: `Ok(None)` when there is none.
    pub fn read(dir: &Path, shard: u16) -> Result<Option<Manifest>, String> {
        let path = manifest_path(dir, shard);
        match fs::read_to_string(&path) {
            Ok(text) => Manifest::parse(&text)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Replace shard's manifest in `dir` atomically (temp file, fsync, rename, dir fsync).
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let path = manifest_path(dir, self.shard);
        let tmp = path.with_extension("manifest.tmp");
        {
            let mut f = File::create(&tmp)?;
            f.write_all(self.render().as_bytes())?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &path)?;
        sync_dir(dir)
    }
}

/// fsync a directory, so renames and new files in it survive a crash.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Check that the AOF data in `dir` (if any) was written by a server with
/// `shards` shards.
///
/// # Errors
/// A message naming the directory and both shard counts, when they differ.
pub fn check_shard_count(dir: &Path, shards: u16) -> Result<(), String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(shard) = name
            .strip_prefix("shard-")
            .and_then(|r| r.strip_suffix(".manifest"))
            .and_then(|n| n.parse::<u16>().ok())
        else {
            continue;
        };
        let Some(m) = Manifest::read(dir, shard)? else {
            continue;
        };
        if m.shards != shards || shard >= shards {
            return Err(format!(
                "the append-only files in {} were written by a server with {} shards, \
                 but this server has {shards}: start it with --shards {} (keys are placed \
                 on shards by hash slot, so the data cannot be loaded into another shard count), \
                 or move the directory away to start empty",
                dir.display(),
                m.shards,
                m.shards
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let m = Manifest {
            shards: 4,
            shard: 2,
            base: Some(base_name(2, 7)),
            incrs: vec![incr_name(2, 7), incr_name(2, 8)],
        };
        assert_eq!(Manifest::parse(&m.render()), Ok(m.clone()));
        assert_eq!(m.max_seq(), 8);
        assert!(Manifest::parse("hello\n").is_err());
        assert!(Manifest::parse(&format!("{MAGIC}\nshards 1\nshard 0\nincr ../x\n")).is_err());
        assert!(Manifest::parse(&format!("{MAGIC}\nshards 1\n")).is_err());
    }
}
