//! Error output, snapshotted: what, where, how to fix; and the venv untouched.

use crate::common::*;

fn snap(name: &str, out: &Out, tmp: &std::path::Path) {
    let text = format!(
        "exit code: {}\n--- stdout\n{}\n--- stderr\n{}",
        out.code,
        redact(&out.stdout, tmp),
        redact(&out.stderr, tmp)
    );
    insta::assert_snapshot!(name, text);
}

fn recipe_dir(text: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("bad.toml"), text).unwrap();
    d
}

const GOOD: &str = "[package]\nname = \"bad\"\ndistribution = \"bad\"\nimport-dir = \"bad\"\n\n[source]\ngit = \"https://example.invalid/acme/bad\"\ntag = \"v{version}\"\n\n[[release]]\nversion = \"1.0\"\ntorch = \">=2.9\"\n\n[install]\nartifacts = [\"libbad*\"]\n";

#[test]
fn malformed_recipe_points_at_line_and_column() {
    let d = recipe_dir(&GOOD.replace("tag = \"v{version}\"", "tag = \"v{version}"));
    let out = rocbuild(&["recipes", "--recipes", d.path().to_str().unwrap()], &[]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("bad.toml:8:"), "{}", out.stderr);
    snap("malformed_recipe", &out, d.path());
}

#[test]
fn unknown_key_suggests_the_nearest() {
    let d = recipe_dir(&GOOD.replace("artifacts = ", "artifact = "));
    let out = rocbuild(&["recipes", "--recipes", d.path().to_str().unwrap()], &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("did you mean `artifacts`?"),
        "{}",
        out.stderr
    );
    snap("unknown_key", &out, d.path());
}

#[test]
fn wrong_type_is_pointed_at() {
    let d = recipe_dir(&GOOD.replace("artifacts = [\"libbad*\"]", "artifacts = \"libbad*\""));
    let out = rocbuild(&["recipes", "--recipes", d.path().to_str().unwrap()], &[]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("bad.toml:15:13"), "{}", out.stderr);
    snap("wrong_type", &out, d.path());
}

#[test]
fn unknown_template_variable_is_pointed_at() {
    let d = recipe_dir(&format!("{GOOD}finds = [\"{{torch.libb}}\"]\n"));
    let out = rocbuild(&["recipes", "--recipes", d.path().to_str().unwrap()], &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("bad.toml:16:11: unknown template variable `{torch.libb}`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("did you mean `{torch.lib}`?"),
        "{}",
        out.stderr
    );
    snap("unknown_template_variable", &out, d.path());
}

#[test]
fn unknown_recipe_suggests_the_nearest() {
    let out = rocbuild(&["torchcodc", "--venv", "/nonexistent"], &[]);
    assert_eq!(out.code, 1);
    snap("unknown_recipe", &out, std::path::Path::new("/nonexistent"));
}

#[test]
fn venv_without_torch() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    make_venv(&venv);
    let before = tree_state(&venv);
    let out = rocbuild(
        &[
            "torchcodec",
            "--venv",
            venv.to_str().unwrap(),
            "--cache",
            tmp.path().join("c").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("no torch in"), "{}", out.stderr);
    assert_eq!(tree_state(&venv), before);
    snap("venv_without_torch", &out, tmp.path());
}

#[test]
fn incompatible_version_is_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let site = make_venv(&venv);
    install_fake_torch(&site, "2.9.1");
    let before = tree_state(&venv);
    let cache = tmp.path().join("c");
    let args = [
        "torchcodec",
        "--venv",
        venv.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
        "--version",
        "0.15.0",
        "--dry-run",
    ];
    let out = rocbuild(&args, &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("torchcodec 0.15.0 does not support torch 2.9.1: it needs torch >=2.11"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("0.9.1, 0.9.0"), "{}", out.stderr);
    snap("incompatible_version", &out, tmp.path());
    // --force overrides.
    let mut forced = args.to_vec();
    forced.push("--force");
    let out = rocbuild(&forced, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("plan: torchcodec 0.15.0 (--version (forced"),
        "{}",
        out.stdout
    );
    // Without --version: the newest compatible release.
    let out = rocbuild(&[&args[..5], &["--dry-run"]].concat(), &[]);
    assert!(
        out.stdout
            .contains("plan: torchcodec 0.9.1 (newest release compatible with torch 2.9.1)"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert_eq!(tree_state(&venv), before);
}

#[test]
fn missing_cmake_names_the_install_command() {
    let w = World::new(DECODE_WAV);
    // A PATH with everything but cmake.
    let bin = w.tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["cc", "c++", "ninja", "pkg-config", "git", "python3"] {
        if let Ok(p) = which(tool) {
            std::os::unix::fs::symlink(p, bin.join(tool)).unwrap();
        }
    }
    let before = tree_state(&w.venv);
    let out = rocbuild(
        &[
            "fakecodec",
            "--recipes",
            w.recipes.to_str().unwrap(),
            "--venv",
            w.venv.to_str().unwrap(),
            "--cache",
            w.cache.to_str().unwrap(),
        ],
        &[("PATH", bin.to_str().unwrap())],
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("cmake not found on PATH"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("apt-get install cmake"),
        "{}",
        out.stderr
    );
    assert_eq!(tree_state(&w.venv), before);
    snap("missing_cmake", &out, w.tmp.path());
}

fn which(tool: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(tool))
                .find(|p| p.exists())
        })
        .ok_or(())
}

#[test]
fn unreachable_source_names_every_place_tried() {
    let w = World::new(DECODE_WAV);
    let recipe = fixture_recipe("https://example.invalid/acme/fakecodec", true, DECODE_WAV);
    std::fs::write(w.recipes.join("fakecodec.toml"), recipe).unwrap();
    let mirror = w.tmp.path().join("empty-mirror");
    std::fs::create_dir_all(&mirror).unwrap();
    let before = tree_state(&w.venv);
    let env = w.env();
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.push(("ROCBUILD_MIRROR", mirror.to_str().unwrap()));
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
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("empty-mirror/example.invalid/acme/fakecodec.git: does not exist"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("https://example.invalid/acme/fakecodec:"),
        "{}",
        out.stderr
    );
    assert_eq!(tree_state(&w.venv), before);
    snap("unreachable_source", &out, w.tmp.path());
}
