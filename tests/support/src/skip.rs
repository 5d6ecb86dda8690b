//! Saying SKIPPED so that it is seen. A test that needs a world `cargo xtask` makes (the venv
//! with the real PyPI torch, the ROCm chroots, the Windows world, rocbuild.exe, rocbuild's own
//! wheel) is told where it is by an environment variable `VAR`, or why there is none by
//! `VAR_SKIP`; with neither (a plain `cargo test`), it says which variable is missing and the
//! command that provides it. Either way one line, `SKIPPED <test>: <why>`, then the test
//! returns: it never panics for a world it was not given, and it never passes silently.
//!
//! The line goes straight to the process's stderr: libtest captures what a passing test prints
//! with `eprintln!` (its capture only sees the print macros), so a skip said that way is never
//! shown. `cargo xtask test` counts these lines and puts them into its JUnit file.

use std::io::Write;
use std::path::PathBuf;

/// The prefix of every skip line (`cargo xtask test` looks for it).
pub const PREFIX: &str = "SKIPPED ";

/// Say `SKIPPED <test>: <why>` on one line, past libtest's capture. The test is the current
/// thread's name (libtest names each test's thread after the test).
pub fn skipped(why: &str) {
    let line = skip_line(std::thread::current().name(), why);
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(line.as_bytes());
    let _ = err.flush();
}

fn skip_line(test: Option<&str>, why: &str) -> String {
    // One line, whatever `why` holds (a reason can quote a command's output).
    let why = why.split_whitespace().collect::<Vec<_>>().join(" ");
    match test {
        // libtest runs a lone test (`--test-threads 1`) on the main thread.
        Some(t) if t != "main" => format!("{PREFIX}{t}: {why}\n"),
        _ => format!("{PREFIX}(this test): {why}\n"),
    }
}

/// The directory (or file) a world variable names: `Some(path)` when `var` is set; `None`
/// after saying SKIPPED when `{var}_SKIP` says why there is none, or when neither is set
/// (then naming `var`, what it is, and that `cargo xtask test` provides it).
pub fn world(var: &str, what: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        return Some(PathBuf::from(p));
    }
    skipped(&absent(
        var,
        what,
        std::env::var(format!("{var}_SKIP")).ok(),
    ));
    None
}

fn absent(var: &str, what: &str, skip: Option<String>) -> String {
    match skip {
        Some(why) => why,
        None => format!(
            "{var} is not set ({what}): `cargo xtask test` makes it and sets it (`cargo xtask test --quick` and a plain `cargo test` leave it out)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_one_line_naming_the_test() {
        assert_eq!(
            skip_line(Some("real_torch::builds"), "no venv\nhere"),
            "SKIPPED real_torch::builds: no venv here\n"
        );
        assert_eq!(skip_line(Some("main"), "why"), "SKIPPED (this test): why\n");
    }

    #[test]
    fn an_absent_world_names_its_variable_and_the_command() {
        let why = absent("ROCBUILD_TEST_X", "the X world", None);
        assert!(
            why.starts_with("ROCBUILD_TEST_X is not set (the X world)"),
            "{why}"
        );
        assert!(why.contains("`cargo xtask test`"), "{why}");
        assert_eq!(
            absent("ROCBUILD_TEST_X", "the X world", Some("given".into())),
            "given"
        );
    }
}
