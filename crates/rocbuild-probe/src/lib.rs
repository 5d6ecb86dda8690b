//! The machine, as plain data.
//!
//! [`Machine`] is what the planner reads. [`probe`] fills it from the real machine; tests and
//! `--machine FILE` write one by hand, which is how a Windows or macOS plan is made on Linux.

mod cheader;
pub mod cross;
mod cuda_gpu;
mod cuda_toolkit;
mod ffmpeg;
mod gfx;
mod gpu;
mod gpu_targets;
pub mod kernels;
mod light;
mod mkl;
mod probe_env;
mod python;
mod rocblas;
mod rocm;
mod rocm_scan;
mod rocm_version;
mod runtime;
pub mod space;
mod syslib;
mod tools;
mod torch;
pub mod windows_compiler;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use cheader::c_define;
pub use cross::CrossWindows;
pub use cuda_gpu::{
    detect_cuda_driver, detect_cuda_gpu, parse_compute_caps, parse_driver_banner, CudaDriver,
};
pub use cuda_toolkit::{
    choose_host_compiler, cuda_vars, dotted_arch, gpu_codes, host_candidates, nvcc_release,
    parse_cuda_arch, read_cuda_toolkit, system_cuda_roots, unknown_cuda_archs, CudaFound,
    CudaToolkit, HostCandidate, HostCompiler, HostLimits,
};
pub use ffmpeg::{find_ffmpeg, probe_ffmpeg, soname_major_to_ffmpeg};
pub use gfx::{
    describe_gfx, expand_alias, gfx_of_bitcode_file, isa_bitcode_file, named_targets,
    nearest_names, parse_target_id, resolve_archs, ArchChoice, ArchError, GfxTarget,
};
pub use gpu::{
    detect_gpu, explain_hsa_override, gfx_from_override, gfx_from_target_version, gpu_archs_light,
    parse_amdgpu_arch, parse_hipinfo, parse_rocm_agent_enumerator, parse_rocminfo,
    read_kfd_topology, GpuArchs, GpuQuery,
};
pub use gpu_targets::{split_list, split_lists, GpuTargets};
pub use light::{ffmpeg_major_now, site_packages_of, toolkit_version, venv_torch_version};
pub use mkl::{find_mkl, is_mkl_root};
pub use probe_env::{vars, ProbeEnv};
pub use python::{
    distribution_version, installed_distributions, normalize_dist, probe_python, python_in_venv,
};
pub use rocblas::{rocblas_tensile_dir, rocblas_version, tensile_candidates};
pub use rocbuild_platform as platform;

/// A text file the probe reads (a venv's `pyvenv.cfg`, `torch/version.py`, a dist-info's
/// `METADATA`, an SDK's version header): links followed, but never a FIFO or a device (which
/// would block), and never more than 64 MiB (a planted 3 GB `version.py` is refused, not read).
pub(crate) fn read_text(p: impl AsRef<std::path::Path>) -> std::io::Result<String> {
    platform::state_files::read_file_capped_text(p.as_ref(), platform::state_files::cap::RECORD)
}
pub use rocbuild_platform::{join, LinkMethod, Os, PlatformRules};
pub use rocm::{choose_sdk, version_key, version_matches, RocmError, RocmSdk, SdkChoice, SdkKind};
pub use rocm_scan::{bitcode_targets, discover_sdks, tensile_archs};
pub use rocm_version::{natural_key, sort_naturally, NaturalPart};
pub use runtime::{
    driver_runtime_majors, find_hip_runtime, runtime_major_from_name, HipRuntime, RuntimeFile,
};
pub use syslib::{find_library, search_dirs, FoundLibrary, LibrarySpec, SearchDirs};
pub use tools::{
    compiler_of, install_command, install_command_with, install_hint, package_family, probe_tools,
    version_of, Prerequisite,
};
pub use torch::{probe_torch, torch_version, TorchVersion};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    Cpu,
    Cuda,
    Rocm,
}

