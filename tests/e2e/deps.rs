//! `rocbuild deps` and `rocbuild bundle` on real ELF libraries (cc) and PE DLLs (mingw-w64).

use std::path::Path;

use crate::common::*;
use rocbuild_testkit::native::*;

#[test]
fn a_dll_importing_a_procedure_its_provider_no_longer_exports() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, v1, v2) = pe_abi_fixture(tmp.path());
    let out = rocbuild(
        &[
            "deps",
            a.to_str().unwrap(),
            "--search",
            v2.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 4, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("a.dll imports ProcB2 from b.dll, which does not export it"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("[WinError 127] The specified procedure could not be found"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("imports ProcB1"), "{}", out.stdout);
    insta::assert_snapshot!("deps_pe_winerror_127", redact(&out.stdout, tmp.path()));
    // Against the DLL it was linked with, nothing is missing.
    let out = rocbuild(
        &[
            "deps",
            a.to_str().unwrap(),
            "--search",
            v1.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        !out.stdout.contains("imports nothing exports"),
        "{}",
        out.stdout
    );
}

#[test]
fn the_tree_names_providers_and_the_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let site = root.join("venv/lib/python3.11/site-packages");
    torch_like_c10(&site.join("torch/lib"), false);
    let helper = root.join("opt/helper/lib");
    stub_library(&helper, "libhelper.so.1");
    stub_library(&helper, "libgone.so.2");
    let (h, g) = (
        format!("-L{}", helper.display()),
        "-l:libgone.so.2".to_string(),
    );
    let ext = torch_extension(
        &site.join("pkg/libext.so"),
        &site.join("torch/lib"),
        false,
        &["-Wl,--no-as-needed", &h, "-l:libhelper.so.1", &g],
    );
    std::fs::remove_file(helper.join("libgone.so.2")).unwrap();
    let out = rocbuild(
        &[
            "deps",
            ext.to_str().unwrap(),
            "--search",
            helper.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("[package torch; runpath $ORIGIN/../torch/lib]"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("libhelper.so.1 =>"), "{}", out.stdout);
    assert!(
        out.stdout.contains("libgone.so.2 (needed by libext.so"),
        "{}",
        out.stdout
    );
    let out = rocbuild(
        &[
            "deps",
            ext.to_str().unwrap(),
            "--search",
            helper.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    let j: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let libs = j["files"][0]["libraries"].as_array().unwrap();
    let c10 = libs.iter().find(|l| l["name"] == "libc10.so").unwrap();
    assert_eq!(c10["provider"]["kind"], "package");
    assert_eq!(c10["provider"]["name"], "torch");
    assert_eq!(j["files"][0]["missing"][0]["name"], "libgone.so.2");
    // The explanation names the RUNPATH it has and where it pointed, not a count.
    let runpath = format!(
        "libgone.so.2 (needed by libext.so; not in the rpath (RUNPATH $ORIGIN/../torch/lib -> {})",
        site.join("torch/lib").display()
    );
    let text = rocbuild(
        &[
            "deps",
            ext.to_str().unwrap(),
            "--search",
            helper.to_str().unwrap(),
        ],
        &[],
    );
    assert!(text.stdout.contains(&runpath), "{}", text.stdout);
    let r = &j["files"][0]["missing"][0]["rpaths"][0];
    assert_eq!(r["kind"], "RUNPATH");
    assert_eq!(r["entry"], "$ORIGIN/../torch/lib");
    assert_eq!(r["dir"], site.join("torch/lib").display().to_string());

    // A library with neither RUNPATH nor RPATH says so.
    let src = root.join("plain.c");
    std::fs::write(&src, "int plain(void) { return 1; }\n").unwrap();
    stub_library(&helper, "libgone.so.2");
    let plain = shared_library(
        "cc",
        &src,
        &root.join("plain/libplain.so"),
        &["-Wl,--no-as-needed", &h, "-l:libgone.so.2"],
    );
    std::fs::remove_file(helper.join("libgone.so.2")).unwrap();
    let out = rocbuild(&["deps", plain.to_str().unwrap(), "--json"], &[]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    let j: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(j["files"][0]["missing"][0]["rpaths"], serde_json::json!([]));
    let out = rocbuild(&["deps", plain.to_str().unwrap()], &[]);
    assert!(
        out.stdout.contains(
            "libgone.so.2 (needed by libplain.so; libplain.so has no RUNPATH or RPATH; searched"
        ),
        "{}",
        out.stdout
    );
}

/// The loader emulation reads `LD_LIBRARY_PATH` from the command's environment, as the
/// user's Python would load with it: a library found nowhere else is found there, and the
/// same command without it says it is missing.
#[test]
fn deps_finds_what_ld_library_path_names() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let helper = root.join("opt/helper/lib");
    stub_library(&helper, "libhelper.so.1");
    let src = root.join("needs.c");
    std::fs::write(&src, "int needs(void) { return 1; }\n").unwrap();
    let lib = shared_library(
        "cc",
        &src,
        &root.join("app/libneeds.so"),
        &[
            "-Wl,--no-as-needed",
            &format!("-L{}", helper.display()),
            "-l:libhelper.so.1",
        ],
    );
    let l = lib.to_str().unwrap();
    let without = rocbuild(&["deps", l], &[("LD_LIBRARY_PATH", "")]);
    assert_eq!(without.code, 3, "{}\n{}", without.stdout, without.stderr);
    let dirs = format!("/nonexistent:{}", helper.display());
    let with = rocbuild(&["deps", l], &[("LD_LIBRARY_PATH", dirs.as_str())]);
    assert_eq!(with.code, 0, "{}\n{}", with.stdout, with.stderr);
    let found = format!(
        "libhelper.so.1 => {}",
        helper.join("libhelper.so.1").display()
    );
    assert!(with.stdout.contains(&found), "{}", with.stdout);
}

#[test]
fn a_truncated_binary_is_a_clean_error() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = stub_library(tmp.path(), "libwhole.so");
    let bytes = std::fs::read(&lib).unwrap();
    for (name, cut) in [
        ("cut.so", &bytes[..bytes.len() / 3]),
        ("tiny.so", &bytes[..10]),
        ("empty.so", &bytes[..0]),
    ] {
        let p = tmp.path().join(name);
        std::fs::write(&p, cut).unwrap();
        let out = rocbuild(&["deps", p.to_str().unwrap()], &[]);
        assert_eq!(out.code, 1, "{name}: {}\n{}", out.stdout, out.stderr);
        assert!(!out.stderr.contains("panicked"), "{name}: {}", out.stderr);
        assert!(out.stderr.contains(name), "{name}: {}", out.stderr);
    }
    let p = tmp.path().join("cut.so");
    let out = rocbuild(&["deps", p.to_str().unwrap()], &[]);
    // goblin's offset depends on the compiler's layout of the file.
    let text = redact(&out.stderr, tmp.path());
    let text: String = match text.find("bad offset ") {
        Some(i) => {
            let rest = &text[i + 11..];
            let digits = rest.chars().take_while(char::is_ascii_digit).count();
            format!("{}bad offset [N]{}", &text[..i], &rest[digits..])
        }
        None => text,
    };
    insta::assert_snapshot!("deps_truncated", text);
}

/// Relative paths of every file under `dir`.
fn files_under(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = tree_state(dir)
        .into_keys()
        .filter(|k| !k.ends_with('/'))
        .collect();
    v.sort();
    v
}

#[test]
fn bundle_copies_the_non_system_set_with_its_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let site = root.join("venv/lib/python3.11/site-packages");
    torch_like_c10(&site.join("torch/lib"), false);
    let ffmpeg = root.join("ffmpeg/lib");
    stub_library(&ffmpeg, "libavutil.so.59");
    let l = format!("-L{}", ffmpeg.display());
    // libstdc++, libc: system, left out. libavutil: beside the core that needs it.
    let ext = torch_extension(
        &site.join("torchcodec/libtorchcodec_core7.so"),
        &site.join("torch/lib"),
        false,
        &["-Wl,--no-as-needed", &l, "-l:libavutil.so.59", "-lstdc++"],
    );
    let into = root.join("app");
    let out = rocbuild(
        &[
            "bundle",
            ext.to_str().unwrap(),
            "--into",
            into.to_str().unwrap(),
            "--search",
            ffmpeg.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        files_under(&into),
        [
            "torch/lib/libc10.so",
            "torchcodec/libavutil.so.59",
            "torchcodec/libtorchcodec_core7.so"
        ]
    );
    assert!(out.stdout.contains("copied 3 files ("), "{}", out.stdout);
    // The copies load as the originals did: the RUNPATH `$ORIGIN/../torch/lib` finds torch's
    // library in the bundle, and the FFmpeg stand-in is found beside the core (--search of
    // the bundle dir stands for the frozen app's own loader setup).
    let out = rocbuild(
        &[
            "deps",
            into.join("torchcodec/libtorchcodec_core7.so")
                .to_str()
                .unwrap(),
            "--search",
            into.join("torchcodec").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains(&format!("{}", into.join("torch/lib/libc10.so").display())),
        "{}",
        out.stdout
    );
    let text = redact(&out.stdout, root);
    assert!(!text.contains("ffmpeg/lib"), "{text}");
}

#[test]
fn bundle_refuses_and_copies_nothing_when_a_dependency_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let site = root.join("venv/lib/python3.11/site-packages");
    torch_like_c10(&site.join("torch/lib"), false);
    let ffmpeg = root.join("ffmpeg/lib");
    stub_library(&ffmpeg, "libavutil.so.59");
    let l = format!("-L{}", ffmpeg.display());
    let ext = torch_extension(
        &site.join("torchcodec/libtorchcodec_core7.so"),
        &site.join("torch/lib"),
        false,
        &["-Wl,--no-as-needed", &l, "-l:libavutil.so.59"],
    );
    let into = root.join("app");
    // Without --search, libavutil.so.59 is nowhere the loader looks.
    let out = rocbuild(
        &[
            "bundle",
            ext.to_str().unwrap(),
            "--into",
            into.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("1 dependencies are missing; nothing was copied")
            || out.stderr.contains("dependencies are missing"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("libavutil.so.59 (needed by"),
        "{}",
        out.stderr
    );
    assert!(!into.exists(), "the bundle dir was created");
}

#[test]
fn bundle_keeps_the_site_packages_layout_of_pe_dlls() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let (a, v1, _) = pe_abi_fixture(&root.join("build"));
    // Laid out like ROCm's Windows wheels: the provider under `_rocm_sdk_core/bin`.
    let site = root.join("venv/Lib/site-packages");
    let sdk = site.join("_rocm_sdk_core/bin");
    std::fs::create_dir_all(&sdk).unwrap();
    std::fs::copy(v1.join("b.dll"), sdk.join("b.dll")).unwrap();
    let pkg = site.join("ctranslate2");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::copy(&a, pkg.join("a.dll")).unwrap();
    let into = root.join("app");
    let out = rocbuild(
        &[
            "bundle",
            pkg.join("a.dll").to_str().unwrap(),
            "--into",
            into.to_str().unwrap(),
            "--search",
            sdk.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    // KERNEL32.dll and msvcrt.dll are the system's.
    assert_eq!(
        files_under(&into),
        ["_rocm_sdk_core/bin/b.dll", "ctranslate2/a.dll"]
    );
}

/// Mach-O, linked here by clang-15 + ld64.lld: libext.dylib finds @rpath/libb.dylib through its
/// LC_RPATH @loader_path/../lib; libb was rebuilt without `c10_old`, which libext imports (dyld's
/// "Symbol not found"); libplug.dylib needs a library that is gone.
#[test]
fn macho_tree_rpaths_missing_and_a_symbol_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let target = "arm64-apple-macos11";
    let sys = libsystem_stub(root, target);
    let write = |name: &str, text: &str| {
        let p = root.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let b1 = write(
        "b1.c",
        "int c10_new(int x) { return x + 1; }\nint c10_old(int x) { return x; }\n",
    );
    let b2 = write("b2.c", "int c10_new(int x) { return x + 1; }\n");
    let ext = write(
        "ext.c",
        "int c10_new(int);\nint c10_old(int);\nint ext(int x) { return c10_new(x) + c10_old(x); }\n",
    );
    let plug = write(
        "plug.c",
        "int gone(int);\nint plug(int x) { return gone(x); }\n",
    );
    let gone = write("gone.c", "int gone(int x) { return x; }\n");
    let install = |n: &str| format!("-Wl,-install_name,@rpath/{n}");
    let (lib, sysdir) = (root.join("lib"), sys.parent().unwrap().to_path_buf());
    macho_dylib(
        target,
        &b1,
        &lib.join("libb.dylib"),
        &[&install("libb.dylib")],
    );
    macho_dylib(
        target,
        &gone,
        &root.join("tmp/libgone.dylib"),
        &[&install("libgone.dylib")],
    );
    let link = |src: &Path, out: &Path, name: &str, dep: &str| {
        macho_dylib(
            target,
            src,
            out,
            &[
                &install(name),
                "-Wl,-rpath,@loader_path/../lib",
                &format!("-L{}", lib.display()),
                &format!("-L{}", root.join("tmp").display()),
                &format!("-L{}", sysdir.display()),
                dep,
                "-lSystem",
            ],
        )
    };
    let e = link(&ext, &root.join("bin/libext.dylib"), "libext.dylib", "-lb");
    let p = link(
        &plug,
        &root.join("bin/libplug.dylib"),
        "libplug.dylib",
        "-lgone",
    );
    // libb v2 replaces v1; libgone disappears.
    macho_dylib(
        target,
        &b2,
        &lib.join("libb.dylib"),
        &[&install("libb.dylib")],
    );
    std::fs::remove_file(root.join("tmp/libgone.dylib")).unwrap();

    let out = rocbuild(&["deps", e.to_str().unwrap(), p.to_str().unwrap()], &[]);
    assert_eq!(out.code, 5, "{}\n{}", out.stdout, out.stderr);
    let text = out.stdout.replace(&root.display().to_string(), "ROOT");
    assert!(text.contains("Symbol not found: _c10_old"), "{text}");
    assert!(!text.contains("_c10_new"), "{text}");
    assert!(
        text.contains("@rpath/libb.dylib => ROOT/lib/libb.dylib"),
        "{text}"
    );
    assert!(
        text.contains("@rpath/libgone.dylib (needed by libplug.dylib"),
        "{text}"
    );
    let out = rocbuild(&["deps", e.to_str().unwrap(), "--json"], &[]);
    let j: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(j["files"][0]["format"], "Mach-O", "{j}");
}
