//! `rocbuild restore`: the package exactly as pip installed it, every file hashed.

use std::process::Command;

use crate::common::*;

fn pip_install(venv: &std::path::Path, wheels: &std::path::Path, spec: &str) {
    run(Command::new(venv.join("bin/python")).args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-index",
        "--no-deps",
        "--no-compile",
        "--find-links",
        wheels.to_str().unwrap(),
        spec,
    ]));
}

/// Every RECORD row names a file that is there with that hash and size.
fn assert_record_true(site: &std::path::Path, di: &str) {
    use base64::Engine;
    use sha2::Digest;
    let text = std::fs::read_to_string(site.join(di).join("RECORD")).unwrap();
    for line in text.lines() {
        let mut it = line.rsplitn(3, ',');
        let (size, hash, path) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
        let bytes = std::fs::read(site.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        if !hash.is_empty() {
            let want = format!(
                "sha256={}",
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(sha2::Sha256::digest(&bytes))
            );
            assert_eq!(hash, want, "{path}");
            assert_eq!(size, bytes.len().to_string(), "{path}");
        }
    }
}

#[test]
fn restore_puts_back_pips_install_byte_for_byte() {
    // pip installed the package first (its prebuilt library for another FFmpeg included).
    let w = World::new(DECODE_WAV);
    pip_install(&w.venv, &w.wheels, "fakecodec==1.0.0");
    let pip_state = tree_state(&w.venv);
    ok(&w.build(&[]));
    assert_ne!(tree_state(&w.venv), pip_state);
    assert!(!w.site.join("fakecodec/libfakecodec_core4.so").exists());

    let out = w.cmd(&["restore", "fakecodec"], &[]);
    ok(&out);
    assert!(
        out.stdout
            .contains("restored: fakecodec/libfakecodec_core4.so"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("restored: fakecodec-1.0.0.dist-info/RECORD"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("removed:  fakecodec/libfakecodec_custom_ops"),
        "{}",
        out.stdout
    );
    // Every file of the venv, hashed: exactly pip's state (no .rocbuild/ either).
    assert_eq!(tree_state(&w.venv), pip_state);
    assert_record_true(&w.site, "fakecodec-1.0.0.dist-info");

    // Restoring again: nothing installed by rocbuild, and it says so.
    let out = w.cmd(&["restore", "fakecodec"], &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("rocbuild has not installed fakecodec in"),
        "{}",
        out.stderr
    );
    assert_eq!(tree_state(&w.venv), pip_state);
}

#[test]
fn restore_after_rocbuild_installed_the_python_part_gives_the_wheel_as_pip_installs_it() {
    // rocbuild installed the pure-Python part itself (the venv never had the package), and
    // dropped the wheel's prebuilt library; restore must give back what `pip install` gives.
    let w = World::new(DECODE_WAV);
    ok(&w.build(&[]));
    // A preload hook-like file the manifest lists as added by rocbuild: restore removes it.
    let manifest = w.site.join(".rocbuild/fakecodec.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    m["extra_files"] = serde_json::json!(["fakecodec/_rocbuild_preload.py"]);
    std::fs::write(&manifest, serde_json::to_string(&m).unwrap()).unwrap();
    std::fs::write(w.site.join("fakecodec/_rocbuild_preload.py"), "# preload\n").unwrap();

    ok(&w.cmd(&["restore", "fakecodec"], &[]));
    assert!(!w.site.join(".rocbuild").exists());
    assert_record_true(&w.site, "fakecodec-1.0.0.dist-info");

    // The same wheel installed by pip into a twin venv: same files, same bytes.
    let twin = w.tmp.path().join("twin");
    let twin_site = make_venv(&twin);
    pip_install(&twin, &w.wheels, "fakecodec==1.0.0");
    let pkg = |site: &std::path::Path| {
        tree_state(site)
            .into_iter()
            .filter(|(k, _)| k.starts_with("fakecodec"))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let restored = pkg(&w.site);
    assert!(
        restored.contains_key("fakecodec/libfakecodec_core4.so"),
        "{restored:#?}"
    );
    assert_eq!(restored, pkg(&twin_site));
}