impl Flavor {
    pub fn as_str(self) -> &'static str {
        match self {
            Flavor::Cpu => "cpu",
            Flavor::Cuda => "cuda",
            Flavor::Rocm => "rocm",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Platform {
    pub os: Os,
    pub arch: String,
    /// Linux distribution id from /etc/os-release (debian, ubuntu, fedora, …), for install hints.
    #[serde(default)]
    pub distro: Option<String>,
    /// The distributions it derives from (`ID_LIKE`: linuxmint -> ubuntu debian).
    #[serde(default)]
    pub distro_like: Vec<String>,
}

/// Everything the planner knows: the machine that builds ([`Host`]) and what the result is
/// for ([`Target`]), resolved once at the start of a command. Usually both are the same
/// machine; a Linux host building for a Windows venv is just another target.
///
/// `--machine FILE` reads (and `--dry-run --json` writes) the flat form: every field of both,
/// `platform` being the target's, and `host_platform` the host's when it differs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "MachineFile", into = "MachineFile")]
pub struct Machine {
    pub host: Host,
    pub target: Target,
}

/// The machine that builds: its OS, tools, SDKs and compilers, the system libraries found.
/// Host paths (the cache, build trees, tools) follow `host.platform.os`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub platform: Platform,
    pub tools: Tools,
    pub toolkits: Toolkits,
    /// Every ROCm/HIP SDK candidate found (probed when a ROCm build is wanted or torch is ROCm).
    pub rocm_sdks: Vec<RocmSdk>,
    /// The system libraries the recipe names (`[[needs.library]]`) that were found, by name.
    pub libraries: std::collections::BTreeMap<String, FoundLibrary>,
    /// The tools that build for and run a Windows venv from another OS (a Windows target on
    /// a Linux host); None when host and target are the same OS.
    pub cross: Option<CrossWindows>,
}

/// What the result is for, read from the venv's files: its OS and layout, Python, torch,
/// FFmpeg, the GPUs and the HIP runtime that will run the code. Install paths follow
/// `target.platform.os`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub platform: Platform,
    pub venv: Venv,
    pub python: Python,
    pub torch: Option<Torch>,
    pub ffmpeg: Option<Ffmpeg>,
    /// Why FFmpeg was not found, when it was looked for without `--ffmpeg` and is missing (the
    /// planner names it with every other missing prerequisite, in one message).
    pub ffmpeg_missing: Option<String>,
    /// The HIP runtime that will run the built code (driver DLL, torch's own, or the system's).
    pub hip_runtime: Option<HipRuntime>,
    /// The GPU architectures detected (None when not probed).
    pub gpu: Option<GpuArchs>,
    /// The NVIDIA GPUs' compute capabilities (`8.6`), when a CUDA build may need them (None
    /// when not probed).
    pub cuda_gpu: Option<GpuArchs>,
}

/// The flat form of a [`Machine`] (`--machine FILE`).
#[derive(Serialize, Deserialize)]
struct MachineFile {
    platform: Platform,
    /// The host's platform when it is not the target's (a Linux host, a Windows venv).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    host_platform: Option<Platform>,
    venv: Venv,
    python: Python,
    torch: Option<Torch>,
    ffmpeg: Option<Ffmpeg>,
    #[serde(default)]
    ffmpeg_missing: Option<String>,
    tools: Tools,
    #[serde(default)]
    toolkits: Toolkits,
    #[serde(default)]
    rocm_sdks: Vec<RocmSdk>,
    #[serde(default)]
    hip_runtime: Option<HipRuntime>,
    #[serde(default)]
    gpu: Option<GpuArchs>,
    #[serde(default)]
    cuda_gpu: Option<GpuArchs>,
    #[serde(default)]
    libraries: std::collections::BTreeMap<String, FoundLibrary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cross: Option<CrossWindows>,
}

impl From<MachineFile> for Machine {
    fn from(f: MachineFile) -> Machine {
        Machine {
            host: Host {
                platform: f.host_platform.unwrap_or_else(|| f.platform.clone()),
                tools: f.tools,
                toolkits: f.toolkits,
                rocm_sdks: f.rocm_sdks,
                libraries: f.libraries,
                cross: f.cross,
            },
            target: Target {
                platform: f.platform,
                venv: f.venv,
                python: f.python,
                torch: f.torch,
                ffmpeg: f.ffmpeg,
                ffmpeg_missing: f.ffmpeg_missing,
                hip_runtime: f.hip_runtime,
                gpu: f.gpu,
                cuda_gpu: f.cuda_gpu,
            },
        }
    }
}

