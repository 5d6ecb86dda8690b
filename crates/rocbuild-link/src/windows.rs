//! Windows: no search path is stored in a DLL. A startup hook (a `.pth` line importing a
//! generated module) adds the outside directories with `os.add_dll_directory` and preloads the
//! DLLs the artifacts need from there by absolute path, when the package is first imported. No
//! upstream file is edited, and `restore` removes the two files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rocbuild_native::Binary;
use rocbuild_probe::{join, Os};

use crate::{Link, Placement, Preload, Relinker, Result};

/// The DLL preload hook.
pub struct PreloadHook;

impl Relinker for PreloadHook {
    fn plan(&self, at: &Placement<'_>) -> Link {
        let module = format!("_rocbuild_preload_{}", at.recipe.replace('-', "_"));
        let key = |p: &Path| p.display().to_string().to_lowercase().replace('/', "\\");
        let own: Vec<String> = at.own.iter().map(|p| key(p)).collect();
        let mut dirs: Vec<PathBuf> = Vec::new();
        for f in at.finds {
            if !own.contains(&key(f)) && !f.as_os_str().is_empty() && !dirs.contains(f) {
                dirs.push(f.clone());
            }
        }
        Link::Preload(Preload {
            module_rel: format!("{module}.py"),
            pth_rel: format!("{module}.pth"),
            module,
            trigger: at
                .import_dir
                .split('/')
                .next()
                .unwrap_or(at.import_dir)
                .to_string(),
            dirs,
        })
    }

    /// The hook's directories: a DLL holds no search path of its own.
    fn repair_entries(
        &self,
        _site: &Path,
        _file: &Path,
        _bin: &Binary,
        dirs: &[PathBuf],
    ) -> Vec<String> {
        dirs.iter().map(|d| d.display().to_string()).collect()
    }

    fn with_entries(&self, _entries: &[String]) -> Option<Link> {
        None
    }

    /// Nothing: no DLL is edited.
    fn apply(&self, _link: &Link, _file: &Path) -> Result<()> {
        Ok(())
    }
}

/// Lower-cased DLL file names in `dirs`, mapped to their paths (first directory wins).
fn dlls_in(dirs: &[PathBuf]) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(d) else {
            continue;
        };
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
    rocbuild_native::read_binary(path).map(|b| b.needed)
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

/// The directories a preload module written by [`preload_module`] adds (its `DIRS`), as
/// written there.
pub fn preload_dirs_in(module_text: &str) -> Vec<String> {
    module_text
        .lines()
        .skip_while(|l| !l.starts_with("DIRS = ["))
        .skip(1)
        .take_while(|l| !l.starts_with(']'))
        .filter_map(|l| serde_json::from_str::<String>(l.trim().trim_end_matches(',')).ok())
        .collect()
}

/// The `.pth` line: site.py executes lines that start with `import`.
pub fn preload_pth(p: &Preload) -> String {
    format!("import {}\n", p.module)
}

/// Where a Windows plan puts the hook, for display.
pub fn preload_paths(os: Os, site: &Path, p: &Preload) -> (PathBuf, PathBuf) {
    (
        join(os, site, &[&p.module_rel]),
        join(os, site, &[&p.pth_rel]),
    )
}
