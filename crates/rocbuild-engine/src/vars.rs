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
    template::expand(s, vars).map_err(|missing| {
        let kind = missing.split('.').next();
        EngineError::NoValue {
            why: match kind {
                Some("ffmpeg") => "no FFmpeg was found".into(),
                Some("torch") => "no torch was found".into(),
                Some("cuda") => "no CUDA toolkit was found (set CUDA_HOME)".into(),
                Some("rocm") => "no ROCm root was found (set ROCM_PATH)".into(),
                Some("tools") => "the recipe declares no [needs] python-build".into(),
                _ => "it has no value at this point of the plan".into(),
            },
            // A recipe that needs FFmpeg has it checked with the other prerequisites (what
            // its build loads, where rocbuild looked, how to get it) before any variable is
            // expanded: reaching here, the recipe uses FFmpeg without saying so.
            help: match kind {
                Some("ffmpeg") => "FFmpeg is looked for (and --ffmpeg DIR read) only for a recipe that says `[needs] ffmpeg = true`: add that to the recipe, and rocbuild names what to install when FFmpeg is missing".into(),
                _ => "install what it names, or change the recipe".into(),
            },
            variable: missing,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `{ffmpeg.*}` without a value: the recipe uses FFmpeg without `[needs] ffmpeg`, so
    /// the help says that, not "install what it names".
    #[test]
    fn an_ffmpeg_variable_without_a_value_says_the_recipe_must_declare_ffmpeg() {
        let e = expand("{ffmpeg.runtime}", &BTreeMap::new()).unwrap_err();
        let help = miette::Diagnostic::help(&e).unwrap().to_string();
        assert!(help.contains("`[needs] ffmpeg = true`"), "{help}");
        let e = expand("{torch.lib}", &BTreeMap::new()).unwrap_err();
        let help = miette::Diagnostic::help(&e).unwrap().to_string();
        assert_eq!(help, "install what it names, or change the recipe");
    }
}
