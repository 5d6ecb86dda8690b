//! Where a rocBLAS library loads its Tensile (GEMM) kernels from, following the library's own
//! search: `$ROCBLAS_TENSILE_LIBPATH` when set, else a directory beside the library —
//! `rocblas/library` in AMD's builds (Linux `lib/`, Windows `bin/`), `rocblas/<version>/library`
//! in Debian's, where `<version>` is rocBLAS's own version (4.4.1 in ROCm 6.4) and is compiled
//! into the library. The planner (SDK scan) and doctor (a rocBLAS in a dependency closure) both
//! ask this one function.

use std::path::{Path, PathBuf};

use crate::rocm::version_key;

/// The Tensile directory of the rocBLAS at `library`: the first existing of the candidates in
/// search order, else the directory AMD's layout would use (for "missing: …" messages).
///
/// `version`: rocBLAS's version when known (from `rocblas-version.h`); without it, versioned
/// directories whose name agrees with the library's file name (`librocblas.so.4.4` → 4.4.*)
/// are tried, newest first.
pub fn rocblas_tensile_dir(
    library: &Path,
    env_override: Option<&Path>,
    version: Option<&str>,
) -> PathBuf {
    let candidates = tensile_candidates(library, env_override, version);
    candidates
        .iter()
        .find(|d| d.is_dir())
        .cloned()
        .unwrap_or_else(|| {
            library
                .parent()
                .unwrap_or(Path::new("."))
                .join("rocblas")
                .join("library")
        })
}

/// Every directory rocBLAS at `library` may load kernels from, in its search order.
pub fn tensile_candidates(
    library: &Path,
    env_override: Option<&Path>,
    version: Option<&str>,
) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = Vec::new();
    if let Some(e) = env_override.filter(|e| !e.as_os_str().is_empty()) {
        v.push(e.to_path_buf());
    }
    let real = dunce::canonicalize(library).unwrap_or_else(|_| library.to_path_buf());
    let base = real
        .parent()
        .or_else(|| library.parent())
        .unwrap_or(Path::new("."))
        .join("rocblas");
    if let Some(ver) = version {
        v.push(base.join(ver).join("library"));
    }
    let file_version = library_file_version(&real)
        .or_else(|| library_file_version(library))
        .unwrap_or_default();
    let wanted = version_key(version.unwrap_or(&file_version));
    let mut versioned: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir(&base)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let key = version_key(&name);
            (!key.is_empty() && key.len() == name.split('.').count()).then_some((key, e.path()))
        })
        .filter(|(key, _)| key.starts_with(&wanted) || wanted.starts_with(key))
        .collect();
    versioned.sort();
    for (_, d) in versioned.into_iter().rev() {
        let d = d.join("library");
        if !v.contains(&d) {
            v.push(d);
        }
    }
    v.push(base.join("library"));
    v
}

/// `librocblas.so.4.4.1` → "4.4.1"; `librocblas.so.4` → "4"; anything else → None.
fn library_file_version(p: &Path) -> Option<String> {
    let name = p.file_name()?.to_string_lossy().into_owned();
    let rest = crate::platform::libname::parse(&name)?.version?;
    (!version_key(rest).is_empty()).then(|| rest.to_string())
}

/// rocBLAS's version from `rocblas-version.h` (`ROCBLAS_VERSION_MAJOR 4` …) under `include`.
pub fn rocblas_version(parts: &[PathBuf]) -> Option<String> {
    let text = [
        "include/rocblas/internal/rocblas-version.h",
        "include/rocblas-version.h",
        "include/internal/rocblas-version.h",
    ]
    .iter()
    .find_map(|rel| {
        parts
            .iter()
            .find_map(|p| crate::read_text(p.join(rel)).ok())
    })?;
    let def = |name: &str| -> Option<u32> { crate::c_define(&text, name)?.parse().ok() };
    Some(format!(
        "{}.{}.{}",
        def("ROCBLAS_VERSION_MAJOR")?,
        def("ROCBLAS_VERSION_MINOR")?,
        def("ROCBLAS_VERSION_PATCH").unwrap_or(0)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"").unwrap();
    }

    /// Debian's layout: `librocblas.so.4.4` beside `rocblas/4.4.1/library`, no unversioned dir.
    #[test]
    fn debian_versioned_directory_is_found_from_the_library_name() {
        let t = tempfile::tempdir().unwrap();
        let lib = t.path().join("usr/lib/x86_64-linux-gnu");
        touch(&lib.join("librocblas.so.4.4"));
        #[cfg(unix)]
        std::os::unix::fs::symlink("librocblas.so.4.4", lib.join("librocblas.so.4")).unwrap();
        // A symlink needs a privilege on Windows; the name is what is read here.
        #[cfg(not(unix))]
        touch(&lib.join("librocblas.so.4"));
        touch(&lib.join("rocblas/4.4.1/library/TensileLibrary_lazy_gfx1010.dat"));
        // An older rocBLAS's leftover directory is not the one this library reads.
        touch(&lib.join("rocblas/3.1.0/library/TensileLibrary_lazy_gfx900.dat"));
        assert_eq!(
            rocblas_tensile_dir(&lib.join("librocblas.so.4"), None, None),
            lib.join("rocblas/4.4.1/library")
        );
        assert_eq!(
            rocblas_tensile_dir(&lib.join("librocblas.so.4"), None, Some("4.4.1")),
            lib.join("rocblas/4.4.1/library")
        );
        // The environment variable rocBLAS honours comes first.
        let own = t.path().join("mine");
        std::fs::create_dir_all(&own).unwrap();
        assert_eq!(
            rocblas_tensile_dir(&lib.join("librocblas.so.4"), Some(&own), None),
            own
        );
    }

    #[test]
    fn amd_layout_and_missing_directory() {
        let t = tempfile::tempdir().unwrap();
        let lib = t.path().join("opt/rocm-6.2.4/lib");
        touch(&lib.join("librocblas.so.4.2"));
        assert_eq!(
            rocblas_tensile_dir(&lib.join("librocblas.so.4.2"), None, None),
            lib.join("rocblas/library"),
            "missing: AMD's place is named"
        );
        touch(&lib.join("rocblas/library/TensileLibrary_lazy_gfx1030.dat"));
        assert_eq!(
            rocblas_tensile_dir(&lib.join("librocblas.so.4.2"), None, None),
            lib.join("rocblas/library")
        );
    }

    #[test]
    fn version_header() {
        let t = tempfile::tempdir().unwrap();
        let h = t.path().join("include/rocblas/internal/rocblas-version.h");
        std::fs::create_dir_all(h.parent().unwrap()).unwrap();
        std::fs::write(
            &h,
            "#define ROCBLAS_VERSION_MAJOR 4\n#define ROCBLAS_VERSION_MINOR 4\n#define ROCBLAS_VERSION_PATCH 1\n#define ROCBLAS_VERSION_TWEAK 1cb1e4a\n",
        )
        .unwrap();
        assert_eq!(
            rocblas_version(&[t.path().to_path_buf()]).as_deref(),
            Some("4.4.1")
        );
    }
}
