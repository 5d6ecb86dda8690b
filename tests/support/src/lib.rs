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

/// Copy an executable that a test then runs (rocbuild's own binary into a venv or a chroot).
///
/// Copied by this process, the new file is open for writing until the copy returns, and a child
/// that another test's thread forks in that moment holds the descriptor until it execs: running
/// the copy then fails with "Text file busy" (ETXTBSY; a bare CI run met it). `cp` writes it in
/// a process of its own, whose descriptors no test's child inherits.
pub fn copy_executable(src: &Path, dst: &Path) {
    run(Command::new("cp").arg(src).arg(dst));
}

/// Write a script (mode 755) that a test then runs, as [`copy_executable`] copies: the text goes
/// into a file that nothing runs, and `cp` makes the script from it.
#[cfg(unix)]
pub fn write_executable(dst: &Path, text: impl AsRef<[u8]>) {
    use std::os::unix::fs::PermissionsExt;
    let src = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(src.path(), text).unwrap();
    std::fs::set_permissions(src.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let _ = std::fs::remove_file(dst);
    copy_executable(src.path(), dst);
}

/// A venv made by `python3 -m venv` (with pip). Returns its site-packages.
///
/// The venv is `python3 -m venv --without-pip`'s, and what ensurepip would put in it (pip, and
/// setuptools on Python 3.11) is copied from a venv that `python3 -m venv` made with ensurepip
/// once per Python ([`pip_template`]), its `bin/` scripts pointed at this venv's Python, as
/// pip writes them. ensurepip runs pip to install its own wheel: about 4 CPU-seconds per venv,
/// and the end-to-end tests make a few hundred venvs (about 10 CPU-minutes of a whole run,
/// issue 55); the copy takes a tenth of a second. The files are the same as ensurepip's.
pub fn make_venv(dir: &Path) -> PathBuf {
    let python = std::env::var("ROCBUILD_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let template = pip_template(&python);
    run(Command::new(&python)
        .args(["-m", "venv", "--without-pip"])
        .arg(dir));
    copy_pip(&template, dir).unwrap_or_else(|e| {
        panic!(
            "cannot copy pip from {} into {}: {e}",
            template.display(),
            dir.display()
        )
    });
    site_packages(dir)
}

/// A venv that `PYTHON -m venv` made with ensurepip, kept in `<workspace>/cache/test-venv-pip/KEY`
/// (KEY: the interpreter's path and version), made once: the source of [`make_venv`]'s pip.
fn pip_template(python: &str) -> PathBuf {
    static MADE: std::sync::Mutex<BTreeMap<String, PathBuf>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = made.get(python) {
        return t.clone();
    }
    let who = run(Command::new(python).args([
        "-c",
        "import sys, os; print(os.path.realpath(sys.executable), sys.version)",
    ]));
    let key = format!("{:x}", Sha256::digest(who.trim().as_bytes()));
    let root = fixture_dir().join("../../cache/test-venv-pip");
    let template = root.join(&key[..16]);
    if !template.join("done").is_file() {
        // Made beside and renamed into place: another test process may be making it too.
        let _ = std::fs::create_dir_all(&root);
        let part = root.join(format!("{}.{}.part", &key[..16], std::process::id()));
        let _ = std::fs::remove_dir_all(&part);
        run(Command::new(python).args(["-m", "venv"]).arg(&part));
        std::fs::write(part.join("done"), who.as_bytes()).unwrap();
        if std::fs::rename(&part, &template).is_err() {
            // Another process got there first (or a stale one is in the way: made again).
            if !template.join("done").is_file() {
                let _ = std::fs::remove_dir_all(&template);
                std::fs::rename(&part, &template).unwrap();
            } else {
                let _ = std::fs::remove_dir_all(&part);
            }
        }
    }
    made.insert(python.to_string(), template.clone());
    template
}

/// What ensurepip put in `template` and `python -m venv --without-pip` did not make in `venv`:
/// site-packages' contents, and the `bin/` scripts, their `#!` line naming `venv`'s Python.
fn copy_pip(template: &Path, venv: &Path) -> std::io::Result<()> {
    let lib = |root: &Path| root.join("lib");
    let mut sites = Vec::new();
    for entry in std::fs::read_dir(lib(template))? {
        let version_dir = entry?.file_name();
        let from = lib(template).join(&version_dir).join("site-packages");
        if from.is_dir() {
            let to = lib(venv).join(&version_dir).join("site-packages");
            copy_tree(&from, &to)?;
            sites.push(to);
        }
    }
    let mut scripts = BTreeMap::new();
    for entry in std::fs::read_dir(template.join("bin"))? {
        let entry = entry?;
        let to = venv.join("bin").join(entry.file_name());
        if to.symlink_metadata().is_ok() || !entry.file_type()?.is_file() {
            continue;
        }
        let text = std::fs::read(entry.path())?;
        let Some((python, body)) = script_parts(&text) else {
            continue;
        };
        let mut out = script_header(&venv.join("bin").join(python)).into_bytes();
        out.extend_from_slice(body);
        std::fs::write(&to, &out)?;
        std::fs::set_permissions(&to, entry.metadata()?.permissions())?;
        scripts.insert(entry.file_name().to_string_lossy().into_owned(), out);
    }
    for site in sites {
        record_scripts(&site, &scripts)?;
    }
    Ok(())
}

/// Each dist-info's RECORD in `site` given the hash and size of the `bin/` scripts written for
/// this venv (name → content), as pip records the scripts it writes.
fn record_scripts(site: &Path, scripts: &BTreeMap<String, Vec<u8>>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(site)? {
        let record = entry?.path().join("RECORD");
        let Ok(text) = std::fs::read_to_string(&record) else {
            continue;
        };
        let mut out = String::new();
        for line in text.lines() {
            let path = line.split(',').next().unwrap_or_default();
            let script = path
                .strip_prefix("../../../bin/")
                .and_then(|name| scripts.get(name));
            match script {
                Some(content) => out.push_str(&format!(
                    "{path},sha256={},{}\n",
                    base64::engine::general_purpose::URL_SAFE_NO_PAD
                        .encode(Sha256::digest(content)),
                    content.len()
                )),
                None => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        if out != text {
            std::fs::write(&record, out)?;
        }
    }
    Ok(())
}

/// The interpreter's file name (`python3`) and the rest of a console script pip wrote: after
/// `#!PATH` or, where PATH has a space or is long, after distlib's `/bin/sh` header.
fn script_parts(text: &[u8]) -> Option<(String, &[u8])> {
    let lines: Vec<&[u8]> = text.splitn(4, |b| *b == b'\n').collect();
    let line = |i: usize| String::from_utf8_lossy(lines.get(i).copied().unwrap_or_default());
    let sh = format!("{q}exec{s} ", q = "'''", s = "'");
    let (path, skip) = if line(0) == "#!/bin/sh" && line(1).starts_with(&sh) {
        let exec = line(1);
        let path = exec
            .strip_prefix(&sh)?
            .strip_suffix(r#" "$0" "$@""#)?
            .trim_matches('"')
            .to_string();
        (path, 3)
    } else {
        (line(0).strip_prefix("#!")?.to_string(), 1)
    };
    let name = Path::new(&path).file_name()?.to_string_lossy().into_owned();
    let head: usize = lines.iter().take(skip).map(|l| l.len() + 1).sum();
    name.starts_with("python")
        .then(|| (name, text.get(head.min(text.len())..).unwrap_or_default()))
}

/// The header pip (distlib) writes for `python`: `#!PATH`, or where PATH has a space or the
/// line would pass the kernel's 127 bytes, `/bin/sh` made to exec PATH.
fn script_header(python: &Path) -> String {
    let exe = python.display().to_string();
    if !exe.contains(' ') && exe.len() + 3 <= 127 {
        return format!("#!{exe}\n");
    }
    let quoted = if exe.contains(' ') {
        format!("\"{exe}\"")
    } else {
        exe
    };
    format!("#!/bin/sh\n'''exec' {quoted} \"$0\" \"$@\"\n' '''\n")
}

/// `from` copied into `to` (made if missing), file by file; a link is made again as a link.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_symlink() {
            #[cfg(unix)]
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
            #[cfg(not(unix))]
            std::fs::copy(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst)?;
            // The source's time too: a `.pyc` holds its source's mtime, and Python rewrites
            // a `.pyc` whose source looks newer (Python 3.11's `_distutils_hack`, which every
            // start imports, would change the venv under a test that compares it).
            let modified = entry.metadata()?.modified()?;
            std::fs::File::options()
                .write(true)
                .open(&dst)?
                .set_modified(modified)?;
        }
    }
    Ok(())
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
    copy_tree(&fixture_dir().join("fakecodec"), &main).unwrap();
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
    copy_tree(src, &work).unwrap();
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

// Unix: the tests' venvs are the host's (under Wine there is no python3).
#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// The copied pip works as ensurepip's does: `python -m pip` and the `bin/pip` script (its
    /// `#!` line names this venv's Python) both run, install a wheel into this venv, and list
    /// what ensurepip installs; the template venv is left as it was.
    #[test]
    fn a_venv_with_copied_pip_installs_with_pip_as_ensurepips_does() {
        let tmp = tempfile::tempdir().unwrap();
        let venv = tmp.path().join("my venv");
        let site = make_venv(&venv);
        assert!(site.starts_with(&venv), "{}", site.display());
        // What ensurepip itself makes at a path of the same length: the same scripts, the same
        // files in site-packages.
        let real = tmp.path().join("ur venv");
        run(Command::new("python3").args(["-m", "venv"]).arg(&real));
        for script in ["pip", "pip3"] {
            let ours = std::fs::read_to_string(venv.join("bin").join(script)).unwrap();
            let theirs = std::fs::read_to_string(real.join("bin").join(script)).unwrap();
            assert_eq!(ours, theirs.replace("ur venv", "my venv"), "bin/{script}");
        }
        // The same paths (tree_state's keys; bytecode and pyvenv.cfg, which name the venv's
        // own path and time, aside).
        let files = |root: &Path| -> Vec<String> {
            tree_state(root)
                .into_keys()
                .filter(|k| !k.contains("__pycache__") && k != "pyvenv.cfg")
                .collect()
        };
        assert_eq!(files(&venv), files(&real));
        // Every RECORD holds what is on disk (the scripts' own hashes included), as pip's own
        // check of a venv and the ownership model's expect.
        for d in std::fs::read_dir(&site).unwrap().flatten() {
            let Ok(record) = std::fs::read_to_string(d.path().join("RECORD")) else {
                continue;
            };
            for line in record.lines() {
                let mut f = line.split(',');
                let (path, hash) = (f.next().unwrap(), f.next().unwrap_or_default());
                let Some(want) = hash.strip_prefix("sha256=") else {
                    continue;
                };
                let got = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(Sha256::digest(std::fs::read(site.join(path)).unwrap()));
                assert_eq!(got, want, "{path} in {}", d.path().display());
            }
        }
        // Python's start leaves the venv as it is: no `.pyc` is stale (their sources keep the
        // template's times), so none is written again.
        let before = tree_state(&venv);
        run(Command::new(venv.join("bin/python"))
            .args(["-c", "import pip"])
            .env_remove("PYTHONDONTWRITEBYTECODE"));
        let changed: Vec<_> = tree_state(&venv)
            .into_iter()
            .filter(|(k, v)| before.get(k) != Some(v))
            .map(|(k, _)| k)
            .collect();
        assert!(changed.is_empty(), "Python's start wrote {changed:#?}");
        let listed = run(Command::new(venv.join("bin/pip")).args([
            "list",
            "--disable-pip-version-check",
            "--format=freeze",
        ]));
        assert!(listed.contains("pip=="), "{listed}");
        let wheels = tmp.path().join("wheels");
        let wheel = make_wheel(&wheels, "fakecodec", "0.16.0");
        run(Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--no-index",
                "--disable-pip-version-check",
            ])
            .arg(&wheel));
        let shown = run(Command::new(venv.join("bin/python")).args([
            "-c",
            "import importlib.metadata as m, sys; print(m.version('fakecodec'), sys.prefix)",
        ]));
        assert_eq!(shown.trim(), format!("0.16.0 {}", venv.display()));
        // The template did not get the wheel: the install went into this venv alone.
        let template = pip_template("python3");
        assert!(std::fs::read_dir(template.join("lib"))
            .unwrap()
            .flatten()
            .all(|d| !d.path().join("site-packages/fakecodec").exists()));
    }
}
