//! A patch applied to a plain source tree by libgit2, the library that already fetches the
//! source: no `git` program is needed (a Windows user without Git builds a release whose
//! recipe ships a fix, or with `--patch`, as anyone else).
//!
//! libgit2 applies a hunk only where it says it goes (no offset search, no fuzz), as
//! `git apply` does for a patch made against the same source; a `diff -u` patch without git's
//! `diff --git` header lines gets them. A patch path that climbs out of the tree or passes
//! through a symbolic link is refused before anything is written.

use std::borrow::Cow;
use std::path::{Component, Path};

/// Give every file of a unified diff the `diff --git a/X b/Y` line libgit2's parser needs:
/// `diff -u` and the recipes' fixes start a file at `--- a/X` / `+++ b/Y`.
pub fn git_format(text: &str) -> Cow<'_, str> {
    if text.contains("\ndiff --git ") || text.starts_with("diff --git ") {
        return Cow::Borrowed(text);
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::with_capacity(text.len() + 64);
    for (i, line) in lines.iter().enumerate() {
        let next = lines.get(i + 1).copied().unwrap_or("");
        if let (Some(old), Some(new)) = (line.strip_prefix("--- "), next.strip_prefix("+++ ")) {
            let (old, new) = (header_path(old), header_path(new));
            let (a, b) = match (old, new) {
                (None, Some(n)) => (n, n),
                (Some(o), None) => (o, o),
                (Some(o), Some(n)) => (o, n),
                (None, None) => ("", ""),
            };
            out.push_str(&format!("diff --git a/{a} b/{b}\n"));
        }
        out.push_str(line);
    }
    Cow::Owned(out)
}

/// [`git_format`] of a patch that is UTF-8; another is taken as it is.
fn git_bytes(text: &[u8]) -> Cow<'_, [u8]> {
    match std::str::from_utf8(text) {
        Ok(t) => match git_format(t) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            Cow::Owned(o) => Cow::Owned(o.into_bytes()),
        },
        Err(_) => Cow::Borrowed(text),
    }
}

/// The path of a `---`/`+++` line without its `a/` or `b/` and a trailing timestamp; None
/// for `/dev/null`.
fn header_path(rest: &str) -> Option<&str> {
    let p = rest.trim_end_matches(['\n', '\r']);
    let p = p.split('\t').next().unwrap_or(p).trim_end();
    if p == "/dev/null" {
        return None;
    }
    Some(
        p.strip_prefix("a/")
            .or_else(|| p.strip_prefix("b/"))
            .unwrap_or(p),
    )
}

