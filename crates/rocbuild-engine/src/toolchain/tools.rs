//! The tools a build runs: cmake, ninja and the compilers (the SDK's clang for a ROCm build),
//! pkg-config when FFmpeg is found through it; and the build-only pip requirements installed
//! into a directory of the cache, with CMake and Ninja from PyPI when the system has none or
//! too old ones. What a user must install by hand (compilers, FFmpeg, pkg-config) is checked
//! all at once, with one install command.

use std::path::{Path, PathBuf};

use rocbuild_probe::{
    install_command, install_command_with, package_family, Machine, Prerequisite, Tool,
};
use rocbuild_recipe::{Recipe, Resolved};
use serde::Serialize;

use crate::command::Command;
use crate::error::{EngineError, Result};
use crate::paths::{hash_hex, join};
use crate::toolchain::BackendPlan;
use crate::vars::expand;

/// The pip requirements the build needs, installed into a directory of the cache.
#[derive(Debug, Clone, Serialize)]
pub struct ToolsPlan {
    pub dir: PathBuf,
    pub install: Command,
    /// Why a build tool comes from PyPI (`cmake: not on PATH`), one line each.
    #[serde(default)]
    pub why: Vec<String>,
    /// The system command that installs those tools instead, should PyPI be out of reach.
    #[serde(default)]
    pub fallback: Option<String>,
    /// The recipe's `python-build` requirements among them: what a Python the build runs
    /// imports from `dir` (on its `PYTHONPATH`).
    #[serde(skip)]
    pub imported: Vec<String>,
}

/// The programs the configure and build steps run.
#[derive(Debug, Clone, PartialEq)]
pub struct Toolset {
    pub cmake: PathBuf,
    pub ninja: PathBuf,
    pub cc: PathBuf,
    pub cxx: PathBuf,
    /// pkgconf from PyPI, for CMake's `PKG_CONFIG_EXECUTABLE`, where the machine has no
    /// pkg-config; None: CMake finds the machine's own.
    pub pkg_config: Option<PathBuf>,
}

/// What the machine has for the build: the compilers, and cmake / ninja when usable (else
/// they come from PyPI, see [`python_tools`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub cmake: Result<PathBuf, String>,
    pub ninja: Result<PathBuf, String>,
    pub cc: PathBuf,
    pub cxx: PathBuf,
    /// Where the compilers were found, for the plan: the HIP SDK's (`HIP_PATH`), or on a
    /// Windows host a developer prompt, Visual Studio or LLVM (`Msvc::found_by`). None where
    /// nothing but their path is known ($CC or PATH, on Linux and macOS).
    pub found_by: Option<String>,
    /// Why pkg-config comes from PyPI (pkgconf): the recipe needs FFmpeg, which was found
    /// without one (a Windows host's DLLs, `--ffmpeg DIR`), and the machine has none.
    pub pkgconf_from_pypi: Option<String>,
}

/// The C++ compiler a build runs and where it was found: a line of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompilerFound {
    pub cxx: PathBuf,
    pub found_by: String,
}

impl CompilerFound {
    /// `C:\…\cl.exe (the developer prompt (INCLUDE, LIB and VCToolsInstallDir=…))`.
    pub fn line(&self) -> String {
        format!("{} ({})", self.cxx.display(), self.found_by)
    }
}

impl Found {
    /// The compiler and where it was found, when more than its path is known.
    pub fn compiler_found(&self) -> Option<CompilerFound> {
        self.found_by.as_ref().map(|by| CompilerFound {
            cxx: self.cxx.clone(),
            found_by: by.clone(),
        })
    }
}

/// The oldest CMake and Ninja used from the system: TorchCodec asks for CMake 3.18, CMake's
/// Ninja generator wants Ninja 1.10 for dyndep (HIP, modules). Older or absent ones are
/// fetched from PyPI into the tools area.
const MIN_CMAKE: (u32, u32) = (3, 18);
const MIN_NINJA: (u32, u32) = (1, 10);

/// A system tool, if it is there and not older than `min` (an unreadable version is trusted).
fn usable(t: &Option<Tool>, name: &str, min: (u32, u32)) -> Result<PathBuf, String> {
    let t = t.as_ref().ok_or_else(|| format!("{name}: not on PATH"))?;
    match t.version.as_deref().and_then(cmake_version) {
        Some(v) if v < min => Err(format!(
            "{name}: {} is {}.{}, older than {}.{}",
            t.path.display(),
            v.0,
            v.1,
            min.0,
            min.1
        )),
        _ => Ok(t.path.clone()),
    }
}

/// [`required_for`] the default release (the sub-plans' tests).
#[cfg(test)]
pub fn required(
    recipe: &Recipe,
    machine: &Machine,
    backend: &BackendPlan,
    resolved: &Resolved,
    user_defines: &[(String, String)],
) -> Result<Found> {
    required_for(recipe, machine, backend, resolved, user_defines, None)
}

/// One missing prerequisite: its kind (for the install command) and its line in the list.
type MissingLine = (Prerequisite, String);

