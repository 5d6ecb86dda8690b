//! A HIP library built by rocbuild with this machine's real ROCm SDK (Debian's 5.2, installed
//! by `cargo xtask test`) for gfx1010, read back with rocbuild's own offload-bundle reader.
//! Debian's CMake 3.25 cannot use a multiarch ROCm for the HIP language, so rocbuild takes
//! CMake from PyPI into its build-only tools for this build (needs PyPI).

use std::process::Command;

use crate::common::*;

fn recipe(git: &str) -> String {
    format!(
        r#"[package]
name = "fakehip"
distribution = "rocbuild-fixture-fakehip"
import-dir = "fakehip"
backends = ["cpu", "rocm"]

[source]
git = "{git}"
tag = "v{{version}}"

[[release]]
version = "1.0.0"
torch = ">=0"

[needs]
torch = false

[build.define]
CMAKE_BUILD_TYPE = "Release"

[install]
artifacts = ["libfakehip.so*"]

[verify]
python = '''
import ctypes, os, sysconfig
lib = ctypes.CDLL(os.path.join(sysconfig.get_paths()["platlib"], "fakehip", "libfakehip.so.1"))
print("HIP runtime loaded; devices:", lib.fakehip_devices())
'''
"#
    )
}

#[test]
fn builds_a_hip_library_for_gfx1010_with_the_real_sdk() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let venv = root.join("venv");
    let site = make_venv(&venv);
    let repos = root.join("repos");
    std::fs::create_dir_all(&repos).unwrap();
    make_git_repo(&repos, "fakehip", &fixture_dir().join("fakehip"), "v1.0.0");
    let recipes = root.join("recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    std::fs::write(
        recipes.join("fakehip.toml"),
        recipe(repos.join("fakehip.git").to_str().unwrap()),
    )
    .unwrap();
    let wheels = root.join("wheels");
    make_wheel_files(
        &wheels,
        "rocbuild_fixture_fakehip",
        "1.0.0",
        &[("fakehip/__init__.py", b"")],
    );
    let cache = root.join("cache");
    let common = [
        "fakehip",
        "--recipes",
        recipes.to_str().unwrap(),
        "--venv",
        venv.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
    ];
    // The user's temp dir: hipcc leaves an empty `kernel-XXXXXX` directory in it for every
    // file and GPU arch it compiles (and CMake's compiler check one more); rocbuild points the
    // compilers at a directory of the build tree instead, so nothing is left here.
    let user_tmp = root.join("user-tmp");
    std::fs::create_dir_all(&user_tmp).unwrap();
    let env = [
        ("PIP_FIND_LINKS", wheels.to_str().unwrap()),
        ("TMPDIR", user_tmp.to_str().unwrap()),
    ];

    // The plan says which SDK and which CMake before anything runs.
    let plan = rocbuild(
        &[&common[..], &["--arch", "gfx1010", "--dry-run"]].concat(),
        &env,
    );
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(plan.stdout.contains("rocm:   /usr 5.2"), "{}", plan.stdout);
    assert!(
        plan.stdout.contains("-DCMAKE_HIP_ARCHITECTURES=gfx1010"),
        "{}",
        plan.stdout
    );
    assert!(plan.stdout.contains("--rocm-path=/usr"), "{}", plan.stdout);

    let out = rocbuild(&[&common[..], &["--arch", "gfx1010"]].concat(), &env);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    // The run itself (not only --dry-run) says which SDK and which archs before it builds.
    assert!(
        out.stderr.contains("note: ROCm 5.2")
            && out.stderr.contains("at /usr (")
            && out.stderr.contains("for gfx1010 (from --arch)"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("HIP runtime loaded; devices: 0"),
        "{}",
        out.stdout
    );

    let left: Vec<_> = std::fs::read_dir(&user_tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left in the user's temp dir: {left:?}");

    let lib = site.join("fakehip/libfakehip.so.1");
    let bin = rocbuild_native::read_binary(&lib).unwrap();
    assert_eq!(bin.gpu_targets, ["gfx1010"], "{:?}", bin.gpu_targets);
    assert!(
        bin.needed.iter().any(|n| n.starts_with("libamdhip64.so")),
        "{:?}",
        bin.needed
    );
    // The SDK's runtime is found where Debian keeps it (a default directory): not copied.
    assert!(!site
        .join("fakehip")
        .read_dir()
        .unwrap()
        .flatten()
        .any(|e| { e.file_name().to_string_lossy().starts_with("libamdhip64") }));
    let py = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            &format!(
                "import ctypes; print(ctypes.CDLL({:?}).fakehip_devices())",
                lib.display().to_string()
            ),
        ])
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );

    // The manifest records the backend, the SDK version and the archs.
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(site.join(".rocbuild/fakehip.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["sdk"]["backend"], "rocm", "{m}");
    assert_eq!(m["sdk"]["rocm_version"], "5.2.0", "{m}");
    assert_eq!(m["sdk"]["gpu_archs"], serde_json::json!(["gfx1010"]), "{m}");
}