impl From<Machine> for MachineFile {
    fn from(m: Machine) -> MachineFile {
        let host_platform = (m.host.platform != m.target.platform).then_some(m.host.platform);
        MachineFile {
            platform: m.target.platform,
            host_platform,
            venv: m.target.venv,
            python: m.target.python,
            torch: m.target.torch,
            ffmpeg: m.target.ffmpeg,
            ffmpeg_missing: m.target.ffmpeg_missing,
            tools: m.host.tools,
            toolkits: m.host.toolkits,
            rocm_sdks: m.host.rocm_sdks,
            hip_runtime: m.target.hip_runtime,
            gpu: m.target.gpu,
            cuda_gpu: m.target.cuda_gpu,
            libraries: m.host.libraries,
            cross: m.host.cross,
        }
    }
}

impl Machine {
    /// The OS whose separator joins paths to the venv's files as this process opens them: the
    /// target's, except for a venv of another OS built here (a Windows venv on a Linux disk).
    pub fn venv_path_os(&self) -> Os {
        if self.host.cross.is_some() {
            self.host.platform.os
        } else {
            self.target.platform.os
        }
    }

    /// Host and target on the same platform (what the probe of this machine gives).
    pub fn here(platform: Platform, host: HostParts, target: TargetParts) -> Machine {
        MachineFile {
            platform,
            host_platform: None,
            venv: target.venv,
            python: target.python,
            torch: target.torch,
            ffmpeg: target.ffmpeg,
            ffmpeg_missing: target.ffmpeg_missing,
            tools: host.tools,
            toolkits: host.toolkits,
            rocm_sdks: host.rocm_sdks,
            hip_runtime: target.hip_runtime,
            gpu: target.gpu,
            cuda_gpu: target.cuda_gpu,
            libraries: host.libraries,
            cross: None,
        }
        .into()
    }
}

/// A [`Host`] without its platform (see [`Machine::here`]).
#[derive(Debug, Clone, Default)]
pub struct HostParts {
    pub tools: Tools,
    pub toolkits: Toolkits,
    pub rocm_sdks: Vec<RocmSdk>,
    pub libraries: std::collections::BTreeMap<String, FoundLibrary>,
}

/// A [`Target`] without its platform (see [`Machine::here`]).
#[derive(Debug, Clone)]
pub struct TargetParts {
    pub venv: Venv,
    pub python: Python,
    pub torch: Option<Torch>,
    pub ffmpeg: Option<Ffmpeg>,
    pub ffmpeg_missing: Option<String>,
    pub hip_runtime: Option<HipRuntime>,
    pub gpu: Option<GpuArchs>,
    pub cuda_gpu: Option<GpuArchs>,
}

/// The venv and how it was chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Venv {
    pub root: PathBuf,
    /// `--venv`, `$VIRTUAL_ENV`, `$CONDA_PREFIX` or `./.venv`.
    pub chosen_by: String,
}

/// What can install packages for a venv's Python: its own pip, uv when uv made the venv, and
/// the pip wheel the Python ships for `ensurepip` (run from outside the venv, it installs
/// nothing into it but what it is asked to).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installer {
    /// `import pip` works in the venv.
    pub pip: bool,
    /// pyvenv.cfg says uv made the venv (`uv = 0.x`).
    #[serde(default)]
    pub uv_venv: bool,
    /// The uv to use for a uv-made venv (its `bin/uv`, else uv on PATH).
    #[serde(default)]
    pub uv: Option<PathBuf>,
    /// The pip wheel bundled with the Python (`ensurepip/_bundled`, or Debian's
    /// `/usr/share/python-wheels`).
    #[serde(default)]
    pub bundled_pip: Option<PathBuf>,
    /// A venv of another OS than the host's: the host Python whose pip installs for it
    /// (`--target` with the venv's platform tags).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostPip>,
    /// Host Pythons on PATH that were passed over for `host` because they do not run (pyenv's
    /// `python3.12` shim when that version is not active), each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_skipped: Vec<String>,
}

