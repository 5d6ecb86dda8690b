//! Fixture builders for the end-to-end tests and `cargo xtask bench`. Everything here is real:
//! venvs from `python3 -m venv`, libraries compiled with `cc`, git repositories made with git,
//! wheels that pip installs.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

pub mod downloads;
pub mod machine;
pub mod native;
pub mod redis;
pub mod rocm;
pub mod skip;
pub mod upstream;

use base64::Engine;
use sha2::{Digest, Sha256};

/// `tests/fixture` in the source tree.
pub fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixture")
}

/// A uv binary for the tests: `ROCBUILD_TEST_UV`, else `uv` on PATH, else uv from PyPI
/// installed once into `<workspace>/cache/test-uv` (a venv of its own).
pub fn uv_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("ROCBUILD_TEST_UV") {
        return PathBuf::from(p);
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("uv"))
            .find(|p| p.is_file())
    });
    if let Some(p) = on_path {
        return p;
    }
    // Tests run as threads of one process, and on a fresh machine two of them would otherwise
    // make this venv at once, one pip writing `uv` while the other's run executes it (CI saw
    // rocbuild fall back to pip): it is made once per process.
    static MADE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    MADE.get_or_init(|| {
        let venv = fixture_dir().join("../../cache/test-uv");
        let uv = venv.join("bin/uv");
        if !uv.is_file() {
            let python = std::env::var("ROCBUILD_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
            // A half-made venv left by an interrupted run is made again.
            let _ = std::fs::remove_dir_all(&venv);
            run(Command::new(python).args(["-m", "venv"]).arg(&venv));
            run(Command::new(venv.join("bin/python")).args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "uv",
            ]));
        }
        uv
    })
    .clone()
}

