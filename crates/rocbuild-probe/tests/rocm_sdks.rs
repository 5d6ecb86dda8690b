//! ROCm SDK discovery on fake trees laid out like each distributor's, the real Debian ROCm 5.2
//! on this machine, the HIP runtime finder, and the SDK choice.

use std::path::Path;

use rocbuild_probe::{
    choose_sdk, discover_sdks, find_hip_runtime, resolve_archs, ArchError, GpuTargets, Os,
    ProbeEnv, RocmError, SdkKind,
};
use rocbuild_testkit::rocm::{
    fake_debian_rocm, fake_debian_sid_rocm, fake_opt_rocm, fake_the_rock, fake_windows_hip_sdk,
    FakeSdk,
};

fn touch(p: &Path) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, b"").unwrap();
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn linux_opt_rocm_tree_is_read_and_the_symlink_is_one_sdk() {
    let d = tempfile::tempdir().unwrap();
    let root = fake_opt_rocm(d.path(), "rocm-7.2.0", &FakeSdk::default());
    std::os::unix::fs::symlink(&root, d.path().join("opt/rocm")).unwrap();
    let sdks = discover_sdks(&ProbeEnv::rooted(d.path()), Os::Linux, None);
    assert_eq!(sdks.len(), 1, "{sdks:#?}");
    let sdk = &sdks[0];
    assert_eq!(sdk.kind, SdkKind::OptRocm);
    assert_eq!(sdk.root, root);
    assert_eq!(sdk.version.as_deref(), Some("7.2.0"));
    assert_eq!(sdk.version_source.as_deref(), Some(".info/version"));
    assert_eq!(sdk.hip_version.as_deref(), Some("7.2.41134"));
    assert_eq!(sdk.clangxx, Some(root.join("bin/amdclang++")));
    assert_eq!(sdk.clang, Some(root.join("bin/amdclang")));
    assert_eq!(sdk.hipcc, Some(root.join("bin/hipcc")));
    assert_eq!(sdk.device_lib_dir, Some(root.join("amdgcn/bitcode")));
    assert_eq!(
        sdk.targets,
        s(&["gfx1030", "gfx1100", "gfx1101", "gfx1200", "gfx1201"])
    );
    assert_eq!(sdk.hipblas.as_deref(), Some("3.0.0"));
    assert!(sdk.rocblas);
    assert_eq!(sdk.tensile_archs, s(&["gfx1030", "gfx1100"]));
    assert_eq!(sdk.amd_comgr, Some(root.join("lib/libamd_comgr.so.3")));
    assert_eq!(sdk.cmake_dirs, vec![root.join("lib/cmake")]);
    assert_eq!(sdk.bin_dir, Some(root.join("bin")));
    assert!(
        sdk.named_by.iter().any(|n| n.ends_with("opt/rocm")),
        "{:?}",
        sdk.named_by
    );
    assert!(sdk.usable(), "{:?}", sdk.problems);
}

#[test]
fn version_falls_back_to_the_directory_name_then_hip_version_h() {
    let d = tempfile::tempdir().unwrap();
    let no_info = FakeSdk {
        info_version: false,
        version: "6.4.1",
        ..FakeSdk::default()
    };
    fake_opt_rocm(d.path(), "rocm-6.4.1", &no_info);
    let unnamed = FakeSdk {
        info_version: false,
        version: "6.3.0",
        ..FakeSdk::default()
    };
    fake_opt_rocm(d.path(), "rocm", &unnamed);
    let sdks = discover_sdks(&ProbeEnv::rooted(d.path()), Os::Linux, None);
    let v: Vec<(Option<&str>, Option<&str>)> = sdks
        .iter()
        .map(|s| (s.version.as_deref(), s.version_source.as_deref()))
        .collect();
    assert_eq!(
        v,
        vec![
            (Some("6.3"), Some("HIP version (major.minor)")),
            (Some("6.4.1"), Some("directory name")),
        ]
    );
}

