//! GPU architectures: target-id parsing, aliases, nearest names, the SDK reachability check,
//! the tool-output parsers (on captured text), the KFD sysfs reader and the detection cascade
//! with real child processes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rocbuild_probe::{
    detect_cuda_gpu, detect_gpu, discover_sdks, expand_alias, explain_hsa_override,
    gfx_from_override, gfx_from_target_version, nearest_names, parse_amdgpu_arch, parse_hipinfo,
    parse_rocm_agent_enumerator, parse_rocminfo, parse_target_id, read_kfd_topology, resolve_archs,
    ArchError, GpuArchs, GpuQuery, GpuTargets, Os, ProbeEnv, RocmSdk,
};
use rocbuild_testkit::rocm::{fake_kfd_node, fake_opt_rocm, FakeSdk};

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// A /opt/rocm-7.2.0 that compiles for gfx1030, gfx1100, gfx1101, gfx1200, gfx1201, with
/// rocBLAS kernels for gfx1030 and gfx1100.
fn rocm72(d: &Path) -> RocmSdk {
    fake_opt_rocm(d, "rocm-7.2.0", &FakeSdk::default());
    discover_sdks(&ProbeEnv::rooted(d), Os::Linux, None).remove(0)
}

/// The error as a user sees it: message and help, temp paths replaced.
fn render(e: &ArchError, tmp: &Path) -> String {
    let help = miette::Diagnostic::help(e)
        .map(|h| h.to_string())
        .unwrap_or_default();
    format!("error: {e}\nhelp: {help}").replace(&tmp.display().to_string(), "[TMP]")
}

#[test]
fn target_ids_with_features() {
    let t = parse_target_id("gfx1010:xnack-").unwrap();
    assert_eq!(
        (t.name.as_str(), t.features.clone()),
        ("gfx1010", s(&["xnack-"]))
    );
    let t = parse_target_id("gfx90a:xnack-:sramecc+").unwrap();
    assert_eq!(t.features, s(&["sramecc+", "xnack-"]));
    assert_eq!(t.id(), "gfx90a:sramecc+:xnack-");
    assert_eq!(parse_target_id("GFX1100").unwrap().id(), "gfx1100");
    for (bad, why) in [
        ("gfx1100:xnack-", "gfx1100 has no xnack setting"),
        ("gfx1010:xnack", "needs a + or -"),
        ("gfx1010:wave64+", "unknown feature `wave64`"),
        ("gfx90a:xnack-:xnack+", "given twice"),
        ("1100", "gfxNNNN"),
    ] {
        let e = parse_target_id(bad).unwrap_err();
        assert!(e.to_string().contains(why), "{bad}: {e}");
    }
}

#[test]
fn family_aliases() {
    assert_eq!(
        expand_alias("gfx110X").unwrap(),
        ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]
    );
    assert_eq!(
        expand_alias("gfx110X-dgpu").unwrap(),
        ["gfx1100", "gfx1101", "gfx1102"]
    );
    assert_eq!(expand_alias("gfx120x").unwrap(), ["gfx1200", "gfx1201"]);
    assert_eq!(
        expand_alias("gfx103X-igpu").unwrap(),
        ["gfx1033", "gfx1035", "gfx1036"]
    );
    assert_eq!(expand_alias("gfx1100"), None);
}

#[test]
fn nearest_names_for_a_typo() {
    let near = nearest_names("gfx1101x", &[]);
    assert_eq!(
        near.first().map(String::as_str),
        Some("gfx1101"),
        "{near:?}"
    );
    assert!(near.contains(&"gfx110X".to_string()), "{near:?}");
    assert!(nearest_names("banana", &[]).is_empty());
}

