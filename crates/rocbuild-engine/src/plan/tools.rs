//! The tools a build runs: cmake, ninja and the compilers (the SDK's clang for a ROCm build),
//! pkg-config when FFmpeg is found through it; and the build-only pip requirements installed
//! into a directory of the cache (with CMake from PyPI when the system's is too old for the
//! SDK's layout).

use std::path::{Path, PathBuf};

use rocbuild_probe::{install_hint, Machine, Os, Tool};
use rocbuild_recipe::Recipe;
use serde::Serialize;

use super::vars::expand;
use crate::command::Command;
use crate::error::{EngineError, Result};
use crate::paths::{hash_hex, join};
use crate::toolchain::BackendPlan;

/// The pip requirements the build needs, installed into a directory of the cache.
#[derive(Debug, Clone, Serialize)]
pub struct ToolsPlan {
    pub dir: PathBuf,
    pub install: Command,
}

/// The programs the configure and build steps run.
#[derive(Debug, Clone, PartialEq)]
pub struct Toolset {
    pub cmake: PathBuf,
    pub ninja: PathBuf,
    pub cc: PathBuf,
    pub cxx: PathBuf,
}

/// The tools the build needs, in the order a user would install them; the first missing one
/// is an error naming how to install it. Also refuses an FFmpeg a build cannot use.
pub fn required(recipe: &Recipe, machine: &Machine, backend: &BackendPlan) -> Result<Toolset> {
    let needs = &recipe.raw.needs;
    let tool = |t: &Option<Tool>, name: &str, purpose: &str| -> Result<PathBuf> {
        t.as_ref()
            .map(|t| t.path.clone())
            .ok_or_else(|| EngineError::MissingTool {
                tool: name.into(),
                purpose: purpose.into(),
                hint: install_hint(&machine.platform, name),
            })
    };
    let cmake = tool(&machine.tools.cmake, "cmake", "configure the build")?;
    let ninja = tool(&machine.tools.ninja, "ninja", "run the build")?;
    // With ROCm the SDK's clang compiles everything.
    let (cc, cxx) = match &backend.rocm {
        Some(r) => (r.clang.clone(), r.clangxx.clone()),
        None => (
            tool(&machine.tools.cc, "C compiler", "compile the sources")?,
            tool(&machine.tools.cxx, "C++ compiler", "compile the sources")?,
        ),
    };
    let ffmpeg = machine.ffmpeg.as_ref();
    if needs.ffmpeg
        && ffmpeg.is_some_and(|f| f.pkg_config_path.is_none() && f.found_by == "pkg-config")
    {
        tool(&machine.tools.pkg_config, "pkg-config", "find FFmpeg")?;
    }
    if needs.ffmpeg && ffmpeg.is_none() {
        return Err(EngineError::NoValue {
            variable: "ffmpeg".into(),
            why: "no FFmpeg was found".into(),
            help: "install FFmpeg's development files or pass --ffmpeg DIR".into(),
        });
    }
    if let (Os::Windows, true, Some(f)) = (machine.platform.os, needs.ffmpeg, ffmpeg) {
        // The libraries load FFmpeg's DLLs at run time: a static build (or one without its
        // bin/ directory) links but can never load (torchcodec issues 912, 1108, 1289).
        if f.bin.is_none() {
            return Err(EngineError::StaticFfmpeg {
                dir: f.lib.display().to_string(),
            });
        }
    }
    Ok(Toolset {
        cmake,
        ninja,
        cc,
        cxx,
    })
}

/// Build-only pip requirements, keyed by what they are and the Python they serve, and the
/// cmake to run (PyPI's when the system's is too old for a multiarch ROCm).
pub fn python_tools(
    recipe: &Recipe,
    machine: &Machine,
    backend: &BackendPlan,
    toolset: &Toolset,
    vars: &std::collections::BTreeMap<String, String>,
    cache: &Path,
) -> Result<(Option<ToolsPlan>, PathBuf)> {
    let os = machine.platform.os;
    let py = &machine.python;
    let mut reqs: Vec<String> = recipe
        .raw
        .needs
        .python_build
        .iter()
        .map(|t| expand(t.get_ref(), vars))
        .collect::<Result<_>>()?;
    // CMake's HIP language reads a multiarch ROCm (Debian's /usr) only from 3.27: an older
    // system CMake is replaced for this build by CMake from PyPI, in the build-only tools.
    let old_cmake = backend.rocm.as_ref().is_some_and(|r| r.multiarch)
        && machine
            .tools
            .cmake
            .as_ref()
            .and_then(|t| t.version.as_deref())
            .and_then(cmake_version)
            .is_some_and(|v| v < (3, 27));
    if old_cmake {
        reqs.push("cmake>=3.27,<4".into());
    }
    let tools = if reqs.is_empty() {
        None
    } else {
        let pip = super::pip::installer(py, &format!("the build tools {}", reqs.join(" ")))?;
        let mut key: Vec<&str> = reqs.iter().map(String::as_str).collect();
        key.push(&py.version);
        let dir = join(os, cache, &["tools", &hash_hex(&key)[..16]]);
        let install = super::pip::install_into(&pip, py, os, &dir, false)
            .arg("--quiet")
            .args(reqs.clone());
        Some(ToolsPlan { dir, install })
    };
    let cmake = match (&tools, old_cmake) {
        (Some(t), true) => join(os, &t.dir, &["cmake", "data", "bin", "cmake"]),
        _ => toolset.cmake.clone(),
    };
    Ok((tools, cmake))
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
    use rocbuild_testkit::machine::cpu_machine;

    fn cpu_backend(r: &Recipe, m: &Machine) -> BackendPlan {
        toolchain::choose(r.name(), &r.backends(), false, m, &Default::default()).unwrap()
    }

    #[test]
    fn the_first_missing_tool_is_named_with_its_install_command() {
        let r = recipe("torchcodec");
        let mut m = cpu_machine(Os::Linux);
        let b = cpu_backend(&r, &m);
        assert_eq!(
            required(&r, &m, &b).unwrap().ninja,
            PathBuf::from("/usr/bin/ninja")
        );
        m.tools.ninja = None;
        match required(&r, &m, &b) {
            Err(EngineError::MissingTool { tool, hint, .. }) => {
                assert_eq!(tool, "ninja");
                assert!(hint.contains("ninja"), "{hint}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_static_ffmpeg_is_refused_on_windows() {
        let r = recipe("torchcodec");
        let mut m = cpu_machine(Os::Windows);
        let b = cpu_backend(&r, &m);
        assert!(required(&r, &m, &b).is_ok());
        if let Some(f) = &mut m.ffmpeg {
            f.bin = None;
        }
        assert!(matches!(
            required(&r, &m, &b),
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
