//! The machine code the driver made of a loaded module, read back from its JIT cache.
//!
//! `cuModuleLoadDataEx` compiles PTX as a whole program and hands back no binary; the one
//! route that does (`cuLink*`) compiles for linking, which drops `setmaxnreg` (the JIT's note
//! C7504) and so is not the code that runs. The driver keeps what it compiled in its JIT cache
//! (`CUDA_CACHE_PATH`, by default `~/.nv/ComputeCache`), one file per compilation: a short
//! header ending in the target (`sm_90`), the PTX text and a NUL, the compiler options (`" "`
//! for a load, `" -c"` for a link), then the cubin. Seen on H100 with driver 580.159.04
//! (`results/two-speeds-2026-11-26/jit-cache.txt`); the layout is the driver's own, so
//! anything that does not match it reads as "no entry", never as a wrong cubin.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A cubin the driver compiled for a module load, with the cache file it came from.
#[derive(Clone, Debug)]
pub(crate) struct CachedCubin {
    pub(crate) cubin: Vec<u8>,
    pub(crate) entry: PathBuf,
}

/// Why no cached cubin was found: the text says where the driver's cache is and what to set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NotCached(pub(crate) String);

/// Header bytes before the PTX text; the entries seen have 58.
const HEADER_MAX_BYTES: usize = 512;
/// The compiler options between the PTX's NUL and the cubin; a few bytes in the entries seen.
const OPTIONS_MAX_BYTES: usize = 256;
/// Cache files nested this deep under the cache folder (`root/e/3/<hash>`).
const FOLDER_DEPTH: usize = 3;

/// The cubin `cuModuleLoadDataEx` made of `ptx` for a device of compute capability
/// `device_cc` (`90` for 9.0), if the driver's JIT cache holds it.
pub(crate) fn loaded_cubin(ptx: &str, device_cc: u32) -> Result<CachedCubin, NotCached> {
    if std::env::var("CUDA_CACHE_DISABLE").is_ok_and(|value| value.trim() == "1") {
        return Err(NotCached(
            "CUDA_CACHE_DISABLE=1 turns the driver's JIT cache off".to_string(),
        ));
    }
    let root = cache_folder().ok_or_else(|| {
        NotCached("neither CUDA_CACHE_PATH nor HOME is set, so the JIT cache has no folder".into())
    })?;
    let target = format!("sm_{device_cc}");
    let mut files = Vec::new();
    cache_files(&root, FOLDER_DEPTH, &mut files);
    // The newest entry first: a cache shared by two drivers may hold one of each.
    files.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    files
        .iter()
        .find_map(|(_, path)| whole_program_cubin(path, ptx.as_bytes(), target.as_bytes()))
        .ok_or_else(|| {
            NotCached(format!(
                "the driver's JIT cache {} holds no {target} entry of this PTX (a full cache evicts; CUDA_CACHE_MAXSIZE sets its size)",
                root.display()
            ))
        })
}

fn cache_folder() -> Option<PathBuf> {
    match std::env::var_os("CUDA_CACHE_PATH") {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => std::env::var_os("HOME").map(|home| Path::new(&home).join(".nv/ComputeCache")),
    }
}

/// The regular files under `folder`, `depth` levels down at most, with their modification times.
fn cache_files(folder: &Path, depth: usize, files: &mut Vec<(std::time::SystemTime, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        // DirEntry::file_type does not follow links, so a link loop cannot recurse.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth > 0 {
            cache_files(&entry.path(), depth - 1, files);
        } else if kind.is_file() {
            let modified = entry
                .metadata()
                .and_then(|meta| meta.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            files.push((modified, entry.path()));
        }
    }
}

/// The cubin of `path` if it is a whole-program compilation of exactly `ptx` for `target`.
fn whole_program_cubin(path: &Path, ptx: &[u8], target: &[u8]) -> Option<CachedCubin> {
    let mut file = File::open(path).ok()?;
    let file_bytes = usize::try_from(file.metadata().ok()?.len()).ok()?;
    if file_bytes < ptx.len() + 64 {
        return None;
    }
    // Most entries are other kernels: their first bytes past the header tell, so read the
    // header and the PTX's length first and the rest only on a match.
    let prefix_bytes = (HEADER_MAX_BYTES + ptx.len() + 1 + OPTIONS_MAX_BYTES).min(file_bytes);
    let mut data = vec![0; prefix_bytes];
    file.read_exact(&mut data).ok()?;
    let ptx_start = ptx_offset(&data, ptx, target)?;
    let options_start = ptx_start + ptx.len() + 1;
    let options_end = options_start + find(&data[options_start..], b"\x7fELF")?;
    // A load compiles the whole program; a link passes -c.
    let options = std::str::from_utf8(&data[options_start..options_end]).ok()?;
    if options.split_whitespace().any(|option| option == "-c") {
        return None;
    }
    file.read_to_end(&mut data).ok()?;
    let cubin = elf_image(&data[options_end..])?;
    Some(CachedCubin {
        cubin: cubin.to_vec(),
        entry: path.to_path_buf(),
    })
}

/// Where `ptx` starts in an entry's first bytes: right after the header's target name, and
/// followed by its NUL.
fn ptx_offset(data: &[u8], ptx: &[u8], target: &[u8]) -> Option<usize> {
    let head = &data[..HEADER_MAX_BYTES.min(data.len())];
    // The PTX's first line is the search key; the rest is compared whole.
    let first_line = &ptx[..ptx.iter().position(|&b| b == b'\n').unwrap_or(ptx.len())];
    let mut from = 0;
    while let Some(found) = find(&head[from..], first_line) {
        let start = from + found;
        let matches = data[..start].ends_with(target)
            && data.get(start..start + ptx.len()) == Some(ptx)
            && data.get(start + ptx.len()) == Some(&0);
        if matches {
            return Some(start);
        }
        from = start + 1;
    }
    None
}