#[test]
fn requested_lists_aliases_and_warnings() {
    let d = tempfile::tempdir().unwrap();
    let sdk = rocm72(d.path());

    let c = resolve_archs(&GpuTargets::parse(&["gfx1100;gfx1030"]), None, &sdk, None).unwrap();
    assert_eq!(c.archs, s(&["gfx1100", "gfx1030"]));
    assert_eq!(c.found_by, "--arch");
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);

    let c = resolve_archs(
        &GpuTargets::parse(&["gfx1100, gfx1101", "gfx1100"]),
        None,
        &sdk,
        None,
    )
    .unwrap();
    assert_eq!(
        c.archs,
        s(&["gfx1100", "gfx1101"]),
        "split and de-duplicated"
    );
    assert_eq!(c.warnings.len(), 1);
    assert!(
        c.warnings[0].contains("no Tensile kernels for gfx1101"),
        "{:?}",
        c.warnings
    );

    let torch = s(&["gfx1030", "gfx90a:xnack-"]);
    let c = resolve_archs(&GpuTargets::parse(&["gfx1100"]), None, &sdk, Some(&torch)).unwrap();
    assert!(
        c.warnings[0].contains("torch was built for gfx1030;gfx90a:xnack- but not gfx1100"),
        "{:?}",
        c.warnings
    );

    // An alias keeps the members the SDK can compile and says which it left out.
    let c = resolve_archs(&GpuTargets::parse(&["gfx110X"]), None, &sdk, None).unwrap();
    assert_eq!(c.archs, s(&["gfx1100", "gfx1101"]));
    assert!(
        c.notes[0].contains("gfx110X means gfx1100;gfx1101")
            && c.notes[0].contains("gfx1102, gfx1103: left out"),
        "{:?}",
        c.notes
    );
    // No member compilable: refused.
    let e = resolve_archs(&GpuTargets::parse(&["gfx101X"]), None, &sdk, None).unwrap_err();
    assert!(matches!(e, ArchError::NotInSdk { .. }), "{e:?}");
}

#[test]
fn unknown_and_unreachable_targets_are_refused_with_help() {
    let d = tempfile::tempdir().unwrap();
    let sdk = rocm72(d.path());
    let e = resolve_archs(&GpuTargets::parse(&["gfx1101x"]), None, &sdk, None).unwrap_err();
    assert_eq!(
        render(&e, d.path()),
        "error: unknown GPU architecture `gfx1101x`\n\
         help: did you mean gfx1101 (RDNA3 Navi 32 (RX 7800/7700)), or gfx110X (family alias), or gfx101X (family alias)?"
    );
    let e = resolve_archs(&GpuTargets::parse(&["gfx1010:xnack-"]), None, &sdk, None).unwrap_err();
    assert_eq!(
        render(&e, d.path()),
        "error: ROCm 7.2.0 at [TMP]/opt/rocm-7.2.0 cannot compile for gfx1010: its device library [TMP]/opt/rocm-7.2.0/amdgcn/bitcode/oclc_isa_version_1010.bc does not exist\n\
         help: this SDK can compile for: gfx1030, gfx1100, gfx1101, gfx1200, gfx1201. Choose one of those, or a newer ROCm with --rocm (gfx11xx needs ROCm 5.3+, gfx115x 6.2+, gfx12xx 6.3+)"
    );
    // A name the SDK ships bitcode for but the table does not know yet is accepted.
    let dir = sdk.device_lib_dir.clone().unwrap();
    std::fs::write(dir.join("oclc_isa_version_1250.bc"), b"").unwrap();
    let sdk = discover_sdks(&ProbeEnv::rooted(d.path()), Os::Linux, None).remove(0);
    assert_eq!(
        resolve_archs(&GpuTargets::parse(&["gfx1250"]), None, &sdk, None)
            .unwrap()
            .archs,
        s(&["gfx1250"])
    );
    let mut no_libs = sdk.clone();
    no_libs.device_lib_dir = None;
    let e = resolve_archs(&GpuTargets::parse(&["gfx1100"]), None, &no_libs, None).unwrap_err();
    assert!(matches!(e, ArchError::NoDeviceLibs { .. }));
}

