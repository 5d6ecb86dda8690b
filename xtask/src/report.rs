//! What a `cargo xtask test` run spent: each phase's wall time, each test's time, the slowest
//! tests, and a JUnit file with every test (`target/xtask/junit.xml`).
//!
//! The tests run under plain `cargo test`, as they always have: the e2e tests share per-process
//! state that a process per test (cargo-nextest) would rebuild or race on (exe_day's team wheel,
//! cross-built once under Wine; ownership_model's wheels and catalogue's unpacked CUDA toolkit
//! under one CARGO_TARGET_TMPDIR folder; the uv venv made once per process). Each test's time is
//! read off libtest's own output, which stable Rust can give: libtest starts the tests in name
//! order, as many at once as it has threads, and starts the next one the moment one ends,
//! printing `test NAME ... ok` then. So the time each line arrives tells when that test ended
//! and when the next one began ([`durations`]); the pass-through adds no run of its own.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::util::Result;

/// A skip line of the tests (rocbuild_testkit::skip): `SKIPPED <test>: <why>`.
const SKIP_PREFIX: &str = "SKIPPED ";

/// How many of the slowest tests the summary names.
const SLOWEST: usize = 15;

/// Where the JUnit file is written, relative to the workspace.
pub const JUNIT: &str = "target/xtask/junit.xml";

#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Passed,
    Failed,
    Ignored,
}

#[derive(Clone, Debug)]
pub struct TestTime {
    /// The test executable (`e2e`, `rocbuild_native src/lib.rs`, ...).
    pub suite: String,
    pub name: String,
    pub secs: f64,
    pub outcome: Outcome,
}

struct Phase {
    name: String,
    secs: f64,
    /// CPU seconds its processes used (children's user + system time, measured when it ended);
    /// None where the phase overlapped another one, which would share its children's time.
    cpu: Option<f64>,
    outcome: String,
}

/// CPU seconds (user + system) this process and its waited-for descendants have used so far.
pub fn cpu_now() -> f64 {
    let used = |who| {
        // SAFETY: getrusage writes one rusage into the zeroed value it is given.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(who, &mut r) } != 0 {
            return 0.0;
        }
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        secs(r.ru_utime) + secs(r.ru_stime)
    };
    used(libc::RUSAGE_SELF) + used(libc::RUSAGE_CHILDREN)
}

/// When a phase began: its wall clock and the CPU used until then.
#[derive(Clone, Copy)]
pub struct Mark {
    wall: Instant,
    cpu: f64,
}

impl Mark {
    pub fn now() -> Mark {
        Mark {
            wall: Instant::now(),
            cpu: cpu_now(),
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.wall.elapsed()
    }
}

#[derive(Default)]
struct State {
    phases: Vec<Phase>,
    tests: Vec<TestTime>,
    /// (test, why) of each SKIPPED line seen.
    skips: Vec<(String, String)>,
    /// (test, what libtest printed for it under `failures:`) of each failed test.
    failures: Vec<(String, Vec<String>)>,
}

static STATE: Mutex<State> = Mutex::new(State {
    phases: Vec::new(),
    tests: Vec::new(),
    skips: Vec::new(),
    failures: Vec::new(),
});

/// How many lines of a failed test's output the summary repeats: its first few (the panic's
/// place and message) and its last (the end of the output the message carries).
const FAILURE_HEAD: usize = 4;
const FAILURE_TAIL: usize = 12;

/// libtest's `failures:` section, read line by line: each `---- NAME stdout ----` block.
#[derive(Default)]
struct FailureReader {
    current: Option<(String, Vec<String>)>,
    done: Vec<(String, Vec<String>)>,
}

impl FailureReader {
    fn feed(&mut self, line: &str) {
        let header = line
            .strip_prefix("---- ")
            .and_then(|r| r.strip_suffix(" stdout ----"));
        let ends = header.is_some() || line == "failures:" || line.starts_with("test result: ");
        if ends {
            self.done.extend(self.current.take());
        }
        if let Some(name) = header {
            self.current = Some((name.to_string(), Vec::new()));
        } else if let Some((_, lines)) = self.current.as_mut() {
            lines.push(line.to_string());
        }
    }

