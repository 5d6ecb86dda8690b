//! The compute backend (`cpu`, `rocm`, `cuda`) and the GPU toolchain it brings: which SDK,
//! which compilers, which GPU architectures, and the environment and CMake defines they need.
//! Pure: every fact comes from the [`Machine`]; the choices themselves (SDK by version and
//! runtime, archs by cascade) are rocbuild-probe's pure functions.

pub mod compiler_scan;
pub mod cuda_setup;
pub mod hip_compat;
pub mod tools;
pub(crate) mod tools_install;
pub mod wheel_compiler;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocbuild_probe::{choose_sdk, resolve_archs, Flavor, Machine};
use rocbuild_recipe::Recipe;
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
    /// The major of the SDK's clang ("22"), as the probe read it.
    #[serde(default)]
    pub clang_version: Option<String>,
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
    /// The toolkit's version (`13.2`), when it was read through its nvcc.
    #[serde(default)]
    pub version: Option<String>,
    /// The host C++ compiler nvcc uses (accepted by the toolkit's crt/host_config.h).
    #[serde(default)]
    pub host_compiler: Option<PathBuf>,
    /// Where the toolkit came from and why this host compiler, one line each.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// A build that compiles no GPU code (TorchCodec's CPU decoders) made *for* a GPU with a
/// ROCm torch: `--arch` / `--rocm` are checked against that torch, and recorded.
#[derive(Debug, Clone, Serialize)]
pub struct TorchGpuPlan {
    /// The GPU targets the build is for (recorded in the manifest and the wheel's version).
    pub archs: Vec<String>,
    /// `--arch`, the detection step, or empty.
    pub archs_found_by: String,
    /// torch's HIP version (its version.py).
    pub hip: String,
    /// torch's own arch list (`torch._C._cuda_getArchFlags()`), when it could be read.
    pub torch_archs: Option<Vec<String>>,
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BackendPlan {
    pub backend: Backend,
    /// Why this backend.
    pub reason: String,
    pub rocm: Option<RocmPlan>,
    pub cuda: Option<CudaPlan>,
    /// CPU code built for a ROCm torch's GPU (`--arch` on a recipe with no rocm backend).
    pub torch_gpu: Option<TorchGpuPlan>,
}

impl BackendPlan {
    /// What a run says before it builds (a dry run prints the whole plan instead): the SDK or
    /// toolkit and the GPU architectures, with the notes on them; and what will not work on
    /// the GPU, as warnings (said even with `-q`). The notes first, the warnings second.
    pub fn before_run(&self) -> (Vec<String>, Vec<String>) {
        let (mut notes, mut warnings) = (Vec::new(), Vec::new());
        if let Some(r) = &self.rocm {
            notes.push(format!(
                "ROCm {} at {} ({}), for {} (from {})",
                r.version.as_deref().unwrap_or("(version unknown)"),
                r.root.display(),
                r.kind,
                r.archs.join(";"),
                r.archs_found_by
            ));
            notes.extend(r.notes.iter().cloned());
            warnings.extend(r.warnings.iter().cloned());
        }
        if let Some(c) = &self.cuda {
            notes.push(format!(
                "CUDA {} at {}, for {} (from {})",
                c.version.as_deref().unwrap_or("(version unknown)"),
                c.home.display(),
                c.archs.join(";"),
                c.archs_from
            ));
            notes.extend(c.notes.iter().cloned());
        }
        if let Some(t) = &self.torch_gpu {
            notes.extend(t.notes.iter().cloned());
            warnings.extend(t.warnings.iter().cloned());
        }
        (notes, warnings)
    }

    /// Template variables: `{backend}`, `{rocm.*}`, `{gpu.archs}`, `{cuda.*}`.
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
            vars.insert("cuda.cmake-archs".into(), cmake_cuda_archs(&c.archs));
            vars.insert("cuda.sm".into(), cuda_sm(&c.archs));
            let (named, gencode) = findcuda_split(&c.archs);
            vars.insert("cuda.findcuda-archs".into(), named);
            vars.insert("cuda.findcuda-gencode".into(), gencode);
            if let Some(v) = &c.version {
                vars.insert("cuda.version".into(), v.clone());
                let short: String = v.split('.').take(2).collect();
                vars.insert("cuda.version-short".into(), short);
            }
        }
    }

    /// The environment every HIP/CUDA build reads with this toolchain, whatever builds it
    /// (upstream CTranslate2's ROCm CI sets the same variables); a build system's own
    /// settings (CMake's defines: `build_system/cmake/toolchain.rs`) are its own.
    pub fn env(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        let s = |p: &Path| p.display().to_string();
        if let Some(r) = &self.rocm {
            env.insert("ROCM_PATH".into(), s(&r.root));
            env.insert("HIP_PATH".into(), s(&r.root));
            env.insert("HIP_PLATFORM".into(), "amd".into());
            env.insert("HIP_CLANG_ROOT".into(), s(&r.llvm));
            if let Some(d) = &r.device_lib {
                env.insert("HIP_DEVICE_LIB_PATH".into(), s(d));
            }
        }
        if let Some(c) = &self.cuda {
            env.insert("CUDA_HOME".into(), s(&c.home));
            if let Some(h) = &c.host_compiler {
                env.insert("CUDAHOSTCXX".into(), s(h));
            }
        }
        env
    }
}

