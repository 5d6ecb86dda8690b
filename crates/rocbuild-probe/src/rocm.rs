//! ROCm / HIP SDKs: every candidate on the machine, what each holds, and which one to build with.
//!
//! Discovery only reads files (no `hipconfig`, no `rocm-sdk path`): the SDK a user has is often
//! half-broken, and a probe that runs its tools can hang or lie. Every candidate is listed, even a
//! broken one, with its `problems`, so the user sees why it was passed over.

use std::path::PathBuf;

use crate::{HipRuntime, Os};

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
    /// rocBLAS's own version ("4.4.1" in ROCm 6.4), from `rocblas-version.h`.
    #[serde(default)]
    pub rocblas_version: Option<String>,
    /// The version of the clang the SDK compiles HIP with ("21" for Debian sid's
    /// `/usr/lib/llvm-21/lib/clang/21`), from its resource directory or its name.
    #[serde(default)]
    pub clang_version: Option<String>,
    /// gfx names rocBLAS has Tensile kernels for (from `rocblas/library/*gfxNNNN*`).
    pub tensile_archs: Vec<String>,
    /// The rocBLAS Tensile library directory, when there is one.
    #[serde(default)]
    pub tensile_dir: Option<PathBuf>,
    /// The kernels its math libraries load at run time, per library, with their GPUs.
    #[serde(default)]
    pub kernels: Vec<crate::kernels::KernelSet>,
    /// TheRock's Python packages: how they are split and which GPUs' device packages are in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub the_rock: Option<TheRockPackages>,
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

    /// The ROCm major (6 for 6.2.4): decides the hipBLAS API (v2 on ROCm 6, v3 on 7) and
    /// which HIP runtime can run the result.
    pub fn major(&self) -> Option<u32> {
        self.version
            .as_deref()
            .and_then(|v| version_key(v).first().copied())
    }

    /// HIP's major (6 for HIP 6.4.43484), else the ROCm major: decides which HIP APIs exist
    /// (`__syncwarp` only from HIP 7).
    pub fn hip_major(&self) -> Option<u32> {
        self.hip_version
            .as_deref()
            .and_then(|v| version_key(v).first().copied())
            .or_else(|| self.major())
    }

    /// hipBLAS's major, when its version header was read (2 on ROCm 6.x, 3 on 7.x).
    pub fn hipblas_major(&self) -> Option<u32> {
        self.hipblas
            .as_deref()
            .and_then(|v| version_key(v).first().copied())
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

/// TheRock's wheels in a venv (its packaging: `build_tools/packaging/python/templates/`, the
/// `_dist_info.py` package table, `docs/packaging/python_packaging.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TheRockPackages {
    /// The `rocm-sdk-core` wheel's version (`7.14.0`, `7.15.0a20260630`, `10.1.0`).
    pub version: String,
    /// How the libraries are packaged: `multi-arch` (`rocm-sdk-libraries` plus one
    /// `rocm-sdk-device-gfxNNNN` per GPU), `per-family` (`rocm-sdk-libraries-gfx120X-all`), or
    /// `custom` (AMD's Windows release bundles, `_rocm_sdk_libraries_custom`).
    pub scheme: String,
    /// The library distribution (`rocm-sdk-libraries`, `rocm-sdk-libraries-gfx120X-all`).
    pub libraries: Option<String>,
    /// GPUs whose device package is installed (multi-arch).
    pub devices: Vec<String>,
    /// The GPUs this build of TheRock was made for, from `_rocm_sdk_core/share/therock/
    /// dist_info.json` (what `rocm-sdk targets` prints): a GPU outside it has no device
    /// package to install.
    #[serde(default)]
    pub build_targets: Vec<String>,
}

/// Numeric components of a version ("6.2.4" -> [6, 2, 4]): the leading digits of each part; a
/// part with anything after its digits (TheRock's `0a20251124`, `0rc1`) is the last one.
pub fn version_key(v: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in v.split(['.', '-', '+']) {
        let digits = part.bytes().take_while(u8::is_ascii_digit).count();
        let Ok(n) = part[..digits].parse::<u32>() else {
            break;
        };
        out.push(n);
        if digits < part.len() {
            break;
        }
    }
    out
}