/// The files a patch names (old and new paths), each checked to stay in `tree` without
/// passing through a symbolic link.
fn check_paths(tree: &Path, diff: &git2::Diff) -> Result<(), String> {
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            let Some(rel) = file.path() else { continue };
            if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
                return Err(format!(
                    "it names {}, which is not a plain path inside the source",
                    rel.display()
                ));
            }
            let mut at = tree.to_path_buf();
            for c in rel.components() {
                at.push(c);
                if at.symlink_metadata().is_ok_and(|m| m.is_symlink()) {
                    return Err(format!(
                        "it names {}, which passes through the symbolic link {}",
                        rel.display(),
                        at.display()
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Apply `text` (a git or `diff -u` patch, `-p1` paths) to the plain tree `tree`. Err: why it
/// does not, in libgit2's words; then nothing was written.
pub fn apply(tree: &Path, text: &[u8]) -> Result<(), String> {
    let diff = git2::Diff::from_buffer(&git_bytes(text)).map_err(|e| {
        format!(
            "it is not a patch libgit2 can read ({}): make it with `git diff`",
            e.message()
        )
    })?;
    check_paths(tree, &diff)?;
    // libgit2 needs a repository: an empty bare one beside the tree (in the cache), with the
    // tree as its work tree; removed after, and reused if a removal failed.
    let name = tree.file_name().map(|n| n.to_string_lossy().into_owned());
    let scratch = tree.with_file_name(format!(".apply-{}", name.unwrap_or_default()));
    let applied = apply_with(&scratch, tree, &diff);
    let _ = std::fs::remove_dir_all(&scratch);
    applied
}

fn apply_with(scratch: &Path, tree: &Path, diff: &git2::Diff) -> Result<(), String> {
    let msg = |e: git2::Error| e.message().to_string();
    let repo = git2::Repository::init_bare(scratch).map_err(msg)?;
    // The user's global Git settings must not turn line endings (Git for Windows' autocrlf).
    let mut config = repo.config().map_err(msg)?;
    config.set_bool("core.autocrlf", false).map_err(msg)?;
    config.set_str("core.eol", "lf").map_err(msg)?;
    repo.set_workdir(tree, false).map_err(msg)?;
    repo.apply(diff, git2::ApplyLocation::WorkDir, None)
        .map_err(msg)
}

/// The files `text` would change, with their content now (None: absent), to put back if a
/// later patch does not apply.
pub fn snapshot(tree: &Path, text: &[u8]) -> Vec<(std::path::PathBuf, Option<Vec<u8>>)> {
    // A path out of the tree is neither read nor later written back (`apply` refuses it).
    let Ok(diff) = git2::Diff::from_buffer(&git_bytes(text)) else {
        return Vec::new();
    };
    if check_paths(tree, &diff).is_err() {
        return Vec::new();
    }
    let mut files = Vec::new();
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            if let Some(rel) = file.path() {
                let p = tree.join(rel);
                if !files.iter().any(|(q, _)| q == &p) {
                    let now = std::fs::read(&p).ok();
                    files.push((p, now));
                }
            }
        }
    }
    files
}

/// Put back what [`snapshot`] saw.
pub fn put_back(files: &[(std::path::PathBuf, Option<Vec<u8>>)]) {
    for (p, content) in files {
        match content {
            Some(bytes) => {
                let _ = std::fs::write(p, bytes);
            }
            None => {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIX: &str = "--- a/src/x.cpp\n+++ b/src/x.cpp\n@@ -2,0 +3,2 @@\n+added one\n+added two\n";

    fn tree() -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("checkout");
        std::fs::create_dir_all(t.join("src")).unwrap();
        std::fs::write(t.join("src/x.cpp"), "one\ntwo\nthree\n").unwrap();
        (d, t)
    }

    #[test]
    fn a_zero_context_fix_without_a_git_header_applies_where_it_says() {
        let (_d, t) = tree();
        apply(&t, FIX.as_bytes()).unwrap();
        assert_eq!(
            std::fs::read_to_string(t.join("src/x.cpp")).unwrap(),
            "one\ntwo\nadded one\nadded two\nthree\n"
        );
        // No scratch repository is left beside the tree, no `.git` in it.
        let beside: Vec<_> = std::fs::read_dir(t.parent().unwrap()).unwrap().collect();
        assert_eq!(beside.len(), 1);
        assert!(!t.join(".git").exists());
    }

    #[test]
    fn a_patch_that_does_not_match_says_so_and_writes_nothing() {
        let (_d, t) = tree();
        let bad = "--- a/src/x.cpp\n+++ b/src/x.cpp\n@@ -1,2 +1,2 @@\n-uno\n+eins\n two\n";
        let err = apply(&t, bad.as_bytes()).unwrap_err();
        assert!(err.contains("did not apply"), "{err}");
        assert_eq!(
            std::fs::read_to_string(t.join("src/x.cpp")).unwrap(),
            "one\ntwo\nthree\n"
        );
    }

    #[test]
    fn a_path_out_of_the_tree_or_through_a_link_is_refused() {
        let (d, t) = tree();
        let outside = d.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("x.cpp"), "one\ntwo\nthree\n").unwrap();
        let climbing = FIX.replace("src/x.cpp", "../outside/x.cpp");
        assert!(
            snapshot(&t, climbing.as_bytes()).is_empty(),
            "nothing outside is kept to put back"
        );
        let err = apply(&t, climbing.as_bytes()).unwrap_err();
        assert!(
            err.contains("not a plain path") || err.contains("invalid"),
            "{err}"
        );
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&outside, t.join("linked")).unwrap();
            let linked = FIX.replace("src/x.cpp", "linked/x.cpp");
            let err = apply(&t, linked.as_bytes()).unwrap_err();
            assert!(err.contains("symbolic link"), "{err}");
        }
        assert_eq!(
            std::fs::read_to_string(outside.join("x.cpp")).unwrap(),
            "one\ntwo\nthree\n"
        );
    }

    #[test]
    fn what_is_not_a_patch_is_said_with_how_to_make_one() {
        let (_d, t) = tree();
        let err = apply(&t, b"hello\n").unwrap_err();
        assert!(err.contains("git diff"), "{err}");
    }

    #[test]
    fn a_snapshot_puts_the_files_back() {
        let (_d, t) = tree();
        let files = snapshot(&t, FIX.as_bytes());
        apply(&t, FIX.as_bytes()).unwrap();
        put_back(&files);
        assert_eq!(
            std::fs::read_to_string(t.join("src/x.cpp")).unwrap(),
            "one\ntwo\nthree\n"
        );
    }

    #[test]
    fn a_git_header_is_added_once_per_file() {
        let two = format!("{FIX}{}", FIX.replace("src/x.cpp", "src/y.cpp"));
        let g = git_format(&two);
        assert_eq!(g.matches("diff --git ").count(), 2, "{g}");
        assert!(g.starts_with("diff --git a/src/x.cpp b/src/x.cpp\n--- a/src/x.cpp"));
        let again = git_format(&g);
        assert_eq!(again, g);
    }
}
