//! `cargo xtask gpu-check`: the GPU check of issue 41, sized for the device machine this project
//! is sometimes lent (an NVIDIA H100/H200, sm_90, no package index, 64 MiB carried, minutes).
//!
//! `--prepare` (here, no GPU needed): rocbuild builds bitsandbytes' CUDA library with the CUDA
//! 13.2 toolkit from the package index (`cache/wheels/cuda`, offline) for `--cuda-arch 9.0` into
//! a throwaway venv over the real PyPI torch, verifies it, and makes its wheel; the wheel, the
//! comparison script and its runner go into `cache/gpu-check/` (what the device call carries).
//! `--run` runs that runner here with the prepared venv's Python (the real torch): where torch sees no CUDA
//! device it says so and exits 3, and `--run --device cpu` exercises the script's comparisons
//! with the CPU on both sides. On the device machine the runner needs no cargo, pip or index:
//! `bash cache/gpu-check/run.sh` (it unpacks the wheel onto PYTHONPATH).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use crate::util::{cargo, run_inherit, secs, workspace_root, Result};

const CHECK_PY: &str = include_str!("gpu_check/check.py");
const RUN_SH: &str = include_str!("gpu_check/run.sh");

/// The arch the lent machines have (H100/H200): the only one built, to keep the carry small.
const ARCH: &str = "9.0";
/// What the device call may carry in all.
const CARRY_LIMIT: u64 = 64 << 20;

pub fn gpu_check(args: &[String]) -> Result<ExitCode> {
    let out = workspace_root().join("cache/gpu-check");
    match args.first().map(String::as_str) {
        Some("--prepare") => prepare(&out).map(|_| ExitCode::SUCCESS),
        Some("--run") => run(&out, &args[1..]),
        _ => Err("usage: cargo xtask gpu-check --prepare | --run [--device cpu]".into()),
    }
}

fn prepare(out: &Path) -> Result<()> {
    let root = workspace_root();
    let torch = crate::setup::torch_venv()?;
    let wheels = root.join("cache/wheels/cuda");
    if !wheels.is_dir() {
        return Err(format!(
            "{} is missing: run `cargo xtask setup` first (it downloads the pinned CUDA 13.2 wheels)",
            wheels.display()
        ));
    }
    run_inherit(Command::new(cargo()).args(["build", "--release", "-q", "-p", "rocbuild"]))?;
    let exe = root.join("target/release/rocbuild");
    let work = root.join("cache/gpu-check-work");
    let venv = work.join("venv");
    let _ = std::fs::remove_dir_all(&venv);
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    crate::bench_status::links_venv(&crate::bench_status::site_of(&torch)?, &venv)?;
    let t = Instant::now();
    let build = [
        "bitsandbytes",
        "--backend",
        "cuda",
        "--cuda",
        "13.2",
        "--cuda-arch",
        ARCH,
        "--no-binary",
    ];
    rocbuild(&exe, &venv, &work, &wheels, &build)?;
    println!(
        "xtask: gpu-check: built and verified in {}",
        secs(t.elapsed())
    );
    let _ = std::fs::remove_dir_all(out);
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let out_arg = out.display().to_string();
    rocbuild(
        &exe,
        &venv,
        &work,
        &wheels,
        &["wheel", "bitsandbytes", "--out", &out_arg],
    )?;
    for (name, text) in [("check.py", CHECK_PY), ("run.sh", RUN_SH)] {
        std::fs::write(out.join(name), text).map_err(|e| format!("{name}: {e}"))?;
    }
    let size = dir_size(out)?;
    if size > CARRY_LIMIT {
        return Err(format!(
            "{} holds {:.1} MiB: more than the device call carries (64 MiB)",
            out.display(),
            size as f64 / 1048576.0
        ));
    }
    println!(
        "xtask: gpu-check: {} is ready ({:.1} MiB); on the GPU machine, carrying cache/gpu-check: bash cache/gpu-check/run.sh",
        out.display(),
        size as f64 / 1048576.0
    );
    Ok(())
}

/// `rocbuild ARGS` into `venv`, with the CUDA wheels offline and the caller's mirror passed on.
fn rocbuild(exe: &Path, venv: &Path, work: &Path, wheels: &Path, args: &[&str]) -> Result<()> {
    let mut c = Command::new(exe);
    c.args(args)
        .arg("--venv")
        .arg(venv)
        .arg("--cache")
        .arg(work.join("cache"))
        .env("ROCBUILD_CUDA_WHEELS", wheels)
        .env("ROCBUILD_UPSTREAM", "off")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    for k in crate::bench::SCRUB {
        c.env_remove(k);
    }
    // The caller's mirror is the one scrubbed variable the real source may need.
    if let Some(m) = std::env::var_os("ROCBUILD_MIRROR") {
        c.env("ROCBUILD_MIRROR", m);
    }
    println!("xtask: gpu-check: rocbuild {}", args.join(" "));
    run_inherit(&mut c)
}

fn run(out: &Path, extra: &[String]) -> Result<ExitCode> {
    let script = out.join("run.sh");
    if !script.is_file() {
        return Err(
            "cache/gpu-check/run.sh is missing: run `cargo xtask gpu-check --prepare` first".into(),
        );
    }
    // The prepared venv: the real torch, and numpy (which the shared torch venv lacks).
    let venv = workspace_root().join("cache/gpu-check-work/venv");
    let status = Command::new("bash")
        .arg(&script)
        .args(extra)
        .env("PYTHON", venv.join("bin/python"))
        .status()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    Ok(ExitCode::from(status.code().unwrap_or(2) as u8))
}

fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let e = e.map_err(|e| e.to_string())?;
            let m = e.metadata().map_err(|e| e.to_string())?;
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.len();
            }
        }
    }
    Ok(total)
}
