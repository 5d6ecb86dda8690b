//! Install as a transaction: stage beside site-packages, journal, back up, swap, verify,
//! then commit or roll back byte for byte. A journal left by a killed run is undone first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};
use crate::manifest;

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

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    pub recipe: String,
    /// `.rocbuild/` did not exist before this run: remove it on rollback.
    pub created_state_dir: bool,
    pub ops: Vec<Op>,
}

pub fn journal_path(site: &Path) -> PathBuf {
    manifest::dir(site).join("journal.json")
}

pub fn txn_dir(site: &Path) -> PathBuf {
    manifest::dir(site).join("txn")
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
}

/// Undo whatever a journal describes (idempotent: each op checks where its file is).
fn undo(site: &Path, journal: &Journal) -> Result<()> {
    for op in journal.ops.iter().rev() {
        match op {
            Op::Place { staged, path } => {
                if !staged.exists() && path.exists() {
                    fs_err::remove_file(path).map_err(EngineError::io("roll back", path))?;
                }
            }
            Op::Backup { path, backup } => {
                if backup.exists() && !path.exists() {
                    fs_err::rename(backup, path).map_err(EngineError::io("restore", path))?;
                }
            }
            Op::Mkdir { path } => {
                let _ = fs_err::remove_dir(path);
            }
        }
    }
    let _ = fs_err::remove_dir_all(txn_dir(site));
    let _ = fs_err::remove_file(journal_path(site));
    if journal.created_state_dir {
        let _ = fs_err::remove_dir_all(manifest::dir(site));
    }
    Ok(())
}

/// Finish the job of a run that was killed mid-install: roll it back. Returns true if there was one.
pub fn recover(site: &Path) -> Result<bool> {
    let jp = journal_path(site);
    let Ok(text) = fs_err::read_to_string(&jp) else {
        // A staging dir without a journal: the swap never started.
        let _ = fs_err::remove_dir_all(txn_dir(site));
        return Ok(false);
    };
    let journal: Journal = serde_json::from_str(&text).map_err(|e| EngineError::Io {
        action: "read the journal of an interrupted run".into(),
        path: jp.display().to_string(),
        source: std::io::Error::other(e),
    })?;
    undo(site, &journal)?;
    Ok(true)
}

/// Start a transaction: make `.rocbuild/txn/` and return whether `.rocbuild/` is new.
pub fn begin(site: &Path) -> Result<bool> {
    let state = manifest::dir(site);
    let created = !state.exists();
    let txn = txn_dir(site);
    let _ = fs_err::remove_dir_all(&txn);
    fs_err::create_dir_all(txn.join("stage")).map_err(EngineError::io("create", &txn))?;
    Ok(created)
}

fn to_native(site: &Path, rel: &str) -> PathBuf {
    rel.split('/')
        .fold(site.to_path_buf(), |p, part| p.join(part))
}

/// Journal, back up and move `new` into place; move `park` (relative paths) to the backup.
pub fn swap(
    site: &Path,
    recipe: &str,
    created_state_dir: bool,
    new: &[NewFile],
    park: &[String],
) -> Result<Swapped> {
    let backup_root = txn_dir(site).join("backup");
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
    };
    let jp = journal_path(site);
    let text = serde_json::to_string_pretty(&journal).unwrap_or_default();
    write_synced(&jp, text.as_bytes())?;
    let swapped = Swapped {
        site: site.to_path_buf(),
        journal,
    };
    if let Err(e) = perform(&swapped.journal) {
        undo(site, &swapped.journal)?;
        return Err(e);
    }
    Ok(swapped)
}

fn write_synced(p: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut f = fs_err::File::create(p).map_err(EngineError::io("write", p))?;
    f.write_all(bytes).map_err(EngineError::io("write", p))?;
    f.sync_all().map_err(EngineError::io("sync", p))
}

fn perform(journal: &Journal) -> Result<()> {
    for op in &journal.ops {
        match op {
            Op::Mkdir { path } => {
                fs_err::create_dir(path).map_err(EngineError::io("create", path))?
            }
            Op::Backup { path, backup } => {
                if let Some(p) = backup.parent() {
                    fs_err::create_dir_all(p).map_err(EngineError::io("create", p))?;
                }
                fs_err::rename(path, backup).map_err(EngineError::io("back up", path))?;
            }
            Op::Place { staged, path } => {
                fs_err::rename(staged, path).map_err(EngineError::io("install", path))?
            }
        }
    }
    Ok(())
}

impl Swapped {
    /// Put everything back as it was.
    pub fn roll_back(self) -> Result<()> {
        undo(&self.site, &self.journal)
    }

    /// Keep the new files. Backups of the wheel's own files (not of an earlier rocbuild
    /// build, listed in `previous`) move to `.rocbuild/backup/<recipe>/` for `restore`.
    pub fn commit(
        self,
        manifest: &manifest::Manifest,
        previous: Option<&manifest::Manifest>,
    ) -> Result<()> {
        let site = &self.site;
        let keep = manifest::dir(site).join("backup").join(&manifest.recipe);
        let txn_backup = txn_dir(site).join("backup");
        let ours: BTreeMap<&str, &str> = previous
            .map(|p| {
                p.files
                    .iter()
                    .map(|f| (f.path.as_str(), f.sha256.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        for op in &self.journal.ops {
            let Op::Backup { backup, .. } = op else {
                continue;
            };
            let Ok(rel) = backup.strip_prefix(&txn_backup) else {
                continue;
            };
            let rel_s = rel.to_string_lossy().replace('\\', "/");
            let was_ours = match ours.get(rel_s.as_str()) {
                Some(sha) => manifest::sha256_file(backup)
                    .map(|(h, _)| h == *sha)
                    .unwrap_or(false),
                None => false,
            };
            let dest = keep.join(rel);
            if !was_ours && !dest.exists() {
                if let Some(p) = dest.parent() {
                    fs_err::create_dir_all(p).map_err(EngineError::io("create", p))?;
                }
                fs_err::rename(backup, &dest).map_err(EngineError::io("keep backup", &dest))?;
            }
        }
        manifest::write(site, manifest)?;
        let _ = fs_err::remove_file(journal_path(site));
        let _ = fs_err::remove_dir_all(txn_dir(site));
        Ok(())
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
            let created = begin(s).unwrap();
            let staged = txn_dir(s).join("stage/libcore5.so");
            std::fs::write(&staged, b"new5").unwrap();
            let staged2 = txn_dir(s).join("stage/x.so");
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
            let sw = swap(s, "r", created, &new, &["pkg/libcore4.so".into()]).unwrap();
            assert_eq!(std::fs::read(s.join("pkg/libcore5.so")).unwrap(), b"new5");
            assert!(!s.join("pkg/libcore4.so").exists());
            match kill_after {
                None => sw.roll_back().unwrap(),
                Some(()) => {
                    std::mem::forget(sw);
                    assert!(recover(s).unwrap());
                }
            }
            assert_eq!(snapshot(s), before);
        }
    }
}