/// Every prerequisite the user must install by hand, checked at once before anything is
/// fetched: the compilers (the SDK's clang for a ROCm build), FFmpeg's development files and
/// pkg-config when the recipe needs FFmpeg. All missing ones are named in one error with one
/// install command for this OS or distribution. Also refuses an FFmpeg a build cannot use.
/// `version`: the release the user named (`--version`), whose FFmpeg range is said.
fn required_for(
    recipe: &Recipe,
    machine: &Machine,
    backend: &BackendPlan,
    resolved: &Resolved,
    user_defines: &[(String, String)],
    version: Option<&str>,
) -> Result<Found> {
    let needs = &recipe.raw.needs;
    let mut missing: Vec<MissingLine> = Vec::new();
    let libraries = missing_libraries(recipe, machine, backend, resolved, user_defines);
    let (cc, cxx) = compilers(machine, backend, &mut missing);
    let ffmpeg = machine.target.ffmpeg.as_ref();
    let mut pkgconf_from_pypi = None;
    if needs.ffmpeg {
        // The recipe's CMake finds FFmpeg through pkg-config (rocbuild writes .pc files for
        // an --ffmpeg DIR that has none); for a Windows venv built from another OS only the
        // --ffmpeg DIR given is seen.
        if machine.host.tools.pkg_config.is_none() {
            let line = "pkg-config: not on PATH (FFmpeg is found through it)".to_string();
            if ffmpeg.is_some() {
                pkgconf_from_pypi = Some(line);
            } else {
                missing.push((Prerequisite::PkgConfig, line));
            }
        }
        if ffmpeg.is_none() {
            missing.push((
                Prerequisite::FfmpegDev,
                ffmpeg_line(recipe, machine, version),
            ));
        }
    }
    if !missing.is_empty() || !libraries.is_empty() {
        return Err(prerequisites_error(recipe, machine, &missing, &libraries));
    }
    let dlls_in_bin = machine.target.platform.os.rules().shared_lib_dir() == "bin";
    if let (true, true, Some(f)) = (dlls_in_bin, needs.ffmpeg, ffmpeg) {
        // The libraries load FFmpeg's DLLs at run time, from its bin/: a static build (or one
        // without its bin/ directory) links but can never load (torchcodec issues 912, 1108,
        // 1289).
        if f.bin.is_none() {
            return Err(EngineError::StaticFfmpeg {
                dir: f.lib.display().to_string(),
            });
        }
    }
    Ok(Found {
        cmake: usable(&machine.host.tools.cmake, "cmake", MIN_CMAKE),
        ninja: usable(&machine.host.tools.ninja, "ninja", MIN_NINJA),
        cc,
        cxx,
        found_by: compilers_found_by(machine, backend),
        pkgconf_from_pypi,
    })
}

/// A Windows host: its compilers are MSVC-style (cl.exe, clang-cl), its FFmpeg comes as DLLs.
fn windows_host(machine: &Machine) -> bool {
    machine.host.platform.os.rules().msvc_style_compilers()
}

/// The C and C++ compilers: the SDK's clang for a ROCm build; on a Windows host the one
/// compiler a developer prompt, Visual Studio or LLVM gives (one line when missing, naming
/// where it was looked for); else the machine's cc and c++.
fn compilers(
    machine: &Machine,
    backend: &BackendPlan,
    missing: &mut Vec<MissingLine>,
) -> (PathBuf, PathBuf) {
    if let Some(r) = &backend.rocm {
        return (r.clang.clone(), r.clangxx.clone());
    }
    let tools = &machine.host.tools;
    if windows_host(machine) {
        if let (Some(cc), Some(cxx)) = (&tools.cc, &tools.cxx) {
            return (cc.path.clone(), cxx.path.clone());
        }
        missing.push((
            Prerequisite::CxxCompiler,
            format!(
                "a C and C++ compiler for Windows (MSVC's cl.exe, or LLVM's clang-cl): none found; looked for {}",
                rocbuild_probe::windows_compiler::WINDOWS_COMPILER_SEARCH
            ),
        ));
        return (PathBuf::new(), PathBuf::new());
    }
    let mut tool = |t: &Option<Tool>, p: Prerequisite, detail: &str| match t {
        Some(t) => t.path.clone(),
        None => {
            missing.push((p, format!("{}: {detail}", p.describe())));
            PathBuf::new()
        }
    };
    (
        tool(
            &tools.cc,
            Prerequisite::CCompiler,
            "none found ($CC, cc, gcc, clang on PATH)",
        ),
        tool(
            &tools.cxx,
            Prerequisite::CxxCompiler,
            "none found ($CXX, c++, g++, clang++ on PATH)",
        ),
    )
}

/// Where the compilers come from, said in the plan: the HIP SDK for a ROCm build (with
/// MSVC's headers and libraries on a Windows host), the Windows host's discovery.
pub fn compilers_found_by(machine: &Machine, backend: &BackendPlan) -> Option<String> {
    let msvc = machine
        .host
        .tools
        .msvc
        .as_ref()
        .filter(|m| !m.found_by.is_empty() && windows_host(machine));
    let Some(r) = &backend.rocm else {
        return msvc.map(|m| m.found_by.clone());
    };
    let sdk = if r.kind == rocbuild_probe::SdkKind::HipPathEnv.describe() {
        format!("the HIP SDK's clang at HIP_PATH={}", r.root.display())
    } else {
        format!("the clang of the {} at {}", r.kind, r.root.display())
    };
    Some(match msvc {
        Some(m) => format!("{sdk}; MSVC's headers and libraries from {}", m.found_by),
        None => sdk,
    })
}

