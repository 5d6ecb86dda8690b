//! `rocbuild restore <recipe>`: the venv exactly as it was just before rocbuild last took the
//! package over (see [`crate::ownership`]): the baseline in `.rocbuild/backup/<recipe>/` comes
//! back byte for byte (pip's files and dist-info with their RECORD, or nothing at all if the
//! package was not there), and rocbuild's files go. If someone else (pip, uv) has taken the
//! package back since, their install stays as it is: only rocbuild's own leftovers that no
//! installer's RECORD lists are removed, and rocbuild forgets the package. A file nobody
//! recorded (one a person added) is never removed. The restore is journaled past its commit
//! point before the first file moves: a restore killed at any step is finished by the next
//! command that takes the lock.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Result, VenvError};
use crate::install::{self, backup_dir, Journal};
use crate::manifest::{self, sha256_file, Manifest};
use crate::ownership;

#[derive(Debug, Clone, Serialize)]
pub struct Restored {
    pub recipe: String,
    /// Put back from the backup (relative to site-packages).
    pub restored: Vec<String>,
    /// rocbuild's files removed.
    pub removed: Vec<String>,
    /// Files left alone: rocbuild's files that something else (pip) replaced since, or
    /// files nobody recorded.
    pub left: Vec<String>,
    /// Someone else took the package back since rocbuild's install: it was left as it is
    /// and only rocbuild's record (and orphaned files) went.
    pub released: bool,
}

impl Restored {
    fn new(recipe: &str) -> Restored {
        Restored {
            recipe: recipe.into(),
            restored: Vec::new(),
            removed: Vec::new(),
            left: Vec::new(),
            released: false,
        }
    }
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

/// Restore `recipe` in `site`. Call with the venv lock held. While rocbuild holds the
/// package, the kept baseline must be there and match what the manifest recorded of it:
/// otherwise nothing is changed and the error says what can still be done.
pub fn restore(site: &Path, recipe: &str) -> Result<Restored> {
    if !crate::confine::is_plain_name(recipe) {
        return Err(not_installed(site, recipe));
    }
    let Some(m) = manifest::read_checked(site, recipe)? else {
        return Err(not_installed(site, recipe));
    };
    let backup = backup_dir(site, recipe);
    let backup_rel = crate::confine::rel_of(site, &backup)?;
    let mut journal = Journal::committed(recipe)?;
    let out = if ownership::holds(site, &m) {
        check_baseline(&m, &backup)?;
        give_back(site, &m, &backup, &backup_rel, &mut journal)
    } else {
        release(site, &m, &backup, &backup_rel, &mut journal)
    };
    let mut out = out;
    guard(site, &m, &mut journal, &mut out);
    journal
        .drop
        .push(crate::confine::rel_of(site, &manifest::path(site, recipe))?);
    journal.drop.push(backup_rel);
    // A file this restore deletes or moves something over that a running program holds (on
    // Windows, a loaded DLL) would stop it half-way: refused before anything changes.
    install::refuse_held(
        &format!("restore {recipe}"),
        site,
        install::deleted_by(site, &journal)?,
    )?;
    install::finish(site, &journal)?;
    Ok(out)
}

/// The last word before anything moves: of the files this restore would remove or put a
/// backup over, those another distribution's RECORD lists (torch's `libc10.so`, when a
/// planted or stale manifest claims it) and those whose bytes are no longer what rocbuild
/// recorded are left as they are, and said so.
fn guard(site: &Path, m: &Manifest, journal: &mut Journal, out: &mut Restored) {
    let mut own: BTreeSet<String> = [m.recipe.as_str()]
        .into_iter()
        .chain(m.ownership.iter().map(|o| o.distribution.as_str()))
        .chain(m.requirements.iter().map(|r| r.name.as_str()))
        .map(rocbuild_probe::normalize_dist)
        .collect();
    own.remove("");
    let others = ownership::recorded_by_others(site, &own);
    let recorded: std::collections::BTreeMap<&str, &str> = m
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.sha256.as_str()))
        .chain(
            m.ownership
                .iter()
                .flat_map(|o| o.held.iter().map(|(p, h)| (p.as_str(), h.as_str()))),
        )
        .collect();
    let changed = |rel: &str| {
        recorded
            .get(rel)
            .is_some_and(|sha| sha256_file(&native(site, rel)).is_ok_and(|(now, _)| now != *sha))
    };
    let keep = |rel: &str| others.contains_key(rel) || changed(rel);
    let left: Vec<String> = journal.remove.iter().filter(|r| keep(r)).cloned().collect();
    journal.remove.retain(|r| !keep(r));
    out.removed.retain(|r| !left.contains(r));
    let claimed: Vec<String> = journal
        .put_back
        .iter()
        .map(|(_, to)| to.clone())
        .filter(|to| others.contains_key(to))
        .collect();
    journal.put_back.retain(|(_, to)| !others.contains_key(to));
    out.restored.retain(|r| !claimed.contains(r));
    out.left.extend(left);
    out.left.extend(claimed);
    out.left.sort();
    out.left.dedup();
}

