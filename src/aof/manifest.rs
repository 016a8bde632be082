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

/// What a data file of a shard holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A snapshot written by a rewrite (`shard-<i>.base.<seq>.aof`).
    Base,
    /// Effects appended after a base (`shard-<i>.incr.<seq>.aof`).
    Incr,
}

/// One shard data file found in a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataFile {
    /// File name (no directory).
    pub name: String,
    pub shard: u16,
    pub kind: FileKind,
    pub seq: u64,
    /// Size, bytes (0 when it could not be read).
    pub len_bytes: u64,
}

/// Parse a name made by [`base_name`] / [`incr_name`]: `(shard, kind, seq)`.
pub fn parse_data_name(name: &str) -> Option<(u16, FileKind, u64)> {
    let rest = name.strip_prefix("shard-")?.strip_suffix(".aof")?;
    let mut parts = rest.split('.');
    let shard = parts.next()?.parse().ok()?;
    let kind = match parts.next()? {
        "base" => FileKind::Base,
        "incr" => FileKind::Incr,
        _ => return None,
    };
    let seq = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((shard, kind, seq))
}

/// Every shard data file in `dir` (any shard), sorted by shard then sequence.
/// An unreadable directory has none.
pub fn data_files(dir: &Path) -> Vec<DataFile> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<DataFile> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (shard, kind, seq) = parse_data_name(&name)?;
            let len_bytes = fs::metadata(e.path()).map_or(0, |m| m.len());
            Some(DataFile {
                name,
                shard,
                kind,
                seq,
                len_bytes,
            })
        })
        .collect();
    out.sort_by(|a, b| (a.shard, a.seq, a.name.as_str()).cmp(&(b.shard, b.seq, b.name.as_str())));
    out
}

/// Highest sequence number in the name of any file of shard `shard` in
/// `dir`, temporary files included (0 when none): new files must use a
/// higher one, so that no existing file is ever truncated or replaced.
pub fn max_seq_on_disk(dir: &Path, shard: u16) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let name = name.strip_suffix(".tmp").unwrap_or(&name);
            parse_data_name(name).filter(|(s, _, _)| *s == shard)
        })
        .map(|(_, _, seq)| seq)
        .max()
        .unwrap_or(0)
}

/// Check the AOF data in `dir` before any shard starts. Kept under this name
/// for `server::start`; see [`check_dir`] for what it checks.
///
/// # Errors
/// As [`check_dir`].
pub fn check_shard_count(dir: &Path, shards: u16) -> Result<(), String> {
    check_dir(dir, shards)
}

/// Check the AOF data in `dir` (if any) before any shard starts:
/// * every manifest was written by a server with `shards` shards;
/// * no shard has data files (non-empty base or incr files) but no manifest
///   (see [`missing_manifest_error`]): starting it empty would hide that
///   data, and its next write would go to a file whose name is taken.
///
/// Reads only; nothing in `dir` is changed.
///
/// # Errors
/// A message naming the directory and both shard counts, or the files
/// without a manifest and how to repair that.
pub fn check_dir(dir: &Path, shards: u16) -> Result<(), String> {
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
    let files = data_files(dir);
    let mut shard_ids: Vec<u16> = files.iter().map(|f| f.shard).collect();
    shard_ids.dedup();
    for shard in shard_ids {
        if manifest_path(dir, shard).exists() {
            continue;
        }
        let mine: Vec<DataFile> = files.iter().filter(|f| f.shard == shard).cloned().collect();
        if mine.iter().any(|f| f.len_bytes > 0) {
            return Err(missing_manifest_error(dir, shard, &mine, shards));
        }
    }
    Ok(())
}

/// The start-up refusal for shard `shard`, whose manifest is missing while
/// `files` (its data files, some non-empty) exist: names the files and the
/// repair, including the manifest text that would list them (newest base,
/// then the incr files from that base's sequence number on).
pub fn missing_manifest_error(dir: &Path, shard: u16, files: &[DataFile], shards: u16) -> String {
    let base = files
        .iter()
        .filter(|f| f.kind == FileKind::Base)
        .max_by_key(|f| f.seq);
    let from = base.map_or(0, |b| b.seq);
    let suggested = Manifest {
        shards,
        shard,
        base: base.map(|b| b.name.clone()),
        incrs: files
            .iter()
            .filter(|f| f.kind == FileKind::Incr && f.seq >= from)
            .map(|f| f.name.clone())
            .collect(),
    };
    let listed: Vec<String> = files
        .iter()
        .map(|f| format!("{} ({} bytes)", f.name, f.len_bytes))
        .collect();
    let manifest = manifest_path(dir, shard);
    format!(
        "{} is missing, but shard {shard} has append only files in {}: {}. \
         Refusing to start: without its manifest the shard would start empty and \
         later overwrite these files. To repair, restore {} from a backup, or \
         recreate it with the lines below (check that they list the right files, \
         base first, then incr files oldest first), or move the files away to start \
         the shard empty:\n{}",
        manifest.display(),
        dir.display(),
        listed.join(", "),
        manifest.display(),
        suggested.render()
    )
}