/// The FFmpeg the recipe needs and where rocbuild looked: on a Windows host, its shared DLLs
/// (and headers and import libraries), in the majors the release accepts.
fn ffmpeg_line(recipe: &Recipe, machine: &Machine, version: Option<&str>) -> String {
    let why = machine
        .target
        .ffmpeg_missing
        .clone()
        .unwrap_or_else(|| "no FFmpeg was found".into());
    if !windows_host(machine) {
        return format!(
            "{}: {why} (libavcodec, libavformat, libavutil, … with headers and .pc files)",
            Prerequisite::FfmpegDev.describe()
        );
    }
    format!(
        "FFmpeg's shared DLLs: {} loads {} at run time from its DLLs (avutil-N.dll, avcodec-N.dll, …: the folder of ffmpeg.exe in a shared build) and is built against its headers (include\\) and import libraries (lib\\*.lib); rocbuild looked at pkg-config ({why}) and for an ffmpeg.exe on PATH with include\\ and lib\\ beside its bin\\, and no --ffmpeg DIR was given or fetched by `rocbuild ffmpeg`",
        recipe.name(),
        ffmpeg_majors(recipe, machine, version)
    )
}

/// `FFmpeg 4 to 9` (`0.16.0 accepts >=4,<10`): the majors of the release that would be built
/// (the one named, else the newest default release for this torch).
fn ffmpeg_majors(recipe: &Recipe, machine: &Machine, version: Option<&str>) -> String {
    let torch = machine.target.torch.as_ref().map(|t| t.version.as_str());
    let releases = recipe.releases();
    let release = releases.iter().find(|r| match version {
        Some(v) => r.version == v,
        None => r.default && torch.is_none_or(|t| rocbuild_recipe::torch_compatible(r, t)),
    });
    match release.and_then(|r| r.ffmpeg.as_deref().map(|s| (&r.version, s))) {
        Some((version, spec)) => format!("{} ({version} accepts {spec})", majors_in(spec)),
        None => "FFmpeg 4 to 9 (any major rocbuild knows)".into(),
    }
}

/// The FFmpeg majors rocbuild knows (4 to 9) in a PEP 440 range: `FFmpeg 4 to 8`,
/// `FFmpeg 4, 5, 7 or 8`.
fn majors_in(spec: &str) -> String {
    let majors: Vec<u32> = (4..=9)
        .filter(|m| rocbuild_recipe::in_range(spec, &m.to_string()))
        .collect();
    match majors.as_slice() {
        [] => "no FFmpeg major rocbuild knows".to_string(),
        [one] => format!("FFmpeg {one}"),
        [first, .., last] if (last - first) as usize + 1 == majors.len() => {
            format!("FFmpeg {first} to {last}")
        }
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(u32::to_string).collect();
            format!("FFmpeg {} or {last}", rest.join(", "))
        }
    }
}

/// The one error naming every missing prerequisite, with one install command.
fn prerequisites_error(
    recipe: &Recipe,
    machine: &Machine,
    missing: &[MissingLine],
    libraries: &[MissingLibrary],
) -> EngineError {
    let windows = windows_host(machine);
    let kinds: Vec<Prerequisite> = missing
        .iter()
        .map(|(p, _)| *p)
        .filter(|p| machine.host.cross.is_none() || *p != Prerequisite::FfmpegDev)
        .collect();
    let packages: Vec<String> = libraries.iter().filter_map(|l| l.package.clone()).collect();
    let mut parts: Vec<String> = Vec::new();
    if !(kinds.is_empty() && packages.is_empty()) {
        parts.push(format!(
            "install {} with one command: {}",
            if kinds.len() + packages.len() == 1 {
                "it"
            } else {
                "them"
            },
            install_command_with(&machine.host.platform, &kinds, &packages)
        ));
    }
    if windows && kinds.contains(&Prerequisite::CxxCompiler) {
        parts.push(rocbuild_probe::windows_compiler::WINDOWS_COMPILER_HELP.into());
    }
    // A library this distribution does not package: said as such, not as a package name.
    for l in libraries.iter().filter(|l| l.package.is_none()) {
        parts.push(format!(
            "{}: this distribution has no package for it that the recipe knows; install it from AMD's ROCm repository, or use an SDK that has it (--rocm)",
            l.describe
        ));
    }
    if missing.iter().any(|(p, _)| *p == Prerequisite::FfmpegDev) {
        parts.push(if machine.host.cross.is_some() {
            "pass --ffmpeg DIR naming a shared FFmpeg build for Windows (include/, lib/*.lib, bin/*.dll)".into()
        } else if windows {
            WINDOWS_FFMPEG_HELP.into()
        } else {
            "or pass --ffmpeg DIR naming an FFmpeg build (its include/ and lib/)".into()
        });
    }
    let mut help = parts.join("; ");
    help.push_str(
        ". cmake and ninja are not needed: rocbuild fetches them from PyPI into its tools area",
    );
    EngineError::Prerequisites {
        recipe: recipe.name().into(),
        count: match missing.len() + libraries.len() {
            1 => "1 prerequisite".into(),
            n => format!("{n} prerequisites"),
        },
        list: missing
            .iter()
            .map(|(_, line)| format!("- {line}"))
            .chain(
                libraries
                    .iter()
                    .map(|l| format!("- {}: {}", l.describe, l.detail)),
            )
            .collect::<Vec<_>>()
            .join("\n"),
        help,
    }
}

/// How a Windows user gets FFmpeg's shared DLLs with what a build needs beside them.
const WINDOWS_FFMPEG_HELP: &str = "`rocbuild ffmpeg` fetches a pinned shared build, which later runs use by themselves; or unpack a *shared* build yourself (gyan.dev's ffmpeg-release-full-shared, BtbN's ffmpeg-…-win64-gpl-shared) and pass --ffmpeg DIR naming its folder, the one that holds bin\\ (ffmpeg.exe and its DLLs), include\\ and lib\\, or put that bin\\ on PATH. A static build (ffmpeg.exe without DLLs) cannot be loaded";

