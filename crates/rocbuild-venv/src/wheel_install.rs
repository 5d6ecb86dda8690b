//! A wheel rocbuild has already downloaded, checked and unpacked (a team's prebuilt wheel) is
//! installed into the transaction's staging directory by rocbuild itself, as `pip install
//! --no-deps --target` would: no pip is needed, so a venv without one works (the embeddable
//! CPython of a Windows app has neither pip nor `ensurepip`). The unpacked copy lives in the
//! cache, which may have been written by someone else: every file must be listed in the
//! wheel's RECORD with the hash it has now, every path must be a plain relative one and no
//! entry may be a link; anything else is refused before a byte is copied.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::confine;
use crate::error::{Result, VenvError};
use crate::manifest::sha256_file;
use crate::record::{parse, quote, record_hash};

/// What was put into the target: paths relative to it, `/`-separated, sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub dist_info: String,
    pub files: Vec<String>,
    /// `.data/headers` and `.data/data` files, which `pip --target` does not install either.
    pub dropped: Vec<String>,
}

/// Copy the unpacked wheel of `distribution` at `unpacked` into `target` (created when
/// missing), with a RECORD that lists where each file went and an `INSTALLER` of `rocbuild`.
pub fn install_unpacked(unpacked: &Path, target: &Path, distribution: &str) -> Result<Installed> {
    let di = the_dist_info(unpacked, distribution)?;
    let rows = checked_rows(unpacked, &di)?;
    let mut placed: BTreeMap<String, (String, String, PathBuf)> = BTreeMap::new();
    let mut dropped = Vec::new();
    for (rel, hash, size) in rows {
        match destination(&rel, &di) {
            Some(dest) => {
                placed.insert(dest, (hash, size, unpacked.join(&rel)));
            }
            None => dropped.push(rel),
        }
    }
    fs_err::create_dir_all(target).map_err(VenvError::io("create", target))?;
    let mut record = String::new();
    for (dest, (hash, size, from)) in &placed {
        let to = confine::under(target, dest)?;
        if let Some(parent) = to.parent() {
            fs_err::create_dir_all(parent).map_err(VenvError::io("create", parent))?;
        }
        fs_err::copy(from, &to).map_err(VenvError::io("copy", from))?;
        record.push_str(&format!("{},{hash},{size}\n", quote(dest)));
    }
    let installer = format!("{di}/INSTALLER");
    write(target, &installer, b"rocbuild\n")?;
    let (sha, size) = sha256_file(&confine::under(target, &installer)?)?;
    record.push_str(&format!("{installer},{},{size}\n", record_hash(&sha)));
    record.push_str(&format!("{di}/RECORD,,\n"));
    write(target, &format!("{di}/RECORD"), record.as_bytes())?;
    let mut files: Vec<String> = placed.into_keys().collect();
    files.extend([installer, format!("{di}/RECORD")]);
    files.sort();
    dropped.sort();
    Ok(Installed {
        dist_info: di,
        files,
        dropped,
    })
}

fn the_dist_info(unpacked: &Path, distribution: &str) -> Result<String> {
    let found = crate::ownership::dist_infos(unpacked, distribution);
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(bad(
            unpacked,
            format!("it holds no {distribution}-*.dist-info"),
        )),
        many => Err(bad(
            unpacked,
            format!(
                "it holds {} dist-info folders: {}",
                many.len(),
                many.join(", ")
            ),
        )),
    }
}

/// RECORD's rows other than RECORD itself and signatures, each checked against the file:
/// a plain relative path, a regular file, the sha256 and size written; and no file that RECORD
/// does not list.
fn checked_rows(unpacked: &Path, di: &str) -> Result<Vec<(String, String, String)>> {
    let record_path = confine::under(unpacked, &format!("{di}/RECORD"))?;
    if !std::fs::symlink_metadata(&record_path).is_ok_and(|m| m.is_file()) {
        return Err(bad(
            unpacked,
            format!("{di}/RECORD is missing or not a file"),
        ));
    }
    let text = fs_err::read_to_string(&record_path).map_err(VenvError::io("read", &record_path))?;
    let unsigned = |p: &str| {
        p == format!("{di}/RECORD")
            || p == format!("{di}/RECORD.jws")
            || p == format!("{di}/RECORD.p7s")
    };
    let mut rows = Vec::new();
    for (rel, hash, size) in parse(&text) {
        if !confine::is_inside(&rel) {
            return Err(bad(
                unpacked,
                format!("its RECORD names `{rel}`, not a plain relative path"),
            ));
        }
        if unsigned(&rel) {
            continue;
        }
        let at = confine::under(unpacked, &rel)?;
        if !std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_file()) {
            return Err(bad(
                unpacked,
                format!("`{rel}` is listed in its RECORD but is not a file there"),
            ));
        }
        let (sha, real) = sha256_file(&at)?;
        if record_hash(&sha) != hash || real.to_string() != size {
            return Err(bad(
                unpacked,
                format!(
                    "`{rel}` does not match its RECORD (sha256 and size {}, {real} now)",
                    hash_or_none(&hash)
                ),
            ));
        }
        rows.push((rel, hash, size));
    }
    for rel in files_below(unpacked, "")? {
        if !unsigned(&rel) && !rows.iter().any(|(r, _, _)| *r == rel) {
            return Err(bad(
                unpacked,
                format!("`{rel}` is not listed in its RECORD"),
            ));
        }
    }
    Ok(rows)
}

fn hash_or_none(h: &str) -> &str {
    if h.is_empty() {
        "none written"
    } else {
        h
    }
}

