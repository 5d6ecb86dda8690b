//! `run()`: execute a [`Plan`]. Each stage is skipped when its inputs are unchanged, so a
//! rerun with nothing changed does no build and no install.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{EngineError, Result};

use crate::install::stage::{Built, Staged, StagedExtra};
use rocbuild_venv::install;
use rocbuild_venv::manifest::{self, sha256_file, Manifest};

use crate::from_run::FromRun;
use crate::install::python_part::{PartInstall, PythonPart};
use crate::interrupt;
use crate::plan::Plan;
use crate::source;
use crate::step::{Background, RunLog, Verbosity};
use rocbuild_venv::ownership::{self, Package};

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub recipe: String,
    pub version: String,
    pub commit: Option<String>,
    /// false: everything was already installed and verified with these inputs.
    pub changed: bool,
    pub installed: Vec<String>,
    pub parked: Vec<String>,
    pub verify_output: Vec<String>,
    pub manifest: PathBuf,
    pub log: PathBuf,
    /// The compiler cache this run's build used, with its hits and misses.
    pub compiler_cache: Option<rocbuild_venv::manifest::CompilerCacheRecord>,
    /// Installed from this wheel (its URL or path) instead of built.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wheel: Option<String>,
    /// The verification could not run here: why (the install is kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unverified: Option<String>,
    /// Releases upstream has that the recipe does not know yet (as in the plan), set by the
    /// use case that asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<rocbuild_recipe::upstream::Notice>,
}

impl Outcome {
    /// What a run that installed nothing new says: the manifest's files, as they are.
    fn unchanged(
        plan: &Plan,
        m: &Manifest,
        commit: Option<String>,
        log: &RunLog,
        compiler_cache: Option<rocbuild_venv::manifest::CompilerCacheRecord>,
    ) -> Outcome {
        Outcome {
            recipe: plan.recipe.clone(),
            version: plan.version.clone(),
            commit,
            changed: false,
            installed: m.files.iter().map(|f| f.path.clone()).collect(),
            parked: m.parked.clone(),
            verify_output: Vec::new(),
            manifest: manifest::path(&plan.install.site, &plan.recipe),
            log: log.path.clone(),
            compiler_cache,
            wheel: None,
            unverified: m.unverified.clone(),
            upstream: plan.upstream.clone(),
        }
    }
}

/// What an interrupted run says it undid, before anything was moved into the venv.
const NOTHING_INSTALLED: &str =
    "nothing was installed: the staging area was removed and the venv is as it was. ";
/// ... and after the swap.
const ROLLED_BACK: &str =
    "the install was rolled back: the venv is byte for byte as it was, the staging area removed. ";

