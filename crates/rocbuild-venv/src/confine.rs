//! Paths read from state stay where they belong. A manifest, a journal or a backup names
//! files as `/`-separated paths relative to site-packages; before rocbuild creates, writes,
//! renames or removes one, [`under`] checks that the name is a plain relative path and that
//! no directory between site-packages and the file is a link (a package folder swapped for
//! a link to `$HOME` must not make `restore` delete what is there). The last component itself
//! may be a link: rocbuild renames or removes the link, never what it points to.

use std::path::{Path, PathBuf};

use crate::error::{Result, VenvError};

/// A relative path with `/` separators that stays below the directory it is joined to: no
/// root, no drive, no `..`, no `.`, no empty component, no backslash, no NUL, no `:`.
pub fn is_inside(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.contains('\\')
        && !p.contains('\0')
        && !p.contains(':')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// A plain name: one path component of letters, digits, `-`, `_` and `.` (not `.`/`..`).
pub fn is_plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s != "."
        && s != ".."
}

/// `rel` joined onto `root`, when `rel` is a plain relative path and no directory on the way
/// (below `root`) is a link.
pub fn under(root: &Path, rel: &str) -> Result<PathBuf> {
    if !is_inside(rel) {
        return Err(escape(root, rel, "it is not a plain relative path"));
    }
    let mut p = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        p.push(part);
        if i + 1 == parts.len() {
            break;
        }
        if let Ok(md) = std::fs::symlink_metadata(&p) {
            if is_link(&md) {
                return Err(escape(
                    root,
                    rel,
                    &format!("{} is a link, which rocbuild does not follow", p.display()),
                ));
            }
        }
    }
    Ok(p)
}

/// `abs` as a path relative to `root` (`/`-separated), when it is below `root`.
pub fn rel_of(root: &Path, abs: &Path) -> Result<String> {
    let rel = abs
        .strip_prefix(root)
        .map_err(|_| escape(root, &abs.display().to_string(), "it is not below it"))?;
    let s = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/");
    if is_inside(&s) {
        Ok(s)
    } else {
        Err(escape(root, &s, "it is not a plain relative path"))
    }
}

/// Is this entry a link (a symlink, or on Windows any reparse point: a junction too)?
pub fn is_link(md: &std::fs::Metadata) -> bool {
    rocbuild_probe::platform::host::is_link(md)
}

/// Is there a link (not what it points to) at `p`?
pub fn is_link_at(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| is_link(&m))
}

/// Is there anything at `p` (a link counts, whatever it points to)?
pub fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// Is `p` a real directory (not a link to one)?
pub fn is_real_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir() && !is_link(&m))
}

fn escape(root: &Path, rel: &str, why: &str) -> VenvError {
    VenvError::Escape {
        path: rel.to_string(),
        root: root.display().to_string(),
        why: why.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_pass_and_escapes_do_not() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        assert_eq!(under(r, "a/b.so").unwrap(), r.join("a").join("b.so"));
        for bad in [
            "../x",
            "/etc/passwd",
            "a/../../x",
            "C:/x",
            "a\\..\\x",
            "",
            "a//b",
            "./a",
        ] {
            assert!(under(r, bad).is_err(), "{bad}");
        }
        assert!(is_plain_name("torchcodec") && is_plain_name("llama-cpp-python"));
        for bad in ["../r", "a/b", ".", "..", "", "a b", "a:b"] {
            assert!(!is_plain_name(bad), "{bad}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_link_on_the_way_is_refused_a_link_at_the_end_is_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let (site, outside) = (d.path().join("site"), d.path().join("outside"));
        std::fs::create_dir_all(&site).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, site.join("pkg")).unwrap();
        let e = under(&site, "pkg/lib.so").unwrap_err().to_string();
        assert!(e.contains("is a link"), "{e}");
        // The link itself may be named (to be removed or moved as a link).
        assert_eq!(under(&site, "pkg").unwrap(), site.join("pkg"));
        assert!(is_link_at(&site.join("pkg")) && !is_real_dir(&site.join("pkg")));
        assert_eq!(rel_of(&site, &site.join("a").join("b")).unwrap(), "a/b");
        assert!(rel_of(&site, &outside).is_err());
    }
}
