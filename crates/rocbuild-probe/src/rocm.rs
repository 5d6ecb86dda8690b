//! ROCm / HIP SDKs: every candidate on the machine, what each holds, and which one to build with.
//!
//! Discovery only reads files (no `hipconfig`, no `rocm-sdk path`): the SDK a user has is often
//! half-broken, and a probe that runs its tools can hang or lie. Every candidate is listed, even a
//! broken one, with its `problems`, so the user sees why it was passed over.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How an SDK was found; also says which layout it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SdkKind {
    /// `/opt/rocm`, `/opt/rocm-7.2.0`, … (AMD's Linux packages).
    OptRocm,
    /// The directory `$ROCM_PATH` names, when no scan found it.
    RocmPathEnv,
    /// The directory `$HIP_PATH` names, when no scan found it (validated, never trusted).
    HipPathEnv,
    /// `C:\Program Files\AMD\ROCm\<ver>` (AMD's HIP SDK installer).
    WindowsHipSdk,
    /// TheRock pip wheels in the venv (`_rocm_sdk_core`, `_rocm_sdk_devel`, `_rocm_sdk_libraries_*`).
    TheRockPip,
    /// A distribution's packages under `/usr` (Debian/Ubuntu multiarch: `/usr/lib/<triplet>/…`).
    DebianMultiarch,
}

impl SdkKind {
    pub fn describe(self) -> &'static str {
        match self {
            SdkKind::OptRocm => "AMD ROCm packages (/opt/rocm*)",
            SdkKind::RocmPathEnv => "$ROCM_PATH",
            SdkKind::HipPathEnv => "$HIP_PATH",
            SdkKind::WindowsHipSdk => "AMD HIP SDK for Windows",
            SdkKind::TheRockPip => "TheRock pip packages in the venv",
            SdkKind::DebianMultiarch => "distribution packages (multiarch /usr)",
        }
    }
}

/// One ROCm/HIP SDK candidate and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RocmSdk {
    /// The SDK root: what `ROCM_PATH` / `HIP_PATH` should name for a build.
    pub root: PathBuf,
    /// ROCm version, e.g. "6.2.4" (or "6.2" when only major.minor is known).
    pub version: Option<String>,
    /// Where the version was read from (`.info/version`, `include/hip/hip_version.h`, …).
    #[serde(default)]
    pub version_source: Option<String>,
    /// HIP's own version (`HIP_VERSION_MAJOR.MINOR.PATCH`; its patch is a build number).
    #[serde(default)]
    pub hip_version: Option<String>,
    pub kind: SdkKind,
    /// Who names this SDK besides the scan that found it: `$ROCM_PATH`, `$HIP_PATH`.
    #[serde(default)]
    pub named_by: Vec<String>,
    /// Every directory that makes up the SDK (TheRock splits it over several packages).
    #[serde(default)]
    pub parts: Vec<PathBuf>,
    /// The C compiler (amdclang / clang / clang.exe).
    pub clang: Option<PathBuf>,
    /// The C++/HIP compiler (amdclang++ / clang++ / clang++.exe).
    pub clangxx: Option<PathBuf>,
    pub hipcc: Option<PathBuf>,
    /// The directory holding the device-library bitcode (`oclc_isa_version_NNNN.bc`, `ocml.bc`).
    pub device_lib_dir: Option<PathBuf>,
    /// gfx names the SDK can compile for, from its `oclc_isa_version_NNNN.bc` files.
    pub targets: Vec<String>,
    /// hipBLAS version ("2.2.0"), or "present" when only the library was seen.
    pub hipblas: Option<String>,
    pub rocblas: bool,
    /// gfx names rocBLAS has Tensile kernels for (from `rocblas/library/*gfxNNNN*`).
    pub tensile_archs: Vec<String>,
    /// The rocBLAS Tensile library directory, when there is one.
    #[serde(default)]
    pub tensile_dir: Option<PathBuf>,
    /// The amd_comgr library (a missing one gives a misleading "no ROCm-capable device").
    pub amd_comgr: Option<PathBuf>,
    /// Directories holding CMake package configs (`lib/cmake`, `/usr/lib/<triplet>/cmake`).
    pub cmake_dirs: Vec<PathBuf>,
    /// The directory with the SDK's executables and, on Windows, its DLLs.
    pub bin_dir: Option<PathBuf>,
    /// The directory with the SDK's shared libraries (`lib`, `/usr/lib/<triplet>`).
    #[serde(default)]
    pub lib_dir: Option<PathBuf>,
    /// Why this SDK cannot be used to build HIP code (empty: usable).
    pub problems: Vec<String>,
}

impl RocmSdk {
    /// The SDK can compile HIP code: a compiler and device libraries were found.
    pub fn usable(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The SDK chosen for a build, with what the user should know about the choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdkChoice<'a> {
    pub sdk: &'a RocmSdk,
    /// Why this one (e.g. "HIP_PATH names 7.1 but the driver's runtime is ROCm 6: using 6.2").
    pub notes: Vec<String>,
    /// Things that may go wrong at run time (runtime/SDK major mismatch that was requested).
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum RocmError {
    #[error("no ROCm/HIP SDK found")]
    #[diagnostic(code(rocbuild::rocm::no_sdk))]
    NoSdk {
        /// Where rocbuild looked, and candidates it rejected with the reason.
        looked: String,
        #[help]
        help: String,
    },
    #[error("ROCm {requested} not found; found: {found}")]
    #[diagnostic(
        code(rocbuild::rocm::version_not_found),
        help("pass one of the versions found to --rocm, or install ROCm {requested} (and set ROCM_PATH / HIP_PATH to it if it lives elsewhere)")
    )]
    VersionNotFound { requested: String, found: String },
    #[error("ROCm {version} at {root} cannot build HIP code: {problems}")]
    #[diagnostic(
        code(rocbuild::rocm::unusable),
        help("repair or reinstall that SDK, or choose another with --rocm")
    )]
    Unusable {
        version: String,
        root: String,
        problems: String,
    },
}
