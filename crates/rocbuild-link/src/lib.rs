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

use rocbuild_probe::{LinkMethod, Os};
use serde::Serialize;

use rocbuild_native::NativeError;
use rocbuild_probe::join;

type Result<T> = std::result::Result<T, NativeError>;

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
    /// `own` are directories whose package adds them itself on Windows (torch's lib dir:
    /// torch's `__init__` sets up its DLLs its own way, and must load them first).
    pub fn plan(
        os: Os,
        recipe: &str,
        import_dir: &str,
        dest: &Path,
        site: &Path,
        finds: &[PathBuf],
        own: &[PathBuf],
    ) -> Link {
        match os.rules().link_method() {
            LinkMethod::Runpath => Link::Runpath {
                entries: search_entries("$ORIGIN", dest, site, finds),
            },
            LinkMethod::LoaderPath => Link::MachO {
                rpaths: search_entries("@loader_path", dest, site, finds),
                resign: true,
            },
            LinkMethod::Preload => {
                let module = format!("_rocbuild_preload_{}", recipe.replace('-', "_"));
                let key = |p: &Path| p.display().to_string().to_lowercase().replace('/', "\\");
                let own: Vec<String> = own.iter().map(|p| key(p)).collect();
                let mut dirs: Vec<PathBuf> = Vec::new();
                for f in finds {
                    if !own.contains(&key(f)) && !f.as_os_str().is_empty() && !dirs.contains(f) {
                        dirs.push(f.clone());
                    }
                }
                Link::Preload(Preload {
                    module_rel: format!("{module}.py"),
                    pth_rel: format!("{module}.pth"),
                    module,
                    trigger: import_dir
                        .split('/')
                        .next()
                        .unwrap_or(import_dir)
                        .to_string(),
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

fn magic(file: &Path) -> [u8; 4] {
    use std::io::Read;
    let mut m = [0u8; 4];
    let _ = std::fs::File::open(file).and_then(|mut f| f.read_exact(&mut m));
    m
}

/// Set the search paths of one staged file; data files among the artifacts (a `.json`, a
/// `.py`) are left alone.
pub fn apply(link: &Link, file: &Path) -> Result<()> {
    match link {
        Link::Runpath { entries } if magic(file) == *b"\x7fELF" => {
            Ok(rocbuild_native::set_runpath(file, entries)?)
        }
        Link::MachO { rpaths, .. }
            if matches!(
                u32::from_be_bytes(magic(file)),
                0xfeedface | 0xfeedfacf | 0xcefaedfe | 0xcffaedfe | 0xcafebabe
            ) =>
        {
            Ok(rocbuild_native::add_macho_rpaths(file, rpaths)?)
        }
        _ => Ok(()),
    }
}

/// Directories the dynamic loader searches anyway: no RUNPATH entry needed.
fn is_default_lib_dir(p: &Path) -> bool {
    matches!(
        p.to_str().unwrap_or("").trim_end_matches('/'),
        "/lib"
            | "/lib64"
            | "/usr/lib"
            | "/usr/lib64"
            | "/usr/lib/x86_64-linux-gnu"
            | "/lib/x86_64-linux-gnu"
            | "/usr/lib/aarch64-linux-gnu"
            | "/lib/aarch64-linux-gnu"
    )
}

/// Search entries for files installed in `dest`: `origin` (`$ORIGIN`, `@loader_path`), then
/// each directory they must find, relative to `origin` when inside the venv (the venv stays
/// relocatable, and a wheel made of it finds the same directories in another venv): its
/// site-packages, or its own prefix (`<venv>/lib`, where PyPI's data wheels such as
/// onednn-cpu-gomp put shared libraries); absolute otherwise.
pub fn search_entries(origin: &str, dest: &Path, site: &Path, finds: &[PathBuf]) -> Vec<String> {
    let mut out = vec![origin.to_string()];
    let venv_root = rocbuild_probe::platform::venv_root_of(site);
    for f in finds {
        if f.as_os_str().is_empty() || is_default_lib_dir(f) {
            continue;
        }
        let inside = f.starts_with(site) || venv_root.is_some_and(|r| f.starts_with(r));
        let entry = if inside {
            match pathdiff::diff_paths(f, dest) {
                Some(rel) if rel.as_os_str().is_empty() => origin.to_string(),
                Some(rel) => format!("{origin}/{}", rel.display()),
                None => f.display().to_string(),
            }
        } else {
            f.display().to_string()
        };
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    out
}

/// Linux RUNPATH entries for artifacts installed in `dest`.
pub fn runpath_entries(dest: &Path, site: &Path, finds: &[PathBuf]) -> Vec<String> {
    search_entries("$ORIGIN", dest, site, finds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// `name.dll` from C source, with the import libraries of `deps` (real PE files built by
    /// the mingw-w64 cross compiler).
    fn dll(dir: &Path, name: &str, src: &str, deps: &[&str]) -> PathBuf {
        let c = dir.join(format!("{name}.c"));
        std::fs::write(&c, src).unwrap();
        let out = dir.join(format!("{name}.dll"));
        let mut cmd = Command::new("x86_64-w64-mingw32-gcc");
        cmd.arg("-shared")
            .arg("-o")
            .arg(&out)
            .arg(&c)
            .arg(format!(
                "-Wl,--out-implib,{}",
                dir.join(format!("lib{name}.a")).display()
            ))
            .arg(format!("-L{}", dir.display()));
        for d in deps {
            cmd.arg(format!("-l{d}"));
        }
        let o = cmd
            .output()
            .expect("x86_64-w64-mingw32-gcc (apt-get install gcc-mingw-w64)");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    }

    fn windows_plan(site: &Path, ffmpeg_bin: &Path) -> Preload {
        let finds = vec![site.join("torch").join("lib"), ffmpeg_bin.to_path_buf()];
        let own = [site.join("torch").join("lib")];
        match Link::plan(
            Os::Windows,
            "torchcodec",
            "torchcodec",
            &site.join("torchcodec"),
            site,
            &finds,
            &own,
        ) {
            Link::Preload(p) => p,
            other => panic!("{other:?}"),
        }
    }

    /// `<venv>/lib` (PyPI's data wheels put shared libraries there) is found relative to the
    /// library, like site-packages: a wheel of the build finds it in another venv too.
    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it makes a Linux RUNPATH, which a Windows host never writes"
    )]
    fn the_venvs_own_lib_directory_is_relative() {
        let t = tempfile::tempdir().unwrap();
        let venv = t.path().join("venv");
        let site = venv.join("lib/python3.11/site-packages");
        std::fs::create_dir_all(&site).unwrap();
        let dest = site.join("ctranslate2");
        let finds = [venv.join("lib")];
        // Not a venv yet (no pyvenv.cfg): absolute.
        assert_eq!(
            runpath_entries(&dest, &site, &finds),
            [
                "$ORIGIN".to_string(),
                venv.join("lib").display().to_string()
            ]
        );
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        assert_eq!(
            runpath_entries(&dest, &site, &finds),
            ["$ORIGIN", "$ORIGIN/../../.."]
        );
    }

    #[test]
    fn the_dirs_of_a_written_hook_read_back() {
        let p = Preload {
            module: "_rocbuild_preload_x".into(),
            module_rel: "_rocbuild_preload_x.py".into(),
            pth_rel: "_rocbuild_preload_x.pth".into(),
            trigger: "x".into(),
            dirs: vec![
                PathBuf::from(r"Z:\ffmpeg\bin"),
                PathBuf::from(r"C:\hip\bin"),
            ],
        };
        let text = preload_module(
            &p,
            "x",
            "1.0",
            &[PathBuf::from(r"Z:\ffmpeg\bin\avutil-59.dll")],
        );
        assert_eq!(preload_dirs_in(&text), [r"Z:\ffmpeg\bin", r"C:\hip\bin"]);
        assert!(preload_dirs_in("import os\n").is_empty());
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it compiles its DLLs with `x86_64-w64-mingw32-gcc`"
    )]
    fn preloads_the_dlls_the_artifacts_need_dependencies_first() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("ffmpeg").join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        dll(
            &bin,
            "avutil-59",
            "__declspec(dllexport) int av_util(void) { return 59; }",
            &[],
        );
        dll(
            &bin,
            "avcodec-61",
            "int av_util(void); __declspec(dllexport) int av_codec(void) { return av_util() + 2; }",
            &["avutil-59"],
        );
        dll(
            &bin,
            "unrelated",
            "__declspec(dllexport) int other(void) { return 0; }",
            &[],
        );
        let art = tmp.path().join("art");
        std::fs::create_dir_all(&art).unwrap();
        for f in ["libavcodec-61.a", "libavutil-59.a"] {
            std::fs::copy(bin.join(f), art.join(f)).unwrap();
        }
        let core = dll(
            &art,
            "libtorchcodec_core7",
            "int av_codec(void); int av_util(void); __declspec(dllexport) int decode(void) { return av_codec() + av_util(); }",
            &["avcodec-61", "avutil-59"],
        );

        let site = tmp.path().join("site");
        let p = windows_plan(&site, &bin);
        assert_eq!(
            p.dirs,
            std::slice::from_ref(&bin),
            "torch's own lib dir is torch's business"
        );
        let order = preload_order(&[core], &p.dirs).unwrap();
        assert_eq!(
            order,
            [bin.join("avutil-59.dll"), bin.join("avcodec-61.dll")]
        );

        // The generated hook, run by a real Python with Windows' calls recorded: nothing
        // happens at start-up, the first `import torchcodec` adds the directory and loads the
        // DLLs by absolute path in that order, once.
        std::fs::create_dir_all(site.join("torchcodec")).unwrap();
        std::fs::write(site.join("torchcodec/__init__.py"), "").unwrap();
        std::fs::write(
            site.join(&p.module_rel),
            preload_module(&p, "torchcodec", "0.9.1", &order),
        )
        .unwrap();
        assert_eq!(preload_pth(&p), "import _rocbuild_preload_torchcodec\n");
        let driver = format!(
            r#"
import ctypes, json, os, sys
calls = []
os.name = "nt"
os.add_dll_directory = lambda d: calls.append(["dir", d])
ctypes.WinDLL = lambda p: calls.append(["dll", p])
sys.path.insert(0, {site:?})
import _rocbuild_preload_torchcodec
assert calls == [], calls
import json as again
import torchcodec
import importlib; importlib.reload(torchcodec)
print(json.dumps(calls))
"#,
            site = site.display().to_string()
        );
        let out = Command::new("python3")
            .args(["-c", &driver])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let calls: Vec<(String, String)> = serde_json::from_slice(&out.stdout).unwrap();
        let s = |p: &Path| p.display().to_string();
        assert_eq!(
            calls,
            [
                ("dir".to_string(), s(&bin)),
                ("dll".to_string(), s(&bin.join("avutil-59.dll"))),
                ("dll".to_string(), s(&bin.join("avcodec-61.dll"))),
            ]
        );
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it makes Linux and macOS search paths, which a Windows host never writes"
    )]
    fn search_entries_per_platform() {
        let site = Path::new("/v/lib/python3.11/site-packages");
        let finds = [
            site.join("torch/lib"),
            PathBuf::from("/opt/homebrew/opt/ffmpeg/lib"),
        ];
        let dest = site.join("torchcodec");
        assert_eq!(
            Link::plan(
                Os::Linux,
                "torchcodec",
                "torchcodec",
                &dest,
                site,
                &finds,
                &[]
            ),
            Link::Runpath {
                entries: vec![
                    "$ORIGIN".into(),
                    "$ORIGIN/../torch/lib".into(),
                    "/opt/homebrew/opt/ffmpeg/lib".into()
                ]
            }
        );
        assert_eq!(
            Link::plan(
                Os::Macos,
                "torchcodec",
                "torchcodec",
                &dest,
                site,
                &finds,
                &[]
            ),
            Link::MachO {
                rpaths: vec![
                    "@loader_path".into(),
                    "@loader_path/../torch/lib".into(),
                    "/opt/homebrew/opt/ffmpeg/lib".into()
                ],
                resign: true
            }
        );
    }
}
