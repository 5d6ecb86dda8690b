//! `rocbuild bundle`: the minimal set of non-system libraries a frozen app needs, copied with
//! the layout its loaders expect. Files under site-packages keep their path below it
//! (`torch/lib/libc10.so`, `_rocm_sdk_core/bin/amdhip64_6.dll`), because RUNPATHs such as
//! `$ORIGIN/../torch/lib` and a package's own `add_dll_directory` calls point there; anything
//! else goes beside the first library that needs it, which every loader searches (`$ORIGIN`
//! when the RUNPATH has it, the DLL's directory, `@loader_path`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::DoctorError;
use crate::linkage::{self, Reader, Search};
use crate::provider::{classify, site_packages_of, Source};

#[derive(Debug, Clone, Serialize)]
pub struct Copied {
    pub from: PathBuf,
    /// Relative to the bundle directory.
    pub to: PathBuf,
    pub size: u64,
    /// Who provides it: the distribution that installed it (`package nvidia-cublas-cu12`), an
    /// SDK, or its directory.
    pub provider: Source,
}

#[derive(Debug, Clone, Serialize)]
pub struct BundleReport {
    pub into: PathBuf,
    pub copied: Vec<Copied>,
    pub total_size: u64,
    /// Imports nothing exports: the bundle is complete, but these would fail at load time.
    pub warnings: Vec<String>,
    /// What a PyInstaller spec's `binaries=` takes: `(source, dest_dir)` for each copied file,
    /// the source where it was found, the directory relative to the app's root (`.` for the root).
    pub binaries: Vec<(PathBuf, String)>,
    /// DLLs a bundled file names in its data but does not import (`LoadLibrary` by name, as
    /// CTranslate2 loads cuBLAS): loaded at run time, not followed, not bundled.
    pub runtime_loaded: Vec<RuntimeLoaded>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RuntimeLoaded {
    pub name: String,
    /// The bundled file whose data holds the name.
    pub named_in: PathBuf,
}

/// The DLL names the bundled PE files hold as data, that are not bundled themselves.
fn runtime_loaded(copied: &[Copied]) -> Vec<RuntimeLoaded> {
    let bundled: std::collections::BTreeSet<String> = copied
        .iter()
        .filter_map(|c| c.to.file_name())
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .collect();
    let mut out: Vec<RuntimeLoaded> = Vec::new();
    for c in copied {
        if rocbuild_native::format_of(&c.from) != Some(rocbuild_native::Format::Pe) {
            continue;
        }
        let Ok(bytes) = std::fs::read(&c.from) else {
            continue;
        };
        for name in rocbuild_native::runtime_dll_names(&bytes).unwrap_or_default() {
            let lower = name.to_ascii_lowercase();
            if bundled.contains(&lower) || out.iter().any(|r| r.name.to_ascii_lowercase() == lower)
            {
                continue;
            }
            out.push(RuntimeLoaded {
                name,
                named_in: c.to.clone(),
            });
        }
    }
    out
}

/// `dest_dir` in PyInstaller's sense: the directory of `to` with `/` separators, `.` at the top.
fn dest_dir(to: &Path) -> String {
    let dir: Vec<String> = to
        .parent()
        .into_iter()
        .flat_map(Path::components)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if dir.is_empty() {
        ".".into()
    } else {
        dir.join("/")
    }
}

/// The `binaries=` list as a Python literal: a list of 2-tuples of str. A JSON string is a
/// valid Python str literal (escapes included), so paths with quotes or backslashes stay exact.
pub fn pyinstaller(r: &BundleReport) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"));
    let mut o = String::from("[\n");
    for (from, dir) in &r.binaries {
        o.push_str(&format!(
            "    ({}, {}),\n",
            quote(&from.to_string_lossy()),
            quote(dir)
        ));
    }
    o.push_str("]\n");
    o
}

/// Where `file` goes in the bundle, given where its loader (if any) went.
fn destination(file: &Path, name: &str, loader_dest: Option<&Path>) -> PathBuf {
    if let Some((_, rest)) = site_packages_of(file) {
        return rest;
    }
    match loader_dest.and_then(Path::parent) {
        Some(dir) => dir.join(name),
        None => PathBuf::from(name),
    }
}

/// Work out the set, refuse if anything is missing, then copy.
/// Where a venv that holds the files keeps DLLs installed as wheel data (the `msvc-runtime`
/// wheel puts MSVCP140/VCRUNTIME140 into the venv's root and its `Scripts`), and the
/// directories its DLL preload hooks add: searched after `--search`, so they are found with no
/// option.
fn venv_runtime_dirs(files: &[PathBuf]) -> Vec<PathBuf> {
    // Only where libraries are found through preload hooks (DLLs) does wheel data hold them.
    let preload: Vec<&dyn rocbuild_probe::PlatformRules> = rocbuild_probe::Os::ALL
        .into_iter()
        .map(|o| o.rules())
        .filter(|r| r.link_method() == rocbuild_probe::LinkMethod::Preload)
        .collect();
    let mut out: Vec<PathBuf> = Vec::new();
    for f in files.iter().map(|f| linkage::absolute(f)) {
        for rules in &preload {
            venv_dll_dirs(&f, *rules, &mut out);
        }
    }
    out
}

