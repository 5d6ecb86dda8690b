//! Which release to build: `--version` (refused when torch is outside its range, unless
//! `--force`), else the newest default release whose torch range holds the installed torch.

use rocbuild_probe::Machine;
use rocbuild_recipe::{torch_compatible, Recipe, ReleaseInfo};
use rocbuild_venv::BuildOptions;

use crate::error::{EngineError, Result};

/// Pick the release: `--version` (refused when torch is outside its range, unless --force),
/// else the newest default-eligible release whose range holds the installed torch.
pub fn choose(
    recipe: &Recipe,
    machine: &Machine,
    opts: &BuildOptions,
) -> Result<(ReleaseInfo, String)> {
    let torch = machine.torch.as_ref().map(|t| t.version.as_str());
    if let Some(v) = &opts.version {
        let r = recipe.release(v)?;
        match torch {
            Some(t) if !torch_compatible(&r, t) && !opts.force => {
                let ok: Vec<_> = recipe
                    .releases()
                    .into_iter()
                    .filter(|r| torch_compatible(r, t))
                    .map(|r| r.version)
                    .collect();
                Err(EngineError::Incompatible {
                    recipe: recipe.name().into(),
                    version: r.version.clone(),
                    torch: t.into(),
                    range: r.torch.clone(),
                    help: if ok.is_empty() {
                        "no release of this recipe supports this torch; --force builds it anyway (it will likely fail to load)".into()
                    } else {
                        format!("releases that support torch {t}: {}; or pass --force to build {} anyway", ok.join(", "), r.version)
                    },
                })
            }
            Some(t) if !torch_compatible(&r, t) => Ok((
                r,
                format!(
                    "--version (forced: torch {t} is outside {})",
                    recipe.release(v)?.torch
                ),
            )),
            _ => Ok((r, "--version".into())),
        }
    } else {
        let t = torch.unwrap_or("0");
        let all = recipe.releases();
        let found = all.iter().find(|r| r.default && torch_compatible(r, t));
        match found {
            Some(r) if torch.is_none() || !recipe.raw.needs.torch => {
                Ok((r.clone(), "newest release".into()))
            }
            Some(r) => Ok((r.clone(), format!("newest release compatible with torch {t}"))),
            None => Err(EngineError::NoCompatible {
                recipe: recipe.name().into(),
                torch: t.into(),
                help: format!(
                    "releases and the torch they need: {}; pick one with --version (and --force to override the check)",
                    all.iter().map(|r| format!("{} (torch {})", r.version, r.torch)).collect::<Vec<_>>().join(", ")
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::recipe;
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::cpu_machine;

    fn with_torch(v: &str) -> Machine {
        let mut m = cpu_machine(Os::Linux);
        if let Some(t) = &mut m.torch {
            t.version = v.into();
        }
        m
    }

    #[test]
    fn the_newest_release_for_the_torch_installed() {
        let r = recipe("torchcodec");
        let (rel, why) = choose(&r, &with_torch("2.9.1"), &BuildOptions::default()).unwrap();
        assert!(torch_compatible(&rel, "2.9.1"));
        assert_eq!(why, "newest release compatible with torch 2.9.1");
        // No newer compatible release exists among the defaults.
        assert!(r
            .releases()
            .iter()
            .filter(|x| x.default && torch_compatible(x, "2.9.1"))
            .all(|x| x.version == rel.version || !newer(&x.version, &rel.version)));
    }

    fn newer(a: &str, b: &str) -> bool {
        let p = |s: &str| {
            s.split('.')
                .map(|x| x.parse::<u32>().unwrap_or(0))
                .collect::<Vec<_>>()
        };
        p(a) > p(b)
    }

    #[test]
    fn an_incompatible_version_is_refused_unless_forced() {
        let r = recipe("torchcodec");
        let m = with_torch("2.9.1");
        let old = r
            .releases()
            .into_iter()
            .find(|x| !torch_compatible(x, "2.9.1"))
            .expect("a release for another torch");
        let mut opts = BuildOptions {
            version: Some(old.version.clone()),
            ..BuildOptions::default()
        };
        match choose(&r, &m, &opts) {
            Err(EngineError::Incompatible { help, .. }) => {
                assert!(help.contains("releases that support torch 2.9.1"), "{help}")
            }
            other => panic!("{other:?}"),
        }
        opts.force = true;
        let (rel, why) = choose(&r, &m, &opts).unwrap();
        assert_eq!(rel.version, old.version);
        assert!(why.starts_with("--version (forced"), "{why}");
    }

    #[test]
    fn no_release_for_a_torch_says_which_exist() {
        let e = choose(
            &recipe("torchcodec"),
            &with_torch("1.0.0"),
            &BuildOptions::default(),
        )
        .unwrap_err();
        assert!(matches!(e, EngineError::NoCompatible { .. }), "{e}");
    }
}
