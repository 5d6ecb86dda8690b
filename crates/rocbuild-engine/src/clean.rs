//! `rocbuild clean`: what the cache holds, by kind, and removing it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{EngineError, Result};

/// The kinds of things in the cache, and the top-level directories that hold them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Bare git clones and checkouts.
    Sources,
    /// Build trees, dependencies built from source, rocbuild's TorchConfig.cmake,
    /// pip-installed build tools, the folders of `rocbuild test` runs.
    Builds,
    Logs,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Sources, Kind::Builds, Kind::Logs];

    pub fn dirs(self) -> &'static [&'static str] {
        match self {
            Kind::Sources => &["git", "src"],
            Kind::Builds => &["build", "deps", "torch-lite", "tools", "test"],
            Kind::Logs => &["logs"],
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Sources => "sources",
            Kind::Builds => "builds",
            Kind::Logs => "logs",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Usage {
    pub kind: Kind,
    pub bytes: u64,
    pub entries: Vec<PathBuf>,
}

/// Bytes of the files under `p` (symlinks counted as themselves, not followed).
pub fn size_of(p: &Path) -> u64 {
    let Ok(md) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if !md.is_dir() {
        return md.len();
    }
    std::fs::read_dir(p)
        .map(|rd| rd.flatten().map(|e| size_of(&e.path())).sum())
        .unwrap_or(0)
}

/// The cache's use by kind.
pub fn usage(cache: &Path) -> Vec<Usage> {
    Kind::ALL
        .iter()
        .map(|&kind| {
            let mut entries = Vec::new();
            let mut bytes = 0;
            for d in kind.dirs() {
                let p = cache.join(d);
                if p.exists() {
                    bytes += size_of(&p);
                    entries.push(p);
                }
            }
            Usage {
                kind,
                bytes,
                entries,
            }
        })
        .collect()
}

/// Remove the cache's directories of `kinds`. Build trees are removed under their lock, so
/// a run building one finishes first.
pub fn remove(cache: &Path, kinds: &[Kind]) -> Result<u64> {
    let mut freed = 0;
    for u in usage(cache).into_iter().filter(|u| kinds.contains(&u.kind)) {
        for dir in &u.entries {
            let mut locks = Vec::new();
            // A dependency's lock is its build tree's: `deps/<name>-<tag>-<key>/build.lock`.
            let tree = |e: &Path| match dir.file_name().and_then(|n| n.to_str()) {
                Some("build") => Some(e.to_path_buf()),
                Some("deps") => Some(e.join("build")),
                _ => None,
            };
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if let Some(t) = tree(&e.path()).filter(|_| e.path().is_dir()) {
                    locks.push(crate::cache_lock::CacheLock::acquire(&t)?);
                }
            }
            freed += size_of(dir);
            fs_err::remove_dir_all(dir).map_err(EngineError::io("remove", dir))?;
            drop(locks);
        }
    }
    Ok(freed)
}

/// `1.5 GiB`, `312 KiB`, `10 B`.
pub fn human(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", units[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_by_kind_and_removal_of_one_kind() {
        let d = tempfile::tempdir().unwrap();
        let c = d.path();
        for (f, n) in [
            ("git/a.git/pack", 100),
            ("src/a-1/x.c", 20),
            ("build/a-1/lib.so", 3000),
            ("test/run-a-77/overlay/pytest.py", 5),
            ("logs/a-1.log", 7),
        ] {
            let p = c.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, vec![0u8; n]).unwrap();
        }
        let u = usage(c);
        let by = |k: Kind| u.iter().find(|x| x.kind == k).unwrap().bytes;
        assert_eq!(
            (by(Kind::Sources), by(Kind::Builds), by(Kind::Logs)),
            (120, 3005, 7)
        );
        assert_eq!(remove(c, &[Kind::Builds]).unwrap(), 3005);
        assert!(!c.join("build").exists() && !c.join("test").exists());
        assert!(c.join("git").exists() && c.join("logs").exists());
        assert_eq!(human(1536), "1.5 KiB");
    }
}
