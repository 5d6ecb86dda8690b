//! Issue 15, target 1: what rocbuild builds against what PyPI ships, same machine, same inputs.
//!
//! - (g) CTranslate2 4.8.1, CPU: `translate_batch` throughput (tokens/s) of rocbuild's build
//!   against PyPI's wheel on a random-weight 6+6-layer Transformer (d_model 512), int8 and
//!   float32, beam 1 and 4, 1 and 2 threads. rocbuild's build is what `rocbuild ctranslate2
//!   --backend cpu` makes in a venv holding PyPI's oneDNN (onednn-devel-cpu-gomp), which the
//!   recipe then uses ([with.dnnl]).
//! - (h) TorchCodec 0.16.0: frames/s decoding an H.264 clip and samples/s decoding MP3 with
//!   rocbuild's build against the real PyPI torch, against PyPI's wheel on the same torch and
//!   the same system FFmpeg.
//!
//! Outputs are compared before any timing (tokens; decoded tensors with `torch.equal`). Then
//! one worker process per side (A rocbuild, B the wheel) loads its library once and the two
//! are called alternately, one timed run each per round (A B, then B A), so that both meet the
//! same moments of this shared VM; the ratio is taken per round, as throughput A/B, and given
//! as its median with a distribution-free 95% confidence interval (the sign test's order
//! statistics). A single call moves by ±10% here from one second to the next, whichever
//! build it is, so a median without its interval would say less than it seems to. The rounds
//! are split into sessions of fresh workers with the start order swapped in turn (the worker
//! started second comes out ahead of an identical one, by 1–5% per session here, pinned or
//! not), single-threaded (g) runs pin both sides to one CPU, and (g)'s control rows time the
//! wheel against itself.
//!
//! The venvs, the model and the media are kept under `cache/bench/` (git-ignored): the first
//! run builds (real sources: network, or `ROCBUILD_MIRROR`), later runs find rocbuild's
//! builds up to date.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::bench_readers::stats;
use crate::util::{run_capture, Result};

pub const CT2_SECTION: &str = "artifacts-ctranslate2";
pub const TC_SECTION: &str = "artifacts-torchcodec";
const CT2_VERSION: &str = "4.8.1";
const TC_VERSION: &str = "0.16.0";
/// PyPI's oneDNN closest to upstream's wheel (3.1.1): 2023.1.0 is oneDNN 3.1, GNU OpenMP.
const ONEDNN: &str = "onednn-devel-cpu-gomp==2023.1.0";
/// Upstream's wheel links oneAPI MKL 2025.3 statically: the same from PyPI.
const MKL: &[&str] = &["mkl-static==2025.3.0", "mkl-include==2025.3.0"];
/// Rounds per configuration (one timed call of each side per round), after 2 warm-up rounds.
const CT2_ROUNDS: usize = 32;
const TC_ROUNDS: usize = 40;
/// Sessions of fresh workers the rounds are spread over. (g) draws 8 pairs of processes: with
/// two, the wheel against itself moved by 2% from the first session to the second, as much
/// as the difference sought, so what a process draws once for its life has to be sampled
/// too. (h) keeps its two: its differences are far larger than that.
const CT2_SESSIONS: usize = 8;
const TC_SESSIONS: usize = 2;
const CT2_TARGET: f64 = 1.0;
const TC_TARGET: f64 = 0.98;

const CT2_MODEL: &str = include_str!("bench_py/ct2_model.py");
const CT2_TRANSLATE: &str = include_str!("bench_py/ct2_translate.py");
const TC_MEDIA: &str = include_str!("bench_py/tc_media.py");
const TC_DECODE: &str = include_str!("bench_py/tc_decode.py");

fn py(venv: &Path) -> PathBuf {
    venv.join("bin/python")
}

fn script(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    let p = dir.join(name);
    std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    Ok(p)
}

