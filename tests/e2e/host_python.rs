//! A host Python that cannot run is passed over for the next one, and `-v` says so (issue 38:
//! for a Windows venv, rocbuild ran pyenv's `python3.12` shim, whose version was not active, to
//! install the build tools, and handed it to CMake: both builds failed).

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// `3.11`: the major.minor of the host's python3.
fn host_version() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .expect("python3 on PATH");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A Windows venv of Python `version` as rocbuild reads it from its files: `python.exe`,
/// `pythonXY.dll`, `Lib/site-packages`, `pyvenv.cfg`.
fn windows_venv(dir: &Path, version: &str) -> std::path::PathBuf {
    let venv = dir.join("winvenv");
    std::fs::create_dir_all(venv.join("Lib/site-packages")).unwrap();
    std::fs::write(venv.join("python.exe"), b"MZ").unwrap();
    let dll = format!("python{}.dll", version.replace('.', ""));
    std::fs::write(venv.join(dll), b"MZ").unwrap();
    let cfg = format!("home = C:\\Nowhere\nversion = {version}.1\n");
    std::fs::write(venv.join("pyvenv.cfg"), cfg).unwrap();
    venv
}

/// pyenv's shim of an inactive version first on PATH: with `-v`, rocbuild says it ran it, that
/// it failed with pyenv's words, and which Python it took instead; without `-v`, nothing.
#[test]
fn a_host_python_that_cannot_run_is_passed_over_and_said_with_v() {
    let tmp = tempfile::tempdir().unwrap();
    let version = host_version();
    let venv = windows_venv(tmp.path(), &version);
    let shims = tmp.path().join("shims");
    std::fs::create_dir_all(&shims).unwrap();
    let name = format!("python{version}");
    let shim = shims.join(&name);
    write_executable(
        &shim,
        format!("#!/bin/sh\necho 'pyenv: {name}: command not found' >&2\nexit 127\n"),
    );
    let path = format!(
        "{}:{}",
        shims.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = |verbose: bool| {
        let mut args = vec!["torchcodec", "--venv", venv.to_str().unwrap(), "--dry-run"];
        if verbose {
            args.push("-v");
        }
        let cache = tmp.path().join("cache");
        rocbuild(
            &args,
            &[
                ("PATH", path.as_str()),
                ("ROCBUILD_CACHE", cache.to_str().unwrap()),
            ],
        )
    };
    let out = run(true);
    let said = format!(
        "{} does not run: exit code 127: pyenv: {name}: command not found",
        shim.display()
    );
    assert!(out.stderr.contains(&said), "{said}\n{}", out.stderr);
    let taken = out
        .stderr
        .lines()
        .find(|l| l.contains("host Python: "))
        .unwrap_or_else(|| panic!("no host Python taken:\n{}", out.stderr));
    assert!(!taken.contains(&shims.display().to_string()), "{taken}");
    assert!(taken.contains(&format!("(Python {version})")), "{taken}");
    let quiet = run(false);
    assert!(!quiet.stderr.contains("does not run"), "{}", quiet.stderr);
}