/// Build, install and verify.
pub fn run(plan: &Plan, verbosity: Verbosity) -> Result<Outcome> {
    let site = &plan.install.site;
    let mut log = RunLog::create(&plan.log_dir, &plan.recipe, verbosity)?;
    match install::recover(site)? {
        install::Recovered::RolledBack => {
            log.note("an interrupted earlier run was found and rolled back")
        }
        install::Recovered::Completed => {
            log.note("an interrupted earlier run was found and completed")
        }
        install::Recovered::Salvaged => log.note(
            "an interrupted earlier run without a journal rocbuild could trust was salvaged (.rocbuild/salvage/)",
        ),
        install::Recovered::Nothing => {}
    }
    // A build against a torch that does not import cannot be verified: say so before the
    // compile, not after. `import torch` takes a second or more, so it runs beside the fetch
    // and the configure. Skipped when the last install had these very inputs (most likely
    // a no-op rerun, which must stay fast).
    let previous = manifest::read(site, &plan.recipe);
    if let Some(p) = &plan.prebuilt {
        return run_prebuilt(plan, p, log, previous);
    }
    // A source this machine cannot reach fails now, before any tool or pip install starts.
    crate::source::preflight(&plan.source, plan.proxied)?;
    let likely_noop = previous
        .as_ref()
        .is_some_and(|m| m.fingerprint == plan.fingerprint);
    // (A Windows venv's Python runs under Wine here: its verification imports torch anyway.)
    let torch_check = if plan.torch_version.is_some() && !likely_noop && plan.cross.is_none() {
        Some(start_torch_import(plan)?)
    } else {
        None
    };
    // A Python part from the index does not depend on the build: pip fetches it into the
    // transaction's staging area while the build works (the transaction is abandoned, the venv
    // untouched, if the build fails).
    let early = match &plan.python_part {
        Some(
            pp @ PythonPart {
                install: PartInstall::Pip(install),
                build: None,
                extension: None,
                ..
            },
        ) => {
            let created = install::begin(site)?;
            log.note(&format!(
                "python part: {}=={} (pip, --no-deps, beside the build)",
                pp.distribution, pp.version
            ));
            match log.start("pip install (python part)", install) {
                Ok(bg) => Some(EarlyPip { created, bg }),
                Err(e) => {
                    install::abandon(site, created);
                    return Err(e);
                }
            }
        }
        _ => None,
    };
    let built = build(plan, &mut log, torch_check);
    let (commit, built, _build_lock, cache_record) = match built {
        Ok(v) => v,
        Err(e) => {
            if let Some(ep) = early {
                ep.bg.cancel();
                install::abandon(site, ep.created);
            }
            return Err(interrupt::undone(e, NOTHING_INSTALLED));
        }
    };

    // A package from the index is (re)installed only when pip has another version (then pip
    // is already running: `early`); one built from the checkout is part of the build, so the
    // usual inputs decide.
    let unchanged = previous
        .as_ref()
        .filter(|m| early.is_none() && up_to_date(plan, m, commit.as_deref(), &built, site));
    if let Some(m) = unchanged {
        log.note("up to date: nothing changed since the last install");
        return Ok(Outcome::unchanged(plan, m, commit, &log, cache_record));
    }

    install_and_verify(plan, &mut log, commit, built, previous, early, cache_record)
}

/// Install the wheel the plan chose instead of building: its libraries (unpacked under the
/// cache) are the artifacts, the wheel itself the Python part; then the build's staging, swap,
/// verification and manifest. Nothing is fetched, configured or compiled.
fn run_prebuilt(
    plan: &Plan,
    p: &crate::index::PrebuiltInstall,
    mut log: RunLog,
    previous: Option<Manifest>,
) -> Result<Outcome> {
    let site = &plan.install.site;
    log.note(&format!("prebuilt: {} ({})", p.file, p.url));
    let built = crate::install::stage::prebuilt_artifacts(&plan.install, &p.unpacked)?;
    let unchanged = previous.as_ref().filter(|m| {
        m.prebuilt.as_ref().is_some_and(|r| r.sha256 == p.sha256)
            && up_to_date(plan, m, p.commit.as_deref(), &built, site)
    });
    if let Some(m) = unchanged {
        log.note("up to date: this wheel is installed as it was");
        let mut out = Outcome::unchanged(plan, m, p.commit.clone(), &log, None);
        out.wheel = Some(p.url.clone());
        return Ok(out);
    }
    let mut out = install_and_verify(
        plan,
        &mut log,
        p.commit.clone(),
        built,
        previous,
        None,
        None,
    )?;
    out.wheel = Some(p.url.clone());
    Ok(out)
}

/// pip, started before the build (see [`run`]), and whether its transaction made `.rocbuild/`.
struct EarlyPip {
    created: bool,
    bg: Background,
}

/// What a build leaves: the commit, the artifacts, the build tree's lock (held until the
/// artifacts are staged) and what the compiler cache did.
type BuildResult = (
    Option<String>,
    Built,
    crate::cache_lock::CacheLock,
    Option<rocbuild_venv::manifest::CompilerCacheRecord>,
);