#[test]
fn an_sdk_without_device_libraries_or_compiler_is_listed_with_its_problems() {
    let d = tempfile::tempdir().unwrap();
    let broken = FakeSdk {
        targets: &[],
        version: "6.0.0",
        ..FakeSdk::default()
    };
    let root = fake_opt_rocm(d.path(), "rocm-6.0.0", &broken);
    std::fs::remove_dir_all(root.join("bin")).unwrap();
    std::fs::remove_dir_all(root.join("lib/llvm")).unwrap();
    let sdks = discover_sdks(&ProbeEnv::rooted(d.path()), Os::Linux, None);
    assert_eq!(sdks.len(), 1);
    assert!(!sdks[0].usable());
    let p = sdks[0].problems.join("\n");
    assert!(p.contains("no HIP compiler"), "{p}");
    assert!(p.contains("no device libraries"), "{p}");
    let err = choose_sdk(&sdks, None, None, Os::Linux).unwrap_err();
    assert!(matches!(err, RocmError::NoSdk { .. }), "{err:?}");
    let err = choose_sdk(&sdks, Some("6.0"), None, Os::Linux).unwrap_err();
    assert!(matches!(err, RocmError::Unusable { .. }), "{err:?}");
}

/// The real case from the issue: the driver ships a ROCm 6 runtime, HIP SDKs 6.2 and 7.1 are
/// installed and HIP_PATH names 7.1; 6.2 is the one that works.
#[test]
fn windows_hip_path_naming_7_1_with_a_rocm_6_driver_chooses_6_2() {
    let d = tempfile::tempdir().unwrap();
    let env0 = ProbeEnv::rooted(d.path());
    let old = FakeSdk {
        version: "6.2.4",
        targets: &["gfx1010", "gfx1030", "gfx1100"],
        ..FakeSdk::default()
    };
    let new = FakeSdk {
        version: "7.1.0",
        ..FakeSdk::default()
    };
    let v62 = fake_windows_hip_sdk(&env0.program_files, "6.2", &old);
    let v71 = fake_windows_hip_sdk(&env0.program_files, "7.1", &new);
    touch(&env0.system32.join("amdhip64_6.dll"));
    touch(&env0.system32.join("kernel32.dll"));
    let env = env0
        .with_var("HIP_PATH", format!("{}\\", v71.display()))
        .with_var("HIP_PATH_62", v62.display().to_string())
        .with_var("HIP_PATH_71", v71.display().to_string());

    let sdks = discover_sdks(&env, Os::Windows, None);
    assert_eq!(sdks.len(), 2, "{sdks:#?}");
    assert!(sdks.iter().all(|s| s.kind == SdkKind::WindowsHipSdk));
    let s62 = sdks.iter().find(|s| s.root == v62).unwrap();
    let s71 = sdks.iter().find(|s| s.root == v71).unwrap();
    assert_eq!(s62.version.as_deref(), Some("6.2.4"));
    assert_eq!(s62.clangxx, Some(v62.join("bin/clang++.exe")));
    assert_eq!(s62.hipcc, Some(v62.join("bin/hipcc.exe")));
    assert_eq!(s62.amd_comgr, Some(v62.join("bin/amd_comgr_2.dll")));
    assert_eq!(s62.tensile_dir, Some(v62.join("bin/rocblas/library")));
    assert!(s62.targets.contains(&"gfx1010".to_string()));
    assert_eq!(s71.named_by, s(&["$HIP_PATH", "$HIP_PATH_71"]));
    assert_eq!(s62.named_by, s(&["$HIP_PATH_62"]));

    let rt = find_hip_runtime(&env, Os::Windows, None, None).unwrap();
    assert_eq!(
        (rt.major, rt.path.clone()),
        (6, env.system32.join("amdhip64_6.dll"))
    );
    assert_eq!(rt.found_by, "the GPU driver (System32)");

    let choice = choose_sdk(&sdks, None, Some(&rt), Os::Windows).unwrap();
    assert_eq!(choice.sdk.root, v62);
    let notes = choice.notes.join("\n");
    assert!(
        notes.contains(
            "HIP_PATH names ROCm 7.1.0 but the HIP runtime that will run the code is ROCm 6"
        ),
        "{notes}"
    );
    assert!(notes.contains("using ROCm 6.2.4"), "{notes}");
    assert!(choice.warnings.is_empty(), "{:?}", choice.warnings);

    // gfx1010 is compilable by 6.2 (not by 7.1): the arch check passes on the chosen SDK.
    let archs = resolve_archs(&GpuTargets::parse(&["gfx1010"]), None, choice.sdk, None).unwrap();
    assert_eq!(archs.archs, s(&["gfx1010"]));
    assert!(
        archs
            .warnings
            .iter()
            .any(|w| w.contains("no Tensile kernels for gfx1010")),
        "{:?}",
        archs.warnings
    );
    let refused = resolve_archs(&GpuTargets::parse(&["gfx1010"]), None, s71, None).unwrap_err();
    assert!(
        refused.to_string().contains("oclc_isa_version_1010.bc"),
        "{refused}"
    );

    // Asked for 7.1 explicitly: honoured, with a warning about the runtime.
    let forced = choose_sdk(&sdks, Some("7.1"), Some(&rt), Os::Windows).unwrap();
    assert_eq!(forced.sdk.root, v71);
    assert!(
        forced
            .warnings
            .iter()
            .any(|w| w.contains("is ROCm 7")
                && w.contains("runtime that will run the code is ROCm 6")),
        "{:?}",
        forced.warnings
    );

    // A version not installed lists those that were.
    let err = choose_sdk(&sdks, Some("6.1"), Some(&rt), Os::Windows).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("ROCm 6.1 not found") && msg.contains("6.2.4 at") && msg.contains("7.1.0 at"),
        "{msg}"
    );

    // With a driver that also has the ROCm 7 runtime, HIP_PATH's 7.1 is trusted.
    touch(&env.system32.join("amdhip64_7.dll"));
    let rt7 = find_hip_runtime(&env, Os::Windows, None, None).unwrap();
    assert_eq!(rt7.majors(), vec![7, 6]);
    let c7 = choose_sdk(&sdks, None, Some(&rt7), Os::Windows).unwrap();
    assert_eq!(c7.sdk.root, v71);
    assert!(c7.notes[0].contains("$HIP_PATH"), "{:?}", c7.notes);
}

