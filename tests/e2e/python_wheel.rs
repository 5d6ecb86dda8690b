//! `pip install rocbuild`: the manylinux wheel `cargo xtask` builds with maturin
//! (ROCBUILD_TEST_PY_WHEEL) installed into fresh venvs. The `rocbuild` it puts on the venv's
//! PATH runs, and acts on the right venv however it is started: its own venv when nothing
//! names another, `$VIRTUAL_ENV` before that, and never the private environment of a tool
//! installer (`uv tool install`, `uvx`, `pipx`), which holds rocbuild alone: then `./.venv`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::ctranslate2_build::fixture_recipes;

fn wheel() -> Option<PathBuf> {
    rocbuild_testkit::skip::world(
        "ROCBUILD_TEST_PY_WHEEL",
        "rocbuild's own manylinux wheel: `cargo xtask wheel` makes it in cache/dist",
    )
}

/// A fresh venv at `dir` with the wheel installed by pip; its `rocbuild`.
fn installed(dir: &Path, wheel: &Path) -> PathBuf {
    make_venv(dir);
    run(Command::new(dir.join("bin/python")).args([
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--disable-pip-version-check",
        wheel.to_str().unwrap(),
    ]));
    let exe = dir.join("bin/rocbuild");
    assert!(
        exe.is_file(),
        "pip put no rocbuild on {}'s PATH",
        dir.display()
    );
    exe
}

/// The installed binary's dry run of the fixture recipe from `cwd`: the venv line.
fn venv_line(exe: &Path, recipes: &Path, cwd: &Path, env: &[(&str, &Path)]) -> String {
    let mut c = Command::new(exe);
    c.args(["faketrans", "--dry-run", "--recipes"])
        .arg(recipes)
        .current_dir(cwd)
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .env_remove("UV_TOOL_DIR")
        .env_remove("PIPX_HOME");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("venv:"))
        .unwrap_or_else(|| panic!("no venv line:\n{text}"));
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_installed_rocbuild_runs_and_acts_on_the_right_venv() {
    let Some(wheel) = wheel() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let recipes = fixture_recipes(root, "");
    let elsewhere = root.join("work");
    std::fs::create_dir_all(&elsewhere).unwrap();

    // pip install rocbuild into the user's venv.
    let user = root.join("user-venv");
    let exe = installed(&user, &wheel);
    let v = Command::new(&exe).arg("--version").output().unwrap();
    assert!(
        String::from_utf8_lossy(&v.stdout).starts_with("rocbuild "),
        "{v:?}"
    );
    assert_eq!(
        venv_line(&exe, &recipes, &elsewhere, &[]),
        format!(
            "venv: {} (chosen by the venv rocbuild is installed in)",
            user.display()
        )
    );
    // An activated venv comes first.
    let other = root.join("other-venv");
    make_venv(&other);
    assert_eq!(
        venv_line(&exe, &recipes, &elsewhere, &[("VIRTUAL_ENV", &other)]),
        format!("venv: {} (chosen by $VIRTUAL_ENV)", other.display())
    );

    // Tool installers' private environments hold rocbuild alone: ./.venv instead.
    let project = root.join("project");
    make_venv(&project.join(".venv"));
    for tool_env in [
        root.join("home/.local/share/uv/tools/rocbuild"),
        root.join("home/.cache/uv/archive-v0/Xy12ab"),
        root.join("home/.local/pipx/venvs/rocbuild"),
    ] {
        let exe = installed(&tool_env, &wheel);
        assert_eq!(
            venv_line(&exe, &recipes, &project, &[]),
            format!(
                "venv: {} (chosen by ./.venv)",
                project.join(".venv").display()
            ),
            "started from {}",
            tool_env.display()
        );
    }
    // Wherever uv keeps its tools ($UV_TOOL_DIR), even under an ordinary-looking path.
    let custom = root.join("opt/tools/rocbuild");
    let exe = installed(&custom, &wheel);
    assert_eq!(
        venv_line(
            &exe,
            &recipes,
            &project,
            &[("UV_TOOL_DIR", &root.join("opt/tools"))]
        ),
        format!(
            "venv: {} (chosen by ./.venv)",
            project.join(".venv").display()
        )
    );
}
