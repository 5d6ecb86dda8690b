//! Install as a transaction: stage beside site-packages, journal, back up, swap, verify,
//! then commit or roll back byte for byte. A journal left by a killed run is undone first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, VenvError};
use crate::layout;
use crate::manifest;
use crate::ownership::{self, Package};
use crate::txn_fs;

/// One reversible filesystem step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Op {
    /// Create a directory that did not exist.
    Mkdir { path: PathBuf },
    /// Move an existing file out of the way.
    Backup { path: PathBuf, backup: PathBuf },
    /// Move a staged file into place.
    Place { staged: PathBuf, path: PathBuf },
}

/// Where a transaction stands. Before the commit point a killed run is undone; after it, the
/// next run finishes it (the commit point is one atomic rename of the journal).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    #[default]
    Swap,
    Commit,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    pub recipe: String,
    /// `.rocbuild/` held nothing of ours before this run: empty it on rollback.
    pub created_state_dir: bool,
    pub ops: Vec<Op>,
    #[serde(default)]
    pub phase: Phase,
    /// After the commit point: files to move into `.rocbuild/backup/<recipe>/` (from, to).
    #[serde(default)]
    pub keep: Vec<(PathBuf, PathBuf)>,
    /// After the commit point: the staged manifest and where it goes.
    #[serde(default)]
    pub manifest: Option<(PathBuf, PathBuf)>,
    /// After the commit point (a restore): files to remove, their emptied parent directories
    /// with them (up to site-packages).
    #[serde(default)]
    pub remove: Vec<PathBuf>,
    /// After the commit point (a restore): (backup, path) to move back, over whatever is at
    /// `path`, as long as the backup is still there.
    #[serde(default)]
    pub put_back: Vec<(PathBuf, PathBuf)>,
    /// After the commit point (a restore): files or directories to remove last (the manifest,
    /// the emptied backup).
    #[serde(default)]
    pub drop: Vec<PathBuf>,
    /// After the commit point (an install that takes the package over): the baseline copied
    /// before the swap, and where it goes (`.rocbuild/backup/<recipe>/`, replacing an older
    /// one). See [`crate::ownership`].
    #[serde(default)]
    pub baseline: Option<(PathBuf, PathBuf)>,
}

impl Journal {
    /// A journal already past its commit point: what [`finish`] carries out (and, if the run
    /// is killed, the next one finishes).
    pub fn committed(recipe: &str) -> Journal {
        Journal {
            recipe: recipe.into(),
            created_state_dir: false,
            ops: Vec::new(),
            phase: Phase::Commit,
            keep: Vec::new(),
            manifest: None,
            remove: Vec::new(),
            put_back: Vec::new(),
            drop: Vec::new(),
            baseline: None,
        }
    }
}

/// Write `journal` (its commit point) and carry it out. A run killed at any step after the
/// journal is on disk is finished by the next command that takes the venv lock.
pub fn finish(site: &Path, journal: &Journal) -> Result<()> {
    let jp = layout::journal(site);
    let text = serde_json::to_string_pretty(journal).unwrap_or_default();
    txn_fs::write_atomic(&jp, text.as_bytes()).map_err(io("write", &jp))?;
    roll_forward(site, journal)
}

/// Remove the empty directories from `p`'s parent up to (not including) `stop`.
pub(crate) fn prune_empty_parents(p: &Path, stop: &Path) {
    let mut d = p.parent();
    while let Some(dir) = d {
        if dir == stop || !dir.starts_with(stop) || !dir.is_dir() {
            break;
        }
        let empty = std::fs::read_dir(dir).is_ok_and(|mut rd| rd.next().is_none());
        if !empty || txn_fs::remove_dir(dir).is_err() {
            break;
        }
        d = dir.parent();
    }
}

/// A file to put at `rel` (relative to site-packages, `/`-separated) from `staged`.
#[derive(Debug, Clone)]
pub struct NewFile {
    pub rel: String,
    pub staged: PathBuf,
}

/// The swap, once performed, waiting for verification.
pub struct Swapped {
    site: PathBuf,
    journal: Journal,
    /// The baseline copied before the swap, when this install takes the package over.
    baseline: Option<PathBuf>,
}

#[allow(clippy::unnecessary_to_owned)] // owned: the closure must not borrow `p`
fn io(action: &str, p: &Path) -> impl FnOnce(std::io::Error) -> VenvError {
    VenvError::io(action, p.to_path_buf())
}

