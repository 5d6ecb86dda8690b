//! Who provides a library: a package in site-packages, a GPU SDK, the operating system, or
//! just a directory. This is what a user acts on ("pip install X", "install ROCm").

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde::Serialize;

use crate::linkage::Found;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// A file under site-packages. `name`: the distribution whose dist-info RECORD lists it
    /// (`nvidia-cublas-cu12`, what `pip install` takes), else the top directory; `dir`: the top
    /// directory (`nvidia`, `torch`, `_rocm_sdk_core`).
    Package {
        name: String,
        dir: String,
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

/// `rest` as RECORD spells a path: `/` separators, `.` and `..` resolved lexically.
fn record_key(rest: &Path) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    for c in rest.components() {
        match c {
            Component::Normal(n) => parts.push(n.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

/// The distribution's name from its dist-info: `Name:` in METADATA, else the directory's name
/// up to the version (`nvidia_cublas_cu12-12.8.4.1.dist-info` -> `nvidia_cublas_cu12`).
fn dist_name(dist_info: &Path) -> String {
    if let Ok(meta) = std::fs::read_to_string(dist_info.join("METADATA")) {
        for line in meta.lines() {
            if line.is_empty() {
                break;
            }
            if let Some(n) = line.strip_prefix("Name:") {
                return n.trim().to_string();
            }
        }
    }
    let dir = dist_info
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    dir.split('-').next().unwrap_or(&dir).to_string()
}

/// Path (as RECORD spells it, relative to site-packages; also lowercased, for Windows' case
/// insensitivity) -> distribution, from every `*.dist-info/RECORD` of `site`.
fn record_index(site: &Path) -> HashMap<String, String> {
    let mut index = HashMap::new();
    let Ok(entries) = std::fs::read_dir(site) else {
        return index;
    };
    let mut dist_infos: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "dist-info"))
        .collect();
    dist_infos.sort();
    for d in dist_infos {
        let Ok(record) = std::fs::read_to_string(d.join("RECORD")) else {
            continue;
        };
        let name = dist_name(&d);
        for (path, _, _) in rocbuild_venv::record::parse(&record) {
            let Some(key) = record_key(Path::new(&path)) else {
                continue;
            };
            index
                .entry(key.to_lowercase())
                .or_insert_with(|| name.clone());
            index.entry(key).or_insert_with(|| name.clone());
        }
    }
    index
}

/// The distribution that installed `site/rest`, by the dist-info RECORD files of `site` (read
/// once per site-packages and process).
pub fn distribution_of(site: &Path, rest: &Path) -> Option<String> {
    type Cache = Mutex<HashMap<PathBuf, Arc<HashMap<String, String>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = record_key(rest)?;
    let index = {
        let mut cache = CACHE
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        cache
            .entry(site.to_path_buf())
            .or_insert_with(|| Arc::new(record_index(site)))
            .clone()
    };
    index
        .get(&key)
        .or_else(|| index.get(&key.to_lowercase()))
        .cloned()
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
        let dir = rest
            .components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = distribution_of(&site, &rest).unwrap_or_else(|| dir.clone());
        return Source::Package {
            name,
            dir,
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
                dir: "torch".into(),
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

    #[test]
    fn the_provider_is_the_distribution_that_installed_the_file() {
        let t = tempfile::tempdir().unwrap();
        let site = t.path().join("lib/python3.12/site-packages");
        let lib = site.join("nvidia/cublas/lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("libcublas.so.12"), b"x").unwrap();
        std::fs::create_dir_all(site.join("nvidia/cudnn/lib")).unwrap();
        std::fs::write(site.join("nvidia/cudnn/lib/libcudnn.so.9"), b"x").unwrap();
        let di = site.join("nvidia_cublas_cu12-12.8.4.1.dist-info");
        std::fs::create_dir_all(&di).unwrap();
        std::fs::write(
            di.join("METADATA"),
            "Metadata-Version: 2.1\nName: nvidia-cublas-cu12\nVersion: 12.8.4.1\n\nName: not this\n",
        )
        .unwrap();
        std::fs::write(
            di.join("RECORD"),
            "nvidia/cublas/lib/libcublas.so.12,sha256=abc,1\nnvidia_cublas_cu12-12.8.4.1.dist-info/RECORD,,\n",
        )
        .unwrap();
        let cublas = classify(&found(lib.join("libcublas.so.12").to_str().unwrap(), false));
        assert_eq!(
            cublas,
            Source::Package {
                name: "nvidia-cublas-cu12".into(),
                dir: "nvidia".into(),
                site_packages: site.clone()
            }
        );
        assert_eq!(cublas.to_string(), "package nvidia-cublas-cu12");
        // A file no RECORD lists: the top directory, as before.
        let cudnn = site.join("nvidia/cudnn/lib/libcudnn.so.9");
        assert!(matches!(
            classify(&found(cudnn.to_str().unwrap(), false)),
            Source::Package { name, .. } if name == "nvidia"
        ));
    }
}
