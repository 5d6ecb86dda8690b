//! `rocbuild <recipe>`: the options in, one build use case, the outcome rendered.
// EngineError is large, and made at most once per run: not worth a box on its cold path.
#![allow(clippy::result_large_err)]

use miette::{IntoDiagnostic, Result, WrapErr};
use rocbuild_engine::usecase::{self, BuildRequest, Built};
use rocbuild_engine::{Backend, BackendOptions, BuildOptions, EngineError, Verbosity};
use rocbuild_probe::Machine;
use rocbuild_recipe::{RecipeSet, TorchCmake};

use crate::cli::{BackendArg, BuildArgs, TorchCmakeArg};
use crate::settings::Settings;
use crate::{ExitStatus, Stderr};

fn parse_defines(defs: &[String]) -> Result<Vec<(String, String)>, EngineError> {
    defs.iter()
        .map(|d| match d.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(EngineError::Usage {
                option: format!("--define {d}"),
                reason: "expected KEY=VALUE".into(),
                help: Some("e.g. --define ENABLE_CUDA=ON".into()),
            }),
        })
        .collect()
}

/// The options as the user gave them: stored as is in the manifest, repeated by `rebuild`.
fn options(a: &BuildArgs, st: &Settings) -> Result<BuildOptions, EngineError> {
    Ok(BuildOptions {
        version: a.release.clone(),
        force: a.force,
        no_binary: a.no_binary,
        no_deps: a.no_deps,
        source: a.source.clone(),
        rev: a.rev.clone(),
        jobs: a.jobs,
        torch_cmake: a.torch_cmake.map(|m| match m {
            TorchCmakeArg::Native => TorchCmake::Native,
            TorchCmakeArg::Lite => TorchCmake::Lite,
        }),
        defines: parse_defines(&a.defines)?,
        // Absolute: recorded for `rebuild`, and handed to CMake, which refuses relative
        // include directories.
        ffmpeg_dir: a.ffmpeg.as_deref().map(absolute),
        winsysroot: a.winsysroot.as_deref().map(absolute),
        python_headers: a.python_headers.as_deref().map(absolute),
        patches: a
            .patch
            .iter()
            .map(|p| rocbuild_venv::Patch {
                path: p.clone(),
                sha256: None,
            })
            .collect(),
        backend: BackendOptions {
            backend: a.backend.map(|b| match b {
                BackendArg::Cpu => Backend::Cpu,
                BackendArg::Rocm => Backend::Rocm,
                BackendArg::Cuda => Backend::Cuda,
            }),
            rocm: a.rocm.clone(),
            arch: rocbuild_probe::GpuTargets::parse(&a.arch),
            cuda_arch: rocbuild_probe::GpuTargets::parse(&a.cuda_arch),
            cuda: a.cuda.clone(),
        },
        index: if a.index.is_empty() {
            st.index.clone()
        } else {
            a.index.clone()
        },
        find_links: a
            .find_links
            .iter()
            .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone()))
            .collect(),
    })
}

/// `--machine FILE`: the JSON of rocbuild's Machine.
pub(crate) fn machine_file(file: &std::path::Path) -> Result<Machine> {
    let text = std::fs::read_to_string(file)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot read --machine {}", file.display()))?;
    serde_json::from_str(&text)
        .into_diagnostic()
        .wrap_err_with(|| {
            format!(
                "--machine {} is not a machine description (JSON of rocbuild's Machine)",
                file.display()
            )
        })
}

pub fn build(set: &RecipeSet, a: &BuildArgs, st: &Settings) -> Result<ExitStatus> {
    let recipe = set.get(a.recipe.as_deref().unwrap_or_default())?;
    let options = options(a, st)?;
    let machine = a.machine.as_deref().map(machine_file).transpose()?;
    // With `--machine`, nothing of this machine is read: no venv either.
    let venv = match machine {
        None => Some(st.venv(&a.venv)?),
        Some(_) => None,
    };
    let verbosity = crate::verbosity(&st.global);
    let built = usecase::build(
        BuildRequest {
            recipe,
            options,
            venv,
            machine,
            dry_run: a.dry_run,
            no_wait: a.no_wait,
            verbosity,
            lock_held: false,
        },
        &st.engine()?,
        &mut Stderr,
    )?;
    let (dest, outcome) = match built {
        Built::Planned(plan) => {
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&plan).into_diagnostic()?);
            } else {
                // A closed pipe (`| head`) is not an error worth a panic.
                crate::out::stdout_raw(&plan.to_string());
            }
            return Ok(ExitStatus::Success);
        }
        Built::Ran { plan, outcome } => (plan.install.dest.clone(), outcome),
        Built::Unchanged { dest, outcome } => (dest, outcome),
        Built::StockWorks(plan) => {
            print_stock(&plan, a.json)?;
            return Ok(ExitStatus::Success);
        }
    };
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&outcome).into_diagnostic()?
        );
        return Ok(ExitStatus::Success);
    }
    print_outcome(&dest, &outcome, &recipe.raw.source.origin(), verbosity);
    Ok(ExitStatus::Success)
}

