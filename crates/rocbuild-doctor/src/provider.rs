//! Who provides a library: a package in site-packages, a GPU SDK, the operating system, or
//! just a directory. This is what a user acts on ("pip install X", "install ROCm").

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::linkage::Found;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// `site-packages/NAME/...` (NAME: the top directory, e.g. `torch`, `_rocm_sdk_core`).
    Package {
        name: String,
        site_packages: PathBuf,
    },
    /// A GPU SDK: ROCm / HIP or CUDA, with its root.
    Sdk { name: String, root: PathBuf },
    /// Part of the operating system: never bundled.
    System,
    /// Anything else: the directory it is in.
    Dir { dir: PathBuf },
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Package { name, .. } => write!(f, "package {name}"),
            Source::Sdk { name, root } => write!(f, "{name} SDK {}", root.display()),
            Source::System => f.write_str("system"),
            Source::Dir { dir } => write!(f, "dir {}", dir.display()),
        }
    }
}

/// The site-packages directory `path` is under, and the part of `path` below it.
pub fn site_packages_of(path: &Path) -> Option<(PathBuf, PathBuf)> {
    let comps: Vec<Component> = path.components().collect();
    let i = comps.iter().rposition(|c| {
        let s = c.as_os_str().to_string_lossy().to_ascii_lowercase();
        s == "site-packages" || s == "dist-packages"
    })?;
    let site: PathBuf = comps[..=i].iter().collect();
    let rest: PathBuf = comps[i + 1..].iter().collect();
    (!rest.as_os_str().is_empty()).then_some((site, rest))
}

/// The C and C++ runtime every program on the system shares: left to the system, wherever a
/// copy was found (a conda env ships its own libstdc++, which a frozen app must not carry).
pub fn is_runtime_name(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    const ELF: &[&str] = &[
        "libc.so",
        "libm.so",
        "libdl.so",
        "libpthread.so",
        "librt.so",
        "libutil.so",
        "libresolv.so",
        "ld-linux",
        "libstdc++.so",
        "libgcc_s.so",
        "libmvec.so",
        "libanl.so",
    ];
    ELF.iter().any(|p| l.starts_with(p)) || l.starts_with("api-ms-win-") || l.starts_with("ext-ms-")
}

/// Where a found library comes from.
pub fn classify(f: &Found) -> Source {
    let Some(path) = &f.path else {
        return Source::System;
    };
    if f.system || is_runtime_name(&f.name) {
        return Source::System;
    }
    if let Some((site, rest)) = site_packages_of(path) {
        let name = rest
            .components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .unwrap_or_default();
        return Source::Package {
            name,
            site_packages: site,
        };
    }
    for a in path.ancestors().skip(1) {
        let n = a
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        if n.starts_with("rocm") || n == "hip" {
            return Source::Sdk {
                name: "ROCm".into(),
                root: a.to_path_buf(),
            };
        }
        if n.starts_with("cuda") {
            return Source::Sdk {
                name: "CUDA".into(),
                root: a.to_path_buf(),
            };
        }
    }
    Source::Dir {
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(path: &str, system: bool) -> Found {
        let p = PathBuf::from(path);
        Found {
            name: p.file_name().unwrap().to_string_lossy().into_owned(),
            path: Some(p),
            how: String::new(),
            needed_by: vec![],
            system,
        }
    }

    #[test]
    fn providers() {
        assert_eq!(
            classify(&found(
                "/v/lib/python3.11/site-packages/torch/lib/libc10.so",
                false
            )),
            Source::Package {
                name: "torch".into(),
                site_packages: "/v/lib/python3.11/site-packages".into()
            }
        );
        assert_eq!(
            classify(&found("/opt/rocm-6.4.1/lib/libamdhip64.so.6", false)),
            Source::Sdk {
                name: "ROCm".into(),
                root: "/opt/rocm-6.4.1".into()
            }
        );
        assert_eq!(
            classify(&found("/usr/lib/x86_64-linux-gnu/libavutil.so.57", true)),
            Source::System
        );
        assert_eq!(
            classify(&found("/home/u/env/lib/libstdc++.so.6", false)),
            Source::System
        );
        assert_eq!(
            classify(&found("/home/u/ffmpeg/lib/libavutil.so.59", false)),
            Source::Dir {
                dir: "/home/u/ffmpeg/lib".into()
            }
        );
    }
}
