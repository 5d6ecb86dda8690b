//! Everything rocbuild prints goes through here, redacted by the one rule of
//! `rocbuild_secret`: no URL's password and no secret setting reaches stdout or stderr. The
//! rest of this crate prints only through [`outln!`] and [`errln!`] (a test in this module
//! fails on any other `println!`/`eprintln!` in `src/`). None of them panics on a closed
//! pipe (`rocbuild status | head -1`), as `println!` would.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// `println!`, redacted.
macro_rules! outln {
    () => { $crate::out::stdout_line("") };
    ($($arg:tt)*) => { $crate::out::stdout_line(&format!($($arg)*)) };
}

/// `eprintln!`, redacted.
macro_rules! errln {
    () => { $crate::out::stderr_line("") };
    ($($arg:tt)*) => { $crate::out::stderr_line(&format!($($arg)*)) };
}

/// Whether a closed stdout (`rocbuild status | head -1`) ends the process. A command that
/// only reads stops there, quietly and with 0, as `ls | head` does; one that changes a venv
/// goes on without its output, so that its transaction ends as it would have (committed or
/// rolled back), never cut off by its reader going away.
static EXIT_ON_CLOSED_STDOUT: AtomicBool = AtomicBool::new(true);

/// Say (once, before anything is printed) that this command changes a venv: a closed
/// stdout no longer ends it.
pub fn keep_going_on_closed_stdout() {
    EXIT_ON_CLOSED_STDOUT.store(false, Ordering::Relaxed);
}

pub fn stdout_line(text: &str) {
    let line = format!("{}\n", rocbuild_secret::redact(text));
    wrote_stdout(std::io::stdout().lock().write_all(line.as_bytes()));
}

pub fn stderr_line(text: &str) {
    let line = format!("{}\n", rocbuild_secret::redact(text));
    // A closed or failing stderr leaves nothing to say it on: the exit status still tells
    // how the command ended (`println!`/`eprintln!` would panic here, exit 101).
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `text` as it is (no newline added), redacted.
pub fn stdout_raw(text: &str) {
    let text = rocbuild_secret::redact(text);
    let mut out = std::io::stdout().lock();
    wrote_stdout(out.write_all(text.as_bytes()).and_then(|()| out.flush()));
}

/// What a write to stdout came to: a reader that went away ends a command that only reads
/// ([`EXIT_ON_CLOSED_STDOUT`]); any other failure (a full disk under `> file`) is said once
/// on stderr and the command goes on.
fn wrote_stdout(r: std::io::Result<()>) {
    let Err(e) = r else { return };
    if is_closed_pipe(&e) {
        if EXIT_ON_CLOSED_STDOUT.load(Ordering::Relaxed) {
            std::process::exit(0);
        }
        return;
    }
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        stderr_line(&format!("rocbuild: cannot write to stdout: {e}"));
    }
}

/// The reader of the pipe is gone (EPIPE; Rust ignores SIGPIPE, so the write fails instead).
fn is_closed_pipe(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::BrokenPipe
}

/// The width of the terminal stderr is, if it is one.
pub fn stderr_terminal_width() -> Option<usize> {
    terminal_size::terminal_size_of(std::io::stderr()).map(|(w, _)| usize::from(w.0))
}

/// stderr for the tracing subscriber, redacted line by line.
pub fn tracing_writer() -> rocbuild_secret::Redacting<std::io::Stderr> {
    rocbuild_secret::Redacting::new(std::io::stderr())
}

#[cfg(test)]
mod tests {
    /// No file of this crate prints except through this module: a `println!` elsewhere would
    /// bypass the redaction.
    #[test]
    fn nothing_prints_around_the_redaction() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut stack = vec![src.clone()];
        let mut bad = Vec::new();
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                if p.ends_with("out.rs") || p.extension().is_none_or(|x| x != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                for (i, line) in text.lines().enumerate() {
                    for m in [
                        "println!",
                        "eprintln!",
                        "print!(",
                        "eprint!(",
                        "std::io::stdout()",
                        "std::io::stderr()",
                    ] {
                        if line.contains(m) {
                            bad.push(format!("{}:{}: {}", p.display(), i + 1, line.trim()));
                        }
                    }
                }
            }
        }
        assert!(
            bad.is_empty(),
            "print through out.rs (outln!/errln!):\n{}",
            bad.join("\n")
        );
    }
}
