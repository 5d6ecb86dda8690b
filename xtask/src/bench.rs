//! `cargo xtask bench`: rocbuild's overhead over a bare CMake build of the same project, the
//! cost of a rerun that has nothing to do, and `doctor` against an `nm -D` script
//! (bench_doctor.rs). Writes BENCHMARKS.md.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rocbuild_testkit::{
    fixture_recipe, install_fake_torch, make_git_fixture, make_venv, make_wheel, DECODE_WAV,
};
use serde_json::Value;

use crate::util::{cargo, first_line, run_capture, run_inherit, workspace_root, Result};

const FULL_ITERATIONS: usize = 5;
const NOOP_ITERATIONS: usize = 10;
const FULL_TARGET: f64 = 1.03;
/// (a″): machine B's full build through the shared compiler cache, against A's cold one.
const CACHE_TARGET: f64 = 0.35;
const NOOP_TARGET: f64 = 0.3;

/// Variables that must not leak into rocbuild (or the bare build) from the caller.
pub const SCRUB: &[&str] = &[
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "ROCBUILD_RECIPES",
    "ROCBUILD_CACHE",
    "ROCBUILD_MIRROR",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
];

/// The fixture world: git repositories, a wheel of the Python part, a recipe.
struct World {
    root: PathBuf,
    exe: PathBuf,
    recipes: PathBuf,
    wheels: PathBuf,
}

impl World {
    /// A fresh venv with the fake torch 2.9.1.
    fn venv(&self, name: &str) -> PathBuf {
        let venv = self.root.join(name);
        let site = make_venv(&venv);
        install_fake_torch(&site, "2.9.1");
        venv
    }

    fn rocbuild(&self, venv: &Path, cache: &Path, extra: &[&str]) -> Command {
        let mut c = Command::new(&self.exe);
        c.arg("fakecodec")
            .arg("--recipes")
            .arg(&self.recipes)
            .arg("--venv")
            .arg(venv)
            .arg("--cache")
            .arg(cache)
            .arg("-q")
            .args(extra);
        for k in SCRUB {
            c.env_remove(k);
        }
        c.env("NO_COLOR", "1")
            .env("PIP_NO_INDEX", "1")
            .env("PIP_FIND_LINKS", &self.wheels)
            .stdin(Stdio::null());
        c
    }
}

/// One command of the plan (`{program, args, env, env_remove, cwd}`), with every occurrence of
/// `from` in its arguments, env values and cwd replaced by `to`.
pub fn plan_command(v: &Value, from: &str, to: &str) -> Result<Command> {
    let s = |x: &Value| {
        x.as_str()
            .map(|s| s.replace(from, to))
            .ok_or_else(|| format!("not a string in the plan: {x}"))
    };
    let mut c = Command::new(s(&v["program"])?);
    for a in v["args"].as_array().ok_or("plan command without args")? {
        c.arg(s(a)?);
    }
    for k in SCRUB {
        c.env_remove(k);
    }
    for k in v["env_remove"].as_array().into_iter().flatten() {
        c.env_remove(k.as_str().unwrap_or_default());
    }
    for (k, val) in v["env"].as_object().into_iter().flatten() {
        c.env(k, s(val)?);
    }
    if let Some(d) = v["cwd"].as_str() {
        c.current_dir(d.replace(from, to));
    }
    c.stdin(Stdio::null());
    Ok(c)
}

pub fn timed(cmd: &mut Command) -> Result<Duration> {
    let t = Instant::now();
    run_capture(cmd)?;
    Ok(t.elapsed())
}

struct Stats {
    median: f64,
    min: f64,
    max: f64,
}

fn stats(xs: &[f64]) -> Stats {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Stats {
        median,
        min: v[0],
        max: v[n - 1],
    }
}