/// Fetch, configure, build and install into the staging prefix; the artifacts, the commit,
/// and the build tree's lock (held until the artifacts are staged).
fn build(plan: &Plan, log: &mut RunLog, torch_check: Option<duct::Handle>) -> Result<BuildResult> {
    let mut check = torch_check;
    let built = fetch_and_build(plan, log, &mut check);
    match (&built, check.take()) {
        // Stopped by a signal: the `import torch` child goes too.
        (Err(EngineError::Interrupted { .. }), Some(c)) => {
            crate::interrupt::stop_group(&c.pids(), || matches!(c.try_wait(), Ok(Some(_))));
            let _ = c.kill();
        }
        // A torch that does not import is what to fix first, whatever else went wrong.
        (Err(_), Some(c)) => torch_imported(plan, c)?,
        _ => {}
    }
    built
}

/// The compilers' temp dir (build_system::scratch), emptied as a build in this tree starts, under the
/// tree's lock (concurrent runs on other venvs share a build tree). It is kept afterwards: the
/// reproduce command a failed step prints sets it, and must work when pasted.
fn fresh_scratch(dir: &Path) -> Result<()> {
    let _ = fs_err::remove_dir_all(dir);
    fs_err::create_dir_all(dir).map_err(EngineError::io("create", dir))
}

fn fetch_and_build(
    plan: &Plan,
    log: &mut RunLog,
    torch_check: &mut Option<duct::Handle>,
) -> Result<BuildResult> {
    interrupt::check("the start")?;
    // The build tools first: a machine that cannot get them learns it before the fetch.
    if let Some(t) = &plan.tools {
        crate::toolchain::tools_install::install_once(t, log)?;
    }
    // The optional libraries, in or out and why (the plan shows them too).
    for l in &plan.libraries {
        let state = if l.used { "in" } else { "out" };
        log.note(&format!("optional {}: {state}: {}", l.name, l.why));
    }
    let (_src, commit) = source::prepare::prepare(&plan.source, &plan.recipe_file, log)?;
    interrupt::check("the fetch")?;
    if let Some(c) = &plan.cross {
        crate::cross::prepare::prepare(c, log)?;
    }
    if let Some(pc) = &plan.ffmpeg_pc {
        crate::libraries::ffmpeg_pc::write_pc_files(pc, log)?;
    }
    // What the build system planned to write before its configure.
    crate::build_system::write_planned_files(&plan.to_build_run(), log)?;

    // Concurrent runs (on other venvs) may share this build tree: one builds it at a time.
    let build_lock = crate::cache_lock::CacheLock::acquire(&plan.build_dir)?;
    fresh_scratch(&plan.scratch.dir)?;
    let session = match &plan.compiler_cache {
        Some(c) => Some(crate::compiler_cache::run::Session::start(c, log)?),
        None => None,
    };
    let build_env = |cmd: &crate::command::Command| {
        let mut cmd = cmd.clone();
        if let Some(s) = &session {
            cmd.env.extend(s.env.clone());
        }
        plan.scratch.apply(&cmd)
    };
    let built = crate::build_system::build_first(&plan.to_build_run(), log, &build_env)
        .and_then(|()| compile(plan, log, torch_check, &build_env, commit.as_deref()));
    let cache_record = session.map(|s| s.finish(log));
    built?;
    if let Some(c) = &plan.install_prefix {
        log.run("install into the staging prefix", c)?;
    }

    let roots = (
        plan.prefix.as_path(),
        plan.build_dir.as_path(),
        plan.source.dir(),
    );
    let built = crate::install::stage::built_artifacts(&plan.install, roots)?;
    Ok((commit, built, build_lock, cache_record))
}

