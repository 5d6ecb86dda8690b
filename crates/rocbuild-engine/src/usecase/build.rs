//! One build: lock the venv, describe the machine, plan, run.

use std::path::PathBuf;

use rocbuild_probe::{Machine, ProbeOptions, Venv};
use rocbuild_recipe::Recipe;
use rocbuild_venv::{Backend, BuildOptions};

use rocbuild_venv::lock::VenvLock;

use super::{locate, Reporter, Settings};
use crate::context::Context;
use crate::error::{EngineError, Result};
use crate::plan::{plan, Plan};
use crate::quick;
use crate::run::{run, Outcome};
use crate::step::Verbosity;

pub struct BuildRequest<'a> {
    pub recipe: &'a Recipe,
    pub options: BuildOptions,
    /// The venv the command chose (None with `--machine`: nothing of this machine is read).
    pub venv: Option<Venv>,
    /// `--machine FILE`: plan for this machine instead of probing.
    pub machine: Option<Machine>,
    pub dry_run: bool,
    pub no_wait: bool,
    pub verbosity: Verbosity,
    /// The caller holds the venv's lock already (`rebuild`): it is not taken again.
    pub lock_held: bool,
}

pub enum Built {
    /// `--dry-run`: the plan, nothing touched.
    Planned(Box<Plan>),
    Ran {
        plan: Box<Plan>,
        outcome: Outcome,
    },
    /// Nothing the last run for this very request depended on has changed: answered from
    /// its record without probing or building (see `quick`).
    Unchanged {
        dest: PathBuf,
        outcome: Outcome,
    },
    /// The index's own wheel works here: nothing built (`--no-binary` builds anyway).
    StockWorks(Box<Plan>),
}

/// What the probe must look at for this recipe and these options.
fn probe_options(recipe: &Recipe, opts: &BuildOptions) -> ProbeOptions {
    let b = &opts.backend;
    let has = |x: &str| recipe.backends().iter().any(|r| r == x);
    ProbeOptions {
        ffmpeg_dir: opts.ffmpeg_dir.clone(),
        winsysroot: opts.winsysroot.clone(),
        python_headers: opts.python_headers.clone(),
        want_ffmpeg: recipe.raw.needs.ffmpeg,
        // A recipe with a rocm backend may pick it (ROCm torch + SDK): look for SDKs and
        // GPUs unless another backend was asked for.
        want_rocm: b.rocm.is_some() || !b.arch.is_empty() || b.backend == Some(Backend::Rocm),
        // Without a backend asked for, rocm is picked only for a ROCm torch.
        want_rocm_with_rocm_torch: b.backend.is_none() && has("rocm"),
        gpu_named: !b.arch.is_empty(),
        // A CUDA build without --cuda-arch builds for the GPUs found here.
        want_cuda_gpu: b.cuda_arch.is_empty()
            && has("cuda")
            && !matches!(b.backend, Some(Backend::Cpu) | Some(Backend::Rocm)),
        libraries: recipe
            .raw
            .needs
            .library
            .iter()
            .map(|l| rocbuild_probe::LibrarySpec {
                name: l.name.clone(),
                headers: l.headers.clone(),
                libs: l.libs.clone(),
            })
            .collect(),
    }
}

/// What a run (not a dry run) says before it starts: the backend's notes and warnings, and the
/// compiler it builds with and where it was found (a Windows host's developer prompt, Visual
/// Studio, LLVM; a CUDA build's host compiler), as the plan says them.
fn say_before_run(plan: &Plan, verbosity: Verbosity, reporter: &mut dyn Reporter) {
    let (notes, warnings) = plan.backend.before_run();
    let compilers = plan.compiler_found.as_ref().map(|c| c.line());
    let compilers = compilers
        .into_iter()
        .chain(plan.compiler.as_ref().map(|c| c.line()));
    let said = verbosity != Verbosity::Quiet;
    for n in notes.iter().filter(|_| said) {
        reporter.note(&format!("note: {n}"));
    }
    for w in &warnings {
        reporter.note(&format!("warning: {w}"));
    }
    for line in compilers.filter(|_| said) {
        reporter.note(&format!("note: compiler: {line}"));
    }
}