/// `8.6;9.0+PTX` as CMAKE_CUDA_ARCHITECTURES takes it: `86-real;90` (a bare number is SASS and
/// PTX, `-real` SASS only); CTranslate2's `Common` / `All` are CMake's `all-major` / `all`.
fn cmake_cuda_archs(archs: &[String]) -> String {
    let one = |a: &String| match a.to_ascii_lowercase().as_str() {
        "common" => "all-major".to_string(),
        "all" => "all".to_string(),
        _ => match rocbuild_probe::parse_cuda_arch(a) {
            Some((n, true, s)) => format!("{n}{s}"),
            Some((n, false, s)) => format!("{n}{s}-real"),
            None => a.clone(),
        },
    };
    archs.iter().map(one).collect::<Vec<_>>().join(";")
}

/// `8.6;9.0+PTX;12.0a` as compute-capability numbers (`86;90;120a`), what bitsandbytes'
/// COMPUTE_CAPABILITY takes (it decides itself which of them also get PTX: the newest);
/// keywords (`Common`, `All`) pass as written.
fn cuda_sm(archs: &[String]) -> String {
    let one = |a: &String| match rocbuild_probe::parse_cuda_arch(a) {
        Some((n, _, s)) => format!("{n}{s}"),
        None => a.clone(),
    };
    archs.iter().map(one).collect::<Vec<_>>().join(";")
}

/// CMake's FindCUDA (`cuda_select_nvcc_arch_flags`, CMake 3.25 to 4.3 alike) names only
/// one-digit majors (`9.0`): `12.0` is "Unknown CUDA Architecture Name". Projects still on it
/// (CTranslate2) get the archs it can name, and nvcc `-gencode` flags for the others, to add to
/// CUDA_NVCC_FLAGS. With none it can name, all stay in the first (its error then says why).
fn findcuda_split(archs: &[String]) -> (String, String) {
    let mut named = Vec::new();
    let mut gencode = Vec::new();
    for a in archs {
        match rocbuild_probe::parse_cuda_arch(a) {
            Some((n, ptx, s)) if n >= 100 => {
                let code = if ptx {
                    format!("[sm_{n}{s},compute_{n}{s}]")
                } else {
                    format!("sm_{n}{s}")
                };
                gencode.push(format!("-gencode=arch=compute_{n}{s},code={code}"));
            }
            _ => named.push(a.clone()),
        }
    }
    if named.is_empty() {
        return (archs.join(";"), String::new());
    }
    (named.join(";"), gencode.join(";"))
}

fn usage(option: &str, reason: String, help: String) -> EngineError {
    EngineError::Usage {
        option: option.into(),
        reason,
        help: Some(help),
    }
}