/// The venv (or Python directory) holding `f`, laid out by `rules`: its root, its scripts
/// folder and the directories its DLL preload hooks add, each onto `out` once.
fn venv_dll_dirs(f: &Path, rules: &dyn rocbuild_probe::PlatformRules, out: &mut Vec<PathBuf>) {
    // A venv, or a Python directory used as one (the Windows embeddable distribution:
    // python.exe, its DLLs and Lib\site-packages, no pyvenv.cfg).
    let python = format!("python{}", rules.exe_suffix());
    let Some(root) = f.ancestors().find(|a| {
        a.join("pyvenv.cfg").is_file()
            || (a.join(&python).is_file() && rules.site_packages(a).is_some())
    }) else {
        return;
    };
    let scripts = root.join(rules.scripts_dir());
    // And the directories rocbuild's DLL preload hooks there add (an SDK's, Intel's OpenMP
    // runtime in the venv's Library\bin): the package finds its DLLs there.
    let hooks = rules
        .site_packages(root)
        .map(|site| crate::doctor::preload_hook_dirs(&site))
        .unwrap_or_default();
    for d in [root.to_path_buf(), scripts].into_iter().chain(hooks) {
        if d.is_dir() && !out.contains(&d) {
            out.push(d);
        }
    }
}

pub fn bundle(
    files: &[PathBuf],
    into: &Path,
    search_dirs: &[PathBuf],
    gpu: &rocbuild_probe::GpuTargets,
    loader: &linkage::LoaderEnv,
) -> Result<BundleReport, DoctorError> {
    DoctorError::refuse_folders(files, "bundle")?;
    let gpu_archs = gpu.names();
    let reader = Reader::leaked();
    // Absolute once, at the edge: the same layout for a relative and an absolute spelling.
    let into = &linkage::absolute(into);
    let mut extra_dirs: Vec<PathBuf> = search_dirs.iter().map(|d| linkage::absolute(d)).collect();
    for d in venv_runtime_dirs(files) {
        if !extra_dirs.contains(&d) {
            extra_dirs.push(d);
        }
    }
    let search = Search {
        extra_dirs,
        loader: loader.clone(),
        ..Default::default()
    };
    // source path -> destination (relative), in load order; roots first.
    let mut plan: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    let mut order: Vec<PathBuf> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    let mut warnings = Vec::new();
    for file in files {
        let file = &linkage::absolute(file);
        let l = linkage::link(file, &search, reader)?;
        let root_name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if !plan.contains_key(file) {
            plan.insert(file.clone(), destination(file, &root_name, None));
            order.push(file.clone());
        }
        // The interpreter's own DLL comes with the app's Python (PyInstaller ships it): never
        // copied, never missing.
        for m in l
            .missing
            .iter()
            .filter(|m| !rocbuild_native::is_python_dll(&m.name))
        {
            let by: Vec<String> = m
                .needed_by
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            missing.push(format!("{} (needed by {})", m.name, by.join(", ")));
        }
        for u in &l.unresolved {
            if rocbuild_native::is_python_c_api(&u.name) {
                continue;
            }
            warnings.push(format!(
                "{} imports {} that nothing exports",
                u.importer.display(),
                u.demangled.as_deref().unwrap_or(&u.name)
            ));
        }
        for f in &l.found {
            let Some(path) = &f.path else { continue };
            if classify(f) == Source::System
                || plan.contains_key(path)
                || rocbuild_native::is_python_dll(&f.name)
            {
                continue;
            }
            let loader = f.needed_by.first().and_then(|p| plan.get(p)).cloned();
            plan.insert(path.clone(), destination(path, &f.name, loader.as_deref()));
            order.push(path.clone());
        }
    }
    missing.sort();
    missing.dedup();
    if !missing.is_empty() {
        let count = missing.len();
        return Err(DoctorError::BundleMissing {
            count,
            help: format!(
                "these must be found first (install them, or pass --search DIR):\n  {}{}",
                missing.join("\n  "),
                if missing
                    .iter()
                    .any(|m| rocbuild_native::is_msvc_runtime(m.split(' ').next().unwrap_or("")))
                {
                    "\nthe MSVC runtime (MSVCP140, VCRUNTIME140*) ships with the app: `pip install msvc-runtime` (then --search its directory) or copy it from the Visual C++ Redistributable"
                } else {
                    ""
                }
            ),
        });
    }
    // The GPU kernels the bundled ROCm libraries load by path, beside them as they expect.
    for lib in order.clone() {
        let (kernels, lacking) = crate::bundle_kernels::kernel_files(&lib, &plan[&lib], gpu_archs);
        warnings.extend(lacking);
        for k in kernels {
            if !plan.contains_key(&k.from) {
                plan.insert(k.from.clone(), k.to);
                order.push(k.from);
            }
        }
    }
    let mut copied = Vec::new();
    for from in order {
        let to = plan[&from].clone();
        let dest = into.join(&to);
        if let Some(parent) = dest.parent() {
            fs_err::create_dir_all(parent).map_err(DoctorError::io("create", parent))?;
        }
        // fs::copy follows symlinks: the bundle holds the library under the name its
        // dependents ask for, not a dangling link.
        fs_err::copy(&from, &dest).map_err(DoctorError::io("copy", &from))?;
        // The size as the copy has it on disk: what std's copy returns on Windows is the
        // byte count CopyFileExW reports to its progress callback, 0 under Wine.
        let size = fs_err::metadata(&dest)
            .map_err(DoctorError::io("copy", &from))?
            .len();
        let provider = classify(&linkage::Found {
            name: to
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
            path: Some(from.clone()),
            how: String::new(),
            needed_by: vec![],
            system: false,
        });
        copied.push(Copied {
            from,
            to,
            size,
            provider,
        });
    }
    Ok(report(into, copied, warnings))
}

