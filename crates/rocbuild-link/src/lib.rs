//! How installed native files find their dependencies at run time: one [`Relinker`] per
//! platform, used by the install (rocbuild's own builds) and by `repair` (pip's files).
//!
//! - Linux ([`elf::Runpath`]): DT_RUNPATH on every artifact.
//! - macOS ([`macho::LoaderPath`]): LC_RPATH entries, then an ad-hoc re-sign.
//! - Windows ([`windows::PreloadHook`]): no search path is stored in a DLL; a startup hook adds
//!   the outside directories and preloads the DLLs.

use std::path::{Path, PathBuf};

use rocbuild_probe::{LinkMethod, Os};
use serde::Serialize;

use rocbuild_native::{Binary, NativeError};

pub mod elf;
pub mod macho;
pub mod windows;

pub use windows::{preload_dirs_in, preload_module, preload_order, preload_paths, preload_pth};

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

/// Where native files go and what they must find.
pub struct Placement<'a> {
    /// The recipe (names the Windows hook).
    pub recipe: &'a str,
    /// The package's import directory (`torchcodec`, `llama_cpp/lib`).
    pub import_dir: &'a str,
    /// Where the files are installed.
    pub dest: &'a Path,
    pub site: &'a Path,
    /// Directories they must find at run time.
    pub finds: &'a [PathBuf],
    /// Directories whose package adds them itself on Windows (torch's lib dir: torch's
    /// `__init__` sets up its DLLs its own way, and must load them first).
    pub own: &'a [PathBuf],
}

/// How one platform's loader is told where a native file's dependencies are.
pub trait Relinker: Sync {
    /// The set-up for native files installed at `at`.
    fn plan(&self, at: &Placement<'_>) -> Link;
    /// What `file` (in site-packages, read as `bin`) gets so that it also finds `dirs`: its
    /// whole new RUNPATH (ELF), the LC_RPATHs to add (Mach-O), the hook's directories (PE).
    fn repair_entries(
        &self,
        site: &Path,
        file: &Path,
        bin: &Binary,
        dirs: &[PathBuf],
    ) -> Vec<String>;
    /// The set-up that gives a file the search entries [`Relinker::repair_entries`] chose;
    /// None where no file holds them (Windows: the hook carries them).
    fn with_entries(&self, entries: &[String]) -> Option<Link>;
    /// Edit one staged file as `link` says; a data file among the artifacts (a `.json`, a
    /// `.py`) is left alone.
    fn apply(&self, link: &Link, file: &Path) -> Result<()>;
}

/// The relinker of `os`'s loader.
pub fn relinker(os: Os) -> &'static dyn Relinker {
    match os.rules().link_method() {
        LinkMethod::Runpath => &elf::Runpath,
        LinkMethod::LoaderPath => &macho::LoaderPath,
        LinkMethod::Preload => &windows::PreloadHook,
    }
}

impl Link {
    /// Decide the set-up for artifacts installed on `os` at `at`.
    pub fn plan(os: Os, at: &Placement<'_>) -> Link {
        relinker(os).plan(at)
    }

    /// The relinker that made this set-up.
    fn relinker(&self) -> &'static dyn Relinker {
        match self {
            Link::Runpath { .. } => &elf::Runpath,
            Link::MachO { .. } => &macho::LoaderPath,
            Link::Preload(_) => &windows::PreloadHook,
        }
    }

    /// Whether applying it invalidates a code signature, so the file is signed again.
    pub fn resigns(&self) -> bool {
        matches!(self, Link::MachO { resign: true, .. })
    }

    /// The RUNPATH entries, for the manifest (empty off Linux).
    pub fn runpath(&self) -> Vec<String> {
        match self {
            Link::Runpath { entries } => entries.clone(),
            _ => Vec::new(),
        }
    }
}

/// Set the search paths of one staged file as `link` says (its own platform's relinker).
pub fn apply(link: &Link, file: &Path) -> Result<()> {
    link.relinker().apply(link, file)
}

fn magic(file: &Path) -> [u8; 4] {
    use std::io::Read;
    let mut m = [0u8; 4];
    let _ = std::fs::File::open(file).and_then(|mut f| f.read_exact(&mut m));
    m
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
    for e in entries(origin, dest, site, finds) {
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// The entry for each of `finds` seen from `dest` ([`search_entries`] without `origin` itself
/// first: `origin` appears only when a directory is `dest`), in order, without repeats.
fn entries(origin: &str, dest: &Path, site: &Path, finds: &[PathBuf]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
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
        let at = Placement {
            recipe: "torchcodec",
            import_dir: "torchcodec",
            dest: &site.join("torchcodec"),
            site,
            finds: &finds,
            own: &own,
        };
        match Link::plan(Os::Windows, &at) {
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
        fn at<'a>(dest: &'a Path, site: &'a Path, finds: &'a [PathBuf]) -> Placement<'a> {
            Placement {
                recipe: "torchcodec",
                import_dir: "torchcodec",
                dest,
                site,
                finds,
                own: &[],
            }
        }
        let site = Path::new("/v/lib/python3.11/site-packages");
        let finds = [
            site.join("torch/lib"),
            PathBuf::from("/opt/homebrew/opt/ffmpeg/lib"),
        ];
        let dest = site.join("torchcodec");
        assert_eq!(
            Link::plan(Os::Linux, &at(&dest, site, &finds)),
            Link::Runpath {
                entries: vec![
                    "$ORIGIN".into(),
                    "$ORIGIN/../torch/lib".into(),
                    "/opt/homebrew/opt/ffmpeg/lib".into()
                ]
            }
        );
        assert_eq!(
            Link::plan(Os::Macos, &at(&dest, site, &finds)),
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

    /// What `repair` gives a file pip installed: each relinker's entries, relative inside
    /// site-packages and absolute outside; ELF keeps the file's own RUNPATH first, Mach-O
    /// adds only what the file lacks, a DLL gets the hook's directories.
    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it makes Linux and macOS search paths from Unix paths"
    )]
    fn repair_entries_per_platform() {
        let site = Path::new("/v/lib/python3.12/site-packages");
        let tc = site.join("torchcodec");
        let file = tc.join("libtorchcodec_core7.so");
        let dirs = [
            tc.clone(),
            site.join("torch/lib"),
            PathBuf::from("/opt/homebrew/lib"),
        ];
        // A real ELF library with a RUNPATH of its own.
        let t = tempfile::tempdir().unwrap();
        let so = t.path().join("libx.so");
        let c = t.path().join("x.c");
        std::fs::write(&c, "int x(void) { return 1; }\n").unwrap();
        let o = Command::new("cc")
            .args([
                "-shared",
                "-fPIC",
                "-Wl,--enable-new-dtags,-rpath,/old",
                "-o",
            ])
            .arg(&so)
            .arg(&c)
            .output()
            .expect("cc");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut bin = rocbuild_native::read_binary(&so).unwrap();
        assert_eq!(bin.runpath, ["/old"]);
        assert_eq!(
            relinker(Os::Linux).repair_entries(site, &file, &bin, &dirs),
            [
                "/old",
                "$ORIGIN",
                "$ORIGIN/../torch/lib",
                "/opt/homebrew/lib"
            ]
        );
        bin.rpath = vec!["@loader_path".into()];
        assert_eq!(
            relinker(Os::Macos).repair_entries(site, &file, &bin, &dirs),
            ["@loader_path/../torch/lib", "/opt/homebrew/lib"]
        );
        assert_eq!(
            relinker(Os::Windows).repair_entries(site, &file, &bin, &dirs[2..]),
            ["/opt/homebrew/lib"]
        );
    }
}