/// Empty `.rocbuild/` of everything but the lock file (held by the running process; the lock
/// removes itself and the directory when it is all that is left). The journal goes last.
fn empty_state_dir(site: &Path) {
    let dir = layout::state_dir(site);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        if name == layout::LOCK_FILE || name == layout::JOURNAL_FILE {
            continue;
        }
        let p = e.path();
        let _ = if p.is_dir() {
            txn_fs::remove_dir_all(&p)
        } else {
            txn_fs::remove_file(&p)
        };
    }
    let _ = remove_journal(site);
}

/// Remove the journal, and its temp file if a run was killed while writing it.
fn remove_journal(site: &Path) -> Result<()> {
    let jp = layout::journal(site);
    let tmp = jp.with_extension("json.tmp");
    if tmp.exists() {
        txn_fs::remove_file(&tmp).map_err(io("remove", &tmp))?;
    }
    if jp.exists() {
        txn_fs::remove_file(&jp).map_err(io("remove", &jp))?;
    }
    Ok(())
}

/// Undo whatever a journal describes (idempotent: each op checks where its file is).
fn undo(site: &Path, journal: &Journal) -> Result<()> {
    for op in journal.ops.iter().rev() {
        match op {
            Op::Place { staged, path } => {
                if !staged.exists() && path.exists() {
                    txn_fs::remove_file(path).map_err(io("roll back", path))?;
                }
            }
            Op::Backup { path, backup } => {
                if backup.exists() && !path.exists() {
                    if let Some(p) = path.parent() {
                        txn_fs::create_dir_all(p).map_err(io("create", p))?;
                    }
                    txn_fs::rename(backup, path).map_err(io("restore", path))?;
                }
            }
            Op::Mkdir { path } => {
                if path.is_dir() {
                    let _ = txn_fs::remove_dir(path);
                }
            }
        }
    }
    let txn = layout::txn(site);
    if txn.exists() {
        let _ = txn_fs::remove_dir_all(&txn);
    }
    if journal.created_state_dir {
        empty_state_dir(site);
        Ok(())
    } else {
        remove_journal(site)
    }
}

/// Finish a committed transaction: keep the backups, put the manifest in place, clean up.
/// Idempotent, so a run killed in the middle of it is finished by the next one.
fn roll_forward(site: &Path, journal: &Journal) -> Result<()> {
    for p in &journal.remove {
        if std::fs::symlink_metadata(p).is_ok() {
            txn_fs::remove_file(p).map_err(io("remove", p))?;
        }
        prune_empty_parents(p, site);
    }
    for (backup, path) in &journal.put_back {
        if !backup.exists() {
            continue; // moved back already
        }
        if let Some(p) = path.parent() {
            txn_fs::create_dir_all(p).map_err(io("create", p))?;
        }
        if std::fs::symlink_metadata(path).is_ok() {
            txn_fs::remove_file(path).map_err(io("remove", path))?;
        }
        txn_fs::rename(backup, path).map_err(io("restore", path))?;
    }
    if let Some((staged, dest)) = &journal.baseline {
        if staged.is_dir() {
            if dest.exists() {
                txn_fs::remove_dir_all(dest).map_err(io("remove", dest))?;
            }
            if let Some(p) = dest.parent() {
                txn_fs::create_dir_all(p).map_err(io("create", p))?;
            }
            txn_fs::rename(staged, dest).map_err(io("keep the baseline", dest))?;
        }
    }
    for (from, to) in &journal.keep {
        if from.exists() && !to.exists() {
            if let Some(p) = to.parent() {
                txn_fs::create_dir_all(p).map_err(io("create", p))?;
            }
            txn_fs::rename(from, to).map_err(io("keep backup", to))?;
        }
    }
    if let Some((staged, dest)) = &journal.manifest {
        if staged.exists() {
            txn_fs::rename(staged, dest).map_err(io("write", dest))?;
        }
    }
    for p in &journal.drop {
        if p.is_dir() {
            txn_fs::remove_dir_all(p).map_err(io("remove", p))?;
        } else if p.exists() {
            txn_fs::remove_file(p).map_err(io("remove", p))?;
        }
    }
    if !journal.drop.is_empty() {
        let _ = std::fs::remove_dir(layout::backups(site));
    }
    let txn = layout::txn(site);
    if txn.exists() {
        txn_fs::remove_dir_all(&txn).map_err(io("remove", &txn))?;
    }
    remove_journal(site)
}

