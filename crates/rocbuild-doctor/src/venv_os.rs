//! A venv of any OS, read from its files, so that a macOS or Windows venv is diagnosed and
//! repaired from any host (which OS it is for: `rocbuild_probe::cross::venv_os`, the one
//! decider).

use std::path::{Path, PathBuf};

use rocbuild_probe::{Os, Python};

use crate::DoctorError;

/// The venv and its site-packages, for any OS's layout.
pub fn locate(v: &rocbuild_probe::Venv) -> Result<(rocbuild_probe::Venv, PathBuf), DoctorError> {
    let v = v.clone();
    if let Some(site) = rocbuild_probe::platform::any_site_packages(&v.root, Os::current()) {
        return Ok((v, site));
    }
    Err(rocbuild_probe::ProbeError::NotAVenv {
        root: v.root.display().to_string(),
        exe: format!(
            "a site-packages directory ({})",
            rocbuild_probe::platform::SITE_LAYOUTS
        ),
        chosen_by: v.chosen_by,
    }
    .into())
}

/// The Python of a venv for another OS, described from its files (its interpreter cannot run
/// here): see [`rocbuild_probe::cross::python_from_files`].
pub fn python_from_files(root: &Path, site: &Path, os: Os) -> Python {
    rocbuild_probe::cross::python_from_files(root, site, os, None)
}

/// The folders of a venv where pip's wheels put CUDA libraries: NVIDIA's (`nvidia/*/lib` on
/// Linux, `nvidia/*/bin` on Windows, `nvidia/cu13/lib` for CUDA 13's) and torch's own `lib`.
fn cuda_library_dirs(site: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![site.join("torch").join("lib")];
    if let Ok(rd) = std::fs::read_dir(site.join("nvidia")) {
        let mut found: Vec<PathBuf> = rd
            .flatten()
            .flat_map(|e| [e.path().join("lib"), e.path().join("bin")])
            .filter(|d| d.is_dir())
            .collect();
        found.sort();
        dirs.extend(found);
    }
    dirs
}

/// The CUDA library `name` (`libcublas.so.12`, `cublas64_12.dll`) and its other versions in
/// the venv's CUDA folders: `libcublas.so.13` where torch carries CUDA 13's. Sorted; only
/// names are compared (nothing is opened).
pub fn cuda_library_versions(site: &Path, name: &str) -> Vec<PathBuf> {
    let Some(lib) = rocbuild_probe::platform::libname::parse(name).filter(|l| l.is_cuda_form(name))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for dir in cuda_library_dirs(site) {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            let same = lib.same_library(&n);
            if same {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}
