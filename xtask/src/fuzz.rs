//! `cargo xtask fuzz [SECONDS]`: every libFuzzer target in fuzz/ for SECONDS each (default 60),
//! on stable Rust. cargo-fuzz needs nightly only for its sanitizer flags; without a sanitizer
//! it passes sanitizer-coverage flags that stable rustc accepts, so this builds the targets
//! with those flags directly (cargo-fuzz itself is not needed) and runs each binary with
//! libFuzzer's own options. Crashes land in fuzz/artifacts/<target>/; the corpus grows in
//! fuzz/corpus/<target>/ (both git-ignored). The figures go into BENCHMARKS.md.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::util::{cargo, first_line, run_inherit, workspace_root, Result};

/// The targets, in fuzz/Cargo.toml's order, with the seed files each starts from.
const TARGETS: &[&str] = &[
    "binary", "offload", "ld_cache", "recipe", "manifest", "state",
];

/// What cargo-fuzz passes for `--sanitizer none` (its `BuildOptions::rustflags`), plus
/// debug assertions and overflow checks so arithmetic slips are found too.
const RUSTFLAGS: &[&str] = &[
    "-Cpasses=sancov-module",
    "-Cllvm-args=-sanitizer-coverage-level=4",
    "-Cllvm-args=-sanitizer-coverage-inline-8bit-counters",
    "-Cllvm-args=-sanitizer-coverage-pc-table",
    "-Cllvm-args=-sanitizer-coverage-trace-compares",
    "--cfg",
    "fuzzing",
    "-Cdebug-assertions",
    "-Coverflow-checks",
];

pub struct Figures {
    pub target: String,
    pub seconds: u64,
    pub execs: u64,
    pub execs_per_sec: u64,
    pub corpus: usize,
    pub crash: Option<PathBuf>,
}

fn host_triple() -> Result<String> {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .map_err(|e| format!("cannot run rustc -vV: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .ok_or_else(|| "rustc -vV names no host".into())
}

/// Seeds: the shipped recipes, a manifest, and real ELF files of this machine, so the
/// fuzzer starts from valid input and mutates it into the corners.
fn seed(ws: &Path, target: &str, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let copy = |from: &Path, name: &str| {
        let _ = std::fs::copy(from, dir.join(name));
    };
    match target {
        "recipe" => {
            for e in std::fs::read_dir(ws.join("recipes")).map_err(|e| e.to_string())? {
                let p = e.map_err(|e| e.to_string())?.path();
                if p.extension().is_some_and(|x| x == "toml") {
                    copy(&p, &p.file_name().unwrap().to_string_lossy());
                }
            }
        }
        "manifest" => {
            let sha = "0123456789abcdef".repeat(4);
            let m = format!(
                r#"{{"schema":1,"recipe":"torchcodec","version":"0.9.1","recipe_hash":"{sha}","fingerprint":"f",
"source_url":"https://github.com/meta-pytorch/torchcodec","source_commit":"abc","torch_version":"2.9.1",
"torch_git":"g","flavor":"rocm","ffmpeg_major":7,"python":"/v/bin/python","defines":{{"A":"1"}},
"runpath":["$ORIGIN"],"files":[{{"path":"torchcodec/libtorchcodec_core7.so","sha256":"{sha}","size":10,
"built_sha256":"{sha}","mtime_ns":1}}],"parked":["torchcodec/libtorchcodec_core4.so"],"installed_at":0,
"options":{{"release":"0.9.1","defines":[["A","1"]],"arch":["gfx1010"]}},"sdk":{{"torch_hip":"6.4",
"toolkit":"/opt/rocm","toolkit_version":"6.4.0","backend":"rocm","gpu_archs":["gfx1010"]}},
"record":"torchcodec-0.9.1.dist-info/RECORD","dropped":[],"python_part":{{"version":"0.9.1",
"files":["torchcodec/__init__.py"]}},"extra_files":["rocbuild_preload.pth"]}}"#
            );
            std::fs::write(dir.join("manifest.json"), m).map_err(|e| e.to_string())?;
        }
        "state" => {
            // A journal's content naming every kind of path (plain, climbing out, through a
            // link to the canary), and a manifest: the fuzzer mutates them into the corners.
            let j = r#"{"txn":"00ff","recipe":"pkg","created_state_dir":false,"ops":[{"Mkdir":{"path":"pkg/sub"}},{"Backup":{"path":"pkg/a.so","backup":".rocbuild/txn/backup/pkg/a.so"}},{"Place":{"staged":".rocbuild/txn/stage/a.so","path":"linkdir/precious"}}],"phase":"commit","keep":[["pkg/a.so",".rocbuild/backup/pkg/a.so"]],"manifest":[".rocbuild/txn/manifest.json",".rocbuild/pkg.json"],"remove":["linkdir/dir/file","../outside/precious"],"put_back":[[".rocbuild/backup/pkg/b","linkfile"]],"drop":["linkdir/dir","pkg"],"baseline":[".rocbuild/txn/baseline",".rocbuild/backup/pkg"]}"#;
            std::fs::write(dir.join("journal.json"), j).map_err(|e| e.to_string())?;
            let m = r#"{"schema":1,"recipe":"pkg","version":"1","recipe_hash":"h","fingerprint":"f","source_url":null,"source_commit":null,"torch_version":"2.9.1","torch_git":null,"flavor":"cpu","ffmpeg_major":7,"python":"/v/bin/python","defines":{},"runpath":[],"files":[{"path":"linkdir/precious","sha256":"0000000000000000000000000000000000000000000000000000000000000000","size":1}],"parked":[],"installed_at":0,"extra_files":["linkfile","pkg/a.so"],"ownership":{"distribution":"pkg","roots":["pkg","linkdir"],"held":{}}}"#;
            std::fs::write(dir.join("manifest.json"), m).map_err(|e| e.to_string())?;
        }
        "binary" => {
            for f in ["/bin/true", "/usr/lib/x86_64-linux-gnu/libz.so.1"] {
                let p = Path::new(f);
                if p.exists() {
                    copy(p, &f.replace('/', "_"));
                }
            }
        }
        "ld_cache" => copy(Path::new("/etc/ld.so.cache"), "ld.so.cache"),
        _ => {}
    }
    Ok(())
}

