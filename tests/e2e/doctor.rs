//! `rocbuild doctor` on real venvs with real libraries: a torch-like C++ `libc10.so` built
//! twice (v1 exports `c10::foo(int)`, v2 does not), extensions linked against one or the other.

use std::path::{Path, PathBuf};

use crate::common::*;
use rocbuild_testkit::native::*;

/// A venv with the fake torch 2.9.1 whose `libc10.so` is the C++ v2 (no `c10::foo(int)`).
pub(crate) struct Venv {
    pub tmp: tempfile::TempDir,
    pub venv: PathBuf,
    site: PathBuf,
}

impl Venv {
    pub fn new() -> Venv {
        let tmp = tempfile::tempdir().unwrap();
        let venv = tmp.path().join("venv");
        let site = make_venv(&venv);
        install_fake_torch(&site, "2.9.1");
        torch_like_c10(&site.join("torch/lib"), false);
        Venv { tmp, venv, site }
    }

    pub fn root(&self) -> &Path {
        self.tmp.path()
    }

    /// A torchcodec whose core (for FFmpeg 5, which Debian 12 has) is `ext.cpp` linked
    /// against v1 (`use_foo`) or v2, plus `extra` link arguments.
    pub fn torchcodec(&self, use_foo: bool, extra: &[&str]) {
        let c10 = if use_foo {
            let v1 = self.root().join("torch-v1");
            torch_like_c10(&v1, true);
            v1
        } else {
            self.site.join("torch/lib")
        };
        let core = torch_extension(&self.root().join("build/libcore.so"), &c10, use_foo, extra);
        install_fake_torchcodec(&self.site, "0.10.0", &core, 5);
    }

    fn doctor(&self, extra: &[&str]) -> Out {
        let mut args = vec!["doctor", "--venv", self.venv.to_str().unwrap()];
        args.extend_from_slice(extra);
        rocbuild(&args, &[])
    }
}

/// Temp paths and the Python patch version out, for snapshots.
fn stable(out: &Out, root: &Path) -> String {
    let text = format!(
        "exit code: {}\n--- stdout\n{}\n--- stderr\n{}",
        out.code,
        redact(&out.stdout, root),
        redact(&out.stderr, root)
    );
    let mut lines = Vec::new();
    for l in text.lines() {
        let l = match l.find(", Python ") {
            Some(i) if l.starts_with("venv: ") => format!("{}, Python [VERSION]", &l[..i]),
            _ => l.to_string(),
        };
        lines.push(l);
    }
    lines.join("\n")
}

