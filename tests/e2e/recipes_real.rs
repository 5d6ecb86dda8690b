//! The recipes that are TOML only (issue 32), built for real from their upstream sources on
//! this machine and checked by what the package does. They need the upstream git mirror
//! (`$ROCBUILD_TEST_MIRROR`; CI reaches no GitHub, so there they say SKIPPED).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// The mirror holding `repo` (`github.com/owner/name.git`), or None (said).
pub(crate) fn mirror_with(repo: &str) -> Option<PathBuf> {
    let Some(m) = std::env::var_os("ROCBUILD_TEST_MIRROR").map(PathBuf::from) else {
        rocbuild_testkit::skip::skipped(
            "ROCBUILD_TEST_MIRROR is not set (git mirrors of upstream sources: `cargo xtask test` sets it when cache/mirror holds them; CI reaches no GitHub and has none)",
        );
        return None;
    };
    if m.join(repo).is_dir() {
        Some(m)
    } else {
        rocbuild_testkit::skip::skipped(&format!("no {repo} under $ROCBUILD_TEST_MIRROR"));
        None
    }
}

/// A venv of its own holding the real PyPI torch (hard links to the shared one, which stays
/// untouched) plus `extra` from PyPI; None (SKIPPED said) without the real torch venv.
fn torch_venv_with(dir: &Path, extra: &[&str]) -> Option<PathBuf> {
    let venv = dir.join("venv");
    let real = crate::real_torch::real_torch_venv()?;
    let ok = Command::new("cp")
        .arg("-al")
        .arg(&real)
        .arg(&venv)
        .status()
        .unwrap();
    assert!(ok.success());
    if !extra.is_empty() {
        let out = Command::new(venv.join("bin/python"))
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .args(extra)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Some(venv)
}

/// bitsandbytes 0.50.1's CPU library, built from its tag by the TOML-only recipe: installed
/// where the package loads it, its quantization checked by rocbuild's own verification (8-bit
/// blockwise and NF4 within tolerance, with the native library, not the pure-torch fallback),
/// with no AVX-512 instruction in it (upstream's flags make one that dies with SIGILL on an
/// AVX2-only CPU, as this machine's); then status, doctor and restore work on it with no code of
/// their own for it.
#[test]
fn bitsandbytes_cpu_is_built_from_its_tag_and_quantizes() {
    let Some(mirror) = mirror_with("github.com/bitsandbytes-foundation/bitsandbytes.git") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let Some(venv) = torch_venv_with(tmp.path(), &["numpy", "packaging"]) else {
        return;
    };
    let v = venv.to_str().unwrap();
    let cache = tmp.path().join("cache");
    let mirror_s = mirror.display().to_string();
    let env = [("ROCBUILD_MIRROR", mirror_s.as_str())];
    let args = [
        "bitsandbytes",
        "--venv",
        v,
        "--cache",
        cache.to_str().unwrap(),
    ];
    // A CPU build: the index's own wheel would do, so it is built only when asked.
    let stock = rocbuild(&args, &env);
    assert_eq!(stock.code, 0, "{}\n{}", stock.stdout, stock.stderr);
    assert!(stock.stdout.contains("no build needed"), "{}", stock.stdout);
    let out = rocbuild(&[&args[..], &["--no-binary"]].concat(), &env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("verified: bitsandbytes 0.50.1 with libbitsandbytes_cpu.so"),
        "{}",
        out.stdout
    );
    let site = venv.join("lib/python3.11/site-packages");
    let so = site.join("bitsandbytes/libbitsandbytes_cpu.so");
    let lib = std::fs::read(&so).unwrap();
    assert!(lib.starts_with(b"\x7fELF"));
    // Built without upstream's target-wide AVX-512 flags (the recipe's note: on an AVX2-only
    // CPU such a library dies with SIGILL): not one EVEX-encoded (AVX-512) instruction, whose
    // first byte is 0x62 in 64-bit code (PyPI's 0.50.1 library has 1295).
    let dis = Command::new("objdump").arg("-d").arg(&so).output().unwrap();
    assert!(dis.status.success());
    let evex = String::from_utf8_lossy(&dis.stdout)
        .lines()
        .filter(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            cols.len() >= 3 && cols[1].starts_with("62 ")
        })
        .count();
    assert_eq!(evex, 0, "AVX-512 instructions in {}", so.display());
    let c = cache.to_str().unwrap();
    let status = rocbuild(&["status", "--venv", v, "--cache", c], &[]);
    assert!(
        status.stdout.contains("bitsandbytes 0.50.1: fresh"),
        "{}",
        status.stdout
    );
    let doctor = rocbuild(&["doctor", "--venv", v, "--cache", c, "bitsandbytes"], &[]);
    assert_eq!(doctor.code, 0, "{}\n{}", doctor.stdout, doctor.stderr);
    let restore = rocbuild(&["restore", "bitsandbytes", "--venv", v, "--cache", c], &[]);
    assert_eq!(restore.code, 0, "{}", restore.stderr);
    assert!(!site.join("bitsandbytes").exists());
}

