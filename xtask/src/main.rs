//! Project tasks: `cargo xtask test` (set up a fresh Debian 12 machine, then run the tests)
//! and `cargo xtask bench` (measure rocbuild against bare CMake, write BENCHMARKS.md).

mod bench;
mod bench_artifacts;
mod bench_closure;
mod bench_doctor;
mod bench_readers;
mod bench_recipes;
mod bench_status;
mod chroots;
mod exe;
mod fuzz;
mod gpu_check;
mod quick;
mod release;
mod report;
mod setup;
mod upstream;
mod util;
mod windows;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  test [ARGS...]  install what the tests need (apt packages, a venv with the real PyPI torch
                  in cache/venvs/torch-real, Debian sid chroots with ROCm 6.4 and 7.2 under
                  /var/cache/rocbuild-test/chroots or $ROCBUILD_TEST_CHROOTS, the Windows
                  world in cache/windows), then run
                  `cargo test --workspace --no-fail-fast ARGS...`; with no ARGS also the
                  Windows build and its tests under Wine, and a 10 s smoke run of each fuzz
                  target. Ends with each phase's wall time and the 15 slowest tests; every
                  test's time in target/xtask/junit.xml
  test --quick [ARGS...]
                  the contributor's loop: unit tests, architecture checks and the fixture
                  end-to-end tests, none of the heavy set-up (the tests that need it say
                  SKIPPED); checks the apt packages they build with (CONTRIBUTING.md)
  setup           only the set-up part of `test`
  chroots [NAME]  only the ROCm chroots of the set-up (sid-rocm6.4, experimental-rocm7.2);
                  `chroots trixie-cuda12`: Debian's CUDA 12.4 and torch 2.6 (6.6 GB, not part
                  of the set-up; tests/e2e/chroot_cuda.rs)
  windows         only the Windows world of the set-up (cache/windows: MSVC sysroot, Windows
                  CPython 3.11 + headers, FFmpeg DLLs, torch wheels unpacked, a Wine prefix);
                  prints its world.json
  exe [build]     rocbuild.exe for x86_64-pc-windows-msvc (cache/exe/rocbuild.exe): Debian
                  sid's rustc/cargo/rust-src in a chroot under /var/cache/rocbuild-test/chroots,
                  std built from source (-Zbuild-std), lld-link and clang-cl against the
                  Windows world's MSVC sysroot; run once under Wine
  exe test [CRATE]
                  the unit tests of every crate (cargo test --workspace --lib) built the same
                  way and run under Wine, each test executable with a timeout; a test that
                  fails for Wine's sake is listed with why (xtask/src/exe/limits.rs)
  upstream [--mirror DIR]
                  the releases each recipe's git source has tagged that the recipe does not
                  know yet (git ls-remote of $ROCBUILD_MIRROR's copy or the network); exit 1
                  when a recipe is behind
  wheel           rocbuild's own manylinux wheel (maturin --zig, checked by auditwheel) in
                  cache/dist, and the release workflow linted with actionlint; part of `test`
  bench [--only d,e,f]
                  benchmarks: rocbuild vs bare cmake (a), no-op rerun (b), status on the
                  real torch (c), deps vs ldd and the Windows DLLs (d), doctor vs a bare
                  import and an nm -D script (e), no-op rerun on the real torch (f);
                  writes BENCHMARKS.md (--only: just those sections of it)
  soak [N]        run N (default 50) random sequences of the model-based ownership test
                  (tests/e2e/ownership_model.rs): installs, pip, uv, torch upgrades,
                  rebuilds, restores and kills on a real venv
  gpu-check --prepare | --run [--device cpu]
                  the GPU check (issue 41): --prepare builds bitsandbytes' CUDA library for
                  sm_90 with the CUDA 13.2 toolkit from the index, verifies it and puts its
                  wheel, check.py and run.sh in cache/gpu-check (under 64 MiB: what a device
                  call carries); --run runs run.sh (GPU against CPU; exit 3: no CUDA device)
  fuzz [SECONDS]  run every fuzz target (fuzz/) for SECONDS each (default 60) on stable Rust;
                  crashes in fuzz/artifacts, figures into BENCHMARKS.md
  fuzz --smoke    what a whole `cargo xtask test` runs: the targets built, each run 10 s
";

/// `cargo xtask soak N`: the ownership model test with N random cases, after the set-up.
fn soak(args: &[String]) -> Result<ExitCode, String> {
    let n: u32 = match args.first() {
        Some(a) => a
            .parse()
            .map_err(|_| format!("soak: `{a}` is not a number of cases"))?,
        None => 50,
    };
    std::env::set_var("ROCBUILD_MODEL_CASES", n.to_string());
    let args: Vec<String> = [
        "-p",
        "rocbuild",
        "--test",
        "e2e",
        "ownership_model_random",
        "--",
        "--nocapture",
    ]
    .map(String::from)
    .to_vec();
    let prepared = setup::setup_for(&args, false, true)?;
    setup::run_tests(&prepared, &args)
}

/// `cargo xtask test [--quick] ARGS`, then where its time went (also when it failed).
fn test(args: &[String]) -> Result<ExitCode, String> {
    let started = report::Mark::now();
    let result = match args.first().map(String::as_str) {
        Some("--quick") => quick::run(&args[1..]),
        _ => setup::setup_for(args, args.is_empty(), true).and_then(|p| setup::run_tests(&p, args)),
    };
    report::finish(&util::workspace_root(), started);
    result
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        Some("setup") => setup::setup().map(|_| ExitCode::SUCCESS),
        Some("chroots") if args[1..].iter().any(|a| a == chroots::TRIXIE_CUDA.name) => {
            match chroots::ensure(&chroots::TRIXIE_CUDA, setup::is_root()) {
                Ok(chroots::Outcome::Ready(d)) => {
                    println!(
                        "xtask: chroot {}: {}",
                        chroots::TRIXIE_CUDA.name,
                        d.display()
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Ok(chroots::Outcome::Skipped(why)) => Err(why),
                Err(e) => Err(e),
            }
        }
        Some("chroots") => chroots::setup(setup::is_root(), &args[1..]).map(|_| ExitCode::SUCCESS),
        Some("windows") => windows::main().map(|_| ExitCode::SUCCESS),
        Some("exe") => exe::main(&args[1..]),
        Some("upstream") => upstream::upstream(&args[1..]),
        Some("wheel") => release::prepare().map(|w| {
            println!("{}", w.display());
            ExitCode::SUCCESS
        }),
        Some("bench") => bench::bench(&args[1..]).map(|_| ExitCode::SUCCESS),
        Some("fuzz") if args.get(1).is_some_and(|a| a == "--smoke") => {
            let started = report::Mark::now();
            let r = fuzz::smoke();
            report::finish(&util::workspace_root(), started);
            r.map(|_| ExitCode::SUCCESS)
        }
        Some("fuzz") => fuzz::fuzz(&args[1..]).map(|_| ExitCode::SUCCESS),
        Some("soak") => soak(&args[1..]),
        Some("gpu-check") => gpu_check::gpu_check(&args[1..]),
        Some("help" | "-h" | "--help") => {
            print!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        Some(other) => {
            eprint!("xtask: unknown command `{other}`\n\n{USAGE}");
            Ok(ExitCode::from(2))
        }
        None => {
            eprint!("{USAGE}");
            Ok(ExitCode::from(2))
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}
