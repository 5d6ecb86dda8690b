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
    #[cfg(unix)]
    crate::write_executable(p, "#!/bin/sh\nexit 0\n");
    #[cfg(not(unix))]
    std::fs::write(p, "#!/bin/sh\nexit 0\n").unwrap();
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
/// TheRock's current multi-arch wheels installed in `site`, as its packaging lays them out
/// (ROCm/TheRock `build_tools/packaging/python/templates/` and `_dist_info.py`'s package
/// table; `docs/packaging/python_packaging.md` "Kpack-split packaging"; the kpack format of
/// rocm-kpack's `docs/runtime_api.md`):
/// - `rocm-sdk-core` → `_rocm_sdk_core/`: `.info/version` (`X.Y.Z` only), the compilers in
///   `lib/llvm/bin` (`.exe` on Windows), the device libraries in `lib/llvm/amdgcn/bitcode`,
///   HIP's headers, `share/therock/dist_info.json` (the build's target list), the HIP runtime
///   (`lib/libamdhip64.so.7`; Windows `bin/amdhip64_7.dll`);
/// - `rocm-sdk-libraries` → `_rocm_sdk_libraries/`: the host libraries (rocBLAS, hipBLAS,
///   hipBLASLt, MIOpen) with no per-GPU files;
/// - one `rocm-sdk-device-gfxNNNN` per GPU, with no directory of its own: it adds that GPU's
///   files into `_rocm_sdk_libraries/` (`.kpack/blas_lib_gfxNNNN.kpack`, the Tensile files
///   of rocBLAS and hipBLASLt, `share/miopen/db/gfxNNNN.kdb`);
/// - `rocm` (the meta package, with `rocm_sdk/_dist_info.py`); `rocm-sdk-devel` (not
///   expanded: `_rocm_sdk_devel/` appears at `rocm-sdk init`).
///
/// `version` is the wheels' (`7.15.0a20260630`); `devices` the GPUs with a device package.
pub fn fake_the_rock_multi_arch(site: &Path, windows: bool, version: &str, devices: &[&str]) {
    the_rock_multi_arch_wheels(site, windows, version, devices);
}

/// [`fake_the_rock_multi_arch`] after `rocm-sdk init`: `_rocm_sdk_devel/` expanded from the
/// devel wheel's tarball, a whole ROCm prefix (compilers, headers, CMake packages) whose files
/// that the runtime wheels also hold are hard links to them (TheRock's `rocm_sdk/_devel.py`).
pub fn fake_the_rock_multi_arch_expanded(
    site: &Path,
    windows: bool,
    version: &str,
    devices: &[&str],
) -> PathBuf {
    the_rock_multi_arch_wheels(site, windows, version, devices);
    let devel = site.join("_rocm_sdk_devel");
    let x = if windows { ".exe" } else { "" };
    for b in ["clang", "clang++", "amdclang", "amdclang++"] {
        exe(&devel.join(format!("lib/llvm/bin/{b}{x}")));
    }
    exe(&devel.join(format!("bin/hipcc{x}")));
    hip_version_h(&devel, &release_of(version));
    hipblas_h(&devel, (3, 1, 0));
    bitcode(
        &devel.join("lib/llvm/amdgcn/bitcode"),
        &[
            "gfx1030", "gfx1100", "gfx1101", "gfx1151", "gfx1200", "gfx1201",
        ],
    );
    touch(&devel.join("lib/cmake/hip/hip-config.cmake"));
    devel
}

