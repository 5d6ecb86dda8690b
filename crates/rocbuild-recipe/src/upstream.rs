//! Releases upstream has that a recipe does not list: which tags name a release (by the
//! recipe's tag template), which of those are newer than the recipe's newest, and with which
//! listed release's rules an unlisted one is built (or why it is refused). Pure: the tags come
//! from the caller (`git ls-remote`, a mirror, a package index, a cached answer).

use std::collections::BTreeMap;
use std::str::FromStr;

pub use pep440_rs::Version;

use crate::{Recipe, RecipeError, ReleaseInfo};

/// Upstream has released what the recipe does not list yet: said in the plan, by `rocbuild
/// recipes` and by `status` (and in their `--json`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Notice {
    pub recipe: String,
    /// Releases newer than the recipe's newest, newest first.
    pub newer: Vec<String>,
    /// The recipe's newest `[[release]]`.
    pub recipe_newest: String,
    /// Where it was read: the recipe's git URL or the index's project (no password).
    pub source: String,
    /// When upstream was asked, seconds since the epoch.
    pub checked: u64,
    /// Answered from the day's cache: this run asked nothing.
    pub cached: bool,
}

impl Notice {
    /// `upstream has torchcodec 0.17.0; this recipe knows up to 0.16.0 (build it with
    /// --version 0.17.0)`.
    pub fn line(&self) -> String {
        let Some(first) = self.newer.first() else {
            return String::new();
        };
        let more = match self.newer.len() {
            1 => String::new(),
            n => format!(" (and {} more: {})", n - 1, self.newer[1..].join(", ")),
        };
        format!(
            "upstream has {} {first}{more}; this recipe knows up to {} (build it with --version {first})",
            self.recipe, self.recipe_newest
        )
    }
}

/// The final releases (no pre, dev, post or local part) among `tags` under `template`
/// (`v{version}`, `{name}` already expanded), each with the tag it came from; sorted, newest
/// first, one entry per version.
pub fn tagged_versions<'a>(tags: &'a [String], template: &str) -> Vec<(Version, &'a str)> {
    let (before, after) = template.split_once("{version}").unwrap_or((template, "\0"));
    let mut found: Vec<(Version, &str)> = tags
        .iter()
        .filter_map(|t| {
            let v = t.strip_prefix(before)?.strip_suffix(after)?;
            Some((Version::from_str(v).ok()?, t.as_str()))
        })
        .filter(|(v, _)| !v.any_prerelease() && !v.is_post() && !v.is_local())
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.dedup_by(|a, b| a.0 == b.0);
    found
}

/// The versions of `found` that `known` lacks and that are newer than every `known` one,
/// newest first (compared as versions: 0.10 after 0.9); and how many older ones it lacks.
pub fn unknown_versions(found: &[Version], known: &[Version]) -> (Vec<String>, usize) {
    let newest = known.iter().max();
    let mut newer: Vec<&Version> = Vec::new();
    let mut older = 0;
    for v in found.iter().filter(|v| !known.contains(v)) {
        if newest.is_none_or(|n| v > n) {
            newer.push(v);
        } else {
            older += 1;
        }
    }
    newer.sort();
    newer.dedup();
    newer.reverse();
    (newer.iter().map(ToString::to_string).collect(), older)
}

/// The version in a sdist's file name (`llama_cpp_python-0.3.36.tar.gz`, or the older
/// unnormalized `llama-cpp-python-0.3.36.tar.gz`) of `project`.
pub fn sdist_version(project: &str, file: &str) -> Option<String> {
    let stem = file.strip_suffix(".tar.gz")?;
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '.'], "_");
    let (name, version) = stem.rsplit_once('-')?;
    (norm(name) == norm(project)).then(|| version.to_string())
}

impl Recipe {
    /// The tag template of a git source with `{name}` expanded (`v{version}`); `None` for
    /// an sdist.
    pub fn tag_template(&self) -> Option<String> {
        self.raw.source.git.as_ref()?;
        let t = self
            .raw
            .source
            .tag
            .as_ref()
            .map_or("v{version}", |t| t.get_ref().as_str());
        Some(t.replace("{name}", self.name()))
    }

    /// The tag of `version` under the template (`v0.17.0`).
    pub fn tag_of(&self, version: &str) -> Option<String> {
        let vars = BTreeMap::from([
            ("name".to_string(), self.name().to_string()),
            ("version".to_string(), version.to_string()),
        ]);
        let t = self
            .raw
            .source
            .tag
            .as_ref()
            .map_or("v{version}", |t| t.get_ref());
        crate::template::expand(t, &vars).ok()
    }

    /// The version a tag names under the template (`v0.17.0` -> `0.17.0`), a final release.
    pub fn version_of_tag(&self, tag: &str) -> Option<String> {
        let template = self.tag_template()?;
        let tags = [tag.trim_start_matches("refs/tags/").to_string()];
        tagged_versions(&tags, &template)
            .first()
            .map(|(v, _)| v.to_string())
    }

    /// Every `[[release]]` version.
    pub fn known_versions(&self) -> Vec<Version> {
        self.raw
            .releases
            .iter()
            .filter_map(|r| Version::from_str(r.version.get_ref()).ok())
            .collect()
    }

