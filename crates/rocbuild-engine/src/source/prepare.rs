//! The source concern at run time: what [`super::plan`] planned, made real before the
//! build system runs (`run()` calls [`prepare`] and knows nothing of git or patches).

use std::path::{Path, PathBuf};

use crate::error::{EngineError, Result};
use crate::source::plan::SourcePlan;
use crate::step::{RunLog, Verbosity};

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
/// recipe's fault, said as such. The checkout's commit stamp is taken away while they are
/// applied: a run killed between two fixes leaves a tree the next run writes again.
fn apply_shipped(
    checkout: &Path,
    shipped: &[crate::source::plan::ShippedFile],
    log: &mut RunLog,
) -> Result<()> {
    if !shipped_pending(checkout, shipped) {
        return Ok(());
    }
    let stamp = checkout.join(".rocbuild-fixes");
    unstamped(checkout, false, || {
        apply_each_fix(checkout, shipped, log)?;
        fs_err::write(&stamp, shipped_stamp(shipped)).map_err(EngineError::io("write", &stamp))
    })
}

/// Run `apply` (which writes its own stamp last) with the checkout's commit stamp taken away,
/// so that a run killed in the middle leaves a tree the next run writes again; the commit
/// stamp is put back when `apply` succeeds, or when it fails and `clean_on_error` (it put the
/// tree back itself).
fn unstamped(
    checkout: &Path,
    clean_on_error: bool,
    apply: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let stamp = checkout.join(".rocbuild-commit");
    let commit = fs_err::read_to_string(&stamp).map_err(EngineError::io("read", &stamp))?;
    fs_err::remove_file(&stamp).map_err(EngineError::io("remove", &stamp))?;
    let done = apply();
    if done.is_ok() || clean_on_error {
        fs_err::write(&stamp, commit).map_err(EngineError::io("write", &stamp))?;
    }
    done
}

fn apply_each_fix(
    checkout: &Path,
    shipped: &[crate::source::plan::ShippedFile],
    log: &mut RunLog,
) -> Result<()> {
    for p in shipped {
        if let Some(dir) = p.path.parent() {
            fs_err::create_dir_all(dir).map_err(EngineError::io("create", dir))?;
        }
        fs_err::write(&p.path, &p.text).map_err(EngineError::io("write", &p.path))?;
        log.note(&format!("recipe fix: {} ({})", p.name, p.path.display()));
        if let Err(reason) = super::apply::apply(checkout, p.text.as_bytes()) {
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
    Ok(())
}

/// Apply the user's `--patch` files, in order, to a fresh checkout (its directory is the
/// patched one's own, see the source plan); a stamp records them so a rerun does not apply
/// them twice. A patch that does not apply is an error before configure, and the patches
/// applied before it are taken back: the checkout is left as it was written.
fn apply_patches(
    checkout: &Path,
    patches: &[rocbuild_venv::Patch],
    log: &mut RunLog,
) -> Result<()> {
    if !patches_pending(checkout, patches) {
        return Ok(());
    }
    let stamp = checkout.join(".rocbuild-patches");
    unstamped(checkout, true, || {
        apply_each_patch(checkout, patches, log)?;
        fs_err::write(&stamp, patches_stamp(patches)).map_err(EngineError::io("write", &stamp))
    })
}

/// The `--patch` files in order; one that does not apply puts back every file the ones
/// before it changed.
fn apply_each_patch(
    checkout: &Path,
    patches: &[rocbuild_venv::Patch],
    log: &mut RunLog,
) -> Result<()> {
    let mut before = Vec::new();
    for p in patches {
        log.note(&format!("patch: {}", p.path.display()));
        let text = fs_err::read(&p.path).map_err(EngineError::io("read", &p.path))?;
        before.push(super::apply::snapshot(checkout, &text));
        if let Err(reason) = super::apply::apply(checkout, &text) {
            for files in before.iter().rev() {
                super::apply::put_back(files);
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
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::plan::ShippedFile;

    fn fix(dir: &Path, name: &str, diff: &str) -> ShippedFile {
        ShippedFile {
            name: name.into(),
            why: "a test".into(),
            path: dir.join(format!("{name}.diff")),
            sha256: name.repeat(8),
            text: diff.into(),
        }
    }

    /// A fix that does not apply after one that did: the checkout keeps no commit stamp, so
    /// the next run writes it again instead of applying the first fix twice; fixes that all
    /// apply leave both stamps, and a rerun applies nothing.
    #[test]
    fn a_half_fixed_checkout_is_not_taken_for_a_checkout() {
        let d = tempfile::tempdir().unwrap();
        let tree = d.path().join("checkout");
        std::fs::create_dir_all(tree.join("src")).unwrap();
        std::fs::write(tree.join("src/x.c"), "one\ntwo\n").unwrap();
        std::fs::write(tree.join(".rocbuild-commit"), "abc").unwrap();
        let good = "--- a/src/x.c\n+++ b/src/x.c\n@@ -1,0 +2 @@\n+added\n";
        let bad = "--- a/src/x.c\n+++ b/src/x.c\n@@ -1 +1 @@\n-uno\n+eins\n";
        let fixes = [fix(d.path(), "a", good), fix(d.path(), "b", bad)];
        let mut log = RunLog::create(&d.path().join("logs"), "t", Verbosity::Quiet).unwrap();
        let e = apply_shipped(&tree, &fixes, &mut log).unwrap_err();
        assert!(e.to_string().contains("does not apply"), "{e}");
        assert!(!tree.join(".rocbuild-commit").exists());
        assert!(!tree.join(".rocbuild-fixes").exists());

        std::fs::write(tree.join("src/x.c"), "one\ntwo\n").unwrap();
        std::fs::write(tree.join(".rocbuild-commit"), "abc").unwrap();
        apply_shipped(&tree, &fixes[..1], &mut log).unwrap();
        assert_eq!(
            std::fs::read_to_string(tree.join(".rocbuild-commit")).unwrap(),
            "abc"
        );
        assert_eq!(
            std::fs::read_to_string(tree.join("src/x.c")).unwrap(),
            "one\nadded\ntwo\n"
        );
        apply_shipped(&tree, &fixes[..1], &mut log).unwrap();
        assert_eq!(
            std::fs::read_to_string(tree.join("src/x.c")).unwrap(),
            "one\nadded\ntwo\n"
        );
    }
}