/// The host's pip, installing wheels for a venv of another OS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPip {
    /// The first host Python on PATH that runs, `pythonX.Y` of the venv's version before
    /// `python3` (CMake runs it at configure time; the build tools it installs are pure Python).
    pub python: PathBuf,
    /// Whether `python` is the venv's minor version (as it says itself when run).
    pub same_version: bool,
    /// `--platform win_amd64 --python-version 3.11 --implementation cp --abi cp311`.
    pub tags: Vec<String>,
}

impl Default for Installer {
    /// A venv of `python -m venv`: pip is there.
    fn default() -> Installer {
        Installer {
            pip: true,
            uv_venv: false,
            uv: None,
            bundled_pip: None,
            host: None,
            host_skipped: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Python {
    pub exe: PathBuf,
    /// major.minor
    pub version: String,
    pub full_version: String,
    pub site_packages: PathBuf,
    pub include: PathBuf,
    pub ext_suffix: String,
    /// sysconfig.get_platform(), e.g. linux-x86_64, win-amd64, macosx-14.0-arm64
    pub platform: String,
    /// Installed distributions (normalized name -> version), from the dist-info directories
    /// of site-packages and of `shared_sites` (site-packages' own win).
    #[serde(default)]
    pub distributions: std::collections::BTreeMap<String, String>,
    /// The site directories outside the venv its Python also reads packages from (a venv
    /// made with `--system-site-packages`: Debian's `python3-torch`, a ROCm image's torch).
    /// Read from, never written to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_sites: Vec<PathBuf>,
    /// What can install packages for this Python (a `uv venv` has no pip).
    #[serde(default)]
    pub installer: Installer,
    /// Windows: the `pythonXY.dll` the venv runs (an extension links against it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dll: Option<PathBuf>,
    /// Windows: the base install's `libs` directory when it holds `pythonXY.lib` (an
    /// embeddable Python has none: rocbuild makes the import library from the DLL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libs: Option<PathBuf>,
    /// The `._pth` file next to the interpreter (Windows' embeddable CPython, as in ComfyUI's
    /// portable build): this Python ignores `PYTHONPATH` and every `PYTHON*` variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pth_file: Option<PathBuf>,
}

impl Python {
    /// Where this Python finds torch: its own site-packages, else the first shared site that
    /// has one (torch in a `--system-site-packages` venv's system Python).
    pub fn torch_site(&self) -> PathBuf {
        std::iter::once(&self.site_packages)
            .chain(&self.shared_sites)
            .find(|s| s.join("torch").join("version.py").is_file())
            .unwrap_or(&self.site_packages)
            .clone()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Torch {
    pub version: String,
    pub git_version: Option<String>,
    pub cuda: Option<String>,
    pub hip: Option<String>,
    pub flavor: Flavor,
    /// None where it does not apply (Windows) or could not be read.
    pub cxx11_abi: Option<bool>,
    pub dir: PathBuf,
    pub lib: PathBuf,
    pub include: PathBuf,
    pub cmake: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ffmpeg {
    /// libavutil's version, e.g. 57.28.100
    pub avutil_version: String,
    /// FFmpeg major (libavutil 57 -> 5).
    pub major: u32,
    pub lib: PathBuf,
    pub include: PathBuf,
    /// PKG_CONFIG_PATH that selects this FFmpeg (for `--ffmpeg DIR`), if any.
    pub pkg_config_path: Option<PathBuf>,
    /// How it was found: `pkg-config`, `--ffmpeg DIR`.
    pub found_by: String,
    /// Where the shared libraries are at run time when not in `lib` (Windows: `bin`).
    #[serde(default)]
    pub bin: Option<PathBuf>,
}

/// The MSVC-ABI toolchain of a Windows host (see [`windows_compiler`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Msvc {
    /// The C and C++ compiler: `cl.exe`, or `clang-cl.exe`.
    pub cl: PathBuf,
    /// The resource compiler (CMake's RC language: `CMAKE_RC_COMPILER`).
    pub rc: Option<PathBuf>,
    /// Environment a build needs to use these tools (INCLUDE, LIB, LIBPATH, PATH).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Where it was found, for the plan: `the developer prompt (INCLUDE, LIB and
    /// VCToolsInstallDir=…)`, `Visual Studio Build Tools 2022 at … found by vswhere, …`,
    /// `LLVM at C:\Program Files\LLVM\bin …`.
    #[serde(default)]
    pub found_by: String,
    /// The linker to use instead of the one CMake picks (`lld-link` beside LLVM's clang-cl).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linker: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tool {
    pub path: PathBuf,
    pub version: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tools {
    pub cmake: Option<Tool>,
    pub ninja: Option<Tool>,
    pub cc: Option<Tool>,
    pub cxx: Option<Tool>,
    pub pkg_config: Option<Tool>,
    /// Windows: the MSVC-ABI compiler and the environment it needs (INCLUDE, LIB, PATH), and
    /// where it was found: a developer prompt, Visual Studio (through the `cc` crate), LLVM.
    #[serde(default)]
    pub msvc: Option<Msvc>,
    /// Compiler caches on PATH (`--compiler-cache`).
    #[serde(default)]
    pub sccache: Option<Tool>,
    #[serde(default)]
    pub ccache: Option<Tool>,
}

/// GPU toolkits torch's own CMake package may demand (the `native` mode).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toolkits {
    pub cuda_home: Option<PathBuf>,
    pub rocm_path: Option<PathBuf>,
    pub hip_clang_path: Option<PathBuf>,
    /// Intel oneAPI MKL's root, when installed (`include/mkl.h` and its static libraries).
    #[serde(default)]
    pub mkl_root: Option<PathBuf>,
    /// The CUDA toolkit a cuda build uses, read through its nvcc (a system one, or one
    /// assembled from the package index's wheels), with the host compiler chosen for it.
    #[serde(default)]
    pub cuda: Option<CudaFound>,
    /// The CUDA version a build would use when its toolkit is not read (yet): a dry run, or a
    /// toolkit not installed because no release of the recipe builds with it.
    #[serde(default)]
    pub cuda_version: Option<String>,
}

#[derive(Debug, Error, miette::Diagnostic)]
pub enum ProbeError {
    #[error("no venv found: --venv not given, $VIRTUAL_ENV and $CONDA_PREFIX unset, rocbuild not installed in a venv, and ./.venv does not exist")]
    #[diagnostic(
        code(rocbuild::probe::no_venv),
        help("pass --venv PATH, or activate the venv first (source .venv/bin/activate)")
    )]
    NoVenv,
    #[error("{root} is not a Python environment: {exe} does not exist ({chosen_by})")]
    #[diagnostic(code(rocbuild::probe::not_a_venv), help("point --venv at a directory made by `python3 -m venv` or conda, which holds bin/python (Scripts\\python.exe on Windows)"))]
    NotAVenv {
        root: String,
        exe: String,
        chosen_by: String,
    },
    #[error("the venv's Python {exe} failed to describe itself: {reason}")]
    #[diagnostic(code(rocbuild::probe::python), help("run `{exe} -c \"import sysconfig\"` to see the problem; recreate the venv if its Python is broken"))]
    Python { exe: String, reason: String },
    #[error(
        "{root} is a Windows venv, but its Python cannot be described from its files: {reason}"
    )]
    #[diagnostic(code(rocbuild::probe::windows_python))]
    WindowsPython {
        root: String,
        reason: String,
        #[help]
        help: String,
    },
    #[error("{root} is a {os} venv (its binaries say so), and rocbuild on {host} builds for {host} venvs and Windows ones only")]
    #[diagnostic(
        code(rocbuild::probe::other_os),
        help("run rocbuild on {os} for it; `rocbuild doctor --venv {root}` reads it from here")
    )]
    OtherOs {
        root: String,
        os: &'static str,
        host: &'static str,
    },
    #[error("FFmpeg not usable: {reason}")]
    #[diagnostic(code(rocbuild::probe::ffmpeg))]
    Ffmpeg {
        reason: String,
        #[help]
        help: String,
    },
}

