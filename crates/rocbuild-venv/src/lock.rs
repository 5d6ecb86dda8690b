//! One run per venv at a time: an advisory lock
//! (fs2: `flock` on Unix, `LockFileEx` on Windows) that the OS releases when a process dies,
//! so a SIGKILLed run never leaves a stale lock behind.

use rocbuild_probe::platform::host;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use fs2::FileExt;

use crate::error::{Result, VenvError};
use crate::layout;

pub use crate::layout::LOCK_FILE;

/// Held for a whole run on one venv: build, install, manifest write.
#[derive(Debug)]
pub struct VenvLock {
    /// Taken (closed) on drop before the file is removed on Windows.
    file: Option<File>,
    path: PathBuf,
    dir: PathBuf,
}

/// Open (or create) the lock file, never through a link: a link planted at `.rocbuild/lock`
/// would have the holder's pid written into whatever it points to.
pub fn open(path: &Path) -> Result<File> {
    if crate::confine::is_link_at(path) {
        return Err(link_refused(path));
    }
    let mut o = OpenOptions::new();
    o.read(true).write(true).create(true).truncate(false);
    // Never through a link; where an open file cannot be deleted cleanly, never with delete
    // sharing, so that no one (the holder included) deletes it while anyone has it open: a
    // "delete pending" name would stay, `.rocbuild/` could not go, and a waiter that opens it
    // again would be refused.
    host::lock_file_options(&mut o);
    o.open(path).map_err(|e| {
        if crate::confine::is_link_at(path) {
            link_refused(path)
        } else {
            VenvError::io("open the lock", path)(e)
        }
    })
}

fn link_refused(path: &Path) -> VenvError {
    VenvError::Escape {
        path: path.display().to_string(),
        root: path
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        why: "it is a link, which rocbuild never makes or follows (remove it: rocbuild makes its own)"
            .into(),
    }
}

fn holder_pid(file: &mut File) -> Option<u32> {
    let mut s = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut s).ok()?;
    s.trim().parse().ok()
}

impl VenvLock {
    /// Lock the venv whose site-packages is `site`. When another run holds it: with `wait`,
    /// call `on_wait(pid of the holder)` once and block until it is done; else fail at once.
    pub fn acquire(
        site: &Path,
        wait: bool,
        on_wait: &mut dyn FnMut(Option<u32>),
    ) -> Result<VenvLock> {
        let dir = layout::state_dir(site);
        let path = dir.join(LOCK_FILE);
        let mut told = false;
        loop {
            if crate::confine::is_link_at(&dir) {
                return Err(link_refused(&dir));
            }
            fs_err::create_dir_all(&dir).map_err(VenvError::io("create", &dir))?;
            // Made in `.rocbuild/` held open: a swap of it for a link meanwhile cannot put the
            // lock file where the link points.
            let held = rocbuild_probe::platform::state_files::HeldDir::open(&dir)
                .map_err(|_| link_refused(&dir))?;
            let mut file = held.open_lock(LOCK_FILE).map_err(|e| {
                if crate::confine::is_link_at(&path) {
                    link_refused(&path)
                } else {
                    VenvError::io("open the lock", &path)(e)
                }
            })?;
            if file.try_lock_exclusive().is_err() {
                let pid = holder_pid(&mut file);
                if !wait {
                    return Err(VenvError::Locked {
                        venv: site.display().to_string(),
                        pid: pid.map_or("unknown".into(), |p| p.to_string()),
                    });
                }
                if !told {
                    on_wait(pid);
                    told = true;
                }
                // Polled, so that Ctrl-C stops the wait (a blocking flock is restarted
                // after the signal handler).
                while let Err(e) = file.try_lock_exclusive() {
                    if e.kind() != fs2::lock_contended_error().kind() {
                        return Err(VenvError::io("lock", &path)(e));
                    }
                    if let Some(signal) = crate::signal::received() {
                        return Err(VenvError::Interrupted {
                            signal,
                            name: crate::signal::name(signal).into(),
                            venv: site.display().to_string(),
                        });
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            }
            // A releasing holder may have removed it while we waited on the old inode: then
            // the new file is the one to lock.
            if !host::still_the_file_at(&file, &path) {
                continue;
            }
            // Who holds it, for the message of a run that has to wait.
            let _ = file.set_len(0);
            let _ = file.rewind();
            let _ = write!(file, "{}", std::process::id());
            let _ = file.flush();
            return Ok(VenvLock {
                file: Some(file),
                path,
                dir,
            });
        }
    }
}

impl Drop for VenvLock {
    /// Leave no trace: remove the lock file (still holding the lock, so waiters re-check,
    /// find it gone and retry on a new one), and `.rocbuild/` too when nothing else is in it.
    /// A run that changes nothing (refused, failed, rolled back) thus leaves the venv byte
    /// for byte as it was, and the lock file a killed run left behind goes with the next run.
    fn drop(&mut self) {
        if host::DELETE_WHILE_OPEN {
            let _ = std::fs::remove_file(&self.path);
            let _ = std::fs::remove_dir(&self.dir);
            if let Some(f) = &self.file {
                let _ = FileExt::unlock(f);
            }
        } else {
            // The file cannot be deleted while a handle is open (see `open`): unlock and
            // close first, then remove it, unless a waiter opened it meanwhile (then it
            // stays, for the waiter, and so does `.rocbuild/`).
            if let Some(f) = self.file.take() {
                let _ = FileExt::unlock(&f);
                drop(f);
            }
            let _ = std::fs::remove_file(&self.path);
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_venv_fails_fast_or_waits_and_leaves_no_trace() {
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        let first = VenvLock::acquire(site, false, &mut |_| {}).unwrap();
        let err = VenvLock::acquire(site, false, &mut |_| {}).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("(pid {})", std::process::id())),
            "{err}"
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let site2 = site.to_path_buf();
        let waiter = std::thread::spawn(move || {
            let mut waited = None;
            let l = VenvLock::acquire(&site2, true, &mut |pid| waited = Some(pid)).unwrap();
            tx.send(()).unwrap();
            drop(l);
            waited
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            rx.try_recv().is_err(),
            "the waiter got the lock while it was held"
        );
        drop(first);
        rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(waiter.join().unwrap(), Some(Some(std::process::id())));
        // Nothing else was in .rocbuild/: nothing is left.
        assert!(!site.join(".rocbuild").exists());
    }
}