/// Cheap check for traces of a run: a journal, a staging area, or a pid in the lock file (a
/// finished run empties it). `status` recovers only then, so it stays read-only otherwise.
pub fn needs_recovery(site: &Path) -> bool {
    let lock = layout::state_dir(site).join(layout::LOCK_FILE);
    layout::journal(site).exists()
        || layout::txn(site).exists()
        || std::fs::metadata(lock).is_ok_and(|m| m.len() > 0)
}

/// What [`recover`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovered {
    Nothing,
    /// A run killed before its commit point: undone.
    RolledBack,
    /// A run killed after its commit point: finished.
    Completed,
}

/// Finish the job of a run that was killed mid-install. Call with the venv lock held.
pub fn recover(site: &Path) -> Result<Recovered> {
    let jp = layout::journal(site);
    let Ok(text) = fs_err::read_to_string(&jp) else {
        // A staging dir without a journal: the swap never started.
        let txn = layout::txn(site);
        if txn.exists() {
            txn_fs::remove_dir_all(&txn).map_err(io("remove", &txn))?;
        }
        // The journal's temp file, killed while being written: nothing was moved yet.
        let tmp = jp.with_extension("json.tmp");
        if tmp.exists() {
            txn_fs::remove_file(&tmp).map_err(io("remove", &tmp))?;
            if state_dir_is_new(site) {
                empty_state_dir(site);
            }
        }
        return Ok(Recovered::Nothing);
    };
    let journal: Journal = serde_json::from_str(&text).map_err(|e| VenvError::Io {
        action: "read the journal of an interrupted run".into(),
        path: jp.display().to_string(),
        source: std::io::Error::other(e),
    })?;
    match journal.phase {
        Phase::Swap => {
            undo(site, &journal)?;
            Ok(Recovered::RolledBack)
        }
        Phase::Commit => {
            roll_forward(site, &journal)?;
            Ok(Recovered::Completed)
        }
    }
}

/// `.rocbuild/` holds nothing of ours (no manifest, no backup): only the lock, maybe a
/// transaction's leftovers.
fn state_dir_is_new(site: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(layout::state_dir(site)) else {
        return true;
    };
    rd.flatten().all(|e| {
        let n = e.file_name();
        let n = n.to_string_lossy();
        n == layout::LOCK_FILE || n == "txn" || n.starts_with("journal.json")
    })
}

/// Start a transaction: make `.rocbuild/txn/stage/` and return whether `.rocbuild/` is new.
pub fn begin(site: &Path) -> Result<bool> {
    let created = state_dir_is_new(site);
    let txn = layout::txn(site);
    if txn.exists() {
        txn_fs::remove_dir_all(&txn).map_err(io("remove", &txn))?;
    }
    txn_fs::create_dir_all(&txn.join("stage")).map_err(io("create", &txn))?;
    Ok(created)
}

/// Give up before the swap: remove the staging area (and `.rocbuild/` if it is new).
pub fn abandon(site: &Path, created: bool) {
    let txn = layout::txn(site);
    if txn.exists() {
        let _ = txn_fs::remove_dir_all(&txn);
    }
    if created {
        empty_state_dir(site);
    }
}

fn to_native(site: &Path, rel: &str) -> PathBuf {
    rel.split('/')
        .fold(site.to_path_buf(), |p, part| p.join(part))
}

/// Copy `pkg`'s whole footprint (bytecode included), byte for byte, to the transaction's
/// `baseline/`: what `restore` gives back once this install commits.
fn stage_baseline(site: &Path, pkg: &Package) -> Result<PathBuf> {
    let dir = layout::txn(site).join("baseline");
    txn_fs::create_dir_all(&dir).map_err(io("create", &dir))?;
    for rel in ownership::footprint(site, pkg) {
        let (from, to) = (to_native(site, &rel), to_native(&dir, &rel));
        if let Some(p) = to.parent() {
            txn_fs::create_dir_all(p).map_err(io("create", p))?;
        }
        txn_fs::copy(&from, &to).map_err(io("back up", &from))?;
    }
    Ok(dir)
}

