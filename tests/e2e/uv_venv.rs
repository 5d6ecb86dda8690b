//! A venv made by `uv venv` has no pip (issue 11, item 4): the Python part is installed by uv
//! when uv is found, else by the pip wheel the Python ships, run from outside the venv; nothing
//! else is put into the venv.

use std::path::PathBuf;
use std::process::Command;

use crate::common::*;

/// The fixture world on a venv made by `uv venv` instead of `python -m venv`.
fn uv_world() -> World {
    let w = World::new(DECODE_WAV);
    std::fs::remove_dir_all(&w.venv).unwrap();
    let site = make_uv_venv(&w.venv);
    assert_eq!(site, w.site);
    install_fake_torch(&site, "2.9.1");
    let has_pip = Command::new(w.venv.join("bin/python"))
        .args(["-c", "import pip"])
        .output()
        .unwrap();
    assert!(!has_pip.status.success(), "a uv venv has no pip");
    w
}

/// PATH without any directory holding a `uv`.
fn path_without_uv() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|d| !d.join("uv").exists())
        .collect();
    std::env::join_paths(dirs)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn assert_installed_and_clean(w: &World, out: &Out, installer: &str) {
    ok(out);
    assert!(
        out.stdout.contains("fakecodec 1.0.0 installed"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("verified: decoded 16000 samples"),
        "{}",
        out.stdout
    );
    let import = Command::new(w.venv.join("bin/python"))
        .args(["-c", "import fakecodec; print(fakecodec.__file__)"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
    let di = w.site.join("fakecodec-1.0.0.dist-info");
    assert_eq!(
        std::fs::read_to_string(di.join("INSTALLER"))
            .unwrap()
            .trim(),
        installer
    );
    // pip was not installed into the venv to do it.
    assert!(!w.site.join("pip").exists());
    assert!(!w.logs().contains("No module named pip"));
}

#[test]
fn a_uv_venv_gets_the_python_part_from_uv() {
    let w = uv_world();
    let uv = uv_binary();
    let path = format!("{}:{}", uv.parent().unwrap().display(), path_without_uv());
    let wheels = w.wheels.display().to_string();
    let out = w.cmd(
        &["fakecodec", "-q"],
        &[
            ("PATH", &path),
            ("UV_OFFLINE", "1"),
            ("UV_FIND_LINKS", &wheels),
            ("UV_NO_CONFIG", "1"),
        ],
    );
    assert_installed_and_clean(&w, &out, "uv");
}

#[test]
fn a_uv_venv_without_uv_on_path_gets_the_python_part_from_the_bundled_pip() {
    let w = uv_world();
    let path = path_without_uv();
    let out = w.cmd(&["fakecodec", "-q"], &[("PATH", &path)]);
    assert_installed_and_clean(&w, &out, "pip");
}
