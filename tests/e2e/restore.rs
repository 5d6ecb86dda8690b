//! `rocbuild restore`: the package exactly as pip installed it, every file hashed.

use std::process::Command;

use crate::common::*;

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

/// The venv's Python, run as a user would (bytecode written, no rocbuild environment).
fn python(venv: &std::path::Path, code: &str) -> std::process::Output {
    Command::new(venv.join("bin/python"))
        .args(["-c", code])
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .env_remove("PYTHONPATH")
        .output()
        .unwrap()
}

fn pip_list(venv: &std::path::Path) -> String {
    run(Command::new(venv.join("bin/python")).args([
        "-m",
        "pip",
        "list",
        "--disable-pip-version-check",
        "--format=freeze",
    ]))
}

#[test]
fn restore_after_rocbuild_installed_the_python_part_leaves_no_package_at_all() {
    // The venv never had the package: rocbuild installed its pure-Python part itself (and
    // dropped the wheel's prebuilt library). Restore must give back the venv as it was: no
    // package, no dist-info, no bytecode, no .rocbuild/. The venv's path holds spaces and
    // non-ASCII letters.
    let w = World::with_venv_named(DECODE_WAV, "my venv ünïcødé");
    let before = tree_state(&w.venv);
    ok(&w.build(&[]));
    assert!(pip_list(&w.venv).contains("fakecodec==1.0.0"));
    // The user imports it (Python writes __pycache__ into the package).
    let imported = python(&w.venv, "import fakecodec");
    assert!(imported.status.success(), "{imported:?}");
    assert!(w.site.join("fakecodec/__pycache__").is_dir());
    // A rebuild with another define reinstalls over rocbuild's own install: the backup
    // must still describe the venv before the first one.
    ok(&w.build(&["-D", "FAKECODEC_EXTRA_FILES=1"]));
    // A preload hook-like file the manifest lists as added by rocbuild: restore removes it.
    let manifest = w.site.join(".rocbuild/fakecodec.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    m["extra_files"] = serde_json::json!(["fakecodec/_rocbuild_preload.py"]);
    m.as_object_mut().unwrap().remove("seal");
    write_sealed_manifest(&w.site, &w.cache, &serde_json::to_string(&m).unwrap());
    std::fs::write(w.site.join("fakecodec/_rocbuild_preload.py"), "# preload\n").unwrap();

    let out = w.cmd(&["restore", "fakecodec"], &[]);
    ok(&out);
    assert!(
        out.stdout
            .contains("removed:  fakecodec-1.0.0.dist-info/RECORD"),
        "{}",
        out.stdout
    );
    assert_eq!(tree_state(&w.venv), before);
    assert!(!pip_list(&w.venv).contains("fakecodec"));
    let gone = python(&w.venv, "import fakecodec");
    assert!(!gone.status.success());
    // status agrees: nothing of rocbuild's here.
    let st = w.cmd(&["status"], &[]);
    assert!(st.stdout.contains("no rocbuild builds"), "{}", st.stdout);
}

#[test]
fn restore_after_rocbuild_replaced_another_version_gives_pips_version_back() {
    // pip had 0.9.0; rocbuild installs 1.0.0 (its Python part replaces pip's): restore gives
    // back 0.9.0 exactly as pip installed it, and nothing of 1.0.0.
    let w = World::new(DECODE_WAV);
    make_wheel(&w.wheels, "fakecodec", "0.9.0");
    pip_install(&w.venv, &w.wheels, "fakecodec==0.9.0");
    let pip_state = tree_state(&w.venv);
    ok(&w.build(&[]));
    assert!(pip_list(&w.venv).contains("fakecodec==1.0.0"));
    ok(&w.cmd(&["restore", "fakecodec"], &[]));
    assert_eq!(tree_state(&w.venv), pip_state);
    assert!(pip_list(&w.venv).contains("fakecodec==0.9.0"));
    assert_record_true(&w.site, "fakecodec-0.9.0.dist-info");
}
