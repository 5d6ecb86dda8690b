//! Everything rocbuild prints goes through here, redacted by the one rule of
//! `rocbuild_secret`: no URL's password and no secret setting reaches stdout or stderr. The
//! rest of this crate prints only through [`outln!`] and [`errln!`] (a test in this module
//! fails on any other `println!`/`eprintln!` in `src/`).

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

#[allow(clippy::print_stdout)]
pub fn stdout_line(text: &str) {
    println!("{}", rocbuild_secret::redact(text));
}

#[allow(clippy::print_stderr)]
pub fn stderr_line(text: &str) {
    eprintln!("{}", rocbuild_secret::redact(text));
}

/// `text` as it is (no newline added), redacted.
#[allow(clippy::print_stdout)]
pub fn stdout_raw(text: &str) {
    use std::io::Write;
    let _ = write!(
        std::io::stdout().lock(),
        "{}",
        rocbuild_secret::redact(text)
    );
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
