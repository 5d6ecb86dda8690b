//! Sources through git2: bare clones cached by URL, one checkout per commit, submodules
//! recursively, and offline mirrors (`ROCBUILD_MIRROR`).

use std::path::{Path, PathBuf};

use git2::{FetchOptions, ObjectType, Oid, RemoteCallbacks, Repository};

use rocbuild_recipe::SubmoduleSel;

use crate::error::{EngineError, Result};
use crate::paths::hash_hex;

/// `https://HOST/OWNER/REPO(.git)` -> `MIRROR/HOST/OWNER/REPO.git`.
pub fn mirror_path(mirror: &Path, url: &str) -> Option<PathBuf> {
    let rest = url.split_once("://")?.1;
    let rest = rest
        .split_once('@')
        .map_or(rest, |(_, r)| r)
        .trim_end_matches('/');
    let rest = rest.strip_suffix(".git").unwrap_or(rest);
    let mut p = mirror.to_path_buf();
    for part in rest.split('/') {
        if part.is_empty() || part == ".." || part == "." {
            return None;
        }
        p.push(part);
    }
    let name = format!("{}.git", p.file_name()?.to_string_lossy());
    p.set_file_name(name);
    Some(p)
}

fn cache_repo(git_cache: &Path, url: &str) -> Result<Repository> {
    let tail: String = url
        .rsplit(['/', '\\', ':'])
        .find(|s| !s.is_empty())
        .unwrap_or("repo")
        .trim_end_matches(".git")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    let dir = git_cache.join(format!("{tail}-{}.git", &hash_hex(&[url])[..12]));
    let open = Repository::open_bare(&dir);
    match open {
        Ok(r) => Ok(r),
        Err(_) => {
            fs_err::create_dir_all(&dir).map_err(EngineError::io("create", &dir))?;
            Repository::init_bare(&dir).map_err(|e| EngineError::Source {
                url: url.into(),
                reason: format!("cannot create the cache clone {}: {e}", dir.display()),
                help: "check that the cache directory is writable (--cache or ROCBUILD_CACHE)"
                    .into(),
            })
        }
    }
}

/// Refspecs for `reference`: just that ref when it names one (fast, and immune to broken
/// unrelated branches), else every branch and tag.
fn refspecs(reference: &str) -> Vec<String> {
    if reference.starts_with("refs/") {
        vec![format!("+{reference}:{reference}")]
    } else if reference.len() == 40 && reference.chars().all(|c| c.is_ascii_hexdigit()) {
        vec![reference.to_string()]
    } else {
        vec![
            format!("+refs/tags/{reference}:refs/tags/{reference}"),
            format!("+refs/heads/{reference}:refs/heads/{reference}"),
        ]
    }
}

