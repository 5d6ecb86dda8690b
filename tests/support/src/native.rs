//! Native fixtures for `doctor`, `deps` and `bundle`: real ELF libraries built with the host's
//! C/C++ compilers and real PE DLLs built with the mingw-w64 cross compiler.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{fixture_dir, run};

/// `tests/fixture/doctor/NAME`.
pub fn doctor_fixture(name: &str) -> PathBuf {
    fixture_dir().join("doctor").join(name)
}

/// Compile `src` into the shared library `out` with `compiler` (`cc`, `c++`,
/// `x86_64-w64-mingw32-gcc`); `extra` goes after the source (defines, -L, -l, -Wl,...).
pub fn shared_library(compiler: &str, src: &Path, out: &Path, extra: &[&str]) -> PathBuf {
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let mut c = Command::new(compiler);
    c.arg("-shared");
    if !compiler.contains("mingw") {
        c.arg("-fPIC");
    }
    c.arg(src).arg("-o").arg(out).args(extra);
    run(&mut c);
    out.to_path_buf()
}

/// The torch-like C++ `libc10.so` in `dir`: v1 exports `c10::foo(int)`, v2 does not.
pub fn torch_like_c10(dir: &Path, v1: bool) -> PathBuf {
    let mut args = vec!["-Wl,-soname,libc10.so"];
    if v1 {
        args.push("-DC10_V1");
    }
    shared_library(
        "c++",
        &doctor_fixture("c10.cpp"),
        &dir.join("libc10.so"),
        &args,
    )
}

/// A stand-in library with the given soname (`libcudart.so.13`), written as `dir/SONAME`.
pub fn stub_library(dir: &Path, soname: &str) -> PathBuf {
    shared_library(
        "cc",
        &doctor_fixture("stub.c"),
        &dir.join(soname),
        &[&format!("-Wl,-soname,{soname}")],
    )
}

/// The fixture extension (`ext.cpp`) linked against the `libc10.so` in `c10_dir`, with
/// RUNPATH `$ORIGIN/../torch/lib` as rocbuild installs them, plus `extra` link arguments.
/// `use_foo`: call `c10::foo(int)` (exists in v1 only).
pub fn torch_extension(out: &Path, c10_dir: &Path, use_foo: bool, extra: &[&str]) -> PathBuf {
    let l = format!("-L{}", c10_dir.display());
    let mut args = vec![
        l.as_str(),
        "-lc10",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../torch/lib",
    ];
    if use_foo {
        args.push("-DUSE_FOO");
    }
    args.extend_from_slice(extra);
    shared_library("c++", &doctor_fixture("ext.cpp"), out, &args)
}

/// A TorchCodec-like package in `site`: `torchcodec/__init__.py` shaped like its loader,
/// the given core library as `libtorchcodec_core{major}.so`, a dist-info.
pub fn install_fake_torchcodec(site: &Path, version: &str, core: &Path, major: u32) {
    let dir = site.join("torchcodec");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        doctor_fixture("torchcodec_init.py"),
        dir.join("__init__.py"),
    )
    .unwrap();
    std::fs::copy(core, dir.join(format!("libtorchcodec_core{major}.so"))).unwrap();
    let di = site.join(format!("torchcodec-{version}.dist-info"));
    std::fs::create_dir_all(&di).unwrap();
    std::fs::write(
        di.join("METADATA"),
        format!("Metadata-Version: 2.1\nName: torchcodec\nVersion: {version}\n"),
    )
    .unwrap();
    std::fs::write(di.join("RECORD"), "").unwrap();
}

