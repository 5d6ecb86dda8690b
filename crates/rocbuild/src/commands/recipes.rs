//! `rocbuild recipes`: the recipes rocbuild knows, their releases and variables.

use miette::{IntoDiagnostic, Result};
use rocbuild_recipe::RecipeSet;

use crate::settings::Settings;

pub fn list_recipes(set: &RecipeSet, variables: bool, json: bool, st: &Settings) -> Result<()> {
    // What upstream has beyond each recipe (issue 43): asked at most once a day per source.
    let settings = st.engine().ok();
    let notice = |r: &rocbuild_recipe::Recipe| {
        settings
            .as_ref()
            .and_then(|s| rocbuild_engine::upstream::notice_for(r, s))
    };
    if json {
        let all: Vec<serde_json::Value> = set
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.name(),
                    "description": r.raw.package.description,
                    "file": r.file,
                    "releases": r.releases(),
                    "upstream": notice(r),
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&all).into_diagnostic()?);
        return Ok(());
    }
    for r in set.iter() {
        outln!("{} — {} ({})", r.name(), r.raw.package.description, r.file);
        if let Some(n) = notice(r) {
            outln!("  upstream: {}", n.line());
        }
        for rel in r.releases() {
            let mut line = format!("  {:<10} torch {}", rel.version, rel.torch);
            if !rel.default {
                line.push_str("  [not a default]");
            }
            if let Some(n) = &rel.note {
                line.push_str(&format!("  — {n}"));
            }
            outln!("{line}");
        }
    }
    if variables {
        outln!("\ntemplate variables:");
        for (name, doc) in rocbuild_recipe::template::VARIABLES {
            outln!("  {{{name}}}  {doc}");
        }
    }
    Ok(())
}
