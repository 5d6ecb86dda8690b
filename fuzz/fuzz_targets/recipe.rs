//! Any text through the recipe parser and validator, then everything a valid recipe is asked
//! for later (releases, overlays resolved for every OS/flavor/backend, template expansion):
//! a diagnostic or a recipe, never a panic or a hang.
#![no_main]
use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use rocbuild_recipe::{template, Target};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(recipe) = rocbuild_recipe::parse("fuzz.toml", text) else {
        return;
    };
    let releases = recipe.releases();
    for r in &releases {
        let _ = recipe.release(&r.version);
        let _ = rocbuild_recipe::torch_compatible(r, "2.9.1+rocm6.4");
    }
    let _ = recipe.release("0.0.0-not-there");
    let _ = recipe.uses("mkl");
    let vars: BTreeMap<String, String> = [("version", "1.0"), ("torch.lib", "/t/lib")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for os in ["linux", "macos", "windows"] {
        for (backend, features) in [("cpu", &["mkl"][..]), ("rocm", &[]), ("cuda", &["mkl"])] {
            let version = releases.first().map_or("1.0", |r| r.version.as_str());
            let resolved = recipe.resolve(&Target {
                os,
                arch: "x86_64",
                flavor: backend,
                version,
                backend,
                rocm_version: Some("6.2.4"),
                features,
            });
            for s in resolved.define.values().chain(resolved.finds.iter()) {
                let _ = template::expand(s, &vars);
            }
        }
    }
});
