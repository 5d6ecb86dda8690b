//! The rebuild use case: build again what the venv's manifests record (`--if-stale`: what went stale).

use rocbuild_probe::Venv;
use rocbuild_recipe::RecipeSet;
use rocbuild_venv::status::RecipeStatus;
use rocbuild_venv::{manifest, VenvError};

use super::{build, locate, lock_and_recover, BuildRequest, Reporter, Settings};
use crate::error::{EngineError, Result};
use crate::step::Verbosity;

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
    let st = rocbuild_venv::status::status(&layout.site, req.recipes, &settings.env.probe);
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
