//! Which clang a Debian-packaged HIP compiles with when a second LLVM is installed beside it
//! (issue 29, point 7): the one the SDK is built for — hipcc's own lookup, the hipcc package's
//! dependencies, the LLVM holding the device libraries, the LLVM that wrote them — never simply
//! the newest `clang-N` in `/usr/bin`. Fake `/usr` trees with two clangs, and this machine's
//! Debian 12 ROCm 5.2 beside Debian's clang-19.

use std::path::{Path, PathBuf};

use rocbuild_probe::{discover_sdks, Os, ProbeEnv, RocmSdk, SdkKind};

/// The first 32 bytes of Debian 12's `ocml.bc` (rocm-device-libs 5.2.3): the identification
/// block says `LLVM15.0.5`.
const LLVM15_BITCODE: [u8; 32] = [
    0x42, 0x43, 0xc0, 0xde, 0x35, 0x14, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x62, 0x0c, 0x30, 0x24,
    0x4a, 0x59, 0xbe, 0x66, 0x9d, 0xfb, 0xb4, 0x9f, 0x0b, 0x51, 0x80, 0x4c, 0x01, 0x00, 0x00, 0x00,
];

/// Debian 12's hipcc.pl and hipconfig.pl: the lines that name the compiler.
const HIPCC_PL_15: &str = "$HIP_CLANG_PATH=$ENV{'HIP_CLANG_PATH'} // \"$ROCM_PATH/bin\";\n\
    $HIPCC=\"$HIP_CLANG_PATH/clang++-15\" . $execExtension;\n\
    if ( ! -e $HIPCC ) {\n    $HIPCC=\"$HIP_CLANG_PATH/clang-15\" . $execExtension;\n}\n\
    $HIPCXXFLAGS .= \" -mllvm -amdgpu-early-inline-all=true\";\n\
    $HIP_CLANG_INCLUDE_PATH = abs_path(\"$HIP_CLANG_PATH/../lib/clang/$HIP_CLANG_VERSION/include\");\n";

/// Upstream's hipcc.pl: the compiler's name carries no version.
const HIPCC_PL_UPSTREAM: &str = "$HIPCC=\"$HIP_CLANG_PATH/clang++\" . $execExtension;\n\
    $HIPCXXFLAGS .= \" -mllvm -amdgpu-early-inline-all=true\";\n";

