//! `rocbuild test RECIPE`: upstream's own tests on the installed build (one use case of
//! rocbuild-engine), rendered as a summary, or as JSON.

use miette::{IntoDiagnostic, Result};
use rocbuild_engine::usecase::{self, test::Comparison, TestReport, TestRequest};
use rocbuild_recipe::RecipeSet;

use crate::cli::TestArgs;
use crate::settings::Settings;
use crate::{ExitStatus, Stderr};

pub fn test(recipes: &RecipeSet, a: &TestArgs, st: &Settings) -> Result<ExitStatus> {
    let settings = st.engine()?;
    let junit = match &a.junit {
        Some(f) => Some(std::path::absolute(f).into_diagnostic()?),
        None => None,
    };
    let req = TestRequest {
        recipe: a.recipe.clone(),
        quick: a.quick,
        junit,
        compare: a.compare,
        progress: !st.global.quiet,
    };
    let r = usecase::test(&st.venv(&a.venv)?, recipes, &settings, &req, &mut Stderr)?;
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
    // Regressions against the official wheel first: they are what the run is for.
    if let Some(c) = &r.compare {
        print_compare(c);
    }
    if let Some(n) = r.device_deselected {
        if r.torch {
            outln!("device tests: the venv's torch sees no GPU: {n} deselected");
        } else {
            outln!("device tests: the venv has no torch to see a GPU with: {n} deselected");
        }
    }
    for m in &r.missing_modules {
        outln!(
            "tests that need {0}: the venv has no {0}: {1} deselected (install {0} into the venv to run them)",
            m.module,
            m.deselected
        );
    }
    for k in &r.known {
        outln!("known failure: {} ({})", k.test, k.reason);
    }
    for k in &r.known_passed {
        outln!("passed, though the recipe lists it as a known failure: {k}");
    }
    for f in r.new_failures.iter().take(SHOWN) {
        match &f.message {
            Some(m) if !m.is_empty() => outln!("NEW FAILURE: {}: {m}", f.test),
            _ => outln!("NEW FAILURE: {}", f.test),
        }
    }
    if r.new_failures.len() > SHOWN {
        outln!(
            "… and {} more new failures (all in --junit FILE and --json); by cause:",
            r.new_failures.len() - SHOWN
        );
        for (n, cause) in causes(r) {
            outln!("  {n:>5} × {cause}");
        }
    }
    if !r.missing_tools.is_empty() {
        outln!(
            "not on PATH: {} (the tests that run it fail)",
            r.missing_tools.join(", ")
        );
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

/// New failures named one by one; past that, counted by cause.
const SHOWN: usize = 20;

/// The new failures' messages, most frequent first (the first 100 characters).
fn causes(r: &TestReport) -> Vec<(usize, String)> {
    let mut by: std::collections::BTreeMap<String, usize> = Default::default();
    for f in &r.new_failures {
        let m = f.message.as_deref().unwrap_or("(no message)");
        *by.entry(m.chars().take(100).collect()).or_default() += 1;
    }
    let mut v: Vec<(usize, String)> = by.into_iter().map(|(m, n)| (n, m)).collect();
    v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    v.truncate(10);
    v
}
