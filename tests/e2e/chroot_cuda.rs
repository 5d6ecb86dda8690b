//! A system CUDA toolkit for real: Debian 13's own `nvidia-cuda-toolkit` (CUDA 12.4, non-free),
//! in a chroot `cargo xtask chroots trixie-cuda12` makes (xtask/src/chroots.rs; 6.6 GB, not
//! part of CI's set-up, and the build needs the upstream mirror). Debian lays it out under
//! `/usr` (nvcc is a wrapper in /usr/bin, the headers in /usr/include, the libraries in the
//! multiarch directory, no version.json), and its nvcc takes GCC up to 13 while trixie's
//! default is 14. The venv is made with `--system-site-packages` over Debian's own CPU torch
//! 2.6 (`python3-torch`, an `.egg-info`), as ROCm and Jetson images ship torch.

use std::path::{Path, PathBuf};

use crate::chroot_rocm::{bitsandbytes_wheels, chroot_site, in_chroot, show};
use crate::common::*;

/// The CUDA chroot (`$ROCBUILD_TEST_CHROOT_CUDA`, else under the chroot cache), or None said
/// (also when `$ROCBUILD_TEST_CHROOT_CUDA_SKIP` says why).
fn cuda_chroot() -> Option<PathBuf> {
    if let (None, Ok(why)) = (
        std::env::var_os("ROCBUILD_TEST_CHROOT_CUDA"),
        std::env::var("ROCBUILD_TEST_CHROOT_CUDA_SKIP"),
    ) {
        rocbuild_testkit::skip::skipped(&why);
        return None;
    }
    let d = std::env::var_os("ROCBUILD_TEST_CHROOT_CUDA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("ROCBUILD_TEST_CHROOTS")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/var/cache/rocbuild-test/chroots"))
                .join("trixie-cuda12")
        });
    if d.join("usr/bin/nvcc").exists() {
        return Some(d);
    }
    rocbuild_testkit::skip::skipped(&format!(
        "no CUDA chroot at {} (`cargo xtask chroots trixie-cuda12`, as root, makes it)",
        d.display()
    ));
    None
}

/// bitsandbytes 0.50.1 for CUDA with the system toolkit: found by `nvcc` on PATH with its
/// version (12.4) read from it, the host compiler nvcc takes chosen and said (g++-13, not the
/// default g++ 14), built for exactly sm_86 and sm_90, linked against CUDA 12's own cudart
/// and cuBLAS from /usr/lib, named after the toolkit (`_cuda124`), verified with Debian's torch
/// through the venv's system site-packages; `status` names the toolkit's version, doctor says
/// there is no driver and nothing wrong.
#[test]
fn debian_cuda_12_4_builds_bitsandbytes_with_the_host_compiler_its_nvcc_takes() {
    let Some(root) = cuda_chroot() else { return };
    let repo = "github.com/bitsandbytes-foundation/bitsandbytes.git";
    let Some(mirror) = crate::recipes_real::mirror_with(repo) else {
        return;
    };
    let work = tempfile::Builder::new()
        .prefix("rocbuild-e2e-cuda-")
        .tempdir_in(root.join("tmp"))
        .unwrap();
    let w = work.path();
    let inner = format!("/tmp/{}", w.file_name().unwrap().to_string_lossy());
    copy_executable(
        Path::new(env!("CARGO_BIN_EXE_rocbuild")),
        &w.join("rocbuild"),
    );
    copy_dir(&mirror.join(repo), &w.join("mirror").join(repo));
    copy_dir(&bitsandbytes_wheels(), &w.join("wheels"));
    let venv = format!("{inner}/venv");
    let mk = in_chroot(
        &root,
        &[],
        &["python3", "-m", "venv", "--system-site-packages", &venv],
    );
    assert_eq!(mk.code, 0, "{}", show(&mk));
    let (rb, cache) = (format!("{inner}/rocbuild"), format!("{inner}/cache"));
    let (m, links) = (format!("{inner}/mirror"), format!("{inner}/wheels"));
    let env = [
        ("ROCBUILD_MIRROR", m.as_str()),
        ("ROCBUILD_UPSTREAM", "off"),
        ("PIP_NO_INDEX", "1"),
        ("PIP_FIND_LINKS", links.as_str()),
    ];
    let build = |extra: &[&str]| {
        let mut args = vec![
            rb.as_str(),
            "bitsandbytes",
            "--backend",
            "cuda",
            "--cuda-arch",
            "8.6;9.0",
            "--no-binary",
            "--venv",
            &venv,
            "--cache",
            &cache,
        ];
        args.extend(extra);
        in_chroot(&root, &env, &args)
    };
    let plan = build(&["--dry-run"]);
    assert_eq!(plan.code, 0, "{}", show(&plan));
    assert!(
        plan.stdout
            .contains("CUDA 12.4 (12.4.131) at /usr, from nvcc on PATH")
            && plan.stdout.contains("host compiler: gcc 13.")
            && plan.stdout.lines().any(|l| {
                l.trim().starts_with("env: CUDAHOSTCXX=") && l.trim_end().ends_with("/g++-13")
            }),
        "{}",
        show(&plan)
    );
    let out = build(&[]);
    assert_eq!(out.code, 0, "{}", show(&out));
    assert!(
        out.stdout.contains(
            "verified: bitsandbytes 0.50.1 with libbitsandbytes_cuda124.so | CPU kernel: 8-bit mean abs error"
        ),
        "{}",
        show(&out)
    );
    // The run itself says the toolkit and nvcc's host compiler before it builds.
    assert!(
        out.stderr
            .contains("note: CUDA 12.4 at /usr, for 8.6;9.0 (from --cuda-arch)")
            && out.stderr.contains("note: host compiler: gcc 13."),
        "{}",
        show(&out)
    );
    let lib = chroot_site(&w.join("venv")).join("bitsandbytes/libbitsandbytes_cuda124.so");
    cuda_12_code_for(&lib, &["sm_86", "sm_90"]);
    let status = in_chroot(&root, &[], &[&rb, "status", "--venv", &venv]);
    assert!(
        status.stdout.contains("bitsandbytes 0.50.1: fresh")
            && status
                .stdout
                .contains("cuda: built with CUDA 12.4 (its toolkit), for 8.6;9.0"),
        "{}",
        show(&status)
    );
    let doctor = in_chroot(
        &root,
        &[],
        &[&rb, "doctor", "bitsandbytes", "--venv", &venv],
    );
    assert_eq!(doctor.code, 0, "{}", show(&doctor));
    assert!(
        doctor.stdout.contains("torch 2.6.0+debian (cpu)")
            && doctor.stdout.contains("no NVIDIA driver here"),
        "{}",
        show(&doctor)
    );
}

/// `lib` holds SASS for exactly `codes` (read from its .nv_fatbin) and needs CUDA 12's own
/// runtime and cuBLAS.
fn cuda_12_code_for(lib: &Path, codes: &[&str]) {
    let bytes = std::fs::read(lib).unwrap();
    let mut names: Vec<String> = rocbuild_native::nv_fatbin_codes(&bytes)
        .unwrap()
        .iter()
        .map(|c| c.name())
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names, codes);
    let needed = rocbuild_native::read_binary(lib).unwrap().needed;
    for n in ["libcudart.so.12", "libcublas.so.12"] {
        assert!(needed.iter().any(|x| x == n), "{needed:?}");
    }
}