/// Choose the backend and its toolchain for the recipe's backends (first = fallback).
pub fn choose(recipe: &Recipe, machine: &Machine, opts: &BackendOptions) -> Result<BackendPlan> {
    let recipe_backends = &recipe.backends();
    let needs_hipblas = recipe.raw.needs.hipblas;
    let name = recipe.name();
    let flavor = machine
        .target
        .torch
        .as_ref()
        .map_or(Flavor::Cpu, |t| t.flavor);
    let supports = |b: &str| recipe_backends.iter().any(|x| x == b);
    let gpu_asked = opts.rocm.is_some() || !opts.arch.is_empty();
    // A recipe with no GPU code of its own that runs with the venv's torch (TorchCodec): a
    // GPU named is the ROCm torch's, checked against it; the build is the recipe's own.
    if gpu_asked
        && !supports("rocm")
        && recipe.raw.needs.torch
        && opts
            .backend
            .is_none_or(|b| b.as_str() == recipe_backends[0])
    {
        let torch_gpu = torch_gpu(name, machine, opts)?;
        let first = Backend::parse(&recipe_backends[0]).unwrap_or(Backend::Cpu);
        return Ok(BackendPlan {
            backend: first,
            reason: format!(
                "{name} has no GPU code of its own: it runs with the ROCm torch, built for {}",
                if torch_gpu.archs.is_empty() {
                    "no GPU named".to_string()
                } else {
                    torch_gpu.archs.join(";")
                }
            ),
            rocm: None,
            cuda: None,
            torch_gpu: Some(torch_gpu),
        });
    }
    let recipe = name;
    let (backend, reason) = match &opts.backend {
        Some(b) => {
            if !supports(b.as_str()) {
                let mut help = format!("{recipe} builds: {}", recipe_backends.join(", "));
                if *b == Backend::Rocm && flavor == Flavor::Rocm && recipe_backends.len() == 1 {
                    help = format!(
                        "{recipe} has no GPU code of its own: its build runs with the venv's ROCm torch as it is. Drop --backend; pass --arch gfxNNNN to build it for your GPU (checked against torch's own arch list)"
                    );
                }
                return Err(usage(
                    "--backend",
                    format!("{recipe} has no `{b}` backend"),
                    help,
                ));
            }
            (*b, "--backend".to_string())
        }
        None if gpu_asked && supports("rocm") => (Backend::Rocm, "--rocm/--arch given".into()),
        None if !opts.cuda_arch.is_empty() && supports("cuda") => {
            (Backend::Cuda, "--cuda-arch given".into())
        }
        None if flavor == Flavor::Rocm
            && supports("rocm")
            && !machine.host.rocm_sdks.is_empty() =>
        {
            (
                Backend::Rocm,
                "torch is a ROCm build and a ROCm SDK is installed".into(),
            )
        }
        None if flavor == Flavor::Cuda
            && supports("cuda")
            && machine.host.toolkits.cuda_home.is_some() =>
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
                _ if machine.target.torch.is_none() => {
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
        .then(|| rocm_plan(recipe, needs_hipblas, machine, opts))
        .transpose()?;
    let cuda = (backend == Backend::Cuda)
        .then(|| cuda_plan(machine, opts))
        .transpose()?;
    Ok(BackendPlan {
        backend,
        reason,
        rocm,
        cuda,
        torch_gpu: None,
    })
}

/// The CUDA toolkit to build with and the GPU architectures: `--cuda-arch`, else the GPUs
/// detected, else the toolkit's common ones (CTranslate2's own default).
fn cuda_plan(machine: &Machine, opts: &BackendOptions) -> Result<CudaPlan> {
    let home = machine
        .host
        .toolkits
        .cuda_home
        .clone()
        .ok_or_else(|| EngineError::NoValue {
            variable: "cuda.home".into(),
            why: "the cuda backend needs a CUDA toolkit and none was found".into(),
            help: "set CUDA_HOME to a CUDA toolkit (with nvcc), or use --backend cpu".into(),
        })?;
    let given: Vec<String> = opts.cuda_arch.names().to_vec();
    let detected = machine
        .target
        .cuda_gpu
        .as_ref()
        .filter(|g| !g.archs.is_empty());
    let (archs, archs_from) = if !given.is_empty() {
        (given, "--cuda-arch".to_string())
    } else if let Some(g) = detected {
        (g.archs.clone(), g.found_by.clone())
    } else {
        // CTranslate2's own default: the common architectures of the toolkit.
        let why = match &machine.target.cuda_gpu {
            Some(g) => format!("no GPU detected ({})", g.steps.join("; ")),
            None => "no GPU detection".to_string(),
        };
        (vec!["Common".into()], why)
    };
    let (version, host_compiler, notes) = match &machine.host.toolkits.cuda {
        Some(found) => checked_toolkit(
            found,
            &archs,
            &rocbuild_probe::install_command(
                &machine.host.platform,
                &[rocbuild_probe::Prerequisite::CxxCompiler],
            ),
        )?,
        // Not read yet (a dry run before the toolkit is installed): the version asked.
        None => (
            machine
                .host
                .toolkits
                .cuda_version
                .clone()
                .or(opts.cuda.clone()),
            None,
            Vec::new(),
        ),
    };
    let mut notes = notes;
    notes.extend(across_majors(machine, version.as_deref()));
    Ok(CudaPlan {
        home,
        archs,
        archs_from,
        version,
        host_compiler,
        notes,
    })
}

/// A toolkit of another CUDA major than the venv's torch: what the build will need at run time
/// that torch's own CUDA wheels do not bring (the build itself is not wrong: CTranslate2 has no
/// use for torch, and a system install may hold that major's libraries).
fn across_majors(machine: &Machine, toolkit: Option<&str>) -> Option<String> {
    let torch = machine.target.torch.as_ref()?.cuda.as_deref()?;
    let toolkit = toolkit?;
    let major = |v: &str| v.split('.').next().map(str::to_string);
    let (m, t) = (major(toolkit)?, major(torch)?);
    (m != t).then(|| {
        format!(
            "torch is a CUDA {torch} build and this build is CUDA {toolkit}: at run time it needs CUDA {m}'s own libraries (libcudart.so.{m}, libcublas.so.{m}, …), which torch's CUDA {t} wheels do not bring, and a package that picks its library by torch's CUDA (bitsandbytes) takes none of another major; a toolkit of CUDA {t} (--cuda {t}.x) matches torch"
        )
    })
}

/// The toolkit read before planning: refused when no host compiler it accepts is here, or
/// when it cannot compile for an arch asked; else its version, host compiler and notes.
fn checked_toolkit(
    found: &rocbuild_probe::CudaFound,
    archs: &[String],
    install: &str,
) -> Result<(Option<String>, Option<PathBuf>, Vec<String>)> {
    let tk = &found.toolkit;
    let Some(host) = &found.host else {
        let l = &tk.host;
        let range = |min: Option<u32>, max: Option<u32>| match (min, max) {
            (Some(a), Some(b)) => format!("{a} to {b}"),
            (None, Some(b)) => format!("up to {b}"),
            (Some(a), None) => format!("{a} or later"),
            (None, None) => "any".into(),
        };
        return Err(EngineError::CudaNoHostCompiler {
            version: tk.version.clone(),
            limits: format!(
                "gcc {}, clang {}, read from {}",
                range(l.gcc_min, l.gcc_max),
                range(l.clang_min, l.clang_max),
                tk.root.join("include/crt/host_config.h").display()
            ),
            refused: if found.host_refused.is_empty() {
                "- no C++ compiler found ($CUDAHOSTCXX, $CXX, c++, g++, g++-N, clang++-N on PATH)".into()
            } else {
                found.host_refused.iter().map(|r| format!("- {r}")).collect::<Vec<_>>().join("\n")
            },
            help: format!(
                "install a C++ compiler within those versions ({install}, or a versioned g++-N / clang++-N: rocbuild finds them on PATH), or name one with CUDAHOSTCXX=/path/to/g++; nvcc's -allow-unsupported-compiler is not used: an unsupported host compiler may build wrong code"
            ),
        });
    };
    let problems = rocbuild_probe::unknown_cuda_archs(tk, archs);
    if !problems.is_empty() {
        let known: Vec<String> = tk
            .sass
            .iter()
            .map(|a| rocbuild_probe::dotted_arch(*a))
            .collect();
        return Err(EngineError::CudaArch {
            version: tk.version.clone(),
            root: tk.root.display().to_string(),
            problems: problems.iter().map(|p| format!("- {p}")).collect::<Vec<_>>().join("\n"),
            help: format!(
                "CUDA {} compiles for {} (nvcc --list-gpu-code); choose from those with --cuda-arch, or, for an older GPU, a toolkit that still has it with --cuda X.Y",
                tk.version,
                known.join(", ")
            ),
        });
    }
    let mut notes = vec![format!(
        "CUDA {} ({}) at {}, from {}",
        tk.version,
        tk.release.as_deref().unwrap_or("release unknown"),
        tk.root.display(),
        found.from
    )];
    notes.extend(found.wheels.iter().map(|w| format!("  wheel: {w}")));
    notes.push(format!("host compiler: {} — {}", host.describe, host.why));
    Ok((Some(tk.version.clone()), Some(host.path.clone()), notes))
}

/// `--arch` / `--rocm` for a recipe with no GPU code that runs with the venv's torch: that
/// torch must be a ROCm build with code for each GPU named, and `--rocm` its own ROCm.
fn torch_gpu(recipe: &str, machine: &Machine, opts: &BackendOptions) -> Result<TorchGpuPlan> {
    let option = match (&opts.rocm, opts.arch.is_empty()) {
        (_, false) => format!("--arch {}", opts.arch.names().join(" ")),
        (Some(r), true) => format!("--rocm {r}"),
        (None, true) => "--arch".to_string(),
    };
    let rocm_index = "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/rocm6.4 (or TheRock's index for your GPU family)";
    let torch = match machine.target.torch.as_ref() {
        Some(t) if t.flavor == Flavor::Rocm => t,
        other => {
            let (torch, what) = match other {
                Some(t) if t.flavor == Flavor::Cuda => (
                    t.version.clone(),
                    format!(
                        "a CUDA {} build (NVIDIA GPUs only)",
                        t.cuda.as_deref().unwrap_or("")
                    ),
                ),
                Some(t) => (t.version.clone(), "a CPU-only build".to_string()),
                None => ("(none)".into(), "missing".into()),
            };
            return Err(EngineError::GpuNeedsRocmTorch {
                option: option.clone(),
                torch,
                what,
                recipe: recipe.into(),
                help: format!(
                    "for an AMD GPU, install a ROCm torch into the venv first ({} -m {rocm_index}), then run again with {option}; or drop {option} to build {recipe} for the torch you have",
                    machine.target.python.exe.display()
                ),
            });
        }
    };
    let hip = torch.hip.clone().unwrap_or_default();
    let mut notes = Vec::new();
    let mut warnings = Vec::new();
    if let Some(r) = &opts.rocm {
        if !rocbuild_probe::version_matches(&hip, r) {
            let hip_mm: Vec<&str> = hip.split('.').take(2).collect();
            return Err(EngineError::RocmNotTorchs {
                requested: r.clone(),
                torch: torch.version.clone(),
                hip: hip.clone(),
                recipe: recipe.into(),
                help: format!(
                    "drop --rocm (or pass --rocm {}); to run on ROCm {r}, install a torch built for it ({} -m pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/rocm{r}), then run again",
                    hip_mm.join("."),
                    machine.target.python.exe.display()
                ),
            });
        }
        notes.push(format!(
            "--rocm {r}: torch {} runs on ROCm (HIP {hip})",
            torch.version
        ));
    }
    let torch_archs = machine
        .target
        .gpu
        .as_ref()
        .and_then(|g| g.torch_arch_list.clone())
        .filter(|l| !l.is_empty());
    let (named, found_by) = if !opts.arch.is_empty() {
        (
            rocbuild_probe::named_targets(opts.arch.names())?,
            "--arch".to_string(),
        )
    } else {
        match machine.target.gpu.as_ref().filter(|g| !g.archs.is_empty()) {
            Some(g) => (rocbuild_probe::named_targets(&g.archs)?, g.found_by.clone()),
            None => (Vec::new(), String::new()),
        }
    };
    let has = |list: &[String], name: &str| list.iter().any(|a| a.split(':').next() == Some(name));
    let mut archs: Vec<String> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for (token, targets) in &named {
        let alias = targets.len() != 1 || targets[0].name != token.split(':').next().unwrap_or("");
        let kept: Vec<String> = targets
            .iter()
            .filter(|t| torch_archs.as_deref().is_none_or(|l| has(l, &t.name)))
            .map(|t| t.id())
            .collect();
        if kept.is_empty() {
            missing.push(token.clone());
            continue;
        }
        if alias {
            notes.push(format!(
                "{token} means {} (those torch has code for)",
                kept.join(";")
            ));
        }
        for a in kept {
            if !archs.contains(&a) {
                archs.push(a);
            }
        }
    }
    if !missing.is_empty() {
        let built = torch_archs.clone().unwrap_or_default().join(";");
        return Err(EngineError::TorchLacksArch {
            torch: torch.version.clone(),
            missing: missing.join(", "),
            built,
            help: format!(
                "{recipe}'s decoders are CPU code and would build, but torch itself cannot run on {}: its GPU kernels fail there (hipErrorInvalidDeviceFunction). Install a torch built for it ({} -m {rocm_index}), or name a GPU torch has code for with --arch",
                missing.join(", "),
                machine.target.python.exe.display()
            ),
        });
    }
    match (&torch_archs, archs.is_empty()) {
        (Some(l), false) => notes.push(format!(
            "torch {} has code for {} (its arch list: {})",
            torch.version,
            archs.join(";"),
            l.join(";")
        )),
        (None, false) => {
            let steps = machine
                .target
                .gpu
                .as_ref()
                .map(|g| g.steps.join("; "))
                .unwrap_or_else(|| "not probed".into());
            warnings.push(format!(
                "torch's own arch list could not be read ({steps}): whether torch {} has code for {} is not checked",
                torch.version,
                archs.join(";")
            ));
        }
        (_, true) => notes.push(
            "no GPU named or detected: only torch's ROCm is recorded (pass --arch gfxNNNN)".into(),
        ),
    }
    Ok(TorchGpuPlan {
        archs,
        archs_found_by: found_by,
        hip,
        torch_archs,
        notes,
        warnings,
    })
}

/// What `sdk` lacks for this recipe's HIP build (hipBLAS), as the error that says so.
fn sdk_lacks(
    recipe: &str,
    needs_hipblas: bool,
    machine: &Machine,
    sdk: &rocbuild_probe::RocmSdk,
) -> Option<EngineError> {
    (needs_hipblas && sdk.hipblas.is_none()).then(|| EngineError::SdkLacks {
        recipe: recipe.into(),
        part: "hipBLAS".into(),
        sdk: format!(
            "ROCm {} at {}",
            sdk.version.as_deref().unwrap_or("(unknown version)"),
            sdk.root.display()
        ),
        found: candidate_lines(machine, Some(&sdk.root)).join("\n"),
    })
}

/// Every problem found, in one answer: the one error itself when there is one, else all of
/// them (the same message said twice, e.g. an unknown arch for two SDKs, once).
fn one_answer(recipe: &str, problems: Vec<EngineError>) -> EngineError {
    let mut seen: Vec<String> = Vec::new();
    let mut unique: Vec<EngineError> = Vec::new();
    for p in problems {
        let text = p.to_string();
        if !seen.contains(&text) {
            seen.push(text);
            unique.push(p);
        }
    }
    if unique.len() == 1 {
        if let Some(only) = unique.pop() {
            return only;
        }
    }
    let mut helps: Vec<String> = Vec::new();
    for p in &unique {
        if let Some(h) = miette::Diagnostic::help(p).map(|h| h.to_string()) {
            if !helps.contains(&h) {
                helps.push(h);
            }
        }
    }
    EngineError::RocmProblems {
        recipe: recipe.into(),
        count: unique.len(),
        list: seen
            .iter()
            .enumerate()
            .map(|(i, t)| format!("{}. {t}", i + 1))
            .collect::<Vec<_>>()
            .join("\n"),
        help: helps
            .iter()
            .enumerate()
            .map(|(i, h)| format!("{}. {h}", i + 1))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn rocm_plan(
    recipe: &str,
    needs_hipblas: bool,
    machine: &Machine,
    opts: &BackendOptions,
) -> Result<RocmPlan> {
    let os = machine.host.platform.os; // the SDK and its compilers are the host's
    let torch_archs = machine
        .target
        .gpu
        .as_ref()
        .and_then(|g| g.torch_arch_list.as_deref());
    let check = |sdk: &rocbuild_probe::RocmSdk| {
        let archs = resolve_archs(&opts.arch, machine.target.gpu.as_ref(), sdk, torch_archs);
        (archs, sdk_lacks(recipe, needs_hipblas, machine, sdk))
    };
    let choice = match choose_sdk(
        &machine.host.rocm_sdks,
        opts.rocm.as_deref(),
        machine.target.hip_runtime.as_ref(),
        os,
    ) {
        Ok(c) => c,
        // The SDK asked for is missing or broken: say too what each other SDK lacks, so one
        // run tells whether installing that one is the only way.
        Err(e) => {
            let mut problems: Vec<EngineError> = vec![e.into()];
            for sdk in machine.host.rocm_sdks.iter().filter(|s| s.usable()) {
                let (archs, lacks) = check(sdk);
                problems.extend(archs.err().map(EngineError::from));
                problems.extend(lacks);
            }
            return Err(one_answer(recipe, problems));
        }
    };
    let sdk = choice.sdk;
    let archs = match check(sdk) {
        (Ok(a), None) => a,
        (Ok(_), Some(lacks)) => return Err(lacks),
        (Err(e), None) => return Err(e.into()),
        (Err(e), Some(lacks)) => return Err(one_answer(recipe, vec![e.into(), lacks])),
    };
    let exe = |n: &str| format!("{n}{}", os.rules().exe_suffix());
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
    // Kernels are loaded at run time, not linked: a build for a GPU the SDK's math libraries
    // have none for succeeds and then fails at the first GEMM. Said before anything is built.
    let used: &[&str] = if needs_hipblas {
        &["rocBLAS", "hipBLASLt"]
    } else {
        &[]
    };
    if needs_hipblas {
        warnings.extend(
            archs
                .archs
                .iter()
                .filter_map(|a| rocbuild_probe::kernels::missing_for(sdk, a, used)),
        );
    }
    let bin = sdk
        .bin_dir
        .clone()
        .unwrap_or_else(|| join(os, &sdk.root, &["bin"]));
    let parts = if sdk.parts.is_empty() {
        std::slice::from_ref(&sdk.root)
    } else {
        &sdk.parts[..]
    };
    let lib_dir = os.rules().shared_lib_dir();
    let mut runtime: Vec<PathBuf> = parts.iter().map(|p| join(os, p, &[lib_dir])).collect();
    if let Some(l) = sdk.lib_dir.as_ref().filter(|_| lib_dir == "lib") {
        if !runtime.contains(l) {
            runtime.insert(0, l.clone());
        }
    }
    let candidates = candidate_lines(machine, Some(&sdk.root));
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
        clang_version: sdk.clang_version.clone(),
        device_lib: sdk.device_lib_dir.clone(),
        llvm,
        bin,
        candidates,
        notes,
        warnings,
    })
}

/// Every SDK found, one line each, the one used (`chosen`) marked with `*`.
fn candidate_lines(machine: &Machine, chosen: Option<&Path>) -> Vec<String> {
    machine
        .host
        .rocm_sdks
        .iter()
        .map(|c| {
            let mut line = format!(
                "{} {} {} ({})",
                if Some(c.root.as_path()) == chosen {
                    "*"
                } else {
                    " "
                },
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
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::recipe;
    use rocbuild_probe::GpuArchs;
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::{cpu_machine, machine};

    #[test]
    fn cuda_archs_as_cmake_takes_them() {
        let a = |v: &[&str]| cmake_cuda_archs(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(a(&["8.6", "9.0+PTX"]), "86-real;90");
        assert_eq!(a(&["sm_120", "12.0a"]), "120-real;120a-real");
        assert_eq!(a(&["Common"]), "all-major");
    }

    #[test]
    fn cuda_archs_as_compute_capability_numbers() {
        let a = |v: &[&str]| cuda_sm(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(a(&["8.6", "9.0+PTX", "sm_120", "12.0a"]), "86;90;120;120a");
        assert_eq!(a(&["Common"]), "Common");
    }

    #[test]
    fn findcuda_gets_the_archs_it_can_name_and_nvcc_flags_for_the_rest() {
        let a = |v: &[&str]| findcuda_split(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            a(&["8.6", "9.0", "12.0+PTX"]),
            (
                "8.6;9.0".to_string(),
                "-gencode=arch=compute_120,code=[sm_120,compute_120]".to_string()
            )
        );
        assert_eq!(
            a(&["8.9", "10.0"]),
            (
                "8.9".to_string(),
                "-gencode=arch=compute_100,code=sm_100".to_string()
            )
        );
        assert_eq!(a(&["12.0"]), ("12.0".to_string(), String::new()));
    }

    fn arch(a: &str) -> BackendOptions {
        BackendOptions {
            arch: rocbuild_probe::GpuTargets::parse(&[a]),
            ..BackendOptions::default()
        }
    }

    /// The Linux ROCm torch (HIP 6.4) whose own arch list is `list`.
    fn rocm_torch(list: Option<&[&str]>) -> Machine {
        let mut m = machine(Os::Linux);
        m.target.gpu = Some(GpuArchs {
            archs: vec!["gfx1201".into()],
            found_by: "--arch".into(),
            torch_arch_list: list.map(|l| l.iter().map(|s| s.to_string()).collect()),
            steps: vec!["torch arch list: python exited with 1".into()],
            ..GpuArchs::default()
        });
        m
    }

    #[test]
    fn torchcodec_takes_arch_for_a_rocm_torch_that_has_code_for_it() {
        let r = recipe("torchcodec");
        let m = rocm_torch(Some(&["gfx1100", "gfx1201"]));
        let b = choose(&r, &m, &arch("gfx1201")).unwrap();
        assert_eq!(b.backend, Backend::Cpu, "its code is CPU code");
        assert!(b.rocm.is_none(), "no SDK is used");
        let t = b.torch_gpu.unwrap();
        assert_eq!(t.archs, ["gfx1201"]);
        assert_eq!(t.hip, "6.4.43482");
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        assert!(t.notes.iter().any(|n| n.contains("has code for gfx1201")));
        // A family: the members torch has code for.
        let t = choose(&r, &m, &arch("gfx120X")).unwrap().torch_gpu.unwrap();
        assert_eq!(t.archs, ["gfx1201"]);
        // --rocm naming torch's own ROCm is fine, and recorded as torch's.
        let opts = BackendOptions {
            rocm: Some("6.4".into()),
            ..arch("gfx1201")
        };
        assert!(choose(&r, &m, &opts).unwrap().torch_gpu.is_some());
    }

    #[test]
    fn torchcodec_refuses_an_arch_torch_has_no_code_for() {
        let r = recipe("torchcodec");
        let m = rocm_torch(Some(&["gfx1030", "gfx1100"]));
        match choose(&r, &m, &arch("gfx1201")) {
            Err(EngineError::TorchLacksArch {
                missing,
                built,
                help,
                ..
            }) => {
                assert_eq!(missing, "gfx1201");
                assert_eq!(built, "gfx1030;gfx1100");
                assert!(help.contains("pip install"), "{help}");
            }
            other => panic!("{other:?}"),
        }
        // torch's list unknown: built, with a warning that it was not checked.
        let m = rocm_torch(None);
        let t = choose(&r, &m, &arch("gfx1201")).unwrap().torch_gpu.unwrap();
        assert_eq!(t.archs, ["gfx1201"]);
        assert!(
            t.warnings[0].contains("not checked") && t.warnings[0].contains("exited with 1"),
            "{:?}",
            t.warnings
        );
        // A name that is no GPU at all.
        assert!(matches!(
            choose(&r, &m, &arch("gfx1201x")),
            Err(EngineError::Arch(rocbuild_probe::ArchError::Unknown { .. }))
        ));
    }

    #[test]
    fn torchcodec_arch_on_a_cpu_or_cuda_torch_says_what_why_and_how() {
        let r = recipe("torchcodec");
        let m = cpu_machine(Os::Linux);
        match choose(&r, &m, &arch("gfx1201")) {
            Err(e @ EngineError::GpuNeedsRocmTorch { .. }) => {
                let text = e.to_string();
                assert!(text.contains("--arch gfx1201"), "{text}");
                assert!(text.contains("CPU-only build"), "{text}");
                let help = miette::Diagnostic::help(&e).unwrap().to_string();
                assert!(help.contains("install a ROCm torch"), "{help}");
                assert!(help.contains("drop --arch gfx1201"), "{help}");
            }
            other => panic!("{other:?}"),
        }
        let mut m = cpu_machine(Os::Linux);
        if let Some(t) = &mut m.target.torch {
            t.flavor = Flavor::Cuda;
            t.cuda = Some("13.2".into());
        }
        match choose(&r, &m, &arch("gfx1201")) {
            Err(EngineError::GpuNeedsRocmTorch { what, .. }) => {
                assert!(what.contains("CUDA 13.2"), "{what}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn torchcodec_rocm_must_be_torchs_own() {
        let r = recipe("torchcodec");
        let m = rocm_torch(Some(&["gfx1201"]));
        let opts = BackendOptions {
            rocm: Some("6.2".into()),
            ..BackendOptions::default()
        };
        match choose(&r, &m, &opts) {
            Err(EngineError::RocmNotTorchs { hip, help, .. }) => {
                assert_eq!(hip, "6.4.43482");
                assert!(help.contains("--rocm 6.4"), "{help}");
                assert!(help.contains("whl/rocm6.2"), "{help}");
            }
            other => panic!("{other:?}"),
        }
        // --backend rocm: no such backend, and the way to say what was meant.
        let opts = BackendOptions {
            backend: Some(Backend::Rocm),
            ..BackendOptions::default()
        };
        match choose(&r, &m, &opts) {
            Err(EngineError::Usage { help: Some(h), .. }) => {
                assert!(h.contains("--arch gfxNNNN"), "{h}")
            }
            other => panic!("{other:?}"),
        }
    }

    fn sdk(
        version: &str,
        root: &str,
        targets: &[&str],
        hipblas: Option<&str>,
    ) -> rocbuild_probe::RocmSdk {
        rocbuild_probe::RocmSdk {
            root: root.into(),
            version: Some(version.into()),
            version_source: None,
            hip_version: None,
            clang_version: None,
            rocblas_version: None,
            kind: rocbuild_probe::SdkKind::OptRocm,
            named_by: Vec::new(),
            parts: Vec::new(),
            clang: Some(format!("{root}/llvm/bin/clang").into()),
            clangxx: Some(format!("{root}/llvm/bin/clang++").into()),
            hipcc: None,
            device_lib_dir: Some(format!("{root}/amdgcn/bitcode").into()),
            targets: targets.iter().map(|t| t.to_string()).collect(),
            hipblas: hipblas.map(str::to_string),
            rocblas: false,
            tensile_archs: Vec::new(),
            tensile_dir: None,
            kernels: Vec::new(),
            the_rock: None,
            amd_comgr: None,
            cmake_dirs: Vec::new(),
            bin_dir: None,
            lib_dir: None,
            problems: Vec::new(),
        }
    }

    /// `rocbuild ctranslate2 --rocm 6.2` on a machine with only a ROCm 5.2 without hipBLAS:
    /// one answer names the missing version, the arch 5.2 cannot compile for and the missing
    /// hipBLAS, not one of them per run.
    #[test]
    fn every_sdk_problem_is_said_in_one_answer() {
        let r = recipe("ctranslate2");
        let mut m = machine(Os::Linux);
        m.host.rocm_sdks = vec![sdk("5.2.0", "/usr", &["gfx1010", "gfx1030"], None)];
        let opts = BackendOptions {
            rocm: Some("6.2".into()),
            ..arch("gfx1100")
        };
        let e = choose(&r, &m, &opts).unwrap_err();
        let help = miette::Diagnostic::help(&e)
            .map(|h| h.to_string())
            .unwrap_or_default();
        match &e {
            EngineError::RocmProblems { count, list, .. } => {
                assert_eq!(*count, 3, "{list}");
                assert!(
                    list.contains("1. ROCm 6.2 not found; found: 5.2.0 at /usr"),
                    "{list}"
                );
                assert!(
                    list.contains("2. ROCm 5.2.0 at /usr cannot compile for gfx1100"),
                    "{list}"
                );
                assert!(
                    list.contains(
                        "3. ctranslate2's HIP build links hipBLAS, and ROCm 5.2.0 at /usr has none"
                    ),
                    "{list}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(help.contains("install ROCm 6.2"), "{help}");
        assert!(help.contains("install hipBLAS"), "{help}");
        // Without --rocm: the SDK found, both of its problems.
        match choose(&r, &m, &arch("gfx1100")) {
            Err(EngineError::RocmProblems { count: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
        // One problem is said as itself.
        assert!(matches!(
            choose(&r, &m, &arch("gfx1010")),
            Err(EngineError::SdkLacks { .. })
        ));
        m.host.rocm_sdks[0].hipblas = Some("0.51.0".into());
        assert!(matches!(
            choose(&r, &m, &arch("gfx1100")),
            Err(EngineError::Arch(_))
        ));
        assert!(choose(&r, &m, &arch("gfx1010")).is_ok());
    }

    /// `rocbuild ctranslate2 --arch gfx1010` with a ROCm whose rocBLAS has no kernels for it:
    /// the build would succeed and fail at its first GEMM, so the run says so before it builds
    /// (not only `--dry-run`), with the SDK and the archs it builds for.
    #[test]
    fn a_run_says_the_sdk_its_archs_and_what_will_not_work_before_it_builds() {
        let r = recipe("ctranslate2");
        let mut m = machine(Os::Linux);
        let mut s = sdk(
            "6.2.4",
            "/opt/rocm-6.2.4",
            &["gfx1010", "gfx1100"],
            Some("2.2.0"),
        );
        s.rocblas = true;
        s.tensile_archs = vec!["gfx1100".into()];
        m.host.rocm_sdks = vec![s];
        let (notes, warnings) = choose(&r, &m, &arch("gfx1010")).unwrap().before_run();
        assert_eq!(
            notes[0],
            "ROCm 6.2.4 at /opt/rocm-6.2.4 (AMD ROCm packages (/opt/rocm*)), for gfx1010 (from --arch)"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("no Tensile kernels for gfx1010")),
            "{warnings:?}"
        );
        let (_, warnings) = choose(&r, &m, &arch("gfx1100")).unwrap().before_run();
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