/// Every regular file below `dir` (relative, `/`-separated); a link anywhere is refused.
fn files_below(root: &Path, rel: &str) -> Result<Vec<String>> {
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let mut out = Vec::new();
    for e in fs_err::read_dir(&dir).map_err(VenvError::io("read", &dir))? {
        let e = e.map_err(VenvError::io("read", &dir))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let child = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let md = std::fs::symlink_metadata(e.path()).map_err(VenvError::io("read", e.path()))?;
        if confine::is_link(&md) {
            return Err(bad(
                root,
                format!("`{child}` is a link, which a wheel never holds"),
            ));
        }
        if md.is_dir() {
            out.extend(files_below(root, &child)?);
        } else {
            out.push(child);
        }
    }
    Ok(out)
}

/// Where a wheel's file goes under `--target`: `<name>.data/purelib|platlib/x` at `x`,
/// `.data/scripts/x` at `bin/x`, everything else where it is; `.data/headers|data` nowhere.
fn destination(rel: &str, di: &str) -> Option<String> {
    let data = format!("{}.data/", di.trim_end_matches(".dist-info"));
    let Some(rest) = rel.strip_prefix(&data) else {
        return Some(rel.to_string());
    };
    let (scheme, path) = rest.split_once('/')?;
    match scheme {
        "purelib" | "platlib" => Some(path.to_string()),
        "scripts" => Some(format!("bin/{path}")),
        _ => None,
    }
}

fn write(target: &Path, rel: &str, bytes: &[u8]) -> Result<()> {
    let p = confine::under(target, rel)?;
    fs_err::write(&p, bytes).map_err(VenvError::io("write", &p))
}

fn bad(unpacked: &Path, why: String) -> VenvError {
    VenvError::BadWheel {
        path: unpacked.display().to_string(),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unpacked wheel of `demo` 1.0 with a module, a platlib library, a script and a
    /// header, and a RECORD that lists them all.
    fn wheel(dir: &Path) {
        let files: [(&str, &[u8]); 5] = [
            ("demo/__init__.py", b"X = 1\n"),
            ("demo-1.0.data/platlib/demo_native.so", b"\x7fELF"),
            ("demo-1.0.data/scripts/demo-cli", b"#!python\n"),
            ("demo-1.0.data/headers/demo.h", b"int x;\n"),
            ("demo-1.0.dist-info/METADATA", b"Name: demo\nVersion: 1.0\n"),
        ];
        let mut record = String::new();
        for (rel, bytes) in files {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, bytes).unwrap();
            let (sha, size) = sha256_file(&p).unwrap();
            record.push_str(&format!("{rel},{},{size}\n", record_hash(&sha)));
        }
        record.push_str("demo-1.0.dist-info/RECORD,,\n");
        std::fs::write(dir.join("demo-1.0.dist-info/RECORD"), record).unwrap();
    }

    #[test]
    fn places_files_as_pip_target_does_and_writes_a_true_record() {
        let t = tempfile::tempdir().unwrap();
        let (src, dst) = (t.path().join("unpacked"), t.path().join("target"));
        wheel(&src);
        let got = install_unpacked(&src, &dst, "Demo").unwrap();
        assert_eq!(got.dist_info, "demo-1.0.dist-info");
        assert_eq!(
            got.files,
            [
                "bin/demo-cli",
                "demo-1.0.dist-info/INSTALLER",
                "demo-1.0.dist-info/METADATA",
                "demo-1.0.dist-info/RECORD",
                "demo/__init__.py",
                "demo_native.so"
            ]
        );
        assert_eq!(got.dropped, ["demo-1.0.data/headers/demo.h"]);
        assert_eq!(
            std::fs::read(dst.join("demo_native.so")).unwrap(),
            b"\x7fELF"
        );
        let record = std::fs::read_to_string(dst.join("demo-1.0.dist-info/RECORD")).unwrap();
        // Every installed file is in the new RECORD with its real hash.
        for f in &got.files {
            let row = parse(&record).into_iter().find(|(p, _, _)| p == f);
            let (_, hash, _) = row.unwrap_or_else(|| panic!("{f} not in {record}"));
            if !f.ends_with("RECORD") {
                let (sha, _) = sha256_file(&dst.join(f)).unwrap();
                assert_eq!(hash, record_hash(&sha), "{f}");
            }
        }
        assert!(!record.contains(".data/"), "{record}");
    }

    fn refused(src: &Path, needle: &str) {
        let dst = src.parent().unwrap().join("target");
        match install_unpacked(src, &dst, "demo") {
            Err(VenvError::BadWheel { why, .. }) => assert!(why.contains(needle), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(!dst.exists(), "nothing is copied before every check passed");
    }

    #[test]
    fn a_changed_file_an_unlisted_file_or_an_escaping_path_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("a");
        wheel(&src);
        std::fs::write(src.join("demo/__init__.py"), b"import os; os.system('x')\n").unwrap();
        refused(&src, "does not match its RECORD");

        let src = t.path().join("b");
        wheel(&src);
        std::fs::write(src.join("demo/extra.py"), b"").unwrap();
        refused(&src, "`demo/extra.py` is not listed");

        let src = t.path().join("c");
        wheel(&src);
        let rec = src.join("demo-1.0.dist-info/RECORD");
        let text = std::fs::read_to_string(&rec).unwrap();
        std::fs::write(&rec, format!("../../outside.py,sha256=x,1\n{text}")).unwrap();
        refused(&src, "not a plain relative path");

        let src = t.path().join("d");
        std::fs::create_dir_all(&src).unwrap();
        refused(&src, "no demo-*.dist-info");
    }

    #[cfg(unix)]
    #[test]
    fn a_link_in_the_unpacked_wheel_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("a");
        wheel(&src);
        std::os::unix::fs::symlink("/etc", src.join("demo/etc")).unwrap();
        refused(&src, "is a link");
    }
}
