//! The Wine runner of the Windows test executables, on the host (Wine is not in the chroot):
//! the world's Wine prefix, `WINEDEBUG=-all`, no debugger on a crash, stdin from /dev/null,
//! a timeout on every run (the process group killed past it) and `wineserver -k` after every
//! run, because a Wine process that waits for a console or a debugger never exits by itself.
//!
//! A test executable runs with libtest's JSON events (`-Zunstable-options --format json`:
//! libtest is built from source here, so its unstable options are open), so a hang names the
//! tests that started and never finished; the executable is then run again without them
//! until every test has a result.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::limits::{self, Kind};
use crate::util::Result;

/// The time one test executable may take under Wine (`XTASK_EXE_TEST_TIMEOUT`, seconds).
const DEFAULT_TIMEOUT_SECS: u64 = 300;

/// No debugger on a crash; no Mono / Gecko install prompts.
const OVERRIDES: &str = "winedbg.exe=d;mscoree,mshtml=";

pub struct Runner {
    wine: PathBuf,
    wineserver: PathBuf,
    prefix: PathBuf,
}

/// A finished (or killed) run.
pub struct Ran {
    /// The exit code; None when it was killed (timeout) or died by a signal.
    pub status: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Ran {
    pub fn describe(&self) -> String {
        match (self.timed_out, self.status) {
            (true, _) => format!("killed after {:.0} s", self.elapsed.as_secs_f64()),
            (false, Some(c)) => format!("exit code {c}"),
            (false, None) => "killed by a signal".into(),
        }
    }

    /// The last `n` lines of stdout and of stderr.
    pub fn output_tail(&self, n: usize) -> String {
        format!(
            "--- stdout\n{}\n--- stderr\n{}",
            tail(&self.stdout, n),
            tail(&self.stderr, n)
        )
    }
}

/// `Z:\\…` for a Unix path, as Windows programs under Wine see it.
fn z_path(p: &Path) -> String {
    format!("Z:{}", p.display()).replace('/', "\\")
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

impl Runner {
    pub fn new(prefix: &Path) -> Result<Runner> {
        let find = |p: &str| {
            which(p).ok_or_else(|| {
                format!("`{p}` is not on PATH: as root run apt-get install wine wine64")
            })
        };
        Ok(Runner {
            wine: find("wine")?,
            wineserver: find("wineserver")?,
            prefix: prefix.to_path_buf(),
        })
    }

    /// A clean environment: what Wine needs and nothing of this shell's (no ROCBUILD_* or
    /// CARGO_* variable reaches a test).
    fn env(&self, cmd: &mut Command) {
        cmd.env_clear();
        for k in ["HOME", "USER", "LOGNAME", "TMPDIR"] {
            if let Some(v) = std::env::var_os(k) {
                cmd.env(k, v);
            }
        }
        cmd.env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .env("LANG", "C.UTF-8")
        .env("WINEPREFIX", &self.prefix)
        .env(
            "WINEDEBUG",
            std::env::var("XTASK_WINEDEBUG").unwrap_or_else(|_| "-all".into()),
        )
        .env("WINEDLLOVERRIDES", OVERRIDES)
        // libtest's `-Zunstable-options` (built from source, it allows them; this says so
        // to a libtest that asks).
        .env("RUSTC_BOOTSTRAP", "1")
        // insta: the workspace as Windows sees it (it cannot run `cargo metadata` there, and
        // the compile-time manifest path is a Unix one); never write `.snap.new` files.
        .env(
            "INSTA_WORKSPACE_ROOT",
            z_path(&crate::util::workspace_root()),
        )
        .env("INSTA_UPDATE", "no")
        .env("RUST_BACKTRACE", "1");
    }

    /// `wine EXE ARGS` with a timeout; `wineserver -k` afterwards.
    pub fn run(&self, exe: &Path, args: &[&str], timeout: Duration) -> Result<Ran> {
        if !exe.is_file() {
            return Err(format!("{} does not exist", exe.display()));
        }
        let mut cmd = Command::new(&self.wine);
        cmd.arg(exe).args(args);
        if let Some(dir) = exe.parent() {
            cmd.current_dir(dir);
        }
        self.env(&mut cmd);
        let ran = run_with_timeout(&mut cmd, timeout)?;
        self.kill_server();
        Ok(ran)
    }

    pub fn kill_server(&self) {
        let mut cmd = Command::new(&self.wineserver);
        cmd.arg("-k");
        self.env(&mut cmd);
        let _ = run_with_timeout(&mut cmd, Duration::from_secs(20));
    }

    /// Wait (a minute at most) for the prefix's server to be gone after the last kill. The
    /// Windows day starts its first Wine processes right after these tests, and one started
    /// while a killed server is still going away may fail. (A guess at why CI's torchsort
    /// build by rocbuild.exe failed within 40 s at `7464a02`, which never failed here.)
    pub fn wait_for_server(&self) {
        let mut cmd = Command::new(&self.wineserver);
        cmd.arg("-w");
        self.env(&mut cmd);
        let _ = run_with_timeout(&mut cmd, Duration::from_secs(60));
    }
}

/// Run in a process group of its own, stdin from /dev/null, output piped; past `timeout` the
/// group is killed.
fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<Ran> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let t = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let out = reader(child.stdout.take());
    let err = reader(child.stderr.take());
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child
            .try_wait()
            .map_err(|e| format!("cannot wait for {cmd:?}: {e}"))?
        {
            break s;
        }
        if t.elapsed() >= timeout {
            timed_out = true;
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .stderr(Stdio::null())
                .status();
            let _ = child.kill();
            break child
                .wait()
                .map_err(|e| format!("cannot wait for {cmd:?}: {e}"))?;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let elapsed = t.elapsed();
    // A process Wine left behind may hold the pipes: not waited for past 10 s (the caller's
    // `wineserver -k` ends it).
    let collect = |rx: std::sync::mpsc::Receiver<Vec<u8>>| {
        String::from_utf8_lossy(&rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default())
            .into_owned()
    };
    Ok(Ran {
        status: if timed_out { None } else { status.code() },
        timed_out,
        stdout: collect(out),
        stderr: collect(err),
        elapsed,
    })
}

fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> std::sync::mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        let _ = tx.send(buf);
    });
    rx
}

