//! The recipe's run-time Python requirements (`[needs] python`) that the venv lacks, installed
//! in the same transaction as the package: the venv's pip, run by the venv's Python, installs
//! them under a prefix in the transaction's directory (`pip install --prefix`, which, unlike
//! `--target`, sees what the venv has and leaves it be), with every distribution the venv
//! has pinned as it is (a constraints file, `name==version`), so that torch, numpy and the
//! rest are never upgraded, downgraded or reinstalled: a requirement that would need another
//! version of one of them makes pip fail, and nothing is installed. The new files under the
//! prefix's site-packages are staged with the package's and recorded in the manifest, so
//! `restore` removes them again. `--no-deps` keeps the refusal.

use std::path::PathBuf;

use rocbuild_probe::Machine;
use rocbuild_recipe::Recipe;
use rocbuild_venv::BuildOptions;
use serde::Serialize;

use crate::command::Command;
use crate::error::{EngineError, Result};
use crate::paths::join;
use crate::pip::{self, Pip};

/// Where, below site-packages, pip's prefix for the requirements is (a plan for another OS
/// joins the components with that OS's separator).
const PREFIX: [&str; 3] = [
    rocbuild_venv::layout::PIP_TARGET[0],
    rocbuild_venv::layout::PIP_TARGET[1],
    "requirements",
];

/// The missing requirements and how they are installed.
#[derive(Debug, Clone, Serialize)]
pub struct RequirementsPlan {
    /// The requirements the venv lacks, as the recipe names them.
    pub missing: Vec<String>,
    /// The constraints file's lines: every distribution the venv has, as it is.
    pub constraints: Vec<String>,
    /// The constraints file (written before pip runs).
    pub constraints_file: PathBuf,
    /// pip's `--prefix` (in the transaction's directory).
    pub prefix: PathBuf,
    /// site-packages below the prefix, as below the venv's root (`lib/python3.12/site-packages`).
    pub site_in_prefix: PathBuf,
    /// `pip install --only-binary=:all: --prefix <prefix> -c <constraints> <missing…>`.
    pub install: Command,
}

/// The plan for `missing` (from [`crate::plan::needs::python`]): none when nothing is missing; the
/// refusal of old when `--no-deps` was given or the venv's Python cannot run pip here (a venv
/// of another OS).
pub fn plan(
    recipe: &Recipe,
    machine: &Machine,
    opts: &BuildOptions,
    missing: Vec<String>,
) -> Result<Option<RequirementsPlan>> {
    if missing.is_empty() {
        return Ok(None);
    }
    let py = &machine.target.python;
    let refuse = |why: &str| EngineError::MissingPython {
        recipe: recipe.name().into(),
        missing: missing.join(", "),
        site: py.site_packages.display().to_string(),
        command: format!("{} -m pip install {}", py.exe.display(), missing.join(" ")),
        why: why.into(),
    };
    if opts.no_deps {
        return Err(refuse(
            "--no-deps: rocbuild installs only its own package; without --no-deps it installs the missing requirements in the same transaction",
        ));
    }
    if missing
        .iter()
        .any(|m| rocbuild_probe::normalize_dist(m) == "torch")
    {
        return Err(refuse(
            "rocbuild builds against the venv's torch and never installs one: install the torch you want",
        ));
    }
    let what = format!("the run-time requirements of {}", recipe.name());
    let installer = pip::installer(py, &what)?;
    if matches!(installer, Pip::Host { .. }) {
        return Err(refuse(
            "the venv's Python cannot run on this host, so its pip cannot see what the venv has",
        ));
    }
    let os = machine.venv_path_os();
    let prefix = join(os, &py.site_packages, &PREFIX);
    let constraints_file = join(
        os,
        &py.site_packages,
        &[PREFIX[0], PREFIX[1], "requirements-constraints.txt"],
    );
    let site_in_prefix = py
        .site_packages
        .strip_prefix(&machine.target.venv.root)
        .map(PathBuf::from)
        .map_err(|_| EngineError::Usage {
            option: "venv".into(),
            reason: format!(
                "site-packages ({}) is not inside the venv ({}), so where pip --prefix puts {what} is not known",
                py.site_packages.display(),
                machine.target.venv.root.display()
            ),
            help: Some(format!(
                "install them first: {} -m pip install {}, or pass --no-deps",
                py.exe.display(),
                missing.join(" ")
            )),
        })?;
    let own = rocbuild_probe::normalize_dist(&recipe.raw.package.distribution);
    let constraints: Vec<String> = py
        .distributions
        .iter()
        .filter(|(name, _)| **name != own)
        .filter(|(name, version)| is_plain(name) && is_plain(version))
        .map(|(name, version)| format!("{name}=={version}"))
        .collect();
    // Wheels only: nothing of the index's is built (no `setup.py` runs) inside the transaction.
    let install = pip::command(&installer, py, machine.target.platform.os, "install")
        .arg("--only-binary=:all:")
        .arg("--prefix")
        .arg(prefix.display().to_string())
        .arg("-c")
        .arg(constraints_file.display().to_string())
        .args(missing.iter().cloned());
    Ok(Some(RequirementsPlan {
        missing,
        constraints,
        constraints_file,
        prefix,
        site_in_prefix,
        install,
    }))
}

