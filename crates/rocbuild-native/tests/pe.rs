//! PE DLLs built here with mingw-w64 (and clang-15 + lld-link for MSVC-mangled C++): imports
//! by name and by ordinal, exports, WinError 127 found ahead of time, the Windows DLL search.

mod common;

use std::path::{Path, PathBuf};

use common::{mingw_dll, write};
use rocbuild_native::{closure, read_binary, unresolved_imports, Format, Provider, SearchContext};

const A_C: &str = "__declspec(dllimport) int foo(int);\n__declspec(dllimport) int bar(int);\n\
__declspec(dllimport) int secret(int);\n\
__declspec(dllexport) int afun(int x) { return foo(x) + bar(x) + secret(x); }\n";

/// b.dll exporting `exports` (C functions `name(int)`) through a .def file; `secret` is
/// exported by ordinal 7 only (NONAME) when listed.
fn build_b(dir: &Path, out: &Path, exports: &[&str]) {
    let mut src = String::new();
    let mut def = String::from("LIBRARY b.dll\nEXPORTS\n");
    for e in exports {
        src.push_str(&format!("int {e}(int x) {{ return x + {}; }}\n", e.len()));
        if *e == "secret" {
            def.push_str("  secret @7 NONAME\n");
        } else {
            def.push_str(&format!("  {e}\n"));
        }
    }
    let c = write(dir, "b_src.c", &src);
    let d = write(dir, "b.def", &def);
    mingw_dll(
        &[&c, &d],
        out,
        &[&format!(
            "-Wl,--out-implib,{}",
            dir.join("libb.a").display()
        )],
    );
}

/// a.dll (importing foo, bar and ordinal 7 from b.dll) linked against b.dll v1.
fn build_a(dir: &Path) -> (PathBuf, PathBuf) {
    let b = dir.join("v1/b.dll");
    build_b(dir, &b, &["foo", "bar", "secret"]);
    let a_src = write(dir, "a.c", A_C);
    let a = dir.join("pkg/a.dll");
    mingw_dll(&[&a_src], &a, &[&format!("-L{}", dir.display()), "-lb"]);
    (a, b)
}

#[test]
fn reads_imports_by_name_and_ordinal_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = build_a(dir.path());
    let a_bin = read_binary(&a).unwrap();
    assert_eq!(
        (a_bin.format, a_bin.arch.as_str(), a_bin.is_library),
        (Format::Pe, "x86_64", true)
    );
    assert!(
        a_bin.needed.iter().any(|n| n == "b.dll"),
        "{:?}",
        a_bin.needed
    );
    assert!(a_bin
        .needed
        .iter()
        .any(|n| n.eq_ignore_ascii_case("kernel32.dll")));
    let from_b: Vec<(Option<&str>, Option<u32>)> = a_bin
        .imports
        .iter()
        .filter(|i| i.library.as_deref() == Some("b.dll"))
        .map(|i| (i.name.as_deref(), i.ordinal))
        .collect();
    assert_eq!(from_b.len(), 3, "{from_b:?}");
    assert!(from_b.contains(&(Some("foo"), None)));
    assert!(from_b.contains(&(Some("bar"), None)));
    assert!(from_b.contains(&(None, Some(7))));
    assert!(a_bin.exports.iter().any(|e| e.name == "afun"));

    let b_bin = read_binary(&b).unwrap();
    assert_eq!(b_bin.soname_or_install_name.as_deref(), Some("b.dll"));
    let secret = b_bin.exports.iter().find(|e| e.ordinal == Some(7)).unwrap();
    assert_eq!(secret.name, "", "NONAME export has no name");
    assert!(b_bin.exports.iter().any(|e| e.name == "foo"));
}

