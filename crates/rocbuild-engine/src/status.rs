//! `rocbuild status`: is each build rocbuild installed still what it installed, and still
//! right for the venv? Cheap by design (a scheduler runs it often): manifests and
//! torch/version.py are read, FFmpeg's major comes from one pkg-config query, and a file is
//! hashed only when its size or mtime differ from the manifest's.

use std::path::{Path, PathBuf};

use rocbuild_recipe::RecipeSet;
use serde::Serialize;

use crate::manifest::{self, sha256_file, Manifest, SdkRecord};

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

#[derive(Debug, Clone, Serialize)]
pub struct VenvStatus {
    pub site: PathBuf,
    pub recipes: Vec<RecipeStatus>,
    pub unreadable: Vec<Unreadable>,
}

impl VenvStatus {
    pub fn needs_action(&self) -> bool {
        !self.unreadable.is_empty() || self.recipes.iter().any(RecipeStatus::needs_action)
    }
}

/// The status of every build in `site`. `recipes` tells whether a recipe changed since.
pub fn status(site: &Path, recipes: &RecipeSet) -> VenvStatus {
    let mut out = VenvStatus {
        site: site.to_path_buf(),
        recipes: Vec::new(),
        unreadable: Vec::new(),
    };
    let torch = rocbuild_probe::torch_version(site);
    for m in manifest::read_all(site) {
        match m {
            Ok(m) => out.recipes.push(one(site, &m, recipes, torch.as_ref())),
            Err((manifest, error)) => out.unreadable.push(Unreadable { manifest, error }),
        }
    }
    out
}

fn one(
    site: &Path,
    m: &Manifest,
    recipes: &RecipeSet,
    torch: Option<&rocbuild_probe::TorchVersion>,
) -> RecipeStatus {
    let mut missing = Vec::new();
    let mut overwritten = Vec::new();
    let mut hashed = 0;
    for f in &m.files {
        let p = site.join(&f.path);
        let Ok(md) = std::fs::metadata(&p) else {
            missing.push(f.path.clone());
            continue;
        };
        if md.len() == f.size && f.mtime_ns.is_some() && manifest::mtime_ns(&md) == f.mtime_ns {
            continue;
        }
        hashed += 1;
        if sha256_file(&p).map_or(true, |(h, _)| h != f.sha256) {
            overwritten.push(f.path.clone());
        }
    }
    for f in &m.extra_files {
        if !site.join(f).exists() {
            missing.push(f.clone());
        }
    }
    let reasons = stale_reasons(m, recipes, torch);
    let state = if !missing.is_empty() {
        State::Missing
    } else if !overwritten.is_empty() {
        State::Overwritten
    } else if !reasons.is_empty() {
        State::Stale
    } else {
        State::Fresh
    };
    RecipeStatus {
        recipe: m.recipe.clone(),
        version: m.version.clone(),
        state,
        reasons,
        overwritten,
        missing,
        manifest: manifest::path(site, &m.recipe),
        hashed,
    }
}

fn or_none(v: Option<&str>) -> &str {
    v.unwrap_or("none")
}

/// What changed since the build, in words.
pub fn stale_reasons(
    m: &Manifest,
    recipes: &RecipeSet,
    torch: Option<&rocbuild_probe::TorchVersion>,
) -> Vec<String> {
    let mut out = Vec::new();
    let now_version = torch.map(|t| t.version.as_str());
    // No torch recorded: the build does not use torch (CTranslate2), a torch change is not
    // a reason.
    if m.torch_version.is_none() {
    } else if m.torch_version.as_deref() != now_version {
        out.push(format!(
            "torch {} → {}",
            or_none(m.torch_version.as_deref()),
            or_none(now_version)
        ));
    } else if m.torch_git.is_some()
        && m.torch_git.as_deref() != torch.and_then(|t| t.git_version.as_deref())
    {
        out.push(format!(
            "torch {} was rebuilt (git {} → {})",
            or_none(now_version),
            short(m.torch_git.as_deref()),
            short(torch.and_then(|t| t.git_version.as_deref()))
        ));
    }
    if let Some(was) = m.ffmpeg_major {
        let now = rocbuild_probe::ffmpeg_major_now(m.options.ffmpeg_dir.as_deref());
        if now != Some(was) {
            out.push(match now {
                Some(n) => format!("FFmpeg {was} → {n}"),
                None => format!("FFmpeg {was} → none found"),
            });
        }
    }
    // Manifests of schema 1 did not record the SDK.
    if m.schema >= 2 {
        // A build that did not use torch (CTranslate2) does not go stale with it.
        let torch = torch.filter(|_| m.torch_version.is_some());
        let now = SdkRecord {
            torch_cuda: torch.and_then(|t| t.cuda.clone()),
            torch_hip: torch.and_then(|t| t.hip.clone()),
            toolkit: m.sdk.toolkit.clone(),
            toolkit_version: m
                .sdk
                .toolkit
                .as_deref()
                .and_then(rocbuild_probe::toolkit_version),
            backend: m.sdk.backend.clone(),
            rocm_version: m.sdk.rocm_version.clone(),
            gpu_archs: m.sdk.gpu_archs.clone(),
        };
        if now != m.sdk {
            out.push(format!(
                "SDK changed: {} → {}",
                m.sdk.describe(),
                now.describe()
            ));
        }
    }
    match recipes.get(&m.recipe) {
        Ok(r) if r.hash != m.recipe_hash => out.push(format!("recipe changed ({})", r.file)),
        Ok(_) => {}
        Err(_) => out.push(format!("recipe `{}` is no longer found", m.recipe)),
    }
    out
}

fn short(s: Option<&str>) -> &str {
    match s {
        Some(s) => &s[..s.len().min(12)],
        None => "none",
    }
}