/// Configure (when this build tree was not configured from this commit) and compile, the
/// commands under the compiler cache's settings and the scratch temp dir (`build_env`).
fn compile(
    plan: &Plan,
    log: &mut RunLog,
    torch_check: &mut Option<duct::Handle>,
    build_env: &dyn Fn(&crate::command::Command) -> crate::command::Command,
    commit: Option<&str>,
) -> Result<()> {
    // Configure only when this build tree has not been configured from this commit.
    let system = plan.system();
    let titles = system.titles();
    let stamp = plan.build_dir.join(".rocbuild-configured");
    let stamp_text = format!(
        "{}\n{}",
        commit.unwrap_or("local"),
        plan.configure.shell_line()
    );
    if fs_err::read_to_string(&stamp).ok().as_deref() != Some(stamp_text.as_str())
        || !system
            .configured_marker()
            .is_some_and(|m| plan.build_dir.join(m).exists())
    {
        let step = titles.configure_step;
        log.note(&format!("{step} -> {}", plan.build_dir.display()));
        log.run(step, &build_env(&plan.configure))?;
        fs_err::write(&stamp, &stamp_text).map_err(EngineError::io("write", &stamp))?;
    }
    // The compile is the long part: a torch that does not import stops it as soon as that
    // is known (polled while the build runs), and is reported instead.
    interrupt::check("the configure")?;
    // Said once the build is done, and only when it did something: a no-op rerun (ninja: "no
    // work to do") prints no stray `build` line; the progress bar shows it while it runs.
    let lines = log.run_while(titles.build_step, &build_env(&plan.build), || {
        let out = torch_check.as_ref()?.try_wait().ok()??;
        torch_import_error(plan, out)
    })?;
    let steps = lines
        .iter()
        .filter_map(|l| crate::step::ninja_progress(l))
        .map(|(_, total)| total)
        .max();
    if let Some(n) = steps {
        log.note(&format!("build: {n} steps"));
    }
    if let Some(check) = torch_check.take() {
        torch_imported(plan, check)?;
    }
    Ok(())
}

/// Start `import torch` in a fresh process of the venv's Python (it may crash or hang: a
/// child, never us). It runs while the source is fetched, configured and built;
/// [`torch_imported`] waits for it.
fn start_torch_import(plan: &Plan) -> Result<duct::Handle> {
    let e = crate::step::low_priority(duct::cmd(&plan.python, ["-B", "-c", "import torch"]));
    crate::command::own_process_group(e)
        .env(crate::command::NO_BYTECODE, "1")
        .env_remove("PYTHONPATH")
        .stdin_null()
        .stdout_null()
        .stderr_capture()
        .unchecked()
        .start()
        .map_err(EngineError::io("run", &plan.python))
}

