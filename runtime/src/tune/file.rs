//! The cache file: reading it whole, and changing it without losing an entry.
//!
//! Every change ([`TuneFile::update`], [`TuneFile::merge`]) takes an exclusive lock on
//! `FILE.lock` beside the file, re-reads the file under it, and replaces the file by renaming
//! a complete temporary file of the same directory over it.
//!
//! - The lock makes concurrent writers (two boards of one host, two tuning runs into one
//!   file) take turns, each merging into what the one before wrote. Re-reading right before
//!   the rename without a lock would not do: another writer's rename can land between the
//!   re-read and ours, and its entries would be lost. The lock is the operating system's
//!   (`File::lock`), released when its holder exits however it exits, so a killed writer
//!   leaves no stale lock. The lock file stays: removing it would let a writer that opened it
//!   before the removal hold a lock the next writer no longer sees.
//! - The rename makes each change all or nothing: a writer killed or failing mid-write leaves
//!   the old file (and a temporary `.FILE.tmp.PID`, which the next writer removes), and
//!   readers, who take no lock, see the old file or the new one, whole.
//! - A path that is a symbolic link is written through: its final target is replaced, the
//!   link stays.

use super::{DeviceKey, ProblemKey, TuneEntry, FORMAT};
use crate::error::Error;
use serde::Deserialize;
use serde_json::error::Category;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::{self, File, OpenOptions, Permissions, TryLockError};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a writer waits for another's lock: a write takes milliseconds, so a lock held
/// this long belongs to a stopped process, and an error says so rather than a silent hang.
const LOCK_WAIT: Duration = Duration::from_secs(60);

/// Symbolic links followed before a path counts as a loop (Linux's own limit).
const MAX_LINKS: usize = 40;

/// A cache file's entries, every device's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TuneFile {
    pub entries: Vec<TuneEntry>,
    /// Entries that do not parse as this format's, kept verbatim so that a merge loses none.
    malformed: Vec<Malformed>,
}

/// An entry of the file that does not parse as a [`TuneEntry`].
#[derive(Clone, Debug, PartialEq)]
pub struct Malformed {
    /// Its place among the file's entries, from 0.
    pub index: usize,
    pub value: Value,
    /// Why it does not parse.
    pub reason: String,
}

/// What a merge did to a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergeCounts {
    /// New measurements of problems the file had no entry for (on that device).
    pub added: usize,
    /// Entries superseded by a new measurement of the same device, problem and types.
    pub replaced: usize,
    /// Entries left as they were: other devices, other problems, entries that do not parse.
    pub kept: usize,
}

impl fmt::Display for MergeCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} added, {} replaced, {} kept",
            self.added, self.replaced, self.kept
        )
    }
}

/// The file as written.
#[derive(Deserialize)]
struct Whole {
    format: u32,
    entries: Vec<TuneEntry>,
}

/// The file's version alone: what a file of another format is recognised by.
#[derive(Deserialize)]
struct Versioned {
    format: u32,
}

/// The file's entries one by one, where [`Whole`] does not parse.
#[derive(Deserialize)]
struct Loose {
    entries: Vec<Value>,
}

impl TuneFile {
    /// A file of these entries.
    pub fn new(entries: Vec<TuneEntry>) -> TuneFile {
        TuneFile {
            entries,
            malformed: Vec::new(),
        }
    }

    /// Reads the file at `path` whole. An error says why it cannot be read as a cache of this
    /// format (no such file, a directory, not JSON, truncated, another format): nothing of it
    /// is used then. Entries that do not parse are set aside ([`TuneFile::malformed`]); an
    /// empty file has no entries.
    pub fn read(path: &Path) -> Result<TuneFile, Error> {
        read_at(path).map_err(|reason| Error::TuneCache {
            path: path.display().to_string(),
            reason,
        })
    }

    /// Entries that do not parse as this format's, in file order.
    pub fn malformed(&self) -> &[Malformed] {
        &self.malformed
    }

