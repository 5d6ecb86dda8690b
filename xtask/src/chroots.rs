//! Debian chroots holding real ROCm SDKs (sid: ROCm 6.4; sid + experimental: ROCm 7.2), made
//! with `mmdebstrap` from Debian 12's own packages and cached outside the clone. Debian 12
//! cannot install these SDKs, and its glibc cannot run their binaries: the e2e tests run
//! rocbuild inside the chroot (tests/e2e/chroot_rocm.rs).
//!
//! A chroot is built into `<name>.tmp` and renamed when mmdebstrap has finished, so a killed
//! set-up leaves nothing that looks like a good chroot; a present `<name>` is reused as it is.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::util::{on_path, secs, Result};

/// Where chroots are cached unless `ROCBUILD_TEST_CHROOTS` says otherwise.
const DEFAULT_CACHE: &str = "/var/cache/rocbuild-test/chroots";

/// What every chroot holds besides its ROCm: the build tools, Python with venv and headers,
/// FFmpeg's development files (FFmpeg 9 in sid), git, `file`.
const COMMON: &[&str] = &[
    "cmake",
    "ninja-build",
    "g++",
    "pkg-config",
    "git",
    "file",
    "ca-certificates",
    "python3-venv",
    "python3-dev",
    "libomp-dev",
    "libavcodec-dev",
    "libavformat-dev",
    "libavutil-dev",
    "libswscale-dev",
    "libswresample-dev",
    "libavfilter-dev",
    "libavdevice-dev",
];

/// The ROCm development packages (HIP + hipcc, hipBLAS/rocBLAS, hipCUB/rocPRIM, hipRAND/rocRAND,
/// rocThrust).
const ROCM: &[&str] = &[
    "hipcc",
    "libamdhip64-dev",
    "libhipblas-dev",
    "librocblas-dev",
    "libhipcub-dev",
    "librocprim-dev",
    "libhiprand-dev",
    "librocrand-dev",
    "librocthrust-dev",
];

/// apt preferences for the experimental chroot: experimental only on request, except ROCm's
/// packages (HIP, hipcc, ROCr/HSA, comgr, device libraries, roctracer, rocBLAS/hipBLAS,
/// rocPRIM/hipCUB, rocRAND/hipRAND, rocThrust: `hip*`, `roc*`, `hsa*`, `lib` + those), which
/// come from experimental (7.2 needs its own roctx, comgr, ROCr …).
const EXPERIMENTAL_PINS: &str = "\
Package: *
Pin: release a=experimental
Pin-Priority: 1

Package: /^(lib)?(hip|roc|hsa|amdhip|amd-comgr|amdsmi|amd-smi)/
Pin: release a=experimental
Pin-Priority: 990
";

/// What the bench's GCC 14 chroot holds: a C++ build and Python, nothing else.
const BUILD_ONLY: &[&str] = &[
    "cmake",
    "ninja-build",
    "g++",
    "pkg-config",
    "git",
    "ca-certificates",
    "python3-venv",
    "python3-dev",
];

/// What the CUDA chroot holds: Debian's own CUDA toolkit (non-free: 12.4 in trixie, whose nvcc
/// takes GCC up to 13 while trixie's default is 14, so g++-13 beside it), Debian's CPU torch
/// for a `--system-site-packages` venv, and the build tools.
const CUDA: &[&str] = &[
    "nvidia-cuda-toolkit",
    "g++",
    "g++-13",
    "cmake",
    "ninja-build",
    "git",
    "file",
    "ca-certificates",
    "python3-venv",
    "python3-torch",
    "python3-numpy",
    "python3-packaging",
];

