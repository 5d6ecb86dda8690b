//! The journal of an install or a restore: what moves where, in paths relative to
//! site-packages, sealed with this user's key (see [`crate::state_key`]) so that the next
//! run replays only a journal rocbuild itself wrote for this venv.
//!
//! On disk (`.rocbuild/journal.json`):
//!
//! ```json
//! {"format": "rocbuild-journal-2", "journal": "<the Journal as JSON text>", "seal": "<hex>"}
//! ```
//!
//! A journal is acted on only when all of these hold: the file is a regular file (not a
//! link); it has this format; this user's key exists and the seal verifies for this venv's
//! site-packages, the journal's transaction id and its exact text; its recipe is a plain
//! name and every path in it is a plain relative path. Anything else is an
//! [`VenvError::UntrustedJournal`]: reported, never replayed.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::confine;
use crate::error::{Result, VenvError};
use crate::layout;
use crate::state_key::{self, StateKey};
use crate::txn_fs;
use rocbuild_probe::platform::state_files::{self as host_files, cap};

const FORMAT: &str = "rocbuild-journal-2";

/// One reversible filesystem step (paths relative to site-packages, `/`-separated).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Op {
    /// Create a directory that did not exist.
    Mkdir { path: String },
    /// Move an existing file out of the way.
    Backup { path: String, backup: String },
    /// Move a staged file into place.
    Place { staged: String, path: String },
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

/// Every path is relative to site-packages.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Journal {
    /// This transaction's random id (part of what the seal covers).
    pub txn: String,
    pub recipe: String,
    /// `.rocbuild/` held nothing of ours before this run: empty it on rollback.
    pub created_state_dir: bool,
    pub ops: Vec<Op>,
    #[serde(default)]
    pub phase: Phase,
    /// After the commit point: files to move into `.rocbuild/backup/<recipe>/` (from, to).
    #[serde(default)]
    pub keep: Vec<(String, String)>,
    /// After the commit point: the staged manifest and where it goes.
    #[serde(default)]
    pub manifest: Option<(String, String)>,
    /// After the commit point (a restore): files to remove, their emptied parent directories
    /// with them (up to site-packages).
    #[serde(default)]
    pub remove: Vec<String>,
    /// After the commit point (a restore): (backup, path) to move back, over whatever is at
    /// `path`, as long as the backup is still there.
    #[serde(default)]
    pub put_back: Vec<(String, String)>,
    /// After the commit point (a restore): files or directories to remove last (the manifest,
    /// the emptied backup).
    #[serde(default)]
    pub drop: Vec<String>,
    /// After the commit point (an install that takes the package over): the baseline copied
    /// before the swap, and where it goes (`.rocbuild/backup/<recipe>/`, replacing an older
    /// one). See [`crate::ownership`].
    #[serde(default)]
    pub baseline: Option<(String, String)>,
}

#[derive(Serialize, Deserialize)]
struct Sealed {
    format: String,
    journal: String,
    seal: String,
}

impl Journal {
    /// An empty journal of a new transaction, before its commit point.
    pub fn new(recipe: &str, created_state_dir: bool) -> Result<Journal> {
        Ok(Journal {
            txn: state_key::new_txn_id()?,
            recipe: recipe.into(),
            created_state_dir,
            ops: Vec::new(),
            phase: Phase::Swap,
            keep: Vec::new(),
            manifest: None,
            remove: Vec::new(),
            put_back: Vec::new(),
            drop: Vec::new(),
            baseline: None,
        })
    }

    /// A journal already past its commit point: what [`crate::install::finish`] carries out
    /// (and, if the run is killed, the next one finishes).
    pub fn committed(recipe: &str) -> Result<Journal> {
        let mut j = Journal::new(recipe, false)?;
        j.phase = Phase::Commit;
        Ok(j)
    }

    /// Every path the journal names, with the field it is in.
    fn paths(&self) -> Vec<(&'static str, &str)> {
        let mut out = Vec::new();
        for op in &self.ops {
            match op {
                Op::Mkdir { path } => out.push(("ops.mkdir", path.as_str())),
                Op::Backup { path, backup } => {
                    out.push(("ops.backup", path.as_str()));
                    out.push(("ops.backup", backup.as_str()));
                }
                Op::Place { staged, path } => {
                    out.push(("ops.place", staged.as_str()));
                    out.push(("ops.place", path.as_str()));
                }
            }
        }
        let pairs = [("keep", &self.keep), ("put_back", &self.put_back)];
        for (field, list) in pairs {
            for (a, b) in list {
                out.push((field, a.as_str()));
                out.push((field, b.as_str()));
            }
        }
        for (field, pair) in [("manifest", &self.manifest), ("baseline", &self.baseline)] {
            if let Some((a, b)) = pair {
                out.push((field, a.as_str()));
                out.push((field, b.as_str()));
            }
        }
        out.extend(self.remove.iter().map(|p| ("remove", p.as_str())));
        out.extend(self.drop.iter().map(|p| ("drop", p.as_str())));
        out
    }

