//! Every command survives a closed pipe (`rocbuild status | head -1`, issue 38): it stops
//! quietly, as `ls | head` does, instead of panicking on the write that fails with EPIPE.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::common::*;

/// When the reader goes away: before rocbuild writes anything, or after reading one line
/// (what `head -1` does).
#[derive(Debug, Clone, Copy)]
enum Close {
    AtOnce,
    AfterOneLine,
}

/// Run `c` with stdout into a pipe whose reader closes as `close` says; stderr captured.
/// (exit code, stderr).
fn into_closed_pipe(mut c: Command, close: Close) -> (i32, String) {
    let (reader, writer) = std::io::pipe().expect("pipe");
    c.stdin(Stdio::null()).stdout(writer).stderr(Stdio::piped());
    let child = c.spawn().expect("run rocbuild");
    // The command holds the pipe's writer until dropped: then only the child does.
    drop(c);
    match close {
        Close::AtOnce => drop(reader),
        Close::AfterOneLine => {
            let mut reader = BufReader::new(reader);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
        }
    }
    let out = child.wait_with_output().expect("wait for rocbuild");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run `c` with stdout and stderr both into one pipe whose reader is closed at once
/// (`rocbuild … 2>&1 | head -0`): nothing can be said, only the exit code.
fn both_into_closed_pipe(mut c: Command) -> i32 {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    c.stdin(Stdio::null())
        .stdout(writer.try_clone().expect("pipe"))
        .stderr(writer);
    let status = c.status().expect("run rocbuild");
    status.code().unwrap_or(-1)
}

/// `help`, `man`, `completions`, `recipes` and `status` (human and `--json`) on a real venv,
/// their reader gone before and after the first line, many times each: never a panic (exit
/// 101, "panicked" on stderr), never a word about the pipe; a command that only reads ends
/// with 0 as `ls | head` would, with nothing on stderr.
#[test]
fn every_command_survives_a_closed_pipe() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    make_venv(&venv);
    let venv = venv.to_str().unwrap();
    let cache = tmp.path().join("cache");
    let cache = cache.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["help"],
        vec!["help", "status"],
        vec!["--help"],
        vec!["man"],
        vec!["completions", "bash"],
        vec!["recipes"],
        vec!["recipes", "--variables"],
        vec!["status", "--venv", venv],
        vec!["status", "--venv", venv, "--json"],
    ];
    let mut failures = Vec::new();
    for args in &commands {
        for close in [Close::AtOnce, Close::AfterOneLine] {
            for _ in 0..6 {
                let mut c = rocbuild_command(args);
                c.env("ROCBUILD_CACHE", cache);
                let (code, stderr) = into_closed_pipe(c, close);
                let said = stderr.contains("panicked")
                    || stderr.contains("Broken pipe")
                    || stderr.contains("os error 32");
                if code != 0 || said {
                    failures.push(format!("{args:?} {close:?}: exit {code}\n{stderr}"));
                    break;
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// An error report that cannot be written either (stderr is the closed pipe too): the exit
/// status still says how the command ended (1: no such venv), and it is not a panic's 101.
#[test]
fn an_error_into_a_closed_pipe_keeps_its_exit_status() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-venv");
    for _ in 0..6 {
        let mut c = rocbuild_command(&["status", "--venv", missing.to_str().unwrap()]);
        c.env("ROCBUILD_CACHE", tmp.path().join("cache"));
        let code = both_into_closed_pipe(c);
        assert_eq!(code, 1, "exit {code}");
    }
}
