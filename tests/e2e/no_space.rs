//! Out of space is said as such (issue 38: a full disk was reported as an unreachable source,
//! or as a damaged artifact). The real binary runs with its cache on a real full filesystem:
//! a small tmpfs mounted in a mount namespace of its own (`unshare`), so that nothing outside
//! the test sees it; where this machine allows no such namespace, the test says SKIPPED.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::*;
use rocbuild_testkit::downloads::FileServer;

/// `cmd` run with a fresh tmpfs of `size` (`64k`) mounted at `dir`, seen by it alone; None
/// when this machine cannot make one (no root and no user namespaces).
fn with_full_disk(dir: &Path, size: &str, cmd: &Command) -> Option<Out> {
    std::fs::create_dir_all(dir).unwrap();
    let script =
        r#"mount -t tmpfs -o "size=$1,mode=0755" tmpfs "$2" || exit 97; shift 2; exec "$@""#;
    for unshare in [
        &["--mount"][..],
        &["--user", "--map-root-user", "--mount"][..],
    ] {
        let mut c = Command::new("unshare");
        c.args(unshare)
            .args(["--propagation", "private", "sh", "-c", script, "sh", size])
            .arg(dir)
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        let Ok(o) = c.output() else { continue };
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        if o.status.code() == Some(97) || stderr.starts_with("unshare: ") {
            continue;
        }
        return Some(Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into(),
            stderr,
        });
    }
    rocbuild_testkit::skip::skipped(
        "no mount namespace here (unshare --mount, with or without --user)",
    );
    None
}

/// The message of a full disk at a path under `dir`: says so first, names the path and what
/// is free, and says what to free; never "cannot get the source", "damaged" or "download".
fn says_no_space(out: &Out, dir: &Path) {
    let text = out.stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = text.replace(" | ", " ");
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(text.contains("rocbuild::no_space"), "{}", out.stderr);
    assert!(
        text.contains("x no space left on device: cannot "),
        "{}",
        out.stderr
    );
    assert!(text.contains(&dir.display().to_string()), "{}", out.stderr);
    assert!(text.contains(" free on that filesystem)"), "{}", out.stderr);
    assert!(text.contains("rocbuild clean --builds"), "{}", out.stderr);
    for wrong in [
        "cannot get the source",
        "unreachable",
        "damaged",
        "downloading",
    ] {
        assert!(!text.contains(wrong), "{wrong}: {}", out.stderr);
    }
}

/// A build whose cache is on a full disk: the clone of the source finds no space (before,
/// "cannot get the source …", code rocbuild::source::unreachable); the venv is untouched.
#[test]
fn a_clone_into_a_full_cache_says_no_space() {
    let w = World::new(DECODE_WAV);
    let before = tree_state(&w.venv);
    let mut cmd = rocbuild_command(&[
        "fakecodec",
        "--recipes",
        w.recipes.to_str().unwrap(),
        "--venv",
        w.venv.to_str().unwrap(),
        "--cache",
        w.cache.to_str().unwrap(),
        "-q",
    ]);
    for (k, v) in w.env() {
        cmd.env(k, v);
    }
    let Some(out) = with_full_disk(&w.cache, "48k", &cmd) else {
        return;
    };
    says_no_space(&out, &w.cache);
    assert_eq!(tree_state(&w.venv), before);
}

/// `rocbuild ffmpeg` downloading into a full cache: the write of the download finds no space
/// (before, "cannot write …" with no help).
#[test]
fn a_download_into_a_full_cache_says_no_space() {
    let body: Vec<u8> = (0..512 * 1024u32)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    let sha = rocbuild_testkit::downloads::sha256_hex(&body);
    let srv = FileServer::start(BTreeMap::from([(
        "/ffmpeg-7.1.1-full_build-shared.zip".to_string(),
        body,
    )]));
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let url = format!("{}/ffmpeg-7.1.1-full_build-shared.zip", srv.base);
    let mut cmd = rocbuild_command(&["ffmpeg", "--url", &url, "--sha256", &sha]);
    cmd.env("ROCBUILD_CACHE", &cache);
    let Some(out) = with_full_disk(&cache, "64k", &cmd) else {
        return;
    };
    says_no_space(&out, &cache.join("downloads"));
}
