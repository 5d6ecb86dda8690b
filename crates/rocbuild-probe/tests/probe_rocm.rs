//! `probe()` with a ROCm build wanted, on this machine (Debian's ROCm 5.2 under /usr), and the
//! cheap path: a CPU torch and no ROCm wanted probes nothing of ROCm. Also: machine files
//! written before the ROCm fields existed still load.

use rocbuild_probe::{probe, Machine, ProbeOptions, SdkKind, Venv};
use rocbuild_testkit::{install_fake_torch, make_venv};

#[test]
fn probe_fills_rocm_fields_only_when_wanted() {
    let d = tempfile::tempdir().unwrap();
    let venv = d.path().join("venv");
    let site = make_venv(&venv);
    install_fake_torch(&site, "2.9.1");

    let v = Venv {
        root: venv.clone(),
        chosen_by: "--venv".into(),
    };
    let cpu = probe(
        &v,
        &ProbeOptions {
            ..ProbeOptions::default()
        },
        &rocbuild_probe::ProbeEnv::from_process(),
    )
    .unwrap();
    assert!(
        cpu.host.rocm_sdks.is_empty()
            && cpu.target.hip_runtime.is_none()
            && cpu.target.gpu.is_none()
    );

    let rocm = probe(
        &v,
        &ProbeOptions {
            want_rocm: true,
            gpu_named: true,
            ..ProbeOptions::default()
        },
        &rocbuild_probe::ProbeEnv::from_process(),
    )
    .unwrap();
    let debian = rocm
        .host
        .rocm_sdks
        .iter()
        .find(|s| s.kind == SdkKind::DebianMultiarch)
        .expect("Debian's ROCm 5.2 (cargo xtask setup installs it)");
    assert!(debian.targets.contains(&"gfx1010".to_string()));
    assert_eq!(rocm.target.hip_runtime.as_ref().map(|r| r.major), Some(5));
    let gpu = rocm.target.gpu.as_ref().unwrap();
    // Targets named (`--arch`): nothing detected; they stay in the build's options.
    assert_eq!(
        (gpu.archs.clone(), gpu.steps.clone()),
        (
            Vec::<String>::new(),
            vec!["--arch: given (no detection)".to_string()]
        )
    );

    // Without --arch the cascade runs and logs each step; the fake torch is not ROCm, so no
    // child Python is started for it.
    let detect = probe(
        &v,
        &ProbeOptions {
            want_rocm: true,
            ..ProbeOptions::default()
        },
        &rocbuild_probe::ProbeEnv::from_process(),
    )
    .unwrap();
    let steps = detect.target.gpu.unwrap().steps;
    assert_eq!(steps[0], "--arch: not given");
    assert!(
        steps.contains(&"torch gcnArchName: skipped (torch is not a ROCm build)".to_string()),
        "{steps:?}"
    );

    // The whole Machine round-trips through JSON (what --machine FILE reads).
    let text = serde_json::to_string(&rocm).unwrap();
    let back: Machine = serde_json::from_str(&text).unwrap();
    assert_eq!(back, rocm);
}

#[test]
fn machine_files_without_rocm_fields_still_load() {
    let d = tempfile::tempdir().unwrap();
    let venv = d.path().join("venv");
    make_venv(&venv);
    let chosen = Venv {
        root: venv.clone(),
        chosen_by: "--venv".into(),
    };
    let m = probe(
        &chosen,
        &ProbeOptions::default(),
        &rocbuild_probe::ProbeEnv::from_process(),
    )
    .unwrap();
    let mut v = serde_json::to_value(&m).unwrap();
    for k in ["rocm_sdks", "hip_runtime", "gpu"] {
        v.as_object_mut().unwrap().remove(k);
    }
    let back: Machine = serde_json::from_value(v).unwrap();
    assert!(back.host.rocm_sdks.is_empty() && back.target.gpu.is_none());
}