    fn finish(mut self) -> Vec<(String, Vec<String>)> {
        self.done.extend(self.current.take());
        self.done
    }
}

/// A failure's lines as the summary shows them: the head and the tail, blank lines left out,
/// each line cut to 300 characters.
fn excerpt(lines: &[String]) -> Vec<String> {
    let lines: Vec<&String> = lines.iter().filter(|l| !l.trim().is_empty()).collect();
    let cut = |l: &str| match l.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &l[..i]),
        None => l.to_string(),
    };
    if lines.len() <= FAILURE_HEAD + FAILURE_TAIL {
        return lines.iter().map(|l| cut(l)).collect();
    }
    let mut out: Vec<String> = lines[..FAILURE_HEAD].iter().map(|l| cut(l)).collect();
    out.push(format!(
        "[{} lines]",
        lines.len() - FAILURE_HEAD - FAILURE_TAIL
    ));
    out.extend(lines[lines.len() - FAILURE_TAIL..].iter().map(|l| cut(l)));
    out
}

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Record a phase that took `d` and ended as `outcome` (`ok`, `FAILED`, `skipped: why`), run
/// beside others (its CPU time is not its own).
pub fn record(name: &str, d: Duration, outcome: &str) {
    state().phases.push(Phase {
        name: name.to_string(),
        secs: d.as_secs_f64(),
        cpu: None,
        outcome: outcome.to_string(),
    });
}

/// Record a phase that began at `m`, ran alone and ended as `outcome`, with its CPU time.
pub fn record_since(name: &str, m: Mark, outcome: &str) {
    state().phases.push(Phase {
        name: name.to_string(),
        secs: m.elapsed().as_secs_f64(),
        cpu: Some((cpu_now() - m.cpu).max(0.0)),
        outcome: outcome.to_string(),
    });
}

/// Run one phase of the run, timed: `ok`, or `FAILED` when it returns an error.
pub fn phase<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let m = Mark::now();
    let r = f();
    record_since(name, m, if r.is_ok() { "ok" } else { "FAILED" });
    r
}

/// Run one phase whose answer is whether it passed: `ok` or `FAILED`.
pub fn phase_passed(name: &str, f: impl FnOnce() -> Result<bool>) -> Result<bool> {
    let m = Mark::now();
    let r = f();
    let outcome = match &r {
        Ok(true) => "ok",
        _ => "FAILED",
    };
    record_since(name, m, outcome);
    r
}

/// How many tests libtest runs at once for `args` (what comes after `--`): `--test-threads`,
/// else RUST_TEST_THREADS, else the CPUs (libtest's own order of choice).
pub fn test_threads(args: &[String]) -> usize {
    let after = args
        .iter()
        .position(|a| a == "--")
        .map_or(&args[..0], |i| &args[i + 1..]);
    let mut it = after.iter();
    while let Some(a) = it.next() {
        if let Some(n) = a.strip_prefix("--test-threads=") {
            return n.parse().unwrap_or(1).max(1);
        }
        if a == "--test-threads" {
            return it.next().and_then(|n| n.parse().ok()).unwrap_or(1).max(1);
        }
    }
    std::env::var("RUST_TEST_THREADS")
        .ok()
        .and_then(|n| n.parse().ok())
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
        .max(1)
}

/// One test executable's run as its output showed it.
#[derive(Default)]
struct Segment {
    started: Option<Instant>,
    /// (test, when its line came, outcome), in the order they came.
    ended: Vec<(String, Instant, Outcome)>,
}

/// Run `cmd` (`cargo test ...`, or a test executable itself with `suite` naming it), its
/// output passed through line by line as it comes, and record each test's time and each
/// SKIPPED line; its exit status. `threads`: libtest's tests at once ([`test_threads`]).
pub fn run_timed(cmd: &mut Command, suite: Option<&str>, threads: usize) -> Result<ExitStatus> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let stderr = child.stderr.take().ok_or("no stderr pipe")?;
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let suites: Arc<Mutex<Vec<String>>> = Arc::default();
    let skips: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let err_thread = {
        let (suites, skips) = (suites.clone(), skips.clone());
        std::thread::spawn(move || {
            each_line(stderr, &mut std::io::stderr(), |line| {
                if let Some(s) = suite_of(line) {
                    suites.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                }
                if let Some(s) = skip_of(line) {
                    skips.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                }
            })
        })
    };
    let mut segments: Vec<Segment> = Vec::new();
    let mut failures = FailureReader::default();
    each_line(stdout, &mut std::io::stdout(), |line| {
        failures.feed(line);
        let now = Instant::now();
        if is_running_line(line) {
            segments.push(Segment {
                started: Some(now),
                ..Segment::default()
            });
        } else if let Some((name, outcome)) = result_of(line) {
            if segments.is_empty() {
                segments.push(Segment::default());
            }
            if let Some(s) = segments.last_mut() {
                s.ended.push((name, now, outcome));
            }
        }
    });
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for {cmd:?}: {e}"))?;
    let _ = err_thread.join();
    let suites = std::mem::take(&mut *suites.lock().unwrap_or_else(|e| e.into_inner()));
    let mut st = state();
    for (i, seg) in segments.iter().enumerate() {
        let name = match suite {
            Some(s) => s.to_string(),
            None => suites.get(i).cloned().unwrap_or_else(|| "?".into()),
        };
        let Some(t0) = seg.started else { continue };
        for (test, secs, outcome) in durations(t0, &seg.ended, threads) {
            st.tests.push(TestTime {
                suite: name.clone(),
                name: test,
                secs,
                outcome,
            });
        }
    }
    st.skips.extend(std::mem::take(
        &mut *skips.lock().unwrap_or_else(|e| e.into_inner()),
    ));
    st.failures.extend(failures.finish());
    Ok(status)
}

