//! Who owns a package's files: recorded, never inferred.
//!
//! A package's *footprint* in site-packages is every file under its import directories, every
//! file of its `<dist>-*.dist-info/` (any version), and every file those RECORDs list inside
//! site-packages (a `<pkg>.libs/` folder, say). rocbuild *holds* a package while every file
//! of the footprint it left at its last install (recorded with its hash in the manifest's
//! [`Ownership::held`]) is still there with that hash, and no other dist-info of the package
//! has appeared. Bytecode (`__pycache__/`) is left out: Python writes it on import.
//!
//! When rocbuild installs a package it does not hold — the first install, or after pip, uv or
//! a person replaced or removed its build — it *takes the package over*: the whole footprint,
//! as it is at that moment, is copied byte for byte into `.rocbuild/backup/<recipe>/`, the
//! baseline. `restore` gives back exactly that baseline while rocbuild still holds the
//! package; once someone else has taken the package back, `restore` leaves their install
//! alone and only forgets rocbuild's record (see [`crate::restore`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::manifest::{sha256_file, Manifest};
use crate::record;

/// What rocbuild holds of a package, recorded in its manifest at every install.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Ownership {
    /// The distribution (pip's name) whose dist-info and RECORD belong to the footprint.
    pub distribution: String,
    /// Import directories (relative to site-packages, `/`-separated).
    #[serde(default)]
    pub roots: Vec<String>,
    /// The footprint as rocbuild left it: path -> sha256 (no bytecode).
    #[serde(default)]
    pub held: BTreeMap<String, String>,
    /// What `.rocbuild/backup/<recipe>/` holds, the baseline `restore` gives back: path ->
    /// sha256 (an empty map: the package was not there). `restore` checks the backup
    /// against it and refuses, changing nothing, when the backup is gone or damaged. `None`
    /// in manifests of a rocbuild that did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BTreeMap<String, String>>,
}

/// The package a footprint is computed for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    pub distribution: String,
    pub roots: Vec<String>,
}

impl Ownership {
    pub fn package(&self) -> Package {
        Package {
            distribution: self.distribution.clone(),
            roots: self.roots.clone(),
        }
    }
}

/// Is `rel` Python bytecode (written by an import, not by an installer)?
pub fn is_bytecode(rel: &str) -> bool {
    rel.split('/').any(|c| c == "__pycache__")
}

fn native(site: &Path, rel: &str) -> PathBuf {
    rel.split('/').fold(site.to_path_buf(), |p, c| p.join(c))
}

/// The dist-info directories of `distribution` in `site` (any version) that hold a METADATA
/// or a RECORD (an install emptied of its files is no install), sorted.
pub fn dist_infos(site: &Path, distribution: &str) -> Vec<String> {
    let want = rocbuild_probe::normalize_dist(distribution);
    let Ok(rd) = std::fs::read_dir(site) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .flatten()
        .filter(|e| e.path().join("METADATA").is_file() || e.path().join("RECORD").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.strip_suffix(".dist-info")
                .and_then(|s| s.rsplit_once('-'))
                .is_some_and(|(d, _)| rocbuild_probe::normalize_dist(d) == want)
        })
        .collect();
    out.sort();
    out
}

/// Every file of `pkg`'s footprint in `site` (bytecode included), `/`-separated, sorted.
pub fn footprint(site: &Path, pkg: &Package) -> Vec<String> {
    let mut out = BTreeSet::new();
    let mut add_tree = |rel_dir: &str| {
        let dir = native(site, rel_dir);
        if crate::confine::is_link_at(&dir) {
            // A link where the package's folder should be: the link itself, not what it
            // points to, is the package's.
            out.insert(rel_dir.to_string());
        }
        for (rel, _) in crate::layout::walk(&dir) {
            out.insert(format!("{rel_dir}/{rel}"));
        }
    };
    for root in &pkg.roots {
        add_tree(root);
    }
    let infos = dist_infos(site, &pkg.distribution);
    for di in &infos {
        add_tree(di);
    }
    for di in &infos {
        let text = std::fs::read_to_string(native(site, &format!("{di}/RECORD")));
        for (rel, _, _) in record::parse(&text.unwrap_or_default()) {
            // rocbuild's own state is never a package's, whatever a RECORD says (an index
            // wheel listing `.rocbuild/…` would otherwise make rocbuild disown its install).
            let in_state = rel.split('/').next() == Some(crate::layout::STATE_DIR);
            let is_file = std::fs::symlink_metadata(native(site, &rel)).is_ok_and(|m| !m.is_dir());
            if crate::manifest::is_inside(&rel) && !in_state && is_file {
                out.insert(rel);
            }
        }
    }
    out.into_iter().collect()
}

