//! System libraries a recipe needs besides FFmpeg and the SDK's own runtime (OpenBLAS, LLVM's
//! OpenMP runtime, hipBLAS/hipRAND/rocThrust/hipCUB headers, libjpeg …): looked for where a
//! compiler would find them, so that a missing one is named with its distribution package
//! before the build instead of by CMake minutes into it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{vars, Os, Platform, ProbeEnv, RocmSdk};

/// What identifies a library on disk: headers (relative to an include directory) and
/// library names (`openblas` for `libopenblas.so`, `libopenblas.a`, `openblas.lib`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibrarySpec {
    pub name: String,
    pub headers: Vec<String>,
    pub libs: Vec<String>,
}

/// Where a library was found: the header (or the library file when it names no header).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoundLibrary {
    pub at: PathBuf,
    /// The include directory its first header was found in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_dir: Option<PathBuf>,
    /// The directory its first library was found in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lib_dir: Option<PathBuf>,
    /// SHA-256 over the library files found (each one's name and contents, in the spec's
    /// order): what a build from it is keyed by, wherever the files lie (a oneDNN built against
    /// the venv's `libiomp5md.lib` is the same build for every venv with the same file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// The include and library directories searched, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchDirs {
    pub include: Vec<PathBuf>,
    pub lib: Vec<PathBuf>,
}

/// The directories a compiler on this machine searches: the environment's (`CPATH`,
/// `LIBRARY_PATH`, conda), the system's (multiarch on Debian), Homebrew's, and each ROCm
/// SDK's, with the clang resource directory its device libraries live in (LLVM's `omp.h`)
/// and that LLVM's own `lib/` (`libomp.so`).
pub fn search_dirs(
    platform: &Platform,
    sdks: &[RocmSdk],
    venv: Option<&Path>,
    env: &ProbeEnv,
) -> SearchDirs {
    let mut d = SearchDirs::default();
    // The venv's own prefix first: PyPI's development wheels (onednn-devel-*, mkl-include)
    // put `include/` and `lib/` there, as conda does.
    if let Some(v) = venv {
        d.include.push(v.join("include"));
        d.lib.push(v.join("lib"));
        // On Windows their data goes under `Library\` (intel-openmp, mkl-static, as conda).
        if let Some(data) = platform.os.rules().env_data_prefix() {
            d.include.push(v.join(data).join("include"));
            d.lib.push(v.join(data).join("lib"));
        }
    }
    for v in vars::INCLUDE_PATHS {
        d.include.extend(env.dirs(v));
    }
    d.lib.extend(env.dirs(vars::LIBRARY_PATH));
    if let Some(conda) = env.var(vars::CONDA_PREFIX).map(PathBuf::from) {
        d.include.push(conda.join("include"));
        d.lib.push(conda.join("lib"));
    }
    for sdk in sdks {
        for part in std::iter::once(&sdk.root).chain(sdk.parts.iter()) {
            d.include.push(part.join("include"));
            d.lib.push(part.join("lib"));
            d.lib.push(part.join("lib64"));
            d.lib.push(part.join("lib/llvm/lib"));
        }
        // <llvm>/lib/clang/<N>/amdgcn/bitcode → <llvm>/lib/clang/<N>/include, <llvm>/lib
        if let Some(resource) = sdk.device_lib_dir.as_deref().and_then(|b| {
            b.ancestors().find(|a| {
                a.join("include").is_dir() && a.parent().is_some_and(|p| p.ends_with("clang"))
            })
        }) {
            d.include.push(resource.join("include"));
            if let Some(llvm_lib) = resource.parent().and_then(Path::parent) {
                d.lib.push(llvm_lib.to_path_buf());
            }
        }
    }
    let dev = platform.os.rules().dev_search();
    let triplet = dev
        .multiarch
        .then(|| format!("{}-linux-gnu", platform.arch));
    for root in dev.prefixes.iter().map(Path::new) {
        if let Some(t) = &triplet {
            d.include.push(root.join("include").join(t));
        }
        d.include.push(root.join("include"));
        if let Some(t) = &triplet {
            d.lib.push(root.join("lib").join(t));
            d.lib.push(root.join("lib64"));
        }
        d.lib.push(root.join("lib"));
        // Keg-only formulae (libomp, openblas) live in opt/<name>.
        if let Some(Ok(rd)) = dev.kegs.map(|k| std::fs::read_dir(root.join(k))) {
            for e in rd.flatten() {
                d.include.push(e.path().join("include"));
                d.lib.push(e.path().join("lib"));
            }
        }
    }
    if let Some((include, lib)) = dev.compiler_vars {
        d.include.extend(env.dirs(include));
        d.lib.extend(env.dirs(lib));
    }
    let mut seen = std::collections::BTreeSet::new();
    d.include.retain(|p| seen.insert(p.clone()));
    seen.clear();
    d.lib.retain(|p| seen.insert(p.clone()));
    d
}