/// b.dll v2 no longer exports `bar`: the loader would fail with WinError 127; we say which
/// procedure, from which DLL, before anything is loaded.
#[test]
fn win_error_127_is_named_before_loading() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b1) = build_a(d);
    let a_bin = read_binary(&a).unwrap();
    let v1 = read_binary(&b1).unwrap();
    assert_eq!(unresolved_imports(&a_bin, &[("b.dll", &v1)]), []);

    let b2 = d.join("v2/b.dll");
    build_b(d, &b2, &["foo", "secret"]);
    let v2 = read_binary(&b2).unwrap();
    let missing = unresolved_imports(&a_bin, &[("B.DLL", &v2)]);
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(missing[0].library.as_deref(), Some("b.dll"));
    assert_eq!(missing[0].name.as_deref(), Some("bar"));

    // v3 keeps the names but moves `secret` off ordinal 7: the ordinal import breaks.
    let b3 = d.join("v3/b.dll");
    build_b(d, &b3, &["foo", "bar"]);
    let v3 = read_binary(&b3).unwrap();
    let missing = unresolved_imports(&a_bin, &[("b.dll", &v3)]);
    assert_eq!(
        missing.iter().map(|m| m.display_name()).collect::<Vec<_>>(),
        ["#7"]
    );

    // Through the closure: a.dll's dir holds v2.
    std::fs::copy(&b2, a.parent().unwrap().join("b.dll")).unwrap();
    let c = closure(&a, &SearchContext::default()).unwrap();
    let m = c.abi_check();
    assert_eq!(
        m.iter().map(|m| m.display_name()).collect::<Vec<_>>(),
        ["bar"]
    );
    assert_eq!(m[0].importer.as_deref(), Some(a.as_path()));
}

/// C++ DLLs: mingw g++ (Itanium names) and clang-15 + lld-link for the MSVC ABI (the names
/// torch's Windows DLLs have, as in `?decref_pyobject@TensorImpl@c10@@UEBAXXZ`).
#[test]
fn cxx_dll_exports_are_demangled() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = write(
        d,
        "c10.cpp",
        "namespace c10 { __declspec(dllexport) int foo(int x) { return x; } }\n",
    );
    let gnu = d.join("gnu/c10.dll");
    mingw_dll(&[&src], &gnu, &[]);
    let b = read_binary(&gnu).unwrap();
    let foo = b
        .exports
        .iter()
        .find(|e| e.name == "_ZN3c103fooEi")
        .unwrap();
    assert_eq!(foo.demangled.as_deref(), Some("c10::foo(int)"));

    let Some(clang) = common::clang() else {
        panic!("clang-15 is needed for the MSVC-ABI DLL (apt-get install clang-15 lld-15)");
    };
    let msvc_src = write(
        d,
        "c10_msvc.cpp",
        "namespace c10 { __declspec(dllexport) int foo(int x) { return x + 1; }\n\
         struct __declspec(dllexport) TensorImpl { virtual void decref_pyobject() const; };\n\
         void TensorImpl::decref_pyobject() const {} }\n",
    );
    let msvc = d.join("msvc/c10.dll");
    std::fs::create_dir_all(msvc.parent().unwrap()).unwrap();
    common::run(
        std::process::Command::new(clang)
            .args([
                "--target=x86_64-pc-windows-msvc",
                "-fno-rtti",
                "-fuse-ld=lld",
                "-nostdlib",
                "-shared",
                "-Wl,/noentry",
            ])
            .arg(&msvc_src)
            .arg("-o")
            .arg(&msvc),
    );
    let b = read_binary(&msvc).unwrap();
    let dec = b
        .exports
        .iter()
        .find(|e| e.name == "?decref_pyobject@TensorImpl@c10@@UEBAXXZ")
        .unwrap();
    let text = dec.demangled.as_deref().unwrap();
    assert!(text.contains("c10::TensorImpl::decref_pyobject"), "{text}");
    let foo = b
        .exports
        .iter()
        .find(|e| e.name == "?foo@c10@@YAHH@Z")
        .unwrap();
    assert!(
        foo.demangled.as_deref().unwrap().contains("c10::foo(int)"),
        "{foo:?}"
    );

    // An extension importing both from the MSVC c10.dll, then a c10.dll without the method:
    // the WinError 127 of the torch issue threads, with its C++ name.
    let ext_src = write(
        d,
        "ext.cpp",
        "namespace c10 { __declspec(dllimport) int foo(int);\n\
         struct __declspec(dllimport) TensorImpl { virtual void decref_pyobject() const; }; }\n\
         extern \"C\" __declspec(dllexport) int ext(const c10::TensorImpl* t) { t->c10::TensorImpl::decref_pyobject(); return c10::foo(1); }\n",
    );
    let ext = d.join("msvc/ext.dll");
    common::run(
        std::process::Command::new(clang)
            .args([
                "--target=x86_64-pc-windows-msvc",
                "-fno-rtti",
                "-fuse-ld=lld",
                "-nostdlib",
                "-shared",
                "-Wl,/noentry",
            ])
            .arg(&ext_src)
            .arg(msvc.with_extension("lib"))
            .arg("-o")
            .arg(&ext),
    );
    let older_src = write(
        d,
        "c10_old.cpp",
        "namespace c10 { __declspec(dllexport) int foo(int x) { return x; } }\n",
    );
    let older = d.join("old/c10.dll");
    std::fs::create_dir_all(older.parent().unwrap()).unwrap();
    common::run(
        std::process::Command::new(clang)
            .args([
                "--target=x86_64-pc-windows-msvc",
                "-fuse-ld=lld",
                "-nostdlib",
                "-shared",
                "-Wl,/noentry",
            ])
            .arg(&older_src)
            .arg("-o")
            .arg(&older),
    );
    let ext_bin = read_binary(&ext).unwrap();
    let old = read_binary(&older).unwrap();
    let missing = unresolved_imports(&ext_bin, &[("c10.dll", &old)]);
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert!(
        missing[0]
            .display_name()
            .contains("c10::TensorImpl::decref_pyobject"),
        "{missing:?}"
    );
}