/// Copy `from` to `to` line by line (bytes kept as they are), calling `f` on each line.
fn each_line(from: impl Read, to: &mut impl Write, mut f: impl FnMut(&str)) {
    let mut r = BufReader::new(from);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let _ = to.write_all(&buf);
                let _ = to.flush();
                let line = String::from_utf8_lossy(&buf);
                f(line.trim_end_matches(['\n', '\r']));
            }
        }
    }
}

/// libtest's `running N tests` line, which starts an executable's tests.
fn is_running_line(line: &str) -> bool {
    line.strip_prefix("running ")
        .and_then(|r| r.split_once(' '))
        .is_some_and(|(n, rest)| n.parse::<u64>().is_ok() && rest.starts_with("test"))
}

/// `test NAME ... ok` (or FAILED, ignored): (NAME, outcome).
fn result_of(line: &str) -> Option<(String, Outcome)> {
    let rest = line.strip_prefix("test ")?;
    let (name, result) = rest.rsplit_once(" ... ")?;
    let outcome = match result.trim() {
        "ok" => Outcome::Passed,
        "FAILED" => Outcome::Failed,
        r if r.starts_with("ignored") => Outcome::Ignored,
        _ => return None,
    };
    Some((name.to_string(), outcome))
}

/// The executable named by cargo's `Running ...` or `Doc-tests ...` line.
fn suite_of(line: &str) -> Option<String> {
    let l = line.trim_start();
    if let Some(krate) = l.strip_prefix("Doc-tests ") {
        return Some(format!("{} (doc)", krate.trim()));
    }
    let rest = l.strip_prefix("Running ")?;
    // `unittests src/lib.rs (target/debug/deps/rocbuild_native-0123abcd)` or
    // `../../tests/e2e/main.rs (target/debug/deps/e2e-0123abcd)`.
    let (src, exe) = rest.rsplit_once(" (")?;
    let exe = exe.trim_end_matches(')');
    let file = Path::new(exe).file_name()?.to_string_lossy().into_owned();
    let stem = match file.rsplit_once('-') {
        Some((s, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => s.to_string(),
        _ => file,
    };
    Some(match src.strip_prefix("unittests ") {
        Some(src) => format!("{stem} {src}"),
        None => stem,
    })
}

/// `SKIPPED <test>: <why>`: (test, why).
fn skip_of(line: &str) -> Option<(String, String)> {
    let rest = line.strip_prefix(SKIP_PREFIX)?;
    let (test, why) = rest.split_once(": ")?;
    Some((test.to_string(), why.to_string()))
}

/// Each test's time from when its line came: libtest starts the tests in name order, `threads`
/// at a time from `t0`, and the next one whenever one ends.
fn durations(
    t0: Instant,
    ended: &[(String, Instant, Outcome)],
    threads: usize,
) -> Vec<(String, f64, Outcome)> {
    let mut order: Vec<&str> = ended.iter().map(|(n, _, _)| n.as_str()).collect();
    order.sort_unstable();
    let mut started: BTreeMap<&str, Instant> = BTreeMap::new();
    let mut next = 0;
    while next < order.len() && next < threads {
        started.insert(order[next], t0);
        next += 1;
    }
    let mut out = Vec::new();
    for (name, at, outcome) in ended {
        let began = started.get(name.as_str()).copied().unwrap_or(t0);
        out.push((
            name.clone(),
            at.saturating_duration_since(began).as_secs_f64(),
            outcome.clone(),
        ));
        if next < order.len() {
            started.insert(order[next], *at);
            next += 1;
        }
    }
    out
}

fn human(secs: f64) -> String {
    if secs >= 60.0 {
        let s = secs.round() as u64;
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        format!("{secs:.1} s")
    }
}

/// The table of phases, the slowest tests and the skips; the JUnit file written.
/// `started`: when the run began. Its CPU is subtracted: `cargo run` execs xtask in cargo's
/// own process, whose used children (the rustc that compiled xtask) would count otherwise.
pub fn finish(root: &Path, started: Mark) {
    let st = state();
    let mut s = String::new();
    slowest_and_skips(&mut s, &st);
    where_the_time_went(&mut s, &st, started);
    // Why tests failed comes last, short: a log shown by its end (CI's) shows it whole, where
    // libtest's own `failures:` section sits far above, among the passing tests' lines.
    why_they_failed(&mut s, &st);
    print!("{s}");
    if !st.tests.is_empty() {
        let path = root.join(JUNIT);
        match write_junit(&path, &st.tests, &st.skips, &st.failures) {
            Ok(()) => println!("xtask: every test's time: {}", path.display()),
            Err(e) => println!("xtask: could not write {}: {e}", path.display()),
        }
    }
}

/// Each failed test with an excerpt of its output (the first three in full, the others by
/// name).
fn why_they_failed(s: &mut String, st: &State) {
    if st.failures.is_empty() {
        return;
    }
    let _ = writeln!(s, "xtask: {} tests failed:", st.failures.len());
    for (i, (name, lines)) in st.failures.iter().enumerate() {
        let _ = writeln!(s, "  FAILED {name}");
        if i < 3 {
            for l in excerpt(lines) {
                let _ = writeln!(s, "    {l}");
            }
        }
    }
}

/// Each phase's wall time and, where it ran alone, its CPU time and the cores that is; then the
/// whole run's.
fn where_the_time_went(s: &mut String, st: &State, started: Mark) {
    let _ = writeln!(
        s,
        "\nxtask: where the time went (wall, then CPU where known)"
    );
    let width = st
        .phases
        .iter()
        .map(|p| p.name.chars().count())
        .max()
        .unwrap_or(10)
        .max(10);
    let cpu = |cpu: Option<f64>, secs: f64| match cpu {
        Some(c) if secs >= 1.0 => format!("{:>12} {:>4.1} cores", human(c), c / secs),
        _ => format!("{:>12} {:>10}", "", ""),
    };
    for p in &st.phases {
        let _ = writeln!(
            s,
            "  {:<width$}  {:>12}  {}  {}",
            p.name,
            human(p.secs),
            cpu(p.cpu, p.secs),
            p.outcome
        );
    }
    let wall = started.elapsed().as_secs_f64();
    let _ = writeln!(
        s,
        "  {:<width$}  {:>12}  {}",
        "whole run",
        human(wall),
        cpu(Some((cpu_now() - started.cpu).max(0.0)), wall)
    );
}

/// The slowest tests, and the SKIPPED lines counted by reason.
fn slowest_and_skips(s: &mut String, st: &State) {
    let mut tests: Vec<&TestTime> = st.tests.iter().collect();
    tests.sort_by(|a, b| b.secs.total_cmp(&a.secs));
    if !tests.is_empty() {
        let _ = writeln!(
            s,
            "\nxtask: the {} slowest of {} tests (each test's time: {JUNIT})",
            SLOWEST.min(tests.len()),
            tests.len()
        );
        for t in tests.iter().take(SLOWEST) {
            let failed = if t.outcome == Outcome::Failed {
                "  FAILED"
            } else {
                ""
            };
            let _ = writeln!(s, "  {:>12}  {} {}{failed}", human(t.secs), t.suite, t.name);
        }
    }
    if !st.skips.is_empty() {
        let mut why: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, w) in &st.skips {
            *why.entry(w.as_str()).or_default() += 1;
        }
        let _ = writeln!(
            s,
            "xtask: {} SKIPPED lines, for {} reasons:",
            st.skips.len(),
            why.len()
        );
        for (w, n) in &why {
            let _ = writeln!(s, "  {n:>4} x {w}");
        }
    }
}

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML as CI dashboards read it: one testsuite per test executable; a failed test has a
/// `<failure>` holding the excerpt of what it printed (`failures`), an ignored one
/// `<skipped>`; a test's SKIPPED lines are its `<system-err>` (a test that said SKIPPED may
/// still have checked the rest, so it is not called skipped).
pub fn junit(
    tests: &[TestTime],
    skips: &[(String, String)],
    failures: &[(String, Vec<String>)],
) -> String {
    let mut by_suite: BTreeMap<&str, Vec<&TestTime>> = BTreeMap::new();
    for t in tests {
        by_suite.entry(t.suite.as_str()).or_default().push(t);
    }
    let total: f64 = tests.iter().map(|t| t.secs).sum();
    let failed = tests
        .iter()
        .filter(|t| t.outcome == Outcome::Failed)
        .count();
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<testsuites name=\"cargo xtask test\" tests=\"{}\" failures=\"{failed}\" time=\"{total:.3}\">",
        tests.len()
    );
    for (suite, ts) in by_suite {
        let time: f64 = ts.iter().map(|t| t.secs).sum();
        let _ = writeln!(
            s,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{time:.3}\">",
            xml(suite),
            ts.len(),
            ts.iter().filter(|t| t.outcome == Outcome::Failed).count(),
            ts.iter().filter(|t| t.outcome == Outcome::Ignored).count(),
        );
        for t in ts {
            let _ = write!(
                s,
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                xml(suite),
                xml(&t.name),
                t.secs
            );
            let said: Vec<&str> = skips
                .iter()
                .filter(|(n, _)| *n == t.name)
                .map(|(_, w)| w.as_str())
                .collect();
            if t.outcome == Outcome::Passed && said.is_empty() {
                s.push_str("/>\n");
                continue;
            }
            s.push_str(">\n");
            match t.outcome {
                Outcome::Failed => {
                    let text = failures
                        .iter()
                        .find(|(n, _)| *n == t.name)
                        .map(|(_, lines)| excerpt(lines).join("\n"))
                        .unwrap_or_default();
                    let _ = writeln!(
                        s,
                        "      <failure message=\"failed\">{}</failure>",
                        xml(&text)
                    );
                }
                Outcome::Ignored => s.push_str("      <skipped message=\"#[ignore]\"/>\n"),
                Outcome::Passed => {}
            }
            if !said.is_empty() {
                let lines: Vec<String> = said.iter().map(|w| format!("SKIPPED: {w}")).collect();
                let _ = writeln!(
                    s,
                    "      <system-err>{}</system-err>",
                    xml(&lines.join("\n"))
                );
            }
            s.push_str("    </testcase>\n");
        }
        s.push_str("  </testsuite>\n");
    }
    s.push_str("</testsuites>\n");
    s
}

