//! Which release to build: `--version` (refused when torch, the FFmpeg found or the HIP of
//! the chosen SDK is outside its ranges, unless `--force`), else the newest default release
//! whose ranges hold all three. Everything here is decided before anything is fetched.

use rocbuild_probe::Machine;
use rocbuild_recipe::{
    cuda_compatible, ffmpeg_compatible, hip_compatible, torch_compatible, Recipe, ReleaseInfo,
};
use rocbuild_venv::BuildOptions;

use crate::error::{EngineError, Result};

/// What a release must build against here.
#[derive(Debug, Clone, Copy, Default)]
pub struct Against<'a> {
    /// torch's version, when the recipe builds against torch and the venv has one.
    pub torch: Option<&'a str>,
    /// The FFmpeg major found, when the recipe needs FFmpeg.
    pub ffmpeg: Option<u32>,
    /// HIP's version of the chosen SDK, for a ROCm build.
    pub hip: Option<&'a str>,
    /// The CUDA toolkit's version (`13.2`), for a CUDA build.
    pub cuda: Option<&'a str>,
}

impl<'a> Against<'a> {
    pub fn of(recipe: &Recipe, machine: &'a Machine, hip: Option<&'a str>) -> Self {
        Against {
            torch: machine.target.torch.as_ref().map(|t| t.version.as_str()),
            ffmpeg: recipe
                .raw
                .needs
                .ffmpeg
                .then(|| machine.target.ffmpeg.as_ref().map(|f| f.major))
                .flatten(),
            hip,
            cuda: None,
        }
    }

    /// The same, for a CUDA build with the toolkit `cuda` (`13.2`).
    pub fn with_cuda(self, cuda: Option<&'a str>) -> Self {
        Against { cuda, ..self }
    }

    /// Why `r` does not fit, one phrase per reason (`FFmpeg 9: it builds against FFmpeg >=4,<9`).
    fn misfits(&self, r: &ReleaseInfo) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(t) = self.torch.filter(|t| !torch_compatible(r, t)) {
            out.push(format!("torch {t}: it needs torch {}", r.torch));
        }
        if let Some(f) = self.ffmpeg.filter(|f| !ffmpeg_compatible(r, *f)) {
            out.push(format!(
                "FFmpeg {f}: it builds against FFmpeg {}",
                r.ffmpeg.as_deref().unwrap_or("")
            ));
        }
        if let Some(h) = self.hip.filter(|h| !hip_compatible(r, h)) {
            out.push(format!(
                "HIP {h}: it builds with HIP {}",
                r.hip.as_deref().unwrap_or("")
            ));
        }
        if let Some(c) = self.cuda.filter(|c| !cuda_compatible(r, c)) {
            let why = r
                .cuda_why
                .as_deref()
                .map(|w| format!(" ({w})"))
                .unwrap_or_default();
            out.push(format!(
                "CUDA {c}: it builds with CUDA {}{why}",
                r.cuda.as_deref().unwrap_or("")
            ));
        }
        out
    }

    /// `torch 2.15.0 and FFmpeg 9`: what is checked, for messages.
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = self.torch {
            parts.push(format!("torch {t}"));
        }
        if let Some(f) = self.ffmpeg {
            parts.push(format!("FFmpeg {f}"));
        }
        if let Some(h) = self.hip {
            parts.push(format!("HIP {h}"));
        }
        if let Some(c) = self.cuda {
            parts.push(format!("CUDA {c}"));
        }
        parts.join(" and ")
    }
}

/// A release's ranges, for the list of what exists (`0.15.0 (torch >=2.11, FFmpeg >=4,<9)`).
fn ranges(r: &ReleaseInfo) -> String {
    let mut parts = vec![format!("torch {}", r.torch)];
    if let Some(f) = &r.ffmpeg {
        parts.push(format!("FFmpeg {f}"));
    }
    if let Some(h) = &r.hip {
        parts.push(format!("HIP {h}"));
    }
    if let Some(c) = &r.cuda {
        parts.push(format!("CUDA {c}"));
    }
    format!("{} ({})", r.version, parts.join(", "))
}

