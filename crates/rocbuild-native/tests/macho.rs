//! Mach-O dylibs linked here by clang-15 + ld64.lld (no macOS SDK: -nostdlib and a libSystem
//! stub): install names, LC_LOAD_DYLIB, LC_RPATH, dyld's search, adding rpaths.

mod common;

use std::path::{Path, PathBuf};

use common::{libsystem_stub, macho_dylib, write};
use rocbuild_native::{add_macho_rpaths, closure, read_binary, Format, Provider, SearchContext};

const TARGETS: [&str; 2] = ["x86_64-apple-macos11", "arm64-apple-macos11"];

fn require_toolchain() {
    assert!(
        common::clang().is_some() && common::have_ld64(),
        "clang-15 and ld64.lld are needed for the Mach-O tests: apt-get install clang-15 lld-15 \
         (cargo xtask setup does it)"
    );
}

/// root/lib/libb.dylib (@rpath/libb.dylib) and root/bin/liba.dylib (@rpath/liba.dylib, needs
/// libb through @rpath, LC_RPATH @loader_path/../lib, also needs @rpath/libgone.dylib, which is
/// deleted after linking).
fn build(root: &Path, target: &str, headerpad: bool) -> PathBuf {
    let sys = libsystem_stub(root, target);
    let b_src = write(root, "b.c", "int bfun(int x) { return x + 1; }\n");
    let g_src = write(root, "g.c", "int gfun(int x) { return x + 2; }\n");
    macho_dylib(
        target,
        &b_src,
        &root.join("lib/libb.dylib"),
        &["-Wl,-install_name,@rpath/libb.dylib"],
    );
    macho_dylib(
        target,
        &g_src,
        &root.join("tmp/libgone.dylib"),
        &["-Wl,-install_name,@rpath/libgone.dylib"],
    );
    let a_src = write(
        root,
        "a.cpp",
        "extern \"C\" int bfun(int);\nextern \"C\" int gfun(int);\n\
         namespace c10 { int afun(int x) { return bfun(x) * gfun(x); } }\n",
    );
    let a = root.join("bin/liba.dylib");
    let mut args = vec![
        "-Wl,-install_name,@rpath/liba.dylib".to_string(),
        "-Wl,-rpath,@loader_path/../lib".into(),
        format!("-L{}", root.join("lib").display()),
        format!("-L{}", root.join("tmp").display()),
        format!("-L{}", sys.parent().unwrap().display()),
        "-lb".into(),
        "-lgone".into(),
        "-lSystem".into(),
    ];
    if headerpad {
        args.push("-Wl,-headerpad_max_install_names".into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    macho_dylib(target, &a_src, &a, &args);
    std::fs::remove_file(root.join("tmp/libgone.dylib")).unwrap();
    a
}

#[test]
fn reads_install_name_dylibs_rpaths_and_symbols() {
    require_toolchain();
    for (target, arch) in TARGETS.iter().zip(["x86_64", "arm64"]) {
        let dir = tempfile::tempdir().unwrap();
        let a = build(dir.path(), target, true);
        let b = read_binary(&a).unwrap();
        assert_eq!(
            (b.format, b.arch.as_str(), b.is_64, b.is_library),
            (Format::MachO, arch, true, true)
        );
        assert_eq!(
            b.soname_or_install_name.as_deref(),
            Some("@rpath/liba.dylib")
        );
        assert_eq!(
            b.needed,
            [
                "@rpath/libb.dylib",
                "@rpath/libgone.dylib",
                "/usr/lib/libSystem.B.dylib"
            ]
        );
        assert_eq!(b.rpath, ["@loader_path/../lib"]);
        let bfun = b
            .imports
            .iter()
            .find(|i| i.name.as_deref() == Some("_bfun"))
            .unwrap();
        assert_eq!(
            bfun.library.as_deref(),
            Some("@rpath/libb.dylib"),
            "two-level namespace"
        );
        let afun = b
            .exports
            .iter()
            .find(|e| e.name == "__ZN3c104afunEi")
            .unwrap();
        assert_eq!(afun.demangled.as_deref(), Some("c10::afun(int)"));
    }
}

#[test]
fn dyld_closure_follows_rpath_loader_path_and_reports_missing() {
    require_toolchain();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let a = build(root, TARGETS[1], true);
    let c = closure(&a, &SearchContext::default()).unwrap();
    assert_eq!(c.platform, Format::MachO);
    let b = c
        .found
        .iter()
        .find(|d| d.name == "@rpath/libb.dylib")
        .unwrap();
    assert_eq!(
        b.path.as_deref(),
        Some(root.join("lib/libb.dylib").as_path())
    );
    assert_eq!(
        b.provider,
        Provider::Rpath {
            entry: "@loader_path/../lib".into(),
            of: a.clone()
        }
    );
    let sys = c
        .found
        .iter()
        .find(|d| d.name == "/usr/lib/libSystem.B.dylib")
        .unwrap();
    assert!(sys.is_system() && sys.path.is_none());
    assert_eq!(
        c.missing
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>(),
        ["@rpath/libgone.dylib"]
    );
    assert_eq!(c.missing[0].searched, [root.join("lib")]);

    // @executable_path: an rpath relative to the program, given by the context.
    let exe_rel = root.join("app/Contents/MacOS/python");
    std::fs::create_dir_all(root.join("app/Contents/Frameworks")).unwrap();
    std::fs::copy(
        root.join("lib/libb.dylib"),
        root.join("app/Contents/Frameworks/libgone.dylib"),
    )
    .unwrap();
    add_macho_rpaths(&a, &["@executable_path/../Frameworks".into()]).unwrap();
    let ctx = SearchContext {
        executable_path: Some(exe_rel),
        ..Default::default()
    };
    let c = closure(&a, &ctx).unwrap();
    let g = c
        .found
        .iter()
        .find(|d| d.name == "@rpath/libgone.dylib")
        .unwrap();
    assert_eq!(
        g.path.as_deref(),
        Some(root.join("app/Contents/Frameworks/libgone.dylib").as_path())
    );
    assert!(c.missing.is_empty());
}

/// Issue 3 item 7: rpaths added to a real dylib, for both architectures, read back; the
/// loader emulation then finds the library they point at.
#[test]
fn adds_rpaths_and_reads_them_back() {
    require_toolchain();
    for target in TARGETS {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let a = build(root, target, true);
        let before = read_binary(&a).unwrap();
        let want: Vec<String> = vec![
            "@loader_path".into(),
            "@loader_path/../torch/lib".into(),
            "/opt/homebrew/opt/ffmpeg@7/lib".into(),
        ];
        add_macho_rpaths(&a, &want).unwrap();
        let after = read_binary(&a).unwrap();
        assert_eq!(after.rpath[0], "@loader_path/../lib");
        assert_eq!(&after.rpath[1..], want.as_slice());
        assert_eq!(after.needed, before.needed);
        assert_eq!(after.exports, before.exports);
        // Idempotent: adding them again changes nothing.
        let bytes = std::fs::read(&a).unwrap();
        add_macho_rpaths(&a, &want).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), bytes);
        // The missing library now resolves through @loader_path/../torch/lib.
        std::fs::create_dir_all(root.join("torch/lib")).unwrap();
        std::fs::copy(
            root.join("lib/libb.dylib"),
            root.join("torch/lib/libgone.dylib"),
        )
        .unwrap();
        let c = closure(&a, &SearchContext::default()).unwrap();
        assert!(c.missing.is_empty(), "{:?}", c.missing);
        let g = c
            .found
            .iter()
            .find(|d| d.name == "@rpath/libgone.dylib")
            .unwrap();
        assert_eq!(
            g.provider,
            Provider::Rpath {
                entry: "@loader_path/../torch/lib".into(),
                of: a.clone()
            }
        );
        if common::which("otool").is_some() {
            let out = std::process::Command::new("otool")
                .arg("-l")
                .arg(&a)
                .output()
                .unwrap();
            assert!(String::from_utf8_lossy(&out.stdout).contains("@loader_path/../torch/lib"));
        } else if let Some(objdump) = common::which("llvm-objdump-15") {
            // An independent reader agrees.
            let out = std::process::Command::new(objdump)
                .args(["--macho", "--rpaths"])
                .arg(&a)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            for w in &want {
                assert!(text.contains(w.as_str()), "{text}");
            }
        }
    }
}