/// Journal, back up and move `new` into place; move `park` (relative paths) to the backup.
/// `take_over`: rocbuild does not hold the package now (see [`crate::ownership`]), so its
/// footprint as it is becomes the baseline `restore` gives back.
pub fn swap(
    site: &Path,
    recipe: &str,
    created_state_dir: bool,
    new: &[NewFile],
    park: &[String],
    take_over: Option<&Package>,
) -> Result<Swapped> {
    let baseline = match take_over {
        Some(pkg) => Some(stage_baseline(site, pkg)?),
        None => None,
    };
    let backup_root = layout::txn(site).join("backup");
    let mut ops = Vec::new();
    let mut made: Vec<PathBuf> = Vec::new();
    for f in new {
        let path = to_native(site, &f.rel);
        let mut missing = Vec::new();
        let mut d = path.parent();
        while let Some(dir) = d {
            if dir.exists() || made.contains(&dir.to_path_buf()) {
                break;
            }
            missing.push(dir.to_path_buf());
            d = dir.parent();
        }
        for m in missing.into_iter().rev() {
            made.push(m.clone());
            ops.push(Op::Mkdir { path: m });
        }
        if path.exists() {
            ops.push(Op::Backup {
                path: path.clone(),
                backup: to_native(&backup_root, &f.rel),
            });
        }
        ops.push(Op::Place {
            staged: f.staged.clone(),
            path,
        });
    }
    for rel in park {
        let path = to_native(site, rel);
        if path.is_file() {
            ops.push(Op::Backup {
                path,
                backup: to_native(&backup_root, rel),
            });
        }
    }
    let journal = Journal {
        recipe: recipe.into(),
        created_state_dir,
        ops,
        phase: Phase::Swap,
        keep: Vec::new(),
        manifest: None,
        remove: Vec::new(),
        put_back: Vec::new(),
        drop: Vec::new(),
        baseline: None,
    };
    let jp = layout::journal(site);
    let text = serde_json::to_string_pretty(&journal).unwrap_or_default();
    txn_fs::write_atomic(&jp, text.as_bytes()).map_err(io("write", &jp))?;
    let swapped = Swapped {
        site: site.to_path_buf(),
        journal,
        baseline,
    };
    if let Err(e) = perform(&swapped.journal) {
        undo(site, &swapped.journal)?;
        return Err(e);
    }
    // A folder the swap emptied (the dist-info of the version replaced) goes: an empty
    // `pkg-0.9.0.dist-info/` still tells importlib.metadata that 0.9.0 is installed.
    for op in &swapped.journal.ops {
        if let Op::Backup { path, .. } = op {
            prune_empty_parents(path, site);
        }
    }
    Ok(swapped)
}

fn perform(journal: &Journal) -> Result<()> {
    for op in &journal.ops {
        match op {
            Op::Mkdir { path } => txn_fs::create_dir(path).map_err(io("create", path))?,
            Op::Backup { path, backup } => {
                if let Some(p) = backup.parent() {
                    txn_fs::create_dir_all(p).map_err(io("create", p))?;
                }
                txn_fs::rename(path, backup).map_err(io("back up", path))?;
            }
            Op::Place { staged, path } => {
                txn_fs::rename(staged, path).map_err(io("install", path))?
            }
        }
    }
    Ok(())
}

/// Where `restore` finds the wheel's own files of `recipe`.
pub fn backup_dir(site: &Path, recipe: &str) -> PathBuf {
    layout::backup(site, recipe)
}

impl Swapped {
    /// Put everything back as it was.
    pub fn roll_back(self) -> Result<()> {
        undo(&self.site, &self.journal)
    }