/// The prerequisites a build lacks, kept while an index is asked first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    recipe: String,
    count: String,
    list: String,
    help: String,
}

impl Missing {
    /// The error a build without a fitting wheel stops with.
    pub fn into_error(self) -> EngineError {
        EngineError::Prerequisites {
            help: format!(
                "no wheel on the index fits, so {} is built here; {}",
                self.recipe, self.help
            ),
            recipe: self.recipe,
            count: self.count,
            list: self.list,
        }
    }
}

/// [`required_for`], except that when the user asked an index first (`--index`, `--find-links`) missing
/// prerequisites are kept for later, not refused: a wheel that fits compiles nothing (a
/// Windows user without Build Tools installs the team's wheel). The compilers are then empty
/// paths, which nothing runs unless no wheel fits, and then the kept error is returned first.
/// FFmpeg is refused at once even then: a wheel loads it at run time too.
pub fn required_unless_index(
    recipe: &Recipe,
    machine: &Machine,
    backend: &BackendPlan,
    resolved: &Resolved,
    opts: &rocbuild_venv::options::BuildOptions,
) -> Result<(Found, Option<Missing>)> {
    let asks_index = !opts.index.is_empty() || !opts.find_links.is_empty();
    let version = opts.version.as_deref();
    match required_for(recipe, machine, backend, resolved, &opts.defines, version) {
        Ok(found) => Ok((found, None)),
        Err(EngineError::Prerequisites { .. })
            if asks_index && recipe.raw.needs.ffmpeg && machine.target.ffmpeg.is_none() =>
        {
            let ffmpeg = (
                Prerequisite::FfmpegDev,
                ffmpeg_line(recipe, machine, version),
            );
            let mut e = prerequisites_error(recipe, machine, &[ffmpeg], &[]);
            if let EngineError::Prerequisites { help, .. } = &mut e {
                *help = format!("a wheel from the index loads FFmpeg at run time too, so it is needed before anything is installed; {help}");
            }
            Err(e)
        }
        Err(EngineError::Prerequisites {
            recipe,
            count,
            list,
            help,
        }) if asks_index => Ok((
            Found {
                cmake: usable(&machine.host.tools.cmake, "cmake", MIN_CMAKE),
                ninja: usable(&machine.host.tools.ninja, "ninja", MIN_NINJA),
                cc: PathBuf::new(),
                cxx: PathBuf::new(),
                found_by: None,
                pkgconf_from_pypi: None,
            },
            Some(Missing {
                recipe,
                count,
                list,
                help,
            }),
        )),
        Err(e) => Err(e),
    }
}

/// A system library the recipe needs for this build that the probe did not find.
#[derive(Debug, Clone, PartialEq)]
pub struct MissingLibrary {
    pub describe: String,
    /// What was looked for, and why it is needed.
    pub detail: String,
    /// Its package in this machine's distribution, where the recipe knows one.
    pub package: Option<String>,
}

/// The recipe's `[[needs.library]]` this build needs (its backend, and its `when` defines as
/// the configure will have them: the user's `-D` over the recipe's) and the machine lacks.
pub fn missing_libraries(
    recipe: &Recipe,
    machine: &Machine,
    backend: &BackendPlan,
    resolved: &Resolved,
    user_defines: &[(String, String)],
) -> Vec<MissingLibrary> {
    let value = |k: &str| -> Option<&str> {
        user_defines
            .iter()
            .rev()
            .find(|(uk, _)| uk == k)
            .map(|(_, v)| v.as_str())
            .or_else(|| resolved.define.get(k).map(String::as_str))
    };
    let on = |v: &str| {
        matches!(
            v.to_ascii_uppercase().as_str(),
            "ON" | "1" | "TRUE" | "YES" | "Y"
        )
    };
    let holds = |want: &str, got: Option<&str>| match got {
        Some(g) if on(want) => on(g),
        Some(g) => g.eq_ignore_ascii_case(want),
        None => false,
    };
    let b = backend.backend.as_str();
    // An SDK from AMD's own repository (/opt/rocm) has AMD's package names.
    let amd_repo = backend
        .rocm
        .as_ref()
        .is_some_and(|r| r.kind == rocbuild_probe::SdkKind::OptRocm.describe());
    let family = if amd_repo {
        Some("rocm-repo")
    } else {
        package_family(&machine.target.platform)
    };
    recipe
        .raw
        .needs
        .library
        .iter()
        .filter(|l| !l.optional)
        .filter(|l| l.backends.is_empty() || l.backends.iter().any(|x| x == b))
        .filter(|l| l.when.iter().all(|(k, v)| holds(v, value(k))))
        .filter(|l| !machine.host.libraries.contains_key(&l.name))
        .map(|l| {
            let what: Vec<String> = l
                .headers
                .iter()
                .cloned()
                .chain(l.libs.iter().map(|x| format!("lib{x}")))
                .collect();
            let why: Vec<String> = l.when.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let mut detail = format!("{} not found", what.join(", "));
            if !why.is_empty() {
                detail.push_str(&format!(" (needed with {})", why.join(", ")));
            } else if !l.backends.is_empty() {
                detail.push_str(&format!(" (needed for the {b} backend)"));
            }
            // `{clang}`: the major of the SDK's clang (`libomp-22-dev` for ROCm 7.2's clang 22
            // on Debian, whose plain libomp-dev follows the default clang).
            let clang = backend.rocm.as_ref().and_then(|r| r.clang_version.clone());
            let package = family
                .and_then(|f| l.packages.get(f))
                .map(|p| match &clang {
                    Some(v) => p.replace("{clang}", v),
                    None => p.replace("-{clang}", "").replace("{clang}", ""),
                });
            MissingLibrary {
                describe: l.describe.clone(),
                detail,
                package,
            }
        })
        .collect()
}

