//! The real PyPI torch (a CUDA build) with the `lite` CMake package: no CUDA toolkit here.
//! `cargo xtask test` prepares the venv and sets ROCBUILD_TEST_TORCH_VENV.

use std::path::PathBuf;
use std::process::Command;

use crate::common::*;

const VERIFY: &str = r#"import ctypes, os, sysconfig
lib = ctypes.CDLL(os.path.join(sysconfig.get_paths()["platlib"], "realext", "librealext.so"))
lib.realext_sum.restype = ctypes.c_double
assert lib.realext_sum() == 4.0, lib.realext_sum()
import torch
print("at::ones(4).sum() =", lib.realext_sum(), "with torch", torch.__version__)"#;

#[test]
fn builds_against_the_real_pypi_torch_with_the_lite_package() {
    let venv = PathBuf::from(std::env::var("ROCBUILD_TEST_TORCH_VENV").expect("ROCBUILD_TEST_TORCH_VENV: run the tests through `cargo xtask test`, which installs the real torch"));
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // A git repository holding the extension.
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    for f in ["CMakeLists.txt", "realext.cpp"] {
        std::fs::copy(fixture_dir().join("realext").join(f), work.join(f)).unwrap();
    }
    let git = |args: &[&str]| {
        run(Command::new("git")
            .arg("-C")
            .arg(&work)
            .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
            .args(args))
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "realext"]);
    git(&["tag", "v1.0.0"]);
    let wheels = root.join("wheels");
    make_wheel_with(&wheels, "realext", "1.0.0", b"".to_vec());
    let recipes = root.join("recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    let recipe = format!(
        "[package]\nname = \"realext\"\ndistribution = \"realext\"\nimport-dir = \"realext\"\n\n[source]\ngit = \"{}\"\ntag = \"v{{version}}\"\n\n[[release]]\nversion = \"1.0.0\"\ntorch = \">=2.0\"\n\n[build]\ntorch-cmake = \"lite\"\ndefine = {{ CMAKE_BUILD_TYPE = \"Release\" }}\n\n[install]\nartifacts = [\"librealext*\"]\nfinds = [\"{{torch.lib}}\"]\n\n[verify]\npython = '''\n{VERIFY}\n'''\n",
        work.display()
    );
    std::fs::write(recipes.join("realext.toml"), recipe).unwrap();
    let wheels_s = wheels.display().to_string();
    let out = rocbuild(
        &[
            "realext",
            "--recipes",
            recipes.to_str().unwrap(),
            "--venv",
            venv.to_str().unwrap(),
            "--cache",
            root.join("cache").to_str().unwrap(),
            "-q",
        ],
        &[("PIP_NO_INDEX", "1"), ("PIP_FIND_LINKS", &wheels_s)],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("verified: at::ones(4).sum() = 4.0 with torch"),
        "{}",
        out.stdout
    );
    let site = site_packages(&venv);
    let info = rocbuild_native::read_elf(&site.join("realext/librealext.so")).unwrap();
    assert_eq!(info.runpath, ["$ORIGIN", "$ORIGIN/../torch/lib"]);
    // The CUDA torch's own CMake package would have demanded a CUDA toolkit: lite did not.
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(site.join(".rocbuild/realext.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["flavor"], "cuda");
    assert!(m["defines"]["Torch_DIR"]
        .as_str()
        .unwrap()
        .contains("torch-lite"));
}
