//! GPU code objects: a HIP library compiled here with Debian's hipcc (ROCm 5.2, clang 15), and
//! compressed `CCOB` bundles made from its real bundle (clang 15 cannot compress).
// Tests say on stderr what they skip or measured.
#![allow(clippy::print_stderr)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use rocbuild_native::{offload_targets, read_binary};

const KERNEL: &str = "#include <hip/hip_runtime.h>\n\
__global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }\n\
extern \"C\" int launch(float* x) { hipLaunchKernelGGL(add_one, dim3(1), dim3(32), 0, 0, x); return 0; }\n";

/// Compile the kernel for `archs`; `None` (with a message) when hipcc is not installed.
fn hip_library(dir: &Path, archs: &[&str]) -> Option<PathBuf> {
    let Some(hipcc) = common::hipcc() else {
        eprintln!("SKIPPED: hipcc not found (apt-get install hipcc; cargo xtask setup does it)");
        return None;
    };
    let src = common::write(dir, "k.hip", KERNEL);
    let out = dir.join("libk.so");
    let mut cmd = std::process::Command::new(hipcc);
    for a in archs {
        cmd.arg(format!("--offload-arch={a}"));
    }
    // hipcc leaves an empty directory per file and arch in its temp dir: not in /tmp.
    cmd.env("TMPDIR", dir);
    common::run(cmd.args(["-fPIC", "-shared"]).arg(&src).arg("-o").arg(&out));
    Some(out)
}

/// The raw `.hip_fatbin` bundle of an ELF file, cut out by section header (objcopy).
fn fatbin_section(lib: &Path, dir: &Path) -> Vec<u8> {
    let out = dir.join("fatbin.bin");
    common::run(
        std::process::Command::new("objcopy")
            .args(["-O", "binary", "--only-section=.hip_fatbin"])
            .arg(lib)
            .arg(&out),
    );
    let bytes = std::fs::read(out).unwrap();
    assert!(bytes.starts_with(b"__CLANG_OFFLOAD_BUNDLE__"));
    bytes
}

#[test]
fn hip_library_reports_its_gfx_targets() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = hip_library(dir.path(), &["gfx1010"]) else {
        return;
    };
    let b = read_binary(&lib).unwrap();
    assert_eq!(b.gpu_targets, ["gfx1010"]);
    assert!(
        b.needed.iter().any(|n| n.starts_with("libamdhip64.so")),
        "{:?}",
        b.needed
    );
    let gpu: Vec<_> = b.offload.iter().filter(|e| e.kind != "host").collect();
    assert_eq!(gpu.len(), 1);
    assert_eq!(gpu[0].id, "hipv4-amdgcn-amd-amdhsa--gfx1010");
    assert_eq!(gpu[0].triple, "amdgcn-amd-amdhsa");
    assert!(gpu[0].size > 1000 && !gpu[0].compressed);

    // Two targets, one with a feature: the target id keeps it, the processor does not.
    let dir2 = tempfile::tempdir().unwrap();
    let lib2 = hip_library(dir2.path(), &["gfx1010:xnack-", "gfx906"]).unwrap();
    let b2 = read_binary(&lib2).unwrap();
    assert_eq!(b2.gpu_targets, ["gfx1010", "gfx906"]);
    let ids: Vec<Option<&str>> = b2.offload.iter().map(|e| e.target_id.as_deref()).collect();
    assert!(ids.contains(&Some("gfx1010:xnack-")), "{ids:?}");

    // A plain C library has none.
    let c = common::write(dir.path(), "c.c", "int f(void) { return 0; }\n");
    common::cc_shared(&c, &dir.path().join("libc_only.so"), &[]);
    assert!(read_binary(&dir.path().join("libc_only.so"))
        .unwrap()
        .gpu_targets
        .is_empty());
}

/// `CCOB` header then payload, per clang's OffloadBundler (`version`, `method` 0 zlib / 1 zstd;
/// v2: u32 total size + u32 uncompressed size; v3: u64 + u64; then an u64 hash).
fn ccob(version: u16, method: u16, bundle: &[u8]) -> Vec<u8> {
    let payload = if method == 1 {
        zstd::encode_all(bundle, 3).unwrap()
    } else {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(bundle).unwrap();
        z.finish().unwrap()
    };
    let header_len = match version {
        1 => 20,
        2 => 24,
        _ => 32,
    };
    let total = header_len + payload.len();
    let mut out = b"CCOB".to_vec();
    out.extend(version.to_le_bytes());
    out.extend(method.to_le_bytes());
    match version {
        1 => out.extend((bundle.len() as u32).to_le_bytes()),
        2 => {
            out.extend((total as u32).to_le_bytes());
            out.extend((bundle.len() as u32).to_le_bytes());
        }
        _ => {
            out.extend((total as u64).to_le_bytes());
            out.extend((bundle.len() as u64).to_le_bytes());
        }
    }
    out.extend(0x1234_5678_9abc_def0u64.to_le_bytes()); // truncated MD5: not checked
    out.extend(payload);
    out
}

