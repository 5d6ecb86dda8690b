//! The compute backend (`cpu`, `rocm`, `cuda`) and the GPU toolchain it brings: which SDK,
//! which compilers, which GPU architectures, and the environment and CMake defines they need.
//! Pure: every fact comes from the [`Machine`]; the choices themselves (SDK by version and
//! runtime, archs by cascade) are rocbuild-probe's pure functions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocbuild_probe::{choose_sdk, resolve_archs, Flavor, Machine, Os};
use serde::Serialize;

use rocbuild_venv::{Backend, BackendOptions};

use crate::error::{EngineError, Result};
use crate::paths::join;

/// The chosen ROCm SDK and targets.
#[derive(Debug, Clone, Serialize)]
pub struct RocmPlan {
    pub root: PathBuf,
    pub version: Option<String>,
    /// HIP's own version (`6.4.43484`), read from `hip_version.h`.
    #[serde(default)]
    pub hip_version: Option<String>,
    pub kind: String,
    /// A distribution's multiarch layout (`/usr`, CMake files under `/usr/lib/<triplet>`):
    /// CMake's HIP language understands it only from 3.27.
    pub multiarch: bool,
    pub archs: Vec<String>,
    pub archs_found_by: String,
    pub clang: PathBuf,
    pub clangxx: PathBuf,
    pub device_lib: Option<PathBuf>,
    pub llvm: PathBuf,
    pub bin: PathBuf,
    /// Where the SDK's shared libraries are at run time (Windows: `bin`, else `lib`), for
    /// each of its parts (TheRock splits one SDK over several packages).
    pub runtime: Vec<PathBuf>,
    /// Every SDK found, one line each (version, kind, root, what it holds), chosen one marked.
    pub candidates: Vec<String>,
    /// Why this SDK / these archs; shown in the plan and the log.
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CudaPlan {
    pub home: PathBuf,
    pub archs: Vec<String>,
    /// `--cuda-arch`, `$TORCH_CUDA_ARCH_LIST`, `nvidia-smi`, or why the common list is used.
    pub archs_from: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct BackendPlan {
    pub backend: Backend,
    /// Why this backend.
    pub reason: String,
    pub rocm: Option<RocmPlan>,
    pub cuda: Option<CudaPlan>,
}

impl BackendPlan {
    /// Template variables: `{backend}`, `{rocm.*}`, `{gpu.archs}`, `{cuda.archs}`.
    pub fn vars(&self, vars: &mut BTreeMap<String, String>) {
        vars.insert("backend".into(), self.backend.as_str().to_string());
        if let Some(r) = &self.rocm {
            let s = |p: &Path| p.display().to_string();
            vars.insert("rocm.path".into(), s(&r.root));
            vars.insert("rocm.version".into(), r.version.clone().unwrap_or_default());
            vars.insert("rocm.bin".into(), s(&r.bin));
            vars.insert("rocm.llvm".into(), s(&r.llvm));
            vars.insert("rocm.clang".into(), s(&r.clang));
            vars.insert("rocm.clangxx".into(), s(&r.clangxx));
            if let Some(d) = &r.device_lib {
                vars.insert("rocm.device-lib".into(), s(d));
            }
            vars.insert("gpu.archs".into(), r.archs.join(";"));
        }
        if let Some(c) = &self.cuda {
            vars.insert("cuda.home".into(), c.home.display().to_string());
            vars.insert("cuda.archs".into(), c.archs.join(";"));
        }
    }

    /// The environment and defines every CMake HIP/CUDA project needs with this toolchain
    /// (upstream CTranslate2's ROCm CI sets the same variables). Recipe defines win.
    pub fn apply(
        &self,
        os: Os,
        define: &mut BTreeMap<String, String>,
        env: &mut BTreeMap<String, String>,
    ) {
        if let Some(r) = &self.rocm {
            let s = |p: &Path| p.display().to_string();
            env.insert("ROCM_PATH".into(), s(&r.root));
            env.insert("HIP_PATH".into(), s(&r.root));
            env.insert("HIP_PLATFORM".into(), "amd".into());
            env.insert("HIP_CLANG_ROOT".into(), s(&r.llvm));
            if let Some(d) = &r.device_lib {
                env.insert("HIP_DEVICE_LIB_PATH".into(), s(d));
            }
            let set = |define: &mut BTreeMap<String, String>, k: &str, v: String| {
                define.entry(k.to_string()).or_insert(v);
            };
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
        if let Some(c) = &self.cuda {
            let nvcc = join(
                os,
                &c.home,
                &[
                    "bin",
                    if os == Os::Windows {
                        "nvcc.exe"
                    } else {
                        "nvcc"
                    },
                ],
            );
            env.insert("CUDA_HOME".into(), c.home.display().to_string());
            define
                .entry("CUDA_TOOLKIT_ROOT_DIR".into())
                .or_insert(c.home.display().to_string());
            define
                .entry("CMAKE_CUDA_COMPILER".into())
                .or_insert(nvcc.display().to_string());
        }
    }
}

fn usage(option: &str, reason: String, help: String) -> EngineError {
    EngineError::Usage {
        option: option.into(),
        reason,
        help: Some(help),
    }
}

/// Choose the backend and its toolchain for `recipe_backends` (first = fallback).
pub fn choose(
    recipe: &str,
    recipe_backends: &[String],
    needs_hipblas: bool,
    machine: &Machine,
    opts: &BackendOptions,
) -> Result<BackendPlan> {
    let flavor = machine.torch.as_ref().map_or(Flavor::Cpu, |t| t.flavor);
    let supports = |b: &str| recipe_backends.iter().any(|x| x == b);
    let gpu_asked = opts.rocm.is_some() || !opts.arch.is_empty();
    let (backend, reason) = match &opts.backend {
        Some(b) => {
            if !supports(b.as_str()) {
                return Err(usage(
                    "--backend",
                    format!("{recipe} has no `{b}` backend"),
                    format!("{recipe} builds: {}", recipe_backends.join(", ")),
                ));
            }
            (*b, "--backend".to_string())
        }
        None if gpu_asked && supports("rocm") => (Backend::Rocm, "--rocm/--arch given".into()),
        None if !opts.cuda_arch.is_empty() && supports("cuda") => {
            (Backend::Cuda, "--cuda-arch given".into())
        }
        None if flavor == Flavor::Rocm && supports("rocm") && !machine.rocm_sdks.is_empty() => (
            Backend::Rocm,
            "torch is a ROCm build and a ROCm SDK is installed".into(),
        ),
        None if flavor == Flavor::Cuda
            && supports("cuda")
            && machine.toolkits.cuda_home.is_some() =>
        {
            (
                Backend::Cuda,
                "torch is a CUDA build and a CUDA toolkit is installed".into(),
            )
        }
        None => {
            // The recipe's backends are validated when it is loaded.
            let first = recipe_backends
                .first()
                .and_then(|b| Backend::parse(b))
                .unwrap_or(Backend::Cpu);
            let why = match flavor {
                Flavor::Rocm if supports("rocm") => {
                    "torch is a ROCm build but no ROCm SDK was found"
                }
                Flavor::Cuda if supports("cuda") => {
                    "torch is a CUDA build but no CUDA toolkit was found"
                }
                _ if recipe_backends.len() <= 1 => "the only backend of this recipe",
                _ if machine.torch.is_none() => {
                    "no torch to follow, and no --rocm, --arch or --cuda-arch given"
                }
                _ => "torch is a CPU build",
            };
            (first, why.to_string())
        }
    };
    if backend != Backend::Rocm && gpu_asked {
        return Err(usage(
            if opts.rocm.is_some() {
                "--rocm"
            } else {
                "--arch"
            },
            format!("it applies to the rocm backend, and this build uses `{backend}`"),
            "add --backend rocm, or drop the option".into(),
        ));
    }
    let rocm = (backend == Backend::Rocm)
        .then(|| rocm_plan(machine, opts))
        .transpose()?;
    if let (Some(r), true) = (&rocm, needs_hipblas) {
        let sdk = machine.rocm_sdks.iter().find(|s| s.root == r.root);
        if sdk.is_some_and(|s| s.hipblas.is_none()) {
            return Err(EngineError::SdkLacks {
                recipe: recipe.into(),
                part: "hipBLAS".into(),
                sdk: format!(
                    "ROCm {} at {}",
                    r.version.as_deref().unwrap_or("(unknown version)"),
                    r.root.display()
                ),
                found: r.candidates.join("\n"),
            });
        }
    }
    let cuda = if backend == Backend::Cuda {
        let home = machine
            .toolkits
            .cuda_home
            .clone()
            .ok_or_else(|| EngineError::NoValue {
                variable: "cuda.home".into(),
                why: "the cuda backend needs a CUDA toolkit and none was found".into(),
                help: "set CUDA_HOME to a CUDA toolkit (with nvcc), or use --backend cpu".into(),
            })?;
        let given: Vec<String> = split_list(&opts.cuda_arch);
        let detected = machine.cuda_gpu.as_ref().filter(|g| !g.archs.is_empty());
        let (archs, archs_from) = if !given.is_empty() {
            (given, "--cuda-arch".to_string())
        } else if let Some(g) = detected {
            (g.archs.clone(), g.found_by.clone())
        } else {
            // CTranslate2's own default: the common architectures of the toolkit.
            let why = match &machine.cuda_gpu {
                Some(g) => format!("no GPU detected ({})", g.steps.join("; ")),
                None => "no GPU detection".to_string(),
            };
            (vec!["Common".into()], why)
        };
        Some(CudaPlan {
            home,
            archs,
            archs_from,
        })
    } else {
        None
    };
    Ok(BackendPlan {
        backend,
        reason,
        rocm,
        cuda,
    })
}

fn split_list(items: &[String]) -> Vec<String> {
    items
        .iter()
        .flat_map(|a| a.split([';', ',']))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn rocm_plan(machine: &Machine, opts: &BackendOptions) -> Result<RocmPlan> {
    let os = machine.platform.os;
    let choice = choose_sdk(
        &machine.rocm_sdks,
        opts.rocm.as_deref(),
        machine.hip_runtime.as_ref(),
        os,
    )?;
    let sdk = choice.sdk;
    let requested = split_list(&opts.arch);
    let torch_archs = machine
        .gpu
        .as_ref()
        .and_then(|g| g.torch_arch_list.as_deref());
    let archs = resolve_archs(&requested, machine.gpu.as_ref(), sdk, torch_archs)?;
    let exe = |n: &str| {
        if os == Os::Windows {
            format!("{n}.exe")
        } else {
            n.to_string()
        }
    };
    let llvm = join(os, &sdk.root, &["lib", "llvm"]);
    let llvm_bin = join(os, &llvm, &["bin"]);
    let clang = sdk
        .clang
        .clone()
        .unwrap_or_else(|| join(os, &llvm_bin, &[&exe("clang")]));
    let clangxx = sdk
        .clangxx
        .clone()
        .unwrap_or_else(|| join(os, &llvm_bin, &[&exe("clang++")]));
    // HIP_CLANG_ROOT is the LLVM root holding the compiler: `…/lib/llvm` for AMD's layouts,
    // the parent of clang's bin dir otherwise (Debian: /usr/lib/llvm-15).
    let llvm = clangxx
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or(llvm);
    let mut notes = choice.notes.clone();
    notes.extend(archs.notes.iter().cloned());
    let mut warnings = choice.warnings.clone();
    warnings.extend(archs.warnings.iter().cloned());
    let bin = sdk
        .bin_dir
        .clone()
        .unwrap_or_else(|| join(os, &sdk.root, &["bin"]));
    let parts = if sdk.parts.is_empty() {
        std::slice::from_ref(&sdk.root)
    } else {
        &sdk.parts[..]
    };
    let mut runtime: Vec<PathBuf> = match os {
        Os::Windows => parts.iter().map(|p| join(os, p, &["bin"])).collect(),
        _ => parts.iter().map(|p| join(os, p, &["lib"])).collect(),
    };
    if let Some(l) = sdk.lib_dir.as_ref().filter(|_| os != Os::Windows) {
        if !runtime.contains(l) {
            runtime.insert(0, l.clone());
        }
    }
    let candidates = machine
        .rocm_sdks
        .iter()
        .map(|c| {
            let mut line = format!(
                "{} {} {} ({})",
                if c.root == sdk.root { "*" } else { " " },
                c.version.as_deref().unwrap_or("?"),
                c.root.display(),
                c.kind.describe()
            );
            line.push_str(&format!(
                ": HIP {}; clang {}; targets {}; hipBLAS {}; rocBLAS {}; amd_comgr {}",
                c.hip_version.as_deref().unwrap_or("?"),
                c.clang_version.as_deref().unwrap_or("?"),
                if c.targets.is_empty() {
                    "none".to_string()
                } else {
                    c.targets.join(" ")
                },
                c.hipblas.as_deref().unwrap_or("no"),
                if !c.rocblas {
                    "no".to_string()
                } else {
                    let v = c.rocblas_version.as_deref().unwrap_or("present");
                    match &c.tensile_dir {
                        Some(d) if !c.tensile_archs.is_empty() => format!(
                            "{v} (Tensile {} in {})",
                            c.tensile_archs.join(" "),
                            d.display()
                        ),
                        _ => format!("{v} without Tensile kernels"),
                    }
                },
                if c.amd_comgr.is_some() { "yes" } else { "no" }
            ));
            for p in &c.problems {
                line.push_str(&format!("; {p}"));
            }
            line
        })
        .collect();
    Ok(RocmPlan {
        root: sdk.root.clone(),
        runtime,
        version: sdk.version.clone(),
        hip_version: sdk.hip_version.clone(),
        kind: sdk.kind.describe().to_string(),
        multiarch: sdk.kind == rocbuild_probe::SdkKind::DebianMultiarch,
        archs: archs.archs.clone(),
        archs_found_by: archs.found_by.clone(),
        clang,
        clangxx,
        device_lib: sdk.device_lib_dir.clone(),
        llvm,
        bin,
        candidates,
        notes,
        warnings,
    })
}
