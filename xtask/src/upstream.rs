//! `cargo xtask upstream [--mirror DIR]`: the releases upstream has tagged that a recipe does
//! not know yet, so a maintainer sees a new TorchCodec or CTranslate2 the day it appears. Each
//! recipe's `[source] git` is asked for its tags with `git ls-remote` (the mirror's copy when
//! `--mirror` or `ROCBUILD_MIRROR` names one, else the network); the final releases among the
//! tags that match the recipe's tag template and are newer than its newest `[[release]]` are
//! listed (older ones it does not carry are counted: a recipe starts where it starts).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::str::FromStr;

use pep440_rs::Version;

use crate::util::{workspace_root, Result};

/// What one recipe lacks.
#[derive(Debug, PartialEq)]
pub struct Missing {
    pub recipe: String,
    pub source: String,
    /// Versions upstream tagged after the recipe's newest `[[release]]`, newest first.
    pub versions: Vec<String>,
    /// Older tagged versions the recipe does not carry.
    pub older: usize,
}

pub fn upstream(args: &[String]) -> Result<ExitCode> {
    let mirror = match args {
        [flag, dir] if flag == "--mirror" => Some(PathBuf::from(dir)),
        [] => std::env::var_os("ROCBUILD_MIRROR").map(PathBuf::from),
        _ => return Err("usage: cargo xtask upstream [--mirror DIR]".into()),
    };
    let dir = workspace_root().join("recipes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut behind = 0;
    for f in files {
        let m = check(&f, mirror.as_deref())?;
        if m.versions.is_empty() {
            println!(
                "{}: no release tagged at {} is newer than the recipe's ({} older ones not carried)",
                m.recipe, m.source, m.older
            );
        } else {
            behind += 1;
            println!(
                "{}: {} tagged at {} but not in {}",
                m.recipe,
                m.versions.join(", "),
                m.source,
                f.display()
            );
        }
    }
    Ok(if behind == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The versions `recipe_file`'s source has tagged and the recipe lacks.
pub fn check(recipe_file: &Path, mirror: Option<&Path>) -> Result<Missing> {
    let text = std::fs::read_to_string(recipe_file)
        .map_err(|e| format!("cannot read {}: {e}", recipe_file.display()))?;
    let recipe = rocbuild_recipe::parse(&recipe_file.display().to_string(), &text)
        .map_err(|e| format!("{}: {e}", recipe_file.display()))?;
    let raw = &recipe.raw;
    let known: Vec<Version> = raw
        .releases
        .iter()
        .filter_map(|r| Version::from_str(r.version.get_ref()).ok())
        .collect();
    let (source, tags, template) = match (&raw.source.git, &raw.source.sdist) {
        (Some(git), _) => {
            let url = git.get_ref().clone();
            let template = raw
                .source
                .tag
                .as_ref()
                .map(|t| t.get_ref().clone())
                .unwrap_or_else(|| "v{version}".into());
            let source = match mirror.and_then(|m| mirrored(m, &url)) {
                Some(p) => p.display().to_string(),
                None => url.clone(),
            };
            let tags = ls_remote_tags(&source)?;
            (source, tags, template)
        }
        (None, Some(project)) => {
            let (source, versions) = sdist_versions(project.get_ref(), mirror)?;
            (source, versions, "{version}".to_string())
        }
        (None, None) => return Err(format!("{}: no [source]", recipe_file.display())),
    };
    let (versions, older) = unknown_versions(&tags, &template, &known);
    Ok(Missing {
        recipe: recipe.name().to_string(),
        source,
        versions,
        older,
    })
}

/// The releases of a PyPI project: the sdists in the mirror's `pypi/` when it has that
/// directory, else the index's JSON API (`curl`).
fn sdist_versions(project: &str, mirror: Option<&Path>) -> Result<(String, Vec<String>)> {
    let normalized: String = project.to_ascii_lowercase().replace(['-', '.'], "_");
    if let Some(dir) = mirror.map(|m| m.join("pypi")).filter(|d| d.is_dir()) {
        let versions = std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .flatten()
            .filter_map(|e| {
                let n = e.file_name().to_string_lossy().to_ascii_lowercase();
                let rest = n.strip_prefix(&format!("{normalized}-"))?;
                rest.strip_suffix(".tar.gz").map(str::to_string)
            })
            .collect();
        return Ok((dir.display().to_string(), versions));
    }
    let url = format!("https://pypi.org/pypi/{project}/json");
    let out = Command::new("curl")
        .args(["-fsSL", "--max-time", "30", &url])
        .output()
        .map_err(|e| format!("cannot run curl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{url}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("{url}: {e}"))?;
    let versions = v["releases"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    Ok((url, versions))
}

/// `https://HOST/OWNER/REPO` in a mirror: `DIR/HOST/OWNER/REPO.git` (as rocbuild reads it).
fn mirrored(mirror: &Path, url: &str) -> Option<PathBuf> {
    let rest = url.split_once("://")?.1.trim_end_matches('/');
    let rest = rest.strip_suffix(".git").unwrap_or(rest);
    let p = mirror.join(format!("{rest}.git"));
    p.is_dir().then_some(p)
}

/// The tag names of a repository (`git ls-remote --tags`, peeled duplicates dropped).
fn ls_remote_tags(source: &str) -> Result<Vec<String>> {
    let out = Command::new("git")
        .args(["ls-remote", "--tags", source])
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git ls-remote --tags {source} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut tags: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split('\t').nth(1)?.strip_prefix("refs/tags/"))
        .map(|t| t.trim_end_matches("^{}").to_string())
        .collect();
    tags.dedup();
    Ok(tags)
}

/// The versions of `tags` that match `template` (`v{version}`), are final releases (no rc,
/// no dev) and are newer than every `known` one, newest first, compared as versions (0.10
/// after 0.9); and how many older ones are not `known`.
pub fn unknown_versions(
    tags: &[String],
    template: &str,
    known: &[Version],
) -> (Vec<String>, usize) {
    let (before, after) = template.split_once("{version}").unwrap_or((template, ""));
    let mut found: Vec<Version> = tags
        .iter()
        .filter_map(|t| t.strip_prefix(before)?.strip_suffix(after))
        .filter_map(|v| Version::from_str(v).ok())
        .filter(|v| !v.any_prerelease() && !v.is_post() && !v.is_local())
        .filter(|v| !known.contains(v))
        .collect();
    found.sort();
    found.dedup();
    found.reverse();
    let newest = known.iter().max();
    let (newer, older): (Vec<Version>, Vec<Version>) = found
        .into_iter()
        .partition(|v| newest.is_none_or(|n| v > n));
    (newer.iter().map(ToString::to_string).collect(), older.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::from_str(s).unwrap()
    }

    #[test]
    fn tags_the_recipe_lacks_newest_first_compared_as_versions() {
        let tags: Vec<String> = [
            "v0.9.1",
            "v0.10.0",
            "v0.17.0",
            "v0.18.0-rc1",
            "v0.18.0",
            "nightly",
            "v0.11.0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let known = [v("0.9.1"), v("0.17.0")];
        let (newer, older) = unknown_versions(&tags, "v{version}", &known);
        assert_eq!(newer, ["0.18.0"]);
        assert_eq!(older, 2, "0.10.0 and 0.11.0, between the recipe's releases");
        assert!(unknown_versions(&tags, "release-{version}", &known)
            .0
            .is_empty());
    }

    /// A real git repository with tags, read through the mirror layout rocbuild uses.
    #[test]
    fn a_mirrored_repository_is_asked_for_its_tags() {
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().join("example.invalid/acme/codec.git");
        let git = |args: &[&str], dir: &Path| {
            let ok = Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
                .args(args)
                .current_dir(dir)
                .output()
                .unwrap();
            assert!(
                ok.status.success(),
                "{}",
                String::from_utf8_lossy(&ok.stderr)
            );
        };
        std::fs::create_dir_all(&repo).unwrap();
        git(&["init", "-q"], &repo);
        git(&["commit", "-q", "--allow-empty", "-m", "one"], &repo);
        for t in ["v1.0.0", "v1.1.0"] {
            git(&["tag", "-a", t, "-m", t], &repo);
        }
        let recipe = d.path().join("codec.toml");
        std::fs::write(
            &recipe,
            "[package]\nname = \"codec\"\ndistribution = \"codec\"\nimport-dir = \"codec\"\n\n[source]\ngit = \"https://example.invalid/acme/codec\"\ntag = \"v{version}\"\n\n[[release]]\nversion = \"1.0.0\"\ntorch = \">=2.0\"\n\n[install]\nartifacts = [\"libcodec*\"]\n",
        )
        .unwrap();
        let m = check(&recipe, Some(d.path())).unwrap();
        assert_eq!(m.recipe, "codec");
        assert_eq!(m.versions, ["1.1.0"]);
        assert!(m.source.ends_with("codec.git"), "{}", m.source);
    }
}
