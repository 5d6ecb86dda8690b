//! Benchmark (c): `rocbuild doctor` against the shell script people write for the same check
//! (ldd for the closure, `nm -D` for the symbols, sort/comm for the comparison), over the venv
//! with the real PyPI torch that `cargo xtask setup` makes.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::util::{run_capture, Result};

pub const ITERATIONS: usize = 5;
pub const LOAD_ITERATIONS: usize = 7;
/// The whole doctor against a bare import of the package (issue 15, target 3).
pub const LOAD_TARGET: f64 = 1.05;
/// `doctor --no-load` on the real PyPI torch.
pub const NO_LOAD_TARGET_SECONDS: f64 = 0.3;
/// The bare import: what the load test does, and nothing else.
pub const BARE_IMPORT: &str = "import torch";
/// rocbuild's check must be at least this many times faster than the script.
pub const TARGET_SPEEDUP: f64 = 5.0;

/// B: the ABI and closure check of torch's libraries by hand.
pub const NM_SCRIPT: &str = r#"#!/bin/bash
# The ABI and closure check of torch's libraries, by hand: ldd for the closure, nm -D for the
# symbols, sort/comm for the comparison. Prints the missing libraries and the undefined
# symbols no library of the process defines.
set -euo pipefail
venv=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
roots=("$site"/torch/lib/*.so "$site"/torch/_C*.so)
py=$(readlink -f "$venv/bin/python")
for f in "${roots[@]}" "$py"; do ldd "$f"; done > "$work/ldd"
grep 'not found' "$work/ldd" | sort -u || true
deps=$(awk '$2 == "=>" && $3 ~ /^\// {print $3}' "$work/ldd" | sort -u)
for f in "${roots[@]}" $deps "$py"; do nm -D --defined-only "$f" | awk '{print $NF}'; done | sed 's/@.*//' | sort -u > "$work/defined"
for f in "${roots[@]}"; do nm -D --undefined-only "$f" | awk '$1 == "U" {print $2}'; done | sed 's/@.*//' | sort -u > "$work/undefined"
comm -23 "$work/undefined" "$work/defined"
"#;

pub struct DoctorBench {
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    pub with_load: Vec<f64>,
    /// `python -I -B -c "import torch"`, alternated with `with_load`.
    pub bare_import: Vec<f64>,
    pub a_says: String,
    pub b_lines: usize,
    pub libraries: usize,
}

fn timed(cmd: &mut Command) -> Result<(f64, String)> {
    let t = Instant::now();
    let out = run_capture(cmd)?;
    Ok((t.elapsed().as_secs_f64(), out))
}

pub fn run(exe: &Path, venv: &Path, tmp: &Path) -> Result<DoctorBench> {
    let script = tmp.join("abi-by-nm.sh");
    std::fs::write(&script, NM_SCRIPT)
        .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
    let doctor = |extra: &[&str]| {
        let mut c = Command::new(exe);
        c.arg("doctor")
            .arg("--venv")
            .arg(venv)
            .arg("torch")
            .args(extra);
        for k in [
            "VIRTUAL_ENV",
            "CONDA_PREFIX",
            "LD_LIBRARY_PATH",
            "PYTHONPATH",
            "PYTORCH_ROCM_ARCH",
        ] {
            c.env_remove(k);
        }
        c.env("NO_COLOR", "1");
        c
    };
    let nm = || {
        let mut c = Command::new("bash");
        c.arg(&script).arg(venv).env_remove("LD_LIBRARY_PATH");
        c
    };
    // Warm-up, outside the timing: both read the same files, so both get a warm page cache.
    let (_, a_out) = timed(&mut doctor(&["--no-load"]))?;
    let (_, b_out) = timed(&mut nm())?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..ITERATIONS {
        let (ta, _) = timed(&mut doctor(&["--no-load"]))?;
        let (tb, _) = timed(&mut nm())?;
        println!(
            "xtask: bench: doctor {}/{ITERATIONS}: rocbuild {ta:.3} s, nm -D script {tb:.3} s, speed-up {:.2}x",
            i + 1,
            tb / ta
        );
        a.push(ta);
        b.push(tb);
    }
    // The whole doctor against a bare `import torch` in the same venv, alternated (one
    // warm-up of each first).
    let bare = || {
        let mut c = Command::new(venv.join("bin/python"));
        c.args(["-I", "-B", "-c", BARE_IMPORT]);
        c
    };
    timed(&mut doctor(&[]))?;
    timed(&mut bare())?;
    let (mut with_load, mut bare_import) = (Vec::new(), Vec::new());
    for i in 0..LOAD_ITERATIONS {
        let (ta, _) = timed(&mut doctor(&[]))?;
        let (tb, _) = timed(&mut bare())?;
        println!(
            "xtask: bench: whole doctor {}/{LOAD_ITERATIONS}: {ta:.3} s, bare import {tb:.3} s, ratio {:.3}",
            i + 1,
            ta / tb
        );
        with_load.push(ta);
        bare_import.push(tb);
    }
    // "--    torch 2.15.0: load test skipped (14 native libraries)"
    let libraries = a_out
        .lines()
        .find(|l| l.contains(" native librar"))
        .and_then(|l| l.rsplit_once('('))
        .and_then(|(_, r)| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    Ok(DoctorBench {
        a,
        b,
        with_load,
        bare_import,
        a_says: a_out.lines().last().unwrap_or_default().to_string(),
        b_lines: b_out.lines().count(),
        libraries,
    })
}

/// The section of BENCHMARKS.md.
pub fn markdown(d: &DoctorBench, stats: impl Fn(&[f64]) -> (f64, f64, f64)) -> String {
    let speedups: Vec<f64> = d.a.iter().zip(&d.b).map(|(a, b)| b / a).collect();
    let load_ratios: Vec<f64> = d
        .with_load
        .iter()
        .zip(&d.bare_import)
        .map(|(a, b)| a / b)
        .collect();
    let (am, amin, amax) = stats(&d.a);
    let (bm, bmin, bmax) = stats(&d.b);
    let (sm, smin, smax) = stats(&speedups);
    let (lm, lmin, lmax) = stats(&d.with_load);
    let (im, imin, imax) = stats(&d.bare_import);
    let (rm, rmin, rmax) = stats(&load_ratios);
    let verdict = |ok: bool| if ok { "meets target" } else { "MISSES target" };
    let mut rows =
        String::from("| benchmark | n | median | min – max | target |\n|---|---|---|---|---|\n");
    let _ = writeln!(rows, "| (e) A: `rocbuild doctor --venv V torch` (load test and static checks) | {LOAD_ITERATIONS} | {lm:.3} s | {lmin:.3} – {lmax:.3} s | |");
    let _ = writeln!(rows, "| (e) B: `python -I -B -c \"{BARE_IMPORT}\"`, same venv | {LOAD_ITERATIONS} | {im:.3} s | {imin:.3} – {imax:.3} s | |");
    let _ = writeln!(rows, "| (e) ratio A/B (per pair) | {LOAD_ITERATIONS} | {rm:.3}× | {rmin:.3}× – {rmax:.3}× | ≤ {LOAD_TARGET}× ({}) |", verdict(rm <= LOAD_TARGET));
    let _ = writeln!(rows, "| (e″) A: `rocbuild doctor --venv V torch --no-load` | {ITERATIONS} | {am:.3} s | {amin:.3} – {amax:.3} s | ≤ {NO_LOAD_TARGET_SECONDS} s ({}) |", verdict(am <= NO_LOAD_TARGET_SECONDS));
    let _ = writeln!(rows, "| (e″) B: ldd + `nm -D` + sort/comm script | {ITERATIONS} | {bm:.3} s | {bmin:.3} – {bmax:.3} s | |");
    let _ = writeln!(rows, "| (e″) speed-up B/A (per pair) | {ITERATIONS} | {sm:.2}× | {smin:.2}× – {smax:.2}× | ≥ {TARGET_SPEEDUP}× ({}) |", verdict(sm >= TARGET_SPEEDUP));
    let list = |xs: &[f64], unit: &str| {
        xs.iter()
            .map(|x| format!("{x:.3}{unit}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "## doctor (issue 15, target 3)\n\n{rows}\n\
         Over a venv of links to every package of the real PyPI torch venv (`cache/venvs/torch-real`, made by \
         `cargo xtask setup`; the shared venv itself is never written). \
         **(e)** A is the whole `rocbuild doctor --venv V torch`: its load test (a fresh `python -I -B` that imports torch \
         and `ctypes.CDLL`s each of torch's {libs} native libraries) runs beside the static checks; B is a bare \
         `python -I -B -c \"{BARE_IMPORT}\"` in the same venv. One warm-up of each, then alternated, ratio per pair. \
         **(e″)** A is `rocbuild doctor --venv V torch --no-load` — reading torch's native libraries, \
         resolving their dependency closure with the loader's rules (RPATHs into `nvidia/*`, the ld.so cache), and checking every \
         undefined symbol of each against the exports of everything in the process (Python included); it says: \"{says}\". \
         B is the script people write for the same check (below): `ldd` over the same libraries for the closure, then \
         `nm -D --defined-only` over the closure and `nm -D --undefined-only` over the libraries, compared with sort/comm \
         ({blines} lines of output). One warm-up run of each first (same files, same page cache), then \
         A and B alternated, speed-up taken per pair.\n\n\
         Raw times, in run order: (e) A: {ll}; B: {li}; A/B: {lr}. (e″) A: {la}; B: {lb}; B/A: {ls}.\n\n\
         ```bash\n{script}```\n",
        libs = d.libraries,
        says = d.a_says,
        blines = d.b_lines,
        la = list(&d.a, " s"),
        lb = list(&d.b, " s"),
        ls = speedups.iter().map(|r| format!("{r:.2}×")).collect::<Vec<_>>().join(", "),
        ll = list(&d.with_load, " s"),
        li = list(&d.bare_import, " s"),
        lr = load_ratios.iter().map(|r| format!("{r:.3}×")).collect::<Vec<_>>().join(", "),
        script = NM_SCRIPT,
    )
}