/// A venv at `dir` with `packages` pip-installed (made once; `marker` says it is complete).
fn venv_with(dir: &Path, packages: &[&str], links_to: Option<&Path>) -> Result<()> {
    let marker = dir.join(".bench-ready");
    if marker.exists() {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(dir);
    match links_to {
        Some(real) => crate::bench_status::links_venv(&crate::bench_status::site_of(real)?, dir)?,
        None => {
            run_capture(Command::new("python3").args(["-m", "venv"]).arg(dir))?;
        }
    }
    if !packages.is_empty() {
        println!(
            "xtask: bench: pip install {} into {}",
            packages.join(" "),
            dir.display()
        );
        let mut c = Command::new(py(dir));
        c.args(["-m", "pip", "install", "-q", "--disable-pip-version-check"]);
        if links_to.is_some() {
            c.arg("--no-deps");
        }
        run_capture(c.args(packages))?;
    }
    std::fs::write(&marker, "").map_err(|e| e.to_string())
}

/// `rocbuild RECIPE` into `venv` (a no-op when it is already built with these inputs).
fn rocbuild(exe: &Path, cache: &Path, venv: &Path, args: &[&str]) -> Result<()> {
    let t = Instant::now();
    let mut c = Command::new(exe);
    c.args(args)
        .arg("--venv")
        .arg(venv)
        .arg("--cache")
        .arg(cache)
        .args(["--compiler-cache", "sccache", "-q"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    for k in [
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "ROCBUILD_RECIPES",
        "LD_LIBRARY_PATH",
        "PYTHONPATH",
    ] {
        c.env_remove(k);
    }
    let out = c
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(format!(
            "rocbuild {} failed (the real source needs the network or ROCBUILD_MIRROR):\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    println!(
        "xtask: bench: rocbuild {} ({:.0} s): {}",
        args.join(" "),
        t.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("")
    );
    Ok(())
}

fn json_of(cmd: &mut Command) -> Result<serde_json::Value> {
    let out = run_capture(cmd.env_remove("LD_LIBRARY_PATH").env_remove("PYTHONPATH"))?;
    let last = out.lines().last().unwrap_or("");
    serde_json::from_str(last).map_err(|e| format!("not the bench's JSON ({e}): {out}"))
}

/// How two translations of the batch differ: hypotheses identical, and where the others part.
fn differ(a: &serde_json::Value, b: &serde_json::Value) -> String {
    let (Some(ha), Some(hb)) = (a["hyps"].as_array(), b["hyps"].as_array()) else {
        return "DIFFER".into();
    };
    let mut same = 0;
    let mut parts = Vec::new();
    for (x, y) in ha.iter().zip(hb) {
        let (Some(x), Some(y)) = (x.as_array(), y.as_array()) else {
            continue;
        };
        match x.iter().zip(y).position(|(p, q)| p != q) {
            None if x.len() == y.len() => same += 1,
            None => parts.push(x.len().min(y.len()).to_string()),
            Some(i) => parts.push(i.to_string()),
        }
    }
    format!(
        "DIFFER: {same} of {} hypotheses identical; the others part at token {}",
        ha.len(),
        parts.join(", ")
    )
}

fn list(xs: &[f64], f: impl Fn(f64) -> String) -> String {
    xs.iter().map(|x| f(*x)).collect::<Vec<_>>().join(", ")
}

/// One side's worker: a Python process that has loaded the library, printed its outputs as
/// one JSON line and now times one run per line it reads (the `serve` mode of the scripts).
struct Worker {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Worker {
    /// Starts `cmd` and reads its outputs line.
    fn start(cmd: &mut Command) -> Result<(Worker, serde_json::Value)> {
        let mut child = cmd
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("PYTHONPATH")
            // numpy's OpenBLAS threads are not the libraries compared; idle, they only add noise.
            .env("OPENBLAS_NUM_THREADS", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let mut w = Worker {
            child,
            stdin,
            out: std::io::BufReader::new(stdout.ok_or("no stdout")?),
        };
        let first = w.line()?;
        let v = serde_json::from_str(&first)
            .map_err(|e| format!("not the bench's JSON ({e}): {first}"))?;
        Ok((w, v))
    }

    fn line(&mut self) -> Result<String> {
        use std::io::BufRead as _;
        let mut l = String::new();
        match self.out.read_line(&mut l) {
            Ok(n) if n > 0 => Ok(l.trim().to_string()),
            Ok(_) => Err(format!(
                "the bench worker stopped (exit {:?}); its error is above",
                self.child.wait().ok().and_then(|s| s.code())
            )),
            Err(e) => Err(format!("cannot read the bench worker: {e}")),
        }
    }

    /// One timed run, in seconds.
    fn once(&mut self) -> Result<f64> {
        use std::io::Write as _;
        let stdin = self.stdin.as_mut().ok_or("the worker's stdin is closed")?;
        stdin
            .write_all(b"run\n")
            .and_then(|_| stdin.flush())
            .map_err(|e| format!("cannot write to the bench worker: {e}"))?;
        let l = self.line()?;
        l.parse()
            .map_err(|e| format!("not a time from the bench worker ({e}): {l}"))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        drop(self.stdin.take()); // EOF: the worker's loop ends
        let _ = self.child.wait();
    }
}

/// A (rocbuild) and B (the wheel) timed alternately, seconds each; the ratio per round is
/// throughput A/B (B's time over A's).
struct Paired {
    a: Vec<f64>,
    b: Vec<f64>,
    ratio: Vec<f64>,
    /// The median ratio of each session, in run order.
    sessions: Vec<f64>,
}

type Start<'a> = &'a dyn Fn() -> Result<(Worker, serde_json::Value)>;

/// `rounds` rounds of one timed call to each side, A first in even rounds and B first in odd
/// ones, spread evenly over `sessions` sessions of fresh workers: A's worker is started first
/// in even sessions and B's in odd ones, so neither side keeps the place (memory, CPU) of the
/// process started first, and what a process draws once for its whole life (where its pages
/// land) is drawn anew in each session. Each session begins with two untimed rounds.
fn interleaved(
    label: &str,
    sessions: usize,
    rounds: usize,
    start_a: Start,
    start_b: Start,
    rate: impl Fn(f64) -> String,
) -> Result<Paired> {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    let mut medians = Vec::new();
    for session in 0..sessions {
        let (mut a, mut b) = if session % 2 == 0 {
            let a = start_a()?.0;
            (a, start_b()?.0)
        } else {
            let b = start_b()?.0;
            (start_a()?.0, b)
        };
        for _ in 0..2 {
            a.once()?;
            b.once()?;
        }
        let (begin, end) = (ta.len(), rounds * (session + 1) / sessions);
        for i in begin..end {
            let (x, y) = if i % 2 == 0 {
                let x = a.once()?;
                (x, b.once()?)
            } else {
                let y = b.once()?;
                (a.once()?, y)
            };
            ta.push(x);
            tb.push(y);
            if (i + 1) % 8 == 0 || i + 1 == rounds {
                println!(
                    "xtask: bench: {label} {}/{rounds}: A {}, B {} (median so far)",
                    i + 1,
                    rate(stats(&ta).median),
                    rate(stats(&tb).median)
                );
            }
        }
        let r: Vec<f64> = (begin..end).map(|i| tb[i] / ta[i]).collect();
        if !r.is_empty() {
            medians.push(stats(&r).median);
        }
    }
    let ratio = ta.iter().zip(&tb).map(|(x, y)| y / x).collect();
    Ok(Paired {
        a: ta,
        b: tb,
        ratio,
        sessions: medians,
    })
}

/// `cmd` run on CPU `cpu` only (`taskset -c`), with its arguments, environment and directory.
fn pinned(cmd: &Command, cpu: usize) -> Command {
    let mut c = Command::new("taskset");
    c.arg("-c")
        .arg(cpu.to_string())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        c.current_dir(d);
    }
    c
}

/// The CPU single-threaded runs of both sides are pinned to (the last one), so that neither
/// side gets a quieter CPU by chance.
fn quiet_cpu() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get() - 1)
        .unwrap_or(0)
}

/// The distribution-free 95% confidence interval of the median of `xs`: the order statistics
/// x(k) and x(n+1-k) with k the largest such that P(Binomial(n, 1/2) < k) ≤ 2.5%. None for
/// fewer than 6 values, where no such k exists.
fn median_ci(xs: &[f64]) -> Option<(f64, f64)> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    // P(X = j) for X ~ Binomial(n, 1/2), summed from j = 0 while it stays within 2.5%.
    let (mut p, mut cdf, mut k) = (0.5f64.powi(n as i32), 0.0, 0);
    for j in 0..n {
        if cdf + p > 0.025 {
            break;
        }
        cdf += p;
        k = j + 1;
        p *= (n - j) as f64 / (j + 1) as f64;
    }
    (k >= 1).then(|| (v[k - 1], v[n - k]))
}

/// How a configuration's ratio stands against its target.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Verdict {
    /// Equal outputs, and the median ratio is at or above the target.
    Meets,
    /// Equal outputs; the median is below the target but its 95% interval reaches it.
    WithinNoise,
    /// Outputs differ, or the whole interval lies below the target.
    Misses,
}

fn verdict_of(same: bool, median: f64, ci: Option<(f64, f64)>, target: f64) -> Verdict {
    if !same {
        Verdict::Misses
    } else if median >= target {
        Verdict::Meets
    } else if ci.is_some_and(|(_, hi)| hi >= target) {
        Verdict::WithinNoise
    } else {
        Verdict::Misses
    }
}

impl Paired {
    /// Its row of the table and its raw times; how it stands against `target` (None: a
    /// control row, the same build on both sides, which shows the noise floor).
    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        table: &mut String,
        raw: &mut String,
        label: &str,
        outputs: &str,
        same: bool,
        target: Option<f64>,
        rate: impl Fn(f64) -> String,
    ) -> Verdict {
        let sr = stats(&self.ratio);
        let ci = median_ci(&self.ratio);
        let v = verdict_of(same, sr.median, ci, target.unwrap_or(1.0));
        let standing = match (target, v) {
            (None, _) => "control: what two identical builds give here".to_string(),
            (Some(t), Verdict::Meets) => format!("≥ {t}× (meets target)"),
            (Some(t), Verdict::WithinNoise) => format!("≥ {t}× (median below, 95% CI reaches it)"),
            (Some(t), Verdict::Misses) => format!("≥ {t}× (MISSES target)"),
        };
        let _ = writeln!(
            table,
            "| {label} | {outputs} | {} | {} | {:.3}× [{}] ({:.3}× – {:.3}×) | {standing} |",
            rate(stats(&self.a).median),
            rate(stats(&self.b).median),
            sr.median,
            ci.map(|(lo, hi)| format!("{lo:.3}, {hi:.3}"))
                .unwrap_or_else(|| "too few rounds".into()),
            sr.min,
            sr.max,
        );
        let _ = writeln!(
            raw,
            "- {label}: A (s) {}; B (s) {}; A/B {}; A/B per session (median) {}",
            list(&self.a, |x| format!("{x:.4}")),
            list(&self.b, |x| format!("{x:.4}")),
            list(&self.ratio, |x| format!("{x:.3}")),
            list(&self.sessions, |x| format!("{x:.3}"))
        );
        v
    }
}