/// What the caller tells the probe.
#[derive(Debug, Clone, Default)]
pub struct ProbeOptions {
    pub ffmpeg_dir: Option<PathBuf>,
    /// Probe FFmpeg at all (the recipe needs it).
    pub want_ffmpeg: bool,
    /// A ROCm/HIP build is wanted (`--backend rocm`, `--rocm X.Y`): discover SDKs, the HIP
    /// runtime and the GPU archs (the cascade may start a child Python that imports torch).
    pub want_rocm: bool,
    /// The same, but only when the venv's torch is a ROCm build (a recipe whose backend is
    /// chosen from torch's flavor): a CPU or CUDA venv then starts no GPU detection.
    pub want_rocm_with_rocm_torch: bool,
    /// `--arch` was given: the GPU cascade ends at its first step (no child process but
    /// torch's arch list); the targets themselves stay in the build's options.
    pub gpu_named: bool,
    /// A CUDA build may be planned without `--cuda-arch`: look for the NVIDIA GPUs
    /// (`$TORCH_CUDA_ARCH_LIST`, `nvidia-smi`) when torch is a CUDA build or a CUDA toolkit is set.
    pub want_cuda_gpu: bool,
    /// System libraries to look for (the recipe's `[[needs.library]]`).
    pub libraries: Vec<LibrarySpec>,
    /// `--winsysroot DIR`: the MSVC + Windows SDK for a Windows venv built from another OS.
    pub winsysroot: Option<PathBuf>,
    /// `--python-headers DIR`: a Windows Python's headers when its install has none.
    pub python_headers: Option<PathBuf>,
}

