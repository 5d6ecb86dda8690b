//! A CUDA toolkit from the package index: the pinned wheels (`recipes/downloads/cuda.toml`),
//! downloaded by sha256 or taken from a directory of wheels offline, unpacked with the hardened
//! extraction, and assembled into ONE CUDA root in the tools area: `bin/` (nvcc and its parts),
//! `include/`, `lib/` with unversioned `.so` links, a link-only `lib/stubs/libcuda.so`,
//! `nvvm/`, and rocbuild's own `bin/nvcc.profile`.
//!
//! Everything read here (the wheels, their unpacked trees in the cache, a venv's RECORD) is
//! untrusted: names are checked to stay under their folder, and no link is followed or copied.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::extract::unsafe_reason;
use crate::{io, FetchError};

/// The pins shipped with rocbuild (`recipes/downloads/cuda.toml`).
pub const BUILTIN_CUDA_PINS: &str = include_str!("../../../recipes/downloads/cuda.toml");

/// One wheel of a toolkit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CudaWheel {
    /// The distribution's name on the index (`nvidia-cuda-nvcc`).
    pub name: String,
    pub version: String,
    /// `compiler` (always installed) or `library:NAME` (when a build links NAME).
    pub part: String,
    /// The wheel's folder that maps to the CUDA root (`nvidia/cu13`).
    pub root: String,
    pub url: String,
    pub sha256: String,
}

impl CudaWheel {
    /// `cublas` for `library:cublas`; None for a compiler part.
    pub fn library(&self) -> Option<&str> {
        self.part.strip_prefix("library:")
    }

    /// The wheel's file name, the last segment of its URL.
    pub fn file_name(&self) -> &str {
        self.url.rsplit('/').next().unwrap_or(&self.url)
    }

    /// `nvidia_cuda_nvcc-13.2.86.dist-info`, as pip installs it into a venv.
    fn dist_info(&self) -> String {
        format!(
            "{}-{}.dist-info",
            self.name.replace(['-', '.'], "_"),
            self.version
        )
    }
}

/// One CUDA toolkit release rocbuild can install.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CudaToolkitPin {
    /// What `--cuda` names (`13.2`).
    pub version: String,
    /// nvcc's own version (`13.2.86`).
    pub release: String,
    pub os: String,
    pub arch: String,
    /// Why no compiler can be made from these wheels (CUDA 12's nvcc wheel has no nvcc).
    #[serde(default)]
    pub no_compiler: Option<String>,
    #[serde(default)]
    pub wheel: Vec<CudaWheel>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaPins {
    #[serde(default)]
    pub toolkit: Vec<CudaToolkitPin>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl CudaPins {
    pub fn parse(file: &str, text: &str) -> Result<CudaPins, FetchError> {
        let bad = |reason: String| FetchError::CudaPins {
            file: file.to_string(),
            reason,
        };
        let pins: CudaPins = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        for t in &pins.toolkit {
            for w in &t.wheel {
                let part_ok = w.part == "compiler" || w.library().is_some_and(|l| !l.is_empty());
                let root_ok = unsafe_reason(&w.root).is_none() && !w.root.is_empty();
                if !is_sha256(&w.sha256)
                    || !w.url.starts_with("https://")
                    || !w.file_name().ends_with(".whl")
                    || !part_ok
                    || !root_ok
                {
                    return Err(bad(format!(
                        "CUDA {} wheel {} {} needs an https url ending in .whl, a 64-hex-digit sha256, part = \"compiler\" or \"library:NAME\" and a relative root",
                        t.version, w.name, w.version
                    )));
                }
            }
        }
        Ok(pins)
    }

    pub fn builtin() -> CudaPins {
        // Checked by a test; an invalid built-in file is a bug in rocbuild, not user input.
        Self::parse("<builtin>/downloads/cuda.toml", BUILTIN_CUDA_PINS).unwrap_or_default()
    }

    /// The toolkit `version` (`13.2`, or a major `13` for its newest pin) for this OS/CPU;
    /// the first listed for the platform when `version` is None.
    pub fn pick(
        &self,
        os: &str,
        arch: &str,
        version: Option<&str>,
    ) -> Result<&CudaToolkitPin, FetchError> {
        let here: Vec<&CudaToolkitPin> = self
            .toolkit
            .iter()
            .filter(|t| t.os == os && t.arch == arch)
            .collect();
        let fits = |t: &&CudaToolkitPin| match version {
            None => t.no_compiler.is_none(),
            Some(v) => t.version == v || t.version.split('.').next() == Some(v),
        };
        here.iter().copied().find(fits).ok_or_else(|| {
            let listed: Vec<String> = here.iter().map(|t| t.version.clone()).collect();
            FetchError::NoCudaPin {
                version: version.unwrap_or("(any)").to_string(),
                platform: format!("{os}-{arch}"),
                help: if listed.is_empty() {
                    "rocbuild pins no CUDA toolkit wheels for this platform: install NVIDIA's CUDA toolkit and set CUDA_HOME to it".into()
                } else {
                    format!(
                        "pinned for this platform: {}; or install NVIDIA's CUDA toolkit {} and set CUDA_HOME to it",
                        listed.join(", "),
                        version.unwrap_or("")
                    )
                },
            }
        })
    }
}

/// What [`install_cuda_toolkit`] is given.
#[derive(Debug, Clone, Default)]
pub struct CudaInstall<'a> {
    /// Where downloaded wheels are kept (`<cache>/downloads`).
    pub downloads: PathBuf,
    /// The tools area (`<cache>/tools`): the unpacked wheels and the assembled root go under
    /// its `cuda/`.
    pub tools: PathBuf,
    /// Directories of wheels to take a pinned file from, by name and checked by sha256,
    /// before any download (offline use; the tests' cached wheels).
    pub offline: Vec<PathBuf>,
    /// The libraries the build links (`cublas`): their `library:` wheels are installed too.
    pub libraries: Vec<String>,
    /// The venv's site-packages: a library wheel its torch already carries (same name and
    /// version) is used from there as it is, not downloaded again.
    pub site_packages: Option<PathBuf>,
    /// The host C compiler that builds the link-only `libcuda.so` stub (none: no stub).
    pub cc: Option<&'a Path>,
}

