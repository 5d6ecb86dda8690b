//! The one builder of pip command lines: every package rocbuild installs for the venv's Python
//! (the Python part, the build-only tools) and the wheel it builds from a checkout go through
//! here. A venv without pip (`uv venv`) is served by uv when uv made it and is found, else by
//! the pip wheel the Python ships for `ensurepip`, run by the venv's Python from outside the
//! venv (`PYTHONPATH=<pip wheel> python -m pip`): nothing is installed into the venv but what
//! rocbuild asks for. Decided while planning, before anything is fetched.

use std::path::{Path, PathBuf};

use rocbuild_probe::{Os, Python};
use serde::Serialize;

use crate::command::Command;
use crate::error::{EngineError, Result};

/// What runs pip for the venv's Python.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Pip {
    /// The venv's own pip: `python -m pip`.
    Venv,
    /// `uv pip ... --python <venv python>` (uv made the venv).
    Uv(PathBuf),
    /// The Python's bundled pip wheel on `PYTHONPATH`: `python -m pip`.
    Bundled(PathBuf),
    /// The host's Python for a venv of another OS (whose Python cannot run here): `python -m
    /// pip`, with the venv's platform tags when what it installs is for the venv (`tags`),
    /// without for the host's own build tools.
    Host { python: PathBuf, tags: Vec<String> },
}

/// What can install packages into `py`'s venv; `what` names it for the error.
pub fn installer(py: &Python, what: &str) -> Result<Pip> {
    let i = &py.installer;
    if let Some(h) = &i.host {
        return Ok(Pip::Host {
            python: h.python.clone(),
            tags: h.tags.clone(),
        });
    }
    if i.pip {
        return Ok(Pip::Venv);
    }
    if let Some(uv) = &i.uv {
        return Ok(Pip::Uv(uv.clone()));
    }
    bundled(py, what)
}

/// What installs the build's own tools (cmake, ninja, pybind11 …, run by the host): the
/// venv's installer, or for a venv of another OS the host's pip without the venv's tags.
pub fn tools_installer(py: &Python, what: &str) -> Result<Pip> {
    match installer(py, what)? {
        Pip::Host { python, .. } => Ok(Pip::Host {
            python,
            tags: Vec::new(),
        }),
        other => Ok(other),
    }
}

/// What can build a wheel with `py` (`pip wheel`: uv has no such command, so the venv's pip or
/// the bundled one).
pub fn wheel_builder(py: &Python, what: &str) -> Result<Pip> {
    if py.installer.pip {
        return Ok(Pip::Venv);
    }
    bundled(py, what)
}

fn bundled(py: &Python, what: &str) -> Result<Pip> {
    match &py.installer.bundled_pip {
        Some(w) => Ok(Pip::Bundled(w.clone())),
        None => Err(EngineError::NoPip {
            python: py.exe.display().to_string(),
            what: what.into(),
            help: if py.installer.uv_venv {
                format!(
                    "uv made this venv but no uv was found on PATH: put uv on PATH, or add pip to the venv (uv pip install --python {} pip)",
                    py.exe.display()
                )
            } else {
                format!(
                    "add pip to the venv ({} -m ensurepip), or install uv (https://docs.astral.sh/uv/) and put it on PATH",
                    py.exe.display()
                )
            },
        }),
    }
}