/// The sentence under a table: how many configurations meet the target, and how the others
/// stand.
fn summary(vs: &[Verdict], what: &str) -> String {
    let count = |k| vs.iter().filter(|v| **v == k).count();
    let (meets, noise, misses) = (
        count(Verdict::Meets),
        count(Verdict::WithinNoise),
        count(Verdict::Misses),
    );
    if meets == vs.len() {
        format!("Every {what} meets the target with identical outputs")
    } else {
        format!(
            "{meets} of {} {what}s meet the target with identical outputs; {noise} have identical \
             outputs and a median below the target whose 95% interval reaches it (not shown \
             slower); {misses} miss it (outputs differ, or the whole interval lies below)",
            vs.len()
        )
    }
}

// ---------------------------------------------------------------------------------------
// (g) CTranslate2

/// What one comparison of CTranslate2 builds gave: the table, the raw times, whether every
/// configuration met the target with equal outputs, the outputs per forced ISA, and the GEMM
/// backends each side reported.
struct Ct2Compared {
    table: String,
    raw: String,
    summary: String,
    by_isa: String,
    a_backends: String,
    b_backends: String,
}

/// What CTranslate2 says it runs with (`CT2_VERBOSE=1`): its backends and CPU ISA.
fn ct2_backends(v: &dyn Fn() -> Command, model: &str) -> Result<String> {
    let o = v()
        .args([
            "-c",
            "import ctranslate2 as c; c.Translator(__import__('sys').argv[1], compute_type='int8')",
        ])
        .arg(model)
        .env("CT2_VERBOSE", "1")
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&o.stderr).into_owned();
    Ok(text
        .lines()
        .filter_map(|l| l.split("[info]").nth(1))
        .filter(|l| l.contains("backend") || l.contains("ISA"))
        .map(|l| l.trim().trim_start_matches("- ").to_string())
        .collect::<Vec<_>>()
        .join("; "))
}

