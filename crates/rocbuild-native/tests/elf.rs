//! ELF files built here with `cc`: reading, the ld.so search order, the ABI check.
// Tests say on stderr what they skip or measured.
#![allow(clippy::print_stderr)]

mod common;

use std::path::{Path, PathBuf};

use common::{cc_shared, write};
use rocbuild_native::{closure, read_binary, Format, Provider, SearchContext};

/// The host's context with nothing from the test runner's environment in it.
fn host() -> SearchContext {
    SearchContext {
        ld_library_path: Vec::new(),
        ..SearchContext::linux_host(Vec::new())
    }
}

/// libdep.so.1 with a version script (LIBDEP_1.0), and libmain.so needing it, needing
/// libgone.so (deleted after linking), with RUNPATH $ORIGIN/deps.
fn build_main(dir: &Path) -> PathBuf {
    let deps = dir.join("deps");
    write(
        dir,
        "dep.map",
        "LIBDEP_1.0 { global: dep_fn; dep_data; local: *; };\n",
    );
    let dep_src = write(dir, "dep.c", "int dep_data = 3;\nint dep_fn(int x) { return x + dep_data; }\nint dep_hidden(void) { return 1; }\n");
    let map = format!("-Wl,--version-script={}", dir.join("dep.map").display());
    cc_shared(
        &dep_src,
        &deps.join("libdep.so.1"),
        &["-Wl,-soname,libdep.so.1", &map],
    );
    let gone_src = write(dir, "gone.c", "int gone_fn(void) { return 7; }\n");
    cc_shared(
        &gone_src,
        &deps.join("libgone.so"),
        &["-Wl,-soname,libgone.so"],
    );
    let main_src = write(
        dir,
        "main.c",
        "#include <stdio.h>\nint dep_fn(int);\nint gone_fn(void);\n__attribute__((weak)) int maybe_fn(void);\n\
         int main_fn(int x) { printf(\"%d\", x); return dep_fn(x) + gone_fn() + (maybe_fn ? maybe_fn() : 0); }\n",
    );
    let main = dir.join("libmain.so");
    let libdir = format!("-L{}", deps.display());
    cc_shared(
        &main_src,
        &main,
        &[
            &libdir,
            "-l:libdep.so.1",
            "-lgone",
            "-Wl,--enable-new-dtags",
            "-Wl,-rpath,$ORIGIN/deps",
            "-Wl,-soname,libmain.so",
        ],
    );
    std::fs::remove_file(deps.join("libgone.so")).unwrap();
    main
}

#[test]
fn reads_needed_runpath_versions_and_symbols() {
    let dir = tempfile::tempdir().unwrap();
    let main = build_main(dir.path());
    let b = read_binary(&main).unwrap();
    assert_eq!(b.format, Format::Elf);
    assert_eq!(b.arch, "x86_64");
    assert!(b.is_library && b.is_64);
    assert_eq!(b.soname_or_install_name.as_deref(), Some("libmain.so"));
    assert_eq!(b.needed, ["libdep.so.1", "libgone.so", "libc.so.6"]);
    assert_eq!(b.runpath, ["$ORIGIN/deps"]);
    assert!(b.rpath.is_empty());
    assert!(b.exports.iter().any(|e| e.name == "main_fn"));

    // The import of dep_fn carries the version the linker saw, and the file defining it.
    let dep_fn = b
        .imports
        .iter()
        .find(|i| i.name.as_deref() == Some("dep_fn"))
        .unwrap();
    assert_eq!(dep_fn.version.as_deref(), Some("LIBDEP_1.0"));
    assert_eq!(dep_fn.library.as_deref(), Some("libdep.so.1"));
    assert!(!dep_fn.weak);
    let printf = b
        .imports
        .iter()
        .find(|i| i.name.as_deref() == Some("printf"))
        .unwrap();
    assert!(
        printf.version.as_deref().unwrap().starts_with("GLIBC_2."),
        "{printf:?}"
    );
    assert_eq!(printf.library.as_deref(), Some("libc.so.6"));
    let gone = b
        .imports
        .iter()
        .find(|i| i.name.as_deref() == Some("gone_fn"))
        .unwrap();
    assert_eq!(
        (gone.version.as_deref(), gone.library.as_deref()),
        (None, None)
    );
    let maybe = b
        .imports
        .iter()
        .find(|i| i.name.as_deref() == Some("maybe_fn"))
        .unwrap();
    assert!(maybe.weak);

    // Exports of the versioned library carry their version; the local symbol is not exported.
    let dep = read_binary(&dir.path().join("deps/libdep.so.1")).unwrap();
    let e = dep.exports.iter().find(|e| e.name == "dep_fn").unwrap();
    assert_eq!(e.version.as_deref(), Some("LIBDEP_1.0"));
    assert!(dep.exports.iter().any(|e| e.name == "dep_data"));
    assert!(!dep.exports.iter().any(|e| e.name == "dep_hidden"));

    // The older ELF-only view still works.
    let info = rocbuild_native::read_elf(&main).unwrap();
    assert_eq!(info.runpath, ["$ORIGIN/deps"]);
    assert!(!rocbuild_native::exports_cxx11_abi(&main).unwrap());
}