/// How two ROCm versions order: as PEP 440 versions when both are (TheRock's `7.10.0a20251124`
/// nightly before its `7.10.0rc1` before `7.10.0`, and `10.0.0` after `7.15.0`), else by their
/// numbers ([`version_key`]). Never as strings.
pub fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::str::FromStr;
    let pep = |v: &str| pep440_rs::Version::from_str(v.trim()).ok();
    match (pep(a), pep(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => version_key(a).cmp(&version_key(b)),
    }
}

/// `--rocm 6.2` matches 6.2, 6.2.0 and 6.2.4, not 6.20 or 6.3.
pub fn version_matches(version: &str, requested: &str) -> bool {
    let (v, r) = (version_key(version), version_key(requested.trim()));
    !r.is_empty() && v.len() >= r.len() && v[..r.len()] == r[..]
}

fn major(sdk: &RocmSdk) -> Option<u32> {
    sdk.version
        .as_deref()
        .and_then(|v| version_key(v).first().copied())
}

fn label(sdk: &RocmSdk) -> String {
    format!(
        "ROCm {} at {}",
        sdk.version.as_deref().unwrap_or("(unknown version)"),
        sdk.root.display()
    )
}

fn newest<'a>(sdks: impl Iterator<Item = &'a RocmSdk>) -> Option<&'a RocmSdk> {
    // max_by_key keeps the last of equals; the discovery order should win ties, so reverse.
    let v: Vec<&RocmSdk> = sdks.collect();
    v.into_iter()
        .rev()
        .max_by(|a, b| match (&a.version, &b.version) {
            (Some(x), Some(y)) => version_cmp(x, y),
            (x, y) => x.is_some().cmp(&y.is_some()),
        })
}

/// Choose the SDK to build with.
///
/// `--rocm X.Y` picks by version (a version not found lists those that were). Otherwise the SDK
/// named by `$HIP_PATH` / `$ROCM_PATH` is used only when it can build and matches the HIP runtime
/// that will run the code; else the newest SDK whose major matches that runtime; else the newest.
pub fn choose_sdk<'a>(
    sdks: &'a [RocmSdk],
    requested: Option<&str>,
    runtime: Option<&HipRuntime>,
    os: Os,
) -> Result<SdkChoice<'a>, RocmError> {
    let mut notes = Vec::new();
    let mut warnings = Vec::new();
    for s in sdks
        .iter()
        .filter(|s| !s.usable() && !s.named_by.is_empty())
    {
        notes.push(format!(
            "{} names {}, which cannot build HIP code: {}",
            s.named_by.join(" and "),
            s.root.display(),
            s.problems.join("; ")
        ));
    }
    let mismatch =
        |sdk: &RocmSdk, warnings: &mut Vec<String>| runtime_mismatch(sdk, runtime, warnings);

    if let Some(req) = requested {
        let sdk = by_version(sdks, req)?;
        notes.push(format!("using {} (--rocm {req})", label(sdk)));
        mismatch(sdk, &mut warnings);
        return Ok(SdkChoice {
            sdk,
            notes,
            warnings,
        });
    }

    let usable: Vec<&RocmSdk> = sdks.iter().filter(|s| s.usable()).collect();
    if usable.is_empty() {
        return Err(RocmError::NoSdk {
            looked: found_list(sdks),
            help: no_sdk_help(os, sdks),
        });
    }
    let env_named = os.rules().rocm_env_vars().into_iter().find_map(|var| {
        usable
            .iter()
            .copied()
            .find(|s| s.named_by.iter().any(|n| n == var))
            .map(|s| (var, s))
    });
    let runs = |s: &RocmSdk| match (runtime, major(s)) {
        (Some(rt), Some(m)) => rt.majors().contains(&m),
        _ => false,
    };
    // The primary runtime's major first (a driver with both amdhip64_6 and _7 runs either).
    let by_runtime = runtime.and_then(|rt| {
        newest(
            usable
                .iter()
                .copied()
                .filter(|s| major(s) == Some(rt.major)),
        )
        .or_else(|| newest(usable.iter().copied().filter(|s| runs(s))))
    });

    let sdk = match (env_named, by_runtime, runtime) {
        (Some((var, s)), _, None) => {
            notes.push(format!("using {} ({var})", label(s)));
            s
        }
        (Some((var, s)), _, Some(rt)) if runs(s) => {
            notes.push(format!(
                "using {} ({var}; matches the ROCm {} runtime)",
                label(s),
                rt.major
            ));
            s
        }
        (Some((var, named)), Some(s), Some(rt)) => {
            notes.push(format!(
                "{} names ROCm {} but the HIP runtime that will run the code is ROCm {} ({}: {}): using ROCm {} at {}",
                var.trim_start_matches('$'),
                named.version.as_deref().unwrap_or("(unknown version)"),
                rt.major,
                rt.found_by,
                rt.path.display(),
                s.version.as_deref().unwrap_or("(unknown version)"),
                s.root.display()
            ));
            s
        }
        (Some((var, s)), None, Some(_)) => {
            notes.push(format!("using {} ({var})", label(s)));
            mismatch(s, &mut warnings);
            s
        }
        (None, Some(s), Some(rt)) => {
            notes.push(format!(
                "using {}: newest SDK matching the ROCm {} runtime ({})",
                label(s),
                rt.major,
                rt.found_by
            ));
            s
        }
        (None, None, _) => {
            let s = newest(usable.iter().copied()).unwrap_or(usable[0]);
            notes.push(format!("using {}: the newest usable SDK", label(s)));
            mismatch(s, &mut warnings);
            s
        }
        (None, Some(s), None) => s,
    };
    notes.extend(also_found(&usable, sdk));
    Ok(SdkChoice {
        sdk,
        notes,
        warnings,
    })
}