/// Pick the release: `--version` (refused when it does not fit, unless --force), else the
/// newest default-eligible release that fits.
pub fn choose(
    recipe: &Recipe,
    against: Against,
    opts: &BuildOptions,
) -> Result<(ReleaseInfo, String)> {
    // A recipe that does not build against torch checks no torch range.
    let against = Against {
        torch: against.torch.filter(|_| recipe.raw.needs.torch),
        ..against
    };
    let all = recipe.releases();
    let asked = match (&opts.version, &opts.rev) {
        (Some(v), _) => Some((v.clone(), "--version".to_string())),
        (None, Some(rev)) => Some(release_of_rev(recipe, &all, rev)?),
        (None, None) => None,
    };
    if let Some((v, why)) = &asked {
        let r = recipe.release(v)?;
        // A release the recipe does not list says whose rules build it.
        let why = &match &r.rules_of {
            Some(base) => format!(
                "{why}; {} is not in the recipe: built with {base}'s rules",
                r.version
            ),
            None => why.clone(),
        };
        let misfits = against.misfits(&r);
        if misfits.is_empty() {
            return Ok((r, why.clone()));
        }
        if opts.force {
            return Ok((r, format!("--version (forced: {})", misfits.join("; "))));
        }
        let ok: Vec<_> = all
            .iter()
            .filter(|x| against.misfits(x).is_empty())
            .map(|x| x.version.clone())
            .collect();
        return Err(EngineError::Incompatible {
            recipe: recipe.name().into(),
            version: r.version.clone(),
            what: misfits.join("; and "),
            help: if ok.is_empty() {
                format!(
                    "no release of this recipe supports {}; --force builds {} anyway (it will likely fail); nothing was fetched",
                    against.describe(),
                    r.version
                )
            } else {
                format!(
                    "releases that support {}: {}; or pass --force to build {} anyway; nothing was fetched",
                    against.describe(),
                    ok.join(", "),
                    r.version
                )
            },
        });
    }
    let found = all
        .iter()
        .find(|r| r.default && against.misfits(r).is_empty());
    match found {
        Some(r) if against.describe().is_empty() => Ok((r.clone(), "newest release".into())),
        Some(r) => Ok((
            r.clone(),
            format!("newest release compatible with {}", against.describe()),
        )),
        None => Err(EngineError::NoCompatible {
            recipe: recipe.name().into(),
            what: against.describe(),
            help: format!(
                "{}releases and what they need: {}; pick one with --version (and --force to override the check)",
                cuda_why(&all, against.cuda),
                all.iter().map(ranges).collect::<Vec<_>>().join(", ")
            ),
        }),
    }
}