/// Where outputs part: the same inputs with CTranslate2's kernels forced to each ISA this CPU
/// runs (CT2_FORCE_CPU_ISA); only the kernels of the ISAs that differ are compiled differently
/// (the generic ones are plain C++, AVX's have no FMA, AVX2's are built with -mfma, where the
/// compiler chooses which multiply-adds it fuses).
fn ct2_outputs_by_isa(
    a: &dyn Fn() -> Command,
    b: &dyn Fn() -> Command,
    script: &str,
    model: &str,
) -> Result<String> {
    let mut by_isa = String::new();
    for compute in ["int8", "float32"] {
        let mut cells = Vec::new();
        for isa in ["GENERIC", "AVX", "AVX2"] {
            let out = |v: &dyn Fn() -> Command| {
                json_of(
                    v().arg(script)
                        .arg(model)
                        .args([compute, "1", "1", "0"])
                        .env("CT2_FORCE_CPU_ISA", isa),
                )
            };
            let (oa, ob) = (out(a)?, out(b)?);
            cells.push(format!(
                "{isa}: {}",
                if oa["digest"] == ob["digest"] {
                    "identical".to_string()
                } else {
                    differ(&oa, &ob)
                }
            ));
        }
        by_isa.push_str(&format!(
            "- {compute} (beam 1, 1 thread): {}\n",
            cells.join("; ")
        ));
    }
    Ok(by_isa)
}

