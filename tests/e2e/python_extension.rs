//! `[python] from = "extension"`: the Python part as a wheel rocbuild assembles, its module
//! compiled by rocbuild's own CMake project with the library's toolchain. On this Linux
//! machine for this machine's venv, and for a Windows venv (clang-cl, verified under Wine):
//! the CTranslate2-shaped fixture, whose `setup.py` is never run.

use std::path::Path;

use crate::common::*;
use crate::windows::{windows_venv, world};

fn recipe(git: &str, requires: &str) -> String {
    format!(
        r#"[package]
name = "faketrans"
distribution = "faketrans"
import-dir = "faketrans"

[source]
git = "{git}"
tag = "v{{version}}"

[[release]]
version = "4.8.1"
torch = ">=0"

[needs]
torch = false
python-build = ["pybind11>=2.11"]
python = ["{requires}"]

[build.define]
CMAKE_BUILD_TYPE = "Release"

[python]
from = "extension"

[python.extension]
module = "faketrans._ext"
sources = ["python/cpp/*.cpp"]
package = "python/faketrans"
include = ["{{prefix}}/include"]
link = ["faketrans"]

[python.extension.console-scripts]
faketrans-cli = "faketrans:translate"

[install]
python-libs = ["faketrans/_ext*"]

[os.linux.install]
artifacts = ["libfaketrans.so*"]

[os.windows.install]
artifacts = ["faketrans.dll"]

[verify]
python = '''
import faketrans, faketrans._ext as e
assert faketrans.translate("abc") == "cba"
print("translated by", e.__file__.replace("\\", "/").rsplit("/", 2)[-2:])
'''
"#
    )
}

/// `requires`: a run-time requirement the venv has (rocbuild checks it before building).
fn recipes(root: &Path, requires: &str) -> std::path::PathBuf {
    let repos = root.join("repos");
    std::fs::create_dir_all(&repos).unwrap();
    make_git_repo(
        &repos,
        "faketrans",
        &fixture_dir().join("faketrans"),
        "v4.8.1",
    );
    let recipes = root.join("recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    std::fs::write(
        recipes.join("faketrans.toml"),
        recipe(repos.join("faketrans.git").to_str().unwrap(), requires),
    )
    .unwrap();
    recipes
}

/// The wheel rocbuild assembled: its files and METADATA.
fn wheel_in(cache: &Path) -> (String, Vec<String>, String) {
    let found = walk_files(cache)
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("rocbuild's wheel in the build tree");
    let f = std::fs::File::open(&found).unwrap();
    let mut z = zip::ZipArchive::new(f).unwrap();
    let names: Vec<String> = (0..z.len())
        .map(|i| z.by_index(i).unwrap().name().to_string())
        .collect();
    let mut meta = String::new();
    std::io::Read::read_to_string(
        &mut z.by_name("faketrans-4.8.1.dist-info/METADATA").unwrap(),
        &mut meta,
    )
    .unwrap();
    (
        found.file_name().unwrap().to_string_lossy().into_owned(),
        names,
        meta,
    )
}

fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// For this machine's venv: the module is compiled by rocbuild's project (the fixture's
/// setup.py is never run: a broken one changes nothing), the wheel holds the package's
/// Python files, the module and a METADATA with the recipe's requirements, and the module
/// finds the library beside it.
#[test]
fn the_extension_is_compiled_by_rocbuilds_project_and_installed_as_a_wheel() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let venv = root.join("venv");
    let site = make_venv(&venv);
    let recipes = recipes(root, "pip");
    let cache = root.join("cache");
    let out = rocbuild(
        &[
            "faketrans",
            "--recipes",
            recipes.to_str().unwrap(),
            "--venv",
            venv.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("translated by ['faketrans', '_ext.cpython-"),
        "{}",
        out.stdout
    );
    let (name, files, meta) = wheel_in(&cache);
    assert!(name.starts_with("faketrans-4.8.1-cp3"), "{name}");
    assert!(name.ends_with("-linux_x86_64.whl"), "{name}");
    assert!(
        files.contains(&"faketrans/__init__.py".to_string()),
        "{files:?}"
    );
    assert!(
        files
            .iter()
            .any(|f| f.starts_with("faketrans/_ext.cpython-") && f.ends_with(".so")),
        "{files:?}"
    );
    assert!(meta.contains("Requires-Dist: pip\n"), "{meta}");
    assert!(
        files.contains(&"faketrans-4.8.1.dist-info/entry_points.txt".to_string()),
        "{files:?}"
    );
    let eps =
        std::fs::read_to_string(site.join("faketrans-4.8.1.dist-info/entry_points.txt")).unwrap();
    assert_eq!(
        eps,
        "[console_scripts]\nfaketrans-cli = faketrans:translate\n"
    );
    assert!(site.join("faketrans-4.8.1.dist-info/RECORD").is_file());
    let record = std::fs::read_to_string(site.join("faketrans-4.8.1.dist-info/RECORD")).unwrap();
    assert!(record.contains("faketrans/libfaketrans.so"), "{record}");
}

/// For a Windows venv from Linux: the same recipe, no Windows-only line in it but the DLL's
/// name. clang-cl compiles the module against the Windows Python's headers and import
/// library, the wheel is tagged for the venv (cp311-win_amd64), and rocbuild's verification
/// imports it in the Windows Python under Wine.
#[test]
fn a_windows_venv_gets_the_extension_compiled_with_clang_cl_and_verified_under_wine() {
    let Some(w) = world() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let venv = windows_venv(&w, root);
    let recipes = recipes(root, "numpy");
    let cache = root.join("cache");
    let wheels = w.wheels.display().to_string();
    let env = [
        ("WINEPREFIX", w.wineprefix.to_str().unwrap()),
        ("ROCBUILD_WINSYSROOT", w.sysroot.to_str().unwrap()),
        ("PIP_NO_INDEX", "1"),
        ("PIP_FIND_LINKS", wheels.as_str()),
    ];
    let out = rocbuild(
        &[
            "faketrans",
            "--recipes",
            recipes.to_str().unwrap(),
            "--venv",
            venv.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
            "--python-headers",
            w.headers.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("translated by ['faketrans', '_ext.cp311-win_amd64.pyd']"),
        "{}",
        out.stdout
    );
    let (name, files, _) = wheel_in(&cache);
    assert_eq!(name, "faketrans-4.8.1-cp311-cp311-win_amd64.whl");
    assert!(
        files.contains(&"faketrans/_ext.cp311-win_amd64.pyd".to_string()),
        "{files:?}"
    );
    let site = venv.join("Lib/site-packages");
    for f in [
        "faketrans/faketrans.dll",
        "faketrans/_ext.cp311-win_amd64.pyd",
        "faketrans/__init__.py",
    ] {
        assert!(site.join(f).is_file(), "{f} not installed");
    }
    // `rocbuild wheel` of the install: tagged for the venv's Python, read from its files (its
    // python.exe cannot run here).
    let dist = root.join("dist");
    let out = rocbuild(
        &[
            "wheel",
            "faketrans",
            "--venv",
            venv.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
            "--out",
            dist.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.trim().ends_with("-cp311-cp311-win_amd64.whl"),
        "{}",
        out.stdout
    );
}