/// Remove what interrupted rewrites and switches left behind for shard
/// `m.shard` in `dir`, touching only files `m` does not list:
/// * temporary files (`shard-<i>.base.<seq>.aof.tmp`, `shard-<i>.manifest.tmp`);
/// * unlisted base and incr files whose sequence number is at most the
///   manifest's highest one (the manifest was written after they were
///   created and leaves them out: an old generation a finished rewrite
///   replaced, or the base of a rewrite that never switched);
/// * unlisted empty base and incr files.
///
/// An unlisted non-empty file newer than everything the manifest lists is
/// kept, with a warning: the manifest may be an old copy, and that file's
/// data is not ours to drop. Returns the names removed.
pub fn remove_leftovers(dir: &Path, m: &Manifest) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let max = m.max_seq();
    let manifest_tmp = format!("shard-{}.manifest.tmp", m.shard);
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if m.files().any(|f| *f == name) {
            continue;
        }
        let leftover = if name == manifest_tmp {
            true
        } else if let Some(stem) = name.strip_suffix(".tmp") {
            parse_data_name(stem).is_some_and(|(s, _, _)| s == m.shard)
        } else if let Some((s, _, seq)) = parse_data_name(&name) {
            if s != m.shard {
                false
            } else {
                let empty = fs::metadata(e.path()).is_ok_and(|md| md.len() == 0);
                if seq <= max || empty {
                    true
                } else {
                    log::warn!(
                        "shard {}: {} is not listed in {} but is newer than every \
                         file it lists; keeping it (move it away once you know it is not needed)",
                        m.shard,
                        e.path().display(),
                        manifest_path(dir, m.shard).display()
                    );
                    false
                }
            }
        } else {
            false
        };
        if leftover && fs::remove_file(e.path()).is_ok() {
            removed.push(name);
        }
    }
    if !removed.is_empty() {
        removed.sort();
        let _ = sync_dir(dir);
        log::warn!(
            "shard {}: removed files of interrupted AOF rewrites not listed in its manifest: {}",
            m.shard,
            removed.join(", ")
        );
    }
    removed
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

    #[test]
    fn missing_manifest_suggests_newest_base_and_its_incrs() {
        let f = |name: &str, len_bytes| {
            let (shard, kind, seq) = parse_data_name(name).unwrap();
            DataFile {
                name: name.into(),
                shard,
                kind,
                seq,
                len_bytes,
            }
        };
        let files = [
            f("shard-1.incr.3.aof", 10),
            f("shard-1.base.5.aof", 20),
            f("shard-1.incr.5.aof", 30),
            f("shard-1.incr.6.aof", 0),
        ];
        let msg = missing_manifest_error(Path::new("/d"), 1, &files, 4);
        assert!(
            msg.starts_with("/d/shard-1.manifest is missing, but shard 1 has append only files in /d: shard-1.incr.3.aof (10 bytes), "),
            "{msg}"
        );
        assert!(
            msg.ends_with(&format!(
                ":\n{MAGIC}\nshards 4\nshard 1\nbase shard-1.base.5.aof\n\
                 incr shard-1.incr.5.aof\nincr shard-1.incr.6.aof\n"
            )),
            "{msg}"
        );
    }

    #[test]
    fn data_file_names() {
        assert_eq!(
            parse_data_name("shard-3.base.12.aof"),
            Some((3, FileKind::Base, 12))
        );
        assert_eq!(
            parse_data_name("shard-0.incr.1.aof"),
            Some((0, FileKind::Incr, 1))
        );
        assert_eq!(parse_data_name("shard-0.incr.1.aof.tmp"), None);
        assert_eq!(parse_data_name("shard-0.manifest"), None);
        assert_eq!(parse_data_name("shard-x.incr.1.aof"), None);
        assert_eq!(parse_data_name("shard-0.incr.1.2.aof"), None);
    }
}
