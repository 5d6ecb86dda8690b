//! Optional libraries a recipe can use (`[with.X]`) that the machine has, used or not.

pub mod ffmpeg_pc;

use std::path::PathBuf;

use rocbuild_probe::Machine;
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
    if let (true, Some(root)) = (recipe.uses("mkl"), &machine.host.toolkits.mkl_root) {
        let (used, why) = match machine.target.platform.os {
            os if os.rules().gnu_cxx() => (
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
        match (machine.host.libraries.get(&l.name), &l.missing) {
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
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::cpu_machine;

    #[test]
    fn mkl_is_used_on_linux_and_said_why_not_elsewhere() {
        let r = recipe("ctranslate2");
        let mut m = cpu_machine(Os::Linux);
        assert!(used(&found(&r, &m, "cpu")).is_empty());
        m.host.toolkits.mkl_root = Some(PathBuf::from("/opt/intel/oneapi/mkl/latest"));
        let l = found(&r, &m, "cpu");
        assert_eq!(used(&l), ["mkl"]);
        let mut w = cpu_machine(Os::Windows);
        w.host.toolkits.mkl_root = Some(PathBuf::from(r"C:\oneapi\mkl"));
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

    /// CTranslate2's CPU build on Linux x86-64 takes oneDNN as upstream's wheels do: built
    /// from source into the cache ([dependency.dnnl]) and linked statically, whether or not
    /// the venv has PyPI's shared one; nothing at run time looks into the cache. A user's
    /// `-D WITH_DNNL=OFF` builds without it. Elsewhere (aarch64 here) a oneDNN found in the
    /// venv is used where pip put it, through a RUNPATH; without one, OpenBLAS and Ruy.
    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it plans a Linux build, whose paths a Windows host (which never builds for Linux) joins with `\\`"
    )]
    fn ctranslate2_takes_onednn_from_source_on_linux_x86_64_and_from_the_venv_elsewhere() {
        use crate::plan::plan;
        use crate::plan::testing::ctx;
        use rocbuild_venv::BuildOptions;
        let r = recipe("ctranslate2");
        let mut m = cpu_machine(Os::Linux);
        let opts = BuildOptions {
            backend: rocbuild_venv::BackendOptions {
                backend: Some(rocbuild_venv::Backend::Cpu),
                ..Default::default()
            },
            ..BuildOptions::default()
        };
        let venv = m.target.venv.root.clone();
        let pypi = rocbuild_probe::FoundLibrary {
            at: venv.join("include/oneapi/dnnl/dnnl_common.h"),
            include_dir: Some(venv.join("include")),
            lib_dir: Some(venv.join("lib")),
            digest: None,
        };

        // Linux x86-64, nothing found: built from source, used.
        let built = plan(&r, &m, &opts, &ctx(Os::Linux)).unwrap();
        assert_eq!(built.dependencies.len(), 1, "{built}");
        let d = &built.dependencies[0];
        assert_eq!((d.name.as_str(), d.tag.as_str()), ("dnnl", "v3.1.1"));
        assert!(
            d.prefix.starts_with("/cache/deps"),
            "{}",
            d.prefix.display()
        );
        let SourcePlanGit { url, commit } = git(&d.source);
        assert!(url.ends_with("/oneDNN"), "{url}");
        assert_eq!(commit.len(), 40);
        for a in [
            "-DONEDNN_LIBRARY_TYPE=STATIC",
            "-DBUILD_SHARED_LIBS=OFF",
            "-DCMAKE_POSITION_INDEPENDENT_CODE=ON",
            "-DCMAKE_INSTALL_LIBDIR=lib",
            "-DONEDNN_ENABLE_PRIMITIVE=CONVOLUTION;REORDER",
        ] {
            assert!(
                d.configure.args.iter().any(|x| x == a),
                "{a}: {:?}",
                d.configure.args
            );
        }
        // The package's build uses the same compiler as the dependency.
        assert_eq!(
            d.configure
                .args
                .iter()
                .find(|a| a.starts_with("-DCMAKE_CXX_COMPILER=")),
            built
                .configure
                .args
                .iter()
                .find(|a| a.starts_with("-DCMAKE_CXX_COMPILER=")),
        );
        assert_eq!(built.defines["WITH_DNNL"], "ON");
        assert_eq!(
            built.defines["DNNL_INCLUDE_DIR"],
            d.prefix.join("include").display().to_string()
        );
        assert_eq!(
            built.defines["CMAKE_LIBRARY_PATH"],
            d.prefix.join("lib").display().to_string()
        );
        assert!(
            built.install.finds.iter().all(|f| !f.starts_with("/cache")),
            "{:?}",
            built.install.finds
        );
        let text = built.to_string();
        assert!(
            text.contains("build the dependency dnnl (v3.1.1) from source, once, into the cache")
                && text.contains("expect commit: ")
                && text.contains("  dnnl:   /cache/deps/dnnl-v3.1.1-"),
            "{text}"
        );

        // PyPI's shared oneDNN in the venv: the static one still, and the plan says instead
        // of what.
        m.host.libraries.insert("dnnl".into(), pypi.clone());
        let with_pypi = plan(&r, &m, &opts, &ctx(Os::Linux)).unwrap();
        assert_eq!(with_pypi.defines, built.defines);
        let l = with_pypi
            .libraries
            .iter()
            .find(|l| l.name == "dnnl")
            .unwrap();
        assert!(
            l.used
                && l.why.contains(&format!(
                    "instead of the one found at {}",
                    pypi.at.display()
                )),
            "{l:?}"
        );

        // The user's -D WITH_DNNL=OFF: nothing built, oneDNN not used.
        let mut off = opts.clone();
        off.defines.push(("WITH_DNNL".into(), "OFF".into()));
        let without = plan(&r, &m, &off, &ctx(Os::Linux)).unwrap();
        assert!(without.dependencies.is_empty());
        assert_eq!(without.defines["WITH_DNNL"], "OFF");
        assert_ne!(without.fingerprint, built.fingerprint);

        // aarch64: no dependency; the venv's oneDNN is used where pip put it, or it is said
        // missing with how to get it.
        m.target.platform.arch = "aarch64".into();
        let arm = plan(&r, &m, &opts, &ctx(Os::Linux)).unwrap();
        assert!(arm.dependencies.is_empty());
        assert_eq!(arm.defines["WITH_DNNL"], "ON");
        assert_eq!(
            arm.defines["DNNL_INCLUDE_DIR"],
            venv.join("include").display().to_string()
        );
        assert!(arm.install.finds.contains(&venv.join("lib")));
        m.host.libraries.remove("dnnl");
        let arm_bare = plan(&r, &m, &opts, &ctx(Os::Linux)).unwrap();
        assert_eq!(arm_bare.defines["WITH_DNNL"], "OFF");
        let dnnl = arm_bare
            .libraries
            .iter()
            .find(|l| l.name == "dnnl")
            .unwrap();
        assert!(
            !dnnl.used && dnnl.why.contains("pip install onednn-devel-cpu-gomp"),
            "{dnnl:?}"
        );
        // A GPU build does not take it: it is declared for the cpu backend only.
        assert!(found(&r, &m, "rocm").iter().all(|l| l.name != "dnnl"));
    }

    struct SourcePlanGit<'a> {
        url: &'a str,
        commit: &'a str,
    }

    fn git(s: &crate::source::plan::SourcePlan) -> SourcePlanGit<'_> {
        match s {
            crate::source::plan::SourcePlan::Git {
                url,
                expected_commit,
                ..
            } => SourcePlanGit {
                url,
                commit: expected_commit.as_deref().unwrap_or(""),
            },
            other => panic!("not a git source: {other:?}"),
        }
    }
}
