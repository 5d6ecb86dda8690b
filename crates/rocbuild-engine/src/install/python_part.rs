//! The pure-Python part of the package: from the index (pip, `--no-deps`, only when another
//! version or none is installed), or a wheel built from the checkout against the libraries
//! just built (always). Both are installed by pip into the transaction's staging directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocbuild_probe::Machine;
use rocbuild_recipe::{PythonFrom, Recipe, Resolved};
use serde::Serialize;

use crate::build_system::cmake::{extension, msvc_env};
use crate::command::Command;
use crate::error::Result;
use crate::paths::join;
use crate::pip;
use crate::source::plan::SourcePlan;
use crate::toolchain::tools::ToolsPlan;
use crate::vars::expand;

#[derive(Debug, Clone, Serialize)]
pub struct PythonPart {
    pub distribution: String,
    pub version: String,
    /// The version installed now, if any (its files are parked in the backup).
    pub replaces: Option<String>,
    /// For a package built from the checkout: `pip wheel` into the build tree.
    pub build: Option<Command>,
    /// For `from = "extension"`: rocbuild's build of the module and the wheel it assembles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extension: Option<extension::ExtensionBuild>,
    /// How its files get into the transaction's staging directory (`target`).
    pub install: PartInstall,
    pub target: PathBuf,
}

/// How the Python part reaches the stage.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum PartInstall {
    /// `pip install --no-deps --target` (or uv's).
    Pip(Command),
    /// rocbuild copies the files of a wheel it already downloaded, checked and unpacked (a
    /// team's prebuilt wheel), checking each against the wheel's RECORD: no pip is needed,
    /// so a venv without one (an embeddable CPython) is served too.
    Unpacked { unpacked: PathBuf },
}

impl PartInstall {
    /// The pip command, when pip does it.
    pub fn pip(&self) -> Option<&Command> {
        match self {
            PartInstall::Pip(c) => Some(c),
            PartInstall::Unpacked { .. } => None,
        }
    }
}

impl std::fmt::Display for PartInstall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartInstall::Pip(c) => write!(f, "{c}"),
            PartInstall::Unpacked { unpacked } => writeln!(
                f,
                "      copy the checked wheel from {} (each file against its RECORD; no pip)",
                unpacked.display()
            ),
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub fn plan(
    recipe: &Recipe,
    machine: &Machine,
    version: &str,
    resolved: &Resolved,
    vars: &BTreeMap<String, String>,
    source: &SourcePlan,
    build_dir: &Path,
    library_configure: &Command,
    tools: Option<&ToolsPlan>,
) -> Result<Option<PythonPart>> {
    let os = machine.target.platform.os;
    let py = &machine.target.python;
    let raw = &recipe.raw;
    let version = version.to_string();
    let dist = rocbuild_probe::normalize_dist(&raw.package.distribution);
    let installed = py.distributions.get(&dist).cloned();
    let what = format!("the Python part of {}", recipe.name());
    Ok(match resolved.python_from {
        // The index's wheel carries the pure-Python files; needed only when another version
        // (or none) is installed.
        PythonFrom::Pypi if installed.as_deref() == Some(version.as_str()) => None,
        PythonFrom::Pypi => {
            let pip = pip::installer(py, &what)?;
            let target = join(
                machine.venv_path_os(),
                &py.site_packages,
                &rocbuild_venv::layout::PIP_TARGET,
            );
            Some(PythonPart {
                distribution: raw.package.distribution.clone(),
                version: version.clone(),
                replaces: installed.clone(),
                build: None,
                extension: None,
                install: PartInstall::Pip(
                    pip::install_into(&pip, py, os, &target, true)
                        .arg(format!("{}=={version}", raw.package.distribution)),
                ),
                target,
            })
        }
        // A wheel built from the checkout against the libraries just built: always installed,
        // whatever version pip had (its native extension was built for other libraries).
        PythonFrom::Source if machine.host.cross.is_some() => {
            return Err(crate::error::EngineError::CrossWindows {
                recipe: recipe.name().into(),
                venv: machine.target.venv.root.display().to_string(),
                host: machine.host.platform.os.as_str().into(),
                what: format!(
                    "its Python part is a wheel built from the checkout by setuptools, which compiles with this host's compiler for this host (it cannot drive clang-cl for {}'s Python)",
                    machine.target.platform.os.as_str()
                ),
                help: format!(
                    "build {} on Windows itself (rocbuild uses MSVC there), or give the recipe a Python part rocbuild compiles with the same toolchain: `[python] from = \"extension\"` and a `[python.extension]` table (docs/recipes.md)",
                    recipe.name()
                ),
            });
        }
        PythonFrom::Source => {
            let dir = resolved.python_dir.clone().unwrap_or_else(|| ".".into());
            let dir = match expand(&dir, vars)?.as_str() {
                "." | "" => source.dir().to_path_buf(),
                sub => join(os, source.dir(), &[sub]),
            };
            let wheel_dir = join(os, build_dir, &["rocbuild-wheel"]);
            let builder = pip::wheel_builder(py, &what)?;
            let mut build = pip::command(&builder, py, os, "wheel")
                .args(["--no-deps", "--no-build-isolation", "--wheel-dir"])
                .arg(wheel_dir.display().to_string())
                .arg(dir.display().to_string());
            for (k, v) in &resolved.python_env {
                build.env.insert(k.clone(), expand(v, vars)?);
            }
            if let Some(t) = tools {
                pip::tools_on_python_path(&mut build, py, os, (&t.dir, &t.imported), &what)?;
            }
            build.env.extend(msvc_env(machine));
            let mut part = from_wheel_dir(recipe, machine, &version, &wheel_dir, &what)?;
            part.build = Some(build);
            Some(part)
        }
        PythonFrom::Extension => {
            let Some(ext) = &resolved.python_extension else {
                return Err(crate::error::EngineError::Usage {
                    option: "recipe".into(),
                    reason: format!("{} says `[python] from = \"extension\"` but has no `[python.extension]` for {}", recipe.name(), os.as_str()),
                    help: Some("add the table: module, sources, package (docs/recipes.md)".into()),
                });
            };
            let x = extension::plan(extension::Inputs {
                recipe,
                machine,
                version: &version,
                ext,
                vars,
                source,
                build_dir,
                library_configure,
                tools,
            })?;
            let mut part = from_wheel_dir(recipe, machine, &version, &x.wheel_dir, &what)?;
            part.extension = Some(x);
            Some(part)
        }
    })
}

