//! deps / doctor / repair on the real PyPI wheels of other OSes, read from this host: the exit
//! status that tells a missing library from an ABI break, and the rpaths named in every
//! "missing" explanation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rocbuild_testkit::upstream;

use crate::common::*;
use crate::repair::{assert_record_true, objdump_rpaths, stub_dylib, tree};

/// What `files` import from each `@rpath/` library that is not TorchCodec's own.
fn foreign_rpath_imports(files: &[PathBuf]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let b = rocbuild_native::read_binary(f).unwrap();
        for n in &b.needed {
            if let Some(leaf) = n.strip_prefix("@rpath/") {
                out.entry(leaf.to_string()).or_default();
            }
        }
        for i in &b.imports {
            if let (Some(lib), Some(name)) = (&i.library, &i.name) {
                if let Some(leaf) = lib.strip_prefix("@rpath/") {
                    out.entry(leaf.to_string())
                        .or_default()
                        .insert(name.clone());
                }
            }
        }
    }
    out.retain(|leaf, _| !leaf.starts_with("libtorchcodec"));
    out
}

fn is_ffmpeg(leaf: &str) -> bool {
    leaf.starts_with("libav") || leaf.starts_with("libsw")
}

/// Stub dylibs exporting what `files` import: torch's into `torch_dir`, FFmpeg 7's (libavutil
/// 59) into `ffmpeg_dir` when given.
fn stubs(files: &[PathBuf], torch_dir: &Path, ffmpeg_dir: Option<&Path>) {
    for (leaf, syms) in foreign_rpath_imports(files) {
        if is_ffmpeg(&leaf) {
            let seven = [
                "libavutil.59",
                "libavcodec.61",
                "libavformat.61",
                "libavdevice.61",
                "libavfilter.10",
                "libswscale.8",
                "libswresample.5",
            ];
            if let Some(d) = ffmpeg_dir.filter(|_| seven.iter().any(|p| leaf.starts_with(p))) {
                stub_dylib(d, &leaf, &syms);
            }
        } else {
            stub_dylib(torch_dir, &leaf, &syms);
        }
    }
}

