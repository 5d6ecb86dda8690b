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

/// `patch`'s diff as `diff -u` writes one: no `diff --git` or `index` lines.
fn plain_diff(git_diff: &Path) -> String {
    std::fs::read_to_string(git_diff)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("diff --git ") && !l.starts_with("index "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Where no `git` program runs (a Windows machine without Git: rocbuild fetches with libgit2,
/// and applies with it too), a recipe's own fix and a user's `--patch` are applied all the
/// same, `diff -u` patches without git's header lines included: the built op says so.
#[test]
fn fixes_and_patches_apply_where_no_git_program_runs() {
    let w = World::new(DECODE_WAV);
    let fix = plain_diff(&patch(&w, "fix", "* 10", "* 11"));
    let user = w.tmp.path().join("user.patch");
    std::fs::write(&user, plain_diff(&patch(&w, "user", "* 10", "* 12"))).unwrap();
    // A `git` first on PATH that cannot run (as a missing one cannot).
    let bin = w.tmp.path().join("nogit");
    std::fs::create_dir_all(&bin).unwrap();
    write_executable(&bin.join("git"), "#!/bin/sh\nexit 127\n");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let recipe = w.recipes.join("fakecodec.toml");
    let plain = std::fs::read_to_string(&recipe).unwrap();
    let with_fix = plain.replacen(
        "torch = \">=2.9,<2.10\"\n",
        &format!(
            "torch = \">=2.9,<2.10\"\n\n[[release.patch]]\nname = \"times11\"\nwhy = \"a test\"\ndiff = '''\n{fix}'''\n"
        ),
        1,
    );
    assert_ne!(with_fix, plain);
    std::fs::write(&recipe, with_fix).unwrap();
    let mut env = w.env();
    env.push(("PATH", path));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (r, v, c) = (w.recipes.to_str(), w.venv.to_str(), w.cache.to_str());
    let base = [
        "fakecodec",
        "--recipes",
        r.unwrap(),
        "--venv",
        v.unwrap(),
        "--cache",
        c.unwrap(),
    ];
    let out = rocbuild(&base, &env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(custom_op(&w), "44", "the recipe's fix was applied");
    assert!(w.logs().contains("recipe fix: times11"), "{}", w.logs());

    std::fs::write(&recipe, &plain).unwrap();
    let with_patch: Vec<&str> = base
        .iter()
        .copied()
        .chain(["--patch", user.to_str().unwrap()])
        .collect();
    let out = rocbuild(&with_patch, &env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(custom_op(&w), "48", "the user's patch was applied");
}
