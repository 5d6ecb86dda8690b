//! Sources through git2: bare clones cached by URL, one checkout per commit, submodules
//! recursively, and offline mirrors (`ROCBUILD_MIRROR`).

pub mod apply;
pub mod plan;
pub mod prepare;
pub mod sdist;

use rocbuild_probe::platform::host;
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

/// The cache clone's directory of `url`: keyed by the URL without credentials (one clone
/// whatever token reaches it).
fn cache_dir(git_cache: &Path, url: &str) -> PathBuf {
    let tail: String = url
        .rsplit(['/', '\\', ':'])
        .find(|s| !s.is_empty())
        .unwrap_or("repo")
        .trim_end_matches(".git")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    git_cache.join(format!(
        "{tail}-{}.git",
        &hash_hex(&[&rocbuild_secret::strip_userinfo(url)])[..12]
    ))
}

fn cache_repo(git_cache: &Path, url: &str) -> Result<Repository> {
    let dir = cache_dir(git_cache, url);
    let open = Repository::open_bare(&dir);
    match open {
        Ok(r) => Ok(r),
        Err(_) => {
            fs_err::create_dir_all(&dir).map_err(EngineError::io("create", &dir))?;
            Repository::init_bare(&dir).map_err(|e| {
                EngineError::Source {
                    url: url.into(),
                    reason: format!("cannot create the cache clone {}: {e}", dir.display()),
                    help: "check that the cache directory is writable (--cache or ROCBUILD_CACHE)"
                        .into(),
                }
                .or_no_space("create the cache clone", &dir)
            })
        }
    }
}

/// A full commit id.
fn is_commit_id(reference: &str) -> bool {
    reference.len() == 40 && reference.chars().all(|c| c.is_ascii_hexdigit())
}

/// Refspecs for `reference`: just that ref when it names one (fast, and immune to broken
/// unrelated branches), the commit itself for a commit id, else the tag or branch of that name.
fn refspecs(reference: &str) -> Vec<String> {
    if reference.starts_with("refs/") {
        vec![format!("+{reference}:{reference}")]
    } else if is_commit_id(reference) {
        vec![reference.to_string()]
    } else {
        vec![
            format!("+refs/tags/{reference}:refs/tags/{reference}"),
            format!("+refs/heads/{reference}:refs/heads/{reference}"),
        ]
    }
}

