//! `rocbuild schedule`: `rebuild --if-stale` run regularly by the machine's own scheduler.
use std::path::{Path, PathBuf};

use miette::{IntoDiagnostic, Result, WrapErr};
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

pub fn schedule(a: &ScheduleArgs, st: &Settings) -> Result<ExitStatus> {
    let (job, dirs) = job(a, st)?;
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