fn write(p: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

fn exe(p: &Path) {
    write(p, b"#!/bin/sh\nexit 0\n");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Debian 12's ROCm 5.2 under `<root>/usr` beside Debian's clang-15 and clang-19: versioned
/// drivers in `bin`, each LLVM in `lib/llvm-N`, device libraries multiarch (their bitcode
/// written by LLVM 15 when `llvm15_bitcode`, empty files otherwise), hipcc's scripts holding
/// `hipcc_pl`.
fn debian_12_with_two_clangs(root: &Path, hipcc_pl: &str, llvm15_bitcode: bool) -> PathBuf {
    let usr = root.join("usr");
    for n in [15, 19] {
        for name in ["clang", "clang++"] {
            exe(&usr.join(format!("bin/{name}-{n}")));
            exe(&usr.join(format!("lib/llvm-{n}/bin/{name}")));
        }
        write(
            &usr.join(format!("lib/llvm-{n}/lib/clang/{n}/include/stddef.h")),
            b"",
        );
    }
    exe(&usr.join("bin/hipcc"));
    write(
        &usr.join("bin/hipcc"),
        b"#!/usr/bin/perl\nexec($^X, $HIPCC_PERL, @ARGV);\n",
    );
    write(&usr.join("bin/hipcc.pl"), hipcc_pl.as_bytes());
    write(&usr.join("bin/hipconfig.pl"), hipcc_pl.as_bytes());
    write(
        &usr.join("include/hip/hip_version.h"),
        b"#define HIP_VERSION_MAJOR 5\n#define HIP_VERSION_MINOR 2\n#define HIP_VERSION_PATCH 21153\n",
    );
    let tl = usr.join("lib/x86_64-linux-gnu");
    let content: &[u8] = if llvm15_bitcode { &LLVM15_BITCODE } else { b"" };
    for f in [
        "ocml.bc",
        "ockl.bc",
        "oclc_isa_version_1010.bc",
        "oclc_isa_version_1030.bc",
    ] {
        write(&tl.join("amdgcn/bitcode").join(f), content);
    }
    write(&tl.join("libamdhip64.so.5"), b"");
    write(&tl.join("libamd_comgr.so.2"), b"");
    usr
}

fn debian_sdk(root: &Path) -> RocmSdk {
    let sdks = discover_sdks(&ProbeEnv::rooted(root), Os::Linux, None);
    sdks.into_iter()
        .find(|s| s.kind == SdkKind::DebianMultiarch)
        .expect("the Debian SDK is found")
}

fn assert_clang_15(sdk: &RocmSdk, usr: &Path) {
    assert_eq!(
        sdk.clangxx,
        Some(usr.join("bin/clang++-15")),
        "the SDK's clang, not the newer clang++-19: {sdk:#?}"
    );
    assert_eq!(sdk.clang, Some(usr.join("bin/clang-15")));
    assert_eq!(sdk.clang_version.as_deref(), Some("15"));
    assert_eq!(
        sdk.device_lib_dir,
        Some(usr.join("lib/x86_64-linux-gnu/amdgcn/bitcode"))
    );
    assert!(sdk.usable(), "{:?}", sdk.problems);
}

/// Debian 12: hipcc.pl runs `$HIP_CLANG_PATH/clang++-15` (`hipconfig --hipclangpath` only
/// says /usr/bin); clang-19 installed beside it changes nothing.
#[test]
fn hipcc_lookup_picks_clang_15_beside_clang_19() {
    let d = tempfile::tempdir().unwrap();
    let usr = debian_12_with_two_clangs(d.path(), HIPCC_PL_15, false);
    assert_clang_15(&debian_sdk(d.path()), &usr);
}

/// hipcc's files name no version: the hipcc package's dependencies in dpkg's status do
/// (other packages' stanzas, clang-19's among them, say nothing about HIP).
#[test]
fn hipcc_package_dependencies_pick_clang_15() {
    let d = tempfile::tempdir().unwrap();
    let usr = debian_12_with_two_clangs(d.path(), HIPCC_PL_UPSTREAM, false);
    write(
        &d.path().join("var/lib/dpkg/status"),
        b"Package: clang-19\nStatus: install ok installed\nVersion: 1:19.1.7-3\n\
          Depends: libc6 (>= 2.34), libclang-common-19-dev (= 1:19.1.7-3), llvm-19-linker-tools\n\n\
          Package: hipcc\nStatus: install ok installed\nPriority: optional\nVersion: 5.2.3-8\n\
          Depends: clang-15, llvm-15, lld-15, clang-tools-15, rocm-device-libs, rocminfo, \
          libamdhip64-dev, libclang-common-15-dev (<< 1:15.0.6-5~exp1) | libclang-rt-15-dev (>= 1:15.0.6-5~exp1), file\n\n\
          Package: lld-19\nStatus: install ok installed\nDepends: llvm-19\n",
    );
    assert_clang_15(&debian_sdk(d.path()), &usr);
}

/// Neither hipcc nor dpkg says: the device libraries' bitcode was written by LLVM 15, so
/// clang 15 — the newest clang is not the answer.
#[test]
fn device_libraries_llvm_picks_clang_15() {
    let d = tempfile::tempdir().unwrap();
    let usr = debian_12_with_two_clangs(d.path(), HIPCC_PL_UPSTREAM, true);
    assert_clang_15(&debian_sdk(d.path()), &usr);
}

/// The sources in order: hipcc's lookup beats a device-library producer that says otherwise.
#[test]
fn hipcc_lookup_comes_before_the_device_libraries() {
    let d = tempfile::tempdir().unwrap();
    let usr = debian_12_with_two_clangs(d.path(), &HIPCC_PL_15.replace("-15", "-19"), true);
    let sdk = debian_sdk(d.path());
    assert_eq!(sdk.clangxx, Some(usr.join("bin/clang++-19")));
    assert_eq!(sdk.clang_version.as_deref(), Some("19"));
}

/// hipcc runs clang++-15 and only clang 19 is installed: the SDK cannot build HIP as it is,
/// and says which package is missing, instead of compiling with clang 19.
#[test]
fn the_sdks_clang_missing_is_a_problem_not_clang_19() {
    let d = tempfile::tempdir().unwrap();
    let usr = debian_12_with_two_clangs(d.path(), HIPCC_PL_15, true);
    for name in ["bin/clang-15", "bin/clang++-15"] {
        std::fs::remove_file(usr.join(name)).unwrap();
    }
    std::fs::remove_dir_all(usr.join("lib/llvm-15")).unwrap();
    let sdk = debian_sdk(d.path());
    assert_eq!(sdk.clangxx, None, "{sdk:#?}");
    assert!(!sdk.usable());
    assert!(
        sdk.problems.iter().any(|p| p.contains("LLVM 15")
            && p.contains("hipcc.pl")
            && p.contains("install clang-15")),
        "{:?}",
        sdk.problems
    );
}

/// Debian's ROCm 6+ shape with two LLVMs both holding device libraries (rocm-device-libs-21
/// and -22 installed): the C++ hipcc's `lib/llvm-21/bin` decides, with LLVM 21's device
/// libraries; only clang's own directory holds it (no `bin/clang++-21`).
#[test]
fn cxx_hipcc_lookup_picks_llvm_21_over_llvm_22() {
    let d = tempfile::tempdir().unwrap();
    let usr = d.path().join("usr");
    for n in [21, 22] {
        exe(&usr.join(format!("lib/llvm-{n}/bin/clang")));
        exe(&usr.join(format!("lib/llvm-{n}/bin/clang++")));
        for f in ["ocml.bc", "oclc_isa_version_1030.bc"] {
            write(
                &usr.join(format!("lib/llvm-{n}/lib/clang/{n}/amdgcn/bitcode/{f}")),
                b"",
            );
        }
    }
    exe(&usr.join("bin/clang++-22"));
    let mut hipcc = b"\x7fELF\x02\x01\x01\0".to_vec();
    hipcc.extend(b"\0clang-offload-bundler\0lib/llvm-21/bin\0-mllvm\0HIP_CLANG_PATH\0");
    write(&usr.join("bin/hipcc"), &hipcc);
    let sdk = debian_sdk(d.path());
    assert_eq!(sdk.clangxx, Some(usr.join("lib/llvm-21/bin/clang++")));
    assert_eq!(sdk.clang, Some(usr.join("lib/llvm-21/bin/clang")));
    assert_eq!(
        sdk.device_lib_dir,
        Some(usr.join("lib/llvm-21/lib/clang/21/amdgcn/bitcode"))
    );
    assert_eq!(sdk.clang_version.as_deref(), Some("21"));
    assert!(sdk.usable(), "{:?}", sdk.problems);
}

/// This machine: Debian 12's ROCm 5.2 (hipcc 5.2.3 depends on clang-15) with Debian's clang-19
/// installed for the Windows toolchain. The SDK's clang is clang-15, whatever else is there.
#[test]
fn real_debian_rocm_5_2_uses_clang_15_on_this_machine() {
    assert!(
        Path::new("/usr/bin/hipcc").is_file(),
        "Debian's hipcc is not installed: run `cargo xtask setup`"
    );
    let sdk = debian_sdk(Path::new("/"));
    assert_eq!(
        sdk.clangxx.as_deref(),
        Some(Path::new("/usr/bin/clang++-15")),
        "clang-19 present: {}",
        Path::new("/usr/bin/clang++-19").exists()
    );
    assert_eq!(sdk.clang.as_deref(), Some(Path::new("/usr/bin/clang-15")));
    assert_eq!(sdk.clang_version.as_deref(), Some("15"));
    assert!(sdk.usable(), "{:?}", sdk.problems);
}
