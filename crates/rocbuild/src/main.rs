//! rocbuild: the binary. Argument parsing and output only; the work is in the library crates.

mod cli;
mod doctor;
mod env;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use miette::{IntoDiagnostic, Result, WrapErr};
use rocbuild_engine::{BuildOptions, EngineError, Verbosity};
use rocbuild_probe::{Machine, ProbeOptions};
use rocbuild_recipe::{RecipeSet, TorchCmake};

use cli::{BuildArgs, Cli, Command, Global, TorchCmakeArg};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env(env::ROCBUILD_LOG)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .init();
    let _ = miette::set_hook(Box::new(|_| {
        Box::new(miette::MietteHandlerOpts::new().width(100).build())
    }));
    match dispatch(cli) {
        Ok(code) => code,
        Err(report) => {
            eprintln!("{report:?}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    let recipes = load_recipes(&cli.global)?;
    match cli.command {
        Some(Command::Recipes { variables }) => {
            list_recipes(&recipes, variables);
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Doctor(a)) => doctor::doctor(&recipes, &a),
        Some(Command::Deps(a)) => doctor::deps(&a),
        Some(Command::Bundle(a)) => doctor::bundle(&a),
        None => build(&recipes, &cli.build, &cli.global),
    }
}

fn load_recipes(g: &Global) -> Result<RecipeSet> {
    let mut dirs: Vec<PathBuf> = std::env::var_os(env::ROCBUILD_RECIPES)
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    dirs.extend(g.recipes.iter().cloned());
    Ok(RecipeSet::load(&dirs)?)
}

fn list_recipes(set: &RecipeSet, variables: bool) {
    for r in set.iter() {
        println!("{} — {} ({})", r.name(), r.raw.package.description, r.file);
        for rel in r.releases() {
            let mut line = format!("  {:<10} torch {}", rel.version, rel.torch);
            if !rel.default {
                line.push_str("  [not a default]");
            }
            if let Some(n) = &rel.note {
                line.push_str(&format!("  — {n}"));
            }
            println!("{line}");
        }
    }
    if variables {
        println!("\ntemplate variables:");
        for (name, doc) in rocbuild_recipe::template::VARIABLES {
            println!("  {{{name}}}  {doc}");
        }
    }
}

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

fn build(set: &RecipeSet, a: &BuildArgs, g: &Global) -> Result<ExitCode> {
    let name = a.recipe.as_deref().unwrap_or_default();
    let recipe = set.get(name)?;
    let machine: Machine = match &a.machine {
        Some(file) => {
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
                })?
        }
        None => rocbuild_probe::probe(&ProbeOptions {
            venv: a.venv.clone(),
            ffmpeg_dir: a.ffmpeg.clone(),
            want_ffmpeg: recipe.raw.needs.ffmpeg,
        })?,
    };
    let verbosity = if g.quiet {
        Verbosity::Quiet
    } else if g.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    if verbosity != Verbosity::Quiet && !a.dry_run {
        eprintln!(
            "venv: {} (from {})",
            machine.venv.root.display(),
            machine.venv.chosen_by
        );
    }
    let opts = BuildOptions {
        version: a.release.clone(),
        force: a.force,
        source: a.source.clone(),
        rev: a.rev.clone(),
        jobs: Some(a.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
        })),
        torch_cmake: a.torch_cmake.map(|m| match m {
            TorchCmakeArg::Native => TorchCmake::Native,
            TorchCmakeArg::Lite => TorchCmake::Lite,
        }),
        defines: parse_defines(&a.defines)?,
        cache: std::path::absolute(g.cache.clone().unwrap_or_else(env::cache_dir))
            .into_diagnostic()?,
        mirror: std::env::var_os(env::ROCBUILD_MIRROR)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from),
    };
    let plan = rocbuild_engine::plan(recipe, &machine, &opts)?;
    if a.dry_run {
        if a.json {
            println!("{}", serde_json::to_string_pretty(&plan).into_diagnostic()?);
        } else {
            use std::io::Write;
            // A closed pipe (`| head`) is not an error worth a panic.
            let _ = write!(std::io::stdout().lock(), "{plan}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let outcome = rocbuild_engine::run(&plan, verbosity)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&outcome).into_diagnostic()?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let what = if outcome.changed {
        "installed"
    } else {
        "up to date"
    };
    println!(
        "{} {} {what} in {}",
        outcome.recipe,
        outcome.version,
        plan.install.dest.display()
    );
    if let Some(c) = &outcome.commit {
        println!(
            "  source:   {} @ {}",
            recipe.raw.source.git.get_ref(),
            &c[..12.min(c.len())]
        );
    }
    if outcome.changed {
        for f in &outcome.installed {
            println!("  file:     {f}");
        }
        for p in &outcome.parked {
            println!("  parked:   {p}");
        }
        if let Some(last) = outcome.verify_output.last() {
            println!("  verified: {last}");
        }
    }
    println!("  manifest: {}", outcome.manifest.display());
    if verbosity == Verbosity::Verbose {
        println!("  log:      {}", outcome.log.display());
    }
    Ok(ExitCode::SUCCESS)
}