/// Outputs then alternated timing of every configuration; `a` and `b` start each side's
/// Python (directly, or inside a chroot), `script` and `model` are paths as that Python sees
/// them.
fn ct2_compare(
    tag: &str,
    a: &dyn Fn() -> Command,
    b: &dyn Fn() -> Command,
    script: &str,
    model: &str,
) -> Result<Ct2Compared> {
    let (a_backends, b_backends) = (ct2_backends(a, model)?, ct2_backends(b, model)?);
    let by_isa = ct2_outputs_by_isa(a, b, script, model)?;
    // One run of the script with these arguments (MODE "0": outputs only; "serve": a worker).
    let v_args = |v: &dyn Fn() -> Command, compute: &str, beam: &str, threads: &str, mode: &str| {
        let mut c = v();
        c.arg(script)
            .arg(model)
            .args([compute, beam, threads, mode]);
        c
    };
    // Alternated timing of two sides; single-threaded runs of both pinned to one CPU.
    let timed = |a: &dyn Fn() -> Command,
                 b: &dyn Fn() -> Command,
                 label: &str,
                 compute: &str,
                 beam: &str,
                 threads: &str,
                 tokens: f64| {
        let start = |v: &dyn Fn() -> Command| {
            let c = v_args(v, compute, beam, threads, "serve");
            Worker::start(&mut if threads == "1" {
                pinned(&c, quiet_cpu())
            } else {
                c
            })
        };
        interleaved(
            &format!("{tag} {label}"),
            CT2_SESSIONS,
            CT2_ROUNDS,
            &|| start(a),
            &|| start(b),
            |t| format!("{:.1} tok/s", tokens / t),
        )
    };
    let mut table = String::from(
        "| (g) configuration | outputs | A: rocbuild tok/s (median) | B: PyPI wheel tok/s (median) | A/B per round: median [95% CI] (min – max) | target |\n|---|---|---|---|---|---|\n",
    );
    let mut raw = String::new();
    let mut verdicts = Vec::new();
    for compute in ["int8", "float32"] {
        for beam in ["1", "4"] {
            for threads in ["1", "2"] {
                let label = format!("{compute}, beam {beam}, {threads} thread(s)");
                // Outputs first, before any timing.
                let (oa, ob) = (
                    json_of(&mut v_args(&a, compute, beam, threads, "0"))?,
                    json_of(&mut v_args(&b, compute, beam, threads, "0"))?,
                );
                let same = oa["digest"] == ob["digest"];
                let diff = oa["scores"]
                    .as_array()
                    .zip(ob["scores"].as_array())
                    .map(|(x, y)| {
                        x.iter()
                            .zip(y)
                            .filter_map(|(p, q)| Some((p.as_f64()? - q.as_f64()?).abs()))
                            .fold(0.0, f64::max)
                    })
                    .unwrap_or(f64::NAN);
                let tokens = oa["tokens"].as_f64().unwrap_or(f64::NAN);
                let p = timed(&a, &b, &label, compute, beam, threads, tokens)?;
                let outputs = if same {
                    format!(
                        "identical ({} tokens; scores within {diff:.1e})",
                        tokens as u64
                    )
                } else {
                    differ(&oa, &ob)
                };
                verdicts.push(p.write(
                    &mut table,
                    &mut raw,
                    &label,
                    &outputs,
                    same,
                    Some(CT2_TARGET),
                    |t| format!("{:.1}", tokens / t),
                ));
            }
        }
    }
    // The noise floor: the wheel against itself, by the same method. Ratios this far from 1.0
    // are what two identical builds give here.
    for (compute, threads) in [("int8", "1"), ("float32", "1")] {
        let label = format!("control: B against B, {compute}, beam 1, {threads} thread(s)");
        let tokens = json_of(&mut v_args(&b, compute, "1", threads, "0"))?["tokens"]
            .as_f64()
            .unwrap_or(f64::NAN);
        let p = timed(&b, &b, &label, compute, "1", threads, tokens)?;
        p.write(
            &mut table,
            &mut raw,
            &label,
            "the same build",
            true,
            None,
            |t| format!("{:.1}", tokens / t),
        );
    }
    Ok(Ct2Compared {
        table,
        raw,
        summary: summary(&verdicts, "configuration"),
        by_isa,
        a_backends,
        b_backends,
    })
}

pub fn ctranslate2_section(exe: &Path, ws: &Path) -> Result<String> {
    let root = ws.join("cache/bench");
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    let a = root.join("ct2-rocbuild");
    let b = root.join("ct2-wheel");
    let mut a_packages = vec!["numpy", "pyyaml", ONEDNN];
    a_packages.extend_from_slice(MKL);
    venv_with(&a, &a_packages, None)?;
    venv_with(
        &b,
        &[&format!("ctranslate2=={CT2_VERSION}"), "numpy", "pyyaml"],
        None,
    )?;
    rocbuild(
        exe,
        &root.join("rocbuild-cache"),
        &a,
        &[
            "ctranslate2",
            "--version",
            CT2_VERSION,
            "--backend",
            "cpu",
            "--no-binary",
        ],
    )?;
    let model = root.join("ct2-model");
    if !model.join("model.bin").exists() {
        let s = script(&root, "ct2_model.py", CT2_MODEL)?;
        run_capture(Command::new(py(&b)).arg(&s).arg(&model))?;
    }
    let s = script(&root, "ct2_translate.py", CT2_TRANSLATE)?;
    let (a_py, b_py) = (py(&a), py(&b));
    let Ct2Compared {
        table,
        raw,
        summary,
        by_isa,
        a_backends,
        b_backends,
    } = ct2_compare(
        "(g)",
        &|| Command::new(&a_py),
        &|| Command::new(&b_py),
        &s.display().to_string(),
        &model.display().to_string(),
    )?;
    let gcc14 = ct2_gcc14(exe, &model, &s)?;
    Ok(format!(
        "## Built artifacts: CTranslate2 {CT2_VERSION} CPU, rocbuild's build vs PyPI's wheel (issue 15, target 1)\n\n\
         {table}\n\
         {}.\n\n\
         **(g)** A: `rocbuild ctranslate2 --version {CT2_VERSION} --backend cpu --no-binary` in a venv holding \
         oneAPI MKL (`pip install {}`), which the recipe uses when found ([with.mkl]: \
         `WITH_MKL=ON`, linked statically with GNU OpenMP), and PyPI's shared oneDNN 3.1 \
         (`pip install {ONEDNN}`), which it does not use on Linux x86-64: there it builds \
         upstream's oneDNN 3.1.1 from source with upstream's options, once, into its cache, and \
         links it statically (the recipe's [dependency.dnnl], then [with.dnnl]: `WITH_DNNL=ON`); \
         besides Ruy, and upstream's `-msse4.1` (the recipe's [platform.\"linux-x86_64\"]) — \
         upstream's own CPU configuration. B: `pip install ctranslate2=={CT2_VERSION}` (upstream's wheel: oneDNN 3.1.1 and MKL \
         linked statically, GNU OpenMP). The model: a random-weight Transformer, 6+6 layers, \
         d_model 512, FFN 2048, 8 heads, 32k shared vocabulary (xtask/src/bench_py/ct2_model.py). The \
         input: 8 fixed random sentences of 12–29 tokens, decoded to 40 tokens each \
         (`translate_batch`, `max_decoding_length=40`), `inter_threads=1`, `intra_threads` as said. \
         Outputs compared first (the tokens of every hypothesis; the scores' largest difference \
         shown). Then one worker process per side, the model loaded once, called alternately: \
         {CT2_ROUNDS} rounds of one timed `translate_batch` each (A then B, then B then A), \
         spread over {CT2_SESSIONS} sessions of fresh workers (A's started first, then B's, in \
         turn), each after 2 untimed rounds; single-threaded configurations run both sides on the same CPU \
         (`taskset`). tok/s = tokens / time; the ratio is taken per round, its median given with \
         a distribution-free 95% confidence interval. The control rows time the wheel against \
         itself by the same method: how far from 1.0 two identical builds land on this VM.\n\n\
         GEMM backends on this CPU (CT2_VERBOSE): A: {a_backends}. B: {b_backends}.\n\n\
         Outputs with CTranslate2's own kernels forced to one ISA (`CT2_FORCE_CPU_ISA`; the \
         GEMMs stay oneDNN's):\n\n{by_isa}\n\
         Raw times (seconds per call) and ratios, in run order:\n\n{raw}\n{gcc14}",
        summary,
        MKL.join(" ")
    ))
}

