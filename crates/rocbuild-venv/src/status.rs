//! `rocbuild status`: is each build rocbuild installed still what it installed, and still
//! right for the venv? Cheap by design (a scheduler runs it often): manifests and
//! torch/version.py are read, FFmpeg's major comes from one pkg-config query, and a file is
//! hashed only when its size or mtime differ from the manifest's.

use std::path::{Path, PathBuf};

use rocbuild_recipe::RecipeSet;
use serde::Serialize;

use crate::manifest::{self, Kind, Manifest};
use crate::stale::{self, Now};

/// The state of one build, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Some of its files are gone (pip uninstalled the package, or someone deleted them).
    Missing,
    /// Some of its files are not the ones installed (pip reinstalled the wheel).
    Overwritten,
    /// The files are intact but what they were built against changed.
    Stale,
    Fresh,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Missing => "missing",
            State::Overwritten => "overwritten",
            State::Stale => "stale",
            State::Fresh => "fresh",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RecipeStatus {
    pub recipe: String,
    pub version: String,
    pub state: State,
    /// Why it is stale: `torch 2.9.1 → 2.10.0`, `FFmpeg 7 → 8`, ...
    pub reasons: Vec<String>,
    pub overwritten: Vec<String>,
    pub missing: Vec<String>,
    pub manifest: PathBuf,
    /// Files that were hashed because their size or mtime changed (the rest were not read).
    pub hashed: usize,
    /// Installed but never proven to load (no Wine on the host that built it): why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unverified: Option<String>,
    /// What rocbuild did: a build, or a repair of pip's own files.
    pub kind: Kind,
    /// The command that makes it fresh again (none when it is fresh): `rocbuild rebuild X`
    /// for a build, `rocbuild repair X` for a repair (there is nothing to rebuild from).
    pub fix: Option<String>,
    /// A release the recipe does not list, built with the rules of this listed one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules_of: Option<String>,
    /// Releases upstream has that are newer than the recipe's (filled in by the caller,
    /// who asks upstream).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<rocbuild_recipe::upstream::Notice>,
    /// A cuda build: the CUDA it was built with and for which archs (from its manifest; doctor
    /// compares them with the GPU and the driver).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
}

impl RecipeStatus {
    pub fn needs_action(&self) -> bool {
        self.state != State::Fresh
    }
}

/// A manifest that cannot be read is reported, not fatal: the others still get a status.
#[derive(Debug, Clone, Serialize)]
pub struct Unreadable {
    pub manifest: PathBuf,
    pub error: String,
}

/// A file kept in `.rocbuild/salvage/` (see [`crate::salvage`]): where it came from and the
/// command that puts it back by hand.
#[derive(Debug, Clone, Serialize)]
pub struct SalvagedFile {
    pub kept: PathBuf,
    pub goes_to: PathBuf,
    pub put_back: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct VenvStatus {
    pub site: PathBuf,
    pub recipes: Vec<RecipeStatus>,
    pub unreadable: Vec<Unreadable>,
    /// What an interrupted run without a trusted journal left that nothing proved.
    pub salvaged: Vec<SalvagedFile>,
}

impl VenvStatus {
    pub fn needs_action(&self) -> bool {
        !self.unreadable.is_empty()
            || !self.salvaged.is_empty()
            || self.recipes.iter().any(RecipeStatus::needs_action)
    }
}

fn salvaged(site: &Path) -> Vec<SalvagedFile> {
    let rules = rocbuild_probe::Os::current().rules();
    crate::salvage::kept(site)
        .into_iter()
        .map(|(kept, to)| {
            let (kept, goes_to) = (join(site, &kept), join(site, &to));
            SalvagedFile {
                put_back: rules.move_file_command(&kept, &goes_to),
                kept,
                goes_to,
            }
        })
        .collect()
}

fn join(site: &Path, rel: &str) -> PathBuf {
    rel.split('/')
        .fold(site.to_path_buf(), |p, part| p.join(part))
}

/// The status of every build in `site`. `recipes` tells whether a recipe changed since.
/// `env` is the command's environment (the GPUs named by `$PYTORCH_ROCM_ARCH`).
pub fn status(site: &Path, recipes: &RecipeSet, env: &rocbuild_probe::ProbeEnv) -> VenvStatus {
    let mut out = VenvStatus {
        site: site.to_path_buf(),
        recipes: Vec::new(),
        unreadable: Vec::new(),
        salvaged: salvaged(site),
    };
    let torch = rocbuild_probe::venv_torch_version(site);
    let os = rocbuild_probe::Os::current();
    let gpus = rocbuild_probe::gpu_archs_light(env, os);
    let now = Now {
        torch: torch.as_ref(),
        gpu_archs: &gpus,
        recipes: Some(recipes),
    };
    for m in manifest::read_all(site) {
        match m {
            Ok(m) => out.recipes.push(one(site, &m, &now)),
            Err((manifest, error)) => out.unreadable.push(Unreadable { manifest, error }),
        }
    }
    out
}

fn one(site: &Path, m: &Manifest, now: &Now) -> RecipeStatus {
    let s = stale::check(site, m, now);
    let state = if !s.missing.is_empty() {
        State::Missing
    } else if !s.overwritten.is_empty() {
        State::Overwritten
    } else if !s.reasons.is_empty() {
        State::Stale
    } else {
        State::Fresh
    };
    RecipeStatus {
        recipe: m.recipe.clone(),
        version: m.version.clone(),
        state,
        reasons: s.reasons.iter().map(ToString::to_string).collect(),
        overwritten: s.overwritten,
        missing: s.missing,
        manifest: manifest::path(site, &m.recipe),
        hashed: s.hashed,
        unverified: m.unverified.clone(),
        kind: m.kind,
        fix: (state != State::Fresh).then(|| stale::fix_command(m)),
        rules_of: m.rules_of.clone(),
        upstream: None,
        cuda: m.sdk.cuda_build(),
    }
}
