//! Staleness: what rocbuild installed (site-packages/.rocbuild/<recipe>.json) against what the
//! venv holds now. A torch upgrade or a `pip install --force-reinstall` silently undoes a
//! rebuild; the manifest says exactly which. The comparison is rocbuild-venv's, the same one
//! `rocbuild status` makes; this turns its reasons into findings.

use std::path::Path;

use rocbuild_probe::{Torch, TorchVersion};
use rocbuild_venv::manifest;
use rocbuild_venv::stale::{self, Now, Reason};

use crate::finding::{Check, Finding, Severity};
use crate::package::Subject;

pub fn check(site: &Path, subject: &Subject, torch: Option<&Torch>) -> Vec<Finding> {
    let Some(recipe) = &subject.recipe else {
        return Vec::new();
    };
    let Some(m) = manifest::read(site, recipe) else {
        return Vec::new();
    };
    let tv = torch.map(|t| TorchVersion {
        version: t.version.clone(),
        git_version: t.git_version.clone(),
        cuda: t.cuda.clone(),
        hip: t.hip.clone(),
    });
    // The GPU check reads the code objects of the binaries themselves, and the FFmpeg check
    // the libraries present: those two reasons are left to them. Recipes are not compared: a
    // changed recipe does not stop a library from loading.
    let now = Now {
        torch: tv.as_ref(),
        gpu_archs: &[],
        recipes: None,
    };
    let s = stale::check(site, &m, &now);
    let fix = format!(
        "{} (rebuilds against the torch installed now)",
        subject.rebuild_hint()
    );
    let name = &subject.name;
    let mut out = Vec::new();
    for r in &s.reasons {
        let f = match r {
            Reason::Torch { was, now: Some(n) } => Finding::new(
                Severity::Error,
                Check::Stale,
                name,
                format!(
                    "rocbuild built {name} {} against torch {was}; the venv now has torch {n}",
                    m.version
                ),
            )
            .why("torch was upgraded or reinstalled after the build, and its C++ ABI changes between releases")
            .fix(fix.clone()),
            Reason::Torch { was, now: None } => Finding::new(
                Severity::Error,
                Check::Stale,
                name,
                format!("torch is gone; {name} was built against torch {was}"),
            )
            .fix("install torch again"),
            Reason::TorchRebuilt {
                version,
                was_git,
                now_git,
            } => Finding::new(
                Severity::Error,
                Check::Stale,
                name,
                format!(
                    "torch {version} is another build than the one {name} was built against (git {} vs {})",
                    short(now_git.as_deref()),
                    short(Some(was_git))
                ),
            )
            .why("same version number, different commit: a nightly or a local build replaced it")
            .fix(fix.clone()),
            Reason::Flavor { was, now } => Finding::new(
                Severity::Error,
                Check::Stale,
                name,
                format!("{name} was built for a {was} torch; this torch is {now}"),
            )
            .fix(fix.clone()),
            Reason::Sdk { .. } => {
                Finding::new(Severity::Error, Check::Stale, name, r.to_string()).fix(fix.clone())
            }
            Reason::Ffmpeg { .. }
            | Reason::Patch { .. }
            | Reason::GpuArchs { .. }
            | Reason::RecipeChanged { .. }
            | Reason::RecipeGone { .. } => continue,
        };
        out.push(f);
    }
    out.extend(replaced(subject, &m, &s));
    out
}

/// Files rocbuild installed (or repaired) that pip replaced or removed since: one finding,
/// whose fix is the command that works for what rocbuild did (a repair is made again on
/// pip's files: it has no source to rebuild from).
fn replaced(subject: &Subject, m: &manifest::Manifest, s: &stale::Staleness) -> Option<Finding> {
    let mut changed: Vec<String> = s
        .overwritten
        .iter()
        .map(|f| format!("{f} was replaced"))
        .collect();
    changed.extend(s.missing.iter().map(|f| format!("{f} is gone")));
    if changed.is_empty() {
        return None;
    }
    let name = &subject.name;
    let (over, fix) = match m.kind {
        manifest::Kind::Repair => (
            "repaired files",
            format!(
                "{} (makes pip's new files findable again)",
                stale::fix_command(m)
            ),
        ),
        manifest::Kind::Build => (
            "rebuild",
            format!("{} (installs the rebuild again)", subject.rebuild_hint()),
        ),
    };
    Some(
        Finding::new(
            Severity::Error,
            Check::Stale,
            name,
            format!("files rocbuild installed for {name} were replaced since"),
        )
        .details(changed)
        .why(format!("a later pip install (often --force-reinstall or an upgrade pulled in by another package) wrote its own wheel over the {over}"))
        .fix(fix),
    )
}

fn short(s: Option<&str>) -> String {
    s.map(|s| s.chars().take(12).collect())
        .unwrap_or_else(|| "?".into())
}
