//! Running one external step: output to the run's log, ninja's `[N/M]` to a progress bar,
//! and on failure the tail of the output, the log path and the exact command to reproduce.
//! This is the build log's terminal side: it prints, redacted, what the user's verbosity asks
//! for, and nothing when quiet.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::command::Command;
use crate::error::{EngineError, Result};

/// One line on stderr, redacted. A closed stderr (`2>&1 | head`) is no reason to stop a
/// build halfway, as `eprintln!` would (it panics): the line is still in the log.
fn say(line: &str) {
    let line = format!("{}\n", rocbuild_secret::redact(line));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// How chatty to be on the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verbosity {
    Quiet,
    #[default]
    Normal,
    /// Echo every line of every step.
    Verbose,
}

/// The log of one run, shared by its steps.
pub struct RunLog {
    pub path: PathBuf,
    /// Redacted line by line: a log keeps no URL password or secret setting.
    file: rocbuild_secret::Redacting<File>,
    pub verbosity: Verbosity,
    started: std::time::Instant,
}

impl RunLog {
    pub fn create(dir: &Path, name: &str, verbosity: Verbosity) -> Result<RunLog> {
        fs_err::create_dir_all(dir).map_err(EngineError::io("create", dir))?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let path = dir.join(format!("{name}-{stamp}.log"));
        let file = rocbuild_secret::create_file(&path).map_err(EngineError::io("create", &path))?;
        Ok(RunLog {
            path,
            file: rocbuild_secret::Redacting::new(file),
            verbosity,
            started: std::time::Instant::now(),
        })
    }

    pub fn note(&mut self, line: &str) {
        let _ = writeln!(
            self.file,
            "[{:7.2} s] {line}",
            self.started.elapsed().as_secs_f64()
        );
        if self.verbosity != Verbosity::Quiet {
            say(line);
        }
    }

    /// The error of the step `name` running `cmd`: its exit code (or why there is none), the
    /// excerpt to show, this log and the command to reproduce it.
    fn step_error(&self, name: &str, cmd: &Command, code: String, tail: String) -> EngineError {
        EngineError::Step {
            step: name.into(),
            code,
            tail,
            log: self.path.display().to_string(),
            reproduce: cmd.shell_line(),
        }
    }

    pub fn write(&mut self, line: &str) {
        let _ = writeln!(self.file, "{line}");
    }

    /// Start `cmd` as the step `name` in the background: it runs while the caller does other
    /// steps; [`RunLog::finish`] waits for it and logs its output, [`Background::cancel`]
    /// kills it. Nothing is shown while it runs.
    pub fn start(&mut self, name: &str, cmd: &Command) -> Result<Background> {
        let handle = low_priority(cmd.to_duct())
            .stderr_to_stdout()
            .stdout_capture()
            .stdin_null()
            .unchecked()
            .start()
            .map_err(|e| self.step_error(name, cmd, "not started".into(), e.to_string()))?;
        Ok(Background {
            name: name.into(),
            cmd: cmd.clone(),
            handle,
        })
    }

