//! A CTranslate2-shaped project end to end: a versioned C++ library through CMake, then the
//! Python package built from `python/` against it (setuptools + pybind11, found through an
//! env var), installed over a PyPI-style wheel, imported in a fresh Python with no
//! LD_LIBRARY_PATH.

use std::process::Command;

use crate::common::*;

fn recipe(git: &str) -> String {
    format!(
        r#"[package]
name = "faketrans"
distribution = "faketrans"
import-dir = "faketrans"
backends = ["cpu", "rocm"]

[source]
git = "{git}"
tag = "v{{version}}"

[[release]]
version = "4.8.1"
torch = ">=0"

[needs]
torch = false
python-build = ["setuptools>=64", "wheel", "pybind11>=2.11"]

[build.define]
CMAKE_BUILD_TYPE = "Release"
FAKETRANS_BACKEND = "{{backend}}"

[python]
from = "source"
dir = "python"
env = {{ FAKETRANS_ROOT = "{{prefix}}" }}

[install]
artifacts = ["libfaketrans.so*"]
python-libs = ["faketrans/_ext*"]
park = ["faketrans.libs/*"]

[verify]
python = '''
import faketrans
assert faketrans.translate("abc") == "cba"
print("translated with the", faketrans.backend(), "backend")
'''
"#
    )
}

/// The fixture's git repository under `root/repos` and a recipes directory holding its
/// recipe, with `extra` appended.
fn fixture_recipes(root: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let repos = root.join("repos");
    std::fs::create_dir_all(&repos).unwrap();
    make_git_repo(
        &repos,
        "faketrans",
        &fixture_dir().join("faketrans"),
        "v4.8.1",
    );
    let recipes = root.join("recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    std::fs::write(
        recipes.join("faketrans.toml"),
        recipe(repos.join("faketrans.git").to_str().unwrap()) + extra,
    )
    .unwrap();
    recipes
}

#[test]
fn builds_the_library_then_the_python_package_against_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let venv = root.join("venv");
    let site = make_venv(&venv);
    // What `pip install faketrans` from an index would have left: a prebuilt extension and
    // auditwheel's bundled copy of the library, both for another machine.
    let wheels = root.join("wheels");
    let ext_name = "faketrans/_ext.cpython-311-x86_64-linux-gnu.so";
    make_wheel_files(
        &wheels,
        "faketrans",
        "4.8.1",
        &[
            (
                "faketrans/__init__.py",
                b"raise ImportError('the prebuilt wheel')\n",
            ),
            (ext_name, b"not for this machine"),
            (
                "faketrans.libs/libfaketrans-0123abcd.so.4.8.1",
                b"bundled by auditwheel",
            ),
        ],
    );
    run(Command::new(venv.join("bin/python")).args([
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--find-links",
        wheels.to_str().unwrap(),
        "faketrans==4.8.1",
    ]));
    let bundled =
        std::fs::read(site.join("faketrans.libs/libfaketrans-0123abcd.so.4.8.1")).unwrap();

    let recipes = fixture_recipes(root, "");
    let cache = root.join("cache");
    let args = [
        "faketrans",
        "--recipes",
        recipes.to_str().unwrap(),
        "--venv",
        venv.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
        "-q",
    ];
    let out = rocbuild(&args, &[]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stdout.contains("translated with the cpu backend"),
        "{}",
        out.stdout
    );

    // One library, under its SONAME (what _ext asks for), not the .so/.so.4.8.1 symlink set.
    let dest = site.join("faketrans");
    let libs: Vec<String> = std::fs::read_dir(&dest)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("libfaketrans"))
        .collect();
    assert_eq!(libs, ["libfaketrans.so.4"]);
    let lib = dest.join("libfaketrans.so.4");
    assert!(!std::fs::symlink_metadata(&lib).unwrap().is_symlink());
    // The rebuilt extension replaced the prebuilt one, and finds the library beside it.
    let ext = site.join(ext_name);
    assert_ne!(std::fs::read(&ext).unwrap(), b"not for this machine");
    let info = rocbuild_native::read_elf(&ext).unwrap();
    assert!(
        info.needed.contains(&"libfaketrans.so.4".to_string()),
        "{info:?}"
    );
    assert_eq!(info.runpath, ["$ORIGIN"]);
    // auditwheel's copy is parked in the backup, byte for byte, and out of RECORD.
    assert!(!site
        .join("faketrans.libs")
        .join("libfaketrans-0123abcd.so.4.8.1")
        .exists());
    let backup_dir = site.join(".rocbuild/backup");
    let backup = tree_state(&backup_dir);
    assert!(
        backup
            .keys()
            .filter(|k| !k.ends_with('/'))
            .any(|k| std::fs::read(backup_dir.join(k)).unwrap() == bundled),
        "{backup:?}"
    );
    let record = std::fs::read_to_string(site.join("faketrans-4.8.1.dist-info/RECORD")).unwrap();
    assert!(!record.contains("faketrans.libs/"), "{record}");
    assert!(
        record.contains("faketrans/libfaketrans.so.4,sha256="),
        "{record}"
    );

    // A fresh interpreter, no LD_LIBRARY_PATH: the package imports and runs.
    let py = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import faketrans; print(faketrans.translate('rocbuild'), faketrans.backend())",
        ])
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&py.stdout).trim(), "dliubcor cpu");

    // Nothing changed: the rerun rebuilds nothing and leaves the venv as it is.
    let before = tree_state(&venv);
    let again = rocbuild(&[&args[..], &["--json"]].concat(), &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let outcome: serde_json::Value = serde_json::from_str(&again.stdout).unwrap();
    assert_eq!(outcome["changed"], false, "{}", again.stdout);
    assert_eq!(tree_state(&venv), before);
}