/// Where `spec` is, if every header and library it names is found in `dirs`.
pub fn find_library(spec: &LibrarySpec, dirs: &SearchDirs, os: Os) -> Option<FoundLibrary> {
    let mut first = None;
    let (mut include_dir, mut lib_dir) = (None, None);
    for h in &spec.headers {
        let (dir, at) = dirs
            .include
            .iter()
            .map(|d| (d, d.join(h)))
            .find(|(_, p)| p.is_file())?;
        include_dir.get_or_insert(dir.clone());
        first.get_or_insert(at);
    }
    let mut files = Vec::new();
    for l in &spec.libs {
        let names = os.rules().link_file_names(l);
        let (dir, at) = dirs
            .lib
            .iter()
            .flat_map(|d| names.iter().map(move |n| (d, d.join(n))))
            .find(|(_, p)| p.exists())?;
        lib_dir.get_or_insert(dir.clone());
        files.push(at.clone());
        first.get_or_insert(at);
    }
    first.map(|at| FoundLibrary {
        at,
        include_dir,
        lib_dir,
        digest: digest(&files),
    })
}

/// SHA-256 over each file's name and contents; `None` when there is none or one cannot be read
/// (then whatever is keyed by the library falls back to its path).
fn digest(files: &[PathBuf]) -> Option<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    if files.is_empty() {
        return None;
    }
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    for f in files {
        let name = f.file_name()?.to_string_lossy().into_owned();
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        let mut file = std::fs::File::open(f).ok()?;
        let len = file.metadata().ok()?.len();
        h.update(len.to_le_bytes());
        loop {
            let n = file.read(&mut buf).ok()?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
    }
    Some(
        h.finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(headers: &[&str], libs: &[&str]) -> LibrarySpec {
        LibrarySpec {
            name: "x".into(),
            headers: headers.iter().map(|s| s.to_string()).collect(),
            libs: libs.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// PyPI's development wheels (onednn-devel-cpu-gomp) put include/ and lib/ into the venv:
    /// searched first, and where each part was found is kept for the recipe.
    #[test]
    fn the_venv_prefix_is_searched_first_and_the_directories_are_kept() {
        let t = tempfile::tempdir().unwrap();
        let venv = t.path().join("venv");
        std::fs::create_dir_all(venv.join("include/oneapi/dnnl")).unwrap();
        std::fs::create_dir_all(venv.join("lib")).unwrap();
        std::fs::write(venv.join("include/oneapi/dnnl/dnnl_common.h"), "").unwrap();
        std::fs::write(venv.join("lib/libdnnl.so"), "").unwrap();
        let p = Platform {
            os: Os::Linux,
            arch: "x86_64".into(),
            distro: None,
            distro_like: Vec::new(),
        };
        let d = search_dirs(&p, &[], Some(&venv), &ProbeEnv::rooted(Path::new("/")));
        assert_eq!(d.include[0], venv.join("include"));
        assert_eq!(d.lib[0], venv.join("lib"));
        let found = find_library(
            &spec(&["oneapi/dnnl/dnnl_common.h"], &["dnnl"]),
            &d,
            Os::Linux,
        )
        .unwrap();
        assert_eq!(
            found.include_dir.as_deref(),
            Some(venv.join("include").as_path())
        );
        assert_eq!(found.lib_dir.as_deref(), Some(venv.join("lib").as_path()));
        assert!(find_library(
            &spec(&["oneapi/dnnl/dnnl_common.h"], &["dnnl"]),
            &search_dirs(&p, &[], None, &ProbeEnv::rooted(Path::new("/"))),
            Os::Linux
        )
        .is_none_or(|f| f.include_dir != Some(venv.join("include"))));
    }

    #[test]
    fn every_header_and_library_must_be_there() {
        let t = tempfile::tempdir().unwrap();
        let inc = t.path().join("include");
        let lib = t.path().join("lib");
        std::fs::create_dir_all(inc.join("hipblas")).unwrap();
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(inc.join("hipblas/hipblas.h"), "").unwrap();
        let dirs = SearchDirs {
            include: vec![t.path().join("nothing"), inc.clone()],
            lib: vec![lib.clone()],
        };
        let found = find_library(&spec(&["hipblas/hipblas.h"], &[]), &dirs, Os::Linux).unwrap();
        assert_eq!(found.at, inc.join("hipblas/hipblas.h"));
        assert!(find_library(
            &spec(&["hipblas/hipblas.h"], &["hipblas"]),
            &dirs,
            Os::Linux
        )
        .is_none());
        std::fs::write(lib.join("libhipblas.so"), "").unwrap();
        assert!(find_library(
            &spec(&["hipblas/hipblas.h"], &["hipblas"]),
            &dirs,
            Os::Linux
        )
        .is_some());
        assert!(find_library(
            &spec(&["hipblas/hipblas.h"], &["hipblas"]),
            &dirs,
            Os::Windows
        )
        .is_none());
    }

    #[test]
    fn a_clang_resource_directory_of_an_sdk_is_searched_for_omp_h() {
        let t = tempfile::tempdir().unwrap();
        let llvm = t.path().join("usr/lib/llvm-21");
        let res = llvm.join("lib/clang/21");
        std::fs::create_dir_all(res.join("amdgcn/bitcode")).unwrap();
        std::fs::create_dir_all(res.join("include")).unwrap();
        let mut sdk =
            crate::rocm_scan::empty(t.path().join("usr"), crate::SdkKind::DebianMultiarch);
        sdk.device_lib_dir = Some(res.join("amdgcn/bitcode"));
        let p = Platform {
            os: Os::Linux,
            arch: "x86_64".into(),
            distro: None,
            distro_like: vec![],
        };
        let d = search_dirs(&p, &[sdk], None, &ProbeEnv::rooted(Path::new("/")));
        assert!(d.include.contains(&res.join("include")), "{:?}", d.include);
        assert!(d.lib.contains(&llvm.join("lib")), "{:?}", d.lib);
    }

    /// The digest is the library files' contents: the same file in two venvs is the same
    /// library; another file is another; a library found by its header only has none.
    #[test]
    fn a_found_library_carries_the_digest_of_its_files() {
        let t = tempfile::tempdir().unwrap();
        let find = |dir: &Path| {
            let dirs = SearchDirs {
                include: vec![],
                lib: vec![dir.to_path_buf()],
            };
            find_library(&spec(&[], &["iomp5md"]), &dirs, Os::Windows).unwrap()
        };
        let (a, b, c) = (t.path().join("a"), t.path().join("b"), t.path().join("c"));
        for (d, text) in [(&a, "same"), (&b, "same"), (&c, "other")] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("libiomp5md.lib"), text).unwrap();
        }
        let (fa, fb, fc) = (find(&a), find(&b), find(&c));
        assert!(fa.digest.is_some());
        assert_eq!(fa.digest, fb.digest);
        assert_ne!(fa.digest, fc.digest);
        assert_ne!(fa.lib_dir, fb.lib_dir);
        std::fs::create_dir_all(a.join("inc")).unwrap();
        std::fs::write(a.join("inc/x.h"), "").unwrap();
        let headers_only = find_library(
            &spec(&["x.h"], &[]),
            &SearchDirs {
                include: vec![a.join("inc")],
                lib: vec![],
            },
            Os::Linux,
        )
        .unwrap();
        assert_eq!(headers_only.digest, None);
    }
}
