//! `--compare`: the index's own wheel of the same release, in a scratch venv that shares the
//! user's packages (torch among them) through a `.pth` naming the user's site-packages — a
//! link, not a copy — with the wheel installed in the scratch venv's own site-packages, which
//! comes first. Nothing is written into the user's venv.
//!
//! A Python that cannot make a venv (Windows' embeddable CPython has no `venv` module) still
//! compares: the wheel goes into a scratch folder with `pip install --target`, and the venv's
//! own Python runs the official run with that folder first on `sys.path`
//! (`ROCBUILD_TEST_FIRST`, read by pytest's boot code and the run's `sitecustomize`), ahead of
//! the venv's site-packages and the rebuild in it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocbuild_probe::{Os, Python};
use serde::Serialize;

use super::junit::{Case, Outcome};
use crate::command::Command;
use crate::error::{EngineError, Result};
use crate::pip;

/// The scratch venv with the official wheel, ready to test.
pub struct Scratch {
    pub python: PathBuf,
    /// `torchcodec==0.15.0`.
    pub wheel: String,
    /// The folder the official run puts first on `sys.path` (no scratch venv could be made:
    /// the wheel is there, and `python` is the venv's own).
    pub first_on_path: Option<PathBuf>,
}

/// Make the scratch venv under `dir` and install `dist==version` from the index into it;
/// `Err(why)` when there is no such wheel, or it does not load with this torch.
pub fn prepare(
    py: &Python,
    user_site: &Path,
    dir: &Path,
    dist: &str,
    version: &str,
    import: &str,
) -> Result<std::result::Result<Scratch, String>> {
    let wheel = format!("{dist}=={version}");
    let os = Os::current();
    let made = captured(
        &Command::new(&py.exe)
            .args(["-m", "venv", "--without-pip"])
            .arg(dir.display().to_string()),
    )?;
    let site = rocbuild_probe::site_packages_of(dir, os);
    let (true, Some(site)) = (made.status.success(), site) else {
        let no_venv = format!(
            "a scratch venv could not be made with {} ({})",
            py.exe.display(),
            last_line(&made.stderr)
        );
        return shadowing(py, dir, &wheel, import, &no_venv);
    };
    fs_err::write(
        site.join("_rocbuild_shares_the_venv.pth"),
        format!("{}\n", user_site.display()),
    )
    .map_err(EngineError::io("write", &site))?;
    if let Err(why) = install_wheel(py, &site, &wheel)? {
        return Ok(Err(format!(
            "the package index has no wheel of {wheel} for this Python and platform ({why})"
        )));
    }
    let python = rocbuild_probe::python_in_venv(dir, os);
    let load = captured(&Command::new(&python).args(["-c", &format!("import {import}")]))?;
    if !load.status.success() {
        return Ok(Err(format!(
            "the index's wheel of {wheel} does not load with this venv's torch: {}",
            last_line(&load.stderr)
        )));
    }
    Ok(Ok(Scratch {
        python,
        wheel,
        first_on_path: None,
    }))
}

/// No scratch venv (`no_venv` says why): `wheel` into `DIR/first` with `pip install --target`
/// (no dependencies: the venv has them), and checked to be what the venv's own Python imports
/// with that folder first on its path.
fn shadowing(
    py: &Python,
    dir: &Path,
    wheel: &str,
    import: &str,
    no_venv: &str,
) -> Result<std::result::Result<Scratch, String>> {
    let first = dir.join("first");
    if let Err(why) = install_wheel(py, &first, wheel)? {
        return Ok(Err(format!(
            "{no_venv}, and the package index has no wheel of {wheel} for this Python and platform ({why})"
        )));
    }
    // The module's folder as Python sees it, with `first` put where the run puts it.
    let code = format!(
        "import os, sys\nsys.path.insert(0, sys.argv[1])\nimport {import}\nprint(os.path.dirname(os.path.abspath({import}.__file__)))"
    );
    let load = captured(
        &Command::new(&py.exe)
            .args(["-B", "-c", &code])
            .arg(first.display().to_string()),
    )?;
    if !load.status.success() {
        return Ok(Err(format!(
            "the index's wheel of {wheel} does not load with this venv's torch: {}",
            last_line(&load.stderr)
        )));
    }
    let from = PathBuf::from(String::from_utf8_lossy(&load.stdout).trim());
    if !from.starts_with(&first) {
        return Ok(Err(format!(
            "{no_venv}, and with the index's wheel of {wheel} first on the path Python still imports {import} from {}",
            from.display()
        )));
    }
    Ok(Ok(Scratch {
        python: py.exe.clone(),
        wheel: wheel.to_string(),
        first_on_path: Some(first),
    }))
}

