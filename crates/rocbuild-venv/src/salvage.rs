//! What an interrupted run left when its journal cannot be trusted (the key went with a
//! cleared cache, the venv was copied, the journal was torn or removed as rocbuild's help
//! says): the files it had moved out of pip's packages (`.rocbuild/txn/backup/<path>`) and a
//! list of what it put in their place (`.rocbuild/txn/placed.txt`: `sha256 path` per line,
//! written before the journal).
//!
//! Neither is trusted: any wheel can plant them. So salvage only does what is safe whoever
//! wrote them, and deletes nothing:
//! - a backed-up file goes back to its path when its bytes are exactly what a RECORD lists
//!   for that path (pip's exact copy) and what is there now is not;
//! - what is there now moves aside to `.rocbuild/salvage/<n>/placed/<path>`, and only when it
//!   is not pip's exact copy (a file some RECORD lists with its bytes never moves);
//! - a file the list says the run placed, with those very bytes, moves aside the same way;
//! - everything else the run left in `txn/backup/` is kept in `.rocbuild/salvage/<n>/backup/`,
//!   and `rocbuild status` names it with the command that puts each file back by hand.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::confine::{self, under};
use crate::error::{Result, VenvError};
use crate::layout;
use crate::manifest::sha256_file;
use crate::record::{self, record_hash};
use crate::txn_fs;
use rocbuild_probe::platform::state_files::{self as host_files, cap};

/// The list of placed files in the transaction's directory.
pub const PLACED: &str = "placed.txt";
/// Where salvaged files are kept, in the state directory.
pub const SALVAGE_DIR: &str = "salvage";

/// What [`salvage`] did.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Salvaged {
    /// pip's files put back (relative to site-packages).
    pub put_back: Vec<String>,
    /// Files moved aside into the salvage directory (relative to site-packages, both).
    pub moved_aside: Vec<(String, String)>,
    /// Files kept in the salvage directory that nothing proved (relative to site-packages).
    pub kept: Vec<String>,
    /// The salvage directory, when anything is in it.
    pub dir: Option<PathBuf>,
}

/// The text of [`PLACED`] for files about to be placed: `(relative path, staged file)`.
pub fn placed_list<'a>(files: impl Iterator<Item = (&'a str, &'a Path)>) -> Result<String> {
    let mut out = String::new();
    for (rel, staged) in files {
        let (sha, _) = sha256_file(staged)?;
        out.push_str(&format!("{sha} {rel}\n"));
    }
    Ok(out)
}

fn read_placed(txn: &Path) -> BTreeMap<String, String> {
    let text = host_files::read_capped_text(&txn.join(PLACED), cap::STATE).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (sha, rel) = l.split_once(' ')?;
            let ok = sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit());
            (ok && confine::is_inside(rel)).then(|| (rel.to_string(), sha.to_string()))
        })
        .collect()
}

/// Every path some dist-info RECORD lists with a hash: in site-packages, and in the run's
/// backup (the RECORD of a version the run replaced). A RECORD in site-packages that the
/// run itself put there (the list names it, with its bytes) is rocbuild's rewrite, not
/// pip's, and proves nothing.
fn recorded(
    site: &Path,
    backup: &Path,
    placed: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut add = |text: &str| {
        for (path, hash, _) in record::parse(text) {
            if !hash.is_empty() {
                out.entry(path).or_insert(hash);
            }
        }
    };
    for d in std::fs::read_dir(site).into_iter().flatten().flatten() {
        let Ok(name) = d.file_name().into_string() else {
            continue;
        };
        if !name.ends_with(".dist-info") {
            continue;
        }
        let rel = format!("{name}/RECORD");
        let p = d.path().join("RECORD");
        let ours = placed
            .get(&rel)
            .is_some_and(|sha| sha256_file(&p).is_ok_and(|(h, _)| h == *sha));
        if !ours {
            add(&host_files::read_capped_text(&p, cap::RECORD).unwrap_or_default());
        }
    }
    for (rel, p) in layout::walk(backup) {
        if rel.ends_with(".dist-info/RECORD") {
            add(&host_files::read_capped_text(&p, cap::RECORD).unwrap_or_default());
        }
    }
    out
}

fn hash_of(p: &Path) -> Option<String> {
    sha256_file(p).ok().map(|(hex, _)| record_hash(&hex))
}

/// A salvage directory of its own: `.rocbuild/salvage/<n>`.
fn new_salvage_dir(site: &Path) -> Result<(String, PathBuf)> {
    for n in 1..10_000u32 {
        let rel = format!("{}/{SALVAGE_DIR}/{n}", layout::STATE_DIR);
        let p = under(site, &rel)?;
        if !confine::exists(&p) {
            return Ok((rel, p));
        }
    }
    Err(VenvError::Io {
        action: "find a free salvage directory".into(),
        path: layout::state_dir(site)
            .join(SALVAGE_DIR)
            .display()
            .to_string(),
        source: std::io::Error::other("10,000 are taken: look through them and remove old ones"),
    })
}