/// The ELF image at the start of `bytes`, cut at its end (the later of its section and
/// program header tables, which a cubin puts last).
fn elf_image(bytes: &[u8]) -> Option<&[u8]> {
    let u16_at = |at: usize| Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?));
    // 64-bit little-endian only, as every cubin is.
    if bytes.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let program_headers_end = u64_at(0x20)? + u64::from(u16_at(0x36)?) * u64::from(u16_at(0x38)?);
    let section_headers_end = u64_at(0x28)? + u64::from(u16_at(0x3a)?) * u64::from(u16_at(0x3c)?);
    let end = usize::try_from(program_headers_end.max(section_headers_end)).ok()?;
    bytes.get(..end)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > haystack.len() {
        return None;
    }
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "//\n// k: generated\n.version 8.0\n.target sm_90a\n";

    /// A cache entry laid out as the driver writes one: header, target, PTX, NUL, options,
    /// then an ELF image whose header tables end where it ends.
    fn entry(target: &str, ptx: &str, options: &str, trailing: &[u8]) -> Vec<u8> {
        let mut bytes = b"A\0\0\0header Apr 29 2026 17:12:06HOST64".to_vec();
        bytes.extend_from_slice(target.as_bytes());
        bytes.extend_from_slice(ptx.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(options.as_bytes());
        bytes.extend_from_slice(&elf(200));
        bytes.extend_from_slice(trailing);
        bytes
    }

    /// A 64-bit ELF image of `bytes` bytes: section headers at 0x80, two of 0x40 bytes, and
    /// one program header ending at `bytes`.
    fn elf(bytes: usize) -> Vec<u8> {
        let mut image = vec![0u8; bytes];
        image[..6].copy_from_slice(b"\x7fELF\x02\x01");
        image[0x20..0x28].copy_from_slice(&((bytes - 0x38) as u64).to_le_bytes());
        image[0x28..0x30].copy_from_slice(&0x40u64.to_le_bytes());
        image[0x36..0x38].copy_from_slice(&0x38u16.to_le_bytes());
        image[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        image[0x3a..0x3c].copy_from_slice(&0x40u16.to_le_bytes());
        image[0x3c..0x3e].copy_from_slice(&2u16.to_le_bytes());
        image
    }

    fn write(folder: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = folder.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn folder(test: &str) -> PathBuf {
        let folder =
            std::env::temp_dir().join(format!("gemm-dsl-jit-cache-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder).unwrap();
        folder
    }

    #[test]
    fn the_whole_program_entry_of_the_same_ptx_and_target_is_read() {
        let dir = folder("read");
        let path = write(&dir, "load", &entry("sm_90", PTX, " ", b"padding"));
        let found = whole_program_cubin(&path, PTX.as_bytes(), b"sm_90").expect("an entry");
        assert_eq!(found.cubin, elf(200), "the image, cut at its end");
        assert_eq!(found.entry, path);
    }

    #[test]
    fn link_entries_other_targets_and_other_ptx_are_not_the_loaded_code() {
        let dir = folder("others");
        let cases = [
            ("linked (-c)", entry("sm_90", PTX, " -c", b"")),
            ("another target", entry("sm_100", PTX, " ", b"")),
            (
                "a PTX that extends this one",
                entry("sm_90", &format!("{PTX}.entry more"), " ", b""),
            ),
            ("a truncated image", {
                let mut bytes = entry("sm_90", PTX, " ", b"");
                bytes.truncate(bytes.len() - 10);
                bytes
            }),
            (
                "no ELF",
                b"A\0\0\0 nothing here at all, long enough to be read".repeat(4),
            ),
        ];
        for (what, bytes) in cases {
            let path = write(&dir, "entry", &bytes);
            assert!(
                whole_program_cubin(&path, PTX.as_bytes(), b"sm_90").is_none(),
                "{what} was taken for the loaded code"
            );
        }
    }

    #[test]
    fn the_cache_folder_is_searched_nested_and_a_miss_names_it() {
        let dir = folder("nested");
        std::fs::create_dir_all(dir.join("e/3")).unwrap();
        write(&dir, "index", b"A\0\0\0index");
        write(&dir.join("e/3"), "linked", &entry("sm_90", PTX, " -c", b""));
        let mut files = Vec::new();
        cache_files(&dir, FOLDER_DEPTH, &mut files);
        assert_eq!(files.len(), 2, "{files:?}");
        write(&dir.join("e/3"), "loaded", &entry("sm_90", PTX, " ", b""));
        let found = files_cubin(&dir).expect("the nested whole-program entry");
        assert!(found.entry.ends_with("e/3/loaded"), "{found:?}");
        std::fs::remove_file(dir.join("e/3/loaded")).unwrap();
        assert!(files_cubin(&dir).is_none());
    }

    fn files_cubin(dir: &Path) -> Option<CachedCubin> {
        let mut files = Vec::new();
        cache_files(dir, FOLDER_DEPTH, &mut files);
        files
            .iter()
            .find_map(|(_, path)| whole_program_cubin(path, PTX.as_bytes(), b"sm_90"))
    }
}
