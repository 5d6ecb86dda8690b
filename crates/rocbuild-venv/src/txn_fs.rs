//! The filesystem steps of an install, through one small interface. Every step is counted so
//! a test can make the process SIGKILL itself right after the N-th one (see [`arm_kill`]) and
//! prove that the next run finishes or undoes whatever was left, or make the disk "fill up"
//! after the N-th one (see [`arm_disk_full`]) and prove that the run undoes its own work.

use rocbuild_probe::platform::host;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

static KILL_AFTER: AtomicU64 = AtomicU64::new(0);
static STEPS: AtomicU64 = AtomicU64::new(0);
static FULL_AFTER: AtomicU64 = AtomicU64::new(0);
static PAUSE_AFTER: AtomicU64 = AtomicU64::new(0);
static PAUSE_IN_SWAP: AtomicU64 = AtomicU64::new(0);
static SWAP_AT: AtomicU64 = AtomicU64::new(0);
static PAUSE_UNTIL: std::sync::OnceLock<fn() -> bool> = std::sync::OnceLock::new();

/// Test-only: right after the `n`-th filesystem step (`0` disarms), say so on stderr and wait
/// (at most 60 s) until `until` holds, e.g. until a signal came: a test sends a real signal to
/// a run at a known point of its install. The binary arms it from
/// `ROCBUILD_TEST_PAUSE_AFTER_STEP`.
pub fn arm_pause(n: u64, until: fn() -> bool) {
    let _ = PAUSE_UNTIL.set(until);
    PAUSE_AFTER.store(n, Ordering::SeqCst);
}

