//! The source the installed build was made from, for its tests: the build's own checkout in
//! the cache when it is still there (its stamp names the recorded commit), else the recorded
//! commit fetched again (the cache's clone, the mirror, the URL) into a checkout of the
//! test's own; then the recipe's `[test] files` copied into the run's folder.

use std::path::{Path, PathBuf};

use rocbuild_recipe::{Recipe, SubmoduleSel};
use rocbuild_venv::manifest::Manifest;

use crate::error::{EngineError, Result};
use crate::test_error::TestError;
use crate::usecase::Settings;

/// Where the tests' source is, and how it was found (said to the user).
pub struct TestSource {
    pub dir: PathBuf,
    pub how: String,
}

/// The source of the build `m` of `recipe`.
pub fn find(recipe: &Recipe, m: &Manifest, s: &Settings) -> Result<TestSource> {
    let gone = |reason: String, help: String| -> EngineError {
        TestError::SourceGone {
            recipe: m.recipe.clone(),
            version: m.version.clone(),
            reason,
            help,
        }
        .into()
    };
    let rebuild = format!(
        "rebuild it (rocbuild {} --version {}), which fetches the source again, then run the tests",
        m.recipe, m.version
    );
    let src = s.cache.join("src");
    // A build from an sdist records the sdist's sha256 where a commit would be, and PyPI's
    // project page as its URL: its source is the unpacked sdist with that sha256.
    let from_sdist = recipe.raw.source.sdist.is_some()
        && m.source_url
            .as_deref()
            .is_some_and(|u| u.starts_with(SDIST_URL));
    match (&m.source_commit, &m.source_url) {
        (sha256, Some(url)) if from_sdist => unpacked_sdist(&src, m, sha256.as_deref())
            .map(|dir| TestSource {
                how: format!("the build's unpacked sdist ({url})"),
                dir,
            })
            .ok_or_else(|| {
                gone(
                    format!(
                        "the unpacked sdist{} is not under {}",
                        sha256
                            .as_deref()
                            .map(|h| format!(" (sha256 {})", short(h)))
                            .unwrap_or_default(),
                        src.display()
                    ),
                    rebuild.clone(),
                )
            }),
        (Some(commit), Some(url)) => {
            if let Some(dir) = stamped_checkout(&src, &m.recipe, commit) {
                return Ok(TestSource {
                    dir,
                    how: format!("the build's checkout of {}", short(commit)),
                });
            }
            fetch(url, commit, m, s).map_err(|e| {
                gone(
                    format!("commit {commit} of {url}: {}", first_line(&e.to_string())),
                    format!("make {url} reachable, or point ROCBUILD_MIRROR at a mirror that holds commit {commit}: `rocbuild test` then checks it out again"),
                )
            })
        }
        (None, Some(dir)) if Path::new(dir).is_dir() => Ok(TestSource {
            dir: PathBuf::from(dir),
            how: format!("the source folder it was built from ({dir})"),
        }),
        _ => Err(gone(
            "its manifest records no source commit".into(),
            rebuild,
        )),
    }
}

/// What a build from an sdist records as its source URL (`from_run`).
const SDIST_URL: &str = "https://pypi.org/project/";

/// The sdist of the build `m` unpacked under `src` (`NAME-VERSION-SHA12/`), when its marker
/// names `sha256` (the build's own source, not another file of the same name).
fn unpacked_sdist(src: &Path, m: &Manifest, sha256: Option<&str>) -> Option<PathBuf> {
    let prefix = format!("{}-{}-", m.recipe, crate::paths::sanitize(&m.version));
    entries(src).into_iter().find_map(|dir| {
        let marker = fs_err::read_to_string(dir.join(".rocbuild-sdist-sha256")).ok();
        let same = match sha256 {
            Some(h) => marker.as_deref().map(str::trim) == Some(h),
            None => true,
        };
        (file_name(&dir).starts_with(&prefix) && real_dir(&dir) && same).then(|| sdist_root(&dir))
    })
}

/// A checkout of the build under `src` whose stamp names `commit` (patched or not: the
/// build's own source).
fn stamped_checkout(src: &Path, recipe: &str, commit: &str) -> Option<PathBuf> {
    let prefix = format!("{recipe}-");
    entries(src).into_iter().find(|dir| {
        file_name(dir).starts_with(&prefix)
            && !file_name(dir).ends_with(".partial")
            && real_dir(dir)
            && fs_err::read_to_string(dir.join(".rocbuild-commit"))
                .ok()
                .and_then(|s| s.split_whitespace().next().map(str::to_string))
                .as_deref()
                == Some(commit)
    })
}

fn fetch(url: &str, commit: &str, m: &Manifest, s: &Settings) -> Result<TestSource> {
    let git_cache = s.cache.join("git");
    let (repo, oid) =
        crate::source::fetch_commit(&git_cache, url, commit, s.mirror.as_deref(), &|_, _| {})?;
    let dir = s
        .cache
        .join("test")
        .join("src")
        .join(format!("{}-{}", m.recipe, short(commit)));
    let fetcher = crate::source::Fetcher {
        git_cache: &git_cache,
        mirror: s.mirror.as_deref(),
        progress: &|_, _| {},
    };
    crate::source::checkout(&repo, oid, &dir, url, &SubmoduleSel::None, &fetcher)?;
    Ok(TestSource {
        dir,
        how: format!(
            "commit {} fetched again (the build's checkout was cleaned)",
            short(commit)
        ),
    })
}

/// An sdist unpacks to one folder (`name-version/`): its root is that folder.
fn sdist_root(dir: &Path) -> PathBuf {
    let inner = entries(dir);
    match inner.as_slice() {
        [one] if real_dir(one) => one.clone(),
        _ => dir.to_path_buf(),
    }
}