#[test]
fn closure_expands_origin_and_names_the_missing_library() {
    let dir = tempfile::tempdir().unwrap();
    let main = build_main(dir.path());
    let c = closure(&main, &host()).unwrap();
    let dep = c.found.iter().find(|d| d.name == "libdep.so.1").unwrap();
    assert_eq!(
        dep.path.as_deref(),
        Some(dir.path().join("deps/libdep.so.1").as_path())
    );
    assert_eq!(
        dep.provider,
        Provider::Runpath {
            entry: "$ORIGIN/deps".into(),
            of: main.clone()
        }
    );
    assert_eq!(dep.needed_by, std::slice::from_ref(&main));
    let libc = c.found.iter().find(|d| d.name == "libc.so.6").unwrap();
    assert!(libc.is_system(), "{libc:?}");
    assert!(matches!(
        libc.provider,
        Provider::LdCache | Provider::DefaultDir
    ));
    assert_eq!(c.missing.len(), 1, "{:?}", c.missing);
    assert_eq!(c.missing[0].name, "libgone.so");
    assert_eq!(c.missing[0].needed_by, std::slice::from_ref(&main));
    assert!(c.missing[0].searched.contains(&dir.path().join("deps")));
    // The ABI check names the symbol the missing library would have provided, and only it.
    let abi: Vec<String> = c.abi_check().iter().map(|m| m.display_name()).collect();
    assert_eq!(abi, ["gone_fn"]);
}