/// What became of one test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// Ignored, with the reason its `#[ignore = "…"]` gives (`#[cfg_attr(windows, ignore)]`:
    /// a Unix-host test).
    Ignored(String),
    /// Failed, with its captured output.
    Failed(String),
    /// Started and never finished within the executable's timeout.
    Hung,
    /// Listed as hanging under Wine: not run.
    NotRun,
    /// Never reported (the executable died before it).
    Missing(String),
}

/// The tests of one executable.
pub struct ExeResult {
    pub krate: String,
    pub exe: PathBuf,
    pub tests: BTreeMap<String, Outcome>,
    /// Runs of the executable and their times.
    pub runs: Vec<(String, f64)>,
}

/// The libtest JSON events of one run: finished tests and those started but unfinished.
#[derive(Default, Debug)]
struct Events {
    finished: BTreeMap<String, Outcome>,
    started: BTreeSet<String>,
}

fn parse_events(stdout: &str) -> Events {
    let mut ev = Events::default();
    for line in stdout.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line.trim()) else {
            continue;
        };
        if v["type"] != "test" {
            continue;
        }
        let Some(name) = v["name"].as_str() else {
            continue;
        };
        let outcome = match v["event"].as_str() {
            Some("started") => {
                ev.started.insert(name.to_string());
                continue;
            }
            Some("ok") => Outcome::Passed,
            Some("ignored") => Outcome::Ignored(v["message"].as_str().unwrap_or("").to_string()),
            Some("failed" | "timeout") => {
                Outcome::Failed(v["stdout"].as_str().unwrap_or("").to_string())
            }
            _ => continue,
        };
        ev.finished.insert(name.to_string(), outcome);
    }
    ev
}

/// The test names of `exe --list --format terse`.
fn parse_list(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.trim().strip_suffix(": test"))
        .map(String::from)
        .collect()
}

fn timeout() -> Duration {
    Duration::from_secs(
        std::env::var("XTASK_EXE_TEST_TIMEOUT")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(DEFAULT_TIMEOUT_SECS),
    )
}