/// The newest release's `cuda-why` when the CUDA toolkit `cuda` is outside its range
/// (`CUDA 13.2: upstream does not support …. `), else nothing.
fn cuda_why(all: &[ReleaseInfo], cuda: Option<&str>) -> String {
    let newest = all.first();
    match (newest, cuda) {
        (Some(r), Some(c)) if !cuda_compatible(r, c) => r
            .cuda_why
            .as_ref()
            .map(|w| format!("CUDA {c}: {w}. "))
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// `--rev` without `--version`: the release whose tag it names (its CMake options, its Python
/// part and its checks go with that source). Another revision is refused before anything is
/// fetched: rocbuild cannot tell which release's options fit it.
fn release_of_rev(recipe: &Recipe, all: &[ReleaseInfo], rev: &str) -> Result<(String, String)> {
    let name = rev.trim_start_matches("refs/tags/");
    let Some(template) = recipe.raw.source.tag.as_ref().map(|t| t.get_ref()) else {
        return Err(EngineError::Usage {
            option: format!("--rev {rev}"),
            reason: format!(
                "{} is built from a PyPI sdist, which has no revisions",
                recipe.name()
            ),
            help: Some("pick the release with --version".into()),
        });
    };
    // The tag a release is fetched at, by the same template expansion as the source plan's.
    let tag_of = |v: &str| {
        let vars = std::collections::BTreeMap::from([
            ("name".to_string(), recipe.name().to_string()),
            ("version".to_string(), v.to_string()),
        ]);
        crate::vars::expand(template, &vars).unwrap_or_else(|_| template.clone())
    };
    if let Some(r) = all.iter().find(|r| tag_of(&r.version) == name) {
        return Ok((r.version.clone(), format!("--rev {rev} is its tag")));
    }
    let newest = all.first().map(|r| r.version.clone()).unwrap_or_default();
    Err(EngineError::Usage {
        option: format!("--rev {rev}"),
        reason: format!(
            "{rev} is not the tag of a release of {} ({}), so rocbuild cannot tell which release's build options, Python part and checks fit that source",
            recipe.name(),
            all.iter()
                .take(4)
                .map(|r| tag_of(&r.version))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        help: Some(format!(
            "add --version with the release that source belongs to (such as --version {newest} for a revision after {}); nothing was fetched",
            tag_of(&newest)
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::recipe;

    /// `--rev v0.15.0` without `--version` builds release 0.15.0 (not the newest, whose
    /// options and Python part belong to another source); a revision that is no release's tag
    /// is refused, saying which --version to add.
    #[test]
    fn the_release_follows_the_tag_rev_names() {
        let r = recipe("torchcodec");
        let with_rev = |rev: &str| BuildOptions {
            rev: Some(rev.into()),
            ..BuildOptions::default()
        };
        let (rel, why) = choose(&r, Against::default(), &with_rev("v0.15.0")).unwrap();
        assert_eq!(
            (rel.version.as_str(), why.as_str()),
            ("0.15.0", "--rev v0.15.0 is its tag")
        );
        let (rel, _) = choose(&r, Against::default(), &with_rev("refs/tags/v0.16.0")).unwrap();
        assert_eq!(rel.version, "0.16.0");
        let e = choose(&r, Against::default(), &with_rev("main")).unwrap_err();
        let help = miette::Diagnostic::help(&e).unwrap().to_string();
        assert!(
            e.to_string()
                .contains("main is not the tag of a release of torchcodec"),
            "{e}"
        );
        assert!(help.contains("add --version"), "{help}");
        // --version still decides when both are given.
        let both = BuildOptions {
            version: Some("0.15.0".into()),
            rev: Some("main".into()),
            ..BuildOptions::default()
        };
        assert_eq!(
            choose(&r, Against::default(), &both).unwrap().0.version,
            "0.15.0"
        );
    }

    fn torch(v: &str) -> Against<'_> {
        Against {
            torch: Some(v),
            ..Against::default()
        }
    }

    #[test]
    fn the_newest_release_for_the_torch_installed() {
        let r = recipe("torchcodec");
        let (rel, why) = choose(&r, torch("2.9.1"), &BuildOptions::default()).unwrap();
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
        let old = r
            .releases()
            .into_iter()
            .find(|x| !torch_compatible(x, "2.9.1"))
            .expect("a release for another torch");
        let mut opts = BuildOptions {
            version: Some(old.version.clone()),
            ..BuildOptions::default()
        };
        match choose(&r, torch("2.9.1"), &opts) {
            Err(EngineError::Incompatible { help, .. }) => {
                assert!(help.contains("releases that support torch 2.9.1"), "{help}")
            }
            other => panic!("{other:?}"),
        }
        opts.force = true;
        let (rel, why) = choose(&r, torch("2.9.1"), &opts).unwrap();
        assert_eq!(rel.version, old.version);
        assert!(why.starts_with("--version (forced"), "{why}");
    }

    #[test]
    fn no_release_for_a_torch_says_which_exist() {
        let e = choose(
            &recipe("torchcodec"),
            torch("1.0.0"),
            &BuildOptions::default(),
        )
        .unwrap_err();
        assert!(matches!(e, EngineError::NoCompatible { .. }), "{e}");
    }

    /// TorchCodec on FFmpeg 9 (Debian sid): the default is the newest release that builds
    /// against FFmpeg 9 and the torch; an explicit 0.15.0 is refused before any fetch, naming
    /// FFmpeg 9 and the releases that support it. On FFmpeg 5 the same default stands.
    #[test]
    fn torchcodec_on_ffmpeg_9_defaults_to_a_release_for_it_and_refuses_0_15() {
        let r = recipe("torchcodec");
        let on = |major| Against {
            torch: Some("2.15.0"),
            ffmpeg: Some(major),
            hip: None,
            cuda: None,
        };
        let (rel, why) = choose(&r, on(9), &BuildOptions::default()).unwrap();
        assert!(ffmpeg_compatible(&rel, 9), "{rel:?}");
        assert!(!ffmpeg_compatible(&r.release("0.15.0").unwrap(), 9));
        assert!(newer(&rel.version, "0.15.0"), "{}", rel.version);
        assert_eq!(
            why,
            "newest release compatible with torch 2.15.0 and FFmpeg 9"
        );
        let opts = BuildOptions {
            version: Some("0.15.0".into()),
            ..BuildOptions::default()
        };
        let e = choose(&r, on(9), &opts).unwrap_err();
        let text = format!("{e} | {}", miette::Diagnostic::help(&e).unwrap());
        assert!(
            text.contains("torchcodec 0.15.0 does not support FFmpeg 9"),
            "{text}"
        );
        assert!(
            text.contains("releases that support torch 2.15.0 and FFmpeg 9: "),
            "{text}"
        );
        assert!(text.contains("0.16.0"), "{text}");
        assert!(!text.contains("0.14.0"), "{text}");
        // FFmpeg 5: 0.15.0 is fine.
        assert!(choose(&r, on(5), &opts).is_ok());
    }

    /// The newest release a build takes when none is asked for (a newer one may be listed as
    /// not yet built here: `default = false`).
    fn newest_default(r: &Recipe) -> String {
        r.releases()
            .into_iter()
            .find(|x| x.default)
            .unwrap()
            .version
    }

    /// A CTranslate2 release states the HIP it builds with; an SDK older than that is refused
    /// before the build, a newer one picks the newest release.
    #[test]
    fn ctranslate2_releases_state_the_hip_they_build_with() {
        let r = recipe("ctranslate2");
        let hip = |v| Against {
            hip: Some(v),
            ..Against::default()
        };
        let (rel, _) = choose(&r, hip("6.4.43484"), &BuildOptions::default()).unwrap();
        assert_eq!(rel.version, newest_default(&r));
        let e = choose(&r, hip("5.2.21151"), &BuildOptions::default()).unwrap_err();
        let text = format!("{e} | {}", miette::Diagnostic::help(&e).unwrap());
        assert!(
            text.contains("no release of ctranslate2 supports HIP 5.2.21151"),
            "{text}"
        );
        assert!(text.contains("HIP >=6.1"), "{text}");
    }

    /// CTranslate2 4.8.1 was built here with CUDA 13.2; the older releases were not (upstream
    /// lists CUDA 12 only, issue 1933): for them a CUDA 13 toolkit is refused before anything is
    /// fetched, with the recipe's why and the release that works.
    #[test]
    fn ctranslate2_takes_cuda_13_only_for_the_release_built_with_it() {
        let r = recipe("ctranslate2");
        let cuda = |v| Against::default().with_cuda(Some(v));
        let (rel, _) = choose(&r, cuda("12.9"), &BuildOptions::default()).unwrap();
        assert_eq!(rel.version, newest_default(&r));
        // 4.8.1 was built here with CUDA 13.2 (recipes_real::ctranslate2_cuda_13_…).
        let (rel, _) = choose(&r, cuda("13.2"), &BuildOptions::default()).unwrap();
        assert_eq!(rel.version, "4.8.1");
        let asked = BuildOptions {
            version: Some("4.8.0".into()),
            ..BuildOptions::default()
        };
        let e = choose(&r, cuda("13.2"), &asked).unwrap_err();
        let text = format!("{e} | {}", miette::Diagnostic::help(&e).unwrap());
        assert!(
            text.contains("CUDA 13.2: it builds with CUDA <13"),
            "{text}"
        );
        assert!(text.contains("issue 1933"), "{text}");
        assert!(
            text.contains("releases that support CUDA 13.2: 4.8.1"),
            "{text}"
        );
    }
}
