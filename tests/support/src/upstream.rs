//! Real upstream wheels for other OSes, fetched once with `pip download --platform …` into the
//! workspace's `cache/wheels/` (git-ignored; `cargo xtask test` fetches the same list first).
//! A test that needs one skips, saying so, only when it is not cached and PyPI cannot be
//! reached.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One wheel of PyPI, by name, version and platform tag.
#[derive(Debug, Clone, Copy)]
pub struct Wheel {
    pub name: &'static str,
    pub version: &'static str,
    /// `macosx_14_0_arm64`, `win_amd64`, `manylinux_2_28_x86_64`.
    pub platform: &'static str,
}

/// bitsandbytes 0.50.1 for Linux x86-64 (its CPU, CUDA and XPU libraries, none for ROCm): the
/// Python part of the recipe's ROCm build in a chroot with no network.
pub const BITSANDBYTES_LINUX: Wheel = Wheel {
    name: "bitsandbytes",
    version: "0.50.1",
    platform: "manylinux_2_24_x86_64",
};

/// TorchCodec 0.16.0 for macOS arm64: its core, custom_ops and pybind libraries carry no
/// LC_RPATH at all (0.15 and 0.17 have Homebrew's `/opt/homebrew/opt/ffmpeg/lib`).
pub const TORCHCODEC_MACOS_NO_RPATH: Wheel = Wheel {
    name: "torchcodec",
    version: "0.16.0",
    platform: "macosx_14_0_arm64",
};

/// TorchCodec 0.17.0 for macOS arm64: one LC_RPATH, Homebrew's `/opt/homebrew/opt/ffmpeg/lib`.
/// Its `custom_ops7` beside 0.16.0's `core7` is a real ABI-mismatched pair (a partial
/// upgrade): custom_ops imports `facebook::torchcodec::…` symbols 0.16.0's core lacks.
pub const TORCHCODEC_MACOS_HOMEBREW_RPATH: Wheel = Wheel {
    name: "torchcodec",
    version: "0.17.0",
    platform: "macosx_14_0_arm64",
};

/// TorchCodec 0.17.0 for Windows: cores for FFmpeg 4–9 that import `avutil-NN.dll` and
/// friends, which the wheel does not ship (a shared FFmpeg must be found).
pub const TORCHCODEC_WINDOWS: Wheel = Wheel {
    name: "torchcodec",
    version: "0.17.0",
    platform: "win_amd64",
};

/// TorchCodec 0.10.0 for Windows, made for torch 2.10 only: its DLLs import
/// `??0MessageLogger@c10@@QEAA@PEBDHH_N@Z`, which later torch DLLs do not export.
pub const TORCHCODEC_WINDOWS_0_10: Wheel = Wheel {
    name: "torchcodec",
    version: "0.10.0",
    platform: "win_amd64",
};

/// torch for Windows (CPU): `torch/lib` holds `c10.dll`, `torch_cpu.dll`, … that TorchCodec's
/// Windows DLLs import, and that `import torch` loads first.
pub const TORCH_WINDOWS: Wheel = Wheel {
    name: "torch",
    version: "2.11.0",
    platform: "win_amd64",
};

/// CTranslate2 for Windows: ctranslate2.dll imports libiomp5md.dll and the MSVC runtime;
/// libiomp5md.dll imports WINTRUST.dll (System32).
pub const CTRANSLATE2_WINDOWS: Wheel = Wheel {
    name: "ctranslate2",
    version: "4.8.5",
    platform: "win_amd64",
};

/// The MSVC runtime DLLs (MSVCP140, VCRUNTIME140, VCRUNTIME140_1, …) as a wheel, for Windows.
pub const MSVC_RUNTIME: Wheel = Wheel {
    name: "msvc_runtime",
    version: "14.51.36231",
    platform: "win_amd64",
};

/// Every wheel of the corpus (what `cargo xtask test` fetches).
pub const CORPUS: &[Wheel] = &[
    TORCHCODEC_MACOS_NO_RPATH,
    TORCHCODEC_MACOS_HOMEBREW_RPATH,
    TORCHCODEC_WINDOWS,
    TORCHCODEC_WINDOWS_0_10,
    TORCH_WINDOWS,
    CTRANSLATE2_WINDOWS,
    MSVC_RUNTIME,
];

/// `<workspace>/cache/wheels`.
pub fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cache/wheels")
}

fn find(dir: &Path, w: &Wheel) -> Option<PathBuf> {
    let prefix = format!("{}-{}-", w.name, w.version);
    let arch = w.platform.rsplit('_').next().unwrap_or(w.platform);
    let os = w.platform.split('_').next().unwrap_or(w.platform);
    let mut hits: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            n.starts_with(&prefix) && n.ends_with(".whl") && n.contains(os) && n.contains(arch)
        })
        .collect();
    hits.sort();
    hits.pop()
}

/// The cached wheel, downloaded first when it is not there; `None` (with a line on stderr
/// saying why the test is skipped) when it is not cached and the download failed.
pub fn wheel(w: &Wheel) -> Option<PathBuf> {
    let dir = cache_dir();
    if let Some(p) = find(&dir, w) {
        return Some(p);
    }
    std::fs::create_dir_all(&dir).ok()?;
    let python = std::env::var("ROCBUILD_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(python)
        .args([
            "-m",
            "pip",
            "download",
            "-q",
            "--only-binary=:all:",
            "--no-deps",
            "--python-version",
            "3.12",
            "--platform",
            w.platform,
        ])
        .arg(format!("{}=={}", w.name.replace('_', "-"), w.version))
        .arg("-d")
        .arg(&dir)
        .output();
    match (out, find(&dir, w)) {
        (_, Some(p)) => Some(p),
        (Ok(o), None) => {
            crate::skip::skipped(&format!(
                "{}=={} ({}) is not in {} and pip could not download it (no network?; `cargo xtask setup` fetches it): {}",
                w.name,
                w.version,
                w.platform,
                dir.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            ));
            None
        }
        (Err(e), None) => {
            crate::skip::skipped(&format!("cannot run pip to download {}: {e}", w.name));
            None
        }
    }
}

/// Unpack only the entries of a wheel whose path starts with one of `prefixes`.
pub fn unpack_only(wheel: &Path, into: &Path, prefixes: &[&str]) {
    let f = std::fs::File::open(wheel).unwrap();
    let mut z = zip::ZipArchive::new(f).unwrap();
    for i in 0..z.len() {
        let mut e = z.by_index(i).unwrap();
        let Some(rel) = e.enclosed_name() else {
            continue;
        };
        let name = rel.to_string_lossy().replace('\\', "/");
        if e.is_dir() || !prefixes.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let out = into.join(&rel);
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let mut w = std::fs::File::create(&out).unwrap();
        std::io::copy(&mut e, &mut w).unwrap();
    }
}

/// Unpack a wheel (a zip) into `into`, as pip lays it out in site-packages.
pub fn unpack(wheel: &Path, into: &Path) {
    let f = std::fs::File::open(wheel).unwrap();
    let mut z = zip::ZipArchive::new(f).unwrap();
    z.extract(into).unwrap();
}