/// A warning when `sdk`'s major is not one the HIP runtime that will run the code serves.
fn runtime_mismatch(sdk: &RocmSdk, runtime: Option<&HipRuntime>, warnings: &mut Vec<String>) {
    if let (Some(rt), Some(m)) = (runtime, major(sdk)) {
        if !rt.majors().contains(&m) {
            warnings.push(format!(
                "{} is ROCm {m}, but the HIP runtime that will run the code is ROCm {} ({}: {}); code built with one major may not load or may see no GPU under the other. Install a ROCm {}.x SDK (or a driver with a ROCm {m} runtime)",
                label(sdk), rt.major, rt.found_by, rt.path.display(), rt.major
            ));
        }
    }
}

/// `--rocm X.Y`: the newest usable SDK of that version, or why there is none.
fn by_version<'a>(sdks: &'a [RocmSdk], req: &str) -> Result<&'a RocmSdk, RocmError> {
    let matching: Vec<&RocmSdk> = sdks
        .iter()
        .filter(|s| {
            s.version
                .as_deref()
                .is_some_and(|v| version_matches(v, req))
        })
        .collect();
    if matching.is_empty() {
        return Err(RocmError::VersionNotFound {
            requested: req.to_string(),
            found: found_list(sdks),
        });
    }
    newest(matching.iter().copied().filter(|s| s.usable())).ok_or_else(|| {
        let s = matching[0];
        RocmError::Unusable {
            version: s.version.clone().unwrap_or_default(),
            root: s.root.display().to_string(),
            problems: s.problems.join("; "),
        }
    })
}

/// The note naming the other usable SDKs, when there are any.
fn also_found(usable: &[&RocmSdk], chosen: &RocmSdk) -> Option<String> {
    let others: Vec<String> = usable
        .iter()
        .filter(|s| !std::ptr::eq(**s, chosen))
        .map(|s| label(s))
        .collect();
    (!others.is_empty())
        .then(|| format!("also found: {} (choose with --rocm X.Y)", others.join(", ")))
}

fn found_list(sdks: &[RocmSdk]) -> String {
    if sdks.is_empty() {
        return "none".into();
    }
    sdks.iter()
        .map(|s| {
            let mut t = format!(
                "{} at {} ({})",
                s.version.as_deref().unwrap_or("unknown version"),
                s.root.display(),
                s.kind.describe()
            );
            if !s.usable() {
                t.push_str(&format!(", unusable: {}", s.problems.join("; ")));
            }
            t
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn no_sdk_help(os: Os, sdks: &[RocmSdk]) -> String {
    let looked = if sdks.is_empty() {
        String::new()
    } else {
        format!(" Candidates: {}.", found_list(sdks))
    };
    let how = os.rules().rocm_install_hint();
    format!("{how}.{looked}")
}
