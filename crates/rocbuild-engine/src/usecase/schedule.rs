//! The schedule use case: `rebuild --if-stale` run regularly by the machine's own scheduler
//! (systemd, launchd, Task Scheduler, cron): its files written and activated, removed, or
//! shown. The engine's `schedule` module spells the files; this does the I/O.

use std::path::{Path, PathBuf};

use super::Reporter;
use crate::error::{EngineError, Result};
use crate::schedule::{self as sched, Dirs, Job, Kind};

/// What to do with the job's schedule.
pub enum Action {
    /// Write the files for `kind`; activate them unless `activate` is false (then the
    /// commands that would are said).
    Install { kind: Kind, activate: bool },
    /// Remove the job's files of every kind found, deactivating them first unless
    /// `activate` is false.
    Remove { activate: bool },
    /// Say what is installed.
    Show,
}

/// A schedule of the job found (or made) for one scheduler.
pub struct Found {
    pub kind: Kind,
    /// Its files that exist (Show), were written (Install) or removed (Remove).
    pub files: Vec<PathBuf>,
    pub log: PathBuf,
}

/// Do `action` for `job`; each file written or removed and each command to run by hand is
/// said through `reporter` as it happens. What was found, one entry per scheduler.
pub fn schedule(
    job: &Job,
    dirs: &Dirs,
    action: Action,
    reporter: &mut dyn Reporter,
) -> Result<Vec<Found>> {
    match action {
        Action::Install { kind, activate } => install(job, dirs, kind, activate, reporter),
        Action::Remove { activate } => remove(job, dirs, activate, reporter),
        Action::Show => Ok(Kind::ALL
            .iter()
            .filter_map(|&kind| {
                let s = sched::schedule(job, kind, dirs);
                let files: Vec<PathBuf> = s
                    .files
                    .into_iter()
                    .map(|(p, _)| p)
                    .filter(|p| p.exists())
                    .collect();
                (!files.is_empty()).then_some(Found {
                    kind,
                    files,
                    log: s.log,
                })
            })
            .collect()),
    }
}

fn install(
    job: &Job,
    dirs: &Dirs,
    kind: Kind,
    activate: bool,
    reporter: &mut dyn Reporter,
) -> Result<Vec<Found>> {
    let s = sched::schedule(job, kind, dirs);
    for (p, text) in &s.files {
        if let Some(d) = p.parent() {
            create(d)?;
        }
        std::fs::write(p, sched::file_bytes(kind, text)).map_err(EngineError::io("write", p))?;
        reporter.note(&format!("wrote {}", p.display()));
    }
    if let Some(d) = s.log.parent() {
        create(d)?;
    }
    if !activate {
        reporter.note("activate with:");
        for act in &s.activate {
            reporter.note(&format!("  {act}"));
        }
    } else {
        for act in &s.activate {
            sched::perform(act).map_err(|e| EngineError::Usage {
                option: format!("schedule install --kind {}", kind.as_str()),
                reason: format!("`{act}` failed: {e}"),
                help: Some("the files are written; run the command by hand, or pick another scheduler with --kind (cron, systemd, launchd, schtasks)".to_string()),
            })?;
        }
    }
    Ok(vec![Found {
        kind,
        files: s.files.into_iter().map(|(p, _)| p).collect(),
        log: s.log,
    }])
}

fn remove(
    job: &Job,
    dirs: &Dirs,
    activate: bool,
    reporter: &mut dyn Reporter,
) -> Result<Vec<Found>> {
    let mut found = Vec::new();
    for kind in Kind::ALL {
        let s = sched::schedule(job, kind, dirs);
        if !s.files.iter().any(|(p, _)| p.exists()) {
            continue;
        }
        if !activate {
            for act in &s.deactivate {
                reporter.note(&format!("deactivate with: {act}"));
            }
        } else {
            for act in &s.deactivate {
                if let Err(e) = sched::perform(act) {
                    reporter.warn(&format!("warning: `{act}` failed: {e}"));
                }
            }
        }
        let mut removed = Vec::new();
        for (p, _) in s.files {
            if p.exists() {
                std::fs::remove_file(&p).map_err(EngineError::io("remove", &p))?;
                reporter.note(&format!("removed {}", p.display()));
                removed.push(p);
            }
        }
        found.push(Found {
            kind,
            files: removed,
            log: s.log,
        });
    }
    Ok(found)
}

fn create(d: &Path) -> Result<()> {
    std::fs::create_dir_all(d).map_err(EngineError::io("create", d))
}
