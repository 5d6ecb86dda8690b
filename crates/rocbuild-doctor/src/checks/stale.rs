//! Staleness: what rocbuild installed (site-packages/.rocbuild/<recipe>.json) against what the
//! venv holds now. A torch upgrade or a `pip install --force-reinstall` silently undoes a
//! rebuild; the manifest says exactly which.

use std::path::Path;

use rocbuild_engine::manifest::{self, Manifest};
use rocbuild_probe::Torch;

use crate::finding::{Check, Finding, Severity};
use crate::package::Subject;

pub fn check(site: &Path, subject: &Subject, torch: Option<&Torch>) -> Vec<Finding> {
    let Some(recipe) = &subject.recipe else {
        return Vec::new();
    };
    let Some(m) = manifest::read(site, recipe) else {
        return Vec::new();
    };
    compare(site, subject, &m, torch)
}

fn compare(site: &Path, subject: &Subject, m: &Manifest, torch: Option<&Torch>) -> Vec<Finding> {
    let mut out = Vec::new();
    let fix = format!(
        "{} (rebuilds against the torch installed now)",
        subject.rebuild_hint()
    );
    match (torch, &m.torch_version) {
        (Some(t), Some(built)) if &t.version != built => out.push(
            Finding::new(
                Severity::Error,
                Check::Stale,
                &subject.name,
                format!(
                    "rocbuild built {} {} against torch {built}; the venv now has torch {}",
                    subject.name, m.version, t.version
                ),
            )
            .why("torch was upgraded or reinstalled after the build, and its C++ ABI changes between releases")
            .fix(fix.clone()),
        ),
        (Some(t), Some(_)) if t.git_version.is_some() && m.torch_git.is_some() && t.git_version != m.torch_git => out.push(
            Finding::new(
                Severity::Error,
                Check::Stale,
                &subject.name,
                format!(
                    "torch {} is another build than the one {} was built against (git {} vs {})",
                    t.version,
                    subject.name,
                    short(t.git_version.as_deref()),
                    short(m.torch_git.as_deref())
                ),
            )
            .why("same version number, different commit: a nightly or a local build replaced it")
            .fix(fix.clone()),
        ),
        (None, Some(built)) => out.push(
            Finding::new(Severity::Error, Check::Stale, &subject.name, format!("torch is gone; {} was built against torch {built}", subject.name))
                .fix("install torch again"),
        ),
        _ => {}
    }
    if let Some(t) = torch {
        if t.flavor.as_str() != m.flavor {
            out.push(
                Finding::new(
                    Severity::Error,
                    Check::Stale,
                    &subject.name,
                    format!(
                        "{} was built for a {} torch; this torch is {}",
                        subject.name,
                        m.flavor,
                        t.flavor.as_str()
                    ),
                )
                .fix(fix.clone()),
            );
        }
    }
    let mut changed = Vec::new();
    for f in &m.files {
        let p = site.join(&f.path);
        match manifest::sha256_file(&p) {
            Ok((sha, _)) if sha == f.sha256 => {}
            Ok(_) => changed.push(format!("{} was replaced", f.path)),
            Err(_) => changed.push(format!("{} is gone", f.path)),
        }
    }
    if !changed.is_empty() {
        out.push(
            Finding::new(
                Severity::Error,
                Check::Stale,
                &subject.name,
                format!("files rocbuild installed for {} were replaced since", subject.name),
            )
            .details(changed)
            .why("a later pip install (often --force-reinstall or an upgrade pulled in by another package) wrote its own wheel over the rebuild")
            .fix(format!("{} (installs the rebuild again)", subject.rebuild_hint())),
        );
    }
    out
}

fn short(s: Option<&str>) -> String {
    s.map(|s| s.chars().take(12).collect())
        .unwrap_or_else(|| "?".into())
}
