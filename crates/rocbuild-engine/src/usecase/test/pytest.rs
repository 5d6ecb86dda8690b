//! Running pytest with the venv's Python: the test requirements the venv lacks go into an
//! overlay folder (pip's `--target`), which every Python of the run appends to `sys.path`
//! (after site-packages, so the venv's own packages always win and only what it lacks comes
//! from the overlay) through a `sitecustomize` on `PYTHONPATH`; whether the venv's torch sees
//! a GPU; pytest's output streamed as progress.
//!
//! A Python with a `._pth` file (the embeddable CPython of Windows apps, ComfyUI's portable
//! build among them; any CPython from 3.11 on reads one) ignores every `PYTHON*` variable, as
//! `-I` does: so pytest's own process puts the overlay on `sys.path` itself (`BOOT`), and every
//! Python started here gets `-B`, or it would write bytecode into the venv.

use std::io::BufRead;
use std::path::Path;

use rocbuild_probe::{Os, Python};

use crate::command::{Command, NO_BYTECODE};
use crate::error::{EngineError, Result};
use crate::pip;
use crate::test_error::TestError;

/// The requirements of `reqs` whose distribution is not installed in `py`'s environment.
const MISSING: &str = r#"
import re, sys
from importlib import metadata
for r in sys.argv[1:]:
    name = re.split(r"[\s\[<>=!~;@(]", r.strip(), maxsplit=1)[0]
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        print(r)
"#;

/// Install what the venv lacks of `reqs` into `overlay`; returns what was asked for.
///
/// `pip install --target` resolves as if the folder were the whole environment: a requirement
/// that depends on torch (bitsandbytes' `lion-pytorch`) put a second torch, with its CUDA
/// wheels, into the overlay (5.4 GB, where the venv's own torch shadows it anyway). So pip
/// first resolves the missing requirements against the venv itself (`--dry-run`, nothing
/// written), and only the distributions that resolution adds, pinned as resolved and not
/// already in the venv, go into the overlay, without their dependencies.
pub fn overlay(py: &Python, reqs: &[String], overlay: &Path) -> Result<Vec<String>> {
    if reqs.is_empty() {
        return Ok(Vec::new());
    }
    let missing = not_installed(py, reqs)?;
    if missing.is_empty() {
        return Ok(missing);
    }
    let installer = pip::installer(py, "the test requirements")?;
    let fail = |err: &str| -> EngineError {
        TestError::Requirements {
            requirements: missing.join(" "),
            overlay: overlay.display().to_string(),
            reason: err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("pip failed")
                .trim()
                .to_string(),
        }
        .into()
    };
    let report = overlay.with_file_name("resolution.json");
    let dry =
        no_bytecode(resolution_command(&installer, py, &report), py).args(missing.iter().cloned());
    let out = run_captured(&dry)?;
    let (pins, no_deps) = if out.status.success() {
        let resolved = match installer {
            pip::Pip::Uv(_) => uv_would_install(&String::from_utf8_lossy(&out.stderr)),
            _ => report_installs(&fs_err::read_to_string(&report).unwrap_or_default()),
        };
        let names: Vec<String> = resolved.iter().map(|(n, _)| n.clone()).collect();
        let absent = not_installed(py, &names)?;
        let pins: Vec<String> = resolved
            .iter()
            .filter(|(n, _)| absent.contains(n))
            .map(|(n, v)| format!("{n}=={v}"))
            .collect();
        (pins, true)
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        if !err.contains("no such option") {
            return Err(fail(&err));
        }
        // A pip older than 22.2 (no --dry-run/--report): everything into the overlay.
        (missing.clone(), false)
    };
    if pins.is_empty() {
        return Ok(missing);
    }
    let c = no_bytecode(
        pip::install_into(&installer, py, Os::current(), overlay, no_deps),
        py,
    )
    .args(pins);
    let out = run_captured(&c)?;
    if !out.status.success() {
        return Err(fail(&String::from_utf8_lossy(&out.stderr)));
    }
    Ok(missing)
}