/// The kept baseline is there, a real directory, and holds exactly what the manifest
/// recorded (for a manifest that recorded it).
fn check_baseline(m: &Manifest, backup: &Path) -> Result<()> {
    let Some(o) = &m.ownership else {
        return Ok(());
    };
    let why = if crate::confine::is_link_at(backup) {
        Some(format!(
            "{} is a link, which rocbuild never makes (it would move what it points to into the venv)",
            backup.display()
        ))
    } else if !crate::confine::is_real_dir(backup) {
        Some(format!("{} is gone", backup.display()))
    } else if let Some(rec) = &o.baseline {
        let now = ownership::tree_hashes(backup);
        let missing = rec.keys().filter(|k| !now.contains_key(*k)).count();
        let changed = rec
            .iter()
            .filter(|(k, h)| now.get(*k).is_some_and(|n| n != *h))
            .count();
        let added = now.keys().filter(|k| !rec.contains_key(*k)).count();
        (missing + changed + added > 0).then(|| {
            format!(
                "{} no longer holds what rocbuild kept ({missing} missing, {changed} changed, {added} not kept by rocbuild)",
                backup.display()
            )
        })
    } else {
        None
    };
    let Some(why) = why else {
        return Ok(());
    };
    let version = o
        .baseline
        .iter()
        .flatten()
        .find_map(|(k, _)| k.strip_suffix(".dist-info/METADATA")?.rsplit_once('-'))
        .map(|(_, v)| v.to_string());
    let pin = version.map_or(String::new(), |v| format!("=={v}"));
    Err(VenvError::NoBaseline {
        what: "the files pip had".into(),
        recipe: m.recipe.clone(),
        why,
        help: format!(
            "rocbuild changed nothing: its build stays installed and working. To get pip's package back, reinstall it with pip (`pip install --force-reinstall --no-deps {}{pin}`); then `rocbuild restore {}` only removes what rocbuild added and forgets its build",
            o.distribution, m.recipe
        ),
    })
}

fn not_installed(site: &Path, recipe: &str) -> VenvError {
    let installed: Vec<String> = manifest::read_all(site)
        .into_iter()
        .flatten()
        .map(|m| m.recipe)
        .collect();
    VenvError::NotInstalled {
        recipe: recipe.into(),
        site: site.display().to_string(),
        help: if installed.is_empty() {
            "rocbuild has installed nothing in this venv; pick another with --venv".into()
        } else {
            format!("rocbuild builds in this venv: {}", installed.join(", "))
        },
    }
}

/// Everything rocbuild left (relative paths): what it holds, its builds, the files it added,
/// the pure-Python part it installed.
fn ours(m: &Manifest) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = m.files.iter().map(|f| f.path.clone()).collect();
    out.extend(m.extra_files.iter().cloned());
    out.extend(m.python_part.iter().flat_map(|pp| pp.files.iter().cloned()));
    out.extend(m.requirements.iter().flat_map(|r| r.files.iter().cloned()));
    out.extend(m.ownership.iter().flat_map(|o| o.held.keys().cloned()));
    out
}

/// rocbuild still holds the package: the baseline comes back over it, and every file of
/// rocbuild's (and bytecode of the package) that the baseline does not have goes.
fn give_back(
    site: &Path,
    m: &Manifest,
    backup: &Path,
    backup_rel: &str,
    journal: &mut Journal,
) -> Restored {
    let baseline: BTreeSet<String> = files_under(backup).into_iter().collect();
    let mut out = Restored::new(&m.recipe);
    let mut gone: BTreeSet<String> = ours(m);
    if let Some(o) = &m.ownership {
        let footprint = ownership::footprint(site, &o.package());
        gone.extend(
            footprint
                .iter()
                .filter(|r| ownership::is_bytecode(r))
                .cloned(),
        );
        out.left = footprint
            .into_iter()
            .filter(|r| !gone.contains(r) && !baseline.contains(r))
            .collect();
    }
    for rel in gone.clone() {
        gone.extend(bytecode_of(site, &rel));
    }
    for rel in gone {
        if baseline.contains(&rel) || std::fs::symlink_metadata(native(site, &rel)).is_err() {
            continue; // the baseline's file goes back over it, or it is gone already
        }
        journal.remove.push(rel.clone());
        out.removed.push(rel);
    }
    for rel in &baseline {
        journal
            .put_back
            .push((format!("{backup_rel}/{rel}"), rel.clone()));
        out.restored.push(rel.clone());
    }
    out
}