/// `stat::NAME: VALUE` from libFuzzer's `-print_final_stats=1` output.
fn stat(log: &str, name: &str) -> Option<u64> {
    log.lines().find_map(|l| {
        l.strip_prefix(&format!("stat::{name}:"))
            .and_then(|v| v.trim().parse().ok())
    })
}

pub fn fuzz(args: &[String]) -> Result<()> {
    let seconds: u64 = match args.first() {
        Some(s) => s
            .parse()
            .map_err(|_| format!("SECONDS must be a whole number, not `{s}`"))?,
        None => 60,
    };
    let ws = workspace_root();
    let bin_dir = build(&ws)?;
    let mut figures = Vec::new();
    for t in TARGETS {
        figures.push(run_target(&ws, &bin_dir, t, seconds)?);
    }
    let section = markdown(&figures);
    crate::bench::replace_section(&ws.join("BENCHMARKS.md"), FUZZ_SECTION, &section)?;
    println!("\n{section}\nxtask: fuzz: wrote the figures into BENCHMARKS.md");
    crashed(&figures)
}

/// The fuzz crate built and each target run for [`SMOKE_SECONDS`], as part of a whole
/// `cargo xtask test`: the crate is no workspace member, so nothing else would notice when it
/// stops compiling, and a target that crashes at once on its seeds fails the run.
/// BENCHMARKS.md is not touched (`cargo xtask fuzz` writes the figures of a real run there).
///
/// The build is its own (sanitizer coverage on every crate: nothing is shared with the tests'
/// build). rocbuild-native is built without its `codesign` feature (the fuzz targets read and
/// never sign), which leaves out apple-codesign's ~270 crates of TLS, HTTP and CMS: about 190
/// crates, 3 min 12 s and 6.1 CPU-minutes from cold on two cores at optimisation level 1
/// (measured 2026-11-29; with apple-codesign the build took about 25 CPU-minutes of the
/// whole run). It starts in the background ([`SmokeBuild::start`]) when rocbuild.exe is built,
/// beside the Windows phases under Wine, which leave more than a core idle (in the set-up,
/// beside the host's build and rocbuild's wheel, it delayed the host's tests by about 3 min),
/// and is waited for after them. It is `cargo xtask fuzz`'s release build, shared with it:
/// the dev profile runs 20 to 30 times fewer inputs in the 10 seconds (the recipe target: 136
/// a second against 4100).
pub struct SmokeBuild {
    child: std::process::Child,
    started: Instant,
    log: PathBuf,
    bin_dir: PathBuf,
}