/// Whether the `import torch` started by [`start_torch_import`] worked; its last words when
/// it did not.
fn torch_imported(plan: &Plan, check: duct::Handle) -> Result<()> {
    let out = check
        .into_output()
        .map_err(EngineError::io("run", &plan.python))?;
    match torch_import_error(plan, &out) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The error to report when the `import torch` child ended with `out`; None if it worked.
fn torch_import_error(plan: &Plan, out: &std::process::Output) -> Option<EngineError> {
    if out.status.success() {
        return None;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no message)")
        .trim()
        .to_string();
    Some(EngineError::TorchImport {
        site: plan.install.site.display().to_string(),
        version: plan.torch_version.clone().unwrap_or_default(),
        error: last,
        python: plan.python.display().to_string(),
    })
}

fn up_to_date(
    plan: &Plan,
    m: &Manifest,
    commit: Option<&str>,
    built: &BTreeMap<String, (PathBuf, String)>,
    site: &Path,
) -> bool {
    if m.fingerprint != plan.fingerprint || m.source_commit.as_deref() != commit {
        return false;
    }
    for (rel, (_, sha)) in built {
        match m.files.iter().find(|f| &f.path == rel) {
            Some(f) if f.built_sha256.as_deref() == Some(sha.as_str()) => {}
            _ => return false,
        }
    }
    m.files.iter().all(|f| {
        let p = site.join(&f.path);
        std::fs::metadata(&p).is_ok_and(|md| md.len() == f.size)
            && sha256_file(&p).is_ok_and(|(h, _)| h == f.sha256)
    })
}

fn install_and_verify(
    plan: &Plan,
    log: &mut RunLog,
    commit: Option<String>,
    built: Built,
    previous: Option<Manifest>,
    early: Option<EarlyPip>,
    cache_record: Option<rocbuild_venv::manifest::CompilerCacheRecord>,
) -> Result<Outcome> {
    let site = &plan.install.site;
    let (created, mut pip) = match early {
        Some(ep) => (ep.created, Some(ep.bg)),
        None => (install::begin(site)?, None),
    };
    let mut staged_extra = StagedExtra {
        compiler_cache: cache_record.clone(),
        ..StagedExtra::default()
    };
    let staged = match crate::install::stage::stage(
        &plan.to_stage(),
        log,
        &built,
        &mut pip,
        &mut staged_extra,
    )
    .and_then(|s| interrupt::check("the install").map(|()| s))
    {
        Ok(s) => s,
        Err(e) => {
            if let Some(bg) = pip.take() {
                bg.cancel();
            }
            install::abandon(site, created);
            return Err(interrupt::undone(e, NOTHING_INSTALLED));
        }
    };
    let Staged {
        new,
        park,
        installed,
    } = staged;

    log.note(&format!("install -> {}", plan.install.dest.display()));
    // rocbuild takes the package over unless it still holds it as its last install left it:
    // then the package as it is now becomes the baseline `restore` gives back. (The same
    // package the manifest's `ownership` names: `Manifest::from_run`.)
    let package = Package {
        distribution: plan.install.distribution.clone(),
        roots: vec![plan.install.import_dir.clone()],
    };
    let holds = previous.as_ref().is_some_and(|m| ownership::holds(site, m));
    let swapped = install::swap(
        site,
        &plan.recipe,
        created,
        &new,
        &park,
        (!holds).then_some(&package),
    )?;
    let (swapped, verify_output) = verify(plan, log, swapped)?;
    let mut m = Manifest::from_run(
        plan,
        commit.clone(),
        installed.clone(),
        park.clone(),
        &staged_extra,
        previous.as_ref(),
    );
    if !holds && plan.python_part.is_none() {
        // The pure-Python part is someone else's (it is in the baseline), not rocbuild's.
        m.python_part = None;
    }
    // The last moment to stop: after the commit point the install is finished whatever comes.
    if let Err(e) = interrupt::check("the verification") {
        swapped.roll_back()?;
        return Err(interrupt::undone(e, ROLLED_BACK));
    }
    swapped.commit(&m, previous.as_ref())?;
    let mut out = Outcome::unchanged(plan, &m, commit, log, cache_record);
    out.changed = true;
    out.verify_output = verify_output;
    out.unverified = plan.unverified.clone();
    Ok(out)
}

/// The swapped-in install verified in a fresh Python (the recipe's `[verify]`): its output,
/// or the swap rolled back and the reason (a signal, or the verification's own error).
fn verify(
    plan: &Plan,
    log: &mut RunLog,
    swapped: install::Swapped,
) -> Result<(install::Swapped, Vec<String>)> {
    // A signal during the swap (or before the verification) undoes it.
    if let Err(e) = interrupt::check("the install") {
        swapped.roll_back()?;
        return Err(interrupt::undone(e, ROLLED_BACK));
    }
    let Some(v) = &plan.verify else {
        return Ok((swapped, Vec::new()));
    };
    log.note("verify (fresh Python, no LD_LIBRARY_PATH)");
    match log.run("verify", v) {
        Ok(out) => Ok((swapped, out)),
        Err(e @ EngineError::Interrupted { .. }) => {
            swapped.roll_back()?;
            Err(interrupt::undone(e, ROLLED_BACK))
        }
        Err(e) => {
            swapped.roll_back()?;
            let output = match e {
                EngineError::Step { tail, .. } => tail,
                other => other.to_string(),
            };
            Err(EngineError::Verify {
                output,
                log: log.path.display().to_string(),
            })
        }
    }
}
