//! Real ROCm SDKs from Debian, in chroots `cargo xtask test` makes (xtask/src/chroots.rs):
//! sid's ROCm 6.4 and experimental's ROCm 7.2. rocbuild (this build's binary: Debian 12's glibc
//! is older than sid's, so it runs there) is copied into the chroot and run inside it on a
//! fixture shaped like CTranslate2's HIP code — a hipBLAS GEMM, a hipCUB reduction, `__syncwarp`
//! (which HIP 6 lacks: rocbuild's compatibility header), a hipRAND generator — and a Python
//! extension linking it; installed into a venv, imported (no GPU needed), its code objects read
//! back by rocbuild's own reader, and doctor asked about rocBLAS's kernels.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

const HIP: &str = r#"#include <hip/hip_runtime.h>
#include <hipblas/hipblas.h>
#include <hipcub/hipcub.hpp>
#include <hiprand/hiprand.h>

__global__ void warp_sum(float* x) {
  int i = threadIdx.x;
  x[i] += 1.0f;
  __syncwarp();
  if (i == 0) {
    float s = 0;
    for (int j = 0; j < 32; ++j) s += x[j];
    x[0] = s;
  }
}

extern "C" int ct2hip_devices() {
  int n = 0;
  if (hipGetDeviceCount(&n) != hipSuccess) return 0;
  return n;
}

extern "C" int ct2hip_warp_sum(float* x) {
  hipLaunchKernelGGL(warp_sum, dim3(1), dim3(32), 0, 0, x);
  return hipGetLastError() != hipSuccess;
}

extern "C" int ct2hip_gemm(int n, const float* a, const float* b, float* c) {
  hipblasHandle_t h;
  if (hipblasCreate(&h) != HIPBLAS_STATUS_SUCCESS) return 1;
  const float one = 1.0f, zero = 0.0f;
  hipblasStatus_t s = hipblasSgemm(h, HIPBLAS_OP_N, HIPBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
  hipblasDestroy(h);
  return s != HIPBLAS_STATUS_SUCCESS;
}

extern "C" int ct2hip_reduce(const float* in, float* out, int n) {
  void* tmp = nullptr;
  size_t bytes = 0;
  hipcub::DeviceReduce::Sum(tmp, bytes, in, out, n);
  if (hipMalloc(&tmp, bytes) != hipSuccess) return 1;
  hipcub::DeviceReduce::Sum(tmp, bytes, in, out, n);
  return hipFree(tmp) != hipSuccess;
}

extern "C" int ct2hip_random(float* out, size_t n) {
  hiprandGenerator_t g;
  if (hiprandCreateGenerator(&g, HIPRAND_RNG_PSEUDO_DEFAULT) != HIPRAND_STATUS_SUCCESS) return 1;
  hiprandGenerateUniform(g, out, n);
  return hiprandDestroyGenerator(g) != HIPRAND_STATUS_SUCCESS;
}
"#;

const EXT: &str = r#"#define PY_SSIZE_T_CLEAN
#include <Python.h>
extern int ct2hip_devices(void);
static PyObject* devices(PyObject* self, PyObject* args) {
  (void)self; (void)args;
  return PyLong_FromLong(ct2hip_devices());
}
static PyMethodDef methods[] = {{"devices", devices, METH_NOARGS, "HIP devices seen"}, {0, 0, 0, 0}};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_ext", 0, -1, methods, 0, 0, 0, 0};
PyMODINIT_FUNC PyInit__ext(void) { return PyModule_Create(&def); }
"#;

const CMAKE: &str = r#"cmake_minimum_required(VERSION 3.21)
project(ct2hip LANGUAGES C CXX HIP)
find_package(hipblas REQUIRED)
find_package(hipcub REQUIRED)
find_package(hiprand REQUIRED)
find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
add_library(ct2hip SHARED ct2hip.hip)
target_link_libraries(ct2hip PRIVATE roc::hipblas hip::hipcub hip::hiprand)
Python3_add_library(_ext MODULE WITH_SOABI ext.c)
target_link_libraries(_ext PRIVATE ct2hip)
install(TARGETS ct2hip _ext LIBRARY DESTINATION lib)
"#;

fn recipe(git: &str) -> String {
    format!(
        r#"[package]
name = "ct2hip"
distribution = "rocbuild-fixture-ct2hip"
import-dir = "ct2hip"
backends = ["cpu", "rocm"]

[source]
git = "{git}"
tag = "v{{version}}"

[[release]]
version = "1.0.0"
torch = ">=0"

[needs]
torch = false

[build.define]
CMAKE_BUILD_TYPE = "Release"

[rocm-versions."<7".build]
hip-compat = ["syncwarp"]

[install]
artifacts = ["libct2hip.so*", "_ext*.so"]

[verify]
python = '''
import ct2hip
print("ct2hip imported; devices:", ct2hip.devices())
'''
"#
    )
}

/// The chroot named by `var` (set by `cargo xtask test`), or None with the reason printed.
fn chroot(var: &str, name: &str) -> Option<PathBuf> {
    if let Some(d) = std::env::var_os(var) {
        return Some(PathBuf::from(d));
    }
    if let Ok(why) = std::env::var(format!("{var}_SKIP")) {
        rocbuild_testkit::skip::skipped(&why);
        return None;
    }
    let cache = std::env::var_os("ROCBUILD_TEST_CHROOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/rocbuild-test/chroots"));
    let d = cache.join(name);
    if d.join("usr/include/hip/hip_version.h").is_file() {
        return Some(d);
    }
    rocbuild_testkit::skip::skipped(&format!(
        "the {name} chroot is absent ({}); `cargo xtask chroots` (as root) makes it",
        d.display()
    ));
    None
}

