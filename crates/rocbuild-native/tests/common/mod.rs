//! Builders for the real binaries the tests read: ELF with `cc`, PE with mingw-w64 or
//! clang-15 + lld-link (MSVC mangling), Mach-O with clang-15 + ld64.lld, HIP with hipcc.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Run a command; panic with its output when it fails (a test set-up error, not a finding).
pub fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (cargo xtask setup installs it)"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, text).unwrap();
    p
}

/// `cc -shared -fPIC <src> -o <out> <args...>` (C, or C++ when `src` ends in .cpp).
pub fn cc_shared(src: &Path, out: &Path, args: &[&str]) {
    let compiler = if src.extension().is_some_and(|e| e == "cpp") {
        "c++"
    } else {
        "cc"
    };
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    run(Command::new(compiler)
        .args(["-shared", "-fPIC"])
        .arg(src)
        .arg("-o")
        .arg(out)
        .args(args));
}

/// `x86_64-w64-mingw32-gcc|g++ -shared <inputs> -o <out> <args>`.
pub fn mingw_dll(inputs: &[&Path], out: &Path, args: &[&str]) {
    let cxx = inputs
        .iter()
        .any(|p| p.extension().is_some_and(|e| e == "cpp"));
    let compiler = if cxx {
        "x86_64-w64-mingw32-g++"
    } else {
        "x86_64-w64-mingw32-gcc"
    };
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    run(Command::new(compiler)
        .arg("-shared")
        .args(inputs)
        .arg("-o")
        .arg(out)
        .args(args));
}

/// clang-15 with the lld linkers: the Mach-O and MSVC-ABI builds.
pub fn clang() -> Option<&'static str> {
    let ok = |c: &str| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    ["clang-15", "clang"].into_iter().find(|c| ok(c))
}

/// Is `ld64.lld` (Debian lld-15) there for clang to use?
pub fn have_ld64() -> bool {
    Path::new("/usr/lib/llvm-15/bin/ld64.lld").exists()
        || Command::new("ld64.lld").arg("--version").output().is_ok()
}

/// Mach-O dylibs with clang-15 + ld64.lld (no macOS SDK), shared with the end-to-end tests.
#[allow(unused_imports)]
pub use rocbuild_testkit::native::{libsystem_stub, macho_dylib};

pub fn hipcc() -> Option<PathBuf> {
    which("hipcc")
}

pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
}

/// The names of a list of imports/exports, for compact assertions.
pub fn names<'a>(it: impl IntoIterator<Item = &'a String>) -> Vec<&'a str> {
    it.into_iter().map(String::as_str).collect()
}