/// The footprint's files with their sha256, bytecode left out: what [`Ownership::held`]
/// records after an install.
pub fn hashes(site: &Path, pkg: &Package) -> BTreeMap<String, String> {
    footprint(site, pkg)
        .into_iter()
        .filter(|rel| !is_bytecode(rel))
        .filter_map(|rel| {
            let h = entry_hash(&native(site, &rel))?;
            Some((rel, h))
        })
        .collect()
}

/// The sha256 of what is at `p` as it is: a file's bytes, or for a link the text of its
/// target (a link is never followed, so it is recorded as a link).
pub fn entry_hash(p: &Path) -> Option<String> {
    let md = std::fs::symlink_metadata(p).ok()?;
    if md.file_type().is_symlink() {
        use sha2::Digest;
        let target = std::fs::read_link(p).ok()?;
        let mut h = sha2::Sha256::new();
        h.update(b"link:");
        h.update(target.to_string_lossy().as_bytes());
        return Some(h.finalize().iter().map(|b| format!("{b:02x}")).collect());
    }
    md.is_file()
        .then(|| sha256_file(p).ok().map(|(h, _)| h))
        .flatten()
}

/// Every entry under `dir` with its [`entry_hash`] (a baseline's record).
pub fn tree_hashes(dir: &Path) -> BTreeMap<String, String> {
    crate::layout::walk(dir)
        .into_iter()
        .filter_map(|(rel, p)| Some((rel, entry_hash(&p)?)))
        .collect()
}

/// What rocbuild held, as far as a manifest tells: its ownership record, or for a manifest
/// of an older rocbuild, its installed files (with hashes) and the files it added.
fn held_of(m: &Manifest) -> (BTreeMap<String, Option<String>>, Option<Package>) {
    if let Some(o) = &m.ownership {
        let held = o
            .held
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        return (held, Some(o.package()));
    }
    let mut held: BTreeMap<String, Option<String>> = m
        .files
        .iter()
        .map(|f| (f.path.clone(), Some(f.sha256.clone())))
        .collect();
    for f in &m.extra_files {
        held.entry(f.clone()).or_insert(None);
    }
    if let Some(pp) = &m.python_part {
        for f in &pp.files {
            held.entry(f.clone()).or_insert(None);
        }
    }
    for f in m.requirements.iter().flat_map(|r| &r.files) {
        held.entry(f.clone()).or_insert(None);
    }
    (held, None)
}

/// Does rocbuild still hold the package `m` describes? Every file it left is there with the
/// hash it left, and no dist-info of the package that it did not leave has appeared.
pub fn holds(site: &Path, m: &Manifest) -> bool {
    let (held, pkg) = held_of(m);
    let files_intact = held.iter().all(|(rel, sha)| {
        let p = native(site, rel);
        match sha {
            Some(sha) => entry_hash(&p).is_some_and(|h| &h == sha),
            None => p.is_file(),
        }
    });
    let no_new_dist_info = pkg.is_none_or(|pkg| {
        dist_infos(site, &pkg.distribution)
            .iter()
            .all(|di| held.contains_key(&format!("{di}/RECORD")))
    });
    files_intact && no_new_dist_info
}

/// The files rocbuild left that are still exactly as it left them (what `restore` may remove
/// once someone else has taken the package back).
pub fn still_ours(site: &Path, m: &Manifest) -> Vec<String> {
    let (held, _) = held_of(m);
    held.into_iter()
        .filter(|(rel, sha)| {
            let p = native(site, rel);
            match sha {
                Some(sha) => sha256_file(&p).is_ok_and(|(h, _)| &h == sha),
                None => false,
            }
        })
        .map(|(rel, _)| rel)
        .collect()
}

/// Every path that some dist-info in `site` lists in its RECORD, with the hash listed
/// (`sha256=…`, or empty).
pub fn recorded_hashes(site: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(site) else {
        return out;
    };
    for e in rd.flatten() {
        if !e.file_name().to_string_lossy().ends_with(".dist-info") {
            continue;
        }
        for (p, hash, _) in record::parse(&read_record(&e.path())) {
            out.insert(p, hash);
        }
    }
    out
}

/// Every path that some dist-info in `site` lists in its RECORD (files someone else owns).
/// The RECORD of a dist-info directory, read as any file from a venv is: a regular file,
/// never through a link, at most [`cap::RECORD`] bytes; empty when it is not that.
fn read_record(dist_info: &Path) -> String {
    use rocbuild_probe::platform::state_files::{cap, read_capped_text};
    read_capped_text(&dist_info.join("RECORD"), cap::RECORD).unwrap_or_default()
}

/// Every path a RECORD lists, with the distribution (normalized) whose RECORD lists it, for
/// every distribution but `own` (normalized names): what rocbuild, acting on `own`, must
/// never remove.
pub fn recorded_by_others(site: &Path, own: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(site) else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        let Some((dist, _)) = name
            .strip_suffix(".dist-info")
            .and_then(|s| s.rsplit_once('-'))
        else {
            continue;
        };
        let dist = rocbuild_probe::normalize_dist(dist);
        if own.contains(&dist) {
            continue;
        }
        for (p, _, _) in record::parse(&read_record(&e.path())) {
            out.entry(p).or_insert_with(|| dist.clone());
        }
    }
    out
}

