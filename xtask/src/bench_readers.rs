//! The reader benchmarks of issue 15, each a section of BENCHMARKS.md of its own (so
//! `cargo xtask bench --only d,e,f` can rerun them without the 40-minute full bench):
//!
//! - (d) `rocbuild deps` over the SDK-like tree against `ldd` (bench_closure.rs), and (d′)
//!   `deps` over the real Windows TorchCodec DLLs against the real Windows torch's, against
//!   `llvm-objdump -p` reading the same files' import and export tables;
//! - (e) `doctor` over the real PyPI torch: the whole doctor against a bare
//!   `python -I -c "import torch"`, `--no-load` against an `nm -D` script (bench_doctor.rs);
//! - (f) the no-op rerun on a venv with the real PyPI torch, against the cheapest Python-side
//!   look at the same venv.
//!
//! Every pair is alternated (A₁ B₁ A₂ B₂ …), ratios per pair, medians and raw times written.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::util::{run_capture, Result};

/// The sections `--only` can name.
/// (a), (b) and (c) share the fixture worlds of the full run, which `--only` does not make.
/// (g) and (h) compare rocbuild's CTranslate2 and TorchCodec builds with PyPI's wheels
/// (bench_artifacts.rs).
/// (i) measures the TOML-only recipes (bench_recipes.rs).
pub const SECTIONS: &[&str] = &["d", "e", "f", "g", "h", "i"];

/// `--only d,e,f` (or `--only=d,e,f`): the sections to run; `None`: all of them.
pub fn only(args: &[String]) -> Result<Option<BTreeSet<String>>> {
    let mut it = args.iter();
    let mut out: Option<BTreeSet<String>> = None;
    while let Some(a) = it.next() {
        let list = if a == "--only" {
            it.next()
                .ok_or("--only needs a list of sections, e.g. --only d,e,f")?
                .clone()
        } else if let Some(l) = a.strip_prefix("--only=") {
            l.to_string()
        } else {
            return Err(format!(
                "unknown bench argument `{a}` (use --only with some of {})",
                SECTIONS.join(",")
            ));
        };
        for s in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if !SECTIONS.contains(&s) {
                return Err(format!(
                    "unknown bench section `{s}`: the sections are {}",
                    SECTIONS.join(", ")
                ));
            }
            out.get_or_insert_with(BTreeSet::new).insert(s.to_string());
        }
    }
    Ok(out)
}

pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

pub fn stats(xs: &[f64]) -> Stats {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return Stats {
            median: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
        };
    }
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

fn ms(xs: &[f64]) -> String {
    xs.iter()
        .map(|x| format!("{:.1}", x * 1e3))
        .collect::<Vec<_>>()
        .join(", ")
}

fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x / y).collect()
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "meets target"
    } else {
        "MISSES target"
    }
}

/// Rows `A`, `B`, `A/B` of one alternated pair of series (seconds), with the target on A/B
/// (`ratio_target`) and/or on A's median (`a_target`, seconds).
#[allow(clippy::too_many_arguments)]
fn pair_rows(
    table: &mut String,
    label: &str,
    a_name: &str,
    b_name: &str,
    a: &[f64],
    b: &[f64],
    ratio_target: Option<f64>,
    a_target: Option<f64>,
) {
    let (sa, sb) = (stats(a), stats(b));
    let r = ratios(a, b);
    let sr = stats(&r);
    let at = a_target
        .map(|t| format!("≤ {t} s ({})", verdict(sa.median <= t)))
        .unwrap_or_default();
    let rt = ratio_target
        .map(|t| format!("≤ {t}× ({})", verdict(sr.median <= t)))
        .unwrap_or_default();
    let n = a.len();
    let _ = writeln!(
        table,
        "| {label} A: {a_name} | {n} | {:.1} ms | {:.1} – {:.1} ms | {at} |",
        sa.median * 1e3,
        sa.min * 1e3,
        sa.max * 1e3
    );
    let _ = writeln!(
        table,
        "| {label} B: {b_name} | {n} | {:.1} ms | {:.1} – {:.1} ms | |",
        sb.median * 1e3,
        sb.min * 1e3,
        sb.max * 1e3
    );
    let _ = writeln!(
        table,
        "| {label} ratio A/B (per pair) | {n} | {:.3}× | {:.3}× – {:.3}× | {rt} |",
        sr.median, sr.min, sr.max
    );
}