/// Debian 13 (trixie) with its own CUDA 12.4 toolkit and torch 2.6 (tests/e2e/chroot_cuda.rs):
/// a system toolkit found by `nvcc` on PATH, rooted at `/usr`. 6.6 GB; not made for the tests
/// unless asked (`cargo xtask chroots trixie-cuda12`), and its test needs the upstream mirror.
pub const TRIXIE_CUDA: Spec = Spec {
    name: "trixie-cuda12",
    env: "ROCBUILD_TEST_CHROOT_CUDA",
    experimental: false,
    suite: "trixie",
    contents: Contents::Cuda,
    need_bytes: 9_000_000_000,
};

/// What a chroot holds besides Debian's base.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// [`CUDA`], from Debian's contrib and non-free.
    Cuda,
    /// [`COMMON`] and the ROCm SDK ([`ROCM`]).
    Rocm,
    /// Only [`BUILD_ONLY`].
    BuildOnly,
    /// Debian's Rust toolchain with the standard library's source and LLVM's MSVC-style
    /// tools ([`RUST_WINDOWS`]): rocbuild.exe built with `-Zbuild-std` (xtask/src/exe.rs).
    RustWindows,
}

/// What the Rust chroot holds: rustc, cargo and the `rust-src` that matches them exactly
/// (std is built from source for a target rustup cannot add here), lld (`lld-link`), clang
/// with clang-tools (`clang-cl`, for the C code of -sys crates) and llvm (`llvm-lib`).
pub const RUST_WINDOWS: &[&str] = &[
    "rustc",
    "cargo",
    "rust-src",
    "lld",
    "clang",
    "clang-tools",
    "llvm",
    "ca-certificates",
];

/// One chroot: its directory name under the cache, and whether it adds experimental.
pub struct Spec {
    pub name: &'static str,
    /// The environment variable the e2e tests read its path from.
    pub env: &'static str,
    pub experimental: bool,
    /// The Debian suite (`sid`, `trixie`).
    pub suite: &'static str,
    /// What it holds.
    pub contents: Contents,
    /// Its size on disk with apt's downloads, to check the free space first.
    pub need_bytes: u64,
}

/// Debian 13 (trixie): GCC 14.2, the compiler PyPI's CTranslate2 wheels are built with
/// (manylinux_2_28's gcc-toolset-14), for bench (g). Not made for the tests.
pub const GCC14: Spec = Spec {
    name: "trixie-gcc14",
    env: "",
    experimental: false,
    suite: "trixie",
    contents: Contents::BuildOnly,
    need_bytes: 1_500_000_000,
};

/// Debian sid's Rust 1.97 toolchain, for rocbuild.exe (`cargo xtask exe`). Not made for the
/// tests unless that step runs.
pub const RUST_WIN: Spec = Spec {
    name: "sid-rust-windows",
    env: "",
    experimental: false,
    suite: "sid",
    contents: Contents::RustWindows,
    need_bytes: 2_000_000_000,
};

pub const SPECS: &[Spec] = &[
    Spec {
        name: "sid-rocm6.4",
        env: "ROCBUILD_TEST_CHROOT_ROCM64",
        experimental: false,
        suite: "sid",
        contents: Contents::Rocm,
        need_bytes: 7_000_000_000,
    },
    Spec {
        name: "experimental-rocm7.2",
        env: "ROCBUILD_TEST_CHROOT_ROCM72",
        experimental: true,
        suite: "sid",
        contents: Contents::Rocm,
        need_bytes: 7_000_000_000,
    },
];