/// `sh -c` of a command run in `root` (a chroot) in a mount namespace of its own: /proc, /dev
/// and `binds` (host path, path inside) are mounted there and vanish with it.
fn in_chroot(root: &Path, binds: &[(PathBuf, &str)]) -> Command {
    let mut script = String::from(
        "set -e; r=\"$1\"; shift; mount -t proc proc \"$r/proc\"; mount --rbind /dev \"$r/dev\"; ",
    );
    for (i, _) in binds.iter().enumerate() {
        let _ = write!(
            script,
            "mkdir -p \"$r${{BIND_TO_{i}}}\"; mount --bind \"$BIND_FROM_{i}\" \"$r${{BIND_TO_{i}}}\"; "
        );
    }
    script.push_str("exec chroot \"$r\" \"$@\"");
    let mut c = Command::new("unshare");
    c.args(["--mount", "--fork", "sh", "-c", &script, "sh"])
        .arg(root);
    for (i, (from, to)) in binds.iter().enumerate() {
        c.env(format!("BIND_FROM_{i}"), from)
            .env(format!("BIND_TO_{i}"), to);
    }
    c.env_remove("LD_LIBRARY_PATH")
        .env_remove("PYTHONPATH")
        .env_remove("VIRTUAL_ENV")
        .env_remove("PIP_FIND_LINKS")
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        );
    c
}