#[test]
fn detected_archs_are_used_when_none_requested() {
    let d = tempfile::tempdir().unwrap();
    let sdk = rocm72(d.path());
    let det = GpuArchs {
        archs: s(&["gfx1100"]),
        found_by: "rocminfo".into(),
        steps: s(&["--arch: not given", "rocminfo: gfx1100"]),
        hsa_override: Some("11.0.0".into()),
        hsa_override_note: Some("HSA_OVERRIDE_GFX_VERSION=11.0.0: …".into()),
        hsa_override_gfx: Some("gfx1100".into()),
        torch_arch_list: None,
    };
    let c = resolve_archs(&GpuTargets::default(), Some(&det), &sdk, None).unwrap();
    assert_eq!(
        (c.archs.clone(), c.found_by.as_str()),
        (s(&["gfx1100"]), "rocminfo")
    );
    assert!(c.notes[0].starts_with("HSA_OVERRIDE_GFX_VERSION=11.0.0"));
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    // --arch for the real chip while the override makes the runtime want gfx1100.
    let c = resolve_archs(&GpuTargets::parse(&["gfx1030"]), Some(&det), &sdk, None).unwrap();
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("will look for gfx1100 code, but this build is for gfx1030")),
        "{:?}",
        c.warnings
    );

    let nothing = GpuArchs {
        steps: s(&[
            "rocminfo: not found",
            "sysfs KFD topology: /sys/... does not exist",
        ]),
        ..GpuArchs::default()
    };
    let e = resolve_archs(&GpuTargets::default(), Some(&nothing), &sdk, None).unwrap_err();
    let help = miette::Diagnostic::help(&e).unwrap().to_string();
    assert!(
        help.contains("pass --arch gfxNNNN") && help.contains("rocminfo: not found"),
        "{help}"
    );
}

const AMDGPU_ARCH: &str = "gfx1100\ngfx1030\ngfx1100\n";
const AGENT_ENUMERATOR: &str = "gfx000\ngfx1010\n";
const HIPINFO: &str = "\
--------------------------------------------------------------------------------
device#                           0
Name:                             AMD Radeon RX 5700 XT
pciBusID:                         3
multiProcessorCount:              20
gcnArchName:                      gfx1010:xnack-
isIntegrated:                     0
--------------------------------------------------------------------------------
device#                           1
Name:                             AMD Radeon(TM) Graphics
gcnArchName:                      gfx1036
";
const ROCMINFO: &str = "\
ROCk module version 6.7.0 is loaded
=====================
HSA System Attributes
=====================
Runtime Version:         1.14
*******
Agent 1
*******
  Name:                    AMD Ryzen 9 7950X 16-Core Processor
  Uuid:                    CPU-XX
  Marketing Name:          AMD Ryzen 9 7950X 16-Core Processor
  Vendor Name:             CPU
  Device Type:             CPU
*******
Agent 2
*******
  Name:                    gfx90a
  Uuid:                    GPU-0123456789abcdef
  Marketing Name:          AMD Instinct MI210
  Vendor Name:             AMD
  Device Type:             GPU
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-
      Machine Models:          HSA_MACHINE_MODEL_LARGE
*******
Agent 3
*******
  Name:                    gfx1100
  Marketing Name:          Radeon RX 7900 XTX
  Device Type:             GPU
*** Done ***
";

#[test]
fn tool_output_parsers() {
    assert_eq!(parse_amdgpu_arch(AMDGPU_ARCH), s(&["gfx1100", "gfx1030"]));
    assert_eq!(
        parse_rocm_agent_enumerator(AGENT_ENUMERATOR),
        s(&["gfx1010"])
    );
    assert_eq!(parse_hipinfo(HIPINFO), s(&["gfx1010:xnack-", "gfx1036"]));
    assert_eq!(
        parse_rocminfo(ROCMINFO),
        s(&["gfx90a:sramecc+:xnack-", "gfx1100"])
    );
    assert!(parse_rocminfo("ROCk module is NOT loaded, possibly no GPU devices\n").is_empty());
}