fn pause() {
    let until = PAUSE_UNTIL.get().copied().unwrap_or(|| true);
    #[allow(clippy::print_stderr)]
    {
        eprintln!("rocbuild-test: paused after install step {}", steps_done());
    }
    for _ in 0..1200 {
        if until() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Test-only: SIGKILL this process right after the `n`-th filesystem step of an install
/// (`0` disarms). The binary arms it from `ROCBUILD_TEST_KILL_AFTER_STEP`.
pub fn arm_kill(n: u64) {
    KILL_AFTER.store(n, Ordering::SeqCst);
}

/// Test-only: after the `n`-th filesystem step (`0` disarms), every step that needs disk
/// space (create a directory, copy, write) fails with ENOSPC as on a full disk, and does
/// nothing; renames and removals, which free space or need none, still work, so a rollback
/// can run. The binary arms it from `ROCBUILD_TEST_FAIL_AFTER_STEP`.
pub fn arm_disk_full(n: u64) {
    FULL_AFTER.store(n, Ordering::SeqCst);
}

/// Refuse a step that needs space when the simulated disk is full.
fn space() -> io::Result<()> {
    let after = FULL_AFTER.load(Ordering::SeqCst);
    if after != 0 && STEPS.load(Ordering::SeqCst) >= after {
        return Err(host::no_space_error());
    }
    Ok(())
}

/// How many install steps this process has done.
pub fn steps_done() -> u64 {
    STEPS.load(Ordering::SeqCst)
}

/// Test-only: like [`arm_pause`], counted from the step that wrote the swap's journal (`1` is
/// the first move into the venv): a test that must stop an install in its swap, whatever
/// staging took. The binary arms it from `ROCBUILD_TEST_PAUSE_AFTER_STEP=swap+N`.
pub fn arm_pause_in_swap(n: u64, until: fn() -> bool) {
    let _ = PAUSE_UNTIL.set(until);
    PAUSE_IN_SWAP.store(n, Ordering::SeqCst);
}

/// The swap's journal is on disk: the steps that follow move files into the venv.
pub fn swap_began() {
    SWAP_AT.store(STEPS.load(Ordering::SeqCst), Ordering::SeqCst);
}

/// Count one step; die by a real SIGKILL (no destructors, no flush) when armed for it.
fn tick() {
    let n = STEPS.fetch_add(1, Ordering::SeqCst) + 1;
    if KILL_AFTER.load(Ordering::SeqCst) == n {
        host::kill_self();
    }
    let (in_swap, at) = (
        PAUSE_IN_SWAP.load(Ordering::SeqCst),
        SWAP_AT.load(Ordering::SeqCst),
    );
    if PAUSE_AFTER.load(Ordering::SeqCst) == n || (in_swap != 0 && at != 0 && n == at + in_swap) {
        pause();
    }
}

fn counted<T>(r: io::Result<T>) -> io::Result<T> {
    tick();
    r
}

pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    counted(fs_err::rename(from, to))
}

pub fn create_dir(p: &Path) -> io::Result<()> {
    space()?;
    counted(fs_err::create_dir(p))
}

pub fn create_dir_all(p: &Path) -> io::Result<()> {
    if p.is_dir() {
        return Ok(());
    }
    space()?;
    counted(fs_err::create_dir_all(p))
}

pub fn remove_file(p: &Path) -> io::Result<()> {
    counted(fs_err::remove_file(p))
}

pub fn remove_dir(p: &Path) -> io::Result<()> {
    counted(fs_err::remove_dir(p))
}

pub fn remove_dir_all(p: &Path) -> io::Result<()> {
    counted(fs_err::remove_dir_all(p))
}

pub fn copy(from: &Path, to: &Path) -> io::Result<()> {
    if let Some(parent) = to.parent() {
        create_dir_all(parent)?;
    }
    space()?;
    counted(fs_err::copy(from, to).map(|_| ()))
}

/// Copy `from` to `to` as it is: a link as the same link (never what it points to), a file
/// byte for byte.
pub fn copy_entry(from: &Path, to: &Path) -> io::Result<()> {
    let md = std::fs::symlink_metadata(from)?;
    if !md.file_type().is_symlink() {
        return copy(from, to);
    }
    if let Some(parent) = to.parent() {
        create_dir_all(parent)?;
    }
    space()?;
    let target = std::fs::read_link(from)?;
    let is_dir = std::fs::metadata(from).is_ok_and(|m| m.is_dir());
    counted(host::symlink(&target, to, is_dir))
}

/// Write and fsync (a journal must be on disk before the moves it describes).
pub fn write_synced(p: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    space()?;
    let r = (|| {
        // Whatever is at `p` goes first, a link as a link: the new file is created, never
        // opened through a link someone put there (it would write wherever that points).
        if std::fs::symlink_metadata(p).is_ok() {
            std::fs::remove_file(p)?;
        }
        // Never world-writable, whatever the umask (a manifest, a journal).
        let mut f = rocbuild_secret::create_new_file(p)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{e}: {}", p.display())))?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if r.is_err() {
        // A full disk leaves no partial file behind.
        let _ = std::fs::remove_file(p);
    }
    counted(r)
}

pub fn write(p: &Path, bytes: &[u8]) -> io::Result<()> {
    space()?;
    counted(fs_err::write(p, bytes))
}

/// Replace `p` atomically: a synced temp file beside it, then a rename, both in the
/// directory of `p` held open (`HeldDir`): a process that swaps that directory for a link
/// meanwhile cannot make rocbuild write where the link points.
pub fn write_atomic(p: &Path, bytes: &[u8]) -> io::Result<()> {
    use rocbuild_probe::platform::state_files::HeldDir;
    let (Some(dir), Some(name)) = (p.parent(), p.file_name().and_then(|n| n.to_str())) else {
        return write_atomic_by_path(p, bytes);
    };
    let held = HeldDir::open(dir)?;
    let tmp = format!("{name}.tmp");
    space()?;
    let written = (|| {
        use std::io::Write;
        held.remove(&tmp)?;
        let mut f = held.create_new(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if written.is_err() {
        let _ = held.remove(&tmp);
    }
    counted(written)?;
    counted(held.rename(&tmp, name)).inspect_err(|_| {
        let _ = held.remove(&tmp);
    })
}

fn write_atomic_by_path(p: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = p.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    // A half-written temporary file (a full disk) goes with the error, as does one that
    // could not be renamed.
    write_synced(&tmp, bytes)
        .and_then(|()| rename(&tmp, p))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
}

pub use rocbuild_probe::platform::host::in_use;

/// Count an edit made by another crate (RUNPATH rewrite of a staged file).
pub fn edited<T>(r: T) -> T {
    tick();
    r
}
