//! `cargo xtask test`: everything the tests need on a fresh Debian 12 machine, then the tests.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use crate::util::{cargo, run_inherit, secs, workspace_root, Result};

/// Debian packages the tests use: the build tools, FFmpeg's development files, patchelf, the
/// MinGW cross compilers (Windows plans), a python3 with venv and headers (the fixture
/// builds a Python extension; `python3 -m venv` needs python3-venv on Debian), and the
/// HIP / LLVM tools the binary-reader tests build their fixtures with.
const APT_PACKAGES: &[&str] = &[
    "cmake",
    "ninja-build",
    "pkg-config",
    "libavcodec-dev",
    "libavformat-dev",
    "libavutil-dev",
    "libswscale-dev",
    "libswresample-dev",
    "libavfilter-dev",
    "libavdevice-dev",
    "patchelf",
    "libssl-dev",
    "git",
    "mingw-w64",
    "gcc",
    "g++",
    "python3",
    "python3-venv",
    "python3-dev",
    // rocbuild-native tests: Debian's ROCm 5.2 hipcc (a HIP library for gfx1010 and its offload
    // bundle), clang-15 + lld-15 (Mach-O dylibs via ld64.lld, MSVC-ABI DLLs via lld-link),
    // llvm-15 (llvm-lipo for a universal dylib, llvm-objdump to cross-check rpaths).
    "hipcc",
    "libamdhip64-dev",
    "rocm-device-libs",
    "clang-15",
    "lld-15",
    "llvm-15",
];

/// The venv holding the real PyPI torch, relative to the workspace root.
const TORCH_VENV: &str = "cache/venvs/torch-real";

/// Set everything up; returns the absolute path of the real-torch venv.
pub fn setup() -> Result<PathBuf> {
    apt()?;
    torch_venv()
}

/// `cargo test --workspace ARGS...` with ROCBUILD_TEST_TORCH_VENV set; its exit status.
pub fn run_tests(venv: &Path, extra: &[String]) -> Result<ExitCode> {
    println!("xtask: cargo test --workspace {}", extra.join(" "));
    let status = Command::new(cargo())
        .current_dir(workspace_root())
        .args(["test", "--workspace"])
        .args(extra)
        .env("ROCBUILD_TEST_TORCH_VENV", venv)
        .status()
        .map_err(|e| format!("cannot run cargo test: {e}"))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

fn installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${db:Status-Abbrev}", pkg])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).starts_with("ii"))
        .unwrap_or(false)
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

fn apt() -> Result<()> {
    if !crate::util::on_path("dpkg-query") {
        println!(
            "xtask: apt: no dpkg-query (not Debian?): not checking packages; the tests need {}",
            APT_PACKAGES.join(" ")
        );
        return Ok(());
    }
    let missing: Vec<&str> = APT_PACKAGES
        .iter()
        .copied()
        .filter(|p| !installed(p))
        .collect();
    if missing.is_empty() {
        println!("xtask: apt: all {} packages present", APT_PACKAGES.len());
        return Ok(());
    }
    let install = format!(
        "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {}",
        missing.join(" ")
    );
    if !is_root() {
        return Err(format!(
            "missing packages: {}; as root run:\n  apt-get update && {install}",
            missing.join(" ")
        ));
    }
    println!("xtask: apt: missing {}; installing", missing.join(" "));
    let t = Instant::now();
    run_inherit(Command::new("apt-get").arg("update"))?;
    run_inherit(
        Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    let still: Vec<&str> = missing.iter().copied().filter(|p| !installed(p)).collect();
    if !still.is_empty() {
        return Err(format!(
            "apt-get install finished but these are still missing: {}",
            still.join(" ")
        ));
    }
    println!(
        "xtask: apt: installed {} packages in {}",
        missing.len(),
        secs(t.elapsed())
    );
    Ok(())
}

/// `<venv>/lib/python3.*/site-packages/torch/version.py`, if there is one.
fn torch_version_py(venv: &Path) -> Option<PathBuf> {
    std::fs::read_dir(venv.join("lib"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3."))
        .map(|e| e.path().join("site-packages/torch/version.py"))
        .find(|p| p.is_file())
}

fn torch_venv() -> Result<PathBuf> {
    let venv = workspace_root().join(TORCH_VENV);
    if let Some(v) = torch_version_py(&venv) {
        let version = std::fs::read_to_string(&v).unwrap_or_default();
        let version = version
            .lines()
            .find_map(|l| l.strip_prefix("__version__ = "))
            .unwrap_or("?")
            .trim_matches(['\'', '"'])
            .to_string();
        println!(
            "xtask: torch venv: cached at {} (torch {version})",
            venv.display()
        );
        return Ok(venv);
    }
    if venv.exists() {
        // A venv without torch: an interrupted earlier attempt. Start over.
        println!(
            "xtask: torch venv: {} has no torch; recreating it",
            venv.display()
        );
        std::fs::remove_dir_all(&venv)
            .map_err(|e| format!("cannot remove {}: {e}", venv.display()))?;
    }
    std::fs::create_dir_all(venv.parent().unwrap())
        .map_err(|e| format!("cannot create {}: {e}", venv.parent().unwrap().display()))?;
    let python = std::env::var("ROCBUILD_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let t = Instant::now();
    println!("xtask: torch venv: {python} -m venv {}", venv.display());
    run_inherit(Command::new(&python).args(["-m", "venv"]).arg(&venv))?;
    println!("xtask: torch venv: venv made in {}", secs(t.elapsed()));
    let t = Instant::now();
    println!(
        "xtask: torch venv: pip install torch (the full PyPI wheel with its nvidia wheels, ~5 GB)"
    );
    let pip = run_inherit(Command::new(venv.join("bin/python")).args([
        "-m",
        "pip",
        "install",
        "--progress-bar",
        "off",
        "torch",
    ]));
    if let Err(e) = pip {
        // Do not leave a half-installed torch that the next run would take for a cached one.
        let _ = std::fs::remove_dir_all(&venv);
        return Err(e);
    }
    if torch_version_py(&venv).is_none() {
        return Err(format!("pip install torch succeeded but {}/lib/python3.*/site-packages/torch/version.py does not exist", venv.display()));
    }
    println!(
        "xtask: torch venv: torch installed in {}",
        secs(t.elapsed())
    );
    Ok(venv)
}
