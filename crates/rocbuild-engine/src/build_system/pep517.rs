//! PEP 517, `[build] system = "pep517"`: the source's own build backend (setuptools with
//! `torch.utils.cpp_extension`, scikit-build-core …) makes a wheel, run by
//! `pip wheel --no-deps --no-build-isolation` with the venv's Python, so that it compiles
//! against the venv's own torch and build requirements rather than an isolated copy. The
//! toolchain reaches the backend the only way a backend is told anything, the environment:
//! `CC`/`CXX`, `MAX_JOBS` (torch's extension builder), the GPU toolkit and its architectures
//! (`ROCM_HOME` + `PYTORCH_ROCM_ARCH`, `CUDA_HOME` + `TORCH_CUDA_ARCH_LIST`), and the recipe's
//! `[build] env`. The wheel is then unpacked into the staging prefix, laid out as
//! site-packages, where `[install] layout = "site"` finds the artifacts.

use std::collections::BTreeMap;
use std::path::Path;

use super::{BuildSystem, Inputs, Steps, Titles};
use crate::command::Command;
use crate::error::{EngineError, Result};
use crate::paths::{hash_hex, join, sanitize};
use crate::pip;
use crate::vars::expand;

/// `[build] system = "pep517"`.
pub struct Pep517;

impl BuildSystem for Pep517 {
    fn titles(&self) -> Titles {
        Titles {
            configure: "build the wheel with the source's own build backend (PEP 517, no build isolation: the venv's torch)",
            build: "unpack the wheel into the staging prefix (laid out as site-packages)",
            install: "",
            configure_step: "build the wheel",
            build_step: "unpack the wheel",
        }
    }

    /// The backend keeps its own incremental state (setuptools' `build/` in the source): the
    /// wheel is built again every run, cheaply when nothing changed.
    fn configured_marker(&self) -> Option<&'static str> {
        None
    }

    fn plan(&self, i: &Inputs) -> Result<Steps> {
        refuse_cmake_only(i)?;
        let os = i.machine.target.platform.os;
        let host = i.ctx.host_os;
        let py = &i.machine.target.python;
        let env = environment(i)?;
        let settings = config_settings(i)?;
        let src = i.source.dir().to_path_buf();
        let key = {
            let mut parts = vec![src.display().to_string(), "pep517".to_string()];
            parts.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
            parts.extend(settings.iter().map(|s| format!("-C {s}")));
            let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
            hash_hex(&refs)
        };
        let name = i.recipe.name();
        let build_dir = join(
            host,
            &i.ctx.cache,
            &[
                "build",
                &format!("{name}-{}-{}", sanitize(i.version), &key[..12]),
            ],
        );
        let prefix = join(host, &build_dir, &["rocbuild-prefix"]);
        let wheel_dir = join(host, &build_dir, &["wheel"]);
        let what = format!("the PEP 517 build of {name}");
        let builder = pip::wheel_builder(py, &what)?;
        let mut configure =
            pip::command(&builder, py, os, "wheel").args(["--no-deps", "--no-build-isolation"]);
        for kv in &settings {
            configure = configure.arg("--config-settings").arg(kv.clone());
        }
        let mut configure = configure
            .arg("--wheel-dir")
            .arg(wheel_dir.display().to_string())
            .arg(src.display().to_string());
        configure.env.extend(env);
        if let Some(t) = i.tools {
            pip::tools_on_python_path(&mut configure, py, os, (&t.dir, &t.imported), &what)?;
        }
        let dist = rocbuild_probe::normalize_dist(&i.recipe.raw.package.distribution);
        let pattern = format!("{}-{}-*.whl", dist.replace('-', "_"), i.version);
        let build = Command::new(&py.exe)
            .args(["-I", "-B", "-c", UNPACK])
            .arg(wheel_dir.display().to_string())
            .arg(pattern)
            .arg(prefix.display().to_string());
        Ok(Steps {
            system: rocbuild_recipe::BuildSystem::Pep517,
            defines: BTreeMap::new(),
            toolkit: toolkit(i),
            key,
            build_dir,
            unpacked_wheel: Some(prefix.clone()),
            prefix,
            configure,
            build,
            install_prefix: None,
            files: Default::default(),
        })
    }
}

/// The recipe's `[build] config-settings`, expanded, as pip's `--config-settings KEY=VALUE`
/// takes them (PEP 517's `config_settings`: what scikit-build-core and meson-python read).
fn config_settings(i: &Inputs) -> Result<Vec<String>> {
    i.resolved
        .config_settings
        .iter()
        .map(|(k, v)| Ok(format!("{k}={}", expand(v, i.vars)?)))
        .collect()
}

