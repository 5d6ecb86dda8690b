//! `rocbuild restore <recipe>`: give the venv back the package as pip installed it. The
//! wheel's files rocbuild moved away come back byte for byte from `.rocbuild/backup/<recipe>/`
//! (pip's own `RECORD` among them, so RECORD is true again), what rocbuild added goes, the
//! manifest goes. Each step is idempotent: a restore killed half-way is finished by the next.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Result, VenvError};
use crate::install::backup_dir;
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

/// Remove the empty directories from `p`'s parent up to (not including) `stop`.
fn prune_empty_parents(p: &Path, stop: &Path) {
    let mut d = p.parent();
    while let Some(dir) = d {
        if dir == stop || !dir.starts_with(stop) || std::fs::remove_dir(dir).is_err() {
            break;
        }
        d = dir.parent();
    }
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

    // What rocbuild put there: its builds, the files it added, and, when its pip part
    // replaced another version, that version's files.
    let mut ours: Vec<(String, Option<String>)> = m
        .files
        .iter()
        .map(|f| (f.path.clone(), Some(f.sha256.clone())))
        .collect();
    ours.extend(m.extra_files.iter().map(|f| (f.clone(), None)));
    if let Some(pp) = m.python_part.as_ref().filter(|pp| pp.replaced.is_some()) {
        ours.extend(pp.files.iter().map(|f| (f.clone(), None)));
    }
    for (rel, sha) in &ours {
        if backed_up.contains(rel) {
            continue; // replaced by the original below
        }
        let p = native(site, rel);
        if !p.exists() {
            continue;
        }
        let still_ours = match sha {
            Some(sha) => sha256_file(&p).is_ok_and(|(h, _)| &h == sha),
            None => true,
        };
        if still_ours {
            fs_err::remove_file(&p).map_err(VenvError::io("remove", &p))?;
            prune_empty_parents(&p, site);
            out.removed.push(rel.clone());
        } else {
            out.left.push(rel.clone());
        }
    }
    // pip's files, back where they were (over ours where both exist).
    for rel in &backed_up {
        let from = native(&backup, rel);
        let to = native(site, rel);
        if let Some(p) = to.parent() {
            fs_err::create_dir_all(p).map_err(VenvError::io("create", p))?;
        }
        fs_err::rename(&from, &to).map_err(VenvError::io("restore", &to))?;
        out.restored.push(rel.clone());
    }
    if backup.exists() {
        fs_err::remove_dir_all(&backup).map_err(VenvError::io("remove", &backup))?;
    }
    let all_backups = crate::layout::backups(site);
    let _ = std::fs::remove_dir(&all_backups);
    let mp = manifest::path(site, recipe);
    fs_err::remove_file(&mp).map_err(VenvError::io("remove", &mp))?;
    Ok(out)
}
