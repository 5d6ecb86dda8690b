//! The real PyPI torch (a CUDA build) with the `lite` CMake package: no CUDA toolkit here.
//! `cargo xtask test` prepares the venv and sets ROCBUILD_TEST_TORCH_VENV.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

const VERIFY: &str = r#"import ctypes, os, sysconfig
lib = ctypes.CDLL(os.path.join(sysconfig.get_paths()["platlib"], "realext", "librealext.so"))
lib.realext_sum.restype = ctypes.c_double
assert lib.realext_sum() == 4.0, lib.realext_sum()
import torch
print("at::ones(4).sum() =", lib.realext_sum(), "with torch", torch.__version__)"#;

/// The venv holding the real PyPI torch, or None (SKIPPED said: `cargo xtask test` makes it).
pub(crate) fn real_torch_venv() -> Option<PathBuf> {
    rocbuild_testkit::skip::world(
        "ROCBUILD_TEST_TORCH_VENV",
        "the venv with the real PyPI torch, cache/venvs/torch-real",
    )
}

#[test]
fn builds_against_the_real_pypi_torch_with_the_lite_package() {
    let Some(venv) = real_torch_venv() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let (recipes, wheels) = realext_world(root);
    let wheels_s = wheels.display().to_string();
    let out = rocbuild(
        &[
            "realext",
            "--recipes",
            recipes.to_str().unwrap(),
            "--venv",
            venv.to_str().unwrap(),
            "--cache",
            root.join("cache").to_str().unwrap(),
            "-q",
        ],
        &[("PIP_NO_INDEX", "1"), ("PIP_FIND_LINKS", &wheels_s)],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("verified: at::ones(4).sum() = 4.0 with torch"),
        "{}",
        out.stdout
    );
    let site = site_packages(&venv);
    let info = rocbuild_native::read_elf(&site.join("realext/librealext.so")).unwrap();
    assert_eq!(info.runpath, ["$ORIGIN", "$ORIGIN/../torch/lib"]);
    // The CUDA torch's own CMake package would have demanded a CUDA toolkit: lite did not.
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(site.join(".rocbuild/realext.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["flavor"], "cuda");
    assert!(m["defines"]["Torch_DIR"]
        .as_str()
        .unwrap()
        .contains("torch-lite"));
}

/// The `realext` fixture: a git repository holding the extension, the wheel of its Python part,
/// and its recipe. Returns (recipes dir, wheels dir).
fn realext_world(root: &Path) -> (PathBuf, PathBuf) {
    // A git repository holding the extension.
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    for f in ["CMakeLists.txt", "realext.cpp"] {
        std::fs::copy(fixture_dir().join("realext").join(f), work.join(f)).unwrap();
    }
    let git = |args: &[&str]| {
        run(Command::new("git")
            .arg("-C")
            .arg(&work)
            .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
            .args(args))
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "realext"]);
    git(&["tag", "v1.0.0"]);
    let wheels = root.join("wheels");
    make_wheel_with(&wheels, "realext", "1.0.0", b"".to_vec());
    let recipes = root.join("recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    let recipe = format!(
        "[package]\nname = \"realext\"\ndistribution = \"realext\"\nimport-dir = \"realext\"\n\n[source]\ngit = \"{}\"\ntag = \"v{{version}}\"\n\n[[release]]\nversion = \"1.0.0\"\ntorch = \">=2.0\"\n\n[build]\ntorch-cmake = \"lite\"\ndefine = {{ CMAKE_BUILD_TYPE = \"Release\" }}\n\n[install]\nartifacts = [\"librealext*\"]\nfinds = [\"{{torch.lib}}\"]\n\n[verify]\npython = '''\n{VERIFY}\n'''\n",
        work.display()
    );
    std::fs::write(recipes.join("realext.toml"), recipe).unwrap();
    (recipes, wheels)
}

/// The PyPI wheel of torchcodec 0.17.0 for the real venv's Python, kept beside that venv
/// (`<venv>/../wheels`); fetched from PyPI by the venv's pip the first time.
pub(crate) fn pypi_torchcodec_wheel(real: &Path) -> PathBuf {
    pypi_wheel(real, "torchcodec", "0.17.0")
}

/// A venv of its own on the real venv's Python whose site-packages links to everything of the
/// real one (torch, the nvidia-* wheels), so a package can be installed into it without
/// touching the shared real venv (its pip, its rocbuild state and a realext built there are
/// left out; setuptools stays: torch requires it, and `pip check` checks that).
pub(crate) fn venv_over(real: &Path, venv: &Path) -> PathBuf {
    run(Command::new(real.join("bin/python"))
        .args(["-m", "venv", "--without-pip"])
        .arg(venv));
    let site = site_packages(venv);
    for e in std::fs::read_dir(site_packages(real)).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "__pycache__"
            || name == ".rocbuild"
            || name.starts_with("pip")
            || name.starts_with("realext")
        {
            continue;
        }
        std::os::unix::fs::symlink(e.path(), site.join(&name)).unwrap();
    }
    site
}