    /// Keep the new files. When this install took the package over, the baseline staged
    /// before the swap replaces `.rocbuild/backup/<recipe>/`; otherwise the baseline stays as
    /// it is, and of what the swap displaced only files that were not rocbuild's (by
    /// `previous`'s record) join it, where it has none. The manifest's `ownership.held` is
    /// filled in here from the files as they now are.
    pub fn commit(
        mut self,
        manifest: &manifest::Manifest,
        previous: Option<&manifest::Manifest>,
    ) -> Result<()> {
        let site = self.site.clone();
        let keep_root = backup_dir(&site, &manifest.recipe);
        let keep = match &self.baseline {
            Some(staged) => {
                self.journal.baseline = Some((staged.clone(), keep_root));
                Vec::new()
            }
            None => self.displaced_to_keep(&keep_root, previous),
        };
        let mut manifest = manifest.clone();
        if let Some(o) = manifest.ownership.as_mut() {
            o.held = ownership::hashes(&site, &o.package());
        }
        // Stage the manifest, then the commit point: the journal says "commit".
        let staged = layout::txn(&site).join("manifest.json");
        let text = serde_json::to_string_pretty(&manifest).unwrap_or_default();
        txn_fs::write_synced(&staged, text.as_bytes()).map_err(io("write", &staged))?;
        self.journal.phase = Phase::Commit;
        self.journal.keep = keep;
        self.journal.manifest = Some((staged, manifest::path(&site, &manifest.recipe)));
        let jp = layout::journal(&site);
        let text = serde_json::to_string_pretty(&self.journal).unwrap_or_default();
        txn_fs::write_atomic(&jp, text.as_bytes()).map_err(io("write", &jp))?;
        roll_forward(&site, &self.journal)
    }

    /// The swap's backups that were not rocbuild's (by `previous`'s record: its held files,
    /// or for an older manifest its builds and pure-Python part) and that the baseline lacks.
    fn displaced_to_keep(
        &self,
        keep_root: &Path,
        previous: Option<&manifest::Manifest>,
    ) -> Vec<(PathBuf, PathBuf)> {
        let txn_backup = layout::txn(&self.site).join("backup");
        let mut ours: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        if let Some(p) = previous {
            for f in &p.files {
                ours.insert(&f.path, Some(&f.sha256));
            }
            for f in p.python_part.iter().flat_map(|pp| &pp.files) {
                ours.insert(f, None);
            }
            for (f, sha) in p.ownership.iter().flat_map(|o| &o.held) {
                ours.insert(f, Some(sha));
            }
        }
        let mut keep = Vec::new();
        for op in &self.journal.ops {
            let Op::Backup { backup, .. } = op else {
                continue;
            };
            let Ok(rel) = backup.strip_prefix(&txn_backup) else {
                continue;
            };
            let rel_s = rel.to_string_lossy().replace('\\', "/");
            let was_ours = match ours.get(rel_s.as_str()) {
                Some(Some(sha)) => manifest::sha256_file(backup).is_ok_and(|(h, _)| h == *sha),
                Some(None) => true,
                None => false,
            };
            let dest = keep_root.join(rel);
            if !was_ours && !dest.exists() {
                keep.push((backup.clone(), dest));
            }
        }
        keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                if p.is_dir() {
                    out.insert(rel + "/", Vec::new());
                    stack.push(p);
                } else {
                    out.insert(rel, std::fs::read(&p).unwrap());
                }
            }
        }
        out
    }

    #[test]
    fn roll_back_is_byte_identical_and_recover_undoes_a_killed_run() {
        let site = tempfile::tempdir().unwrap();
        let s = site.path();
        std::fs::create_dir_all(s.join("pkg")).unwrap();
        std::fs::write(s.join("pkg/libcore4.so"), b"old4").unwrap();
        std::fs::write(s.join("pkg/libcore5.so"), b"old5").unwrap();
        let before = snapshot(s);

        for kill_after in [None, Some(())] {
            let lock = crate::lock::VenvLock::acquire(s, false, &mut |_| {}).unwrap();
            let created = begin(s).unwrap();
            let staged = layout::txn(s).join("stage/libcore5.so");
            std::fs::write(&staged, b"new5").unwrap();
            let staged2 = layout::txn(s).join("stage/x.so");
            std::fs::write(&staged2, b"x").unwrap();
            let new = [
                NewFile {
                    rel: "pkg/libcore5.so".into(),
                    staged,
                },
                NewFile {
                    rel: "pkg/sub/x.so".into(),
                    staged: staged2,
                },
            ];
            let sw = swap(s, "r", created, &new, &["pkg/libcore4.so".into()], None).unwrap();
            assert_eq!(std::fs::read(s.join("pkg/libcore5.so")).unwrap(), b"new5");
            assert!(!s.join("pkg/libcore4.so").exists());
            match kill_after {
                None => sw.roll_back().unwrap(),
                Some(()) => {
                    std::mem::forget(sw);
                    assert_eq!(recover(s).unwrap(), Recovered::RolledBack);
                }
            }
            // The lock takes the state dir it made with it.
            drop(lock);
            assert_eq!(snapshot(s), before);
        }
    }
}