/// (g) again with the wheels' own compiler: rocbuild run inside a Debian 13 chroot (GCC 14.2),
/// its build and PyPI's wheel compared there. Not run (and said why) where the chroot cannot
/// be made: not root, no mmdebstrap, Debian's archive out of reach.
fn ct2_gcc14(exe: &Path, model: &Path, script_file: &Path) -> Result<String> {
    let title = "### The same, built by the wheels' compiler: GCC 14 (a Debian 13 chroot)\n\n";
    let root = match crate::chroots::ensure(&crate::chroots::GCC14, crate::setup::is_root())? {
        crate::chroots::Outcome::Ready(d) => d,
        crate::chroots::Outcome::Skipped(why) => return Ok(format!("{title}Not run: {why}.\n")),
    };
    let inside = "/root/rocbuild-bench";
    let bench = root.join(inside.trim_start_matches('/'));
    std::fs::create_dir_all(&bench).map_err(|e| e.to_string())?;
    let copy = |from: &Path, to: &Path| -> Result<()> {
        std::fs::copy(from, to)
            .map(|_| ())
            .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
    };
    // The host's resolver and CA bundle (which may hold a proxy's CA), for pip and git.
    for f in ["etc/resolv.conf", "etc/ssl/certs/ca-certificates.crt"] {
        let host = Path::new("/").join(f);
        if host.is_file() {
            copy(&host, &root.join(f))?;
        }
    }
    copy(exe, &root.join("usr/local/bin/rocbuild"))?;
    copy(script_file, &bench.join("ct2_translate.py"))?;
    let chroot_model = bench.join("ct2-model");
    std::fs::create_dir_all(&chroot_model).map_err(|e| e.to_string())?;
    for f in std::fs::read_dir(model).map_err(|e| e.to_string())? {
        let f = f.map_err(|e| e.to_string())?.path();
        copy(&f, &chroot_model.join(f.file_name().unwrap_or_default()))?;
    }
    let mirror = std::env::var_os("ROCBUILD_MIRROR").map(PathBuf::from);
    let binds: Vec<(PathBuf, &str)> = mirror.iter().map(|m| (m.clone(), "/mnt/mirror")).collect();
    let venv = |name: &str, packages: &[&str]| -> Result<()> {
        let dir = format!("{inside}/{name}");
        if bench.join(name).join(".bench-ready").exists() {
            return Ok(());
        }
        println!(
            "xtask: bench: pip install {} into {dir} (GCC 14 chroot)",
            packages.join(" ")
        );
        run_capture(in_chroot(&root, &[]).args(["sh", "-c", &format!(
            "rm -rf {dir} && python3 -m venv {dir} && {dir}/bin/python -m pip install -q --disable-pip-version-check {} && touch {dir}/.bench-ready",
            packages.join(" ")
        )]))?;
        Ok(())
    };
    let mut a_packages = vec!["numpy", "pyyaml", ONEDNN];
    a_packages.extend_from_slice(MKL);
    venv("a", &a_packages)?;
    let wheel = format!("ctranslate2=={CT2_VERSION}");
    venv("b", &[&wheel, "numpy", "pyyaml"])?;
    let t = Instant::now();
    let mut build = in_chroot(&root, &binds);
    build
        .args([
            "rocbuild",
            "ctranslate2",
            "--version",
            CT2_VERSION,
            "--backend",
            "cpu",
            "--no-binary",
        ])
        .args([
            "--venv",
            &format!("{inside}/a"),
            "--cache",
            &format!("{inside}/rocbuild-cache"),
            "-q",
        ])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    if mirror.is_some() {
        build.env("ROCBUILD_MIRROR", "/mnt/mirror");
    }
    run_capture(&mut build)
        .map_err(|e| format!("rocbuild in the GCC 14 chroot failed (the real source needs the network or ROCBUILD_MIRROR): {e}"))?;
    println!(
        "xtask: bench: rocbuild ctranslate2 in the GCC 14 chroot ({:.0} s)",
        t.elapsed().as_secs_f64()
    );
    let compiler = run_capture(in_chroot(&root, &[]).args(["c++", "--version"]))?
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let side = |name: &'static str| {
        let root = root.clone();
        move || {
            let mut c = in_chroot(&root, &[]);
            c.arg(format!("{inside}/{name}/bin/python"));
            c
        }
    };
    let (a, b) = (side("a"), side("b"));
    let r = ct2_compare(
        "(g, GCC 14)",
        &a,
        &b,
        &format!("{inside}/ct2_translate.py"),
        &format!("{inside}/ct2-model"),
    )?;
    Ok(format!(
        "{title}{}\n{}.\n\n\
         A: `rocbuild ctranslate2 --version {CT2_VERSION} --backend cpu --no-binary` run inside a Debian 13 \
         chroot (`{}`; mmdebstrap, cached with the test chroots), in a venv there with the same \
         PyPI packages (oneDNN built from source by the recipe there too, with GCC 14); B: the same wheel, in a venv of the chroot's Python. Same model, \
         inputs and timing as above. GEMM backends: A: {}. B: {}.\n\n\
         Outputs per forced ISA:\n\n{}\n\
         Raw times (seconds per call) and ratios, in run order:\n\n{}",
        r.table, r.summary, compiler, r.a_backends, r.b_backends, r.by_isa, r.raw
    ))
}

// ---------------------------------------------------------------------------------------
// (h) TorchCodec