/// PyPI's torchcodec on PyPI's CUDA torch: its libraries need libcudart.so.13 and
/// libnvrtc.so.13, which no RUNPATH of theirs reaches; `import torch` has loaded them already,
/// through torch's own RPATH into the nvidia wheels. doctor must find them as the loader does
/// and must not call an error what its own load test shows loading (issue 11, item 6).
#[test]
fn doctor_does_not_contradict_its_load_test_on_the_pypi_cuda_torch() {
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
    assert!(site.join("torchcodec/libtorchcodec_core5.so").exists());
    let out = rocbuild(
        &["doctor", "torchcodec", "--venv", venv.to_str().unwrap()],
        &[],
    );
    let text = format!("{}\n{}", out.stdout, out.stderr);
    assert!(text.contains("torchcodec 0.17.0: loads"), "{text}");
    assert!(!text.contains("error"), "{text}");
    assert!(!text.contains("libcudart.so.13"), "{text}");
    assert_eq!(out.code, 0, "{text}");
    // In the JSON report the CUDA runtime is found, as already loaded by torch.
    let json = rocbuild(
        &[
            "doctor",
            "torchcodec",
            "--venv",
            venv.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect(&json.stdout);
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["severity"] != "error"),
        "{}",
        json.stdout
    );
}

/// torch's requirements the real venv lacks (it was made without triton, so `pip check` fails
/// on it as it is), installed once into `<workspace>/cache/real-torch-extras` and linked into
/// `site`: another machine with the same torch has them all.
fn complete_torch_requirements(real: &Path, site: &Path) {
    let real_site = site_packages(real);
    if rocbuild_probe::distribution_version(&real_site, "triton").is_some() {
        return;
    }
    let extras = fixture_dir().join("../../cache/real-torch-extras");
    if rocbuild_probe::distribution_version(&extras, "triton").is_none() {
        let meta = std::fs::read_to_string(
            std::fs::read_dir(&real_site)
                .unwrap()
                .flatten()
                .find(|e| e.file_name().to_string_lossy().starts_with("torch-"))
                .unwrap()
                .path()
                .join("METADATA"),
        )
        .unwrap();
        let req = meta
            .lines()
            .find_map(|l| l.strip_prefix("Requires-Dist: triton"))
            .map(|r| format!("triton{}", r.split(';').next().unwrap().trim()))
            .unwrap_or_else(|| "triton".into());
        run(Command::new(real.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-compile",
                "--only-binary=:all:",
                "--target",
            ])
            .arg(&extras)
            .arg(req));
    }
    for e in std::fs::read_dir(&extras).unwrap().flatten() {
        let name = e.file_name();
        if !site.join(&name).exists() && name != "bin" {
            std::os::unix::fs::symlink(e.path(), site.join(&name)).unwrap();
        }
    }
}

