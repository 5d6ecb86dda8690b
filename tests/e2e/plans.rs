//! `--dry-run --machine FILE`: whole plans for machines we do not have, pinned per platform.

use crate::common::*;

pub fn machine(os: &str) -> serde_json::Value {
    let win = os == "windows";
    let p = |unix: &str, w: &str| if win { w.to_string() } else { unix.to_string() };
    let site = p(
        if os == "macos" {
            "/Users/me/venv/lib/python3.11/site-packages"
        } else {
            "/home/me/venv/lib/python3.11/site-packages"
        },
        r"C:\Users\me\venv\Lib\site-packages",
    );
    let sep = if win { "\\" } else { "/" };
    let (torch_v, cuda, hip, flavor) = match os {
        "windows" => ("2.9.1+rocmsdk20251116", None, Some("7.1.25424"), "rocm"),
        "macos" => ("2.9.1", None, None, "cpu"),
        _ => ("2.9.1+rocm6.4", None::<&str>, Some("6.4.43482"), "rocm"),
    };
    // The system libraries the recipes need, installed.
    let libraries: serde_json::Map<String, serde_json::Value> =
        ["openblas", "libomp", "hipblas", "hiprand", "rocthrust", "hipcub"]
            .iter()
            .map(|n| (n.to_string(), serde_json::json!({"at": p(&format!("/usr/include/{n}"), &format!(r"C:\SDK\include\{n}"))})))
            .chain(win.then(|| {
                // `pip install intel-openmp` in the venv: CTranslate2's OpenMP on Windows.
                ("iomp5".to_string(), serde_json::json!({
                    "at": r"C:\Users\me\venv\Library\lib\libiomp5md.lib",
                    "lib_dir": r"C:\Users\me\venv\Library\lib",
                }))
            }))
            .collect();
    serde_json::json!({
        "libraries": libraries,
        "platform": {"os": os, "arch": if os == "macos" {"aarch64"} else {"x86_64"}, "distro": if os == "linux" {Some("ubuntu")} else {None}},
        "venv": {"root": p(if os == "macos" {"/Users/me/venv"} else {"/home/me/venv"}, r"C:\Users\me\venv"), "chosen_by": "$VIRTUAL_ENV"},
        "python": {
            "exe": p(if os == "macos" {"/Users/me/venv/bin/python"} else {"/home/me/venv/bin/python"}, r"C:\Users\me\venv\Scripts\python.exe"),
            "version": "3.11", "full_version": "3.11.9",
            "site_packages": site,
            "include": p("/usr/include/python3.11", r"C:\Python311\Include"),
            "ext_suffix": match os { "windows" => ".cp311-win_amd64.pyd", "macos" => ".cpython-311-darwin.so", _ => ".cpython-311-x86_64-linux-gnu.so" },
            "platform": match os { "windows" => "win-amd64", "macos" => "macosx-14.0-arm64", _ => "linux-x86_64" },
            "distributions": {"torch": torch_v.split('+').next().unwrap(), "numpy": "2.4.6", "pyyaml": "6.0.3"}
        },
        "torch": {
            "version": torch_v, "git_version": "abc123", "cuda": cuda, "hip": hip, "flavor": flavor,
            "cxx11_abi": if win { None } else { Some(true) },
            "dir": format!("{site}{sep}torch"), "lib": format!("{site}{sep}torch{sep}lib"),
            "include": format!("{site}{sep}torch{sep}include"), "cmake": format!("{site}{sep}torch{sep}share{sep}cmake")
        },
        "ffmpeg": {
            "avutil_version": "59.39.100", "major": 7,
            "lib": p(if os == "macos" {"/opt/homebrew/opt/ffmpeg/lib"} else {"/usr/lib/x86_64-linux-gnu"}, r"C:\ffmpeg\lib"),
            "include": p(if os == "macos" {"/opt/homebrew/opt/ffmpeg/include"} else {"/usr/include/x86_64-linux-gnu"}, r"C:\ffmpeg\include"),
            "pkg_config_path": if win { Some(r"C:\ffmpeg\lib\pkgconfig") } else { None }, "found_by": if win {"--ffmpeg (pkg-config)"} else {"pkg-config"},
            "bin": if win { Some(r"C:\ffmpeg\bin") } else { None }
        },
        "tools": {
            "cmake": {"path": p("/usr/bin/cmake", r"C:\Program Files\CMake\bin\cmake.exe"), "version": "cmake version 3.30.0"},
            "ninja": {"path": p("/usr/bin/ninja", r"C:\ninja\ninja.exe"), "version": "1.12.1"},
            "cc": {"path": p("/usr/bin/cc", r"C:\VS\bin\cl.exe"), "version": null},
            "cxx": {"path": p("/usr/bin/c++", r"C:\VS\bin\cl.exe"), "version": null},
            "pkg_config": {"path": p("/usr/bin/pkg-config", r"C:\pkgconf\pkg-config.exe"), "version": "1.8.1"}
        }
    })
}

fn plan_for(os: &str, extra: &[&str]) -> String {
    plan_of(machine(os), extra)
}

