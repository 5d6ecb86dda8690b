//! `rocbuild schedule`: `rebuild --if-stale` run regularly by the machine's own scheduler.
use std::path::{Path, PathBuf};

use miette::{IntoDiagnostic, Result};
use rocbuild_engine::{schedule as sched, EngineError};
use rocbuild_probe::Os;

use crate::cli::{EveryArg, ScheduleAction, ScheduleArgs, SchedulerKind};
use crate::settings::Settings;
use crate::ExitStatus;

fn job(a: &ScheduleArgs, st: &Settings) -> Result<(sched::Job, sched::Dirs)> {
    let v = st.venv(&a.venv)?;
    let (home, config) = st.user_dirs().ok_or_else(|| EngineError::Usage {
        option: "HOME".into(),
        reason: "no home directory: HOME is not set".into(),
        help: Some("set HOME (and XDG_CONFIG_HOME if the config lives elsewhere)".into()),
    })?;
    let cache = st.cache()?;
    let id = sched::id_for(&v.root);
    let mut envs = Vec::new();
    if let Some(p) = st.environment.path.clone() {
        envs.push(("PATH".to_string(), p.to_string_lossy().into_owned()));
    }
    envs.push((
        crate::settings::ROCBUILD_CACHE.to_string(),
        cache.display().to_string(),
    ));
    let recipe_dirs: Vec<PathBuf> = st
        .recipe_dirs
        .clone()
        .iter()
        .map(std::path::absolute)
        .collect::<std::io::Result<_>>()
        .into_diagnostic()?;
    if !recipe_dirs.is_empty() {
        let joined = std::env::join_paths(&recipe_dirs).into_diagnostic()?;
        envs.push((
            crate::settings::ROCBUILD_RECIPES.to_string(),
            joined.to_string_lossy().into_owned(),
        ));
    }
    if let Some(m) = st.mirror.clone() {
        envs.push((
            crate::settings::ROCBUILD_MIRROR.to_string(),
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

/// The use case's lines on stdout, as the command's output; its warnings on stderr.
struct Said;

impl rocbuild_engine::Reporter for Said {
    fn note(&mut self, line: &str) {
        outln!("{line}");
    }
    fn warn(&mut self, line: &str) {
        errln!("{line}");
    }
}

pub fn schedule(a: &ScheduleArgs, st: &Settings) -> Result<ExitStatus> {
    use rocbuild_engine::usecase::schedule::Action;
    let (job, dirs) = job(a, st)?;
    let os = Os::current();
    let kind = match a.kind {
        Some(SchedulerKind::Systemd) => sched::Kind::Systemd,
        Some(SchedulerKind::Launchd) => sched::Kind::Launchd,
        Some(SchedulerKind::Schtasks) => sched::Kind::Schtasks,
        Some(SchedulerKind::Cron) => sched::Kind::Cron,
        None => sched::Kind::default_for(os, Path::new("/run/systemd/system").exists()),
    };
    let runs = || {
        format!(
            "{} {}",
            job.exe.display(),
            sched::command_line(os, &job.args())
        )
    };
    let activate = !a.no_activate;
    match a.action {
        ScheduleAction::Install => {
            let found = rocbuild_engine::usecase::schedule(
                &job,
                &dirs,
                Action::Install { kind, activate },
                &mut Said,
            )?;
            if activate {
                outln!("scheduled ({}, {})", kind.as_str(), job.every.as_str());
            }
            outln!("runs:  {}", runs());
            for f in &found {
                outln!("log:   {}", f.log.display());
            }
        }
        ScheduleAction::Remove => {
            let found = rocbuild_engine::usecase::schedule(
                &job,
                &dirs,
                Action::Remove { activate },
                &mut Said,
            )?;
            if found.is_empty() {
                outln!("no schedule for {}", job.venv.display());
            }
        }
        ScheduleAction::Show => {
            let found = rocbuild_engine::usecase::schedule(&job, &dirs, Action::Show, &mut Said)?;
            for f in &found {
                outln!("{} schedule for {}", f.kind.as_str(), job.venv.display());
                for p in &f.files {
                    outln!("  file: {}", p.display());
                }
                outln!("  runs: {}", runs());
                let state = if f.log.exists() { "" } else { " (no run yet)" };
                outln!("  log:  {}{state}", f.log.display());
            }
            if found.is_empty() {
                outln!(
                    "no schedule for {} (rocbuild schedule install makes one; it would log to {})",
                    job.venv.display(),
                    job.log.display()
                );
            }
        }
    }
    Ok(ExitStatus::Success)
}
