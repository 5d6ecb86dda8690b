use std::process::Command;

use crate::common::*;

#[test]
fn builds_installs_and_verifies_a_torchcodec_shaped_project() {
    let w = World::new(DECODE_WAV);
    let out = w.build(&[]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stdout.contains("fakecodec 1.0.0 installed"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("verified: decoded 16000 samples with FFmpeg"),
        "{}",
        out.stdout
    );

    // The installed files: one core and custom_ops per FFmpeg major found, the extension.
    let dest = w.site.join("fakecodec");
    let major = String::from_utf8(
        Command::new("pkg-config")
            .args(["--modversion", "libavutil"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let major: u32 = major
        .split('.')
        .next()
        .unwrap()
        .trim()
        .parse::<u32>()
        .unwrap()
        - 52;
    let core = dest.join(format!("libfakecodec_core{major}.so"));
    let ops = dest.join(format!("libfakecodec_custom_ops{major}.so"));
    assert!(core.exists() && ops.exists());
    let ext: Vec<_> = std::fs::read_dir(&dest)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("_fakecodec_ext")
        })
        .collect();
    assert_eq!(ext.len(), 1);
    // The wheel's prebuilt library of another FFmpeg major is not installed, nor in RECORD.
    assert!(!dest.join("libfakecodec_core4.so").exists());
    let record = std::fs::read_to_string(w.site.join("fakecodec-1.0.0.dist-info/RECORD")).unwrap();
    assert!(!record.contains("libfakecodec_core4.so"), "{record}");
    assert!(
        record.contains(&format!("fakecodec/libfakecodec_core{major}.so,sha256=")),
        "{record}"
    );

    // RUNPATH: siblings, then torch/lib relative to $ORIGIN; Debian's FFmpeg is in the default path.
    for lib in [&core, &ops, &ext[0].path()] {
        let info = rocbuild_native::read_elf(lib).unwrap();
        assert_eq!(
            info.runpath,
            ["$ORIGIN", "$ORIGIN/../torch/lib"],
            "{}",
            lib.display()
        );
        assert!(info.rpath.is_empty());
    }

    // They load in a fresh Python without LD_LIBRARY_PATH and without importing torch first.
    let py = Command::new(w.venv.join("bin/python"))
        .args([
            "-c",
            &format!(
                "import ctypes; l = ctypes.CDLL('{}'); print(l.fakecodec_custom_op())",
                ops.display()
            ),
        ])
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&py.stdout).trim(), "40");

    // The manifest says what it was built against, and the hash of each file.
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(w.site.join(".rocbuild/fakecodec.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["version"], "1.0.0");
    assert_eq!(m["source_commit"], w.commit.as_str());
    assert_eq!(m["torch_version"], "2.9.1");
    assert_eq!(m["torch_git"], "0123456789abcdef0123456789abcdef01234567");
    assert_eq!(m["flavor"], "cpu");
    assert_eq!(m["ffmpeg_major"], major);
    assert_eq!(m["defines"]["CMAKE_BUILD_TYPE"], "Release");
    let files = m["files"].as_array().unwrap();
    assert_eq!(files.len(), 3);
    for f in files {
        let p = w.site.join(f["path"].as_str().unwrap());
        let sha = format!(
            "{:x}",
            <sha2::Sha256 as sha2::Digest>::digest(std::fs::read(&p).unwrap())
        );
        assert_eq!(f["sha256"], sha.as_str(), "{}", p.display());
    }
    assert!(m["parked"].as_array().unwrap().is_empty());
    assert!(!w.site.join(".rocbuild/journal.json").exists());
    assert!(!w.site.join(".rocbuild/txn").exists());

    // A rerun with nothing changed does nothing.
    let before = tree_state(&w.venv);
    let again = w.build(&[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stdout.contains("fakecodec 1.0.0 up to date"),
        "{}",
        again.stdout
    );
    assert_eq!(tree_state(&w.venv), before);

    // pip overwrote a library: the rerun notices and reinstalls it.
    std::fs::write(&core, b"overwritten").unwrap();
    let fixed = w.build(&[]);
    assert_eq!(fixed.code, 0, "{}", fixed.stderr);
    assert!(fixed.stdout.contains("installed"), "{}", fixed.stdout);
    assert_eq!(
        rocbuild_native::read_elf(&core).unwrap().runpath,
        ["$ORIGIN", "$ORIGIN/../torch/lib"]
    );
}

/// pip fetches the Python part into the staging area while CMake builds: here the build
/// waits for pip's RECORD to appear there, which it would never see if pip ran after it.
#[test]
fn pip_fetches_the_python_part_while_cmake_builds() {
    let w = World::new(DECODE_WAV);
    let record = w
        .site
        .join(".rocbuild/txn/pip/fakecodec-1.0.0.dist-info/RECORD");
    let define = format!("FAKECODEC_WAIT_FOR={}", record.display());
    let out = w.build(&["-D", &define]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stdout.contains("fakecodec 1.0.0 installed"),
        "{}",
        out.stdout
    );
    // Installed from the stage, which is gone; the wheel's Python file is in place.
    assert!(!w.site.join(".rocbuild/txn").exists());
    assert!(w.site.join("fakecodec/__init__.py").is_file());
    let log = w.logs();
    assert!(
        log.contains("==> pip install (python part) (ran in the background)"),
        "{log}"
    );
}

/// `import torch` is checked beside the fetch and the build; a torch that does not import
/// stops the build as soon as that is known (here a build step that would wait 60 s).
#[test]
fn a_torch_that_does_not_import_stops_the_build() {
    let w = World::new(DECODE_WAV);
    std::fs::write(
        w.site.join("torch/__init__.py"),
        "raise ImportError('libc10.so: cannot open shared object file')\n",
    )
    .unwrap();
    let before = tree_state(&w.venv);
    let define = format!(
        "FAKECODEC_WAIT_FOR={}",
        w.tmp.path().join("never").display()
    );
    let out = w.build(&["-D", &define]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot be imported") && out.stderr.contains("libc10.so"),
        "{}",
        out.stderr
    );
    assert_eq!(tree_state(&w.venv), before, "the venv changed");
    let log = w.logs();
    assert!(log.contains("<== build: stopped: torch 2.9.1"), "{log}");
    assert!(!log.contains("never appeared"), "{log}");
}

#[test]
fn a_verification_failure_leaves_the_venv_byte_identical() {
    // First a good install, so the failing run replaces files and parks nothing new.
    let w = World::new(DECODE_WAV);
    assert_eq!(w.build(&[]).code, 0);
    // A recipe change (the verify snippet fails) forces a reinstall that must roll back.
    let failing = fixture_recipe(
        w.repos.join("fakecodec.git").to_str().unwrap(),
        true,
        "import fakecodec\nraise SystemExit('decoded 0 samples: expected 16000')",
    );
    std::fs::write(w.recipes.join("fakecodec.toml"), failing).unwrap();
    let before = tree_state(&w.venv);
    let out = w.build(&[]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stderr
            .contains("verification failed, the venv was rolled back"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("decoded 0 samples: expected 16000"),
        "{}",
        out.stderr
    );
    assert_eq!(tree_state(&w.venv), before);

    // From a venv that never had the package (pip's part rolled back too): the catalogue's
    // `verification_failure` (tests/e2e/catalogue.rs).
}

/// A no-op rerun says only that the package is up to date: no stray `build` line (issue 11,
/// item 9). The first run says how many build steps ninja ran.
#[test]
fn a_no_op_rerun_prints_no_stray_build_line() {
    let w = World::new(DECODE_WAV);
    let first = w.cmd(&["fakecodec"], &[]);
    ok(&first);
    assert!(
        first
            .stderr
            .lines()
            .any(|l| l.starts_with("build: ") && l.ends_with(" steps")),
        "{}",
        first.stderr
    );
    let again = w.cmd(&["fakecodec"], &[]);
    ok(&again);
    assert!(
        again.stdout.contains("fakecodec 1.0.0 up to date"),
        "{}",
        again.stdout
    );
    let lines: Vec<&str> = again
        .stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert!(
        !lines.iter().any(|l| l.starts_with("build")),
        "a stray build line on a no-op rerun:\n{}",
        again.stderr
    );
}

/// The no-op fast path (issue 15, target 4): a rerun that nothing can have changed starts no
/// process at all — no Python probe, no `cmake --build` — and anything the last run depended
/// on that changes sends the next run down the full path: torch rebuilt in place, an
/// installed library replaced with its size and mtime kept, a tool added to a `PATH`
/// directory.
#[test]
fn a_no_op_rerun_starts_nothing_and_a_change_it_depended_on_takes_the_full_path() {
    let w = World::new(DECODE_WAV);
    // Every cmake rocbuild starts (probe, configure, build) goes through this wrapper.
    let tools = w.tmp.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    let calls = w.tmp.path().join("cmake-calls");
    let cmake = which("cmake");
    let wrapper = tools.join("cmake");
    write_executable(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            calls.display(),
            cmake.display()
        ),
    );
    let path = format!(
        "{}:{}",
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = || w.cmd(&["fakecodec"], &[("PATH", path.as_str())]);
    let count = || {
        std::fs::read_to_string(&calls)
            .unwrap_or_default()
            .lines()
            .count()
    };

    let first = run();
    ok(&first);
    assert!(
        first.stdout.contains("fakecodec 1.0.0 installed"),
        "{}",
        first.stdout
    );
    assert!(
        count() > 0,
        "the first build did not go through the wrapper"
    );

    // Nothing changed: no process started, the venv as it was.
    let before = (count(), tree_state(&w.venv));
    let again = run();
    ok(&again);
    assert!(
        again.stdout.contains("fakecodec 1.0.0 up to date"),
        "{}",
        again.stdout
    );
    assert_eq!(
        (count(), tree_state(&w.venv)),
        before,
        "the no-op rerun started cmake or changed the venv"
    );

    // torch rebuilt in place (same version, another git commit; its directory's mtime kept).
    let version_py = w.site.join("torch/version.py");
    let text = std::fs::read_to_string(&version_py).unwrap();
    std::fs::write(
        &version_py,
        text.replace(
            "0123456789abcdef0123456789abcdef01234567",
            "fedcba9876543210fedcba9876543210fedcba98",
        ),
    )
    .unwrap();
    let n = count();
    let rebuilt = run();
    ok(&rebuilt);
    assert!(
        rebuilt.stdout.contains("fakecodec 1.0.0 installed"),
        "{}",
        rebuilt.stdout
    );
    assert!(count() > n, "the rerun after torch changed did not build");
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(w.site.join(".rocbuild/fakecodec.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["torch_git"], "fedcba9876543210fedcba9876543210fedcba98");
    let n = count();
    ok(&run());
    assert_eq!(count(), n, "the no-op after the rebuild started cmake");

    // An installed library replaced by one of the same size, its mtime set back: the full
    // path notices (inode and ctime) and reinstalls the built one.
    let core = std::fs::read_dir(w.site.join("fakecodec"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("libfakecodec_core")
        })
        .unwrap();
    let good = std::fs::read(&core).unwrap();
    let mtime = std::fs::metadata(&core).unwrap().modified().unwrap();
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    let tmp = core.with_extension("pip-tmp");
    std::fs::write(&tmp, &bad).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&tmp)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    std::fs::rename(&tmp, &core).unwrap();
    let fixed = run();
    ok(&fixed);
    assert!(
        fixed.stdout.contains("fakecodec 1.0.0 installed"),
        "{}",
        fixed.stdout
    );
    assert_eq!(std::fs::read(&core).unwrap(), good);

    // A tool put into a PATH directory may be found first now: the full path probes again
    // (and finds nothing to do).
    std::fs::write(tools.join("ninja-new"), "").unwrap();
    let n = count();
    let probed = run();
    ok(&probed);
    assert!(
        probed.stdout.contains("fakecodec 1.0.0 up to date"),
        "{}",
        probed.stdout
    );
    assert!(
        count() > n,
        "a changed PATH directory did not send the rerun down the full path"
    );
}

fn which(tool: &str) -> std::path::PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{tool} is not on PATH"))
}

/// torch outside the venv, in a site directory the venv's Python also reads (a venv made with
/// `--system-site-packages` over a system torch: Debian's `python3-torch`, a ROCm or Jetson
/// image's; here a `.pth` names it, as `conda-pack` and shared installs do): the probe finds
/// it where the Python does, the build links against it and verifies, and doctor names it. The
/// venv's own site-packages has no torch at all.
#[test]
fn a_torch_in_a_site_the_venvs_python_shares_is_the_one_built_against() {
    let w = World::new(DECODE_WAV);
    let shared = w.tmp.path().join("system/lib/python3/dist-packages");
    std::fs::create_dir_all(&shared).unwrap();
    for e in std::fs::read_dir(&w.site).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "torch" || name.starts_with("torch-") {
            std::fs::rename(e.path(), shared.join(&name)).unwrap();
        }
    }
    assert!(!w.site.join("torch").exists());
    std::fs::write(
        w.site.join("system-site.pth"),
        format!("{}\n", shared.display()),
    )
    .unwrap();
    let out = w.build(&[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("verified"), "{}", out.stdout);
    let doctor = w.cmd(&["doctor", "fakecodec"], &[]);
    assert!(
        doctor.stdout.contains("torch 2.9.1"),
        "{}\n{}",
        doctor.stdout,
        doctor.stderr
    );
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(w.site.join(".rocbuild/fakecodec.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["torch_version"], "2.9.1", "{m}");
    let status = w.cmd(&["status"], &[]);
    assert!(
        status.stdout.contains("fakecodec 1.0.0: fresh"),
        "{}\n{}",
        status.stdout,
        status.stderr
    );
}
