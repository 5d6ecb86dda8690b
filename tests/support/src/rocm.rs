//! Fake ROCm/HIP SDK trees, laid out the way each distributor lays them out, for discovery
//! tests and for plans of machines we do not have. Only names matter to the probe (it reads
//! directory listings and small text files, never the bitcode), so the files are tiny.

use std::path::{Path, PathBuf};

/// What a fake SDK holds.
#[derive(Debug, Clone)]
pub struct FakeSdk<'a> {
    /// Full ROCm version, written to `.info/version` when `info_version` is set ("7.2.0").
    pub version: &'a str,
    pub info_version: bool,
    /// gfx names with device libraries (`oclc_isa_version_NNNN.bc`).
    pub targets: &'a [&'a str],
    /// gfx names with rocBLAS Tensile files; rocBLAS is present when this is not empty.
    pub tensile: &'a [&'a str],
    /// hipBLAS (major, minor, patch) written to `include/hipblas/hipblas-version.h`.
    pub hipblas: Option<(u32, u32, u32)>,
    pub comgr: bool,
}

impl Default for FakeSdk<'_> {
    fn default() -> Self {
        FakeSdk {
            version: "7.2.0",
            info_version: true,
            targets: &["gfx1030", "gfx1100", "gfx1101", "gfx1200", "gfx1201"],
            tensile: &["gfx1030", "gfx1100"],
            hipblas: Some((3, 0, 0)),
            comgr: true,
        }
    }
}

fn touch(p: &Path) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, b"").unwrap();
}

/// An executable stub (mode 755) that prints nothing.
fn exe(p: &Path) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, "#!/bin/sh\nexit 0\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn hip_version_h(root: &Path, version: &str) {
    let mut n = version.split('.');
    let (ma, mi) = (n.next().unwrap_or("0"), n.next().unwrap_or("0"));
    let p = root.join("include/hip/hip_version.h");
    touch(&p);
    std::fs::write(
        p,
        format!("#define HIP_VERSION_MAJOR {ma}\n#define HIP_VERSION_MINOR {mi}\n#define HIP_VERSION_PATCH 41134\n"),
    )
    .unwrap();
}

fn bitcode(dir: &Path, targets: &[&str]) {
    for f in ["ocml.bc", "ockl.bc", "oclc_wavefrontsize64_on.bc"] {
        touch(&dir.join(f));
    }
    for t in targets {
        touch(&dir.join(format!(
            "oclc_isa_version_{}.bc",
            t.trim_start_matches("gfx")
        )));
    }
}

fn tensile(dir: &Path, archs: &[&str]) {
    touch(&dir.join("TensileManifest.txt"));
    for a in archs {
        touch(&dir.join(format!("TensileLibrary_lazy_{a}.dat")));
        touch(&dir.join(format!("Kernels.so-000-{a}.hsaco")));
    }
}

fn hipblas_h(root: &Path, v: (u32, u32, u32)) {
    let p = root.join("include/hipblas/hipblas-version.h");
    touch(&p);
    std::fs::write(
        p,
        format!("#define hipblasVersionMajor {}\n#define hipblasVersionMinor {}\n#define hipblasVersionPatch {}\n", v.0, v.1, v.2),
    )
    .unwrap();
}

/// AMD's Linux layout: `<fs_root>/opt/<dir_name>` (`rocm-7.2.0`), compilers in `lib/llvm/bin`
/// with `bin/amdclang++`, bitcode in `amdgcn/bitcode`, rocBLAS in `lib/rocblas/library`.
pub fn fake_opt_rocm(fs_root: &Path, dir_name: &str, sdk: &FakeSdk) -> PathBuf {
    let root = fs_root.join("opt").join(dir_name);
    if sdk.info_version {
        touch(&root.join(".info/version"));
        std::fs::write(root.join(".info/version"), format!("{}-43\n", sdk.version)).unwrap();
    }
    for b in [
        "bin/amdclang",
        "bin/amdclang++",
        "bin/hipcc",
        "bin/hipconfig",
        "lib/llvm/bin/clang",
        "lib/llvm/bin/clang++",
    ] {
        exe(&root.join(b));
    }
    hip_version_h(&root, sdk.version);
    bitcode(&root.join("amdgcn/bitcode"), sdk.targets);
    let major = sdk.version.split('.').next().unwrap_or("7");
    touch(&root.join(format!("lib/libamdhip64.so.{major}")));
    if sdk.comgr {
        touch(&root.join("lib/libamd_comgr.so.3"));
    }
    if !sdk.tensile.is_empty() {
        touch(&root.join("lib/librocblas.so.5"));
        tensile(&root.join("lib/rocblas/library"), sdk.tensile);
    }
    if let Some(v) = sdk.hipblas {
        touch(&root.join(format!("lib/libhipblas.so.{}", v.0)));
        hipblas_h(&root, v);
    }
    for pkg in [
        "hip",
        "hip-lang",
        "hipblas",
        "rocblas",
        "amd_comgr",
        "hsa-runtime64",
    ] {
        touch(&root.join(format!("lib/cmake/{pkg}/{pkg}-config.cmake")));
    }
    root
}