/// The Windows search: the DLL's own dir, add_dll_directory dirs (a package's __init__ and a
/// preload hook), System32, PATH; names case-insensitive; API sets and known DLLs are the
/// system's; a DLL nobody has is missing with the dirs that were searched.
#[test]
fn windows_closure_with_dll_dirs_and_a_missing_dll() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // c.dll, needed by b.dll; gone.dll, needed by c.dll and deleted.
    let gone = write(
        d,
        "gone.c",
        "__declspec(dllexport) int gone(int x) { return x; }\n",
    );
    mingw_dll(
        &[&gone],
        &d.join("tmp/gone.dll"),
        &[&format!(
            "-Wl,--out-implib,{}",
            d.join("libgone.a").display()
        )],
    );
    let c_src = write(d, "c.c", "__declspec(dllimport) int gone(int);\n__declspec(dllexport) int secret(int x) { return gone(x); }\n");
    // The file is named C.DLL on disk; b.dll asks for "c.dll".
    mingw_dll(
        &[&c_src],
        &d.join("rocm/bin/C.DLL"),
        &[
            &format!("-L{}", d.display()),
            "-lgone",
            &format!("-Wl,--out-implib,{}", d.join("libc_.a").display()),
        ],
    );
    std::fs::remove_file(d.join("tmp/gone.dll")).unwrap();
    let b_src = write(d, "b.c", "__declspec(dllimport) int secret(int);\n__declspec(dllexport) int foo(int x) { return secret(x); }\n__declspec(dllexport) int bar(int x) { return x; }\n");
    mingw_dll(
        &[&b_src],
        &d.join("torch/lib/b.dll"),
        &[
            &format!("-L{}", d.display()),
            "-lc_",
            &format!("-Wl,--out-implib,{}", d.join("libb.a").display()),
        ],
    );
    let a_src = write(d, "a2.c", "__declspec(dllimport) int foo(int);\n__declspec(dllimport) int bar(int);\n__declspec(dllexport) int afun(int x) { return foo(x) + bar(x); }\n");
    let a = d.join("site/pkg/a.pyd");
    mingw_dll(&[&a_src], &a, &[&format!("-L{}", d.display()), "-lb"]);

    std::fs::create_dir_all(d.join("System32")).unwrap();
    let ctx = SearchContext {
        platform: Some(Format::Pe),
        dll_dirs: vec![d.join("torch/lib"), d.join("rocm/bin")],
        system32: Some(d.join("System32")),
        ..Default::default()
    };
    let c = closure(&a, &ctx).unwrap();
    let b = c.found.iter().find(|x| x.name == "b.dll").unwrap();
    assert_eq!(
        (b.provider.clone(), b.path.clone()),
        (Provider::DllDirectory, Some(d.join("torch/lib/b.dll")))
    );
    let cdll = c
        .found
        .iter()
        .find(|x| x.name.eq_ignore_ascii_case("c.dll"))
        .unwrap();
    assert_eq!(
        cdll.path.as_deref(),
        Some(d.join("rocm/bin/C.DLL").as_path())
    );
    assert_eq!(cdll.needed_by, [d.join("torch/lib/b.dll")]);
    let k32 = c
        .found
        .iter()
        .find(|x| x.name.eq_ignore_ascii_case("kernel32.dll"))
        .unwrap();
    assert_eq!(k32.provider, Provider::System);
    assert!(k32.is_system());
    assert_eq!(
        c.missing
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>(),
        ["gone.dll"]
    );
    let searched = &c.missing[0].searched;
    assert_eq!(
        searched.first(),
        Some(&d.join("site/pkg")),
        "the DLL's own dir first: {searched:?}"
    );
    assert!(searched.contains(&d.join("System32")));

    // Without the add_dll_directory dirs, b.dll is missing; PATH (a plain LoadLibrary) finds it.
    let bare = SearchContext {
        dll_dirs: vec![],
        ..ctx.clone()
    };
    let c = closure(&a, &bare).unwrap();
    assert!(c.missing.iter().any(|m| m.name == "b.dll"));
    let with_path = SearchContext {
        path: vec![d.join("torch/lib")],
        ..bare
    };
    let c = closure(&a, &with_path).unwrap();
    let b = c.found.iter().find(|x| x.name == "b.dll").unwrap();
    assert_eq!(b.provider, Provider::PathEnv);
}

