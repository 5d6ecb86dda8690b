//! Which GPUs an installed ROCm has *kernels* for, read from the files: the compiled kernels the
//! math libraries load at run time, apart from the compiler's device libraries (which say what
//! can be compiled for). A GPU without them fails at the first GEMM or convolution, long after
//! the build ("rocBLAS error: Cannot read …TensileLibrary.dat", "no kernels for this GPU").
//!
//! Where each library keeps them (Linux `lib/`, Windows `bin/`, as AMD's builds and TheRock's
//! wheels lay them out; TheRock's packaging sources: `math-libs/BLAS/artifact-blas.toml`, the
//! kpack splitter's `database_handlers.py`):
//! - rocBLAS: `rocblas/library/`, arch in the file name (`TensileLibrary_lazy_gfx1201.dat`) or
//!   a directory per arch;
//! - hipBLASLt: `hipblaslt/library/`, flat (older) or `library/gfx1201/` (newer);
//! - MIOpen: `share/miopen/db/` (`gfx1201.kdb`, `gfx1030_36.kdb`);
//! - kernel packs: `.kpack/<artifact>_<component>_<gfx>.kpack` beside the library directories,
//!   one archive per arch (TheRock's multi-arch wheels; magic `KPAK`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One kind of kernel files an SDK holds, and for which GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSet {
    /// `rocBLAS`, `hipBLASLt`, `MIOpen`, `kernel packs`.
    pub library: String,
    pub dir: PathBuf,
    /// gfx names it has kernels for, sorted.
    pub archs: Vec<String>,
}

/// Every kernel set under these SDK parts (its root, or TheRock's core and libraries
/// directories), for this OS's layout.
pub fn kernel_sets(parts: &[PathBuf], windows: bool) -> Vec<KernelSet> {
    let libdir = if windows { "bin" } else { "lib" };
    let mut out = Vec::new();
    for part in parts {
        let lib = part.join(libdir);
        let kinds = [
            ("rocBLAS", lib.join("rocblas/library")),
            ("hipBLASLt", lib.join("hipblaslt/library")),
            ("MIOpen", part.join("share/miopen/db")),
            ("kernel packs", part.join(".kpack")),
        ];
        for (library, dir) in kinds {
            if !dir.is_dir() {
                continue;
            }
            let archs = if library == "kernel packs" {
                kpack_archs(&dir)
            } else {
                archs_in(&dir)
            };
            out.push(KernelSet {
                library: library.into(),
                dir,
                archs,
            });
        }
    }
    out
}

/// gfx names in the file names of `dir` and in the names of its subdirectories (one level).
pub fn archs_in(dir: &Path) -> Vec<String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        gfx_names(&name, &mut v);
    }
    v.sort_by_key(|n| (n.len(), n.clone()));
    v
}

/// The archs of the `.kpack` archives in `dir` that are archives (the `KPAK` magic), from
/// their names (`blas_lib_gfx1201.kpack`).
fn kpack_archs(dir: &Path) -> Vec<String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".kpack") && is_kpack(&e.path()) {
            gfx_names(&name, &mut v);
        }
    }
    v.sort_by_key(|n| (n.len(), n.clone()));
    v
}

/// Does the file start with a kernel pack's magic?
pub fn is_kpack(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"KPAK"
}

/// Every `gfxNNN…` in `name`, in order.
pub fn gfx_names_in(name: &str) -> Vec<String> {
    let mut v = Vec::new();
    gfx_names(name, &mut v);
    v
}

/// Push every `gfxNNN…` in `name` (hex digits, 3 or more; `gfx90a`, `gfx1201`) not yet in `v`.
fn gfx_names(name: &str, v: &mut Vec<String>) {
    let mut rest = name;
    while let Some(i) = rest.find("gfx") {
        let tail = &rest[i + 3..];
        let n = tail.bytes().take_while(u8::is_ascii_hexdigit).count();
        if n >= 3 {
            let g = format!("gfx{}", &tail[..n]);
            if !v.contains(&g) {
                v.push(g);
            }
        }
        rest = &tail[n..];
    }
}

/// For `arch`: the kernel sets that have kernels for it and those that do not.
pub fn for_arch<'a>(sets: &'a [KernelSet], arch: &str) -> (Vec<&'a KernelSet>, Vec<&'a KernelSet>) {
    let processor = arch.split(':').next().unwrap_or(arch);
    sets.iter()
        .partition(|s| s.archs.iter().any(|a| a == processor))
}