/// Without header padding there is no room for new load commands: refused, file untouched.
#[test]
fn refuses_when_there_is_no_room_and_leaves_the_file_alone() {
    require_toolchain();
    let dir = tempfile::tempdir().unwrap();
    let a = build(dir.path(), TARGETS[0], false);
    let bytes = std::fs::read(&a).unwrap();
    let long: Vec<String> = (0..40)
        .map(|i| format!("/a/very/long/library/directory/number/{i:03}/lib"))
        .collect();
    let err = add_macho_rpaths(&a, &long).unwrap_err().to_string();
    assert!(err.contains("headerpad_max_install_names"), "{err}");
    assert_eq!(std::fs::read(&a).unwrap(), bytes);
    // Not a Mach-O file at all.
    let elf = dir.path().join("x.so");
    common::cc_shared(&write(dir.path(), "x.c", "int x;\n"), &elf, &[]);
    assert!(add_macho_rpaths(&elf, &["@loader_path".into()]).is_err());
}

/// A universal (x86_64 + arm64) dylib made with llvm-lipo: both slices read and edited.
#[test]
fn universal_dylib_gets_rpaths_in_every_slice() {
    require_toolchain();
    let Some(lipo) = common::which("llvm-lipo-15").or_else(|| common::which("llvm-lipo")) else {
        panic!("llvm-lipo (package llvm-15) is needed for the universal-binary test");
    };
    let dir = tempfile::tempdir().unwrap();
    let thin: Vec<PathBuf> = TARGETS
        .iter()
        .map(|t| {
            let root = dir.path().join(t);
            build(&root, t, true)
        })
        .collect();
    let fat = dir.path().join("libfat.dylib");
    common::run(
        std::process::Command::new(lipo)
            .arg("-create")
            .args(&thin)
            .arg("-output")
            .arg(&fat),
    );
    let b = read_binary(&fat).unwrap();
    assert_eq!(b.universal_arches, ["x86_64", "arm64"]);
    assert_eq!(b.rpath, ["@loader_path/../lib"]);
    add_macho_rpaths(&fat, &["@loader_path/../torch/lib".into()]).unwrap();
    // Each slice, cut out of the universal file, has the new rpath.
    let bytes = std::fs::read(&fat).unwrap();
    let n = u32::from_be_bytes(bytes[4..8].try_into().unwrap()) as usize;
    assert_eq!(n, 2);
    for i in 0..n {
        let at = 8 + i * 20;
        let off = u32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let size = u32::from_be_bytes(bytes[at + 12..at + 16].try_into().unwrap()) as usize;
        let slice = rocbuild_native::parse_binary(&bytes[off..off + size]).unwrap();
        assert_eq!(
            slice.rpath,
            ["@loader_path/../lib", "@loader_path/../torch/lib"],
            "slice {i}"
        );
    }
}