/// `rocbuild wheel` of a build against PyPI's CUDA torch (distribution `2.15.0`,
/// `torch.__version__` `2.15.0+cu132`): pip installs the wheel into another venv with the
/// same torch WITH its dependencies resolved, and `pip check` passes (issue 11, item 2).
#[test]
fn the_wheel_of_a_build_against_the_pypi_cuda_torch_installs_with_pip_and_passes_pip_check() {
    let Some(real) = real_torch_venv() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let (recipes, wheels) = realext_world(root);
    let venv = root.join("built");
    venv_over(&real, &venv);
    let wheels_s = wheels.display().to_string();
    let env = [("PIP_NO_INDEX", "1"), ("PIP_FIND_LINKS", wheels_s.as_str())];
    let cache = root.join("cache");
    let common = [
        "--recipes",
        recipes.to_str().unwrap(),
        "--venv",
        venv.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
    ];
    let mut args = vec!["realext", "-q"];
    args.extend_from_slice(&common);
    let out = rocbuild(&args, &env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let dist = root.join("dist");
    let mut args = vec!["wheel", "realext", "--out", dist.to_str().unwrap()];
    args.extend_from_slice(&common);
    let out = rocbuild(&args, &env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("requires torch==2.15.0\n"),
        "{}",
        out.stderr
    );
    let whl = PathBuf::from(out.stdout.trim());

    // Another venv with the same PyPI torch: pip resolves the wheel's requirements (no
    // --no-deps) and finds them satisfied.
    let other = root.join("other");
    let other_site = venv_over(&real, &other);
    complete_torch_requirements(&real, &other_site);
    let pip = |args: &[&str]| {
        Command::new(real.join("bin/python"))
            .args(["-m", "pip", "--disable-pip-version-check", "--python"])
            .arg(other.join("bin/python"))
            .args(args)
            .output()
            .unwrap()
    };
    let mut install = vec!["install", "--no-index", "--no-compile"];
    install.push(whl.to_str().unwrap());
    let o = pip(&install);
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let o = pip(&["check"]);
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(other_site.join("realext/librealext.so").exists());
    let v = Command::new(other.join("bin/python"))
        .args(["-c", VERIFY])
        .env_remove("LD_LIBRARY_PATH")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&v.stdout)
            .contains("at::ones(4).sum() = 4.0 with torch 2.15.0+cu132"),
        "{}\n{}",
        String::from_utf8_lossy(&v.stdout),
        String::from_utf8_lossy(&v.stderr)
    );
}

/// `deps` of the real PyPI CUDA torch's `libtorch_cuda.so`: the provider of a CUDA library is
/// the distribution pip installed it from (its dist-info RECORD lists the file) — `nvidia-cublas`
/// and `nvidia-cudnn-cu13`, which share the `nvidia` directory with a dozen others — not the
/// top directory; torch's own libraries are `torch`'s. Text and JSON agree.
#[test]
fn deps_names_the_distribution_that_installed_each_library() {
    let Some(venv) = real_torch_venv() else {
        return;
    };
    let lib = site_packages(&venv).join("torch/lib/libtorch_cuda.so");
    let out = rocbuild(&["deps", lib.to_str().unwrap(), "--json"], &[]);
    assert!(!out.stdout.is_empty(), "{}", out.stderr);
    let j: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let libs = j["files"][0]["libraries"].as_array().unwrap();
    let provider = |name: &str| -> &serde_json::Value {
        &libs
            .iter()
            .find(|l| l["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in {}", out.stdout))["provider"]
    };
    assert_eq!(provider("libcublas.so.13")["kind"], "package");
    assert_eq!(provider("libcublas.so.13")["name"], "nvidia-cublas");
    assert_eq!(provider("libcublas.so.13")["dir"], "nvidia");
    assert_eq!(provider("libcudnn.so.9")["name"], "nvidia-cudnn-cu13");
    assert_eq!(provider("libcudart.so.13")["name"], "nvidia-cuda-runtime");
    assert_eq!(provider("libc10.so")["name"], "torch");
    let text = rocbuild(&["deps", lib.to_str().unwrap()], &[]);
    assert!(
        text.stdout.contains("[package nvidia-cublas"),
        "{}",
        text.stdout
    );
    assert!(!text.stdout.contains("[package nvidia]"), "{}", text.stdout);
    assert!(!text.stdout.contains("[package nvidia;"), "{}", text.stdout);
}

/// The PyPI wheel `name==version` for the real venv's Python, kept beside that venv
/// (`<venv>/../wheels`); fetched from PyPI by the venv's pip the first time.
fn pypi_wheel(real: &Path, name: &str, version: &str) -> PathBuf {
    let dir = real.parent().unwrap().join("wheels");
    let prefix = format!("{name}-{version}-");
    let find = || {
        std::fs::read_dir(&dir).ok().and_then(|rd| {
            rd.flatten().map(|e| e.path()).find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&prefix)
            })
        })
    };
    if let Some(w) = find() {
        return w;
    }
    std::fs::create_dir_all(&dir).unwrap();
    run(Command::new(real.join("bin/python"))
        .args([
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
        ])
        .arg(format!("{name}=={version}"))
        .arg("-d")
        .arg(&dir));
    find().unwrap_or_else(|| panic!("pip downloaded no {name} {version} wheel"))
}

