//! rocbuild: the binary. Argument parsing and output only; the work is in the library crates.

mod cli;
mod doctor;
mod env;
mod keep;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use miette::{IntoDiagnostic, Result, WrapErr};
use rocbuild_engine::{BackendOptions, BuildOptions, EngineError, Verbosity};
use rocbuild_probe::{Machine, ProbeOptions};
use rocbuild_recipe::{RecipeSet, TorchCmake};

use cli::{BuildArgs, Cli, Command, FfmpegArgs, Global, TorchCmakeArg};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(n) = std::env::var(env::ROCBUILD_TEST_KILL_AFTER_STEP)
        .ok()
        .and_then(|v| v.parse().ok())
    {
        rocbuild_venv::txn_fs::arm_kill(n);
    }
    if let Some(n) = std::env::var(env::ROCBUILD_TEST_FAIL_AFTER_STEP)
        .ok()
        .and_then(|v| v.parse().ok())
    {
        rocbuild_venv::txn_fs::arm_disk_full(n);
    }
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
    match cli.command {
        Some(Command::Ffmpeg(a)) => ffmpeg(&a, &cli.global),
        Some(Command::Recipes { variables }) => {
            list_recipes(&load_recipes(&cli.global)?, variables);
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Status(a)) => keep::status(&load_recipes(&cli.global)?, &a),
        Some(Command::Rebuild(a)) => keep::rebuild(&load_recipes(&cli.global)?, &a, &cli.global),
        Some(Command::Schedule(a)) => keep::schedule(&a, &cli.global),
        Some(Command::Restore(a)) => keep::restore(&a),
        Some(Command::Wheel(a)) => keep::wheel(&a),
        Some(Command::Clean(a)) => keep::clean(&a, &cli.global),
        Some(Command::Doctor(a)) => doctor::doctor(&load_recipes(&cli.global)?, &a),
        Some(Command::Deps(a)) => doctor::deps(&a),
        Some(Command::Bundle(a)) => doctor::bundle(&a),
        None => build(&load_recipes(&cli.global)?, &cli.build, &cli.global),
    }
}

/// `rocbuild ffmpeg`: the pinned shared FFmpeg for this platform (or `--url`/`--sha256`).
fn ffmpeg(a: &FfmpegArgs, g: &Global) -> Result<ExitCode> {
    let cache =
        std::path::absolute(g.cache.clone().unwrap_or_else(env::cache_dir)).into_diagnostic()?;
    let os = rocbuild_probe::Os::current();
    let into = a
        .into
        .as_deref()
        .map(std::path::absolute)
        .transpose()
        .into_diagnostic()?;
    let req = rocbuild_fetch::FfmpegRequest {
        url: a.url.as_deref(),
        sha256: a.sha256.as_deref(),
        major: a.major,
        os: os.as_str(),
        arch: std::env::consts::ARCH,
        downloads: &cache.join("downloads"),
        into: into.as_deref(),
        ffmpeg_root: &cache.join("ffmpeg"),
    };
    let found = rocbuild_fetch::fetch_shared_ffmpeg(&rocbuild_fetch::FfmpegPins::builtin(), &req)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&found).into_diagnostic()?
        );
    } else {
        println!(
            "FFmpeg {} (libavutil {}), shared, in {}",
            found.major,
            found.avutil_major,
            found.root.display()
        );
        println!(
            "libraries: {} ({} files)",
            found.lib_dir.display(),
            found.libraries.len()
        );
        if !found.missing.is_empty() {
            println!(
                "missing (TorchCodec needs them): {}",
                found.missing.join(", ")
            );
        }
        println!(
            "builds use it from now on (as if given --ffmpeg {}); another --ffmpeg DIR wins",
            found.root.display()
        );
    }
    // The FFmpeg for later builds (and so for the Windows preload hook).
    let current = cache.join("ffmpeg").join(CURRENT_FFMPEG);
    fs_err::create_dir_all(cache.join("ffmpeg")).into_diagnostic()?;
    fs_err::write(&current, found.root.display().to_string()).into_diagnostic()?;
    Ok(ExitCode::SUCCESS)
}

/// Names the FFmpeg `rocbuild ffmpeg` fetched last, in `<cache>/ffmpeg/`.
const CURRENT_FFMPEG: &str = "current";

/// The FFmpeg `rocbuild ffmpeg` fetched, when it is still there.
fn downloaded_ffmpeg(g: &Global) -> Option<PathBuf> {
    let cache = cache(g).ok()?;
    let text = std::fs::read_to_string(cache.join("ffmpeg").join(CURRENT_FFMPEG)).ok()?;
    let dir = PathBuf::from(text.trim());
    dir.is_dir().then_some(dir)
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

pub(crate) fn verbosity(g: &Global) -> Verbosity {
    if g.quiet {
        Verbosity::Quiet
    } else if g.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    }
}