    /// Plain recipe name, plain relative paths: or why not.
    pub fn check(&self) -> std::result::Result<(), String> {
        if !confine::is_plain_name(&self.recipe) {
            return Err(format!("its recipe `{}` is not a plain name", self.recipe));
        }
        if self.txn.is_empty() || !self.txn.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("its transaction id is not one rocbuild writes".into());
        }
        match self
            .paths()
            .into_iter()
            .find(|(_, p)| !confine::is_inside(p))
        {
            Some((field, p)) => Err(format!(
                "`{field}` names `{p}`, which is not a plain relative path inside site-packages"
            )),
            None => Ok(()),
        }
    }

    /// The sealed text of this journal for the venv at `site`.
    pub fn seal(&self, site: &Path, key: &StateKey) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        let sealed = Sealed {
            format: FORMAT.into(),
            seal: key.seal(site, &self.txn, &text),
            journal: text,
        };
        serde_json::to_string_pretty(&sealed).unwrap_or_default()
    }

    /// Write this journal (atomically: its commit point when its phase says so).
    pub fn write(&self, site: &Path, key: &StateKey) -> Result<()> {
        let jp = layout::journal(site);
        txn_fs::write_atomic(&jp, self.seal(site, key).as_bytes())
            .map_err(VenvError::io("write", &jp))
    }
}

/// Read and check the journal of `site`, if there is one. `None`: no journal file. It is
/// read only when it is a regular file (a link, a FIFO or a device is refused at once) of at
/// most [`cap::STATE`] bytes.
pub fn read(site: &Path, key: Option<&StateKey>) -> Result<Option<Journal>> {
    let jp = layout::journal(site);
    let text = match host_files::read_capped_text(&jp, cap::STATE) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData
            ) =>
        {
            return Err(untrusted(
                &jp,
                &format!("rocbuild never writes such a file: {e}"),
            ))
        }
        Err(e) => return Err(VenvError::io("read", &jp)(e)),
    };
    parse(site, &text, key)
        .map(Some)
        .map_err(|why| untrusted(&jp, &why))
}

/// Check a journal's text for the venv at `site` (see the module's rules).
pub fn parse(
    site: &Path,
    text: &str,
    key: Option<&StateKey>,
) -> std::result::Result<Journal, String> {
    let sealed: Sealed = serde_json::from_str(text).map_err(|_| {
        "it is not a sealed rocbuild journal (an older rocbuild's, or not rocbuild's at all)"
            .to_string()
    })?;
    if sealed.format != FORMAT {
        return Err(format!("its format `{}` is not {FORMAT}", sealed.format));
    }
    let journal: Journal = serde_json::from_str(&sealed.journal)
        .map_err(|e| format!("its content does not parse ({e})"))?;
    let Some(key) = key else {
        return Err(
            "this user's journal key (journal.key in rocbuild's cache) does not exist, so no journal can be rocbuild's"
                .into(),
        );
    };
    if !key.verifies(site, &journal.txn, &sealed.journal, &sealed.seal) {
        return Err("its seal does not verify: rocbuild did not write it for this venv with this user's key (a file a package planted, an edited journal, or one copied from another venv)".into());
    }
    journal.check()?;
    Ok(journal)
}

fn untrusted(jp: &Path, why: &str) -> VenvError {
    let rules = rocbuild_probe::Os::current().rules();
    VenvError::UntrustedJournal {
        path: jp.display().to_string(),
        why: why.to_string(),
        help: format!(
            "rocbuild did not replay it and changed nothing. If a rocbuild run on this venv was interrupted with a different cache (--cache / ROCBUILD_CACHE), run again with that cache. Otherwise remove it ({}) and run the command again: with no journal, rocbuild puts back the files an interrupted run had moved out of pip's packages (those that are byte for byte what a RECORD lists), moves what it had put in their place to .rocbuild/salvage/, and deletes none of them; `rocbuild status` then names what was kept and how to put it back by hand",
            rules.remove_file_command(jp)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Journal {
        let mut j = Journal::new("torchcodec", false).unwrap();
        j.ops.push(Op::Place {
            staged: ".rocbuild/txn/stage/torchcodec/a.so".into(),
            path: "torchcodec/a.so".into(),
        });
        j
    }

    #[test]
    fn only_a_sealed_journal_of_this_venv_with_plain_paths_is_accepted() {
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        let key = StateKey::from_bytes([1; 32]);
        let j = sample();
        let text = j.seal(site, &key);
        assert_eq!(parse(site, &text, Some(&key)).unwrap(), j);
        assert!(parse(site, &text, None)
            .unwrap_err()
            .contains("does not exist"));
        let other = StateKey::from_bytes([2; 32]);
        assert!(parse(site, &text, Some(&other))
            .unwrap_err()
            .contains("seal"));
        // An older rocbuild's plain journal, as a planted file would look.
        let plain = r#"{"recipe":"x","created_state_dir":false,"ops":[],"phase":"commit","remove":["/home/u/.ssh"]}"#;
        assert!(parse(site, plain, Some(&key))
            .unwrap_err()
            .contains("not a sealed"));
        // Sealed with the right key but naming a path outside: refused all the same.
        let mut bad = sample();
        bad.remove.push("../../home".into());
        let e = parse(site, &bad.seal(site, &key), Some(&key)).unwrap_err();
        assert!(e.contains("`remove`"), "{e}");
    }
}