/// The recipe names the wheels' compiler and this machine's default is another one: with that
/// compiler's versioned drivers on PATH (here gcc-99/g++-99, wrappers of the real GCC that log
/// each call), both the CMake library and the Python part's extension are compiled by them,
/// and the plan says so; with CC and CXX set, the user's compilers build it and the plan only
/// names the drivers found.
#[test]
fn the_wheels_compiler_found_on_path_builds_both_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let venv = root.join("venv");
    make_venv(&venv);
    let recipes = fixture_recipes(
        root,
        "\n[wheel-compiler]\nlinux = \"gcc 99\"\nbackends = [\"cpu\"]\ndiffers = \"its sums part from the wheel's\"\n",
    );
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = root.join("calls.log");
    for (name, real) in [("gcc-99", "gcc"), ("g++-99", "g++")] {
        let p = bin.join(name);
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{name} (Test 99.1.0-1) 99.1.0'; exit 0; fi\n\
                 echo \"{name} $*\" >> '{}'\nexec {real} \"$@\"\n",
                log.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let cache = root.join("cache");
    let args = [
        "faketrans",
        "--recipes",
        recipes.to_str().unwrap(),
        "--venv",
        venv.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
    ];
    let gxx = bin.join("g++-99");
    let plan = rocbuild(&[&args[..], &["--dry-run"]].concat(), &[("PATH", &path)]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let chosen = format!(
        "compiler: GCC 99.1.0 ({}), the wheels' GCC 99, chosen over GCC ",
        gxx.display()
    );
    assert!(plan.stdout.contains(&chosen), "{}", plan.stdout);
    assert!(!log.exists(), "a dry run compiles nothing");

    let out = rocbuild(&args, &[("PATH", &path)]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("translated with the cpu backend"),
        "{}",
        out.stdout
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    // The library's sources through CMake, and the extension through setuptools (CC, CXX).
    assert!(
        calls
            .lines()
            .any(|l| l.starts_with("g++-99 ") && l.contains("translator.cpp")),
        "{calls}"
    );
    assert!(calls.lines().any(|l| l.contains("module.cpp")), "{calls}");
    let cmake_cache = std::fs::read_dir(cache.join("build"))
        .unwrap()
        .flatten()
        .map(|d| std::fs::read_to_string(d.path().join("CMakeCache.txt")).unwrap_or_default())
        .collect::<String>();
    assert!(
        cmake_cache
            .lines()
            .any(|l| l.starts_with("CMAKE_CXX_COMPILER:")
                && l.ends_with(&format!("={}", gxx.display()))),
        "{}",
        cmake_cache
            .lines()
            .filter(|l| l.starts_with("CMAKE_CXX_COMPILER"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // CC and CXX named: the user's compilers, and the plan names the drivers found.
    let mine = rocbuild(
        &[&args[..], &["--dry-run"]].concat(),
        &[("PATH", &path), ("CC", "cc"), ("CXX", "c++")],
    );
    assert_eq!(mine.code, 0, "{}", mine.stderr);
    assert!(!mine.stdout.contains("chosen over"), "{}", mine.stdout);
    assert!(
        mine.stdout.contains(&format!(
            "not the wheels' GCC 99: its sums part from the wheel's; for results identical to the wheel's, build with the GCC 99.1.0 found: CC={} CXX={}",
            bin.join("gcc-99").display(),
            gxx.display()
        )),
        "{}",
        mine.stdout
    );
}

/// Run `rocbuild ctranslate2 --venv V --cache C ARGS` on a fresh venv that must refuse:
/// exit 1, nothing fetched, the venv byte-identical. Returns stderr.
fn refused(args: &[&str]) -> String {
    let (code, err) = refused_with(args);
    assert_eq!(code, 1, "{err}");
    err
}

/// Refused with the exit code (2 for a usage error, 1 otherwise), the venv untouched.
fn refused_with(args: &[&str]) -> (i32, String) {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    make_venv(&venv);
    let cache = tmp.path().join("cache");
    let before = tree_state(&venv);
    let common = [
        "ctranslate2",
        "--venv",
        venv.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
    ];
    let out = rocbuild(&[&common[..], args].concat(), &[]);
    assert!(
        out.code == 1 || out.code == 2,
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert!(!cache.join("git").exists(), "nothing was fetched");
    assert_eq!(tree_state(&venv), before);
    (out.code, out.stderr)
}

#[test]
fn a_gpu_option_on_a_cpu_build_is_refused_before_anything_runs() {
    let (code, err) = refused_with(&["--backend", "cpu", "--arch", "gfx1010", "--dry-run"]);
    assert!(err.contains("applies to the rocm backend"), "{err}");
    assert_eq!(code, 2, "a usage error exits 2, like every usage error");
}

/// This machine's real SDK (Debian's ROCm 5.2, installed by `cargo xtask test`): gfx1100 has
/// no device library there, so the build is refused before anything is fetched or built.
#[test]
fn an_arch_the_real_sdk_cannot_compile_for_is_refused_before_building() {
    let err = refused(&["--arch", "gfx1100"]);
    assert!(err.contains("oclc_isa_version_1100.bc"), "{err}");
    assert!(
        err.contains("gfx1010"),
        "the targets it can build are listed: {err}"
    );
}

/// rocbuild installs its own package with --no-deps: the run-time requirements must be
/// there already, and their absence is said before anything is built.
#[test]
fn missing_run_time_requirements_are_named_with_the_command_that_installs_them() {
    let err = refused(&["--backend", "cpu", "--dry-run"]);
    assert!(err.contains("ctranslate2 needs numpy, pyyaml"), "{err}");
    assert!(err.contains("-m pip install numpy pyyaml"), "{err}");
}

/// Debian's ROCm 5.2 can compile for gfx1010 but has no hipBLAS, which CTranslate2's HIP
/// build links: refused before anything is fetched, with the SDKs found and what they hold.
#[test]
fn an_sdk_without_hipblas_is_refused_for_ctranslate2() {
    let err = refused(&["--arch", "gfx1010"]);
    assert!(
        err.contains("ctranslate2's HIP build links hipBLAS, and ROCm 5.2.0 at /usr has none"),
        "{err}"
    );
    assert!(err.contains("hipBLAS no"), "{err}");
}