/// A delay-loaded DLL (lld-link `/delayload`, as torch does for GPU driver DLLs): not a
/// load-time dependency, but its procedures are imports and are checked like the others.
#[test]
fn delay_loaded_dll_is_listed_apart_and_checked() {
    let Some(clang) = common::clang() else {
        panic!("clang-15 is needed (apt-get install clang-15 lld-15)");
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let msvc = |src: &Path, out: &Path, extra: &[&str]| {
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        common::run(
            std::process::Command::new(clang)
                .args([
                    "--target=x86_64-pc-windows-msvc",
                    "-fuse-ld=lld",
                    "-nostdlib",
                    "-shared",
                    "-Wl,/noentry",
                ])
                .arg(src)
                .args(extra)
                .arg("-o")
                .arg(out),
        )
    };
    let drv = write(d, "drv.c", "__declspec(dllexport) int drv_init(int x) { return x; }\n__declspec(dllexport) int drv_query(int x) { return x; }\n");
    msvc(&drv, &d.join("drv.dll"), &[]);
    let user = write(
        d,
        "user.c",
        "__declspec(dllimport) int drv_init(int);\n__declspec(dllimport) int drv_query(int);\n\
         void* __delayLoadHelper2(const void* descr, void** iat) { (void)descr; return *iat; }\n\
         __declspec(dllexport) int use(int x) { return drv_init(x) + drv_query(x); }\n",
    );
    let lib = d.join("drv.lib");
    let lib_arg = lib.display().to_string();
    msvc(
        &user,
        &d.join("user.dll"),
        &["-Wl,/delayload:drv.dll", &lib_arg],
    );
    let b = read_binary(&d.join("user.dll")).unwrap();
    assert_eq!(b.delay_needed, ["drv.dll"]);
    assert!(!b.needed.iter().any(|n| n == "drv.dll"), "{:?}", b.needed);
    let delayed: Vec<&str> = b
        .imports
        .iter()
        .filter(|i| i.delayed)
        .filter_map(|i| i.name.as_deref())
        .collect();
    assert_eq!(delayed, ["drv_init", "drv_query"]);
    // The load-time closure does not need it ...
    let c = closure(&d.join("user.dll"), &SearchContext::default()).unwrap();
    assert!(
        c.missing.is_empty() && c.found.is_empty(),
        "{:?} {:?}",
        c.found,
        c.missing
    );
    // ... and a driver without drv_query is still caught by the ABI check.
    let old = write(
        d,
        "old.c",
        "__declspec(dllexport) int drv_init(int x) { return x; }\n",
    );
    msvc(&old, &d.join("old/drv.dll"), &[]);
    let old_bin = read_binary(&d.join("old/drv.dll")).unwrap();
    let missing = unresolved_imports(&b, &[("drv.dll", &old_bin)]);
    assert_eq!(
        missing.iter().map(|m| m.display_name()).collect::<Vec<_>>(),
        ["drv_query"]
    );
}