/// Describe the real machine.
///
/// Cost: ROCm SDKs and the HIP runtime are read from files (milliseconds) and only when a ROCm
/// build is wanted, `--arch` is given, or torch is a ROCm build (its plan may need the SDK for
/// torch's CMake package). GPU detection, which may import torch in a child Python, runs only
/// for a wanted ROCm build without `--arch`: a no-op rerun of a CPU recipe starts no process.
///
/// `venv` is the one the settings step chose (the CLI's `settings::venv`): the probe never
/// chooses one itself.
///
/// `env` is the command's environment, read once by the settings step (the CLI's
/// `Settings`): every variable the probe asks is asked of it.
pub fn probe(venv: &Venv, opts: &ProbeOptions, env: &ProbeEnv) -> Result<Machine, ProbeError> {
    let host_os = Os::current();
    let venv = venv.clone();
    let os = cross::venv_os(&venv.root, &[], host_os);
    let (python, tools, cross) = if os == host_os {
        (probe_python(&venv, os)?, probe_tools(env), None)
    } else {
        cross::probe_cross(&venv, os, opts, env)?
    };
    let torch = probe_torch(&python.torch_site());
    // FFmpeg not found is a missing prerequisite the planner reports with the others; a
    // `--ffmpeg DIR` that is wrong, or an FFmpeg rocbuild cannot use, is an error here. For
    // a venv of another OS, only `--ffmpeg DIR` (the host's pkg-config knows the host's).
    let (ffmpeg, ffmpeg_missing) = if opts.want_ffmpeg {
        let pkg_config = tools.pkg_config.as_ref().filter(|_| cross.is_none());
        match find_ffmpeg(opts.ffmpeg_dir.as_deref(), pkg_config)? {
            Ok(f) => (Some(f), None),
            Err(why) if cross.is_none() && opts.ffmpeg_dir.is_none() => {
                match ffmpeg::beside_program_on_path(env, host_os) {
                    Some(f) => (Some(f), None),
                    None => (None, Some(why)),
                }
            }
            Err(_) if cross.is_some() => (None, Some(format!("a {} venv's FFmpeg is given with --ffmpeg DIR (a shared build: include/, lib/*.lib, bin/*.dll; `rocbuild ffmpeg` fetches one)", os.as_str()))),
            Err(why) => (None, Some(why)),
        }
    } else {
        (None, None)
    };
    let torch_is_rocm = torch.as_ref().is_some_and(|t| t.flavor == Flavor::Rocm);
    let (rocm_sdks, hip_runtime, gpu) = if opts.want_rocm || opts.gpu_named || torch_is_rocm {
        let site = Some(python.site_packages.as_path());
        let sdks = discover_sdks(env, os, site);
        let runtime = find_hip_runtime(env, os, torch.as_ref().map(|t| t.lib.as_path()), site);
        let want_gpu =
            opts.want_rocm || opts.gpu_named || (opts.want_rocm_with_rocm_torch && torch_is_rocm);
        let gpu = want_gpu.then(|| {
            let tool_dirs: Vec<PathBuf> = sdks
                .iter()
                .flat_map(|s| {
                    s.bin_dir.iter().cloned().chain(
                        s.clang
                            .as_ref()
                            .and_then(|c| c.parent().map(Path::to_path_buf)),
                    )
                })
                .collect();
            detect_gpu(
                env,
                os,
                &GpuQuery {
                    named: opts.gpu_named,
                    torch_python: torch_is_rocm.then_some(python.exe.as_path()),
                    tool_dirs: &tool_dirs,
                },
            )
        });
        (sdks, runtime, gpu)
    } else {
        (Vec::new(), None, None)
    };
    let toolkits = Toolkits {
        cuda_home: env
            .var(vars::CUDA_HOME)
            .or_else(|| env.var(vars::CUDA_PATH))
            .map(PathBuf::from),
        rocm_path: env
            .var(vars::ROCM_PATH)
            .or_else(|| env.var(vars::HIP_PATH))
            .map(PathBuf::from),
        hip_clang_path: env.var(vars::HIP_CLANG_PATH).map(PathBuf::from),
        mkl_root: find_mkl(env, os, std::env::consts::ARCH, Some(venv.root.as_path())),
        cuda: None,
        cuda_version: None,
    };
    // A CUDA build needs a toolkit, and is the default only for a CUDA torch: without either,
    // no nvidia-smi runs.
    let torch_is_cuda = torch.as_ref().is_some_and(|t| t.flavor == Flavor::Cuda);
    let cuda_gpu = (opts.want_cuda_gpu && (torch_is_cuda || toolkits.cuda_home.is_some()))
        .then(|| detect_cuda_gpu(env, os));
    let host_platform = Platform {
        os: host_os,
        arch: std::env::consts::ARCH.to_string(),
        distro: os_release("ID"),
        distro_like: os_release("ID_LIKE")
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
    };
    let platform = if os == host_os {
        host_platform.clone()
    } else {
        Platform {
            os,
            arch: match python.platform.as_str() {
                "win-arm64" => "aarch64".into(),
                _ => "x86_64".into(),
            },
            distro: None,
            distro_like: Vec::new(),
        }
    };
    let libraries = if opts.libraries.is_empty() {
        Default::default()
    } else {
        let dirs = search_dirs(&platform, &rocm_sdks, Some(&venv.root), env);
        opts.libraries
            .iter()
            .filter_map(|spec| Some((spec.name.clone(), find_library(spec, &dirs, os)?)))
            .collect()
    };
    let mut machine = Machine::here(
        platform,
        HostParts {
            tools,
            toolkits,
            rocm_sdks,
            libraries,
        },
        TargetParts {
            venv,
            python,
            torch,
            ffmpeg,
            ffmpeg_missing,
            hip_runtime,
            gpu,
            cuda_gpu,
        },
    );
    machine.host.platform = host_platform;
    machine.host.cross = cross;
    Ok(machine)
}

/// One field of /etc/os-release (`ID`, `ID_LIKE`), unquoted.
fn os_release(key: &str) -> Option<String> {
    let text = crate::read_text("/etc/os-release").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(|v| v.trim().trim_matches(['"', '\'']).to_string())
        .filter(|v| !v.is_empty())
}
