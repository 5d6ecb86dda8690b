//! Where rocbuild keeps its state in a venv. The one place that knows the names: every other
//! module asks here.
//!
//! ```text
//! <venv>/                         the venv root (--venv, $VIRTUAL_ENV, $CONDA_PREFIX, ./.venv)
//!   <site-packages>/              found by `rocbuild_probe::site_packages_of` (pyvenv.cfg)
//!     .rocbuild/
//!       lock                      one run per venv (pid inside while held)
//!       journal.json              an install or restore under way (its commit point)
//!       txn/stage/ txn/backup/    the transaction's staging area and its backups
//!       backup/<recipe>/          pip's files that rocbuild replaced, for `restore`
//!       <recipe>.json             the manifest of each install
//! ```

use std::path::{Path, PathBuf};

use rocbuild_probe::Os;

use crate::error::{Result, VenvError};

/// Name of the state directory inside site-packages.
pub const STATE_DIR: &str = ".rocbuild";
/// Name of the venv lock inside the state directory.
pub const LOCK_FILE: &str = "lock";
/// Name of the journal inside the state directory.
pub const JOURNAL_FILE: &str = "journal.json";
const TXN_DIR: &str = "txn";
const BACKUP_DIR: &str = "backup";

/// A venv and the site-packages rocbuild works in, found once and the same way for every
/// command (lock, install, status, restore, wheel, doctor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VenvLayout {
    pub root: PathBuf,
    pub site: PathBuf,
    /// The OS the venv is for ([`rocbuild_probe::cross::venv_os`], decided here once).
    pub os: Os,
}

impl VenvLayout {
    /// Find site-packages of the venv at `root` without running its Python: the `host`'s
    /// layout first, then the other OS's (a Windows venv's `Lib/site-packages` read from Linux,
    /// which `rocbuild repair` may have changed and `restore` / `status` must then find); and
    /// the OS the venv is for.
    pub fn locate(root: &Path, host: Os) -> Result<VenvLayout> {
        let python = rocbuild_probe::python_in_venv(root, host);
        let site = rocbuild_probe::platform::any_site_packages(root, host);
        match site {
            Some(site) => Ok(VenvLayout {
                root: root.to_path_buf(),
                site,
                os: rocbuild_probe::cross::venv_os(root, &[], host),
            }),
            None => Err(VenvError::NotAVenv {
                root: root.display().to_string(),
                reason: if python.exists() {
                    "it has no site-packages directory where its pyvenv.cfg says".into()
                } else {
                    format!("{} does not exist", python.display())
                },
                help: "point --venv at a directory made by `python3 -m venv`, `uv venv` or conda"
                    .into(),
            }),
        }
    }

    /// A layout for a known site-packages (the root is its venv's, when it looks like one).
    pub fn at_site(site: &Path) -> VenvLayout {
        let root = rocbuild_probe::platform::venv_root_of(site)
            .unwrap_or(site)
            .to_path_buf();
        VenvLayout {
            os: rocbuild_probe::cross::venv_os(&root, &[], Os::current()),
            root,
            site: site.to_path_buf(),
        }
    }

    pub fn state_dir(&self) -> PathBuf {
        state_dir(&self.site)
    }
}

/// `.rocbuild/` in `site`.
pub fn state_dir(site: &Path) -> PathBuf {
    site.join(STATE_DIR)
}

pub fn lock_file(site: &Path) -> PathBuf {
    state_dir(site).join(LOCK_FILE)
}

pub fn journal(site: &Path) -> PathBuf {
    state_dir(site).join(JOURNAL_FILE)
}

/// The transaction's directory: `stage/`, `backup/`, pip's target, the staged manifest.
pub fn txn(site: &Path) -> PathBuf {
    state_dir(site).join(TXN_DIR)
}

/// Where staged files wait for the swap.
pub fn stage(site: &Path) -> PathBuf {
    txn(site).join("stage")
}

/// Where pip's part of an install is fetched (`pip install --target`), as path components
/// below site-packages (a plan for another OS joins them with that OS's separator).
pub const PIP_TARGET: [&str; 3] = [STATE_DIR, TXN_DIR, "pip"];

pub fn pip_target(site: &Path) -> PathBuf {
    PIP_TARGET.iter().fold(site.to_path_buf(), |p, c| p.join(c))
}

/// Backups of every recipe (`backup/<recipe>/`).
pub fn backups(site: &Path) -> PathBuf {
    state_dir(site).join(BACKUP_DIR)
}

/// pip's files that rocbuild replaced for `recipe`, kept for `restore`.
pub fn backup(site: &Path, recipe: &str) -> PathBuf {
    backups(site).join(recipe)
}

pub fn manifest(site: &Path, recipe: &str) -> PathBuf {
    state_dir(site).join(format!("{recipe}.json"))
}

/// Is `name` (an entry of `.rocbuild/`) a manifest?
pub fn is_manifest_name(name: &str) -> bool {
    name.ends_with(".json") && name != JOURNAL_FILE
}

/// Files under `root`, as `/`-separated paths relative to it, with their paths; sorted. Links
/// are listed as entries of their own and never followed (a link to a directory outside the
/// venv must not make its contents part of a package); a `root` that is itself a link lists
/// nothing.
pub fn walk(root: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    if !crate::confine::is_real_dir(root) {
        return out;
    }
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir()) && crate::confine::is_real_dir(&p);
            if is_dir {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(root) {
                out.push((rel.to_string_lossy().replace('\\', "/"), p));
            }
        }
    }
    out.sort();
    out
}

/// Files and folders under `root` whose names are not UTF-8 (links not followed): rocbuild
/// records paths as text, so it cannot back them up and give them back byte for byte.
pub fn non_utf8_names(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if !crate::confine::is_real_dir(root) {
        return out;
    }
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_name().to_str().is_none() {
                out.push(p);
            } else if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_lives_in_site_packages() {
        let site = Path::new("/v/lib/python3.11/site-packages");
        assert_eq!(lock_file(site), site.join(".rocbuild/lock"));
        assert_eq!(journal(site), site.join(".rocbuild/journal.json"));
        assert_eq!(stage(site), site.join(".rocbuild/txn/stage"));
        assert_eq!(backup(site, "r"), site.join(".rocbuild/backup/r"));
        assert_eq!(manifest(site, "r"), site.join(".rocbuild/r.json"));
        assert!(is_manifest_name("torchcodec.json") && !is_manifest_name(JOURNAL_FILE));
    }

    #[test]
    fn locate_follows_pyvenv_cfg_not_the_newest_directory() {
        let d = tempfile::tempdir().unwrap();
        for v in ["python3.11", "python3.99"] {
            std::fs::create_dir_all(d.path().join("lib").join(v).join("site-packages")).unwrap();
        }
        std::fs::write(d.path().join("pyvenv.cfg"), "version = 3.11.7\n").unwrap();
        let l = VenvLayout::locate(d.path(), Os::Linux).unwrap();
        assert_eq!(l.site, d.path().join("lib/python3.11/site-packages"));
        assert_eq!(VenvLayout::at_site(&l.site).root, d.path());
        let e = VenvLayout::locate(&d.path().join("nope"), Os::Linux).unwrap_err();
        assert!(e.to_string().contains("is not a venv"), "{e}");
    }
}