#[test]
fn compressed_bundles_v1_v2_v3_zstd_and_zlib() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = hip_library(dir.path(), &["gfx1010:xnack-", "gfx1030"]) else {
        return;
    };
    let bundle = fatbin_section(&lib, dir.path());
    let plain = offload_targets(&bundle).unwrap();
    assert!(plain.iter().all(|e| !e.compressed));
    for version in [1u16, 2, 3] {
        for method in [0u16, 1] {
            let packed = ccob(version, method, &bundle);
            let entries = offload_targets(&packed).unwrap();
            assert_eq!(entries.len(), plain.len(), "v{version} m{method}");
            for (c, p) in entries.iter().zip(&plain) {
                assert_eq!((&c.id, c.size, c.compressed), (&p.id, p.size, true));
            }
            // Found inside other bytes too (a section holding several bundles, or a blob).
            let mut blob = vec![0u8; 100];
            blob.extend(&packed);
            blob.extend(b"trailing CCOB junk");
            let found = offload_targets(&blob).unwrap();
            let procs: Vec<_> = found
                .iter()
                .filter_map(|e| e.processor.as_deref())
                .collect();
            assert_eq!(procs, ["gfx1010", "gfx1030"], "v{version} m{method}");
        }
    }
    // A header claiming more bytes than there are is an error, not a panic or a huge read.
    let mut bad = ccob(3, 1, &bundle);
    bad[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(offload_targets(&bad).is_err());
    let mut bomb = ccob(2, 1, &bundle);
    let n = bomb.len();
    bomb[n - 20..].fill(0xff);
    assert!(offload_targets(&bomb).is_err());
}

/// clang-offload-bundler (when present) lists the same entries our reader finds.
#[test]
fn agrees_with_clang_offload_bundler() {
    let tool = Path::new("/usr/lib/llvm-15/bin/clang-offload-bundler");
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = hip_library(dir.path(), &["gfx1010", "gfx900"]) else {
        return;
    };
    if !tool.exists() {
        eprintln!("SKIPPED: no clang-offload-bundler");
        return;
    }
    let bundle = fatbin_section(&lib, dir.path());
    let bin = dir.path().join("bundle.hipfb");
    std::fs::write(&bin, &bundle).unwrap();
    let out = std::process::Command::new(tool)
        .args(["--list", "--type=o"])
        .arg(format!("--input={}", bin.display()))
        .output()
        .unwrap();
    let mut theirs: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let mut ours: Vec<String> = offload_targets(&bundle)
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    theirs.sort();
    ours.sort();
    if theirs.is_empty() {
        eprintln!(
            "SKIPPED: clang-offload-bundler listed nothing: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    assert_eq!(ours, theirs);
}

/// A Windows HIP DLL (clang-15 for x86_64-pc-windows-msvc, lld-link): the bundle sits in the
/// `.hip_fat` section of the PE file. No HIP SDK is needed: the kernel declares the one
/// runtime function the host stub calls, and the link leaves the runtime symbols unresolved.
#[test]
fn windows_hip_dll_reports_its_gfx_targets() {
    let Some(clang) = common::clang() else {
        panic!("clang-15 is needed (apt-get install clang-15 lld-15)");
    };
    let dir = tempfile::tempdir().unwrap();
    let src = common::write(
        dir.path(),
        "kw.hip",
        "struct dim3 { unsigned x, y, z; };\ntypedef struct ihipStream_t* hipStream_t;\n\
         extern \"C\" int hipLaunchKernel(const void*, dim3, dim3, void**, unsigned long long, hipStream_t);\n\
         __attribute__((global)) void add_one(float* x) { x[0] += 1.0f; }\n",
    );
    let dll = dir.path().join("kw.dll");
    common::run(
        std::process::Command::new(clang)
            .args([
                "--target=x86_64-pc-windows-msvc",
                "-x",
                "hip",
                "--offload-arch=gfx1010",
                "--offload-arch=gfx1030",
            ])
            .args([
                "-nogpuinc",
                "-nogpulib",
                "-fuse-ld=lld",
                "-nostdlib",
                "-shared",
                "-Wl,/noentry",
                "-Wl,/force:unresolved",
                "-w",
            ])
            .arg(&src)
            .arg("-o")
            .arg(&dll)
            .env("TMPDIR", dir.path()),
    );
    let b = read_binary(&dll).unwrap();
    assert_eq!(b.format, rocbuild_native::Format::Pe);
    assert_eq!(b.gpu_targets, ["gfx1010", "gfx1030"]);
}