pub fn cache_dir() -> PathBuf {
    std::env::var_os("ROCBUILD_TEST_CHROOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE))
}

/// What set-up settled for each chroot: a path for the tests, or why there is none.
pub enum Outcome {
    Ready(PathBuf),
    Skipped(String),
}

/// A chroot is complete when mmdebstrap finished (the rename) and its ROCm (or its compiler
/// and Python) is there.
fn complete(spec: &Spec, dir: &Path) -> bool {
    match spec.contents {
        Contents::Rocm => {
            dir.join("usr/include/hip/hip_version.h").is_file()
                && dir.join("usr/bin/hipcc").exists()
        }
        Contents::BuildOnly => {
            dir.join("usr/bin/g++").exists() && dir.join("usr/bin/python3").exists()
        }
        Contents::Cuda => {
            dir.join("usr/bin/nvcc").exists()
                && dir
                    .join("usr/lib/python3/dist-packages/torch/version.py")
                    .is_file()
        }
        Contents::RustWindows => {
            [
                "usr/bin/cargo",
                "usr/bin/rustc",
                "usr/bin/lld-link",
                "usr/bin/clang-cl",
                "usr/bin/llvm-lib",
            ]
            .iter()
            .all(|p| dir.join(p).exists())
                && dir
                    .join("usr/lib/rustlib/src/rust/library/Cargo.lock")
                    .exists()
        }
    }
}

/// One chroot made (or reused) as [`setup`] does, alone.
pub fn ensure(spec: &Spec, root: bool) -> Result<Outcome> {
    let cache = cache_dir();
    let dir = cache.join(spec.name);
    if complete(spec, &dir) {
        return Ok(Outcome::Ready(dir));
    }
    if !root {
        return Ok(Outcome::Skipped(format!(
            "the {} chroot is absent ({}) and only root can make it",
            spec.name,
            dir.display()
        )));
    }
    if !on_path("mmdebstrap") {
        return Ok(Outcome::Skipped(format!(
            "the {} chroot is absent ({}) and mmdebstrap is not installed (apt-get install mmdebstrap)",
            spec.name,
            dir.display()
        )));
    }
    make(spec, &cache, &dir)
}

/// Make (or reuse) every chroot; env pairs for the test run.
/// `only`: names of the chroots to consider (empty: all).
pub fn setup(root: bool, only: &[String]) -> Result<Vec<(&'static str, Outcome)>> {
    let cache = cache_dir();
    let mut out = Vec::new();
    for spec in SPECS
        .iter()
        .filter(|s| only.is_empty() || only.iter().any(|o| o == s.name))
    {
        let dir = cache.join(spec.name);
        let outcome = if complete(spec, &dir) {
            println!("xtask: chroot {}: cached at {}", spec.name, dir.display());
            Outcome::Ready(dir)
        } else if !root {
            Outcome::Skipped(format!(
                "the {} chroot is absent ({}) and only root can make it: run `cargo xtask setup` as root",
                spec.name,
                dir.display()
            ))
        } else if !on_path("mmdebstrap") {
            Outcome::Skipped(format!(
                "the {} chroot is absent ({}) and mmdebstrap is not installed (apt-get install mmdebstrap)",
                spec.name,
                dir.display()
            ))
        } else {
            make(spec, &cache, &dir)?
        };
        match &outcome {
            Outcome::Skipped(why) => println!("xtask: chroot {}: SKIPPED: {why}", spec.name),
            Outcome::Ready(dir) => trim(spec, dir)?,
        }
        out.push((spec.env, outcome));
    }
    Ok(out)
}

/// The GPUs whose rocBLAS kernels a ROCm chroot keeps: those the tests build for and ask
/// `doctor` about (tests/e2e/chroot_rocm.rs: gfx1010 and gfx1030 on ROCm 6.4, gfx1201 on 7.2;
/// gfx1201 is also the arch ROCm 6.4 is checked to have none for). Debian's rocBLAS ships
/// kernels for about a dozen GPUs: 2.9 GB in sid's ROCm 6.4, 1.6 GB of them gfx90a's.
const KEPT_GPU_KERNELS: &[&str] = &["gfx1010", "gfx1030", "gfx1201"];

/// What a ROCm chroot does not need for the tests, removed after it is made (and from one
/// made before this step existed): the rocBLAS kernel files of GPUs the tests never name, and
/// documentation, manual pages and translations. Measured 2026-11-27: sid-rocm6.4 from 5.6 GB
/// to 2.8 GB, experimental-rocm7.2 from 3.6 GB to 2.9 GB. The libraries, headers and CMake
/// packages stay as Debian installed them.
fn trim(spec: &Spec, dir: &Path) -> Result<()> {
    if spec.contents != Contents::Rocm {
        return Ok(());
    }
    let mut freed = 0u64;
    let mut remove = |path: &Path| -> Result<()> {
        let meta = std::fs::symlink_metadata(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        freed += tree_bytes(path);
        let r = if meta.is_dir() {
            std::fs::remove_dir_all(path)
        } else {
            std::fs::remove_file(path)
        };
        r.map_err(|e| format!("cannot remove {}: {e}", path.display()))
    };
    for d in ["usr/share/doc", "usr/share/man", "usr/share/locale"] {
        if dir.join(d).is_dir() {
            remove(&dir.join(d))?;
        }
    }
    for library in rocblas_kernel_dirs(dir) {
        let entries = std::fs::read_dir(&library)
            .map_err(|e| format!("cannot read {}: {e}", library.display()))?;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if unneeded_kernel_file(&name) {
                remove(&e.path())?;
            }
        }
    }
    if freed > 0 {
        println!(
            "xtask: chroot {}: trimmed {:.1} GB (rocBLAS kernels for GPUs other than {}, docs)",
            spec.name,
            freed as f64 / 1e9,
            KEPT_GPU_KERNELS.join(", ")
        );
    }
    Ok(())
}

/// A rocBLAS kernel file for a GPU the tests never name: its name holds a `gfx` target
/// (`Kernels.so-000-gfx90a.hsaco`, `TensileLibrary_…_gfx1100.co`, `…_gfx90a.dat`) and none of
/// [`KEPT_GPU_KERNELS`]. Files without a target (the fallback `.dat` files, the manifest) stay.
fn unneeded_kernel_file(name: &str) -> bool {
    let mut targets = name.match_indices("gfx").map(|(i, _)| {
        let rest = &name[i..];
        let end = rest
            .char_indices()
            .skip(3)
            .find(|(_, c)| !c.is_ascii_alphanumeric())
            .map_or(rest.len(), |(j, _)| j);
        &rest[..end]
    });
    let first = targets.next();
    first.is_some()
        && !first
            .into_iter()
            .chain(targets)
            .any(|t| KEPT_GPU_KERNELS.contains(&t))
}

/// Debian's rocBLAS kernel directories: `usr/lib/<triplet>/rocblas/<version>/library`.
fn rocblas_kernel_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(libs) = std::fs::read_dir(root.join("usr/lib")) else {
        return out;
    };
    for triplet in libs.flatten() {
        let Ok(versions) = std::fs::read_dir(triplet.path().join("rocblas")) else {
            continue;
        };
        for v in versions.flatten() {
            let library = v.path().join("library");
            if library.is_dir() && !v.file_type().is_ok_and(|t| t.is_symlink()) {
                out.push(library);
            }
        }
    }
    out
}

