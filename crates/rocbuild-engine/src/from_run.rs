//! The manifest of a finished install: made in one place, from the plan's own fields (never
//! re-derived from an argv or an environment) and what the run learned.

use rocbuild_venv::manifest::{
    InstalledFile, Manifest, PrebuiltRecord, PythonPartRecord, RequirementRecord,
};

use crate::install::stage::StagedExtra;
use crate::plan::Plan;
use crate::source::plan::SourcePlan;

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
            // Kept without userinfo: a manifest (and the wheel made from it) holds no secret.
            source_url: Some(match (&plan.prebuilt, &plan.source) {
                (Some(p), _) => rocbuild_secret::strip_userinfo(&p.url),
                (None, SourcePlan::Git { url, .. }) => rocbuild_secret::strip_userinfo(url),
                (None, SourcePlan::Local { dir }) => dir.display().to_string(),
                (
                    None,
                    SourcePlan::Sdist {
                        project, version, ..
                    },
                ) => {
                    format!("https://pypi.org/project/{project}/{version}/")
                }
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
            options: public_options(&plan.options),
            sdk: plan.sdk_record(),
            record: staged.record.clone(),
            dropped: staged.dropped.clone(),
            python_part: python_part(plan, staged, previous),
            requirements: requirements(staged, previous),
            // Kept across reinstalls: the files a previous install added (e.g. a preload hook).
            extra_files: previous.map(|p| p.extra_files.clone()).unwrap_or_default(),
            compiler_cache: staged.compiler_cache.clone(),
            kind: rocbuild_venv::manifest::Kind::Build,
            search_added: Default::default(),
            recipe_fixes: match &plan.source {
                crate::source::plan::SourcePlan::Git { shipped, .. } => {
                    shipped.iter().map(|p| p.record()).collect()
                }
                crate::source::plan::SourcePlan::Local { .. }
                | crate::source::plan::SourcePlan::Sdist { .. } => Vec::new(),
            },
            prebuilt: plan.prebuilt.as_ref().map(|p| PrebuiltRecord {
                url: rocbuild_secret::strip_userinfo(&p.url),
                file: p.file.clone(),
                sha256: p.sha256.clone(),
                index: rocbuild_secret::strip_userinfo(&p.index),
            }),
            // `held` is filled in at the commit, from the files as they then are.
            ownership: Some(rocbuild_venv::ownership::Ownership {
                distribution: plan.install.distribution.clone(),
                roots: vec![plan.install.import_dir.clone()],
                held: Default::default(),
                baseline: None,
            }),
            unverified: plan.unverified.clone(),
            rules_of: plan.rules_of.clone(),
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

/// The run-time requirements rocbuild installed: this install's, and those an earlier one
/// installed (still rocbuild's to remove on `restore`).
fn requirements(staged: &StagedExtra, previous: Option<&Manifest>) -> Vec<RequirementRecord> {
    let mut out: Vec<RequirementRecord> =
        previous.map(|p| p.requirements.clone()).unwrap_or_default();
    for r in &staged.requirements {
        out.retain(|o| o.name != r.name);
        out.push(r.clone());
    }
    out
}

/// The options as the manifest keeps them, for `rebuild`: URLs without userinfo (a rebuild
/// gets credentials from git's credential helpers, or the user passes the URL again).
fn public_options(o: &rocbuild_venv::BuildOptions) -> rocbuild_venv::BuildOptions {
    let mut o = o.clone();
    o.source = o.source.as_deref().map(rocbuild_secret::strip_userinfo);
    o.index = o
        .index
        .iter()
        .map(|u| rocbuild_secret::strip_userinfo(u))
        .collect();
    o
}

#[cfg(test)]
mod tests {
    use crate::plan::testing::{ctx, recipe};
    use rocbuild_probe::{GpuArchs, Os};
    use rocbuild_testkit::machine::machine;
    use rocbuild_venv::{BackendOptions, BuildOptions};

    #[test]
    fn the_arch_a_torchcodec_was_built_for_is_recorded() {
        let mut m = machine(Os::Linux);
        m.target.gpu = Some(GpuArchs {
            archs: vec!["gfx1201".into()],
            found_by: "--arch".into(),
            torch_arch_list: Some(vec!["gfx1100".into(), "gfx1201".into()]),
            ..GpuArchs::default()
        });
        let opts = BuildOptions {
            torch_cmake: Some(rocbuild_recipe::TorchCmake::Lite),
            backend: BackendOptions {
                arch: rocbuild_probe::GpuTargets::parse(&["gfx1201"]),
                ..BackendOptions::default()
            },
            ..BuildOptions::default()
        };
        let plan = crate::plan::plan(&recipe("torchcodec"), &m, &opts, &ctx(Os::Linux)).unwrap();
        let sdk = plan.sdk_record();
        assert_eq!(sdk.backend.as_deref(), Some("cpu"));
        assert_eq!(sdk.gpu_archs, ["gfx1201"]);
        assert_eq!(sdk.torch_hip.as_deref(), Some("6.4.43482"));
        assert_eq!(
            plan.options.backend.arch.names(),
            ["gfx1201"],
            "repeated by rebuild"
        );
        let manifest = rocbuild_venv::manifest::Manifest {
            sdk,
            flavor: "rocm".into(),
            ..Default::default()
        };
        assert_eq!(
            rocbuild_venv::wheel::local_version(&manifest),
            "rocm6.4.gfx1201"
        );
    }
}
