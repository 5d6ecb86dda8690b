//! `rocbuild status` after each kind of change, and `rocbuild rebuild --if-stale`.

use std::process::Command;

use crate::common::*;

fn json(out: &Out) -> serde_json::Value {
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

#[test]
fn status_says_fresh_stale_overwritten_or_missing_and_why() {
    let w = World::new(DECODE_WAV);
    ok(&w.build(&[]));
    let major = w.ffmpeg_major();
    let core = w
        .site
        .join(format!("fakecodec/libfakecodec_core{major}.so"));
    let core_rel = format!("fakecodec/libfakecodec_core{major}.so");

    // Fresh, and nothing hashed: size and mtime match the manifest.
    let out = w.cmd(&["status"], &[]);
    ok(&out);
    assert_eq!(out.stdout.trim(), "fakecodec 1.0.0: fresh");
    let j = json(&w.cmd(&["status", "--json"], &[]));
    assert_eq!(j["recipes"][0]["state"], "fresh");
    assert_eq!(j["recipes"][0]["hashed"], 0);

    // Overwritten (pip reinstalled the wheel's file over ours).
    let good = std::fs::read(&core).unwrap();
    std::fs::write(&core, b"the wheel's prebuilt library").unwrap();
    let out = w.cmd(&["status"], &[]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stdout.contains("fakecodec 1.0.0: overwritten"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!("overwritten: {core_rel}")),
        "{}",
        out.stdout
    );
    // Same bytes again with a new mtime: hashed once, fresh.
    std::fs::write(&core, &good).unwrap();
    let j = json(&w.cmd(&["status", "--json"], &[]));
    assert_eq!(j["recipes"][0]["state"], "fresh");
    assert_eq!(j["recipes"][0]["hashed"], 1);

    // torch upgraded.
    let version_py = w.site.join("torch/version.py");
    let torch_text = std::fs::read_to_string(&version_py).unwrap();
    std::fs::write(&version_py, torch_text.replace("'2.9.1'", "'2.10.0'")).unwrap();
    let out = w.cmd(&["status"], &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stdout.contains("fakecodec 1.0.0: stale"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("stale: torch 2.9.1 → 2.10.0"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("fix: rocbuild rebuild fakecodec"),
        "{}",
        out.stdout
    );
    std::fs::write(&version_py, &torch_text).unwrap();

    // FFmpeg: pkg-config now finds another major first (as after installing FFmpeg 8 in
    // /usr/local), through a real .pc file.
    let pc = w.tmp.path().join("pkgconfig");
    std::fs::create_dir_all(&pc).unwrap();
    std::fs::write(
        pc.join("libavutil.pc"),
        "prefix=/opt/ffmpeg8\nlibdir=${prefix}/lib\nincludedir=${prefix}/include\n\nName: libavutil\nDescription: FFmpeg utility library\nVersion: 60.8.100\nLibs: -L${libdir} -lavutil\nCflags: -I${includedir}\n",
    )
    .unwrap();
    let out = w.cmd(&["status"], &[("PKG_CONFIG_PATH", pc.to_str().unwrap())]);
    assert_eq!(out.code, 1);
    assert!(
        out.stdout.contains(&format!("stale: FFmpeg {major} → 8")),
        "{}",
        out.stdout
    );
    ok(&w.cmd(&["status"], &[]));

    // The recipe changed.
    let recipe = w.recipes.join("fakecodec.toml");
    let text = std::fs::read_to_string(&recipe).unwrap();
    std::fs::write(&recipe, text.replace("Release", "RelWithDebInfo")).unwrap();
    let out = w.cmd(&["status"], &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stdout.contains("stale: recipe changed ("),
        "{}",
        out.stdout
    );
    std::fs::write(&recipe, &text).unwrap();
    ok(&w.cmd(&["status"], &[]));

    // Missing (deleted or uninstalled).
    std::fs::rename(&core, w.tmp.path().join("core.so")).unwrap();
    let out = w.cmd(&["status"], &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stdout.contains("fakecodec 1.0.0: missing"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!("missing: {core_rel}")),
        "{}",
        out.stdout
    );
    std::fs::rename(w.tmp.path().join("core.so"), &core).unwrap();

    // A venv without rocbuild builds: fine, and status leaves no trace in it.
    let other = w.tmp.path().join("other");
    make_venv(&other);
    let before = tree_state(&other);
    let out = rocbuild(&["status", "--venv", other.to_str().unwrap()], &[]);
    ok(&out);
    assert!(
        out.stdout.starts_with("no rocbuild builds in "),
        "{}",
        out.stdout
    );
    assert_eq!(tree_state(&other), before);
}

#[test]
fn rebuild_if_stale_repeats_the_recorded_options_and_is_silent_when_fresh() {
    let w = World::new(DECODE_WAV);
    // Build with an option the rebuild must repeat.
    ok(&w.build(&["-D", "FAKECODEC_EXTRA_FILES=2"]));
    let manifest = w.site.join(".rocbuild/fakecodec.json");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    assert_eq!(m["options"]["defines"][0][0], "FAKECODEC_EXTRA_FILES");

    // Nothing stale: no output at all, exit 0 (what a scheduler wants).
    let out = w.cmd(&["rebuild", "--if-stale", "-q"], &[]);
    ok(&out);
    assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("", ""));

    // A torch upgrade within the release's range: rebuilt against it, same options.
    let version_py = w.site.join("torch/version.py");
    let text = std::fs::read_to_string(&version_py).unwrap();
    std::fs::write(&version_py, text.replace("'2.9.1'", "'2.9.2'")).unwrap();
    let out = w.cmd(&["rebuild", "--if-stale", "-q"], &[]);
    ok(&out);
    assert!(
        out.stdout
            .contains("rebuilding fakecodec (stale: torch 2.9.1 → 2.9.2)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("fakecodec 1.0.0 installed"),
        "{}",
        out.stdout
    );
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    assert_eq!(m["torch_version"], "2.9.2");
    assert_eq!(m["defines"]["FAKECODEC_EXTRA_FILES"], "2");
    ok(&w.cmd(&["status"], &[]));

    // Again: silent.
    let out = w.cmd(&["rebuild", "--if-stale", "-q"], &[]);
    ok(&out);
    assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("", ""));

    // A recipe not built here is an error that names what is.
    let out = w.cmd(&["rebuild", "torchcodec"], &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("rocbuild has not installed torchcodec in"),
        "{}",
        out.stderr
    );
}

/// A typo in one user recipe (`ROCBUILD_RECIPES`) blocks nothing else: `status` and the
/// built-in recipes work, with a warning naming the file and line; asking for that recipe by
/// name still shows its whole diagnostic.
#[test]
fn a_broken_user_recipe_is_skipped_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    run(Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv));
    install_fake_torch(&site_packages(&venv), "2.9.1");
    let recipes = tmp.path().join("recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    let mine = recipes.join("mine.toml");
    std::fs::write(
        &mine,
        "[package]\nname = \"mine\"\ndistribution = \"mine\"\nimport-dir = \"mine\"\n\n[source]\ngit = \"https://example.invalid/acme/mine\"\ntag = \"v{version}\n",
    )
    .unwrap();
    let dirs = recipes.to_str().unwrap();
    let env = [("ROCBUILD_RECIPES", dirs)];
    let venv_s = venv.to_str().unwrap();
    let at = format!("{}:8:", mine.display());

    let out = rocbuild(&["status", "--venv", venv_s], &env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(&format!("skipped {at}")),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(&at), "{}", out.stderr);
    assert!(
        out.stderr.contains("`rocbuild mine` shows the whole error"),
        "{}",
        out.stderr
    );

    let out = rocbuild(&["recipes"], &env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("torchcodec"), "{}", out.stdout);
    assert!(out.stdout.contains("ctranslate2"), "{}", out.stdout);

    let out = rocbuild(&["mine", "--venv", venv_s, "--dry-run"], &env);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("rocbuild::recipe::invalid"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(&at), "{}", out.stderr);
}

/// A venv whose `lib/` also holds a newer Python's site-packages (left behind by an older
/// venv, or made by hand): the lock, the install, `status` and `restore` all use the one
/// site-packages the venv's own Python uses (its pyvenv.cfg), not the newest directory.
#[test]
fn the_lock_and_the_install_use_the_same_site_packages() {
    let w = World::new(DECODE_WAV);
    let decoy = w.venv.join("lib/python3.99/site-packages");
    std::fs::create_dir_all(&decoy).unwrap();
    ok(&w.build(&[]));
    assert!(
        w.site.join(".rocbuild/fakecodec.json").is_file(),
        "the manifest is in the Python's site-packages"
    );
    assert!(
        !decoy.join(".rocbuild").exists(),
        "nothing of rocbuild's (lock, journal) went to the decoy"
    );
    let out = w.cmd(&["status"], &[]);
    ok(&out);
    assert_eq!(out.stdout.trim(), "fakecodec 1.0.0: fresh");
    // A second build is a no-op under the same lock.
    let again = w.build(&[]);
    ok(&again);
    assert!(again.stdout.contains("up to date"), "{}", again.stdout);
}
