//! `rocbuild RECIPE --index URL` / `--find-links DIR`: machine A builds and publishes to a
//! real pypiserver on 127.0.0.1; machine B (fresh venv, same torch, fresh cache) installs the
//! wheel without compiling, through the build's transaction and verification; machine C (another
//! torch) passes over it, says why, and builds; a wheel whose library needs a symbol torch
//! does not export is refused by doctor's ABI check.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::publish::{pypi_wheels, Index};

/// Nothing was compiled: no build tree in the cache, no configure or cmake in any log.
fn nothing_compiled(w: &World) {
    assert!(!w.cache.join("build").exists(), "a build tree was made");
    let logs = w.logs();
    assert!(!logs.contains("configure"), "{logs}");
    assert!(!logs.contains("cmake"), "{logs}");
}

fn manifest(w: &World) -> serde_json::Value {
    let text = std::fs::read_to_string(w.site.join(".rocbuild/fakecodec.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Give the world's venv another torch version (version.py and its dist-info).
fn change_torch(w: &World, from: &str, to: &str) {
    let vp = w.site.join("torch/version.py");
    let text = std::fs::read_to_string(&vp).unwrap();
    std::fs::write(&vp, text.replace(&format!("'{from}'"), &format!("'{to}'"))).unwrap();
    let old = w.site.join(format!("torch-{from}.dist-info"));
    let new = w.site.join(format!("torch-{to}.dist-info"));
    std::fs::rename(&old, &new).unwrap();
    std::fs::write(
        new.join("METADATA"),
        format!("Metadata-Version: 2.1\nName: torch\nVersion: {to}\n"),
    )
    .unwrap();
}

/// Machine A builds fakecodec and publishes its wheel to a real pypiserver on 127.0.0.1:
/// (the world, the running index, the wheel's file name).
fn machine_a_builds_and_publishes() -> (World, Index, String) {
    // Machine A: build and publish.
    let a = World::new(DECODE_WAV);
    ok(&a.build(&[]));
    let packages = a.tmp.path().join("index-packages");
    let index = Index::start(a.tmp.path(), &packages);
    let index_wheels = pypi_wheels("index", &["pypiserver", "twine"]);
    let links = format!("{} {}", a.wheels.display(), index_wheels.display());
    let env = [
        ("PIP_FIND_LINKS", links.as_str()),
        ("TWINE_USERNAME", "lab"),
        ("TWINE_PASSWORD", "unused"),
    ];
    let out = a.cmd(&["publish", "fakecodec", "--index", &index.url], &env);
    ok(&out);
    let major = a.ffmpeg_major();
    let py = run(Command::new(a.venv.join("bin/python"))
        .args(["-c", "import sys; print('cp%d%d' % sys.version_info[:2])"]));
    let file = format!(
        "fakecodec-1.0.0+cpu.ffmpeg{major}.torch2.9.1-{0}-{0}-linux_x86_64.whl",
        py.trim()
    );
    assert!(
        packages.join(&file).is_file(),
        "{:?}",
        std::fs::read_dir(&packages).unwrap().collect::<Vec<_>>()
    );
    (a, index, file)
}

#[test]
fn a_fresh_machine_installs_from_the_index_without_compiling_and_another_torch_builds() {
    let (a, index, file) = machine_a_builds_and_publishes();
    let major = a.ffmpeg_major();
    let packages = a.tmp.path().join("index-packages");
    let simple = format!("{}simple/", index.url);

    // Machine B: a fresh venv with the same torch, a fresh cache, and no pip in it (as the
    // embeddable CPython of a Windows app has none): rocbuild copies the checked wheel itself.
    let b = World::new(DECODE_WAV);
    run(Command::new(b.venv.join("bin/python")).args([
        "-m",
        "pip",
        "uninstall",
        "-y",
        "-q",
        "pip",
    ]));
    let before = tree_state(&b.venv);
    let dry = b.cmd(&["fakecodec", "--index", &simple, "--dry-run"], &[]);
    ok(&dry);
    assert!(
        dry.stdout
            .contains(&format!("  index:  {simple}fakecodec/")),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains(&format!("fits:     {file}")),
        "{}",
        dry.stdout
    );
    assert_eq!(tree_state(&b.venv), before);

    let out = b.cmd(&["fakecodec", "--index", &simple], &[]);
    ok(&out);
    assert!(
        out.stderr.contains(&format!("index: installing {file}")),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("installed from the index, not built"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("verified: decoded 16000 samples"),
        "{}",
        out.stdout
    );
    nothing_compiled(&b);
    let installer = std::fs::read_to_string(
        b.site.join(
            "fakecodec-1.0.0+cpu.ffmpeg{major}.torch2.9.1.dist-info/INSTALLER"
                .replace("{major}", &major.to_string()),
        ),
    );
    assert_eq!(
        installer.ok().as_deref(),
        Some("rocbuild\n"),
        "the Python part was not copied by rocbuild"
    );
    let m = manifest(&b);
    let url = m["source_url"].as_str().unwrap().to_string();
    assert!(
        url.starts_with(&index.url) && url.ends_with(".whl"),
        "{url}"
    );
    assert_eq!(m["prebuilt"]["file"], file.as_str());
    assert_eq!(
        m["prebuilt"]["sha256"].as_str().unwrap(),
        rocbuild_testkit::downloads::sha256_hex(&std::fs::read(packages.join(&file)).unwrap())
    );
    // The library is the one in the wheel, its RUNPATH set for this venv; it loads.
    let lib = b
        .site
        .join(format!("fakecodec/libfakecodec_custom_ops{major}.so"));
    let load = run(Command::new(b.venv.join("bin/python")).args([
        "-c",
        &format!(
            "import torch, ctypes; print(ctypes.CDLL('{}').fakecodec_custom_op())",
            lib.display()
        ),
    ]));
    assert_eq!(load.trim(), "40");

    let st = b.cmd(&["status"], &[]);
    assert_eq!(st.code, 0, "{}{}", st.stdout, st.stderr);
    assert!(st.stdout.contains("fresh"), "{}", st.stdout);
    // Again: nothing to do.
    let again = b.cmd(&["fakecodec", "--index", &simple], &[]);
    ok(&again);
    assert!(again.stdout.contains("up to date"), "{}", again.stdout);
    // restore gives the venv back as it was.
    ok(&b.cmd(&["restore", "fakecodec"], &[]));
    assert_eq!(tree_state(&b.venv), before);
    nothing_compiled(&b);

    // Machine C: another torch. The wheel is passed over with the reason; it builds.
    let c = World::new(DECODE_WAV);
    change_torch(&c, "2.9.1", "2.9.2");
    let dry = c.cmd(&["fakecodec", "--index", &simple, "--dry-run"], &[]);
    ok(&dry);
    let reason = "built for torch 2.9.1, this venv has torch 2.9.2";
    assert!(
        dry.stdout.contains(&format!("rejected: {file}: {reason}")),
        "{}",
        dry.stdout
    );
    let out = c.cmd(&["fakecodec", "--index", &simple], &[]);
    ok(&out);
    assert!(
        out.stderr
            .contains(&format!("index: passed over {file}: {reason}")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("building from source"),
        "{}",
        out.stderr
    );
    assert!(c.cache.join("build").is_dir());
    assert!(c.logs().contains("configure"));
    assert_eq!(manifest(&c)["prebuilt"], serde_json::Value::Null);

    // Machine D: the same torch version, another build of it (git commit): the name fits,
    // rocbuild.json does not.
    let d = World::new(DECODE_WAV);
    let vp = d.site.join("torch/version.py");
    let text = std::fs::read_to_string(&vp).unwrap();
    std::fs::write(&vp, text.replace("0123456789abcdef", "fedcba9876543210")).unwrap();
    let out = d.cmd(&["fakecodec", "--index", &simple, "-q"], &[]);
    ok(&out);
    assert!(
        out.stderr.contains("built against another build of torch 2.9.1 (git 0123456789ab, this venv's is fedcba987654)"),
        "{}",
        out.stderr
    );
    assert!(d.cache.join("build").is_dir());
}

/// A copy of `wheel` in `dir` whose `lib` is replaced by `bytes` (RECORD updated).
fn tampered_wheel(wheel: &Path, dir: &Path, lib: &str, bytes: &[u8]) -> PathBuf {
    use base64::Engine;
    use sha2::Digest;
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join(wheel.file_name().unwrap());
    let mut z = zip::ZipArchive::new(std::fs::File::open(wheel).unwrap()).unwrap();
    let mut w = zip::ZipWriter::new(std::fs::File::create(&out).unwrap());
    let hash = format!(
        "sha256={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(bytes))
    );
    for i in 0..z.len() {
        let mut e = z.by_index(i).unwrap();
        let name = e.name().to_string();
        let mut data = Vec::new();
        e.read_to_end(&mut data).unwrap();
        if name == lib {
            data = bytes.to_vec();
        } else if name.ends_with("/RECORD") {
            let text = String::from_utf8(data).unwrap();
            data = text
                .lines()
                .map(|l| {
                    if l.starts_with(&format!("{lib},")) {
                        format!("{lib},{hash},{}\n", bytes.len())
                    } else {
                        format!("{l}\n")
                    }
                })
                .collect::<String>()
                .into_bytes();
        }
        w.start_file(
            name,
            zip::write::SimpleFileOptions::default().unix_permissions(0o755),
        )
        .unwrap();
        w.write_all(&data).unwrap();
    }
    w.finish().unwrap();
    out
}

#[test]
fn find_links_installs_from_a_directory_and_the_abi_check_refuses_a_wheel_torch_cannot_serve() {
    let a = World::new(DECODE_WAV);
    ok(&a.build(&[]));
    let dist = a.tmp.path().join("dist");
    let out = a.cmd(
        &["wheel", "fakecodec", "--out", dist.to_str().unwrap()],
        &[],
    );
    ok(&out);
    let wheel = PathBuf::from(out.stdout.trim());
    let major = a.ffmpeg_major();

    // A library that needs c10::MessageLogger's constructor, which the fake torch lacks
    // (what torchcodec 0.10 needs of torch 2.15).
    let src = a.tmp.path().join("bad.c");
    std::fs::write(
        &src,
        "extern void _ZN3c1013MessageLoggerC1EPKciib(void);\nint fakecodec_custom_op(void) { _ZN3c1013MessageLoggerC1EPKciib(); return 40; }\n",
    )
    .unwrap();
    let so = a.tmp.path().join("bad.so");
    run(Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src)
        .arg(format!("-L{}", a.site.join("torch/lib").display()))
        .arg("-lc10"));
    let lib = format!("fakecodec/libfakecodec_custom_ops{major}.so");
    let bad_dir = a.tmp.path().join("bad-wheels");
    tampered_wheel(&wheel, &bad_dir, &lib, &std::fs::read(&so).unwrap());

    // Machine B, from the directory of good wheels: installed, nothing compiled; and with no
    // C or C++ compiler on PATH (a Windows user without Build Tools), since a wheel that fits
    // needs none (only pkg-config, through which the venv's FFmpeg is found).
    let b = World::new(DECODE_WAV);
    // A `.pth` that imports a module at every start-up, as setuptools' distutils-precedence.pth
    // does: no Python rocbuild starts may leave its bytecode in the venv (`-I` ignores
    // PYTHONDONTWRITEBYTECODE, and so does an embeddable Python).
    std::fs::write(b.site.join("zz_startup.pth"), "import zz_startup\n").unwrap();
    std::fs::write(b.site.join("zz_startup.py"), "STARTED = True\n").unwrap();
    let before = tree_state(&b.venv);
    let bare = a.tmp.path().join("no-compilers");
    std::fs::create_dir_all(&bare).unwrap();
    let pkg_config = run(Command::new("sh").args(["-c", "command -v pkg-config"]));
    std::os::unix::fs::symlink(pkg_config.trim(), bare.join("pkg-config")).unwrap();
    let no_cc = [("PATH", bare.to_str().unwrap()), ("CC", ""), ("CXX", "")];
    let empty = a.tmp.path().join("no-wheels");
    std::fs::create_dir_all(&empty).unwrap();
    let out = b.cmd(
        &["fakecodec", "--find-links", empty.to_str().unwrap()],
        &no_cc,
    );
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let flat = out.stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("2 prerequisites of fakecodec missing"),
        "{flat}"
    );
    assert!(
        flat.contains("no wheel on the index fits, so fakecodec is built here"),
        "{flat}"
    );
    assert_eq!(tree_state(&b.venv), before);
    let out = b.cmd(
        &["fakecodec", "--find-links", dist.to_str().unwrap()],
        &no_cc,
    );
    ok(&out);
    assert!(
        out.stdout.contains("installed from the index, not built"),
        "{}",
        out.stdout
    );
    nothing_compiled(&b);
    assert_eq!(manifest(&b)["source_url"], wheel.display().to_string());
    let st = b.cmd(&["status"], &[]);
    assert_eq!(st.code, 0, "{}{}", st.stdout, st.stderr);
    ok(&b.cmd(&["restore", "fakecodec"], &[]));
    assert_eq!(tree_state(&b.venv), before);

    // The tampered wheel: refused by the ABI check before it touches the venv, then built.
    let out = b.cmd(
        &["fakecodec", "--find-links", bad_dir.to_str().unwrap()],
        &[],
    );
    ok(&out);
    let flat = out.stderr.replace('\n', " ");
    assert!(
        flat.contains(&format!(
            "passed over {}: ABI check: libfakecodec_custom_ops{major}.so needs 1 symbol that torch 2.9.1 does not export: c10::MessageLogger::MessageLogger(char const*, int, int, bool)",
            wheel.file_name().unwrap().to_string_lossy()
        )),
        "{}",
        out.stderr
    );
    assert!(b.cache.join("build").is_dir(), "built from source instead");
    let installed = std::fs::read(b.site.join(&lib)).unwrap();
    assert!(
        !installed.windows(10).any(|w| w == b"MessageLog"),
        "the tampered library was installed"
    );
}
