//! Path and naming helpers shared by the planner, the toolchain and the runner. Pure.

use sha2::{Digest, Sha256};

/// sha256 of `parts`, each followed by a NUL (so `["ab","c"]` and `["a","bc"]` differ), as hex.
pub fn hash_hex(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

pub use rocbuild_probe::join;

/// A name safe in a directory name: anything but `[A-Za-z0-9._-]` becomes `_`.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `--source` names a git URL rather than a directory.
pub fn looks_like_url(s: &str) -> bool {
    s.contains("://") || s.starts_with("git@")
}

/// Write `text` to `path` unless it holds exactly that already (a file CMake reads is not
/// touched, so nothing is reconfigured for it).
pub fn write_if_changed(path: &std::path::Path, text: &str) -> crate::error::Result<()> {
    use crate::error::EngineError;
    if fs_err::read_to_string(path).ok().as_deref() == Some(text) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir).map_err(EngineError::io("create", dir))?;
    }
    fs_err::write(path, text).map_err(EngineError::io("write", path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocbuild_probe::Os;
    use std::path::{Path, PathBuf};

    #[test]
    fn windows_paths_use_backslashes_on_any_host() {
        assert_eq!(
            join(Os::Windows, Path::new(r"C:\cache\"), &["src", "a/b"]),
            PathBuf::from(r"C:\cache\src\a\b")
        );
        assert_eq!(
            join(Os::Linux, Path::new("/c"), &["src", "x"]),
            PathBuf::from("/c/src/x")
        );
        assert_ne!(hash_hex(&["ab", "c"]), hash_hex(&["a", "bc"]));
        assert_eq!(sanitize("v0.9/1+x"), "v0.9_1_x");
        assert!(looks_like_url("git@github.com:a/b") && !looks_like_url("./src"));
    }
}
