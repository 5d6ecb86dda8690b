//! AMD GPU architecture names: the known table, family aliases, target-id features
//! (`gfx1010:xnack-`), and the check that an SDK can really compile for a target.

use serde::{Deserialize, Serialize};

/// One parsed target id: `gfx90a:sramecc+:xnack-` -> name `gfx90a`, features `sramecc+`, `xnack-`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GfxTarget {
    /// The processor name, `gfx1010`.
    pub name: String,
    /// Target features with their sign, `xnack-`, `sramecc+`.
    pub features: Vec<String>,
}

impl GfxTarget {
    /// The target id as compilers take it (`--offload-arch`, `CMAKE_HIP_ARCHITECTURES`).
    pub fn id(&self) -> String {
        let mut s = self.name.clone();
        for f in &self.features {
            s.push(':');
            s.push_str(f);
        }
        s
    }
}

/// The architectures to build for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchChoice {
    /// Target ids, for `CMAKE_HIP_ARCHITECTURES` (joined with `;`) and `--offload-arch`.
    pub archs: Vec<String>,
    pub targets: Vec<GfxTarget>,
    /// `--arch`, or the detection step that gave them.
    pub found_by: String,
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ArchError {
    #[error("unknown GPU architecture `{given}`")]
    #[diagnostic(code(rocbuild::arch::unknown))]
    Unknown {
        given: String,
        #[help]
        help: String,
    },
    #[error("`{given}` is not a valid GPU target id: {reason}")]
    #[diagnostic(
        code(rocbuild::arch::bad_target_id),
        help("write a target as gfxNNNN, optionally with features: gfx90a:xnack- or gfx90a:sramecc+:xnack-")
    )]
    BadTargetId { given: String, reason: String },
    #[error("ROCm {sdk_version} at {sdk_root} cannot compile for {arch}: its device library {missing} does not exist")]
    #[diagnostic(code(rocbuild::arch::not_in_sdk))]
    NotInSdk {
        arch: String,
        sdk_version: String,
        sdk_root: String,
        missing: String,
        #[help]
        help: String,
    },
    #[error("ROCm {sdk_version} at {sdk_root} has no device libraries, so no GPU target can be checked or built")]
    #[diagnostic(
        code(rocbuild::arch::no_device_libs),
        help("install the device libraries (Debian: apt-get install rocm-device-libs; AMD packages: rocm-device-libs), or choose another SDK with --rocm")
    )]
    NoDeviceLibs { sdk_version: String, sdk_root: String },
    #[error("no GPU architecture given and none detected")]
    #[diagnostic(code(rocbuild::arch::none))]
    NoArch {
        #[help]
        help: String,
    },
}