#[test]
fn hip_path_naming_a_missing_directory_is_a_listed_unusable_candidate() {
    let d = tempfile::tempdir().unwrap();
    let env0 = ProbeEnv::rooted(d.path());
    let v62 = fake_windows_hip_sdk(
        &env0.program_files,
        "6.2",
        &FakeSdk {
            version: "6.2.4",
            ..FakeSdk::default()
        },
    );
    let gone = d.path().join("elsewhere/ROCm/5.7");
    let env = env0.with_var("HIP_PATH", gone.display().to_string());
    let sdks = discover_sdks(&env, Os::Windows, None);
    assert_eq!(sdks.len(), 2);
    let bad = sdks.iter().find(|s| s.kind == SdkKind::HipPathEnv).unwrap();
    assert!(
        bad.problems[0].contains("$HIP_PATH names") && bad.problems[0].contains("does not exist"),
        "{:?}",
        bad.problems
    );
    let choice = choose_sdk(&sdks, None, None, Os::Windows).unwrap();
    assert_eq!(choice.sdk.root, v62);
    assert!(
        choice.notes[0].contains("$HIP_PATH names"),
        "{:?}",
        choice.notes
    );
}

#[test]
fn the_rock_pip_packages_in_a_venv_make_one_sdk() {
    let d = tempfile::tempdir().unwrap();
    let site = d.path().join("venv/lib/python3.11/site-packages");
    let sdk_spec = FakeSdk {
        version: "7.2.0",
        info_version: false,
        ..FakeSdk::default()
    };
    let devel = fake_the_rock(&site, false, &sdk_spec);
    let sdks = discover_sdks(&ProbeEnv::rooted(d.path()), Os::Linux, Some(&site));
    assert_eq!(sdks.len(), 1, "{sdks:#?}");
    let sdk = &sdks[0];
    assert_eq!(sdk.kind, SdkKind::TheRockPip);
    assert_eq!(sdk.root, devel);
    assert_eq!(sdk.version.as_deref(), Some("7.2.0"));
    assert_eq!(
        sdk.version_source.as_deref(),
        Some("rocm-sdk-core dist-info")
    );
    assert_eq!(sdk.clangxx, Some(devel.join("lib/llvm/bin/amdclang++")));
    assert_eq!(
        sdk.device_lib_dir,
        Some(devel.join("lib/llvm/amdgcn/bitcode"))
    );
    assert_eq!(
        sdk.amd_comgr,
        Some(site.join("_rocm_sdk_core/lib/libamd_comgr.so.3"))
    );
    assert_eq!(
        sdk.tensile_dir,
        Some(site.join("_rocm_sdk_libraries_custom/lib/rocblas/library"))
    );
    assert_eq!(sdk.hipblas.as_deref(), Some("3.0.0"));
    assert_eq!(sdk.parts.len(), 3);
    assert!(sdk.usable(), "{:?}", sdk.problems);

    // ROCM_PATH naming the devel root is the same SDK.
    let env = ProbeEnv::rooted(d.path()).with_var("ROCM_PATH", devel.display().to_string());
    let again = discover_sdks(&env, Os::Linux, Some(&site));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].named_by, s(&["$ROCM_PATH"]));

    // The runtime in _rocm_sdk_core (a plain file here: its major comes from the name).
    let rt = find_hip_runtime(&env, Os::Linux, None, Some(&site)).unwrap();
    assert_eq!(
        (rt.major, rt.found_by.as_str()),
        (7, "TheRock _rocm_sdk_core in the venv")
    );
}