/// DT_RPATH applies to the dependencies' dependencies too and beats LD_LIBRARY_PATH;
/// DT_RUNPATH is for direct dependencies only and comes after LD_LIBRARY_PATH.
#[test]
fn rpath_is_inherited_and_runpath_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let leaf = write(d, "leaf.c", "int leaf(void) { return 1; }\n");
    let mid = write(
        d,
        "mid.c",
        "int leaf(void);\nint mid(void) { return leaf(); }\n",
    );
    let top = write(
        d,
        "top.c",
        "int mid(void);\nint top(void) { return mid(); }\n",
    );
    let r = d.join("r");
    cc_shared(&leaf, &r.join("libleaf.so"), &["-Wl,-soname,libleaf.so"]);
    cc_shared(
        &leaf,
        &d.join("env/libleaf.so"),
        &["-Wl,-soname,libleaf.so"],
    );
    let lr = format!("-L{}", r.display());
    cc_shared(
        &mid,
        &r.join("libmid.so"),
        &[&lr, "-lleaf", "-Wl,-soname,libmid.so"],
    );
    let with_rpath = d.join("a/libtop.so");
    let with_runpath = d.join("b/libtop.so");
    cc_shared(
        &top,
        &with_rpath,
        &[
            &lr,
            "-lmid",
            "-Wl,--disable-new-dtags",
            "-Wl,-rpath,${ORIGIN}/../r",
        ],
    );
    cc_shared(
        &top,
        &with_runpath,
        &[
            &lr,
            "-lmid",
            "-Wl,--enable-new-dtags",
            "-Wl,-rpath,$ORIGIN/../r",
        ],
    );
    assert_eq!(read_binary(&with_rpath).unwrap().rpath, ["${ORIGIN}/../r"]);

    let ctx = host();
    let c = closure(&with_rpath, &ctx).unwrap();
    let leaf_dep = c.found.iter().find(|x| x.name == "libleaf.so").unwrap();
    assert_eq!(
        leaf_dep.path.as_deref(),
        Some(r.join("libleaf.so").as_path())
    );
    assert_eq!(leaf_dep.needed_by, [r.join("libmid.so")]);
    assert!(matches!(&leaf_dep.provider, Provider::Rpath { of, .. } if *of == with_rpath));
    assert!(c.missing.is_empty(), "{:?}", c.missing);

    let c = closure(&with_runpath, &ctx).unwrap();
    assert!(c.found.iter().any(|x| x.name == "libmid.so"));
    assert_eq!(
        c.missing
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>(),
        ["libleaf.so"]
    );

    // LD_LIBRARY_PATH: after RPATH, before RUNPATH.
    let env = SearchContext {
        ld_library_path: vec![d.join("env")],
        ..host()
    };
    let c = closure(&with_rpath, &env).unwrap();
    let leaf_dep = c.found.iter().find(|x| x.name == "libleaf.so").unwrap();
    assert_eq!(
        leaf_dep.path.as_deref(),
        Some(r.join("libleaf.so").as_path())
    );
    let c = closure(&with_runpath, &env).unwrap();
    let leaf_dep = c.found.iter().find(|x| x.name == "libleaf.so").unwrap();
    assert_eq!(
        leaf_dep.path.as_deref(),
        Some(d.join("env/libleaf.so").as_path())
    );
    assert_eq!(leaf_dep.provider, Provider::LdLibraryPath);

    // $LIB and $PLATFORM come from the context.
    cc_shared(
        &top,
        &d.join("c/libtop.so"),
        &[
            &lr,
            "-lmid",
            "-Wl,--disable-new-dtags",
            "-Wl,-rpath,$ORIGIN/../$LIB/$PLATFORM",
        ],
    );
    std::fs::create_dir_all(d.join("zlib/zplat")).unwrap();
    for f in ["libmid.so", "libleaf.so"] {
        std::fs::copy(r.join(f), d.join("zlib/zplat").join(f)).unwrap();
    }
    let ctx = SearchContext {
        lib_expansion: "zlib".into(),
        platform_expansion: "zplat".into(),
        ..host()
    };
    let c = closure(&d.join("c/libtop.so"), &ctx).unwrap();
    let mid_dep = c.found.iter().find(|x| x.name == "libmid.so").unwrap();
    assert_eq!(
        mid_dep.path.as_deref(),
        Some(d.join("zlib/zplat/libmid.so").as_path())
    );
}

/// A library already loaded in the process (as torch's are after `import torch`) satisfies a
/// dependency by soname without any search path.
#[test]
fn preloaded_libraries_satisfy_dependencies() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = write(d, "t.c", "int t(void) { return 1; }\n");
    cc_shared(&lib, &d.join("torch/lib/libt.so"), &["-Wl,-soname,libt.so"]);
    let ext = write(d, "e.c", "int t(void);\nint e(void) { return t(); }\n");
    let lt = format!("-L{}", d.join("torch/lib").display());
    cc_shared(&ext, &d.join("pkg/ext.so"), &[&lt, "-lt"]);
    let c = closure(&d.join("pkg/ext.so"), &host()).unwrap();
    assert_eq!(c.missing.len(), 1);
    let ctx = SearchContext {
        preloaded: vec![d.join("torch/lib/libt.so")],
        ..host()
    };
    let c = closure(&d.join("pkg/ext.so"), &ctx).unwrap();
    assert!(c.missing.is_empty(), "{:?}", c.missing);
    let t = c.found.iter().find(|x| x.name == "libt.so").unwrap();
    assert_eq!(t.provider, Provider::Preloaded);
}