/// Run one test executable under Wine until every test it lists has a result.
pub fn run_exe(runner: &Runner, krate: &str, exe: &Path) -> Result<ExeResult> {
    let mut result = ExeResult {
        krate: krate.to_string(),
        exe: exe.to_path_buf(),
        tests: BTreeMap::new(),
        runs: Vec::new(),
    };
    let listed = runner.run(
        exe,
        &["--list", "--format", "terse"],
        Duration::from_secs(120),
    )?;
    result
        .runs
        .push(("--list".into(), listed.elapsed.as_secs_f64()));
    if listed.status != Some(0) {
        // The executable cannot even list its tests: one result for the whole of it.
        result.tests.insert(
            "<the test executable>".into(),
            Outcome::Missing(format!(
                "`--list` under Wine: {}\n{}",
                listed.describe(),
                listed.output_tail(30)
            )),
        );
        return Ok(result);
    }
    let all = parse_list(&listed.stdout);
    for t in &all {
        if limits::find(krate, t).is_some_and(|l| l.kind == Kind::Hangs) {
            result.tests.insert(t.clone(), Outcome::NotRun);
        }
    }
    let timeout = timeout();
    let mut first = true;
    loop {
        let pending: Vec<&String> = all
            .iter()
            .filter(|t| !result.tests.contains_key(*t))
            .collect();
        if pending.is_empty() {
            break;
        }
        let mut args: Vec<&str> = vec![
            "-Zunstable-options",
            "--format",
            "json",
            "--report-time",
            "--exact",
        ];
        // The first run: every test but those listed as hanging. Later runs (after a hang or
        // a crash): the tests still without a result, named one by one, in batches that keep
        // the command line well under Windows' 32,767 characters.
        let batch: Vec<&String> = if first {
            for (t, o) in &result.tests {
                if *o == Outcome::NotRun {
                    args.push("--skip");
                    args.push(t);
                }
            }
            pending.clone()
        } else {
            let mut len = 0;
            pending
                .iter()
                .copied()
                .take_while(|t| {
                    len += t.len() + 1;
                    len < 20_000
                })
                .collect()
        };
        if !first {
            args.extend(batch.iter().map(|t| t.as_str()));
        }
        let ran = runner.run(exe, &args, timeout)?;
        let what = if first {
            "all".to_string()
        } else {
            format!("{} again", batch.len())
        };
        first = false;
        result.runs.push((what, ran.elapsed.as_secs_f64()));
        let before = result.tests.len();
        let ev = parse_events(&ran.stdout);
        for (name, o) in &ev.finished {
            result.tests.insert(name.clone(), o.clone());
        }
        for u in ev.started.iter().filter(|s| !ev.finished.contains_key(*s)) {
            let o = if ran.timed_out {
                Outcome::Hung
            } else {
                // It ended while this test ran: the test took it down (a crash, an abort).
                Outcome::Missing(format!(
                    "the executable ended ({}) while this test ran\n{}",
                    ran.describe(),
                    ran.output_tail(30)
                ))
            };
            result.tests.insert(u.clone(), o);
        }
        if result.tests.len() == before {
            // Nothing learnt: the batch's tests never started.
            let why = format!(
                "never started: the executable ended ({})\n{}",
                ran.describe(),
                ran.output_tail(30)
            );
            for t in batch {
                result
                    .tests
                    .insert(t.clone(), Outcome::Missing(why.clone()));
            }
        }
    }
    Ok(result)
}

/// All executables' results.
pub struct Summary {
    pub exes: Vec<ExeResult>,
}

/// One test's line in the report: (counts as a failure, text).
fn judge(krate: &str, test: &str, o: &Outcome) -> (bool, Option<String>) {
    let limit = limits::find(krate, test);
    let tag = |l: &limits::Limit| format!("[listed, {}: {}]", l.cause.label(), l.why);
    match (o, limit) {
        (Outcome::Passed, None) => (false, None),
        (Outcome::Ignored(why), None) => (false, Some(format!("ignored {krate} {test}: {why}"))),
        (Outcome::Passed, Some(l)) => (
            false,
            Some(format!(
                "LISTED BUT PASSED {krate} {test}: take it off xtask/src/exe/limits.rs {}",
                tag(l)
            )),
        ),
        (Outcome::Ignored(_), Some(l)) => {
            (false, Some(format!("ignored {krate} {test} {}", tag(l))))
        }
        (Outcome::NotRun, Some(l)) => (
            false,
            Some(format!(
                "NOT RUN (hangs under Wine) {krate} {test} {}",
                tag(l)
            )),
        ),
        (Outcome::NotRun, None) => (true, Some(format!("NOT RUN {krate} {test}"))),
        (Outcome::Failed(_) | Outcome::Hung | Outcome::Missing(_), Some(l)) => (
            false,
            Some(format!(
                "expected failure {krate} {test} ({}) {}",
                short(o),
                tag(l)
            )),
        ),
        (Outcome::Failed(out) | Outcome::Missing(out), None) => (
            true,
            Some(format!(
                "FAILED {krate} {test} ({})\n{}",
                short(o),
                indent(&tail(out, 40))
            )),
        ),
        (Outcome::Hung, None) => (
            true,
            Some(format!(
                "FAILED {krate} {test} (hung: killed at the timeout)"
            )),
        ),
    }
}