/// A name or version read from the venv's dist-info directories (untrusted) that is safe as
/// one constraints line: no spaces, no line breaks, no option or URL syntax.
fn is_plain(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+' | '!'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::recipe;
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::cpu_machine;

    #[test]
    fn missing_requirements_are_installed_with_the_venv_pinned_or_refused_with_no_deps() {
        let mut m = cpu_machine(Os::Linux);
        m.target
            .python
            .distributions
            .insert("numpy".into(), "2.1.0".into());
        m.target
            .python
            .distributions
            .insert("evil".into(), "1.0\n--index-url=x".into());
        let r = recipe("ctranslate2");
        let opts = BuildOptions::default();
        assert!(plan(&r, &m, &opts, Vec::new()).unwrap().is_none());
        let p = plan(&r, &m, &opts, vec!["pyyaml".into()]).unwrap().unwrap();
        assert!(
            p.constraints.contains(&"numpy==2.1.0".to_string()),
            "{:?}",
            p.constraints
        );
        assert!(!p.constraints.iter().any(|c| c.contains("evil")));
        let args = p.install.args.join(" ");
        assert!(args.contains("install"), "{args}");
        assert!(args.contains("--only-binary=:all:"), "{args}");
        assert!(
            args.contains(&format!("--prefix {}", p.prefix.display())),
            "{args}"
        );
        assert!(
            args.contains(&format!("-c {}", p.constraints_file.display())),
            "{args}"
        );
        assert!(args.ends_with(" pyyaml"), "{args}");
        assert!(p.prefix.starts_with(&m.target.python.site_packages));
        let no_deps = BuildOptions {
            no_deps: true,
            ..BuildOptions::default()
        };
        match plan(&r, &m, &no_deps, vec!["pyyaml".into()]) {
            Err(EngineError::MissingPython { command, why, .. }) => {
                assert!(command.contains("-m pip install pyyaml"), "{command}");
                assert!(why.contains("--no-deps"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // torch is never installed by rocbuild (not a pure-Python requirement).
        match plan(&r, &m, &opts, vec!["Torch".into()]) {
            Err(EngineError::MissingPython { why, .. }) => {
                assert!(why.contains("never installs"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        // A venv of another OS: its pip cannot run here to see what the venv has.
        m.target.python.installer.host = Some(rocbuild_probe::HostPip {
            python: "/usr/bin/python3".into(),
            same_version: true,
            tags: Vec::new(),
        });
        match plan(&r, &m, &opts, vec!["pyyaml".into()]) {
            Err(EngineError::MissingPython { why, .. }) => {
                assert!(why.contains("cannot run on this host"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }
}