/// The package folder and the dist-info of `dist`, byte for byte.
fn package_bytes(
    site: &Path,
    dir: &str,
    dist: &str,
) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(site).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name != dir && !(name.starts_with(&format!("{dist}-")) && name.ends_with(".dist-info")) {
            continue;
        }
        for (rel, p) in rocbuild_venv::walk(&e.path()) {
            out.insert(format!("{name}/{rel}"), std::fs::read(p).unwrap());
        }
    }
    out
}

/// Issue 26's sequence on the real PyPI torch 2.15 and the real PyPI torchcodec 0.15.0 wheel:
/// rocbuild installs a build of the package (a small CMake project against the real torch
/// whose libraries carry TorchCodec's names), pip `--force-reinstall`s the wheel over it,
/// `status` says overwritten, `rebuild --if-stale` rebuilds, and `restore` gives back pip's
/// install exactly as pip left it: Python files, dist-info and RECORD, its own libraries —
/// `pip show` finds it, `pip check`-style RECORD hashes hold, and `import torchcodec` works.
/// Before ownership was recorded, the restore left only pip's orphaned libraries.
#[test]
fn restore_after_pip_overwrote_and_a_rebuild_gives_pips_torchcodec_back() {
    let Some(real) = real_torch_venv() else {
        return;
    };
    let wheel = pypi_wheel(&real, "torchcodec", "0.15.0");
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let venv = root.join("venv");
    let site = venv_over(&real, &venv);
    // The build: TorchCodec's library names for this machine's FFmpeg major, against torch.
    let major = run(Command::new("pkg-config").args(["--modversion", "libavutil"]));
    let major = major
        .split('.')
        .next()
        .unwrap()
        .trim()
        .parse::<u32>()
        .unwrap()
        - 52;
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::copy(
        fixture_dir().join("realext/realext.cpp"),
        work.join("realext.cpp"),
    )
    .unwrap();
    std::fs::write(
        work.join("CMakeLists.txt"),
        format!(
            "cmake_minimum_required(VERSION 3.18)\nproject(TcLike CXX)\nset(CMAKE_CXX_STANDARD 20)\nfind_package(Torch REQUIRED)\n\
             foreach(n core{major} custom_ops{major})\n  add_library(libtorchcodec_${{n}} SHARED realext.cpp)\n  \
             set_target_properties(libtorchcodec_${{n}} PROPERTIES PREFIX \"\")\n  target_link_libraries(libtorchcodec_${{n}} PRIVATE torch)\n  \
             install(TARGETS libtorchcodec_${{n}} LIBRARY DESTINATION torchcodec)\nendforeach()\n"
        ),
    )
    .unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &["commit", "-qm", "tc-like"],
        &["tag", "v0.15.0"],
    ] {
        run(Command::new("git")
            .arg("-C")
            .arg(&work)
            .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
            .args(args));
    }
    let recipes = root.join("recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    std::fs::write(
        recipes.join("tclike.toml"),
        format!(
            "[package]\nname = \"tclike\"\ndistribution = \"torchcodec\"\nimport-dir = \"torchcodec\"\n\n\
             [source]\ngit = \"{}\"\ntag = \"v{{version}}\"\n\n[[release]]\nversion = \"0.15.0\"\ntorch = \">=2.11\"\n\n\
             [build]\ntorch-cmake = \"lite\"\ndefine = {{ CMAKE_BUILD_TYPE = \"Release\" }}\n\n\
             [install]\nartifacts = [\"libtorchcodec_core*\", \"libtorchcodec_custom_ops*\"]\nfinds = [\"{{torch.lib}}\"]\n\
             park = [\"torchcodec/libtorchcodec_*\"]\n\n[verify]\npython = '''\nimport ctypes, os, sysconfig, torch\n\
             lib = ctypes.CDLL(os.path.join(sysconfig.get_paths()[\"platlib\"], \"torchcodec\", \"libtorchcodec_core{major}.so\"))\n\
             lib.realext_sum.restype = ctypes.c_double\nassert lib.realext_sum() == 4.0\n'''\n",
            work.display()
        ),
    )
    .unwrap();
    let wheels = wheel.parent().unwrap().display().to_string();
    let env = [("PIP_NO_INDEX", "1"), ("PIP_FIND_LINKS", wheels.as_str())];
    let cache = root.join("cache");
    let cmd = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend([
            "--venv",
            venv.to_str().unwrap(),
            "--recipes",
            recipes.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
        ]);
        rocbuild(&all, &env)
    };
    let pip = |args: &[&str]| {
        run(Command::new(real.join("bin/python"))
            .args(["-m", "pip", "--disable-pip-version-check", "--python"])
            .arg(venv.join("bin/python"))
            .args(args))
    };

    // The venv had no torchcodec: rocbuild builds, installs, verifies.
    ok(&cmd(&["tclike", "-q"]));
    // pip overwrites it with the real wheel.
    pip(&[
        "install",
        "--no-deps",
        "--force-reinstall",
        wheel.to_str().unwrap(),
    ]);
    let pips = package_bytes(&site, "torchcodec", "torchcodec");
    let st = cmd(&["status"]);
    assert_eq!(st.code, 1, "{}{}", st.stdout, st.stderr);
    assert!(st.stdout.contains("overwritten"), "{}", st.stdout);
    // rebuild --if-stale rebuilds (rocbuild takes the package over again).
    ok(&cmd(&["rebuild", "--if-stale"]));
    assert_ne!(package_bytes(&site, "torchcodec", "torchcodec"), pips);
    // restore: pip's install, exactly.
    let out = cmd(&["restore", "tclike"]);
    ok(&out);
    assert_eq!(
        package_bytes(&site, "torchcodec", "torchcodec"),
        pips,
        "restore did not give pip's torchcodec back:\n{}",
        out.stdout
    );
    assert!(!site.join(".rocbuild/tclike.json").exists());
    let show = pip(&["show", "-f", "torchcodec"]);
    assert!(show.contains("Version: 0.15.0"), "{show}");
    let import = Command::new(venv.join("bin/python"))
        .args(["-c", "import torchcodec; print(torchcodec.__version__)"])
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert!(
        import.status.success() && String::from_utf8_lossy(&import.stdout).starts_with("0.15.0"),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
}

