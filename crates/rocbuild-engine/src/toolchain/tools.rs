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
}

/// What the machine has for the build: the compilers, and cmake / ninja when usable (else
/// they come from PyPI, see [`python_tools`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub cmake: Result<PathBuf, String>,
    pub ninja: Result<PathBuf, String>,
    pub cc: PathBuf,
    pub cxx: PathBuf,
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

/// Every prerequisite the user must install by hand, checked at once before anything is
/// fetched: the compilers (the SDK's clang for a ROCm build), FFmpeg's development files and
/// pkg-config when the recipe needs FFmpeg. All missing ones are named in one error with one
/// install command for this OS or distribution. Also refuses an FFmpeg a build cannot use.
pub fn required(
    recipe: &Recipe,
    machine: &Machine,
    backend: &BackendPlan,
    resolved: &Resolved,
    user_defines: &[(String, String)],
) -> Result<Found> {
    let needs = &recipe.raw.needs;
    let mut missing: Vec<(Prerequisite, String)> = Vec::new();
    let libraries = missing_libraries(recipe, machine, backend, resolved, user_defines);
    let mut tool = |t: &Option<Tool>, p: Prerequisite, detail: &str| -> PathBuf {
        match t {
            Some(t) => t.path.clone(),
            None => {
                missing.push((p, detail.to_string()));
                PathBuf::new()
            }
        }
    };
    // With ROCm the SDK's clang compiles everything.
    let (cc, cxx) = match &backend.rocm {
        Some(r) => (r.clang.clone(), r.clangxx.clone()),
        None => (
            tool(
                &machine.host.tools.cc,
                Prerequisite::CCompiler,
                "none found ($CC, cc, gcc, clang on PATH)",
            ),
            tool(
                &machine.host.tools.cxx,
                Prerequisite::CxxCompiler,
                "none found ($CXX, c++, g++, clang++ on PATH)",
            ),
        ),
    };
    let ffmpeg = machine.target.ffmpeg.as_ref();
    if needs.ffmpeg {
        // The recipe's CMake finds FFmpeg through pkg-config (rocbuild writes .pc files for
        // an --ffmpeg DIR that has none); for a Windows venv built from another OS only the
        // --ffmpeg DIR given is seen.
        tool(
            &machine.host.tools.pkg_config,
            Prerequisite::PkgConfig,
            "not on PATH (FFmpeg is found through it)",
        );
        if ffmpeg.is_none() {
            let why = machine
                .target
                .ffmpeg_missing
                .clone()
                .unwrap_or_else(|| "no FFmpeg was found".into());
            missing.push((
                Prerequisite::FfmpegDev,
                format!("{why} (libavcodec, libavformat, libavutil, … with headers and .pc files)"),
            ));
        }
    }
    if !missing.is_empty() || !libraries.is_empty() {
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
            } else {
                "or pass --ffmpeg DIR naming an FFmpeg build (its include/ and lib/)".into()
            });
        }
        let mut help = parts.join("; ");
        help.push_str(
            ". cmake and ninja are not needed: rocbuild fetches them from PyPI into its tools area",
        );
        return Err(EngineError::Prerequisites {
            recipe: recipe.name().into(),
            count: match missing.len() + libraries.len() {
                1 => "1 prerequisite".into(),
                n => format!("{n} prerequisites"),
            },
            list: missing
                .iter()
                .map(|(p, d)| format!("- {}: {d}", p.describe()))
                .chain(
                    libraries
                        .iter()
                        .map(|l| format!("- {}: {}", l.describe, l.detail)),
                )
                .collect::<Vec<_>>()
                .join("\n"),
            help,
        });
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
    })
}

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

/// [`required`], except that when the user asked an index first (`--index`, `--find-links`) missing
/// prerequisites are kept for later, not refused: a wheel that fits compiles nothing (a
/// Windows user without Build Tools installs the team's wheel). The compilers are then empty
/// paths, which nothing runs unless no wheel fits, and then the kept error is returned first.
pub fn required_unless_index(
    recipe: &Recipe,
    machine: &Machine,
    backend: &BackendPlan,
    resolved: &Resolved,
    opts: &rocbuild_venv::options::BuildOptions,
) -> Result<(Found, Option<Missing>)> {
    let asks_index = !opts.index.is_empty() || !opts.find_links.is_empty();
    match required(recipe, machine, backend, resolved, &opts.defines) {
        Ok(found) => Ok((found, None)),
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
    Ok((
        tools,
        Toolset {
            cmake,
            ninja,
            cc: found.cc.clone(),
            cxx: found.cxx.clone(),
        },
    ))
}

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

    #[test]
    fn cmake_versions_are_read_from_their_banner() {
        assert_eq!(cmake_version("cmake version 3.25.1"), Some((3, 25)));
        assert_eq!(cmake_version("3.27.0"), Some((3, 27)));
        assert_eq!(cmake_version("no version"), None);
    }
}
