//! Typed machines for planner tests: a Linux (ROCm torch), Windows (TheRock ROCm torch) or
//! macOS (CPU torch) host as the probe would describe it, with nothing read from this host.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rocbuild_probe::{
    Ffmpeg, Flavor, Machine, Os, Platform, Python, Tool, Toolkits, Tools, Torch, Venv,
};

fn tool(path: &str, version: Option<&str>) -> Option<Tool> {
    Some(Tool {
        path: PathBuf::from(path),
        version: version.map(str::to_string),
    })
}

/// A machine of `os` with a venv holding torch 2.9.1 (ROCm on Linux and Windows, CPU on
/// macOS), FFmpeg 7, and cmake, ninja, compilers and pkg-config.
pub fn machine(os: Os) -> Machine {
    let win = os == Os::Windows;
    let p = |unix: &str, w: &str| PathBuf::from(if win { w } else { unix });
    let home = if os == Os::Macos {
        "/Users/me"
    } else {
        "/home/me"
    };
    let root = p(&format!("{home}/venv"), r"C:\Users\me\venv");
    let site = p(
        &format!("{home}/venv/lib/python3.11/site-packages"),
        r"C:\Users\me\venv\Lib\site-packages",
    );
    let sep = if win { "\\" } else { "/" };
    let under =
        |rel: &str| PathBuf::from(format!("{}{sep}{}", site.display(), rel.replace('/', sep)));
    let (torch_v, hip, flavor) = match os {
        Os::Windows => ("2.9.1+rocmsdk20251116", Some("7.1.25424"), Flavor::Rocm),
        Os::Macos => ("2.9.1", None, Flavor::Cpu),
        Os::Linux => ("2.9.1+rocm6.4", Some("6.4.43482"), Flavor::Rocm),
    };
    Machine::here(
        Platform {
            os,
            arch: if os == Os::Macos { "aarch64" } else { "x86_64" }.into(),
            distro: (os == Os::Linux).then(|| "ubuntu".to_string()),
            distro_like: if os == Os::Linux {
                vec!["debian".to_string()]
            } else {
                Vec::new()
            },
        },
        host_parts(os),
        rocbuild_probe::TargetParts {
            venv: Venv {
                root: root.clone(),
                chosen_by: "$VIRTUAL_ENV".into(),
            },
            python: Python {
                exe: p(
                    &format!("{home}/venv/bin/python"),
                    r"C:\Users\me\venv\Scripts\python.exe",
                ),
                version: "3.11".into(),
                full_version: "3.11.9".into(),
                site_packages: site.clone(),
                include: p("/usr/include/python3.11", r"C:\Python311\Include"),
                ext_suffix: match os {
                    Os::Windows => ".cp311-win_amd64.pyd",
                    Os::Macos => ".cpython-311-darwin.so",
                    Os::Linux => ".cpython-311-x86_64-linux-gnu.so",
                }
                .into(),
                platform: match os {
                    Os::Windows => "win-amd64",
                    Os::Macos => "macosx-14.0-arm64",
                    Os::Linux => "linux-x86_64",
                }
                .into(),
                dll: None,
                libs: None,
                pth_file: None,
                distributions: BTreeMap::from([
                    ("torch".to_string(), "2.9.1".to_string()),
                    ("numpy".to_string(), "2.4.6".to_string()),
                    ("pyyaml".to_string(), "6.0.3".to_string()),
                ]),
                installer: Default::default(),
                shared_sites: Vec::new(),
            },
            torch: Some(Torch {
                version: torch_v.into(),
                git_version: Some("abc123".into()),
                cuda: None,
                hip: hip.map(str::to_string),
                flavor,
                cxx11_abi: (!win).then_some(true),
                dir: under("torch"),
                lib: under("torch/lib"),
                include: under("torch/include"),
                cmake: under("torch/share/cmake"),
            }),
            ffmpeg: Some(Ffmpeg {
                avutil_version: "59.39.100".into(),
                major: 7,
                lib: p(
                    if os == Os::Macos {
                        "/opt/homebrew/opt/ffmpeg/lib"
                    } else {
                        "/usr/lib/x86_64-linux-gnu"
                    },
                    r"C:\ffmpeg\lib",
                ),
                include: p(
                    if os == Os::Macos {
                        "/opt/homebrew/opt/ffmpeg/include"
                    } else {
                        "/usr/include/x86_64-linux-gnu"
                    },
                    r"C:\ffmpeg\include",
                ),
                pkg_config_path: win.then(|| PathBuf::from(r"C:\ffmpeg\lib\pkgconfig")),
                found_by: if win {
                    "--ffmpeg (pkg-config)"
                } else {
                    "pkg-config"
                }
                .into(),
                bin: win.then(|| PathBuf::from(r"C:\ffmpeg\bin")),
            }),
            ffmpeg_missing: None,
            hip_runtime: None,
            gpu: None,
            cuda_gpu: None,
            // Every system library the built-in recipes need, installed (the FFmpeg-era image
            // libraries stay absent: optional, and they would change every TorchCodec plan).
        },
    )
}

/// The build tools, toolkits and system libraries of the fixture machine of `os`.
fn host_parts(os: Os) -> rocbuild_probe::HostParts {
    let win = os == Os::Windows;
    rocbuild_probe::HostParts {
        tools: Tools {
            cmake: tool(
                if win {
                    r"C:\Program Files\CMake\bin\cmake.exe"
                } else {
                    "/usr/bin/cmake"
                },
                Some("cmake version 3.30.0"),
            ),
            ninja: tool(
                if win {
                    r"C:\ninja\ninja.exe"
                } else {
                    "/usr/bin/ninja"
                },
                Some("1.12.1"),
            ),
            cc: tool(
                if win {
                    r"C:\VS\bin\cl.exe"
                } else {
                    "/usr/bin/cc"
                },
                None,
            ),
            cxx: tool(
                if win {
                    r"C:\VS\bin\cl.exe"
                } else {
                    "/usr/bin/c++"
                },
                None,
            ),
            pkg_config: tool(
                if win {
                    r"C:\pkgconf\pkg-config.exe"
                } else {
                    "/usr/bin/pkg-config"
                },
                Some("1.8.1"),
            ),
            msvc: None,
            sccache: None,
            ccache: None,
        },
        toolkits: Toolkits::default(),
        rocm_sdks: Vec::new(),
        libraries: [
            "openblas",
            "libomp",
            "hipblas",
            "hiprand",
            "rocthrust",
            "hipcub",
        ]
        .iter()
        .map(|n| {
            (
                n.to_string(),
                rocbuild_probe::FoundLibrary {
                    at: format!("/usr/include/{n}").into(),
                    include_dir: Some("/usr/include".into()),
                    lib_dir: None,
                    digest: None,
                },
            )
        })
        // Windows: `pip install intel-openmp` in the venv (CTranslate2's OpenMP there).
        .chain(win.then(|| {
            (
                "iomp5".to_string(),
                rocbuild_probe::FoundLibrary {
                    at: r"C:\venv\Library\lib\libiomp5md.lib".into(),
                    include_dir: None,
                    lib_dir: Some(r"C:\venv\Library\lib".into()),
                    digest: None,
                },
            )
        }))
        .collect(),
    }
}

/// The same machine with a CPU torch (no ROCm, no CUDA).
pub fn cpu_machine(os: Os) -> Machine {
    let mut m = machine(os);
    if let Some(t) = &mut m.target.torch {
        t.version = "2.9.1".into();
        t.hip = None;
        t.cuda = None;
        t.flavor = Flavor::Cpu;
    }
    m
}