/// `<pip> <subcommand> <flags>` for `py`, with the flags the runner knows (uv takes no
/// `--disable-pip-version-check` / `--no-input` / `--no-compile`: it never asks, never checks
/// its version, never compiles unless told).
pub fn command(pip: &Pip, py: &Python, os: Os, subcommand: &str) -> Command {
    match pip {
        Pip::Uv(uv) => Command::new(uv)
            .args(["pip", subcommand, "--python"])
            .arg(py.exe.display().to_string()),
        Pip::Host { python, tags } => {
            let mut c = Command::new(python)
                .args(["-m", "pip", subcommand])
                .args(["--disable-pip-version-check", "--no-input"]);
            if subcommand == "install" {
                c = c.arg("--no-compile");
                if !tags.is_empty() {
                    c = c.args(tags.iter().cloned()).arg("--only-binary=:all:");
                }
            }
            c
        }
        Pip::Venv | Pip::Bundled(_) => {
            let mut c = Command::new(&py.exe)
                .args(["-m", "pip", subcommand])
                .args(["--disable-pip-version-check", "--no-input"]);
            if subcommand == "install" {
                c = c.arg("--no-compile");
            }
            if let Pip::Bundled(w) = pip {
                c.env
                    .insert("PYTHONPATH".into(), python_path(os, &[w.as_path()]));
            }
            c
        }
    }
}

/// `pip install --target DIR` (no dependencies when `no_deps`).
pub fn install_into(pip: &Pip, py: &Python, os: Os, target: &Path, no_deps: bool) -> Command {
    let mut c = command(pip, py, os, "install");
    if no_deps {
        c = c.arg("--no-deps");
    }
    c.arg("--target").arg(target.display().to_string())
}

/// The build tools a command's Python imports (`imported`, installed in `dir`), put on its
/// `PYTHONPATH`. A Python with a `._pth` file ignores that variable: then each of them must be
/// in the venv already, else the build is refused now, naming them and the command that
/// installs them (it would fail later, deep in pip, with "No module named …").
pub fn tools_on_python_path(
    c: &mut Command,
    py: &Python,
    os: Os,
    (dir, imported): (&Path, &[String]),
    what: &str,
) -> Result<()> {
    if let Some(pth) = &py.pth_file {
        let missing: Vec<&str> = imported
            .iter()
            .map(String::as_str)
            .filter(|r| {
                let name: String = r
                    .chars()
                    .take_while(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(*ch))
                    .collect();
                !py.distributions
                    .contains_key(&rocbuild_probe::normalize_dist(&name))
            })
            .collect();
        if !missing.is_empty() {
            let quoted: Vec<String> = missing.iter().map(|r| format!("\"{r}\"")).collect();
            return Err(EngineError::IsolatedPython {
                python: py.exe.display().to_string(),
                pth: pth.display().to_string(),
                what: what.to_string(),
                missing: missing.join(", "),
                install: format!(
                    "{} -m pip install {}{}",
                    py.exe.display(),
                    quoted.join(" "),
                    if py.installer.pip {
                        ""
                    } else {
                        " (it has no pip: add it first, with get-pip.py for the embeddable Python)"
                    }
                ),
            });
        }
    }
    prepend_python_path(c, os, dir);
    Ok(())
}

/// Add `dir` in front of the command's `PYTHONPATH` (the tools a build imports).
pub fn prepend_python_path(c: &mut Command, os: Os, dir: &Path) {
    let old = c.env.get("PYTHONPATH").cloned();
    let mut parts: Vec<&Path> = vec![dir];
    if let Some(o) = &old {
        parts.push(Path::new(o));
    }
    c.env.insert("PYTHONPATH".into(), python_path(os, &parts));
}