/// The assembled toolkit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CudaRoot {
    pub root: PathBuf,
    pub version: String,
    pub release: String,
    /// `nvidia-cuda-nvcc 13.2.86 (cached download)`, one line per wheel.
    pub wheels: Vec<String>,
    /// Whether `lib/stubs/libcuda.so` was made.
    pub driver_stub: bool,
}

/// Where a wheel's files come from.
struct Source {
    /// The folder that maps to the CUDA root.
    dir: PathBuf,
    /// Only these files under `dir` (a venv's RECORD), or all of them (an unpacked wheel).
    only: Option<BTreeSet<PathBuf>>,
    line: String,
}

/// Install (or reuse) the pinned toolkit and assemble its root. Refuses a pin whose wheels
/// hold no compiler, with why and what works instead.
pub fn install_cuda_toolkit(
    pin: &CudaToolkitPin,
    req: &CudaInstall,
) -> Result<CudaRoot, FetchError> {
    if let Some(why) = &pin.no_compiler {
        return Err(FetchError::NoCudaCompiler {
            version: pin.version.clone(),
            why: why.clone(),
        });
    }
    let wanted: Vec<&CudaWheel> = pin
        .wheel
        .iter()
        .filter(|w| {
            w.library()
                .is_none_or(|l| req.libraries.iter().any(|x| x == l))
        })
        .collect();
    for l in &req.libraries {
        if !wanted.iter().any(|w| w.library() == Some(l.as_str())) {
            return Err(FetchError::CudaPins {
                file: "<builtin>/downloads/cuda.toml".into(),
                reason: format!("CUDA {} pins no wheel for the library {l}", pin.version),
            });
        }
    }
    let cuda = req.tools.join("cuda");
    let mut sources = Vec::new();
    // `layout 2`: the root carries version.json (roots assembled before are assembled again).
    let mut key: Vec<String> = vec![pin.release.clone(), "layout 2".into()];
    for w in &wanted {
        let s = match venv_copy(w, req.site_packages.as_deref())? {
            Some(s) => s,
            None => unpacked(w, req, &cuda)?,
        };
        key.push(format!("{} {} {}", w.name, w.sha256, s.dir.display()));
        sources.push(s);
    }
    let key = sha256_hex(key.join("\n").as_bytes());
    let root = cuda.join(format!("{}-{}", pin.release, &key[..12]));
    let marker = root.join(".rocbuild-cuda-root");
    let wheels: Vec<String> = sources.iter().map(|s| s.line.clone()).collect();
    if std::fs::read_to_string(&marker).is_ok_and(|k| k.trim() == key) {
        return Ok(CudaRoot {
            driver_stub: root.join("lib/stubs/libcuda.so").is_file(),
            root,
            version: pin.version.clone(),
            release: pin.release.clone(),
            wheels,
        });
    }
    let staging = tempfile::Builder::new()
        .prefix(".rocbuild-cuda-")
        .tempdir_in(&cuda)
        .map_err(io("create a staging directory in", &cuda))?;
    let at = staging.path();
    for s in &sources {
        merge(&s.dir, s.only.as_ref(), at)?;
    }
    unversioned_links(&at.join("lib"))?;
    write_profile(at)?;
    write_version(at, &pin.release)?;
    let driver_stub = match req.cc {
        Some(cc) => crate::cuda_stub::make_driver_stub(cc, at)?,
        None => false,
    };
    std::fs::write(at.join(".rocbuild-cuda-root"), &key).map_err(io("write", &marker))?;
    if root.exists() {
        std::fs::remove_dir_all(&root).map_err(io("remove the stale", &root))?;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, &root).map_err(io("move the assembled toolkit to", &root))?;
    Ok(CudaRoot {
        root,
        version: pin.version.clone(),
        release: pin.release.clone(),
        wheels,
        driver_stub,
    })
}