pub fn torchcodec_section(exe: &Path, real: &Path, ws: &Path) -> Result<String> {
    let root = ws.join("cache/bench");
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    let a = root.join("tc-rocbuild");
    let b = root.join("tc-wheel");
    venv_with(&a, &[], Some(real))?;
    venv_with(&b, &[&format!("torchcodec=={TC_VERSION}")], Some(real))?;
    rocbuild(
        exe,
        &root.join("rocbuild-cache"),
        &a,
        &["torchcodec", "--version", TC_VERSION],
    )?;
    let media = root.join("tc-media");
    if !media.join("audio.mp3").exists() {
        std::fs::create_dir_all(&media).map_err(|e| e.to_string())?;
        let s = script(&root, "tc_media.py", TC_MEDIA)?;
        run_capture(Command::new(py(&b)).arg(&s).arg(&media))?;
    }
    let s = script(&root, "tc_decode.py", TC_DECODE)?;
    let mut table = String::from(
        "| (h) decode | outputs | A: rocbuild (median) | B: PyPI wheel (median) | A/B per round: median [95% CI] (min – max) | target |\n|---|---|---|---|---|---|\n",
    );
    let mut raw = String::new();
    let mut verdicts = Vec::new();
    for (kind, unit) in [("video", "frames/s"), ("audio", "samples/s")] {
        let saved = |v: &str| root.join(format!("tc-{kind}-{v}.pt"));
        let cmd = |v: &Path, mode: &str, save: &Path| {
            let mut c = Command::new(py(v));
            c.arg(&s).arg(&media).args([kind, mode]).arg(save);
            c
        };
        // Each side's decode is saved; the two are compared before any timing.
        let oa = json_of(&mut cmd(&a, "0", &saved("a")))?;
        json_of(&mut cmd(&b, "0", &saved("b")))?;
        let scratch = root.join(format!("tc-{kind}-timed.pt"));
        let eq = run_capture(
            Command::new(py(&a))
                .args([
                    "-c",
                    "import sys, torch; a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2]); print(a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b))",
                ])
                .arg(saved("a"))
                .arg(saved("b")),
        )?;
        let same = eq.trim().ends_with("True");
        let shape: Vec<u64> = oa["shape"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
            .unwrap_or_default();
        // frames (video: the first dimension) or samples per channel (audio: the last).
        let count = if kind == "video" {
            shape.first().copied().unwrap_or(0)
        } else {
            shape.last().copied().unwrap_or(0)
        } as f64;
        let p = interleaved(
            &format!("(h) {kind}"),
            TC_SESSIONS,
            TC_ROUNDS,
            &|| Worker::start(&mut cmd(&a, "serve", &scratch)),
            &|| Worker::start(&mut cmd(&b, "serve", &scratch)),
            |t| format!("{:.0} {unit}", count / t),
        )?;
        let outputs = format!(
            "{} {shape:?}",
            if same { "identical tensors" } else { "DIFFER" }
        );
        verdicts.push(p.write(
            &mut table,
            &mut raw,
            kind,
            &outputs,
            same,
            Some(TC_TARGET),
            |t| format!("{:.0} {unit}", count / t),
        ));
    }
    Ok(format!(
        "## Built artifacts: TorchCodec {TC_VERSION}, rocbuild's build vs PyPI's wheel (issue 15, target 1)\n\n\
         {table}\n\
         {}.\n\n\
         **(h)** A: `rocbuild torchcodec --version {TC_VERSION}` into a venv of links to the real PyPI torch \
         (cache/venvs/torch-real), built against this machine's FFmpeg. B: `pip install --no-deps \
         torchcodec=={TC_VERSION}` into another such venv; its `libtorchcodec_core<N>` for the same \
         system FFmpeg is loaded. The inputs, made once with B's encoders (xtask/src/bench_py/tc_media.py): \
         an H.264 clip (libx264, 240 frames of 640×360, a moving gradient with noise) and 60 s of \
         stereo MP3 at 48 kHz. Every frame is decoded (`VideoDecoder(…, seek_mode=\"exact\")\
         .get_frames_in_range(0, len)`), every audio sample (`AudioDecoder.get_all_samples()`). \
         The decoded tensors of A and B are compared with `torch.equal` first. Then one worker \
         process per side, called alternately: {TC_ROUNDS} rounds of one timed decode each (A \
         then B, then B then A), in two sessions of fresh workers (A's started first, then B's), \
         each after 2 untimed rounds; the ratio is taken per round, its median \
         given with a distribution-free 95% confidence interval.\n\n\
         Raw times (seconds per decode) and ratios, in run order:\n\n{raw}",
        summary(&verdicts, "decode")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_medians_interval_is_the_sign_tests_order_statistics() {
        // n = 32: P(Bin(32, 1/2) ≤ 9) = 1.0%, ≤ 10 = 2.5% and a hair over: k = 10, so the
        // 10th and the 23rd of the sorted values.
        let xs: Vec<f64> = (1..=32).rev().map(f64::from).collect();
        assert_eq!(median_ci(&xs), Some((10.0, 23.0)));
        // n = 40: P(≤ 13) = 1.9%, P(≤ 14) = 4.0%: k = 14.
        let xs: Vec<f64> = (1..=40).map(f64::from).collect();
        assert_eq!(median_ci(&xs), Some((14.0, 27.0)));
        // n = 6: P(0) = 1.6% alone is within 2.5%: the extremes.
        assert_eq!(median_ci(&[3.0, 1.0, 2.0, 6.0, 5.0, 4.0]), Some((1.0, 6.0)));
        // n = 5: even the extremes cover only 94%: no interval.
        assert_eq!(median_ci(&[1.0, 2.0, 3.0, 4.0, 5.0]), None);
        assert_eq!(median_ci(&[]), None);
    }

    #[test]
    fn a_median_below_the_target_is_within_noise_only_when_its_interval_reaches_it() {
        assert_eq!(
            verdict_of(true, 1.01, Some((0.97, 1.04)), 1.0),
            Verdict::Meets
        );
        assert_eq!(
            verdict_of(true, 0.99, Some((0.96, 1.02)), 1.0),
            Verdict::WithinNoise
        );
        assert_eq!(
            verdict_of(true, 0.95, Some((0.92, 0.99)), 1.0),
            Verdict::Misses
        );
        assert_eq!(verdict_of(true, 0.99, None, 1.0), Verdict::Misses);
        // Different outputs miss whatever the speed.
        assert_eq!(
            verdict_of(false, 1.2, Some((1.1, 1.3)), 1.0),
            Verdict::Misses
        );
        let s = summary(
            &[Verdict::Meets, Verdict::WithinNoise, Verdict::Misses],
            "configuration",
        );
        assert!(s.starts_with("1 of 3 configurations meet"), "{s}");
        assert!(
            s.contains("1 have identical") && s.contains("1 miss it"),
            "{s}"
        );
        assert_eq!(
            summary(&[Verdict::Meets; 2], "decode"),
            "Every decode meets the target with identical outputs"
        );
    }
}
