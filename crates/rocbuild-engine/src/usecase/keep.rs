//! Keeping builds working: status (with recovery), rebuild, restore, wheel.

use std::path::{Path, PathBuf};

use rocbuild_probe::Venv;
use rocbuild_recipe::RecipeSet;
use rocbuild_venv::install;
use rocbuild_venv::lock::VenvLock;
use rocbuild_venv::restore::Restored;
use rocbuild_venv::status::{RecipeStatus, VenvStatus};
use rocbuild_venv::{manifest, VenvError};

use super::{build, locate, lock_and_recover, note_recovery, BuildRequest, Reporter, Settings};
use crate::error::{EngineError, Result};
use crate::step::Verbosity;

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
        status: rocbuild_venv::status::status(&layout.site, recipes),
        root: layout.root,
        busy,
    })
}

pub struct RebuildRequest<'a> {
    pub recipes: &'a RecipeSet,
    /// Recipes to rebuild (empty: every build in the venv).
    pub names: &'a [String],
    pub if_stale: bool,
    pub venv: &'a Venv,
    pub no_wait: bool,
    pub verbosity: Verbosity,
}

/// One rebuild: which recipe, why, and how it went.
pub struct Rebuilt {
    pub recipe: String,
    pub why: String,
    pub result: std::result::Result<super::Built, EngineError>,
}

/// Rebuild builds of the venv with the options recorded in their manifests. `on_start` is
/// called before each build (the CLI prints a time-stamped line there).
pub fn rebuild(
    req: RebuildRequest,
    settings: &Settings,
    reporter: &mut dyn Reporter,
    on_start: &mut dyn FnMut(&RecipeStatus, &str),
) -> Result<Vec<Rebuilt>> {
    let layout = locate(req.venv)?;
    let _lock = lock_and_recover(&layout, req.no_wait, reporter)?;
    let st = rocbuild_venv::status::status(&layout.site, req.recipes);
    for u in &st.unreadable {
        reporter.note(&format!(
            "warning: cannot read {}: {} (rebuild that recipe by name to replace it)",
            u.manifest.display(),
            u.error
        ));
    }
    let mut chosen: Vec<&RecipeStatus> = Vec::new();
    if req.names.is_empty() {
        chosen.extend(st.recipes.iter());
    } else {
        for name in req.names {
            match st.recipes.iter().find(|r| &r.recipe == name) {
                Some(r) => chosen.push(r),
                None => Err(VenvError::NotInstalled {
                    recipe: name.clone(),
                    site: layout.site.display().to_string(),
                    help: format!(
                        "build it first: rocbuild {name} --venv {}",
                        layout.root.display()
                    ),
                })?,
            }
        }
    }
    if req.if_stale {
        chosen.retain(|r| r.needs_action());
    }
    let mut out = Vec::new();
    for r in chosen {
        let Some(m) = manifest::read(&layout.site, &r.recipe) else {
            continue;
        };
        if m.kind == manifest::Kind::Repair {
            // pip's own files, made findable: there is nothing to rebuild from.
            if r.needs_action() || !req.if_stale {
                reporter.note(&format!(
                    "{}: a repair of pip's files, not a build: run `rocbuild repair {}` again",
                    r.recipe, r.recipe
                ));
            }
            continue;
        }
        let mut why: Vec<String> = r.reasons.clone();
        why.extend(r.overwritten.iter().map(|f| format!("{f} overwritten")));
        why.extend(r.missing.iter().map(|f| format!("{f} missing")));
        let why = why.join("; ");
        on_start(r, &why);
        let result = match req.recipes.get(&r.recipe) {
            Err(e) => Err(e.into()),
            // The venv is locked here already: the build runs under this lock.
            Ok(recipe) => build::build(
                BuildRequest {
                    recipe,
                    options: m.options.clone(),
                    venv: Some(req.venv.clone()),
                    machine: None,
                    dry_run: false,
                    no_wait: req.no_wait,
                    verbosity: req.verbosity,
                    lock_held: true,
                },
                settings,
                reporter,
            ),
        };
        out.push(Rebuilt {
            recipe: r.recipe.clone(),
            why,
            result,
        });
    }
    Ok(out)
}

/// Give the venv back pip's files of `recipe`.
pub fn restore(
    venv: &Venv,
    recipe: &str,
    no_wait: bool,
    reporter: &mut dyn Reporter,
) -> Result<(PathBuf, Restored)> {
    let layout = locate(venv)?;
    let _lock = lock_and_recover(&layout, no_wait, reporter)?;
    let r = rocbuild_venv::restore::restore(&layout.site, recipe)?;
    Ok((layout.site, r))
}

/// A wheel of what rocbuild installed for `recipe`, tagged for the venv's Python.
pub fn wheel(
    venv: &Venv,
    recipe: &str,
    out: &Path,
    reporter: &mut dyn Reporter,
) -> Result<rocbuild_venv::wheel::Built> {
    let layout = locate(venv)?;
    let _lock = lock_and_recover(&layout, false, reporter)?;
    let tags =
        crate::plan::build_system::cmake::extension::tags_of_venv(&layout.root, &layout.site)?;
    let out = std::path::absolute(out).map_err(EngineError::io("resolve", out))?;
    Ok(rocbuild_venv::wheel::build_wheel(
        &layout.site,
        recipe,
        &tags,
        &out,
    )?)
}