    /// Whether the recipe lists `version` (compared as versions: `0.17` is `0.17.0`).
    pub fn lists(&self, version: &str) -> bool {
        Version::from_str(version).is_ok_and(|v| self.known_versions().contains(&v))
    }

    /// The listed release whose rules build the unlisted `version`: the nearest older release
    /// of the same major.minor series, else the nearest older one. Refused, before anything
    /// is fetched, for a new major, a version older than every listed one, or a base release
    /// that says `stop-newer`.
    pub fn base_of_unlisted(&self, version: &str) -> Result<ReleaseInfo, RecipeError> {
        let refuse = |span: std::ops::Range<usize>, what: String, help: String| {
            RecipeError::at(&self.file, &self.text, span, what, "", Some(help))
        };
        let name = self.name();
        let all = self.releases();
        let v = Version::from_str(version).map_err(|e| RecipeError::NoRelease {
            recipe: name.into(),
            version: version.into(),
            help: format!("`{version}` is not a version ({e})"),
        })?;
        let parsed: Vec<(Version, &ReleaseInfo)> = all
            .iter()
            .filter_map(|r| Some((Version::from_str(&r.version).ok()?, r)))
            .collect();
        let series = |x: &Version| (x.release().first().copied(), x.release().get(1).copied());
        let older = || parsed.iter().filter(|(x, _)| *x < v);
        let base = older()
            .filter(|(x, _)| series(x) == series(&v))
            .max_by(|a, b| a.0.cmp(&b.0))
            .or_else(|| older().max_by(|a, b| a.0.cmp(&b.0)));
        let span_of = |r: &ReleaseInfo| {
            self.raw
                .releases
                .iter()
                .find(|x| x.version.get_ref() == &r.version)
                .map_or(0..0, |x| x.version.span())
        };
        let Some((bv, base)) = base else {
            let oldest = parsed
                .last()
                .map(|(x, _)| x.to_string())
                .unwrap_or_default();
            return Err(refuse(
                0..0,
                format!("{name} {version} is older than every release of the recipe (the oldest is {oldest}): there are no rules to build it with"),
                format!("build a release the recipe lists (rocbuild recipes), or add [[release]] version = \"{version}\" to a recipe of yours (--recipes DIR); nothing was fetched"),
            ));
        };
        let major = |x: &Version| x.release().first().copied().unwrap_or(0);
        let newest = parsed.first().map(|(x, _)| x.clone()).unwrap_or(bv.clone());
        if major(&v) > major(&newest) {
            return Err(refuse(
                span_of(base),
                format!(
                    "{name} {version} is a new major release: the recipe's rules stop at major {} (its newest release is {newest}), and a new major may change how it is built",
                    major(&newest)
                ),
                format!("build {newest} (the newest the recipe lists), or add [[release]] version = \"{version}\" to a recipe of yours (--recipes DIR) once its build is known; nothing was fetched"),
            ));
        }
        if let Some(why) = self.stop_newer(&base.version) {
            return Err(refuse(
                why.span(),
                format!(
                    "{name} {version} is not in the recipe, and {}'s rules are not for releases after it: {}",
                    base.version,
                    why.get_ref()
                ),
                format!("build {} or an older release, or add [[release]] version = \"{version}\" to a recipe of yours (--recipes DIR) with its own rules; nothing was fetched", base.version),
            ));
        }
        Ok((*base).clone())
    }

    fn stop_newer(&self, version: &str) -> Option<&crate::schema::Text> {
        self.raw
            .releases
            .iter()
            .find(|r| r.version.get_ref() == version)?
            .stop_newer
            .as_ref()
    }

