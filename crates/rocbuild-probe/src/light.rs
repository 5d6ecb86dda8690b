//! Light probes for `status`, which must answer in milliseconds: no Python subprocess, no
//! library parsing. Each reads the same sources as the full probe, only less of them.

use std::path::{Path, PathBuf};

use crate::Os;

/// site-packages of a venv found on disk, without asking its Python (the platform's rule:
/// [`crate::PlatformRules::site_packages`]).
pub fn site_packages_of(root: &Path, os: Os) -> Option<PathBuf> {
    os.rules().site_packages(root)
}

/// torch as the venv's Python finds it, read from files without running it: its own
/// site-packages first, then the sites it shares (a `--system-site-packages` venv over a
/// system torch; `platform::shared_sites_of`). None when there is none.
pub fn venv_torch_version(site: &Path) -> Option<crate::TorchVersion> {
    // The venv's own first: `status` reads no `.pth` file when torch is there.
    crate::torch_version(site).or_else(|| {
        crate::platform::shared_sites_of(site)
            .iter()
            .find_map(|s| crate::torch_version(s))
    })
}

/// The FFmpeg major a build would find now, the way the full probe finds it (pkg-config,
/// optionally pointed at `dir`, else `dir`'s headers). None when there is none.
pub fn ffmpeg_major_now(dir: Option<&Path>) -> Option<u32> {
    let pkg_config = which::which("pkg-config").ok().map(|path| crate::Tool {
        path,
        version: None,
    });
    crate::probe_ffmpeg(dir, pkg_config.as_ref())
        .ok()
        .map(|f| f.major)
}

/// The version of a CUDA or ROCm toolkit root, from the files the toolkits ship:
/// `version.json` (CUDA 11.1+), `version.txt` (older CUDA), `.info/version` (ROCm),
/// `include/hip/hip_version.h` (HIP SDK, Debian's ROCm).
pub fn toolkit_version(root: &Path) -> Option<String> {
    if let Ok(text) = crate::read_text(root.join("version.json")) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            if let Some(s) = v["cuda"]["version"].as_str() {
                return Some(s.to_string());
            }
        }
    }
    for f in ["version.txt", ".info/version"] {
        if let Ok(text) = crate::read_text(root.join(f)) {
            let t = text.trim();
            let t = t.strip_prefix("CUDA Version ").unwrap_or(t);
            if !t.is_empty() {
                return Some(t.lines().next().unwrap_or(t).trim().to_string());
            }
        }
    }
    let hip = crate::read_text(root.join("include/hip/hip_version.h"))
        .ok()
        .and_then(|text| {
            let get = |name: &str| crate::c_define(&text, name);
            Some(format!(
                "{}.{}.{}",
                get("HIP_VERSION_MAJOR")?,
                get("HIP_VERSION_MINOR")?,
                get("HIP_VERSION_PATCH").unwrap_or_else(|| "0".into())
            ))
        });
    hip.or_else(|| cuda_header_version(root))
}

/// A CUDA toolkit without `version.json` (Debian's `nvidia-cuda-toolkit`, whose root is
/// `/usr`): `CUDA_VERSION` of `include/cuda.h` (`12040`: 12.4).
fn cuda_header_version(root: &Path) -> Option<String> {
    let text = crate::read_text(root.join("include/cuda.h")).ok()?;
    let n: u32 = crate::c_define(&text, "CUDA_VERSION")?.parse().ok()?;
    Some(format!("{}.{}", n / 1000, (n % 1000) / 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cuda_root_without_version_files_is_read_from_cuda_h() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(toolkit_version(d.path()), None);
        std::fs::create_dir_all(d.path().join("include")).unwrap();
        std::fs::write(
            d.path().join("include/cuda.h"),
            "#ifndef __cuda_cuda_h__\n#define CUDA_VERSION 12040\n",
        )
        .unwrap();
        assert_eq!(toolkit_version(d.path()).as_deref(), Some("12.4"));
    }

    #[test]
    fn finds_site_packages_without_python() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(site_packages_of(d.path(), Os::Linux), None);
        for v in ["python3.9", "python3.11"] {
            std::fs::create_dir_all(d.path().join("lib").join(v).join("site-packages")).unwrap();
        }
        assert_eq!(
            site_packages_of(d.path(), Os::Linux).unwrap(),
            d.path().join("lib/python3.11/site-packages")
        );
        // A venv of Python 3.9 with a python3.11 directory left behind: pyvenv.cfg decides.
        std::fs::write(
            d.path().join("pyvenv.cfg"),
            "home = /usr/bin\nversion = 3.9.18\n",
        )
        .unwrap();
        assert_eq!(
            site_packages_of(d.path(), Os::Linux).unwrap(),
            d.path().join("lib/python3.9/site-packages")
        );
        // uv writes version_info.
        std::fs::write(
            d.path().join("pyvenv.cfg"),
            "uv = 0.9.0\nversion_info = 3.11.7\n",
        )
        .unwrap();
        assert_eq!(
            site_packages_of(d.path(), Os::Linux).unwrap(),
            d.path().join("lib/python3.11/site-packages")
        );
        std::fs::create_dir_all(d.path().join("Lib/site-packages")).unwrap();
        assert_eq!(
            site_packages_of(d.path(), Os::Windows).unwrap(),
            d.path().join("Lib/site-packages")
        );
    }

    #[test]
    fn toolkit_versions_from_their_files() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        assert_eq!(toolkit_version(r), None);
        std::fs::create_dir_all(r.join("include/hip")).unwrap();
        std::fs::write(
            r.join("include/hip/hip_version.h"),
            "#define HIP_VERSION_MAJOR 5\n#define HIP_VERSION_MINOR 2\n#define HIP_VERSION_PATCH 21153\n",
        )
        .unwrap();
        assert_eq!(toolkit_version(r).as_deref(), Some("5.2.21153"));
        std::fs::create_dir_all(r.join(".info")).unwrap();
        std::fs::write(r.join(".info/version"), "6.2.4-120\n").unwrap();
        assert_eq!(toolkit_version(r).as_deref(), Some("6.2.4-120"));
        std::fs::write(
            r.join("version.json"),
            r#"{"cuda": {"name": "CUDA SDK", "version": "13.2.0"}}"#,
        )
        .unwrap();
        assert_eq!(toolkit_version(r).as_deref(), Some("13.2.0"));
    }
}