/// A Python part pip installs from the wheel a step of this run puts in `wheel_dir` (built
/// from the checkout, or assembled by rocbuild), into the transaction's stage.
fn from_wheel_dir(
    recipe: &Recipe,
    machine: &Machine,
    version: &str,
    wheel_dir: &Path,
    what: &str,
) -> Result<PythonPart> {
    let py = &machine.target.python;
    let dist = &recipe.raw.package.distribution;
    let pip = pip::installer(py, what)?;
    let target = join(
        machine.venv_path_os(),
        &py.site_packages,
        &rocbuild_venv::layout::PIP_TARGET,
    );
    let install = pip::install_into(&pip, py, machine.target.platform.os, &target, true)
        .args(["--no-index", "--find-links"])
        .arg(wheel_dir.display().to_string())
        .arg(format!("{dist}=={version}"));
    Ok(PythonPart {
        distribution: dist.clone(),
        version: version.to_string(),
        replaces: py
            .distributions
            .get(&rocbuild_probe::normalize_dist(dist))
            .cloned(),
        build: None,
        extension: None,
        install: PartInstall::Pip(install),
        target,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::recipe;
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::cpu_machine;

    /// The Python part of torchcodec 0.9.1 built from a local checkout, nothing resolved.
    fn plan_0_9_1(r: &Recipe, m: &Machine) -> Result<Option<PythonPart>> {
        let src = SourcePlan::Local {
            dir: PathBuf::from("/src"),
        };
        let cmake = Command::new("cmake");
        plan(
            r,
            m,
            "0.9.1",
            &Resolved::default(),
            &BTreeMap::new(),
            &src,
            Path::new("/b"),
            &cmake,
            None,
        )
    }

    #[test]
    fn pip_fetches_the_python_part_only_when_another_version_is_installed() {
        let r = recipe("torchcodec");
        let mut m = cpu_machine(Os::Linux);
        let pp = plan_0_9_1(&r, &m)
            .unwrap()
            .expect("not installed: pip fetches it");
        assert_eq!(pp.replaces, None);
        assert!(pp
            .install
            .pip()
            .unwrap()
            .args
            .contains(&"torchcodec==0.9.1".to_string()));
        assert_eq!(
            pp.target,
            m.target.python.site_packages.join(".rocbuild/txn/pip")
        );
        m.target
            .python
            .distributions
            .insert("torchcodec".into(), "0.9.1".into());
        assert!(plan_0_9_1(&r, &m).unwrap().is_none());
        m.target
            .python
            .distributions
            .insert("torchcodec".into(), "0.8.0".into());
        let pp = plan_0_9_1(&r, &m).unwrap().unwrap();
        assert_eq!(pp.replaces.as_deref(), Some("0.8.0"));
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it plans a Linux build, whose paths a Windows host (which never builds for Linux) joins with `\\`"
    )]
    fn a_source_python_part_is_built_from_the_checkout() {
        let r = recipe("ctranslate2");
        let m = cpu_machine(Os::Linux);
        let src = SourcePlan::Local {
            dir: PathBuf::from("/src"),
        };
        let res = Resolved {
            python_from: PythonFrom::Source,
            python_dir: Some("python".into()),
            ..Resolved::default()
        };
        let pp = plan(
            &r,
            &m,
            "4.8.1",
            &res,
            &BTreeMap::new(),
            &src,
            Path::new("/b"),
            &Command::new("cmake"),
            None,
        )
        .unwrap()
        .unwrap();
        let build = pp.build.expect("a wheel build");
        assert_eq!(build.args.last().unwrap(), "/src/python");
        assert!(pp
            .install
            .pip()
            .unwrap()
            .args
            .contains(&"--no-index".to_string()));
    }

    #[test]
    fn a_venv_without_pip_is_planned_with_uv_or_refused_before_anything_is_fetched() {
        let r = recipe("torchcodec");
        let mut m = cpu_machine(Os::Linux);
        m.target.python.installer.pip = false;
        m.target.python.installer.uv_venv = true;
        let e = plan_0_9_1(&r, &m).unwrap_err();
        assert!(
            matches!(&e, crate::error::EngineError::NoPip { what, .. } if what == "the Python part of torchcodec"),
            "{e}"
        );
        m.target.python.installer.uv = Some(PathBuf::from("/usr/local/bin/uv"));
        let pp = plan_0_9_1(&r, &m).unwrap().unwrap();
        assert_eq!(
            pp.install.pip().unwrap().program,
            PathBuf::from("/usr/local/bin/uv")
        );
        assert!(pp
            .install
            .pip()
            .unwrap()
            .args
            .contains(&"torchcodec==0.9.1".to_string()));
        // Installed already at that version: nothing to install, no pip needed.
        m.target.python.installer.uv = None;
        m.target
            .python
            .distributions
            .insert("torchcodec".into(), "0.9.1".into());
        assert!(plan_0_9_1(&r, &m).unwrap().is_none());
    }
}
