//! Whole `--dry-run` plans for GPU machines we do not have. The ROCm SDK layouts are fake
//! directory trees made by the tests (laid out as AMD's installers, TheRock's wheels and
//! /opt/rocm lay them out) and described by rocbuild's real probe; the rest of the machine
//! is a description.

use std::path::Path;

use rocbuild_probe::{discover_sdks, find_hip_runtime, Os, ProbeEnv};
use rocbuild_testkit::rocm::{
    fake_opt_rocm, fake_the_rock, fake_the_rock_multi_arch, fake_the_rock_multi_arch_expanded,
    fake_windows_hip_sdk, FakeSdk,
};
use serde_json::{json, Value};

use crate::common::*;
use crate::plans::machine;

fn touch(p: &Path) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, b"").unwrap();
}

/// Plan `args` for `m`; the temp dir is shown as [TMP].
fn plan(m: &Value, tmp: &Path, args: &[&str]) -> Out {
    let file = tmp.join("machine.json");
    std::fs::write(&file, serde_json::to_string_pretty(m).unwrap()).unwrap();
    let mut all = vec![
        "--dry-run",
        "--machine",
        file.to_str().unwrap(),
        "--cache",
        "/cache",
        "--jobs",
        "8",
    ];
    all.extend_from_slice(args);
    let mut out = rocbuild(&all, &[]);
    out.stdout = redact(&out.stdout, tmp);
    out.stderr = redact(&out.stderr, tmp);
    out
}

/// Snapshot a plan with the build-tree hashes hidden: they hash the (temporary) SDK paths.
macro_rules! snap {
    ($name:expr, $value:expr) => {
        insta::with_settings!({filters => vec![
            (r"(build[/\\][a-z0-9]+-[0-9.]+)-[0-9a-f]{12}", "$1-[HASH]"),
            (r"tools[/\\][0-9a-f]{16}", "tools/[HASH]"),
            (r"sha256 [0-9a-f]{16}", "sha256 [HASH]"),
        ]}, {
            insta::assert_snapshot!($name, $value);
        });
    };
}

fn ok(out: Out) -> String {
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    out.stdout
}

fn msvc() -> Value {
    json!({
        "cl": r"C:\VS\VC\Tools\MSVC\14.44\bin\Hostx64\x64\cl.exe",
        "found_by": r"the developer prompt (INCLUDE, LIB and VCToolsInstallDir=C:\VS\VC\Tools\MSVC\14.44)",
        "rc": r"C:\Program Files (x86)\Windows Kits\10\bin\10.0.26100.0\x64\rc.exe",
        "env": {
            "INCLUDE": r"C:\VS\VC\Tools\MSVC\14.44\include;C:\Program Files (x86)\Windows Kits\10\Include\10.0.26100.0\ucrt",
            "LIB": r"C:\VS\VC\Tools\MSVC\14.44\lib\x64;C:\Program Files (x86)\Windows Kits\10\Lib\10.0.26100.0\ucrt\x64",
            "PATH": r"C:\VS\VC\Tools\MSVC\14.44\bin\Hostx64\x64;C:\Windows\System32"
        }
    })
}

fn sdks(env: &ProbeEnv, os: Os, site: Option<&Path>) -> (Value, Value) {
    let sdks = discover_sdks(env, os, site);
    assert!(!sdks.is_empty());
    let rt = find_hip_runtime(env, os, None, site);
    (
        serde_json::to_value(sdks).unwrap(),
        serde_json::to_value(rt).unwrap(),
    )
}