/// The report of a bundle made: its totals and PyInstaller's binaries list.
fn report(into: &Path, copied: Vec<Copied>, warnings: Vec<String>) -> BundleReport {
    let total_size = copied.iter().map(|c| c.size).sum();
    let binaries = copied
        .iter()
        .map(|c| (c.from.clone(), dest_dir(&c.to)))
        .collect();
    let runtime_loaded = runtime_loaded(&copied);
    BundleReport {
        into: into.to_path_buf(),
        copied,
        total_size,
        warnings,
        binaries,
        runtime_loaded,
    }
}

fn size(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

pub fn human(r: &BundleReport) -> String {
    let mut o = String::new();
    for c in &r.copied {
        o.push_str(&format!(
            "  {}  ({}, {}, from {})\n",
            c.to.display(),
            size(c.size),
            c.provider,
            c.from.display()
        ));
    }
    o.push_str(&format!(
        "copied {} {} ({}) into {}\n",
        r.copied.len(),
        if r.copied.len() == 1 { "file" } else { "files" },
        size(r.total_size),
        r.into.display()
    ));
    if !r.runtime_loaded.is_empty() {
        o.push_str(
            "loaded at run time, not followed (named in a file's data, not imported; ship them if the app uses them):\n",
        );
        for l in &r.runtime_loaded {
            o.push_str(&format!(
                "  {}  (named in {})\n",
                l.name,
                l.named_in.display()
            ));
        }
    }
    for w in &r.warnings {
        o.push_str(&format!("warning: {w}\n"));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Windows venv's DLL preload hook (as written for Wine, `Z:\…`) names a directory
    /// outside the package (Intel's OpenMP in the venv's Library\bin): bundle searches it.
    #[test]
    fn the_directories_of_the_venvs_preload_hooks_are_searched() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("venv");
        let site = root.join("Lib").join("site-packages");
        let lib_bin = root.join("Library").join("bin");
        std::fs::create_dir_all(site.join("pkg")).unwrap();
        std::fs::create_dir_all(&lib_bin).unwrap();
        std::fs::write(root.join("python.exe"), "").unwrap();
        let wine = format!("Z:{}", lib_bin.display().to_string().replace('/', "\\"));
        let hook = format!(
            "import os\nDIRS = [\n    {},\n]\n",
            serde_json::to_string(&wine).unwrap()
        );
        std::fs::write(site.join("_rocbuild_preload_pkg.py"), hook).unwrap();
        let dirs = venv_runtime_dirs(&[site.join("pkg").join("m.pyd")]);
        assert!(dirs.contains(&lib_bin), "{dirs:?}");
    }

    #[test]
    fn pyinstaller_list_is_a_python_literal_with_dest_dirs() {
        let r = BundleReport {
            into: "/b".into(),
            copied: vec![],
            total_size: 0,
            warnings: vec![],
            runtime_loaded: vec![],
            binaries: vec![
                (
                    "/s/ctranslate2/ctranslate2.dll".into(),
                    dest_dir(Path::new("ctranslate2/ctranslate2.dll")),
                ),
                ("/r/it's\\x.dll".into(), dest_dir(Path::new("x.dll"))),
            ],
        };
        assert_eq!(
            pyinstaller(&r),
            "[\n    (\"/s/ctranslate2/ctranslate2.dll\", \"ctranslate2\"),\n    (\"/r/it's\\\\x.dll\", \".\"),\n]\n"
        );
    }
}