fn fetch_from(
    repo: &Repository,
    from: &str,
    reference: &str,
    progress: &dyn Fn(usize, usize),
) -> std::result::Result<(), git2::Error> {
    let specs = refspecs(reference);
    let mut last = None;
    for spec in specs.iter().map(|s| vec![s.clone()]).chain([vec![
        "+refs/heads/*:refs/heads/*".to_string(),
        "+refs/tags/*:refs/tags/*".to_string(),
    ]]) {
        match fetch_specs(repo, from, &spec, progress) {
            Ok(()) if resolve(repo, reference).is_some() => return Ok(()),
            Ok(()) => {}
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn fetch_specs(
    repo: &Repository,
    from: &str,
    specs: &[String],
    progress: &dyn Fn(usize, usize),
) -> std::result::Result<(), git2::Error> {
    let mut cb = RemoteCallbacks::new();
    cb.transfer_progress(|p| {
        progress(p.received_objects(), p.total_objects());
        true
    });
    let mut fo = FetchOptions::new();
    fo.remote_callbacks(cb);
    fo.download_tags(git2::AutotagOption::None);
    let mut remote = repo.remote_anonymous(from)?;
    remote.fetch(specs, Some(&mut fo), None)
}

/// Find `reference` (a full ref, a short name or a commit id) in `repo`.
fn resolve(repo: &Repository, reference: &str) -> Option<Oid> {
    let candidates = [
        reference.to_string(),
        format!("refs/tags/{reference}"),
        format!("refs/heads/{reference}"),
    ];
    for c in &candidates {
        if let Ok(obj) = repo.revparse_single(c) {
            if let Ok(commit) = obj.peel_to_commit() {
                return Some(commit.id());
            }
        }
    }
    None
}

/// Fetch (if needed) and resolve `reference` of `url`, trying the mirror first when set.
pub fn fetch_commit(
    git_cache: &Path,
    url: &str,
    reference: &str,
    mirror: Option<&Path>,
    progress: &dyn Fn(usize, usize),
) -> Result<(Repository, Oid)> {
    let repo = cache_repo(git_cache, url)?;
    // A pinned commit or an existing tag in the cache needs no network.
    let is_commit = reference.len() == 40 && reference.chars().all(|c| c.is_ascii_hexdigit());
    if is_commit || reference.starts_with("refs/tags/") {
        if let Some(oid) = resolve(&repo, reference) {
            return Ok((repo, oid));
        }
    }
    let mut tried = Vec::new();
    let mut places: Vec<String> = Vec::new();
    if let Some(m) = mirror.and_then(|m| mirror_path(m, url)) {
        places.push(m.display().to_string());
    } else if let Some(m) = mirror {
        tried.push(format!(
            "mirror {}: the URL has no HOST/OWNER/REPO form",
            m.display()
        ));
    }
    places.push(url.to_string());
    for from in &places {
        if from != url && !Path::new(from).exists() {
            tried.push(format!("mirror {from}: does not exist"));
            continue;
        }
        match fetch_from(&repo, from, reference, progress) {
            Ok(()) => match resolve(&repo, reference) {
                Some(oid) => return Ok((repo, oid)),
                None => tried.push(format!("{from}: has no {reference}")),
            },
            Err(e) => tried.push(format!("{from}: {}", e.message())),
        }
    }
    if let Some(why) = damaged(&repo, reference) {
        let dir = repo.path().display().to_string();
        return Err(EngineError::Source {
            url: url.into(),
            reason: format!(
                "the cache's clone {} is damaged: {why}",
                dir.trim_end_matches('/')
            ),
            help: format!(
                "nothing in the venv was changed; remove the damaged clone and run again: `rocbuild clean --sources` (every cached clone), or delete {}",
                dir.trim_end_matches('/')
            ),
        });
    }
    let tags: Vec<String> = repo
        .tag_names(None)
        .map(|t| t.iter().flatten().map(str::to_string).collect())
        .unwrap_or_default();
    Err(EngineError::Source {
        url: url.into(),
        reason: format!("tried {}", tried.join("; ")),
        help: if tags.is_empty() {
            "check the network or the URL; on an offline machine set ROCBUILD_MIRROR=DIR holding DIR/HOST/OWNER/REPO.git".into()
        } else {
            format!(
                "tags it has: {}; pick another with --version or --rev",
                last(&tags, 8).join(", ")
            )
        },
    })
}

/// Why `reference` cannot be read although the clone has it: its ref names an object that
/// is missing or unreadable (a pack cut short by a full disk or a killed clone).
fn damaged(repo: &Repository, reference: &str) -> Option<String> {
    for name in [
        reference.to_string(),
        format!("refs/tags/{reference}"),
        format!("refs/heads/{reference}"),
    ] {
        let Ok(r) = repo.find_reference(&name) else {
            continue;
        };
        if let Err(e) = r.peel_to_commit() {
            let oid = r
                .resolve()
                .ok()
                .and_then(|r| r.target())
                .map_or("an object".to_string(), |o| o.to_string());
            return Some(format!(
                "{name} names {oid}, which cannot be read ({})",
                e.message()
            ));
        }
    }
    None
}

fn last(v: &[String], n: usize) -> Vec<String> {
    v[v.len().saturating_sub(n)..].to_vec()
}

/// Write the tree of `commit` into `dir` (replacing it), then its submodules.
pub fn checkout(
    repo: &Repository,
    commit: Oid,
    dir: &Path,
    url: &str,
    submodules: &SubmoduleSel,
    git_cache: &Path,
    mirror: Option<&Path>,
    progress: &dyn Fn(usize, usize),
) -> Result<()> {
    let stamp = dir.join(".rocbuild-commit");
    // The stamp names the commit and the submodule selection: another backend's
    // submodules mean another checkout.
    let stamp_text = match submodules {
        SubmoduleSel::None => commit.to_string(),
        sel => format!(
            "{commit} {}",
            serde_json::to_string(sel).unwrap_or_default()
        ),
    };
    if fs_err::read_to_string(&stamp).ok().as_deref() == Some(stamp_text.as_str()) {
        return Ok(());
    }
    let tmp = dir.with_extension("partial");
    let _ = fs_err::remove_dir_all(&tmp);
    fs_err::create_dir_all(&tmp).map_err(EngineError::io("create", &tmp))?;
    let git_err = |e: git2::Error| EngineError::Source {
        url: url.into(),
        reason: e.message().to_string(),
        help:
            "the cache clone may be corrupt: delete it under the cache's git/ directory and retry"
                .into(),
    };
    let tree = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(git_err)?;
    write_tree(repo, &tree, &tmp).map_err(|e| match e {
        WriteError::Git(g) => git_err(g),
        WriteError::Io(p, e) => EngineError::Io {
            action: "write the checkout".into(),
            path: p.display().to_string(),
            source: e,
        },
    })?;
    if *submodules != SubmoduleSel::None {
        checkout_submodules(
            repo, &tree, &tmp, url, submodules, git_cache, mirror, progress,
        )?;
    }
    fs_err::write(tmp.join(".rocbuild-commit"), &stamp_text)
        .map_err(EngineError::io("write", &stamp))?;
    let _ = fs_err::remove_dir_all(dir);
    if let Some(parent) = dir.parent() {
        fs_err::create_dir_all(parent).map_err(EngineError::io("create", parent))?;
    }
    fs_err::rename(&tmp, dir).map_err(EngineError::io("move into place", dir))
}

enum WriteError {
    Git(git2::Error),
    Io(PathBuf, std::io::Error),
}

/// Write `tree` under `dir`: files (with their executable bit) and symlinks. Gitlinks
/// (submodules) are left to `checkout_submodules`. Written by hand because libgit2's checkout
/// of a bare repository refuses trees that hold submodules.
fn write_tree(
    repo: &Repository,
    tree: &git2::Tree,
    dir: &Path,
) -> std::result::Result<(), WriteError> {
    fs_err::create_dir_all(dir).map_err(|e| WriteError::Io(dir.to_path_buf(), e))?;
    for entry in tree.iter() {
        let name = String::from_utf8_lossy(entry.name_bytes()).into_owned();
        if name.contains('/') || name.contains('\\') || name == ".." || name == "." {
            continue;
        }
        let path = dir.join(&name);
        match entry.kind() {
            Some(ObjectType::Tree) => {
                let sub = repo.find_tree(entry.id()).map_err(WriteError::Git)?;
                write_tree(repo, &sub, &path)?;
            }
            Some(ObjectType::Blob) => {
                let blob = repo.find_blob(entry.id()).map_err(WriteError::Git)?;
                let io = |e| WriteError::Io(path.clone(), e);
                if entry.filemode() == 0o120000 {
                    #[cfg(unix)]
                    std::os::unix::fs::symlink(
                        String::from_utf8_lossy(blob.content()).as_ref(),
                        &path,
                    )
                    .map_err(io)?;
                    #[cfg(not(unix))]
                    fs_err::write(&path, blob.content()).map_err(io)?;
                } else {
                    fs_err::write(&path, blob.content()).map_err(io)?;
                    #[cfg(unix)]
                    if entry.filemode() == 0o100755 {
                        use std::os::unix::fs::PermissionsExt;
                        fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                            .map_err(io)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// `.gitmodules` entries: (path, url).
fn gitmodules(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let (mut path, mut url) = (None::<String>, None::<String>);
    let mut flush = |p: &mut Option<String>, u: &mut Option<String>| {
        if let (Some(p), Some(u)) = (p.take(), u.take()) {
            out.push((p, u));
        }
    };
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            flush(&mut path, &mut url);
        } else if let Some((k, v)) = line.split_once('=') {
            match k.trim() {
                "path" => path = Some(v.trim().to_string()),
                "url" => url = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    flush(&mut path, &mut url);
    out
}

/// `../other.git` relative to the parent's URL.
fn submodule_url(parent: &str, url: &str) -> String {
    if !url.starts_with("../") && !url.starts_with("./") {
        return url.to_string();
    }
    let mut base: Vec<&str> = parent.trim_end_matches('/').split('/').collect();
    for part in url.split('/') {
        match part {
            ".." => {
                base.pop();
            }
            "." => {}
            p => base.push(p),
        }
    }
    base.join("/")
}

fn checkout_submodules(
    repo: &Repository,
    tree: &git2::Tree,
    dir: &Path,
    url: &str,
    which: &SubmoduleSel,
    git_cache: &Path,
    mirror: Option<&Path>,
    progress: &dyn Fn(usize, usize),
) -> Result<()> {
    let Ok(entry) = tree.get_path(Path::new(".gitmodules")) else {
        return Ok(());
    };
    let Ok(blob) = repo.find_blob(entry.id()) else {
        return Ok(());
    };
    let text = String::from_utf8_lossy(blob.content()).into_owned();
    for (path, sub_url) in gitmodules(&text) {
        if let SubmoduleSel::Only(paths) = which {
            if !paths.iter().any(|p| p.trim_end_matches('/') == path) {
                continue;
            }
        }
        let Ok(e) = tree.get_path(Path::new(&path)) else {
            continue;
        };
        if e.kind() != Some(git2::ObjectType::Commit) {
            continue;
        }
        let sub_url = submodule_url(url, &sub_url);
        let commit = e.id().to_string();
        let (sub_repo, oid) = fetch_commit(git_cache, &sub_url, &commit, mirror, progress)?;
        let target = dir.join(&path);
        let _ = fs_err::remove_dir_all(&target);
        checkout(
            &sub_repo,
            oid,
            &target,
            &sub_url,
            &SubmoduleSel::All,
            git_cache,
            mirror,
            progress,
        )?;
        let _ = fs_err::remove_file(target.join(".rocbuild-commit"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_paths() {
        let m = Path::new("/m");
        assert_eq!(
            mirror_path(m, "https://github.com/meta-pytorch/torchcodec").unwrap(),
            Path::new("/m/github.com/meta-pytorch/torchcodec.git")
        );
        assert_eq!(
            mirror_path(m, "https://github.com/a/b.git").unwrap(),
            Path::new("/m/github.com/a/b.git")
        );
        assert_eq!(mirror_path(m, "https://h/../../etc"), None);
    }

    #[test]
    fn relative_submodule_urls() {
        assert_eq!(
            submodule_url("https://h/o/r", "../s.git"),
            "https://h/o/s.git"
        );
        assert_eq!(submodule_url("https://h/o/r", "https://x/y"), "https://x/y");
    }

    #[test]
    fn parses_gitmodules() {
        let t = "[submodule \"a\"]\n\tpath = third_party/a\n\turl = https://h/a\n[submodule \"b\"]\n path = b\n url = ../b.git\n";
        assert_eq!(
            gitmodules(t),
            [
                ("third_party/a".into(), "https://h/a".into()),
                ("b".into(), "../b.git".into())
            ]
        );
    }
}
