//! The install: where the artifacts go, how they find their dependencies at run time (the
//! recipe's `finds` plus the SDK's runtime, never copied), which wheel files are parked.

pub mod python_part;
pub mod requirements;
pub mod stage;

use std::collections::BTreeMap;
use std::path::PathBuf;

use rocbuild_probe::Machine;
use rocbuild_recipe::{Recipe, Resolved};
use serde::Serialize;

use crate::error::Result;
use crate::link::Link;
use crate::paths::join;
use crate::toolchain::BackendPlan;
use crate::vars::expand;

#[derive(Debug, Clone, Serialize)]
pub struct InstallPlan {
    pub site: PathBuf,
    pub import_dir: String,
    pub dest: PathBuf,
    pub distribution: String,
    pub artifacts: Vec<String>,
    /// Where the artifacts are looked for after the build (`[install] artifacts-in`).
    pub artifacts_in: rocbuild_recipe::schema::ArtifactsIn,
    /// How the artifacts are laid out there (`[install] layout`).
    pub layout: rocbuild_recipe::schema::ArtifactLayout,
    /// How the installed native files find their dependencies (RUNPATH, @rpath, preload).
    pub link: Link,
    /// Globs relative to site-packages of the wheel's files to park.
    pub park: Vec<String>,
    /// Globs relative to site-packages of the Python part's native files, linked like the
    /// artifacts.
    pub python_libs: Vec<String>,
    /// Directories the artifacts must find at run time (after templates).
    pub finds: Vec<PathBuf>,
}

pub fn plan(
    recipe: &Recipe,
    machine: &Machine,
    resolved: &Resolved,
    vars: &BTreeMap<String, String>,
    backend: &BackendPlan,
    static_prefixes: &[PathBuf],
) -> Result<InstallPlan> {
    let os = machine.target.platform.os;
    let raw = &recipe.raw;
    let site = machine.target.python.site_packages.clone();
    let dest = join(machine.venv_path_os(), &site, &[&raw.package.import_dir]);
    let expand_all =
        |list: &[String]| -> Result<Vec<String>> { list.iter().map(|a| expand(a, vars)).collect() };
    let mut finds: Vec<PathBuf> = expand_all(&resolved.finds)?
        .into_iter()
        // A library the recipe declares but this build does not need, and the machine lacks.
        .filter(|f| !f.is_empty())
        .map(PathBuf::from)
        // A dependency built into the cache is linked statically: nothing at run time looks
        // there (and the cache may be cleaned at will).
        .filter(|f: &PathBuf| !static_prefixes.iter().any(|p| f.starts_with(p)))
        .collect();
    // A GPU build finds its SDK's runtime where the SDK keeps it (never copied).
    for d in backend.rocm.iter().flat_map(|r| r.runtime.iter()) {
        if !finds.contains(d) {
            finds.push(d.clone());
        }
    }
    let own: Vec<PathBuf> = machine.target.torch.iter().map(|t| t.lib.clone()).collect();
    let link = Link::plan(
        os,
        &rocbuild_link::Placement {
            recipe: recipe.name(),
            import_dir: &raw.package.import_dir,
            dest: &dest,
            site: &site,
            finds: &finds,
            own: &own,
        },
    );
    Ok(InstallPlan {
        site,
        import_dir: raw.package.import_dir.clone(),
        dest,
        distribution: raw.package.distribution.clone(),
        artifacts: expand_all(&resolved.artifacts)?,
        artifacts_in: resolved.artifacts_in,
        layout: resolved.artifact_layout,
        link,
        park: expand_all(&resolved.park)?,
        python_libs: expand_all(&resolved.python_libs)?,
        finds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::recipe;
    use crate::toolchain;
    use rocbuild_probe::Os;
    use rocbuild_recipe::Target;
    use rocbuild_testkit::machine::cpu_machine;

    fn planned(os: Os) -> InstallPlan {
        let r = recipe("torchcodec");
        let m = cpu_machine(os);
        let b = toolchain::choose(&r, &m, &Default::default()).unwrap();
        let resolved = r.resolve(&Target {
            os: os.as_str(),
            arch: m.target.platform.arch.as_str(),
            flavor: "cpu",
            version: "0.9.1",
            backend: "cpu",
            rocm_version: None,
            features: &[],
        });
        let mut vars = BTreeMap::new();
        let t = m.target.torch.as_ref().unwrap();
        let f = m.target.ffmpeg.as_ref().unwrap();
        vars.insert("torch.lib".to_string(), t.lib.display().to_string());
        vars.insert("ffmpeg.lib".to_string(), f.lib.display().to_string());
        vars.insert("ffmpeg.major".to_string(), f.major.to_string());
        vars.insert(
            "ffmpeg.runtime".to_string(),
            f.bin.as_ref().unwrap_or(&f.lib).display().to_string(),
        );
        plan(&r, &m, &resolved, &vars, &b, &[]).unwrap()
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it plans Linux and macOS builds, whose paths a Windows host (which never builds for them) joins with `\\`"
    )]
    fn each_os_links_its_own_way() {
        match planned(Os::Linux).link {
            Link::Runpath { entries } => {
                assert_eq!(entries[0], "$ORIGIN");
                assert!(
                    entries.contains(&"$ORIGIN/../torch/lib".to_string()),
                    "{entries:?}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            planned(Os::Macos).link,
            Link::MachO { resign: true, .. }
        ));
        assert!(matches!(planned(Os::Windows).link, Link::Preload(_)));
        let w = planned(Os::Windows);
        assert_eq!(
            w.dest,
            PathBuf::from(r"C:\Users\me\venv\Lib\site-packages\torchcodec")
        );
    }
}
