//! A release's source distribution, pinned by its sha256: a file already in a directory of
//! sdists (offline), and the safe unpacking of one.

use std::path::{Path, PathBuf};

use crate::{io, FetchError};

/// The file name an sdist of `project` `version` has (PEP 625: the normalized name with `_`).
pub fn sdist_file_name(project: &str, version: &str) -> String {
    let mut name = String::new();
    let mut last_sep = false;
    for c in project.chars() {
        if c == '-' || c == '_' || c == '.' {
            if !last_sep {
                name.push('_');
            }
            last_sep = true;
        } else {
            name.push(c.to_ascii_lowercase());
            last_sep = false;
        }
    }
    format!("{name}-{version}.tar.gz")
}

/// The sdist in one of `dirs` (its PEP 625 name, or the project's name as written), if its
/// sha256 is `sha256`. A file with another sha256 is an error: it would otherwise be
/// silently replaced by a download.
pub fn find_offline(
    dirs: &[PathBuf],
    project: &str,
    version: &str,
    sha256: &str,
) -> Result<Option<PathBuf>, FetchError> {
    let names = [
        sdist_file_name(project, version),
        format!("{project}-{version}.tar.gz"),
    ];
    for d in dirs {
        for n in &names {
            let p = d.join(n);
            if !p.is_file() {
                continue;
            }
            let got = crate::sha256_file(&p)?;
            if got != sha256.to_ascii_lowercase() {
                return Err(FetchError::ChecksumMismatch {
                    url: p.display().to_string(),
                    expected: sha256.to_string(),
                    actual: got,
                });
            }
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// Unpack the `.tar.gz` at `archive` into `target` (replaced as a whole), without its single
/// top directory (`name-1.0/`). Every entry is checked before one byte is written: no absolute
/// path, no `..`, no link pointing out, nothing but files, directories and links inside.
pub fn extract_sdist(archive: &Path, target: &Path) -> Result<PathBuf, FetchError> {
    let bad = |reason: String| FetchError::BadArchive {
        archive: archive.display().to_string(),
        reason,
    };
    let open = || -> Result<tar::Archive<flate2::read::GzDecoder<std::fs::File>>, FetchError> {
        let f = std::fs::File::open(archive).map_err(io("open", archive))?;
        Ok(tar::Archive::new(flate2::read::GzDecoder::new(f)))
    };
    // First pass: the names and kinds, all checked.
    let mut top: Option<String> = None;
    for entry in open()?.entries().map_err(|e| bad(e.to_string()))? {
        let entry = entry.map_err(|e| bad(e.to_string()))?;
        let name = entry
            .path()
            .map_err(|e| bad(e.to_string()))?
            .to_string_lossy()
            .into_owned();
        let refuse = |reason: &str| FetchError::UnsafeEntry {
            archive: archive.display().to_string(),
            entry: name.clone(),
            target: target.display().to_string(),
            reason: reason.to_string(),
        };
        if let Some(reason) = crate::extract::unsafe_reason(&name) {
            return Err(refuse(reason));
        }
        let kind = entry.header().entry_type();
        if kind.is_hard_link() || kind.is_symlink() {
            let link = entry
                .link_name()
                .ok()
                .flatten()
                .map(|l| l.to_string_lossy().into_owned())
                .unwrap_or_default();
            if link.starts_with('/')
                || link.split('/').filter(|p| *p == "..").count() >= name.split('/').count()
            {
                return Err(refuse("a link that points outside the archive"));
            }
        } else if !(kind.is_file()
            || kind.is_dir()
            || kind.is_pax_global_extensions()
            || kind.is_pax_local_extensions()
            || kind.is_gnu_longname())
        {
            return Err(refuse("neither a file, a directory nor a link"));
        }
        let first = name.split('/').next().unwrap_or("").to_string();
        match &top {
            None => top = Some(first),
            Some(t) if *t != first => {
                return Err(bad(format!("more than one top directory ({t}, {first})")))
            }
            _ => {}
        }
    }
    let top = top.ok_or_else(|| bad("it is empty".into()))?;
    // Second pass: unpacked beside the target, then renamed into place.
    let parent = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io("create", parent))?;
    let tmp = tempfile::Builder::new()
        .prefix(".sdist-")
        .tempdir_in(parent)
        .map_err(io("create a directory in", parent))?;
    let mut a = open()?;
    a.set_preserve_permissions(true);
    a.unpack(tmp.path()).map_err(|e| bad(e.to_string()))?;
    if target.exists() {
        std::fs::remove_dir_all(target).map_err(io("remove", target))?;
    }
    let unpacked = tmp.path().join(&top);
    std::fs::rename(&unpacked, target).map_err(io("move into place", target))?;
    Ok(target.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pep_625_names() {
        assert_eq!(
            sdist_file_name("llama-cpp-python", "0.3.36"),
            "llama_cpp_python-0.3.36.tar.gz"
        );
        assert_eq!(
            sdist_file_name("Foo.Bar__baz", "1.0"),
            "foo_bar_baz-1.0.tar.gz"
        );
    }

    fn targz(dir: &Path, entries: &[(&str, &[u8])]) -> PathBuf {
        let p = dir.join("a.tar.gz");
        let f = std::fs::File::create(&p).unwrap();
        let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
            f,
            flate2::Compression::fast(),
        ));
        for (name, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            // Written raw: `set_path` itself refuses `..`, which is what is being tested.
            let bytes = name.as_bytes();
            h.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap();
        p
    }

    #[test]
    fn an_sdist_is_unpacked_without_its_top_directory_and_a_bad_one_not_at_all() {
        let t = tempfile::tempdir().unwrap();
        let good = targz(
            t.path(),
            &[("pkg-1.0/setup.py", b"x"), ("pkg-1.0/src/a.c", b"int a;")],
        );
        let target = t.path().join("out");
        extract_sdist(&good, &target).unwrap();
        assert_eq!(std::fs::read(target.join("src/a.c")).unwrap(), b"int a;");
        let evil = targz(
            t.path(),
            &[("pkg-1.0/setup.py", b"x"), ("pkg-1.0/../../escape", b"!")],
        );
        let target2 = t.path().join("out2");
        assert!(matches!(
            extract_sdist(&evil, &target2),
            Err(FetchError::UnsafeEntry { .. })
        ));
        assert!(!target2.exists() && !t.path().join("escape").exists());
    }

    #[test]
    fn an_offline_file_with_another_checksum_is_refused() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("pkg-1.0.tar.gz"), b"not it").unwrap();
        let found = find_offline(&[t.path().to_path_buf()], "pkg", "1.0", &"0".repeat(64));
        assert!(matches!(found, Err(FetchError::ChecksumMismatch { .. })));
        assert!(
            find_offline(&[t.path().to_path_buf()], "pkg", "2.0", &"0".repeat(64))
                .unwrap()
                .is_none()
        );
    }
}
