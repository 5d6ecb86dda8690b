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

/// Which venv rocbuild acts on when nothing names one (issue 30): `pip install rocbuild` put
/// the binary into the user's venv, so that venv — but never a tool installer's private
/// environment (`uv tool install`, `uvx`, `pipx`), which holds rocbuild alone: then `./.venv`.
/// The real binary is copied into real venvs laid out as each installer lays them out.
#[test]
fn with_no_venv_named_rocbuild_acts_on_the_venv_it_is_installed_in_but_not_a_tool_env() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // The user's project, with its own ./.venv (the last resort).
    let project = root.join("project");
    make_venv(&project.join(".venv"));
    let installed_in = |venv: &std::path::Path| -> String {
        let bin = venv.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let exe = bin.join("rocbuild");
        copy_executable(std::path::Path::new(env!("CARGO_BIN_EXE_rocbuild")), &exe);
        let out = Command::new(&exe)
            .args(["status", "--json"])
            .current_dir(&project)
            .env_remove("VIRTUAL_ENV")
            .env_remove("CONDA_PREFIX")
            .env_remove("UV_TOOL_DIR")
            .env_remove("PIPX_HOME")
            .env("ROCBUILD_CACHE", root.join("cache"))
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        v["site"].as_str().unwrap_or_default().to_string()
    };
    // pip install rocbuild into the user's venv: that venv.
    let users = root.join("users-venv");
    make_venv(&users);
    assert!(installed_in(&users).starts_with(users.to_str().unwrap()));
    // uv tool install / uvx / pipx: their environment is skipped, ./.venv is used.
    for tool_env in [
        root.join("home/.local/share/uv/tools/rocbuild"),
        root.join("home/.cache/uv/archive-v0/Xyz123"),
        root.join("home/.local/share/pipx/venvs/rocbuild"),
    ] {
        make_venv(&tool_env);
        let site = installed_in(&tool_env);
        assert!(
            site.starts_with(project.join(".venv").to_str().unwrap()),
            "{} chose {site}",
            tool_env.display()
        );
    }
}