/// The wheel as the venv holds it, when its torch carries the same version: its RECORD's
/// files under the wheel's root folder (a name that escapes is refused).
fn venv_copy(w: &CudaWheel, site: Option<&Path>) -> Result<Option<Source>, FetchError> {
    let Some(site) = site else { return Ok(None) };
    if w.library().is_none() {
        return Ok(None);
    }
    let record = site.join(w.dist_info()).join("RECORD");
    let Ok(text) = std::fs::read_to_string(&record) else {
        return Ok(None);
    };
    let prefix = format!("{}/", w.root);
    let mut only = BTreeSet::new();
    for line in text.lines() {
        let name = line.split(',').next().unwrap_or("");
        if let Some(why) = unsafe_reason(name) {
            return Err(FetchError::UnsafeArchive {
                archive: record.display().to_string(),
                entry: name.to_string(),
                reason: format!("names a file outside site-packages ({why})"),
                help: format!(
                    "the venv's {} {} is damaged or was not installed by pip: reinstall it",
                    w.name, w.version
                ),
            });
        }
        if let Some(rel) = name.strip_prefix(&prefix) {
            only.insert(PathBuf::from(rel));
        }
    }
    Ok(Some(Source {
        dir: site.join(&w.root),
        only: Some(only),
        line: format!("{} {} (the venv's own, used as it is)", w.name, w.version),
    }))
}

/// The wheel unpacked under `<tools>/cuda/wheels/`, from an offline directory or a verified
/// download; unpacked once (a marker holds the wheel's sha256).
fn unpacked(w: &CudaWheel, req: &CudaInstall, cuda: &Path) -> Result<Source, FetchError> {
    let name = w.file_name();
    let dir = cuda.join("wheels").join(name.trim_end_matches(".whl"));
    let marker = dir.join(".rocbuild-wheel-sha256");
    let mut how = "unpacked before";
    if !std::fs::read_to_string(&marker).is_ok_and(|s| s.trim() == w.sha256) {
        let offline = req
            .offline
            .iter()
            .map(|d| d.join(name))
            .find(|p| p.is_file());
        let file = match offline {
            Some(p) => {
                let got = crate::sha256_file(&p)?;
                if !got.eq_ignore_ascii_case(&w.sha256) {
                    return Err(FetchError::ChecksumMismatch {
                        url: p.display().to_string(),
                        expected: w.sha256.clone(),
                        actual: got,
                    });
                }
                how = "from the wheels directory";
                p
            }
            None => {
                how = "downloaded, checked by sha256";
                crate::download_verified(&w.url, &w.sha256, &req.downloads)?
            }
        };
        crate::extract_zip_safely(&file, &dir)?;
        std::fs::write(&marker, &w.sha256).map_err(io("write", &marker))?;
    }
    Ok(Source {
        dir: dir.join(&w.root),
        only: None,
        line: format!("{} {} ({how})", w.name, w.version),
    })
}

/// Python package markers the wheels carry, which a CUDA root has no use for.
fn skipped(name: &str) -> bool {
    name == "__init__.py" || name == "__pycache__" || name.starts_with(".rocbuild-")
}