/// The index's own wheel works here: say so, with the line that installs it, and build
/// nothing.
fn print_stock(plan: &rocbuild_engine::Plan, json: bool) -> Result<()> {
    let Some(s) = &plan.stock else {
        return Ok(());
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(s).into_diagnostic()?);
        return Ok(());
    }
    outln!(
        "{} {}: no build needed: {}",
        plan.recipe,
        plan.version,
        s.why
    );
    if let Some(pip) = &s.pip {
        let python = plan.python.display().to_string();
        let pip = pip.strip_prefix("pip ").unwrap_or(pip);
        outln!("  install it:    {python} -m pip {pip}");
    }
    outln!("  build anyway:  rocbuild {} --no-binary", plan.recipe);
    Ok(())
}

/// What a build did, for the user.
pub fn print_outcome(
    dest: &std::path::Path,
    outcome: &rocbuild_engine::Outcome,
    source: &str,
    verbosity: Verbosity,
) {
    let what = if outcome.changed {
        "installed"
    } else {
        "up to date"
    };
    outln!(
        "{} {} {what} in {}",
        outcome.recipe,
        outcome.version,
        dest.display()
    );
    if let Some(w) = &outcome.wheel {
        outln!("  wheel:    {w} (installed from the index, not built)");
    }
    if let Some(c) = &outcome.commit {
        outln!("  source:   {} @ {}", source, &c[..12.min(c.len())]);
    }
    if outcome.changed {
        for f in &outcome.installed {
            outln!("  file:     {f}");
        }
        for p in &outcome.parked {
            outln!("  parked:   {p}");
        }
        if let Some(last) = outcome.verify_output.last() {
            outln!("  verified: {last}");
        }
        if let Some(why) = &outcome.unverified {
            outln!("  NOT verified: {why}");
        }
    }
    if let Some(c) = outcome.compiler_cache.as_ref().filter(|_| outcome.changed) {
        match (c.hits, c.misses) {
            (Some(h), Some(m)) if h + m > 0 => outln!(
                "  compiler cache: {} ({}): {h} hits, {m} misses ({:.0}% hits)",
                c.kind,
                c.backend,
                100.0 * h as f64 / (h + m) as f64
            ),
            _ => outln!(
                "  compiler cache: {} ({}): nothing compiled",
                c.kind,
                c.backend
            ),
        }
    }
    outln!("  manifest: {}", outcome.manifest.display());
    if verbosity == Verbosity::Verbose {
        outln!("  log:      {}", outcome.log.display());
    }
}

fn absolute(p: &std::path::Path) -> std::path::PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Line {
        #[command(flatten)]
        build: BuildArgs,
    }

    /// `--cuda-arch` becomes the same typed list as `--arch` at the command line: each value
    /// may be a list, repeats are dropped, the order is kept.
    #[test]
    fn cuda_archs_are_split_at_the_command_line_as_gpu_archs_are() {
        let line = Line::try_parse_from([
            "rocbuild",
            "ctranslate2",
            "--cuda-arch",
            "8.6",
            "--cuda-arch",
            "8.9;9.0+PTX,8.6",
            "--arch",
            "gfx1100;gfx1030",
            "--arch",
            "gfx1100",
        ])
        .unwrap();
        let global = crate::cli::Cli::try_parse_from(["rocbuild", "recipes"])
            .unwrap()
            .global;
        let st = Settings::resolve(&global, crate::settings::Vars::of([]));
        let o = options(&line.build, &st).unwrap();
        assert_eq!(o.backend.cuda_arch.names(), ["8.6", "8.9", "9.0+PTX"]);
        assert_eq!(o.backend.arch.names(), ["gfx1100", "gfx1030"]);
    }
}
