//! A CUDA library built by rocbuild on a machine without any CUDA install: `--cuda 13.2`
//! installs the pinned toolkit wheels (from `cache/wheels/cuda`, which `cargo xtask test`
//! fills, as `ROCBUILD_CUDA_WHEELS`) into the tools area, assembles one root, picks the host
//! compiler its nvcc accepts, and CMake's CUDA language builds the fixture for sm_86 and sm_90
//! SASS plus compute_90 PTX. The installed library's `.nv_fatbin` is read back; its
//! verification runs on this GPU-less machine (the runtime says "no driver", not a crash).
//! Then, with the same cache: an arch the toolkit does not know, and no host compiler.

use std::path::{Path, PathBuf};

use crate::common::*;

fn recipe(git: &str) -> String {
    format!(
        r#"[package]
name = "fakecuda"
distribution = "rocbuild-fixture-fakecuda"
import-dir = "fakecuda"
backends = ["cpu", "cuda"]

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

[backend.cuda.build.define]
CMAKE_CUDA_ARCHITECTURES = "{{cuda.cmake-archs}}"

[install]
artifacts = ["libfakecuda.so*"]

[verify]
python = '''
import ctypes, os, sysconfig
lib = ctypes.CDLL(os.path.join(sysconfig.get_paths()["platlib"], "fakecuda", "libfakecuda.so.1"))
print("CUDA runtime loaded; devices:", lib.fakecuda_devices())
'''
"#
    )
}

/// The pinned wheels, cached by `cargo xtask test`; None (SKIPPED said) when absent.
pub(crate) fn cuda_wheels() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cache/wheels/cuda");
    let pins = rocbuild_fetch::CudaPins::builtin();
    let pin = pins.pick("linux", "x86_64", Some("13.2")).unwrap();
    let missing: Vec<&str> = pin
        .wheel
        .iter()
        .filter(|w| w.part == "compiler")
        .map(|w| w.file_name())
        .filter(|f| !dir.join(f).is_file())
        .collect();
    if missing.is_empty() {
        return Some(dir);
    }
    rocbuild_testkit::skip::skipped(&format!(
        "the CUDA 13.2 wheels {missing:?} are not in {} (cargo xtask test downloads them)",
        dir.display()
    ));
    None
}