/// Seconds each target runs in `cargo xtask test`.
pub const SMOKE_SECONDS: u64 = 10;

impl SmokeBuild {
    /// Start building the targets; its output goes to a log, shown if it fails.
    pub fn start() -> Result<SmokeBuild> {
        let ws = workspace_root();
        let target_dir = ws.join("fuzz/target");
        std::fs::create_dir_all(&target_dir)
            .map_err(|e| format!("cannot create {}: {e}", target_dir.display()))?;
        let log = target_dir.join("smoke-build.log");
        let out = std::fs::File::create(&log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let (mut cmd, bin_dir) = build_command(&ws, &target_dir)?;
        // A 10-second smoke run proves the targets build and run; optimisation level 1 takes
        // a fraction of level 3's compile time on CI's two cores (`cargo xtask fuzz N`, the
        // long runs, keep the release profile's level).
        cmd.env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "1");
        println!(
            "xtask: fuzz: building the targets in the background (log: {})",
            log.display()
        );
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start the fuzz build: {e}"))?;
        Ok(SmokeBuild {
            child,
            started: Instant::now(),
            log,
            bin_dir,
        })
    }

    /// Wait for the build (a phase: its own wall time, and how long it was waited for), then
    /// run each target [`SMOKE_SECONDS`] (another phase).
    pub fn finish(mut self) -> Result<()> {
        let waited = Instant::now();
        let status = self.child.wait().map_err(|e| e.to_string());
        let name = "fuzz: build the targets (in the background)";
        let outcome = |ok: bool| {
            format!(
                "{} (waited {} for it)",
                if ok { "ok" } else { "FAILED" },
                crate::util::secs(waited.elapsed())
            )
        };
        match status {
            Ok(s) if s.success() => {
                crate::report::record(name, self.started.elapsed(), &outcome(true));
            }
            other => {
                crate::report::record(name, self.started.elapsed(), &outcome(false));
                let text = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                eprintln!(
                    "xtask: fuzz: the build failed ({}); the end of {}:\n{}",
                    other.map_or_else(|e| e, |s| s.to_string()),
                    self.log.display(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
                return Err("the fuzz targets did not build".into());
            }
        }
        let ws = workspace_root();
        crate::report::phase(
            &format!("fuzz: {} targets x {SMOKE_SECONDS} s", TARGETS.len()),
            || {
                let mut figures = Vec::new();
                for t in TARGETS {
                    figures.push(run_target(&ws, &self.bin_dir, t, SMOKE_SECONDS)?);
                }
                crashed(&figures)
            },
        )
    }
}

/// A set-up that fails before the build is waited for stops it, rather than leave it running.
impl Drop for SmokeBuild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `cargo xtask fuzz --smoke`: the fuzz part of a whole test run, alone.
pub fn smoke() -> Result<()> {
    SmokeBuild::start()?.finish()
}

fn crashed(figures: &[Figures]) -> Result<()> {
    let crashed: Vec<&str> = figures
        .iter()
        .filter(|f| f.crash.is_some())
        .map(|f| f.target.as_str())
        .collect();
    if crashed.is_empty() {
        Ok(())
    } else {
        Err(format!("crashes found by: {}", crashed.join(", ")))
    }
}

/// Build every target with sanitizer coverage (release); the folder holding the binaries.
fn build(ws: &Path) -> Result<PathBuf> {
    let (mut cmd, bin_dir) = build_command(ws, &ws.join("fuzz/target"))?;
    println!("xtask: fuzz: building the targets with sanitizer coverage (stable rustc)");
    run_inherit(&mut cmd)?;
    Ok(bin_dir)
}

/// The cargo command that builds every target with sanitizer coverage into `target_dir`
/// (release), and the folder the binaries land in.
fn build_command(ws: &Path, target_dir: &Path) -> Result<(Command, PathBuf)> {
    let fuzz_dir = ws.join("fuzz");
    let host = host_triple()?;
    // The fuzz crate is its own workspace with a git-ignored lock file: started from the
    // workspace's, it builds the same dependency versions the tests ran with.
    let lock = fuzz_dir.join("Cargo.lock");
    if !lock.exists() {
        std::fs::copy(ws.join("Cargo.lock"), &lock)
            .map_err(|e| format!("cannot copy Cargo.lock to {}: {e}", lock.display()))?;
    }
    let mut cmd = Command::new(cargo());
    // --target keeps RUSTFLAGS off build scripts and proc macros (they must not be
    // instrumented: nothing links libFuzzer's coverage callbacks into them).
    cmd.current_dir(&fuzz_dir)
        .args(["build", "--release", "--bins", "--target", &host])
        .env("RUSTFLAGS", RUSTFLAGS.join(" "))
        .env("CARGO_TARGET_DIR", target_dir);
    Ok((cmd, target_dir.join(&host).join("release")))
}

/// One target run for `seconds` from its corpus and seeds.
fn run_target(ws: &Path, bin_dir: &Path, t: &str, seconds: u64) -> Result<Figures> {
    let fuzz_dir = ws.join("fuzz");
    let corpus = fuzz_dir.join("corpus").join(t);
    let seeds = fuzz_dir.join("target/seeds").join(t);
    seed(ws, t, &seeds)?;
    std::fs::create_dir_all(&corpus).map_err(|e| e.to_string())?;
    let artifacts = fuzz_dir.join("artifacts").join(t);
    std::fs::create_dir_all(&artifacts).map_err(|e| e.to_string())?;
    println!("xtask: fuzz: {t} for {seconds} s");
    let started = Instant::now();
    let out = Command::new(bin_dir.join(t))
        .arg(&corpus)
        .arg(&seeds)
        .arg(format!("-max_total_time={seconds}"))
        .arg("-print_final_stats=1")
        .arg("-timeout=10")
        .arg("-rss_limit_mb=2048")
        .arg("-max_len=1048576")
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run the {t} fuzzer: {e}"))?;
    let log = String::from_utf8_lossy(&out.stderr);
    let execs = stat(&log, "number_of_executed_units").unwrap_or(0);
    let crash = if out.status.success() {
        None
    } else {
        let found = log.lines().find_map(|l| {
            l.split("Test unit written to ")
                .nth(1)
                .map(|p| PathBuf::from(p.trim()))
        });
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        eprintln!(
            "xtask: fuzz: {t} FAILED ({}):\n{}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
        Some(found.unwrap_or_else(|| artifacts.clone()))
    };
    let corpus_n = std::fs::read_dir(&corpus).map(|d| d.count()).unwrap_or(0);
    let f = Figures {
        target: t.to_string(),
        seconds: started.elapsed().as_secs(),
        execs,
        execs_per_sec: stat(&log, "average_exec_per_sec").unwrap_or(0),
        corpus: corpus_n,
        crash,
    };
    println!(
        "xtask: fuzz: {t}: {} runs in {} s ({} /s), corpus {}, {}",
        f.execs,
        f.seconds,
        f.execs_per_sec,
        f.corpus,
        f.crash.as_ref().map_or("no crash".to_string(), |c| format!(
            "CRASH: {}",
            c.display()
        ))
    );
    Ok(f)
}

/// The marker of the fuzzing section in BENCHMARKS.md (`cargo xtask bench` keeps it).
pub const FUZZ_SECTION: &str = "fuzzing";

fn markdown(figures: &[Figures]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Fuzzing\n\nWritten by `cargo xtask fuzz` (xtask/src/fuzz.rs) on {} ({}, {}): each \
         libFuzzer target of fuzz/ built on stable rustc with sanitizer coverage (no \
         AddressSanitizer: that needs nightly), debug assertions and overflow checks, started \
         from the corpus in fuzz/corpus plus seeds (the shipped recipes, a manifest, this \
         machine's ELF files and ld.so.cache).\n",
        first_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        first_line("rustc", &["--version"]),
        first_line("uname", &["-m"]),
    );
    s.push_str("| target | reads | seconds | runs | runs/s | corpus files | result |\n|---|---|---|---|---|---|---|\n");
    for f in figures {
        let what = match f.target.as_str() {
            "binary" => "ELF / PE / Mach-O reader, ABI check, demangler",
            "offload" => "offload bundles (plain and CCOB)",
            "ld_cache" => "ld.so.cache",
            "recipe" => "recipe parser + validator, overlays, templates",
            "manifest" => "manifest reader (paths stay inside site-packages)",
            _ => "",
        };
        let _ = writeln!(
            s,
            "| {} | {what} | {} | {} | {} | {} | {} |",
            f.target,
            f.seconds,
            f.execs,
            f.execs_per_sec,
            f.corpus,
            f.crash.as_ref().map_or("no crash".to_string(), |c| format!(
                "CRASH ({})",
                c.file_name().unwrap_or_default().to_string_lossy()
            ))
        );
    }
    s
}