/// Build-only pip requirements, keyed by what they are and the Python they serve, and the
/// tools to run: CMake and Ninja from PyPI when the system has none, or too old ones (CMake
/// older than 3.27 for a multiarch ROCm).
pub fn python_tools(
    recipe: &Recipe,
    machine: &Machine,
    backend: &BackendPlan,
    found: &Found,
    vars: &std::collections::BTreeMap<String, String>,
    cache: &Path,
) -> Result<(Option<ToolsPlan>, Toolset)> {
    // The tools run on the host (a Windows venv built from Linux gets Linux's cmake).
    let os = machine.host.platform.os;
    let py = &machine.target.python;
    let mut reqs: Vec<String> = recipe
        .raw
        .needs
        .python_build
        .iter()
        .map(|t| expand(t.get_ref(), vars))
        .collect::<Result<_>>()?;
    let imported = reqs.clone();
    let mut why: Vec<String> = Vec::new();
    // CMake's HIP language reads a multiarch ROCm (Debian's /usr) only from 3.27: an older
    // system CMake is replaced for this build by CMake from PyPI, in the build-only tools.
    let old_cmake = backend.rocm.as_ref().is_some_and(|r| r.multiarch)
        && machine
            .host
            .tools
            .cmake
            .as_ref()
            .and_then(|t| t.version.as_deref())
            .and_then(cmake_version)
            .is_some_and(|v| v < (3, 27));
    let fetch_cmake = old_cmake || found.cmake.is_err();
    if fetch_cmake {
        reqs.push("cmake>=3.27,<4".into());
        why.push(match &found.cmake {
            Err(e) => format!("{e}: CMake from PyPI"),
            Ok(_) => "cmake: older than 3.27, which a multiarch ROCm needs: CMake from PyPI".into(),
        });
    }
    let mut system: Vec<Prerequisite> = Vec::new();
    if fetch_cmake {
        system.push(Prerequisite::Cmake);
    }
    if let Err(e) = &found.ninja {
        reqs.push("ninja>=1.10".into());
        why.push(format!("{e}: Ninja from PyPI"));
        system.push(Prerequisite::Ninja);
    }
    // FFmpeg was found without pkg-config (a Windows host's DLLs, --ffmpeg DIR), but the
    // recipe's CMake asks pkg-config for it: pkgconf from PyPI, as meson-python takes it.
    if let Some(reason) = &found.pkgconf_from_pypi {
        reqs.push(PKGCONF_FROM_PYPI.into());
        why.push(format!("{reason}: pkgconf from PyPI"));
        system.push(Prerequisite::PkgConfig);
    }
    let fallback = (!system.is_empty()).then(|| install_command(&machine.host.platform, &system));
    let tools = if reqs.is_empty() {
        None
    } else {
        let pip = crate::pip::tools_installer(py, &format!("the build tools {}", reqs.join(" ")))?;
        let mut key: Vec<&str> = reqs.iter().map(String::as_str).collect();
        key.push(&py.version);
        let dir = join(
            machine.host.platform.os,
            cache,
            &["tools", &hash_hex(&key)[..16]],
        );
        let install = crate::pip::install_into(&pip, py, os, &dir, false)
            .arg("--quiet")
            .args(reqs.clone());
        Some(ToolsPlan {
            dir,
            install,
            why: why.clone(),
            fallback: fallback.clone(),
            imported,
        })
    };
    let exe = |n: &str| format!("{n}{}", os.rules().exe_suffix());
    let from_tools = |rel: &[&str]| tools.as_ref().map(|t| join(os, &t.dir, rel));
    // pip --target puts a wheel's scripts (Ninja's binary) in DIR/bin on every OS.
    let cmake = match (&found.cmake, fetch_cmake) {
        (Ok(p), false) => p.clone(),
        _ => from_tools(&["cmake", "data", "bin", &exe("cmake")]).unwrap_or_default(),
    };
    let ninja = match &found.ninja {
        Ok(p) => p.clone(),
        Err(_) => from_tools(&["bin", &exe("ninja")]).unwrap_or_default(),
    };
    // The pkgconf wheel's own binary (its `pkgconf` script is a Python wrapper around it).
    let pkg_config = found
        .pkgconf_from_pypi
        .as_ref()
        .and_then(|_| from_tools(&["pkgconf", ".bin", &exe("pkgconf")]));
    Ok((
        tools,
        Toolset {
            cmake,
            ninja,
            cc: found.cc.clone(),
            cxx: found.cxx.clone(),
            pkg_config,
        },
    ))
}

/// pkgconf from PyPI (its wheels carry the pkgconf binary for Linux, macOS and Windows).
const PKGCONF_FROM_PYPI: &str = "pkgconf>=2.1,<4";

