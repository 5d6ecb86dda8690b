//! How installed native files find their dependencies at run time, per platform.
//!
//! - Linux: DT_RUNPATH on every artifact (`$ORIGIN`, torch's lib dir relative to it, outside
//!   directories absolute).
//! - macOS: LC_RPATH entries (`@loader_path`, …) on every `.dylib` and `.so`, then an ad-hoc
//!   re-sign (an edited Mach-O's signature is invalid and arm64 macOS refuses to load it).
//! - Windows: no search path is stored in a DLL. A startup hook (a `.pth` line importing a
//!   generated module) adds the outside directories with `os.add_dll_directory` and preloads
//!   the DLLs the artifacts need from there by absolute path, when the package is first
//!   imported. No upstream file is edited, and `restore` removes the two files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rocbuild_probe::Os;
use serde::Serialize;

use crate::error::{EngineError, Result};
use crate::plan::{join, search_entries};

/// The run-time search set-up for one install.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Link {
    /// ELF: DT_RUNPATH of each installed native file.
    Runpath { entries: Vec<String> },
    /// Mach-O: LC_RPATH entries added to each installed native file, then re-signed.
    MachO { rpaths: Vec<String>, resign: bool },
    /// Windows: the DLL preload hook.
    Preload(Preload),
}

/// The Windows startup hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preload {
    /// Module name (`_rocbuild_preload_torchcodec`).
    pub module: String,
    /// Paths relative to site-packages (with `/`) of the module and of its `.pth` line.
    pub module_rel: String,
    pub pth_rel: String,
    /// The import that triggers the preload (the package's top-level name).
    pub trigger: String,
    /// Directories outside the venv the DLLs come from (`add_dll_directory`).
    pub dirs: Vec<PathBuf>,
}

impl Link {
    /// Decide the set-up for artifacts installed in `dest`, which must find `finds`.
    pub fn plan(os: Os, recipe: &str, import_dir: &str, dest: &Path, site: &Path, finds: &[PathBuf]) -> Link {
        match os {
            Os::Linux => Link::Runpath {
                entries: search_entries("$ORIGIN", dest, site, finds),
            },
            Os::Macos => Link::MachO {
                rpaths: search_entries("@loader_path", dest, site, finds),
                resign: true,
            },
            Os::Windows => {
                let module = format!("_rocbuild_preload_{}", recipe.replace('-', "_"));
                let site_s = site.display().to_string().to_lowercase();
                let mut dirs: Vec<PathBuf> = Vec::new();
                for f in finds {
                    // Inside the venv torch (and the package itself) add their own directories.
                    let inside = f.display().to_string().to_lowercase().starts_with(&site_s);
                    if !inside && !f.as_os_str().is_empty() && !dirs.contains(f) {
                        dirs.push(f.clone());
                    }
                }
                Link::Preload(Preload {
                    module_rel: format!("{module}.py"),
                    pth_rel: format!("{module}.pth"),
                    module,
                    trigger: import_dir.split('/').next().unwrap_or(import_dir).to_string(),
                    dirs,
                })
            }
        }
    }

    /// The RUNPATH entries, for the manifest (empty off Linux).
    pub fn runpath(&self) -> Vec<String> {
        match self {
            Link::Runpath { entries } => entries.clone(),
            _ => Vec::new(),
        }
    }
}

/// Lower-cased DLL file names in `dirs`, mapped to their paths (first directory wins).
fn dlls_in(dirs: &[PathBuf]) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(d) else { continue };
        let mut files: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        files.sort();
        for p in files {
            let name = p.file_name().map(|n| n.to_string_lossy().to_lowercase());
            if let Some(n) = name.filter(|n| n.ends_with(".dll")) {
                out.entry(n).or_insert(p);
            }
        }
    }
    out
}

fn needed(path: &Path) -> Result<Vec<String>> {
    rocbuild_native::read_binary(path)
        .map(|b| b.needed)
        .map_err(EngineError::from)
}