#[test]
fn kfd_sysfs_topology_and_version_numbers() {
    assert_eq!(gfx_from_target_version(100100).as_deref(), Some("gfx1010"));
    assert_eq!(gfx_from_target_version(90010).as_deref(), Some("gfx90a"));
    assert_eq!(gfx_from_target_version(110001).as_deref(), Some("gfx1101"));
    assert_eq!(gfx_from_target_version(0), None);
    assert_eq!(gfx_from_override("10.3.0").as_deref(), Some("gfx1030"));
    assert_eq!(gfx_from_override("9.0.10").as_deref(), Some("gfx90a"));
    assert_eq!(gfx_from_override("banana"), None);

    let d = tempfile::tempdir().unwrap();
    fake_kfd_node(d.path(), 0, 0); // the CPU
    fake_kfd_node(d.path(), 1, 100100);
    fake_kfd_node(d.path(), 2, 110000);
    fake_kfd_node(d.path(), 10, 90010);
    let nodes = d.path().join("sys/class/kfd/kfd/topology/nodes");
    assert_eq!(
        read_kfd_topology(&nodes),
        s(&["gfx1010", "gfx1100", "gfx90a"])
    );
}

#[test]
fn hsa_override_is_explained_per_os() {
    let linux = explain_hsa_override("10.3.0", Os::Linux, &s(&["gfx1010"]));
    assert!(
        linux.contains("reports every GPU as gfx1030") && linux.contains("The real GPU is gfx1010"),
        "{linux}"
    );
    let win = explain_hsa_override("10.3.0", Os::Windows, &[]);
    assert!(win.contains("no effect on Windows"), "{win}");
}