    /// Drops the entries that do not parse; how many there were.
    pub fn drop_malformed(&mut self) -> usize {
        std::mem::take(&mut self.malformed).len()
    }

    /// Changes the file at `path` under its lock: reads it (no file: no entries), applies
    /// `change`, and puts the result in its place by rename. A file that cannot be read whole
    /// as a cache of this format, a directory, or a read-only file is left as it is, and the
    /// error says why; so is the file when writing fails part way.
    pub fn update<R>(path: &Path, change: impl FnOnce(&mut TuneFile) -> R) -> Result<R, Error> {
        let failure = |reason: String| Error::TuneCache {
            path: path.display().to_string(),
            reason,
        };
        let target = follow_links(path).map_err(failure)?;
        // Checked before the lock too, so that no lock file is left beside a path that was
        // never going to be written.
        replaceable(&target).map_err(failure)?;
        let _lock = lock(&target).map_err(failure)?;
        let (mut file, permissions) = read_for_update(&target).map_err(failure)?;
        let result = change(&mut file);
        replace(&target, permissions, |out| file.write_to(out)).map_err(failure)?;
        Ok(result)
    }

    /// Merges `measured` into the file at `path` ([`TuneFile::merge_entries`]), under its lock.
    pub fn merge(path: &Path, measured: Vec<TuneEntry>) -> Result<MergeCounts, Error> {
        TuneFile::update(path, |file| file.merge_entries(measured))
    }

    /// Whether [`TuneFile::update`] could write `path` now (the lock taken, the file read, a
    /// temporary file made and removed), without writing it: a tuning run checks its output
    /// before it spends minutes measuring.
    pub fn check_writable(path: &Path) -> Result<(), Error> {
        let failure = |reason: String| Error::TuneCache {
            path: path.display().to_string(),
            reason,
        };
        let target = follow_links(path).map_err(failure)?;
        replaceable(&target).map_err(failure)?;
        let _lock = lock(&target).map_err(failure)?;
        read_for_update(&target).map_err(failure)?;
        let (temporary, _) = create_temporary(&target).map_err(failure)?;
        fs::remove_file(&temporary)
            .map_err(|e| failure(format!("cannot remove {}: {e}", temporary.display())))
    }

    /// Puts `measured` in: a measurement replaces the entry of the same device, problem,
    /// element types and stride alignment (whichever kernel it named), in its place; a new
    /// one goes last; every other entry stays. Of two measurements of one key in `measured`,
    /// the later wins, as it would for a reader.
    pub fn merge_entries(&mut self, measured: Vec<TuneEntry>) -> MergeCounts {
        let mut newest: HashMap<(DeviceKey, ProblemKey), TuneEntry> = HashMap::new();
        let mut order = Vec::new();
        // Entries naming types this build does not know: nothing to replace, nothing to lose.
        let mut unkeyed = Vec::new();
        for entry in measured {
            match entry.merge_key() {
                Some(key) => {
                    if newest.insert(key.clone(), entry).is_none() {
                        order.push(key);
                    }
                }
                None => unkeyed.push(entry),
            }
        }
        let mut counts = MergeCounts {
            kept: self.malformed.len(),
            ..MergeCounts::default()
        };
        let mut placed = HashSet::new();
        let old = std::mem::take(&mut self.entries);
        for entry in old {
            let key = entry.merge_key();
            match key.and_then(|key| newest.get(&key).map(|new| (key, new))) {
                None => {
                    counts.kept += 1;
                    self.entries.push(entry);
                }
                Some((key, new)) => {
                    // A second old entry of the key (a file edited by hand) is superseded too,
                    // or the reader, which keeps the last, would see it instead.
                    counts.replaced += 1;
                    if placed.insert(key) {
                        self.entries.push(new.clone());
                    }
                }
            }
        }
        for key in order {
            if !placed.contains(&key) {
                counts.added += 1;
                self.entries.extend(newest.remove(&key));
            }
        }
        counts.added += unkeyed.len();
        self.entries.extend(unkeyed);
        counts
    }