fn list(xs: &[f64], unit: &str) -> String {
    xs.iter()
        .map(|x| format!("{x:.2}{unit}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The release `rocbuild` cargo builds: under `$CARGO_TARGET_DIR` when it is set.
fn release_exe(ws: &Path) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { ws.join(t) })
        .unwrap_or_else(|| ws.join("target"));
    target.join("release/rocbuild")
}

pub fn bench(args: &[String]) -> Result<()> {
    let only = crate::bench_readers::only(args)?;
    let ws = workspace_root();
    let started = Instant::now();
    println!("xtask: bench: cargo build --release -p rocbuild");
    run_inherit(Command::new(cargo()).current_dir(&ws).args([
        "build",
        "--release",
        "-p",
        "rocbuild",
    ]))?;
    let exe = release_exe(&ws);
    let real = std::env::var_os("ROCBUILD_TEST_TORCH_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| ws.join("cache/venvs/torch-real"));
    let readers: std::collections::BTreeSet<String> = crate::bench_readers::SECTIONS
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(only) = only {
        let tmp = tempfile::Builder::new()
            .prefix("rocbuild-bench-")
            .tempdir()
            .map_err(|e| format!("cannot make a temp dir: {e}"))?;
        crate::bench_readers::run_sections(
            &exe,
            &real,
            tmp.path(),
            &only,
            &ws.join("BENCHMARKS.md"),
        )?;
        println!(
            "xtask: bench: sections {:?} in {:.0} s",
            only,
            started.elapsed().as_secs_f64()
        );
        return Ok(());
    }

    let (tmp, w, git_url) = fixtures(exe)?;
    let root = w.root.clone();
    let r = reference_world(&w)?;
    let full = full_builds(&w, &r, &git_url)?;
    let noop = noop_reruns(&w, &r)?;
    let (status, real_full) = real_torch(&w, &real)?;
    let t = results(&full, &noop, real_full.as_ref(), status.as_ref());
    let breakdown = breakdown(full.parts.clone(), t.a_median, t.b_median);
    let table = &t.table;
    println!("\n{table}\n{breakdown}");
    println!(
        "ratio of the medians: {:.3}×; total bench time {:.0} s",
        t.ratio_of_medians,
        started.elapsed().as_secs_f64()
    );
    let md = benchmarks_md(&t, &breakdown, &full, &noop);
    let path = ws.join("BENCHMARKS.md");
    // The sections other runs own (fuzzing, the reader benchmarks): carried over.
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let mut md = md.trim_end().to_string();
    for s in sections(&old) {
        md.push_str("\n\n");
        md.push_str(s.trim_end());
    }
    md.push('\n');
    std::fs::write(&path, md).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("xtask: bench: wrote {}", path.display());
    crate::bench_readers::run_sections(&w.exe, &real, &root, &readers, &path)?;
    if std::env::var_os("XTASK_BENCH_KEEP").is_some() {
        println!(
            "xtask: bench: XTASK_BENCH_KEEP: keeping {}",
            tmp.keep().display()
        );
    }
    Ok(())
}

/// The fixture world in a temp dir (outside any timed region): the git repository, the wheel
/// of the Python part, the recipe. Returns the temp dir (kept alive by the caller), the world
/// and the repository's URL.
fn fixtures(exe: PathBuf) -> Result<(tempfile::TempDir, World, PathBuf)> {
    let tmp = tempfile::Builder::new()
        .prefix("rocbuild-bench-")
        .tempdir()
        .map_err(|e| format!("cannot make a temp dir: {e}"))?;
    let root = tmp.path().to_path_buf();
    println!("xtask: bench: fixtures in {}", root.display());
    make_git_fixture(&root.join("repos"));
    let wheels = root.join("wheels");
    make_wheel(&wheels, "fakecodec", "1.0.0");
    let recipes = root.join("recipes");
    std::fs::create_dir_all(&recipes).map_err(|e| e.to_string())?;
    let git_url = root.join("repos/fakecodec.git");
    std::fs::write(
        recipes.join("fakecodec.toml"),
        fixture_recipe(git_url.to_str().unwrap(), true, DECODE_WAV),
    )
    .map_err(|e| e.to_string())?;
    let w = World {
        root: root.clone(),
        exe,
        recipes,
        wheels,
    };

    Ok((tmp, w, git_url))
}

/// The reference world: its plan gives the bare commands, its first real run gives the
/// checkout and the lite TorchConfig.cmake they use, and it is what the no-op reruns hit.
struct Reference {
    venv: PathBuf,
    cache: PathBuf,
    plan: Value,
    build_dir: String,
}

fn reference_world(w: &World) -> Result<Reference> {
    let root = &w.root;
    println!(
        "xtask: bench: venvs with the fake torch ({} + 1)",
        FULL_ITERATIONS
    );
    let ref_venv = w.venv("venv-ref");
    let ref_cache = root.join("cache-ref");
    let plan: Value = {
        let out = run_capture(&mut w.rocbuild(&ref_venv, &ref_cache, &["--dry-run", "--json"]))?;
        serde_json::from_str(&out)
            .map_err(|e| format!("the --dry-run --json output is not JSON: {e}\n{out}"))?
    };
    let first = timed(&mut w.rocbuild(&ref_venv, &ref_cache, &[]))?;
    println!(
        "xtask: bench: warm-up run (reference world): {:.2} s",
        first.as_secs_f64()
    );
    let build_dir = plan["build_dir"]
        .as_str()
        .ok_or("the plan has no build_dir")?
        .to_string();
    let checkout = plan["source"]["Git"]["checkout"]
        .as_str()
        .map(PathBuf::from);
    match &checkout {
        Some(c) if c.join("CMakeLists.txt").is_file() => {}
        Some(c) => {
            return Err(format!(
                "rocbuild's checkout {} has no CMakeLists.txt after the run",
                c.display()
            ))
        }
        None => {
            return Err(format!(
                "the plan's source is not a git checkout: {}",
                plan["source"]
            ))
        }
    }
    if let Some(d) = plan["torch_cmake"]["dir"].as_str() {
        if !Path::new(d).exists() {
            return Err(format!(
                "the lite torch CMake package {d} does not exist after the run"
            ));
        }
    }
    Ok(Reference {
        venv: ref_venv,
        cache: ref_cache,
        plan,
        build_dir,
    })
}

/// (a)'s times: A and B per pair, and the other steps A does, each timed alone.
struct FullBuilds {
    a: Vec<f64>,
    b: Vec<f64>,
    parts: Vec<(&'static str, Vec<f64>)>,
}

/// (a) full build, alternated: A = rocbuild from nothing, B = bare cmake configure + build.
/// After each pair, outside both timings, the other steps A does are timed alone, with the
/// plan's commands where it has them: where A's extra time goes.
fn full_builds(w: &World, r: &Reference, git_url: &Path) -> Result<FullBuilds> {
    let (root, plan, build_dir) = (&w.root, &r.plan, &r.build_dir);
    let venvs: Vec<PathBuf> = (0..FULL_ITERATIONS)
        .map(|i| w.venv(&format!("venv-{i}")))
        .collect();

    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut parts: Vec<(&'static str, Vec<f64>)> = [
        "git clone --recurse-submodules",
        "cmake --install (staging prefix)",
        "pip install (python part)",
        "verify (python)",
    ]
    .into_iter()
    .map(|n| (n, Vec::new()))
    .collect();
    for (i, venv) in venvs.iter().enumerate() {
        let cache = root.join(format!("cache-{i}"));
        let ta = timed(&mut w.rocbuild(venv, &cache, &[]))?.as_secs_f64();
        let bare = root.join(format!("bare-{i}"));
        let mut configure = plan_command(&plan["configure"], build_dir, bare.to_str().unwrap())?;
        let mut build = plan_command(&plan["build"], build_dir, bare.to_str().unwrap())?;
        let t = Instant::now();
        run_capture(&mut configure)?;
        run_capture(&mut build)?;
        let tb = t.elapsed().as_secs_f64();
        println!("xtask: bench: full build {}/{FULL_ITERATIONS}: rocbuild {ta:.2} s, bare cmake {tb:.2} s, ratio {:.3}", i + 1, ta / tb);
        a.push(ta);
        b.push(tb);
        let clone = root.join(format!("clone-{i}"));
        let mut c = Command::new("git");
        c.args([
            "-c",
            "protocol.file.allow=always",
            "clone",
            "-q",
            "--recurse-submodules",
            "--branch",
            "v1.0.0",
        ])
        .arg(git_url)
        .arg(&clone);
        parts[0].1.push(timed(&mut c)?.as_secs_f64());
        parts[1].1.push(
            timed(&mut plan_command(
                &plan["install_prefix"],
                build_dir,
                bare.to_str().unwrap(),
            )?)?
            .as_secs_f64(),
        );
        if let Some(target) = plan["python_part"]["target"].as_str() {
            let mut pip = plan_command(
                &plan["python_part"]["install"],
                target,
                root.join(format!("pip-{i}")).to_str().unwrap(),
            )?;
            pip.env("PIP_NO_INDEX", "1")
                .env("PIP_FIND_LINKS", &w.wheels);
            parts[2].1.push(timed(&mut pip)?.as_secs_f64());
        }
        if plan["verify"].is_object() {
            parts[3].1.push(
                timed(&mut plan_command(&plan["verify"], build_dir, build_dir)?)?.as_secs_f64(),
            );
        }
        let _ = std::fs::remove_dir_all(&clone);
        let _ = std::fs::remove_dir_all(root.join(format!("pip-{i}")));
        // Keep the disk small: this iteration's trees are not needed any more.
        let _ = std::fs::remove_dir_all(&cache);
        let _ = std::fs::remove_dir_all(&bare);
    }

    Ok(FullBuilds { a, b, parts })
}

/// (b) no-op reruns of the reference world.
fn noop_reruns(w: &World, r: &Reference) -> Result<Vec<f64>> {
    let (ref_venv, ref_cache) = (&r.venv, &r.cache);
    let mut noop = Vec::new();
    let mut noop_out = String::new();
    for _ in 0..NOOP_ITERATIONS {
        let mut c = w.rocbuild(ref_venv, ref_cache, &[]);
        let t = Instant::now();
        let out = run_capture(&mut c)?;
        noop.push(t.elapsed().as_secs_f64());
        noop_out = out.trim().to_string();
    }
    println!("xtask: bench: no-op rerun says: {noop_out}");

    Ok(noop)
}

/// (c) status on a venv with the real PyPI torch, and (a′) the full build again, of a project
/// that compiles against the real torch's headers; skipped without that venv.
fn real_torch(
    w: &World,
    real: &Path,
) -> Result<(
    Option<crate::bench_status::StatusBench>,
    Option<crate::bench_status::RealFull>,
)> {
    let root = &w.root;
    let (status, real_full) = if real.join("bin/python").exists() {
        let (r, f) = crate::bench_status::bench(&w.exe, real, root)?;
        println!(
            "xtask: bench: status says: {} (torch {})",
            r.status_out, r.torch
        );
        (Some(r), Some(f))
    } else {
        println!(
            "xtask: bench: SKIPPED (a′) and (c): no venv with the real torch at {} (cargo xtask setup makes it)",
            real.display()
        );
        (None, None)
    };

    Ok((status, real_full))
}

/// The results table, and the raw lines of (a′) and (c).
struct Table {
    table: String,
    real_full_md: String,
    status_md: String,
    ratios: Vec<f64>,
    ratio_of_medians: f64,
    a_median: f64,
    b_median: f64,
}

fn results(
    full: &FullBuilds,
    noop: &[f64],
    real_full: Option<&crate::bench_status::RealFull>,
    status: Option<&crate::bench_status::StatusBench>,
) -> Table {
    let (a, b) = (&full.a, &full.b);
    let ratios: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    let (sa, sb, sr, sn) = (stats(a), stats(b), stats(&ratios), stats(noop));
    let ratio_of_medians = sa.median / sb.median;
    let verdict = |ok: bool| if ok { "meets target" } else { "MISSES target" };

    let mut table = String::new();
    table.push_str("| benchmark | n | median | min – max | target |\n|---|---|---|---|---|\n");
    let _ = writeln!(table, "| (a) A: rocbuild, fresh cache + fresh venv | {FULL_ITERATIONS} | {:.2} s | {:.2} – {:.2} s | |", sa.median, sa.min, sa.max);
    let _ = writeln!(
        table,
        "| (a) B: bare cmake configure + build | {FULL_ITERATIONS} | {:.2} s | {:.2} – {:.2} s | |",
        sb.median, sb.min, sb.max
    );
    let _ = writeln!(
        table,
        "| (a) ratio A/B (per pair) | {FULL_ITERATIONS} | {:.3}× | {:.3}× – {:.3}× | ≤ {FULL_TARGET}× ({}) |",
        sr.median,
        sr.min,
        sr.max,
        verdict(sr.median <= FULL_TARGET)
    );
    let real_full_md = match real_full {
        Some(f) => {
            use crate::bench_status::FULL_ITERATIONS as N;
            let (fa, fb) = (stats(&f.rocbuild), stats(&f.bare));
            let fr: Vec<f64> = f.rocbuild.iter().zip(&f.bare).map(|(x, y)| x / y).collect();
            let sr = stats(&fr);
            let _ = writeln!(table, "| (a′) A: rocbuild, realext ({} units) against the real torch, fresh cache + fresh venv | {N} | {:.2} s | {:.2} – {:.2} s | |", crate::bench_status::UNITS, fa.median, fa.min, fa.max);
            let _ = writeln!(table, "| (a′) B: bare cmake configure + build of realext | {N} | {:.2} s | {:.2} – {:.2} s | |", fb.median, fb.min, fb.max);
            let _ = writeln!(
                table,
                "| (a′) ratio A/B (per pair) | {N} | {:.3}× | {:.3}× – {:.3}× | ≤ {FULL_TARGET}× ({}) |",
                sr.median,
                sr.min,
                sr.max,
                verdict(sr.median <= FULL_TARGET)
            );
            let mut raw = format!(
                "- (a′) A: {}\n- (a′) B: {}\n- (a′) A/B: {}\n",
                list(&f.rocbuild, " s"),
                list(&f.bare, " s"),
                fr.iter()
                    .map(|r| format!("{r:.3}×"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if !f.cache_cold.is_empty() {
                let n = f.cache_cold.len();
                let (cold, warm) = (stats(&f.cache_cold), stats(&f.cache_warm));
                let cr: Vec<f64> = f
                    .cache_warm
                    .iter()
                    .zip(&f.cache_cold)
                    .map(|(w, c)| w / c)
                    .collect();
                let scr = stats(&cr);
                let hits = stats(&f.cache_hit_rate);
                let _ = writeln!(table, "| (a″) A: rocbuild realext through sccache, shared Redis, cold (fresh cache, venv, build tree) | {n} | {:.2} s | {:.2} – {:.2} s | |", cold.median, cold.min, cold.max);
                let _ = writeln!(table, "| (a″) B: the same on another \"machine\" (fresh everything, other paths, same Redis) | {n} | {:.2} s | {:.2} – {:.2} s | B hits {:.0}% (≥ 90%: {}) |", warm.median, warm.min, warm.max, hits.min * 100.0, verdict(hits.min >= 0.9));
                let _ = writeln!(table, "| (a″) ratio B/A (per pair) | {n} | {:.3}× | {:.3}× – {:.3}× | ≤ {CACHE_TARGET}× ({}) |", scr.median, scr.min, scr.max, verdict(scr.median <= CACHE_TARGET));
                raw.push_str(&format!(
                    "- (a″) A cold: {}\n- (a″) B warm: {}\n- (a″) B/A: {}\n",
                    list(&f.cache_cold, " s"),
                    list(&f.cache_warm, " s"),
                    cr.iter()
                        .map(|r| format!("{r:.3}×"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            raw
        }
        None => "- (a′) skipped: no venv with the real torch\n".to_string(),
    };
    let _ = writeln!(
        table,
        "| (b) no-op rerun | {NOOP_ITERATIONS} | {:.3} s | {:.3} – {:.3} s | ≤ {NOOP_TARGET} s ({}) |",
        sn.median,
        sn.min,
        sn.max,
        verdict(sn.median <= NOOP_TARGET)
    );
    let status_md = match status {
        Some(r) => {
            use crate::bench_status::{ITERATIONS, TARGET_MS};
            let (sa, sb) = (stats(&r.status), stats(&r.baseline));
            let _ = writeln!(
                table,
                "| (c) A: `rocbuild status`, real PyPI torch {} | {ITERATIONS} | {:.1} ms | {:.1} – {:.1} ms | ≤ {TARGET_MS} ms ({}) |",
                r.torch, sa.median, sa.min, sa.max, verdict(sa.median <= TARGET_MS)
            );
            let _ = writeln!(
                table,
                "| (c) B: `python -c \"importlib.metadata.version('torch')\"`, same venv | {ITERATIONS} | {:.1} ms | {:.1} – {:.1} ms | |",
                sb.median, sb.min, sb.max
            );
            let ratios: Vec<f64> = r
                .status
                .iter()
                .zip(&r.baseline)
                .map(|(x, y)| x / y)
                .collect();
            let sr = stats(&ratios);
            let _ = writeln!(
                table,
                "| (c) ratio A/B (per pair) | {ITERATIONS} | {:.3}× | {:.3}× – {:.3}× | |",
                sr.median, sr.min, sr.max
            );
            format!(
                "- status (ms): {}\n- importlib.metadata (ms): {}\n",
                list(&r.status, ""),
                list(&r.baseline, "")
            )
        }
        None => "- (c) skipped: no venv with the real torch\n".to_string(),
    };
    Table {
        table,
        real_full_md,
        status_md,
        ratios,
        ratio_of_medians,
        a_median: sa.median,
        b_median: sb.median,
    }
}

/// Where A's extra time goes: each step A does besides B, timed alone.
fn breakdown(mut parts: Vec<(&'static str, Vec<f64>)>, a_median: f64, b_median: f64) -> String {
    parts.retain(|(_, v)| !v.is_empty());
    let parts_sum: f64 = parts.iter().map(|(_, v)| stats(v).median).sum();
    let mut breakdown = String::new();
    breakdown
        .push_str("| step A does besides B, timed alone | median | min – max |\n|---|---|---|\n");
    for (name, v) in &parts {
        let st = stats(v);
        let _ = writeln!(
            breakdown,
            "| {name} | {:.2} s | {:.2} – {:.2} s |",
            st.median, st.min, st.max
        );
    }
    let _ = writeln!(breakdown, "| sum of the above | {parts_sum:.2} s | |");
    let _ = writeln!(
        breakdown,
        "| A − B − sum: the rest (probing, writing TorchConfig, RUNPATHs, manifest, process start) | {:+.2} s | |",
        a_median - b_median - parts_sum
    );
    breakdown
}

/// BENCHMARKS.md's own part (the sections other runs own are carried over by the caller).
fn benchmarks_md(t: &Table, breakdown: &str, full: &FullBuilds, noop: &[f64]) -> String {
    let (table, real_full_md, status_md) = (&t.table, &t.real_full_md, &t.status_md);
    let ratio_of_medians = t.ratio_of_medians;
    let (a, b, ratios) = (&full.a, &full.b, &t.ratios);
    let machine = Machine::probe();
    format!(
        "# Benchmarks\n\n\
         Written by `cargo xtask bench` (xtask/src/bench.rs); the whole file is replaced on every run.\n\n\
         - date: {date}\n\
         - rocbuild: {rev}\n\
         - machine: {nproc} CPUs, {arch}, {os}\n\
         - {cmake}; {gcc}; ninja {ninja}; {python}\n\n\
         ## Results\n\n\
         {table}\n\
         Ratio of the medians A/B: {ratio_of_medians:.3}×.\n\n\
         Where A's extra time goes (medians; each step run alone after each A/B pair, with the plan's own \
         command where the plan has one; the clone is the `git` CLI, while rocbuild uses libgit2 with a bare \
         clone in its cache, so that row is an approximation):\n\n\
         {breakdown}\n\
         Raw times, in run order (A and B alternated: A₁ B₁ A₂ B₂ …):\n\n\
         - A: {la}\n\
         - B: {lb}\n\
         - A/B: {lr}\n\
         {real_full_md}\
         - no-op: {ln}\n\
         {status_md}\n\
         ## What is measured\n\n\
         The project is the test fixture shaped like TorchCodec (tests/fixture/fakecodec: a core and a custom-ops \
         library linked to FFmpeg and to a torch-like library, a CPython extension, a git submodule), built against \
         a venv with a fake torch 2.9.1 (`rocbuild-testkit`). The release binary `target/release/rocbuild` is used; \
         its pip installs the fixture's wheel from a local directory (`PIP_NO_INDEX=1 PIP_FIND_LINKS=…`).\n\n\
         **(a) full build.** A runs `rocbuild fakecodec --recipes … --venv … --cache … -q` with a fresh `--cache` \
         directory and a fresh venv each iteration (the venvs are made before any timing). A therefore includes \
         everything rocbuild does: probing the venv and FFmpeg, cloning the repository and its submodule from a \
         local bare repository, writing the lite TorchConfig.cmake, CMake configure, build and install, pip \
         installing the Python part, patching RUNPATHs, and running the recipe's verification in Python. \
         B runs only `cmake` configure and `cmake --build` with exactly the argv, env and cwd of rocbuild's \
         `--dry-run --json` plan, on a fresh build directory each iteration, using the checkout and the lite \
         TorchConfig.cmake made by a warm-up run outside the timing. A and B are alternated and the ratio is taken \
         per pair; the target is ≤ {FULL_TARGET}×. Since B is only the compiler's part of A, the ratio is mostly \
         the cost of clone, pip and verification on a project that compiles in seconds; on a real TorchCodec build \
         (minutes of compiling) the same fixed costs weigh far less. The Python part is fetched by pip while \
         CMake configures and builds (both start from the same plan; pip writes into the transaction's staging \
         area), so its cost hides behind the compiler's where there are cores to spare.\n\n\
         **(a′) full build against the real torch.** The same comparison on the `realext` fixture of (c) \
         below, with `-DREALEXT_UNITS={real_units}`: {real_units} C++ files that each include `ATen/ATen.h`, \
         one library linked to libtorch, built through rocbuild's lite TorchConfig.cmake against the real PyPI \
         torch — what TorchCodec's own sources do, and about as many of them, so each file compiles in \
         seconds, not milliseconds. A is `rocbuild realext` with a fresh `--cache` and a fresh venv \
         of links to the real torch (made untimed), so it clones, writes the TorchConfig, configures, builds, \
         pip-installs the Python part, sets the RUNPATH, and verifies by loading the library (and libtorch) in a \
         fresh Python; B is the bare configure + build with the plan's argv, env and cwd. \
         {real_full_n} pairs, alternated; same target.\n\n\
         **(b) no-op rerun.** After a successful run, the same command again with nothing changed \
         ({NOOP_ITERATIONS} times); rocbuild must notice that nothing changed and do nothing. Target ≤ {NOOP_TARGET} s.\n\n\
         **(c) status.** `rocbuild status` on a venv with the real PyPI torch (the one `cargo xtask setup` puts in \
         cache/venvs/torch-real). That venv is shared and must not change, so a throwaway venv made with \
         `python3 -m venv` links (symlinks) every package of it (torch, the nvidia-* wheels, triton, …), and the \
         `realext` fixture — a C++ library built against the real torch's headers and libraries through rocbuild's \
         lite TorchConfig.cmake — is built and installed into it by rocbuild, untimed. A is then \
         `rocbuild status --recipes … --venv …` (it reads the manifest, the real torch/version.py and the recipes, \
         and stats the installed file; the size and mtime match, so nothing is hashed; realext needs no FFmpeg, so \
         there is no pkg-config query), B is the cheapest Python-side look at the same venv, \
         `python -c \"import importlib.metadata as m; print(m.version('torch'))\"`. A and B alternate \
         ({status_n} pairs). Target for A: ≤ {status_target} ms.\n\n\
         The reader benchmarks (d), (e), (f) and the comparisons of rocbuild's builds with \
         PyPI's wheels, (g) CTranslate2 and (h) TorchCodec, are in their own sections below \
         (`cargo xtask bench --only d,e,f,g,h` reruns just those).\n",
        date = machine.date,
        rev = machine.rev,
        nproc = machine.nproc,
        arch = machine.arch,
        os = machine.os,
        cmake = machine.cmake,
        gcc = machine.gcc,
        ninja = machine.ninja,
        python = machine.python,
        la = list(a, " s"),
        lb = list(b, " s"),
        lr = ratios.iter().map(|r| format!("{r:.3}×")).collect::<Vec<_>>().join(", "),
        ln = list(noop, " s"),
        status_n = crate::bench_status::ITERATIONS,
        real_full_n = crate::bench_status::FULL_ITERATIONS,
        real_units = crate::bench_status::UNITS,
        status_target = crate::bench_status::TARGET_MS,
    )
}

pub(crate) struct Machine {
    pub(crate) date: String,
    pub(crate) rev: String,
    nproc: String,
    arch: String,
    os: String,
    cmake: String,
    gcc: String,
    ninja: String,
    python: String,
}

impl Machine {
    pub(crate) fn probe() -> Machine {
        let ws = workspace_root();
        let ws = ws.to_str().unwrap_or(".");
        let rev = first_line("git", &["-C", ws, "rev-parse", "--short", "HEAD"]);
        let dirty = Command::new("git")
            .args(["-C", ws, "status", "--porcelain"])
            .output()
            .map(|o| !o.stdout.is_empty())
            .unwrap_or(false);
        let os = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("PRETTY_NAME=")
                        .map(|v| v.trim_matches('"').to_string())
                })
            })
            .unwrap_or_else(|| "unknown OS".into());
        Machine {
            date: first_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            rev: if dirty {
                format!("{rev} (with uncommitted changes)")
            } else {
                rev
            },
            nproc: first_line("nproc", &[]),
            arch: first_line("uname", &["-m"]),
            os,
            cmake: first_line("cmake", &["--version"]),
            gcc: first_line("gcc", &["--version"]),
            ninja: first_line("ninja", &["--version"]),
            python: first_line("python3", &["--version"]),
        }
    }
}

/// Put `body` between `<!-- begin NAME -->` and `<!-- end NAME -->` in `file` (appended when
/// the markers are not there yet): `cargo xtask fuzz` owns its section of BENCHMARKS.md, and
/// `cargo xtask bench`, which rewrites the file, carries it over.
pub fn replace_section(file: &Path, name: &str, body: &str) -> Result<()> {
    let old = std::fs::read_to_string(file).unwrap_or_default();
    let new = with_section(&old, name, body);
    std::fs::write(file, new).map_err(|e| format!("cannot write {}: {e}", file.display()))
}

fn with_section(text: &str, name: &str, body: &str) -> String {
    let (begin, end) = (
        format!("<!-- begin {name} -->"),
        format!("<!-- end {name} -->"),
    );
    let block = format!("{begin}\n{}\n{end}\n", body.trim_end());
    match (text.find(&begin), text.find(&end)) {
        (Some(b), Some(e)) if e > b => {
            let after = text[e + end.len()..].trim_start_matches('\n');
            format!("{}{block}{after}", &text[..b])
        }
        _ => {
            let mut t = text.trim_end().to_string();
            if !t.is_empty() {
                t.push_str("\n\n");
            }
            t + &block
        }
    }
}

/// Every `<!-- begin NAME -->` … `<!-- end NAME -->` section of `text`, in order.
fn sections(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(b) = rest.find("<!-- begin ") {
        let after = &rest[b + "<!-- begin ".len()..];
        let Some(name) = after.split(" -->").next() else {
            break;
        };
        match section(&rest[b..], name) {
            Some(s) => {
                let end = format!("<!-- end {name} -->");
                let e = rest[b..]
                    .find(&end)
                    .map_or(rest.len(), |e| b + e + end.len());
                out.push(s);
                rest = &rest[e..];
            }
            None => break,
        }
    }
    out
}

/// The `name` section of `text` with its markers, if there is one.
fn section(text: &str, name: &str) -> Option<String> {
    let (begin, end) = (
        format!("<!-- begin {name} -->"),
        format!("<!-- end {name} -->"),
    );
    let b = text.find(&begin)?;
    let e = text.find(&end)?;
    (e > b).then(|| text[b..e + end.len()].to_string() + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fuzz_section_is_replaced_in_place_appended_once_and_carried_over() {
        let once = with_section("# Benchmarks\n\nfigures\n", "fuzzing", "## Fuzzing\nrun 1");
        assert_eq!(
            once,
            "# Benchmarks\n\nfigures\n\n<!-- begin fuzzing -->\n## Fuzzing\nrun 1\n<!-- end fuzzing -->\n"
        );
        let twice = with_section(&format!("{once}tail\n"), "fuzzing", "## Fuzzing\nrun 2");
        assert!(
            twice.contains("run 2") && !twice.contains("run 1"),
            "{twice}"
        );
        assert!(twice.ends_with("<!-- end fuzzing -->\ntail\n"), "{twice}");
        assert_eq!(
            section(&twice, "fuzzing").unwrap(),
            "<!-- begin fuzzing -->\n## Fuzzing\nrun 2\n<!-- end fuzzing -->\n"
        );
        assert_eq!(section("no markers", "fuzzing"), None);
    }
}