/// `cmd...` run inside `root` as root, with /proc, /dev and /sys of the host mounted in a
/// private mount namespace (gone when the command ends; parallel tests do not interfere).
pub(crate) fn in_chroot(root: &Path, env: &[(&str, &str)], cmd: &[&str]) -> Out {
    in_chroot_with(root, &[], env, cmd)
}

/// [`in_chroot`] with host files bind-mounted over files of the chroot (`(host, inner)`), in
/// the command's own mount namespace: the chroot itself is never changed.
fn in_chroot_with(root: &Path, binds: &[(&Path, &str)], env: &[(&str, &str)], cmd: &[&str]) -> Out {
    let mut script = String::from(
        "set -e; r=\"$1\"; shift; mount -t proc proc \"$r/proc\"; mount --rbind /dev \"$r/dev\"; mount --rbind /sys \"$r/sys\"; ",
    );
    for (host, inner) in binds {
        script.push_str(&format!(
            "mount --bind '{}' \"$r\"'{inner}'; ",
            host.display()
        ));
    }
    script.push_str("exec chroot \"$r\" \"$@\"\n");
    let mut c = Command::new("unshare");
    c.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
        "sh",
    ])
    .arg(root)
    .args(["/usr/bin/env", "-i"])
    .arg("PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
    .arg("HOME=/root")
    .arg("LANG=C.UTF-8")
    .arg("NO_COLOR=1");
    for (k, v) in env {
        c.arg(format!("{k}={v}"));
    }
    c.args(cmd);
    let o = c.output().expect("run unshare/chroot");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

pub(crate) fn show(o: &Out) -> String {
    format!("stdout:\n{}\nstderr:\n{}", o.stdout, o.stderr)
}

/// Build, install, import and read back the fixture in `root` for `arch`; returns the
/// work directory (inside the chroot's /tmp, removed on drop) and its in-chroot path.
fn build_in(root: &Path, arch: &str, hip_major: u32) -> (tempfile::TempDir, String) {
    let work = tempfile::Builder::new()
        .prefix("rocbuild-e2e-")
        .tempdir_in(root.join("tmp"))
        .unwrap();
    let inner = format!(
        "/tmp/{}",
        work.path().file_name().unwrap().to_string_lossy()
    );
    let w = work.path();
    copy_executable(
        Path::new(env!("CARGO_BIN_EXE_rocbuild")),
        &w.join("rocbuild"),
    );
    let src = w.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("CMakeLists.txt"), CMAKE).unwrap();
    std::fs::write(src.join("ct2hip.hip"), HIP).unwrap();
    std::fs::write(src.join("ext.c"), EXT).unwrap();
    std::fs::create_dir_all(w.join("repos")).unwrap();
    make_git_repo(&w.join("repos"), "ct2hip", &src, "v1.0.0");
    std::fs::create_dir_all(w.join("recipes")).unwrap();
    std::fs::write(
        w.join("recipes/ct2hip.toml"),
        recipe(&format!("{inner}/repos/ct2hip.git")),
    )
    .unwrap();
    make_wheel_files(
        &w.join("wheels"),
        "rocbuild_fixture_ct2hip",
        "1.0.0",
        &[("ct2hip/__init__.py", b"from ._ext import devices\n")],
    );
    let venv = format!("{inner}/venv");
    let mk = in_chroot(root, &[], &["python3", "-m", "venv", &venv]);
    assert_eq!(mk.code, 0, "{}", show(&mk));
    let rb = format!("{inner}/rocbuild");
    let recipes = format!("{inner}/recipes");
    let cache = format!("{inner}/cache");
    let finds = format!("{inner}/wheels");
    let env = [("PIP_FIND_LINKS", finds.as_str())];
    let common = [
        rb.as_str(),
        "ct2hip",
        "--recipes",
        &recipes,
        "--venv",
        &venv,
        "--cache",
        &cache,
        "--backend",
        "rocm",
        "--arch",
        arch,
    ];

    // The plan: Debian's SDK under /usr with its real layout, and for HIP < 7 the
    // compatibility header, before anything runs.
    let plan = in_chroot(root, &env, &[&common[..], &["--dry-run"]].concat());
    assert_eq!(plan.code, 0, "{}", show(&plan));
    assert!(plan.stdout.contains("/usr/lib/llvm-"), "{}", plan.stdout);
    assert!(
        plan.stdout
            .contains(&format!("-DCMAKE_HIP_ARCHITECTURES={arch}")),
        "{}",
        plan.stdout
    );
    let compat = plan.stdout.contains("HIP compatibility header");
    assert_eq!(compat, hip_major < 7, "{}", plan.stdout);

    let t = std::time::Instant::now();
    let out = in_chroot(root, &env, &[&common[..], &["-q"]].concat());
    eprintln!(
        "build in {}: {:.1} s",
        root.display(),
        t.elapsed().as_secs_f64()
    );
    assert_eq!(out.code, 0, "{}", show(&out));
    assert!(
        out.stdout.contains("ct2hip imported; devices: 0"),
        "{}",
        show(&out)
    );

    // rocbuild's own reader, on the installed library: code objects for `arch` only.
    let site = std::fs::read_dir(w.join("venv/lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .unwrap();
    let lib = std::fs::read_dir(site.join("ct2hip"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("libct2hip.so")
        })
        .expect("libct2hip installed");
    let bin = rocbuild_native::read_binary(&lib).unwrap();
    assert_eq!(bin.gpu_targets, [arch], "{:?}", bin.gpu_targets);
    for needed in ["libamdhip64.so", "libhipblas.so", "libhiprand.so"] {
        assert!(
            bin.needed.iter().any(|n| n.starts_with(needed)),
            "{needed}: {:?}",
            bin.needed
        );
    }
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(site.join(".rocbuild/ct2hip.json")).unwrap())
            .unwrap();
    assert_eq!(m["sdk"]["gpu_archs"], serde_json::json!([arch]), "{m}");
    if hip_major < 7 {
        assert_eq!(
            m["sdk"]["hip_compat"],
            serde_json::json!(["syncwarp"]),
            "{m}"
        );
    } else {
        assert!(m["sdk"].get("hip_compat").is_none(), "{m}");
    }
    (work, inner)
}

fn doctor(root: &Path, inner: &str, arch: &str) -> Out {
    let rb = format!("{inner}/rocbuild");
    let recipes = format!("{inner}/recipes");
    let venv = format!("{inner}/venv");
    in_chroot(
        root,
        &[],
        &[
            &rb,
            "doctor",
            "ct2hip",
            "--recipes",
            &recipes,
            "--venv",
            &venv,
            "--gpu-arch",
            arch,
        ],
    )
}

#[test]
fn sid_rocm_6_4_builds_ctranslate2_shaped_hip_for_gfx1010() {
    let Some(root) = chroot("ROCBUILD_TEST_CHROOT_ROCM64", "sid-rocm6.4") else {
        return;
    };
    let (_work, inner) = build_in(&root, "gfx1010", 6);
    // Debian's rocBLAS keeps its kernels in rocblas/<version>/library: found for gfx1010.
    let ok = doctor(&root, &inner, "gfx1010");
    assert!(
        !ok.stdout.contains("rocBLAS has no Tensile"),
        "{}",
        show(&ok)
    );
    let none = doctor(&root, &inner, "gfx1201");
    assert!(
        none.stdout
            .contains("rocBLAS has no Tensile kernels for gfx1201"),
        "{}",
        show(&none)
    );
    assert!(none.stdout.contains("/rocblas/4."), "{}", show(&none));
}

#[test]
fn experimental_rocm_7_2_builds_ctranslate2_shaped_hip_for_gfx1201() {
    let Some(root) = chroot("ROCBUILD_TEST_CHROOT_ROCM72", "experimental-rocm7.2") else {
        return;
    };
    let (_work, inner) = build_in(&root, "gfx1201", 7);
    let ok = doctor(&root, &inner, "gfx1201");
    assert!(
        !ok.stdout.contains("rocBLAS has no Tensile"),
        "{}",
        show(&ok)
    );
}

/// The site-packages of a venv made inside the chroot (its `bin/python` names the chroot's
/// Python, which the host cannot run).
pub(crate) fn chroot_site(venv: &Path) -> PathBuf {
    std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .unwrap()
}

/// A work directory in the chroot's /tmp with this build's rocbuild, and a venv made there
/// holding CTranslate2's run-time requirements as bare distributions (rocbuild only checks
/// them): (the directory, its in-chroot path, the venv's in-chroot path).
fn ct2_scene(root: &Path, prefix: &str) -> (tempfile::TempDir, String, String) {
    let work = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(root.join("tmp"))
        .unwrap();
    let inner = format!(
        "/tmp/{}",
        work.path().file_name().unwrap().to_string_lossy()
    );
    copy_executable(
        Path::new(env!("CARGO_BIN_EXE_rocbuild")),
        &work.path().join("rocbuild"),
    );
    let venv = format!("{inner}/venv");
    let mk = in_chroot(root, &[], &["python3", "-m", "venv", &venv]);
    assert_eq!(mk.code, 0, "{}", show(&mk));
    let site = chroot_site(&work.path().join("venv"));
    for (name, v) in [("numpy", "2.3.0"), ("PyYAML", "6.0.2")] {
        let di = site.join(format!("{name}-{v}.dist-info"));
        std::fs::create_dir_all(&di).unwrap();
        std::fs::write(
            di.join("METADATA"),
            format!("Metadata-Version: 2.1\nName: {name}\nVersion: {v}\n"),
        )
        .unwrap();
    }
    (work, inner, venv)
}

/// A ROCm torch (2.9.1+rocm6.4, HIP 6.4) in `venv` as the probe reads it, and `packaging`:
/// bare distributions (the chroot cannot run a ROCm torch).
fn fake_rocm_torch(venv: &Path) {
    let site = chroot_site(venv);
    std::fs::create_dir_all(site.join("torch/lib")).unwrap();
    std::fs::write(site.join("torch/__init__.py"), "").unwrap();
    std::fs::write(
        site.join("torch/version.py"),
        "__version__ = '2.9.1+rocm6.4'\ngit_version = 'abc'\ncuda = None\nhip = '6.4.43482'\n",
    )
    .unwrap();
    for (name, v) in [("torch", "2.9.1+rocm6.4"), ("packaging", "25.0")] {
        let di = site.join(format!("{name}-{v}.dist-info"));
        std::fs::create_dir_all(&di).unwrap();
        std::fs::write(
            di.join("METADATA"),
            format!("Metadata-Version: 2.1\nName: {name}\nVersion: {v}\n"),
        )
        .unwrap();
    }
}

/// A `fakecodec` recipe whose releases carry the real TorchCodec recipe's torch and FFmpeg
/// ranges (and default flags): the choice below is the one the real recipe makes.
fn ranged_fakecodec_recipe(git: &str) -> String {
    let (_, text) = rocbuild_recipe::BUILTIN
        .iter()
        .find(|(n, _)| *n == "torchcodec")
        .unwrap();
    let real = rocbuild_recipe::parse("<builtin>/torchcodec.toml", text).unwrap();
    let mut releases = String::new();
    for r in real.releases() {
        releases.push_str(&format!(
            "[[release]]\nversion = \"{}\"\ntorch = \"{}\"\n{}default = {}\n\n",
            r.version,
            r.torch,
            r.ffmpeg
                .map(|f| format!("ffmpeg = \"{f}\"\n"))
                .unwrap_or_default(),
            r.default
        ));
    }
    let base = fixture_recipe(git, true, DECODE_WAV);
    let start = base.find("[[release]]").unwrap();
    let end = base.find("[needs]").unwrap();
    format!("{}{releases}{}", &base[..start], &base[end..])
}

/// TorchCodec on FFmpeg 9 (sid's 9.x development packages): the default release is one for
/// FFmpeg 9 (0.16 or newer, as the real recipe's ranges say), built, installed and decoding
/// with FFmpeg 9; `--version 0.15.0` in the same venv is refused before anything is fetched,
/// naming FFmpeg 9 and the releases that support it.
#[test]
fn sid_ffmpeg_9_gets_a_torchcodec_release_for_it_and_0_15_is_refused_before_fetch() {
    let Some(root) = chroot("ROCBUILD_TEST_CHROOT_ROCM64", "sid-rocm6.4") else {
        return;
    };
    let work = tempfile::Builder::new()
        .prefix("rocbuild-e2e-ffmpeg9-")
        .tempdir_in(root.join("tmp"))
        .unwrap();
    let inner = format!(
        "/tmp/{}",
        work.path().file_name().unwrap().to_string_lossy()
    );
    let w = work.path();
    copy_executable(
        Path::new(env!("CARGO_BIN_EXE_rocbuild")),
        &w.join("rocbuild"),
    );
    // The fixture repository, tagged as both releases: a refusal is the planner's, not a
    // missing tag.
    let repos = w.join("repos");
    make_git_fixture(&repos);
    for tag in ["v0.15.0", "v0.16.0"] {
        let out = Command::new("git")
            .args([
                "-C",
                repos.join("fakecodec.git").to_str().unwrap(),
                "tag",
                tag,
                "v1.0.0",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    std::fs::create_dir_all(w.join("recipes")).unwrap();
    std::fs::write(
        w.join("recipes/fakecodec.toml"),
        ranged_fakecodec_recipe(&format!("{inner}/repos/fakecodec.git")),
    )
    .unwrap();
    make_wheel(&w.join("wheels"), "fakecodec", "0.16.0");
    let venv = format!("{inner}/venv");
    let mk = in_chroot(&root, &[], &["python3", "-m", "venv", &venv]);
    assert_eq!(mk.code, 0, "{}", show(&mk));
    install_fake_torch(&chroot_site(&w.join("venv")), "2.15.0");
    let rb = format!("{inner}/rocbuild");
    let recipes = format!("{inner}/recipes");
    let cache = format!("{inner}/cache");
    let finds = format!("{inner}/wheels");
    let env = [("PIP_FIND_LINKS", finds.as_str())];
    let common = [
        rb.as_str(),
        "fakecodec",
        "--recipes",
        &recipes,
        "--venv",
        &venv,
        "--cache",
        &cache,
    ];

    // --version 0.15.0: refused before any fetch.
    let refused = in_chroot(
        &root,
        &env,
        &[&common[..], &["--version", "0.15.0"]].concat(),
    );
    assert_eq!(refused.code, 1, "{}", show(&refused));
    assert!(
        refused
            .stderr
            .contains("fakecodec 0.15.0 does not support FFmpeg 9"),
        "{}",
        show(&refused)
    );
    let flat = refused
        .stderr
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        flat.contains("releases that support torch 2.15.0 and FFmpeg 9: 0.17.0, 0.16.0"),
        "{flat}"
    );
    assert!(flat.contains("nothing was fetched"), "{flat}");
    assert!(!w.join("cache/git").exists() && !w.join("cache/src").exists());

    // The default: a release for FFmpeg 9, built against sid's FFmpeg 9, decoding.
    let out = in_chroot(&root, &env, &common);
    assert_eq!(out.code, 0, "{}", show(&out));
    assert!(
        out.stdout.contains("decoded 16000 samples with FFmpeg 9"),
        "{}",
        show(&out)
    );
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(chroot_site(&w.join("venv")).join(".rocbuild/fakecodec.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(m["version"], "0.16.0", "{m}");
    assert_eq!(m["ffmpeg_major"], 9, "{m}");
}

/// The real CTranslate2 recipe against sid's real ROCm 6.4 without OpenBLAS (the chroot has
/// none): the missing library is named with its Debian package before anything is fetched;
/// with `-D WITH_OPENBLAS=OFF` nothing is missing, and the plan shows the release chosen for
/// HIP 6.4 with rocbuild's compatibility header. A `-D` that would drop the SDK's compiler is
/// refused.
#[test]
fn sid_rocm_6_4_real_ctranslate2_recipe_checks_its_system_libraries_first() {
    let Some(root) = chroot("ROCBUILD_TEST_CHROOT_ROCM64", "sid-rocm6.4") else {
        return;
    };
    if root.join("usr/include/x86_64-linux-gnu/cblas.h").exists() {
        rocbuild_testkit::skip::skipped("this sid chroot has OpenBLAS installed");
        return;
    }
    let (work, inner, venv) = ct2_scene(&root, "rocbuild-e2e-ct2-");
    let rb = format!("{inner}/rocbuild");
    let cache = format!("{inner}/cache");
    let common = [
        rb.as_str(),
        "ctranslate2",
        "--venv",
        &venv,
        "--cache",
        &cache,
        "--backend",
        "rocm",
        "--arch",
        "gfx1010",
    ];
    let out = in_chroot(&root, &[], &common);
    assert_eq!(out.code, 1, "{}", show(&out));
    let flat = out.stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("1 prerequisite of ctranslate2 missing"),
        "{flat}"
    );
    assert!(
        flat.contains("OpenBLAS: cblas.h, libopenblas not found"),
        "{flat}"
    );
    assert!(
        flat.contains("sudo apt-get install libopenblas-dev"),
        "{flat}"
    );
    assert!(!work.path().join("cache/git").exists());

    let plan = in_chroot(
        &root,
        &[],
        &[&common[..], &["-D", "WITH_OPENBLAS=OFF", "--dry-run"]].concat(),
    );
    assert_eq!(plan.code, 0, "{}", show(&plan));
    assert!(
        plan.stdout
            .contains("plan: ctranslate2 4.8.1 (newest release compatible with HIP 6.4."),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout.contains("HIP compatibility header"),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout
            .contains("third_party/ruy (of its own submodules only third_party/cpuinfo)"),
        "{}",
        plan.stdout
    );

    let drop = in_chroot(
        &root,
        &[],
        &[
            &common[..],
            &[
                "-D",
                "WITH_OPENBLAS=OFF",
                "-D",
                "CMAKE_CXX_COMPILER=/usr/bin/g++",
                "--dry-run",
            ],
        ]
        .concat(),
    );
    assert_eq!(drop.code, 2, "{}", show(&drop));
    assert!(drop.stderr.contains("--rocm DIR"), "{}", show(&drop));
}

/// Experimental's ROCm 7.2 compiles with clang 22, while its libomp-dev is LLVM 21's: the
/// OpenMP runtime of the SDK's own clang is missing, and rocbuild names the package of that
/// clang (libomp-22-dev) before anything is fetched, instead of CMake failing on -fopenmp.
#[test]
fn experimental_rocm_7_2_names_the_openmp_runtime_of_its_own_clang() {
    let Some(root) = chroot("ROCBUILD_TEST_CHROOT_ROCM72", "experimental-rocm7.2") else {
        return;
    };
    let has = |rel: &str| root.join(rel).exists();
    if !has("usr/lib/llvm-22/lib/clang/22/amdgcn")
        || has("usr/lib/llvm-22/lib/clang/22/include/omp.h")
    {
        rocbuild_testkit::skip::skipped(
            "this chroot's ROCm is not on clang 22, or clang 22 has its OpenMP runtime",
        );
        return;
    }
    let (work, inner, venv) = ct2_scene(&root, "rocbuild-e2e-omp-");
    let rb = format!("{inner}/rocbuild");
    let cache = format!("{inner}/cache");
    let out = in_chroot(
        &root,
        &[],
        &[
            &rb,
            "ctranslate2",
            "--venv",
            &venv,
            "--cache",
            &cache,
            "--backend",
            "rocm",
            "--arch",
            "gfx1201",
            "-D",
            "WITH_OPENBLAS=OFF",
        ],
    );
    assert_eq!(out.code, 1, "{}", show(&out));
    let flat = out.stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("LLVM's OpenMP runtime (clang's -fopenmp): omp.h, libomp not found"),
        "{flat}"
    );
    assert!(
        flat.contains("sudo apt-get install libomp-22-dev"),
        "{flat}"
    );
    assert!(!work.path().join("cache/git").exists());
}

/// bitsandbytes' TOML-only recipe for ROCm in Debian sid's real ROCm 6.4, for gfx1010 and
/// gfx1030: with HIP 6.1 or later upstream links hipBLASLt, which this chroot lacks, so the
/// build is refused before anything is fetched, naming it and Debian's package for it (what
/// CMake would have said only after the checkout, as "roc::hipblaslt ... target was not
/// found"). With `libhipblaslt-dev` installed the same command builds (issue 43's notes). With one, the plan
/// (`plans_gpu::bitsandbytes_rocm_library_is_named_after_torchs_hip`) builds the library named
/// after the venv's torch's HIP for exactly those archs.
#[test]
fn sid_rocm_6_4_names_the_hipblaslt_bitsandbytes_needs_before_fetching() {
    let Some(root) = chroot("ROCBUILD_TEST_CHROOT_ROCM64", "sid-rocm6.4") else {
        return;
    };
    let (work, inner, venv) = ct2_scene(&root, "rocbuild-e2e-bnb-");
    let w = work.path();
    fake_rocm_torch(&w.join("venv"));
    let rb = format!("{inner}/rocbuild");
    let cache = format!("{inner}/cache");
    let args = [
        rb.as_str(),
        "bitsandbytes",
        "--venv",
        &venv,
        "--cache",
        &cache,
        "--arch",
        "gfx1010;gfx1030",
    ];
    let out = in_chroot(&root, &[], &args);
    assert_eq!(out.code, 1, "{}", show(&out));
    let flat = out.stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("prerequisite of bitsandbytes missing"),
        "{flat}"
    );
    assert!(flat.contains("hipBLASLt development files"), "{flat}");
    assert!(!w.join("cache/git").exists(), "nothing was fetched");
    // Debian's own package for it (sid has had one since 7.1.1+dfsg-4).
    assert!(flat.contains("apt-get install libhipblaslt-dev"), "{flat}");
}

/// bitsandbytes 0.50.1 for ROCm in Debian sid's real ROCm 6.4 with sid's own hipBLASLt
/// (`libhipblaslt-dev`), for gfx1010 and gfx1030. hipBLASLt goes into a copy of the chroot made
/// with hard links (the shared chroot keeps the premise of the refusal test above; apt's logs
/// are unlinked first, so nothing is written through a link). The chroot has no ROCm torch, so
/// rocbuild's verification (import torch and bitsandbytes) cannot pass there: it fails and the
/// install is rolled back, as it must. The library the build made stays in the cache's checkout
/// (`artifacts-in = "source"`): every ROCm library it needs, hipBLASLt included, resolves and it
/// loads in the chroot's Python, and its code objects are for exactly gfx1010 and gfx1030.
/// About 12 minutes on 2 cores, too long for CI: runs only with `ROCBUILD_TEST_SLOW_HIP=1` (and
/// the bitsandbytes mirror, `ROCBUILD_TEST_MIRROR`).
#[test]
fn sid_rocm_6_4_with_hipblaslt_builds_bitsandbytes_hip_for_gfx1010_and_gfx1030() {
    if std::env::var_os("ROCBUILD_TEST_SLOW_HIP").is_none() {
        rocbuild_testkit::skip::skipped(
            "a 12-minute HIP build; set ROCBUILD_TEST_SLOW_HIP=1 to run it",
        );
        return;
    }
    let Some(shared) = chroot("ROCBUILD_TEST_CHROOT_ROCM64", "sid-rocm6.4") else {
        return;
    };
    let repo = "github.com/bitsandbytes-foundation/bitsandbytes.git";
    let Some(mirror) = std::env::var_os("ROCBUILD_TEST_MIRROR")
        .map(PathBuf::from)
        .filter(|m| m.join(repo).is_dir())
    else {
        rocbuild_testkit::skip::skipped(&format!("no {repo} under $ROCBUILD_TEST_MIRROR"));
        return;
    };
    let copy = tempfile::Builder::new()
        .prefix("rocbuild-e2e-sid-hipblaslt-")
        .tempdir_in(shared.parent().unwrap())
        .unwrap();
    let root = copy.path().join("root");
    run(Command::new("cp").arg("-al").arg(&shared).arg(&root));
    for appended in [
        "var/log/dpkg.log",
        "var/log/apt/history.log",
        "var/log/apt/term.log",
        "etc/resolv.conf",
    ] {
        let _ = std::fs::remove_file(root.join(appended));
    }
    std::fs::copy("/etc/resolv.conf", root.join("etc/resolv.conf")).unwrap();
    let apt = in_chroot(
        &root,
        &[("DEBIAN_FRONTEND", "noninteractive")],
        &[
            "sh",
            "-c",
            "apt-get update -q && apt-get install -y -q --no-install-recommends libhipblaslt-dev",
        ],
    );
    assert_eq!(apt.code, 0, "{}", show(&apt));
    let (work, inner, venv) = ct2_scene(&root, "rocbuild-e2e-bnbhip-");
    let w = work.path();
    fake_rocm_torch(&w.join("venv"));
    copy_dir(&mirror.join(repo), &w.join("mirror").join(repo));
    copy_dir(&bitsandbytes_wheels(), &w.join("wheels"));
    let (rb, cache) = (format!("{inner}/rocbuild"), format!("{inner}/cache"));
    let (m, links) = (format!("{inner}/mirror"), format!("{inner}/wheels"));
    let env = [
        ("ROCBUILD_MIRROR", m.as_str()),
        ("ROCBUILD_UPSTREAM", "off"),
        ("PIP_NO_INDEX", "1"),
        ("PIP_FIND_LINKS", links.as_str()),
    ];
    let args = [
        rb.as_str(),
        "bitsandbytes",
        "--venv",
        &venv,
        "--cache",
        &cache,
        "--arch",
        "gfx1010;gfx1030",
    ];
    let out = in_chroot(&root, &env, &args);
    // Built and installed; the verification (torch and bitsandbytes imported) cannot run here.
    assert_ne!(out.code, 0, "{}", show(&out));
    let flat = out.stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("verification failed, the venv was rolled back"),
        "{}",
        show(&out)
    );
    let lib = w.join("cache/src/bitsandbytes-37d2a9387f71/bitsandbytes/libbitsandbytes_rocm64.so");
    let inner_lib = format!(
        "{inner}/cache/src/bitsandbytes-37d2a9387f71/bitsandbytes/libbitsandbytes_rocm64.so"
    );
    let load = in_chroot(
        &root,
        &[],
        &[
            "python3",
            "-c",
            "import ctypes, sys; ctypes.CDLL(sys.argv[1]); print('loaded')",
            &inner_lib,
        ],
    );
    assert_eq!(load.code, 0, "{}", show(&load));
    let bin = rocbuild_native::read_binary(&lib).unwrap();
    assert_eq!(bin.gpu_targets, ["gfx1010", "gfx1030"]);
    assert!(
        bin.needed.iter().any(|n| n.starts_with("libhipblaslt.so")),
        "{:?}",
        bin.needed
    );
}

/// PyPI's wheel of bitsandbytes 0.50.1 (its Python part), fetched once on the host into
/// cache/wheels: the chroot trusts no proxy certificate the host may.
pub(crate) fn bitsandbytes_wheels() -> PathBuf {
    let wheels =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cache/wheels/bitsandbytes-0.50.1");
    if !wheels.join(".complete").exists() {
        run(Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "-q",
                "--disable-pip-version-check",
                "--no-deps",
            ])
            .args([
                "--only-binary=:all:",
                "--platform",
                "manylinux_2_24_x86_64",
                "-d",
            ])
            .arg(&wheels)
            .arg("bitsandbytes==0.50.1"));
        std::fs::write(wheels.join(".complete"), "").unwrap();
    }
    wheels
}

