//! `rocbuild test RECIPE`: upstream's own tests on the installed build (one use case of
//! rocbuild-engine), rendered as a summary, or as JSON.

use miette::{IntoDiagnostic, Result};
use rocbuild_engine::usecase::{self, test::Comparison, TestReport, TestRequest};
use rocbuild_recipe::RecipeSet;

use crate::cli::{Global, TestArgs};
use crate::settings as env;
use crate::{ExitStatus, Stderr};

pub fn test(recipes: &RecipeSet, a: &TestArgs, g: &Global) -> Result<ExitStatus> {
    let settings = env::settings(g)?;
    let junit = match &a.junit {
        Some(f) => Some(std::path::absolute(f).into_diagnostic()?),
        None => None,
    };
    let req = TestRequest {
        recipe: a.recipe.clone(),
        quick: a.quick,
        junit,
        compare: a.compare,
        progress: !g.quiet,
    };
    let r = usecase::test(&env::venv(&a.venv)?, recipes, &settings, &req, &mut Stderr)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r).into_diagnostic()?);
    } else {
        print(&r);
    }
    Ok(if r.ok() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

fn print(r: &TestReport) {
    if let Some(n) = r.device_deselected {
        outln!("device tests: the venv's torch sees no GPU: {n} deselected");
    }
    if let Some(c) = &r.compare {
        print_compare(c);
    }
    for k in &r.known {
        outln!("known failure: {} ({})", k.test, k.reason);
    }
    for k in &r.known_passed {
        outln!("passed, though the recipe lists it as a known failure: {k}");
    }
    for f in &r.new_failures {
        match &f.message {
            Some(m) if !m.is_empty() => outln!("NEW FAILURE: {}: {m}", f.test),
            _ => outln!("NEW FAILURE: {}", f.test),
        }
    }
    if let Some(j) = &r.junit {
        outln!("JUnit XML: {}", j.display());
    }
    let t = &r.tally;
    outln!(
        "{} {}{}: {} passed, {} failed ({} known, {} new), {} skipped in {} s",
        r.recipe,
        r.version,
        if r.quick { " (quick)" } else { "" },
        t.passed,
        t.failed,
        r.known.len(),
        r.new_failures.len(),
        t.skipped,
        r.seconds
    );
}

fn print_compare(c: &Comparison) {
    match c {
        Comparison::Unavailable { why } => outln!("compare: {why}: nothing to compare with"),
        Comparison::Ran {
            wheel,
            official,
            differences: d,
        } => {
            for t in &d.regressions {
                outln!("REGRESSION: {t}: passes with the official wheel, fails with the rebuild");
            }
            for t in &d.fixed {
                outln!("better: {t}: fails with the official wheel, passes with the rebuild");
            }
            for t in &d.other {
                outln!("differs: {t}");
            }
            outln!(
                "compare: official {wheel}: {} passed, {} failed, {} skipped; {} regressions",
                official.passed,
                official.failed,
                official.skipped,
                d.regressions.len()
            );
        }
    }
}