    /// The file's text: one entry a line (entries that do not parse last, as they were), so
    /// a cache reads, greps and diffs line by line.
    pub fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        write!(out, "{{\"format\": {FORMAT}, \"entries\": [")?;
        let mut separator = "\n";
        for entry in &self.entries {
            out.write_all(separator.as_bytes())?;
            serde_json::to_writer(&mut *out, entry)?;
            separator = ",\n";
        }
        for malformed in &self.malformed {
            out.write_all(separator.as_bytes())?;
            serde_json::to_writer(&mut *out, &malformed.value)?;
            separator = ",\n";
        }
        out.write_all(b"\n]}\n")
    }
}

/// [`TuneFile::read`], its error a reason.
pub(super) fn read_at(path: &Path) -> Result<TuneFile, String> {
    let bytes = fs::read(path).map_err(read_error)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(TuneFile::default());
    }
    // The whole file in one pass, the common case; a 100,000-entry cache reads in tens of
    // milliseconds this way. Only a file that does not parse is read again, to say why.
    if let Ok(whole) = serde_json::from_slice::<Whole>(&bytes) {
        return match whole.format {
            FORMAT => Ok(TuneFile::new(whole.entries)),
            other => Err(other_format(other)),
        };
    }
    // (serde would take a list for a struct, its items for the fields.)
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        return Err("not a gemm-dsl tuning cache (not a JSON object)".to_string());
    }
    let version = serde_json::from_slice::<Versioned>(&bytes).map_err(|e| not_a_cache(&e))?;
    if version.format != FORMAT {
        return Err(other_format(version.format));
    }
    let loose = serde_json::from_slice::<Loose>(&bytes).map_err(|e| not_a_cache(&e))?;
    let mut file = TuneFile::default();
    for (index, value) in loose.entries.into_iter().enumerate() {
        match TuneEntry::deserialize(&value) {
            Ok(entry) => file.entries.push(entry),
            Err(error) => file.malformed.push(Malformed {
                index,
                reason: format!("entry {index}: {error}"),
                value,
            }),
        }
    }
    Ok(file)
}

fn read_error(error: io::Error) -> String {
    match error.kind() {
        io::ErrorKind::NotFound => "there is no such file".to_string(),
        io::ErrorKind::IsADirectory => "it is a directory, not a file".to_string(),
        _ => format!("cannot read it: {error}"),
    }
}

fn not_a_cache(error: &serde_json::Error) -> String {
    match error.classify() {
        Category::Eof => format!("truncated: the text ends inside its JSON ({error})"),
        Category::Syntax => format!("damaged: not JSON from line {} ({error})", error.line()),
        Category::Data => format!("not a gemm-dsl tuning cache ({error})"),
        Category::Io => format!("cannot read it: {error}"),
    }
}

fn other_format(format: u32) -> String {
    format!("a cache of format {format}, and this gemm-dsl reads format {FORMAT}: its entries are ignored")
}

/// Where writing `path` lands: its final target where it is a symbolic link.
fn follow_links(path: &Path) -> Result<PathBuf, String> {
    let mut target = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&target) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = fs::read_link(&target)
                    .map_err(|e| format!("cannot read the link {}: {e}", target.display()))?;
                target = directory_of(&target).join(link);
            }
            _ => return Ok(target),
        }
    }
    Err(format!(
        "a loop of symbolic links (more than {MAX_LINKS} followed)"
    ))
}

/// The directory `path` is in (`.` for a bare name).
fn directory_of(path: &Path) -> &Path {
    path.parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

fn file_name(path: &Path) -> Result<String, String> {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .ok_or_else(|| "not a file name".to_string())
}

/// The exclusive lock on `target`'s lock file, held until the file returned is dropped.
fn lock(target: &Path) -> Result<File, String> {
    let lock_path = target.with_file_name(format!("{}.lock", file_name(target)?));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("cannot open the lock file {}: {e}", lock_path.display()))?;
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(format!(
                    "another writer has held {} for {} s (a stopped process?)",
                    lock_path.display(),
                    LOCK_WAIT.as_secs()
                ))
            }
            Err(TryLockError::Error(e)) => {
                return Err(format!("cannot lock {}: {e}", lock_path.display()))
            }
        }
    }
}