/// llama-cpp-python's TOML recipe for ROCm in Debian sid's real ROCm 6.4: its prerequisites
/// (hipBLAS, rocBLAS) are found, and the plan builds ggml-hip with the SDK's clang for exactly
/// gfx1010 and gfx1030, from the sdist, before anything is fetched (the build itself is long:
/// BENCHMARKS.md and the issue notes say where it was run).
#[test]
fn sid_rocm_6_4_plans_llama_cpp_python_for_gfx1010_and_gfx1030() {
    let Some(root) = chroot("ROCBUILD_TEST_CHROOT_ROCM64", "sid-rocm6.4") else {
        return;
    };
    let (work, inner, venv) = ct2_scene(&root, "rocbuild-e2e-llama-");
    let site = chroot_site(&work.path().join("venv"));
    for (name, v) in [
        ("typing_extensions", "4.12.2"),
        ("diskcache", "5.6.3"),
        ("Jinja2", "3.1.4"),
    ] {
        let di = site.join(format!("{name}-{v}.dist-info"));
        std::fs::create_dir_all(&di).unwrap();
        std::fs::write(
            di.join("METADATA"),
            format!("Metadata-Version: 2.1\nName: {name}\nVersion: {v}\n"),
        )
        .unwrap();
    }
    let plan = in_chroot(
        &root,
        &[],
        &[
            &format!("{inner}/rocbuild"),
            "llama-cpp-python",
            "--venv",
            &venv,
            "--cache",
            &format!("{inner}/cache"),
            "--arch",
            "gfx1010;gfx1030",
            "--dry-run",
        ],
    );
    assert_eq!(plan.code, 0, "{}", show(&plan));
    for want in [
        "backend: rocm",
        "'-DGGML_HIP=ON'",
        "'-DCMAKE_HIP_ARCHITECTURES=gfx1010;gfx1030'",
        "sdist: llama-cpp-python 0.3.36",
    ] {
        assert!(plan.stdout.contains(want), "{want}: {}", show(&plan));
    }
    assert!(
        !work.path().join("cache/sdists").exists(),
        "nothing is fetched by a plan"
    );
}