/// Every file of `from` (or only those in `only`) into `to` at the same place: hard-linked
/// where the filesystem allows, else copied. A link met on the way is refused, never followed;
/// a file two wheels both hold is taken from the first.
fn merge(from: &Path, only: Option<&BTreeSet<PathBuf>>, to: &Path) -> Result<(), FetchError> {
    let mut todo: Vec<PathBuf> = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let dir = from.join(&rel);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && rel.as_os_str().is_empty() => {
                return Err(FetchError::UnsafeArchive {
                    archive: from.display().to_string(),
                    entry: String::new(),
                    reason: "is missing: the wheel does not hold the folder its pin names".into(),
                    help: "the pin's `root` does not match the wheel; report it".into(),
                });
            }
            Err(e) => return Err(io("read", &dir)(e)),
        };
        for e in entries {
            let e = e.map_err(io("read", &dir))?;
            let name = e.file_name();
            if skipped(&name.to_string_lossy()) {
                continue;
            }
            let r = rel.join(&name);
            let meta = std::fs::symlink_metadata(e.path()).map_err(io("read", &e.path()))?;
            if meta.file_type().is_symlink() {
                return Err(FetchError::UnsafeArchive {
                    archive: from.display().to_string(),
                    entry: r.display().to_string(),
                    reason: "is a link (the wheels hold none: the unpacked copy was altered)"
                        .into(),
                    help: "remove the tools area's cuda/ folder (rocbuild clean --builds) and run again".into(),
                });
            }
            if meta.is_dir() {
                todo.push(r);
                continue;
            }
            if !meta.is_file() || only.is_some_and(|o| !o.contains(&r)) {
                continue;
            }
            let dest = to.join(&r);
            if dest.exists() {
                continue;
            }
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent).map_err(io("create", parent))?;
            }
            if std::fs::hard_link(e.path(), &dest).is_err() {
                std::fs::copy(e.path(), &dest).map_err(io("copy into", &dest))?;
            }
        }
    }
    Ok(())
}

