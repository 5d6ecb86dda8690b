//! Where the source comes from: a local directory built as it is (`--source DIR`), or a git
//! repository (the recipe's, or `--source URL`) at the release's tag and pinned commit, or at
//! `--rev`.

use std::path::{Path, PathBuf};

use rocbuild_probe::{Flavor, Os};
use rocbuild_recipe::{Recipe, ReleaseInfo, Resolved, SubmoduleSel};
use rocbuild_venv::{BuildOptions, Patch};
use serde::Serialize;

use crate::context::Context;
use crate::error::{EngineError, Result};
use crate::paths::{join, looks_like_url, sanitize};
use crate::vars::{base, expand};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum SourcePlan {
    Git {
        url: String,
        /// `refs/tags/v0.9.1`, or a user's `--rev` (branch, tag or commit).
        reference: String,
        expected_commit: Option<String>,
        submodules: SubmoduleSel,
        mirror: Option<PathBuf>,
        /// Bare clones, keyed by URL.
        git_cache: PathBuf,
        checkout: PathBuf,
        /// `--patch FILE`s with their sha256, applied in order to the checkout (which is then
        /// one of its own: its directory name carries their hash).
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        patches: Vec<Patch>,
        /// The recipe's own fixes for this release, applied before `patches`.
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        shipped: Vec<ShippedFile>,
    },
    /// A directory built as it is (`--source DIR` without `--rev`).
    Local { dir: PathBuf },
    /// A release's source distribution from the package index (`[source] sdist`), pinned by
    /// its sha256, unpacked into the cache.
    Sdist {
        project: String,
        version: String,
        sha256: String,
        /// The index's simple API root (`https://pypi.org/simple`); a password in it (from
        /// `$PIP_INDEX_URL`) is used, never shown or stored: the plan as data has it stripped.
        #[serde(serialize_with = "without_userinfo")]
        index: String,
        /// Directories of sdists looked in first, offline (`$ROCBUILD_SDISTS`, `<mirror>/pypi`).
        offline: Vec<PathBuf>,
        /// Where downloads are kept (by file name, checked by sha256).
        downloads: PathBuf,
        unpacked: PathBuf,
    },
}

fn without_userinfo<S: serde::Serializer>(url: &str, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&rocbuild_secret::strip_userinfo(url))
}

impl SourcePlan {
    pub fn dir(&self) -> &Path {
        match self {
            SourcePlan::Git { checkout, .. } => checkout,
            SourcePlan::Local { dir } => dir,
            SourcePlan::Sdist { unpacked, .. } => unpacked,
        }
    }
}

/// A fix the recipe ships (`[[release.patch]]`), written into the cache as a file of its own
/// (named by its hash) when the source is prepared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShippedFile {
    pub name: String,
    pub why: String,
    pub path: PathBuf,
    pub sha256: String,
    #[serde(skip)]
    pub text: String,
}

impl ShippedFile {
    /// `name sha256`, as the manifest records it.
    pub fn record(&self) -> String {
        format!("{} {}", self.name, self.sha256)
    }
}