/// `--index` / `--find-links`: list the wheels offered, judge them by name; unless this is a
/// dry run, download and check the fitting ones in order until one passes, and plan its
/// install instead of the build. Each wheel passed over is said, one line each.
fn from_index(
    plan: Plan,
    machine: &Machine,
    settings: &Settings,
    dry_run: bool,
    reporter: &mut dyn Reporter,
) -> Result<Plan> {
    // The venv's wheel tags, from what the probe asked its Python (not asked again); a
    // `--machine` plan without a Python version has none.
    let py = &machine.target.python;
    let tags = (!py.version.is_empty()).then(|| {
        crate::build_system::cmake::extension::tags(
            &py.version,
            &py.ext_suffix,
            &py.platform,
            machine.target.platform.os,
        )
    });
    let mut index = crate::prebuilt::fetch::look(&plan, tags)?;
    let mut chosen = None;
    if !dry_run {
        for c in index.candidates.iter_mut().filter(|c| c.rejected.is_none()) {
            match crate::prebuilt::fetch::fetch_and_check(
                &plan,
                machine,
                c,
                &settings.cache,
                &settings.env.probe,
            ) {
                Ok(p) => {
                    chosen = Some(p);
                    break;
                }
                Err(reason) => c.rejected = Some(reason),
            }
        }
        for c in index.candidates.iter().filter(|c| c.rejected.is_some()) {
            reporter.note(&format!(
                "index: passed over {}: {}",
                c.listed.file,
                c.rejected.as_deref().unwrap_or_default()
            ));
        }
        if chosen.is_none() {
            reporter.note(&format!(
                "index: no wheel of {} {} fits this machine ({}): building from source",
                plan.install.distribution, plan.version, index.wanted
            ));
        }
    }
    let mut plan = match chosen {
        Some(p) => {
            reporter.note(&format!("index: installing {} ({})", p.file, p.url));
            crate::prebuilt::install_plan(&plan, machine, p)?
        }
        None => plan,
    };
    plan.index = Some(index);
    Ok(plan)
}

/// Everything the planner takes besides the recipe, the machine and the options: the
/// settings, and what is found on PATH for this recipe (the planner starts no process).
fn context(
    settings: &Settings,
    opts: &BuildOptions,
    recipe: &Recipe,
    machine: &Machine,
) -> Context {
    let env = &settings.env;
    Context {
        cache: settings.cache.clone(),
        mirror: settings.mirror.clone(),
        compiler_cache: settings.compiler_cache.clone(),
        jobs: opts.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
        }),
        user_compiler: env.user_compiler,
        wheels_compiler: crate::toolchain::compiler_scan::wheels_compiler(
            recipe,
            machine,
            env.path.as_deref(),
            &env.cwd,
        ),
        host_os: machine.host.platform.os,
        wine_timeout: env.wine_timeout,
        proxied: env.proxied,
        sdists: env.sdists.clone(),
        sdist_index: env.sdist_index.clone(),
    }
}