/// `libcudart.so -> libcudart.so.13` for every versioned library without an unversioned
/// name (what a link line's `-lcudart` and CMake's find_library look for). The link names a
/// file in its own folder only.
fn unversioned_links(lib: &Path) -> Result<(), FetchError> {
    let Ok(entries) = std::fs::read_dir(lib) else {
        return Ok(());
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    // The shortest versioned name (`.so.13` before `.so.13.2`) is the one linked to.
    names.sort_by_key(|n| (n.len(), n.clone()));
    for n in &names {
        let Some(l) = rocbuild_probe::platform::libname::parse(n).filter(|l| l.version.is_some())
        else {
            continue;
        };
        let plain = lib.join(l.stem.trim_end_matches('.'));
        if std::fs::symlink_metadata(&plain).is_ok() {
            continue;
        }
        link(n, &plain)?;
    }
    Ok(())
}

/// A link to the sibling `target` (a copy where links need a privilege).
fn link(target: &str, at: &Path) -> Result<(), FetchError> {
    rocbuild_probe::platform::host::link_or_copy_sibling(target, at).map_err(io("link", at))
}

/// `version.json` as NVIDIA's toolkits have it (`{"cuda": {"version": "13.2.86"}}`): what
/// status, doctor and `wheel` read a toolkit's version from, for this root as for a system one.
fn write_version(root: &Path, release: &str) -> Result<(), FetchError> {
    let at = root.join("version.json");
    if std::fs::symlink_metadata(&at).is_ok() {
        std::fs::remove_file(&at).map_err(io("replace", &at))?;
    }
    let text = serde_json::json!({"cuda": {"name": "CUDA SDK", "version": release}});
    std::fs::write(&at, format!("{text:#}\n")).map_err(io("write", &at))
}

/// rocbuild's own `bin/nvcc.profile` (the wheel's is not trusted, and a CUDA 12 layout has
/// none): nvcc reads it to find cicc, libdevice, the headers (CCCL's under include/cccl when
/// there) and the libraries, all relative to itself.
fn write_profile(root: &Path) -> Result<(), FetchError> {
    let bin = root.join("bin");
    let profile = bin.join("nvcc.profile");
    // The merged file may be a hard link into the unpacked wheel: unlink, never write through.
    if std::fs::symlink_metadata(&profile).is_ok() {
        std::fs::remove_file(&profile).map_err(io("replace", &profile))?;
    }
    let cccl = if root.join("include/cccl").is_dir() {
        "SYSTEM_INCLUDES +=  \"-isystem\" \"$(TOP)/include/cccl\" $(_SPACE_)\n"
    } else {
        ""
    };
    let text = format!(
        "# Written by rocbuild for a CUDA root assembled from the package index's wheels.\n\n\
         TOP              = $(_HERE_)/..\n\n\
         CICC_PATH        = $(TOP)/nvvm/bin\n\
         NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice\n\n\
         LD_LIBRARY_PATH += $(TOP)/lib:\n\
         PATH            += $(CICC_PATH):$(_HERE_):\n\n\
         INCLUDES        +=  \"-I$(TOP)/include\" $(_SPACE_)\n\
         {cccl}\n\
         LIBRARIES        =+ $(_SPACE_) \"-L$(TOP)/lib/stubs\" \"-L$(TOP)/lib\"\n\n\
         CUDAFE_FLAGS    +=\n\
         PTXAS_FLAGS     +=\n"
    );
    std::fs::create_dir_all(&bin).map_err(io("create", &bin))?;
    std::fs::write(&profile, text).map_err(io("write", &profile))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_pins_parse_and_pick() {
        let pins = CudaPins::parse("<builtin>", BUILTIN_CUDA_PINS).unwrap();
        let t = pins.pick("linux", "x86_64", Some("13.2")).unwrap();
        assert_eq!(t.release, "13.2.86");
        assert!(t.wheel.iter().any(|w| w.name == "nvidia-cuda-nvcc"));
        assert_eq!(
            pins.pick("linux", "x86_64", Some("13")).unwrap().version,
            "13.2"
        );
        // No version asked: the first pin that holds a compiler.
        assert_eq!(pins.pick("linux", "x86_64", None).unwrap().version, "13.2");
        assert!(pins
            .pick("linux", "x86_64", Some("12.9"))
            .unwrap()
            .no_compiler
            .is_some());
        let e = pins.pick("linux", "x86_64", Some("11.8")).unwrap_err();
        let help = miette::Diagnostic::help(&e).unwrap().to_string();
        assert!(help.contains("13.2, 12.9"), "{help}");
        assert!(pins.pick("windows", "x86_64", Some("13.2")).is_err());
        let bad = "[[toolkit]]\nversion='1'\nrelease='1'\nos='linux'\narch='x86_64'\n[[toolkit.wheel]]\nname='a'\nversion='1'\npart='compiler'\nroot='../x'\nurl='https://h/a.whl'\nsha256='00'\n";
        assert!(CudaPins::parse("f.toml", bad).is_err());
    }

    #[test]
    fn a_pin_without_a_compiler_is_refused_before_any_download() {
        let pins = CudaPins::builtin();
        let t = pins.pick("linux", "x86_64", Some("12.9")).unwrap();
        let d = tempfile::tempdir().unwrap();
        let req = CudaInstall {
            downloads: d.path().join("downloads"),
            tools: d.path().join("tools"),
            ..Default::default()
        };
        let e = install_cuda_toolkit(t, &req).unwrap_err();
        assert!(e.to_string().contains("CUDA 12.9"), "{e}");
        assert!(e.to_string().contains("no nvcc"), "{e}");
        assert!(!d.path().join("downloads").exists());
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: the toolkit it assembles is the Linux wheels' (.so links)"
    )]
    fn unversioned_links_name_the_shortest_version_in_their_own_folder() {
        let d = tempfile::tempdir().unwrap();
        for n in [
            "libcudart.so.13",
            "libnvrtc.so.13",
            "libnvrtc.so.13.2",
            "libx.a",
        ] {
            std::fs::write(d.path().join(n), "").unwrap();
        }
        unversioned_links(d.path()).unwrap();
        let t = |n: &str| std::fs::read_link(d.path().join(n)).unwrap();
        assert_eq!(t("libcudart.so"), PathBuf::from("libcudart.so.13"));
        assert_eq!(t("libnvrtc.so"), PathBuf::from("libnvrtc.so.13"));
    }

    /// A link in an unpacked wheel (the cache altered behind rocbuild's back) is refused,
    /// never followed into the assembled root.
    #[cfg(unix)]
    #[test]
    fn a_link_in_an_unpacked_wheel_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join("w");
        std::fs::create_dir_all(from.join("lib")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", from.join("lib/libcudart.so.13")).unwrap();
        let to = d.path().join("root");
        let e = merge(&from, None, &to).unwrap_err();
        assert!(e.to_string().contains("is a link"), "{e}");
        assert!(!to.join("lib/libcudart.so.13").exists());
    }
}
