//! ROCBUILD_MIRROR: an air-gapped clone, submodules included.

use std::path::Path;
use std::process::Command;

use crate::common::*;

#[test]
fn clones_from_the_mirror_with_submodules_and_no_network() {
    let w = World::new(DECODE_WAV);
    // The mirror holds DIR/HOST/OWNER/REPO.git; the host does not resolve, so the network
    // cannot be what served it.
    let mirror = w.tmp.path().join("mirror");
    let owner = mirror.join("example.invalid/acme");
    std::fs::create_dir_all(&owner).unwrap();
    std::fs::rename(w.repos.join("fakecodec.git"), owner.join("fakecodec.git")).unwrap();
    std::fs::rename(w.repos.join("fakesub.git"), owner.join("fakesub.git")).unwrap();
    // Like a real snapshot of a GitHub repository: a ref nobody builds names a commit whose
    // objects are gone. Only the release is fetched, so it does not matter.
    break_an_unrelated_ref(&owner.join("fakecodec.git"), "refs/pull/1/head");
    break_an_unrelated_ref(&owner.join("fakesub.git"), "refs/heads/gh-pages");
    let recipe = fixture_recipe("https://example.invalid/acme/fakecodec", true, DECODE_WAV);
    std::fs::write(w.recipes.join("fakecodec.toml"), recipe).unwrap();
    let env = w.env();
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.push(("ROCBUILD_MIRROR", mirror.to_str().unwrap()));
    env.push(("https_proxy", "http://127.0.0.1:9"));
    let out = rocbuild(
        &[
            "fakecodec",
            "--recipes",
            w.recipes.to_str().unwrap(),
            "--venv",
            w.venv.to_str().unwrap(),
            "--cache",
            w.cache.to_str().unwrap(),
            "-q",
        ],
        &env,
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    // The submodule's header was needed by the build: it was checked out from the mirror.
    let checkout = w.cache.join("src").join("fakecodec-v1.0.0");
    assert_eq!(
        std::fs::read_to_string(checkout.join(".rocbuild-commit"))
            .unwrap()
            .split(' ')
            .next()
            .unwrap(),
        w.commit
    );
    assert!(checkout.join("third_party/sub/answer.h").exists());
    assert!(
        out.stdout.contains("decoded 16000 samples"),
        "{}",
        out.stdout
    );
}

/// Point `name` in the bare repository `repo` at a new commit, then delete that commit's
/// object: `git fetch` of any other ref still works, libgit2's local transport did not.
fn break_an_unrelated_ref(repo: &Path, name: &str) {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let commit = git(&["commit-tree", "-m", "unrelated", "HEAD^{tree}"]);
    git(&["update-ref", name, &commit]);
    let loose = repo.join("objects").join(&commit[..2]).join(&commit[2..]);
    std::fs::remove_file(&loose).unwrap();
    // Broken as intended: git itself cannot read that ref.
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["cat-file", "-e", name])
        .output()
        .unwrap();
    assert!(!out.status.success());
}