fn raw(label: &str, a: &[f64], b: &[f64]) -> String {
    format!(
        "- {label} A (ms): {}\n- {label} B (ms): {}\n- {label} A/B: {}\n",
        ms(a),
        ms(b),
        ratios(a, b)
            .iter()
            .map(|r| format!("{r:.3}×"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

const TABLE_HEAD: &str = "| benchmark | n | median | min – max | target |\n|---|---|---|---|---|\n";

/// Time `a` and `b` alternately `n` times (seconds each); `check` sees every output.
fn alternate(
    n: usize,
    label: &str,
    mut a: impl FnMut() -> Result<()>,
    mut b: impl FnMut() -> Result<()>,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for i in 0..n {
        let t = Instant::now();
        a()?;
        ta.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        b()?;
        tb.push(t.elapsed().as_secs_f64());
        println!(
            "xtask: bench: {label} {}/{n}: A {:.1} ms, B {:.1} ms, ratio {:.3}",
            i + 1,
            ta[i] * 1e3,
            tb[i] * 1e3,
            ta[i] / tb[i]
        );
    }
    Ok((ta, tb))
}

// ---------------------------------------------------------------------------------------
// (d) and (d′)

pub const DEPS_SECTION: &str = "readers-deps";
pub const PE_ITERATIONS: usize = 10;
pub const PE_TARGET_S: f64 = 1.0;
pub const CLOSURE_TARGET: f64 = 1.0;

/// `rocbuild deps` exits 3/4/5 for what it finds; only a crash or a usage error is a failure.
fn deps_ok(cmd: &mut Command) -> Result<String> {
    let o = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run rocbuild deps: {e}"))?;
    if matches!(o.status.code(), Some(0 | 1 | 3 | 4 | 5)) {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        Err(format!(
            "rocbuild deps failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

struct PeBench {
    files: Vec<String>,
    providers: usize,
    a: Vec<f64>,
    b: Vec<f64>,
    unresolved: usize,
    libraries: usize,
}

/// (d′): the real Windows TorchCodec DLLs against the real Windows torch's DLLs, one call.
fn pe_bench(exe: &Path, tmp: &Path) -> Result<Option<PeBench>> {
    use rocbuild_testkit::upstream;
    let (Some(tc), Some(torch)) = (
        upstream::wheel(&upstream::TORCHCODEC_WINDOWS),
        upstream::wheel(&upstream::TORCH_WINDOWS),
    ) else {
        return Ok(None);
    };
    if !crate::util::on_path("llvm-objdump") {
        println!("xtask: bench: SKIPPED (d′): no llvm-objdump on PATH");
        return Ok(None);
    }
    let site = tmp.join("pe-corpus/Lib/site-packages");
    upstream::unpack_only(&tc, &site, &["torchcodec/"]);
    upstream::unpack_only(&torch, &site, &["torch/lib/", "torch/version.py"]);
    let pkg = site.join("torchcodec");
    let torch_lib = site.join("torch/lib");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&pkg)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n.starts_with("libtorchcodec_") && (n.ends_with(".dll") || n.ends_with(".pyd"))
        })
        .collect();
    files.sort();
    let mut providers: Vec<PathBuf> = std::fs::read_dir(&torch_lib)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "dll"))
        .collect();
    providers.sort();
    let a_cmd = || {
        let mut c = Command::new(exe);
        c.arg("deps")
            .args(&files)
            .arg("--search")
            .arg(&torch_lib)
            .arg("--json");
        c
    };
    let b_cmd = || {
        let mut c = Command::new("llvm-objdump");
        c.arg("-p").args(&files).args(&providers);
        c
    };
    // What A finds (untimed); then one warm-up of each (same page cache for both).
    let j: serde_json::Value = serde_json::from_str(&deps_ok(&mut a_cmd())?)
        .map_err(|e| format!("rocbuild deps --json printed no JSON: {e}"))?;
    let per_file = j["files"].as_array().cloned().unwrap_or_default();
    let unresolved = per_file
        .iter()
        .map(|f| f["unresolved"].as_array().map_or(0, Vec::len))
        .sum();
    let libraries = per_file
        .iter()
        .map(|f| f["libraries"].as_array().map_or(0, Vec::len))
        .sum();
    run_capture(&mut b_cmd())?;
    let (a, b) = alternate(
        PE_ITERATIONS,
        "deps, Windows TorchCodec",
        || deps_ok(&mut a_cmd()).map(drop),
        || run_capture(&mut b_cmd()).map(drop),
    )?;
    Ok(Some(PeBench {
        files: files
            .iter()
            .map(|f| {
                f.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect(),
        providers: providers.len(),
        a,
        b,
        unresolved,
        libraries,
    }))
}

pub fn deps_section(exe: &Path, real: &Path, tmp: &Path) -> Result<String> {
    let c = crate::bench_closure::run(exe, real, tmp)?;
    let pe = pe_bench(exe, tmp)?;
    let mut table = String::from(TABLE_HEAD);
    pair_rows(
        &mut table,
        "(d)",
        &format!(
            "`rocbuild deps` of {} roots (`--search`, `--json`, every import checked)",
            c.roots
        ),
        &format!(
            "`ldd` on the same {} roots, same dirs in LD_LIBRARY_PATH",
            c.roots
        ),
        &c.rocbuild,
        &c.ldd,
        Some(CLOSURE_TARGET),
        None,
    );
    let mut raws = raw("(d)", &c.rocbuild, &c.ldd);
    let diff = if c.agree {
        "the same set of libraries".to_string()
    } else {
        format!(
            "different sets: only rocbuild {:?}; only ldd {:?}",
            c.only_rocbuild, c.only_ldd
        )
    };
    let _ = writeln!(
        raws,
        "- (d): rocbuild resolved {} libraries, ldd {}: {diff}",
        c.found_rocbuild, c.found_ldd
    );
    let pe_text = match &pe {
        Some(p) => {
            pair_rows(
                &mut table,
                "(d′)",
                &format!(
                    "`rocbuild deps` of the {} Windows TorchCodec DLLs, `--search torch/lib`, one call",
                    p.files.len()
                ),
                &format!(
                    "`llvm-objdump -p` of the same DLLs and the {} torch DLLs",
                    p.providers
                ),
                &p.a,
                &p.b,
                None,
                Some(PE_TARGET_S),
            );
            raws.push_str(&raw("(d′)", &p.a, &p.b));
            format!(
                "**(d′) the real Windows TorchCodec against the real Windows torch.** The \
                 TorchCodec 0.17.0 `win_amd64` wheel and the torch {torch} `win_amd64` wheel \
                 (cache/wheels) unpacked into a Windows-shaped site-packages; A is one \
                 `rocbuild deps` call over its {n} `libtorchcodec_*` files ({names}) with \
                 `--search torch/lib`: every DLL resolved by the Windows loader's rules and \
                 every imported procedure checked against the export table of the DLL it \
                 names (torch_cpu.dll: tens of thousands of exports, all read — no \
                 truncation). It finds {libs} libraries in all and {unres} imports nothing \
                 exports (the FFmpeg DLLs are not there, so their imports are not judged). \
                 B is `llvm-objdump -p` over the same {n} files and the {prov} torch DLLs, \
                 which prints the import and export tables A reads. Target: A ≤ {PE_TARGET_S} s.\n",
                torch = rocbuild_testkit::upstream::TORCH_WINDOWS.version,
                n = p.files.len(),
                names = p.files.join(", "),
                libs = p.libraries,
                unres = p.unresolved,
                prov = p.providers,
            )
        }
        None => "**(d′)** not run: the Windows wheels are not cached and cannot be downloaded, or llvm-objdump is missing.\n".into(),
    };
    Ok(format!(
        "## Readers: `rocbuild deps` (issue 15, target 2)\n\n{table}\n\
         **(d) dependency closure over a large SDK-like tree.** {LIBS} small shared libraries made \
         with `cc` in {LAYERS} layers (each needing 2–6 of the layers below, RUNPATH `$ORIGIN`), \
         beside the {torch_libs} libraries of the real PyPI torch; the roots are the top layer and \
         every torch library ({roots} files). A is `rocbuild deps FILE… --search sdk/lib --search \
         torch/lib --json` (the loader emulation of every root with one shared reader, plus what \
         ldd does not do: every import of the root and its non-system dependencies checked against \
         the exports of the process); B is `ldd FILE…` with the same two directories in \
         `LD_LIBRARY_PATH` (glibc's loader in trace mode). Before timing, the libraries each \
         resolves are compared. Target: A/B ≤ {CLOSURE_TARGET}×.\n\n{pe_text}\n\
         Raw times, in run order (A and B alternated):\n\n{raws}",
        LIBS = crate::bench_closure::LIBS,
        LAYERS = 6,
        torch_libs = c.torch_libs,
        roots = c.roots,
    ))
}

// ---------------------------------------------------------------------------------------
// (f) the no-op rerun on the real torch

pub const NOOP_SECTION: &str = "readers-noop";
pub const NOOP_ITERATIONS: usize = 20;
pub const NOOP_TARGET_S: f64 = 0.1;

pub fn noop_section(exe: &Path, real: &Path, tmp: &Path) -> Result<String> {
    let w = crate::bench_status::world(exe, real, tmp)?;
    let says = run_capture(&mut w.rocbuild(&w.venv, &w.cache, &[]))?;
    let says = says.trim().to_string();
    if says.contains("installed") {
        return Err(format!(
            "the rerun after a build should change nothing, it says: {says}"
        ));
    }
    let mut base = Command::new(w.venv.join("bin/python"));
    base.args(["-c", crate::bench_status::BASELINE]);
    let (a, b) = alternate(
        NOOP_ITERATIONS,
        "no-op rerun, real torch",
        || run_capture(&mut w.rocbuild(&w.venv, &w.cache, &[])).map(drop),
        || run_capture(&mut base).map(drop),
    )?;
    let mut table = String::from(TABLE_HEAD);
    pair_rows(
        &mut table,
        "(f)",
        "`rocbuild realext` again, nothing changed, venv with the real PyPI torch",
        "`python -c \"importlib.metadata.version('torch')\"`, same venv",
        &a,
        &b,
        None,
        Some(NOOP_TARGET_S),
    );
    Ok(format!(
        "## No-op rerun on the real torch (issue 15, target 4)\n\n{table}\n\
         **(f)** The `realext` world of (c): a venv of links to every package of the real PyPI \
         torch venv, realext built and installed into it by rocbuild (untimed). A is the same \
         `rocbuild realext --recipes … --venv … --cache … -q` again with nothing changed (it says \
         \"{says}\"); B is the cheapest Python-side look at the same venv. Alternated, \
         {NOOP_ITERATIONS} pairs. Target: A ≤ {NOOP_TARGET_S} s.\n\n\
         Raw times, in run order:\n\n{}",
        raw("(f)", &a, &b)
    ))
}

// ---------------------------------------------------------------------------------------
// (e) doctor

pub const DOCTOR_SECTION: &str = "readers-doctor";

pub fn doctor_section(exe: &Path, real: &Path, tmp: &Path) -> Result<String> {
    let real_site = crate::bench_status::site_of(real)?;
    let venv = tmp.join("venv-doctor");
    crate::bench_status::links_venv(&real_site, &venv)?;
    println!("xtask: bench: doctor over {}", venv.display());
    let d = crate::bench_doctor::run(exe, &venv, tmp)?;
    Ok(crate::bench_doctor::markdown(&d, |xs| {
        let s = stats(xs);
        (s.median, s.min, s.max)
    }))
}

/// `body` with the line saying when and at which commit it was measured under its title.
fn stamped(body: &str, date: &str, rev: &str, section: &str) -> String {
    let line = format!(
        "_Measured {date} at rocbuild {rev} (`cargo xtask bench --only {section}`); the header \
         above dates the last whole run._\n"
    );
    match body.split_once('\n') {
        Some((title, rest)) if title.starts_with("## ") => format!("{title}\n\n{line}{rest}"),
        _ => format!("{line}\n{body}"),
    }
}

/// Run the sections of `only` (d–f here, g and h in bench_artifacts) and write each into its
/// section of `file`, stamped with when and at which commit it was measured.
pub fn run_sections(
    exe: &Path,
    real: &Path,
    tmp: &Path,
    only: &BTreeSet<String>,
    file: &Path,
) -> Result<()> {
    let has_real = real.join("bin/python").exists();
    let ws = crate::util::workspace_root();
    // What was measured: the file's header dates the last whole run, not this one.
    let m = crate::bench::Machine::probe();
    for s in only {
        let (name, body) = match s.as_str() {
            "d" => (DEPS_SECTION, deps_section(exe, real, tmp)?),
            "e" if has_real => (DOCTOR_SECTION, doctor_section(exe, real, tmp)?),
            "f" if has_real => (NOOP_SECTION, noop_section(exe, real, tmp)?),
            "g" => (
                crate::bench_artifacts::CT2_SECTION,
                crate::bench_artifacts::ctranslate2_section(exe, &ws)?,
            ),
            "i" => (
                crate::bench_recipes::SECTION,
                crate::bench_recipes::section(exe, real, &ws)?,
            ),
            "h" if has_real => (
                crate::bench_artifacts::TC_SECTION,
                crate::bench_artifacts::torchcodec_section(exe, real, &ws)?,
            ),
            "e" | "f" | "h" => {
                println!(
                    "xtask: bench: SKIPPED ({s}): no venv with the real torch at {} (cargo xtask setup makes it)",
                    real.display()
                );
                continue;
            }
            _ => continue,
        };
        let body = stamped(&body, &m.date, &m.rev, s);
        crate::bench::replace_section(file, name, &body)?;
        println!("xtask: bench: wrote section {name} of {}", file.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::stamped;

    #[test]
    fn a_section_run_alone_says_when_and_at_which_commit_under_its_title() {
        let body = "## Readers\n\n| a | b |\n";
        let s = stamped(body, "2026-11-24 02:13 UTC", "648be3e", "g");
        assert!(s.starts_with("## Readers\n\n_Measured 2026-11-24 02:13 UTC at rocbuild 648be3e (`cargo xtask bench --only g`)"), "{s}");
        assert!(s.ends_with("_\n\n| a | b |\n"), "{s}");
    }
}
