//! The source concern at run time: what [`super::plan`] planned, made real before the
//! build system runs (`run()` calls [`prepare`] and knows nothing of git or patches).

use std::path::{Path, PathBuf};

use crate::error::{EngineError, Result};
use crate::source::plan::SourcePlan;
use crate::step::{RunLog, Verbosity};

/// `git apply ARGS PATCH` on the plain tree of `checkout`: None when it applied, else git's
/// words. GIT_CEILING_DIRECTORIES keeps git from taking a repository around the cache for
/// the tree's own.
fn git_apply(checkout: &Path, args: &[&str], patch: &Path) -> Option<String> {
    let ceiling = checkout.parent().unwrap_or(checkout);
    let out = crate::command::Command::new("git")
        .args(["apply", "--whitespace=nowarn"])
        .args(args.iter().copied())
        .arg(patch.display().to_string())
        .to_duct()
        .dir(checkout)
        .env("GIT_CEILING_DIRECTORIES", ceiling)
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run();
    match &out {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Err(e) => Some(format!("cannot run git: {e}")),
    }
}

/// The `git` program applies the recipe's fixes and `--patch` files: one that cannot run is
/// said as that (with how to get it), not as a fix that "does not apply".
fn git_runs(what: &str) -> Result<()> {
    let ran = crate::command::Command::new("git")
        .arg("--version")
        .to_duct()
        .stdout_null()
        .stderr_null()
        .unchecked()
        .run();
    match ran {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err(EngineError::MissingTool {
            tool: "git".into(),
            purpose: format!("apply {what} to the source"),
            hint: "Git (Windows: `winget install Git.Git`; Debian/Ubuntu: `apt install git`; macOS: `xcode-select --install`), then run again; or build with --rev COMMIT, which applies no recipe fixes".into(),
        }),
    }
}

/// What the checkout's `.rocbuild-fixes` says once the recipe's fixes are applied.
fn shipped_stamp(shipped: &[crate::source::plan::ShippedFile]) -> String {
    shipped.iter().map(|p| p.record() + "\n").collect()
}

/// What the checkout's `.rocbuild-patches` says once the `--patch` files are applied.
fn patches_stamp(patches: &[rocbuild_venv::Patch]) -> String {
    patches
        .iter()
        .map(|p| {
            format!(
                "{} {}\n",
                p.sha256.as_deref().unwrap_or(""),
                p.path.display()
            )
        })
        .collect()
}

/// The recipe's fixes are still to be applied to `checkout` (its stamp does not say them).
fn shipped_pending(checkout: &Path, shipped: &[crate::source::plan::ShippedFile]) -> bool {
    !shipped.is_empty()
        && fs_err::read_to_string(checkout.join(".rocbuild-fixes")).ok()
            != Some(shipped_stamp(shipped))
}

/// The `--patch` files are still to be applied to `checkout`.
fn patches_pending(checkout: &Path, patches: &[rocbuild_venv::Patch]) -> bool {
    !patches.is_empty()
        && fs_err::read_to_string(checkout.join(".rocbuild-patches")).ok()
            != Some(patches_stamp(patches))
}

/// Apply the recipe's own fixes for this release to a fresh checkout (a directory of its
/// own, named by their hashes), once: a stamp records them. One that does not apply is the
/// recipe's fault, said as such.
fn apply_shipped(
    checkout: &Path,
    shipped: &[crate::source::plan::ShippedFile],
    log: &mut RunLog,
) -> Result<()> {
    if !shipped_pending(checkout, shipped) {
        return Ok(());
    }
    let stamp = checkout.join(".rocbuild-fixes");
    let stamp_text = shipped_stamp(shipped);
    for p in shipped {
        if let Some(dir) = p.path.parent() {
            fs_err::create_dir_all(dir).map_err(EngineError::io("create", dir))?;
        }
        fs_err::write(&p.path, &p.text).map_err(EngineError::io("write", &p.path))?;
        log.note(&format!("recipe fix: {} ({})", p.name, p.path.display()));
        // A run killed between two fixes left this one applied: taken as it is.
        if git_apply(checkout, &["-R", "--check", "--unidiff-zero"], &p.path).is_none() {
            continue;
        }
        let failed = git_apply(checkout, &["--unidiff-zero"], &p.path);
        if let Some(reason) = failed {
            return Err(EngineError::Usage {
                option: "recipe".into(),
                reason: format!(
                    "its fix `{}` does not apply to {}: {reason}",
                    p.name,
                    checkout.display()
                ),
                help: Some(
                    "the recipe's fix was written for the release's pinned commit: check the recipe's [[release.patch]], or build with --rev to skip its fixes".into(),
                ),
            });
        }
    }
    fs_err::write(&stamp, stamp_text).map_err(EngineError::io("write", &stamp))?;
    Ok(())
}