    /// This recipe with the unlisted `version` added, built with its base release's rules
    /// (ranges, not its fixes: they are for the base's own commit), never picked by itself,
    /// pinned to `commit` when the tag was read. See [`Recipe::base_of_unlisted`].
    pub fn with_unlisted(
        &self,
        version: &str,
        commit: Option<&str>,
    ) -> Result<Recipe, RecipeError> {
        let base = self.base_of_unlisted(version)?;
        let mut out = self.clone();
        let template = out
            .raw
            .releases
            .iter()
            .find(|r| r.version.get_ref() == &base.version)
            .cloned();
        if let Some(mut r) = template {
            let at = r.version.span();
            r.version = crate::schema::Text::new(at.clone(), version.to_string());
            r.commit = commit.map(|c| crate::schema::Text::new(at.clone(), c.to_string()));
            r.sha256 = None;
            r.patch.clear();
            r.default = false;
            r.stop_newer = None;
            r.note = Some(format!(
                "not in the recipe: built with {}'s rules",
                base.version
            ));
            r.rules_of = Some(base.version.clone());
            out.raw.releases.push(r);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::from_str(s).unwrap()
    }

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn tags_the_recipe_lacks_newest_first_compared_as_versions() {
        let tags = strings(&[
            "v0.9.1",
            "v0.10.0",
            "v0.17.0",
            "v0.18.0-rc1",
            "v0.18.0",
            "nightly",
            "v0.11.0",
            "v0.18.0.post1",
        ]);
        let found: Vec<Version> = tagged_versions(&tags, "v{version}")
            .into_iter()
            .map(|(v, _)| v)
            .collect();
        let known = [v("0.9.1"), v("0.17.0")];
        let (newer, older) = unknown_versions(&found, &known);
        assert_eq!(newer, ["0.18.0"]);
        assert_eq!(older, 2, "0.10.0 and 0.11.0, between the recipe's releases");
        assert!(tagged_versions(&tags, "release-{version}").is_empty());
        assert_eq!(tagged_versions(&tags, "v{version}")[0].1, "v0.18.0");
    }

    #[test]
    fn sdist_file_names_give_their_version() {
        let p = "llama-cpp-python";
        assert_eq!(
            sdist_version(p, "llama_cpp_python-0.3.36.tar.gz").as_deref(),
            Some("0.3.36")
        );
        assert_eq!(
            sdist_version(p, "llama-cpp-python-0.3.2.tar.gz").as_deref(),
            Some("0.3.2")
        );
        assert_eq!(sdist_version(p, "other-1.0.tar.gz"), None);
        assert_eq!(
            sdist_version(p, "llama_cpp_python-0.3.36-py3-none-any.whl"),
            None
        );
    }

    fn recipe(releases: &str) -> Recipe {
        let text = format!(
            "[package]\nname = \"codec\"\ndistribution = \"codec\"\nimport-dir = \"codec\"\n\n[source]\ngit = \"https://example.invalid/acme/codec\"\ntag = \"{{name}}-v{{version}}\"\n\n{releases}\n[install]\nartifacts = [\"libcodec*\"]\n"
        );
        crate::parse("codec.toml", &text).unwrap()
    }

    const RELEASES: &str = "[[release]]\nversion = \"1.2.0\"\ntorch = \">=2.11\"\nffmpeg = \">=4,<10\"\n\n[[release]]\nversion = \"1.1.3\"\ntorch = \">=2.10\"\n\n[[release.patch]]\nname = \"fix\"\nwhy = \"a fix\"\ndiff = \"x\"\n\n[[release]]\nversion = \"1.0.0\"\ntorch = \">=2.9\"\n";

    /// The nearest older release of the same series, else the nearest older one; its ranges
    /// go with the new version, its fixes do not.
    #[test]
    fn an_unlisted_release_takes_the_rules_of_the_nearest_older_one() {
        let r = recipe(RELEASES);
        assert_eq!(r.tag_of("1.3.0").as_deref(), Some("codec-v1.3.0"));
        assert_eq!(
            r.version_of_tag("refs/tags/codec-v1.3.0").as_deref(),
            Some("1.3.0")
        );
        assert_eq!(r.version_of_tag("v1.3.0"), None);
        assert_eq!(r.base_of_unlisted("1.3.0").unwrap().version, "1.2.0");
        assert_eq!(r.base_of_unlisted("1.1.5").unwrap().version, "1.1.3");
        assert_eq!(r.base_of_unlisted("1.1.1").unwrap().version, "1.0.0");
        let c = "a".repeat(40);
        let more = r.with_unlisted("1.1.5", Some(&c)).unwrap();
        let rel = more.release("1.1.5").unwrap();
        assert_eq!(rel.torch, ">=2.10");
        assert_eq!(rel.commit.as_deref(), Some(c.as_str()));
        assert_eq!(rel.rules_of.as_deref(), Some("1.1.3"));
        assert!(rel.patches.is_empty() && !rel.default);
        assert!(more.lists("1.1.5") && !r.lists("1.1.5"));
        // Still the newest default release by itself.
        assert_eq!(
            more.releases().iter().find(|x| x.default).unwrap().version,
            "1.2.0"
        );
    }

    /// A new major, a version older than the recipe, and a release that says stop are
    /// refused, each saying what to do instead.
    #[test]
    fn a_jump_the_recipe_marks_incompatible_is_refused() {
        let r = recipe(RELEASES);
        let e = r.base_of_unlisted("2.0.0").unwrap_err();
        let help = miette::Diagnostic::help(&e).unwrap().to_string();
        assert!(
            e.to_string().contains("codec 2.0.0 is a new major release"),
            "{e}"
        );
        assert!(e.to_string().starts_with("codec.toml:"), "{e}");
        assert!(help.contains("nothing was fetched"), "{help}");
        let e = r.base_of_unlisted("0.9.0").unwrap_err();
        assert!(e.to_string().contains("older than every release"), "{e}");
        let stop = RELEASES.replacen(
            "ffmpeg = \">=4,<10\"\n",
            "ffmpeg = \">=4,<10\"\nstop-newer = \"1.3 moves to another build system\"\n",
            1,
        );
        let r = recipe(&stop);
        let e = r.base_of_unlisted("1.3.0").unwrap_err();
        assert!(
            e.to_string().contains(
                "1.2.0's rules are not for releases after it: 1.3 moves to another build system"
            ),
            "{e}"
        );
        assert!(r.base_of_unlisted("1.1.5").is_ok(), "another series' base");
    }
}