fn write_junit(
    path: &Path,
    tests: &[TestTime],
    skips: &[(String, String)],
    failures: &[(String, Vec<String>)],
) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, junit(tests, skips, failures))
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtests_lines_are_read() {
        assert!(is_running_line("running 12 tests"));
        assert!(is_running_line("running 1 test"));
        assert!(!is_running_line("running the tests"));
        assert_eq!(
            result_of("test real_torch::builds ... ok"),
            Some(("real_torch::builds".into(), Outcome::Passed))
        );
        assert_eq!(
            result_of("test a::b ... FAILED"),
            Some(("a::b".into(), Outcome::Failed))
        );
        assert_eq!(
            result_of("test a ... ignored, needs a GPU"),
            Some(("a".into(), Outcome::Ignored))
        );
        assert_eq!(result_of("test result: ok. 3 passed"), None);
        assert_eq!(
            result_of("test a has been running for over 60 seconds"),
            None
        );
    }

    #[test]
    fn cargos_running_lines_name_the_executable() {
        assert_eq!(
            suite_of("     Running unittests src/lib.rs (target/debug/deps/rocbuild_native-0a1b2c3d4e5f6789)"),
            Some("rocbuild_native src/lib.rs".into())
        );
        assert_eq!(
            suite_of(
                "     Running ../../tests/e2e/main.rs (target/debug/deps/e2e-0a1b2c3d4e5f6789)"
            ),
            Some("e2e".into())
        );
        assert_eq!(
            suite_of("   Doc-tests rocbuild_recipe"),
            Some("rocbuild_recipe (doc)".into())
        );
        assert_eq!(suite_of("   Compiling rocbuild v0.1.0"), None);
    }

    #[test]
    fn skip_lines_name_the_test_and_why() {
        assert_eq!(
            skip_of("SKIPPED real_torch::x: ROCBUILD_TEST_TORCH_VENV is not set (a: b)"),
            Some((
                "real_torch::x".into(),
                "ROCBUILD_TEST_TORCH_VENV is not set (a: b)".into()
            ))
        );
        assert_eq!(skip_of("SKIPPED: old style"), None);
    }

    /// Two threads; tests end in this order: b (0.5 s), c (1.5 s), a (3 s), d (3.5 s).
    /// Started by name: a and b at 0, c when b ends, d when c ends.
    #[test]
    fn times_follow_libtests_start_order() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let ended = vec![
            ("b".to_string(), at(0.5), Outcome::Passed),
            ("c".to_string(), at(1.5), Outcome::Passed),
            ("a".to_string(), at(3.0), Outcome::Failed),
            ("d".to_string(), at(3.5), Outcome::Passed),
        ];
        let got: Vec<(String, f64)> = durations(t0, &ended, 2)
            .into_iter()
            .map(|(n, s, _)| (n, (s * 10.0).round() / 10.0))
            .collect();
        assert_eq!(
            got,
            [
                ("b".to_string(), 0.5),
                ("c".to_string(), 1.0),
                ("a".to_string(), 3.0),
                ("d".to_string(), 2.0)
            ]
        );
        // One thread: each starts when the one before it ends.
        let one = durations(t0, &ended[..2], 1);
        assert_eq!((one[1].1 * 10.0).round() / 10.0, 1.0);
    }

    #[test]
    fn test_threads_come_from_the_test_arguments_first() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            test_threads(&a(&["-p", "x", "--", "--test-threads", "3"])),
            3
        );
        assert_eq!(test_threads(&a(&["--", "--test-threads=1"])), 1);
    }

    #[test]
    fn a_failed_tests_output_is_read_from_libtests_failures_section() {
        let out = "test a::ok ... ok\ntest a::bad ... FAILED\n\nfailures:\n\n\
                   ---- a::bad stdout ----\nrocbuild.exe torchsort -> 1 in 3.0 s\n\n\
                   thread 'a::bad' panicked at tests/e2e/x.rs:9:5:\nno setuptools\n\n\
                   ---- a::worse stdout ----\nhung\n\nfailures:\n    a::bad\n    a::worse\n\n\
                   test result: FAILED. 1 passed; 2 failed";
        let mut r = FailureReader::default();
        out.lines().for_each(|l| r.feed(l));
        let got = r.finish();
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a::bad", "a::worse"]);
        assert_eq!(
            excerpt(&got[0].1),
            [
                "rocbuild.exe torchsort -> 1 in 3.0 s",
                "thread 'a::bad' panicked at tests/e2e/x.rs:9:5:",
                "no setuptools"
            ]
        );
        // A long one keeps its head and its tail.
        let long: Vec<String> = (0..40).map(|i| format!("line {i}")).collect();
        let e = excerpt(&long);
        assert_eq!(e.len(), FAILURE_HEAD + 1 + FAILURE_TAIL);
        assert_eq!(e[FAILURE_HEAD], "[24 lines]");
        assert_eq!(e.last().map(String::as_str), Some("line 39"));
    }

    #[test]
    fn junit_has_every_test_and_escapes() {
        let tests = vec![
            TestTime {
                suite: "e2e".into(),
                name: "a::<b>".into(),
                secs: 1.25,
                outcome: Outcome::Failed,
            },
            TestTime {
                suite: "e2e".into(),
                name: "c".into(),
                secs: 2.0,
                outcome: Outcome::Passed,
            },
        ];
        let failed = vec![(
            "a::<b>".to_string(),
            vec!["panicked at x.rs:1: 2 < 3".to_string()],
        )];
        let x = junit(&tests, &[("c".into(), "no \"venv\"".into())], &failed);
        assert!(
            x.contains("<testsuite name=\"e2e\" tests=\"2\" failures=\"1\""),
            "{x}"
        );
        assert!(x.contains("name=\"a::&lt;b&gt;\" time=\"1.250\">"), "{x}");
        assert!(
            x.contains("<failure message=\"failed\">panicked at x.rs:1: 2 &lt; 3</failure>"),
            "{x}"
        );
        assert!(
            x.contains("<system-err>SKIPPED: no &quot;venv&quot;</system-err>"),
            "{x}"
        );
    }
}