pub(crate) fn cache(g: &Global) -> Result<PathBuf> {
    std::path::absolute(g.cache.clone().unwrap_or_else(env::cache_dir)).into_diagnostic()
}

/// Lock the venv before probing it (a run that waited must see what the other one left).
/// None when the venv cannot be found without its Python: the probe then says why.
pub(crate) fn lock_venv(
    venv: Option<&std::path::Path>,
    no_wait: bool,
) -> Result<Option<rocbuild_venv::lock::VenvLock>> {
    let Ok(v) = rocbuild_probe::choose_venv(venv) else {
        return Ok(None);
    };
    let Some(site) = rocbuild_probe::site_packages_of(&v.root, rocbuild_probe::Os::current())
    else {
        return Ok(None);
    };
    let lock = rocbuild_venv::lock::VenvLock::acquire(&site, !no_wait, &mut |pid| {
        eprintln!(
            "waiting for another rocbuild run on this venv (pid {})…",
            pid.map_or("unknown".into(), |p| p.to_string())
        )
    })?;
    Ok(Some(lock))
}

fn build(set: &RecipeSet, a: &BuildArgs, g: &Global) -> Result<ExitCode> {
    let name = a.recipe.as_deref().unwrap_or_default();
    let recipe = set.get(name)?;
    let opts = BuildOptions {
        version: a.release.clone(),
        force: a.force,
        source: a.source.clone(),
        rev: a.rev.clone(),
        jobs: a.jobs,
        torch_cmake: a.torch_cmake.map(|m| match m {
            TorchCmakeArg::Native => TorchCmake::Native,
            TorchCmakeArg::Lite => TorchCmake::Lite,
        }),
        defines: parse_defines(&a.defines)?,
        ffmpeg_dir: match &a.ffmpeg {
            Some(d) => Some(d.clone()),
            None => downloaded_ffmpeg(g),
        },
        backend: BackendOptions {
            backend: a.backend.map(|b| b.as_str().to_string()),
            rocm: a.rocm.clone(),
            arch: a.arch.clone(),
            cuda_arch: a.cuda_arch.clone(),
        },
        ..BuildOptions::default()
    };
    let _lock = if a.dry_run {
        None
    } else {
        lock_venv(a.venv.as_deref(), a.no_wait)?
    };
    let req = BuildRequest {
        venv: a.venv.clone(),
        machine_file: a.machine.clone(),
        dry_run: a.dry_run,
        json: a.json,
    };
    build_locked(recipe, opts, &req, g)
}

/// One build, the venv lock held by the caller (unless a dry run).
pub(crate) struct BuildRequest {
    pub venv: Option<PathBuf>,
    pub machine_file: Option<PathBuf>,
    pub dry_run: bool,
    pub json: bool,
}

pub(crate) fn build_locked(
    recipe: &rocbuild_recipe::Recipe,
    mut opts: BuildOptions,
    a: &BuildRequest,
    g: &Global,
) -> Result<ExitCode> {
    let machine: Machine = match &a.machine_file {
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
            ffmpeg_dir: opts.ffmpeg_dir.clone(),
            want_ffmpeg: recipe.raw.needs.ffmpeg,
            // A recipe with a rocm backend may pick it (ROCm torch + SDK): look for SDKs
            // and GPUs unless another backend was asked for.
            want_rocm: opts.backend.rocm.is_some()
                || !opts.backend.arch.is_empty()
                || opts.backend.backend.as_deref() == Some("rocm"),
            // Without a backend asked for, rocm is picked only for a ROCm torch.
            want_rocm_with_rocm_torch: opts.backend.backend.is_none()
                && recipe.backends().iter().any(|b| b == "rocm"),
            arch: opts.backend.arch.clone(),
            // A CUDA build without --cuda-arch builds for the GPUs found here.
            want_cuda_gpu: opts.backend.cuda_arch.is_empty()
                && recipe.backends().iter().any(|b| b == "cuda")
                && !matches!(opts.backend.backend.as_deref(), Some("cpu") | Some("rocm")),
        })?,
    };
    let verbosity = verbosity(g);
    if verbosity != Verbosity::Quiet && !a.dry_run {
        eprintln!(
            "venv: {} (from {})",
            machine.venv.root.display(),
            machine.venv.chosen_by
        );
    }
    opts.jobs = Some(opts.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    }));
    opts.cache = cache(g)?;
    opts.mirror = std::env::var_os(env::ROCBUILD_MIRROR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
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
