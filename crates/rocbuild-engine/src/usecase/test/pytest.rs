//! Running pytest with the venv's Python: the test requirements the venv lacks go into an
//! overlay folder (pip's `--target`), which every Python of the run appends to `sys.path`
//! (after site-packages, so the venv's own packages always win and only what it lacks comes
//! from the overlay) through a `sitecustomize` on `PYTHONPATH`; whether the venv's torch sees
//! a GPU; pytest's output streamed as progress.

use std::io::BufRead;
use std::path::Path;

use rocbuild_probe::{Os, Python};

use crate::command::{Command, NO_BYTECODE};
use crate::error::{EngineError, Result};
use crate::plan::pip;
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

/// Install what the venv lacks of `reqs` into `overlay`; returns what was installed.
pub fn overlay(py: &Python, reqs: &[String], overlay: &Path) -> Result<Vec<String>> {
    if reqs.is_empty() {
        return Ok(Vec::new());
    }
    let out = Command::new(&py.exe)
        .args(["-c", MISSING])
        .args(reqs.iter().cloned())
        .to_duct()
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(EngineError::io("run", &py.exe))?;
    let missing: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    if missing.is_empty() {
        return Ok(missing);
    }
    let installer = pip::installer(py, "the test requirements")?;
    let c = pip::install_into(&installer, py, Os::current(), overlay, false)
        .args(missing.iter().cloned());
    let out = c
        .to_duct()
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(EngineError::io("run", &c.program))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(TestError::Requirements {
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
        .into());
    }
    Ok(missing)
}

/// Does the torch of `python` see a GPU (CUDA or ROCm: both are `torch.cuda`)? Asked in a
/// child: loading torch may crash. No torch, or a torch that does not load: no.
pub fn sees_gpu(python: &Path) -> bool {
    const ASK: &str = "import torch\nprint('gpu' if torch.cuda.is_available() and torch.cuda.device_count() > 0 else 'none')";
    Command::new(python)
        .args(["-c", ASK])
        .to_duct()
        .stdout_capture()
        .stderr_null()
        .unchecked()
        .run()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "gpu")
        .unwrap_or(false)
}

/// `python -c BOOT ARGS…`: pytest, run by the venv's Python.
const BOOT: &str = "import sys, pytest\nsys.exit(pytest.main(sys.argv[1:]))";

/// The only folder on the run's `PYTHONPATH`: a `sitecustomize` that appends the overlay to
/// `sys.path` (after site-packages: the venv's own packages win) in pytest and in every
/// Python the tests start (upstream's tests run `python -c …` and compare its output), then
/// hands over to the `sitecustomize` it shadows, if there is one.
const SITECUSTOMIZE: &str = r#"import importlib.util, os, sys
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
    let mut c = Command::new(python).args(["-c", BOOT]);
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
    let reader = c
        .to_duct()
        .stderr_to_stdout()
        .unchecked()
        .reader()
        .map_err(EngineError::io("run", python))?;
    let mut tail: Vec<String> = Vec::new();
    for l in std::io::BufReader::new(&reader).lines() {
        let Ok(l) = l else { break };
        line(&l);
        tail.push(l);
        if tail.len() > 20 {
            tail.remove(0);
        }
    }
    let status = match reader.try_wait() {
        Ok(Some(o)) => o.status.code().unwrap_or(-1),
        _ => -1,
    };
    Ok(Ran { status, tail })
}

/// pytest's exit status when it could not run the tests at all (2 interrupted, 3 internal
/// error, 4 usage error; anything but 0, 1 and 5).
pub fn could_not_run(recipe: &str, ran: &Ran) -> Option<TestError> {
    if matches!(ran.status, 0 | 1 | 5) {
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