/// Unpacks the one wheel the build made (`argv[2]` in `argv[1]`) into a fresh `argv[3]`.
/// zipfile drops absolute paths and `..` from member names and makes no links: a wheel from
/// an untrusted sdist writes nothing outside the prefix.
const UNPACK: &str = "import pathlib, shutil, sys, zipfile\n\
wheels = sorted(pathlib.Path(sys.argv[1]).glob(sys.argv[2]))\n\
if len(wheels) != 1:\n    \
sys.exit(f'rocbuild: the build left {len(wheels)} wheels named {sys.argv[2]} in {sys.argv[1]}, not one: remove that folder and build again')\n\
shutil.rmtree(sys.argv[3], ignore_errors=True)\n\
zipfile.ZipFile(wheels[0]).extractall(sys.argv[3])\n";

/// CMake's settings mean nothing to a PEP 517 backend: a recipe or user that gives them is
/// told so before anything runs, rather than having them quietly dropped.
fn refuse_cmake_only(i: &Inputs) -> Result<()> {
    let name = i.recipe.name();
    if let Some((k, _)) = i.opts.defines.first() {
        return Err(EngineError::Usage {
            option: format!("-D {k}"),
            reason: format!("{name} is built by its own PEP 517 build backend ([build] system = \"pep517\"), which takes no CMake defines"),
            help: Some(format!("drop the -D; what the backend reads comes from the environment (a recipe overlay's [build] env, in {})", i.recipe.file)),
        });
    }
    if let Some(k) = i.resolved.define.keys().next() {
        return Err(EngineError::Usage {
            option: format!("recipe {name}: [build.define] {k}"),
            reason: "a PEP 517 build ([build] system = \"pep517\") takes no CMake defines".into(),
            help: Some(format!("in {}, move it to [build.env] as the backend reads it (CMAKE_ARGS for scikit-build-core), or build with system = \"cmake\"", i.recipe.file)),
        });
    }
    let py = &i.recipe.raw.python;
    if py.from.is_some() || py.dir.is_some() || py.extension.is_some() || !py.env.is_empty() {
        return Err(EngineError::Usage {
            option: format!("recipe {name}: [python]"),
            reason: "a PEP 517 build's wheel is the whole package, its Python part included".into(),
            help: Some(format!(
                "in {}, remove the [python] table (what the backend reads goes in [build.env])",
                i.recipe.file
            )),
        });
    }
    if i.cross.is_some() {
        return Err(EngineError::CrossWindows {
            recipe: name.into(),
            venv: i.machine.target.venv.root.display().to_string(),
            host: i.machine.host.platform.os.as_str().into(),
            what: "it is built by its own PEP 517 build backend, which compiles with this host's compiler for this host".into(),
            help: format!("build {name} on the venv's own OS"),
        });
    }
    Ok(())
}

/// The toolchain as the backend reads it, then the recipe's `[build] env` (which wins).
fn environment(i: &Inputs) -> Result<BTreeMap<String, String>> {
    let mut env = BTreeMap::new();
    let s = |p: &Path| p.display().to_string();
    env.insert("CC".to_string(), s(&i.toolset.cc));
    env.insert("CXX".to_string(), s(&i.toolset.cxx));
    env.insert("MAX_JOBS".to_string(), i.ctx.jobs.max(1).to_string());
    // The toolchain's own variables (ROCM_PATH, HIP_PATH, CUDA_HOME …).
    env.extend(i.backend.env());
    if let Some(r) = &i.backend.rocm {
        env.insert("ROCM_HOME".into(), s(&r.root));
        env.insert("PYTORCH_ROCM_ARCH".into(), r.archs.join(";"));
    }
    if let Some(c) = &i.backend.cuda {
        env.insert("CUDA_HOME".into(), s(&c.home));
        env.insert("TORCH_CUDA_ARCH_LIST".into(), c.archs.join(";"));
    }
    env.extend(crate::build_system::cmake::msvc_env(i.machine));
    for (k, v) in &i.resolved.env {
        env.insert(k.clone(), expand(v, i.vars)?);
    }
    Ok(env)
}

