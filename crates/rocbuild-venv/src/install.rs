//! Install as a transaction: stage beside site-packages, journal, back up, swap, verify,
//! then commit or roll back byte for byte. A journal left by a killed run is undone first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::confine::{self, under};
use crate::error::{Result, VenvError};
pub use crate::journal::{Journal, Op, Phase};
use crate::layout;
use crate::manifest;
use crate::ownership::{self, Package};
use crate::salvage;
use crate::state_key::{self, StateKey};
use crate::txn_fs;

/// Relative paths (to site-packages) of the state directory's parts.
fn state_rel(parts: &[&str]) -> String {
    std::iter::once(layout::STATE_DIR)
        .chain(parts.iter().copied())
        .collect::<Vec<_>>()
        .join("/")
}

/// Write `journal` (its commit point) and carry it out. The directories its moves need are
/// made first, before the commit point, so that a full disk stops it with nothing changed
/// (and those directories removed again); after the commit point it only renames and
/// removes. A run killed at any step after the journal is on disk is finished by the next
/// command that takes the venv lock.
pub fn finish(site: &Path, journal: &Journal) -> Result<()> {
    let key = state_key::for_writing()?;
    let made = make_parents(site, journal)?;
    if let Err(e) = journal.write(site, &key) {
        remove_made(&made);
        return Err(e);
    }
    roll_forward(site, journal)
}

/// Refuse `action` when a file of `paths` is held by another program (see
/// [`txn_fs::in_use`]), naming every such file.
pub(crate) fn refuse_held(
    action: &str,
    site: &Path,
    paths: impl IntoIterator<Item = PathBuf>,
) -> Result<()> {
    let held: Vec<PathBuf> = paths.into_iter().filter(|p| txn_fs::in_use(p)).collect();
    if held.is_empty() {
        Ok(())
    } else {
        Err(VenvError::in_use(action, site, &held))
    }
}

/// Every file that carrying out a committed `journal` deletes or moves something over: the
/// files it removes, the places its backups go back to, and what is under the trees it
/// replaces or drops.
pub(crate) fn deleted_by(site: &Path, journal: &Journal) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for rel in &journal.remove {
        out.push(under(site, rel)?);
    }
    for (_, dest) in &journal.put_back {
        out.push(under(site, dest)?);
    }
    let trees = journal
        .drop
        .iter()
        .chain(journal.baseline.iter().map(|(_, d)| d));
    for rel in trees {
        let p = under(site, rel)?;
        out.extend(layout::walk(&p).into_iter().map(|(_, f)| f));
        out.push(p);
    }
    Ok(out)
}

/// The parent directories of every destination of a committed journal that do not exist
/// yet, made now (deepest last); returned so that a failure before the commit point can
/// remove them again.
fn make_parents(site: &Path, journal: &Journal) -> Result<Vec<PathBuf>> {
    let mut dests: Vec<&str> = journal.put_back.iter().map(|(_, d)| d.as_str()).collect();
    dests.extend(journal.keep.iter().map(|(_, d)| d.as_str()));
    dests.extend(journal.baseline.iter().map(|(_, d)| d.as_str()));
    let mut made = Vec::new();
    for rel in dests {
        let Some(parent) = under(site, rel)?.parent().map(Path::to_path_buf) else {
            continue;
        };
        let mut missing = Vec::new();
        let mut d = Some(parent.as_path());
        while let Some(dir) = d.filter(|d| d.starts_with(site) && *d != site) {
            if confine::exists(dir) {
                break;
            }
            missing.push(dir.to_path_buf());
            d = dir.parent();
        }
        for m in missing.into_iter().rev() {
            if let Err(e) = txn_fs::create_dir(&m) {
                remove_made(&made);
                return Err(VenvError::io("create", &m)(e));
            }
            made.push(m);
        }
    }
    Ok(made)
}

fn remove_made(made: &[PathBuf]) {
    for d in made.iter().rev() {
        let _ = txn_fs::remove_dir(d);
    }
}