/// AMD's Windows HIP SDK: `<program_files>/AMD/ROCm/<short>` (`6.2`), everything in `bin`
/// (`clang.exe`, `clang++.exe`, `hipcc.exe`, `amdhip64_6.dll`, `rocblas.dll`,
/// `rocblas/library`), import libraries and CMake files in `lib`.
pub fn fake_windows_hip_sdk(program_files: &Path, short: &str, sdk: &FakeSdk) -> PathBuf {
    let root = program_files.join("AMD").join("ROCm").join(short);
    let major = sdk.version.split('.').next().unwrap_or("6");
    for b in [
        "bin/clang.exe",
        "bin/clang++.exe",
        "bin/hipcc.exe",
        "bin/hipconfig.exe",
        "bin/hipInfo.exe",
    ] {
        exe(&root.join(b));
    }
    if sdk.info_version {
        touch(&root.join(".info/version"));
        std::fs::write(root.join(".info/version"), format!("{}\n", sdk.version)).unwrap();
    }
    hip_version_h(&root, sdk.version);
    bitcode(&root.join("amdgcn/bitcode"), sdk.targets);
    touch(&root.join(format!("bin/amdhip64_{major}.dll")));
    touch(&root.join("lib/amdhip64.lib"));
    if sdk.comgr {
        touch(&root.join(format!(
            "bin/amd_comgr_{}.dll",
            if major == "6" { 2 } else { 3 }
        )));
    }
    if !sdk.tensile.is_empty() {
        touch(&root.join("bin/rocblas.dll"));
        tensile(&root.join("bin/rocblas/library"), sdk.tensile);
    }
    if let Some(v) = sdk.hipblas {
        touch(&root.join("bin/hipblas.dll"));
        hipblas_h(&root, v);
    }
    for pkg in ["hip", "hipblas", "rocblas"] {
        touch(&root.join(format!("lib/cmake/{pkg}/{pkg}-config.cmake")));
    }
    root
}

/// TheRock's pip packages in a site-packages: `_rocm_sdk_core` (runtime, `bin`/`lib`),
/// `_rocm_sdk_devel` (compilers in `lib/llvm/bin`, bitcode, headers, CMake files),
/// `_rocm_sdk_libraries_custom` (rocBLAS/hipBLAS), and dist-info directories with the version.
pub fn fake_the_rock(site: &Path, windows: bool, sdk: &FakeSdk) -> PathBuf {
    let core = site.join("_rocm_sdk_core");
    let devel = site.join("_rocm_sdk_devel");
    let libs = site.join("_rocm_sdk_libraries_custom");
    let major = sdk.version.split('.').next().unwrap_or("7");
    let (x, libdir) = if windows {
        (".exe", "bin")
    } else {
        ("", "lib")
    };
    for b in ["clang", "clang++", "amdclang", "amdclang++"] {
        exe(&devel.join(format!("lib/llvm/bin/{b}{x}")));
    }
    exe(&devel.join(format!("bin/hipcc{x}")));
    hip_version_h(&devel, sdk.version);
    bitcode(&devel.join("lib/llvm/amdgcn/bitcode"), sdk.targets);
    touch(&devel.join("lib/cmake/hip/hip-config.cmake"));
    if windows {
        touch(&core.join(format!("bin/amdhip64_{major}.dll")));
        if sdk.comgr {
            touch(&core.join("bin/amd_comgr_3.dll"));
        }
    } else {
        touch(&core.join(format!("lib/libamdhip64.so.{major}")));
        if sdk.comgr {
            touch(&core.join("lib/libamd_comgr.so.3"));
        }
    }
    if !sdk.tensile.is_empty() {
        touch(&libs.join(if windows {
            "bin/rocblas.dll"
        } else {
            "lib/librocblas.so.5"
        }));
        tensile(&libs.join(format!("{libdir}/rocblas/library")), sdk.tensile);
    }
    if let Some(v) = sdk.hipblas {
        touch(&libs.join(if windows {
            "bin/hipblas.dll".to_string()
        } else {
            format!("lib/libhipblas.so.{}", v.0)
        }));
        hipblas_h(&devel, v);
    }
    for dist in [
        "rocm_sdk_core",
        "rocm_sdk_devel",
        "rocm_sdk_libraries_custom",
        "rocm",
    ] {
        let di = site.join(format!("{dist}-{}.dist-info", sdk.version));
        std::fs::create_dir_all(&di).unwrap();
        std::fs::write(
            di.join("METADATA"),
            format!(
                "Metadata-Version: 2.1\nName: {}\nVersion: {}\n",
                dist.replace('_', "-"),
                sdk.version
            ),
        )
        .unwrap();
    }
    devel
}