#[test]
fn windows_therock_pip_rocm_7_2_gfx1201_ctranslate2() {
    let tmp = tempfile::tempdir().unwrap();
    let site = tmp.path().join("venv/Lib/site-packages");
    let spec = FakeSdk {
        version: "7.2.0",
        tensile: &["gfx1100", "gfx1201"],
        ..FakeSdk::default()
    };
    fake_the_rock(&site, true, &spec);
    let env = ProbeEnv::rooted(tmp.path());
    touch(&env.system32.join("amdhip64_6.dll"));
    let (sdks, rt) = sdks(&env, Os::Windows, Some(&site));
    let mut m = machine("windows");
    m["python"]["site_packages"] = json!(site);
    m["torch"] = Value::Null;
    m["ffmpeg"] = Value::Null;
    m["rocm_sdks"] = sdks;
    m["hip_runtime"] = rt;
    m["tools"]["msvc"] = msvc();
    let p = ok(plan(
        &m,
        tmp.path(),
        &["ctranslate2", "--version", "4.8.1", "--arch", "gfx1201"],
    ));
    assert!(p.contains("backend: rocm (--rocm/--arch given)"), "{p}");
    assert!(p.contains("-DWITH_HIP=ON"), "{p}");
    assert!(p.contains("-DCMAKE_HIP_ARCHITECTURES=gfx1201"), "{p}");
    assert!(
        p.contains("_rocm_sdk_devel/lib/llvm/bin/amdclang++.exe"),
        "{p}"
    );
    assert!(
        p.contains("-DCMAKE_RC_COMPILER=C:/Program Files (x86)/Windows Kits"),
        "{p}"
    );
    assert!(p.contains("DISTUTILS_USE_SDK=1"), "{p}");
    // ROCm 7: hipBLAS 3 API as upstream expects, no v2 define; torch's arch list unknown.
    assert!(!p.contains("HIPBLAS_V2"), "{p}");
    // TheRock's runtime is the one that runs (the venv's, not the driver's 6): no warning.
    assert!(!p.contains("warning:"), "{p}");
    assert!(
        p.contains("expect commit: 0d8bcd362ac75ef860ef161d6f0efad0ae439ff0"),
        "{p}"
    );
    assert!(!p.contains("third_party/cutlass"), "{p}");
    snap!("windows_therock_7_2_gfx1201_ctranslate2", p);
}

#[test]
fn windows_hip_sdk_6_2_with_a_rocm_6_driver_and_hip_path_naming_7_1_gfx1010_ctranslate2() {
    let tmp = tempfile::tempdir().unwrap();
    let env0 = ProbeEnv::rooted(tmp.path());
    let old = FakeSdk {
        version: "6.2.4",
        targets: &["gfx1010", "gfx1030", "gfx1100"],
        tensile: &["gfx1030", "gfx1100"],
        hipblas: Some((2, 2, 0)),
        ..FakeSdk::default()
    };
    let new = FakeSdk {
        version: "7.1.0",
        ..FakeSdk::default()
    };
    let v62 = fake_windows_hip_sdk(&env0.program_files, "6.2", &old);
    let v71 = fake_windows_hip_sdk(&env0.program_files, "7.1", &new);
    touch(&env0.system32.join("amdhip64_6.dll"));
    let env = env0
        .with_var("HIP_PATH", format!("{}\\", v71.display()))
        .with_var("HIP_PATH_62", v62.display().to_string())
        .with_var("HIP_PATH_71", v71.display().to_string());
    let (sdks, rt) = sdks(&env, Os::Windows, None);
    let mut m = machine("windows");
    m["torch"] = Value::Null;
    m["ffmpeg"] = Value::Null;
    m["rocm_sdks"] = sdks;
    m["hip_runtime"] = rt;
    m["tools"]["msvc"] = msvc();
    let p = ok(plan(&m, tmp.path(), &["ctranslate2", "--arch", "gfx1010"]));
    assert!(
        p.contains("ROCM_PATH=[TMP]/Program Files/AMD/ROCm/6.2"),
        "{p}"
    );
    assert!(p.contains("HIP_PATH names ROCm 7.1.0"), "{p}");
    assert!(p.contains("-DCMAKE_HIP_ARCHITECTURES=gfx1010"), "{p}");
    // ROCm 6: hipBLAS's v2 API must be asked for.
    assert!(p.contains("-DCMAKE_HIP_FLAGS=-DHIPBLAS_V2"), "{p}");
    // No Tensile files for gfx1010 in this SDK's rocBLAS: said before the build.
    assert!(p.contains("gfx1010") && p.contains("Tensile"), "{p}");
    // The SDK's DLLs are found through the preload hook, from the chosen SDK only.
    assert!(
        p.contains("preload the DLLs needed from: [TMP]/Program Files/AMD/ROCm/6.2\\bin"),
        "{p}"
    );
    assert!(
        !p.contains("preload the DLLs needed from: [TMP]/Program Files/AMD/ROCm/7.1"),
        "{p}"
    );
    snap!("windows_hip_sdk_6_2_gfx1010_ctranslate2", p);
}

