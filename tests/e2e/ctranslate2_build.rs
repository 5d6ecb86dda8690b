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
pub(crate) fn fixture_recipes(root: &std::path::Path, extra: &str) -> std::path::PathBuf {
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
        write_executable(
            &p,
            format!(
                "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{name} (Test 99.1.0-1) 99.1.0'; exit 0; fi\n\
                 echo \"{name} $*\" >> '{}'\nexec {real} \"$@\"\n",
                log.display()
            ),
        );
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

/// A tiny static library project in a git repository tagged `tag`: `fakegemm_version()`
/// says "fakegemm 1.0"; `extra_cmake` is appended to its CMakeLists.txt (a configure that
/// fails, a build step that runs `wait.sh FILE`, which waits up to 60 s for FILE). Returns the
/// tag's commit.
pub(crate) fn fakegemm_repo(repos: &std::path::Path, name: &str, extra_cmake: &str) -> String {
    let src = repos.join(format!("{name}-src"));
    std::fs::create_dir_all(src.join("include")).unwrap();
    std::fs::write(
        src.join("CMakeLists.txt"),
        format!(
            "cmake_minimum_required(VERSION 3.18)\nproject(fakegemm VERSION 1.0 LANGUAGES CXX)\n{}\
             add_library(fakegemm gemm.cpp)\ntarget_include_directories(fakegemm PUBLIC include)\n\
             include(GNUInstallDirs)\ninstall(TARGETS fakegemm ARCHIVE DESTINATION ${{CMAKE_INSTALL_LIBDIR}} \
             LIBRARY DESTINATION ${{CMAKE_INSTALL_LIBDIR}})\ninstall(FILES include/fakegemm.h DESTINATION include)\n",
            extra_cmake
        ),
    )
    .unwrap();
    // A build step that waits (at most 60 s) for the file it is given: something to interrupt.
    std::fs::write(
        src.join("wait.sh"),
        "for i in $(seq 600); do [ -e \"$1\" ] && exit 0; sleep 0.1; done\n",
    )
    .unwrap();
    std::fs::write(
        src.join("include/fakegemm.h"),
        "#pragma once\nconst char* fakegemm_version();\n",
    )
    .unwrap();
    std::fs::write(
        src.join("gemm.cpp"),
        "#include \"fakegemm.h\"\nconst char* fakegemm_version() { return \"fakegemm 1.0\"; }\n",
    )
    .unwrap();
    let commit = make_git_repo(repos, name, &src, "v1.0");
    std::fs::remove_dir_all(&src).unwrap();
    commit
}

/// The recipe lines that build `repo` (tagged v1.0 at `commit`) as the dependency fakegemm
/// and use it, as CTranslate2's recipe does oneDNN.
pub(crate) fn fakegemm_recipe(repo: &std::path::Path, commit: &str) -> String {
    format!(
        r#"
[[needs.library]]
name = "fakegemm"
describe = "a GEMM library"
optional = true
headers = ["fakegemm.h"]
libs = ["fakegemm"]

[dependency.fakegemm]
describe = "fakegemm 1.0, built from source and linked statically"
git = "{}"
tag = "v1.0"
commit = "{commit}"
when = {{ WITH_FAKEGEMM = "ON" }}

[dependency.fakegemm.define]
CMAKE_BUILD_TYPE = "Release"

[with.fakegemm.build.define]
WITH_FAKEGEMM = "ON"
FAKEGEMM_INCLUDE_DIR = "{{lib.fakegemm.include}}"
CMAKE_LIBRARY_PATH = "{{lib.fakegemm.dir}}"

[with.fakegemm.install]
finds = ["{{lib.fakegemm.dir}}"]
"#,
        repo.display()
    )
}

/// `[dependency.X]`: built from source once into the cache, before the package, with the
/// package's compiler; linked statically (the installed library needs nothing of it and
/// has no RUNPATH into the cache); a second venv on the same cache reuses it without a
/// rebuild; the plan shows it; a dependency that fails to build stops the run before anything
/// is installed, naming it, with the venv as it was.
#[test]
fn a_dependency_is_built_from_source_once_and_linked_statically() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let repos = root.join("repos");
    std::fs::create_dir_all(&repos).unwrap();
    let commit = fakegemm_repo(&repos, "fakegemm", "");
    let recipes = fixture_recipes(root, &fakegemm_recipe(&repos.join("fakegemm.git"), &commit));
    let cache = root.join("cache");
    let args = |venv: &std::path::Path| -> Vec<String> {
        [
            "faketrans",
            "--recipes",
            recipes.to_str().unwrap(),
            "--venv",
            venv.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    };
    let venv1 = root.join("venv1");
    make_venv(&venv1);
    let a1 = args(&venv1);
    let a1: Vec<&str> = a1.iter().map(String::as_str).collect();
    let plan = rocbuild(&[&a1[..], &["--dry-run"]].concat(), &[]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(
        plan.stdout
            .contains("build the dependency fakegemm (v1.0) from source, once, into the cache")
            && plan.stdout.contains(&format!("expect commit: {commit}")),
        "{}",
        plan.stdout
    );
    assert!(!cache.join("deps").exists(), "a dry run builds nothing");

    let out = rocbuild(&a1, &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("translated with the cpu with fakegemm 1.0 backend"),
        "{}",
        out.stdout
    );
    let deps: Vec<_> = std::fs::read_dir(cache.join("deps"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(deps.len(), 1, "{deps:?}");
    let archive = deps[0].join("prefix/lib/libfakegemm.a");
    assert!(archive.exists(), "{}", archive.display());
    let built_at = std::fs::metadata(&archive).unwrap().modified().unwrap();
    // Linked in: the symbol is defined in the installed library, which needs no fakegemm
    // library at run time and does not look into the cache.
    let lib = std::fs::read_dir(site_packages(&venv1).join("faketrans"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("libfaketrans.so")
        })
        .unwrap();
    let dynamic = run(Command::new("readelf").args(["-dW", lib.to_str().unwrap()]));
    assert!(
        !dynamic.contains("fakegemm") && !dynamic.contains(cache.to_str().unwrap()),
        "{dynamic}"
    );
    let symbols = run(Command::new("nm").args(["-C", "--defined-only", lib.to_str().unwrap()]));
    assert!(symbols.contains("fakegemm_version"), "{symbols}");

    // Another venv on the same cache: the dependency is found built, not rebuilt.
    let venv2 = root.join("venv2");
    make_venv(&venv2);
    let a2 = args(&venv2);
    let a2: Vec<&str> = a2.iter().map(String::as_str).collect();
    let plan2 = rocbuild(&[&a2[..], &["--dry-run"]].concat(), &[]);
    assert!(
        plan2.stdout.contains(&format!(
            "built before: {}",
            deps[0].join("prefix").display()
        )),
        "{}",
        plan2.stdout
    );
    let out2 = rocbuild(&a2, &[]);
    assert_eq!(out2.code, 0, "{}\n{}", out2.stdout, out2.stderr);
    assert!(
        out2.stdout
            .contains("translated with the cpu with fakegemm 1.0 backend"),
        "{}",
        out2.stdout
    );
    assert_eq!(
        std::fs::metadata(&archive).unwrap().modified().unwrap(),
        built_at,
        "rebuilt"
    );
    let logs: String = std::fs::read_dir(cache.join("logs"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert_eq!(
        logs.matches("==> dependency fakegemm: configure").count(),
        1,
        "{logs}"
    );
    assert!(
        logs.contains("dependency fakegemm (v1.0): built before"),
        "{logs}"
    );

    // A dependency that does not build: the run stops before anything is installed.
    let broken = fakegemm_repo(
        &repos,
        "brokengemm",
        "message(FATAL_ERROR \"fakegemm cannot be configured here\")\n",
    );
    let recipes_b = root.join("recipes-broken");
    std::fs::create_dir_all(&recipes_b).unwrap();
    let text = std::fs::read_to_string(recipes.join("faketrans.toml"))
        .unwrap()
        .replace("fakegemm.git", "brokengemm.git")
        .replace(&commit, &broken);
    std::fs::write(recipes_b.join("faketrans.toml"), text).unwrap();
    let venv3 = root.join("venv3");
    make_venv(&venv3);
    let before = tree_state(&venv3);
    let a3 = args(&venv3);
    let mut a3: Vec<&str> = a3.iter().map(String::as_str).collect();
    a3[2] = recipes_b.to_str().unwrap();
    let out3 = rocbuild(&a3, &[]);
    assert_ne!(out3.code, 0, "{}", out3.stdout);
    assert!(
        out3.stderr.contains("dependency fakegemm: configure")
            && out3.stderr.contains("fakegemm cannot be configured here"),
        "{}",
        out3.stderr
    );
    assert_eq!(tree_state(&venv3), before, "the venv changed");
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

/// With `--no-deps` the run-time requirements must be there already, and their absence is
/// said before anything is built (without it they are installed with the package:
/// tests/e2e/requirements.rs).
#[test]
fn missing_run_time_requirements_are_named_with_the_command_that_installs_them() {
    let err = refused(&["--backend", "cpu", "--dry-run", "--no-binary", "--no-deps"]);
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