/// Apply the user's `--patch` files, in order, to a fresh checkout (its directory is the
/// patched one's own, see the source plan); a stamp records them so a rerun does not apply
/// them twice. A patch that does not apply is an error before configure, and the patches
/// applied before it are taken back: the checkout is left as git wrote it.
fn apply_patches(
    checkout: &Path,
    patches: &[rocbuild_venv::Patch],
    log: &mut RunLog,
) -> Result<()> {
    if !patches_pending(checkout, patches) {
        return Ok(());
    }
    let stamp = checkout.join(".rocbuild-patches");
    let stamp_text = patches_stamp(patches);
    let mut applied: Vec<&Path> = Vec::new();
    for p in patches {
        log.note(&format!("patch: {}", p.path.display()));
        let failed = git_apply(checkout, &[], &p.path);
        if let Some(reason) = failed {
            for done in applied.iter().rev() {
                let _ = git_apply(checkout, &["-R"], done);
            }
            return Err(EngineError::Usage {
                option: "--patch".into(),
                reason: format!("{} does not apply to {}: {reason}", p.path.display(), checkout.display()),
                help: Some(format!(
                    "make the patch against this release's source (`git diff` in a checkout of it), or drop --patch {}; nothing was built and the checkout is unchanged",
                    p.path.display()
                )),
            });
        }
        applied.push(&p.path);
    }
    fs_err::write(&stamp, stamp_text).map_err(EngineError::io("write", &stamp))?;
    Ok(())
}

/// The source of a build, ready to configure: an sdist unpacked, a local directory as it
/// is, or a git commit fetched (a mirror first), checked out with its submodules, the
/// recipe's fixes and the user's `--patch` files applied. The directory and the commit.
pub fn prepare(
    source: &SourcePlan,
    recipe_file: &str,
    log: &mut RunLog,
) -> Result<(PathBuf, Option<String>)> {
    match source {
        SourcePlan::Sdist { .. } => crate::source::sdist::prepare(source, log),
        SourcePlan::Local { dir } => {
            if !dir.join("CMakeLists.txt").exists() && !dir.is_dir() {
                return Err(EngineError::Usage {
                    option: "--source".into(),
                    reason: format!("{} is not a directory", dir.display()),
                    help: Some("pass a source checkout or a git URL".into()),
                });
            }
            log.note(&format!("source: {} (as it is)", dir.display()));
            Ok((dir.clone(), None))
        }
        SourcePlan::Git {
            url,
            reference,
            expected_commit,
            submodules,
            mirror,
            git_cache,
            checkout,
            patches,
            shipped,
        } => {
            log.note(&format!("source: {url} {reference}"));
            // The git program applies the fixes and patches: one that cannot run is said
            // before anything is fetched (a checkout that has them needs none).
            if shipped_pending(checkout, shipped) {
                git_runs("the recipe's fixes for this release")?;
            }
            if patches_pending(checkout, patches) {
                git_runs("the --patch files")?;
            }
            let bar = indicatif::ProgressBar::hidden();
            if log.verbosity != Verbosity::Quiet {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                bar.set_style(
                    indicatif::ProgressStyle::with_template("  fetching {pos}/{len} objects")
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
            }
            let progress = |n: usize, m: usize| {
                bar.set_length(m as u64);
                bar.set_position(n as u64);
            };
            // Concurrent runs share the clone and the checkout: one fetch/checkout at a time.
            let _cache_lock = crate::cache_lock::CacheLock::acquire(
                &git_cache.join(format!("source-{}", &crate::paths::hash_hex(&[url])[..16])),
            )?;
            let (repo, oid) =
                super::fetch_commit(git_cache, url, reference, mirror.as_deref(), &progress)?;
            if let Some(exp) = expected_commit {
                if oid.to_string() != *exp {
                    return Err(EngineError::Moved {
                        what: reference.trim_start_matches("refs/tags/").to_string(),
                        url: url.clone(),
                        found: oid.to_string(),
                        expected: exp.clone(),
                        recipe_file: recipe_file.to_string(),
                    });
                }
            }
            super::checkout(
                &repo,
                oid,
                checkout,
                url,
                submodules,
                &super::Fetcher {
                    git_cache,
                    mirror: mirror.as_deref(),
                    progress: &progress,
                },
            )?;
            bar.finish_and_clear();
            apply_shipped(checkout, shipped, log)?;
            apply_patches(checkout, patches, log)?;
            Ok((checkout.clone(), Some(oid.to_string())))
        }
    }
}