/// llama-cpp-python's TOML recipe built for real with HIP in sid's ROCm 6.4 for gfx1010 and
/// gfx1030, from its sdist (offline, from `cache/llama/sdists`): verified by importing the
/// package; doctor reads code objects for exactly those archs from `libggml-hip.so`; and a
/// newer HIP (the SDK's `hip_version.h` one patch release on, bind-mounted over the real one
/// for that command only) makes status call the build stale, naming the SDK.
/// About 12 minutes on 2 cores, too long for CI: runs only with `ROCBUILD_TEST_SLOW_HIP=1`.
#[test]
fn sid_rocm_6_4_builds_llama_cpp_python_hip_for_gfx1010_and_gfx1030() {
    if std::env::var_os("ROCBUILD_TEST_SLOW_HIP").is_none() {
        rocbuild_testkit::skip::skipped(
            "a 12-minute HIP build; set ROCBUILD_TEST_SLOW_HIP=1 to run it",
        );
        return;
    }
    let Some(root) = chroot("ROCBUILD_TEST_CHROOT_ROCM64", "sid-rocm6.4") else {
        return;
    };
    let sdist = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../cache/llama/sdists/llama_cpp_python-0.3.36.tar.gz");
    if !sdist.is_file() {
        rocbuild_testkit::skip::skipped(&format!(
            "{} is absent (the CPU llama test fetches it)",
            sdist.display()
        ));
        return;
    }
    let (work, inner, venv) = ct2_scene(&root, "rocbuild-e2e-llamahip-");
    std::fs::create_dir_all(work.path().join("sdists")).unwrap();
    std::fs::copy(
        &sdist,
        work.path().join("sdists").join(sdist.file_name().unwrap()),
    )
    .unwrap();
    let links = llama_wheels_in(&root, &work, &inner, &venv);
    let rb = format!("{inner}/rocbuild");
    let sdists = format!("{inner}/sdists");
    let cache = format!("{inner}/cache");
    let build = in_chroot(
        &root,
        &[
            ("ROCBUILD_SDISTS", &sdists),
            ("PIP_FIND_LINKS", &links),
            ("PIP_NO_INDEX", "1"),
        ],
        &[
            &rb,
            "llama-cpp-python",
            "--venv",
            &venv,
            "--cache",
            &cache,
            "--arch",
            "gfx1010;gfx1030",
        ],
    );
    assert_eq!(build.code, 0, "{}", show(&build));
    assert!(
        build.stdout.contains("verified: llama_cpp 0.3.36"),
        "{}",
        show(&build)
    );

    let doctor = |arch: &str| {
        in_chroot(
            &root,
            &[],
            &[
                &rb,
                "doctor",
                "llama-cpp-python",
                "--venv",
                &venv,
                "--gpu-arch",
                arch,
                "--no-load",
            ],
        )
    };
    let other = doctor("gfx1100");
    assert_ne!(other.code, 0, "{}", show(&other));
    assert!(
        other
            .stdout
            .contains("libggml-hip.so has code for gfx1010, gfx1030; not for gfx1100"),
        "{}",
        show(&other)
    );
    let own = doctor("gfx1030");
    assert_eq!(own.code, 0, "{}", show(&own));

    let status = |binds: &[(&Path, &str)]| {
        in_chroot_with(&root, binds, &[], &[&rb, "status", "--venv", &venv])
    };
    let fresh = status(&[]);
    assert!(
        fresh.stdout.contains("llama-cpp-python 0.3.36: fresh"),
        "{}",
        show(&fresh)
    );
    let (newer, bumped) = newer_hip_header(&root, work.path());
    let stale = status(&[(newer.as_path(), "/usr/include/hip/hip_version.h")]);
    assert!(
        stale.stdout.contains("llama-cpp-python 0.3.36: stale"),
        "{}",
        show(&stale)
    );
    assert!(stale.stdout.contains("SDK changed"), "{}", show(&stale));
    assert!(stale.stdout.contains(&bumped), "{}", show(&stale));
}