fn move_to(site: &Path, from_rel: &str, to_rel: &str) -> Result<()> {
    let (from, to) = (under(site, from_rel)?, under(site, to_rel)?);
    if let Some(p) = to.parent() {
        txn_fs::create_dir_all(p).map_err(VenvError::io("create", p))?;
    }
    txn_fs::rename(&from, &to).map_err(VenvError::io("move aside", &from))
}

/// Does the RECORD at `p` hold true of `site` now: every file it lists with a hash is there
/// with that hash?
fn record_holds(site: &Path, p: &Path) -> bool {
    let Ok(text) = host_files::read_capped_text(p, cap::RECORD) else {
        return false;
    };
    let rows = record::parse(&text);
    !rows.is_empty()
        && rows
            .iter()
            .filter(|(_, h, _)| !h.is_empty())
            .all(|(rel, h, _)| {
                confine::is_inside(rel)
                    && under(site, rel).ok().and_then(|p| hash_of(&p)).as_ref() == Some(h)
            })
}

/// Salvage what an interrupted run left in `.rocbuild/txn/` (see the module). Call with the
/// venv lock held and no trusted journal. `None` when there was nothing to salvage.
pub fn salvage(site: &Path) -> Result<Option<Salvaged>> {
    let txn = layout::txn(site);
    if !confine::is_real_dir(&txn) {
        return Ok(None);
    }
    let txn_rel = format!("{}/txn", layout::STATE_DIR);
    let backup = txn.join("backup");
    let placed = read_placed(&txn);
    let backed_up: Vec<String> = layout::walk(&backup).into_iter().map(|(r, _)| r).collect();
    if placed.is_empty() && backed_up.is_empty() {
        return Ok(None);
    }
    let recorded = recorded(site, &backup, &placed);
    let (dir_rel, dir) = new_salvage_dir(site)?;
    let mut out = Salvaged::default();
    let is_pips = |p: &Path, rel: &str| {
        recorded
            .get(rel)
            .is_some_and(|h| hash_of(p).as_ref() == Some(h))
    };
    let aside = |rel: &str, out: &mut Salvaged| -> Result<()> {
        let to = format!("{dir_rel}/placed/{rel}");
        move_to(site, rel, &to)?;
        out.moved_aside.push((rel.to_string(), to));
        Ok(())
    };
    // Records last: a RECORD goes back when it holds true once the files are back.
    let (records, files): (Vec<&String>, Vec<&String>) = backed_up
        .iter()
        .partition(|r| r.ends_with(".dist-info/RECORD"));
    for rel in files {
        let (b, now) = (backup.join(rel), under(site, rel)?);
        if !is_pips(&b, rel) || (confine::exists(&now) && is_pips(&now, rel)) {
            continue;
        }
        if confine::exists(&now) {
            aside(rel, &mut out)?;
        }
        move_to(site, &format!("{txn_rel}/backup/{rel}"), rel)?;
        out.put_back.push(rel.clone());
    }
    for (rel, sha) in &placed {
        let now = under(site, rel)?;
        let same = sha256_file(&now).is_ok_and(|(h, _)| h == *sha);
        if same && !is_pips(&now, rel) {
            aside(rel, &mut out)?;
        }
    }
    for rel in records {
        let (b, now) = (backup.join(rel), under(site, rel)?);
        if record_holds(site, &b) && !(confine::exists(&now) && record_holds(site, &now)) {
            if confine::exists(&now) {
                aside(rel, &mut out)?;
            }
            move_to(site, &format!("{txn_rel}/backup/{rel}"), rel)?;
            out.put_back.push(rel.clone());
        }
    }
    // What nothing proved stays, in the salvage directory.
    for (rel, _) in layout::walk(&backup) {
        move_to(
            site,
            &format!("{txn_rel}/backup/{rel}"),
            &format!("{dir_rel}/backup/{rel}"),
        )?;
        out.kept.push(format!("{dir_rel}/backup/{rel}"));
    }
    out.dir = confine::exists(&dir).then(|| dir.clone());
    Ok(Some(out))
}

