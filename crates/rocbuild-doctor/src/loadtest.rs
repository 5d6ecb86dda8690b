//! The load test: a fresh subprocess of the venv's own Python imports the package and
//! `ctypes.CDLL`s each of its native libraries, and reports the loader's exact words.
//!
//! Native code is never loaded into rocbuild's own process: a broken library can abort or
//! crash whoever loads it. The child writes one JSON line per step and flushes, so a crash or
//! a hang still tells which step it was in; a timeout kills it.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// One thing the child does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "target")]
pub enum Step {
    /// `import NAME`
    Import(String),
    /// `ctypes.CDLL(PATH)`
    Cdll(PathBuf),
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Import(m) => write!(f, "import {m}"),
            Step::Cdll(p) => write!(
                f,
                "ctypes.CDLL({})",
                p.file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default()
            ),
        }
    }
}

/// What happened to one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepResult {
    pub step: Step,
    pub ok: bool,
    /// The exception as Python printed it: for a failed `CDLL`, the dynamic loader's own message.
    pub error: Option<String>,
}

/// The whole test of one package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadReport {
    pub steps: Vec<StepResult>,
    /// The child did not finish normally: killed after the timeout, crashed (signal, access
    /// violation), or could not start. Steps after the one in progress did not run.
    pub aborted: Option<String>,
    /// Run under Wine (a Windows venv on another host): Wine's own words about what it could
    /// not do (`unimplemented function c10.dll.??0MessageLogger…`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wine: Option<Vec<String>>,
}

impl LoadReport {
    pub fn ok(&self) -> bool {
        self.aborted.is_none() && self.steps.iter().all(|s| s.ok)
    }
    pub fn result_of(&self, step: &Step) -> Option<&StepResult> {
        self.steps.iter().find(|s| &s.step == step)
    }
}

const CHILD: &str = r#"
import ctypes, importlib, json, os, sys
def emit(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()
for i, step in enumerate(json.loads(os.environ["ROCBUILD_LOAD_STEPS"])):
    emit(begin=i)
    try:
        if step["kind"] == "import":
            importlib.import_module(step["target"])
        else:
            ctypes.CDLL(step["target"])
        emit(end=i, ok=True)
    except BaseException as e:
        msg = str(e) if isinstance(e, OSError) and step["kind"] == "cdll" else "%s: %s" % (type(e).__name__, e)
        emit(end=i, ok=False, error=msg)
"#;

#[derive(Deserialize)]
struct Line {
    begin: Option<usize>,
    end: Option<usize>,
    ok: Option<bool>,
    error: Option<String>,
}

/// Run `steps` in a fresh `python -I` and report each one's outcome.
pub fn load_test(python: &Path, steps: &[Step], timeout: Duration) -> LoadReport {
    load_test_with(python, steps, timeout, None)
}

/// [`load_test`], the venv's `python.exe` run under `wine` when given (paths given to the
/// child as Wine sees them; a timeout also ends what Wine left running).
pub fn load_test_with(
    python: &Path,
    steps: &[Step],
    timeout: Duration,
    wine: Option<&Path>,
) -> LoadReport {
    let steps_seen: Vec<Step> = match wine {
        Some(_) => steps
            .iter()
            .map(|s| match s {
                Step::Cdll(p) => Step::Cdll(rocbuild_probe::cross::wine_path(p)),
                other => other.clone(),
            })
            .collect(),
        None => steps.to_vec(),
    };
    let spec = serde_json::to_string(&steps_seen).unwrap_or_default();
    let mut cmd = match wine {
        Some(w) => {
            let mut c = Command::new(w);
            c.arg(python).envs(rocbuild_probe::cross::WINE_ENV);
            c
        }
        None => Command::new(python),
    };
    // -B: no `__pycache__` written into the venv by the imports (-I ignores PYTHON* variables).
    // The steps go through the environment: a long JSON argument does not survive the
    // quoting of a Windows command line (Wine builds one from the arguments).
    cmd.args(["-I", "-B", "-c", CHILD])
        .env("ROCBUILD_LOAD_STEPS", spec)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return LoadReport {
                steps: Vec::new(),
                aborted: Some(format!("cannot start {}: {e}", python.display())),
                wine: None,
            }
        }
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        if let Some(s) = stdout {
            for l in BufReader::new(s).lines() {
                match l {
                    Ok(l) => lines.push(l),
                    Err(_) => break,
                }
            }
        }
        lines
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut s) = stderr {
            let _ = s.read_to_string(&mut text);
        }
        text
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Ok(st),
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                if wine.is_some() {
                    let _ = Command::new("wineserver").arg("-k").status();
                }
                break Err(format!(
                    "killed after {} s without finishing",
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => break Err(format!("cannot wait for the child: {e}")),
        }
    };
    let lines = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();

    let mut results = Vec::new();
    let mut in_progress = None;
    for l in &lines {
        let Ok(line) = serde_json::from_str::<Line>(l) else {
            continue;
        };
        if let Some(i) = line.begin {
            in_progress = Some(i);
        }
        if let Some(i) = line.end {
            in_progress = None;
            if let Some(step) = steps.get(i) {
                results.push(StepResult {
                    step: step.clone(),
                    ok: line.ok.unwrap_or(false),
                    error: line.error,
                });
            }
        }
    }
    let aborted = match status {
        Err(why) => Some(why),
        Ok(st) if st.success() && in_progress.is_none() => None,
        Ok(st) => Some(describe_exit(st, &stderr)),
    };
    if let (Some(why), Some(i)) = (&aborted, in_progress) {
        if let Some(step) = steps.get(i) {
            results.push(StepResult {
                step: step.clone(),
                ok: false,
                error: Some(format!("the process died here: {why}")),
            });
        }
    }
    LoadReport {
        steps: results,
        aborted,
        wine: match wine {
            Some(_) => Some(
                stderr
                    .lines()
                    .filter(|l| l.contains("unimplemented function") || l.starts_with("wine:"))
                    .map(|l| l.trim().to_string())
                    .collect(),
            ),
            // rocbuild.exe itself under Wine: its child is Wine's too, with the same stubs for
            // missing exports (Wine prints their names to the Unix stderr, out of reach here).
            None if this_process_runs_under_wine() => Some(Vec::new()),
            None => None,
        },
    }
}