#[test]
fn a_good_extension_is_all_well() {
    let v = Venv::new();
    v.torchcodec(false, &[]);
    let out = v.doctor(&[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("ok    torchcodec 0.10.0: loads"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("ok    torch 2.9.1: loads"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("all is well"), "{}", out.stdout);
    insta::assert_snapshot!("doctor_good", stable(&out, v.root()));
    // The load test imported both packages, and wrote nothing into the venv.
    for pkg in ["torch", "torchcodec"] {
        assert!(
            !v.site.join(pkg).join("__pycache__").exists(),
            "doctor wrote {pkg}/__pycache__ into the venv"
        );
    }
}

#[test]
fn an_extension_built_for_another_torch_is_diagnosed_with_the_demangled_symbol() {
    let v = Venv::new();
    v.torchcodec(true, &[]);
    let out = v.doctor(&["torchcodec"]);
    assert_eq!(out.code, 4, "{}\n{}", out.stdout, out.stderr);
    // The ABI check names the symbol as a person reads it, and concludes.
    assert!(
        out.stdout
            .contains("libtorchcodec_core5.so needs 1 symbol that torch 2.9.1 does not export"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("c10::foo(int)  [_ZN3c103fooEi]"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("built for another torch than 2.9"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("run `rocbuild torchcodec`"),
        "{}",
        out.stdout
    );
    // The fresh child Python's own words.
    assert!(
        out.stdout
            .contains("FAIL  torchcodec 0.10.0: does not load"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("libtorchcodec_core5.so: undefined symbol: _ZN3c103fooEi"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("RuntimeError: Could not load libtorchcodec"),
        "{}",
        out.stdout
    );
    insta::assert_snapshot!("doctor_abi", stable(&out, v.root()));

    // The same as data.
    let out = v.doctor(&["torchcodec", "--json"]);
    assert_eq!(out.code, 4);
    let j: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let abi: Vec<&serde_json::Value> = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "abi")
        .collect();
    assert_eq!(abi.len(), 1, "{}", out.stdout);
    assert_eq!(abi[0]["severity"], "error");
    assert_eq!(abi[0]["subject"], "torchcodec");
    assert!(abi[0]["details"][0]
        .as_str()
        .unwrap()
        .starts_with("c10::foo(int)"));
    assert!(abi[0]["fix"]
        .as_str()
        .unwrap()
        .contains("rocbuild torchcodec"));
    assert_eq!(j["packages"][0]["loads"], false);
}

#[test]
fn a_missing_dependency_is_named() {
    let v = Venv::new();
    let helper = v.root().join("helper");
    stub_library(&helper, "libtorchcodec_helper.so.1");
    let l = format!("-L{}", helper.display());
    v.torchcodec(
        false,
        &["-Wl,--no-as-needed", &l, "-l:libtorchcodec_helper.so.1"],
    );
    let out = v.doctor(&["torchcodec"]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("libtorchcodec_core5.so cannot load: libtorchcodec_helper.so.1 not found"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("libtorchcodec_helper.so.1 (needed by libtorchcodec_core5.so; "),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("libtorchcodec_helper.so.1: cannot open shared object file"),
        "{}",
        out.stdout
    );
    insta::assert_snapshot!("doctor_missing", stable(&out, v.root()));
    // Found nowhere in the venv: no repair would do, so none is offered.
    assert!(!out.stdout.contains("rocbuild repair"), "{}", out.stdout);

    // The same library elsewhere in the venv (another package's lib dir), off the loader's
    // path: a repair suffices, and the fix says so instead of a rebuild.
    let elsewhere = v.site.join("helperpkg/lib");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::copy(
        helper.join("libtorchcodec_helper.so.1"),
        elsewhere.join("libtorchcodec_helper.so.1"),
    )
    .unwrap();
    // pip's record of who installed it: the fix names the distribution.
    let di = v.site.join("helper_pkg-1.0.dist-info");
    std::fs::create_dir_all(&di).unwrap();
    std::fs::write(
        di.join("METADATA"),
        "Metadata-Version: 2.1\nName: helper-pkg\nVersion: 1.0\n",
    )
    .unwrap();
    std::fs::write(
        di.join("RECORD"),
        "helperpkg/lib/libtorchcodec_helper.so.1,,\nhelper_pkg-1.0.dist-info/RECORD,,\n",
    )
    .unwrap();
    let out = v.doctor(&["torchcodec", "--json"]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    let j: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let missing: Vec<&serde_json::Value> = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "missing" && f["severity"] == "error")
        .collect();
    assert_eq!(missing.len(), 1, "{}", out.stdout);
    let fix = missing[0]["fix"].as_str().unwrap();
    assert!(
        fix.starts_with("run `rocbuild repair torchcodec` (makes libtorchcodec_helper.so.1 findable from helperpkg/lib (installed by helper-pkg); no rebuild needed)"),
        "{fix}"
    );
    assert!(!fix.contains("rocbuild torchcodec`"), "{fix}");
    let text = v.doctor(&["torchcodec"]);
    assert!(
        text.stdout
            .contains("fix: run `rocbuild repair torchcodec`"),
        "{}",
        text.stdout
    );
    // And the repair it names does make it load.
    let r = rocbuild(
        &["repair", "torchcodec", "--venv", v.venv.to_str().unwrap()],
        &[],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(v.doctor(&["torchcodec"]).code, 0);
}

#[test]
fn a_cuda_build_on_a_cpu_torch_is_the_wrong_flavor() {
    let v = Venv::new();
    let cuda = v.root().join("cuda");
    stub_library(&cuda, "libtorch_cuda.so");
    stub_library(&cuda, "libcudart.so.13");
    let l = format!("-L{}", cuda.display());
    v.torchcodec(
        false,
        &[
            "-Wl,--no-as-needed",
            &l,
            "-ltorch_cuda",
            "-l:libcudart.so.13",
        ],
    );
    let out = v.doctor(&["torchcodec"]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("torchcodec is a CUDA build, but torch 2.9.1 is a CPU-only build"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("libtorchcodec_core5.so needs libtorch_cuda.so, libcudart.so.13"),
        "{}",
        out.stdout
    );
    // What to do first: the flavor, before the missing libraries it explains.
    let flavor = out.stdout.find("[flavor]").unwrap();
    let missing = out.stdout.find("[missing]").unwrap();
    assert!(flavor < missing, "{}", out.stdout);
    insta::assert_snapshot!("doctor_flavor", stable(&out, v.root()));

    // Even with the CUDA libraries somewhere in the venv, a repair would only make a CUDA
    // build find CUDA beside a CPU torch: the fix stays a rebuild.
    let elsewhere = v.site.join("cudastuff/lib");
    std::fs::create_dir_all(&elsewhere).unwrap();
    for n in ["libtorch_cuda.so", "libcudart.so.13"] {
        std::fs::copy(cuda.join(n), elsewhere.join(n)).unwrap();
    }
    let out = v.doctor(&["torchcodec"]);
    assert!(!out.stdout.contains("rocbuild repair"), "{}", out.stdout);
    assert!(
        out.stdout.contains("run `rocbuild torchcodec`"),
        "{}",
        out.stdout
    );
}

#[test]
fn usage_errors_exit_2() {
    let v = Venv::new();
    let out = v.doctor(&["no-such-package"]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("unknown package `no-such-package`"),
        "{}",
        out.stderr
    );
    let out = rocbuild(
        &[
            "doctor",
            "--venv",
            v.root().join("nothing").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    let out = rocbuild(&["doctor", "--no-such-flag"], &[]);
    assert_eq!(out.code, 2);
}

#[test]
fn a_package_that_is_not_installed_is_a_finding() {
    let v = Venv::new();
    let out = v.doctor(&["torchcodec"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("torchcodec is not installed in this venv"),
        "{}",
        out.stdout
    );
}

#[test]
fn staleness_from_the_manifest() {
    let v = Venv::new();
    v.torchcodec(false, &[]);
    let core = v.site.join("torchcodec/libtorchcodec_core5.so");
    let manifest = serde_json::json!({
        "schema": 1, "recipe": "torchcodec", "version": "0.10.0", "recipe_hash": "x", "fingerprint": "y",
        "source_url": null, "source_commit": null, "torch_version": "2.8.0",
        "torch_git": null, "flavor": "cpu", "ffmpeg_major": 5, "python": "3.11", "defines": {},
        "runpath": [], "parked": [], "installed_at": 0,
        "files": [{"path": "torchcodec/libtorchcodec_core5.so", "sha256": "0".repeat(64), "size": std::fs::metadata(&core).unwrap().len()}],
    });
    // rocbuild's own manifest: sealed with the key of the cache doctor is given.
    let cache = v.root().join("cache");
    write_sealed_manifest(&v.site, &cache, &manifest.to_string());
    let out = v.doctor(&[
        "torchcodec",
        "--no-load",
        "--cache",
        cache.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            "rocbuild built torchcodec 0.10.0 against torch 2.8.0; the venv now has torch 2.9.1"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("torchcodec/libtorchcodec_core5.so was replaced"),
        "{}",
        out.stdout
    );
}

/// A HIP library built by hipcc for gfx1010: doctor reads the gfx targets from its offload
/// bundle and compares them with the GPU's (`--gpu-arch`, else `$PYTORCH_ROCM_ARCH`).
#[test]
fn gpu_code_for_another_arch_is_named() {
    let v = Venv::new();
    let lib = hip_library(&v.root().join("build/libctranslate2.so.4"), "gfx1010", &[]);
    install_fake_ctranslate2(&v.site, "4.8.1", &[&lib]);
    let out = v.doctor(&["ctranslate2", "--gpu-arch", "gfx1030"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("ctranslate2 has no GPU code for gfx1030"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("libctranslate2.so.4 has code for gfx1010; not for gfx1030"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("hipErrorInvalidDeviceFunction"),
        "{}",
        out.stdout
    );
    // A HIP build of a package that does not link torch is not the wrong flavor for a CPU torch.
    assert!(!out.stdout.contains("[flavor]"), "{}", out.stdout);
    let out = rocbuild(
        &["doctor", "--venv", v.venv.to_str().unwrap(), "ctranslate2"],
        &[("PYTORCH_ROCM_ARCH", "gfx1030;gfx1100")],
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("ctranslate2 has no GPU code for gfx1030, gfx1100"),
        "{}",
        out.stdout
    );
    let out = v.doctor(&["ctranslate2", "--gpu-arch", "gfx1010"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    // Unknown GPU: a note, not a failure.
    let out = v.doctor(&["ctranslate2"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("the GPU's architecture is unknown"),
        "{}",
        out.stdout
    );
}

/// Two libraries of one package finding two different HIP runtimes: one process, two ROCm.
#[test]
fn two_rocm_runtimes_in_one_closure() {
    let v = Venv::new();
    let other = v.root().join("opt/rocm-6.4.1/lib");
    stub_library(&other, "libamdhip64.so.6");
    let a = hip_library(&v.root().join("build/libctranslate2.so.4"), "gfx1010", &[]);
    let l = format!("-L{}", other.display());
    let r = format!("-Wl,-rpath,{}", other.display());
    let b = shared_library(
        "cc",
        &doctor_fixture("stub.c"),
        &v.root().join("build/libct2_extra.so"),
        &["-Wl,--no-as-needed", &l, "-l:libamdhip64.so.6", &r],
    );
    install_fake_ctranslate2(&v.site, "4.8.1", &[&a, &b]);
    let out = v.doctor(&["ctranslate2", "--gpu-arch", "gfx1010", "--no-load"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("two ROCm installations are loaded together (2 HIP runtimes)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("opt/rocm-6.4.1/lib/libamdhip64.so.6"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("libamdhip64.so.5"), "{}", out.stdout);
}

/// rocBLAS found by the closure, with its Tensile kernel files for other GPUs only: the first
/// GEMM would abort. The kernel files are what a community rocBLAS build adds.
#[test]
fn rocblas_without_tensile_kernels_for_the_gpu() {
    let v = Venv::new();
    let sdk = v.root().join("opt/rocm-6.2.4/lib");
    stub_library(&sdk, "librocblas.so.4");
    let l = format!("-L{}", sdk.display());
    let r = format!("-Wl,-rpath,{}", sdk.display());
    let lib = shared_library(
        "cc",
        &doctor_fixture("stub.c"),
        &v.root().join("build/libctranslate2.so.4"),
        &["-Wl,--no-as-needed", &l, "-l:librocblas.so.4", &r],
    );
    install_fake_ctranslate2(&v.site, "4.8.1", &[&lib]);
    // No rocblas/library at all.
    let out = v.doctor(&["ctranslate2", "--gpu-arch", "gfx1010", "--no-load"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("rocBLAS has no Tensile kernel directory"),
        "{}",
        out.stdout
    );
    let tensile = sdk.join("rocblas/library");
    std::fs::create_dir_all(&tensile).unwrap();
    for f in [
        "TensileLibrary_lazy_gfx1030.dat",
        "Kernels.so-000-gfx1030.hsaco",
        "TensileLibrary_lazy_gfx1100.dat",
    ] {
        std::fs::write(tensile.join(f), b"").unwrap();
    }
    let out = v.doctor(&["ctranslate2", "--gpu-arch", "gfx1010:xnack-", "--no-load"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("rocBLAS has no Tensile kernels for gfx1010"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("rocblas/library has kernels for gfx1030, gfx1100"),
        "{}",
        out.stdout
    );
    // The GPU rocBLAS has kernels for, and then the community kernels added for gfx1010.
    let out = v.doctor(&["ctranslate2", "--gpu-arch", "gfx1030", "--no-load"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    std::fs::write(tensile.join("TensileLibrary_lazy_gfx1010.dat"), b"").unwrap();
    let out = v.doctor(&["ctranslate2", "--gpu-arch", "gfx1010", "--no-load"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
}

#[test]
fn a_venv_without_any_known_package_has_nothing_to_check() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    make_venv(&venv);
    let out = rocbuild(&["doctor", "--venv", venv.to_str().unwrap()], &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("torch: not installed"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("nothing to check"), "{}", out.stdout);
}

/// TheRock's multi-arch packages in the venv with a device package for another GPU only: the
/// library has code for the GPU, but the math libraries have no kernels for it. doctor names
/// which kernel files are missing and the device package that brings them; once it is
/// installed, nothing is said.
#[test]
fn the_venvs_rocm_packages_without_kernels_for_the_gpu_name_the_device_package() {
    let v = Venv::new();
    let lib = hip_library(&v.root().join("build/libctranslate2.so.4"), "gfx1030", &[]);
    install_fake_ctranslate2(&v.site, "4.8.1", &[&lib]);
    let version = "7.15.0a20260630";
    rocbuild_testkit::rocm::fake_the_rock_multi_arch(&v.site, false, version, &["gfx1100"]);
    let out = v.doctor(&["ctranslate2", "--gpu-arch", "gfx1030", "--no-load"]);
    assert_ne!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("has no kernels for gfx1030 in rocBLAS, hipBLASLt, MIOpen, kernel packs"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains(&format!("pip install rocm-sdk-device-gfx1030=={version}")),
        "{}",
        out.stdout
    );
    rocbuild_testkit::rocm::fake_the_rock_multi_arch(
        &v.site,
        false,
        version,
        &["gfx1100", "gfx1030"],
    );
    let out = v.doctor(&["ctranslate2", "--gpu-arch", "gfx1030", "--no-load"]);
    assert!(!out.stdout.contains("has no kernels for"), "{}", out.stdout);
}

/// A package that loads one of several libraries, picked at run time (`[package]
/// loads-one-of`, bitsandbytes' one library per backend): the one that cannot load here (its
/// Intel runtime is not installed) is expected when another loads; without the recipe saying
/// so, it is an error.
#[test]
fn a_library_of_which_the_package_loads_another_is_not_an_error() {
    let v = Venv::new();
    let pkg = v.site.join("fakebnb");
    let build = v.root().join("build");
    let src = build.join("f.c");
    std::fs::create_dir_all(&build).unwrap();
    std::fs::write(&src, "int f(void) { return 1; }\n").unwrap();
    let sycl = build.join("libsycl.so.9");
    shared_library("cc", &src, &sycl, &["-Wl,-soname,libsycl.so.9"]);
    shared_library("cc", &src, &pkg.join("libfakebnb_cpu.so"), &[]);
    let uses = build.join("uses.c");
    std::fs::write(&uses, "int f(void);\nint g(void) { return f(); }\n").unwrap();
    shared_library(
        "cc",
        &uses,
        &pkg.join("libfakebnb_xpu.so"),
        &[sycl.to_str().unwrap()],
    );
    std::fs::write(pkg.join("__init__.py"), "").unwrap();
    let di = v.site.join("fakebnb-1.0.0.dist-info");
    std::fs::create_dir_all(&di).unwrap();
    std::fs::write(
        di.join("METADATA"),
        "Metadata-Version: 2.1\nName: fakebnb\nVersion: 1.0.0\n",
    )
    .unwrap();
    let recipes = v.root().join("recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    let recipe = |one_of: &str| {
        format!(
            "[package]\nname = \"fakebnb\"\ndistribution = \"fakebnb\"\nimport-dir = \"fakebnb\"\n{one_of}\n\
             [source]\ngit = \"https://example.invalid/fakebnb\"\ntag = \"v{{version}}\"\n\n\
             [[release]]\nversion = \"1.0.0\"\ntorch = \">=0\"\n\n[install]\nartifacts = [\"libfakebnb_*\"]\n"
        )
    };
    std::fs::write(recipes.join("fakebnb.toml"), recipe("")).unwrap();
    let run = || {
        v.doctor(&[
            "--recipes",
            recipes.to_str().unwrap(),
            "fakebnb",
            "--no-load",
        ])
    };
    let out = run();
    assert_ne!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("libsycl.so.9"), "{}", out.stdout);
    std::fs::write(
        recipes.join("fakebnb.toml"),
        recipe("loads-one-of = [\"libfakebnb_*\"]"),
    )
    .unwrap();
    let out = run();
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        !out.stdout.contains("libsycl.so.9 not found"),
        "{}",
        out.stdout
    );
}