fn shipped(release: &ReleaseInfo, recipe: &Recipe, ctx: &Context) -> Vec<ShippedFile> {
    release
        .patches
        .iter()
        .map(|p| {
            let sha: String = <sha2::Sha256 as sha2::Digest>::digest(p.diff.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let file = format!(
                "{}-{}-{}-{}.diff",
                recipe.name(),
                sanitize(&release.version),
                sanitize(&p.name),
                &sha[..12]
            );
            ShippedFile {
                name: p.name.clone(),
                why: p.why.clone(),
                path: join(ctx.host_os, &ctx.cache, &["patches", &file]),
                sha256: sha,
                text: p.diff.clone(),
            }
        })
        .collect()
}

pub fn plan(
    recipe: &Recipe,
    release: &ReleaseInfo,
    opts: &BuildOptions,
    ctx: &Context,
    os: Os,
    flavor: Flavor,
    resolved: &Resolved,
) -> Result<(SourcePlan, Vec<Patch>)> {
    let mut source = unpatched(recipe, release, opts, ctx, os, flavor, resolved)?;
    let patches = read_patches(&opts.patches)?;
    // A user's --rev is their own source: the recipe's fixes are for the release's commit.
    let ours = match (&source, &opts.rev) {
        (SourcePlan::Git { .. }, None) => shipped(release, recipe, ctx),
        _ => Vec::new(),
    };
    if let SourcePlan::Git {
        checkout, shipped, ..
    } = &mut source
    {
        if !ours.is_empty() {
            let shas: Vec<&str> = ours.iter().map(|p| p.sha256.as_str()).collect();
            suffix(checkout, "fixed", &shas);
            *shipped = ours;
        }
    }
    if patches.is_empty() {
        return Ok((source, patches));
    }
    match &mut source {
        SourcePlan::Sdist { project, .. } => {
            return Err(EngineError::Usage {
                option: "--patch".into(),
                reason: format!("{} is built from its sdist ({project}), which rocbuild does not patch", recipe.name()),
                help: Some("build a git checkout of it with --source URL --rev REV, and patch that".into()),
            })
        }
        SourcePlan::Local { dir } => {
            return Err(EngineError::Usage {
                option: "--patch".into(),
                reason: format!(
                    "{} is built as it is, and rocbuild does not change a directory of yours",
                    dir.display()
                ),
                help: Some(format!(
                    "apply the patch to it yourself (git -C {} apply FILE), or build a git checkout (--source URL, or --rev)",
                    dir.display()
                )),
            })
        }
        SourcePlan::Git {
            checkout,
            patches: planned,
            ..
        } => {
            let shas: Vec<&str> = patches
                .iter()
                .filter_map(|p| p.sha256.as_deref())
                .collect();
            suffix(checkout, "patched", &shas);
            *planned = patches.clone();
        }
    }
    Ok((source, patches))
}

/// A changed checkout is a directory of its own: `<checkout>-<what>-<hash of the changes>`.
fn suffix(checkout: &mut PathBuf, what: &str, shas: &[&str]) {
    let mut name = checkout.file_name().unwrap_or_default().to_os_string();
    name.push(format!("-{what}-{}", &crate::paths::hash_hex(shas)[..12]));
    checkout.set_file_name(name);
}

/// Each `--patch FILE`, made absolute, with the sha256 of what it holds now.
fn read_patches(patches: &[Patch]) -> Result<Vec<Patch>> {
    patches
        .iter()
        .map(|p| {
            let path = std::path::absolute(&p.path).unwrap_or_else(|_| p.path.clone());
            let bytes = std::fs::read(&path).map_err(|e| EngineError::Usage {
                option: "--patch".into(),
                reason: format!("cannot read {}: {e}", path.display()),
                help: Some("pass a patch file made by `git diff` or `git format-patch`".into()),
            })?;
            let sha: String = <sha2::Sha256 as sha2::Digest>::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            Ok(Patch {
                path,
                sha256: Some(sha),
            })
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn unpatched(
    recipe: &Recipe,
    release: &ReleaseInfo,
    opts: &BuildOptions,
    ctx: &Context,
    os: Os,
    flavor: Flavor,
    resolved: &Resolved,
) -> Result<SourcePlan> {
    let raw = &recipe.raw;
    let name = recipe.name();
    let version = &release.version;
    Ok(match (&opts.source, &opts.rev) {
        (Some(s), None) if !looks_like_url(s) => SourcePlan::Local {
            dir: PathBuf::from(s),
        },
        (None, rev) if raw.source.sdist.is_some() => sdist(recipe, release, rev.as_deref(), ctx)?,
        (src, rev) => {
            let vars = base(name, version, os, flavor);
            let url = match (src, &raw.source.git) {
                (Some(s), _) => s.clone(),
                (None, Some(g)) => expand(g.get_ref(), &vars)?,
                (None, None) => unreachable!("a recipe without git has an sdist (checked at load)"),
            };
            let tag = raw
                .source
                .tag
                .as_ref()
                .map(|t| t.get_ref().as_str())
                .unwrap_or("v{version}");
            let (reference, expected_commit) = match rev {
                Some(r) => (r.clone(), None),
                None => (
                    format!("refs/tags/{}", expand(tag, &vars)?),
                    if src.is_none() {
                        release.commit.clone()
                    } else {
                        None
                    },
                ),
            };
            let label = match &expected_commit {
                Some(c) => c[..12.min(c.len())].to_string(),
                None => sanitize(reference.trim_start_matches("refs/tags/")),
            };
            SourcePlan::Git {
                checkout: join(
                    ctx.host_os,
                    &ctx.cache,
                    &["src", &format!("{name}-{label}")],
                ),
                git_cache: join(ctx.host_os, &ctx.cache, &["git"]),
                url,
                reference,
                expected_commit,
                submodules: resolved.submodules.clone(),
                mirror: ctx.mirror.clone(),
                patches: Vec::new(),
                shipped: Vec::new(),
            }
        }
    })
}

/// The release's sdist: pinned by the recipe's sha256, looked for offline first.
fn sdist(
    recipe: &Recipe,
    release: &ReleaseInfo,
    rev: Option<&str>,
    ctx: &Context,
) -> Result<SourcePlan> {
    let project = recipe
        .raw
        .source
        .sdist
        .as_ref()
        .map(|p| p.get_ref().clone())
        .unwrap_or_default();
    if let Some(r) = rev {
        return Err(EngineError::Usage {
            option: format!("--rev {r}"),
            reason: format!(
                "{} is built from its PyPI sdist ({project}), which has no revisions",
                recipe.name()
            ),
            help: Some(
                "pick the release with --version, or build a git checkout: --source URL --rev REV"
                    .into(),
            ),
        });
    }
    let sha256 = release.sha256.clone().unwrap_or_default();
    let mut offline: Vec<PathBuf> = ctx.sdists.clone();
    if let Some(m) = &ctx.mirror {
        offline.push(m.join("pypi"));
    }
    // The index's simple API root: rocbuild's own setting, else pip's, else PyPI.
    let index = ctx
        .sdist_index
        .clone()
        .unwrap_or_else(|| "https://pypi.org/simple".into());
    Ok(SourcePlan::Sdist {
        unpacked: join(
            ctx.host_os,
            &ctx.cache,
            &[
                "src",
                &format!(
                    "{}-{}-{}",
                    recipe.name(),
                    sanitize(&release.version),
                    &sha256[..12.min(sha256.len())]
                ),
            ],
        ),
        downloads: join(ctx.host_os, &ctx.cache, &["sdists"]),
        project,
        version: release.version.clone(),
        sha256,
        index,
        offline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::{ctx, recipe};

    /// A password in `$PIP_INDEX_URL` is used for the download, never put in the plan as data.
    #[test]
    fn an_sdist_plan_as_data_holds_no_index_password() {
        let p = SourcePlan::Sdist {
            project: "x".into(),
            version: "1".into(),
            sha256: "0".repeat(64),
            index: "https://bob:s3cr3tTOKEN@index.example/simple".into(),
            offline: Vec::new(),
            downloads: "/c/sdists".into(),
            unpacked: "/c/src/x".into(),
        };
        let json = serde_json::to_string(&p).unwrap();
        assert!(!json.contains("s3cr3tTOKEN"), "{json}");
        assert!(json.contains("index.example/simple"), "{json}");
    }

    fn release(r: &Recipe) -> ReleaseInfo {
        r.releases()
            .into_iter()
            .find(|x| x.commit.is_some() && x.patches.is_empty())
            .expect("a pinned release")
    }

    /// TorchCodec 0.16.0 carries the recipe's fix: planned into a checkout of its own (named
    /// by the fix's hash) and written into the cache; a user's --rev builds without it.
    #[test]
    fn a_release_with_a_recipe_fix_gets_a_checkout_of_its_own() {
        let r = recipe("torchcodec");
        let rel = r.release("0.16.0").unwrap();
        assert_eq!(rel.patches.len(), 1);
        let p = |opts: &BuildOptions| {
            plan(
                &r,
                &rel,
                opts,
                &ctx(Os::Linux),
                Os::Linux,
                Flavor::Cpu,
                &Resolved::default(),
            )
            .unwrap()
            .0
        };
        match p(&BuildOptions::default()) {
            SourcePlan::Git {
                checkout, shipped, ..
            } => {
                assert_eq!(shipped.len(), 1);
                assert_eq!(shipped[0].name, "avif-stub-signature");
                assert!(
                    shipped[0].path.starts_with("/cache/patches"),
                    "{:?}",
                    shipped[0].path
                );
                assert!(shipped[0]
                    .text
                    .contains("+++ b/src/torchcodec/_core/DecodeAvif.cpp"));
                let name = checkout.file_name().unwrap().to_string_lossy().into_owned();
                assert!(name.starts_with("torchcodec-ce046a849e8a-fixed-"), "{name}");
            }
            other => panic!("{other:?}"),
        }
        let rev = BuildOptions {
            rev: Some("main".into()),
            ..BuildOptions::default()
        };
        match p(&rev) {
            SourcePlan::Git { shipped, .. } => assert!(shipped.is_empty()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_release_is_its_tag_and_pinned_commit() {
        let r = recipe("torchcodec");
        let rel = release(&r);
        let p = plan(
            &r,
            &rel,
            &BuildOptions::default(),
            &ctx(Os::Linux),
            Os::Linux,
            Flavor::Cpu,
            &Resolved::default(),
        )
        .unwrap()
        .0;
        match &p {
            SourcePlan::Git {
                reference,
                expected_commit,
                checkout,
                url,
                ..
            } => {
                assert_eq!(reference, &format!("refs/tags/v{}", rel.version));
                assert_eq!(expected_commit, &rel.commit);
                assert!(url.contains("torchcodec"), "{url}");
                assert_eq!(
                    checkout,
                    &PathBuf::from(format!(
                        "/cache/src/torchcodec-{}",
                        &rel.commit.clone().unwrap()[..12]
                    ))
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_local_directory_or_a_url_at_a_rev() {
        let r = recipe("torchcodec");
        let rel = release(&r);
        let local = BuildOptions {
            source: Some("/src/tc".into()),
            ..BuildOptions::default()
        };
        assert_eq!(
            plan(
                &r,
                &rel,
                &local,
                &ctx(Os::Linux),
                Os::Linux,
                Flavor::Cpu,
                &Resolved::default()
            )
            .unwrap()
            .0,
            SourcePlan::Local {
                dir: PathBuf::from("/src/tc")
            }
        );
        let fork = BuildOptions {
            source: Some("https://example.com/me/tc".into()),
            rev: Some("my/branch".into()),
            ..BuildOptions::default()
        };
        match plan(
            &r,
            &rel,
            &fork,
            &ctx(Os::Windows),
            Os::Windows,
            Flavor::Cpu,
            &Resolved::default(),
        )
        .unwrap()
        .0
        {
            SourcePlan::Git {
                reference,
                expected_commit,
                checkout,
                ..
            } => {
                assert_eq!(reference, "my/branch");
                assert_eq!(expected_commit, None, "a user's rev pins nothing");
                assert_eq!(
                    checkout,
                    PathBuf::from(r"C:\cache\src\torchcodec-my_branch")
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn patches_are_hashed_into_a_checkout_of_their_own_and_refused_for_a_local_dir() {
        let r = recipe("torchcodec");
        let rel = release(&r);
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("fix.patch");
        std::fs::write(&file, "--- a/x\n+++ b/x\n").unwrap();
        let opts = BuildOptions {
            patches: vec![Patch {
                path: file.clone(),
                sha256: None,
            }],
            ..BuildOptions::default()
        };
        let c = ctx(Os::Linux);
        let plain = plan(
            &r,
            &rel,
            &BuildOptions::default(),
            &c,
            Os::Linux,
            Flavor::Cpu,
            &Resolved::default(),
        )
        .unwrap()
        .0;
        let (patched, patches) = plan(
            &r,
            &rel,
            &opts,
            &c,
            Os::Linux,
            Flavor::Cpu,
            &Resolved::default(),
        )
        .unwrap();
        assert_eq!(patches.len(), 1);
        assert_eq!(patches[0].sha256.as_deref().map(str::len), Some(64));
        assert_ne!(patched.dir(), plain.dir());
        assert!(patched.dir().to_string_lossy().contains("-patched-"));
        // Another content: another checkout.
        std::fs::write(&file, "--- a/y\n+++ b/y\n").unwrap();
        let (again, _) = plan(
            &r,
            &rel,
            &opts,
            &c,
            Os::Linux,
            Flavor::Cpu,
            &Resolved::default(),
        )
        .unwrap();
        assert_ne!(again.dir(), patched.dir());
        let local = BuildOptions {
            source: Some("/src/tc".into()),
            ..opts.clone()
        };
        assert!(matches!(
            plan(
                &r,
                &rel,
                &local,
                &c,
                Os::Linux,
                Flavor::Cpu,
                &Resolved::default()
            ),
            Err(EngineError::Usage { .. })
        ));
        let missing = BuildOptions {
            patches: vec![Patch {
                path: tmp.path().join("nope.patch"),
                sha256: None,
            }],
            ..BuildOptions::default()
        };
        assert!(matches!(
            plan(
                &r,
                &rel,
                &missing,
                &c,
                Os::Linux,
                Flavor::Cpu,
                &Resolved::default()
            ),
            Err(EngineError::Usage { .. })
        ));
    }
}
