//! `--patch FILE`: a user's patch applied to the checkout, recorded with its sha256 in the
//! manifest, repeated by `rebuild`; a changed patch makes the build stale; a patch that does
//! not apply stops before configure and leaves the checkout as git wrote it (issue 11, item 9).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// A patch made with `git diff` on a clone of the fixture: the custom op multiplies by `k`.
fn patch(w: &World, name: &str, from: &str, to: &str) -> PathBuf {
    let clone = w.tmp.path().join(format!("clone-{name}"));
    run(Command::new("git")
        .args(["clone", "-q"])
        .arg(w.repos.join("fakecodec.git"))
        .arg(&clone));
    let f = clone.join("src/custom_ops.cpp");
    let text = std::fs::read_to_string(&f).unwrap();
    assert!(text.contains(from), "{text}");
    std::fs::write(&f, text.replace(from, to)).unwrap();
    let diff = run(Command::new("git").arg("-C").arg(&clone).arg("diff"));
    let p = w.tmp.path().join(format!("{name}.patch"));
    std::fs::write(&p, diff).unwrap();
    p
}

fn custom_op(w: &World) -> String {
    let ops = w.site.join(format!(
        "fakecodec/libfakecodec_custom_ops{}.so",
        w.ffmpeg_major()
    ));
    let out = Command::new(w.venv.join("bin/python"))
        .args([
            "-c",
            &format!(
                "import ctypes; print(ctypes.CDLL('{}').fakecodec_custom_op())",
                ops.display()
            ),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn sha256(p: &Path) -> String {
    format!(
        "{:x}",
        <sha2::Sha256 as sha2::Digest>::digest(std::fs::read(p).unwrap())
    )
}

#[test]
fn a_patch_is_applied_recorded_and_repeated_by_rebuild() {
    let w = World::new(DECODE_WAV);
    let p = patch(&w, "times11", "* 10", "* 11");
    ok(&w.build(&["--patch", p.to_str().unwrap()]));
    assert_eq!(custom_op(&w), "44");
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(w.site.join(".rocbuild/fakecodec.json")).unwrap(),
    )
    .unwrap();
    let patches = m["options"]["patches"].as_array().unwrap();
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0]["path"], p.to_str().unwrap());
    assert_eq!(patches[0]["sha256"], sha256(&p).as_str());
    let st = w.cmd(&["status"], &[]);
    assert_eq!(st.code, 0, "{}\n{}", st.stdout, st.stderr);

    // The patch changes: the build is stale, and rebuild applies the new one.
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, text.replace("* 11", "* 12")).unwrap();
    let st = w.cmd(&["status"], &[]);
    assert_eq!(st.code, 1, "{}\n{}", st.stdout, st.stderr);
    assert!(
        st.stdout.contains("changed since it was applied"),
        "{}",
        st.stdout
    );
    ok(&w.cmd(&["rebuild", "fakecodec", "-q"], &[]));
    assert_eq!(custom_op(&w), "48");
}

#[test]
fn a_patch_that_does_not_apply_stops_before_configure_and_leaves_the_checkout_clean() {
    let w = World::new(DECODE_WAV);
    let good = patch(&w, "good", "* 10", "* 11");
    let bad = patch(&w, "bad", "* 10", "* 13");
    // `bad` against the source `good` already changed: it does not apply.
    let before = tree_state(&w.venv);
    let out = w.build(&[
        "--patch",
        good.to_str().unwrap(),
        "--patch",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("does not apply"), "{}", out.stderr);
    assert!(out.stderr.contains("bad.patch"), "{}", out.stderr);
    assert_eq!(tree_state(&w.venv), before);
    assert!(!w.logs().contains("==> configure"), "{}", w.logs());
    // The checkout is as git wrote it: the good patch was taken back.
    let checkout = std::fs::read_dir(w.cache.join("src"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("-patched-"))
        .expect("the patched checkout");
    let src = std::fs::read_to_string(checkout.join("src/custom_ops.cpp")).unwrap();
    assert!(src.contains("* 10"), "{src}");
    assert!(!checkout.join(".rocbuild-patches").exists());
}

/// Where no `git` program runs (a Windows machine without Git: rocbuild fetches with libgit2,
/// so nothing else needs one), a `--patch` is refused naming git and how to get it, not as a
/// patch that "does not apply"; before anything is fetched (no clone, no checkout), nothing is
/// configured and the venv is unchanged.
#[test]
fn a_patch_without_a_git_program_names_git_and_how_to_get_it() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new(DECODE_WAV);
    let good = patch(&w, "good", "* 10", "* 11");
    // A `git` first on PATH that cannot run (as a missing one cannot).
    let bin = w.tmp.path().join("nogit");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("git"), "#!/bin/sh\nexit 127\n").unwrap();
    std::fs::set_permissions(bin.join("git"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let before = tree_state(&w.venv);
    let mut env = w.env();
    env.push(("PATH", path));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (r, v, c) = (w.recipes.to_str(), w.venv.to_str(), w.cache.to_str());
    let out = rocbuild(
        &[
            "fakecodec",
            "--recipes",
            r.unwrap(),
            "--venv",
            v.unwrap(),
            "--cache",
            c.unwrap(),
            "--patch",
            good.to_str().unwrap(),
        ],
        &env,
    );
    let text = out.stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_ne!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        text.contains("git not found on PATH (needed to apply the --patch files to the source)"),
        "{text}"
    );
    assert!(text.contains("winget install Git.Git"), "{text}");
    assert!(!text.contains("does not apply"), "{text}");
    assert_eq!(tree_state(&w.venv), before);
    assert!(!w.logs().contains("==> configure"), "{}", w.logs());
    for fetched in ["git", "src"] {
        assert!(
            !w.cache.join(fetched).exists(),
            "{fetched}: the source was fetched before git was found missing"
        );
    }
}
