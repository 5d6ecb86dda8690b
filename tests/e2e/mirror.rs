//! ROCBUILD_MIRROR: an air-gapped clone, submodules included.

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