#[test]
fn the_rock_on_windows_and_without_devel() {
    let d = tempfile::tempdir().unwrap();
    let site = d.path().join("venv/Lib/site-packages");
    let sdk_spec = FakeSdk {
        version: "7.2.0",
        info_version: false,
        ..FakeSdk::default()
    };
    fake_the_rock(&site, true, &sdk_spec);
    let env = ProbeEnv::rooted(d.path());
    touch(&env.system32.join("amdhip64_6.dll"));
    let sdks = discover_sdks(&env, Os::Windows, Some(&site));
    assert_eq!(sdks.len(), 1);
    assert_eq!(
        sdks[0].clangxx,
        Some(site.join("_rocm_sdk_devel/lib/llvm/bin/amdclang++.exe"))
    );
    assert_eq!(
        sdks[0].amd_comgr,
        Some(site.join("_rocm_sdk_core/bin/amd_comgr_3.dll"))
    );
    assert_eq!(
        sdks[0].tensile_dir,
        Some(site.join("_rocm_sdk_libraries_custom/bin/rocblas/library"))
    );
    // torch from TheRock loads the venv's runtime, not the driver's.
    let rt = find_hip_runtime(&env, Os::Windows, None, Some(&site)).unwrap();
    assert_eq!(
        (rt.major, rt.path.clone()),
        (7, site.join("_rocm_sdk_core/bin/amdhip64_7.dll"))
    );

    std::fs::remove_dir_all(site.join("_rocm_sdk_devel")).unwrap();
    // The devel wheel is installed (its dist-info), not expanded: `rocm-sdk init` expands it.
    let sdks = discover_sdks(&env, Os::Windows, Some(&site));
    assert!(
        sdks[0]
            .problems
            .iter()
            .any(|p| p.contains("installed but not expanded")
                && p.contains("venv/Scripts/rocm-sdk.exe init")),
        "{:?}",
        sdks[0].problems
    );
    for e in std::fs::read_dir(&site).unwrap().flatten() {
        if e.file_name()
            .to_string_lossy()
            .starts_with("rocm_sdk_devel-")
        {
            std::fs::remove_dir_all(e.path()).unwrap();
        }
    }
    let sdks = discover_sdks(&env, Os::Windows, Some(&site));
    assert_eq!(sdks[0].root, site.join("_rocm_sdk_core"));
    assert!(
        sdks[0]
            .problems
            .iter()
            .any(|p| p.contains("rocm-sdk-devel is not installed")),
        "{:?}",
        sdks[0].problems
    );
}

