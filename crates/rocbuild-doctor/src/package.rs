//! The packages `doctor` looks at, as found in the venv, and their native libraries.

use std::path::{Path, PathBuf};

use rocbuild_probe::{normalize_dist, Machine, Os};
use serde::Serialize;

/// A package `doctor` can check: torch itself, or one rocbuild has a recipe for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Subject {
    /// What the user types: `torch`, `torchcodec`, `ctranslate2`.
    pub name: String,
    /// Its directory under site-packages, which is also the module to import.
    pub import_dir: String,
    /// The pip distribution, for its version.
    pub distribution: String,
    /// The recipe that rebuilds it (`rocbuild NAME`), if rocbuild has one.
    pub recipe: Option<String>,
    /// Loads FFmpeg (one core library per FFmpeg major).
    pub ffmpeg: bool,
    /// Built against torch (its flavor must match torch's).
    pub torch: bool,
    /// `pip install NAME==X` when the index's own wheel of the release a rebuild would build
    /// loads with this torch (the recipe's stock-wheel data): the first fix to offer.
    pub stock_pip: Option<String>,
    /// Windows: the directories the package's own `__init__.py` adds with
    /// `os.add_dll_directory` (the recipe's `[package.windows-dll-dirs]`).
    pub dll_dirs: Option<DllDirs>,
    /// File-name globs of libraries of which the package loads one, chosen at run time
    /// (one per backend: `libfoo_cpu.so`, `libfoo_cuda130.so`, `libfoo_rocm64.so`): those that cannot load here
    /// are expected, as long as one of them can.
    pub loads_one_of: Vec<String>,
}

/// Directories a package adds with `os.add_dll_directory`, relative to site-packages, in
/// order; `in_one_try`: inside one `try`, so the first missing one stops the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DllDirs {
    pub dirs: Vec<String>,
    pub in_one_try: bool,
}

impl DllDirs {
    /// The directories really added in `site`, and the first missing one that stopped the
    /// rest (with what it stopped), when it did.
    pub fn added(&self, site: &Path) -> (Vec<PathBuf>, Option<(String, Vec<String>)>) {
        let mut added = Vec::new();
        for (i, d) in self.dirs.iter().enumerate() {
            let p = site.join(d);
            if p.is_dir() {
                added.push(p);
            } else if self.in_one_try {
                return (added, Some((d.clone(), self.dirs[i + 1..].to_vec())));
            }
        }
        (added, None)
    }
}

impl Subject {
    pub fn torch() -> Subject {
        Subject {
            name: "torch".into(),
            import_dir: "torch".into(),
            distribution: "torch".into(),
            recipe: None,
            ffmpeg: false,
            torch: true,
            stock_pip: None,
            dll_dirs: None,
            loads_one_of: Vec::new(),
        }
    }

    /// The packages rocbuild knows even without a recipe file at hand.
    pub fn known() -> Vec<Subject> {
        vec![
            Subject::torch(),
            Subject {
                name: "torchcodec".into(),
                import_dir: "torchcodec".into(),
                distribution: "torchcodec".into(),
                recipe: Some("torchcodec".into()),
                ffmpeg: true,
                torch: true,
                stock_pip: None,
                dll_dirs: None,
                loads_one_of: Vec::new(),
            },
            Subject {
                name: "ctranslate2".into(),
                import_dir: "ctranslate2".into(),
                distribution: "ctranslate2".into(),
                recipe: Some("ctranslate2".into()),
                ffmpeg: false,
                torch: false,
                stock_pip: None,
                dll_dirs: None,
                loads_one_of: Vec::new(),
            },
        ]
    }

    pub fn dir(&self, site: &Path) -> PathBuf {
        site.join(&self.import_dir)
    }

    /// Installed in this venv?
    pub fn present(&self, site: &Path) -> bool {
        self.dir(site).is_dir()
    }

    pub fn version(&self, m: &Machine) -> Option<String> {
        m.target
            .python
            .distributions
            .get(&normalize_dist(&self.distribution))
            .cloned()
    }

    /// What to tell the user to rebuild it.
    pub fn rebuild_hint(&self) -> String {
        match (&self.recipe, &self.stock_pip) {
            (Some(r), Some(pip)) => format!(
                "run `{pip}` (the index's own wheel loads with this torch), or `rocbuild {r}`"
            ),
            (Some(r), None) => format!("run `rocbuild {r}`"),
            (None, _) if self.name == "torch" => {
                "reinstall torch (`pip install --force-reinstall torch==VERSION`)".into()
            }
            (None, _) => format!(
                "install a build of {} made for this torch, or rebuild it from source",
                self.name
            ),
        }
    }
}

/// Is this file name a native library or extension module on `os`?
pub fn is_native_name(name: &str, os: Os) -> bool {
    os.rules().is_native_name(name)
}

/// Every native library of the package: under its directory (recursively) and in the
/// auditwheel/delvewheel side directories (`NAME.libs`, `NAME-VERSION.libs`), sorted.
pub fn native_libraries(site: &Path, subject: &Subject, os: Os) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut roots = vec![subject.dir(site)];
    if let Ok(entries) = std::fs::read_dir(site) {
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.ends_with(".libs")
                && (n == format!("{}.libs", subject.import_dir)
                    || n.starts_with(&format!("{}-", subject.distribution)))
            {
                roots.push(e.path());
            }
        }
    }
    for root in roots {
        walk(&root, os, &mut out, 0);
    }
    out.sort();
    out.dedup();
    out
}

fn walk(dir: &Path, os: Os, out: &mut Vec<PathBuf>, depth: usize) {
    // torch has headers and tests many levels down; native libraries are never that deep.
    if depth > 6 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let name = e.file_name().to_string_lossy().into_owned();
        if ft.is_dir() {
            if name != "__pycache__" && name != "include" && name != "share" {
                walk(&e.path(), os, out, depth + 1);
            }
        } else if is_native_name(&name, os) {
            out.push(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_names_per_platform() {
        assert!(is_native_name("libc10.so", Os::Linux));
        assert!(is_native_name("libctranslate2.so.4.8.1", Os::Linux));
        assert!(!is_native_name("libfoo.so.txt", Os::Linux));
        assert!(!is_native_name("torch.py", Os::Linux));
        assert!(is_native_name("_ext.cp311-win_amd64.pyd", Os::Windows));
        assert!(is_native_name("amdhip64_6.DLL", Os::Windows));
        assert!(is_native_name("libavutil.59.dylib", Os::Macos));
    }

    #[test]
    fn finds_libraries_in_the_package_and_its_libs_dir() {
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        for f in [
            "torchcodec/libtorchcodec_core7.so",
            "torchcodec/_core/__init__.py",
            "torchcodec/__pycache__/x.so",
            "torchcodec.libs/libavutil-1234.so.59",
            "other/libx.so",
        ] {
            let p = site.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"").unwrap();
        }
        let s = &Subject::known()[1];
        // Compared as paths (component by component), so that a Windows host's `\\` passes.
        let libs: Vec<PathBuf> = native_libraries(site, s, Os::Linux)
            .iter()
            .map(|p| p.strip_prefix(site).unwrap().to_path_buf())
            .collect();
        assert_eq!(
            libs,
            [
                PathBuf::from("torchcodec/libtorchcodec_core7.so"),
                PathBuf::from("torchcodec.libs/libavutil-1234.so.59")
            ]
        );
    }
}
