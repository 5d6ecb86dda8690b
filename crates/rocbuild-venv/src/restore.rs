//! `rocbuild restore <recipe>`: give the venv back as it was before rocbuild's first install
//! of the package. What pip had installed comes back byte for byte from
//! `.rocbuild/backup/<recipe>/` (pip's own `RECORD` among them, so RECORD is true again); what
//! rocbuild added goes: its builds, the files it added, and the pure-Python part when rocbuild
//! installed it (so a package the venv never had is gone entirely, its `__pycache__` with it);
//! the manifest goes. The restore is journaled past its commit point before the first file
//! moves: a restore killed at any step is finished by the next command that takes the lock.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Result, VenvError};
use crate::install::{self, backup_dir, Journal};
use crate::manifest::{self, sha256_file};

#[derive(Debug, Clone, Serialize)]
pub struct Restored {
    pub recipe: String,
    /// Put back from the backup (relative to site-packages).
    pub restored: Vec<String>,
    /// rocbuild's files removed.
    pub removed: Vec<String>,
    /// rocbuild's files that something else (pip) replaced since: left alone.
    pub left: Vec<String>,
}

fn native(site: &Path, rel: &str) -> PathBuf {
    rel.split('/')
        .fold(site.to_path_buf(), |p, part| p.join(part))
}

/// Files under `root`, as `/`-separated paths relative to it.
fn files_under(root: &Path) -> Vec<String> {
    crate::layout::walk(root)
        .into_iter()
        .map(|(rel, _)| rel)
        .collect()
}

/// The bytecode Python wrote for module `rel` (`pkg/mod.py` -> `pkg/__pycache__/mod.*.pyc`),
/// as pip's uninstall removes it.
fn bytecode_of(site: &Path, rel: &str) -> Vec<String> {
    let Some(stem) = rel.strip_suffix(".py") else {
        return Vec::new();
    };
    let (dir, name) = match stem.rsplit_once('/') {
        Some((d, n)) => (format!("{d}/"), n),
        None => (String::new(), stem),
    };
    let cache = format!("{dir}__pycache__");
    let Ok(rd) = std::fs::read_dir(native(site, &cache)) else {
        return Vec::new();
    };
    let prefix = format!("{name}.");
    let mut out: Vec<String> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.starts_with(&prefix) && f.ends_with(".pyc"))
        .map(|f| format!("{cache}/{f}"))
        .collect();
    out.sort();
    out
}

/// Restore `recipe` in `site`. Call with the venv lock held.
pub fn restore(site: &Path, recipe: &str) -> Result<Restored> {
    let Some(m) = manifest::read_checked(site, recipe)? else {
        let installed: Vec<String> = manifest::read_all(site)
            .into_iter()
            .flatten()
            .map(|m| m.recipe)
            .collect();
        return Err(VenvError::NotInstalled {
            recipe: recipe.into(),
            site: site.display().to_string(),
            help: if installed.is_empty() {
                "rocbuild has installed nothing in this venv; pick another with --venv".into()
            } else {
                format!("rocbuild builds in this venv: {}", installed.join(", "))
            },
        });
    };
    let backup = backup_dir(site, recipe);
    let backed_up: BTreeSet<String> = files_under(&backup).into_iter().collect();
    let mut out = Restored {
        recipe: recipe.into(),
        restored: Vec::new(),
        removed: Vec::new(),
        left: Vec::new(),
    };
    let mut journal = Journal::committed(recipe);

    // What rocbuild put there: its builds, the files it added, and the pure-Python part it
    // installed (none of which was there before: what was is in the backup).
    let mut ours: Vec<(String, Option<String>)> = m
        .files
        .iter()
        .map(|f| (f.path.clone(), Some(f.sha256.clone())))
        .collect();
    ours.extend(m.extra_files.iter().map(|f| (f.clone(), None)));
    if let Some(pp) = &m.python_part {
        ours.extend(pp.files.iter().map(|f| (f.clone(), None)));
    }
    let mut seen = BTreeSet::new();
    for (rel, sha) in &ours {
        if backed_up.contains(rel) || !seen.insert(rel.clone()) {
            continue; // the original goes back over it
        }
        let p = native(site, rel);
        if std::fs::symlink_metadata(&p).is_err() {
            continue;
        }
        let still_ours = match sha {
            Some(sha) => sha256_file(&p).is_ok_and(|(h, _)| &h == sha),
            None => true,
        };
        if !still_ours {
            out.left.push(rel.clone());
            continue;
        }
        journal.remove.push(p);
        out.removed.push(rel.clone());
        for pyc in bytecode_of(site, rel) {
            if !backed_up.contains(&pyc) && seen.insert(pyc.clone()) {
                journal.remove.push(native(site, &pyc));
                out.removed.push(pyc);
            }
        }
    }
    // What was there before, back where it was (over ours where both exist).
    for rel in &backed_up {
        journal
            .put_back
            .push((native(&backup, rel), native(site, rel)));
        out.restored.push(rel.clone());
    }
    journal.drop.push(manifest::path(site, recipe));
    journal.drop.push(backup);
    install::finish(site, &journal)?;
    Ok(out)
}
