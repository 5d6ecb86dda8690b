//! The dist-info `RECORD`, kept true so `pip uninstall` removes exactly what is there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;

use crate::error::Result;

/// `sha256=<urlsafe base64, no padding>` from a hex digest.
pub fn record_hash(hex: &str) -> String {
    // By bytes, not by str slices: a non-ASCII character in a damaged digest must not panic.
    let bytes: Vec<u8> = hex
        .as_bytes()
        .chunks_exact(2)
        .filter_map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect();
    format!(
        "sha256={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// Rows of a RECORD: path -> (hash, size), in file order.
pub fn parse(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.rsplitn(3, ',');
            let size = it.next().unwrap_or("").to_string();
            let hash = it.next().unwrap_or("").to_string();
            let path = it.next().unwrap_or("").trim_matches('"').to_string();
            (path, hash, size)
        })
        .collect()
}

/// RECORD with `removed` paths dropped and `set` rows added or replaced, its lines ending as
/// they did (a wheel built on Windows writes `\r\n`).
pub fn update(text: &str, removed: &[String], set: &BTreeMap<String, (String, u64)>) -> String {
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut out = String::new();
    let mut seen = std::collections::BTreeSet::new();
    for (path, hash, size) in parse(text) {
        if removed.contains(&path) {
            continue;
        }
        let line = match set.get(&path) {
            Some((h, s)) => {
                seen.insert(path.clone());
                format!("{},{},{}", quote(&path), record_hash(h), s)
            }
            None => format!("{},{},{}", quote(&path), hash, size),
        };
        out.push_str(&line);
        out.push_str(eol);
    }
    for (path, (h, s)) in set {
        if !seen.contains(path) {
            out.push_str(&format!("{},{},{}{eol}", quote(path), record_hash(h), s));
        }
    }
    out
}

/// Each RECORD of `distribution` in `site` (its path relative to site-packages) with its new
/// text: every one of `files` (a path relative to site-packages, and the file whose bytes will
/// be there) listed with its sha256 and size, every other row as it was. For a change made
/// outside a build (`repair` edits pip's own files): the caller stages the new text through the
/// install transaction, so that a rollback, or `restore`, gives the old RECORD back byte for
/// byte. A RECORD that is a link, or under one, is left alone (rocbuild never writes through
/// a link).
pub fn relisted(
    site: &Path,
    distribution: &str,
    files: &[(String, PathBuf)],
) -> Result<Vec<(String, String)>> {
    let mut set = BTreeMap::new();
    for (rel, at) in files {
        set.insert(rel.clone(), crate::manifest::sha256_file(at)?);
    }
    let mut out = Vec::new();
    for di in crate::ownership::dist_infos(site, distribution) {
        let rel = format!("{di}/RECORD");
        let Ok(path) = crate::confine::under(site, &rel) else {
            continue;
        };
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(crate::VenvError::io("read", &path))?;
        out.push((rel, update(&text, &[], &set)));
    }
    Ok(out)
}

/// A RECORD path, quoted when it holds a comma.
pub fn quote(p: &str) -> String {
    if p.contains(',') {
        format!("\"{p}\"")
    } else {
        p.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_rows() {
        let text = "pkg/__init__.py,sha256=abc,10\npkg/libold.so,sha256=def,20\npkg-1.0.dist-info/RECORD,,\n";
        let set = BTreeMap::from([("pkg/libnew.so".to_string(), ("00ff".to_string(), 5u64))]);
        let out = update(text, &["pkg/libold.so".to_string()], &set);
        assert_eq!(out, "pkg/__init__.py,sha256=abc,10\npkg-1.0.dist-info/RECORD,,\npkg/libnew.so,sha256=AP8,5\n");
    }

    #[test]
    fn keeps_windows_line_ends() {
        let text = "pkg/a.dll,sha256=abc,10\r\npkg-1.0.dist-info/RECORD,,\r\n";
        let set = BTreeMap::from([("hook.py".to_string(), ("00ff".to_string(), 5u64))]);
        assert_eq!(
            update(text, &[], &set),
            "pkg/a.dll,sha256=abc,10\r\npkg-1.0.dist-info/RECORD,,\r\nhook.py,sha256=AP8,5\r\n"
        );
    }

    /// `repair`'s RECORD: the edited file's row gets the staged bytes' hash and size, an added
    /// file gets a row, the rest stays; a RECORD that is a link is never rewritten.
    #[test]
    fn relists_changed_files_with_their_new_hash() {
        use sha2::Digest;
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        std::fs::create_dir_all(site.join("pkg")).unwrap();
        std::fs::create_dir_all(site.join("Pkg-1.0.dist-info")).unwrap();
        let text =
            "pkg/__init__.py,sha256=abc,10\npkg/lib.so,sha256=old,3\nPkg-1.0.dist-info/RECORD,,\n";
        std::fs::write(site.join("Pkg-1.0.dist-info/RECORD"), text).unwrap();
        let staged = site.join("staged-lib.so");
        std::fs::write(&staged, b"edited").unwrap();
        let hook = site.join("staged-hook.py");
        std::fs::write(&hook, b"import x\n").unwrap();
        let b64 = |b: &[u8]| record_hash(&format!("{:x}", sha2::Sha256::digest(b)));
        let out = relisted(
            site,
            "pkg",
            &[("pkg/lib.so".into(), staged), ("_hook.py".into(), hook)],
        )
        .unwrap();
        assert_eq!(
            out,
            [(
                "Pkg-1.0.dist-info/RECORD".to_string(),
                format!(
                    "pkg/__init__.py,sha256=abc,10\npkg/lib.so,{},6\nPkg-1.0.dist-info/RECORD,,\n_hook.py,{},9\n",
                    b64(b"edited"),
                    b64(b"import x\n")
                )
            )]
        );
        // As pip spells it: urlsafe base64 without padding.
        for (_, hash, _) in parse(&out[0].1).iter().filter(|(_, h, _)| !h.is_empty()) {
            let digest = hash.strip_prefix("sha256=").unwrap();
            assert!(!digest.contains(['=', '+', '/']), "{hash}");
        }
        #[cfg(unix)]
        {
            let elsewhere = tempfile::tempdir().unwrap();
            std::fs::write(elsewhere.path().join("RECORD"), text).unwrap();
            std::fs::remove_file(site.join("Pkg-1.0.dist-info/RECORD")).unwrap();
            std::os::unix::fs::symlink(
                elsewhere.path().join("RECORD"),
                site.join("Pkg-1.0.dist-info/RECORD"),
            )
            .unwrap();
            assert!(relisted(site, "pkg", &[]).unwrap().is_empty());
        }
    }
}