#[test]
fn windows_gfx1201_with_the_6_2_sdk_is_refused_naming_the_missing_device_library() {
    let tmp = tempfile::tempdir().unwrap();
    let env = ProbeEnv::rooted(tmp.path());
    let old = FakeSdk {
        version: "6.2.4",
        targets: &["gfx1010", "gfx1030", "gfx1100"],
        ..FakeSdk::default()
    };
    fake_windows_hip_sdk(&env.program_files, "6.2", &old);
    let (sdks, rt) = sdks(&env, Os::Windows, None);
    let mut m = machine("windows");
    m["torch"] = Value::Null;
    m["ffmpeg"] = Value::Null;
    m["rocm_sdks"] = sdks;
    m["hip_runtime"] = rt;
    let out = plan(&m, tmp.path(), &["ctranslate2", "--arch", "gfx1201"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stderr.contains("oclc_isa_version_1201.bc"),
        "{}",
        out.stderr
    );
    snap!("refused_gfx1201_on_6_2", out.stderr);
}

#[test]
fn linux_opt_rocm_7_2_two_archs() {
    let tmp = tempfile::tempdir().unwrap();
    let env = ProbeEnv::rooted(tmp.path());
    fake_opt_rocm(tmp.path(), "rocm-7.2.0", &FakeSdk::default());
    let (sdks, rt) = sdks(&env, Os::Linux, None);
    let mut m = machine("linux");
    m["rocm_sdks"] = sdks;
    m["hip_runtime"] = rt;
    let p = ok(plan(
        &m,
        tmp.path(),
        &["ctranslate2", "--arch", "gfx1100;gfx1030"],
    ));
    assert!(p.contains("backend: rocm"), "{p}");
    assert!(
        p.contains("'-DCMAKE_HIP_ARCHITECTURES=gfx1100;gfx1030'"),
        "{p}"
    );
    assert!(
        p.contains("HIP_DEVICE_LIB_PATH=[TMP]/opt/rocm-7.2.0/amdgcn/bitcode"),
        "{p}"
    );
    // The SDK's libraries are found where the SDK keeps them, never copied.
    assert!(
        p.contains("RUNPATH: $ORIGIN:[TMP]/opt/rocm-7.2.0/lib"),
        "{p}"
    );
    snap!("linux_opt_rocm_7_2_gfx1100_gfx1030_ctranslate2", p);
}

#[test]
fn linux_rocm_torch_picks_the_rocm_backend_by_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let env = ProbeEnv::rooted(tmp.path());
    fake_opt_rocm(tmp.path(), "rocm-7.2.0", &FakeSdk::default());
    let (sdks, rt) = sdks(&env, Os::Linux, None);
    let mut m = machine("linux");
    m["rocm_sdks"] = sdks;
    m["hip_runtime"] = rt;
    m["gpu"] = json!({"archs": ["gfx1100"], "found_by": "rocminfo", "steps": ["rocminfo: gfx1100"], "hsa_override": null});
    let p = ok(plan(&m, tmp.path(), &["ctranslate2"]));
    assert!(
        p.contains("backend: rocm (torch is a ROCm build and a ROCm SDK is installed)"),
        "{p}"
    );
    assert!(p.contains("-DCMAKE_HIP_ARCHITECTURES=gfx1100"), "{p}");
}

#[test]
fn linux_cpu_ctranslate2() {
    let tmp = tempfile::tempdir().unwrap();
    let mut m = machine("linux");
    m["torch"] = Value::Null;
    let p = ok(plan(&m, tmp.path(), &["ctranslate2"]));
    assert!(p.contains("backend: cpu (no torch to follow"), "{p}");
    assert!(
        !p.contains("ffmpeg:"),
        "CTranslate2 does not use FFmpeg\n{p}"
    );
    for d in [
        "-DWITH_MKL=OFF",
        "-DWITH_OPENBLAS=ON",
        "-DWITH_RUY=ON",
        "-DOPENMP_RUNTIME=COMP",
    ] {
        assert!(p.contains(d), "{d}\n{p}");
    }
    assert!(!p.contains("WITH_HIP"), "{p}");
    assert!(
        p.contains("CTRANSLATE2_ROOT=/cache/build/ctranslate2-4.8.1-"),
        "{p}"
    );
    assert!(p.contains("RUNPATH: $ORIGIN\n"), "{p}");
    assert!(
        p.contains("submodules: third_party/spdlog, third_party/cpu_features, third_party/ruy"),
        "{p}"
    );
    snap!("linux_cpu_ctranslate2", p);
}

