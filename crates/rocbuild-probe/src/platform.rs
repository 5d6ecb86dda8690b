//! The per-OS rules, in one place, behind one trait chosen from an [`Os`] value at run time
//! (so every OS's rules run in tests on any host): file suffixes, a venv's layout read from its
//! files (root, site-packages, interpreter, scripts; Linux/macOS/Windows venvs and conda envs),
//! the loader's search variable and how installed libraries find their dependencies. No other
//! file spells `Scripts`, `Lib/site-packages` or `lib/pythonX.Y` (a test checks).

use std::path::{Path, PathBuf};

use crate::Os;

/// How an installed native library finds the libraries it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMethod {
    /// ELF `DT_RUNPATH` entries (`$ORIGIN/../torch/lib`).
    Runpath,
    /// Mach-O `LC_RPATH` entries (`@loader_path/…`), then a new ad-hoc signature.
    LoaderPath,
    /// Windows DLLs hold no search path: a preload hook adds directories and loads them.
    Preload,
}

/// What differs between operating systems, for the files rocbuild reads and writes.
pub trait PlatformRules: Sync {
    fn os(&self) -> Os;
    /// `""` or `".exe"`.
    fn exe_suffix(&self) -> &'static str;
    /// `.so`, `.dylib`, `.dll`.
    fn shared_lib_suffix(&self) -> &'static str;
    /// A Python extension module's suffix (`.so`, `.pyd`).
    fn extension_suffix(&self) -> &'static str;
    /// A venv's directory of executables (`bin`, `Scripts`).
    fn scripts_dir(&self) -> &'static str;
    /// The variable the loader searches (`LD_LIBRARY_PATH`, `DYLD_LIBRARY_PATH`, `PATH`).
    fn library_search_var(&self) -> &'static str;
    /// The separator of path lists (`:`, `;`).
    fn path_list_separator(&self) -> &'static str;
    fn link_method(&self) -> LinkMethod;
    /// site-packages of the venv or conda env at `root`, from its files only.
    fn site_packages(&self, root: &Path) -> Option<PathBuf>;
    /// The interpreter of the venv or conda env at `root`.
    fn venv_python(&self, root: &Path) -> PathBuf {
        self.venv_executable(root, "python")
    }
    /// An executable the venv at `root` installed (`bin/uv`, `Scripts\uv.exe`).
    fn venv_executable(&self, root: &Path, name: &str) -> PathBuf {
        root.join(self.scripts_dir())
            .join(format!("{name}{}", self.exe_suffix()))
    }
}

struct Linux;
struct Macos;
struct Windows;

impl Os {
    /// This OS's rules.
    pub fn rules(self) -> &'static dyn PlatformRules {
        match self {
            Os::Linux => &Linux,
            Os::Macos => &Macos,
            Os::Windows => &Windows,
        }
    }
}

impl PlatformRules for Linux {
    fn os(&self) -> Os {
        Os::Linux
    }
    fn exe_suffix(&self) -> &'static str {
        ""
    }
    fn shared_lib_suffix(&self) -> &'static str {
        ".so"
    }
    fn extension_suffix(&self) -> &'static str {
        ".so"
    }
    fn scripts_dir(&self) -> &'static str {
        "bin"
    }
    fn library_search_var(&self) -> &'static str {
        "LD_LIBRARY_PATH"
    }
    fn path_list_separator(&self) -> &'static str {
        ":"
    }
    fn link_method(&self) -> LinkMethod {
        LinkMethod::Runpath
    }
    fn site_packages(&self, root: &Path) -> Option<PathBuf> {
        unix_site_packages(root)
    }
}

impl PlatformRules for Macos {
    fn os(&self) -> Os {
        Os::Macos
    }
    fn exe_suffix(&self) -> &'static str {
        ""
    }
    fn shared_lib_suffix(&self) -> &'static str {
        ".dylib"
    }
    fn extension_suffix(&self) -> &'static str {
        ".so"
    }
    fn scripts_dir(&self) -> &'static str {
        "bin"
    }
    fn library_search_var(&self) -> &'static str {
        "DYLD_LIBRARY_PATH"
    }
    fn path_list_separator(&self) -> &'static str {
        ":"
    }
    fn link_method(&self) -> LinkMethod {
        LinkMethod::LoaderPath
    }
    fn site_packages(&self, root: &Path) -> Option<PathBuf> {
        unix_site_packages(root)
    }
}

impl PlatformRules for Windows {
    fn os(&self) -> Os {
        Os::Windows
    }
    fn exe_suffix(&self) -> &'static str {
        ".exe"
    }
    fn shared_lib_suffix(&self) -> &'static str {
        ".dll"
    }
    fn extension_suffix(&self) -> &'static str {
        ".pyd"
    }
    fn scripts_dir(&self) -> &'static str {
        "Scripts"
    }
    fn library_search_var(&self) -> &'static str {
        "PATH"
    }
    fn path_list_separator(&self) -> &'static str {
        ";"
    }
    fn link_method(&self) -> LinkMethod {
        LinkMethod::Preload
    }
    /// `Lib\site-packages` (a venv and a conda env alike).
    fn site_packages(&self, root: &Path) -> Option<PathBuf> {
        let p = windows_site_packages(root);
        p.is_dir().then_some(p)
    }
    /// `Scripts\python.exe` in a venv; a conda env keeps `python.exe` at its root.
    fn venv_python(&self, root: &Path) -> PathBuf {
        let scripts = self.venv_executable(root, "python");
        if scripts.exists() {
            scripts
        } else {
            root.join("python.exe")
        }
    }
}

