//! The status use case: what a venv holds from rocbuild, with recovery of an interrupted run first.

use std::path::PathBuf;

use rocbuild_probe::Venv;
use rocbuild_recipe::RecipeSet;
use rocbuild_venv::install;
use rocbuild_venv::lock::VenvLock;
use rocbuild_venv::status::VenvStatus;
use rocbuild_venv::VenvError;

use super::{locate, note_recovery, Reporter};
use crate::error::Result;

pub struct StatusReport {
    pub root: PathBuf,
    pub status: VenvStatus,
    /// A run is installing into the venv now (its pid).
    pub busy: Option<String>,
}

/// The status of every build in the venv. Traces of a run (journal, staging area, a pid in
/// the lock): one is going on, or one was killed. The latter is finished or undone first, so
/// the status is the truth; the former is reported as busy. Read-only otherwise.
pub fn status(
    venv: &Venv,
    recipes: &RecipeSet,
    env: &rocbuild_probe::ProbeEnv,
    reporter: &mut dyn Reporter,
) -> Result<StatusReport> {
    let layout = locate(venv)?;
    let mut busy = None;
    if install::needs_recovery(&layout.site) {
        match VenvLock::acquire(&layout.site, false, &mut |_| {}) {
            Ok(_lock) => match install::recover(&layout.site) {
                Ok(r) => note_recovery(r, reporter),
                // Reported, never acted on; the status below is still the truth of the files.
                Err(e @ VenvError::UntrustedJournal { .. }) => {
                    reporter.note(&format!("warning: {e}"));
                    if let VenvError::UntrustedJournal { help, .. } = &e {
                        reporter.note(&format!("  {help}"));
                    }
                }
                Err(e) => return Err(e.into()),
            },
            Err(VenvError::Locked { pid, .. }) => busy = Some(pid),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(StatusReport {
        status: rocbuild_venv::status::status(&layout.site, recipes, env),
        root: layout.root,
        busy,
    })
}
