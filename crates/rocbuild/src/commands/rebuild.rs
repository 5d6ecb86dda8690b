//! `rocbuild rebuild`: build again what a venv's manifests record (`--if-stale`: only what a torch upgrade or pip left stale).

use miette::Result;
use rocbuild_engine::usecase;
use rocbuild_recipe::RecipeSet;

use crate::cli::RebuildArgs;
use crate::settings::Settings;
use crate::{ExitStatus, Stderr};

pub fn rebuild(recipes: &RecipeSet, a: &RebuildArgs, st: &Settings) -> Result<ExitStatus> {
    let settings = st.engine()?;
    let venv = st.venv(&a.venv)?;
    let done = usecase::rebuild(
        usecase::RebuildRequest {
            recipes,
            names: &a.names,
            if_stale: a.if_stale,
            venv: &venv,
            no_wait: a.no_wait,
            verbosity: crate::verbosity(&st.global),
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
                    crate::verbosity(&st.global),
                );
            }
            Ok(usecase::Built::Unchanged { dest, outcome }) => {
                let source = recipes
                    .get(&r.recipe)
                    .map(|x| x.raw.source.origin())
                    .unwrap_or_default();
                super::build::print_outcome(&dest, &outcome, &source, crate::verbosity(&st.global));
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