/// `cmake version 3.25.1` -> (3, 25).
fn cmake_version(text: &str) -> Option<(u32, u32)> {
    let v = text
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let mut it = v.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::recipe;
    use crate::toolchain;
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::cpu_machine;

    fn cpu_backend(r: &Recipe, m: &Machine) -> BackendPlan {
        toolchain::choose(r, m, &Default::default()).unwrap()
    }

    /// A fresh machine: no compilers, no FFmpeg, no pkg-config, no cmake, no ninja. One
    /// error names the three things to install by hand with one command; cmake and ninja are
    /// planned from PyPI instead.
    #[test]
    fn every_missing_prerequisite_is_named_at_once_with_one_command() {
        let r = recipe("torchcodec");
        let mut m = cpu_machine(Os::Linux);
        let b = cpu_backend(&r, &m);
        assert_eq!(
            required(&r, &m, &b, &Default::default(), &[])
                .unwrap()
                .ninja,
            Ok(PathBuf::from("/usr/bin/ninja"))
        );
        m.host.tools = Default::default();
        m.target.ffmpeg = None;
        m.target.ffmpeg_missing =
            Some("pkg-config is not installed, so FFmpeg cannot be found".into());
        let e = required(&r, &m, &b, &Default::default(), &[]).unwrap_err();
        let help = miette::Diagnostic::help(&e)
            .map(|h| h.to_string())
            .unwrap_or_default();
        match &e {
            EngineError::Prerequisites { count, list, .. } => {
                assert_eq!(count, "4 prerequisites", "{list}");
                for what in [
                    "a C compiler",
                    "a C++ compiler",
                    "pkg-config",
                    "FFmpeg's development files: pkg-config is not installed",
                ] {
                    assert!(list.contains(what), "{what}: {list}");
                }
                assert!(!list.contains("cmake") && !list.contains("ninja"), "{list}");
            }
            other => panic!("{other:?}"),
        }
        assert!(
            help.contains("sudo apt-get install gcc g++ pkg-config libavcodec-dev"),
            "{help}"
        );
        assert!(help.contains("--ffmpeg DIR"), "{help}");
        // Fedora: its package manager and names (the host's: it installs the tools).
        m.host.platform.distro = Some("fedora".into());
        m.host.platform.distro_like.clear();
        let help =
            miette::Diagnostic::help(&required(&r, &m, &b, &Default::default(), &[]).unwrap_err())
                .map(|h| h.to_string())
                .unwrap_or_default();
        assert!(
            help.contains("sudo dnf install gcc gcc-c++ pkgconf-pkg-config ffmpeg-free-devel"),
            "{help}"
        );
    }

    #[test]
    fn cmake_and_ninja_come_from_pypi_when_absent_or_too_old() {
        let r = recipe("torchcodec");
        let mut m = cpu_machine(Os::Linux);
        let b = cpu_backend(&r, &m);
        let vars = Default::default();
        let cache = Path::new("/cache");
        let found = required(&r, &m, &b, &Default::default(), &[]).unwrap();
        let (t, ts) = python_tools(&r, &m, &b, &found, &vars, cache).unwrap();
        assert_eq!(ts.cmake, PathBuf::from("/usr/bin/cmake"));
        assert_eq!(ts.ninja, PathBuf::from("/usr/bin/ninja"));
        let t = t.unwrap();
        assert!(t.why.is_empty(), "{:?}", t.why);
        // No cmake, a Ninja 1.8: both from PyPI, into the tools area, and run from there.
        m.host.tools.cmake = None;
        m.host.tools.ninja.as_mut().unwrap().version = Some("1.8.2".into());
        let found = required(&r, &m, &b, &Default::default(), &[]).unwrap();
        let (t, ts) = python_tools(&r, &m, &b, &found, &vars, cache).unwrap();
        let t = t.unwrap();
        let args = &t.install.args;
        assert!(args.contains(&"cmake>=3.27,<4".to_string()), "{args:?}");
        assert!(args.contains(&"ninja>=1.10".to_string()), "{args:?}");
        assert_eq!(ts.cmake, t.dir.join("cmake/data/bin/cmake"));
        assert_eq!(ts.ninja, t.dir.join("bin/ninja"));
        assert_eq!(t.why[0], "cmake: not on PATH: CMake from PyPI");
        assert_eq!(
            t.fallback.as_deref(),
            Some("sudo apt-get install cmake ninja-build")
        );
        assert!(t.why[1].contains("is 1.8, older than 1.10"), "{:?}", t.why);
        // Windows: the same, with .exe.
        let mut w = cpu_machine(Os::Windows);
        w.host.tools.ninja = None;
        let b = cpu_backend(&r, &w);
        let found = required(&r, &w, &b, &Default::default(), &[]).unwrap();
        let (_, ts) = python_tools(&r, &w, &b, &found, &vars, Path::new(r"C:\cache")).unwrap();
        assert!(
            ts.ninja.display().to_string().ends_with(r"\bin\ninja.exe"),
            "{}",
            ts.ninja.display()
        );
    }

    /// A Windows host with FFmpeg's DLLs and no pkg-config: pkgconf comes from PyPI into the
    /// tools area and CMake is told where it is; with no FFmpeg either, pkg-config is still
    /// named among what to install (FFmpeg's development files bring it).
    #[test]
    fn pkgconf_comes_from_pypi_where_ffmpeg_was_found_without_a_pkg_config() {
        let r = recipe("torchcodec");
        let mut w = cpu_machine(Os::Windows);
        w.host.tools.pkg_config = None;
        let b = cpu_backend(&r, &w);
        let found = required(&r, &w, &b, &Default::default(), &[]).unwrap();
        assert!(found.pkgconf_from_pypi.is_some());
        let vars = Default::default();
        let (t, ts) = python_tools(&r, &w, &b, &found, &vars, Path::new(r"C:\cache")).unwrap();
        let t = t.unwrap();
        assert!(
            t.install.args.contains(&PKGCONF_FROM_PYPI.to_string()),
            "{:?}",
            t.install.args
        );
        assert!(
            t.why.iter().any(|w| w.ends_with("pkgconf from PyPI")),
            "{:?}",
            t.why
        );
        let pc = ts.pkg_config.unwrap().display().to_string();
        assert!(pc.ends_with(r"\pkgconf\.bin\pkgconf.exe"), "{pc}");
        // With pkg-config on PATH nothing comes from PyPI for it.
        let w = cpu_machine(Os::Windows);
        let found = required(&r, &w, &b, &Default::default(), &[]).unwrap();
        assert!(found.pkgconf_from_pypi.is_none());
        let (_, ts) = python_tools(&r, &w, &b, &found, &vars, Path::new(r"C:\cache")).unwrap();
        assert!(ts.pkg_config.is_none());
        // No FFmpeg and no pkg-config: both are named (the install brings pkg-config).
        let mut w = cpu_machine(Os::Windows);
        w.host.tools.pkg_config = None;
        w.target.ffmpeg = None;
        match required(&r, &w, &b, &Default::default(), &[]).unwrap_err() {
            EngineError::Prerequisites { list, .. } => {
                assert!(list.contains("pkg-config"), "{list}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_static_ffmpeg_is_refused_on_windows() {
        let r = recipe("torchcodec");
        let mut m = cpu_machine(Os::Windows);
        let b = cpu_backend(&r, &m);
        assert!(required(&r, &m, &b, &Default::default(), &[]).is_ok());
        if let Some(f) = &mut m.target.ffmpeg {
            f.bin = None;
        }
        assert!(matches!(
            required(&r, &m, &b, &Default::default(), &[]),
            Err(EngineError::StaticFfmpeg { .. })
        ));
    }

    fn help_of(e: &EngineError) -> String {
        miette::Diagnostic::help(e)
            .map(|h| h.to_string())
            .unwrap_or_default()
    }

    /// A Windows host with no compiler (no prompt, no Visual Studio, no LLVM): one line that
    /// says where rocbuild looked, and every way to get one: the Build Tools with the C++
    /// workload through winget, a Native Tools prompt, LLVM.
    #[test]
    fn a_windows_host_without_a_compiler_is_told_where_rocbuild_looked_and_what_to_install() {
        let r = recipe("torchcodec");
        let mut m = cpu_machine(Os::Windows);
        let b = cpu_backend(&r, &m);
        m.host.tools.cc = None;
        m.host.tools.cxx = None;
        let e = required(&r, &m, &b, &Default::default(), &[]).unwrap_err();
        let help = help_of(&e);
        let EngineError::Prerequisites { count, list, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(count, "1 prerequisite", "{list}");
        assert!(
            list.starts_with("- a C and C++ compiler for Windows (MSVC's cl.exe, or LLVM's clang-cl): none found; looked for a developer prompt (INCLUDE and LIB set"),
            "{list}"
        );
        for place in [
            "vswhere, the Visual Studio setup API, the registry",
            r"C:\Program Files\LLVM\bin",
        ] {
            assert!(list.contains(place), "{place}: {list}");
        }
        assert!(!list.contains("gcc"), "{list}");
        for how in [
            "install it with one command: winget install Microsoft.VisualStudio.2022.BuildTools --override \"--add Microsoft.VisualStudio.Workload.VCTools --includeRecommended --passive\"",
            "x64 Native Tools Command Prompt for VS",
            "winget install LLVM.LLVM",
            "Visual Studio Code is another product",
        ] {
            assert!(help.contains(how), "{how}: {help}");
        }
        // Linux keeps its words.
        let mut l = cpu_machine(Os::Linux);
        l.host.tools.cc = None;
        let e = required(&r, &l, &cpu_backend(&r, &l), &Default::default(), &[]).unwrap_err();
        assert!(format!("{e:?}").contains("a C compiler: none found ($CC, cc, gcc, clang on PATH)"));
    }

    /// The plan's words for where the compiler was found: the Windows host's discovery, and
    /// for a HIP build the SDK's clang from HIP_PATH, with MSVC's headers beside it.
    #[test]
    fn where_the_compiler_was_found_is_kept_for_the_plan() {
        let r = recipe("torchcodec");
        let mut m = cpu_machine(Os::Windows);
        let b = cpu_backend(&r, &m);
        assert_eq!(
            required(&r, &m, &b, &Default::default(), &[])
                .unwrap()
                .found_by,
            None
        );
        let prompt = r"the developer prompt (INCLUDE, LIB and VCToolsInstallDir=C:\VS\VC\Tools\MSVC\14.44.35207\)";
        m.host.tools.msvc = Some(rocbuild_probe::Msvc {
            cl: PathBuf::from(r"C:\VS\bin\cl.exe"),
            rc: None,
            env: Default::default(),
            found_by: prompt.into(),
            linker: None,
        });
        let found = required(&r, &m, &b, &Default::default(), &[]).unwrap();
        assert_eq!(found.found_by.as_deref(), Some(prompt));
        assert_eq!(
            found.compiler_found().unwrap().line(),
            format!(r"C:\VS\bin\cl.exe ({prompt})")
        );
        let mut hip = b.clone();
        hip.rocm = Some(crate::toolchain::RocmPlan {
            root: PathBuf::from(r"C:\Program Files\AMD\ROCm\6.4"),
            version: Some("6.4.2".into()),
            hip_version: None,
            kind: rocbuild_probe::SdkKind::HipPathEnv.describe().into(),
            multiarch: false,
            archs: vec!["gfx1201".into()],
            archs_found_by: "--arch".into(),
            clang: PathBuf::from(r"C:\Program Files\AMD\ROCm\6.4\bin\clang.exe"),
            clangxx: PathBuf::from(r"C:\Program Files\AMD\ROCm\6.4\bin\clang++.exe"),
            clang_version: None,
            device_lib: None,
            llvm: PathBuf::from(r"C:\Program Files\AMD\ROCm\6.4"),
            bin: PathBuf::from(r"C:\Program Files\AMD\ROCm\6.4\bin"),
            runtime: Vec::new(),
            candidates: Vec::new(),
            notes: Vec::new(),
            warnings: Vec::new(),
        });
        assert_eq!(
            compilers_found_by(&m, &hip).unwrap(),
            format!(
                r"the HIP SDK's clang at HIP_PATH=C:\Program Files\AMD\ROCm\6.4; MSVC's headers and libraries from {prompt}"
            )
        );
        // A Linux host says nothing more than the compiler's path.
        let l = cpu_machine(Os::Linux);
        assert_eq!(compilers_found_by(&l, &cpu_backend(&r, &l)), None);
    }

    /// FFmpeg missing on a Windows host: what TorchCodec needs (shared DLLs, which majors),
    /// where rocbuild looked, and how a Windows user gets them.
    #[test]
    fn ffmpeg_missing_on_a_windows_host_says_what_where_and_how() {
        let r = recipe("torchcodec");
        let mut m = cpu_machine(Os::Windows);
        let b = cpu_backend(&r, &m);
        m.target.ffmpeg = None;
        m.target.ffmpeg_missing = Some("pkg-config does not know libavutil".into());
        let e = required(&r, &m, &b, &Default::default(), &[]).unwrap_err();
        let help = help_of(&e);
        let EngineError::Prerequisites { list, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(
            list.starts_with("- FFmpeg's shared DLLs: torchcodec loads FFmpeg 4 to 8 (0.9.1 accepts >=4,<9) at run time from its DLLs (avutil-N.dll"),
            "{list}"
        );
        assert!(
            list.contains(
                r"is built against its headers (include\) and import libraries (lib\*.lib)"
            ),
            "{list}"
        );
        assert!(
            list.contains("rocbuild looked at pkg-config (pkg-config does not know libavutil) and for an ffmpeg.exe on PATH with include\\ and lib\\ beside its bin\\, and no --ffmpeg DIR was given or fetched by `rocbuild ffmpeg`"),
            "{list}"
        );
        for how in [
            "install it with one command: rocbuild ffmpeg; ",
            "`rocbuild ffmpeg` fetches a pinned shared build, which later runs use by themselves",
            "gyan.dev's ffmpeg-release-full-shared",
            "BtbN's ffmpeg-…-win64-gpl-shared",
            r"pass --ffmpeg DIR naming its folder, the one that holds bin\ (ffmpeg.exe and its DLLs), include\ and lib\",
        ] {
            assert!(help.contains(how), "{how}: {help}");
        }
        assert!(!help.contains("its include/ and lib/"), "{help}");
    }

    /// With an index asked first, missing compilers wait for the wheels' verdict, but FFmpeg
    /// does not: a wheel loads its DLLs at run time too. The release named decides the majors.
    #[test]
    fn with_an_index_a_missing_ffmpeg_is_still_refused_before_anything_is_fetched() {
        let r = recipe("torchcodec");
        let mut m = cpu_machine(Os::Windows);
        let b = cpu_backend(&r, &m);
        m.host.tools.cc = None;
        m.host.tools.cxx = None;
        let opts = rocbuild_venv::options::BuildOptions {
            index: vec!["https://wheels.example/simple".into()],
            ..Default::default()
        };
        let (found, kept) = required_unless_index(&r, &m, &b, &Default::default(), &opts).unwrap();
        assert_eq!(found.cc, PathBuf::new());
        assert!(kept.is_some());
        m.target.ffmpeg = None;
        let opts = rocbuild_venv::options::BuildOptions {
            version: Some("0.16.0".into()),
            ..opts
        };
        let e = required_unless_index(&r, &m, &b, &Default::default(), &opts).unwrap_err();
        let help = help_of(&e);
        let EngineError::Prerequisites { count, list, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(count, "1 prerequisite", "{list}");
        assert!(
            list.contains("loads FFmpeg 4 to 9 (0.16.0 accepts >=4,<10)"),
            "{list}"
        );
        assert!(!list.contains("compiler"), "{list}");
        assert!(
            help.starts_with("a wheel from the index loads FFmpeg at run time too, so it is needed before anything is installed; install it with one command: rocbuild ffmpeg"),
            "{help}"
        );
    }

    #[test]
    fn ffmpeg_majors_are_said_as_a_range_or_a_list() {
        assert_eq!(majors_in(">=4,<9"), "FFmpeg 4 to 8");
        assert_eq!(majors_in(">=4,<10,!=6"), "FFmpeg 4, 5, 7, 8 or 9");
        assert_eq!(majors_in("==7"), "FFmpeg 7");
        assert_eq!(majors_in(">=12"), "no FFmpeg major rocbuild knows");
    }

    #[test]
    fn cmake_versions_are_read_from_their_banner() {
        assert_eq!(cmake_version("cmake version 3.25.1"), Some((3, 25)));
        assert_eq!(cmake_version("3.27.0"), Some((3, 27)));
        assert_eq!(cmake_version("no version"), None);
    }
}
