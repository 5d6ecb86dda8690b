//! The load test: a fresh subprocess of the venv's own Python imports the package and
//! `ctypes.CDLL`s each of its native libraries, and reports the loader's exact words.
//!
//! Native code is never loaded into rocbuild's own process: a broken library can abort or
//! crash whoever loads it. The child writes one JSON line per step and flushes, so a crash or
//! a hang still tells which step it was in; a timeout kills it. No wait is unbounded: not the
//! kill's, and not the reading of pipes a process the child started still holds.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
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

/// How long the output pipes may stay open after the child has gone: a process the child
/// started (a daemon a library's constructor forked, a helper Wine left running) can hold them
/// for ever, and the report must not wait for it.
const PIPE_GRACE: Duration = Duration::from_secs(5);

/// How long a killed child may take to be gone before rocbuild stops waiting for it.
const KILL_GRACE: Duration = Duration::from_secs(10);

/// [`load_test`], the venv's `python.exe` run under `wine` when given (paths given to the
/// child as Wine sees them; a timeout also ends what Wine left running).
pub fn load_test_with(
    python: &Path,
    steps: &[Step],
    timeout: Duration,
    wine: Option<&Path>,
) -> LoadReport {
    let mut child = match child_command(python, steps, wine).spawn() {
        Ok(c) => c,
        Err(e) => {
            return LoadReport {
                steps: Vec::new(),
                aborted: Some(format!("cannot start {}: {e}", python.display())),
                wine: None,
            }
        }
    };
    let (status, out) = watch(&mut child, timeout, wine);
    report(steps, status, out, wine)
}

/// The child's command: `python -I -B -c CHILD`, the steps in its environment.
fn child_command(python: &Path, steps: &[Step], wine: Option<&Path>) -> Command {
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
    cmd
}

/// One line the child wrote, from its stdout or its stderr.
enum Piece {
    Out(String),
    Err(String),
}

/// What the child wrote, as far as it could be read.
#[derive(Default)]
struct Output {
    lines: Vec<String>,
    stderr: String,
}

impl Output {
    fn take(&mut self, p: Piece) {
        match p {
            Piece::Out(l) => self.lines.push(l),
            Piece::Err(l) => self.stderr.push_str(&l),
        }
    }
}