/// Fetch `reference` from a remote over the network, asking only for it. Every branch and
/// tag is fetched only as a last resort, and only for what no refspec can name: a commit id
/// the server refuses to serve directly, or a short revision (`--rev abc1234`).
fn fetch_from(
    repo: &Repository,
    from: &str,
    reference: &str,
    progress: &dyn Fn(usize, usize),
) -> std::result::Result<(), git2::Error> {
    let specs = refspecs(reference);
    let everything = vec![
        "+refs/heads/*:refs/heads/*".to_string(),
        "+refs/tags/*:refs/tags/*".to_string(),
    ];
    let last_resort = (!reference.starts_with("refs/")).then_some(everything);
    let mut last = None;
    for spec in specs.iter().map(|s| vec![s.clone()]).chain(last_resort) {
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
    // The URL git2 sees (and writes into FETCH_HEAD) has no credentials: they are handed
    // over only when the server asks, by `credentials`.
    let public = rocbuild_secret::strip_userinfo(from);
    let given = rocbuild_secret::credentials(from);
    let config = repo.config().ok();
    let mut tries = 0;
    cb.credentials(move |url, username, allowed| {
        tries += 1;
        credentials(
            url,
            username,
            allowed,
            given.as_ref(),
            config.as_ref(),
            tries,
        )
    });
    let mut fo = FetchOptions::new();
    fo.remote_callbacks(cb);
    fo.download_tags(git2::AutotagOption::None);
    let mut remote = repo.remote_anonymous(&public)?;
    remote.fetch(specs, Some(&mut fo), None)
}

/// Credentials for a server that asks, in this order: the userinfo of the URL the user gave
/// (for this one fetch; a lone token is sent as the password of user `x-access-token`, as
/// GitHub takes it), then git's own credential helpers (`credential.helper`, which covers
/// `GIT_ASKPASS`-style and stored credentials), then, for SSH, the agent. Each is tried once.
fn credentials(
    url: &str,
    username: Option<&str>,
    allowed: git2::CredentialType,
    given: Option<&(String, Option<String>)>,
    config: Option<&git2::Config>,
    tries: usize,
) -> std::result::Result<git2::Cred, git2::Error> {
    if allowed.contains(git2::CredentialType::USER_PASS_PLAINTEXT) {
        if let (1, Some((user, pass))) = (tries, given) {
            return match pass {
                Some(p) => git2::Cred::userpass_plaintext(user, p),
                None => git2::Cred::userpass_plaintext("x-access-token", user),
            };
        }
        if tries <= 2 {
            if let Some(c) = config {
                if let Ok(cred) = git2::Cred::credential_helper(c, url, username) {
                    return Ok(cred);
                }
            }
        }
    }
    if allowed.contains(git2::CredentialType::SSH_KEY) && tries <= 3 {
        return git2::Cred::ssh_key_from_agent(username.unwrap_or("git"));
    }
    Err(git2::Error::from_str(
        "the server asked for credentials and none that were given were accepted",
    ))
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

/// The local repository a URL names (a path, or `file://`), if it is one.
fn local_repo(url: &str) -> Option<PathBuf> {
    let path = Path::new(url.strip_prefix("file://").unwrap_or(url));
    (!url.contains("://") || url.starts_with("file://"))
        .then(|| path.to_path_buf())
        .filter(|p| p.exists())
}

/// Why a local repository could not give `reference`.
enum LocalMiss {
    /// It does not have it (the release is not in the mirror).
    Lacks { tags: Vec<String> },
    /// It has it, but cannot be read or copied.
    Broken(String),
}

/// Copy `reference` from the local repository `from` into `cache`: the ref (an annotated
/// tag's object included), its commit and that commit's tree, nothing else.
///
/// libgit2's local transport packs the objects of every ref of the source and their whole
/// history, so one unrelated ref whose objects are missing (a snapshot's `refs/pull/*` or
/// `gh-pages`, old history cut off) fails the whole fetch. Reading the source repository
/// directly touches only what the release needs. The commit is recorded in the cache's
/// `shallow` file when its parents are not copied, so that git (and libgit2's negotiation
/// with a server later) treats it as a root, as after `git fetch --depth 1`.
fn copy_local(
    cache: &Repository,
    from: &Path,
    reference: &str,
    progress: &dyn Fn(usize, usize),
) -> std::result::Result<Oid, LocalMiss> {
    let src = Repository::open(from).map_err(|e| {
        LocalMiss::Broken(format!("not a readable git repository ({})", e.message()))
    })?;
    let tags = || -> Vec<String> {
        src.tag_names(None)
            .map(|t| t.iter().flatten().map(str::to_string).collect())
            .unwrap_or_default()
    };
    // The ref to copy (name, target) and the object to peel to the commit.
    let names: Vec<String> = if reference.starts_with("refs/") {
        vec![reference.to_string()]
    } else if is_commit_id(reference) {
        Vec::new()
    } else {
        vec![
            format!("refs/tags/{reference}"),
            format!("refs/heads/{reference}"),
        ]
    };
    let mut found: Option<(Option<String>, Oid)> = None;
    for name in &names {
        let Ok(r) = src.find_reference(name) else {
            continue;
        };
        let target = r
            .resolve()
            .ok()
            .and_then(|r| r.target())
            .ok_or_else(|| LocalMiss::Broken(format!("{name} does not point at an object")))?;
        found = Some((Some(name.clone()), target));
        break;
    }
    if found.is_none() && !reference.starts_with("refs/") {
        // A commit id, or a short revision (`--rev abc1234`).
        if let Ok(obj) = src.revparse_single(reference) {
            found = Some((None, obj.id()));
        }
    }
    let Some((name, target)) = found else {
        return Err(LocalMiss::Lacks { tags: tags() });
    };
    let unreadable = |e: git2::Error| {
        LocalMiss::Broken(format!(
            "{} names {target}, which cannot be read ({})",
            name.as_deref().unwrap_or(reference),
            e.message()
        ))
    };
    let commit = src
        .find_object(target, None)
        .and_then(|o| o.peel_to_commit())
        .map_err(unreadable)?;
    let have = |oid: Oid| cache.odb().is_ok_and(|odb| odb.exists(oid));
    if !have(target) || !have(commit.id()) {
        let pack = || -> std::result::Result<(), git2::Error> {
            let mut pb = src.packbuilder()?;
            pb.insert_recursive(target, None)?;
            let odb = cache.odb()?;
            let mut writer = odb.packwriter()?;
            writer.progress(|p| {
                progress(p.received_objects(), p.total_objects());
                true
            });
            let mut failed = None;
            pb.foreach(|buf| match std::io::Write::write_all(&mut writer, buf) {
                Ok(()) => true,
                Err(e) => {
                    failed = Some(e);
                    false
                }
            })?;
            if let Some(e) = failed {
                return Err(git2::Error::from_str(&e.to_string()));
            }
            writer.commit().map(|_| ())
        };
        pack().map_err(unreadable)?;
    }
    if let Some(name) = &name {
        cache
            .reference(
                name,
                target,
                true,
                "rocbuild: copied from a local repository",
            )
            .map_err(|e| {
                LocalMiss::Broken(format!(
                    "cannot write {name} into the cache ({})",
                    e.message()
                ))
            })?;
    }
    // A clone damaged earlier (a pack cut short) can claim objects it cannot read: leave
    // that to the caller's damage report rather than to a checkout failing later.
    if let Err(e) = cache.find_commit(commit.id()).and_then(|c| c.tree()) {
        return Err(LocalMiss::Broken(format!(
            "the cache cannot read {} after copying it ({})",
            commit.id(),
            e.message()
        )));
    }
    if commit.parent_ids().any(|p| !have(p)) {
        mark_shallow(cache, commit.id()).map_err(|e| {
            LocalMiss::Broken(format!("cannot write the cache's shallow file: {e}"))
        })?;
    }
    Ok(commit.id())
}

/// Add `commit` to the repository's `shallow` file (written whole, then renamed in).
fn mark_shallow(repo: &Repository, commit: Oid) -> std::io::Result<()> {
    let path = repo.path().join("shallow");
    let mut text = fs_err::read_to_string(&path).unwrap_or_default();
    let id = commit.to_string();
    if text.lines().any(|l| l.trim() == id) {
        return Ok(());
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&id);
    text.push('\n');
    let tmp = path.with_extension("rocbuild-tmp");
    fs_err::write(&tmp, text)?;
    fs_err::rename(&tmp, &path)
}

/// What `reference` is, in words, for messages.
fn what(reference: &str) -> String {
    if is_commit_id(reference) {
        format!("commit {reference}")
    } else {
        reference.to_string()
    }
}

/// Fetch (if needed) and resolve `reference` of `url`, trying the mirror first when set.
/// Only the release is fetched: the ref (or commit) asked for, never every ref of the source.
/// A fetch that finds the disk full says so (libgit2 says it in words), not that the source
/// cannot be had.
pub fn fetch_commit(
    git_cache: &Path,
    url: &str,
    reference: &str,
    mirror: Option<&Path>,
    progress: &dyn Fn(usize, usize),
) -> Result<(Repository, Oid)> {
    fetch_release(git_cache, url, reference, mirror, progress)
        .map_err(|e| e.or_no_space("write the clone", &cache_dir(git_cache, url)))
}

/// [`fetch_commit`], before a full disk is told apart.
fn fetch_release(
    git_cache: &Path,
    url: &str,
    reference: &str,
    mirror: Option<&Path>,
    progress: &dyn Fn(usize, usize),
) -> Result<(Repository, Oid)> {
    let repo = cache_repo(git_cache, url)?;
    // A pinned commit or an existing tag in the cache needs no network.
    if is_commit_id(reference) || reference.starts_with("refs/tags/") {
        if let Some(oid) = resolve(&repo, reference) {
            return Ok((repo, oid));
        }
    }
    // A clone whose ref for the release cannot be read is damaged: say so, and write nothing
    // more into it.
    if let Some(why) = damaged(&repo, reference) {
        return Err(damage_error(&repo, url, &why));
    }
    let mut tried = Vec::new();
    // A mirror that was found but does not hold the release: (its path, its tags).
    let mut lacking: Option<(PathBuf, Vec<String>)> = None;
    match mirror.map(|m| (m, mirror_path(m, url))) {
        None => {}
        Some((m, None)) => tried.push(format!(
            "mirror {}: the URL has no HOST/OWNER/REPO form",
            m.display()
        )),
        Some((_, Some(path))) if !path.exists() => {
            tried.push(format!("mirror {}: does not exist", path.display()));
        }
        Some((_, Some(path))) => match copy_local(&repo, &path, reference, progress) {
            Ok(oid) => return Ok((repo, oid)),
            Err(LocalMiss::Lacks { tags }) => {
                tried.push(format!(
                    "mirror {} has no {}",
                    path.display(),
                    what(reference)
                ));
                lacking = Some((path, tags));
            }
            Err(LocalMiss::Broken(why)) => {
                tried.push(format!("mirror {}: {why}", path.display()));
            }
        },
    }
    match local_repo(url) {
        Some(path) => match copy_local(&repo, &path, reference, progress) {
            Ok(oid) => return Ok((repo, oid)),
            Err(LocalMiss::Lacks { .. }) => {
                tried.push(format!("{url}: has no {}", what(reference)))
            }
            Err(LocalMiss::Broken(why)) => tried.push(format!("{url}: {why}")),
        },
        None => match fetch_from(&repo, url, reference, progress) {
            Ok(()) => match resolve(&repo, reference) {
                Some(oid) => return Ok((repo, oid)),
                None => tried.push(format!("{url}: has no {}", what(reference))),
            },
            Err(e) => tried.push(format!("{url}: {}", e.message())),
        },
    }
    if let Some(why) = damaged(&repo, reference) {
        return Err(damage_error(&repo, url, &why));
    }
    if let Some((path, tags)) = lacking {
        let name = reference.trim_start_matches("refs/tags/");
        let add = if is_commit_id(reference) {
            format!("git -C {} fetch {url} {reference}", path.display())
        } else {
            let full = if reference.starts_with("refs/") {
                reference.to_string()
            } else {
                format!("refs/tags/{name}")
            };
            format!("git -C {} fetch {url} {full}:{full}", path.display())
        };
        let has = if tags.is_empty() {
            "it has no tags".to_string()
        } else {
            format!("tags it has: {}", last(&tags, 8).join(", "))
        };
        return Err(EngineError::Source {
            url: url.into(),
            reason: format!("tried {}", tried.join("; ")),
            help: format!(
                "nothing was built and the venv is unchanged; add the release to the mirror (on a machine with network: `{add}`), or pick a release the mirror has with --version or --rev ({has})"
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

fn damage_error(repo: &Repository, url: &str, why: &str) -> EngineError {
    let dir = repo.path().display().to_string();
    EngineError::Source {
        url: url.into(),
        reason: format!(
            "the cache's clone {} is damaged: {why}",
            dir.trim_end_matches('/')
        ),
        help: format!(
            "nothing in the venv was changed; remove the damaged clone and run again: `rocbuild clean --sources` (every cached clone), or delete {}",
            dir.trim_end_matches('/')
        ),
    }
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

/// Where a checkout's submodules are fetched from: the cache of clones, the local mirror if
/// any, and what is told of the transfer.
pub struct Fetcher<'a> {
    pub git_cache: &'a Path,
    pub mirror: Option<&'a Path>,
    pub progress: &'a dyn Fn(usize, usize),
}

/// Write the tree of `commit` into `dir` (replacing it), then its submodules.
pub fn checkout(
    repo: &Repository,
    commit: Oid,
    dir: &Path,
    url: &str,
    submodules: &SubmoduleSel,
    fetcher: &Fetcher,
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
        WriteError::Io(p, e) => EngineError::from_io("write the checkout", &p, e),
    })?;
    if *submodules != SubmoduleSel::None {
        checkout_submodules(repo, &tree, &tmp, url, submodules, fetcher)?;
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

/// How the tree's symbolic links are written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Links {
    /// As links (Unix).
    Ordinary,
    /// Where making a link needs a privilege (Windows): a link to a file of the tree is
    /// written as a copy of that file, so a build or a test that reads it through the link
    /// (TorchCodec's test resources are such links) reads the file. A link to a folder, out
    /// of the tree, absolute or dangling is written as git's `core.symlinks = false` writes
    /// it: a file holding the link's text.
    Copied,
}

/// What every level of [`write_tree`] reads from.
struct TreeWriter<'r> {
    repo: &'r Repository,
    root: &'r git2::Tree<'r>,
    links: Links,
}

/// Write `tree` under `dir`: files (with their executable bit) and symlinks (see [`Links`]).
/// Gitlinks (submodules) are left to `checkout_submodules`. Written by hand because libgit2's
/// checkout of a bare repository refuses trees that hold submodules.
fn write_tree(
    repo: &Repository,
    tree: &git2::Tree,
    dir: &Path,
) -> std::result::Result<(), WriteError> {
    let links = if host::LINKS_ARE_ORDINARY {
        Links::Ordinary
    } else {
        Links::Copied
    };
    let w = TreeWriter {
        repo,
        root: tree,
        links,
    };
    w.write(tree, "", dir)
}

impl TreeWriter<'_> {
    /// Write `tree`, found at `rel` in the root tree (`a/b`, "" for the root), under `dir`.
    fn write(
        &self,
        tree: &git2::Tree,
        rel: &str,
        dir: &Path,
    ) -> std::result::Result<(), WriteError> {
        fs_err::create_dir_all(dir).map_err(|e| WriteError::Io(dir.to_path_buf(), e))?;
        for entry in tree.iter() {
            let name = String::from_utf8_lossy(entry.name_bytes()).into_owned();
            if name.contains('/') || name.contains('\\') || name == ".." || name == "." {
                continue;
            }
            let path = dir.join(&name);
            let entry_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            match entry.kind() {
                Some(ObjectType::Tree) => {
                    let sub = self.repo.find_tree(entry.id()).map_err(WriteError::Git)?;
                    self.write(&sub, &entry_rel, &path)?;
                }
                Some(ObjectType::Blob) => {
                    let blob = self.repo.find_blob(entry.id()).map_err(WriteError::Git)?;
                    let io = |e| WriteError::Io(path.clone(), e);
                    if entry.filemode() == 0o120000 {
                        let target = String::from_utf8_lossy(blob.content()).into_owned();
                        match self.links {
                            Links::Ordinary => {
                                host::symlink(Path::new(&target), &path, false).map_err(io)?
                            }
                            Links::Copied => {
                                let bytes = self.linked_file(&entry_rel, &target);
                                let bytes = bytes.as_deref().unwrap_or(blob.content());
                                fs_err::write(&path, bytes).map_err(io)?;
                            }
                        }
                    } else {
                        fs_err::write(&path, blob.content()).map_err(io)?;
                        if entry.filemode() == 0o100755 {
                            host::set_path_mode(&path, 0o755).map_err(io)?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The content of the regular file of the tree the link at `link` (relative to the root)
    /// with `target` leads to, following up to 8 links; None when it leads out of the tree, to
    /// an absolute path, to a folder or a submodule, or nowhere.
    fn linked_file(&self, link: &str, target: &str) -> Option<Vec<u8>> {
        let (mut link, mut target) = (link.to_string(), target.to_string());
        for _ in 0..8 {
            let at = resolve_link(&link, &target)?;
            let entry = self.root.get_path(Path::new(&at)).ok()?;
            let blob = self.repo.find_blob(entry.id()).ok()?;
            match entry.filemode() {
                0o120000 => {
                    target = String::from_utf8_lossy(blob.content()).into_owned();
                    link = at;
                }
                m if m & 0o170000 == 0o100000 => return Some(blob.content().to_vec()),
                _ => return None,
            }
        }
        None
    }
}

/// Where a relative link `target` at `link` (both `/`-separated, `link` relative to the
/// tree's root) points, relative to the root; None for an absolute target or one that climbs
/// out of the tree.
fn resolve_link(link: &str, target: &str) -> Option<String> {
    if target.starts_with('/') || target.starts_with('\\') || target.contains(':') {
        return None;
    }
    let mut parts: Vec<&str> = link.split('/').collect();
    parts.pop();
    for c in target.split(['/', '\\']) {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            n => parts.push(n),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
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

/// What to check out inside submodule `path`: the nested paths the selection names under it
/// (`third_party/ruy/third_party/cpuinfo` takes ruy's cpuinfo and not its googletest), or
/// all of them when it names none.
fn nested(which: &SubmoduleSel, path: &str) -> SubmoduleSel {
    let SubmoduleSel::Only(paths) = which else {
        return SubmoduleSel::All;
    };
    let prefix = format!("{}/", path.trim_end_matches('/'));
    let inner: Vec<String> = paths
        .iter()
        .filter_map(|p| p.strip_prefix(&prefix))
        .map(str::to_string)
        .collect();
    if inner.is_empty() {
        SubmoduleSel::All
    } else {
        SubmoduleSel::Only(inner)
    }
}

fn checkout_submodules(
    repo: &Repository,
    tree: &git2::Tree,
    dir: &Path,
    url: &str,
    which: &SubmoduleSel,
    fetcher: &Fetcher,
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
        let (sub_repo, oid) = fetch_commit(
            fetcher.git_cache,
            &sub_url,
            &commit,
            fetcher.mirror,
            fetcher.progress,
        )?;
        let target = dir.join(&path);
        let _ = fs_err::remove_dir_all(&target);
        checkout(
            &sub_repo,
            oid,
            &target,
            &sub_url,
            &nested(which, &path),
            fetcher,
        )?;
        let _ = fs_err::remove_file(target.join(".rocbuild-commit"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `git ARGS` in `dir`, with a fixed identity; its stdout.
    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .current_dir(dir)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .output()
            .expect("run git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A mirror `MIRROR/example.invalid/acme/proj.git` with an annotated tag v1.0 and a
    /// `refs/pull/1/head` whose commit was deleted from the object store (what a snapshot
    /// of a GitHub repository looks like). Returns (mirror root, mirror repo, v1.0's commit).
    fn broken_mirror(root: &Path) -> (PathBuf, PathBuf, String) {
        let work = root.join("work");
        fs_err::create_dir_all(&work).unwrap();
        git(&work, &["init", "-q"]);
        fs_err::write(work.join("a.txt"), "release\n").unwrap();
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-qm", "first"]);
        fs_err::write(work.join("a.txt"), "release 1.0\n").unwrap();
        git(&work, &["commit", "-qam", "second"]);
        git(&work, &["tag", "-a", "-m", "v1.0", "v1.0"]);
        let release = git(&work, &["rev-parse", "HEAD"]);
        git(&work, &["checkout", "-qb", "side"]);
        fs_err::write(work.join("b.txt"), "a pull request\n").unwrap();
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-qm", "pull"]);
        let pull = git(&work, &["rev-parse", "HEAD"]);
        let root_m = root.join("mirror");
        let repo = root_m.join("example.invalid/acme/proj.git");
        fs_err::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "--bare"]);
        let dest = repo.to_str().unwrap();
        git(&work, &["push", "-q", dest, "main", "v1.0"]);
        git(&work, &["push", "-q", dest, "side:refs/pull/1/head"]);
        // Small pushes are unpacked as loose objects: delete the pull request's commit.
        let loose = repo.join("objects").join(&pull[..2]).join(&pull[2..]);
        assert!(loose.exists(), "{} is not loose", loose.display());
        fs_err::remove_file(&loose).unwrap();
        (root_m, repo, release)
    }

    /// A bare repo `MIRROR/example.invalid/acme/NAME.git` holding `files` at tag v1, with the
    /// given submodules (path, name, commit); returns the tag's commit.
    fn mirrored(
        mirror: &Path,
        name: &str,
        files: &[(&str, &str)],
        subs: &[(&str, &str, &str)],
    ) -> String {
        let work = mirror.join("work").join(name);
        fs_err::create_dir_all(&work).unwrap();
        git(&work, &["init", "-q"]);
        for (f, text) in files {
            fs_err::write(work.join(f), text).unwrap();
        }
        let mut modules = String::new();
        for (path, sub, _) in subs {
            modules.push_str(&format!(
                "[submodule \"{sub}\"]\n\tpath = {path}\n\turl = https://example.invalid/acme/{sub}.git\n"
            ));
        }
        if !modules.is_empty() {
            fs_err::write(work.join(".gitmodules"), modules).unwrap();
        }
        // The gitlinks go in after `add -A`, which would drop them (nothing is at their path).
        git(&work, &["add", "-A"]);
        for (path, _, commit) in subs {
            git(
                &work,
                &[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("160000,{commit},{path}"),
                ],
            );
        }
        git(&work, &["commit", "-qm", "v1"]);
        git(&work, &["tag", "v1"]);
        let repo = mirror.join(format!("example.invalid/acme/{name}.git"));
        fs_err::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "--bare"]);
        git(
            &work,
            &[
                "push",
                "-q",
                repo.to_str().unwrap(),
                "HEAD:refs/heads/main",
                "v1",
            ],
        );
        git(&work, &["rev-parse", "HEAD"])
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it makes its repositories with the `git` command"
    )]
    fn only_the_nested_submodules_named_are_fetched() {
        let tmp = tempfile::tempdir().unwrap();
        let mirror = tmp.path().join("mirror");
        // ruy-like: a submodule with two of its own; the build needs cpuinfo only. googletest
        // is not in the mirror at all: fetching it would fail.
        let cpuinfo = mirrored(&mirror, "cpuinfo", &[("cpuinfo.h", "int cpuinfo;\n")], &[]);
        let gtest = "0123456789abcdef0123456789abcdef01234567";
        let ruy = mirrored(
            &mirror,
            "ruy",
            &[("ruy.h", "int ruy;\n")],
            &[
                ("third_party/cpuinfo", "cpuinfo", &cpuinfo),
                ("third_party/googletest", "googletest", gtest),
            ],
        );
        let spdlog = mirrored(&mirror, "spdlog", &[("spdlog.h", "int spdlog;\n")], &[]);
        mirrored(
            &mirror,
            "proj",
            &[("CMakeLists.txt", "project(p)\n")],
            &[
                ("third_party/ruy", "ruy", &ruy),
                ("third_party/spdlog", "spdlog", &spdlog),
            ],
        );
        let url = "https://example.invalid/acme/proj";
        let cache = tmp.path().join("cache");
        let (repo, oid) =
            fetch_commit(&cache, url, "refs/tags/v1", Some(&mirror), &|_, _| {}).unwrap();
        let dir = tmp.path().join("checkout");
        let sel = SubmoduleSel::Only(vec![
            "third_party/spdlog".into(),
            "third_party/ruy".into(),
            "third_party/ruy/third_party/cpuinfo".into(),
        ]);
        checkout(
            &repo,
            oid,
            &dir,
            url,
            &sel,
            &Fetcher {
                git_cache: &cache,
                mirror: Some(&mirror),
                progress: &|_, _| {},
            },
        )
        .unwrap();
        assert!(dir.join("third_party/spdlog/spdlog.h").is_file());
        assert!(dir.join("third_party/ruy/ruy.h").is_file());
        assert!(dir
            .join("third_party/ruy/third_party/cpuinfo/cpuinfo.h")
            .is_file());
        assert!(!dir
            .join("third_party/ruy/third_party/googletest")
            .join("README.md")
            .exists());
        assert_eq!(
            fs_err::read_dir(dir.join("third_party/ruy/third_party/googletest"))
                .map(|d| d.count())
                .unwrap_or(0),
            0
        );
        // Without the nested path named, ruy comes with all of its own: googletest is asked
        // for, and the mirror does not have it.
        let all = SubmoduleSel::Only(vec!["third_party/ruy".into()]);
        let err = checkout(
            &repo,
            oid,
            &tmp.path().join("checkout2"),
            url,
            &all,
            &Fetcher {
                git_cache: &cache,
                mirror: Some(&mirror),
                progress: &|_, _| {},
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("googletest"), "{err}");
    }

    /// A tree made with libgit2 alone (no `git` program: it runs under Wine too): files and
    /// links of every kind a checkout meets.
    fn tree_with_links(repo: &Repository) -> git2::Oid {
        let blob = |b: &[u8]| repo.blob(b).unwrap();
        let mut res = repo.treebuilder(None).unwrap();
        res.insert("frame.pt", blob(b"PK\x03\x04 tensor"), 0o100644)
            .unwrap();
        res.insert("same_frame.pt", blob(b"frame.pt"), 0o120000)
            .unwrap();
        res.insert("twice.pt", blob(b"same_frame.pt"), 0o120000)
            .unwrap();
        res.insert("loop_a", blob(b"loop_b"), 0o120000).unwrap();
        res.insert("loop_b", blob(b"loop_a"), 0o120000).unwrap();
        let res = res.write().unwrap();
        let mut test = repo.treebuilder(None).unwrap();
        test.insert("resources", res, 0o040000).unwrap();
        test.insert("up.pt", blob(b"resources/../resources/frame.pt"), 0o120000)
            .unwrap();
        test.insert("out", blob(b"../../etc/passwd"), 0o120000)
            .unwrap();
        test.insert("abs", blob(b"/etc/passwd"), 0o120000).unwrap();
        test.insert("dir_link", blob(b"resources"), 0o120000)
            .unwrap();
        test.insert("dangling", blob(b"nothing.pt"), 0o120000)
            .unwrap();
        let test = test.write().unwrap();
        let mut root = repo.treebuilder(None).unwrap();
        root.insert("test", test, 0o040000).unwrap();
        root.write().unwrap()
    }

    /// Where links need a privilege (Windows), a link to a file of the tree is written as
    /// that file's copy (through a chain of links and `..` that stays inside); one out of the
    /// tree, absolute, to a folder, dangling or in a loop holds the link's text, as git's
    /// `core.symlinks = false` writes it: nothing outside the tree is read. Where links are
    /// ordinary they stay links.
    #[test]
    fn a_link_to_a_file_of_the_tree_is_a_copy_where_links_need_a_privilege() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(tmp.path().join("r.git")).unwrap();
        let tree = repo.find_tree(tree_with_links(&repo)).unwrap();
        let dir = tmp.path().join("copied");
        TreeWriter {
            repo: &repo,
            root: &tree,
            links: Links::Copied,
        }
        .write(&tree, "", &dir)
        .unwrap_or_else(|_| panic!("write"));
        let read = |p: &str| fs_err::read(dir.join(p)).unwrap();
        let frame = b"PK\x03\x04 tensor".to_vec();
        for copy in [
            "test/resources/same_frame.pt",
            "test/resources/twice.pt",
            "test/up.pt",
        ] {
            assert_eq!(read(copy), frame, "{copy}");
            assert!(!fs_err::symlink_metadata(dir.join(copy))
                .unwrap()
                .is_symlink());
        }
        for (text, what) in [
            ("test/out", "../../etc/passwd"),
            ("test/abs", "/etc/passwd"),
            ("test/dir_link", "resources"),
            ("test/dangling", "nothing.pt"),
            ("test/resources/loop_a", "loop_b"),
        ] {
            assert_eq!(read(text), what.as_bytes(), "{text}");
        }
        if host::LINKS_ARE_ORDINARY {
            let dir = tmp.path().join("linked");
            write_tree(&repo, &tree, &dir).unwrap_or_else(|_| panic!("write"));
            let link = dir.join("test/resources/same_frame.pt");
            assert_eq!(fs_err::read_link(&link).unwrap(), Path::new("frame.pt"));
        }
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it makes its repositories with the `git` command"
    )]
    fn a_broken_unrelated_ref_in_the_mirror_does_not_stop_the_release() {
        let tmp = tempfile::tempdir().unwrap();
        let (mirror, _, release) = broken_mirror(tmp.path());
        let url = "https://example.invalid/acme/proj";
        let cache = tmp.path().join("cache");
        let (repo, oid) =
            fetch_commit(&cache, url, "refs/tags/v1.0", Some(&mirror), &|_, _| {}).unwrap();
        assert_eq!(oid.to_string(), release);
        let dir = tmp.path().join("checkout");
        let none = SubmoduleSel::None;
        checkout(
            &repo,
            oid,
            &dir,
            url,
            &none,
            &Fetcher {
                git_cache: &cache,
                mirror: Some(&mirror),
                progress: &|_, _| {},
            },
        )
        .unwrap();
        assert_eq!(
            fs_err::read_to_string(dir.join("a.txt")).unwrap(),
            "release 1.0\n"
        );
        // Only the release was copied, as a shallow clone git itself can read.
        let log = git(repo.path(), &["log", "--format=%H", "refs/tags/v1.0"]);
        assert_eq!(log, release);
        assert!(repo.find_reference("refs/pull/1/head").is_err());
        // A pinned commit (a submodule's) is served the same way, into a fresh cache.
        let cache2 = tmp.path().join("cache2");
        let (_, oid) = fetch_commit(&cache2, url, &release, Some(&mirror), &|_, _| {}).unwrap();
        assert_eq!(oid.to_string(), release);
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it makes its repositories with the `git` command"
    )]
    fn a_mirror_without_the_release_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let (mirror, repo, _) = broken_mirror(tmp.path());
        let url = "https://example.invalid/acme/proj";
        let cache = tmp.path().join("cache");
        let err = fetch_commit(&cache, url, "refs/tags/v2.0", Some(&mirror), &|_, _| {})
            .err()
            .expect("v2.0 is not in the mirror");
        let text = format!(
            "{err} {}",
            miette::Diagnostic::help(&err)
                .map(|h| h.to_string())
                .unwrap_or_default()
        );
        let says = format!("mirror {} has no refs/tags/v2.0", repo.display());
        assert!(text.contains(&says), "{text}");
        assert!(text.contains("tags it has: v1.0"), "{text}");
    }

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

/// Seconds the network check before a run may take.
pub const REACH_SECS: u64 = 3;

/// Before anything is installed or started: a source that must come over the network from a
/// host this machine cannot reach fails at once (name resolution and a TCP connection, each
/// within [`REACH_SECS`]), saying what works offline. Nothing is checked when the source needs
/// no network: a local path, a mirror holding the repository, the release already in the
/// cache, or a proxy configured (the connection would go through it).
pub fn preflight(source: &crate::source::plan::SourcePlan, proxied: bool) -> Result<()> {
    let crate::source::plan::SourcePlan::Git {
        url,
        reference,
        expected_commit,
        mirror,
        git_cache,
        checkout,
        ..
    } = source
    else {
        return Ok(());
    };
    let in_mirror = mirror
        .as_deref()
        .and_then(|m| mirror_path(m, url))
        .is_some_and(|p| p.exists());
    if local_repo(url).is_some() || in_mirror || proxied || checkout.join(".git").exists() {
        return Ok(());
    }
    if in_cache(
        git_cache,
        url,
        expected_commit.as_deref().unwrap_or(reference),
    ) {
        return Ok(());
    }
    let Some((host, port)) = host_port(url) else {
        return Ok(());
    };
    let Err(why) = reach(&host, port) else {
        return Ok(());
    };
    let cached = cached_tags(git_cache, url);
    let offline = if cached.is_empty() {
        "none is in rocbuild's cache yet".to_string()
    } else {
        format!(
            "these tags are in rocbuild's cache (pick one with --version): {}",
            last(&cached, 8).join(", ")
        )
    };
    Err(EngineError::Source {
        url: rocbuild_secret::strip_userinfo(url),
        reason: format!("{host}:{port} cannot be reached from this machine ({why})"),
        help: format!(
            "nothing was installed or changed. Offline, rocbuild builds from a git mirror (ROCBUILD_MIRROR=DIR holding DIR/{}), from a checkout (--source DIR), or a release it fetched before; {offline}",
            mirror_tail(url)
        ),
    })
}

/// `HOST/OWNER/REPO.git` of a URL, as a mirror holds it.
fn mirror_tail(url: &str) -> String {
    mirror_path(Path::new(""), url)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "HOST/OWNER/REPO.git".into())
}

/// The cache clone of `url`, if there is one.
fn cached_clone(git_cache: &Path, url: &str) -> Option<Repository> {
    Repository::open_bare(cache_dir(git_cache, url)).ok()
}

/// Whether the cache clone of `url` holds `reference` (a commit or a tag).
fn in_cache(git_cache: &Path, url: &str, reference: &str) -> bool {
    cached_clone(git_cache, url).is_some_and(|r| resolve(&r, reference).is_some())
}

/// The tags of the cache clone of `url`.
fn cached_tags(git_cache: &Path, url: &str) -> Vec<String> {
    cached_clone(git_cache, url)
        .and_then(|r| {
            r.tag_names(None)
                .ok()
                .map(|t| t.iter().flatten().map(str::to_string).collect())
        })
        .unwrap_or_default()
}

/// The host and port a git URL connects to (`https://`, `http://`, `ssh://`, `git://`,
/// `git@host:path`).
fn host_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (s, r),
        None if url.contains('@') && url.contains(':') => ("scp", url),
        None => return None,
    };
    // `user:password@host:port/path`, or scp-like `git@host:path` (no port there).
    let authority = match scheme {
        "scp" => rest.split(':').next()?,
        _ => rest.split('/').next()?,
    };
    let host_port = authority.rsplit('@').next()?;
    let (host, explicit) = match host_port.rsplit_once(':') {
        Some((h, p)) if scheme != "scp" => (h, p.parse().ok()),
        _ => (host_port, None),
    };
    let port = explicit.unwrap_or(match scheme {
        "http" => 80,
        "ssh" | "git+ssh" | "scp" => 22,
        "git" => 9418,
        _ => 443,
    });
    (!host.is_empty()).then(|| (host.to_string(), port))
}

/// Resolve `host` and connect to it, each within [`REACH_SECS`].
fn reach(host: &str, port: u16) -> std::result::Result<(), String> {
    use std::net::ToSocketAddrs;
    let (tx, rx) = std::sync::mpsc::channel();
    let name = format!("{host}:{port}");
    std::thread::spawn(move || {
        let _ = tx.send(name.to_socket_addrs().map(|a| a.collect::<Vec<_>>()));
    });
    let limit = std::time::Duration::from_secs(REACH_SECS);
    let addrs = match rx.recv_timeout(limit) {
        Ok(Ok(a)) if !a.is_empty() => a,
        Ok(Ok(_)) => return Err(format!("{host} has no address")),
        Ok(Err(e)) => return Err(format!("cannot resolve {host}: {e}")),
        Err(_) => return Err(format!("resolving {host} took over {REACH_SECS} s")),
    };
    let mut last = String::new();
    for a in addrs.iter().take(2) {
        match std::net::TcpStream::connect_timeout(a, limit) {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("connecting to {a}: {e}"),
        }
    }
    Err(last)
}

#[cfg(test)]
mod preflight_tests {
    use super::*;

    #[test]
    fn hosts_and_ports_of_git_urls() {
        assert_eq!(
            host_port("https://github.com/a/b"),
            Some(("github.com".into(), 443))
        );
        assert_eq!(
            host_port("https://tok@git.corp:8443/a/b.git"),
            Some(("git.corp".into(), 8443))
        );
        assert_eq!(host_port("http://h/a"), Some(("h".into(), 80)));
        assert_eq!(
            host_port("git@github.com:a/b.git"),
            Some(("github.com".into(), 22))
        );
        assert_eq!(host_port("ssh://git@h/a"), Some(("h".into(), 22)));
        assert_eq!(host_port("/srv/repos/a.git"), None);
        // A password in the URL is not the host.
        assert_eq!(
            host_port("http://bob:s3cret@127.0.0.1:8080/fakecodec.git"),
            Some(("127.0.0.1".into(), 8080))
        );
    }

    /// A host that does not resolve fails within the limit, naming what works offline.
    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it expects the mirror's path as a Unix host joins it"
    )]
    fn an_unreachable_source_fails_fast_and_says_what_works_offline() {
        let t = tempfile::tempdir().unwrap();
        let source = crate::source::plan::SourcePlan::Git {
            url: "https://unreachable.invalid/owner/repo".into(),
            reference: "refs/tags/v1.0".into(),
            expected_commit: None,
            submodules: rocbuild_recipe::SubmoduleSel::None,
            mirror: None,
            git_cache: t.path().join("git"),
            checkout: t.path().join("src/repo"),
            patches: Vec::new(),
            shipped: Vec::new(),
        };
        let started = std::time::Instant::now();
        // A release fetched before: its tag is in the cache clone.
        let dir = t.path().join("git");
        std::fs::create_dir_all(&dir).unwrap();
        let tail = format!(
            "repo-{}.git",
            &hash_hex(&["https://unreachable.invalid/owner/repo"])[..12]
        );
        let r = Repository::init_bare(dir.join(tail)).unwrap();
        let sig = git2::Signature::now("t", "t@t").unwrap();
        let tree = r
            .find_tree(r.treebuilder(None).unwrap().write().unwrap())
            .unwrap();
        let c = r.commit(None, &sig, &sig, "x", &tree, &[]).unwrap();
        r.tag_lightweight("v0.15.0", &r.find_object(c, None).unwrap(), false)
            .unwrap();
        let e = preflight(&source, false).unwrap_err();
        assert!(started.elapsed().as_secs() <= REACH_SECS + 1);
        let help = miette::Diagnostic::help(&e).unwrap().to_string();
        assert!(
            e.to_string()
                .contains("unreachable.invalid:443 cannot be reached"),
            "{e}"
        );
        assert!(
            help.contains("ROCBUILD_MIRROR=DIR holding DIR/unreachable.invalid/owner/repo.git"),
            "{help}"
        );
        assert!(
            help.contains("--source DIR") && help.contains("(pick one with --version): v0.15.0"),
            "{help}"
        );
        // A mirror holding the repository: nothing to check.
        std::fs::create_dir_all(t.path().join("m/unreachable.invalid/owner/repo.git")).unwrap();
        let crate::source::plan::SourcePlan::Git {
            url,
            reference,
            git_cache,
            checkout,
            ..
        } = source
        else {
            unreachable!()
        };
        let mirrored = crate::source::plan::SourcePlan::Git {
            url,
            reference,
            expected_commit: None,
            submodules: rocbuild_recipe::SubmoduleSel::None,
            mirror: Some(t.path().join("m")),
            git_cache,
            checkout,
            patches: Vec::new(),
            shipped: Vec::new(),
        };
        assert!(preflight(&mirrored, false).is_ok());
    }
}