/// The requirements (or distribution names) of `reqs` that `py`'s environment lacks.
fn not_installed(py: &Python, reqs: &[String]) -> Result<Vec<String>> {
    let out = run_captured(
        &Command::new(&py.exe)
            .args(["-B", "-c", MISSING])
            .args(reqs.iter().cloned()),
    )?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// `-B` for a pip run by the venv's own Python (`python -m pip`), which would otherwise leave
/// pip's bytecode in the venv when its Python ignores `PYTHONDONTWRITEBYTECODE` (`._pth`).
fn no_bytecode(mut c: Command, py: &Python) -> Command {
    if c.program == py.exe {
        c.args.insert(0, "-B".into());
    }
    c
}

fn run_captured(c: &Command) -> Result<std::process::Output> {
    c.to_duct()
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(EngineError::io("run", &c.program))
}

/// `pip install --dry-run` against the venv itself: pip's JSON report into `report`; uv
/// (which writes no report) says what it would install on stderr.
fn resolution_command(installer: &pip::Pip, py: &Python, report: &Path) -> Command {
    let c = pip::command(installer, py, Os::current(), "install").arg("--dry-run");
    match installer {
        pip::Pip::Uv(_) => c,
        _ => c
            .args(["--quiet", "--report"])
            .arg(report.display().to_string()),
    }
}

/// (name, version) of each distribution pip's installation report would install.
fn report_installs(json: &str) -> Vec<(String, String)> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return Vec::new();
    };
    v["install"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| {
                    let m = &i["metadata"];
                    Some((
                        m["name"].as_str()?.to_string(),
                        m["version"].as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// (name, version) of each ` + name==version` line of `uv pip install --dry-run`.
fn uv_would_install(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("+ "))
        .filter_map(|d| d.split_once("=="))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Which of `modules` the venv's Python cannot import (found by `importlib.util.find_spec`,
/// nothing imported). A Python that does not answer lacks them all.
pub fn missing_modules(python: &Path, modules: &[&str]) -> Vec<String> {
    const ASK: &str = "import importlib.util, sys\nfor m in sys.argv[1:]:\n    try:\n        found = importlib.util.find_spec(m) is not None\n    except (ImportError, ValueError):\n        found = False\n    print(('found ' if found else 'missing ') + m)";
    if modules.is_empty() {
        return Vec::new();
    }
    let answer = Command::new(python)
        .args(["-B", "-c", ASK])
        .args(modules.iter().map(|m| m.to_string()))
        .to_duct()
        .stdout_capture()
        .stderr_null()
        .unchecked()
        .run()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    modules
        .iter()
        .filter(|m| !answer.lines().any(|l| l.trim() == format!("found {m}")))
        .map(|m| m.to_string())
        .collect()
}

/// The venv's Python ignores `PYTHONPATH` (a `._pth` file next to it, or an isolated build):
/// pytest still finds the overlay (`BOOT`), the Pythons its tests start do not.
pub fn ignores_python_path(python: &Path) -> bool {
    Command::new(python)
        .args(["-B", "-c", "import sys; print(sys.flags.isolated)"])
        .to_duct()
        .stdout_capture()
        .stderr_null()
        .unchecked()
        .run()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "1")
}

/// What the venv's torch sees.
#[derive(Debug, Clone, Copy)]
pub struct TorchSight {
    /// The venv has a torch (one that crashes on import counts: it is there).
    pub torch: bool,
    /// It sees a GPU (CUDA or ROCm: both are `torch.cuda`).
    pub gpu: bool,
}

/// Ask the torch of `python` whether it sees a GPU. Asked in a child: loading torch may
/// crash. No torch, or a torch that does not load: no GPU.
pub fn torch_sight(python: &Path) -> TorchSight {
    const ASK: &str = "try:\n    import torch\nexcept ImportError:\n    print('no-torch')\n    raise SystemExit\nprint('gpu' if torch.cuda.is_available() and torch.cuda.device_count() > 0 else 'none')";
    let answer = Command::new(python)
        .args(["-B", "-c", ASK])
        .to_duct()
        .stdout_capture()
        .stderr_null()
        .unchecked()
        .run()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    TorchSight {
        torch: answer != "no-torch",
        gpu: answer == "gpu",
    }
}

/// `python -B -c BOOT ARGS…`: pytest, run by the venv's Python, with the overlay on its path
/// whether or not the `sitecustomize` below was read (a `._pth` Python reads no `PYTHONPATH`).
/// `ROCBUILD_TEST_FIRST`, when set, goes first: `--compare`'s official wheel where no scratch
/// venv could be made (compare.rs).
const BOOT: &str = "import os, sys\n_f = os.environ.get('ROCBUILD_TEST_FIRST')\nif _f and _f not in sys.path:\n    sys.path.insert(0, _f)\n_o = os.environ.get('ROCBUILD_TEST_OVERLAY')\nif _o and _o not in sys.path:\n    sys.path.append(_o)\nimport pytest\nsys.exit(pytest.main(sys.argv[1:]))";

/// The only folder on the run's `PYTHONPATH`: a `sitecustomize` that appends the overlay to
/// `sys.path` (after site-packages: the venv's own packages win) in pytest and in every
/// Python the tests start (upstream's tests run `python -c …` and compare its output), then
/// hands over to the `sitecustomize` it shadows, if there is one.
const SITECUSTOMIZE: &str = r#"import importlib.util, os, sys
_first = os.environ.get("ROCBUILD_TEST_FIRST")
if _first and _first not in sys.path:
    sys.path.insert(0, _first)
_overlay = os.environ.get("ROCBUILD_TEST_OVERLAY")
if _overlay and _overlay not in sys.path:
    sys.path.append(_overlay)
_here = os.path.dirname(os.path.abspath(__file__))
for _d in list(sys.path):
    _p = os.path.join(_d or ".", "sitecustomize.py")
    if os.path.abspath(_d or ".") != _here and os.path.isfile(_p):
        _s = importlib.util.spec_from_file_location("_rocbuild_shadowed_sitecustomize", _p)
        _s.loader.exec_module(importlib.util.module_from_spec(_s))
        break
"#;

/// What pytest said at the end.
pub struct Ran {
    /// pytest's exit status: 0 all passed, 1 some failed, 5 none collected; others: it could
    /// not run.
    pub status: i32,
    /// The last lines of its output (for an error).
    pub tail: Vec<String>,
}

/// Run pytest in `work` with `args`; each output line goes to `line`.
pub fn run(
    python: &Path,
    work: &Path,
    overlay: &Path,
    args: &[String],
    env: &[(String, String)],
    line: &mut dyn FnMut(&str),
) -> Result<Ran> {
    let boot = overlay.with_file_name("boot");
    fs_err::create_dir_all(&boot).map_err(EngineError::io("create", &boot))?;
    let site = boot.join("sitecustomize.py");
    fs_err::write(&site, SITECUSTOMIZE).map_err(EngineError::io("write", &site))?;
    let mut c = Command::new(python).args(["-B", "-c", BOOT]);
    c = c.args(args.iter().cloned());
    c.cwd = Some(work.to_path_buf());
    c.env.insert(NO_BYTECODE.into(), "1".into());
    c.env
        .insert("PYTHONPATH".into(), boot.display().to_string());
    c.env.insert(
        "ROCBUILD_TEST_OVERLAY".into(),
        overlay.display().to_string(),
    );
    for (k, v) in env {
        c.env.insert(k.clone(), v.clone());
    }
    // A group of its own: on Ctrl-C or SIGTERM rocbuild stops pytest and every Python its
    // tests started, then its run folder goes (the caller's), and it ends with 128 + signal.
    let reader = crate::command::own_process_group(c.to_duct())
        .stderr_to_stdout()
        .unchecked()
        .reader()
        .map_err(EngineError::io("run", python))?;
    let reader = std::sync::Arc::new(reader);
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    {
        let reader = reader.clone();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(&*reader).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
    }
    let mut tail: Vec<String> = Vec::new();
    loop {
        match rx.recv_timeout(std::time::Duration::from_millis(100)) {
            Ok(l) => {
                line(&l);
                tail.push(l);
                if tail.len() > 20 {
                    tail.remove(0);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if let Some(e) = crate::interrupt::error("pytest") {
            crate::interrupt::stop_group(&reader.pids(), || {
                matches!(reader.try_wait(), Ok(Some(_)))
            });
            let _ = reader.kill();
            return Err(crate::interrupt::undone(
                e,
                "pytest and what it started were stopped; the run's folder is removed",
            ));
        }
    }
    let status = match reader.try_wait() {
        Ok(Some(o)) => o.status.code().unwrap_or(-1),
        _ => -1,
    };
    Ok(Ran { status, tail })
}

/// pytest's exit status when it could not run the tests at all (2 interrupted, 3 internal
/// error, 4 usage error; anything but 0, 1 and 5), or no report when pytest never got as far
/// as its session's end (a Python that exits 1 because it cannot import pytest at all).
pub fn could_not_run(recipe: &str, ran: &Ran, reported: bool) -> Option<TestError> {
    if matches!(ran.status, 0 | 1 | 5) && reported {
        return None;
    }
    let last = ran
        .tail
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())
        .cloned()
        .unwrap_or_default();
    Some(TestError::Pytest {
        recipe: recipe.into(),
        status: ran.status.to_string(),
        last,
        help: "run with -v to see pytest's whole output; a usage error is a recipe's `[test] args` or `run` pytest does not accept".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_wrote_no_report_could_not_run_whatever_its_status() {
        let ran = |status| Ran {
            status,
            tail: vec!["ModuleNotFoundError: No module named 'pytest'".into()],
        };
        assert!(could_not_run("r", &ran(1), true).is_none());
        assert!(could_not_run("r", &ran(5), true).is_none());
        assert!(could_not_run("r", &ran(4), true).is_some());
        let e = could_not_run("r", &ran(1), false).expect("no report: it did not run");
        assert!(
            e.to_string()
                .contains("(exit status 1): ModuleNotFoundError"),
            "{e}"
        );
    }

    #[test]
    fn what_a_resolution_would_install() {
        let report = r#"{"version": "1", "install": [
            {"metadata": {"name": "lion-pytorch", "version": "0.2.3"}, "requested": true},
            {"metadata": {"name": "pluggy", "version": "1.6.0"}},
            {"metadata": {"version": "1"}}
        ]}"#;
        assert_eq!(
            report_installs(report),
            [
                ("lion-pytorch".to_string(), "0.2.3".to_string()),
                ("pluggy".to_string(), "1.6.0".to_string())
            ]
        );
        assert!(report_installs("not json").is_empty());
        let uv = "Resolved 5 packages in 20ms\nWould download 2 packages\nWould install 2 packages\n + einops==0.8.1\n + pytest==8.4.2\n";
        assert_eq!(
            uv_would_install(uv),
            [
                ("einops".to_string(), "0.8.1".to_string()),
                ("pytest".to_string(), "8.4.2".to_string())
            ]
        );
    }
}
