//! `rocbuild status`: what rocbuild built or installed in a venv, and whether it is stale.
use std::path::Path;

use miette::{IntoDiagnostic, Result};
use rocbuild_engine::usecase;
use rocbuild_recipe::RecipeSet;
use rocbuild_venv::manifest::Kind;
use rocbuild_venv::status::{State, VenvStatus};

use crate::cli::StatusArgs;
use crate::settings::Settings;
use crate::{ExitStatus, Stderr};

pub fn status(recipes: &RecipeSet, a: &StatusArgs, st: &Settings) -> Result<ExitStatus> {
    let mut r = usecase::status(&st.venv(&a.venv)?, recipes, st.probe_env(), &mut Stderr)?;
    // What upstream has beyond each build's recipe (issue 43); without a cache, nothing.
    if let Ok(settings) = st.engine() {
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
    print_salvaged(st);
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
        if let Some(c) = &r.cuda {
            outln!(
                "  cuda: built with {c} (`rocbuild doctor` compares it with the GPU and driver)"
            );
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

/// Files an interrupted run left that nothing proved: each with the command that puts it
/// back, and how to let them go once checked.
fn print_salvaged(st: &VenvStatus) {
    if st.salvaged.is_empty() {
        return;
    }
    outln!(
        "kept from an interrupted run whose journal could not be trusted ({} files; rocbuild deleted none):",
        st.salvaged.len()
    );
    for f in &st.salvaged {
        outln!("  {} (from {})", f.kept.display(), f.goes_to.display());
        outln!("    put it back: {}", f.put_back);
    }
    outln!(
        "  once you have checked them, remove {} yourself",
        st.site.join(".rocbuild").join("salvage").display()
    );
}
