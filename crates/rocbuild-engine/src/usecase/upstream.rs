//! Releases newer than the recipe: asked of the recipe's source (its git repository, or the
//! package index of an sdist), through the mirror when it holds the source, at most once a
//! day per source (`rocbuild_fetch::upstream`), never blocking a run; and a release the
//! recipe does not list, asked for with `--version` or `--rev`, resolved to its tag's commit
//! and built with the rules of the nearest older release (`rocbuild_recipe::upstream`).

use std::str::FromStr;

use rocbuild_fetch::upstream::{self as ask, Answer, Origin};
use rocbuild_recipe::upstream::Version;
use rocbuild_recipe::upstream::{tagged_versions, unknown_versions, Notice};
use rocbuild_recipe::Recipe;
use rocbuild_venv::BuildOptions;

use super::Settings;
use crate::error::{EngineError, Result};

/// Where the recipe's releases are read: the key the day's answer is kept under (no
/// password), what is asked, and what is shown.
fn origin(recipe: &Recipe, settings: &Settings) -> Option<(String, Origin, String)> {
    let mirror = settings.mirror.as_deref();
    let raw = &recipe.raw.source;
    if let Some(git) = &raw.git {
        let vars =
            std::collections::BTreeMap::from([("name".to_string(), recipe.name().to_string())]);
        let url = rocbuild_recipe::template::expand(git.get_ref(), &vars).ok()?;
        let key = rocbuild_secret::strip_userinfo(&url);
        let mirrored = mirror
            .and_then(|m| crate::source::mirror_path(m, &url))
            .filter(|p| p.exists());
        return Some(match mirrored {
            Some(p) => (
                key,
                Origin::Git(p.display().to_string()),
                p.display().to_string(),
            ),
            None => (key.clone(), Origin::Git(url), key),
        });
    }
    let project = raw.sdist.as_ref()?.get_ref().clone();
    if let Some(dir) = mirror.map(|m| m.join("pypi")).filter(|d| d.is_dir()) {
        let key = format!("{}#{project}", dir.display());
        return Some((key.clone(), Origin::Dir(dir), key));
    }
    // The index the sdist itself would come from (as the source plan reads it).
    let index = (settings.env.sdist_index.clone())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "https://pypi.org/simple".into());
    let shown = format!(
        "{}/{project}/",
        rocbuild_secret::strip_userinfo(index.trim_end_matches('/'))
    );
    Some((shown.clone(), Origin::Index { index, project }, shown))
}

