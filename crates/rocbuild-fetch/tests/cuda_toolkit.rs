//! A CUDA toolkit from the package index's real wheels, assembled into one root, and a real
//! nvcc build with it: the pinned CUDA 13.2 wheels (`recipes/downloads/cuda.toml`) from
//! `cache/wheels/cuda/` (`cargo xtask test` downloads them there; else they are downloaded by
//! their pinned sha256), a tiny CUDA library compiled for sm_86 and sm_90 plus PTX for
//! compute_90, and its `.nv_fatbin` read by rocbuild-native, cross-checked with the wheels'
//! own `cuobjdump`. No GPU and no NVIDIA driver are needed: nothing is run on a GPU.

#![allow(clippy::print_stderr)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use rocbuild_fetch::{install_cuda_toolkit, CudaInstall, CudaPins, CudaRoot, FetchError};
use rocbuild_native::{nv_fatbin_codes, NvCodeKind};
use rocbuild_probe::{
    choose_host_compiler, host_candidates, read_cuda_toolkit, unknown_cuda_archs, ProbeEnv,
};

fn wheels_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cache/wheels/cuda")
}

/// The CUDA 13.2 toolkit assembled in `tools`, or None (SKIPPED said) when its wheels are
/// neither cached nor downloadable here.
fn assemble(tools: &Path) -> Option<CudaRoot> {
    let pins = CudaPins::builtin();
    let pin = pins.pick("linux", "x86_64", Some("13.2")).unwrap();
    let req = CudaInstall {
        downloads: wheels_dir(),
        tools: tools.to_path_buf(),
        offline: vec![wheels_dir()],
        cc: Some(Path::new("cc")),
        ..Default::default()
    };
    match install_cuda_toolkit(pin, &req) {
        Ok(r) => Some(r),
        Err(e @ (FetchError::Request { .. } | FetchError::HttpStatus { .. })) => {
            eprintln!(
                "SKIPPED: the CUDA 13.2 wheels are not in {} and cannot be downloaded: {e}",
                wheels_dir().display()
            );
            None
        }
        Err(e) => panic!("{e}"),
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const KERNEL: &str = r#"
extern "C" __global__ void rb_scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
extern "C" int rb_launch(float *x, float a, int n) {
    rb_scale<<<(n + 255) / 256, 256>>>(x, a, n);
    return (int)cudaGetLastError();
}
"#;

fn du(p: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).unwrap().flatten() {
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        n += if m.is_dir() { du(&e.path()) } else { m.len() };
    }
    n
}

/// Every link in the root is an unversioned library name in lib/ naming a file beside it.
fn links_stay_in_lib(root: &Path, dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        if m.is_dir() {
            links_stay_in_lib(root, &e.path());
        } else if m.file_type().is_symlink() {
            let t = std::fs::read_link(e.path()).unwrap();
            assert_eq!(e.path().parent(), Some(root.join("lib").as_path()), "{e:?}");
            assert!(!t.to_string_lossy().contains('/'), "{e:?} -> {t:?}");
            assert!(root.join("lib").join(&t).is_file(), "{t:?}");
        }
    }
}

/// One root: nvcc and its parts, the headers (CCCL's too), the libraries, libdevice, the
/// unversioned links inside lib/, rocbuild's nvcc.profile, the driver stub, and NVIDIA's
/// version.json.
fn the_root_is_one_toolkit(cuda: &CudaRoot) {
    let root = &cuda.root;
    for p in [
        "bin/nvcc",
        "bin/ptxas",
        "bin/fatbinary",
        "bin/nvlink",
        "bin/cudafe++",
        "nvvm/bin/cicc",
        "nvvm/libdevice/libdevice.10.bc",
        "include/cuda_runtime.h",
        "include/crt/host_config.h",
        "include/cccl/cuda/std/version",
        "lib/libcudart.so.13",
        "lib/libcudart_static.a",
        "lib/stubs/libcuda.so",
    ] {
        assert!(root.join(p).is_file(), "{p} missing in {}", root.display());
    }
    assert_eq!(
        std::fs::read_link(root.join("lib/libcudart.so")).unwrap(),
        PathBuf::from("libcudart.so.13")
    );
    links_stay_in_lib(root, root);
    let profile = std::fs::read_to_string(root.join("bin/nvcc.profile")).unwrap();
    assert!(profile.starts_with("# Written by rocbuild"), "{profile}");
    assert!(profile.contains("$(TOP)/include/cccl"), "{profile}");
    assert!(cuda.driver_stub);
    // Its version where status, doctor and `wheel` read a toolkit's (NVIDIA's version.json).
    assert_eq!(
        rocbuild_probe::toolkit_version(root).as_deref(),
        Some("13.2.86")
    );
}