/// The file a writer starts from at `target` (none there: no entries), with the permissions
/// the new file keeps; an error where the file must not be replaced.
fn read_for_update(target: &Path) -> Result<(TuneFile, Option<Permissions>), String> {
    let Some(permissions) = replaceable(target)? else {
        return Ok((TuneFile::default(), None));
    };
    let file = read_at(target).map_err(|reason| {
        format!("{reason}; not replaced, so that nothing in it is lost (move it away, or write another file)")
    })?;
    Ok((file, Some(permissions)))
}

/// Whether a file may be put at `target`: none is there (`None`), or a file that is not
/// read-only (its permissions, which the new file keeps).
fn replaceable(target: &Path) -> Result<Option<Permissions>, String> {
    let meta = match fs::metadata(target) {
        Ok(meta) => meta,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(read_error(error)),
    };
    if meta.is_dir() {
        return Err("it is a directory, not a file".to_string());
    }
    if meta.permissions().readonly() {
        return Err("it is read-only: not replaced (make it writable to update it)".to_string());
    }
    Ok(Some(meta.permissions()))
}

/// A new temporary file beside `target`, first removing those of writers killed before their
/// rename: only the lock's holder writes one, so any there now is a leftover.
fn create_temporary(target: &Path) -> Result<(PathBuf, File), String> {
    let directory = directory_of(target);
    let prefix = format!(".{}.tmp.", file_name(target)?);
    if let Ok(listing) = fs::read_dir(directory) {
        for entry in listing.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                // A leftover that cannot be removed only costs its space.
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    let temporary = directory.join(format!("{prefix}{}", std::process::id()));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .map_err(|e| {
            format!(
                "cannot create a temporary file in {}: {e}",
                directory.display()
            )
        })?;
    Ok((temporary, file))
}

/// Writes a temporary file beside `target` with `write`, then renames it over `target`; the
/// temporary file is removed where anything fails, and `target` is then as it was.
fn replace(
    target: &Path,
    permissions: Option<Permissions>,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), String> {
    let (temporary, mut file) = create_temporary(target)?;
    let written = (|| {
        let mut out = BufWriter::new(&mut file);
        write(&mut out)?;
        out.flush()?;
        drop(out);
        if let Some(permissions) = permissions {
            file.set_permissions(permissions)?;
        }
        // On disk before the rename, so that a crash after it finds the new file whole.
        file.sync_all()?;
        fs::rename(&temporary, target)
    })();
    if let Err(error) = written {
        // Best effort: a leftover temporary file is removed by the next writer.
        let _ = fs::remove_file(&temporary);
        return Err(format!("writing failed, the file is as it was: {error}"));
    }
    // The rename itself is durable once the directory is (where directories can be synced).
    if let Ok(directory) = File::open(directory_of(target)) {
        let _ = directory.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writer_failing_mid_write_leaves_the_old_file_and_no_temporary() {
        let dir = std::env::temp_dir().join(format!("gemm-tune-{}-failing", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let target = dir.join("cache.json");
        fs::write(&target, "the old file").unwrap();
        // Half the file out, then the disk is full.
        let error = replace(&target, None, |out| {
            out.write_all(b"{\"format\": 1, \"entries\": [")?;
            out.flush()?;
            Err(io::Error::new(io::ErrorKind::StorageFull, "no space left"))
        })
        .unwrap_err();
        assert_eq!(
            error,
            "writing failed, the file is as it was: no space left"
        );
        assert_eq!(fs::read_to_string(&target).unwrap(), "the old file");
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["cache.json"]);

        // A killed writer's temporary file is removed by the next one, which lands whole.
        fs::write(dir.join(".cache.json.tmp.1"), "{\"format\": 1, \"entr").unwrap();
        replace(&target, None, |out| out.write_all(b"the new file")).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "the new file");
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["cache.json"]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
