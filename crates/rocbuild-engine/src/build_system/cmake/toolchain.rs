//! The toolchain as CMake is told it: the compilers, the GPU architectures and where the SDK
//! is, as the defines every CMake HIP/CUDA project reads (upstream CTranslate2's ROCm CI sets
//! the same). The toolchain's environment is the toolchain's (`BackendPlan::env`).

use std::collections::BTreeMap;
use std::path::Path;

use rocbuild_probe::Os;

use crate::paths::join;
use crate::toolchain::BackendPlan;

/// Add the toolchain's defines to `define`; the recipe's (set before) win, except that
/// `--rocm-path` joins the recipe's `CMAKE_HIP_FLAGS`.
pub fn defines(backend: &BackendPlan, host_os: Os, define: &mut BTreeMap<String, String>) {
    let s = |p: &Path| p.display().to_string();
    let set = |define: &mut BTreeMap<String, String>, k: &str, v: String| {
        define.entry(k.to_string()).or_insert(v);
    };
    if let Some(r) = &backend.rocm {
        set(define, "CMAKE_C_COMPILER", s(&r.clang));
        set(define, "CMAKE_CXX_COMPILER", s(&r.clangxx));
        set(define, "CMAKE_HIP_COMPILER", s(&r.clangxx));
        set(define, "CMAKE_HIP_ARCHITECTURES", r.archs.join(";"));
        // clang looks for the HIP headers and runtime next to itself; with a ROCm laid out
        // elsewhere (Debian's /usr, TheRock's split packages) it must be told.
        // CMAKE_HIP_FLAGS is split at spaces: quote a root such as C:/Program Files/….
        let root = s(&r.root).replace('\\', "/");
        let rocm_path = if root.contains(' ') {
            format!("--rocm-path=\"{root}\"")
        } else {
            format!("--rocm-path={root}")
        };
        match define.get_mut("CMAKE_HIP_FLAGS") {
            Some(f) if !f.contains("--rocm-path") => *f = format!("{f} {rocm_path}"),
            Some(_) => {}
            None => {
                define.insert("CMAKE_HIP_FLAGS".into(), rocm_path);
            }
        }
        set(define, "CMAKE_PREFIX_PATH", s(&r.root));
        set(define, "CMAKE_HIP_PLATFORM", "amd".into());
    }
    if let Some(c) = &backend.cuda {
        let nvcc = format!("nvcc{}", host_os.rules().exe_suffix());
        set(define, "CUDA_TOOLKIT_ROOT_DIR", s(&c.home));
        set(
            define,
            "CMAKE_CUDA_COMPILER",
            s(&join(host_os, &c.home, &["bin", &nvcc])),
        );
        if let Some(h) = &c.host_compiler {
            // CMake's CUDA language and the legacy FindCUDA (CTranslate2) each read their own.
            set(define, "CMAKE_CUDA_HOST_COMPILER", s(h));
            set(define, "CUDA_HOST_COMPILER", s(h));
        }
    }
}