/// A Linux machine whose venv has a CUDA 12.8 torch and a CUDA toolkit at `cuda_home`.
fn cuda_12_8_machine(cuda_home: &str) -> Value {
    let mut m = machine("linux");
    m["torch"]["version"] = json!("2.9.1+cu128");
    m["torch"]["flavor"] = json!("cuda");
    m["torch"]["hip"] = Value::Null;
    m["torch"]["cuda"] = json!("12.8");
    m["toolkits"] = json!({"cuda_home": cuda_home, "rocm_path": null, "hip_clang_path": null});
    m
}

#[test]
fn linux_cuda_ctranslate2() {
    let tmp = tempfile::tempdir().unwrap();
    let m = cuda_12_8_machine("/usr/local/cuda-12.8");
    let p = ok(plan(
        &m,
        tmp.path(),
        &[
            "ctranslate2",
            "--cuda-arch",
            "8.6",
            "--cuda-arch",
            "8.9;12.0+PTX",
        ],
    ));
    assert!(p.contains("backend: cuda"), "{p}");
    // FindCUDA names no two-digit major: 12.0 goes to nvcc as a -gencode flag.
    assert!(p.contains("'-DCUDA_ARCH_LIST=8.6;8.9'"), "{p}");
    assert!(
        p.contains("'-DCUDA_NVCC_FLAGS=-gencode=arch=compute_120,code=[sm_120,compute_120]'"),
        "{p}"
    );
    assert!(p.contains("-DWITH_CUDA=ON"), "{p}");
    assert!(
        p.contains("-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12.8/bin/nvcc"),
        "{p}"
    );
    // cutlass is only compiled with WITH_FLASH_ATTN (off): not fetched.
    assert!(
        p.contains("third_party/thrust") && !p.contains("cutlass"),
        "{p}"
    );
    snap!("linux_cuda_ctranslate2", p);
}

/// A CUDA 13 toolkit for a venv whose torch is CUDA 12: the plan says what the build will need
/// at run time that torch's wheels do not bring, and that bitsandbytes, which picks its library
/// by torch's CUDA, takes none of another major. A toolkit of torch's own major says nothing.
#[test]
fn a_toolkit_of_another_cuda_major_than_torchs_is_told() {
    let tmp = tempfile::tempdir().unwrap();
    let m = cuda_12_8_machine("/opt/cuda");
    let args = |v: &'static str| {
        [
            "bitsandbytes",
            "--backend",
            "cuda",
            "--cuda",
            v,
            "--cuda-arch",
            "9.0",
        ]
    };
    let p = ok(plan(&m, tmp.path(), &args("13.2")));
    assert!(
        p.contains("torch is a CUDA 12.8 build and this build is CUDA 13.2: at run time it needs CUDA 13's own libraries (libcudart.so.13"),
        "{p}"
    );
    let p = ok(plan(&m, tmp.path(), &args("12.9")));
    assert!(!p.contains("torch is a CUDA"), "{p}");
}

/// Without --cuda-arch, the plan builds for the GPUs the probe found (nvidia-smi's compute
/// capabilities), and says where the list came from; nothing found: the toolkit's common list.
#[test]
fn linux_cuda_ctranslate2_for_the_detected_gpu() {
    let tmp = tempfile::tempdir().unwrap();
    let mut m = cuda_12_8_machine("/usr/local/cuda-12.8");
    m["cuda_gpu"] = json!({"archs": ["8.6", "8.9"], "found_by": "nvidia-smi",
        "steps": ["$TORCH_CUDA_ARCH_LIST: not set", "nvidia-smi: 8.6;8.9"]});
    let p = ok(plan(&m, tmp.path(), &["ctranslate2"]));
    assert!(p.contains("'-DCUDA_ARCH_LIST=8.6;8.9'"), "{p}");
    assert!(p.contains("(archs 8.6;8.9, from nvidia-smi)"), "{p}");
    m["cuda_gpu"] = json!({"archs": [], "found_by": "",
        "steps": ["$TORCH_CUDA_ARCH_LIST: not set", "nvidia-smi: not found"]});
    let p = ok(plan(&m, tmp.path(), &["ctranslate2"]));
    assert!(p.contains("-DCUDA_ARCH_LIST=Common"), "{p}");
    assert!(
        p.contains("from no GPU detected ($TORCH_CUDA_ARCH_LIST: not set; nvidia-smi: not found)"),
        "{p}"
    );
}