/// A macOS-shaped venv (bin/, pyvenv.cfg, lib/python3.12/site-packages) with `wheel`
/// unpacked into site-packages, as pip lays it out. Returns (venv, site).
pub(crate) fn macos_venv(root: &Path, wheel: &Path) -> (PathBuf, PathBuf) {
    let venv = root.join("venv");
    let site = venv.join("lib/python3.12/site-packages");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::write(
        venv.join("pyvenv.cfg"),
        "home = /opt/homebrew/bin\nversion = 3.12.7\n",
    )
    .unwrap();
    upstream::unpack(wheel, &site);
    (venv, site)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `deps` on the real macOS TorchCodec wheels: 3 when a library is missing (0.16.0's core
/// alone: torch's libraries and FFmpeg are nowhere), 4 for the real ABI-mismatched pair with
/// everything found (0.17.0's custom_ops7 beside 0.16.0's core7, whose
/// `facebook::torchcodec::…` exports differ), 5 for that pair with libraries missing too.
#[test]
fn deps_exit_status_tells_a_missing_library_from_an_abi_break() {
    let (Some(w16), Some(w17)) = (
        upstream::wheel(&upstream::TORCHCODEC_MACOS_NO_RPATH),
        upstream::wheel(&upstream::TORCHCODEC_MACOS_HOMEBREW_RPATH),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    upstream::unpack(&w16, &a);
    upstream::unpack(&w17, &b);
    let core16 = a.join("torchcodec/libtorchcodec_core7.dylib");

    let missing = rocbuild(&["deps", s(&core16), "--json"], &[]);
    assert_eq!(missing.code, 3, "{}\n{}", missing.stdout, missing.stderr);
    let j: serde_json::Value = serde_json::from_str(&missing.stdout).unwrap();
    let names: Vec<&str> = j["files"][0]["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"@rpath/libavutil.59.dylib"), "{names:?}");
    assert!(names.contains(&"@rpath/libtorch.dylib"), "{names:?}");
    assert_eq!(j["files"][0]["unresolved"], serde_json::json!([]));

    // The partial upgrade: 0.17.0's files with 0.16.0's core7.
    let tc = b.join("torchcodec");
    std::fs::copy(&core16, tc.join("libtorchcodec_core7.dylib")).unwrap();
    let ops = tc.join("libtorchcodec_custom_ops7.dylib");
    let both = rocbuild(&["deps", s(&ops), "--search", s(&tc)], &[]);
    assert_eq!(both.code, 5, "{}\n{}", both.stdout, both.stderr);
    assert!(
        both.stdout
            .contains("Symbol not found: __ZN8facebook10torchcodec"),
        "{}",
        both.stdout
    );

    let lib = tmp.path().join("lib");
    stubs(
        &[ops.clone(), tc.join("libtorchcodec_core7.dylib")],
        &lib,
        Some(&lib),
    );
    let abi = rocbuild(
        &[
            "deps",
            s(&ops),
            "--search",
            s(&tc),
            "--search",
            s(&lib),
            "--json",
        ],
        &[],
    );
    assert_eq!(abi.code, 4, "{}\n{}", abi.stdout, abi.stderr);
    let j: serde_json::Value = serde_json::from_str(&abi.stdout).unwrap();
    assert_eq!(j["files"][0]["missing"], serde_json::json!([]), "{j}");
    let gone = j["files"][0]["unresolved"].as_array().unwrap();
    assert!(!gone.is_empty());
    for u in gone {
        assert_eq!(u["library"], "@rpath/libtorchcodec_core7.dylib", "{u}");
        assert!(
            u["name"]
                .as_str()
                .unwrap()
                .contains("8facebook10torchcodec"),
            "{u}"
        );
    }
}

/// `repair` refuses with 3 when a library is found nowhere (0.16.0 without any FFmpeg) and
/// with 4 when an import nothing exports stops it (the partial upgrade, every library found);
/// both times the venv is left byte for byte as it was.
#[test]
fn repair_exit_status_tells_a_missing_library_from_an_abi_break() {
    let (Some(w16), Some(w17)) = (
        upstream::wheel(&upstream::TORCHCODEC_MACOS_NO_RPATH),
        upstream::wheel(&upstream::TORCHCODEC_MACOS_HOMEBREW_RPATH),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();

    // 3: no FFmpeg anywhere; torch's libraries are there.
    let (venv, site) = macos_venv(&tmp.path().join("one"), &w16);
    let tc = site.join("torchcodec");
    let files: Vec<PathBuf> = tree(&tc)
        .keys()
        .filter(|k| k.ends_with(".dylib") || k.ends_with(".so"))
        .map(|k| tc.join(k))
        .collect();
    stubs(&files, &site.join("torch/lib"), None);
    let before = tree(&site);
    let out = rocbuild(&["repair", "torchcodec", "--venv", s(&venv), "--json"], &[]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let kinds: BTreeSet<&str> = v["packages"][0]["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains("missing-ffmpeg"), "{kinds:?}");
    assert!(!kinds.contains("abi"), "{kinds:?}");
    assert!(tree(&site) == before, "a refused repair changed the venv");

    // 4: 0.17.0 with 0.16.0's core7; torch and FFmpeg 7 found.
    let (venv, site) = macos_venv(&tmp.path().join("two"), &w17);
    let tc = site.join("torchcodec");
    let old = tmp.path().join("old");
    upstream::unpack(&w16, &old);
    std::fs::copy(
        old.join("torchcodec/libtorchcodec_core7.dylib"),
        tc.join("libtorchcodec_core7.dylib"),
    )
    .unwrap();
    let brew = tmp.path().join("brew/lib");
    let files: Vec<PathBuf> = tree(&tc)
        .keys()
        .filter(|k| k.ends_with(".dylib") || k.ends_with(".so"))
        .map(|k| tc.join(k))
        .collect();
    stubs(&files, &site.join("torch/lib"), Some(&brew));
    let before = tree(&site);
    let out = rocbuild(
        &[
            "repair",
            "torchcodec",
            "--venv",
            s(&venv),
            "--search",
            s(&brew),
        ],
        &[],
    );
    assert_eq!(out.code, 4, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("libtorchcodec_custom_ops7.dylib: imports"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("that nothing exports"),
        "{}",
        out.stdout
    );
    assert!(tree(&site) == before, "a refused repair changed the venv");
}

/// A missing `@rpath/libavutil.59.dylib` is explained by the rpaths of the file: none at all in
/// the real TorchCodec 0.16.0 (read back with llvm-objdump), and Homebrew's
/// `/opt/homebrew/opt/ffmpeg/lib` in 0.17.0, named with where it pointed.
#[test]
fn a_missing_rpath_library_is_explained_by_the_files_rpaths() {
    let (Some(w16), Some(w17)) = (
        upstream::wheel(&upstream::TORCHCODEC_MACOS_NO_RPATH),
        upstream::wheel(&upstream::TORCHCODEC_MACOS_HOMEBREW_RPATH),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for (w, want) in [(&w16, vec![]), (&w17, vec!["/opt/homebrew/opt/ffmpeg/lib"])] {
        let dir = tmp.path().join(w.file_name().unwrap());
        upstream::unpack(w, &dir);
        let core = dir.join("torchcodec/libtorchcodec_core7.dylib");
        assert_eq!(
            objdump_rpaths(&core),
            want,
            "llvm-objdump disagrees with the fixture"
        );
        let out = rocbuild(&["deps", s(&core)], &[]);
        assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
        assert!(
            !out.stdout.contains("searched 0 directories"),
            "{}",
            out.stdout
        );
        let line = out
            .stdout
            .lines()
            .find(|l| {
                l.trim_start()
                    .starts_with("@rpath/libavutil.59.dylib (needed by")
            })
            .unwrap_or_else(|| panic!("{}", out.stdout))
            .trim()
            .to_string();
        if want.is_empty() {
            assert_eq!(
                line,
                "@rpath/libavutil.59.dylib (needed by libtorchcodec_core7.dylib; \
                 libtorchcodec_core7.dylib has no LC_RPATH, so @rpath/ resolves nowhere)"
            );
        } else {
            assert_eq!(
                line,
                "@rpath/libavutil.59.dylib (needed by libtorchcodec_core7.dylib; \
                 not in the rpath (LC_RPATH /opt/homebrew/opt/ffmpeg/lib))"
            );
        }
        let j = rocbuild(&["deps", s(&core), "--json"], &[]);
        let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
        let m = v["files"][0]["missing"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "@rpath/libavutil.59.dylib")
            .unwrap()
            .clone();
        let entries: Vec<&str> = m["rpaths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["entry"].as_str().unwrap())
            .collect();
        assert_eq!(entries, want);
    }
}

/// doctor on a macOS-shaped venv of the real TorchCodec 0.16.0 wheel, from this Linux host:
/// the OS is read from the files, so the `.dylib` cores are seen (not "no core library at
/// all") and macOS's rules apply: torch's libraries are loaded by `import torch` (stubs with
/// their install names), FFmpeg is nowhere, so exit 3 with the macOS fix; no load test runs.
/// `--machine` with a Linux machine forces Linux's rules instead.
#[test]
fn doctor_applies_the_rules_of_the_venvs_os() {
    let Some(w16) = upstream::wheel(&upstream::TORCHCODEC_MACOS_NO_RPATH) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (venv, site) = macos_venv(tmp.path(), &w16);
    let tc = site.join("torchcodec");
    let files: Vec<PathBuf> = tree(&tc)
        .keys()
        .filter(|k| k.ends_with(".dylib") || k.ends_with(".so"))
        .map(|k| tc.join(k))
        .collect();
    stubs(&files, &site.join("torch/lib"), None);
    std::fs::write(
        site.join("torch/version.py"),
        "__version__ = '2.11.0'\ngit_version = 'unknown'\ncuda = None\nhip = None\n",
    )
    .unwrap();

    let out = rocbuild(&["doctor", "torchcodec", "--venv", s(&venv), "--json"], &[]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    let j: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let findings = j["findings"].as_array().unwrap();
    let whats: Vec<&str> = findings
        .iter()
        .map(|f| f["what"].as_str().unwrap())
        .collect();
    assert!(
        !whats.iter().any(|w| w.contains("no core library")),
        "{whats:#?}"
    );
    let ffmpeg = findings
        .iter()
        .find(|f| f["check"] == "ffmpeg")
        .expect(&out.stdout);
    assert_eq!(ffmpeg["breaks"], "missing-library");
    assert!(
        ffmpeg["what"]
            .as_str()
            .unwrap()
            .contains("core libraries for FFmpeg 4, 5, 6, 7, 8, 9"),
        "{ffmpeg}"
    );
    assert!(ffmpeg["fix"]
        .as_str()
        .unwrap()
        .contains("brew install ffmpeg"));
    assert!(
        whats.iter().any(|w| w.contains("binaries are for macos")),
        "{whats:#?}"
    );
    // torch's libraries count as loaded: nothing else is missing or unexported.
    assert!(
        findings
            .iter()
            .filter(|f| f["severity"] != "note")
            .all(|f| f["check"] == "ffmpeg" || f["check"] == "missing"),
        "{findings:#?}"
    );
    assert!(j["packages"][0]["load"].is_null());
    assert!(j["packages"][0]["libraries"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l.as_str().unwrap().ends_with("libtorchcodec_core7.dylib")));

    // --machine: Linux's rules, as asked (and so no `.so` core at all).
    let m = tmp.path().join("linux.json");
    std::fs::write(&m, crate::plans::machine("linux").to_string()).unwrap();
    let out = rocbuild(
        &[
            "doctor",
            "torchcodec",
            "--venv",
            s(&venv),
            "--machine",
            s(&m),
        ],
        &[],
    );
    assert!(
        out.stdout
            .contains("no core library (libtorchcodec_coreN) at all"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );

    // A Windows-shaped venv of the real Windows wheel: Windows's rules (the DLL's directory,
    // no rpath), FFmpeg's DLLs are nowhere: exit 3 with the Windows fix.
    let Some(win) = upstream::wheel(&upstream::TORCHCODEC_WINDOWS) else {
        return;
    };
    let (wvenv, _) = windows_venv(&tmp.path().join("win"), &win);
    let out = rocbuild(
        &["doctor", "torchcodec", "--venv", s(&wvenv), "--json"],
        &[],
    );
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    let j: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let ffmpeg = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "ffmpeg")
        .expect(&out.stdout)
        .clone();
    assert!(
        ffmpeg["fix"].as_str().unwrap().contains("shared* FFmpeg"),
        "{ffmpeg}"
    );
    assert!(
        out.stdout.contains("binaries are for windows"),
        "{}",
        out.stdout
    );
}

/// A Windows-shaped venv (Scripts/, pyvenv.cfg, Lib/site-packages) with `wheel` unpacked.
pub(crate) fn windows_venv(root: &Path, wheel: &Path) -> (PathBuf, PathBuf) {
    let venv = root.join("venv");
    let site = venv.join("Lib/site-packages");
    std::fs::create_dir_all(venv.join("Scripts")).unwrap();
    std::fs::write(
        venv.join("pyvenv.cfg"),
        "home = C:\\Python312\nversion = 3.12.7\n",
    )
    .unwrap();
    upstream::unpack(wheel, &site);
    (venv, site)
}

/// `rocbuild ARGS` run in `cwd`.
fn rocbuild_in(cwd: &Path, args: &[&str]) -> Out {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rocbuild"))
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

/// The real CTranslate2 Windows wheel named by a relative path (and a relative `--search`,
/// `--into`) gives the same tree, the same JSON (`needed_by` absolute throughout) and the same
/// bundle layout as by its absolute path.
#[test]
fn deps_and_bundle_are_the_same_for_a_relative_path() {
    let (Some(ct2), Some(rt)) = (
        upstream::wheel(&upstream::CTRANSLATE2_WINDOWS),
        upstream::wheel(&upstream::MSVC_RUNTIME),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    upstream::unpack(&ct2, &root.join("site"));
    upstream::unpack(&rt, &root.join("rt"));
    let rel_dll = "site/ctranslate2/../ctranslate2/ctranslate2.dll";
    let rel_rt = "./rt/msvc_runtime-14.51.36231.data/data/Scripts";
    let abs_dll = root.join("site/ctranslate2/ctranslate2.dll");
    let abs_rt = root.join("rt/msvc_runtime-14.51.36231.data/data/Scripts");

    let abs = rocbuild_in(
        root,
        &["deps", s(&abs_dll), "--search", s(&abs_rt), "--json"],
    );
    let rel = rocbuild_in(root, &["deps", rel_dll, "--search", rel_rt, "--json"]);
    assert_eq!(abs.code, 0, "{}\n{}", abs.stdout, abs.stderr);
    assert_eq!(rel.code, abs.code);
    assert_eq!(rel.stdout, abs.stdout);
    let j: serde_json::Value = serde_json::from_str(&rel.stdout).unwrap();
    for l in j["files"][0]["libraries"].as_array().unwrap() {
        for by in l["needed_by"].as_array().unwrap() {
            assert!(Path::new(by.as_str().unwrap()).is_absolute(), "{l}");
        }
    }
    let abs_text = rocbuild_in(root, &["deps", s(&abs_dll), "--search", s(&abs_rt)]);
    let rel_text = rocbuild_in(root, &["deps", rel_dll, "--search", rel_rt]);
    assert!(
        rel_text.stdout.contains("libiomp5md.dll =>"),
        "{}",
        rel_text.stdout
    );
    assert_eq!(rel_text.stdout, abs_text.stdout);

    let a = rocbuild_in(
        root,
        &[
            "bundle",
            s(&abs_dll),
            "--search",
            s(&abs_rt),
            "--into",
            s(&root.join("a")),
            "--json",
        ],
    );
    let b = rocbuild_in(
        root,
        &[
            "bundle", rel_dll, "--search", rel_rt, "--into", "b", "--json",
        ],
    );
    assert_eq!(a.code, 0, "{}\n{}", a.stdout, a.stderr);
    assert_eq!(b.code, 0, "{}\n{}", b.stdout, b.stderr);
    let layout = |d: &str| tree(&root.join(d)).into_keys().collect::<Vec<_>>();
    assert_eq!(layout("a"), layout("b"));
    assert_eq!(layout("a").len(), 5, "{:?}", layout("a"));
    let to = |o: &Out| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        v["copied"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["to"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(to(&a), to(&b));
}

/// `bundle --format pyinstaller` of the real CTranslate2 Windows wheel prints the
/// `(source, dest_dir)` list a PyInstaller spec's `binaries=` takes: read back by Python's own
/// `ast.literal_eval`, it names exactly the files the bundle holds, each with the directory it
/// has there; `--format json` carries the same list, and a relative spelling of the inputs
/// gives the same list as the absolute one.
#[test]
fn bundle_prints_the_pyinstaller_binaries_list() {
    let (Some(ct2), Some(rt)) = (
        upstream::wheel(&upstream::CTRANSLATE2_WINDOWS),
        upstream::wheel(&upstream::MSVC_RUNTIME),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    upstream::unpack(&ct2, &root.join("site"));
    upstream::unpack(&rt, &root.join("rt"));
    let rel_dll = "site/ctranslate2/../ctranslate2/ctranslate2.dll";
    let rel_rt = "./rt/msvc_runtime-14.51.36231.data/data/Scripts";
    let abs_dll = root.join("site/ctranslate2/ctranslate2.dll");
    let abs_rt = root.join("rt/msvc_runtime-14.51.36231.data/data/Scripts");

    let abs = rocbuild_in(
        root,
        &[
            "bundle",
            s(&abs_dll),
            "--search",
            s(&abs_rt),
            "--into",
            s(&root.join("a")),
            "--format",
            "pyinstaller",
        ],
    );
    let rel = rocbuild_in(
        root,
        &[
            "bundle",
            rel_dll,
            "--search",
            rel_rt,
            "--into",
            "b",
            "--format",
            "pyinstaller",
        ],
    );
    assert_eq!(abs.code, 0, "{}\n{}", abs.stdout, abs.stderr);
    assert_eq!(rel.code, 0, "{}\n{}", rel.stdout, rel.stderr);
    assert_eq!(rel.stdout, abs.stdout);

    // Python reads the literal.
    let list = pyinstaller_pairs(&abs.stdout);

    // Each (source, dest_dir) is a file of the bundle, at dest_dir/<name>, with the source's
    // bytes (names compared as Windows does, without case: the bundle holds `MSVCP140.dll`
    // under the name the import asks for, the runtime wheel spells it `msvcp140.dll`).
    let bundled: BTreeMap<String, Vec<u8>> = tree(&root.join("a"))
        .into_iter()
        .map(|(k, v)| (k.to_lowercase(), v))
        .collect();
    let named: BTreeSet<String> = list
        .iter()
        .map(|(src, dir)| {
            let name = Path::new(src)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            assert!(Path::new(src).is_absolute(), "{src}");
            let at = if dir == "." {
                name
            } else {
                format!("{dir}/{name}")
            };
            assert!(
                bundled.get(&at) == Some(&std::fs::read(src).unwrap()),
                "{at} is not {src} in the bundle:\n{}",
                abs.stdout
            );
            at
        })
        .collect();
    assert_eq!(named, bundled.keys().cloned().collect::<BTreeSet<_>>());
    let dirs: BTreeMap<String, String> = list
        .iter()
        .map(|(src, dir)| {
            let n = Path::new(src)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .to_lowercase();
            (n, dir.clone())
        })
        .collect();
    let want: BTreeMap<String, String> = [
        "ctranslate2.dll",
        "libiomp5md.dll",
        "msvcp140.dll",
        "vcruntime140.dll",
        "vcruntime140_1.dll",
    ]
    .iter()
    .map(|n| (n.to_string(), ".".to_string()))
    .collect();
    assert_eq!(dirs, want, "{}", abs.stdout);

    let json = rocbuild_in(
        root,
        &[
            "bundle", rel_dll, "--search", rel_rt, "--into", "c", "--format", "json",
        ],
    );
    assert_eq!(json.code, 0, "{}\n{}", json.stdout, json.stderr);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let from_json: Vec<(String, String)> = serde_json::from_value(v["binaries"].clone()).unwrap();
    assert_eq!(from_json, list);
}

/// CTranslate2 loads cuBLAS with `LoadLibrary("cublas64_12.dll")`, not through its import
/// table: `bundle` of the real Windows wheel's DLL names it, and the other DLL names its data
/// holds (MKL's per-CPU kernels, ittnotify), as "loaded at run time, not followed" in text and
/// JSON — never a DLL it imports (those are bundled) nor a Windows system DLL (kernel32, ntdll).
#[test]
fn bundle_names_the_dlls_loaded_at_run_time_by_name() {
    let (Some(ct2), Some(rt)) = (
        upstream::wheel(&upstream::CTRANSLATE2_WINDOWS),
        upstream::wheel(&upstream::MSVC_RUNTIME),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    upstream::unpack(&ct2, &root.join("site"));
    upstream::unpack(&rt, &root.join("rt"));
    let dll = root.join("site/ctranslate2/ctranslate2.dll");
    let rt_dir = root.join("rt/msvc_runtime-14.51.36231.data/data/Scripts");
    let args = |into: &str| {
        vec![
            "bundle".to_string(),
            s(&dll).to_string(),
            "--search".into(),
            s(&rt_dir).to_string(),
            "--into".into(),
            s(&root.join(into)).to_string(),
        ]
    };
    let a = args("t");
    let text = rocbuild_in(root, &a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(text.code, 0, "{}\n{}", text.stdout, text.stderr);
    let section = text
        .stdout
        .split("loaded at run time, not followed")
        .nth(1)
        .unwrap_or_else(|| panic!("no run-time section:\n{}", text.stdout));
    assert!(
        section.contains("cublas64_12.dll  (named in ctranslate2.dll)"),
        "{}",
        text.stdout
    );

    let mut a = args("j");
    a.push("--json".into());
    let json = rocbuild_in(root, &a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(json.code, 0, "{}\n{}", json.stdout, json.stderr);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let names: BTreeSet<String> = v["runtime_loaded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_lowercase())
        .collect();
    for want in [
        "cublas64_12.dll",
        "libittnotify.dll",
        "mkl_def.2.dll",
        "mkl_avx2.2.dll",
    ] {
        assert!(names.contains(want), "{want} not in {names:?}");
    }
    for not in [
        "kernel32.dll",
        "ntdll.dll",
        "msvcp140.dll",
        "vcruntime140.dll",
        "libiomp5md.dll",
        "ctranslate2.dll",
    ] {
        assert!(!names.contains(not), "{not} in {names:?}");
    }
    assert!(
        names.iter().all(|n| !n.starts_with("api-ms-win-")),
        "{names:?}"
    );
    // Named, not followed: nothing of them is copied.
    assert_eq!(tree(&root.join("j")).len(), 5);
}

/// A stub Windows DLL `name` in `dir`, built here with the mingw-w64 cross compiler, exporting
/// `symbols` and importing one symbol from each DLL of `links` (so the preload order is
/// checkable).
fn stub_dll(
    dir: &Path,
    name: &str,
    symbols: &BTreeSet<String>,
    links: &[(PathBuf, String)],
) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let src = dir.join(format!("{name}.c"));
    let mut c = String::new();
    for (i, (_, sym)) in links.iter().enumerate() {
        c.push_str(&format!(
            "__declspec(dllimport) void {sym}(void);\n__declspec(dllexport) void rocbuild_uses_{i}(void) {{ {sym}(); }}\n"
        ));
    }
    for s in symbols {
        c.push_str(&format!("__declspec(dllexport) void {s}(void) {{}}\n"));
    }
    std::fs::write(&src, c).unwrap();
    let out = dir.join(name);
    let mut cmd = std::process::Command::new("x86_64-w64-mingw32-gcc");
    cmd.args(["-shared", "-nostdlib", "-o"])
        .arg(&out)
        .arg(&src)
        .args(links.iter().map(|(p, _)| p))
        .args(["-e", "0"]);
    run(&mut cmd);
    std::fs::remove_file(&src).unwrap();
    out
}

/// What `files` import from each DLL (lower-cased names) whose name `keep` accepts.
fn pe_imports(
    files: &[PathBuf],
    keep: impl Fn(&str) -> bool,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let b = rocbuild_native::read_binary(f).unwrap();
        for i in &b.imports {
            if let (Some(lib), Some(name)) = (&i.library, &i.name) {
                if keep(lib) {
                    out.entry(lib.clone()).or_default().insert(name.clone());
                }
            }
        }
    }
    out
}

/// No DLL changed by the Windows repair; the hook's two files are new, and pip's RECORD lists
/// them (pip's uninstall removes them with the package), every row true, the others as they
/// were.
fn assert_only_the_hook_was_added(
    site: &Path,
    before: &BTreeMap<String, Vec<u8>>,
    after: &BTreeMap<String, Vec<u8>>,
) {
    let record = "torchcodec-0.17.0.dist-info/RECORD";
    for (rel, bytes) in before {
        if rel != record {
            assert_eq!(after.get(rel), Some(bytes), "{rel} changed");
        }
    }
    let was = assert_record_true(site, &String::from_utf8_lossy(&before[record]));
    let now = assert_record_true(site, &String::from_utf8_lossy(&after[record]));
    let added: Vec<&String> = now.keys().filter(|k| !was.contains_key(*k)).collect();
    assert_eq!(
        added,
        [
            "_rocbuild_preload_torchcodec.pth",
            "_rocbuild_preload_torchcodec.py"
        ]
    );
    assert!(was.iter().all(|(k, h)| now.get(k) == Some(h)));
}

/// Windows repair: the real TorchCodec 0.17.0 Windows wheel beside the real torch 2.11.0
/// Windows DLLs, in a Windows-shaped venv read from this Linux host. FFmpeg 7's DLLs (and
/// libheif's, for the HEIC library) are in a directory given with --search: stubs exporting
/// what the wheel imports, avcodec & co importing avutil. No DLL is edited; repair writes the
/// preload hook (module + `.pth`), journaled, with a `repair` manifest listing both files in
/// `extra_files`; the hook adds the directory and preloads avutil before what needs it;
/// restore removes it. Loading the hook (ctypes.WinDLL, os.add_dll_directory) needs Windows:
/// this host can check its text and order, not run it.
#[test]
fn repairs_the_real_windows_torchcodec_with_the_preload_hook() {
    let (Some(tc), Some(torch)) = (
        upstream::wheel(&upstream::TORCHCODEC_WINDOWS),
        upstream::wheel(&upstream::TORCH_WINDOWS),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (venv, site) = windows_venv(tmp.path(), &tc);
    upstream::unpack_only(&torch, &site, &["torch/lib/", "torch/version.py"]);
    let pkg = site.join("torchcodec");
    let wanted = |l: &str| {
        let l = l.to_ascii_lowercase();
        l == "heif.dll"
            || [
                "avutil-59",
                "avcodec-61",
                "avformat-61",
                "avfilter-10",
                "swscale-8",
                "swresample-5",
            ]
            .iter()
            .any(|p| l.starts_with(p))
    };
    let files: Vec<PathBuf> = tree(&pkg)
        .keys()
        .filter(|k| k.ends_with(".dll") || k.ends_with(".pyd"))
        .map(|k| pkg.join(k))
        .collect();
    let ffmpeg = tmp.path().join("ffmpeg/bin");
    let imports = pe_imports(&files, wanted);
    let avutil_name = imports
        .keys()
        .find(|k| k.to_ascii_lowercase().starts_with("avutil"))
        .unwrap()
        .clone();
    let avutil = stub_dll(&ffmpeg, &avutil_name, &imports[&avutil_name], &[]);
    let first = imports[&avutil_name].iter().next().unwrap().clone();
    for (name, syms) in &imports {
        if name != &avutil_name {
            stub_dll(&ffmpeg, name, syms, &[(avutil.clone(), first.clone())]);
        }
    }
    let before = tree(&site);

    // Without the FFmpeg directory: refused (a library found nowhere), nothing written.
    let out = rocbuild(&["repair", "torchcodec", "--venv", s(&venv)], &[]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert!(tree(&site) == before);

    let out = rocbuild(
        &[
            "repair",
            "torchcodec",
            "--venv",
            s(&venv),
            "--search",
            s(&ffmpeg),
            "--json",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["os"], "windows");
    let p = &v["packages"][0];
    assert_eq!(p["outcome"], "repaired", "{}", out.stdout);
    assert_eq!(p["hook"]["module"], "_rocbuild_preload_torchcodec.py");
    assert_eq!(
        p["hook"]["dirs"],
        serde_json::json!([ffmpeg.display().to_string()])
    );

    assert_only_the_hook_was_added(&site, &before, &tree(&site));
    let module = std::fs::read_to_string(site.join("_rocbuild_preload_torchcodec.py")).unwrap();
    assert_eq!(
        std::fs::read_to_string(site.join("_rocbuild_preload_torchcodec.pth")).unwrap(),
        "import _rocbuild_preload_torchcodec\n"
    );
    // The venv is a Windows one on this Linux host: its Python runs under Wine, which sees
    // `/` as `Z:\` (the plan above keeps the host's path).
    let seen = serde_json::to_string(&format!(
        "Z:{}",
        ffmpeg.display().to_string().replace('/', "\\")
    ))
    .unwrap();
    assert!(
        module.contains(&format!("DIRS = [\n    {seen},\n]")),
        "{module}"
    );
    assert!(module.contains("os.add_dll_directory(d)"), "{module}");
    assert!(module.contains("if name == \"torchcodec\""), "{module}");
    let pos = |n: &str| {
        module
            .find(&format!("{}\"", n))
            .unwrap_or_else(|| panic!("{n} not preloaded:\n{module}"))
    };
    let codec = imports
        .keys()
        .find(|k| k.to_ascii_lowercase().starts_with("avcodec"))
        .unwrap();
    assert!(
        pos(&avutil_name) < pos(codec),
        "avutil must load before avcodec:\n{module}"
    );
    assert!(
        !module.contains("torch/lib"),
        "torch adds its own DLL dir:\n{module}"
    );

    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(site.join(".rocbuild/torchcodec.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["kind"], "repair");
    assert_eq!(
        m["extra_files"],
        serde_json::json!([
            "_rocbuild_preload_torchcodec.py",
            "_rocbuild_preload_torchcodec.pth"
        ])
    );
    let st = rocbuild(&["status", "--venv", s(&venv)], &[]);
    assert!(
        st.stdout.contains("torchcodec 0.17.0: fresh"),
        "{}\n{}",
        st.stdout,
        st.stderr
    );

    let r = rocbuild(&["restore", "torchcodec", "--venv", s(&venv)], &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let now = tree(&site);
    assert!(
        now == before,
        "restore did not give the venv back as it was"
    );
}

/// What llvm-objdump (an independent reader) says a native file needs: load-time libraries,
/// LC_RPATHs, and (PE) the procedures imported from each DLL.
#[derive(Debug, Default, PartialEq)]
struct Objdump {
    needed: BTreeSet<String>,
    rpaths: Vec<String>,
    imports: BTreeMap<String, BTreeSet<String>>,
}

fn objdump(file: &Path) -> Objdump {
    let mut out = Objdump::default();
    let is_pe = std::fs::read(file).unwrap().starts_with(b"MZ");
    if is_pe {
        let text = run(std::process::Command::new("llvm-objdump-15")
            .arg("-p")
            .arg(file));
        let mut current: Option<String> = None;
        let mut in_imports = false;
        for l in text.lines() {
            let t = l.trim();
            if t == "The Import Tables:" {
                in_imports = true;
                continue;
            }
            if t.starts_with("The ") && t.ends_with(':') && t != "The Import Tables:" {
                in_imports = false;
                current = None;
            }
            if !in_imports {
                continue;
            }
            if let Some(dll) = t.strip_prefix("DLL Name: ") {
                out.needed.insert(dll.to_string());
                current = Some(dll.to_string());
                out.imports.entry(dll.to_string()).or_default();
            } else if t.is_empty() || t.starts_with("lookup ") || t.starts_with("Hint/Ord") {
                if t.is_empty() {
                    current = None;
                }
            } else if let Some(dll) = &current {
                // `  144  WinVerifyTrust`: hint, then the name (an ordinal import has none).
                let mut it = t.split_whitespace();
                if let (Some(_), Some(name)) = (it.next(), it.next()) {
                    out.imports.get_mut(dll).unwrap().insert(name.to_string());
                }
            }
        }
    } else {
        let text = run(std::process::Command::new("llvm-objdump-15")
            .args(["--macho", "--private-headers"])
            .arg(file));
        let mut cmd = String::new();
        for l in text.lines() {
            let t = l.trim();
            if let Some(c) = t.strip_prefix("cmd ") {
                cmd = c.to_string();
            } else if let Some(n) = t.strip_prefix("name ") {
                if matches!(
                    cmd.as_str(),
                    "LC_LOAD_DYLIB" | "LC_LOAD_WEAK_DYLIB" | "LC_REEXPORT_DYLIB"
                ) {
                    out.needed
                        .insert(n.split(" (offset").next().unwrap().to_string());
                }
            }
        }
        out.rpaths = objdump_rpaths(file);
    }
    out
}

/// Every native file of the corpus of real upstream wheels (macOS, Windows), read by rocbuild
/// and by llvm-objdump: the same needed libraries, the same LC_RPATHs, and for PE the same
/// procedures imported from each DLL (rocbuild's missing-import check works on these).
#[test]
fn the_corpus_reads_the_same_as_llvm_objdump() {
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for w in upstream::CORPUS {
        let Some(wheel) = upstream::wheel(w) else {
            continue;
        };
        let into = tmp
            .path()
            .join(format!("{}-{}-{}", w.name, w.version, w.platform));
        // torch's Windows wheel is large: its c10.dll stands for it.
        let prefixes: &[&str] = if w.name == "torch" {
            &["torch/lib/c10.dll"]
        } else {
            &[""]
        };
        upstream::unpack_only(&wheel, &into, prefixes);
        let files: Vec<PathBuf> = tree(&into)
            .into_keys()
            .map(|rel| into.join(rel))
            .filter(|p| {
                let n = p.to_string_lossy().to_lowercase();
                n.ends_with(".dll")
                    || n.ends_with(".dylib")
                    || n.ends_with(".pyd")
                    || (n.ends_with(".so") && w.platform.starts_with("macosx"))
            })
            .collect();
        assert!(!files.is_empty(), "{}: no native file", wheel.display());
        for f in files {
            let ours =
                rocbuild_native::read_binary(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let theirs = objdump(&f);
            let needed: BTreeSet<String> = ours.needed.iter().cloned().collect();
            assert_eq!(needed, theirs.needed, "needed libraries of {}", f.display());
            assert_eq!(ours.rpath, theirs.rpaths, "LC_RPATHs of {}", f.display());
            if !theirs.imports.is_empty() {
                let mut by_dll: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
                for i in &ours.imports {
                    let dll = i.library.clone().unwrap_or_default();
                    let e = by_dll.entry(dll).or_default();
                    if let Some(n) = &i.name {
                        e.insert(n.clone());
                    }
                }
                for (dll, names) in &theirs.imports {
                    assert_eq!(
                        by_dll.get(dll).cloned().unwrap_or_default(),
                        *names,
                        "procedures {} imports from {dll}",
                        f.display()
                    );
                }
            }
            checked += 1;
        }
    }
    eprintln!("{checked} native files of the corpus read the same by rocbuild and llvm-objdump");
    assert!(checked >= 10, "only {checked} files checked");
}

/// doctor reports every problem it finds, not the first (issue 26): the real TorchCodec 0.10.0
/// Windows wheel beside the real torch 2.11.0, with no FFmpeg anywhere. FFmpeg is missing,
/// which makes every core inactive; behind it, the DLLs import a c10 constructor that torch
/// 2.11 does not export (0.10 is for torch 2.10 only). Both are reported, each with its fix,
/// FFmpeg's and the ABI break's; the exit status is the combined one (5), `--json` lists both.
#[test]
fn doctor_reports_the_abi_break_behind_a_missing_ffmpeg() {
    let (Some(tc), Some(torch)) = (
        upstream::wheel(&upstream::TORCHCODEC_WINDOWS_0_10),
        upstream::wheel(&upstream::TORCH_WINDOWS),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (venv, site) = windows_venv(tmp.path(), &tc);
    upstream::unpack_only(&torch, &site, &["torch/lib/", "torch/version.py"]);
    let v = venv.to_str().unwrap();
    let out = rocbuild_in(tmp.path(), &["doctor", "torchcodec", "--venv", v, "--json"]);
    let json: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", out.stdout, out.stderr));
    let findings = json["packages"][0]["findings"]
        .as_array()
        .or_else(|| json["findings"].as_array())
        .cloned()
        .unwrap_or_default();
    let checks: Vec<&str> = findings
        .iter()
        .filter_map(|f| f["check"].as_str())
        .collect();
    assert!(checks.contains(&"ffmpeg"), "{checks:?}\n{}", out.stdout);
    assert!(checks.contains(&"abi"), "{checks:?}\n{}", out.stdout);
    let abi = findings
        .iter()
        .find(|f| f["check"] == "abi")
        .unwrap()
        .to_string();
    assert!(abi.contains("c10::MessageLogger::MessageLogger"), "{abi}");
    assert_eq!(out.code, 5, "{}", out.stdout);
    let human = rocbuild_in(tmp.path(), &["doctor", "torchcodec", "--venv", v]);
    assert_eq!(human.code, 5, "{}", human.stdout);
    assert!(human.stdout.contains("MessageLogger"), "{}", human.stdout);
    assert!(
        human.stdout.to_lowercase().contains("ffmpeg"),
        "{}",
        human.stdout
    );
}

/// `bundle` of a package in a Windows venv finds the MSVC runtime the venv already holds
/// (issue 30): the real `msvc-runtime` wheel installs its DLLs as wheel data into the venv's
/// root and `Scripts\`, and the real CTranslate2 DLL needs them; no `--search` is given.
#[test]
fn bundle_finds_the_msvc_runtime_a_windows_venv_holds() {
    let (Some(ct2), Some(rt)) = (
        upstream::wheel(&upstream::CTRANSLATE2_WINDOWS),
        upstream::wheel(&upstream::MSVC_RUNTIME),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (venv, site) = windows_venv(tmp.path(), &ct2);
    // pip's install of the runtime wheel: `.data/data/X` goes to the venv's root.
    let unpacked = tmp.path().join("rt");
    upstream::unpack(&rt, &unpacked);
    let data = unpacked.join("msvc_runtime-14.51.36231.data/data");
    for (rel, from) in rocbuild_venv::walk(&data) {
        let to = venv.join(&rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    }
    let dll = site.join("ctranslate2/ctranslate2.dll");
    let out = rocbuild_in(
        tmp.path(),
        &[
            "bundle",
            s(&dll),
            "--into",
            s(&tmp.path().join("app")),
            "--json",
        ],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let held = tree(&tmp.path().join("app"))
        .into_keys()
        .collect::<Vec<_>>();
    assert!(
        held.iter()
            .any(|k| k.to_ascii_lowercase().ends_with("msvcp140.dll")),
        "{held:?}"
    );
}
