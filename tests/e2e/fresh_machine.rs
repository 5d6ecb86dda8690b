//! A fresh machine, start to finish: no cmake and no ninja on PATH, FFmpeg hidden from
//! pkg-config. The first run names what is missing at once (the catalogue's `fresh_machine`
//! case shows the compilers too); with FFmpeg visible, the next run installs CMake and Ninja
//! from PyPI into rocbuild's tools area and the build succeeds; a third run downloads nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// PyPI's real CMake and Ninja wheels, fetched from PyPI by pip once and kept in the
/// worktree's git-ignored cache, so a rerun of the test does not download them again.
fn pypi_tool_wheels() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cache/pypi-tools");
    let has = |prefix: &str| {
        std::fs::read_dir(&dir).is_ok_and(|rd| {
            rd.flatten().any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with(prefix) && n.ends_with(".whl")
            })
        })
    };
    if !(has("cmake-") && has("ninja-")) {
        run(Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--disable-pip-version-check",
                "--no-deps",
                "--only-binary=:all:",
                "-d",
            ])
            .arg(&dir)
            .args(["cmake>=3.27,<4", "ninja>=1.10"]));
    }
    dir
}

/// A PATH of one directory: links to every program of this PATH except `gone`.
fn path_without(bin: &Path, gone: &[&str]) -> String {
    std::fs::create_dir_all(bin).unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let link = bin.join(&name);
            if gone.iter().any(|g| name == **g) || link.symlink_metadata().is_ok() {
                continue;
            }
            let _ = std::os::unix::fs::symlink(e.path(), link);
        }
    }
    bin.display().to_string()
}

#[test]
fn a_fresh_machine_gets_cmake_and_ninja_from_pypi_and_builds() {
    let w = World::new(DECODE_WAV);
    let wheels = pypi_tool_wheels();
    let path = path_without(
        &w.tmp.path().join("bin"),
        &["cmake", "cmake3", "ninja", "ninja-build"],
    );
    let no_cmake = Command::new("sh")
        .args(["-c", "command -v cmake || command -v ninja"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(!no_cmake.status.success(), "cmake/ninja still on PATH");
    let links = format!("{} {}", w.wheels.display(), wheels.display());
    let empty = w.tmp.path().join("no-pkgconfig");
    std::fs::create_dir_all(&empty).unwrap();
    let env = |hide_ffmpeg: bool| -> Vec<(&str, String)> {
        let mut e = vec![
            ("PATH", path.clone()),
            ("PIP_NO_INDEX", "1".into()),
            ("PIP_FIND_LINKS", links.clone()),
        ];
        if hide_ffmpeg {
            e.push(("PKG_CONFIG_LIBDIR", empty.display().to_string()));
            e.push(("PKG_CONFIG_PATH", empty.display().to_string()));
        }
        e
    };
    let go = |hide_ffmpeg: bool| {
        let e = env(hide_ffmpeg);
        let e: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
        w.cmd(&["fakecodec"], &e)
    };
    let venv_before = tree_state(&w.venv);

    // 1. FFmpeg hidden: said at once, with its install command; cmake and ninja are not
    //    asked for; nothing fetched, the venv unchanged.
    let out = go(true);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let err = out.stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(err.contains("FFmpeg's development files"), "{err}");
    assert!(
        err.contains("libavcodec-dev") || err.contains("ffmpeg"),
        "{err}"
    );
    assert!(err.contains("cmake and ninja are not needed"), "{err}");
    assert!(!w.cache.join("git").exists(), "nothing was fetched");
    assert!(!w.cache.join("tools").exists(), "nothing was installed");
    assert_eq!(tree_state(&w.venv), venv_before);

    // 2. FFmpeg visible: CMake and Ninja come from PyPI into the tools area, the build runs
    //    with them, installs and verifies.
    let out = go(false);
    ok(&out);
    let tools: Vec<PathBuf> = std::fs::read_dir(w.cache.join("tools"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(tools.len(), 1, "{tools:?}");
    let cmake = tools[0].join("cmake/data/bin/cmake");
    let ninja = tools[0].join("bin/ninja");
    let version = run(Command::new(&cmake).arg("--version"));
    assert!(version.starts_with("cmake version 3."), "{version}");
    assert!(!run(Command::new(&ninja).arg("--version")).is_empty());
    let cache_txt = std::fs::read_dir(w.cache.join("build"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("CMakeCache.txt"))
        .find(|p| p.exists())
        .expect("a configured build tree");
    let cache_txt = std::fs::read_to_string(cache_txt).unwrap();
    assert!(
        cache_txt.contains(&format!("CMAKE_MAKE_PROGRAM:FILEPATH={}", ninja.display()))
            || cache_txt.contains(&format!(
                "CMAKE_MAKE_PROGRAM:UNINITIALIZED={}",
                ninja.display()
            )),
        "the build ran PyPI's ninja"
    );
    assert!(
        cache_txt.contains(&format!("CMAKE_COMMAND:INTERNAL={}", cmake.display())),
        "the build ran PyPI's cmake"
    );
    let logs = w.logs();
    assert!(
        logs.contains("cmake: not on PATH: CMake from PyPI"),
        "{logs}"
    );
    assert!(
        logs.contains("ninja: not on PATH: Ninja from PyPI"),
        "{logs}"
    );
    let installs = logs.matches("install build tools").count();
    assert!(
        w.site.join(".rocbuild/fakecodec.json").exists(),
        "installed and recorded"
    );

    // 3. Again: nothing to install, nothing downloaded.
    let out = go(false);
    ok(&out);
    assert!(out.stdout.contains("up to date"), "{}", out.stdout);
    assert_eq!(
        w.logs().matches("install build tools").count(),
        installs,
        "the tools were not installed again"
    );
}