/// bitsandbytes 0.50.1's CUDA library (issue 41), built by the same TOML-only recipe with the
/// CUDA 13.2 toolkit rocbuild assembles from the package index, for sm_90 only (the lent GPU
/// machines' arch; `cargo xtask gpu-check --prepare` makes the same build): named after the
/// toolkit as the package looks it up, holding sm_90 SASS and nothing else,
/// verified here without a GPU through its own CPU kernels, said by doctor to lack a driver (not
/// to be broken), made into a `+cu132` wheel; and the GPU check's script runs its comparisons on
/// it with the CPU on both sides.
#[test]
fn bitsandbytes_cuda_is_built_with_the_index_toolkit_for_sm_90() {
    let Some(CudaWorld { tmp, venv, env }) = cuda_world(
        "github.com/bitsandbytes-foundation/bitsandbytes.git",
        // As its users have it: PyPI's wheel installed by pip, upstream's libraries in it.
        &["numpy", "packaging", "bitsandbytes==0.50.1"],
    ) else {
        return;
    };
    let v = venv.to_str().unwrap();
    let cache = tmp.path().join("cache");
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args = [
        "bitsandbytes",
        "--backend",
        "cuda",
        "--cuda",
        "13.2",
        "--cuda-arch",
        "9.0",
        "--no-binary",
        "--venv",
        v,
        "--cache",
        cache.to_str().unwrap(),
    ];
    let out = rocbuild(&args, &env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("verified: bitsandbytes 0.50.1 with libbitsandbytes_cuda132.so")
            && out
                .stdout
                .contains("none here, its CUDA kernels were not run"),
        "{}",
        out.stdout
    );
    let so = venv.join("lib/python3.11/site-packages/bitsandbytes/libbitsandbytes_cuda132.so");
    upstreams_cuda_libraries_are_parked(&venv, &out.stdout);
    // SASS only: upstream asks nvcc for compute_90 PTX too, but compiles with relocatable
    // device code, and the device link keeps only the cubin (cuobjdump agrees: one sm_90 ELF,
    // no PTX).
    built_for_cuda_without_a_gpu(tmp.path(), &venv, "bitsandbytes 0.50.1", &so, &["sm_90"]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../xtask/src/gpu_check/check.py");
    let none = Command::new(venv.join("bin/python"))
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(
        none.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&none.stdout)
    );
    let cpu = Command::new(venv.join("bin/python"))
        .arg(&script)
        .args(["--device", "cpu"])
        .env("BNB_CUDA_VERSION", "132")
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&cpu.stdout);
    assert_eq!(
        cpu.status.code(),
        Some(0),
        "{said}{}",
        String::from_utf8_lossy(&cpu.stderr)
    );
    assert!(said.contains("\"ok\": true"), "{said}");
    let rebuilt = std::fs::read(&so).unwrap();
    let back = rocbuild(
        &[
            "restore",
            "bitsandbytes",
            "--venv",
            v,
            "--cache",
            cache.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(back.code, 0, "{}\n{}", back.stdout, back.stderr);
    let pkg = venv.join("lib/python3.11/site-packages/bitsandbytes");
    assert!(
        pkg.join("libbitsandbytes_cuda130.so").is_file()
            && std::fs::read(&so).is_ok_and(|upstreams| upstreams != rebuilt),
        "restore puts upstream's libraries back, its own _cuda132 in place of the rebuild:\n{}",
        back.stdout
    );
}

/// PyPI's Python part of bitsandbytes comes with upstream's own CUDA libraries, and the package
/// takes an exact match with torch's CUDA first: they are parked, so the rebuilt one is the only
/// CUDA library left, and the package's own choice for a CUDA 13.0 torch (the lent GPU
/// machine's) and a 13.2 one (this venv's) is the rebuild. `restore` puts them back.
fn upstreams_cuda_libraries_are_parked(venv: &Path, said: &str) {
    let pkg = venv.join("lib/python3.11/site-packages/bitsandbytes");
    let mut cuda: Vec<String> = std::fs::read_dir(&pkg)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("libbitsandbytes_cuda"))
        .collect();
    cuda.sort();
    assert_eq!(cuda, ["libbitsandbytes_cuda132.so"], "{said}");
    assert!(
        said.contains("parked:   bitsandbytes/libbitsandbytes_cuda130.so"),
        "{said}"
    );
    let chosen = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "from bitsandbytes.cextension import get_cuda_bnb_library_path as p\n\
             from bitsandbytes.cuda_specs import CUDASpecs as S\n\
             for v in ((13, 0), (13, 2)):\n\
             \tprint(p(S((9, 0), '%d%d' % v, v)).name)",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&chosen.stdout),
        "libbitsandbytes_cuda132.so\nlibbitsandbytes_cuda132.so\n",
        "{}",
        String::from_utf8_lossy(&chosen.stderr)
    );
}