    /// Wait for a step started with [`RunLog::start`]; its output goes to the log now, and
    /// it fails like [`RunLog::run`] does.
    pub fn finish(&mut self, bg: Background) -> Result<Vec<String>> {
        self.write(&format!(
            "==> {} (ran in the background)\n$ {}",
            bg.name,
            bg.cmd.shell_line()
        ));
        // Polled, not waited on: a signal to rocbuild stops the step.
        loop {
            match bg.handle.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) => {}
                Err(e) => {
                    return Err(self.step_error(&bg.name, &bg.cmd, "lost".into(), e.to_string()))
                }
            }
            if let Some(e) = crate::interrupt::error(&bg.name) {
                let _ = writeln!(self.file, "<== {}: stopped: {e}", bg.name);
                bg.cancel();
                return Err(e);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let out = bg
            .handle
            .wait()
            .map_err(|e| self.step_error(&bg.name, &bg.cmd, "lost".into(), e.to_string()))?;
        let mut tail = Tail::default();
        let mut lines = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let line = line.trim_end().to_string();
            self.write(&line);
            if self.verbosity == Verbosity::Verbose {
                say(&line);
            }
            tail.push(&line);
            lines.push(line);
        }
        self.outcome(&bg.name, &bg.cmd, Some(out.status), tail, lines)
    }

    fn outcome(
        &mut self,
        name: &str,
        cmd: &Command,
        status: Option<std::process::ExitStatus>,
        tail: Tail,
        lines: Vec<String>,
    ) -> Result<Vec<String>> {
        let _ = writeln!(
            self.file,
            "<== {name}: {} [{:7.2} s]",
            status.map_or("killed".to_string(), |s| s.to_string()),
            self.started.elapsed().as_secs_f64()
        );
        match status {
            Some(s) if s.success() => Ok(lines),
            other => {
                let mut excerpt: Vec<String> = self.no_space_note(&lines).into_iter().collect();
                excerpt.extend(tail.0);
                Err(self.step_error(
                    name,
                    cmd,
                    other
                        .and_then(|s| s.code())
                        .map_or("signal".into(), |c| c.to_string()),
                    excerpt.join("\n"),
                ))
            }
        }
    }

    /// A step that failed on a full disk, said first in its excerpt: its output says so (a
    /// compiler's "No space left on device", however far up), or the filesystem of the
    /// cache (this log's, and the build tree's) has less than 1 MiB left.
    fn no_space_note(&self, lines: &[String]) -> Option<String> {
        let said = lines
            .iter()
            .any(|l| rocbuild_probe::space::says_out_of_space(l));
        let cache = self.path.parent().and_then(Path::parent)?;
        let at = rocbuild_probe::space::NoSpace::at(cache);
        let low = at.free.is_some_and(|n| n < 1 << 20);
        if !said && !low {
            return None;
        }
        Some(format!(
            "no space left on device{}: {}",
            at.free_text(),
            at.help()
        ))
    }

    /// Run `cmd` as the step `name`. Returns its output lines.
    pub fn run(&mut self, name: &str, cmd: &Command) -> Result<Vec<String>> {
        self.run_while(name, cmd, || None)
    }

    /// [`RunLog::run`], asking `stop` after each line of output and every 100 ms whether to
    /// give up: when it returns an error, the step is killed and that error returned.
    pub fn run_while(
        &mut self,
        name: &str,
        cmd: &Command,
        mut stop: impl FnMut() -> Option<EngineError>,
    ) -> Result<Vec<String>> {
        self.write(&format!("==> {name}\n$ {}", cmd.shell_line()));
        let bar = self.bar(name);
        let reader = cmd
            .to_duct()
            .stderr_to_stdout()
            .stdin_null()
            .unchecked()
            .reader()
            .map_err(|e| self.step_error(name, cmd, "not started".into(), e.to_string()))?;
        // Lines come from a thread, so that `stop` is asked even while the step prints
        // nothing (one long compile). The thread ends at the end of the output; when the
        // step is stopped it is left to end with the pipe.
        let reader = std::sync::Arc::new(reader);
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        {
            let reader = reader.clone();
            std::thread::spawn(move || {
                let mut buf = BufReader::new(&*reader);
                let mut raw = Vec::new();
                loop {
                    raw.clear();
                    match buf.read_until(b'\n', &mut raw) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    let line = String::from_utf8_lossy(&raw).trim_end().to_string();
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let mut lines = Vec::new();
        let mut tail = Tail::default();
        loop {
            match rx.recv_timeout(std::time::Duration::from_millis(100)) {
                Ok(line) => {
                    self.write(&line);
                    if let Some((n, m)) = ninja_progress(&line) {
                        show_progress(&bar, n, m);
                    }
                    if self.verbosity == Verbosity::Verbose {
                        bar.suspend(|| say(&line));
                    }
                    tail.push(&line);
                    lines.push(line);
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if let Some(e) = crate::interrupt::error(name).or_else(&mut stop) {
                let pids = reader.pids();
                crate::interrupt::stop_group(&pids, || matches!(reader.try_wait(), Ok(Some(_))));
                let _ = reader.kill();
                bar.finish_and_clear();
                let _ = writeln!(
                    self.file,
                    "<== {name}: stopped: {e} [{:7.2} s]",
                    self.started.elapsed().as_secs_f64()
                );
                return Err(e);
            }
        }
        bar.finish_and_clear();
        let status = reader.try_wait().ok().flatten().map(|o| o.status);
        self.outcome(name, cmd, status, tail, lines)
    }

    fn bar(&self, name: &str) -> ProgressBar {
        if self.verbosity == Verbosity::Quiet {
            return ProgressBar::hidden();
        }
        let bar = step_bar(name, ProgressDrawTarget::stderr());
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        bar
    }
}

/// A step's line on the terminal: a spinner with the step's name and its time, until ninja's
/// `[N/M]` gives a total (see [`show_progress`]). Most steps never have one (configure, pip,
/// verify): a bar of length 0 would be drawn full, `[=====] 0/0`, as if the step were done.
fn step_bar(name: &str, target: ProgressDrawTarget) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, target);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(name.to_string());
    bar
}

/// `[n/m]` from ninja: the spinner becomes a bar (once), then moves.
fn show_progress(bar: &ProgressBar, n: u64, m: u64) {
    if bar.length().is_none() {
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
    }
    bar.set_length(m);
    bar.set_position(n);
}

/// Work started beside the build runs at a lower CPU priority (nice 10): the compile, on the
/// critical path, comes first, and the background work takes the cores it leaves idle
/// (configure, linking) instead of slowing it down.
pub(crate) fn low_priority(e: duct::Expression) -> duct::Expression {
    e.before_spawn(|cmd| {
        rocbuild_probe::platform::host::lower_priority(cmd);
        Ok(())
    })
}

/// A step running in the background (see [`RunLog::start`]).
pub struct Background {
    name: String,
    cmd: Command,
    handle: duct::Handle,
}

impl Background {
    /// Kill it (when the run fails before it is needed) and wait, at most a few seconds,
    /// for it to go: the caller then removes the directory it was writing to.
    pub fn cancel(self) {
        let pids = self.handle.pids();
        crate::interrupt::stop_group(&pids, || !matches!(self.handle.try_wait(), Ok(None)));
        let _ = self.handle.kill();
        let _ = self.handle.wait();
    }
}

/// The last 30 lines of a step's output, shown when it fails. Ninja's `[N/M] Building …`
/// lines are left out: their order depends on which job finished first, and the failing
/// one is named again by its `FAILED:` line. The log keeps everything.
#[derive(Default)]
struct Tail(VecDeque<String>);

impl Tail {
    fn push(&mut self, line: &str) {
        if ninja_progress(line).is_some() {
            return;
        }
        self.0.push_back(line.to_string());
        if self.0.len() > 30 {
            self.0.pop_front();
        }
    }
}

/// `[12/345] Building CXX object …` -> (12, 345).
pub fn ninja_progress(line: &str) -> Option<(u64, u64)> {
    let inner = line.strip_prefix('[')?.split_once(']')?.0;
    let (n, m) = inner.split_once('/')?;
    Some((n.trim().parse().ok()?, m.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A terminal that keeps what is drawn on it.
    #[derive(Debug, Default, Clone)]
    struct Screen(std::sync::Arc<std::sync::Mutex<String>>);

    impl Screen {
        /// What was drawn since the last call.
        fn take(&self) -> String {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
        fn put(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
    }

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            100
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.put(s)?;
            self.put("\n")
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.put(s)
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Configure and verify have no `[N/M]`: no bar, no `0/0`, only a spinner and the time.
    #[test]
    fn a_step_without_a_total_shows_a_spinner_not_a_full_bar() {
        let screen = Screen::default();
        let bar = step_bar(
            "configure",
            ProgressDrawTarget::term_like(Box::new(screen.clone())),
        );
        bar.tick();
        let before = screen.take();
        assert!(before.contains("configure"), "{before:?}");
        assert!(
            !before.contains("0/0") && !before.contains('['),
            "{before:?}"
        );
        show_progress(&bar, 3, 12);
        bar.tick();
        let during = screen.take();
        assert!(during.contains("3/12"), "{during:?}");
        assert!(during.contains("[=======>"), "{during:?}");
    }

    #[test]
    fn parses_ninja_progress() {
        assert_eq!(
            ninja_progress("[3/17] Building CXX object a.o"),
            Some((3, 17))
        );
        assert_eq!(ninja_progress("-- Configuring done"), None);
    }

    #[test]
    #[cfg_attr(windows, ignore = "a Unix-host test: its build steps are `sh` scripts")]
    fn failing_step_reports_tail_log_and_reproducer() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = RunLog::create(dir.path(), "t", Verbosity::Quiet).unwrap();
        let mut cmd =
            Command::new("sh").args(["-c", "for i in $(seq 1 40); do echo line$i; done; exit 3"]);
        cmd.env.insert("FOO".into(), "bar baz".into());
        let err = log.run("configure", &cmd).unwrap_err();
        let EngineError::Step {
            code,
            tail,
            reproduce,
            log: path,
            ..
        } = err
        else {
            panic!("{err:?}")
        };
        assert_eq!(code, "3", "{tail}");
        assert!(
            tail.starts_with("line11\n") && tail.ends_with("line40"),
            "{tail}"
        );
        assert!(reproduce.contains("'FOO=bar baz'"), "{reproduce}");
        assert!(std::fs::read_to_string(path).unwrap().contains("line1\n"));
    }

    /// A compiler that found the disk full, its words far above the excerpt's last lines:
    /// the excerpt starts by saying so, with what is free and what to free.
    #[test]
    #[cfg_attr(windows, ignore = "a Unix-host test: its build steps are `sh` scripts")]
    fn a_step_that_found_the_disk_full_says_so_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = RunLog::create(&dir.path().join("logs"), "t", Verbosity::Quiet).unwrap();
        let script = "echo 'cc1plus: fatal error: cannot write a.s: No space left on device'; \
                      for i in $(seq 1 40); do echo line$i; done; exit 1";
        let err = log
            .run("build", &Command::new("sh").args(["-c", script]))
            .unwrap_err();
        let EngineError::Step { tail, .. } = err else {
            panic!("{err:?}")
        };
        let first = tail.lines().next().unwrap_or_default();
        assert!(first.starts_with("no space left on device ("), "{tail}");
        assert!(first.contains(" free on that filesystem): "), "{tail}");
        assert!(first.contains(&dir.path().display().to_string()), "{tail}");
        assert!(first.contains("rocbuild clean --builds"), "{tail}");
        assert!(tail.ends_with("line40"), "{tail}");
        // Another failure on a disk with room: nothing said about space.
        let err = log.run(
            "build",
            &Command::new("sh").args(["-c", "echo nope; exit 1"]),
        );
        let Err(EngineError::Step { tail, .. }) = err else {
            panic!("{err:?}")
        };
        assert_eq!(tail, "nope");
    }

    #[test]
    #[cfg_attr(windows, ignore = "a Unix-host test: its build steps are `sh` scripts")]
    fn failure_excerpt_leaves_out_ninja_progress() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = RunLog::create(dir.path(), "t", Verbosity::Quiet).unwrap();
        let script = "echo '[1/3] Building C object a.o'; echo '[2/3] Building C object b.o'; \
                      echo 'FAILED: b.o'; echo 'b.c:1: error: nope'; \
                      echo 'ninja: build stopped: subcommand failed.'; exit 1";
        let cmd = Command::new("sh").args(["-c", script]);
        let err = log.run("build", &cmd).unwrap_err();
        let EngineError::Step {
            tail, log: path, ..
        } = err
        else {
            panic!("{err:?}")
        };
        assert_eq!(
            tail,
            "FAILED: b.o\nb.c:1: error: nope\nninja: build stopped: subcommand failed."
        );
        let logged = std::fs::read_to_string(path).unwrap();
        assert!(logged.contains("[2/3] Building C object b.o"), "{logged}");
    }
}