/// PyPI's torch (a CUDA 13 build) with TorchCodec 0.12+: the index's own wheel loads with it
/// (stable ABI, CUDA 13), so `rocbuild torchcodec` says so with the pip line and builds nothing
/// (nothing fetched, the venv untouched); `--dry-run --no-binary` plans the build anyway.
#[test]
fn no_build_when_the_stock_wheel_works_with_the_real_torch() {
    let Some(venv) = real_torch_venv() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let site_before = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .count();
    let args = [
        "torchcodec",
        "--venv",
        venv.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
    ];
    let out = rocbuild(&args, &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("no build needed"), "{}", out.stdout);
    assert!(
        out.stdout.contains("-m pip install torchcodec=="),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("rocbuild torchcodec --no-binary"),
        "{}",
        out.stdout
    );
    assert!(!cache.join("git").exists() && !cache.join("tools").exists());
    assert_eq!(
        std::fs::read_dir(venv.join("lib"))
            .unwrap()
            .flatten()
            .count(),
        site_before
    );
    let mut plan_args = args.to_vec();
    plan_args.extend(["--dry-run", "--no-binary"]);
    let plan = rocbuild(&plan_args, &[]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(
        plan.stdout.contains("stock wheel: would work")
            && plan.stdout.contains("built anyway (--no-binary)"),
        "{}",
        plan.stdout
    );
    assert!(plan.stdout.contains("fetch the source"), "{}", plan.stdout);
}

/// A real PNG of `w`×`h` RGB pixels `px(x, y)`, written with zlib (the format, no library).
fn png_bytes(w: u32, h: u32, px: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
    let py = "import sys, zlib, struct\n\
              w, h = int(sys.argv[1]), int(sys.argv[2])\n\
              raw = sys.stdin.buffer.read()\n\
              rows = b''.join(b'\\x00' + raw[y*w*3:(y+1)*w*3] for y in range(h))\n\
              def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)\n\
              sys.stdout.buffer.write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b''))";
    let mut raw = Vec::new();
    for y in 0..h {
        for x in 0..w {
            raw.extend(px(x, y));
        }
    }
    let mut child = Command::new("python3")
        .args(["-c", py, &w.to_string(), &h.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&raw).unwrap();
    child.wait_with_output().unwrap().stdout
}

/// TorchCodec 0.16 builds its image decoders: with Debian's libjpeg-turbo and libpng found,
/// `decode_jpeg` and `decode_png` of the rebuilt package decode a real JPEG (made by cjpeg
/// from a PPM) and a real PNG to the pixels they hold. Needs the TorchCodec source as a git
/// mirror (local only: about 3 minutes).
#[test]
fn the_real_torchcodec_0_16_decodes_a_real_jpeg_and_png() {
    let Some(mirror) = std::env::var_os("ROCBUILD_TEST_MIRROR")
        .map(PathBuf::from)
        .filter(|m| m.join("github.com/meta-pytorch/torchcodec.git").is_dir())
    else {
        rocbuild_testkit::skip::skipped("no torchcodec mirror under $ROCBUILD_TEST_MIRROR");
        return;
    };
    let Some(real) = real_torch_venv() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    venv_over(&real, &venv);
    let (w, h) = (32u32, 16u32);
    let px = |x: u32, y: u32| [(x * 8) as u8, (y * 16) as u8, 200];
    let png = tmp.path().join("img.png");
    std::fs::write(&png, png_bytes(w, h, px)).unwrap();
    let ppm = tmp.path().join("img.ppm");
    let mut data = format!("P6\n{w} {h}\n255\n").into_bytes();
    for y in 0..h {
        for x in 0..w {
            data.extend(px(x, y));
        }
    }
    std::fs::write(&ppm, data).unwrap();
    let jpg = tmp.path().join("img.jpg");
    run(Command::new("cjpeg")
        .args(["-quality", "95", "-outfile"])
        .arg(&jpg)
        .arg(&ppm));
    let out = rocbuild(
        &[
            "torchcodec",
            "--version",
            "0.16.0",
            "--no-binary",
            "--venv",
            venv.to_str().unwrap(),
            "--cache",
            tmp.path().join("cache").to_str().unwrap(),
        ],
        &[("ROCBUILD_MIRROR", mirror.to_str().unwrap())],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let code = format!(
        "import torch\n\
         from torchcodec.decoders import decode_jpeg, decode_png\n\
         p = decode_png({png:?}); j = decode_jpeg({jpg:?})\n\
         want = torch.tensor([[[x * 8 for x in range({w})] for y in range({h})], [[y * 16 for x in range({w})] for y in range({h})], [[200] * {w} for y in range({h})]], dtype=torch.uint8)\n\
         assert p.shape == (3, {h}, {w}) and torch.equal(p, want), p\n\
         err = (j.int() - want.int()).abs().float().mean().item()\n\
         assert j.shape == (3, {h}, {w}) and err < 4, err\n\
         print('png exact, jpeg mean error', round(err, 2))",
        png = png.display().to_string(),
        jpg = jpg.display().to_string(),
    );
    let o = Command::new(venv.join("bin/python"))
        .args(["-c", &code])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    assert!(text.contains("png exact, jpeg mean error"), "{text}");
}

/// The faster-whisper failure on a CUDA 13 torch: PyPI's CTranslate2 4.8.5 (a CUDA 12 build)
/// loads `libcublas.so.12` by name at its first CUDA call, while the venv holds torch's CUDA 13
/// cuBLAS (`nvidia/cu13/lib/libcublas.so.13`). `import ctranslate2` works, so a load test alone
/// says all is well; doctor reads the name from the library and searches for it as the loader
/// would, says which cuBLAS the venv has instead, and what to do (issue 41, point 3). A
/// `libcublas.so.12` on LD_LIBRARY_PATH (a library built here under that name) ends it.
#[test]
fn doctor_names_the_cuda_library_ctranslate2_loads_by_name_and_torch_lacks() {
    let Some(real) = real_torch_venv() else {
        return;
    };
    let wheel = pypi_wheel(&real, "ctranslate2", "4.8.5");
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let site = venv_over(&real, &venv);
    run(Command::new(real.join("bin/python"))
        .args(["-m", "pip", "--python"])
        .arg(venv.join("bin/python"))
        .args(["install", "-q", "--no-deps", "--no-index", "--no-compile"])
        .arg(&wheel));
    let doctor = |env: &[(&str, &str)]| {
        let out = rocbuild(
            &[
                "doctor",
                "ctranslate2",
                "--venv",
                venv.to_str().unwrap(),
                "--json",
            ],
            env,
        );
        findings_about(&out, "at its first CUDA call")
    };
    let found = doctor(&[("LD_LIBRARY_PATH", "")]);
    assert_eq!(found.len(), 1, "{found:?}");
    let f = &found[0];
    assert_eq!(
        f["what"],
        "ctranslate2 loads libcublas.so.12 at its first CUDA call, and the loader finds none"
    );
    // No NVIDIA driver here: a warning, not an error (the CPU path works).
    assert_eq!(f["severity"], "warning", "{f}");
    let details = f["details"].to_string();
    assert!(details.contains("libctranslate2-"), "{details}");
    let cu13 = site.join("nvidia/cu13/lib/libcublas.so.13");
    assert!(cu13.exists());
    assert!(details.contains(cu13.to_str().unwrap()), "{details}");
    let fix = f["fix"].as_str().unwrap();
    assert!(fix.contains("pip install nvidia-cublas-cu12"), "{fix}");
    assert!(
        fix.contains("for the CUDA this venv has (CUDA 13): `rocbuild ctranslate2 --backend cuda`"),
        "{fix}"
    );
    // The text report says the same.
    let text = rocbuild(
        &["doctor", "ctranslate2", "--venv", venv.to_str().unwrap()],
        &[("LD_LIBRARY_PATH", "")],
    );
    assert!(
        text.stdout.contains("ctranslate2 4.8.5: loads"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("loads libcublas.so.12 at its first CUDA call"),
        "{}",
        text.stdout
    );

    // With a GPU (8.6) and a driver for CUDA 12.4: the missing cuBLAS is an error, and torch's
    // CUDA 13 runtime needs a newer driver while CTranslate2's CUDA 12 runs on this one. No GPU
    // can be had here: an `nvidia-smi` script answers as the real one does (its banner, and
    // `--query-gpu=compute_cap`).
    let old_driver = nvidia_smi_on_path(tmp.path(), "12.4", "550.54.14");
    let out = rocbuild(
        &[
            "doctor",
            "ctranslate2",
            "--venv",
            venv.to_str().unwrap(),
            "--json",
        ],
        &[("LD_LIBRARY_PATH", ""), ("PATH", &old_driver)],
    );
    let by_name = findings_about(&out, "at its first CUDA call");
    assert_eq!(by_name.len(), 1, "{}", out.stdout);
    assert_eq!(by_name[0]["severity"], "error", "{}", by_name[0]);
    let driver = findings_about(&out, "the NVIDIA driver");
    let driver = driver.first().unwrap_or_else(|| panic!("{}", out.stdout));
    assert_eq!(
        driver["what"],
        "the NVIDIA driver 550.54.14 runs CUDA up to 12.4: torch 2.15.0+cu132's CUDA 13 needs a newer driver"
    );
    assert_eq!(driver["severity"], "error");
    assert!(
        driver["details"]
            .to_string()
            .contains("loads libcublas.so.12"),
        "{driver}"
    );
    assert!(out.code != 0);
    let new_driver = nvidia_smi_on_path(tmp.path(), "13.0", "580.82.07");
    let out = rocbuild(
        &["doctor", "ctranslate2", "--venv", venv.to_str().unwrap()],
        &[("LD_LIBRARY_PATH", ""), ("PATH", &new_driver)],
    );
    assert!(!out.stdout.contains("the NVIDIA driver"), "{}", out.stdout);

    // A libcublas.so.12 where LD_LIBRARY_PATH points: found as the loader would find it.
    let dir = tmp.path().join("cublas12");
    let src = tmp.path().join("cublas.c");
    std::fs::write(
        &src,
        "int cublasCreate_v2(void **h) { (void)h; return 0; }\n",
    )
    .unwrap();
    rocbuild_testkit::native::shared_library(
        "cc",
        &src,
        &dir.join("libcublas.so.12"),
        &["-Wl,-soname,libcublas.so.12"],
    );
    assert!(doctor(&[("LD_LIBRARY_PATH", dir.to_str().unwrap())]).is_empty());
}

/// PATH with an `nvidia-smi` first that answers as the real one does for a GPU of compute
/// capability 8.6 and this driver: its banner, and `--query-gpu=compute_cap`. No GPU can be had
/// here; what doctor reads of the real tool's answers is its format.
fn nvidia_smi_on_path(dir: &Path, cuda: &str, driver: &str) -> String {
    let bin = dir.join(format!("smi-{cuda}"));
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("nvidia-smi");
    write_executable(
        &script,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  --query-gpu=compute_cap) echo 8.6 ;;\n  *) echo '| NVIDIA-SMI {driver}    Driver Version: {driver}    CUDA Version: {cuda}     |' ;;\nesac\n"
        ),
    );
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}