/// `b.dll` (v1 exports ProcB1 and ProcB2, v2 only ProcB1) and `a.dll` linked against v1, all
/// built with x86_64-w64-mingw32-gcc. Returns (a.dll, dir of b.dll v1, dir of b.dll v2).
pub fn pe_abi_fixture(root: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let cc = "x86_64-w64-mingw32-gcc";
    let v1 = root.join("v1");
    let v2 = root.join("v2");
    shared_library(
        cc,
        &doctor_fixture("pe_provider.c"),
        &v1.join("b.dll"),
        &[
            "-DB_V1",
            &format!("-Wl,--out-implib,{}", v1.join("libb.dll.a").display()),
        ],
    );
    shared_library(cc, &doctor_fixture("pe_provider.c"), &v2.join("b.dll"), &[]);
    let app = root.join("app");
    let a = shared_library(
        cc,
        &doctor_fixture("pe_importer.c"),
        &app.join("a.dll"),
        &[&format!("-L{}", v1.display()), "-lb"],
    );
    (a, v1, v2)
}

/// `kernel.hip` compiled by hipcc for `arch` into the shared library `out` (soname = its file
/// name), plus `extra` link arguments.
pub fn hip_library(out: &Path, arch: &str, extra: &[&str]) -> PathBuf {
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let soname = format!("-Wl,-soname,{}", out.file_name().unwrap().to_string_lossy());
    let mut c = Command::new("hipcc");
    c.arg(format!("--offload-arch={arch}"))
        .args(["-shared", "-fPIC"])
        .arg(doctor_fixture("kernel.hip"))
        .arg("-o")
        .arg(out)
        .arg(soname)
        .args(extra)
        // hipcc leaves an empty directory per file and arch in its temp dir: not in /tmp.
        .env("TMPDIR", out.parent().unwrap());
    run(&mut c);
    out.to_path_buf()
}

/// A CTranslate2-like package in `site`: `ctranslate2/__init__.py` loading each given library
/// with ctypes, the libraries, a dist-info.
pub fn install_fake_ctranslate2(site: &Path, version: &str, libs: &[&Path]) {
    let dir = site.join("ctranslate2");
    std::fs::create_dir_all(&dir).unwrap();
    let mut init =
        String::from("import ctypes, os\n_here = os.path.dirname(os.path.abspath(__file__))\n");
    for l in libs {
        let name = l.file_name().unwrap().to_string_lossy();
        std::fs::copy(l, dir.join(&*name)).unwrap();
        init.push_str(&format!("ctypes.CDLL(os.path.join(_here, \"{name}\"))\n"));
    }
    std::fs::write(dir.join("__init__.py"), init).unwrap();
    let di = site.join(format!("ctranslate2-{version}.dist-info"));
    std::fs::create_dir_all(&di).unwrap();
    std::fs::write(
        di.join("METADATA"),
        format!("Metadata-Version: 2.1\nName: ctranslate2\nVersion: {version}\n"),
    )
    .unwrap();
    std::fs::write(di.join("RECORD"), "").unwrap();
}

/// Link a Mach-O dylib for `target` (`arm64-apple-macos11`, …) with clang-15 + ld64.lld: no
/// macOS SDK with -nostdlib; link a [`libsystem_stub`] for `dyld_stub_binder`.
pub fn macho_dylib(target: &str, src: &Path, out: &Path, args: &[&str]) -> PathBuf {
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    run(Command::new("clang-15")
        .args(["-target", target, "-nostdlib", "-shared", "-fuse-ld=lld"])
        .arg(src)
        .arg("-o")
        .arg(out)
        .args(args));
    out.to_path_buf()
}

/// A stand-in `/usr/lib/libSystem.B.dylib` exporting `dyld_stub_binder`, which ld64 needs.
pub fn libsystem_stub(dir: &Path, target: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let src = dir.join("system_stub.c");
    std::fs::write(
        &src,
        "void stub_binder(void) __asm__(\"dyld_stub_binder\");\nvoid stub_binder(void) {}\n",
    )
    .unwrap();
    macho_dylib(
        target,
        &src,
        &dir.join(format!("stub-{target}/libSystem.dylib")),
        &["-Wl,-install_name,/usr/lib/libSystem.B.dylib"],
    )
}