/// Debian's multiarch packages under `<fs_root>/usr`: `hipcc` and versioned clang in
/// `usr/bin`, bitcode in `usr/lib/<triplet>/amdgcn/bitcode`, CMake files in
/// `usr/lib/<triplet>/cmake`, the version in `usr/lib/<triplet>/cmake/hip/hip-config-version.cmake`.
pub fn fake_debian_rocm(fs_root: &Path, version: &str, targets: &[&str]) -> PathBuf {
    let usr = fs_root.join("usr");
    let tl = usr.join("lib/x86_64-linux-gnu");
    for b in [
        "bin/hipcc",
        "bin/clang-15",
        "bin/clang++-15",
        "bin/clang++-9",
    ] {
        exe(&usr.join(b));
    }
    hip_version_h(&usr, version);
    bitcode(&tl.join("amdgcn/bitcode"), targets);
    touch(&tl.join("libamdhip64.so.5"));
    touch(&tl.join("libamd_comgr.so.2"));
    let cv = tl.join("cmake/hip/hip-config-version.cmake");
    touch(&cv);
    std::fs::write(cv, format!("set(PACKAGE_VERSION \"{version}\")\n")).unwrap();
    touch(&tl.join("cmake/hip-lang/hip-lang-config.cmake"));
    touch(&tl.join("cmake/amd_comgr/amd_comgr-config.cmake"));
    usr
}

/// One KFD topology node: `<fs_root>/sys/class/kfd/kfd/topology/nodes/<n>/properties`.
pub fn fake_kfd_node(fs_root: &Path, node: u32, gfx_target_version: u32) {
    let p = fs_root.join(format!(
        "sys/class/kfd/kfd/topology/nodes/{node}/properties"
    ));
    touch(&p);
    std::fs::write(
        p,
        format!("cpu_cores_count 0\nsimd_count 80\ngfx_target_version {gfx_target_version}\nvendor_id 4098\n"),
    )
    .unwrap();
}

/// Debian's layout from ROCm 6 on (sid, measured: ROCm 6.4): the device libraries in the
/// resource directory of the LLVM HIP is built with (`/usr/lib/llvm-21/lib/clang/21/amdgcn/
/// bitcode`), another LLVM beside it without them, rocBLAS's Tensile kernels in
/// `/usr/lib/<triplet>/rocblas/<rocBLAS version>/library`, CMake packages multiarch.
/// `version` is ROCm's ("6.4.3"), `llvm` the LLVM major, `rocblas` rocBLAS's own version.
pub fn fake_debian_sid_rocm(
    fs_root: &Path,
    version: &str,
    llvm: u32,
    rocblas: &str,
    targets: &[&str],
    tensile_archs: &[&str],
) -> PathBuf {
    let usr = fs_root.join("usr");
    let tl = usr.join("lib/x86_64-linux-gnu");
    for b in [
        "bin/hipcc".to_string(),
        format!("bin/clang-{llvm}"),
        format!("bin/clang++-{llvm}"),
        format!("bin/clang++-{}", llvm + 1),
        format!("lib/llvm-{llvm}/bin/clang++"),
    ] {
        exe(&usr.join(b));
    }
    // A newer LLVM without HIP's device libraries (the distribution's next default clang).
    touch(&usr.join(format!(
        "lib/llvm-{}/lib/clang/{}/include/stddef.h",
        llvm + 1,
        llvm + 1
    )));
    hip_version_h(&usr, version);
    bitcode(
        &usr.join(format!("lib/llvm-{llvm}/lib/clang/{llvm}/amdgcn/bitcode")),
        targets,
    );
    let major: u32 = version
        .split('.')
        .next()
        .unwrap_or("6")
        .parse()
        .unwrap_or(6);
    touch(&tl.join(format!("libamdhip64.so.{major}")));
    touch(&tl.join("libamd_comgr.so.3"));
    let mut rv = rocblas.split('.');
    let (ma, mi) = (rv.next().unwrap_or("4"), rv.next().unwrap_or("4"));
    touch(&tl.join(format!("librocblas.so.{ma}.{mi}")));
    std::os::unix::fs::symlink(
        format!("librocblas.so.{ma}.{mi}"),
        tl.join(format!("librocblas.so.{ma}")),
    )
    .unwrap();
    tensile(
        &tl.join(format!("rocblas/{rocblas}/library")),
        tensile_archs,
    );
    let h = usr.join("include/rocblas/internal/rocblas-version.h");
    touch(&h);
    std::fs::write(
        h,
        format!(
            "#define ROCBLAS_VERSION_MAJOR {ma}\n#define ROCBLAS_VERSION_MINOR {mi}\n#define ROCBLAS_VERSION_PATCH {}\n",
            rocblas.split('.').nth(2).unwrap_or("0")
        ),
    )
    .unwrap();
    hipblas_h(&usr, (major - 4, 4, 0));
    touch(&tl.join(format!("libhipblas.so.{}", major - 4)));
    let cv = tl.join("cmake/hip/hip-config-version.cmake");
    touch(&cv);
    std::fs::write(cv, format!("set(PACKAGE_VERSION \"{version}\")\n")).unwrap();
    for pkg in [
        "hip-lang",
        "amd_comgr",
        "hipblas",
        "rocblas",
        "hipcub",
        "rocprim",
    ] {
        touch(&tl.join(format!("cmake/{pkg}/{pkg}-config.cmake")));
    }
    usr
}
