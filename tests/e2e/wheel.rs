//! `rocbuild wheel`: build once, pip install on another venv with the same torch.

use std::io::Read;
use std::process::Command;

use crate::common::*;

#[test]
fn the_wheel_installs_with_pip_into_a_fresh_venv_and_verifies() {
    let w = World::new(DECODE_WAV);
    ok(&w.build(&[]));
    let out_dir = w.tmp.path().join("dist");
    let out = w.cmd(
        &["wheel", "fakecodec", "--out", out_dir.to_str().unwrap()],
        &[],
    );
    ok(&out);
    let whl = std::path::PathBuf::from(out.stdout.trim());
    let name = whl.file_name().unwrap().to_string_lossy().into_owned();
    let major = w.ffmpeg_major();
    // The local version names the backend, FFmpeg and torch it was built for.
    let local = format!("cpu.ffmpeg{major}.torch2.9.1");
    assert!(
        name.starts_with(&format!("fakecodec-1.0.0+{local}-cp3"))
            && name.ends_with("-linux_x86_64.whl"),
        "{name}"
    );

    // A standard wheel: METADATA pins the exact torch, RECORD hashes every file.
    let mut z = zip::ZipArchive::new(std::fs::File::open(&whl).unwrap()).unwrap();
    let mut read = |p: &str| {
        let mut s = Vec::new();
        z.by_name(p)
            .unwrap_or_else(|e| panic!("{p}: {e}"))
            .read_to_end(&mut s)
            .unwrap();
        s
    };
    let di = format!("fakecodec-1.0.0+{local}.dist-info");
    let meta = String::from_utf8(read(&format!("{di}/METADATA"))).unwrap();
    assert!(
        meta.contains(&format!("\nVersion: 1.0.0+{local}\n")),
        "{meta}"
    );
    assert!(meta.contains("\nRequires-Dist: torch==2.9.1\n"), "{meta}");
    let wheel = String::from_utf8(read(&format!("{di}/WHEEL"))).unwrap();
    assert!(wheel.contains("Root-Is-Purelib: false"), "{wheel}");
    let record = String::from_utf8(read(&format!("{di}/RECORD"))).unwrap();
    for f in [
        "fakecodec/__init__.py".to_string(),
        format!("fakecodec/libfakecodec_core{major}.so"),
    ] {
        assert!(record.contains(&format!("{f},sha256=")), "{record}");
    }
    assert!(!record.contains("libfakecodec_core4.so"), "{record}");
    for line in record.lines().filter(|l| !l.ends_with(",,")) {
        use base64::Engine;
        use sha2::Digest;
        let mut it = line.rsplitn(3, ',');
        let (size, hash, path) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
        let bytes = read(path);
        let want =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(&bytes));
        assert_eq!(hash, format!("sha256={want}"), "{path}");
        assert_eq!(size, bytes.len().to_string());
    }

    // Another machine: a fresh venv with the same torch. pip installs it, it verifies.
    let other = w.tmp.path().join("other");
    let other_site = make_venv(&other);
    install_fake_torch(&other_site, "2.9.1");
    let py = other.join("bin/python");
    run(Command::new(&py)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-index",
        ])
        .arg(&whl));
    let verify = Command::new(&py)
        .args(["-c", DECODE_WAV])
        .env_remove("LD_LIBRARY_PATH")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(
        String::from_utf8_lossy(&verify.stdout).contains("decoded 16000 samples"),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    let ops = other_site.join(format!("fakecodec/libfakecodec_custom_ops{major}.so"));
    let load = Command::new(&py)
        .args([
            "-c",
            &format!(
                "import ctypes; print(ctypes.CDLL('{}').fakecodec_custom_op())",
                ops.display()
            ),
        ])
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&load.stdout).trim(),
        "40",
        "{}",
        String::from_utf8_lossy(&load.stderr)
    );

    // A venv with another torch: pip refuses (the pin is exact).
    let third = w.tmp.path().join("third");
    let third_site = make_venv(&third);
    install_fake_torch(&third_site, "2.9.2");
    let refused = Command::new(third.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-index",
        ])
        .arg(&whl)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("torch==2.9.1"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// torch's `__version__` (`2.9.1+cpu`) is not its distribution's version (`2.9.1`), as with
/// PyPI's CUDA torch (`2.15.0+cu132` / `2.15.0`): the wheel requires the distribution's version,
/// so pip installs it with its dependencies checked and `pip check` passes (issue 11, item 2).
#[test]
fn the_wheel_requires_torchs_distribution_version_and_pip_check_passes() {
    let w = World::new(DECODE_WAV);
    let vp = w.site.join("torch/version.py");
    let text = std::fs::read_to_string(&vp).unwrap();
    std::fs::write(&vp, text.replace("'2.9.1'", "'2.9.1+cpu'")).unwrap();
    ok(&w.build(&[]));
    let out_dir = w.tmp.path().join("dist");
    let out = w.cmd(
        &["wheel", "fakecodec", "--out", out_dir.to_str().unwrap()],
        &[],
    );
    ok(&out);
    assert!(
        out.stderr.contains("requires torch==2.9.1\n"),
        "{}",
        out.stderr
    );
    let whl = std::path::PathBuf::from(out.stdout.trim());
    let mut z = zip::ZipArchive::new(std::fs::File::open(&whl).unwrap()).unwrap();
    let mut read = |p: &str| {
        let mut s = String::new();
        z.by_name(p).unwrap().read_to_string(&mut s).unwrap();
        s
    };
    let di = format!(
        "fakecodec-1.0.0+cpu.ffmpeg{}.torch2.9.1.dist-info",
        w.ffmpeg_major()
    );
    let meta = read(&format!("{di}/METADATA"));
    assert!(meta.contains("\nRequires-Dist: torch==2.9.1\n"), "{meta}");
    assert!(!meta.contains("2.9.1+cpu"), "{meta}");
    // The exact torch build is kept beside it.
    let info: serde_json::Value =
        serde_json::from_str(&read(&format!("{di}/rocbuild.json"))).unwrap();
    assert_eq!(info["torch"], "2.9.1+cpu");

    let other = w.tmp.path().join("other");
    let other_site = make_venv(&other);
    install_fake_torch_as(&other_site, "2.9.1+cpu", "2.9.1");
    let py = other.join("bin/python");
    // No --no-deps: pip resolves the torch requirement against the installed torch.
    run(Command::new(&py)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-index",
        ])
        .arg(&whl));
    run(Command::new(&py).args(["-m", "pip", "check", "--disable-pip-version-check"]));
    let verify = Command::new(&py)
        .args(["-c", DECODE_WAV])
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
}

/// A torch changed since the build: the wheel would pin a torch the package was not built
/// for, so it is refused with what to do.
#[test]
fn the_wheel_is_refused_when_torch_changed_since_the_build() {
    let w = World::new(DECODE_WAV);
    ok(&w.build(&[]));
    let vp = w.site.join("torch/version.py");
    let text = std::fs::read_to_string(&vp).unwrap();
    std::fs::write(&vp, text.replace("'2.9.1'", "'2.9.2'")).unwrap();
    let out_dir = w.tmp.path().join("dist");
    let out = w.cmd(
        &["wheel", "fakecodec", "--out", out_dir.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("built against torch 2.9.1, but the venv now has torch 2.9.2"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("rocbuild rebuild fakecodec"),
        "{}",
        out.stderr
    );
    assert!(!out_dir.exists() || std::fs::read_dir(&out_dir).unwrap().next().is_none());
}