/// Copy `files` (relative to `from`, checked at load to stay inside) to the same paths under
/// `to`: folders and regular files; a link is copied as the file it names only when that is a
/// regular file inside `from` (test resources link to one another: torchcodec's
/// `…frame000180.pt` names `…time6.000000.pt`), never followed out of the checkout.
pub fn copy_files(from: &Path, to: &Path, files: &[String], m: &Manifest) -> Result<()> {
    for f in files {
        let src = from.join(f);
        let md = fs_err::symlink_metadata(&src).map_err(|_| TestError::MissingFile {
            recipe: m.recipe.clone(),
            version: m.version.clone(),
            file: f.clone(),
            source_dir: from.display().to_string(),
        })?;
        copy_tree(from, &src, &to.join(f), &md)?;
    }
    pin_pytest_config(to)
}

/// pytest looks for its configuration from the tests' folder upwards: with none among the
/// copied files it would find one above the cache (a `pytest.ini` or `pyproject.toml` in the
/// user's home, with its own `addopts`). An empty `pytest.ini` at the run's root ends that
/// search there; upstream's own configuration, when copied, is used as it is.
fn pin_pytest_config(root: &Path) -> Result<()> {
    let has = |name: &str, section: Option<&str>| {
        let p = root.join(name);
        match section {
            None => p.is_file(),
            Some(sec) => fs_err::read_to_string(&p).is_ok_and(|t| t.contains(sec)),
        }
    };
    let configured = has("pytest.ini", None)
        || has(".pytest.ini", None)
        || has("pyproject.toml", Some("[tool.pytest.ini_options]"))
        || has("tox.ini", Some("[pytest]"))
        || has("setup.cfg", Some("[tool:pytest]"));
    if configured {
        return Ok(());
    }
    let ini = root.join("pytest.ini");
    fs_err::write(
        &ini,
        "# Written by rocbuild test: upstream's tests bring no pytest configuration, and none\n# from the folders above the run may apply.\n[pytest]\n",
    )
    .map_err(EngineError::io("write", &ini))
}

fn copy_tree(root: &Path, src: &Path, dst: &Path, md: &std::fs::Metadata) -> Result<()> {
    if md.is_dir() {
        fs_err::create_dir_all(dst).map_err(EngineError::io("create", dst))?;
        for e in fs_err::read_dir(src).map_err(EngineError::io("read", src))? {
            let e = e.map_err(EngineError::io("read", src))?;
            let md =
                fs_err::symlink_metadata(e.path()).map_err(EngineError::io("read", &e.path()))?;
            copy_tree(root, &e.path(), &dst.join(e.file_name()), &md)?;
        }
        return Ok(());
    }
    let from = if md.is_file() {
        Some(src.to_path_buf())
    } else if md.is_symlink() {
        link_inside(root, src)
    } else {
        None
    };
    if let Some(from) = from {
        if let Some(p) = dst.parent() {
            fs_err::create_dir_all(p).map_err(EngineError::io("create", p))?;
        }
        fs_err::copy(&from, dst).map_err(EngineError::io("copy", &from))?;
    }
    Ok(())
}

/// The regular file a relative link at `link` names, when it stays inside `root` (read
/// lexically: no component climbs out, no further link).
fn link_inside(root: &Path, link: &Path) -> Option<PathBuf> {
    let target = fs_err::read_link(link).ok()?;
    if target.is_absolute() {
        return None;
    }
    let mut p = link.parent()?.to_path_buf();
    for c in target.components() {
        match c {
            std::path::Component::Normal(n) => p.push(n),
            std::path::Component::ParentDir => {
                if !p.pop() {
                    return None;
                }
            }
            std::path::Component::CurDir => {}
            _ => return None,
        }
    }
    let md = fs_err::symlink_metadata(&p).ok()?;
    (p.starts_with(root) && md.is_file()).then_some(p)
}

/// A directory itself, not a link to one: the cache's folders are read, never followed out.
fn real_dir(p: &Path) -> bool {
    fs_err::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs_err::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub fn short(commit: &str) -> &str {
    &commit[..12.min(commit.len())]
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[cfg(all(test, unix))]
mod tests {
    /// A link among the resources is copied as its file; one out of the checkout is not.
    #[test]
    fn links_are_followed_only_inside_the_checkout() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("src");
        std::fs::create_dir_all(root.join("test/res")).unwrap();
        std::fs::write(root.join("test/res/a.pt"), "frame").unwrap();
        std::fs::write(tmp.path().join("secret"), "outside").unwrap();
        let link = |to: &str, at: &str| std::os::unix::fs::symlink(to, root.join(at)).unwrap();
        link("a.pt", "test/res/b.pt");
        link("../../../secret", "test/res/out");
        link("/etc/passwd", "test/res/abs");
        assert_eq!(
            super::link_inside(&root, &root.join("test/res/b.pt")),
            Some(root.join("test/res/a.pt"))
        );
        assert_eq!(super::link_inside(&root, &root.join("test/res/out")), None);
        assert_eq!(super::link_inside(&root, &root.join("test/res/abs")), None);
        let md = std::fs::symlink_metadata(root.join("test")).unwrap();
        let to = tmp.path().join("copy");
        super::copy_tree(&root, &root.join("test"), &to, &md).unwrap();
        assert_eq!(
            std::fs::read_to_string(to.join("res/b.pt")).unwrap(),
            "frame"
        );
        assert!(!to.join("res/out").exists() && !to.join("res/abs").exists());
    }
}
