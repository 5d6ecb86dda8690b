//! The shared cache safe for concurrent runs: an advisory lock per cache entry (fs2), which
//! the OS releases when a process dies.

use std::fs::File;
use std::path::Path;

use fs2::FileExt;

use crate::error::{EngineError, Result};

/// A lock on one entry of the shared cache (a git clone, a build tree), held while it is
/// fetched, checked out or built. Concurrent runs on other venvs wait for each other here.
#[derive(Debug)]
pub struct CacheLock {
    _file: File,
}

impl CacheLock {
    /// Lock `<entry>.lock` (beside the entry), waiting as long as it takes.
    pub fn acquire(entry: &Path) -> Result<CacheLock> {
        let mut name = entry.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        let path = entry.with_file_name(name);
        if let Some(p) = path.parent() {
            fs_err::create_dir_all(p).map_err(EngineError::io("create", p))?;
        }
        let file = rocbuild_venv::lock::open(&path)?;
        // Polled, so that Ctrl-C stops the wait (a blocking flock is restarted after the
        // signal handler).
        while let Err(e) = file.try_lock_exclusive() {
            if e.kind() != fs2::lock_contended_error().kind() {
                return Err(EngineError::io("lock", &path)(e));
            }
            crate::interrupt::check(&format!("the wait for {}", path.display()))?;
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Ok(CacheLock { _file: file })
    }
}