/// The releases an answer lists, with the tag and commit of each (sdists: the file name).
fn releases(recipe: &Recipe, a: &Answer) -> Vec<(Version, String, Option<String>)> {
    let Some(listed) = &a.listed else {
        return Vec::new();
    };
    match recipe.tag_template() {
        Some(template) => {
            let names: Vec<String> = listed.iter().map(|l| l.name.clone()).collect();
            tagged_versions(&names, &template)
                .into_iter()
                .map(|(v, tag)| {
                    let commit = listed
                        .iter()
                        .find(|l| l.name == tag)
                        .and_then(|l| l.commit.clone());
                    (v, tag.to_string(), commit)
                })
                .collect()
        }
        None => {
            let project = recipe
                .raw
                .source
                .sdist
                .as_ref()
                .map(|p| p.get_ref().as_str())
                .unwrap_or("");
            let mut out: Vec<_> = listed
                .iter()
                .filter_map(|l| {
                    let v = rocbuild_recipe::upstream::sdist_version(project, &l.name)?;
                    let v = Version::from_str(&v).ok()?;
                    (!v.any_prerelease() && !v.is_local()).then(|| (v, l.name.clone(), None))
                })
                .collect();
            out.sort_by(|a, b| b.0.cmp(&a.0));
            out.dedup_by(|a, b| a.0 == b.0);
            out
        }
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The day's answer about `recipe`'s source (`refresh`: ask again whatever the cache says).
fn answer(recipe: &Recipe, settings: &Settings, refresh: bool) -> Option<(Answer, String)> {
    let (key, origin, shown) = origin(recipe, settings)?;
    let a = ask::daily(&settings.cache, &key, &origin, now(), ask::TIMEOUT, refresh);
    Some((a, shown))
}

/// What upstream has that is newer than every release of the recipe; `None` when nothing is,
/// or the source could not be reached (offline says nothing).
pub fn notice(recipe: &Recipe, settings: &Settings) -> Option<Notice> {
    let (a, source) = answer(recipe, settings, false)?;
    let found: Vec<Version> = releases(recipe, &a).into_iter().map(|(v, ..)| v).collect();
    let known = recipe.known_versions();
    let (newer, _) = unknown_versions(&found, &known);
    let newest = known.iter().max()?.to_string();
    (!newer.is_empty()).then(|| Notice {
        recipe: recipe.name().to_string(),
        newer,
        recipe_newest: newest,
        source,
        checked: a.checked,
        cached: a.cached,
    })
}

/// [`notice`], unless the settings turn the check off (`ROCBUILD_UPSTREAM=off`).
pub fn notice_for(recipe: &Recipe, settings: &Settings) -> Option<Notice> {
    settings
        .upstream
        .then(|| notice(recipe, settings))
        .flatten()
}

/// The version `--version` or `--rev` asks for when the recipe does not list it.
fn unlisted(recipe: &Recipe, opts: &BuildOptions) -> Option<String> {
    match (&opts.version, &opts.rev) {
        (Some(v), _) => (!recipe.lists(v)).then(|| v.clone()),
        (None, Some(rev)) => recipe.version_of_tag(rev).filter(|v| !recipe.lists(v)),
        (None, None) => None,
    }
}

/// `--version 0.17.0` (or `--rev v0.17.0`) of a release the recipe does not list: refused
/// before anything is fetched when the recipe marks the jump (a new major, `stop-newer`),
/// else resolved to the commit upstream's tag names (asked again when the day's answer lacks
/// it) and added to the recipe with the rules of the release it follows. `None`: the recipe
/// lists what was asked (or nothing was).
pub fn for_build(
    recipe: &Recipe,
    opts: &BuildOptions,
    settings: &Settings,
) -> Result<Option<Recipe>> {
    let Some(version) = unlisted(recipe, opts) else {
        return Ok(None);
    };
    // Not a version, or older than every release: the release choice says so, listing them.
    match Version::from_str(&version) {
        Ok(v) if recipe.known_versions().iter().any(|k| *k < v) => {}
        _ => return Ok(None),
    }
    recipe.base_of_unlisted(&version)?;
    // The user's own source (`--source`) or revision is built as given.
    if opts.source.is_some() || opts.rev.is_some() {
        return Ok(Some(recipe.with_unlisted(&version, None)?));
    }
    let Some(template) = recipe.tag_template() else {
        return Err(EngineError::Usage {
            option: format!("--version {version}"),
            reason: format!(
                "{version} is not in the recipe, and {} is built from an sdist, which the recipe pins release by release (its sha256)",
                recipe.name()
            ),
            help: Some(format!(
                "add [[release]] version = \"{version}\" with its sha256 to a recipe of yours (--recipes DIR); releases in the recipe: rocbuild recipes; nothing was fetched"
            )),
        });
    };
    let v = Version::from_str(&version).ok();
    let find = |a: &Answer| {
        releases(recipe, a)
            .into_iter()
            .find(|(x, ..)| Some(x) == v.as_ref())
    };
    let mut got = answer(recipe, settings, false);
    if got.as_ref().is_none_or(|(a, _)| find(a).is_none()) {
        got = answer(recipe, settings, true);
    }
    let tag = recipe
        .tag_of(&version)
        .unwrap_or_else(|| template.replace("{version}", &version));
    match got {
        Some((a, _)) if find(&a).is_some() => {
            let commit = find(&a).and_then(|(_, _, c)| c);
            Ok(Some(recipe.with_unlisted(&version, commit.as_deref())?))
        }
        Some((a, source)) => {
            let has: Vec<String> = releases(recipe, &a)
                .iter()
                .take(6)
                .map(|(v, ..)| v.to_string())
                .collect();
            Err(EngineError::Usage {
                option: format!("--version {version}"),
                reason: match &a.listed {
                    Some(_) => format!("{version} is not in the recipe, and {source} has no tag {tag}"),
                    None => format!("{version} is not in the recipe, and {source} could not be asked for its tag {tag} (offline?)"),
                },
                help: Some(if has.is_empty() {
                    "check the version; offline, a mirror that holds the tag (ROCBUILD_MIRROR) or --rev COMMIT with --source builds it; nothing was fetched".to_string()
                } else {
                    format!("releases upstream has: {}; nothing was fetched", has.join(", "))
                }),
            })
        }
        None => Ok(Some(recipe.with_unlisted(&version, None)?)),
    }
}

/// `status`: what upstream has beyond the recipe of each build in the venv.
pub fn for_status(
    status: &mut rocbuild_venv::status::VenvStatus,
    recipes: &rocbuild_recipe::RecipeSet,
    settings: &Settings,
) {
    for r in &mut status.recipes {
        if let Ok(recipe) = recipes.get(&r.recipe) {
            r.upstream = notice_for(recipe, settings);
        }
    }
}