/// Whether this Windows process runs under Wine.
pub fn this_process_runs_under_wine() -> bool {
    rocbuild_probe::platform::host::runs_under_wine()
}

fn describe_exit(st: std::process::ExitStatus, stderr: &str) -> String {
    let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join(" | ");
    let how = signal_of(&st)
        .map(|s| format!("killed by signal {s}"))
        .unwrap_or_else(|| format!("exited with {st}"));
    if tail.is_empty() {
        how
    } else {
        format!("{how}: {tail}")
    }
}

fn signal_of(st: &std::process::ExitStatus) -> Option<i32> {
    rocbuild_probe::platform::host::signal_of(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python() -> PathBuf {
        PathBuf::from("python3")
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: its interpreter is a `python3` script"
    )]
    fn reports_each_step_with_the_loaders_words() {
        let d = tempfile::tempdir().unwrap();
        let bogus = d.path().join("libnot.so");
        std::fs::write(&bogus, b"not an ELF file").unwrap();
        let r = load_test(
            &python(),
            &[
                Step::Import("json".into()),
                Step::Cdll(bogus.clone()),
                Step::Import("no_such_module_here".into()),
            ],
            Duration::from_secs(30),
        );
        assert_eq!(r.aborted, None);
        assert!(r.steps[0].ok);
        let e = r.steps[1].error.as_deref().unwrap();
        assert!(
            e.contains("invalid ELF header") || e.contains("file too short"),
            "{e}"
        );
        assert_eq!(
            r.steps[2].error.as_deref(),
            Some("ModuleNotFoundError: No module named 'no_such_module_here'")
        );
    }

    /// `open()` of a FIFO with no writer blocks: a real hang inside the loader call.
    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: its interpreter is a `python3` script"
    )]
    fn a_hang_is_killed_and_named() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("libhang.so");
        let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(st.success());
        let t = Instant::now();
        let r = load_test(
            &python(),
            &[Step::Import("json".into()), Step::Cdll(fifo)],
            Duration::from_secs(2),
        );
        assert!(t.elapsed() < Duration::from_secs(20));
        assert!(
            r.aborted.as_deref().unwrap().contains("killed after 2 s"),
            "{r:?}"
        );
        assert!(r.steps[0].ok);
        assert!(r.steps[1]
            .error
            .as_deref()
            .unwrap()
            .contains("the process died here"));
    }

    /// A library whose constructor aborts: the child dies, rocbuild names the step.
    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: its interpreter is a `python3` script"
    )]
    fn a_crash_names_the_step() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("boom.c");
        std::fs::write(
            &src,
            "#include <stdlib.h>\n__attribute__((constructor)) static void boom(void) { abort(); }\n",
        )
        .unwrap();
        let lib = d.path().join("libboom.so");
        let st = Command::new("cc")
            .args(["-shared", "-fPIC"])
            .arg(&src)
            .arg("-o")
            .arg(&lib)
            .status()
            .unwrap();
        assert!(st.success());
        let r = load_test(&python(), &[Step::Cdll(lib)], Duration::from_secs(30));
        let why = r.aborted.as_deref().unwrap();
        assert!(why.contains("signal 6"), "{why}");
        assert!(!r.steps[0].ok);
    }
}