/// Bytes under `path`, links not followed.
fn tree_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|rd| rd.flatten().map(|e| tree_bytes(&e.path())).sum())
        .unwrap_or(0)
}

/// On a machine used once (`ROCBUILD_TEST_DISPOSABLE`, which .ci/run sets): remove the ROCm
/// chroots after the last test that runs in them, so that the Windows build after them has
/// their disk (xtask/src/setup.rs says what each phase takes).
pub fn remove_rocm_chroots(prepared: &[(&'static str, Outcome)]) -> Result<()> {
    for (_, outcome) in prepared {
        if let Outcome::Ready(dir) = outcome {
            let bytes = tree_bytes(dir);
            remove_unfinished(dir)?;
            println!(
                "xtask: chroot {}: removed ({:.1} GB), its tests have run",
                dir.display(),
                bytes as f64 / 1e9
            );
        }
    }
    Ok(())
}

/// The mmdebstrap command for `spec` into `tmp`.
fn mmdebstrap(spec: &Spec, tmp: &Path) -> Command {
    let mut c = Command::new("mmdebstrap");
    c.args([
        "--variant=apt",
        "--aptopt=Acquire::Check-Valid-Until \"false\"",
    ]);
    let include: Vec<&str> = match spec.contents {
        Contents::Rocm => {
            let mut v = COMMON.to_vec();
            v.extend(ROCM);
            v
        }
        Contents::BuildOnly => BUILD_ONLY.to_vec(),
        Contents::RustWindows => RUST_WINDOWS.to_vec(),
        Contents::Cuda => {
            c.arg("--components=main contrib non-free non-free-firmware");
            CUDA.to_vec()
        }
    };
    c.arg(format!("--include={}", include.join(",")));
    if spec.experimental {
        // experimental beside sid, on the mirror mmdebstrap chose for sid; pinned (see above).
        c.arg(
            "--setup-hook=for f in \"$1\"/etc/apt/sources.list \"$1\"/etc/apt/sources.list.d/*.list; do \
             [ -f \"$f\" ] && sed -n 's/^\\(deb .*\\) \\(sid\\|unstable\\) /\\1 experimental /p' \"$f\"; \
             done > \"$1\"/etc/apt/sources.list.d/experimental.list",
        );
        c.arg(format!(
            "--setup-hook=mkdir -p \"$1\"/etc/apt/preferences.d && printf '%s' '{EXPERIMENTAL_PINS}' > \"$1\"/etc/apt/preferences.d/rocm-experimental"
        ));
    }
    c.arg(spec.suite).arg(tmp);
    c
}

/// Remove an unfinished chroot: first whatever is still mounted inside it (mmdebstrap mounts
/// /proc, /sys and /dev/pts while it installs; a killed run leaves them), deepest first, then
/// the tree without crossing into another filesystem.
fn remove_unfinished(tmp: &Path) -> Result<()> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let prefix = format!("{}/", tmp.display());
    let mut inside: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        .filter(|m| m.starts_with(&prefix))
        .collect();
    inside.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in inside {
        crate::util::run_capture(Command::new("umount").args(["--lazy", m]))?;
    }
    crate::util::run_capture(
        Command::new("rm")
            .args(["-rf", "--one-file-system"])
            .arg(tmp),
    )?;
    Ok(())
}

fn make(spec: &Spec, cache: &Path, dir: &Path) -> Result<Outcome> {
    std::fs::create_dir_all(cache)
        .map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    // One set-up at a time per chroot: a second waits, then finds the first one's result.
    let lock_path = cache.join(format!("{}.lock", spec.name));
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    if fs2::FileExt::try_lock_exclusive(&lock).is_err() {
        println!(
            "xtask: chroot {}: another set-up is making it; waiting for {}",
            spec.name,
            lock_path.display()
        );
        fs2::FileExt::lock_exclusive(&lock)
            .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    }
    if complete(spec, dir) {
        println!(
            "xtask: chroot {}: made meanwhile at {}",
            spec.name,
            dir.display()
        );
        return Ok(Outcome::Ready(dir.to_path_buf()));
    }
    let tmp = cache.join(format!("{}.tmp", spec.name));
    if tmp.exists() {
        println!(
            "xtask: chroot {}: removing an unfinished earlier attempt {}",
            spec.name,
            tmp.display()
        );
        remove_unfinished(&tmp)?;
    }
    let free = fs2::available_space(cache)
        .map_err(|e| format!("cannot read the free space of {}: {e}", cache.display()))?;
    // Measured: 5.6 GB installed for sid's ROCm 6.4 set, plus apt's downloads while it runs.
    let need = spec.need_bytes;
    if free < need {
        return Err(format!(
            "the {} chroot needs about {:.0} GB free under {}, and only {:.1} GB is free (set ROCBUILD_TEST_CHROOTS to a roomier directory)",
            spec.name,
            need as f64 / 1e9,
            cache.display(),
            free as f64 / 1e9
        ));
    }
    println!(
        "xtask: chroot {}: making it with mmdebstrap into {} (up to {:.1} GB on disk)",
        spec.name,
        tmp.display(),
        need as f64 / 1e9
    );
    let t = Instant::now();
    let out = mmdebstrap(spec, &tmp)
        .output()
        .map_err(|e| format!("cannot run mmdebstrap: {e}"))?;
    if !out.status.success() || !complete(spec, &tmp) {
        let _ = remove_unfinished(&tmp);
        let log = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = log.lines().rev().take(25).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        // No way to reach Debian's archive: the chroot cannot be made here.
        let offline = [
            "Temporary failure resolving",
            "Could not resolve",
            "Failed to fetch",
            "Network is unreachable",
            "Could not connect",
        ]
        .iter()
        .any(|m| log.contains(m));
        if offline {
            return Ok(Outcome::Skipped(format!(
                "the {} chroot is absent and cannot be made: Debian's archive is not reachable ({})",
                spec.name,
                tail.last().copied().unwrap_or("").trim()
            )));
        }
        return Err(format!(
            "mmdebstrap for the {} chroot failed ({}):\n{}",
            spec.name,
            out.status,
            tail.join("\n")
        ));
    }
    std::fs::rename(&tmp, dir)
        .map_err(|e| format!("cannot rename {} to {}: {e}", tmp.display(), dir.display()))?;
    println!(
        "xtask: chroot {}: made in {} at {}",
        spec.name,
        secs(t.elapsed()),
        dir.display()
    );
    Ok(Outcome::Ready(dir.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_kernel_files_of_gpus_the_tests_never_name_go() {
        for gone in [
            "Kernels.so-000-gfx90a.hsaco",
            "TensileLibrary_Type_HH_Contraction_l_Ailk_Bljk_Cijk_Dijk_gfx1100.co",
            "TensileLibrary_lazy_gfx942.dat",
            "TensileLibrary_Type_SS_fallback_gfx90a:xnack-.hsaco",
        ] {
            assert!(unneeded_kernel_file(gone), "{gone}");
        }
        for kept in [
            "Kernels.so-000-gfx1010.hsaco",
            "TensileLibrary_lazy_gfx1030.dat",
            "TensileLibrary_Type_HH_Contraction_l_Ailk_Bljk_Cijk_Dijk_gfx1201.co",
            // No target in the name: the fallback libraries and the manifest.
            "TensileLibrary_Type_BB_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_fallback.dat",
            "TensileManifest.txt",
        ] {
            assert!(!unneeded_kernel_file(kept), "{kept}");
        }
        // gfx10100 is not gfx1010: a target is matched whole.
        assert!(unneeded_kernel_file("Kernels.so-000-gfx10100.hsaco"));
    }

    #[test]
    fn trim_keeps_the_named_gpus_and_leaves_other_chroots_alone() {
        let root = tempfile::tempdir().unwrap();
        let lib = root
            .path()
            .join("usr/lib/x86_64-linux-gnu/rocblas/4.4.0/library");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::create_dir_all(root.path().join("usr/share/doc/rocblas")).unwrap();
        for f in [
            "Kernels.so-000-gfx1010.hsaco",
            "Kernels.so-000-gfx90a.hsaco",
            "TensileManifest.txt",
        ] {
            std::fs::write(lib.join(f), b"x").unwrap();
        }
        trim(&SPECS[0], root.path()).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&lib)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["Kernels.so-000-gfx1010.hsaco", "TensileManifest.txt"]
        );
        assert!(!root.path().join("usr/share/doc").exists());
        // The Rust chroot is not a ROCm one: nothing of it is touched.
        std::fs::write(lib.join("Kernels.so-000-gfx90a.hsaco"), b"x").unwrap();
        trim(&RUST_WIN, root.path()).unwrap();
        assert!(lib.join("Kernels.so-000-gfx90a.hsaco").exists());
    }
}