/// The DLLs from the preload directories that `artifacts` need (directly or through each
/// other), dependencies first, so each `WinDLL` finds its own imports already loaded.
pub fn preload_order(artifacts: &[PathBuf], dirs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let available = dlls_in(dirs);
    let mut order: Vec<PathBuf> = Vec::new();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut visiting: BTreeSet<String> = BTreeSet::new();
    fn visit(
        name: &str,
        available: &BTreeMap<String, PathBuf>,
        done: &mut BTreeSet<String>,
        visiting: &mut BTreeSet<String>,
        order: &mut Vec<PathBuf>,
    ) -> Result<()> {
        let key = name.to_lowercase();
        let Some(path) = available.get(&key) else {
            return Ok(()); // a system DLL, or one found elsewhere: not ours to preload
        };
        if done.contains(&key) || !visiting.insert(key.clone()) {
            return Ok(()); // done, or an import cycle (Windows resolves those itself)
        }
        for dep in needed(path)? {
            visit(&dep, available, done, visiting, order)?;
        }
        visiting.remove(&key);
        done.insert(key);
        order.push(path.clone());
        Ok(())
    }
    for a in artifacts {
        for dep in needed(a)? {
            visit(&dep, &available, &mut done, &mut visiting, &mut order)?;
        }
    }
    Ok(order)
}

fn py_str(p: &Path) -> String {
    // A Python string literal; json escaping is valid Python for these characters.
    serde_json::to_string(&p.display().to_string()).unwrap_or_default()
}

/// The text of the preload module.
pub fn preload_module(p: &Preload, recipe: &str, version: &str, dlls: &[PathBuf]) -> String {
    let list = |items: &[PathBuf]| -> String {
        if items.is_empty() {
            return "[]".into();
        }
        let mut s = String::from("[\n");
        for i in items {
            s.push_str(&format!("    {},\n", py_str(i)));
        }
        s.push(']');
        s
    };
    format!(
        r#"# Written by rocbuild for {recipe} {version}; `rocbuild restore {recipe}` removes it.
# Windows looks for a DLL's dependencies only in the DLL's own directory, System32 and the
# directories given to os.add_dll_directory. {recipe}'s native libraries need DLLs from the
# directories below, so when `{trigger}` is first imported this adds those directories and
# loads the DLLs by absolute path, dependencies first.
import os
import sys

DIRS = {dirs}
DLLS = {dlls}
_handles = []
_done = False


def preload():
    import ctypes

    for d in DIRS:
        if os.path.isdir(d):
            _handles.append(os.add_dll_directory(d))
    for p in DLLS:
        try:
            _handles.append(ctypes.WinDLL(p))
        except OSError:
            pass  # `rocbuild doctor {recipe}` says which one and why


class _Finder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        global _done
        if name == "{trigger}" and not _done:
            _done = True
            preload()
        return None


if os.name == "nt":
    sys.meta_path.insert(0, _Finder)
"#,
        trigger = p.trigger,
        dirs = list(&p.dirs),
        dlls = list(dlls),
    )
}

/// The `.pth` line: site.py executes lines that start with `import`.
pub fn preload_pth(p: &Preload) -> String {
    format!("import {}\n", p.module)
}

/// Where a Windows plan puts the hook, for display.
pub fn preload_paths(os: Os, site: &Path, p: &Preload) -> (PathBuf, PathBuf) {
    (join(os, site, &[&p.module_rel]), join(os, site, &[&p.pth_rel]))
}

/// Set the search paths of one staged native file.
pub fn apply(link: &Link, file: &Path) -> Result<()> {
    match link {
        Link::Runpath { entries } => Ok(rocbuild_native::set_runpath(file, entries)?),
        Link::MachO { rpaths, .. } => Ok(rocbuild_native::add_macho_rpaths(file, rpaths)?),
        Link::Preload(_) => Ok(()),
    }
}