pub fn build(req: BuildRequest, settings: &Settings, reporter: &mut dyn Reporter) -> Result<Built> {
    let take_lock = !req.lock_held;
    let mut opts = req.options;
    if opts.ffmpeg_dir.is_none() {
        opts.ffmpeg_dir = settings.downloaded_ffmpeg.clone();
    }
    // A release the recipe does not list (`--version`, `--rev`) is resolved, or refused,
    // before anything else; what upstream has that the recipe lacks is said (issue 43).
    let unlisted = super::upstream::for_build(req.recipe, &opts, settings)?;
    let recipe = unlisted.as_ref().unwrap_or(req.recipe);
    let upstream = super::upstream::notice_for(recipe, settings);
    if let (Some(n), false) = (&upstream, req.dry_run) {
        reporter.note(&format!("note: {}", n.line()));
    }
    // Lock the venv before probing it (a run that waited must see what the other one left).
    // A venv that cannot be located is left to the probe, which says why in full.
    let layout = match (&req.machine, req.dry_run) {
        (None, false) => req.venv.as_ref().and_then(|v| locate(v).ok()),
        _ => None,
    };
    let _lock = match layout.as_ref().filter(|_| take_lock) {
        // run() finishes or undoes a killed run's install, under this lock, and logs it.
        Some(l) => Some(VenvLock::acquire(&l.site, !req.no_wait, &mut |pid| {
            reporter.waiting(pid)
        })?),
        None => None,
    };
    // The no-op fast path, under the lock: a real run with a request that was answered
    // before, and nothing it depended on changed since.
    let quick_key = (req.machine.is_none() && !req.dry_run && quick::eligible(&opts)).then(|| {
        quick::key(
            recipe,
            &opts,
            req.venv.as_ref().map(|v| v.root.as_path()),
            settings,
        )
    });
    if let Some(k) = &quick_key {
        if let Some((dest, mut outcome)) = quick::check(&settings.cache, k) {
            outcome.upstream = upstream;
            return Ok(Built::Unchanged { dest, outcome });
        }
        quick::forget(&settings.cache, k);
    }
    let machine = match (req.machine, &req.venv) {
        (Some(m), _) => m,
        (None, None) => return Err(rocbuild_probe::ProbeError::NoVenv.into()),
        (None, Some(venv)) => {
            let mut m =
                rocbuild_probe::probe(venv, &probe_options(recipe, &opts), &settings.env.probe)?;
            let cuda = crate::toolchain::cuda_setup::CudaRequest {
                cache: &settings.cache,
                wheels: &settings.env.cuda_wheels,
                env: &settings.env.probe,
                dry_run: req.dry_run,
                version: opts.version.as_deref(),
            };
            crate::toolchain::cuda_setup::for_build(recipe, &mut m, &opts, &cuda, &mut |n| {
                reporter.note(n)
            })?;
            m
        }
    };
    // The lock and the install name the same site-packages, or nothing is done.
    if let Some(l) = &layout {
        let same = dunce::canonicalize(&l.site).ok()
            == dunce::canonicalize(&machine.target.python.site_packages).ok();
        if !same {
            return Err(EngineError::Usage {
                option: "venv".into(),
                reason: format!(
                    "its Python installs into {}, but its pyvenv.cfg names {}",
                    machine.target.python.site_packages.display(),
                    l.site.display()
                ),
                help: Some(
                    "the venv is inconsistent: recreate it (python3 -m venv --clear, or uv venv)"
                        .into(),
                ),
            });
        }
    }
    if req.verbosity != Verbosity::Quiet && !req.dry_run {
        reporter.note(&format!(
            "venv: {} (from {})",
            machine.target.venv.root.display(),
            machine.target.venv.chosen_by
        ));
    }
    let ctx = context(settings, &opts, recipe, &machine);
    let mut plan = plan(recipe, &machine, &opts, &ctx)?;
    plan.upstream = upstream;
    if !plan.options.index.is_empty() || !plan.options.find_links.is_empty() {
        plan = from_index(plan, &machine, settings, req.dry_run, reporter)?;
    }
    if let Some(missing) = plan.missing_prerequisites.take() {
        // Asked an index first; a build is needed after all unless a wheel was chosen (a
        // dry run fetches none: one that fits by its name will do).
        let fits = plan.prebuilt.is_some()
            || (req.dry_run
                && plan
                    .index
                    .as_ref()
                    .is_some_and(|i| i.candidates.iter().any(|c| c.rejected.is_none())));
        if !fits {
            return Err(missing.into_error());
        }
    }
    if !req.dry_run {
        say_before_run(&plan, req.verbosity, reporter);
    }
    if req.dry_run {
        return Ok(Built::Planned(Box::new(plan)));
    }
    let stock_works = plan.stock.as_ref().is_some_and(|s| s.works);
    if stock_works && take_lock && !opts.no_binary && plan.prebuilt.is_none() {
        return Ok(Built::StockWorks(Box::new(plan)));
    }
    let outcome = run(&plan, req.verbosity)?;
    if let Some(k) = &quick_key {
        quick::record(
            &settings.cache,
            k,
            &machine,
            &plan,
            &outcome,
            settings.env.path.as_deref(),
        );
    }
    Ok(Built::Ran {
        plan: Box::new(plan),
        outcome,
    })
}
