//! Recipe template variables at their lowest level: the ones known before anything else, and
//! expansion with an error that says why a variable has no value. The full set, from the
//! machine and the plan so far, is composed by the planner (`plan/vars.rs`).

use std::collections::BTreeMap;

use rocbuild_probe::{Flavor, Os};
use rocbuild_recipe::template;

use crate::error::{EngineError, Result};

/// The variables known before anything else: `{name}`, `{version}`, `{os}`, `{flavor}`.
pub fn base(name: &str, version: &str, os: Os, flavor: Flavor) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("name".to_string(), name.to_string()),
        ("version".to_string(), version.to_string()),
        ("os".to_string(), os.as_str().to_string()),
        ("flavor".to_string(), flavor.as_str().to_string()),
    ])
}

/// Expand `s`; a variable without a value is an error that says why it has none.
pub fn expand(s: &str, vars: &BTreeMap<String, String>) -> Result<String> {
    template::expand(s, vars).map_err(|missing| EngineError::NoValue {
        why: match missing.split('.').next() {
            Some("ffmpeg") => "no FFmpeg was found".into(),
            Some("torch") => "no torch was found".into(),
            Some("cuda") => "no CUDA toolkit was found (set CUDA_HOME)".into(),
            Some("rocm") => "no ROCm root was found (set ROCM_PATH)".into(),
            Some("tools") => "the recipe declares no [needs] python-build".into(),
            _ => "it has no value at this point of the plan".into(),
        },
        help: "install what it names, or change the recipe".into(),
        variable: missing,
    })
}