/// A venv made by `uv venv` (no pip in it) on the tests' Python; returns its site-packages.
pub fn make_uv_venv(dir: &Path) -> PathBuf {
    let python = std::env::var("ROCBUILD_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let python = run(Command::new(python).args(["-c", "import sys; print(sys.executable)"]));
    run(Command::new(uv_binary())
        .args(["venv", "--quiet", "--no-config", "--python"])
        .arg(python.trim())
        .arg(dir)
        .env("UV_PYTHON_DOWNLOADS", "never"));
    site_packages(dir)
}

pub fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A venv made by `python3 -m venv` (with pip). Returns its site-packages.
pub fn make_venv(dir: &Path) -> PathBuf {
    let python = std::env::var("ROCBUILD_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    run(Command::new(python).args(["-m", "venv"]).arg(dir));
    site_packages(dir)
}

pub fn site_packages(venv: &Path) -> PathBuf {
    let out = run(Command::new(venv.join("bin/python")).args([
        "-c",
        "import sysconfig; print(sysconfig.get_paths()['platlib'])",
    ]));
    PathBuf::from(out.trim())
}

/// A torch-like package in `site`: torch/version.py, lib/libc10.so, libtorch_cpu.so,
/// libtorch.so (compiled with cc), include/, and a dist-info.
pub fn install_fake_torch(site: &Path, version: &str) {
    install_fake_torch_as(site, version, version)
}

/// A fake torch whose `torch.__version__` is `version` and whose distribution (dist-info
/// METADATA) is `dist_version`: PyPI's CUDA torch is `2.15.0` with `__version__` `2.15.0+cu132`.
pub fn install_fake_torch_as(site: &Path, version: &str, dist_version: &str) {
    let t = site.join("torch");
    let lib = t.join("lib");
    let inc = t.join("include");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::create_dir_all(&inc).unwrap();
    let src = fixture_dir().join("faketorch/torch.c");
    std::fs::copy(
        fixture_dir().join("faketorch/faketorch.h"),
        inc.join("faketorch.h"),
    )
    .unwrap();
    for (name, def, deps) in [
        ("c10", "C10", vec![]),
        ("torch_cpu", "TORCH_CPU", vec!["c10"]),
        ("torch", "TORCH", vec!["torch_cpu", "c10"]),
    ] {
        let mut c = Command::new("cc");
        c.args([
            "-shared",
            "-fPIC",
            &format!("-D{def}"),
            "-Wl,-rpath,$ORIGIN",
        ])
        .arg(&src)
        .arg("-o")
        .arg(lib.join(format!("lib{name}.so")));
        c.arg(format!("-L{}", lib.display()));
        for d in deps {
            c.arg(format!("-l{d}"));
        }
        run(&mut c);
    }
    std::fs::write(
        t.join("version.py"),
        format!("from typing import Optional\n\n__version__ = '{version}'\ndebug = False\ncuda: Optional[str] = None\ngit_version = '0123456789abcdef0123456789abcdef01234567'\nhip: Optional[str] = None\n"),
    )
    .unwrap();
    std::fs::write(t.join("__init__.py"), "from .version import __version__\n").unwrap();
    let di = site.join(format!("torch-{dist_version}.dist-info"));
    std::fs::create_dir_all(&di).unwrap();
    std::fs::write(
        di.join("METADATA"),
        format!("Metadata-Version: 2.1\nName: torch\nVersion: {dist_version}\n"),
    )
    .unwrap();
    std::fs::write(di.join("RECORD"), "").unwrap();
}

fn git(dir: &Path, args: &[&str]) -> String {
    run(Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=rocbuild-test",
            "-c",
            "user.email=test@rocbuild.invalid",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "protocol.file.allow=always",
        ])
        .args(args))
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_tree(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// Bare repositories `root/fakecodec.git` (tag `v1.0.0`, a submodule at third_party/sub with
/// a relative URL) and `root/fakesub.git`. Returns the commit of v1.0.0.
pub fn make_git_fixture(root: &Path) -> String {
    std::fs::create_dir_all(root).unwrap();
    let work = root.join("work");
    let sub = work.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    git(&sub, &["init", "-q"]);
    std::fs::copy(fixture_dir().join("fakesub/answer.h"), sub.join("answer.h")).unwrap();
    git(&sub, &["add", "-A"]);
    git(&sub, &["commit", "-qm", "answer"]);
    let sub_commit = git(&sub, &["rev-parse", "HEAD"]).trim().to_string();
    git(
        root,
        &[
            "clone",
            "-q",
            "--bare",
            sub.to_str().unwrap(),
            "fakesub.git",
        ],
    );

    let main = work.join("main");
    copy_tree(&fixture_dir().join("fakecodec"), &main);
    git(&main, &["init", "-q"]);
    std::fs::write(
        main.join(".gitmodules"),
        "[submodule \"sub\"]\n\tpath = third_party/sub\n\turl = ../fakesub.git\n",
    )
    .unwrap();
    git(&main, &["add", "-A"]);
    git(
        &main,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{sub_commit},third_party/sub"),
        ],
    );
    git(&main, &["commit", "-qm", "fakecodec 1.0.0"]);
    git(&main, &["tag", "v1.0.0"]);
    let commit = git(&main, &["rev-parse", "HEAD"]).trim().to_string();
    git(
        root,
        &[
            "clone",
            "-q",
            "--bare",
            main.to_str().unwrap(),
            "fakecodec.git",
        ],
    );
    std::fs::remove_dir_all(&work).unwrap();
    commit
}

fn record_hash(bytes: &[u8]) -> String {
    format!(
        "sha256={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(bytes))
    )
}

/// A wheel of the fixture's Python part, with a "prebuilt" library of another FFmpeg major
/// that rocbuild must park. Written into `dir`; returns its path.
pub fn make_wheel(dir: &Path, name: &str, version: &str) -> PathBuf {
    let init = std::fs::read(fixture_dir().join("fakecodec_init.py")).unwrap();
    make_wheel_with(dir, name, version, init)
}

/// A wheel whose package `__init__.py` is `init`.
pub fn make_wheel_with(dir: &Path, name: &str, version: &str, init: Vec<u8>) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("{name}-{version}-py3-none-any.whl"));
    let di = format!("{name}-{version}.dist-info");
    let files: Vec<(String, Vec<u8>)> = vec![
        (format!("{name}/__init__.py"), init),
        (format!("{name}/libfakecodec_core4.so"), b"a prebuilt library for another FFmpeg".to_vec()),
        (format!("{di}/METADATA"), format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n").into_bytes()),
        (format!("{di}/WHEEL"), b"Wheel-Version: 1.0\nGenerator: rocbuild-testkit\nRoot-Is-Purelib: true\nTag: py3-none-any\n".to_vec()),
    ];
    let mut record = String::new();
    for (p, b) in &files {
        record.push_str(&format!("{p},{},{}\n", record_hash(b), b.len()));
    }
    record.push_str(&format!("{di}/RECORD,,\n"));
    let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts = zip::write::SimpleFileOptions::default();
    for (p, b) in files
        .iter()
        .chain([(format!("{di}/RECORD"), record.into_bytes())].iter())
    {
        z.start_file(p.as_str(), opts).unwrap();
        z.write_all(b).unwrap();
    }
    z.finish().unwrap();
    path
}