#[test]
fn debian_multiarch_layout_fake() {
    let d = tempfile::tempdir().unwrap();
    let usr = fake_debian_rocm(d.path(), "5.7.1", &["gfx1010", "gfx1030"]);
    let sdks = discover_sdks(&ProbeEnv::rooted(d.path()), Os::Linux, None);
    assert_eq!(sdks.len(), 1);
    let sdk = &sdks[0];
    let tl = usr.join("lib/x86_64-linux-gnu");
    assert_eq!(sdk.kind, SdkKind::DebianMultiarch);
    assert_eq!(sdk.version.as_deref(), Some("5.7.1"));
    assert_eq!(
        sdk.clangxx,
        Some(usr.join("bin/clang++-15")),
        "newest versioned clang, not clang++-9"
    );
    assert_eq!(sdk.device_lib_dir, Some(tl.join("amdgcn/bitcode")));
    assert_eq!(sdk.lib_dir, Some(tl.clone()));
    assert_eq!(sdk.cmake_dirs, vec![tl.join("cmake")]);
    assert_eq!(sdk.amd_comgr, Some(tl.join("libamd_comgr.so.2")));
    assert_eq!(sdk.targets, s(&["gfx1010", "gfx1030"]));
    let rt = find_hip_runtime(&ProbeEnv::rooted(d.path()), Os::Linux, None, None).unwrap();
    assert_eq!((rt.major, rt.found_by.as_str()), (5, "system library"));
}

/// Debian sid's ROCm 6.4 shape: device libraries in clang 21's resource directory (not the
/// multiarch `amdgcn/bitcode`), rocBLAS kernels in `rocblas/4.4.1/library`, each component's
/// version read from its own file.
#[test]
fn debian_sid_rocm_6_4_layout() {
    let d = tempfile::tempdir().unwrap();
    let usr = fake_debian_sid_rocm(
        d.path(),
        "6.4.3",
        21,
        "4.4.1",
        &["gfx1010", "gfx1030", "gfx1100", "gfx1201"],
        &["gfx1010", "gfx1030", "gfx1100"],
    );
    let sdks = discover_sdks(&ProbeEnv::rooted(d.path()), Os::Linux, None);
    assert_eq!(sdks.len(), 1, "{sdks:#?}");
    let sdk = &sdks[0];
    let tl = usr.join("lib/x86_64-linux-gnu");
    assert!(sdk.usable(), "{:?}", sdk.problems);
    assert_eq!(sdk.kind, SdkKind::DebianMultiarch);
    assert_eq!(sdk.version.as_deref(), Some("6.4.3"));
    assert_eq!(sdk.hip_version.as_deref(), Some("6.4.41134"));
    assert_eq!(sdk.hip_major(), Some(6));
    assert_eq!(
        sdk.device_lib_dir,
        Some(usr.join("lib/llvm-21/lib/clang/21/amdgcn/bitcode"))
    );
    assert_eq!(
        sdk.clangxx,
        Some(usr.join("bin/clang++-21")),
        "the clang whose resource dir holds the device libraries, not the newer clang++-22"
    );
    assert_eq!(sdk.clang_version.as_deref(), Some("21"));
    assert_eq!(
        sdk.targets,
        s(&["gfx1010", "gfx1030", "gfx1100", "gfx1201"])
    );
    assert_eq!(sdk.rocblas_version.as_deref(), Some("4.4.1"));
    assert_eq!(sdk.tensile_dir, Some(tl.join("rocblas/4.4.1/library")));
    assert_eq!(sdk.tensile_archs, s(&["gfx1010", "gfx1030", "gfx1100"]));
    assert_eq!(sdk.hipblas.as_deref(), Some("2.4.0"));
    assert_eq!(sdk.cmake_dirs, vec![tl.join("cmake")]);
    // The planner's arch check on this SDK: gfx1201 compiles but has no rocBLAS kernels.
    let c = resolve_archs(&GpuTargets::parse(&["gfx1201"]), None, sdk, None).unwrap();
    assert_eq!(c.archs, s(&["gfx1201"]));
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("no Tensile kernels for gfx1201")
                && w.contains("rocblas/4.4.1/library")),
        "{:?}",
        c.warnings
    );
    let c = resolve_archs(&GpuTargets::parse(&["gfx1010"]), None, sdk, None).unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

