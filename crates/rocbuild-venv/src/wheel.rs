//! `rocbuild wheel <recipe> --out DIR`: the rebuilt package as a standard wheel, built from
//! the files installed in the venv, so identical machines can `pip install` it: build once,
//! install many. The local version says what it was built for (`+cpu.ffmpeg5.torch2.9.1`,
//! `+cu132.torch2.15.0`, `+rocm6.4.gfx1010.gfx1030.torch2.9.1`: see [`LocalVersion`]) and
//! `Requires-Dist` pins torch's distribution as installed (the version
//! of its dist-info METADATA, which is what pip and uv compare: PyPI's CUDA torch is the
//! distribution `2.15.0` with `torch.__version__` `2.15.0+cu132`). The exact torch build
//! (`__version__`, git commit) is kept in `<dist-info>/rocbuild.json`.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Result, VenvError};
use crate::manifest::{self, Manifest};
use crate::record;

/// The wheel tags of the venv's Python: (`cp311`, `cp311`, `linux_x86_64`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tags {
    pub python: String,
    pub abi: String,
    pub platform: String,
}

impl Tags {
    /// The tags of a venv's Python (one small subprocess, no third-party import, no bytecode).
    pub fn of_python(py: &Path) -> Result<Tags> {
        let out = std::process::Command::new(py)
            // -B: -I (and a `._pth` Python) ignores PYTHONDONTWRITEBYTECODE, and site's
            // `.pth` files (setuptools' `_distutils_hack`) would leave bytecode in the venv.
            .args([
                "-I",
                "-B",
                "-c",
                "import sys, sysconfig; print('%d.%d' % sys.version_info[:2]); print(getattr(sys, 'abiflags', '')); print(sysconfig.get_platform())",
            ])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .map_err(VenvError::io("run", py))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        if !out.status.success() || lines.len() < 3 {
            return Err(VenvError::Usage {
                option: "venv".into(),
                reason: format!(
                    "its Python {} failed to describe itself: {}",
                    py.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                help: Some(format!("run `{} -c \"import sysconfig\"` to see the problem; recreate the venv if its Python is broken", py.display())),
            });
        }
        Ok(Tags::new(lines[0], lines[1], lines[2]))
    }

    /// From `sys.version_info`, `sys.abiflags` and `sysconfig.get_platform()`.
    pub fn new(major_minor: &str, abiflags: &str, platform: &str) -> Tags {
        let py = format!("cp{}", major_minor.replace('.', ""));
        Tags {
            abi: format!("{py}{abiflags}"),
            python: py,
            platform: platform.replace(['-', '.'], "_"),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Built {
    pub path: PathBuf,
    pub version: String,
    pub requires_torch: Option<String>,
    pub files: usize,
}

/// The `Requires-Dist` on torch: its distribution's version as installed in `site`, which the
/// torch the package was built against must be (same public version as its `__version__`).
/// None when the build used no torch, or torch has no dist-info (nothing pip could satisfy).
fn torch_requirement(site: &Path, m: &Manifest) -> Result<Option<String>> {
    let Some(built) = m.torch_version.as_deref() else {
        return Ok(None);
    };
    let now = rocbuild_probe::venv_torch_version(site).map(|t| t.version);
    if now.as_deref() != Some(built) {
        return Err(VenvError::Usage {
            option: "wheel".into(),
            reason: format!(
                "{} was built against torch {built}, but the venv now has {}: the wheel would pin a torch it was not built for",
                m.recipe,
                now.map_or_else(|| "no torch".to_string(), |v| format!("torch {v}"))
            ),
            help: Some(format!("rebuild it first (rocbuild rebuild {}), then make the wheel", m.recipe)),
        });
    }
    let Some(dist) = rocbuild_probe::distribution_version(site, "torch") else {
        return Ok(None);
    };
    let public = |v: &str| v.split('+').next().unwrap_or(v).to_string();
    if public(&dist) != public(built) {
        return Err(VenvError::Usage {
            option: "wheel".into(),
            reason: format!(
                "torch's dist-info says version {dist} but torch/version.py says {built}: the torch installation is inconsistent"
            ),
            help: Some("reinstall torch with pip, rebuild, then make the wheel".into()),
        });
    }
    Ok(Some(dist))
}

/// Only `[a-z0-9]` runs separated by dots, as PEP 440 wants local versions.
fn local_part(s: &str) -> String {
    s.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(".")
}

/// The GPU architectures a build targeted: those recorded, and those of its CMake defines.
fn gpu_archs(m: &Manifest) -> Vec<String> {
    let mut out: Vec<String> = m.sdk.gpu_archs.clone();
    for key in [
        "GPU_TARGETS",
        "AMDGPU_TARGETS",
        "PYTORCH_ROCM_ARCH",
        "CMAKE_HIP_ARCHITECTURES",
    ] {
        let v = m
            .options
            .defines
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .or(m.defines.get(key).map(String::as_str));
        for a in rocbuild_probe::split_list(v.unwrap_or("")) {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    out
}

fn major_minor(v: &str) -> String {
    v.split(['.', '-', '+'])
        .take(2)
        .collect::<Vec<_>>()
        .join(".")
}

/// A public version without its local part: `2.15.0+cu132` -> `2.15.0`.
pub fn public_version(v: &str) -> &str {
    v.split('+').next().unwrap_or(v)
}

/// What a rebuilt wheel's local version says it was built for, in this order:
/// `{backend}[.{gpu archs}][.ffmpeg{N}][.torch{version}]`, e.g. `cpu.ffmpeg5.torch2.9.1`,
/// `cu132.torch2.15.0`, `rocm6.4.gfx1010.gfx1030.ffmpeg7.torch2.9.1`.
///
/// Everything the index install matches on is in the name, so a candidate of the wrong torch,
/// backend, SDK, GPU or FFmpeg is passed over without downloading it, and one release built
/// for many machines is a set of distinct file names (an index never takes the same file name
/// twice). torch is its public version (what `Requires-Dist` pins); the exact build (`__version__`
/// with its local part, git commit) is in `<dist-info>/rocbuild.json`, checked after download.
/// The torch segment is last: a torch version may have any number of segments.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LocalVersion {
    /// `cpu`, `cu132`, `rocm6.4` (`cuda` / `rocm` when the SDK version is unknown).
    pub backend: String,
    /// GPU architectures the binaries hold code for (processor names, no target features).
    pub archs: Vec<String>,
    pub ffmpeg: Option<u32>,
    /// torch's public version.
    pub torch: Option<String>,
}

impl std::fmt::Display for LocalVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = vec![local_part(&self.backend)];
        for a in &self.archs {
            let a = local_part(a.split(':').next().unwrap_or(a));
            if !a.is_empty() && !parts.contains(&a) {
                parts.push(a);
            }
        }
        if let Some(n) = self.ffmpeg {
            parts.push(format!("ffmpeg{n}"));
        }
        if let Some(t) = &self.torch {
            parts.push(format!("torch{}", local_part(public_version(t))));
        }
        f.write_str(&parts.join("."))
    }
}

impl LocalVersion {
    /// Read back a local version written by [`LocalVersion`]'s `Display`; None when it is not
    /// one (a wheel rocbuild did not make).
    pub fn parse(local: &str) -> Option<LocalVersion> {
        let segs: Vec<String> = local
            .to_ascii_lowercase()
            .split(['.', '_', '-'])
            .map(str::to_string)
            .collect();
        let mut it = segs.iter().peekable();
        let first = it.next()?;
        let backend = if first == "cpu" || first == "cuda" || first == "rocm" {
            first.clone()
        } else if let Some(d) = first
            .strip_prefix("cu")
            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        {
            format!("cu{d}")
        } else if let Some(major) = first
            .strip_prefix("rocm")
            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        {
            // `rocm6.4`: the minor is the next segment.
            let minor = it.next_if(|s| s.bytes().all(|b| b.is_ascii_digit()))?;
            format!("rocm{major}.{minor}")
        } else {
            return None;
        };
        let mut out = LocalVersion {
            backend,
            ..LocalVersion::default()
        };
        while let Some(s) = it.next() {
            if s.starts_with("gfx") {
                out.archs.push(s.clone());
            } else if let Some(n) = s.strip_prefix("ffmpeg") {
                out.ffmpeg = Some(n.parse().ok()?);
            } else if let Some(t) = s.strip_prefix("torch") {
                let mut v = vec![t.to_string()];
                v.extend(it.by_ref().cloned());
                if t.is_empty() {
                    return None;
                }
                out.torch = Some(v.join("."));
            } else {
                return None;
            }
        }
        Some(out)
    }

    /// What a build recorded in `m` was made for.
    pub fn of(m: &Manifest) -> LocalVersion {
        // What the build targets: its backend when it recorded one (CTranslate2 for ROCm in a
        // venv without a ROCm torch), else torch's flavor.
        let backend = match m.sdk.backend.as_deref().unwrap_or(m.flavor.as_str()) {
            // CPU code built against a ROCm torch (TorchCodec): it needs that torch, so it is
            // labelled with torch's ROCm and the GPUs it was made for (`--arch`).
            "cpu" if m.sdk.torch_hip.is_some() => "rocm",
            b => b,
        };
        let (tag, archs) = match backend {
            "cuda" => (
                // torch's CUDA; for a package that does not build against torch
                // (bitsandbytes), the toolkit's.
                match m.sdk.torch_cuda.as_ref().or(m.sdk.toolkit_version.as_ref()) {
                    Some(c) => format!("cu{}", major_minor(c).replace('.', "")),
                    None => "cuda".into(),
                },
                Vec::new(),
            ),
            "rocm" => (
                match m.sdk.rocm_version.as_ref().or(m.sdk.torch_hip.as_ref()) {
                    Some(h) => format!("rocm{}", major_minor(h)),
                    None => "rocm".into(),
                },
                gpu_archs(m),
            ),
            _ => ("cpu".into(), Vec::new()),
        };
        LocalVersion {
            backend: tag,
            archs: archs
                .iter()
                .map(|a| a.split(':').next().unwrap_or(a).to_ascii_lowercase())
                .collect(),
            ffmpeg: m.ffmpeg_major,
            torch: m
                .torch_version
                .as_deref()
                .map(|t| public_version(t).to_string()),
        }
    }
}

/// `+cpu.torch2.9.1`, `+cu132.torch2.15.0`, `+rocm6.2.gfx1010.torch2.9.1`: see [`LocalVersion`].
pub fn local_version(m: &Manifest) -> String {
    LocalVersion::of(m).to_string()
}

fn header_lines(text: &str) -> (Vec<String>, String) {
    // METADATA: headers, a blank line, then the description body.
    match text.split_once("\n\n") {
        Some((h, body)) => (h.lines().map(str::to_string).collect(), body.to_string()),
        None => (text.lines().map(str::to_string).collect(), String::new()),
    }
}

/// METADATA of the rebuilt package: the original, with the new version and `torch==<torch's
/// distribution version>`.
pub fn metadata(original: &str, version: &str, torch: Option<&str>) -> String {
    let (headers, body) = header_lines(original);
    let mut out = String::new();
    for h in headers {
        let lower = h.to_ascii_lowercase();
        if lower.starts_with("version:") {
            out.push_str(&format!("Version: {version}\n"));
        } else if lower.starts_with("requires-dist:")
            && rocbuild_probe::normalize_dist(
                h[14..]
                    .trim()
                    .split(|c: char| !(c.is_alphanumeric() || "-_.".contains(c)))
                    .next()
                    .unwrap_or(""),
            ) == "torch"
        {
            continue;
        } else {
            out.push_str(&h);
            out.push('\n');
        }
    }
    if let Some(t) = torch {
        out.push_str(&format!("Requires-Dist: torch=={t}\n"));
    }
    if !body.is_empty() {
        out.push('\n');
        out.push_str(&body);
    }
    out
}

/// Write the wheel of `recipe`'s package installed in `site` into `out`.
pub fn build_wheel(site: &Path, recipe: &str, tags: &Tags, out: &Path) -> Result<Built> {
    let m = manifest::read_checked(site, recipe)?.ok_or_else(|| VenvError::NotInstalled {
        recipe: recipe.into(),
        site: site.display().to_string(),
        help: format!("build it first: rocbuild {recipe} --venv VENV"),
    })?;
    let record_rel = m.record.clone().ok_or_else(|| VenvError::Usage {
        option: "wheel".into(),
        reason: format!("the manifest of {recipe} does not name its dist-info RECORD (it was written by an older rocbuild)"),
        help: Some(format!("rebuild it once (rocbuild rebuild {recipe}), then make the wheel")),
    })?;
    let di_old = record_rel.trim_end_matches("/RECORD").to_string();
    // `name-version.dist-info`: the distribution's name as pip wrote it.
    let distribution = di_old
        .trim_end_matches(".dist-info")
        .rsplit_once('-')
        .map_or(m.recipe.as_str(), |(n, _)| n)
        .to_string();
    let record_text = fs_err::read_to_string(site.join(&record_rel))
        .map_err(VenvError::io("read", site.join(&record_rel)))?;
    let requires_torch = torch_requirement(site, &m)?;
    let version = format!("{}+{}", m.version, local_version(&m));
    let name = distribution.replace('-', "_");
    let di = format!("{name}-{version}.dist-info");

    let mut files: Vec<(String, PathBuf)> = Vec::new();
    let mut extra_dist_info: Vec<(String, PathBuf)> = Vec::new();
    for (rel, _, _) in record::parse(&record_text) {
        if rel.starts_with("..") || rel.contains("__pycache__") || rel.ends_with(".pyc") {
            continue;
        }
        let p = site.join(&rel);
        if let Some(inner) = rel.strip_prefix(&format!("{di_old}/")) {
            if !matches!(
                inner,
                "RECORD" | "INSTALLER" | "REQUESTED" | "direct_url.json" | "WHEEL" | "METADATA"
            ) && p.is_file()
            {
                extra_dist_info.push((format!("{di}/{inner}"), p));
            }
            continue;
        }
        if p.is_file() {
            files.push((rel, p));
        }
    }
    for e in &m.extra_files {
        let p = site.join(e);
        if p.is_file() && !files.iter().any(|(r, _)| r == e) {
            files.push((e.clone(), p));
        }
    }
    files.extend(extra_dist_info);

    let meta_orig =
        fs_err::read_to_string(site.join(&di_old).join("METADATA")).unwrap_or_else(|_| {
            format!(
                "Metadata-Version: 2.1\nName: {distribution}\nVersion: {}\n",
                m.version
            )
        });
    let generated: Vec<(String, Vec<u8>)> = vec![
        (
            format!("{di}/METADATA"),
            metadata(&meta_orig, &version, requires_torch.as_deref()).into_bytes(),
        ),
        (
            format!("{di}/rocbuild.json"),
            serde_json::to_vec_pretty(&serde_json::json!({
                "recipe": m.recipe,
                "torch": m.torch_version,
                "torch_git": m.torch_git,
                "torch_dist": requires_torch,
                "flavor": m.flavor,
                "ffmpeg_major": m.ffmpeg_major,
                "sdk": m.sdk,
                "source_url": m.source_url.as_deref().map(rocbuild_secret::strip_userinfo),
                "source_commit": m.source_commit,
                "recipe_hash": m.recipe_hash,
            }))
            .unwrap_or_default(),
        ),
        (format!("{di}/WHEEL"), wheel_file(tags).into_bytes()),
    ];

    let path = write_wheel(out, &name, &version, tags, &files, &generated)?;
    Ok(Built {
        path,
        version,
        requires_torch,
        files: files.len() + generated.len() + 1,
    })
}

/// Write `{name}-{version}-{tags}.whl` into `out`: the `files` (path in the wheel, file on
/// disk), then the `generated` ones (path, bytes; the dist-info's METADATA and WHEEL among
/// them), then RECORD with every file's hash. Written to a `.partial` file renamed at the end.
pub fn write_wheel(
    out: &Path,
    name: &str,
    version: &str,
    tags: &Tags,
    files: &[(String, PathBuf)],
    generated: &[(String, Vec<u8>)],
) -> Result<PathBuf> {
    let di = format!("{name}-{version}.dist-info");
    fs_err::create_dir_all(out).map_err(VenvError::io("create", out))?;
    let path = out.join(format!(
        "{name}-{version}-{}-{}-{}.whl",
        tags.python, tags.abi, tags.platform
    ));
    let tmp = path.with_extension("whl.partial");
    let zerr = |e: zip::result::ZipError| VenvError::Io {
        action: "write the wheel".into(),
        path: tmp.display().to_string(),
        source: std::io::Error::other(e),
    };
    let f = std::fs::File::create(&tmp).map_err(VenvError::io("create", &tmp))?;
    let mut z = zip::ZipWriter::new(f);
    let mut record_out = String::new();
    let mut add =
        |z: &mut zip::ZipWriter<std::fs::File>, rel: &str, bytes: &[u8], mode: u32| -> Result<()> {
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated)
                .unix_permissions(mode);
            z.start_file(rel, opts).map_err(zerr)?;
            z.write_all(bytes).map_err(VenvError::io("write", &tmp))?;
            let hex: String = <sha2::Sha256 as sha2::Digest>::digest(bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            record_out.push_str(&format!(
                "{rel},{},{}\n",
                record::record_hash(&hex),
                bytes.len()
            ));
            Ok(())
        };
    for (rel, p) in files {
        let bytes = fs_err::read(p).map_err(VenvError::io("read", p))?;
        add(&mut z, rel, &bytes, file_mode(p))?;
    }
    for (rel, bytes) in generated {
        add(&mut z, rel, bytes, 0o644)?;
    }
    record_out.push_str(&format!("{di}/RECORD,,\n"));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o644);
    z.start_file(format!("{di}/RECORD"), opts).map_err(zerr)?;
    z.write_all(record_out.as_bytes())
        .map_err(VenvError::io("write", &tmp))?;
    z.finish().map_err(zerr)?;
    fs_err::rename(&tmp, &path).map_err(VenvError::io("write", &path))?;
    Ok(path)
}

/// The WHEEL file of a platform wheel made by rocbuild.
pub fn wheel_file(tags: &Tags) -> String {
    format!(
        "Wheel-Version: 1.0\nGenerator: rocbuild {}\nRoot-Is-Purelib: false\nTag: {}-{}-{}\n",
        env!("CARGO_PKG_VERSION"),
        tags.python,
        tags.abi,
        tags.platform
    )
}

fn file_mode(p: &Path) -> u32 {
    rocbuild_probe::platform::host::file_mode(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(
        flavor: &str,
        cuda: Option<&str>,
        hip: Option<&str>,
        archs: Option<&str>,
    ) -> Manifest {
        let mut m = Manifest {
            flavor: flavor.into(),
            ..Manifest::default()
        };
        m.sdk.torch_cuda = cuda.map(Into::into);
        m.sdk.torch_hip = hip.map(Into::into);
        if let Some(a) = archs {
            m.options.defines.push(("GPU_TARGETS".into(), a.into()));
        }
        m
    }

    #[test]
    fn local_versions_say_what_it_was_built_for() {
        assert_eq!(local_version(&manifest("cpu", None, None, None)), "cpu");
        assert_eq!(
            local_version(&manifest("cuda", Some("13.2"), None, None)),
            "cu132"
        );
        // A cuda build of a package that does not build against torch: the toolkit's CUDA.
        let mut no_torch = manifest("cpu", None, None, None);
        no_torch.sdk.backend = Some("cuda".into());
        no_torch.sdk.toolkit_version = Some("13.2".into());
        assert_eq!(local_version(&no_torch), "cu132");
        assert_eq!(
            local_version(&manifest(
                "rocm",
                None,
                Some("6.2.41134-65d174c3e"),
                Some("gfx1010")
            )),
            "rocm6.2.gfx1010"
        );
        assert_eq!(
            local_version(&manifest(
                "rocm",
                None,
                Some("6.4.1"),
                Some("gfx1030;gfx1100")
            )),
            "rocm6.4.gfx1030.gfx1100"
        );
        // TorchCodec (no GPU code) built with a ROCm torch for --arch gfx1201.
        let mut m = manifest("rocm", None, Some("6.4.43482"), None);
        m.sdk.backend = Some("cpu".into());
        m.sdk.gpu_archs = vec!["gfx1201".into()];
        assert_eq!(local_version(&m), "rocm6.4.gfx1201");
        // The same build in a venv with a CPU torch is a CPU build.
        let mut m = manifest("cpu", None, None, None);
        m.sdk.backend = Some("cpu".into());
        assert_eq!(local_version(&m), "cpu");
    }

    #[test]
    fn local_versions_name_torch_ffmpeg_and_every_arch_and_read_back() {
        let mut m = manifest(
            "rocm",
            None,
            Some("6.4.1"),
            Some("gfx1010;gfx1030;gfx90a:xnack-"),
        );
        m.torch_version = Some("2.9.1+rocm6.4".into());
        m.ffmpeg_major = Some(7);
        let v = local_version(&m);
        assert_eq!(v, "rocm6.4.gfx1010.gfx1030.gfx90a.ffmpeg7.torch2.9.1");
        let back = LocalVersion::parse(&v).unwrap();
        assert_eq!(back, LocalVersion::of(&m));
        assert_eq!(back.archs, ["gfx1010", "gfx1030", "gfx90a"]);
        let mut m = manifest("cuda", Some("13.2"), None, None);
        m.torch_version = Some("2.15.0+cu132".into());
        assert_eq!(local_version(&m), "cu132.torch2.15.0");
        // A nightly torch: every segment after `torch` is its version.
        let n = LocalVersion::parse("cpu.torch2.10.0.dev20250101").unwrap();
        assert_eq!(n.torch.as_deref(), Some("2.10.0.dev20250101"));
        assert_eq!(n.backend, "cpu");
        // Not rocbuild's: someone else's local version.
        assert_eq!(LocalVersion::parse("ubuntu1"), None);
        assert_eq!(LocalVersion::parse("cpu.weird"), None);
        assert_eq!(LocalVersion::parse("rocm6"), None);
    }

    #[test]
    fn metadata_pins_the_exact_torch() {
        let m = metadata(
            "Metadata-Version: 2.1\nName: torchcodec\nVersion: 0.9.1\nRequires-Dist: torch>=2.9\nRequires-Dist: numpy\n\nThe body.\n",
            "0.9.1+cpu",
            Some("2.9.1+cpu"),
        );
        assert_eq!(
            m,
            "Metadata-Version: 2.1\nName: torchcodec\nVersion: 0.9.1+cpu\nRequires-Dist: numpy\nRequires-Dist: torch==2.9.1+cpu\n\nThe body.\n"
        );
    }

    #[test]
    fn tags_of_the_venv_python() {
        assert_eq!(
            Tags::new("3.11", "", "linux-x86_64"),
            Tags {
                python: "cp311".into(),
                abi: "cp311".into(),
                platform: "linux_x86_64".into()
            }
        );
        assert_eq!(
            Tags::new("3.12", "", "macosx-14.0-arm64").platform,
            "macosx_14_0_arm64"
        );
    }
}