/// The venv of `ct2_scene` with llama-cpp-python's run-time requirements installed, and its
/// build backend (rocbuild's build-only tools) beside them: downloaded on the host for the
/// chroot's Python (3.14) and taken offline inside (the chroot trusts no proxy certificate the
/// host may). Returns the in-chroot wheel directory, for `PIP_FIND_LINKS`.
fn llama_wheels_in(root: &Path, work: &tempfile::TempDir, inner: &str, venv: &str) -> String {
    let site = chroot_site(&work.path().join("venv"));
    for fake in ["numpy-2.3.0.dist-info", "PyYAML-6.0.2.dist-info"] {
        std::fs::remove_dir_all(site.join(fake)).unwrap();
    }
    let wheels = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cache/wheels/llama-deps-cp314");
    let wanted = ["numpy", "typing-extensions", "diskcache", "jinja2"];
    if !wheels.join(".complete").exists() {
        run(Command::new("python3")
            .args(["-m", "pip", "download", "-q", "--disable-pip-version-check"])
            .args([
                "--only-binary=:all:",
                "--python-version",
                "3.14",
                "--implementation",
                "cp",
            ])
            .args(["--platform", "manylinux_2_28_x86_64", "-d"])
            .arg(&wheels)
            .args(wanted)
            .arg("scikit-build-core[pyproject]>=0.9.2"));
        std::fs::write(wheels.join(".complete"), "").unwrap();
    }
    copy_dir(&wheels, &work.path().join("wheels"));
    let py = format!("{venv}/bin/python");
    let links = format!("{inner}/wheels");
    let mut pip = vec![
        py.as_str(),
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--find-links",
        &links,
    ];
    pip.extend(wanted);
    let deps = in_chroot(root, &[], &pip);
    assert_eq!(deps.code, 0, "{}", show(&deps));
    links
}

/// sid's `hip_version.h` one patch release on, written into `dir`: (the file, the new patch).
fn newer_hip_header(root: &Path, dir: &Path) -> (PathBuf, String) {
    let header = root.join("usr/include/hip/hip_version.h");
    let newer = dir.join("hip_version.h");
    let text = std::fs::read_to_string(&header).unwrap();
    let patch = text
        .lines()
        .find_map(|l| l.strip_prefix("#define HIP_VERSION_PATCH "))
        .unwrap()
        .trim()
        .to_string();
    let bumped = (patch.parse::<u64>().unwrap() + 1).to_string();
    std::fs::write(
        &newer,
        text.replace(
            &format!("#define HIP_VERSION_PATCH {patch}"),
            &format!("#define HIP_VERSION_PATCH {bumped}"),
        ),
    )
    .unwrap();
    (newer, bumped)
}