/// This machine's Debian 12 ROCm 5.2 (hipcc, libamdhip64-dev, rocm-device-libs; installed by
/// `cargo xtask test`): gfx1010 is reachable, gfx1100 is not, and the refusal names the file.
#[test]
fn real_debian_rocm_5_2_on_this_machine() {
    let bitcode = Path::new("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode");
    assert!(
        bitcode.is_dir(),
        "Debian's rocm-device-libs is not installed: run `cargo xtask setup`"
    );
    let sdks = discover_sdks(&ProbeEnv::rooted(Path::new("/")), Os::Linux, None);
    let sdk = sdks
        .iter()
        .find(|s| s.kind == SdkKind::DebianMultiarch)
        .expect("Debian ROCm found");
    assert_eq!(sdk.root, Path::new("/usr"));
    assert_eq!(sdk.version.as_deref(), Some("5.2.0"));
    assert_eq!(sdk.hip_version.as_deref(), Some("5.2.21153"));
    assert_eq!(sdk.device_lib_dir.as_deref(), Some(bitcode));
    assert_eq!(sdk.hipcc.as_deref(), Some(Path::new("/usr/bin/hipcc")));
    assert!(
        sdk.targets.contains(&"gfx1010".to_string()),
        "{:?}",
        sdk.targets
    );
    assert!(sdk.targets.contains(&"gfx1030".to_string()));
    assert!(!sdk.targets.contains(&"gfx1100".to_string()));
    assert!(sdk.amd_comgr.is_some());
    assert!(sdk.usable(), "{:?}", sdk.problems);

    let ok = resolve_archs(&GpuTargets::parse(&["gfx1010"]), None, sdk, None).unwrap();
    assert_eq!(ok.archs, s(&["gfx1010"]));
    let err = resolve_archs(&GpuTargets::parse(&["gfx1100"]), None, sdk, None).unwrap_err();
    match &err {
        ArchError::NotInSdk { arch, missing, .. } => {
            assert_eq!(arch, "gfx1100");
            assert_eq!(
                missing,
                "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode/oclc_isa_version_1100.bc"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("oclc_isa_version_1100.bc"));

    let rt = find_hip_runtime(&ProbeEnv::rooted(Path::new("/")), Os::Linux, None, None).unwrap();
    assert_eq!(rt.major, 5, "Debian's libamdhip64.so.5: {rt:?}");
}

/// torch's own `libamdhip64.so` (unversioned file name, as in the ROCm wheels): the major is
/// read from its SONAME, and it beats the system's runtime.
#[test]
fn torch_shipped_runtime_major_from_a_real_elf_soname() {
    let d = tempfile::tempdir().unwrap();
    let torch_lib = d.path().join("site/torch/lib");
    std::fs::create_dir_all(&torch_lib).unwrap();
    let src = d.path().join("hip.c");
    std::fs::write(
        &src,
        "int hipGetDeviceCount(int *n) { *n = 0; return 0; }\n",
    )
    .unwrap();
    let out = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,libamdhip64.so.6"])
        .arg(&src)
        .arg("-o")
        .arg(torch_lib.join("libamdhip64.so"))
        .status()
        .unwrap();
    assert!(out.success());
    fake_debian_rocm(d.path(), "5.2.0", &["gfx1010"]);
    let env = ProbeEnv::rooted(d.path());
    let rt = find_hip_runtime(&env, Os::Linux, Some(&torch_lib), None).unwrap();
    assert_eq!(rt.major, 6);
    assert_eq!(rt.path, torch_lib.join("libamdhip64.so"));
    assert!(rt.found_by.starts_with("torch/lib"));
    // Without torch's copy, the system's.
    assert_eq!(
        find_hip_runtime(&env, Os::Linux, None, None).unwrap().major,
        5
    );
    // The planner then prefers an SDK of the runtime's major over a newer one.
    fake_opt_rocm(d.path(), "rocm-7.2.0", &FakeSdk::default());
    let v64 = FakeSdk {
        version: "6.4.1",
        ..FakeSdk::default()
    };
    fake_opt_rocm(d.path(), "rocm-6.4.1", &v64);
    let sdks = discover_sdks(&env, Os::Linux, None);
    assert_eq!(sdks.len(), 3);
    let c = choose_sdk(&sdks, None, Some(&rt), Os::Linux).unwrap();
    assert_eq!(c.sdk.version.as_deref(), Some("6.4.1"));
    let newest = choose_sdk(&sdks, None, None, Os::Linux).unwrap();
    assert_eq!(newest.sdk.version.as_deref(), Some("7.2.0"));
}

#[test]
fn no_sdk_on_macos_and_a_helpful_error() {
    let d = tempfile::tempdir().unwrap();
    fake_opt_rocm(d.path(), "rocm-7.2.0", &FakeSdk::default());
    let sdks = discover_sdks(&ProbeEnv::rooted(d.path()), Os::Macos, None);
    assert!(sdks.is_empty());
    let err = choose_sdk(&sdks, None, None, Os::Macos).unwrap_err();
    let help = miette::Diagnostic::help(&err)
        .map(|h| h.to_string())
        .unwrap_or_default();
    assert!(help.contains("--backend cpu"), "{help}");
    let err = choose_sdk(&sdks, None, None, Os::Windows).unwrap_err();
    let help = miette::Diagnostic::help(&err)
        .map(|h| h.to_string())
        .unwrap_or_default();
    assert!(
        help.contains("HIP SDK") && help.contains("rocm-sdk-devel"),
        "{help}"
    );
}

/// oneAPI MKL is found from files: `include/mkl.h` and the static core library upstream links.
#[test]
fn mkl_roots() {
    use rocbuild_probe::find_mkl;
    let d = tempfile::tempdir().unwrap();
    let env = ProbeEnv::rooted(d.path());
    assert_eq!(find_mkl(&env, Os::Linux, "x86_64", None), None);
    let oneapi = d.path().join("opt/intel/oneapi/mkl/latest");
    std::fs::create_dir_all(oneapi.join("include")).unwrap();
    std::fs::write(oneapi.join("include/mkl.h"), "").unwrap();
    // Headers without the libraries (a runtime-only install) are not enough.
    assert_eq!(find_mkl(&env, Os::Linux, "x86_64", None), None);
    std::fs::create_dir_all(oneapi.join("lib/intel64")).unwrap();
    std::fs::write(oneapi.join("lib/intel64/libmkl_core.a"), "").unwrap();
    assert_eq!(
        find_mkl(&env, Os::Linux, "x86_64", None),
        Some(oneapi.clone())
    );
    // MKL is x86-64 only.
    assert_eq!(find_mkl(&env, Os::Linux, "aarch64", None), None);
    // $MKLROOT (oneAPI's setvars) comes first; a venv with mkl-static + mkl-include is last.
    let venv = d.path().join("venv");
    std::fs::create_dir_all(venv.join("include")).unwrap();
    std::fs::create_dir_all(venv.join("lib")).unwrap();
    std::fs::write(venv.join("include/mkl.h"), "").unwrap();
    std::fs::write(venv.join("lib/libmkl_core.a"), "").unwrap();
    let env2 = env.clone().with_var("MKLROOT", venv.display().to_string());
    assert_eq!(
        find_mkl(&env2, Os::Linux, "x86_64", None),
        Some(venv.clone())
    );
    std::fs::remove_dir_all(&oneapi).unwrap();
    assert_eq!(find_mkl(&env, Os::Linux, "x86_64", Some(&venv)), Some(venv));
}