/// `wheel` alone (no dependencies: the venv has them) into `target` with the venv's installer;
/// `Err(pip's last line)` when it cannot be had.
fn install_wheel(
    py: &Python,
    target: &Path,
    wheel: &str,
) -> Result<std::result::Result<(), String>> {
    let installer = pip::installer(py, "the official wheel")?;
    let c = pip::install_into(&installer, py, Os::current(), target, true)
        .arg("--only-binary=:all:")
        .arg(wheel);
    let out = captured(&c)?;
    Ok(if out.status.success() {
        Ok(())
    } else {
        Err(last_line(&out.stderr))
    })
}

/// Run `c` to its end, its output kept, whatever its exit status.
fn captured(c: &Command) -> Result<std::process::Output> {
    c.to_duct()
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(EngineError::io("run", &c.program))
}

fn last_line(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// The rebuild's results beside the official wheel's.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Differences {
    /// Pass with the official wheel, fail with the rebuild.
    pub regressions: Vec<String>,
    /// Fail with the official wheel, pass with the rebuild.
    pub fixed: Vec<String>,
    /// Any other difference (`test: skipped here, passed there`), and tests only one ran.
    pub other: Vec<String>,
}

pub fn differences(rebuild: &[Case], official: &[Case]) -> Differences {
    let theirs: BTreeMap<&str, Outcome> = official
        .iter()
        .map(|c| (c.id.as_str(), c.outcome))
        .collect();
    let ours: BTreeMap<&str, Outcome> =
        rebuild.iter().map(|c| (c.id.as_str(), c.outcome)).collect();
    let mut d = Differences::default();
    for (id, o) in &ours {
        match (o, theirs.get(id)) {
            (Outcome::Failed, Some(Outcome::Passed)) => d.regressions.push(id.to_string()),
            (Outcome::Passed, Some(Outcome::Failed)) => d.fixed.push(id.to_string()),
            (a, Some(b)) if a != b => d.other.push(format!(
                "{id}: {} here, {} with the official wheel",
                word(*a),
                word(*b)
            )),
            (_, None) => d.other.push(format!("{id}: only run here")),
            _ => {}
        }
    }
    for id in theirs.keys().filter(|id| !ours.contains_key(*id)) {
        d.other
            .push(format!("{id}: only run with the official wheel"));
    }
    d
}

fn word(o: Outcome) -> &'static str {
    match o {
        Outcome::Passed => "passed",
        Outcome::Failed => "failed",
        Outcome::Skipped => "skipped",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(id: &str, outcome: Outcome) -> Case {
        Case {
            id: id.into(),
            outcome,
            message: None,
        }
    }

    #[test]
    fn regressions_are_what_passes_officially_and_fails_here() {
        let ours = [
            case("a", Outcome::Failed),
            case("b", Outcome::Passed),
            case("c", Outcome::Skipped),
            case("d", Outcome::Failed),
        ];
        let theirs = [
            case("a", Outcome::Passed),
            case("b", Outcome::Failed),
            case("c", Outcome::Passed),
            case("d", Outcome::Failed),
            case("e", Outcome::Passed),
        ];
        let d = differences(&ours, &theirs);
        assert_eq!(d.regressions, ["a"]);
        assert_eq!(d.fixed, ["b"]);
        assert_eq!(
            d.other,
            [
                "c: skipped here, passed with the official wheel",
                "e: only run with the official wheel"
            ]
        );
    }
}