/// Someone else has taken the package back since rocbuild's install: theirs stays. Of
/// rocbuild's files that are still exactly as it left them, one that an installer's RECORD
/// lists with the baseline's bytes gets those bytes back (a file `repair` edited, beside one
/// pip has put back since: RECORD is true again); one that no RECORD lists is removed (a
/// preload hook, a library the wheel does not have); the rest is left.
fn is_record(rel: &str) -> bool {
    rel.ends_with(".dist-info/RECORD")
}

/// What the RECORDs will list once this restore is done: a RECORD that rocbuild rewrote (a
/// repair keeps RECORD true) and that is still as rocbuild left it goes back to the baseline's,
/// so the baseline's hashes decide which of rocbuild's files go back with it.
fn records_after(
    site: &Path,
    backup: &Path,
    intact: &BTreeSet<String>,
) -> std::collections::BTreeMap<String, String> {
    let mut rec = ownership::recorded_hashes(site);
    for rel in intact.iter().filter(|r| is_record(r)) {
        if let Ok(text) = std::fs::read_to_string(native(backup, rel)) {
            for (p, h, _) in crate::record::parse(&text) {
                rec.insert(p, h);
            }
        }
    }
    rec
}

fn release(
    site: &Path,
    m: &Manifest,
    backup: &Path,
    backup_rel: &str,
    journal: &mut Journal,
) -> Restored {
    let mut out = Restored::new(&m.recipe);
    out.released = true;
    let intact: BTreeSet<String> = ownership::still_ours(site, m).into_iter().collect();
    let recorded = records_after(site, backup, &intact);
    for rel in ours(m) {
        let p = native(site, &rel);
        if std::fs::symlink_metadata(&p).is_err() {
            continue;
        }
        let hashed = m.files.iter().any(|f| f.path == rel)
            || m.ownership
                .as_ref()
                .is_some_and(|o| o.held.contains_key(&rel));
        let ours_still = intact.contains(&rel) || !hashed;
        let base = native(backup, &rel);
        let base_is_recorded = recorded.get(&rel).is_some_and(|h| {
            !h.is_empty()
                && sha256_file(&base).is_ok_and(|(hex, _)| crate::record::record_hash(&hex) == *h)
        }) || (is_record(&rel) && crate::confine::exists(&base));
        if ours_still && base_is_recorded {
            journal
                .put_back
                .push((format!("{backup_rel}/{rel}"), rel.clone()));
            out.restored.push(rel);
        } else if ours_still && !recorded.contains_key(&rel) {
            journal.remove.push(rel.clone());
            out.removed.push(rel);
        } else {
            out.left.push(rel);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ownership::Ownership;
    use crate::record::record_hash;

    fn sha(b: &[u8]) -> String {
        use sha2::Digest;
        sha2::Sha256::digest(b)
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect()
    }

    fn record_of(files: &[(&str, &[u8])]) -> String {
        let mut r: String = files
            .iter()
            .map(|(p, b)| format!("{p},{},{}\n", record_hash(&sha(b)), b.len()))
            .collect();
        r.push_str("pkg-1.0.dist-info/RECORD,,\n");
        r
    }

    /// A repair keeps RECORD true; someone then writes one library back by hand (rocbuild no
    /// longer holds the package). `restore` must still give back pip's other files and pip's
    /// RECORD, since the RECORD is still as the repair left it.
    #[test]
    fn after_a_repair_and_one_file_written_back_restore_gives_back_the_rest_and_the_record() {
        crate::state_key::configure_for_tests();
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        let pip = [("pkg/a.so", b"pip a" as &[u8]), ("pkg/b.so", b"pip b")];
        let rep = [
            ("pkg/a.so", b"repaired a" as &[u8]),
            ("pkg/b.so", b"repaired b"),
        ];
        let write = |root: &Path, files: &[(&str, &[u8])]| {
            for (p, b) in files {
                std::fs::create_dir_all(root.join(p).parent().unwrap()).unwrap();
                std::fs::write(root.join(p), b).unwrap();
            }
            std::fs::create_dir_all(root.join("pkg-1.0.dist-info")).unwrap();
            std::fs::write(root.join("pkg-1.0.dist-info/RECORD"), record_of(files)).unwrap();
        };
        let backup = backup_dir(site, "pkg");
        write(&backup, &pip);
        write(site, &rep);
        let held = ownership::hashes(
            site,
            &ownership::Package {
                distribution: "pkg".into(),
                roots: vec!["pkg".into()],
            },
        );
        let m = Manifest {
            schema: 1,
            recipe: "pkg".into(),
            kind: manifest::Kind::Repair,
            ownership: Some(Ownership {
                distribution: "pkg".into(),
                roots: vec!["pkg".into()],
                baseline: Some(ownership::tree_hashes(&backup)),
                held,
            }),
            ..Manifest::default()
        };
        manifest::write(site, &m).unwrap();
        std::fs::write(site.join("pkg/a.so"), b"pip a").unwrap();
        let r = restore(site, "pkg").unwrap();
        assert!(r.released, "{r:?}");
        assert_eq!(std::fs::read(site.join("pkg/b.so")).unwrap(), b"pip b");
        assert_eq!(
            std::fs::read_to_string(site.join("pkg-1.0.dist-info/RECORD")).unwrap(),
            record_of(&pip)
        );
        assert_eq!(std::fs::read(site.join("pkg/a.so")).unwrap(), b"pip a");
    }

    /// A sealed manifest (rocbuild's own, say of an older install) that names a file another
    /// distribution's RECORD lists: restore leaves it, whatever the manifest says.
    #[test]
    fn restore_never_removes_a_file_another_distributions_record_lists() {
        crate::state_key::configure_for_tests();
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        let write = |rel: &str, b: &[u8]| {
            std::fs::create_dir_all(site.join(rel).parent().unwrap()).unwrap();
            std::fs::write(site.join(rel), b).unwrap();
        };
        write("torch/lib/libc10.so", b"torch c10");
        write(
            "torch-2.0.dist-info/RECORD",
            format!(
                "torch/lib/libc10.so,{},9\n",
                record_hash(&sha(b"torch c10"))
            )
            .as_bytes(),
        );
        write("pkg/mine.so", b"mine");
        std::fs::create_dir_all(site.join(".rocbuild")).unwrap();
        let file = |p: &str, b: &[u8]| manifest::InstalledFile {
            path: p.into(),
            sha256: sha(b),
            size: b.len() as u64,
            ..manifest::InstalledFile::default()
        };
        let m = Manifest {
            schema: 1,
            recipe: "pkg".into(),
            files: vec![
                file("pkg/mine.so", b"mine"),
                file("torch/lib/libc10.so", b"torch c10"),
            ],
            ..Manifest::default()
        };
        manifest::write(site, &m).unwrap();
        let r = restore(site, "pkg").unwrap();
        assert_eq!(
            std::fs::read(site.join("torch/lib/libc10.so")).unwrap(),
            b"torch c10"
        );
        assert!(r.left.contains(&"torch/lib/libc10.so".to_string()), "{r:?}");
        assert!(!site.join("pkg/mine.so").exists(), "{r:?}");
    }

    /// A manifest that is not sealed, or sealed for another venv, is never acted on.
    #[test]
    fn an_unsealed_or_foreign_manifest_is_refused() {
        crate::state_key::configure_for_tests();
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        for s in [&a, &b] {
            std::fs::create_dir_all(s.join(".rocbuild")).unwrap();
        }
        let m = Manifest {
            schema: 1,
            recipe: "pkg".into(),
            ..Manifest::default()
        };
        manifest::write(&a, &m).unwrap();
        assert!(manifest::read(&a, "pkg").is_some());
        std::fs::copy(manifest::path(&a, "pkg"), manifest::path(&b, "pkg")).unwrap();
        let e = manifest::read_checked(&b, "pkg").unwrap_err().to_string();
        assert!(e.contains("cannot be used"), "{e}");
        std::fs::write(
            manifest::path(&b, "pkg"),
            serde_json::to_string(&m).unwrap(),
        )
        .unwrap();
        let e = format!("{:?}", manifest::read_checked(&b, "pkg").unwrap_err());
        assert!(e.contains("no seal"), "{e}");
        // Renamed to another recipe's name: its seal names the recipe.
        std::fs::rename(manifest::path(&a, "pkg"), manifest::path(&a, "other")).unwrap();
        assert!(manifest::read(&a, "other").is_none());
    }
}