/// Where a Windows venv's site-packages is, whether it is there or not (`Lib\site-packages`).
pub fn windows_site_packages(root: &Path) -> PathBuf {
    root.join("Lib").join("site-packages")
}

/// `lib/pythonX.Y/site-packages` for the X.Y its `pyvenv.cfg` names (`version`, or uv's
/// `version_info`) — the rule Python's own `site` module follows, so it names the directory
/// `sysconfig` gives even when an older Python left another `lib/python*` behind. A
/// free-threaded build's is `python3.13t`. Without a `pyvenv.cfg` (a conda env), the newest
/// `lib/python*/site-packages`.
fn unix_site_packages(root: &Path) -> Option<PathBuf> {
    if let Some((maj, min)) = pyvenv_version(root) {
        return [format!("python{maj}.{min}"), format!("python{maj}.{min}t")]
            .into_iter()
            .map(|d| root.join("lib").join(d).join("site-packages"))
            .find(|p| p.is_dir());
    }
    let mut found: Vec<(u32, u32, PathBuf)> = std::fs::read_dir(root.join("lib"))
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (maj, min) = name.strip_prefix("python")?.split_once('.')?;
            let min = min.trim_end_matches(|c: char| !c.is_ascii_digit());
            let sp = e.path().join("site-packages");
            sp.is_dir()
                .then(|| Some((maj.parse().ok()?, min.parse().ok()?, sp)))
                .flatten()
        })
        .collect();
    found.sort();
    found.pop().map(|(_, _, p)| p)
}

/// The Python version a venv was made with, from its `pyvenv.cfg`.
pub(crate) fn pyvenv_version(root: &Path) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string(root.join("pyvenv.cfg")).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        if !matches!(k.trim(), "version" | "version_info") {
            return None;
        }
        let mut it = v.trim().split('.');
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    })
}

/// The layouts [`any_site_packages`] knows, in words (for an error that none was found).
pub const SITE_LAYOUTS: &str = "lib/pythonX.Y/site-packages from pyvenv.cfg, or Lib/site-packages";

/// site-packages of the venv at `root` whatever OS it is for: `first`'s layout, then the
/// others' (a Windows venv read from Linux). The one rule every command locates a venv by.
pub fn any_site_packages(root: &Path, first: Os) -> Option<PathBuf> {
    [first, Os::Linux, Os::Windows]
        .into_iter()
        .find_map(|os| os.rules().site_packages(root))
}

/// The interpreter of a venv found from one of its files: the first of every OS's layouts
/// that exists (a file read from another OS's venv).
pub fn any_venv_python(root: &Path) -> Option<PathBuf> {
    [Os::Linux, Os::Windows]
        .into_iter()
        .map(|os| os.rules().venv_python(root))
        .find(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_os_has_its_layout_and_suffixes() {
        let r = Path::new("/v");
        assert_eq!(Os::Linux.rules().venv_python(r), r.join("bin/python"));
        assert_eq!(
            Os::Windows.rules().venv_executable(r, "uv"),
            r.join("Scripts").join("uv.exe")
        );
        assert_eq!(Os::Macos.rules().shared_lib_suffix(), ".dylib");
        assert_eq!(Os::Windows.rules().extension_suffix(), ".pyd");
        assert_eq!(Os::Macos.rules().library_search_var(), "DYLD_LIBRARY_PATH");
        assert_eq!(Os::Windows.rules().link_method(), LinkMethod::Preload);
        for os in [Os::Linux, Os::Macos, Os::Windows] {
            assert_eq!(os.rules().os(), os);
        }
    }

    /// No file of the workspace's crates but this one spells a venv's layout.
    #[test]
    fn no_other_file_spells_a_venv_layout() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut bad = Vec::new();
        let mut stack = vec![crates];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    if !p.ends_with("tests") && !p.ends_with("target") {
                        stack.push(p);
                    }
                    continue;
                }
                if p.ends_with("platform.rs") || p.extension().is_none_or(|x| x != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                // Code only: stop at the unit tests, skip comments and doc text.
                let code = text.split("#[cfg(test)]").next().unwrap_or("");
                for (i, line) in code.lines().enumerate() {
                    let l = line.trim_start();
                    if l.starts_with("//") {
                        continue;
                    }
                    for m in [
                        "\"Scripts\"",
                        "Lib/site-packages",
                        "join(\"Lib\")",
                        "join(\"site-packages\")",
                        "\"lib/python",
                        "\"bin/python",
                        "Scripts/python",
                    ] {
                        if l.contains(m) {
                            bad.push(format!("{}:{}: {}", p.display(), i + 1, l));
                        }
                    }
                }
            }
        }
        assert!(
            bad.is_empty(),
            "ask Os::rules() instead:\n{}",
            bad.join("\n")
        );
    }
}