fn short(o: &Outcome) -> &'static str {
    match o {
        Outcome::Passed => "passed",
        Outcome::Ignored(_) => "ignored",
        Outcome::Failed(_) => "failed",
        Outcome::Hung => "hung",
        Outcome::NotRun => "not run",
        Outcome::Missing(_) => "no result",
    }
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Summary {
    /// Counts: (passed, failed, listed, ignored).
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let (mut p, mut f, mut l, mut i) = (0, 0, 0, 0);
        for e in &self.exes {
            for (t, o) in &e.tests {
                let listed = limits::find(&e.krate, t).is_some();
                match o {
                    Outcome::Passed => p += 1,
                    Outcome::Ignored(_) => i += 1,
                    _ if listed => l += 1,
                    _ => f += 1,
                }
            }
        }
        (p, f, l, i)
    }

    pub fn ok(&self) -> bool {
        self.exes
            .iter()
            .all(|e| e.tests.iter().all(|(t, o)| !judge(&e.krate, t, o).0))
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        for e in &self.exes {
            let n = |k: &str| e.tests.values().filter(|o| short(o) == k).count();
            let runs: Vec<String> = e
                .runs
                .iter()
                .map(|(w, t)| format!("{w} {t:.1} s"))
                .collect();
            s.push_str(&format!(
                "xtask: exe: {} ({}): {} tests: {} passed, {} failed, {} hung, {} no result, {} ignored, {} not run ({})\n",
                e.krate,
                e.exe.file_name().unwrap_or_default().to_string_lossy(),
                e.tests.len(),
                n("passed"),
                n("failed"),
                n("hung"),
                n("no result"),
                n("ignored"),
                n("not run"),
                runs.join(", ")
            ));
            for (t, o) in &e.tests {
                if let (_, Some(line)) = judge(&e.krate, t, o) {
                    s.push_str(&format!("  {line}\n"));
                }
            }
        }
        let (p, f, l, i) = self.counts();
        let mut by_cause: BTreeMap<&str, usize> = BTreeMap::new();
        for e in &self.exes {
            for (t, o) in &e.tests {
                if let Some(lim) = limits::find(&e.krate, t) {
                    if !matches!(o, Outcome::Passed | Outcome::Ignored(_)) {
                        *by_cause.entry(lim.cause.label()).or_default() += 1;
                    }
                }
            }
        }
        let causes: Vec<String> = by_cause.iter().map(|(c, n)| format!("{n} {c}")).collect();
        s.push_str(&format!(
            "xtask: exe: unit tests under Wine: {p} passed, {f} failed, {l} listed ({}; xtask/src/exe/limits.rs), {i} ignored\n",
            if causes.is_empty() { "none".to_string() } else { causes.join(", ") }
        ));
        s
    }
}

/// Every executable, one after another (each under Wine uses both cores already).
pub fn run_all(runner: &Runner, _workspace: &Path, exes: &[(String, PathBuf)]) -> Result<Summary> {
    let mut out = Vec::new();
    for (krate, exe) in exes {
        println!("xtask: exe: running {krate} under Wine ({})", exe.display());
        let r = run_exe(runner, krate, exe)?;
        out.push(r);
    }
    Ok(Summary { exes: out })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_name_unfinished_tests() {
        let out = r#"{ "type": "suite", "event": "started", "test_count": 3 }
{ "type": "test", "event": "started", "name": "a::ok" }
{ "type": "test", "event": "started", "name": "a::bad" }
{ "type": "test", "event": "started", "name": "a::hangs" }
{ "type": "test", "name": "a::ok", "event": "ok", "exec_time": 0.01 }
{ "type": "test", "name": "a::bad", "event": "failed", "stdout": "thread 'a::bad' panicked\n" }
{ "type": "test", "name": "a::ign", "event": "ignored", "message": "a Unix-host test" }"#;
        let ev = parse_events(out);
        assert_eq!(ev.finished["a::ok"], Outcome::Passed);
        assert_eq!(
            ev.finished["a::ign"],
            Outcome::Ignored("a Unix-host test".into())
        );
        assert_eq!(
            ev.finished["a::bad"],
            Outcome::Failed("thread 'a::bad' panicked\n".into())
        );
        assert!(ev.started.contains("a::hangs") && !ev.finished.contains_key("a::hangs"));
    }

    #[test]
    fn list_terse() {
        let out = "a::b: test\r\nc::d: test\nbench_x: benchmark\n";
        assert_eq!(parse_list(out), ["a::b", "c::d"]);
    }

    #[test]
    fn unlisted_failure_fails_the_run() {
        let e = ExeResult {
            krate: "k".into(),
            exe: PathBuf::from("k.exe"),
            tests: [
                ("t1".to_string(), Outcome::Passed),
                ("t2".to_string(), Outcome::Hung),
            ]
            .into_iter()
            .collect(),
            runs: vec![],
        };
        let s = Summary { exes: vec![e] };
        assert!(!s.ok());
        assert_eq!(s.counts(), (1, 1, 0, 0));
        assert!(s.render().contains("FAILED k t2 (hung"));
    }
}
