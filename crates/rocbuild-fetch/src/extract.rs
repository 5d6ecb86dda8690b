//! `extract_zip_safely`: every entry checked before one byte is written; extracted beside the
//! target and renamed into place, so a failure leaves the target as it was.

use std::path::{Path, PathBuf};

use crate::{io, FetchError};

/// Why an entry name would escape the target directory, if it would.
pub(crate) fn unsafe_reason(name: &str) -> Option<&'static str> {
    if name.contains('\0') {
        return Some("a NUL byte in the name");
    }
    if name.starts_with('/') || name.starts_with('\\') {
        return Some("an absolute path");
    }
    let b = name.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Some("a drive letter");
    }
    for part in name.split(['/', '\\']) {
        if part == ".." {
            return Some("a `..` component");
        }
        if part.contains(':') {
            // `a:b` is an NTFS alternate data stream, `C:` a drive: neither is a plain name.
            return Some("a `:` in a path component");
        }
    }
    None
}

/// Extract `zip_path` into `target` (created, or replaced as a whole), refusing the archive
/// before writing anything if any entry is absolute, has a drive letter, climbs out with
/// `..`, or is a symlink.
pub fn extract_zip_safely(zip_path: &Path, target: &Path) -> Result<PathBuf, FetchError> {
    let bad_zip = |reason: String| FetchError::BadZip {
        archive: zip_path.display().to_string(),
        reason,
    };
    let file = std::fs::File::open(zip_path).map_err(io("open", zip_path))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| bad_zip(e.to_string()))?;

    let mut entries: Vec<(usize, PathBuf, bool, Option<u32>)> = Vec::with_capacity(archive.len());
    for i in 0..archive.len() {
        let entry = archive
            .by_index_raw(i)
            .map_err(|e| bad_zip(e.to_string()))?;
        let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
        let refuse = |reason: &str| FetchError::UnsafeEntry {
            archive: zip_path.display().to_string(),
            entry: name.clone(),
            target: target.display().to_string(),
            reason: reason.to_string(),
        };
        if let Some(reason) = unsafe_reason(&name) {
            return Err(refuse(reason));
        }
        if entry.is_symlink() {
            return Err(refuse("a symbolic link (it could point anywhere)"));
        }
        let Some(rel) = entry.enclosed_name() else {
            return Err(refuse(
                "a name the zip reader cannot place inside the target",
            ));
        };
        entries.push((i, rel, entry.is_dir(), entry.unix_mode()));
    }

    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io("create", &parent))?;
    let staging = tempfile::Builder::new()
        .prefix(".rocbuild-extract-")
        .tempdir_in(&parent)
        .map_err(io("create a temporary directory in", &parent))?;
    for (i, rel, is_dir, mode) in entries {
        let out = staging.path().join(&rel);
        if is_dir {
            std::fs::create_dir_all(&out).map_err(io("create", &out))?;
            continue;
        }
        if let Some(dir) = out.parent() {
            std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        }
        let mut entry = archive.by_index(i).map_err(|e| bad_zip(e.to_string()))?;
        let mut f = std::fs::File::create(&out).map_err(io("create", &out))?;
        std::io::copy(&mut entry, &mut f)
            .map_err(|e| bad_zip(format!("{}: {e}", rel.display())))?;
        set_mode(&out, mode)?;
    }

    replace_dir(staging, target)?;
    Ok(target.to_path_buf())
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: Option<u32>) -> Result<(), FetchError> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(m) = mode {
        // Keep rwx bits only: no setuid/setgid/sticky from an archive.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(m & 0o777))
            .map_err(io("set permissions of", path))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: Option<u32>) -> Result<(), FetchError> {
    Ok(())
}

/// Move the staged tree to `target`; an existing `target` is moved aside first and restored
/// if the move fails, then deleted.
fn replace_dir(staging: tempfile::TempDir, target: &Path) -> Result<(), FetchError> {
    if !target.exists() {
        let staged = staging.keep();
        return std::fs::rename(&staged, target).map_err(|e| {
            let _ = std::fs::remove_dir_all(&staged);
            io("move the extracted files to", target)(e)
        });
    }
    let parent = target.parent().unwrap_or(Path::new("."));
    let aside = tempfile::Builder::new()
        .prefix(".rocbuild-old-")
        .tempdir_in(parent)
        .map_err(io("create a temporary directory in", parent))?;
    let old = aside.path().join("old");
    std::fs::rename(target, &old).map_err(io("move aside", target))?;
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, target) {
        let _ = std::fs::rename(&old, target);
        let _ = std::fs::remove_dir_all(&staged);
        return Err(io("move the extracted files to", target)(e));
    }
    // `aside` (holding the old tree) is removed when dropped.
    drop(aside);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::unsafe_reason;

    #[test]
    fn names_that_escape() {
        for (name, why) in [
            ("../evil.dll", "`..`"),
            ("ffmpeg/../../evil", "`..`"),
            ("ffmpeg\\..\\..\\evil", "`..`"),
            ("/etc/passwd", "absolute"),
            ("\\Windows\\System32\\x.dll", "absolute"),
            ("C:/Windows/x.dll", "drive letter"),
            ("c:evil", "drive letter"),
            ("bin/avutil.dll:stream", "`:`"),
        ] {
            let r = unsafe_reason(name).unwrap_or_else(|| panic!("{name} accepted"));
            assert!(r.contains(why), "{name}: {r}");
        }
        for ok in [
            "ffmpeg-7.1.1/bin/avutil-59.dll",
            "a/./b",
            "dir/",
            "..hidden/file",
            "x..y",
        ] {
            assert_eq!(unsafe_reason(ok), None, "{ok}");
        }
    }
}