/// A recipe for the fixture, building from `git`.
pub fn fixture_recipe(git: &str, submodules: bool, verify: &str) -> String {
    format!(
        r#"[package]
name = "fakecodec"
description = "fixture shaped like TorchCodec"
distribution = "fakecodec"
import-dir = "fakecodec"

[source]
git = "{git}"
tag = "v{{version}}"
submodules = {submodules}

[[release]]
version = "1.0.0"
torch = ">=2.9,<2.10"

[[release]]
version = "0.9.0"
torch = ">=2.8,<2.9"

[needs]
ffmpeg = true

[build]
torch-cmake = "lite"
define = {{ CMAKE_BUILD_TYPE = "Release", Python3_EXECUTABLE = "{{python.exe}}" }}

[install]
artifacts = ["libfakecodec_core*", "libfakecodec_custom_ops*", "_fakecodec_ext*"]
finds = ["{{torch.lib}}", "{{ffmpeg.lib}}"]
park = ["fakecodec/libfakecodec_*"]

[verify]
python = '''
{verify}
'''
"#
    )
}

/// Verification that decodes a WAV written with the stdlib, without importing torch first.
pub const DECODE_WAV: &str = r#"import os, struct, tempfile, wave
import fakecodec
path = os.path.join(tempfile.mkdtemp(), "tone.wav")
with wave.open(path, "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
    w.writeframes(b"".join(struct.pack("<h", (i * 37) % 2000) for i in range(16000)))
n = fakecodec.count_samples(path)
assert n == 16000, n
assert fakecodec.torch_check() == 4
from fakecodec import _fakecodec_ext
assert _fakecodec_ext.ffmpeg_major() == fakecodec.ffmpeg_major
print("decoded", n, "samples with FFmpeg", fakecodec.ffmpeg_major)"#;

/// sha256 of every file under `dir` and the list of directories: the venv's exact state.
pub fn tree_state(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                out.insert(format!("{rel}/"), String::new());
                stack.push(p);
            } else if meta.is_symlink() {
                out.insert(
                    rel,
                    format!("-> {}", std::fs::read_link(&p).unwrap().display()),
                );
            } else {
                let bytes = std::fs::read(&p).unwrap();
                out.insert(rel, format!("{:x}", Sha256::digest(&bytes)));
            }
        }
    }
    out
}

/// A bare repository `root/<name>.git` holding a copy of `src` with tag `tag`.
/// Returns the tagged commit.
pub fn make_git_repo(root: &Path, name: &str, src: &Path, tag: &str) -> String {
    let work = root.join(format!("{name}-work"));
    copy_tree(src, &work);
    git(&work, &["init", "-q"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-qm", &format!("{name} {tag}")]);
    git(&work, &["tag", tag]);
    let commit = git(&work, &["rev-parse", "HEAD"]).trim().to_string();
    git(
        root,
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            &format!("{name}.git"),
        ],
    );
    std::fs::remove_dir_all(&work).unwrap();
    commit
}

/// A wheel with arbitrary files (paths relative to site-packages) and a correct RECORD.
pub fn make_wheel_files(dir: &Path, name: &str, version: &str, files: &[(&str, &[u8])]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("{name}-{version}-py3-none-any.whl"));
    let di = format!("{name}-{version}.dist-info");
    let mut all: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(p, b)| (p.to_string(), b.to_vec()))
        .collect();
    all.push((
        format!("{di}/METADATA"),
        format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n").into_bytes(),
    ));
    all.push((
        format!("{di}/WHEEL"),
        b"Wheel-Version: 1.0\nGenerator: rocbuild-testkit\nRoot-Is-Purelib: true\nTag: py3-none-any\n".to_vec(),
    ));
    let mut record = String::new();
    for (p, b) in &all {
        record.push_str(&format!("{p},{},{}\n", record_hash(b), b.len()));
    }
    record.push_str(&format!("{di}/RECORD,,\n"));
    all.push((format!("{di}/RECORD"), record.into_bytes()));
    let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts = zip::write::SimpleFileOptions::default();
    for (p, b) in &all {
        z.start_file(p.as_str(), opts).unwrap();
        z.write_all(b).unwrap();
    }
    z.finish().unwrap();
    path
}