pub fn recorded_by_anyone(site: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Ok(rd) = std::fs::read_dir(site) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".dist-info") {
            continue;
        }
        out.extend(
            record::parse(&read_record(&e.path()))
                .into_iter()
                .map(|(p, _, _)| p),
        );
        // The dist-info's own files are its installer's, listed or not.
        for (rel, _) in crate::layout::walk(&e.path()) {
            out.insert(format!("{name}/{rel}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_listing_rocbuilds_state_does_not_make_it_the_packages() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path();
        for (p, b) in [
            ("pkg/a.so", "a"),
            (".rocbuild/r.json", "{}"),
            ("pkg-1.0.dist-info/METADATA", "m"),
            (
                "pkg-1.0.dist-info/RECORD",
                "pkg/a.so,,\n.rocbuild/r.json,,\n",
            ),
        ] {
            std::fs::create_dir_all(s.join(p).parent().unwrap()).unwrap();
            std::fs::write(s.join(p), b).unwrap();
        }
        let pkg = Package {
            distribution: "pkg".into(),
            roots: vec!["pkg".into()],
        };
        let f = footprint(s, &pkg);
        assert!(f.contains(&"pkg/a.so".to_string()), "{f:?}");
        assert!(!f.iter().any(|p| p.starts_with(".rocbuild/")), "{f:?}");
    }

    #[cfg(unix)]
    #[test]
    fn a_link_in_a_package_is_part_of_it_as_a_link_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let (s, out) = (d.path().join("site"), d.path().join("outside"));
        std::fs::create_dir_all(s.join("pkg")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(&out, s.join("pkg/home")).unwrap();
        let pkg = Package {
            distribution: "pkg".into(),
            roots: vec!["pkg".into()],
        };
        assert_eq!(footprint(&s, &pkg), vec!["pkg/home".to_string()]);
        assert!(entry_hash(&s.join("pkg/home")).is_some());
    }

    fn write(site: &Path, rel: &str, bytes: &[u8]) {
        let p = native(site, rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    fn pkg() -> Package {
        Package {
            distribution: "Fake_Codec".into(),
            roots: vec!["fakecodec".into()],
        }
    }

    #[test]
    fn the_footprint_is_the_import_dir_the_dist_info_and_what_record_lists() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path();
        write(s, "fakecodec/__init__.py", b"x");
        write(s, "fakecodec/__pycache__/__init__.cpython-311.pyc", b"pyc");
        write(
            s,
            "fake_codec-1.0.dist-info/RECORD",
            b"fakecodec/__init__.py,,\nfakecodec.libs/liba.so,,\n../../bin/x,,\n",
        );
        write(s, "fakecodec.libs/liba.so", b"a");
        write(s, "other/x.py", b"o");
        let f = footprint(s, &pkg());
        assert_eq!(
            f,
            [
                "fake_codec-1.0.dist-info/RECORD",
                "fakecodec.libs/liba.so",
                "fakecodec/__init__.py",
                "fakecodec/__pycache__/__init__.cpython-311.pyc",
            ]
        );
        let h = hashes(s, &pkg());
        assert!(!h.keys().any(|k| is_bytecode(k)), "{h:?}");
        assert_eq!(h.len(), 3);
    }

    #[test]
    fn holding_ends_when_a_file_changes_or_another_dist_info_appears() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path();
        write(s, "fakecodec/lib.so", b"ours");
        write(s, "fakecodec-1.0.dist-info/RECORD", b"fakecodec/lib.so,,\n");
        let p = Package {
            distribution: "fakecodec".into(),
            roots: vec!["fakecodec".into()],
        };
        let m = Manifest {
            ownership: Some(Ownership {
                distribution: p.distribution.clone(),
                roots: p.roots.clone(),
                held: hashes(s, &p),
                baseline: None,
            }),
            ..Manifest::default()
        };
        assert!(holds(s, &m));
        // Bytecode written by an import does not end it.
        write(s, "fakecodec/__pycache__/x.pyc", b"pyc");
        assert!(holds(s, &m));
        write(s, "fakecodec-0.9.dist-info/RECORD", b"");
        assert!(!holds(s, &m));
        std::fs::remove_dir_all(s.join("fakecodec-0.9.dist-info")).unwrap();
        assert!(holds(s, &m));
        write(s, "fakecodec/lib.so", b"pip's");
        assert!(!holds(s, &m));
        assert_eq!(
            still_ours(s, &m),
            vec!["fakecodec-1.0.dist-info/RECORD".to_string()]
        );
    }
}