fn plan_of(machine: serde_json::Value, extra: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("machine.json");
    std::fs::write(&file, serde_json::to_string_pretty(&machine).unwrap()).unwrap();
    let mut args = vec![
        "torchcodec",
        "--dry-run",
        "--machine",
        file.to_str().unwrap(),
        "--cache",
        "/cache",
        "--jobs",
        "8",
    ];
    args.extend_from_slice(extra);
    let out = rocbuild(&args, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    redact(&out.stdout, tmp.path())
}

#[test]
fn linux_rocm_torch_plan() {
    let plan = plan_for("linux", &[]);
    assert!(
        plan.contains("RUNPATH: $ORIGIN:$ORIGIN/../torch/lib"),
        "{plan}"
    );
    assert!(
        plan.contains(
            "plan: torchcodec 0.9.1 (newest release compatible with torch 2.9.1+rocm6.4 and FFmpeg 7)"
        ),
        "{plan}"
    );
    insta::assert_snapshot!("plan_linux_rocm", plan);
}

#[test]
fn macos_plan_turns_off_the_homebrew_rpath() {
    let plan = plan_for("macos", &[]);
    assert!(
        plan.contains("-DTORCHCODEC_DISABLE_HOMEBREW_RPATH=ON"),
        "{plan}"
    );
    assert!(plan.contains("libtorch.dylib"), "{plan}");
    assert!(
        plan.contains(
            "LC_RPATH added: @loader_path, @loader_path/../torch/lib, /opt/homebrew/opt/ffmpeg/lib"
        ),
        "{plan}"
    );
    insta::assert_snapshot!("plan_macos", plan);
}

#[test]
fn windows_rocm_plan_uses_import_libraries_and_backslashes() {
    let plan = plan_for("windows", &["--version", "0.9.1"]);
    assert!(plan.contains(r"IMPORTED_IMPLIB"), "{plan}");
    assert!(
        plan.contains(r"C:\Users\me\venv\Lib\site-packages\torchcodec"),
        "{plan}"
    );
    assert!(!plan.contains("RUNPATH"), "{plan}");
    // FFmpeg's DLLs come from its bin directory through the preload hook; torch's own
    // directory is added by torch itself.
    assert!(
        plan.contains(r"add_dll_directory + preload the DLLs needed from: C:\ffmpeg\bin"),
        "{plan}"
    );
    assert!(
        !plan.contains(r"preload the DLLs needed from: C:\Users"),
        "{plan}"
    );
    insta::assert_snapshot!("plan_windows_rocm", plan);
}

/// Host and target are values: the same Windows venv planned from a Linux host (the machine
/// file names the host's platform) keeps the target's layout, suffixes and preload hook, but
/// every path under the cache (sources, build tree, tools, logs) is the host's. Planned on
/// Windows itself (no `host_platform`), the cache paths are Windows paths.
#[test]
fn a_windows_venv_planned_from_a_linux_host_keeps_host_paths_for_the_cache() {
    let mut m = machine("windows");
    m["host_platform"] = serde_json::json!({"os": "linux", "arch": "x86_64"});
    let cross = plan_of(m, &["--version", "0.9.1"]);
    assert!(cross.contains("cache: /cache/git"), "{cross}");
    assert!(cross.contains("log: /cache/logs"), "{cross}");
    assert!(
        cross.contains(r"C:\Users\me\venv\Lib\site-packages\torchcodec"),
        "{cross}"
    );
    assert!(cross.contains("DLL preload hook"), "{cross}");
    assert!(
        !cross.contains(r"/cache\"),
        "a host path with a Windows separator:\n{cross}"
    );
    let native = plan_for("windows", &["--version", "0.9.1"]);
    assert!(native.contains(r"cache: /cache\git"), "{native}");
}

#[test]
fn native_torch_cmake_on_rocm_without_a_rocm_root_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("machine.json");
    std::fs::write(&file, machine("linux").to_string()).unwrap();
    let out = rocbuild(
        &[
            "torchcodec",
            "--dry-run",
            "--machine",
            file.to_str().unwrap(),
            "--torch-cmake",
            "native",
        ],
        &[],
    );
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("needs a ROCm root"), "{}", out.stderr);
}

/// The plan as data (`--dry-run --json`) for each fixture machine, pinned: a change of
/// structure (Host/Target, the platform rules) must leave every plan the same.
#[test]
fn json_plans_of_the_fixture_machines_are_pinned() {
    for os in ["linux", "macos", "windows"] {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("machine.json");
        std::fs::write(&file, serde_json::to_string_pretty(&machine(os)).unwrap()).unwrap();
        let out = rocbuild(
            &[
                "torchcodec",
                "--dry-run",
                "--json",
                "--machine",
                file.to_str().unwrap(),
                "--cache",
                "/cache",
                "--jobs",
                "8",
                "--version",
                "0.9.1",
            ],
            &[],
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
        let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        let text = redact(&serde_json::to_string_pretty(&v).unwrap(), tmp.path());
        insta::assert_snapshot!(format!("json_plan_{os}"), text);
    }
}
