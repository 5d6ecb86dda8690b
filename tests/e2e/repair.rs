//! `rocbuild repair`: pip's own files made findable, not rebuilt — on the real PyPI wheels.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use rocbuild_testkit::upstream;

use crate::common::*;

/// Every file under `dir` with its bytes.
pub(crate) fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// A dylib for arm64 macOS whose install name is `@rpath/<name>` and which exports exactly
/// `symbols` (raw Mach-O names), linked here with clang-15 + ld64.lld from assembly.
pub(crate) fn stub_dylib(dir: &Path, name: &str, symbols: &BTreeSet<String>) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut asm = String::from(".text\n.p2align 2\n");
    for s in symbols {
        asm.push_str(&format!(".globl \"{s}\"\n\"{s}\":\n  ret\n"));
    }
    let src = dir.join(format!("{name}.s"));
    std::fs::write(&src, asm).unwrap();
    let out = dir.join(name);
    run(Command::new("clang-15")
        .args([
            "-target",
            "arm64-apple-macos11",
            "-nostdlib",
            "-shared",
            "-fuse-ld=lld",
        ])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .arg(format!("-Wl,-install_name,@rpath/{name}")));
    std::fs::remove_file(&src).unwrap();
    out
}

/// What the files under `dir` import from each `@rpath/` library.
pub(crate) fn rpath_imports(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, _) in tree(dir) {
        if !(rel.ends_with(".dylib") || rel.ends_with(".so")) {
            continue;
        }
        let b = rocbuild_native::read_binary(&dir.join(&rel)).unwrap();
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
    out
}

/// The LC_RPATHs of a Mach-O file, as llvm-objdump (an independent reader) prints them.
pub(crate) fn objdump_rpaths(file: &Path) -> Vec<String> {
    let text = run(Command::new("llvm-objdump-15")
        .args(["--macho", "--private-headers"])
        .arg(file));
    let mut out = Vec::new();
    let mut in_rpath = false;
    for l in text.lines() {
        let t = l.trim();
        if t.starts_with("cmd ") {
            in_rpath = t == "cmd LC_RPATH";
        } else if in_rpath && t.starts_with("path ") {
            let p = t.trim_start_matches("path ");
            out.push(p.split(" (offset").next().unwrap().to_string());
        }
    }
    out
}

/// The real macOS TorchCodec 0.16.0 wheel in a macOS-shaped venv under `root`, with torch's
/// libraries and Homebrew's FFmpeg 7 as stub dylibs exporting what the wheel imports: (venv,
/// Homebrew's lib). None (said) when the wheel cannot be had.
pub(crate) fn macos_torchcodec_venv(root: &Path) -> Option<(PathBuf, PathBuf)> {
    let wheel = upstream::wheel(&upstream::TORCHCODEC_MACOS_NO_RPATH)?;
    let venv = root.join("venv");
    let site = venv.join("lib/python3.12/site-packages");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::write(
        venv.join("pyvenv.cfg"),
        "home = /opt/homebrew/bin\nversion = 3.12.7\n",
    )
    .unwrap();
    upstream::unpack(&wheel, &site);
    let tc = site.join("torchcodec");

    // torch's libraries and Homebrew's FFmpeg 7, as stubs exporting what is imported.
    let brew = root.join("opt/homebrew/lib");
    for (leaf, syms) in rpath_imports(&tc) {
        if leaf.starts_with("libtorchcodec") {
            continue;
        }
        let dir = if leaf.starts_with("libav") || leaf.starts_with("libsw") {
            // Only FFmpeg 7 (libavutil 59) is installed, as with `brew install ffmpeg@7`.
            if ![
                "libavutil.59",
                "libavcodec.61",
                "libavformat.61",
                "libavdevice.61",
                "libavfilter.10",
                "libswscale.8",
                "libswresample.5",
            ]
            .iter()
            .any(|p| leaf.starts_with(p))
            {
                continue;
            }
            brew.clone()
        } else {
            site.join("torch/lib")
        };
        stub_dylib(&dir, &leaf, &syms);
    }

    Some((venv, brew))
}

