//! Concurrent runs: one venv is worked on by one run at a time (the other waits, or refuses
//! with --no-wait); runs on other venvs share the source cache safely.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

fn spawn(w: &World, venv: &std::path::Path) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rocbuild"));
    c.args([
        "fakecodec",
        "--recipes",
        w.recipes.to_str().unwrap(),
        "--venv",
        venv.to_str().unwrap(),
        "--cache",
        w.cache.to_str().unwrap(),
        "-q",
    ]);
    for k in [
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "ROCBUILD_CACHE",
        "LD_LIBRARY_PATH",
        "PYTHONPATH",
    ] {
        c.env_remove(k);
    }
    for (k, v) in w.env() {
        c.env(k, v);
    }
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c.spawn().unwrap()
}

fn finish(c: Child) -> Out {
    let o = c.wait_with_output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

/// Every file the manifest lists is there with its hash; no transaction is left over.
fn assert_consistent(site: &std::path::Path) {
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(site.join(".rocbuild/fakecodec.json")).unwrap(),
    )
    .unwrap();
    for f in m["files"].as_array().unwrap() {
        let p = site.join(f["path"].as_str().unwrap());
        let sha = format!(
            "{:x}",
            <sha2::Sha256 as sha2::Digest>::digest(std::fs::read(&p).unwrap())
        );
        assert_eq!(f["sha256"], sha.as_str(), "{}", p.display());
    }
    assert!(!site.join(".rocbuild/journal.json").exists());
    assert!(!site.join(".rocbuild/txn").exists());
}

#[test]
fn two_concurrent_runs_on_one_venv_the_second_waits_or_refuses() {
    let w = World::new(DECODE_WAV);
    let first = spawn(&w, &w.venv);
    // Wait until the first run holds the lock (its pid is in the lock file).
    let lock = w.site.join(".rocbuild/lock");
    let start = Instant::now();
    while std::fs::read_to_string(&lock).ok().as_deref() != Some(first.id().to_string().as_str()) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the first run never took the lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // --no-wait: refused at once, naming the holder; the venv untouched by it.
    let refused = w.build(&["--no-wait"]);
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    // (miette wraps long lines: compare without the wrapping)
    let flat: String = refused
        .stderr
        .split_whitespace()
        .filter(|t| *t != "|")
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        flat.contains(&format!(
            "another rocbuild run is working on {} (pid {})",
            w.site.display(),
            first.id()
        )),
        "{}",
        refused.stderr
    );
    // Without: waits, saying for whom, then finds everything done.
    let second = spawn(&w, &w.venv);
    let (a, b) = (finish(first), finish(second));
    ok(&a);
    ok(&b);
    assert!(
        a.stdout.contains("fakecodec 1.0.0 installed"),
        "{}",
        a.stdout
    );
    assert!(
        b.stderr
            .contains("waiting for another rocbuild run on this venv (pid "),
        "{}",
        b.stderr
    );
    assert!(
        b.stdout.contains("fakecodec 1.0.0 up to date"),
        "{}",
        b.stdout
    );
    assert_consistent(&w.site);
    // The lock is released and gone (no trace in the venv): status needs no recovery and
    // says fresh.
    assert!(!lock.exists());
    ok(&w.cmd(&["status"], &[]));
}

#[test]
fn runs_on_two_venvs_share_the_source_cache_concurrently() {
    let w = World::new(DECODE_WAV);
    let venv2 = w.tmp.path().join("venv2");
    let site2 = make_venv(&venv2);
    install_fake_torch(&site2, "2.9.1");
    // Same cache, same git clone and checkout, at the same time.
    let a = spawn(&w, &w.venv);
    let b = spawn(&w, &venv2);
    let (a, b) = (finish(a), finish(b));
    ok(&a);
    ok(&b);
    for o in [&a, &b] {
        assert!(
            o.stdout.contains("fakecodec 1.0.0 installed"),
            "{}",
            o.stdout
        );
    }
    assert_consistent(&w.site);
    assert_consistent(&site2);
}