#[test]
fn builds_a_cuda_library_with_the_toolkit_from_the_index() {
    let Some(wheels) = cuda_wheels() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let venv = root.join("venv");
    let site = make_venv(&venv);
    let repos = root.join("repos");
    std::fs::create_dir_all(&repos).unwrap();
    make_git_repo(
        &repos,
        "fakecuda",
        &fixture_dir().join("fakecuda"),
        "v1.0.0",
    );
    let recipes = root.join("recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    std::fs::write(
        recipes.join("fakecuda.toml"),
        recipe(repos.join("fakecuda.git").to_str().unwrap()),
    )
    .unwrap();
    let pywheels = root.join("wheels");
    make_wheel_files(
        &pywheels,
        "rocbuild_fixture_fakecuda",
        "1.0.0",
        &[("fakecuda/__init__.py", b"")],
    );
    let cache = root.join("cache");
    let common = [
        "fakecuda",
        "--recipes",
        recipes.to_str().unwrap(),
        "--venv",
        venv.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
        "--cuda",
        "13.2",
    ];
    let env = [
        ("PIP_FIND_LINKS", pywheels.to_str().unwrap()),
        ("ROCBUILD_CUDA_WHEELS", wheels.to_str().unwrap()),
        // No system toolkit may be found instead of the index's.
        ("CUDA_HOME", ""),
        ("CUDA_PATH", ""),
    ];

    // A dry run installs nothing and says what it would.
    let plan = rocbuild(
        &[&common[..], &["--cuda-arch", "8.6;9.0+PTX", "--dry-run"]].concat(),
        &env,
    );
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(
        plan.stderr
            .contains("CUDA 13.2 would be installed from the package index"),
        "{}",
        plan.stderr
    );
    assert!(!cache.join("tools/cuda").exists());

    let t0 = std::time::Instant::now();
    let out = rocbuild(
        &[&common[..], &["--cuda-arch", "8.6;9.0+PTX", "-v"]].concat(),
        &env,
    );
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    eprintln!("install + build + verify: {:.1?}", t0.elapsed());
    // No NVIDIA driver here: the runtime says so (cudaErrorInsufficientDriver, 35) and the
    // library still loads.
    assert!(
        out.stdout.contains("CUDA runtime loaded; devices: -35")
            || out.stdout.contains("CUDA runtime loaded; devices: -100"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("(from the package index"),
        "{}",
        out.stderr
    );

    let lib = site.join("fakecuda/libfakecuda.so.1");
    let codes = rocbuild_native::nv_fatbin_codes(&std::fs::read(&lib).unwrap()).unwrap();
    let mut names: Vec<String> = codes.iter().map(|c| c.name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names, ["compute_90", "sm_86", "sm_90"], "{codes:?}");

    doctor_reads_the_code_and_says_there_is_no_driver(&recipes, &venv);
    // status says what the build is for, from its manifest (the toolkit's version.json).
    // (With the build's cache: its key sealed the manifest.)
    let status = rocbuild(
        &[
            "status",
            "--recipes",
            recipes.to_str().unwrap(),
            "--venv",
            venv.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        status
            .stdout
            .contains("cuda: built with CUDA 13.2.86 (its toolkit), for 8.6;9.0+PTX"),
        "{}",
        status.stdout
    );

    // The same cache, an arch CUDA 13 dropped: refused before anything is fetched.
    let bad = rocbuild(&[&common[..], &["--cuda-arch", "7.0"]].concat(), &env);
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("rocbuild::cuda::arch"),
        "{}",
        bad.stderr
    );
    assert!(bad.stderr.contains("(sm_70)"), "{}", bad.stderr);

    // A host compiler named that is not there: no other is tried behind the user's back.
    let host = [&env[..], &[("CUDAHOSTCXX", "/nonexistent/g++-16")]].concat();
    let bad = rocbuild(&[&common[..], &["--cuda-arch", "8.6"]].concat(), &host);
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("rocbuild::cuda::no_host_compiler"),
        "{}",
        bad.stderr
    );
    assert!(bad.stderr.contains("does not exist"), "{}", bad.stderr);
}

/// doctor reads the same code, and says plainly that there is no NVIDIA driver here; with
/// a GPU named (TORCH_CUDA_ARCH_LIST, as nvidia-smi would report it) it compares: 8.9 runs
/// the sm_86 cubin, 12.0 the compute_90 PTX, 7.5 nothing.
fn doctor_reads_the_code_and_says_there_is_no_driver(recipes: &Path, venv: &Path) {
    let doctor = |extra: &[(&str, &str)]| {
        rocbuild(
            &[
                "doctor",
                "fakecuda",
                "--no-load",
                "--recipes",
                recipes.to_str().unwrap(),
                "--venv",
                venv.to_str().unwrap(),
            ],
            &[
                &[("PATH", "/usr/bin:/bin"), ("TORCH_CUDA_ARCH_LIST", "")],
                extra,
            ]
            .concat(),
        )
    };
    let d = doctor(&[]);
    eprintln!("doctor:\n{}{}", d.stdout, d.stderr);
    assert!(d.stdout.contains("no NVIDIA driver here"), "{}", d.stdout);
    assert!(
        d.stdout.contains("sm_86, sm_90, compute_90"),
        "{}",
        d.stdout
    );
    let d = doctor(&[("TORCH_CUDA_ARCH_LIST", "8.9;12.0")]);
    assert!(!d.stdout.contains("has no code for"), "{}", d.stdout);
    let d = doctor(&[("TORCH_CUDA_ARCH_LIST", "7.5")]);
    assert!(
        d.stdout.contains("fakecuda has no code for sm_75"),
        "{}",
        d.stdout
    );
}
