//! The GPU kernels a bundled ROCm library loads at run time, which no import names: its
//! kernel packs (the archives its `.rocm_kpack_ref`/`.kpackrf` section points to, relative to
//! the library), rocBLAS's and hipBLASLt's Tensile files beside it, MIOpen's kernel databases.
//! For the GPUs asked for (`--gpu-arch`), and only those; all that are there when none is
//! named. Their place in the bundle keeps their place relative to the library, since that is
//! where the library looks.

use std::path::{Component, Path, PathBuf};

/// A file to copy (`from`) to `to` (relative to the bundle).
pub struct KernelFile {
    pub from: PathBuf,
    pub to: PathBuf,
}

/// The kernel files of the library at `lib`, which goes to `lib_to` in the bundle, for `archs`
/// (all when empty), and what is missing for an arch asked for.
pub fn kernel_files(lib: &Path, lib_to: &Path, archs: &[String]) -> (Vec<KernelFile>, Vec<String>) {
    let name = lib
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .to_ascii_lowercase();
    let (Some(dir), Some(to_dir)) = (lib.parent(), lib_to.parent()) else {
        return (Vec::new(), Vec::new());
    };
    let mut files = Vec::new();
    let mut missing = Vec::new();
    let packs = std::fs::read(lib)
        .ok()
        .and_then(|b| rocbuild_native::kpack_search_paths(&b).ok())
        .unwrap_or_default();
    for pattern in &packs {
        kpack_files(dir, to_dir, pattern, archs, &mut files, &mut missing, &name);
    }
    let data_dirs: Vec<PathBuf> = if crate::checks::gpu::is_rocblas(&name) {
        vec![PathBuf::from("rocblas/library")]
    } else if name.starts_with("libhipblaslt") || name.starts_with("hipblaslt") {
        vec![PathBuf::from("hipblaslt/library")]
    } else if name.starts_with("libmiopen") || name.starts_with("miopen") {
        vec![PathBuf::from("../share/miopen/db")]
    } else {
        Vec::new()
    };
    for rel in data_dirs {
        tree_for_archs(
            &dir.join(&rel),
            &normalize(&to_dir.join(&rel)),
            archs,
            &mut files,
        );
    }
    (files, missing)
}

/// The archives one search path names: for each arch asked for, or every one present.
fn kpack_files(
    dir: &Path,
    to_dir: &Path,
    pattern: &str,
    archs: &[String],
    files: &mut Vec<KernelFile>,
    missing: &mut Vec<String>,
    lib_name: &str,
) {
    let wanted: Vec<String> = if archs.is_empty() {
        present_archs(dir, pattern)
    } else {
        archs.to_vec()
    };
    for arch in wanted {
        let rel = rocbuild_native::expand_kpack_pattern(pattern, &arch);
        let from = normalize(&dir.join(&rel));
        if from.is_file() {
            files.push(KernelFile {
                to: normalize(&to_dir.join(&rel)),
                from,
            });
        } else {
            missing.push(format!(
                "{lib_name} has no kernel pack for {arch}: {} does not exist (TheRock: pip install rocm-sdk-device-{arch})",
                from.display()
            ));
        }
    }
}

/// The archs for which `pattern` (relative to `dir`, `@GFXARCH@` in its file name) names a file.
fn present_archs(dir: &Path, pattern: &str) -> Vec<String> {
    let rel = Path::new(pattern);
    let (Some(parent), Some(file)) = (rel.parent(), rel.file_name()) else {
        return Vec::new();
    };
    let file = file.to_string_lossy();
    let Some((pre, post)) = file.split_once("@GFXARCH@") else {
        return Vec::new();
    };
    let mut out: Vec<String> = std::fs::read_dir(normalize(&dir.join(parent)))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let arch = n.strip_prefix(pre)?.strip_suffix(post)?;
            arch.starts_with("gfx").then(|| arch.to_string())
        })
        .collect();
    out.sort();
    out
}

/// Every file under `dir` (one level of subdirectories: hipBLASLt's `library/gfx1201/`) that
/// names no GPU (shared metadata) or names one asked for.
fn tree_for_archs(dir: &Path, to: &Path, archs: &[String], files: &mut Vec<KernelFile>) {
    let keep = |name: &str| {
        let named = rocbuild_probe::kernels::gfx_names_in(name);
        archs.is_empty() || named.is_empty() || named.iter().any(|g| archs.contains(g))
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if !keep(&name) {
            continue;
        }
        if p.is_dir() {
            tree_for_archs(&p, &to.join(&name), archs, files);
        } else {
            files.push(KernelFile {
                to: to.join(&name),
                from: p,
            });
        }
    }
}

/// `a/b/../c` → `a/c`, without touching the disk (a bundle path may not exist yet).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
