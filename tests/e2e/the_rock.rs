//! TheRock's multi-arch packages in a venv, with real ELF libraries: `bundle` copies the
//! kernel packs a library's `.rocm_kpack_ref` section points to and rocBLAS's Tensile files,
//! for the GPUs asked for and only those, at the same place relative to the library (where
//! the library looks for them), and says which GPU has none.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use rocbuild_testkit::rocm::fake_the_rock_multi_arch;

/// The reference TheRock's splitter writes into a library (rocm-kpack's kpack_transform):
/// a MessagePack map with the search paths relative to the library's directory.
fn kpack_ref(dir: &Path) -> PathBuf {
    let v = rmpv::Value::Map(vec![
        (
            "kpack_search_paths".into(),
            rmpv::Value::Array(vec!["../.kpack/blas_lib_@GFXARCH@.kpack".into()]),
        ),
        ("kernel_name".into(), "lib/librocblas.so.5".into()),
    ]);
    let mut bytes = Vec::new();
    rmpv::encode::write_value(&mut bytes, &v).unwrap();
    let p = dir.join("kpack_ref.bin");
    std::fs::write(&p, bytes).unwrap();
    p
}

fn run(c: &mut Command) {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A venv with TheRock 7.15.0 for gfx1100 and gfx1201, whose rocBLAS is a real library with a
/// kernel-pack reference, and an app library that links it: (site, the app library).
fn venv_with_app(root: &Path) -> (PathBuf, PathBuf) {
    let site = root.join("venv/lib/python3.12/site-packages");
    fake_the_rock_multi_arch(&site, false, "7.15.0", &["gfx1100", "gfx1201"]);
    let lib_dir = site.join("_rocm_sdk_libraries/lib");
    let src = root.join("rocblas.c");
    std::fs::write(
        &src,
        "int rocblas_create_handle(void **h) { *h = 0; return 0; }\n",
    )
    .unwrap();
    let rocblas = lib_dir.join("librocblas.so.5");
    run(Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,librocblas.so.5", "-o"])
        .arg(&rocblas)
        .arg(&src));
    run(Command::new("objcopy")
        .arg(format!(
            "--add-section=.rocm_kpack_ref={}",
            kpack_ref(root).display()
        ))
        .arg(&rocblas));
    let app_src = root.join("app.c");
    std::fs::write(
        &app_src,
        "int rocblas_create_handle(void **h);\nint app(void) { void *h; return rocblas_create_handle(&h); }\n",
    )
    .unwrap();
    let app = site.join("myapp/libapp.so");
    std::fs::create_dir_all(app.parent().unwrap()).unwrap();
    run(Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&app)
        .arg(&app_src)
        .arg(format!("-L{}", lib_dir.display()))
        .arg("-l:librocblas.so.5")
        .arg("-Wl,-rpath,$ORIGIN/../_rocm_sdk_libraries/lib"));
    (site, app)
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = walk(dir)
        .into_iter()
        .map(|p| p.strip_prefix(dir).unwrap().display().to_string())
        .collect();
    v.sort();
    v
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn bundle_copies_the_kernel_packs_and_tensile_files_of_the_gpus_asked_for_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (_site, app) = venv_with_app(tmp.path());
    let into = tmp.path().join("dist");
    let out = rocbuild(
        &[
            "bundle",
            app.to_str().unwrap(),
            "--into",
            into.to_str().unwrap(),
            "--gpu-arch",
            "gfx1201",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let got = files_under(&into);
    for want in [
        "_rocm_sdk_libraries/lib/librocblas.so.5",
        "_rocm_sdk_libraries/.kpack/blas_lib_gfx1201.kpack",
        "_rocm_sdk_libraries/lib/rocblas/library/TensileLibrary_lazy_gfx1201.dat",
        "_rocm_sdk_libraries/lib/rocblas/library/Kernels.so-000-gfx1201.hsaco",
        "_rocm_sdk_libraries/lib/rocblas/library/TensileManifest.txt",
        "myapp/libapp.so",
    ] {
        assert!(
            got.iter().any(|g| g == want),
            "{want} not bundled: {got:#?}"
        );
    }
    assert!(!got.iter().any(|g| g.contains("gfx1100")), "{got:#?}");
    // The archive is the one the library's reference names, relative to where it now is.
    let packed =
        std::fs::read(into.join("_rocm_sdk_libraries/.kpack/blas_lib_gfx1201.kpack")).unwrap();
    assert!(packed.starts_with(b"KPAK"));

    // No GPU named: every pack there is.
    let all = tmp.path().join("all");
    let out = rocbuild(
        &[
            "bundle",
            app.to_str().unwrap(),
            "--into",
            all.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let got = files_under(&all);
    assert!(
        got.iter().any(|g| g.ends_with("blas_lib_gfx1100.kpack")),
        "{got:#?}"
    );
    assert!(
        got.iter().any(|g| g.ends_with("blas_lib_gfx1201.kpack")),
        "{got:#?}"
    );

    // A GPU with no device package: said, with the package that brings it.
    let none = tmp.path().join("none");
    let out = rocbuild(
        &[
            "bundle",
            app.to_str().unwrap(),
            "--into",
            none.to_str().unwrap(),
            "--gpu-arch",
            "gfx1030",
        ],
        &[],
    );
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains("has no kernel pack for gfx1030"), "{text}");
    assert!(
        text.contains("pip install rocm-sdk-device-gfx1030"),
        "{text}"
    );
}

/// A real PE DLL (mingw-w64) exporting `exports` and importing `imports` from `deps`.
fn pe(out: &Path, exports: &[&str], deps: &[(&Path, &str)]) {
    let mut c = String::new();
    for (_, sym) in deps {
        c.push_str(&format!(
            "__declspec(dllimport) void {sym}(void);\n__declspec(dllexport) void uses_{sym}(void) {{ {sym}(); }}\n"
        ));
    }
    for s in exports {
        c.push_str(&format!("__declspec(dllexport) void {s}(void) {{}}\n"));
    }
    let src = out.with_extension("c");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    std::fs::write(&src, c).unwrap();
    run(Command::new("x86_64-w64-mingw32-gcc")
        .args(["-shared", "-nostdlib", "-o"])
        .arg(out)
        .arg(&src)
        .args(deps.iter().map(|(p, _)| p))
        .args(["-e", "0"]));
    std::fs::remove_file(src).unwrap();
}

/// A Windows venv (files only) holding TheRock's packages in `libraries_dir` and a
/// CTranslate2 whose DLL imports rocBLAS: the venv.
fn windows_venv_with_ctranslate2(root: &Path, libraries_dir: &str) -> PathBuf {
    let venv = root.join("venv");
    let site = venv.join("Lib/site-packages");
    std::fs::create_dir_all(venv.join("Scripts")).unwrap();
    std::fs::write(venv.join("Scripts/python.exe"), b"MZ").unwrap();
    std::fs::write(
        venv.join("pyvenv.cfg"),
        "home = C:\\Python312\nversion = 3.12.7\n",
    )
    .unwrap();
    ctranslate2_on_the_rock(&site, libraries_dir, "");
    venv
}

/// TheRock's packages in `site` with their libraries in `libraries_dir`, and a CTranslate2
/// whose `ctranslate2.dll` imports rocBLAS from there, with `init` as its `__init__.py`.
fn ctranslate2_on_the_rock(site: &Path, libraries_dir: &str, init: &str) {
    fake_the_rock_multi_arch(site, true, "7.15.0", &["gfx1201"]);
    let libs = site.join(libraries_dir);
    if libraries_dir != "_rocm_sdk_libraries" {
        std::fs::rename(site.join("_rocm_sdk_libraries"), &libs).unwrap();
    }
    let rocblas = libs.join("bin/rocblas.dll");
    pe(&rocblas, &["rocblas_create_handle"], &[]);
    pe(
        &site.join("ctranslate2/ctranslate2.dll"),
        &["ct2_entry"],
        &[(&rocblas, "rocblas_create_handle")],
    );
    std::fs::write(site.join("ctranslate2/__init__.py"), init).unwrap();
    let di = site.join("ctranslate2-4.8.1.dist-info");
    std::fs::create_dir_all(&di).unwrap();
    std::fs::write(
        di.join("METADATA"),
        "Metadata-Version: 2.1\nName: ctranslate2\nVersion: 4.8.1\n",
    )
    .unwrap();
}

/// Upstream CTranslate2's `__init__.py` on Windows adds `_rocm_sdk_libraries_custom\bin`
/// (AMD's 7.2 bundle) in the same `try` as `_rocm_sdk_core\bin`: with TheRock's multi-arch
/// packages that directory does not exist, so rocBLAS (in `_rocm_sdk_libraries\bin`) is found
/// nowhere. doctor says exactly that, read from the files; with AMD's bundle layout the same
/// DLL is found through the directories the package adds, and nothing is said.
#[test]
fn doctor_knows_the_dll_directories_upstream_ctranslate2_adds_on_windows() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = windows_venv_with_ctranslate2(&tmp.path().join("multi"), "_rocm_sdk_libraries");
    let out = rocbuild(
        &[
            "doctor",
            "--venv",
            venv.to_str().unwrap(),
            "ctranslate2",
            "--no-load",
        ],
        &[],
    );
    assert_ne!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    for want in [
        "ctranslate2's __init__.py adds _rocm_sdk_libraries_custom/bin with os.add_dll_directory, which this venv does not have, so it stops there",
        "the ROCm libraries here are in: _rocm_sdk_libraries\\bin",
        "rocblas.dll",
        "rocbuild repair ctranslate2",
    ] {
        assert!(out.stdout.contains(want), "{want}:\n{}", out.stdout);
    }

    let venv =
        windows_venv_with_ctranslate2(&tmp.path().join("custom"), "_rocm_sdk_libraries_custom");
    let out = rocbuild(
        &[
            "doctor",
            "--venv",
            venv.to_str().unwrap(),
            "ctranslate2",
            "--no-load",
        ],
        &[],
    );
    assert!(!out.stdout.contains("stops there"), "{}", out.stdout);
    assert!(!out.stdout.contains("rocblas.dll"), "{}", out.stdout);
}

/// What upstream CTranslate2's `__init__.py` does on Windows, in this test's words: the
/// package's own directory and, inside one `try`, TheRock's `_rocm_sdk_core\bin` then
/// `_rocm_sdk_libraries_custom\bin` go to `os.add_dll_directory` (the first that is missing
/// ends the `try`); then every DLL of the package is loaded with ctypes.
const CT2_LIKE_INIT: &str = r#"import ctypes
import glob
import os

_here = os.path.dirname(os.path.abspath(__file__))
_site = os.path.dirname(_here)
os.add_dll_directory(_here)
try:
    for _sub in ("_rocm_sdk_core", "_rocm_sdk_libraries_custom"):
        os.add_dll_directory(os.path.join(_site, _sub, "bin"))
except OSError:
    pass
for _dll in glob.glob(os.path.join(_here, "*.dll")):
    ctypes.CDLL(_dll)
"#;

/// The same two TheRock layouts in a real Windows venv (the embeddable CPython), doctor's load
/// test run under Wine: with TheRock's multi-arch packages (`_rocm_sdk_libraries`) the import
/// really fails as doctor said from the files, and after the fix doctor names (`repair`: a
/// preload hook adding the directories this venv has) it really loads; with AMD's bundle layout
/// (`_rocm_sdk_libraries_custom`) it really loads and doctor says all is well. What Wine does
/// not prove: Windows' own loader order (KnownDLLs, SxS), and the real ROCm DLLs.
#[test]
fn the_rock_dll_directories_under_wine_agree_with_doctor() {
    let Some(w) = crate::windows::world() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for d in ["multi", "custom"] {
        std::fs::create_dir_all(tmp.path().join(d)).unwrap();
    }
    let env = [("WINEPREFIX", w.wineprefix.to_str().unwrap())];
    let doctor = |venv: &Path| {
        let out = rocbuild(
            &["doctor", "--venv", venv.to_str().unwrap(), "ctranslate2"],
            &env,
        );
        (out.code, format!("{}{}", out.stdout, out.stderr))
    };
    let venv_with = |dir: &str, libraries_dir: &str| {
        let venv = crate::windows::windows_venv(&w, &tmp.path().join(dir));
        ctranslate2_on_the_rock(
            &venv.join("Lib/site-packages"),
            libraries_dir,
            CT2_LIKE_INIT,
        );
        venv
    };
    let loads = "ctranslate2 4.8.1: loads (1 native library)";

    let venv = venv_with("multi", "_rocm_sdk_libraries");
    let (code, text) = doctor(&venv);
    assert_ne!(code, 0, "{text}");
    for want in [
        "does not have, so it stops there",
        "ctranslate2's load test ran under Wine, and failed there",
        "rocblas.dll not found",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    // The fix doctor names: repair's preload hook adds the directories this venv has; the
    // import then really loads under Wine.
    let repair = rocbuild(
        &["repair", "ctranslate2", "--venv", venv.to_str().unwrap()],
        &env,
    );
    assert_eq!(repair.code, 0, "{}{}", repair.stdout, repair.stderr);
    let (code, text) = doctor(&venv);
    assert_eq!(code, 0, "after repair: {text}");
    assert!(text.contains(loads), "{text}");

    let (code, text) = doctor(&venv_with("custom", "_rocm_sdk_libraries_custom"));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(loads), "{text}");
}