/// A tool stub that prints `text` using only the shell's builtins (PATH holds only the stubs).
fn tool(dir: &Path, name: &str, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(name);
    let escaped = text.replace('\'', "'\\''");
    std::fs::write(&p, format!("#!/bin/sh\nprintf '%s' '{escaped}'\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn env_with_path(root: &Path, bin: &Path) -> ProbeEnv {
    let mut env = ProbeEnv::rooted(root).with_var("PATH", bin.display().to_string());
    env.timeout = Duration::from_secs(20);
    env
}

#[test]
fn cascade_flag_then_env_then_tools_then_sysfs() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let env = env_with_path(d.path(), &bin);
    let q = GpuQuery::default();

    // Nothing anywhere: every step logged.
    let g = detect_gpu(&env, Os::Linux, &q);
    assert!(g.archs.is_empty());
    assert_eq!(g.steps.len(), 7, "{:?}", g.steps);
    assert!(g.steps[6].starts_with("sysfs KFD topology:") && g.steps[6].contains("does not exist"));

    // sysfs, the last resort.
    fake_kfd_node(d.path(), 1, 100100);
    let g = detect_gpu(&env, Os::Linux, &q);
    assert_eq!(
        (g.archs.clone(), g.found_by.as_str()),
        (s(&["gfx1010"]), "sysfs KFD topology")
    );

    // rocminfo (a real process printing the captured text) beats sysfs.
    tool(&bin, "rocminfo", ROCMINFO);
    let g = detect_gpu(&env, Os::Linux, &q);
    assert_eq!(g.found_by, "rocminfo");
    assert_eq!(g.archs, s(&["gfx90a:sramecc+:xnack-", "gfx1100"]));
    assert_eq!(g.steps[3], "amdgpu-arch: not found");

    // An SDK's own tools dir is searched before PATH.
    let sdk_bin = d.path().join("sdkbin");
    tool(&sdk_bin, "amdgpu-arch", AMDGPU_ARCH);
    let dirs = vec![sdk_bin];
    let q2 = GpuQuery {
        tool_dirs: &dirs,
        ..GpuQuery::default()
    };
    assert_eq!(detect_gpu(&env, Os::Linux, &q2).found_by, "amdgpu-arch");

    // PYTORCH_ROCM_ARCH beats the tools; --arch beats everything and runs nothing.
    let env2 = env.clone().with_var("PYTORCH_ROCM_ARCH", "gfx1030;gfx1100");
    let g = detect_gpu(&env2, Os::Linux, &q2);
    assert_eq!(
        (g.archs.clone(), g.found_by.as_str()),
        (s(&["gfx1030", "gfx1100"]), "$PYTORCH_ROCM_ARCH")
    );
    // Targets named: nothing is detected (no variable read, no tool run); the targets
    // themselves stay in the build's options.
    let g = detect_gpu(
        &env2,
        Os::Linux,
        &GpuQuery {
            named: true,
            ..q2.clone()
        },
    );
    assert_eq!((g.archs.clone(), g.found_by.as_str()), (s(&[]), ""));
    assert_eq!(g.steps, s(&["--arch: given (no detection)"]));

    // The override is reported against the real chip in sysfs.
    let env3 = env.clone().with_var("HSA_OVERRIDE_GFX_VERSION", "10.3.0");
    let g = detect_gpu(&env3, Os::Linux, &q);
    assert_eq!(g.hsa_override.as_deref(), Some("10.3.0"));
    assert_eq!(g.hsa_override_gfx.as_deref(), Some("gfx1030"));
    assert!(g
        .hsa_override_note
        .unwrap()
        .contains("The real GPU is gfx1010"));
}

#[test]
fn cascade_on_windows_uses_hipinfo_and_no_sysfs() {
    let d = tempfile::tempdir().unwrap();
    let sdk_bin = d.path().join("ROCm/6.2/bin");
    tool(&sdk_bin, "hipInfo.exe", HIPINFO);
    fake_kfd_node(d.path(), 1, 110000); // must be ignored on Windows
    let env = env_with_path(d.path(), &d.path().join("nothing"))
        .with_var("HSA_OVERRIDE_GFX_VERSION", "10.3.0");
    let dirs = vec![sdk_bin];
    let g = detect_gpu(
        &env,
        Os::Windows,
        &GpuQuery {
            tool_dirs: &dirs,
            ..GpuQuery::default()
        },
    );
    assert_eq!(g.found_by, "hipInfo");
    assert_eq!(g.archs, s(&["gfx1010:xnack-", "gfx1036"]));
    assert!(g
        .hsa_override_note
        .unwrap()
        .contains("no effect on Windows"));
    assert_eq!(g.hsa_override_gfx, None);
}

/// A torch package that a real child Python imports: `version.hip` and a device whose
/// `gcnArchName` is given, or a body that never returns.
fn fake_rocm_torch(site: &Path, hip: Option<&str>, arch: &str, hang: bool) {
    let t = site.join("torch");
    std::fs::create_dir_all(&t).unwrap();
    let hip = hip
        .map(|h| format!("'{h}'"))
        .unwrap_or_else(|| "None".into());
    let hang = if hang {
        "import time\ntime.sleep(600)\n"
    } else {
        ""
    };
    std::fs::write(
        t.join("__init__.py"),
        format!(
            "{hang}import types\nversion = types.SimpleNamespace(hip={hip})\n\
             class _P:\n    gcnArchName = '{arch}'\n\
             cuda = types.SimpleNamespace(device_count=lambda: 1, get_device_properties=lambda i: _P(), get_arch_list=lambda: ['gfx1030', 'gfx1100'])\n"
        ),
    )
    .unwrap();
}

#[test]
fn cascade_asks_a_rocm_torch_in_a_child_python() {
    let d = tempfile::tempdir().unwrap();
    let site = d.path().join("site");
    let python = PathBuf::from(
        String::from_utf8(
            // The interpreter itself, not a pyenv shim (the child's PATH holds nothing).
            std::process::Command::new("python3")
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim(),
    );
    let env = env_with_path(d.path(), &d.path().join("nothing"))
        .with_var("PYTHONPATH", site.display().to_string());
    let q = GpuQuery {
        torch_python: Some(&python),
        ..GpuQuery::default()
    };

    fake_rocm_torch(&site, Some("6.2.41134"), "gfx1010:xnack-", false);
    let g = detect_gpu(&env, Os::Linux, &q);
    assert_eq!(
        (g.archs.clone(), g.found_by.as_str()),
        (s(&["gfx1010:xnack-"]), "torch gcnArchName"),
        "{:?}",
        g.steps
    );
    assert_eq!(g.torch_arch_list, Some(s(&["gfx1030", "gfx1100"])));

    fake_rocm_torch(&site, None, "gfx1010", false);
    let g = detect_gpu(&env, Os::Linux, &q);
    assert!(g.archs.is_empty());
    assert!(
        g.steps
            .contains(&"torch gcnArchName: torch is not a ROCm build".to_string()),
        "{:?}",
        g.steps
    );

    // A torch that hangs is killed at the timeout and the cascade goes on.
    fake_rocm_torch(&site, Some("6.2"), "gfx1010", true);
    let mut short = env.clone();
    short.timeout = Duration::from_secs(1);
    fake_kfd_node(d.path(), 1, 100100);
    let g = detect_gpu(&short, Os::Linux, &q);
    assert!(
        g.steps
            .contains(&"torch gcnArchName: timed out after 1 s".to_string()),
        "{:?}",
        g.steps
    );
    assert_eq!(g.found_by, "sysfs KFD topology");
}

/// `--arch` ends the cascade, but a ROCm torch is still asked for its own arch list (its
/// compiled-in flags, asked with `python -B`: no `__pycache__` written into the venv: `get_arch_list()` is empty on a machine without a GPU), so the planner
/// can say whether torch has code for the GPU named.
#[test]
fn with_arch_given_a_rocm_torch_still_names_its_own_archs() {
    let d = tempfile::tempdir().unwrap();
    let site = d.path().join("site");
    let t = site.join("torch");
    std::fs::create_dir_all(&t).unwrap();
    std::fs::write(
        t.join("__init__.py"),
        "import types\nversion = types.SimpleNamespace(hip='6.4.43482')\n\
         _C = types.SimpleNamespace(_cuda_getArchFlags=lambda: 'gfx1030 gfx1100 gfx1201')\n\
         cuda = types.SimpleNamespace(device_count=lambda: 0, get_arch_list=lambda: [])\n",
    )
    .unwrap();
    let python = PathBuf::from(
        String::from_utf8(
            std::process::Command::new("python3")
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim(),
    );
    let env = env_with_path(d.path(), &d.path().join("nothing"))
        .with_var("PYTHONPATH", site.display().to_string());
    let q = GpuQuery {
        named: true,
        torch_python: Some(&python),
        ..GpuQuery::default()
    };
    let g = detect_gpu(&env, Os::Linux, &q);
    assert!(g.archs.is_empty(), "{:?}", g.archs);
    assert_eq!(
        g.torch_arch_list,
        Some(s(&["gfx1030", "gfx1100", "gfx1201"])),
        "{:?}",
        g.steps
    );
    // Without a ROCm torch to ask, nothing is started and the list stays unknown.
    let q = GpuQuery {
        named: true,
        ..GpuQuery::default()
    };
    let g = detect_gpu(&env, Os::Linux, &q);
    assert_eq!(g.torch_arch_list, None);
}

/// The CUDA cascade: `$TORCH_CUDA_ARCH_LIST`, then `nvidia-smi` (a real process printing what a
/// driver prints), each step logged.
#[test]
fn cuda_cascade_runs_the_steps_in_order() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let env = env_with_path(d.path(), &bin);
    let g = detect_cuda_gpu(&env, Os::Linux);
    assert!(g.archs.is_empty());
    assert_eq!(
        g.steps,
        s(&["$TORCH_CUDA_ARCH_LIST: not set", "nvidia-smi: not found"])
    );
    // An old driver: no compute_cap field.
    tool(
        &bin,
        "nvidia-smi",
        "Field \"compute_cap\" is not a valid field to query.\n",
    );
    let g = detect_cuda_gpu(&env, Os::Linux);
    assert!(g.archs.is_empty());
    assert!(
        g.steps[1].starts_with("nvidia-smi: no compute capability"),
        "{:?}",
        g.steps
    );
    // Two GPUs of one kind and a third.
    tool(&bin, "nvidia-smi", "8.6\n8.6\n8.9\n");
    let g = detect_cuda_gpu(&env, Os::Linux);
    assert_eq!(
        (g.archs.clone(), g.found_by.as_str()),
        (s(&["8.6", "8.9"]), "nvidia-smi")
    );
    // The user's own list wins and runs nothing.
    let env2 = env.clone().with_var("TORCH_CUDA_ARCH_LIST", "7.5;8.0+PTX");
    let g = detect_cuda_gpu(&env2, Os::Linux);
    assert_eq!(
        (g.archs.clone(), g.found_by.as_str()),
        (s(&["7.5", "8.0+PTX"]), "$TORCH_CUDA_ARCH_LIST")
    );
}