#[test]
fn the_index_toolkit_compiles_exactly_the_archs_asked() {
    let d = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let Some(cuda) = assemble(&d.path().join("tools")) else {
        return;
    };
    let assembled = t0.elapsed();
    let root = &cuda.root;
    eprintln!(
        "assembled CUDA {} in {assembled:.1?}: {} MiB at {}\n  {}",
        cuda.release,
        du(root) >> 20,
        root.display(),
        cuda.wheels.join("\n  ")
    );
    the_root_is_one_toolkit(&cuda);

    // What the toolkit is, asked of its own nvcc; the host compiler, from its host_config.h.
    let tk = read_cuda_toolkit(root).unwrap();
    assert_eq!(
        (tk.version.as_str(), tk.release.as_deref()),
        ("13.2", Some("13.2.86"))
    );
    for a in [75, 86, 90, 120] {
        assert!(tk.sass.contains(&a), "{:?}", tk.sass);
    }
    assert!(
        !tk.sass.contains(&70),
        "CUDA 13 dropped Volta: {:?}",
        tk.sass
    );
    assert_eq!(tk.host.gcc_max, Some(15));
    let host = choose_host_compiler(&tk.host, &host_candidates(&ProbeEnv::from_process()))
        .unwrap_or_else(|refused| panic!("no host compiler: {refused:?}"));
    eprintln!("host compiler: {} — {}", host.describe, host.why);

    // The fixture library, for sm_86 and sm_90 SASS plus compute_90 PTX.
    let src = d.path().join("rb_scale.cu");
    std::fs::write(&src, KERNEL).unwrap();
    let lib = d.path().join("librb_scale.so");
    let t1 = Instant::now();
    run(Command::new(&tk.nvcc)
        .args(["-shared", "-Xcompiler", "-fPIC", "-ccbin"])
        .arg(&host.path)
        .args([
            "-gencode",
            "arch=compute_86,code=sm_86",
            "-gencode",
            "arch=compute_90,code=[sm_90,compute_90]",
            "-o",
        ])
        .arg(&lib)
        .arg(&src));
    eprintln!("nvcc compile + link (2 SASS + 1 PTX): {:.1?}", t1.elapsed());
    let codes = nv_fatbin_codes(&std::fs::read(&lib).unwrap()).unwrap();
    let of = |k: NvCodeKind| -> BTreeSet<u32> {
        codes
            .iter()
            .filter(|c| c.kind == k)
            .map(|c| c.arch)
            .collect()
    };
    assert_eq!(of(NvCodeKind::Sass), BTreeSet::from([86, 90]), "{codes:?}");
    assert_eq!(of(NvCodeKind::Ptx), BTreeSet::from([90]), "{codes:?}");
    // The same, as NVIDIA's own cuobjdump (from the pinned wheels) lists it.
    let listed = run(Command::new(root.join("bin/cuobjdump"))
        .args(["--list-elf", "--list-ptx"])
        .arg(&lib));
    let named = |ext: &str| -> BTreeSet<u32> {
        listed
            .split_whitespace()
            .filter(|w| w.ends_with(ext))
            .filter_map(|w| w.rsplit(".sm_").next()?.trim_end_matches(ext).parse().ok())
            .collect()
    };
    assert_eq!(named(".cubin"), of(NvCodeKind::Sass), "{listed}");
    assert_eq!(named(".ptx"), of(NvCodeKind::Ptx), "{listed}");

    // The driver stub links a program that calls the driver; at run time the real
    // libcuda.so.1 would be loaded.
    let prog = d.path().join("uses_driver.c");
    std::fs::write(
        &prog,
        "int cuInit(unsigned int);\nint main(void) { return cuInit(0); }\n",
    )
    .unwrap();
    let exe = d.path().join("uses_driver");
    run(Command::new("cc")
        .arg(&prog)
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", root.join("lib/stubs").display()))
        .arg("-lcuda"));
    let stub = rocbuild_native::read_elf(&root.join("lib/stubs/libcuda.so")).unwrap();
    assert_eq!(stub.soname.as_deref(), Some("libcuda.so.1"));
    let elf = rocbuild_native::read_elf(&exe).unwrap();
    assert!(
        elf.needed.iter().any(|n| n == "libcuda.so.1"),
        "{:?}",
        elf.needed
    );

    // An arch this toolkit does not know: the probe says so from nvcc's own list, and nvcc
    // agrees.
    let bad = unknown_cuda_archs(&tk, &["7.0".to_string(), "8.6".to_string()]);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].contains("cannot compile for 7.0 (sm_70)"), "{bad:?}");
    let refused = Command::new(&tk.nvcc)
        .args(["-ccbin"])
        .arg(&host.path)
        .args(["-arch=sm_70", "-c", "-o"])
        .arg(d.path().join("x.o"))
        .arg(&src)
        .output()
        .unwrap();
    assert!(!refused.status.success());

    // The second time, the root is reused as it is.
    let t2 = Instant::now();
    let again = assemble(&d.path().join("tools")).unwrap();
    assert_eq!(again.root, cuda.root);
    eprintln!("reused in {:.1?}", t2.elapsed());
}

/// The CUDA 12.9 pin's reason for refusing (no compiler from the index) is true of the real
/// wheel: nvidia-cuda-nvcc-cu12 12.9.86 holds ptxas and libnvvm, not nvcc.
#[test]
fn the_cuda_12_nvcc_wheel_really_has_no_nvcc() {
    let pins = CudaPins::builtin();
    let pin = pins.pick("linux", "x86_64", Some("12.9")).unwrap();
    assert!(pin
        .no_compiler
        .as_deref()
        .is_some_and(|w| w.contains("no nvcc")));
    let w = pin
        .wheel
        .iter()
        .find(|w| w.name == "nvidia-cuda-nvcc-cu12")
        .unwrap();
    let file = wheels_dir().join(w.file_name());
    if !file.is_file() {
        eprintln!(
            "SKIPPED: {} is not cached (cargo xtask test downloads it)",
            file.display()
        );
        return;
    }
    assert_eq!(rocbuild_fetch::sha256_file(&file).unwrap(), w.sha256);
    let z = zip::ZipArchive::new(std::fs::File::open(&file).unwrap()).unwrap();
    let names: Vec<&str> = z.file_names().collect();
    assert!(names.contains(&"nvidia/cuda_nvcc/bin/ptxas"), "{names:?}");
    for tool in ["nvcc", "cudafe++", "fatbinary", "nvlink"] {
        assert!(
            !names.iter().any(|n| n.ends_with(&format!("/bin/{tool}"))),
            "{tool} in {names:?}"
        );
    }
    assert!(!names.iter().any(|n| n.ends_with("/cicc")));
}
