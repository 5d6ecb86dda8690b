//! The manifest of a finished install: made in one place, from the plan's own fields (never
//! re-derived from an argv or an environment) and what the run learned.

use std::path::PathBuf;

use rocbuild_venv::manifest::{InstalledFile, Manifest, PythonPartRecord, SdkRecord};

use crate::plan::{Plan, SourcePlan};
use crate::run::StagedExtra;

pub(crate) trait FromRun {
    fn from_run(
        plan: &Plan,
        commit: Option<String>,
        files: Vec<InstalledFile>,
        parked: Vec<String>,
        staged: &StagedExtra,
        previous: Option<&Manifest>,
    ) -> Manifest;
}

impl FromRun for Manifest {
    fn from_run(
        plan: &Plan,
        commit: Option<String>,
        files: Vec<InstalledFile>,
        parked: Vec<String>,
        staged: &StagedExtra,
        previous: Option<&Manifest>,
    ) -> Manifest {
        Manifest {
            schema: 2,
            recipe: plan.recipe.clone(),
            version: plan.version.clone(),
            recipe_hash: plan.recipe_hash.clone(),
            fingerprint: plan.fingerprint.clone(),
            source_url: Some(match &plan.source {
                SourcePlan::Git { url, .. } => url.clone(),
                SourcePlan::Local { dir } => dir.display().to_string(),
            }),
            source_commit: commit,
            torch_version: plan.torch_version.clone(),
            torch_git: plan.torch_git.clone(),
            flavor: plan.flavor.as_str().into(),
            ffmpeg_major: plan.ffmpeg_major,
            python: plan.python.display().to_string(),
            defines: plan.defines.clone(),
            runpath: plan.install.link.runpath(),
            files,
            parked,
            installed_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            options: plan.options.clone(),
            sdk: sdk_record(plan),
            record: staged.record.clone(),
            dropped: staged.dropped.clone(),
            python_part: python_part(plan, staged, previous),
            // Kept across reinstalls: the files a previous install added (e.g. a preload hook).
            extra_files: previous.map(|p| p.extra_files.clone()).unwrap_or_default(),
        }
    }
}

/// The pure-Python part rocbuild is responsible for. It replaced what was there before
/// rocbuild's *first* install (a rebuild over rocbuild's own part keeps that answer), and an
/// install that leaves rocbuild's earlier part in place keeps it on record, so `restore` can
/// always remove it.
fn python_part(
    plan: &Plan,
    staged: &StagedExtra,
    previous: Option<&Manifest>,
) -> Option<PythonPartRecord> {
    let before = previous.and_then(|p| p.python_part.as_ref());
    match (&plan.python_part, before) {
        (Some(pp), Some(b)) => Some(PythonPartRecord {
            version: pp.version.clone(),
            replaced: b.replaced.clone(),
            files: staged.python_files.clone(),
        }),
        (Some(pp), None) => Some(PythonPartRecord {
            version: pp.version.clone(),
            replaced: pp.replaces.clone(),
            files: staged.python_files.clone(),
        }),
        (None, b) => b.cloned(),
    }
}

/// The SDK as the build saw it: torch's (from the machine) and the toolkit given to CMake.
fn sdk_record(plan: &Plan) -> SdkRecord {
    let toolkit: Option<PathBuf> = plan.toolkit.clone();
    SdkRecord {
        torch_cuda: plan.torch_cuda.clone(),
        torch_hip: plan.torch_hip.clone(),
        toolkit_version: toolkit.as_deref().and_then(rocbuild_probe::toolkit_version),
        toolkit,
        backend: Some(plan.backend.backend.as_str().to_string()),
        rocm_version: plan.backend.rocm.as_ref().and_then(|r| r.version.clone()),
        gpu_archs: plan
            .backend
            .rocm
            .as_ref()
            .map(|r| r.archs.clone())
            .unwrap_or_default(),
        hip_version: plan
            .backend
            .rocm
            .as_ref()
            .and_then(|r| r.hip_version.clone()),
        hip_compat: plan
            .hip_compat
            .as_ref()
            .map(|h| h.names.clone())
            .unwrap_or_default(),
    }
}