/// Send each line `r` gives (lossily decoded) as `piece(line)` until its end or an error.
fn read_lines(r: impl Read + Send + 'static, tx: Sender<Piece>, piece: fn(String) -> Piece) {
    std::thread::spawn(move || {
        let mut r = BufReader::new(r);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx
                        .send(piece(String::from_utf8_lossy(&buf).into_owned()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
}

/// Wait for the child (killed after `timeout`) and read what it wrote; every wait is bounded:
/// the kill's ([`KILL_GRACE`]) and the pipes' after its end ([`PIPE_GRACE`]).
fn watch(
    child: &mut Child,
    timeout: Duration,
    wine: Option<&Path>,
) -> (Result<ExitStatus, String>, Output) {
    let (tx, rx) = mpsc::channel();
    if let Some(s) = child.stdout.take() {
        read_lines(s, tx.clone(), |l| Piece::Out(l.trim_end().to_string()));
    }
    if let Some(s) = child.stderr.take() {
        read_lines(s, tx.clone(), Piece::Err);
    }
    drop(tx);
    let mut out = Output::default();
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Ok(st),
            Ok(None) if start.elapsed() >= timeout => break Err(kill(child, timeout, wine)),
            Ok(None) => match rx.recv_timeout(Duration::from_millis(5)) {
                Ok(p) => out.take(p),
                Err(RecvTimeoutError::Timeout) => {}
                // Both pipes closed while the child runs on: wait without spinning.
                Err(RecvTimeoutError::Disconnected) => std::thread::sleep(Duration::from_millis(5)),
            },
            Err(e) => break Err(format!("cannot wait for the child: {e}")),
        }
    };
    // Until both pipes end, or the grace is over: whatever holds them open is not waited for.
    let deadline = Instant::now() + PIPE_GRACE;
    while let Ok(p) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        out.take(p);
    }
    (status, out)
}

/// Kill the child after its timeout and say so; waits at most [`KILL_GRACE`] for it to go.
fn kill(child: &mut Child, timeout: Duration, wine: Option<&Path>) -> String {
    let _ = child.kill();
    let gone = Instant::now();
    let mut exited = false;
    while gone.elapsed() < KILL_GRACE {
        if !matches!(child.try_wait(), Ok(None)) {
            exited = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if wine.is_some() {
        let _ = Command::new("wineserver").arg("-k").status();
    }
    let mut why = format!("killed after {} s without finishing", timeout.as_secs());
    if !exited {
        why.push_str(&format!(
            " (still there {} s after the kill)",
            KILL_GRACE.as_secs()
        ));
    }
    why
}

/// The report from what the child wrote and how it ended.
fn report(
    steps: &[Step],
    status: Result<ExitStatus, String>,
    out: Output,
    wine: Option<&Path>,
) -> LoadReport {
    let (mut results, in_progress) = step_results(steps, &out.lines);
    let aborted = match status {
        Err(why) => Some(why),
        Ok(st) if st.success() && in_progress.is_none() => None,
        Ok(st) => Some(describe_exit(st, &out.stderr)),
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
                out.stderr
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

/// Each finished step's result, and the step the child was in when it stopped (if any).
fn step_results(steps: &[Step], lines: &[String]) -> (Vec<StepResult>, Option<usize>) {
    let mut results = Vec::new();
    let mut in_progress = None;
    for l in lines {
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
    (results, in_progress)
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

    /// `source` written to `dir/NAME.c` and compiled by `cc` into `dir/libNAME.so`.
    fn shared_library(dir: &Path, name: &str, source: &str) -> PathBuf {
        let src = dir.join(format!("{name}.c"));
        std::fs::write(&src, source).unwrap();
        let lib = dir.join(format!("lib{name}.so"));
        rocbuild_testkit::native::shared_library("cc", &src, &lib, &[])
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

    /// A library whose constructor forks a process that keeps the child's stdout and stderr
    /// open 30 s after the child has gone: the report comes without waiting for it (before,
    /// reading the pipes to their end waited as long as that process lived).
    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: its interpreter is a `python3` script"
    )]
    fn pipes_held_open_after_the_child_has_gone_do_not_hold_the_report() {
        let d = tempfile::tempdir().unwrap();
        let mark = d.path().join("holder-done");
        let lib = shared_library(
            d.path(),
            "holder",
            &format!(
                "#include <stdio.h>\n#include <unistd.h>\n\
                 __attribute__((constructor)) static void hold(void) {{\n\
                   if (fork() == 0) {{ sleep(30); fclose(fopen(\"{}\", \"w\")); _exit(0); }}\n\
                 }}\n",
                mark.display()
            ),
        );
        let r = load_test(
            &python(),
            &[Step::Cdll(lib), Step::Import("json".into())],
            Duration::from_secs(60),
        );
        assert!(
            !mark.exists(),
            "the report waited for the process that held the pipes"
        );
        assert!(r.ok(), "{r:?}");
        assert_eq!(r.steps.len(), 2, "{r:?}");
    }

    /// The CPU time this thread has used (`/proc/thread-self/stat`: utime + stime, in ticks
    /// of 10 ms).
    #[cfg(target_os = "linux")]
    fn thread_cpu() -> Duration {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = after_name.split(' ').collect();
        // Fields 14 and 15 of the line; the name (field 2) and state (3) are cut off.
        let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        Duration::from_millis(ticks * 10)
    }

    /// A child that closes its stdout and stderr, then works on for 2 s: rocbuild waits for
    /// it without spinning (the pipes' end is no reason to poll without pause).
    #[test]
    #[cfg(target_os = "linux")]
    fn a_child_without_pipes_is_waited_for_without_spinning() {
        let d = tempfile::tempdir().unwrap();
        let lib = shared_library(
            d.path(),
            "quiet",
            "#include <unistd.h>\n\
             __attribute__((constructor)) static void quiet(void) { close(1); close(2); sleep(2); }\n",
        );
        let cpu = thread_cpu();
        let t = Instant::now();
        let _ = load_test(&python(), &[Step::Cdll(lib)], Duration::from_secs(60));
        assert!(t.elapsed() >= Duration::from_secs(2));
        let used = thread_cpu() - cpu;
        assert!(
            used < Duration::from_millis(500),
            "{used:?} of CPU to wait 2 s for a child"
        );
    }

    /// A library whose constructor aborts: the child dies, rocbuild names the step.
    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: its interpreter is a `python3` script"
    )]
    fn a_crash_names_the_step() {
        let d = tempfile::tempdir().unwrap();
        let lib = shared_library(
            d.path(),
            "boom",
            "#include <stdlib.h>\n__attribute__((constructor)) static void boom(void) { abort(); }\n",
        );
        let r = load_test(&python(), &[Step::Cdll(lib)], Duration::from_secs(30));
        let why = r.aborted.as_deref().unwrap();
        assert!(why.contains("signal 6"), "{why}");
        assert!(!r.steps[0].ok);
    }
}
