//! Out of space, said as such (issue 38: a full disk was reported as a damaged artifact or an
//! unreachable source). Every error path that wraps an I/O error asks [`is_out_of_space`] (or
//! [`caused_by_out_of_space`] for an error whose causes may hold one, [`says_out_of_space`] for
//! one that reached rocbuild as words: libgit2's, a rewritten library's), and what it then
//! says comes from [`NoSpace`]: "no space left on device", the path, what is free there, and
//! what to free.

use std::error::Error;
use std::io;
use std::path::{Path, PathBuf};

use rocbuild_platform::host::DISK_FULL_CODES as RAW_CODES;

/// What the C library (rocbuild and libgit2 run in the C locale) and Windows say.
const WORDS: [&str; 4] = [
    "no space left on device",
    "disk quota exceeded",
    "there is not enough space on the disk",
    "the disk is full",
];

/// Is `e` the filesystem being full, or the user's quota spent? By its kind, by its raw code
/// (an error another library made from a code), or by an error it wraps.
pub fn is_out_of_space(e: &io::Error) -> bool {
    use io::ErrorKind as K;
    matches!(e.kind(), K::StorageFull | K::QuotaExceeded)
        || e.raw_os_error().is_some_and(|c| RAW_CODES.contains(&c))
        || e.get_ref()
            .is_some_and(|inner| caused_by_out_of_space(inner))
}

/// Does `e`, or an error under it (its `source()` chain), say the disk is full? An
/// `io::Error` by [`is_out_of_space`], any other by its words ([`says_out_of_space`]).
pub fn caused_by_out_of_space(e: &(dyn Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        let full = match err.downcast_ref::<io::Error>() {
            Some(io) => is_out_of_space(io),
            None => says_out_of_space(&err.to_string()),
        };
        if full {
            return true;
        }
        next = err.source();
    }
    false
}

/// Does this text (an error that reached rocbuild as words) say the disk is full? The
/// system's words, or Rust's `(os error N)` with one of this platform's codes.
pub fn says_out_of_space(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    WORDS.iter().any(|w| t.contains(w))
        || RAW_CODES
            .iter()
            .any(|c| t.contains(&format!("(os error {c})")))
}

/// Bytes this user may still write on the filesystem of `path` (of its nearest existing
/// parent, for a path not made yet); None where the system does not say.
pub fn free_space(path: &Path) -> Option<u64> {
    let path = std::path::absolute(path).ok()?;
    let existing = path.ancestors().find(|p| p.exists())?;
    fs2::available_space(existing).ok()
}

/// `512 bytes`, `12.0 KiB`, `1.5 GiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A write that found no space at `path`: what the message says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoSpace {
    pub path: PathBuf,
    /// Bytes free on that filesystem now, when the system says.
    pub free: Option<u64>,
}

impl NoSpace {
    /// The filesystem of `path`, asked now how much is free.
    pub fn at(path: &Path) -> NoSpace {
        NoSpace {
            path: path.to_path_buf(),
            free: free_space(path),
        }
    }

    /// ` (12.0 KiB free on that filesystem)`, or nothing when the system does not say.
    pub fn free_text(&self) -> String {
        self.free
            .map(|n| format!(" ({} free on that filesystem)", human_bytes(n)))
            .unwrap_or_default()
    }

    /// What to free, and how.
    pub fn help(&self) -> String {
        format!(
            "free space on the filesystem that holds {}, then run again. rocbuild's own cache can be emptied with `rocbuild clean --builds` (the build trees, usually the largest part) or `rocbuild clean --all` (the clones and logs too), or put on a roomier disk with --cache DIR (or ROCBUILD_CACHE)",
            self.path.display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_known_by_its_kind_its_code_and_its_words() {
        let full = io::Error::new(io::ErrorKind::StorageFull, "x");
        assert!(is_out_of_space(&full));
        assert!(is_out_of_space(&io::Error::new(
            io::ErrorKind::QuotaExceeded,
            "x"
        )));
        for code in RAW_CODES {
            assert!(
                is_out_of_space(&io::Error::from_raw_os_error(*code)),
                "{code}"
            );
        }
        // Wrapped by another library (`io::Error::other(inner)`), twice.
        let wrapped =
            io::Error::other(io::Error::other(io::Error::from_raw_os_error(RAW_CODES[0])));
        assert!(is_out_of_space(&wrapped));
        for not in [
            io::Error::new(io::ErrorKind::PermissionDenied, "x"),
            io::Error::new(io::ErrorKind::NotFound, "x"),
            io::Error::new(io::ErrorKind::FileTooLarge, "x"),
            io::Error::other("x"),
        ] {
            assert!(!is_out_of_space(&not), "{not:?}");
        }
        #[cfg(unix)]
        assert!(!is_out_of_space(&io::Error::from_raw_os_error(
            libc::EACCES
        )));
    }

    #[test]
    fn words_say_it_where_the_type_is_gone() {
        assert!(says_out_of_space(
            "failed to write pack: No space left on device"
        ));
        assert!(says_out_of_space("cannot write x: Disk quota exceeded"));
        assert!(says_out_of_space(&format!(
            "write x: something (os error {})",
            RAW_CODES[0]
        )));
        assert!(!says_out_of_space("connection refused"));
        assert!(!says_out_of_space("Permission denied (os error 13)"));
        // A chain whose io::Error is below another error.
        #[derive(Debug)]
        struct Outer(io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the build failed")
            }
        }
        impl Error for Outer {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(io::Error::new(io::ErrorKind::StorageFull, "full"));
        assert!(caused_by_out_of_space(&e));
        let e = Outer(io::Error::new(io::ErrorKind::NotFound, "gone"));
        assert!(!caused_by_out_of_space(&e));
    }

    #[test]
    fn free_space_is_asked_of_the_nearest_existing_directory() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("not/made/yet/file");
        let at = NoSpace::at(&deep);
        assert!(at.free.is_some() && free_space(d.path()).is_some());
        assert!(at.free_text().ends_with(" free on that filesystem)"));
        assert!(at.help().contains(&deep.display().to_string()));
        assert!(at.help().contains("rocbuild clean --builds"));
        assert_eq!(human_bytes(0), "0 bytes");
        assert_eq!(human_bytes(1023), "1023 bytes");
        assert_eq!(human_bytes(12 * 1024), "12.0 KiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }
}