/// Every file kept in `.rocbuild/salvage/` (relative to site-packages), with the path it
/// would go back to: for `rocbuild status`, which names them with the command to put each
/// back by hand.
pub fn kept(site: &Path) -> Vec<(String, String)> {
    let root = layout::state_dir(site).join(SALVAGE_DIR);
    let prefix = format!("{}/{SALVAGE_DIR}/", layout::STATE_DIR);
    layout::walk(&root)
        .into_iter()
        .filter_map(|(rel, _)| {
            // <n>/backup/<path> or <n>/placed/<path>
            let mut parts = rel.splitn(3, '/');
            let (_, _, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some((format!("{prefix}{rel}"), path.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(b: &[u8]) -> String {
        use sha2::Digest;
        sha2::Sha256::digest(b)
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect()
    }

    fn write(root: &Path, rel: &str, bytes: &[u8]) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    fn record(files: &[(&str, &[u8])]) -> String {
        files
            .iter()
            .map(|(p, b)| format!("{p},{},{}\n", record_hash(&sha(b)), b.len()))
            .collect::<String>()
            + "pkg-1.0.dist-info/RECORD,,\n"
    }

    /// A run killed mid-swap, its journal gone: pip's `a.so` is in the backup, rocbuild's in
    /// its place; rocbuild's RECORD rewrite is in place too; a new `b.so` has no backup.
    #[test]
    fn pips_exact_copies_go_back_and_nothing_is_deleted() {
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        let txn = layout::txn(site);
        let pip_record = record(&[("pkg/a.so", b"pip a")]);
        let our_record = record(&[("pkg/a.so", b"ours a"), ("pkg/b.so", b"ours b")]);
        write(&txn, "backup/pkg/a.so", b"pip a");
        write(
            &txn,
            "backup/pkg-1.0.dist-info/RECORD",
            pip_record.as_bytes(),
        );
        write(site, "pkg/a.so", b"ours a");
        write(site, "pkg/b.so", b"ours b");
        write(site, "pkg-1.0.dist-info/RECORD", our_record.as_bytes());
        // A file in the backup that no RECORD proves, and torch's file the list names.
        write(&txn, "backup/pkg/unproven.so", b"who knows");
        write(
            site,
            "torch-2.0.dist-info/RECORD",
            &record(&[("torch/lib.so", b"torch")]).into_bytes(),
        );
        write(site, "torch/lib.so", b"torch");
        let placed = format!(
            "{} pkg/a.so\n{} pkg/b.so\n{} pkg-1.0.dist-info/RECORD\n{} torch/lib.so\n",
            sha(b"ours a"),
            sha(b"ours b"),
            sha(our_record.as_bytes()),
            sha(b"torch")
        );
        write(&txn, PLACED, placed.as_bytes());
        let s = salvage(site).unwrap().unwrap();
        assert_eq!(std::fs::read(site.join("pkg/a.so")).unwrap(), b"pip a");
        assert_eq!(
            std::fs::read_to_string(site.join("pkg-1.0.dist-info/RECORD")).unwrap(),
            pip_record
        );
        assert!(!site.join("pkg/b.so").exists());
        assert_eq!(
            std::fs::read(site.join("torch/lib.so")).unwrap(),
            b"torch",
            "pip's exact copy never moves"
        );
        // Everything rocbuild had put in place, and the unproven file, kept and named.
        let kept: Vec<String> = kept(site).into_iter().map(|(_, to)| to).collect();
        for f in [
            "pkg/a.so",
            "pkg/b.so",
            "pkg-1.0.dist-info/RECORD",
            "pkg/unproven.so",
        ] {
            assert!(kept.contains(&f.to_string()), "{f}: {kept:?}");
        }
        assert_eq!(s.put_back, vec!["pkg/a.so", "pkg-1.0.dist-info/RECORD"]);
        // Nothing left to salvage a second time.
        crate::txn_fs::remove_dir_all(&txn).unwrap();
        assert_eq!(salvage(site).unwrap(), None);
    }

    /// A planted backup of a file pip has exactly, and a planted list naming pip's file: both
    /// change nothing.
    #[test]
    fn planted_leftovers_never_replace_or_move_pips_exact_copy() {
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        let txn = layout::txn(site);
        write(
            site,
            "pkg-1.0.dist-info/RECORD",
            record(&[("pkg/a.so", b"pip a")]).as_bytes(),
        );
        write(site, "pkg/a.so", b"pip a");
        write(&txn, "backup/pkg/a.so", b"evil");
        write(
            &txn,
            PLACED,
            format!("{} pkg/a.so\n", sha(b"pip a")).as_bytes(),
        );
        let s = salvage(site).unwrap().unwrap();
        assert_eq!(std::fs::read(site.join("pkg/a.so")).unwrap(), b"pip a");
        assert!(s.put_back.is_empty() && s.moved_aside.is_empty(), "{s:?}");
        assert_eq!(s.kept.len(), 1);
    }
}