/// Remove the empty directories from `p`'s parent up to (not including) `stop`.
pub(crate) fn prune_empty_parents(p: &Path, stop: &Path) {
    let mut d = p.parent();
    while let Some(dir) = d {
        if dir == stop || !dir.starts_with(stop) || !confine::is_real_dir(dir) {
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

#[allow(clippy::unnecessary_to_owned)] // owned: the closure must not borrow `p`
fn io(action: &str, p: &Path) -> impl FnOnce(std::io::Error) -> VenvError {
    VenvError::io(action, p.to_path_buf())
}

/// Empty `.rocbuild/` of everything but the lock file (held by the running process; the lock
/// removes itself and the directory when it is all that is left). The journal goes last.
fn empty_state_dir(site: &Path) {
    let dir = layout::state_dir(site);
    if !confine::is_real_dir(&dir) {
        return;
    }
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        if name == layout::LOCK_FILE || name == layout::JOURNAL_FILE {
            continue;
        }
        let p = e.path();
        let _ = if confine::is_real_dir(&p) {
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
    for p in [tmp, jp] {
        if confine::exists(&p) {
            txn_fs::remove_file(&p).map_err(io("remove", &p))?;
        }
    }
    Ok(())
}

/// Remove the transaction's directory, which must be a real one in a real `.rocbuild/`.
fn remove_txn(site: &Path) -> Result<()> {
    let txn = layout::txn(site);
    if confine::exists(&txn) {
        let txn = under(site, &state_rel(&["txn"]))?;
        if confine::is_link_at(&txn) {
            txn_fs::remove_file(&txn).map_err(io("remove", &txn))?;
        } else {
            txn_fs::remove_dir_all(&txn).map_err(io("remove", &txn))?;
        }
    }
    Ok(())
}

/// Undo whatever a journal describes (idempotent: each op checks where its file is).
fn undo(site: &Path, journal: &Journal) -> Result<()> {
    for op in journal.ops.iter().rev() {
        match op {
            Op::Place { staged, path } => {
                let (staged, path) = (under(site, staged)?, under(site, path)?);
                if !confine::exists(&staged) && confine::exists(&path) {
                    txn_fs::remove_file(&path).map_err(io("roll back", &path))?;
                }
            }
            Op::Backup { path, backup } => {
                let (path, backup) = (under(site, path)?, under(site, backup)?);
                if confine::exists(&backup) && !confine::exists(&path) {
                    if let Some(p) = path.parent() {
                        txn_fs::create_dir_all(p).map_err(io("create", p))?;
                    }
                    txn_fs::rename(&backup, &path).map_err(io("restore", &path))?;
                }
            }
            Op::Mkdir { path } => {
                let path = under(site, path)?;
                if confine::is_real_dir(&path) {
                    let _ = txn_fs::remove_dir(&path);
                }
            }
        }
    }
    let _ = remove_txn(site);
    if journal.created_state_dir {
        empty_state_dir(site);
        Ok(())
    } else {
        remove_journal(site)
    }
}

/// Remove whatever is at `p` (a link as a link, a directory with its contents).
fn remove_any(p: &Path) -> Result<()> {
    if confine::is_real_dir(p) {
        txn_fs::remove_dir_all(p).map_err(io("remove", p))
    } else if confine::exists(p) {
        txn_fs::remove_file(p).map_err(io("remove", p))
    } else {
        Ok(())
    }
}

/// Move `from` to `to` when `from` is there (and `to` is not, unless `over`).
fn move_if_there(site: &Path, from: &str, to: &str, over: bool, what: &str) -> Result<()> {
    let (from, to) = (under(site, from)?, under(site, to)?);
    if !confine::exists(&from) || (!over && confine::exists(&to)) {
        return Ok(());
    }
    if let Some(p) = to.parent() {
        txn_fs::create_dir_all(p).map_err(io("create", p))?;
    }
    if over {
        remove_any(&to)?;
    }
    txn_fs::rename(&from, &to).map_err(io(what, &to))
}

/// Finish a committed transaction: keep the backups, put the manifest in place, clean up.
/// Idempotent, so a run killed in the middle of it is finished by the next one.
fn roll_forward(site: &Path, journal: &Journal) -> Result<()> {
    for rel in &journal.remove {
        let p = under(site, rel)?;
        if confine::exists(&p) {
            txn_fs::remove_file(&p).map_err(io("remove", &p))?;
        }
        prune_empty_parents(&p, site);
    }
    for (backup, path) in &journal.put_back {
        move_if_there(site, backup, path, true, "restore")?;
    }
    if let Some((staged, dest)) = &journal.baseline {
        if confine::is_real_dir(&under(site, staged)?) {
            move_if_there(site, staged, dest, true, "keep the baseline")?;
        }
    }
    for (from, to) in &journal.keep {
        move_if_there(site, from, to, false, "keep backup")?;
    }
    if let Some((staged, dest)) = &journal.manifest {
        move_if_there(site, staged, dest, true, "write")?;
    }
    for rel in &journal.drop {
        remove_any(&under(site, rel)?)?;
    }
    if !journal.drop.is_empty() {
        let _ = std::fs::remove_dir(layout::backups(site));
    }
    remove_txn(site)?;
    remove_journal(site)
}

/// Cheap check for traces of a run: a journal, a staging area, or a pid in the lock file (a
/// finished run empties it). `status` recovers only then, so it stays read-only otherwise.
pub fn needs_recovery(site: &Path) -> bool {
    let lock = layout::state_dir(site).join(layout::LOCK_FILE);
    // (A link at the lock's place is not a run's trace: the next run that locks refuses it.)
    confine::exists(&layout::journal(site))
        || confine::exists(&layout::txn(site))
        || std::fs::symlink_metadata(lock).is_ok_and(|m| m.is_file() && m.len() > 0)
}

/// What [`recover`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovered {
    Nothing,
    /// A run killed before its commit point: undone.
    RolledBack,
    /// A run killed after its commit point: finished.
    Completed,
    /// A run's leftovers without a journal it could trust: salvaged (crate::salvage).
    Salvaged,
}

/// Remove the transaction's directory after salvaging what a run without a trusted journal
/// left there (crate::salvage): pip's files are never deleted with it.
fn clear_txn(site: &Path) -> Result<Option<salvage::Salvaged>> {
    let salvaged = salvage::salvage(site)?;
    remove_txn(site)?;
    Ok(salvaged)
}

/// Finish the job of a run that was killed mid-install. Call with the venv lock held. A
/// journal is replayed only when it is provably rocbuild's own (see [`crate::journal`]);
/// any other is an error that names it, and nothing is changed.
pub fn recover(site: &Path) -> Result<Recovered> {
    let key = state_key::for_reading()?;
    let Some(journal) = crate::journal::read(site, key.as_ref())? else {
        // A transaction's directory without a journal: the swap never started, or its
        // journal was lost; what it moved out of pip's packages is salvaged, never deleted.
        let salvaged = clear_txn(site)?;
        // The journal's temp file, killed while being written: nothing was moved yet.
        let tmp = layout::journal(site).with_extension("json.tmp");
        if confine::exists(&tmp) {
            txn_fs::remove_file(&tmp).map_err(io("remove", &tmp))?;
            if state_dir_is_new(site) {
                empty_state_dir(site);
            }
        }
        return Ok(match salvaged {
            Some(_) => Recovered::Salvaged,
            None => Recovered::Nothing,
        });
    };
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
    clear_txn(site)?;
    let stage = under(site, &state_rel(&["txn", "stage"]))?;
    txn_fs::create_dir_all(&stage).map_err(io("create", &stage))?;
    Ok(created)
}

/// Give up before the swap: remove the staging area (and `.rocbuild/` if it is new).
pub fn abandon(site: &Path, created: bool) {
    let _ = remove_txn(site);
    if created {
        empty_state_dir(site);
    }
}

/// The longest path the OS opens (Linux's PATH_MAX less its NUL; Windows without long-path
/// support is shorter still, but rocbuild's own paths there are checked the same way).
const PATH_MAX: usize = 4095;

/// A package whose folders hold a name that is not UTF-8, or a file whose kept copy's path
/// (`.rocbuild/backup/<recipe>/…`, the longest rocbuild makes of it) would be longer than
/// the OS opens, cannot be backed up and given back byte for byte: refused before anything
/// moves, naming the file (not after installing, at `restore`).
fn refuse_unnamable(site: &Path, recipe: &str, pkg: &Package) -> Result<()> {
    let dirs = pkg
        .roots
        .iter()
        .cloned()
        .chain(ownership::dist_infos(site, &pkg.distribution));
    for rel in dirs {
        if let Some(p) = layout::non_utf8_names(&under(site, &rel)?).first() {
            return Err(VenvError::NameNotUtf8 {
                package: pkg.distribution.clone(),
                path: p.display().to_string(),
            });
        }
    }
    let kept = backup_dir(site, recipe);
    for rel in ownership::footprint(site, pkg) {
        let len = kept.join(&rel).as_os_str().len();
        if len > PATH_MAX {
            return Err(VenvError::PathTooLong {
                package: pkg.distribution.clone(),
                path: site.join(&rel).display().to_string(),
                len,
                max: PATH_MAX,
            });
        }
    }
    Ok(())
}

/// Copy `pkg`'s whole footprint (bytecode included), byte for byte, to the transaction's
/// `baseline/`: what `restore` gives back once this install commits. A link is copied as the
/// link it is, never followed.
fn stage_baseline(site: &Path, pkg: &Package) -> Result<PathBuf> {
    let dir = under(site, &state_rel(&["txn", "baseline"]))?;
    txn_fs::create_dir_all(&dir).map_err(io("create", &dir))?;
    for rel in ownership::footprint(site, pkg) {
        let (from, to) = (under(site, &rel)?, under(&dir, &rel)?);
        txn_fs::copy_entry(&from, &to).map_err(io("back up", &from))?;
    }
    Ok(dir)
}

/// The baseline `restore` would give back is already kept, but no manifest of rocbuild's
/// says what is installed now (it was damaged, or moved away as rocbuild's advice says): what
/// is there may be rocbuild's own build, so it must not become the baseline.
fn orphaned_baseline(site: &Path, recipe: &str) -> bool {
    confine::is_real_dir(&backup_dir(site, recipe)) && manifest::read(site, recipe).is_none()
}

/// The journal's steps that put `new` in place and move `park` (relative paths) aside.
fn swap_ops(site: &Path, new: &[NewFile], park: &[String]) -> Result<Vec<Op>> {
    let backup_rel = |rel: &str| format!("{}/{rel}", state_rel(&["txn", "backup"]));
    let mut ops = Vec::new();
    let mut made: Vec<String> = Vec::new();
    for f in new {
        let path = under(site, &f.rel)?;
        let mut missing = Vec::new();
        let mut d = f.rel.rsplit_once('/').map(|(d, _)| d.to_string());
        while let Some(dir) = d {
            if confine::exists(&under(site, &dir)?) || made.contains(&dir) {
                break;
            }
            d = dir.rsplit_once('/').map(|(d, _)| d.to_string());
            missing.push(dir);
        }
        for m in missing.into_iter().rev() {
            made.push(m.clone());
            ops.push(Op::Mkdir { path: m });
        }
        if confine::exists(&path) {
            ops.push(Op::Backup {
                path: f.rel.clone(),
                backup: backup_rel(&f.rel),
            });
        }
        ops.push(Op::Place {
            staged: confine::rel_of(site, &f.staged)?,
            path: f.rel.clone(),
        });
    }
    for rel in park {
        let p = under(site, rel)?;
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
            ops.push(Op::Backup {
                path: rel.clone(),
                backup: backup_rel(rel),
            });
        }
    }
    Ok(ops)
}

/// Journal, back up and move `new` into place; move `park` (relative paths) to the backup.
/// `take_over`: rocbuild does not hold the package now (see [`crate::ownership`]), so its
/// footprint as it is becomes the baseline `restore` gives back — unless a baseline is
/// kept already and no manifest says what is installed (see [`orphaned_baseline`]): then the
/// kept baseline stays.
pub fn swap(
    site: &Path,
    recipe: &str,
    created_state_dir: bool,
    new: &[NewFile],
    park: &[String],
    take_over: Option<&Package>,
) -> Result<Swapped> {
    let key = state_key::for_writing()?;
    if let Some(pkg) = take_over {
        if let Err(e) = refuse_unnamable(site, recipe, pkg) {
            abandon(site, created_state_dir);
            return Err(e);
        }
    }
    let ops = swap_ops(site, new, park)?;
    // Every file moved aside here is deleted once the install commits (or kept, and deleted by
    // a later restore): one a running program holds (Windows: a loaded DLL) would stop that
    // half-way, so the install is refused before anything changes.
    let replaced = ops.iter().filter_map(|op| match op {
        Op::Backup { path, .. } => under(site, path).ok(),
        _ => None,
    });
    if let Err(e) = refuse_held("install", site, replaced) {
        abandon(site, created_state_dir);
        return Err(e);
    }
    let keep_old_baseline = take_over.is_some() && orphaned_baseline(site, recipe);
    // Until the journal is on disk nothing in the venv has moved: a failure here (a disk
    // that fills up while the baseline is copied) leaves only the staging area to remove.
    let journaled = (|| {
        let baseline = match take_over.filter(|_| !keep_old_baseline) {
            Some(pkg) => Some(stage_baseline(site, pkg)?),
            None => None,
        };
        let mut journal = Journal::new(recipe, created_state_dir)?;
        journal.ops = ops;
        journal.write(site, &key)?;
        // What is about to be placed, for a salvage if this journal is ever lost or cannot
        // be trusted (crate::salvage): written after the journal, so that a list without a
        // journal means the swap may have begun.
        let list = salvage::placed_list(new.iter().map(|f| (f.rel.as_str(), f.staged.as_path())))?;
        let placed = under(site, &state_rel(&["txn", salvage::PLACED]))?;
        txn_fs::write_synced(&placed, list.as_bytes()).map_err(io("write", &placed))?;
        Ok((journal, baseline))
    })();
    let (journal, baseline) = journaled.inspect_err(|_| abandon(site, created_state_dir))?;
    txn_fs::swap_began();
    let swapped = Swapped {
        site: site.to_path_buf(),
        journal,
        baseline,
        keep_old_baseline,
        key,
    };
    if let Err(e) = perform(site, &swapped.journal) {
        undo(site, &swapped.journal)?;
        return Err(e);
    }
    // A folder the swap emptied (the dist-info of the version replaced) goes: an empty
    // `pkg-0.9.0.dist-info/` still tells importlib.metadata that 0.9.0 is installed.
    for op in &swapped.journal.ops {
        if let Op::Backup { path, .. } = op {
            prune_empty_parents(&under(site, path)?, site);
        }
    }
    Ok(swapped)
}

fn perform(site: &Path, journal: &Journal) -> Result<()> {
    for op in &journal.ops {
        match op {
            Op::Mkdir { path } => {
                let path = under(site, path)?;
                txn_fs::create_dir(&path).map_err(io("create", &path))?
            }
            Op::Backup { path, backup } => {
                let (path, backup) = (under(site, path)?, under(site, backup)?);
                if let Some(p) = backup.parent() {
                    txn_fs::create_dir_all(p).map_err(io("create", p))?;
                }
                txn_fs::rename(&path, &backup).map_err(io("back up", &path))?;
            }
            Op::Place { staged, path } => {
                let (staged, path) = (under(site, staged)?, under(site, path)?);
                txn_fs::rename(&staged, &path).map_err(io("install", &path))?
            }
        }
    }
    Ok(())
}

/// Where `restore` finds the wheel's own files of `recipe`.
pub fn backup_dir(site: &Path, recipe: &str) -> PathBuf {
    layout::backup(site, recipe)
}

/// The swap, once performed, waiting for verification.
pub struct Swapped {
    site: PathBuf,
    journal: Journal,
    /// The baseline copied before the swap, when this install takes the package over.
    baseline: Option<PathBuf>,
    /// The package is taken over, but the baseline kept already stays (see [`swap`]).
    keep_old_baseline: bool,
    key: StateKey,
}

impl Swapped {
    /// Put everything back as it was.
    pub fn roll_back(self) -> Result<()> {
        undo(&self.site, &self.journal)
    }

    /// Keep the new files. When this install took the package over, the baseline staged
    /// before the swap replaces `.rocbuild/backup/<recipe>/`; otherwise the baseline stays as
    /// it is, and of what the swap displaced only files that were not rocbuild's (by
    /// `previous`'s record) join it, where it has none. The manifest's `ownership.held` and
    /// `ownership.baseline` are filled in here from the files as they now are.
    ///
    /// Everything that needs disk space (the staged manifest, the backup's directories, the
    /// journal) is written before the commit point; a failure there rolls the install back,
    /// byte for byte, before the error is returned, so "rolled back" is what is on disk.
    pub fn commit(
        mut self,
        manifest: &manifest::Manifest,
        previous: Option<&manifest::Manifest>,
    ) -> Result<()> {
        let site = self.site.clone();
        match self.prepare_commit(manifest, previous) {
            Ok(made) => {
                if let Err(e) = self.journal.write(&site, &self.key) {
                    remove_made(&made);
                    self.journal.phase = Phase::Swap;
                    undo(&site, &self.journal)?;
                    return Err(e);
                }
                roll_forward(&site, &self.journal).map_err(|e| unfinished(&site, e))
            }
            Err(e) => {
                undo(&site, &self.journal)?;
                Err(e)
            }
        }
    }

    /// Stage the manifest and fill in the commit's moves; make their directories.
    fn prepare_commit(
        &mut self,
        manifest: &manifest::Manifest,
        previous: Option<&manifest::Manifest>,
    ) -> Result<Vec<PathBuf>> {
        let site = self.site.clone();
        let keep_root = state_rel(&["backup", &manifest.recipe]);
        let keep = match (&self.baseline, self.keep_old_baseline) {
            (Some(staged), _) => {
                self.journal.baseline = Some((confine::rel_of(&site, staged)?, keep_root.clone()));
                Vec::new()
            }
            (None, true) => Vec::new(),
            (None, false) => self.displaced_to_keep(&keep_root, previous)?,
        };
        let mut manifest = manifest.clone();
        if let Some(o) = manifest.ownership.as_mut() {
            o.held = ownership::hashes(&site, &o.package());
            o.baseline = Some(self.baseline_record(&keep, previous)?);
        }
        let staged = state_rel(&["txn", "manifest.json"]);
        let staged_path = under(&site, &staged)?;
        let text = manifest::sealed_text(&site, &manifest, &self.key);
        txn_fs::write_synced(&staged_path, text.as_bytes()).map_err(io("write", &staged_path))?;
        self.journal.phase = Phase::Commit;
        self.journal.keep = keep;
        self.journal.manifest = Some((staged, state_rel(&[&format!("{}.json", manifest.recipe)])));
        make_parents(&site, &self.journal)
    }

    /// What the baseline will hold once this commit is done (path -> sha256).
    fn baseline_record(
        &self,
        keep: &[(String, String)],
        previous: Option<&manifest::Manifest>,
    ) -> Result<BTreeMap<String, String>> {
        let site = &self.site;
        if let Some(staged) = &self.baseline {
            return Ok(ownership::tree_hashes(staged));
        }
        let kept = backup_dir(site, &self.journal.recipe);
        let mut record = match previous.and_then(|p| p.ownership.as_ref()?.baseline.clone()) {
            Some(r) if !self.keep_old_baseline => r,
            _ => ownership::tree_hashes(&kept),
        };
        let prefix = format!("{}/", state_rel(&["backup", &self.journal.recipe]));
        for (from, to) in keep {
            let Some(rel) = to.strip_prefix(&prefix) else {
                continue;
            };
            if let Some(h) = ownership::entry_hash(&under(site, from)?) {
                record.insert(rel.to_string(), h);
            }
        }
        Ok(record)
    }

    /// The swap's backups that were not rocbuild's (by `previous`'s record: its held files,
    /// or for an older manifest its builds and pure-Python part) and that the baseline lacks.
    fn displaced_to_keep(
        &self,
        keep_root: &str,
        previous: Option<&manifest::Manifest>,
    ) -> Result<Vec<(String, String)>> {
        let txn_backup = format!("{}/", state_rel(&["txn", "backup"]));
        let mut ours: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        if let Some(p) = previous {
            for f in &p.files {
                ours.insert(&f.path, Some(&f.sha256));
            }
            for f in p.python_part.iter().flat_map(|pp| &pp.files) {
                ours.insert(f, None);
            }
            for f in p.requirements.iter().flat_map(|r| &r.files) {
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
            let Some(rel) = backup.strip_prefix(&txn_backup) else {
                continue;
            };
            let backup_path = under(&self.site, backup)?;
            let was_ours = match ours.get(rel) {
                Some(Some(sha)) => {
                    manifest::sha256_file(&backup_path).is_ok_and(|(h, _)| h == *sha)
                }
                Some(None) => true,
                None => false,
            };
            let dest = format!("{keep_root}/{rel}");
            if !was_ours && !confine::exists(&under(&self.site, &dest)?) {
                keep.push((backup.clone(), dest));
            }
        }
        Ok(keep)
    }
}

/// The install is committed, but finishing it failed (the next command finishes it).
fn unfinished(site: &Path, e: VenvError) -> VenvError {
    VenvError::Io {
        action: format!(
            "finish the install (it is committed: the new files are in place, and the next rocbuild command on this venv completes what is left; {e})"
        ),
        path: layout::journal(site).display().to_string(),
        source: std::io::Error::other("finishing a committed install was interrupted"),
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
        crate::state_key::configure_for_tests();
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

/// Windows: a file another program holds (a loaded DLL, a file open without delete sharing)
/// cannot be replaced or deleted, so an install that would have to is refused up front.
#[cfg(all(test, windows))]
mod held {
    use super::*;
    use std::os::windows::fs::OpenOptionsExt;

    #[test]
    fn an_install_over_a_file_another_program_holds_is_refused_and_changes_nothing() {
        crate::state_key::configure_for_tests();
        let d = tempfile::tempdir().unwrap();
        let s = d.path();
        std::fs::create_dir_all(s.join("pkg")).unwrap();
        std::fs::write(s.join("pkg/core.dll"), b"pip's").unwrap();
        std::fs::write(s.join("pkg/other.dll"), b"free").unwrap();
        let before = tests_snapshot(s);
        // As another process holds it: read sharing only (no write, no delete).
        let holder = std::fs::OpenOptions::new()
            .read(true)
            .share_mode(0x1)
            .open(s.join("pkg/core.dll"))
            .unwrap();
        assert!(txn_fs::in_use(&s.join("pkg/core.dll")));
        assert!(!txn_fs::in_use(&s.join("pkg/other.dll")));
        let created = begin(s).unwrap();
        let staged = layout::txn(s).join("stage/core.dll");
        std::fs::write(&staged, b"new").unwrap();
        let new = [NewFile {
            rel: "pkg/core.dll".into(),
            staged,
        }];
        let pkg = Package {
            distribution: "pkg".into(),
            roots: vec!["pkg".into()],
        };
        let err = match swap(s, "r", created, &new, &[], Some(&pkg)) {
            Ok(_) => panic!("installed over a held file"),
            Err(e) => e,
        };
        let text = format!(
            "{err} {:?}",
            miette::Diagnostic::help(&err).map(|h| h.to_string())
        );
        assert!(text.contains("cannot install"), "{text}");
        assert!(text.contains("core.dll is in use"), "{text}");
        assert!(!text.contains("other.dll"), "{text}");
        assert!(text.contains("close every program that uses pkg"), "{text}");
        assert_eq!(tests_snapshot(s), before);
        assert!(!layout::txn(s).exists());
        drop(holder);
    }

    fn tests_snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        for (rel, p) in layout::walk(dir) {
            out.insert(rel, std::fs::read(p).unwrap_or_default());
        }
        out
    }
}

#[cfg(test)]
mod hostile {
    use super::*;

    fn canary(root: &Path) -> PathBuf {
        let c = root.join("outside");
        std::fs::create_dir_all(c.join("dir")).unwrap();
        std::fs::write(c.join("precious"), b"keep me").unwrap();
        std::fs::write(c.join("dir/file"), b"keep me too").unwrap();
        c
    }

    fn intact(c: &Path) {
        assert_eq!(std::fs::read(c.join("precious")).unwrap(), b"keep me");
        assert_eq!(std::fs::read(c.join("dir/file")).unwrap(), b"keep me too");
    }

    #[test]
    fn a_planted_journal_is_reported_and_never_replayed() {
        crate::state_key::configure_for_tests();
        let d = tempfile::tempdir().unwrap();
        let c = canary(d.path());
        let site = d.path().join("site");
        std::fs::create_dir_all(layout::state_dir(&site)).unwrap();
        // What a wheel could ship as `.rocbuild/journal.json`: an older rocbuild's format,
        // committed, naming outside paths.
        let planted = serde_json::json!({
            "recipe": "x", "created_state_dir": false, "ops": [], "phase": "commit",
            "remove": [c.join("precious")], "drop": [c.join("dir")],
        });
        let jp = layout::journal(&site);
        std::fs::write(&jp, planted.to_string()).unwrap();
        let e = recover(&site).unwrap_err();
        assert!(matches!(e, VenvError::UntrustedJournal { .. }), "{e}");
        assert!(e.to_string().contains("not a sealed"), "{e}");
        // A sealed one, but with another key (another user's, or forged).
        let mut j = Journal::committed("x").unwrap();
        j.drop.push("victim".into());
        std::fs::write(site.join("victim"), b"v").unwrap();
        std::fs::write(&jp, j.seal(&site, &StateKey::from_bytes([9; 32]))).unwrap();
        let e = recover(&site).unwrap_err().to_string();
        assert!(e.contains("seal does not verify"), "{e}");
        intact(&c);
        assert!(
            site.join("victim").exists() && jp.exists(),
            "nothing acted on"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_link_swapped_in_after_a_killed_run_is_not_followed_by_its_recovery() {
        crate::state_key::configure_for_tests();
        let d = tempfile::tempdir().unwrap();
        let c = canary(d.path());
        std::fs::write(c.join("libcore5.so"), b"outside").unwrap();
        let site = d.path().join("site");
        std::fs::create_dir_all(site.join("pkg")).unwrap();
        let created = begin(&site).unwrap();
        let staged = layout::txn(&site).join("stage/libcore5.so");
        std::fs::write(&staged, b"new5").unwrap();
        let new = [NewFile {
            rel: "pkg/libcore5.so".into(),
            staged,
        }];
        let sw = swap(&site, "r", created, &new, &[], None).unwrap();
        std::mem::forget(sw); // killed before its commit point
                              // Someone replaces the package folder with a link to the user's files.
        std::fs::remove_dir_all(site.join("pkg")).unwrap();
        std::os::unix::fs::symlink(&c, site.join("pkg")).unwrap();
        let e = recover(&site).unwrap_err().to_string();
        assert!(e.contains("is a link"), "{e}");
        intact(&c);
        assert_eq!(std::fs::read(c.join("libcore5.so")).unwrap(), b"outside");
    }

    #[cfg(unix)]
    #[test]
    fn a_link_planted_at_the_journal_temp_file_is_replaced_not_written_through() {
        crate::state_key::configure_for_tests();
        let d = tempfile::tempdir().unwrap();
        let c = canary(d.path());
        let site = d.path().join("site");
        std::fs::create_dir_all(layout::state_dir(&site)).unwrap();
        let tmp = layout::journal(&site).with_extension("json.tmp");
        std::os::unix::fs::symlink(c.join("precious"), &tmp).unwrap();
        let j = Journal::new("r", false).unwrap();
        j.write(&site, &state_key::for_writing().unwrap()).unwrap();
        intact(&c);
        assert!(
            crate::journal::read(&site, state_key::for_reading().unwrap().as_ref())
                .unwrap()
                .is_some()
        );
    }
}

#[cfg(test)]
mod baseline {
    use super::*;

    fn manifest_of(recipe: &str) -> manifest::Manifest {
        manifest::Manifest {
            schema: 1,
            recipe: recipe.into(),
            ownership: Some(ownership::Ownership {
                distribution: "pkg".into(),
                roots: vec!["pkg".into()],
                ..Default::default()
            }),
            ..manifest::Manifest::default()
        }
    }

    fn install(site: &Path, bytes: &[u8], take_over: bool) {
        let created = begin(site).unwrap();
        let staged = layout::txn(site).join("stage/lib.so");
        std::fs::write(&staged, bytes).unwrap();
        let new = [NewFile {
            rel: "pkg/lib.so".into(),
            staged,
        }];
        let pkg = Package {
            distribution: "pkg".into(),
            roots: vec!["pkg".into()],
        };
        let sw = swap(site, "r", created, &new, &[], take_over.then_some(&pkg)).unwrap();
        sw.commit(&manifest_of("r"), None).unwrap();
    }

    /// An install of `pkg/lib.so` that takes package `pkg` over: the error it is refused with.
    #[cfg(unix)]
    fn take_over_refused(site: &Path) -> VenvError {
        let created = begin(site).unwrap();
        let staged = layout::txn(site).join("stage/lib.so");
        std::fs::write(&staged, b"ours").unwrap();
        let new = [NewFile {
            rel: "pkg/lib.so".into(),
            staged,
        }];
        let pkg = Package {
            distribution: "pkg".into(),
            roots: vec!["pkg".into()],
        };
        match swap(site, "r", created, &new, &[], Some(&pkg)) {
            Ok(_) => panic!("the install was not refused"),
            Err(e) => e,
        }
    }

    /// A file of pip's package whose name is not UTF-8: refused before anything moves,
    /// naming it (not a misleading "back up …: No such file" half-way through).
    #[cfg(unix)]
    #[test]
    fn a_package_with_a_name_that_is_not_utf8_is_refused_before_anything_moves() {
        use std::os::unix::ffi::OsStrExt;
        crate::state_key::configure_for_tests();
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        std::fs::create_dir_all(site.join("pkg")).unwrap();
        std::fs::write(site.join("pkg/lib.so"), b"pip").unwrap();
        let odd = site
            .join("pkg")
            .join(std::ffi::OsStr::from_bytes(b"caf\xe9.py"));
        std::fs::write(&odd, b"x").unwrap();
        let snapshot = |d: &Path| -> Vec<(String, Vec<u8>)> {
            layout::walk(d)
                .into_iter()
                .map(|(r, p)| (r, std::fs::read(p).unwrap_or_default()))
                .collect()
        };
        let before = snapshot(site);
        let e = take_over_refused(site);
        assert!(matches!(e, VenvError::NameNotUtf8 { .. }), "{e}");
        assert!(e.to_string().contains("caf"), "{e}");
        assert_eq!(snapshot(site), before);
    }

    /// A file of pip's whose kept copy would have a path longer than the OS opens: refused
    /// before anything moves (before, it installed and then `restore` refused).
    #[cfg(unix)]
    #[test]
    fn a_package_file_too_deep_to_keep_a_copy_of_is_refused_before_anything_moves() {
        crate::state_key::configure_for_tests();
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        let mut rel = String::from("pkg");
        while site.join(&rel).as_os_str().len() < PATH_MAX - 210 {
            rel.push('/');
            rel.push_str(&"d".repeat(200));
        }
        let fill = PATH_MAX - 1 - site.join(&rel).as_os_str().len();
        rel.push('/');
        rel.push_str(&"f".repeat(fill.min(250)));
        std::fs::create_dir_all(site.join(&rel).parent().unwrap()).unwrap();
        std::fs::write(site.join(&rel), b"pip").unwrap();
        let e = take_over_refused(site);
        assert!(matches!(e, VenvError::PathTooLong { .. }), "{e}");
        assert!(!site.join("pkg/lib.so").exists());
        assert!(site.join(&rel).exists());
    }

    /// rocbuild's own advice after a damaged manifest is "move it away and build again": the
    /// baseline it kept (pip's files) must survive that, not be replaced by rocbuild's build.
    #[test]
    fn a_kept_baseline_without_a_manifest_is_not_replaced_by_what_is_installed() {
        crate::state_key::configure_for_tests();
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        std::fs::create_dir_all(site.join("pkg")).unwrap();
        std::fs::write(site.join("pkg/lib.so"), b"pip's").unwrap();
        install(site, b"rocbuild 1", true);
        let kept = layout::backup(site, "r").join("pkg/lib.so");
        assert_eq!(std::fs::read(&kept).unwrap(), b"pip's");
        let m = manifest::read(site, "r").unwrap();
        let rec = m.ownership.unwrap().baseline.unwrap();
        assert_eq!(rec.keys().collect::<Vec<_>>(), ["pkg/lib.so"]);
        // The manifest is damaged and moved away; rocbuild builds again (it holds nothing).
        std::fs::rename(manifest::path(site, "r"), site.join("r.json.damaged")).unwrap();
        install(site, b"rocbuild 2", true);
        assert_eq!(
            std::fs::read(&kept).unwrap(),
            b"pip's",
            "pip's baseline was lost"
        );
        let m = manifest::read(site, "r").unwrap();
        assert_eq!(m.ownership.unwrap().baseline.unwrap(), rec);
    }

    #[test]
    fn a_failed_commit_is_rolled_back_before_it_is_reported() {
        crate::state_key::configure_for_tests();
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        std::fs::create_dir_all(site.join("pkg")).unwrap();
        std::fs::write(site.join("pkg/lib.so"), b"pip's").unwrap();
        let created = begin(site).unwrap();
        let staged = layout::txn(site).join("stage/lib.so");
        std::fs::write(&staged, b"new").unwrap();
        let new = [NewFile {
            rel: "pkg/lib.so".into(),
            staged,
        }];
        let sw = swap(site, "r", created, &new, &[], None).unwrap();
        // The staged manifest cannot be written (its place is taken by a directory).
        std::fs::create_dir_all(layout::txn(site).join("manifest.json/x")).unwrap();
        assert!(sw.commit(&manifest_of("r"), None).is_err());
        assert_eq!(std::fs::read(site.join("pkg/lib.so")).unwrap(), b"pip's");
        assert!(!layout::journal(site).exists() && !layout::txn(site).exists());
    }
}