/// CTranslate2 4.8.1 for CUDA with the CUDA 13.2 toolkit from the package index (issue 41),
/// for the compute capabilities faster-whisper users' GPUs have that upstream's CUDA 12 wheels
/// skip or cover (8.6, 8.9, 9.0, 12.0) plus PTX for the newest: all 25 CUDA sources compile
/// against 4.8.1's own cccl 2.7.0, the library holds SASS for exactly those archs and PTX for
/// 12.0, it loads and translates on this GPU-less machine's CPU, counts 0 CUDA devices, doctor
/// says there is no driver (not a broken build, not stale), and `wheel` labels it `+cu132`.
/// Needs the mirror (CTranslate2 and its spdlog, cpu_features, ruy, cpuinfo and cccl).
#[test]
fn ctranslate2_cuda_13_is_built_with_the_index_toolkit() {
    let Some(CudaWorld { tmp, venv, env }) =
        cuda_world("github.com/OpenNMT/CTranslate2.git", &["numpy", "pyyaml"])
    else {
        return;
    };
    let v = venv.to_str().unwrap();
    let cache = tmp.path().join("cache");
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let t0 = std::time::Instant::now();
    let out = rocbuild(
        &[
            "ctranslate2",
            "--backend",
            "cuda",
            "--cuda",
            "13.2",
            "--cuda-arch",
            "8.6;8.9;9.0;12.0+PTX",
            "--no-binary",
            "-D",
            "WITH_DNNL=OFF",
            "--venv",
            v,
            "--cache",
            cache.to_str().unwrap(),
        ],
        &env,
    );
    eprintln!(
        "ctranslate2 4.8.1 CUDA build: {:.0} s",
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("verified: ctranslate2 4.8.1 generated"),
        "{}",
        out.stdout
    );
    let so = venv.join("lib/python3.11/site-packages/ctranslate2/libctranslate2.so.4");
    let codes = ["compute_120", "sm_120", "sm_86", "sm_89", "sm_90"];
    built_for_cuda_without_a_gpu(tmp.path(), &venv, "ctranslate2 4.8.1", &so, &codes);
    let py = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import ctranslate2; print(ctranslate2.get_cuda_device_count())",
        ])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&py.stdout).trim(), "0", "{py:?}");
}