fn python_path(os: Os, parts: &[&Path]) -> String {
    let sep = os.rules().path_list_separator();
    parts
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(sep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocbuild_testkit::machine::cpu_machine;

    #[test]
    fn a_venv_without_pip_is_served_by_uv_or_the_bundled_pip_or_refused() {
        let mut py = cpu_machine(Os::Linux).target.python;
        assert_eq!(installer(&py, "x").unwrap(), Pip::Venv);
        let c = install_into(&Pip::Venv, &py, Os::Linux, Path::new("/t"), true);
        assert_eq!(
            c.args,
            [
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--no-compile",
                "--no-deps",
                "--target",
                "/t"
            ]
        );
        assert!(!c.env.contains_key("PYTHONPATH"));

        // uv venv, uv found: `uv pip install --python <venv python>`.
        py.installer.pip = false;
        py.installer.uv_venv = true;
        py.installer.uv = Some("/usr/bin/uv".into());
        py.installer.bundled_pip = Some("/py/ensurepip/_bundled/pip-24.0-py3-none-any.whl".into());
        let pip = installer(&py, "x").unwrap();
        assert_eq!(pip, Pip::Uv("/usr/bin/uv".into()));
        let c = install_into(&pip, &py, Os::Linux, Path::new("/t"), true);
        assert_eq!(c.program, PathBuf::from("/usr/bin/uv"));
        assert_eq!(
            c.args[..4],
            ["pip", "install", "--python", &py.exe.display().to_string()]
        );
        assert!(!c.args.contains(&"--disable-pip-version-check".to_string()));
        // uv builds no wheels: the bundled pip does.
        let w = wheel_builder(&py, "x").unwrap();
        let c = command(&w, &py, Os::Linux, "wheel");
        assert_eq!(c.program, py.exe);
        assert_eq!(
            c.env["PYTHONPATH"],
            "/py/ensurepip/_bundled/pip-24.0-py3-none-any.whl"
        );

        // No uv found: the bundled pip, run by the venv's Python.
        py.installer.uv = None;
        let pip = installer(&py, "x").unwrap();
        assert!(matches!(pip, Pip::Bundled(_)));
        let mut c = install_into(&pip, &py, Os::Linux, Path::new("/t"), false);
        assert_eq!(c.program, py.exe);
        assert!(!c.args.contains(&"--no-deps".to_string()));
        prepend_python_path(&mut c, Os::Linux, Path::new("/tools"));
        assert_eq!(
            c.env["PYTHONPATH"],
            "/tools:/py/ensurepip/_bundled/pip-24.0-py3-none-any.whl"
        );

        // Nothing at all: refused, naming how to get uv on PATH.
        py.installer.bundled_pip = None;
        match installer(&py, "the Python part of torchcodec") {
            Err(EngineError::NoPip { what, help, .. }) => {
                assert_eq!(what, "the Python part of torchcodec");
                assert!(help.contains("uv pip install --python"), "{help}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// A Python with a `._pth` file ignores `PYTHONPATH`: the tools it would import from
    /// there must be in it already, else the build is refused before anything runs.
    #[test]
    fn a_python_that_ignores_python_path_must_have_the_tools_it_imports() {
        let mut py = cpu_machine(Os::Windows).target.python;
        py.distributions.remove("setuptools");
        let imported: Vec<String> = vec![
            "setuptools>=61".into(),
            "Scikit_Build.Core[pyproject]>=0.9".into(),
        ];
        let tools = (Path::new("/cache/tools/1"), &imported[..]);
        let mut c = Command::new(&py.exe);
        // An ordinary Python: the tools go on PYTHONPATH.
        tools_on_python_path(&mut c, &py, Os::Windows, tools, "the build").unwrap();
        assert_eq!(c.env["PYTHONPATH"], "/cache/tools/1");
        py.pth_file = Some("C:/py/python312._pth".into());
        let mut c = Command::new(&py.exe);
        let e = tools_on_python_path(&mut c, &py, Os::Windows, tools, "the build").unwrap_err();
        match &e {
            EngineError::IsolatedPython {
                missing, install, ..
            } => {
                assert_eq!(missing, "setuptools>=61, Scikit_Build.Core[pyproject]>=0.9");
                assert!(
                    install.ends_with(
                        "-m pip install \"setuptools>=61\" \"Scikit_Build.Core[pyproject]>=0.9\""
                    ),
                    "{install}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Both in the venv (names compared as pip compares them): nothing refused.
        py.distributions.insert("setuptools".into(), "75.0".into());
        py.distributions
            .insert("scikit-build-core".into(), "0.10".into());
        tools_on_python_path(&mut c, &py, Os::Windows, tools, "the build").unwrap();
    }
}