/// Two builds of a torch-like C++ library: v1 exports `c10::foo(int)`, v2 does not. An
/// extension built against v1 and installed next to v2 is diagnosed with the demangled name —
/// the same symbol the real loader refuses.
#[test]
fn abi_check_finds_the_symbol_a_newer_torch_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let v1 = write(
        d,
        "c10_v1.cpp",
        "namespace c10 { int foo(int x) { return x + 1; } int bar() { return 2; } }\n",
    );
    let v2 = write(
        d,
        "c10_v2.cpp",
        "namespace c10 { int bar() { return 3; } long foo(long x) { return x; } }\n",
    );
    cc_shared(&v1, &d.join("v1/libc10.so"), &["-Wl,-soname,libc10.so"]);
    cc_shared(
        &v2,
        &d.join("site/torch/lib/libc10.so"),
        &["-Wl,-soname,libc10.so"],
    );
    let ext = write(d, "ext.cpp", "namespace c10 { int foo(int); int bar(); }\nextern \"C\" int ext_entry() { return c10::foo(1) + c10::bar(); }\n");
    let l1 = format!("-L{}", d.join("v1").display());
    let ext_so = d.join("site/ext/libext.so");
    cc_shared(
        &ext,
        &ext_so,
        &[&l1, "-lc10", "-Wl,-rpath,$ORIGIN/../torch/lib"],
    );

    let c = closure(&ext_so, &host()).unwrap();
    assert!(c.missing.is_empty(), "{:?}", c.missing);
    let missing = c.abi_check();
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(missing[0].name.as_deref(), Some("_ZN3c103fooEi"));
    assert_eq!(missing[0].demangled.as_deref(), Some("c10::foo(int)"));
    assert_eq!(missing[0].importer.as_deref(), Some(ext_so.as_path()));

    // The real loader agrees (dlopen with RTLD_NOW through python's ctypes).
    let py = std::process::Command::new("python3")
        .arg("-c")
        .arg("import ctypes, os, sys\ntry:\n  ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW)\nexcept OSError as e:\n  print(e)")
        .arg(&ext_so)
        .output()
        .unwrap();
    let msg = String::from_utf8_lossy(&py.stdout);
    assert!(msg.contains("undefined symbol: _ZN3c103fooEi"), "{msg}");

    // With v1 in place there is nothing to report: the check is about this symbol, not noise.
    std::fs::copy(d.join("v1/libc10.so"), d.join("site/torch/lib/libc10.so")).unwrap();
    let c = closure(&ext_so, &host()).unwrap();
    assert_eq!(c.abi_check(), []);
}

/// Our reading of /etc/ld.so.cache lists what `ldconfig -p` lists.
#[test]
fn ld_so_cache_matches_ldconfig() {
    let Ok(bytes) = std::fs::read("/etc/ld.so.cache") else {
        eprintln!("SKIPPED: no /etc/ld.so.cache");
        return;
    };
    let ours = rocbuild_native::parse_ld_so_cache(&bytes).unwrap();
    let out = std::process::Command::new("/sbin/ldconfig")
        .arg("-p")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let theirs: Vec<(String, PathBuf)> = text
        .lines()
        .filter_map(|l| {
            let (left, path) = l.split_once(" => ")?;
            Some((
                left.trim().split(' ').next()?.to_string(),
                PathBuf::from(path.trim()),
            ))
        })
        .collect();
    assert!(!theirs.is_empty());
    assert_eq!(ours, theirs);
    assert!(ours.iter().any(|(n, _)| n == "libc.so.6"));
    assert!(rocbuild_native::parse_ld_so_cache(b"not a cache").is_err());
}