/// The GPU toolkit the backend compiles with (recorded in the manifest).
fn toolkit(i: &Inputs) -> Option<std::path::PathBuf> {
    match (&i.backend.rocm, &i.backend.cuda) {
        (Some(r), _) => Some(r.root.clone()),
        (None, Some(c)) => Some(c.home.clone()),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::error::EngineError;
    use crate::install::python_part::PartInstall;
    use crate::plan::plan;
    use crate::plan::testing::{ctx, recipe};
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::cpu_machine;
    use rocbuild_venv::BuildOptions;

    const TORCHSORT: &str = include_str!("../../../../recipes/torchsort.toml");

    #[test]
    fn torchsort_is_a_pip_wheel_without_isolation_unpacked_into_the_prefix() {
        let m = cpu_machine(Os::Linux);
        let p = plan(
            &recipe("torchsort"),
            &m,
            &BuildOptions::default(),
            &ctx(Os::Linux),
        )
        .unwrap();
        assert_eq!(p.build_system, rocbuild_recipe::BuildSystem::Pep517);
        let args = &p.configure.args;
        assert_eq!(args[..3], ["-m", "pip", "wheel"]);
        for a in ["--no-deps", "--no-build-isolation"] {
            assert!(args.contains(&a.to_string()), "{args:?}");
        }
        assert_eq!(args.last(), Some(&p.source.dir().display().to_string()));
        // The toolchain, as the backend reads it.
        assert_eq!(p.configure.env["MAX_JOBS"], "2");
        assert!(p.configure.env.contains_key("CXX"));
        // The one wheel of this release, unpacked into the staging prefix.
        assert!(p.build.args.contains(&"torchsort-0.1.10-*.whl".to_string()));
        assert_eq!(p.build.args.last(), Some(&p.prefix.display().to_string()));
        assert!(p.install_prefix.is_none());
        // No CMake in it.
        assert!(p.defines.is_empty());
        assert!(p.torch_cmake.is_none());
        // The wheel's files are the Python part, copied against its RECORD.
        let pp = p.python_part.clone().expect("the wheel is the Python part");
        assert!(pp.build.is_none());
        match pp.install {
            PartInstall::Unpacked { unpacked } => assert_eq!(unpacked, p.prefix),
            other => panic!("{other:?}"),
        }
        assert!(p
            .to_string()
            .contains("build the wheel with the source's own build backend"));
    }

    #[test]
    fn cmake_defines_are_refused_not_dropped() {
        let m = cpu_machine(Os::Linux);
        let opts = BuildOptions {
            defines: vec![("CMAKE_BUILD_TYPE".into(), "Debug".into())],
            ..BuildOptions::default()
        };
        match plan(&recipe("torchsort"), &m, &opts, &ctx(Os::Linux)) {
            Err(EngineError::Usage { option, reason, .. }) => {
                assert_eq!(option, "-D CMAKE_BUILD_TYPE");
                assert!(reason.contains("PEP 517"), "{reason}");
            }
            other => panic!("{:?}", other.map(|p| p.recipe)),
        }
        let text = TORCHSORT.replace(
            "system = \"pep517\"",
            "system = \"pep517\"\ndefine = { X = \"1\" }",
        );
        let r = rocbuild_recipe::parse("torchsort.toml", &text).unwrap();
        let python = TORCHSORT.replace("[build]", "[python]\nfrom = \"pypi\"\n\n[build]");
        let p = rocbuild_recipe::parse("torchsort.toml", &python).unwrap();
        match plan(&p, &m, &BuildOptions::default(), &ctx(Os::Linux)) {
            Err(EngineError::Usage { option, .. }) => assert!(option.ends_with("[python]")),
            other => panic!("{:?}", other.map(|p| p.recipe)),
        }
        match plan(&r, &m, &BuildOptions::default(), &ctx(Os::Linux)) {
            Err(EngineError::Usage { option, help, .. }) => {
                assert!(option.contains("[build.define] X"), "{option}");
                assert!(help.unwrap_or_default().contains("[build.env]"));
            }
            other => panic!("{:?}", other.map(|p| p.recipe)),
        }
    }

    /// `[build] config-settings` reach the backend as pip's `--config-settings KEY=VALUE`
    /// (templates expanded), and name the build tree; a CMake build refuses them.
    #[test]
    fn config_settings_from_the_recipe_reach_the_backend() {
        let m = cpu_machine(Os::Linux);
        let opts = BuildOptions::default();
        let plain = plan(&recipe("torchsort"), &m, &opts, &ctx(Os::Linux)).unwrap();
        let text = TORCHSORT.replace(
            "system = \"pep517\"",
            "system = \"pep517\"\nconfig-settings = { \"--build-option\" = \"--build-number=7\", \"cmake.define.PYV\" = \"{python.version}\" }",
        );
        let r = rocbuild_recipe::parse("torchsort.toml", &text).unwrap();
        let p = plan(&r, &m, &opts, &ctx(Os::Linux)).unwrap();
        let args = &p.configure.args;
        let given: Vec<&str> = args
            .iter()
            .zip(args.iter().skip(1))
            .filter(|(a, _)| *a == "--config-settings")
            .map(|(_, v)| v.as_str())
            .collect();
        let py = &m.target.python.version;
        assert_eq!(
            given,
            [
                "--build-option=--build-number=7".to_string(),
                format!("cmake.define.PYV={py}")
            ]
        );
        // Before the source, which pip takes last.
        assert_eq!(args.last(), Some(&p.source.dir().display().to_string()));
        assert_ne!(
            p.build_dir, plain.build_dir,
            "the settings name the build tree"
        );

        let cmake = include_str!("../../../../recipes/torchcodec.toml").replace(
            "[build]\n",
            "[build]\nconfig-settings = { \"cmake.build-type\" = \"Debug\" }\n",
        );
        let r = rocbuild_recipe::parse("torchcodec.toml", &cmake).unwrap();
        match plan(&r, &m, &opts, &ctx(Os::Linux)) {
            Err(EngineError::Usage { option, reason, .. }) => {
                assert!(
                    option.contains("[build.config-settings] cmake.build-type"),
                    "{option}"
                );
                assert!(reason.contains("PEP 517"), "{reason}");
            }
            other => panic!("{:?}", other.map(|p| p.recipe)),
        }
    }
}