/// What a CUDA build from a real upstream source needs here: the mirror holding the repo, the
/// cached CUDA toolkit wheels (offline), and a venv of its own over the real torch.
struct CudaWorld {
    tmp: tempfile::TempDir,
    venv: PathBuf,
    /// ROCBUILD_MIRROR and ROCBUILD_CUDA_WHEELS.
    env: [(&'static str, String); 2],
}

/// A [`CudaWorld`] for `repo` with `extra` pip-installed; None (said) without the mirror or
/// the wheels.
fn cuda_world(repo: &str, extra: &[&str]) -> Option<CudaWorld> {
    let mirror = mirror_with(repo)?;
    let wheels = crate::cuda_build::cuda_wheels()?;
    let tmp = tempfile::tempdir().unwrap();
    let venv = torch_venv_with(tmp.path(), extra)?;
    let env = [
        ("ROCBUILD_MIRROR", mirror.display().to_string()),
        ("ROCBUILD_CUDA_WHEELS", wheels.display().to_string()),
    ];
    Some(CudaWorld { tmp, venv, env })
}

/// A CUDA build installed on this GPU-less machine (`package` is `NAME VERSION`): its library
/// holds exactly `codes` (SASS and PTX, read from its .nv_fatbin), doctor says there is no
/// NVIDIA driver and finds nothing wrong (not broken, not stale), status says fresh, and
/// `wheel` labels it with the toolkit's CUDA (`+cu132`).
fn built_for_cuda_without_a_gpu(
    tmp: &Path,
    venv: &Path,
    package: &str,
    lib: &Path,
    codes: &[&str],
) {
    let (name, version) = package.split_once(' ').unwrap();
    let v = venv.to_str().unwrap();
    // The build's cache: its key sealed the manifest status and wheel read.
    let cache = tmp.join("cache");
    let c = cache.to_str().unwrap();
    let found = rocbuild_native::nv_fatbin_codes(&std::fs::read(lib).unwrap()).unwrap();
    let mut names: Vec<String> = found.iter().map(|c| c.name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names, codes, "{found:?}");
    let doctor = rocbuild(
        &["doctor", "--venv", v, "--cache", c, name],
        &[("PATH", "/usr/bin:/bin")],
    );
    assert_eq!(doctor.code, 0, "{}\n{}", doctor.stdout, doctor.stderr);
    assert!(
        doctor.stdout.contains("no NVIDIA driver here"),
        "{}",
        doctor.stdout
    );
    let status = rocbuild(&["status", "--venv", v, "--cache", c], &[]);
    assert!(
        status.stdout.contains(&format!("{package}: fresh")),
        "{}",
        status.stdout
    );
    let dist = tmp.join("dist");
    let wheel = rocbuild(
        &[
            "wheel",
            name,
            "--out",
            dist.to_str().unwrap(),
            "--venv",
            v,
            "--cache",
            c,
        ],
        &[],
    );
    assert_eq!(wheel.code, 0, "{}", wheel.stderr);
    let made: Vec<String> = std::fs::read_dir(&dist)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let want = format!("{name}-{version}+cu132");
    assert!(made.len() == 1 && made[0].starts_with(&want), "{made:?}");
}

/// The repository's cache directory (kept between runs: downloads and build trees).
fn repo_cache(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../cache")
        .join(name)
}

/// llama-cpp-python 0.3.36 from its PyPI sdist (pinned by sha256; the sdist carries llama.cpp),
/// built for this CPU by the TOML-only recipe through the generic sdist source: installed as
/// the wheel lays it out (`llama_cpp/lib/libllama.so` and its versioned names), loaded by the
/// package, and it generates tokens from a tiny random-weight model this test writes with the
/// `gguf` package. Then status, doctor, wheel and restore work with no code of their own for it.
/// Runs in CI: PyPI is reachable there; the sdist and the build tree are kept in `cache/llama`.
/// Built with `-D LLAVA_BUILD=OFF`, as a user who needs no multimodal models can: it leaves
/// out libmtmd (53 of 193 build steps, about a quarter of the build's CPU time, issue 55;
/// llama.cpp's common library stays, which llama-cpp-python's CMakeLists forces on); and with
/// `-D CMAKE_BUILD_TYPE=Debug` over the recipe's Release, as a user who wants a build to step
/// through: `-O0 -g`, which compiles in about half the CPU time (ggml-cpu's ops.cpp 2.3 s
/// against 13.9 s at `-O3`, llama-model.cpp 10.7 s against 17.2 s: issue 55, a bare CI run's
/// slowest test); the tiny model generates as well either way. The whole build, mtmd included, is `sid_rocm_6_4_builds_llama_cpp_python_hip_*`
/// (opt-in, 12 min).
#[test]
fn llama_cpp_python_cpu_is_built_from_its_sdist_and_generates() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let py = |args: &[&str]| {
        let out = Command::new(venv.join("bin/python"))
            .args(args)
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let ok = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(ok.success());
    py(&[
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        "typing-extensions",
        "numpy",
        "diskcache",
        "jinja2",
        "gguf",
    ]);
    let v = venv.to_str().unwrap();
    let cache = repo_cache("llama");
    let out = rocbuild(
        &[
            "llama-cpp-python",
            "--venv",
            v,
            "--cache",
            cache.to_str().unwrap(),
            "-D",
            "LLAVA_BUILD=OFF",
            "-D",
            "CMAKE_BUILD_TYPE=Debug",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("verified: llama_cpp 0.3.36"),
        "{}",
        out.stdout
    );
    let lib = venv
        .join("lib")
        .read_dir()
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let site = lib.join("site-packages");
    for name in [
        "libllama.so",
        "libllama.so.0",
        "libggml.so.0",
        "libggml-cpu.so.0",
    ] {
        assert!(site.join("llama_cpp/lib").join(name).is_file(), "{name}");
    }
    // The user's define won over upstream's default: no multimodal library was built.
    assert!(!site.join("llama_cpp/lib/libmtmd.so").exists());

    let model = tmp.path().join("tiny.gguf");
    let writer =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixture/llama/tiny_llama_gguf.py");
    py(&[writer.to_str().unwrap(), model.to_str().unwrap()]);
    let generated = py(&[
        "-c",
        "import sys, llama_cpp\n\
         llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=64, verbose=False, seed=1)\n\
         out = llm('abc', max_tokens=8, temperature=0.0)\n\
         print(out['usage']['completion_tokens'], repr(out['choices'][0]['text']))",
        model.to_str().unwrap(),
    ]);
    assert!(generated.starts_with("8 '"), "{generated}");

    every_feature_applies(&tmp, &venv, &site, &cache);
    upstream_tests_pass(&venv, &cache);
    published_and_generating_elsewhere(&tmp, &venv, &site, &cache, &model);
}

/// `rocbuild test`: the recipe's table of upstream's own tests, from the unpacked sdist the
/// build was made from (a build from an sdist records the sdist's sha256, not a commit).
fn upstream_tests_pass(venv: &Path, cache: &Path) {
    let out = rocbuild(
        &[
            "test",
            "llama-cpp-python",
            "--venv",
            venv.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
        ],
        &[],
    );
    let all = format!("{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "{all}");
    assert!(all.contains("the build's unpacked sdist"), "{all}");
    assert!(
        out.stdout
            .contains("llama-cpp-python 0.3.36: 8 passed, 0 failed (0 known, 0 new), 0 skipped"),
        "{all}"
    );
}

/// status, doctor, the plan as data, bundle, wheel and restore on the llama-cpp-python just
/// installed in `venv`: the features every recipe gets, with no code of their own for it.
fn every_feature_applies(tmp: &tempfile::TempDir, venv: &Path, site: &Path, cache: &Path) {
    let v = venv.to_str().unwrap();
    let c = cache.to_str().unwrap();
    let status = rocbuild(&["status", "--venv", v, "--cache", c], &[]);
    assert!(
        status.stdout.contains("llama-cpp-python 0.3.36: fresh"),
        "{}",
        status.stdout
    );
    let doctor = rocbuild(
        &["doctor", "--venv", v, "--cache", c, "llama-cpp-python"],
        &[],
    );
    assert_eq!(doctor.code, 0, "{}\n{}", doctor.stdout, doctor.stderr);
    // The plan as data, and bundle: the features every recipe gets.
    let plan = rocbuild(
        &[
            "llama-cpp-python",
            "--venv",
            v,
            "--cache",
            cache.to_str().unwrap(),
            "--dry-run",
            "--json",
        ],
        &[],
    );
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let p: serde_json::Value = serde_json::from_str(&plan.stdout).unwrap();
    assert_eq!(p["source"]["Sdist"]["project"], "llama-cpp-python");
    assert_eq!(p["install"]["layout"], "site");
    let frozen = tmp.path().join("frozen");
    let bundle = rocbuild(
        &[
            "bundle",
            site.join("llama_cpp/lib/libllama.so").to_str().unwrap(),
            "--into",
            frozen.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(bundle.code, 0, "{}\n{}", bundle.stdout, bundle.stderr);
    for name in [
        "libllama.so",
        "libggml.so.0",
        "libggml-base.so.0",
        "libggml-cpu.so.0",
    ] {
        assert!(
            frozen.join("llama_cpp/lib").join(name).is_file(),
            "{name}: {}",
            bundle.stdout
        );
    }
    let dist = tmp.path().join("dist");
    let wheel = rocbuild(
        &[
            "wheel",
            "llama-cpp-python",
            "--venv",
            v,
            "--cache",
            cache.to_str().unwrap(),
            "--out",
            dist.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(wheel.code, 0, "{}\n{}", wheel.stdout, wheel.stderr);
    assert!(
        wheel.stdout.contains("llama_cpp_python-0.3.36+cpu"),
        "{}",
        wheel.stdout
    );
}

/// `publish` uploads the build's wheel to a real index (pypiserver on 127.0.0.1); a second,
/// fresh venv installs `llama-cpp-python==0.3.36+cpu` from that index alone (its pure-Python
/// dependencies from wheels cached beside it) and generates with the same model: the team
/// case for a TOML-only recipe. Then restore takes the build out of the first venv.
fn published_and_generating_elsewhere(
    tmp: &tempfile::TempDir,
    venv: &Path,
    site: &Path,
    cache: &Path,
    model: &Path,
) {
    let v = venv.to_str().unwrap();
    let c = cache.to_str().unwrap();
    let packages = tmp.path().join("index-packages");
    let index = crate::publish::Index::start(tmp.path(), &packages);
    let index_wheels = crate::publish::pypi_wheels("index", &["pypiserver", "twine"]);
    let links = index_wheels.display().to_string();
    let out = rocbuild(
        &[
            "publish",
            "llama-cpp-python",
            "--venv",
            v,
            "--cache",
            c,
            "--index",
            &index.url,
        ],
        &[("PIP_FIND_LINKS", links.as_str())],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("published to"), "{}", out.stdout);

    let deps = crate::publish::pypi_wheels(
        "llama-deps",
        &["typing-extensions", "numpy", "diskcache", "jinja2"],
    );
    let other = tmp.path().join("other-venv");
    make_venv(&other);
    run(Command::new(other.join("bin/python"))
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(["--index-url", &format!("{}simple/", index.url)])
        .args(["--find-links", deps.to_str().unwrap()])
        .arg("llama-cpp-python==0.3.36+cpu")
        .current_dir(tmp.path())
        .env_remove("PIP_FIND_LINKS")
        .env_remove("PIP_NO_INDEX"));
    let gen = Command::new(other.join("bin/python"))
        .args([
            "-c",
            "import sys, llama_cpp\n\
             llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=64, verbose=False, seed=1)\n\
             print(llm('abc', max_tokens=8, temperature=0.0)['usage']['completion_tokens'])",
        ])
        .arg(model)
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&gen.stdout).trim(),
        "8",
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );

    let restore = rocbuild(
        &["restore", "llama-cpp-python", "--venv", v, "--cache", c],
        &[],
    );
    assert_eq!(restore.code, 0, "{}", restore.stderr);
    assert!(!site.join("llama_cpp").exists());
}
