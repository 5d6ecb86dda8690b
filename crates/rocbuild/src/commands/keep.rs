//! The commands that keep a build working: status, rebuild, schedule, restore, wheel, clean.
//! Each calls one use case of rocbuild-engine and renders what it returns.

use std::path::{Path, PathBuf};

use miette::{IntoDiagnostic, Result, WrapErr};
use rocbuild_engine::{schedule as sched, usecase, EngineError};
use rocbuild_probe::Os;
use rocbuild_recipe::RecipeSet;
use rocbuild_venv::manifest::Kind;
use rocbuild_venv::status::{State, VenvStatus};

use crate::cli::{
    CleanArgs, EveryArg, Global, PublishArgs, RebuildArgs, RestoreArgs, ScheduleAction,
    ScheduleArgs, SchedulerKind, StatusArgs, WheelArgs,
};
use crate::settings as env;
use crate::{ExitStatus, Stderr};

pub fn status(recipes: &RecipeSet, a: &StatusArgs, g: &Global) -> Result<ExitStatus> {
    let mut r = usecase::status(&env::venv(&a.venv)?, recipes, &mut Stderr)?;
    // What upstream has beyond each build's recipe (issue 43); without a cache, nothing.
    if let Ok(settings) = env::settings(g) {
        rocbuild_engine::upstream::for_status(&mut r.status, recipes, &settings);
    }
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&r.status).into_diagnostic()?
        );
    } else {
        print_status(&r.root, &r.status, r.busy.as_deref());
    }
    Ok(if r.status.needs_action() || r.busy.is_some() {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

fn print_status(root: &Path, st: &VenvStatus, busy: Option<&str>) {
    if let Some(pid) = busy {
        outln!("a rocbuild run is installing into this venv now (pid {pid}); ask again when it is done");
    }
    if st.recipes.is_empty() && st.unreadable.is_empty() {
        outln!("no rocbuild builds in {}", root.display());
        return;
    }
    for r in &st.recipes {
        outln!("{} {}: {}", r.recipe, r.version, r.state.as_str());
        if let Some(base) = &r.rules_of {
            outln!(
                "  release: {} is not in the recipe: built with {base}'s rules",
                r.version
            );
        }
        if let Some(n) = &r.upstream {
            outln!("  upstream: {}", n.line());
        }
        if let Some(why) = &r.unverified {
            outln!("  unverified: {why}");
        }
        for why in &r.reasons {
            outln!("  stale: {why}");
        }
        for f in &r.overwritten {
            outln!("  overwritten: {f} (pip reinstalled the wheel?)");
        }
        for f in &r.missing {
            outln!("  missing: {f}");
        }
        // The command status chose (`--json` carries the same): a repair is made again, a
        // build rebuilt.
        if let Some(fix) = &r.fix {
            if r.state == State::Missing {
                let again = match r.kind {
                    Kind::Build => "reinstall",
                    Kind::Repair => "repair again",
                };
                outln!(
                    "  fix: {fix} ({again}), or rocbuild restore {} (forget it)",
                    r.recipe
                );
            } else {
                outln!("  fix: {fix}");
            }
        }
    }
    for u in &st.unreadable {
        outln!("unreadable manifest {}: {}", u.manifest.display(), u.error);
    }
}

pub fn rebuild(recipes: &RecipeSet, a: &RebuildArgs, g: &Global) -> Result<ExitStatus> {
    let settings = crate::settings::settings(g)?;
    let venv = env::venv(&a.venv)?;
    let done = usecase::rebuild(
        usecase::RebuildRequest {
            recipes,
            names: &a.names,
            if_stale: a.if_stale,
            venv: &venv,
            no_wait: a.no_wait,
            verbosity: crate::verbosity(g),
        },
        &settings,
        &mut Stderr,
        &mut |r, why| {
            // A scheduled run's log says when, as people read time (UTC, to the second).
            let stamp = jiff::Timestamp::now()
                .round(jiff::Unit::Second)
                .unwrap_or_else(|_| jiff::Timestamp::now());
            let why = if why.is_empty() {
                String::new()
            } else {
                format!(": {why}")
            };
            outln!(
                "[{stamp}] rebuilding {} ({}{why})",
                r.recipe,
                r.state.as_str()
            );
        },
    )?;
    let mut failed = 0;
    for r in done {
        match r.result {
            Ok(usecase::Built::Ran { plan, outcome }) => {
                let source = recipes
                    .get(&r.recipe)
                    .map(|x| x.raw.source.origin())
                    .unwrap_or_default();
                super::build::print_outcome(
                    &plan.install.dest,
                    &outcome,
                    &source,
                    crate::verbosity(g),
                );
            }
            Ok(usecase::Built::Unchanged { dest, outcome }) => {
                let source = recipes
                    .get(&r.recipe)
                    .map(|x| x.raw.source.origin())
                    .unwrap_or_default();
                super::build::print_outcome(&dest, &outcome, &source, crate::verbosity(g));
            }
            // (A rebuild never stops at the stock wheel: the user built this package before.)
            Ok(usecase::Built::Planned(_) | usecase::Built::StockWorks(_)) => {}
            Err(e) => {
                errln!("{:?}", miette::Report::new(e));
                failed += 1;
            }
        }
    }
    Ok(if failed > 0 {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

pub fn restore(a: &RestoreArgs) -> Result<ExitStatus> {
    let (site, r) = usecase::restore(&env::venv(&a.venv)?, &a.recipe, a.no_wait, &mut Stderr)?;
    if r.released {
        outln!(
            "{}: another installer replaced rocbuild's build since; its install is left as it is, \
             rocbuild's record of the package is gone ({})",
            r.recipe,
            site.display()
        );
    } else {
        outln!(
            "{} restored to the venv as it was before rocbuild took it over ({})",
            r.recipe,
            site.display()
        );
    }
    for f in &r.restored {
        outln!("  restored: {f}");
    }
    for f in &r.removed {
        outln!("  removed:  {f}");
    }
    for f in &r.left {
        outln!("  left:     {f} (not rocbuild's: another installer's, or added by hand)");
    }
    Ok(ExitStatus::Success)
}

pub fn wheel(a: &WheelArgs) -> Result<ExitStatus> {
    let w = usecase::wheel(&env::venv(&a.venv)?, &a.recipe, &a.out, &mut Stderr)?;
    outln!("{}", w.path.display());
    if let Some(t) = &w.requires_torch {
        errln!(
            "{} files; version {}; requires torch=={t}",
            w.files,
            w.version
        );
    }
    Ok(ExitStatus::Success)
}

pub fn publish(a: &PublishArgs, g: &Global) -> Result<ExitStatus> {
    let cache = env::cache(g)?;
    let p = usecase::publish(
        &env::venv(&a.venv)?,
        &a.recipe,
        &a.index,
        &cache,
        a.dry_run,
        &mut Stderr,
    )?;
    if a.dry_run {
        outln!("{} (not uploaded)", p.wheel.display());
    } else {
        outln!("{} {} published to {}", a.recipe, p.version, p.index);
        outln!("  wheel: {}", p.wheel.display());
    }
    Ok(ExitStatus::Success)
}

pub fn clean(a: &CleanArgs, g: &Global) -> Result<ExitStatus> {
    use rocbuild_engine::clean::{human, remove, usage, Kind};
    let cache = env::cache(g)?;
    let mut kinds = Vec::new();
    if a.sources || a.all {
        kinds.push(Kind::Sources);
    }
    if a.builds || a.all {
        kinds.push(Kind::Builds);
    }
    if a.logs || a.all {
        kinds.push(Kind::Logs);
    }
    outln!("cache: {}", cache.display());
    let u = usage(&cache);
    let mut total = 0;
    for x in &u {
        total += x.bytes;
        let mark = if kinds.contains(&x.kind) {
            if a.dry_run {
                "  (would remove)"
            } else {
                "  (removing)"
            }
        } else {
            ""
        };
        outln!("  {:<8} {:>10}{mark}", x.kind.as_str(), human(x.bytes));
    }
    outln!("  {:<8} {:>10}", "total", human(total));
    if kinds.is_empty() {
        outln!("remove with --sources, --builds, --logs or --all (--dry-run to preview)");
    } else if !a.dry_run {
        let freed = remove(&cache, &kinds)?;
        outln!("freed {}", human(freed));
    }
    Ok(ExitStatus::Success)
}

fn job(a: &ScheduleArgs, g: &Global) -> Result<(sched::Job, sched::Dirs)> {
    let v = env::venv(&a.venv)?;
    let (home, config) = env::user_dirs().ok_or_else(|| EngineError::Usage {
        option: "HOME".into(),
        reason: "no home directory: HOME is not set".into(),
        help: Some("set HOME (and XDG_CONFIG_HOME if the config lives elsewhere)".into()),
    })?;
    let cache = env::cache(g)?;
    let id = sched::id_for(&v.root);
    let mut envs = Vec::new();
    if let Some(p) = env::environment().path {
        envs.push(("PATH".to_string(), p.to_string_lossy().into_owned()));
    }
    envs.push((env::ROCBUILD_CACHE.to_string(), cache.display().to_string()));
    let recipe_dirs: Vec<PathBuf> = env::recipe_dirs(g)
        .iter()
        .map(std::path::absolute)
        .collect::<std::io::Result<_>>()
        .into_diagnostic()?;
    if !recipe_dirs.is_empty() {
        let joined = std::env::join_paths(&recipe_dirs).into_diagnostic()?;
        envs.push((
            env::ROCBUILD_RECIPES.to_string(),
            joined.to_string_lossy().into_owned(),
        ));
    }
    if let Some(m) = env::mirror() {
        envs.push((
            env::ROCBUILD_MIRROR.to_string(),
            m.to_string_lossy().into_owned(),
        ));
    }
    let job = sched::Job {
        venv: v.root,
        exe: std::env::current_exe().into_diagnostic()?,
        log: cache.join("logs").join(format!("{id}.log")),
        every: match a.every {
            EveryArg::Hourly => sched::Every::Hourly,
            EveryArg::Daily => sched::Every::Daily,
            EveryArg::Weekly => sched::Every::Weekly,
        },
        env: envs,
    };
    Ok((job, sched::Dirs { home, config }))
}

pub fn schedule(a: &ScheduleArgs, g: &Global) -> Result<ExitStatus> {
    let (job, dirs) = job(a, g)?;
    let os = Os::current();
    let kind = match a.kind {
        Some(SchedulerKind::Systemd) => sched::Kind::Systemd,
        Some(SchedulerKind::Launchd) => sched::Kind::Launchd,
        Some(SchedulerKind::Schtasks) => sched::Kind::Schtasks,
        Some(SchedulerKind::Cron) => sched::Kind::Cron,
        None => sched::Kind::default_for(os, Path::new("/run/systemd/system").exists()),
    };
    match a.action {
        ScheduleAction::Install => {
            let s = sched::schedule(&job, kind, &dirs);
            for (p, text) in &s.files {
                if let Some(d) = p.parent() {
                    fs_create(d)?;
                }
                std::fs::write(p, sched::file_bytes(kind, text))
                    .into_diagnostic()
                    .wrap_err_with(|| format!("cannot write {}", p.display()))?;
                outln!("wrote {}", p.display());
            }
            if let Some(d) = s.log.parent() {
                fs_create(d)?;
            }
            if a.no_activate {
                outln!("activate with:");
                for act in &s.activate {
                    outln!("  {act}");
                }
            } else {
                for act in &s.activate {
                    sched::perform(act).map_err(|e| EngineError::Usage {
                        option: format!("schedule install --kind {}", kind.as_str()),
                        reason: format!("`{act}` failed: {e}"),
                        help: Some("the files are written; run the command by hand, or pick another scheduler with --kind (cron, systemd, launchd, schtasks)".to_string()),
                    })?;
                }
                outln!("scheduled ({}, {})", kind.as_str(), job.every.as_str());
            }
            outln!(
                "runs:  {} {}",
                job.exe.display(),
                rocbuild_engine::schedule::command_line(rocbuild_probe::Os::current(), &job.args())
            );
            outln!("log:   {}", s.log.display());
            Ok(ExitStatus::Success)
        }
        ScheduleAction::Remove => {
            let mut found = false;
            for k in sched::Kind::ALL {
                let s = sched::schedule(&job, k, &dirs);
                if !s.files.iter().any(|(p, _)| p.exists()) {
                    continue;
                }
                found = true;
                if a.no_activate {
                    for act in &s.deactivate {
                        outln!("deactivate with: {act}");
                    }
                } else {
                    for act in &s.deactivate {
                        if let Err(e) = sched::perform(act) {
                            errln!("warning: `{act}` failed: {e}");
                        }
                    }
                }
                for (p, _) in &s.files {
                    if p.exists() {
                        std::fs::remove_file(p)
                            .into_diagnostic()
                            .wrap_err_with(|| format!("cannot remove {}", p.display()))?;
                        outln!("removed {}", p.display());
                    }
                }
            }
            if !found {
                outln!("no schedule for {}", job.venv.display());
            }
            Ok(ExitStatus::Success)
        }
        ScheduleAction::Show => {
            let mut found = false;
            for k in sched::Kind::ALL {
                let s = sched::schedule(&job, k, &dirs);
                let present: Vec<&PathBuf> = s
                    .files
                    .iter()
                    .map(|(p, _)| p)
                    .filter(|p| p.exists())
                    .collect();
                if present.is_empty() {
                    continue;
                }
                found = true;
                outln!("{} schedule for {}", k.as_str(), job.venv.display());
                for p in present {
                    outln!("  file: {}", p.display());
                }
                outln!(
                    "  runs: {} {}",
                    job.exe.display(),
                    rocbuild_engine::schedule::command_line(
                        rocbuild_probe::Os::current(),
                        &job.args()
                    )
                );
                let state = if s.log.exists() { "" } else { " (no run yet)" };
                outln!("  log:  {}{state}", s.log.display());
            }
            if !found {
                outln!(
                    "no schedule for {} (rocbuild schedule install makes one; it would log to {})",
                    job.venv.display(),
                    job.log.display()
                );
            }
            Ok(ExitStatus::Success)
        }
    }
}

fn fs_create(d: &Path) -> Result<()> {
    std::fs::create_dir_all(d)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot create {}", d.display()))
}
