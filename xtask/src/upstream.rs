//! `cargo xtask upstream [--mirror DIR]`: the releases upstream has tagged that a recipe does
//! not know yet, so a maintainer sees a new TorchCodec or CTranslate2 the day it appears. Each
//! recipe's `[source] git` is asked for its tags with `git ls-remote` (the mirror's copy when
//! `--mirror` or `ROCBUILD_MIRROR` names one, else the network); the final releases among the
//! tags that match the recipe's tag template and are newer than its newest `[[release]]` are
//! listed (older ones it does not carry are counted: a recipe starts where it starts).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use pep440_rs::Version;
use rocbuild_fetch::upstream::{ask, Origin};
use rocbuild_recipe::upstream::{sdist_version, tagged_versions, unknown_versions};

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

/// The versions `recipe_file`'s source has tagged (or its index lists) and the recipe lacks.
/// The listing and the comparison are rocbuild's own (`rocbuild_fetch::upstream`,
/// `rocbuild_recipe::upstream`): what users are told is what maintainers see.
pub fn check(recipe_file: &Path, mirror: Option<&Path>) -> Result<Missing> {
    let text = std::fs::read_to_string(recipe_file)
        .map_err(|e| format!("cannot read {}: {e}", recipe_file.display()))?;
    let recipe = rocbuild_recipe::parse(&recipe_file.display().to_string(), &text)
        .map_err(|e| format!("{}: {e}", recipe_file.display()))?;
    let raw = &recipe.raw;
    let (source, origin) = match (&raw.source.git, &raw.source.sdist) {
        (Some(git), _) => {
            let url = git.get_ref().clone();
            match mirror.and_then(|m| mirrored(m, &url)) {
                Some(p) => (
                    p.display().to_string(),
                    Origin::Git(p.display().to_string()),
                ),
                None => (url.clone(), Origin::Git(url)),
            }
        }
        (None, Some(project)) => {
            let project = project.get_ref().clone();
            match mirror.map(|m| m.join("pypi")).filter(|d| d.is_dir()) {
                Some(dir) => (dir.display().to_string(), Origin::Dir(dir)),
                None => {
                    let index = "https://pypi.org/simple".to_string();
                    (
                        format!("{index}/{project}/"),
                        Origin::Index { index, project },
                    )
                }
            }
        }
        (None, None) => return Err(format!("{}: no [source]", recipe_file.display())),
    };
    let listed = ask(&origin, Duration::from_secs(60)).map_err(|e| format!("{source}: {e}"))?;
    let names: Vec<String> = listed.into_iter().map(|l| l.name).collect();
    let found: Vec<Version> = match recipe.tag_template() {
        Some(template) => tagged_versions(&names, &template)
            .into_iter()
            .map(|(v, _)| v)
            .collect(),
        None => {
            let project = raw
                .source
                .sdist
                .as_ref()
                .map(|p| p.get_ref().as_str())
                .unwrap_or("");
            names
                .iter()
                .filter_map(|n| sdist_version(project, n))
                .filter_map(|v| Version::from_str(&v).ok())
                .filter(|v| !v.any_prerelease() && !v.is_local())
                .collect()
        }
    };
    let (versions, older) = unknown_versions(&found, &recipe.known_versions());
    Ok(Missing {
        recipe: recipe.name().to_string(),
        source,
        versions,
        older,
    })
}

/// `https://HOST/OWNER/REPO` in a mirror: `DIR/HOST/OWNER/REPO.git` (as rocbuild reads it).
fn mirrored(mirror: &Path, url: &str) -> Option<PathBuf> {
    let rest = url.split_once("://")?.1.trim_end_matches('/');
    let rest = rest.strip_suffix(".git").unwrap_or(rest);
    let p = mirror.join(format!("{rest}.git"));
    p.is_dir().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

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
