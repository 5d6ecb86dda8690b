//! The recipes that are TOML only (issue 32), built for real from their upstream sources on
//! this machine and checked by what the package does. They need the upstream git mirror
//! (`$ROCBUILD_TEST_MIRROR`; CI reaches no GitHub, so there they say SKIPPED).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// The mirror holding `repo` (`github.com/owner/name.git`), or None (said).
fn mirror_with(repo: &str) -> Option<PathBuf> {
    let m = PathBuf::from(std::env::var_os("ROCBUILD_TEST_MIRROR")?);
    if m.join(repo).is_dir() {
        Some(m)
    } else {
        eprintln!("SKIPPED: no {repo} under $ROCBUILD_TEST_MIRROR");
        None
    }
}

/// A venv of its own holding the real PyPI torch (hard links to the shared one, which stays
/// untouched) plus `extra` from PyPI.
fn torch_venv_with(dir: &Path, extra: &[&str]) -> PathBuf {
    let venv = dir.join("venv");
    let real = crate::real_torch::real_torch_venv();
    let ok = Command::new("cp")
        .arg("-al")
        .arg(&real)
        .arg(&venv)
        .status()
        .unwrap();
    assert!(ok.success());
    if !extra.is_empty() {
        let out = Command::new(venv.join("bin/python"))
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .args(extra)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    venv
}

/// bitsandbytes 0.50.1's CPU library, built from its tag by the TOML-only recipe: installed
/// where the package loads it, its quantization checked by rocbuild's own verification (8-bit
/// blockwise and NF4 within tolerance, with the native library, not the pure-torch fallback);
/// then status, doctor and restore work on it with no code of their own for it.
#[test]
fn bitsandbytes_cpu_is_built_from_its_tag_and_quantizes() {
    let Some(mirror) = mirror_with("github.com/bitsandbytes-foundation/bitsandbytes.git") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let venv = torch_venv_with(tmp.path(), &["numpy", "packaging"]);
    let v = venv.to_str().unwrap();
    let cache = tmp.path().join("cache");
    let mirror_s = mirror.display().to_string();
    let env = [("ROCBUILD_MIRROR", mirror_s.as_str())];
    let args = [
        "bitsandbytes",
        "--venv",
        v,
        "--cache",
        cache.to_str().unwrap(),
    ];
    // A CPU build: the index's own wheel would do, so it is built only when asked.
    let stock = rocbuild(&args, &env);
    assert_eq!(stock.code, 0, "{}\n{}", stock.stdout, stock.stderr);
    assert!(stock.stdout.contains("no build needed"), "{}", stock.stdout);
    let out = rocbuild(&[&args[..], &["--no-binary"]].concat(), &env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("verified: bitsandbytes 0.50.1 with libbitsandbytes_cpu.so"),
        "{}",
        out.stdout
    );
    let site = venv.join("lib/python3.11/site-packages");
    let lib = std::fs::read(site.join("bitsandbytes/libbitsandbytes_cpu.so")).unwrap();
    assert!(lib.starts_with(b"\x7fELF"));
    let status = rocbuild(&["status", "--venv", v], &[]);
    assert!(
        status.stdout.contains("bitsandbytes 0.50.1: fresh"),
        "{}",
        status.stdout
    );
    let doctor = rocbuild(&["doctor", "--venv", v, "bitsandbytes"], &[]);
    assert_eq!(doctor.code, 0, "{}\n{}", doctor.stdout, doctor.stderr);
    let restore = rocbuild(&["restore", "bitsandbytes", "--venv", v], &[]);
    assert_eq!(restore.code, 0, "{}", restore.stderr);
    assert!(!site.join("bitsandbytes").exists());
}