fn the_rock_multi_arch_wheels(site: &Path, windows: bool, version: &str, devices: &[&str]) {
    let core = site.join("_rocm_sdk_core");
    let libs = site.join("_rocm_sdk_libraries");
    let release = release_of(version);
    let x = if windows { ".exe" } else { "" };
    let libdir = if windows { "bin" } else { "lib" };
    std::fs::create_dir_all(core.join(".info")).unwrap();
    std::fs::write(core.join(".info/version"), format!("{release}\n")).unwrap();
    for b in ["clang", "clang++", "amdclang", "amdclang++"] {
        exe(&core.join(format!("lib/llvm/bin/{b}{x}")));
    }
    exe(&core.join(format!("bin/hipcc{x}")));
    hip_version_h(&core, &release);
    let all = [
        "gfx1030", "gfx1100", "gfx1101", "gfx1151", "gfx1200", "gfx1201",
    ];
    bitcode(&core.join("lib/llvm/amdgcn/bitcode"), &all);
    touch(&core.join("share/therock/dist_info.json"));
    std::fs::write(
        core.join("share/therock/dist_info.json"),
        format!("{{\"dist_amdgpu_targets\": \"{}\"}}", all.join(";")),
    )
    .unwrap();
    if windows {
        for d in ["amdhip64_7.dll", "amd_comgr0701.dll", "hiprtc0701.dll"] {
            touch(&core.join("bin").join(d));
        }
        for d in [
            "rocblas.dll",
            "hipblas.dll",
            "libhipblaslt.dll",
            "MIOpen.dll",
        ] {
            touch(&libs.join("bin").join(d));
        }
    } else {
        for l in [
            "libamdhip64.so.7",
            "libamd_comgr.so.3",
            "librocm_kpack.so.1",
        ] {
            touch(&core.join("lib").join(l));
        }
        for l in [
            "librocblas.so.5",
            "libhipblas.so.3",
            "libhipblaslt.so.1",
            "libMIOpen.so.1",
        ] {
            touch(&libs.join("lib").join(l));
        }
    }
    hipblas_h(&core, (3, 1, 0));
    touch(&libs.join(format!("{libdir}/rocblas/library/TensileManifest.txt")));
    touch(&libs.join(format!(
        "{libdir}/hipblaslt/library/hipblasltExtOpLibrary.dat"
    )));
    std::fs::create_dir_all(libs.join(".kpack")).unwrap();
    for d in devices {
        tensile(&libs.join(format!("{libdir}/rocblas/library")), &[d]);
        touch(&libs.join(format!(
            "{libdir}/hipblaslt/library/{d}/TensileLibrary_lazy_{d}.dat"
        )));
        touch(&libs.join(format!("share/miopen/db/{d}.kdb")));
        // A kernel pack's 16-byte header: magic, format version, TOC offset.
        let mut pack = b"KPAK".to_vec();
        pack.extend(1u32.to_le_bytes());
        pack.extend(64u64.to_le_bytes());
        std::fs::write(libs.join(format!(".kpack/blas_lib_{d}.kpack")), pack).unwrap();
    }
    let mut dists: Vec<String> = [
        "rocm",
        "rocm_sdk_core",
        "rocm_sdk_libraries",
        "rocm_sdk_devel",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    dists.extend(devices.iter().map(|d| format!("rocm_sdk_device_{d}")));
    for dist in dists {
        let di = site.join(format!("{dist}-{version}.dist-info"));
        std::fs::create_dir_all(&di).unwrap();
        std::fs::write(
            di.join("METADATA"),
            format!(
                "Metadata-Version: 2.1\nName: {}\nVersion: {version}\n",
                dist.replace('_', "-")
            ),
        )
        .unwrap();
    }
    // The generated version file: the template's placeholder first, the real value last.
    let sdk_py = site.join("rocm_sdk/_dist_info.py");
    touch(&sdk_py);
    std::fs::write(
        sdk_py,
        format!("__version__ = \"DEFAULT\"\n# ...\n__version__ = '{version}'\n"),
    )
    .unwrap();
}

/// `7.15.0a20260630` → `7.15.0`: what `.info/version` holds.
pub fn release_of(version: &str) -> String {
    let mut out = Vec::new();
    for part in version.split('.') {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        if digits.is_empty() {
            break;
        }
        let done = digits.len() < part.len();
        out.push(digits);
        if done || out.len() == 3 {
            break;
        }
    }
    out.join(".")
}

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
    let soname = tl.join(format!("librocblas.so.{ma}"));
    #[cfg(unix)]
    std::os::unix::fs::symlink(format!("librocblas.so.{ma}.{mi}"), &soname).unwrap();
    // Windows (the unit tests for the Windows target): a symlink needs a privilege there, and
    // this Linux layout only needs the name to exist.
    #[cfg(not(unix))]
    std::fs::copy(tl.join(format!("librocblas.so.{ma}.{mi}")), &soname).unwrap();
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
