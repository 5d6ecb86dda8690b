//! The `lite` torch CMake package: an imported `torch` target over libtorch, libtorch_cpu and
//! libc10 with torch's headers. Enough for CPU code, with no CUDA/ROCm toolkit (a CUDA or ROCm
//! torch's own TorchConfig.cmake refuses to load without one).

use rocbuild_probe::{Os, Torch};

use crate::paths::join;

fn cmake_path(p: &std::path::Path) -> String {
    p.display().to_string().replace('\\', "/")
}

/// The text of TorchConfig.cmake for `torch` on `os`.
pub fn lite_config(os: Os, torch: &Torch) -> String {
    let lib = |name: &str| -> (String, Option<String>) {
        let (shared, import) = os.rules().linked_shared_lib(name);
        let at = |f: &str| cmake_path(&join(os, &torch.lib, &[f]));
        (at(&shared), import.as_deref().map(at))
    };
    let inc = cmake_path(&torch.include);
    // GCC- and clang-style compilers take torch's libstdc++ ABI define (libc++ ignores it);
    // MSVC-style ones have no such ABI.
    let flags = match (os.rules().msvc_style_compilers(), torch.cxx11_abi) {
        (false, Some(abi)) => format!("-D_GLIBCXX_USE_CXX11_ABI={}", u8::from(abi)),
        _ => String::new(),
    };
    let mut s = String::new();
    s.push_str(
        "# Written by rocbuild (torch-cmake = \"lite\"): torch, torch_cpu and c10 with torch's\n",
    );
    s.push_str(&format!(
        "# headers, for torch {}. No CUDA or ROCm toolkit is needed.\n",
        torch.version
    ));
    s.push_str("if(TARGET torch)\n  return()\nendif()\n");
    // The C++ API headers exist in full torch installs only.
    s.push_str(&format!("set(TORCH_INCLUDE_DIRS \"{inc}\")\nif(EXISTS \"{inc}/torch/csrc/api/include\")\n  list(APPEND TORCH_INCLUDE_DIRS \"{inc}/torch/csrc/api/include\")\nendif()\n"));
    for (target, deps) in [
        ("c10", ""),
        ("torch_cpu", "c10"),
        ("torch", "torch_cpu;c10"),
    ] {
        let (loc, implib) = lib(target);
        s.push_str(&format!("add_library({target} SHARED IMPORTED)\n"));
        s.push_str(&format!(
            "set_target_properties({target} PROPERTIES\n  IMPORTED_LOCATION \"{loc}\"\n"
        ));
        if let Some(i) = implib {
            s.push_str(&format!("  IMPORTED_IMPLIB \"{i}\"\n"));
        }
        s.push_str("  INTERFACE_INCLUDE_DIRECTORIES \"${TORCH_INCLUDE_DIRS}\"\n");
        if !deps.is_empty() {
            s.push_str(&format!("  INTERFACE_LINK_LIBRARIES \"{deps}\"\n"));
        }
        if !flags.is_empty() {
            s.push_str(&format!("  INTERFACE_COMPILE_OPTIONS \"{flags}\"\n"));
        }
        s.push_str(")\n");
    }
    s.push_str(&format!(
        "set(TORCH_INSTALL_PREFIX \"{}\")\n",
        cmake_path(&torch.dir)
    ));
    s.push_str(&format!("set(TORCH_LIBRARY \"{}\")\n", lib("torch").0));
    s.push_str("set(TORCH_LIBRARIES torch)\n");
    s.push_str(&format!("set(TORCH_CXX_FLAGS \"{flags}\")\n"));
    s.push_str("set(Torch_FOUND TRUE)\nset(TORCH_FOUND TRUE)\n");
    s
}