/// What `sdk` lacks for `arch`, in one sentence with the fix, or None when every kernel set
/// it has covers `arch` (or it has none to judge by). `libraries` limits the check to those
/// the package uses (`rocBLAS`, `hipBLASLt`; empty: all); kernel packs always count.
pub fn missing_for(sdk: &crate::RocmSdk, arch: &str, libraries: &[&str]) -> Option<String> {
    let relevant: Vec<KernelSet> = sdk
        .kernels
        .iter()
        .filter(|k| {
            libraries.is_empty()
                || k.library == "kernel packs"
                || libraries.contains(&k.library.as_str())
        })
        .cloned()
        .collect();
    let (has, lacks) = for_arch(&relevant, arch);
    if lacks.is_empty() {
        return None;
    }
    let names: Vec<&str> = lacks.iter().map(|k| k.library.as_str()).collect();
    let with: Vec<&str> = has.iter().map(|k| k.library.as_str()).collect();
    let version = sdk.version.as_deref().unwrap_or("(unknown version)");
    let what = format!(
        "ROCm {version} at {} has no kernels for {arch} in {}{}",
        sdk.root.display(),
        names.join(", "),
        if with.is_empty() {
            String::new()
        } else {
            format!(" (it has them in {})", with.join(", "))
        }
    );
    Some(format!("{what}: {}", kernel_fix(sdk, arch, &lacks)))
}

/// How to get kernels for `arch` into this SDK, by how it was installed.
fn kernel_fix(sdk: &crate::RocmSdk, arch: &str, lacks: &[&KernelSet]) -> String {
    let processor = arch.split(':').next().unwrap_or(arch);
    match &sdk.the_rock {
        Some(r)
            if r.scheme == "multi-arch"
                && !r.build_targets.is_empty()
                && !r.build_targets.iter().any(|t| t == processor) =>
        {
            format!(
                "this TheRock build ({}) was made for {} only: there is no rocm-sdk-device-{processor} of it; use a TheRock release built for {processor}",
                r.version,
                r.build_targets.join(", ")
            )
        }
        Some(r) if r.scheme == "multi-arch" => format!(
            "pip install rocm-sdk-device-{processor}=={} (or the extra rocm[device-{processor}]; a multi-arch torch's own extra is torch[device-{processor}])",
            r.version
        ),
        Some(r) if r.scheme == "per-family" => format!(
            "{} holds kernels for its GPU family only: install TheRock's packages for the family of {processor} (its index per family), or the multi-arch ones: pip install \"rocm[libraries,device-{processor}]=={}\"",
            r.libraries.as_deref().unwrap_or("this rocm-sdk-libraries package"),
            r.version
        ),
        Some(r) => format!(
            "AMD's release bundle ({}) has no kernels for {processor}: use TheRock's multi-arch packages (pip install \"rocm[libraries,device-{processor}]\") or a release that covers it",
            r.libraries.as_deref().unwrap_or("rocm-sdk-libraries-custom")
        ),
        None => format!(
            "use an SDK whose libraries have them (community rocBLAS builds add gfx1010 and other GPUs AMD dropped to ROCm 6.x), or put kernels built for {processor} into {}",
            lacks.first().map(|k| k.dir.display().to_string()).unwrap_or_default()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path, bytes: &[u8]) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    #[test]
    fn each_library_layout_is_read_and_only_real_kpacks_count() {
        let t = tempfile::tempdir().unwrap();
        let lib = t.path().join("_rocm_sdk_libraries");
        touch(
            &lib.join("lib/rocblas/library/TensileLibrary_lazy_gfx1100.dat"),
            b"",
        );
        touch(
            &lib.join("lib/rocblas/library/Kernels.so-000-gfx90a-xnack-.hsaco"),
            b"",
        );
        touch(
            &lib.join("lib/hipblaslt/library/gfx1201/TensileLibrary_lazy_gfx1201.dat"),
            b"",
        );
        touch(&lib.join("share/miopen/db/gfx1030_36.kdb"), b"");
        touch(
            &lib.join(".kpack/blas_lib_gfx1201.kpack"),
            b"KPAK\x01\0\0\0",
        );
        touch(&lib.join(".kpack/blas_lib_gfx1100.kpack"), b"not a pack");
        let sets = kernel_sets(std::slice::from_ref(&lib), false);
        let by = |l: &str| sets.iter().find(|s| s.library == l).unwrap().archs.clone();
        assert_eq!(by("rocBLAS"), ["gfx90a", "gfx1100"]);
        assert_eq!(by("hipBLASLt"), ["gfx1201"]);
        assert_eq!(by("MIOpen"), ["gfx1030"]);
        assert_eq!(by("kernel packs"), ["gfx1201"]);
        let (has, lacks) = for_arch(&sets, "gfx1201:xnack-");
        assert_eq!(has.len(), 2);
        assert_eq!(
            lacks.iter().map(|s| s.library.as_str()).collect::<Vec<_>>(),
            ["rocBLAS", "MIOpen"]
        );
        // Windows keeps the libraries and their kernels in bin/.
        assert!(kernel_sets(&[lib], true)
            .iter()
            .all(|s| s.library == "MIOpen" || s.library == "kernel packs"));
    }
}