/// TorchCodec 0.16.0's real macOS wheel in a macOS-shaped venv, repaired from this Linux
/// host: its libraries have no LC_RPATH, so nothing finds torch's libraries or Homebrew's
/// FFmpeg. torch/lib and Homebrew's lib hold stub dylibs exporting what the wheel imports.
#[test]
fn repairs_the_real_macos_torchcodec_without_lc_rpath() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((venv, brew)) = macos_torchcodec_venv(tmp.path()) else {
        return;
    };
    let site = venv.join("lib/python3.12/site-packages");
    let tc = site.join("torchcodec");
    let core = tc.join("libtorchcodec_core7.dylib");
    let pip_bytes = tree(&site);
    assert!(
        objdump_rpaths(&core).is_empty(),
        "the fixture has no LC_RPATH"
    );

    let staged = tree(&site);

    // Before: deps cannot find libavutil (nor torch's libraries), and says why.
    let before = rocbuild(&["deps", core.to_str().unwrap()], &[]);
    assert_eq!(before.code, 3, "{}\n{}", before.stdout, before.stderr);
    assert!(
        before.stdout.contains("libavutil.59.dylib"),
        "{}",
        before.stdout
    );

    let dry = rocbuild(
        &[
            "repair",
            "torchcodec",
            "--venv",
            venv.to_str().unwrap(),
            "--search",
            brew.to_str().unwrap(),
            "--dry-run",
        ],
        &[],
    );
    assert_eq!(dry.code, 0, "{}\n{}", dry.stdout, dry.stderr);
    assert!(dry.stdout.contains("would be repaired"), "{}", dry.stdout);
    assert!(tree(&site) == staged, "the dry run changed the venv");

    let out = rocbuild(
        &[
            "repair",
            "torchcodec",
            "--venv",
            venv.to_str().unwrap(),
            "--search",
            brew.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect(&out.stdout);
    assert_eq!(v["os"], "macos");
    let p = &v["packages"][0];
    assert_eq!(p["outcome"], "repaired", "{}", out.stdout);
    let fixed: BTreeSet<&str> = p["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    for f in [
        "torchcodec/libtorchcodec_core7.dylib",
        "torchcodec/libtorchcodec_custom_ops7.dylib",
        "torchcodec/libtorchcodec_pybind_ops.so",
    ] {
        assert!(fixed.contains(f), "{f} not repaired: {}", out.stdout);
    }
    // The cores for FFmpeg majors that are not installed are left as they were.
    assert!(!fixed.contains("torchcodec/libtorchcodec_core6.dylib"));
    assert_eq!(
        std::fs::read(tc.join("libtorchcodec_core6.dylib")).unwrap(),
        pip_bytes["torchcodec/libtorchcodec_core6.dylib"]
    );

    // Read back by llvm-objdump: the rpaths; by the signing crate's verifier: every page hash.
    assert_eq!(
        objdump_rpaths(&core),
        [
            "@loader_path/../torch/lib".to_string(),
            brew.display().to_string()
        ]
    );
    assert_eq!(
        objdump_rpaths(&tc.join("libtorchcodec_pybind_ops.so")),
        ["@loader_path/../torch/lib"]
    );
    for f in &fixed {
        let bytes = std::fs::read(site.join(f)).unwrap();
        assert_eq!(
            rocbuild_native::signature_problems(&bytes),
            Vec::<String>::new(),
            "{f}"
        );
        assert_ne!(bytes, pip_bytes[*f], "{f}");
    }

    // deps now finds libavutil in Homebrew's lib, through the new LC_RPATH.
    let after = rocbuild(&["deps", core.to_str().unwrap(), "--json"], &[]);
    assert_eq!(after.code, 0, "{}\n{}", after.stdout, after.stderr);
    let d: serde_json::Value = serde_json::from_str(&after.stdout).unwrap();
    let libs = d["files"][0]["libraries"].as_array().unwrap();
    let avutil = libs
        .iter()
        .find(|l| l["name"] == "@rpath/libavutil.59.dylib")
        .expect(&after.stdout);
    assert_eq!(
        avutil["path"],
        brew.join("libavutil.59.dylib").display().to_string()
    );

    repaired_is_recorded_then_restored(&venv, &brew, &site, &pip_bytes);
}

/// After a repair: the manifest says it is one, status sees it fresh, a second run has nothing
/// to do, and restore puts back pip's bytes, every file.
fn repaired_is_recorded_then_restored(
    venv: &Path,
    brew: &Path,
    site: &Path,
    pip_bytes: &BTreeMap<String, Vec<u8>>,
) {
    // The manifest says it is a repair; status sees it; a second run has nothing to do.
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(site.join(".rocbuild/torchcodec.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["kind"], "repair");
    assert_eq!(m["version"], "0.16.0");
    let st = rocbuild(&["status", "--venv", venv.to_str().unwrap()], &[]);
    assert!(
        st.stdout.contains("torchcodec 0.16.0: fresh"),
        "{}\n{}",
        st.stdout,
        st.stderr
    );
    let again = rocbuild(
        &[
            "repair",
            "torchcodec",
            "--venv",
            venv.to_str().unwrap(),
            "--search",
            brew.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stdout.contains("nothing to repair"),
        "{}",
        again.stdout
    );

    // restore: pip's bytes back, every file.
    let r = rocbuild(
        &["restore", "torchcodec", "--venv", venv.to_str().unwrap()],
        &[],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let now = tree(site);
    for (rel, bytes) in pip_bytes {
        assert_eq!(now.get(rel), Some(bytes), "{rel} differs after restore");
    }
    assert!(!site.join(".rocbuild/torchcodec.json").exists());
}

/// PyPI's torchcodec 0.17.0 on PyPI's CUDA torch (Linux): its libraries have no RUNPATH, so
/// a fresh Python cannot `ctypes.CDLL` its core without importing torch first. After repair
/// it can (RUNPATH to torch/lib and the nvidia wheel's lib); restore gives pip's bytes back.
#[test]
fn repairs_the_real_linux_torchcodec_so_its_core_loads_without_torch() {
    use crate::real_torch::{pypi_torchcodec_wheel, real_torch_venv, venv_over};
    let Some(real) = real_torch_venv() else {
        return;
    };
    let wheel = pypi_torchcodec_wheel(&real);
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let site = venv_over(&real, &venv);
    run(Command::new(real.join("bin/python"))
        .args(["-m", "pip", "--python"])
        .arg(venv.join("bin/python"))
        .args(["install", "-q", "--no-deps", "--no-index", "--no-compile"])
        .arg(&wheel));
    let tc = site.join("torchcodec");
    let core = tc.join("libtorchcodec_core5.so");
    let pip_bytes = tree(&tc);
    let load = || {
        Command::new(venv.join("bin/python"))
            .args([
                "-I",
                "-B",
                "-c",
                "import ctypes, sys; ctypes.CDLL(sys.argv[1]); print('loaded')",
            ])
            .arg(&core)
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap()
    };
    let before = load();
    assert!(!before.status.success(), "loads before the repair?");
    assert!(String::from_utf8_lossy(&before.stderr).contains("cannot open shared object file"));

    let out = rocbuild(
        &["repair", "torchcodec", "--venv", venv.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("torchcodec 0.17.0: repaired"),
        "{}",
        out.stdout
    );
    let info = rocbuild_native::read_elf(&core).unwrap();
    assert!(
        info.runpath.contains(&"$ORIGIN/../torch/lib".to_string()),
        "{info:?}"
    );
    let after = load();
    assert!(
        after.status.success(),
        "{}",
        String::from_utf8_lossy(&after.stderr)
    );
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(site.join(".rocbuild/torchcodec.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["kind"], "repair");

    // pip reinstalling the wheel is seen by status. (A real reinstall: it writes pip's
    // RECORD with the files. Writing one library's bytes back by hand, beside a RECORD that
    // repair keeps true, is another case: restore then leaves the other repaired files.)
    pip_into(&real, &venv, &wheel, &["--force-reinstall"]);
    let st = rocbuild(&["status", "--venv", venv.to_str().unwrap()], &[]);
    assert_eq!(st.code, 1, "{}", st.stdout);
    assert!(
        st.stdout
            .contains("overwritten: torchcodec/libtorchcodec_core5.so"),
        "{}",
        st.stdout
    );

    let r = rocbuild(
        &["restore", "torchcodec", "--venv", venv.to_str().unwrap()],
        &[],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        tree(&tc) == pip_bytes,
        "restore did not give pip's bytes back"
    );
    assert!(!load().status.success());
}

/// `bundle` of the real CTranslate2 Windows wheel, from this Linux host: exactly the DLLs a
/// clean Windows lacks — ctranslate2, libiomp5md and the MSVC runtime (from the msvc-runtime
/// wheel via --search) — and no system DLL (libiomp5md's WINTRUST.dll is one); without the
/// runtime it refuses, naming `pip install msvc-runtime`.
#[test]
fn bundles_the_real_ctranslate2_windows_wheel_with_the_msvc_runtime() {
    let (Some(ct2), Some(rt)) = (
        upstream::wheel(&upstream::CTRANSLATE2_WINDOWS),
        upstream::wheel(&upstream::MSVC_RUNTIME),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let site = tmp.path().join("site");
    upstream::unpack(&ct2, &site);
    let rt_dir = tmp.path().join("rt");
    upstream::unpack(&rt, &rt_dir);
    // pip puts them beside python.exe (Scripts/), where the whole runtime is.
    let rt_dlls = rt_dir.join("msvc_runtime-14.51.36231.data/data/Scripts");
    let dll = site.join("ctranslate2/ctranslate2.dll");

    let refused = rocbuild(
        &[
            "bundle",
            dll.to_str().unwrap(),
            "--into",
            tmp.path().join("no").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(refused.code, 3, "{}", refused.stdout);
    assert!(
        refused.stderr.contains("pip install msvc-runtime"),
        "{}",
        refused.stderr
    );
    assert!(
        !refused.stderr.to_lowercase().contains("wintrust"),
        "{}",
        refused.stderr
    );
    assert!(
        !tmp.path().join("no").exists()
            || std::fs::read_dir(tmp.path().join("no"))
                .unwrap()
                .next()
                .is_none()
    );

    let into = tmp.path().join("app");
    let out = rocbuild(
        &[
            "bundle",
            dll.to_str().unwrap(),
            "--into",
            into.to_str().unwrap(),
            "--search",
            rt_dlls.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let names: BTreeSet<String> = tree(&into)
        .keys()
        .map(|k| {
            Path::new(k)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .to_lowercase()
        })
        .collect();
    let want: BTreeSet<String> = [
        "ctranslate2.dll",
        "libiomp5md.dll",
        "msvcp140.dll",
        "vcruntime140.dll",
        "vcruntime140_1.dll",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(names, want, "{}", out.stdout);
}

/// PyPI's torchcodec 0.17.0 installed by pip (`--no-deps`) into a venv of its own on the real
/// torch venv: (the real venv, the wheel, the venv, its site-packages); None (SKIPPED said)
/// without the real torch venv.
fn pip_installed_torchcodec(root: &Path) -> Option<(PathBuf, PathBuf, PathBuf, PathBuf)> {
    use crate::real_torch::{pypi_torchcodec_wheel, real_torch_venv, venv_over};
    let real = real_torch_venv()?;
    let wheel = pypi_torchcodec_wheel(&real);
    let venv = root.join("venv");
    let site = venv_over(&real, &venv);
    pip_into(&real, &venv, &wheel, &[]);
    Some((real, wheel, venv, site))
}

/// `pip install --no-deps [extra] WHEEL` into `venv` with the real venv's pip, as a user would.
fn pip_into(real: &Path, venv: &Path, wheel: &Path, extra: &[&str]) {
    run(Command::new(real.join("bin/python"))
        .args(["-m", "pip", "--python"])
        .arg(venv.join("bin/python"))
        .args(["install", "-q", "--no-deps", "--no-index", "--no-compile"])
        .args(extra)
        .arg(wheel));
}

/// Every RECORD row that has a hash names a file whose sha256 (urlsafe base64 without
/// padding, as PEP 376/427 write it) and size are the ones listed, computed here from the
/// bytes on disk. The rows checked: path -> hash.
pub(crate) fn assert_record_true(site: &Path, record: &str) -> BTreeMap<String, String> {
    use base64::Engine;
    use sha2::Digest;
    let mut rows = BTreeMap::new();
    for line in record.lines().filter(|l| !l.trim().is_empty()) {
        let mut it = line.rsplitn(3, ',');
        let (size, hash, path) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
        let path = path.trim_matches('"');
        if hash.is_empty() {
            continue; // the RECORD itself
        }
        let bytes = std::fs::read(site.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        let digest = sha2::Sha256::digest(&bytes);
        let on_disk = format!(
            "sha256={}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
        );
        assert_eq!(
            hash, on_disk,
            "{path}: RECORD lists {hash}, the file is {on_disk}"
        );
        assert_eq!(size, bytes.len().to_string(), "{path}: RECORD's size");
        rows.insert(path.to_string(), hash.to_string());
    }
    rows
}

fn fixed_paths(out: &Out) -> Vec<String> {
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect(&out.stdout);
    let p = &v["packages"][0];
    assert_eq!(p["outcome"], "repaired", "{}", out.stdout);
    p["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect()
}

/// After `repair` edits pip's libraries (RUNPATH), pip's RECORD lists each edited file with
/// its new sha256 and size (every row is checked against the bytes on disk, so `pip`'s own
/// verification and rocbuild's ownership see the truth); `restore` gives pip's RECORD back
/// byte for byte.
#[test]
fn repair_keeps_pips_record_true_and_restore_gives_it_back() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((_, _, venv, site)) = pip_installed_torchcodec(tmp.path()) else {
        return;
    };
    let v = venv.to_str().unwrap();
    let record = site.join("torchcodec-0.17.0.dist-info/RECORD");
    let pips = std::fs::read(&record).unwrap();
    let before = assert_record_true(&site, &String::from_utf8_lossy(&pips));

    let fixed = fixed_paths(&rocbuild(
        &["repair", "torchcodec", "--venv", v, "--json"],
        &[],
    ));
    assert!(
        fixed.contains(&"torchcodec/libtorchcodec_core5.so".to_string()),
        "{fixed:?}"
    );
    let after = assert_record_true(&site, &std::fs::read_to_string(&record).unwrap());
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "the same files are listed"
    );
    for (path, hash) in &before {
        let edited = fixed.contains(path);
        assert_eq!(after[path] != *hash, edited, "{path}: edited {edited}");
    }

    let r = rocbuild(&["restore", "torchcodec", "--venv", v], &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        std::fs::read(&record).unwrap() == pips,
        "restore did not give pip's RECORD back byte for byte"
    );
}

/// pip reinstalling a repaired package undoes the repair: `status` says so and names the
/// command that works, `rocbuild repair` (not `rebuild`, which has nothing to build a repair
/// from), in its text and in `--json`; running exactly that makes `status` fresh again, with
/// pip's new RECORD true.
#[test]
fn after_pip_reinstalls_a_repaired_package_status_advises_repair_and_it_works() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((real, wheel, venv, site)) = pip_installed_torchcodec(tmp.path()) else {
        return;
    };
    let v = venv.to_str().unwrap();
    fixed_paths(&rocbuild(
        &["repair", "torchcodec", "--venv", v, "--json"],
        &[],
    ));
    pip_into(&real, &venv, &wheel, &["--force-reinstall"]);

    let st = rocbuild(&["status", "--venv", v], &[]);
    assert_eq!(st.code, 1, "{}\n{}", st.stdout, st.stderr);
    assert!(
        st.stdout.contains("torchcodec 0.17.0: overwritten")
            && st
                .stdout
                .contains("overwritten: torchcodec/libtorchcodec_core5.so"),
        "{}",
        st.stdout
    );
    let fix: Vec<&str> = st
        .stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("fix: "))
        .collect();
    assert_eq!(fix, ["rocbuild repair torchcodec"], "{}", st.stdout);
    let j: serde_json::Value =
        serde_json::from_str(&rocbuild(&["status", "--venv", v, "--json"], &[]).stdout).unwrap();
    assert_eq!(j["recipes"][0]["fix"], fix[0], "{j}");
    assert_eq!(j["recipes"][0]["kind"], "repair", "{j}");

    // Exactly the command status named.
    let mut args: Vec<&str> = fix[0]
        .strip_prefix("rocbuild ")
        .unwrap()
        .split(' ')
        .collect();
    args.extend(["--venv", v]);
    let again = rocbuild(&args, &[]);
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert!(
        again.stdout.contains("torchcodec 0.17.0: repaired"),
        "{}",
        again.stdout
    );
    let st = rocbuild(&["status", "--venv", v], &[]);
    assert_eq!(st.code, 0, "{}\n{}", st.stdout, st.stderr);
    assert_eq!(st.stdout.trim(), "torchcodec 0.17.0: fresh");
    let record = site.join("torchcodec-0.17.0.dist-info/RECORD");
    assert_record_true(&site, &std::fs::read_to_string(record).unwrap());
}

/// A venv (no pip, the fake torch) holding `torchcodec/libtorchcodec_core7.so`, which needs
/// `libhelper.so.1` from site-packages' `helper/` (on no search path: what repair fixes with a
/// RUNPATH), with C code `ctor` added, and a dist-info whose RECORD lists the package's files
/// with their hashes and sizes, as pip writes it. Returns (venv, site, the RECORD).
fn recorded_repairable(root: &Path, ctor: &str) -> (PathBuf, PathBuf, PathBuf) {
    use base64::Engine;
    use sha2::Digest;
    let venv = root.join("venv");
    run(Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv));
    let site = site_packages(&venv);
    install_fake_torch(&site, "2.9.1");
    rocbuild_testkit::native::stub_library(&site.join("helper"), "libhelper.so.1");
    let src = root.join("core.c");
    std::fs::write(&src, format!("int core(void) {{ return 7; }}\n{ctor}")).unwrap();
    let l = format!("-L{}", site.join("helper").display());
    rocbuild_testkit::native::shared_library(
        "cc",
        &src,
        &site.join("torchcodec/libtorchcodec_core7.so"),
        &["-Wl,--no-as-needed", &l, "-l:libhelper.so.1"],
    );
    std::fs::write(site.join("torchcodec/__init__.py"), "").unwrap();
    let di = site.join("torchcodec-1.0.dist-info");
    std::fs::create_dir_all(&di).unwrap();
    std::fs::write(
        di.join("METADATA"),
        "Metadata-Version: 2.1\nName: torchcodec\nVersion: 1.0\n",
    )
    .unwrap();
    let mut record = String::new();
    for rel in [
        "torchcodec/__init__.py",
        "torchcodec/libtorchcodec_core7.so",
        "torchcodec-1.0.dist-info/METADATA",
    ] {
        let bytes = std::fs::read(site.join(rel)).unwrap();
        let b64 =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(&bytes));
        record.push_str(&format!("{rel},sha256={b64},{}\n", bytes.len()));
    }
    record.push_str("torchcodec-1.0.dist-info/RECORD,,\n");
    std::fs::write(di.join("RECORD"), record).unwrap();
    (venv, site, di.join("RECORD"))
}

/// The RECORD is staged through repair's transaction: a repair that commits leaves it true
/// (the edited library's row has its new hash); one whose edited library then fails to load
/// is rolled back with the RECORD, byte for byte, like every other file of the venv.
#[test]
fn a_rolled_back_repair_gives_the_old_record_back_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let (venv, site, record) = recorded_repairable(&tmp.path().join("good"), "");
    let pips = std::fs::read_to_string(&record).unwrap();
    let before = assert_record_true(&site, &pips);
    let out = rocbuild(
        &["repair", "torchcodec", "--venv", venv.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let after = assert_record_true(&site, &std::fs::read_to_string(&record).unwrap());
    let core = "torchcodec/libtorchcodec_core7.so";
    assert_ne!(after[core], before[core], "the edited library's row");
    assert_eq!(after.len(), before.len());

    let (venv, _, record) = recorded_repairable(
        &tmp.path().join("bad"),
        "#include <unistd.h>\n__attribute__((constructor)) static void init(void) { _exit(3); }\n",
    );
    let pips = std::fs::read(&record).unwrap();
    let before = tree_state(&venv);
    let out = rocbuild(
        &["repair", "torchcodec", "--venv", venv.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("rolled back"), "{}", out.stderr);
    assert!(
        std::fs::read(&record).unwrap() == pips,
        "the RECORD changed"
    );
    assert_eq!(tree_state(&venv), before, "the venv changed");
}

/// One decider says whose a venv is (`rocbuild_probe::cross::venv_os`): the real macOS
/// TorchCodec wheel's Mach-O libraries make this venv macOS's though its layout is Linux's, so
/// a build for it on Linux is refused before anything is fetched or changed, naming the OS and
/// what works from here (doctor); and doctor reads it with macOS's rules.
#[test]
fn a_build_for_a_macos_venv_on_linux_is_refused_and_doctor_reads_it_as_macos() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((venv, _brew)) = macos_torchcodec_venv(tmp.path()) else {
        return;
    };
    let before = tree(&venv);
    let cache = tmp.path().join("cache");
    let v = venv.to_str().unwrap();
    let out = rocbuild(
        &[
            "torchcodec",
            "--venv",
            v,
            "--cache",
            cache.to_str().unwrap(),
        ],
        &[],
    );
    let all = format!("{}\n{}", out.stdout, out.stderr);
    assert_ne!(out.code, 0, "{all}");
    assert!(
        all.contains("is a macos venv (its binaries say so)"),
        "{all}"
    );
    assert!(all.contains("run rocbuild on macos for it"), "{all}");
    assert!(tree(&venv) == before, "the refused build changed the venv");
    assert!(!cache.join("src").exists(), "a source was fetched: {all}");

    // The help followed literally: `rocbuild doctor --venv ROOT` reads it from here.
    let doctor = rocbuild(&["doctor", "--venv", v], &[]);
    assert!(
        doctor
            .stdout
            .contains("the venv's binaries are for macos, this host runs linux"),
        "{}\n{}",
        doctor.stdout,
        doctor.stderr
    );
}