#[test]
fn windows_static_ffmpeg_is_refused_for_torchcodec() {
    let tmp = tempfile::tempdir().unwrap();
    let mut m = machine("windows");
    m["ffmpeg"]["bin"] = Value::Null;
    let out = plan(&m, tmp.path(), &["torchcodec", "--version", "0.9.1"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stderr.contains("static build"), "{}", out.stderr);
    assert!(out.stderr.contains("rocbuild ffmpeg"), "{}", out.stderr);
}

/// Intel oneAPI MKL found (Linux): `[with.mkl]` turns upstream's MKL backend on in place of
/// OpenBLAS. On Windows it is found but not used, and the plan says why.
#[test]
fn ctranslate2_cpu_uses_oneapi_mkl_when_found() {
    let tmp = tempfile::tempdir().unwrap();
    let mut m = machine("linux");
    m["torch"] = Value::Null;
    m["toolkits"]["mkl_root"] = json!("/opt/intel/oneapi/mkl/latest");
    let p = ok(plan(&m, tmp.path(), &["ctranslate2"]));
    for d in [
        "-DWITH_MKL=ON",
        "-DWITH_OPENBLAS=OFF",
        "-DMKL_ROOT=/opt/intel/oneapi/mkl/latest",
        "-DOPENMP_RUNTIME=COMP",
    ] {
        assert!(p.contains(d), "{d}\n{p}");
    }
    assert!(
        p.contains("mkl:    /opt/intel/oneapi/mkl/latest (used: Intel oneAPI MKL found"),
        "{p}"
    );
    // Without MKL: OpenBLAS, and no word of MKL.
    m["toolkits"]["mkl_root"] = Value::Null;
    let p = ok(plan(&m, tmp.path(), &["ctranslate2"]));
    assert!(
        p.contains("-DWITH_MKL=OFF") && p.contains("-DWITH_OPENBLAS=ON"),
        "{p}"
    );
    assert!(!p.contains("mkl:"), "{p}");
}

/// The brief's own usage line: `rocbuild torchcodec --arch gfx1201` on a ROCm torch. TorchCodec
/// has no GPU code: the build is its CPU build, made for the GPU named, which torch's own arch
/// list must hold.
#[test]
fn torchcodec_for_a_gpu_the_rocm_torch_has_code_for() {
    let tmp = tempfile::tempdir().unwrap();
    let mut m = machine("linux");
    m["gpu"] = json!({"archs": [], "found_by": "", "steps": [],
        "torch_arch_list": ["gfx1100", "gfx1101", "gfx1200", "gfx1201"]});
    let out = ok(plan(&m, tmp.path(), &["torchcodec", "--arch", "gfx1201"]));
    assert!(out.contains("  backend: cpu (torchcodec has no GPU code of its own: it runs with the ROCm torch, built for gfx1201)"), "{out}");
    assert!(
        out.contains("  gpu:    gfx1201 (from --arch; torch's ROCm: HIP 6.4.43482)"),
        "{out}"
    );
    assert!(
        out.contains("torch 2.9.1+rocm6.4 has code for gfx1201"),
        "{out}"
    );
    // --rocm naming torch's own ROCm is accepted too.
    ok(plan(
        &m,
        tmp.path(),
        &["torchcodec", "--rocm", "6.4", "--arch", "gfx1201"],
    ));

    // torch built without gfx1201: what, why, and the fix, before anything is fetched.
    m["gpu"]["torch_arch_list"] = json!(["gfx1030", "gfx1100"]);
    let out = plan(&m, tmp.path(), &["torchcodec", "--arch", "gfx1201"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("has no GPU code for gfx1201"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("hipErrorInvalidDeviceFunction"),
        "{}",
        out.stderr
    );

    // --rocm that is not torch's.
    let out = plan(&m, tmp.path(), &["torchcodec", "--rocm", "6.2"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("--rocm 6.2 is not the ROCm"),
        "{}",
        out.stderr
    );
}

/// On a CPU torch (the macOS machine) or a CUDA torch, `--arch gfx…` for TorchCodec gets a
/// clear answer: what, why, and how to fix it; not "add --backend rocm".
#[test]
fn torchcodec_arch_on_a_cpu_or_cuda_torch_is_answered() {
    let tmp = tempfile::tempdir().unwrap();
    let m = machine("macos");
    let out = plan(&m, tmp.path(), &["torchcodec", "--arch", "gfx1201"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let err = out.stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        err.contains(
            "--arch gfx1201 names an AMD GPU, but the venv's torch 2.9.1 is a CPU-only build"
        ),
        "{err}"
    );
    assert!(err.contains("install a ROCm torch"), "{err}");
    assert!(!err.contains("--backend rocm"), "{err}");
    let mut m = machine("linux");
    m["torch"]["hip"] = Value::Null;
    m["torch"]["cuda"] = json!("13.2");
    m["torch"]["flavor"] = json!("cuda");
    let out = plan(&m, tmp.path(), &["torchcodec", "--arch", "gfx1201"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("CUDA 13.2 build"), "{}", out.stderr);
}

/// TheRock's current multi-arch wheels in a Linux venv (ROCm 7.15 nightly, one device package,
/// gfx1100): the SDK is found in the venv with the wheels' full version, a build for gfx1100
/// goes ahead, and one for gfx1201 (which the compiler can target, but no kernels are
/// installed for) is warned about before anything is built, with the exact pip line.
#[test]
fn linux_the_rock_multi_arch_names_the_missing_device_package() {
    let tmp = tempfile::tempdir().unwrap();
    let site = tmp.path().join("venv/lib/python3.12/site-packages");
    fake_the_rock_multi_arch_expanded(&site, false, "7.15.0a20260630", &["gfx1100"]);
    let env = ProbeEnv::rooted(tmp.path());
    let (sdks, rt) = sdks(&env, Os::Linux, Some(&site));
    let mut m = machine("linux");
    m["python"]["site_packages"] = json!(site);
    m["rocm_sdks"] = sdks;
    m["hip_runtime"] = rt;
    let ok_plan = ok(plan(&m, tmp.path(), &["ctranslate2", "--arch", "gfx1100"]));
    assert!(ok_plan.contains("7.15.0a20260630"), "{ok_plan}");
    assert!(
        ok_plan.contains("_rocm_sdk_devel/lib/llvm/bin/amdclang++"),
        "{ok_plan}"
    );
    assert!(!ok_plan.contains("kernels for"), "{ok_plan}");
    let p = ok(plan(&m, tmp.path(), &["ctranslate2", "--arch", "gfx1201"]));
    assert!(
        p.contains("has no kernels for gfx1201 in rocBLAS, hipBLASLt, kernel packs"),
        "{p}"
    );
    assert!(
        p.contains("pip install rocm-sdk-device-gfx1201==7.15.0a20260630"),
        "{p}"
    );
}

/// The devel wheel installed but never expanded (no `rocm-sdk init` yet): the SDK cannot
/// compile, and the answer is the one command that expands it.
#[test]
fn the_rock_without_its_devel_expanded_names_rocm_sdk_init() {
    let tmp = tempfile::tempdir().unwrap();
    let site = tmp.path().join("venv/lib/python3.12/site-packages");
    fake_the_rock_multi_arch(&site, false, "10.0.0", &["gfx1201"]);
    let env = ProbeEnv::rooted(tmp.path());
    let found = discover_sdks(&env, Os::Linux, Some(&site));
    let rock = found
        .iter()
        .find(|s| s.root.starts_with(&site))
        .expect("TheRock's SDK in the venv");
    assert_eq!(rock.version.as_deref(), Some("10.0.0"));
    let problems = rock.problems.join("\n");
    assert!(
        problems.contains("installed but not expanded"),
        "{problems}"
    );
    assert!(
        problems.contains(&format!("{}/venv/bin/rocm-sdk init", tmp.path().display())),
        "{problems}"
    );
    let r = rock.the_rock.as_ref().unwrap();
    assert_eq!(
        (r.scheme.as_str(), r.devices.clone()),
        ("multi-arch", vec!["gfx1201".to_string()])
    );
    // What `rocm-sdk targets` prints, read from the same file.
    assert_eq!(r.build_targets.len(), 6, "{:?}", r.build_targets);
    // A GPU the build has a device package for, not installed: the pip line. One it was not
    // built for: no package to install, said so.
    let gap = rocbuild_probe::kernels::missing_for(rock, "gfx1100", &[]).unwrap();
    assert!(
        gap.contains("pip install rocm-sdk-device-gfx1100==10.0.0"),
        "{gap}"
    );
    let gap = rocbuild_probe::kernels::missing_for(rock, "gfx1010", &[]).unwrap();
    assert!(
        gap.contains("there is no rocm-sdk-device-gfx1010 of it"),
        "{gap}"
    );
    assert!(rocbuild_probe::kernels::missing_for(rock, "gfx1201", &[]).is_none());
}

/// TheRock's multi-arch wheels in a Windows venv: the DLLs are in `_rocm_sdk_core\bin` and
/// `_rocm_sdk_libraries\bin` (not the `_rocm_sdk_libraries_custom\bin` upstream CTranslate2's
/// `__init__.py` adds), and the preload hook adds both.
#[test]
fn windows_the_rock_multi_arch_dlls_are_preloaded_from_core_and_libraries() {
    let tmp = tempfile::tempdir().unwrap();
    let site = tmp.path().join("venv/Lib/site-packages");
    fake_the_rock_multi_arch_expanded(&site, true, "7.15.0", &["gfx1201"]);
    let env = ProbeEnv::rooted(tmp.path());
    touch(&env.system32.join("amdhip64_7.dll"));
    let (sdks, rt) = sdks(&env, Os::Windows, Some(&site));
    let mut m = machine("windows");
    m["python"]["site_packages"] = json!(site);
    m["torch"] = Value::Null;
    m["ffmpeg"] = Value::Null;
    m["rocm_sdks"] = sdks;
    m["hip_runtime"] = rt;
    m["tools"]["msvc"] = msvc();
    let p = ok(plan(&m, tmp.path(), &["ctranslate2", "--arch", "gfx1201"]));
    for part in ["_rocm_sdk_core", "_rocm_sdk_libraries"] {
        assert!(
            p.contains(&format!(
                "add_dll_directory + preload the DLLs needed from: [TMP]/venv/Lib/site-packages/{part}\\bin"
            )),
            "{part}: {p}"
        );
    }
    assert!(!p.contains("_rocm_sdk_libraries_custom"), "{p}");
    assert!(!p.contains("has no kernels for"), "{p}");
}

/// bitsandbytes' TOML recipe for a ROCm torch (HIP 6.4) and an SDK with hipBLASLt: HIP for
/// exactly the archs asked for, and the library named as the package will ask for it
/// (`libbitsandbytes_rocm64.so`, torch's HIP, not the SDK's 7.2).
#[test]
fn bitsandbytes_rocm_library_is_named_after_torchs_hip() {
    let tmp = tempfile::tempdir().unwrap();
    let env = ProbeEnv::rooted(tmp.path());
    let sdk = FakeSdk {
        targets: &["gfx1010", "gfx1030", "gfx1100"],
        ..FakeSdk::default()
    };
    fake_opt_rocm(tmp.path(), "rocm-7.2.0", &sdk);
    let (sdks, rt) = sdks(&env, Os::Linux, None);
    let mut m = machine("linux");
    m["rocm_sdks"] = sdks;
    m["hip_runtime"] = rt;
    for (n, at) in [
        ("hipblaslt", "/opt/rocm-7.2.0/include/hipblaslt"),
        ("hiprand", "/usr/include/hiprand"),
    ] {
        m["libraries"][n] = json!({ "at": at });
    }
    m["python"]["distributions"]["packaging"] = json!("25.0");
    m["python"]["distributions"]["numpy"] = json!("2.4.6");
    let p = ok(plan(
        &m,
        tmp.path(),
        &["bitsandbytes", "--arch", "gfx1010;gfx1030"],
    ));
    for want in [
        "'-DCOMPUTE_BACKEND=hip'",
        "'-DBNB_ROCM_ARCH=gfx1010;gfx1030'",
        "'-DCMAKE_HIP_ARCHITECTURES=gfx1010;gfx1030'",
        "'-DROCM_VERSION=64'",
        "artifacts: libbitsandbytes_rocm64.so (from the checkout, where the build writes them)",
    ] {
        assert!(p.contains(want), "{want}: {p}");
    }
}
