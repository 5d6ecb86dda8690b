//! Optional libraries a recipe can use (`[with.X]`) that the machine has, used or not.

use std::path::PathBuf;

use rocbuild_probe::{Machine, Os};
use rocbuild_recipe::Recipe;
use serde::Serialize;

/// An optional library a recipe can use (`[with.X]`), found on the machine.
#[derive(Debug, Clone, Serialize)]
pub struct OptionalLibrary {
    pub name: String,
    pub root: PathBuf,
    /// Used by this build; when not, `why` says why.
    pub used: bool,
    pub why: String,
    /// Where a `[[needs.library]]` was found: `{lib.NAME.include}`, `{lib.NAME.dir}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub include_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lib_dir: Option<PathBuf>,
}

/// The optional libraries the recipe can use that the machine has. MKL: upstream links it
/// statically with GNU OpenMP on Linux; on Windows it needs Intel's OpenMP runtime
/// (libiomp5md.dll) at run time, which rocbuild does not make findable yet.
/// An optional `[[needs.library]]` is looked at only for its backends; one not found is listed
/// (not used) when the recipe says what a build without it loses (`missing`).
pub fn found(recipe: &Recipe, machine: &Machine, backend: &str) -> Vec<OptionalLibrary> {
    let mut out = Vec::new();
    if let (true, Some(root)) = (recipe.uses("mkl"), &machine.toolkits.mkl_root) {
        let (used, why) = match machine.platform.os {
            Os::Linux => (
                true,
                "Intel oneAPI MKL found: linked statically, with GNU OpenMP".to_string(),
            ),
            os => (
                false,
                format!(
                    "not used on {}: MKL needs Intel's OpenMP runtime there, which rocbuild does not make findable yet",
                    os.as_str()
                ),
            ),
        };
        out.push(OptionalLibrary {
            name: "mkl".into(),
            root: root.clone(),
            used,
            why,
            include_dir: None,
            lib_dir: None,
        });
    }
    let for_backend = |l: &&rocbuild_recipe::schema::NeededLibrary| {
        l.optional && (l.backends.is_empty() || l.backends.iter().any(|b| b == backend))
    };
    for l in recipe.raw.needs.library.iter().filter(for_backend) {
        match (machine.libraries.get(&l.name), &l.missing) {
            (Some(f), _) => out.push(OptionalLibrary {
                name: l.name.clone(),
                root: f.at.clone(),
                used: true,
                why: l.describe.clone(),
                include_dir: f.include_dir.clone(),
                lib_dir: f.lib_dir.clone(),
            }),
            (None, Some(missing)) => out.push(OptionalLibrary {
                name: l.name.clone(),
                root: PathBuf::new(),
                used: false,
                why: format!("{}. Without it, {missing}", l.describe),
                include_dir: None,
                lib_dir: None,
            }),
            (None, None) => {}
        }
    }
    out
}

/// The names of the libraries used, for the recipe's `[with.X]` overlays.
pub fn used(libs: &[OptionalLibrary]) -> Vec<&str> {
    libs.iter()
        .filter(|l| l.used)
        .map(|l| l.name.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::recipe;
    use rocbuild_testkit::machine::cpu_machine;

    #[test]
    fn mkl_is_used_on_linux_and_said_why_not_elsewhere() {
        let r = recipe("ctranslate2");
        let mut m = cpu_machine(Os::Linux);
        assert!(used(&found(&r, &m, "cpu")).is_empty());
        m.toolkits.mkl_root = Some(PathBuf::from("/opt/intel/oneapi/mkl/latest"));
        let l = found(&r, &m, "cpu");
        assert_eq!(used(&l), ["mkl"]);
        let mut w = cpu_machine(Os::Windows);
        w.toolkits.mkl_root = Some(PathBuf::from(r"C:\oneapi\mkl"));
        let l = found(&r, &w, "cpu");
        assert!(
            used(&l).is_empty() && l[0].why.contains("not used on windows"),
            "{:?}",
            l
        );
        // A recipe that cannot use it does not list it.
        assert!(found(&recipe("torchcodec"), &m, "cpu")
            .iter()
            .all(|l| l.name != "mkl"));
    }

    /// oneDNN found in the venv (PyPI's onednn-devel-cpu-gomp): CTranslate2's CPU build takes
    /// upstream's GEMM backend from there, and the library finds libdnnl where pip put it,
    /// through a RUNPATH relative to itself. Without it, OpenBLAS and Ruy as before.
    #[test]
    fn ctranslate2_builds_with_the_onednn_found_in_the_venv() {
        use crate::plan::testing::ctx;
        use crate::plan::{plan, BuildOptions};
        let r = recipe("ctranslate2");
        let mut m = cpu_machine(Os::Linux);
        let opts = BuildOptions {
            backend: rocbuild_venv::BackendOptions {
                backend: Some(rocbuild_venv::Backend::Cpu),
                ..Default::default()
            },
            ..BuildOptions::default()
        };
        let without = plan(&r, &m, &opts, &ctx(Os::Linux)).unwrap();
        assert_eq!(without.defines["WITH_DNNL"], "OFF");
        // Not found: listed, not used, with what the build loses and how to get it.
        let dnnl = without.libraries.iter().find(|l| l.name == "dnnl").unwrap();
        assert!(
            !dnnl.used && dnnl.why.contains("pip install onednn-devel-cpu-gomp"),
            "{dnnl:?}"
        );
        assert!(
            without.to_string().contains("dnnl:    not found: oneDNN 3"),
            "{without}"
        );
        let venv = m.venv.root.clone();
        m.libraries.insert(
            "dnnl".into(),
            rocbuild_probe::FoundLibrary {
                at: venv.join("include/oneapi/dnnl/dnnl_common.h"),
                include_dir: Some(venv.join("include")),
                lib_dir: Some(venv.join("lib")),
            },
        );
        let with = plan(&r, &m, &opts, &ctx(Os::Linux)).unwrap();
        assert_eq!(with.defines["WITH_DNNL"], "ON");
        assert_eq!(
            with.defines["DNNL_INCLUDE_DIR"],
            venv.join("include").display().to_string()
        );
        assert_eq!(
            with.defines["CMAKE_LIBRARY_PATH"],
            venv.join("lib").display().to_string()
        );
        assert!(with.install.finds.contains(&venv.join("lib")));
        assert_ne!(with.fingerprint, without.fingerprint);
        // A GPU build does not take it: it is declared for the cpu backend only.
        assert!(found(&r, &m, "rocm").iter().all(|l| l.name != "dnnl"));
        assert!(found(&r, &m, "cpu")
            .iter()
            .any(|l| l.name == "dnnl" && l.used));
    }
}
