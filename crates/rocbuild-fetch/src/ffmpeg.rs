//! Shared FFmpeg builds: the pinned downloads, and recognising one on disk.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::FetchError;

/// The pins shipped with rocbuild (`recipes/downloads/ffmpeg.toml`).
pub const BUILTIN_FFMPEG_PINS: &str = include_str!("../../../recipes/downloads/ffmpeg.toml");

/// One downloadable shared FFmpeg build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FfmpegPin {
    /// `windows`, `linux`, `macos` (as in `Machine.platform.os`).
    pub os: String,
    /// `x86_64`, `aarch64` (as in `Machine.platform.arch`).
    pub arch: String,
    /// FFmpeg's version, `7.1.1`.
    pub version: String,
    pub url: String,
    pub sha256: String,
    #[serde(default)]
    pub publisher: Option<String>,
}

impl FfmpegPin {
    /// The FFmpeg major (7 for 7.1.1).
    pub fn major(&self) -> Option<u32> {
        self.version.split('.').next()?.parse().ok()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FfmpegPins {
    #[serde(default)]
    pub shared: Vec<FfmpegPin>,
}

impl FfmpegPins {
    pub fn parse(file: &str, text: &str) -> Result<FfmpegPins, FetchError> {
        let pins: FfmpegPins = toml::from_str(text).map_err(|e| FetchError::Pins {
            file: file.to_string(),
            reason: e.to_string(),
        })?;
        for p in &pins.shared {
            let sha_ok = p.sha256.len() == 64 && p.sha256.bytes().all(|b| b.is_ascii_hexdigit());
            if !sha_ok || p.major().is_none() || !p.url.starts_with("https://") {
                return Err(FetchError::Pins {
                    file: file.to_string(),
                    reason: format!(
                        "entry {} needs an https url, a 64-hex-digit sha256 and a version like 7.1.1",
                        p.version
                    ),
                });
            }
        }
        Ok(pins)
    }

    pub fn builtin() -> FfmpegPins {
        // Checked by a test; an invalid built-in file is a bug in rocbuild, not user input.
        Self::parse("<builtin>/downloads/ffmpeg.toml", BUILTIN_FFMPEG_PINS).unwrap_or_default()
    }

    /// The pin for this OS/CPU: the given FFmpeg major, else the first listed.
    pub fn pick(&self, os: &str, arch: &str, major: Option<u32>) -> Option<&FfmpegPin> {
        self.shared
            .iter()
            .filter(|p| p.os == os && p.arch == arch)
            .find(|p| major.is_none_or(|m| p.major() == Some(m)))
    }
}

/// A shared FFmpeg build found on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FfmpegShared {
    /// The directory holding `bin/` / `lib/` / `include/`.
    pub root: PathBuf,
    /// The directory with the shared libraries (`bin` for DLLs, `lib` for .so/.dylib).
    pub lib_dir: PathBuf,
    pub include: Option<PathBuf>,
    /// `lib/pkgconfig`, when the build ships .pc files.
    pub pkg_config: Option<PathBuf>,
    /// libavutil's major (59) and the FFmpeg major it means (7).
    pub avutil_major: u32,
    pub major: u32,
    /// The FFmpeg shared libraries present, to preload by absolute path.
    pub libraries: Vec<PathBuf>,
    /// Libraries TorchCodec needs that are absent (avcodec, avformat, avutil, swresample, swscale).
    pub missing: Vec<String>,
}

const NEEDED: &[&str] = &["avutil", "avcodec", "avformat", "swresample", "swscale"];
const ALL: &[&str] = &[
    "avutil",
    "avcodec",
    "avformat",
    "avfilter",
    "avdevice",
    "swresample",
    "swscale",
    "postproc",
];

/// `avutil-59.dll`, `libavutil.so.59`, `libavutil.59.dylib` -> ("avutil", 59).
fn shared_lib_major(file: &str) -> Option<(&str, u32)> {
    let l = rocbuild_probe::platform::libname::parse(file)?;
    Some((l.base, l.major()?))
}

fn recognise(root: &Path) -> Option<FfmpegShared> {
    for dir in ["bin", "lib", "lib64"] {
        let lib_dir = root.join(dir);
        let mut names: Vec<String> = std::fs::read_dir(&lib_dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let Some(avutil_major) = names
            .iter()
            .filter_map(|n| shared_lib_major(n))
            .find(|(name, _)| *name == "avutil")
            .map(|(_, m)| m)
        else {
            continue;
        };
        let Some(major) = rocbuild_probe::soname_major_to_ffmpeg(avutil_major) else {
            continue;
        };
        let mut libraries = Vec::new();
        for n in &names {
            if let Some((name, _)) = shared_lib_major(n) {
                if ALL.contains(&name)
                    && !libraries
                        .iter()
                        .any(|p: &PathBuf| p.file_name().is_some_and(|f| f == n.as_str()))
                {
                    libraries.push(lib_dir.join(n));
                }
            }
        }
        let present = |want: &str| {
            names
                .iter()
                .any(|n| shared_lib_major(n).is_some_and(|(name, _)| name == want))
        };
        let missing = NEEDED
            .iter()
            .filter(|w| !present(w))
            .map(|w| w.to_string())
            .collect();
        let include = Some(root.join("include")).filter(|i| i.join("libavutil").is_dir());
        let pkg_config = Some(root.join("lib/pkgconfig")).filter(|p| p.is_dir());
        return Some(FfmpegShared {
            root: root.to_path_buf(),
            lib_dir,
            include,
            pkg_config,
            avutil_major,
            major,
            libraries,
            missing,
        });
    }
    None
}

/// A shared FFmpeg build in `dir` or one level below it (archives usually hold one top
/// folder, `ffmpeg-7.1.1-full_build-shared/`). None when there is none (or only a static
/// `ffmpeg.exe`).
pub fn find_ffmpeg_shared(dir: &Path) -> Option<FfmpegShared> {
    if let Some(f) = recognise(dir) {
        return Some(f);
    }
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    subdirs.iter().find_map(|d| recognise(d))
}

/// What `rocbuild ffmpeg` was asked for.
#[derive(Debug, Clone)]
pub struct FfmpegRequest<'a> {
    /// `--url` and `--sha256` (both or neither): a build that is not pinned in the file.
    pub url: Option<&'a str>,
    pub sha256: Option<&'a str>,
    /// `--major N`: which pinned FFmpeg major.
    pub major: Option<u32>,
    /// The platform the build is for (`windows`, `x86_64`).
    pub os: &'a str,
    pub arch: &'a str,
    /// Where archives are kept (`<cache>/downloads`).
    pub downloads: &'a Path,
    /// Where to extract (`--into`); default `<ffmpeg_root>/<archive name without .zip>`.
    pub into: Option<&'a Path>,
    pub ffmpeg_root: &'a Path,
}

/// Download (verified), extract (safely) and recognise a shared FFmpeg build.
pub fn fetch_shared_ffmpeg(
    pins: &FfmpegPins,
    req: &FfmpegRequest,
) -> Result<FfmpegShared, FetchError> {
    let (url, sha) = match (req.url, req.sha256) {
        (Some(u), Some(s)) => (u.to_string(), s.to_string()),
        _ => {
            let pin = pins.pick(req.os, req.arch, req.major).ok_or_else(|| {
                let here: Vec<String> = pins
                    .shared
                    .iter()
                    .filter(|p| p.os == req.os && p.arch == req.arch)
                    .map(|p| p.version.clone())
                    .collect();
                FetchError::NoPin {
                    platform: format!("{}-{}", req.os, req.arch),
                    wanted: req.major.map(|m| format!(" with FFmpeg {m}")).unwrap_or_default(),
                    help: if here.is_empty() {
                        "pass --url URL --sha256 HEX for a shared build you trust, or use the system's FFmpeg (Linux: apt-get install libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libswresample-dev; macOS: brew install ffmpeg) with --ffmpeg DIR".to_string()
                    } else {
                        format!("pinned for this platform: {}; or pass --url URL --sha256 HEX", here.join(", "))
                    },
                }
            })?;
            (pin.url.clone(), pin.sha256.clone())
        }
    };
    let archive = crate::download_verified(&url, &sha, req.downloads)?;
    let stem = archive
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".zip").to_string())
        .unwrap_or_else(|| "ffmpeg".into());
    let target = req
        .into
        .map(Path::to_path_buf)
        .unwrap_or_else(|| req.ffmpeg_root.join(stem));
    crate::extract_zip_safely(&archive, &target)?;
    find_ffmpeg_shared(&target).ok_or_else(|| FetchError::NotSharedFfmpeg {
        archive: archive.display().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_names() {
        assert_eq!(shared_lib_major("avutil-59.dll"), Some(("avutil", 59)));
        assert_eq!(
            shared_lib_major("libavutil.so.57.28.100"),
            Some(("avutil", 57))
        );
        assert_eq!(shared_lib_major("libavutil.59.dylib"), Some(("avutil", 59)));
        assert_eq!(shared_lib_major("libavutil.so"), None);
        assert_eq!(shared_lib_major("ffmpeg.exe"), None);
    }

    #[test]
    fn builtin_pins_parse_and_pick() {
        let pins = FfmpegPins::parse("<builtin>", BUILTIN_FFMPEG_PINS).unwrap();
        let default = pins.pick("windows", "x86_64", None).unwrap();
        assert_eq!(
            (default.version.as_str(), default.major()),
            ("7.1.1", Some(7))
        );
        assert_eq!(
            pins.pick("windows", "x86_64", Some(8)).unwrap().version,
            "8.1.2"
        );
        assert!(pins.pick("windows", "x86_64", Some(4)).is_none());
        assert!(pins.pick("linux", "x86_64", None).is_none());
        let bad = "[[shared]]\nos='windows'\narch='x86_64'\nversion='7'\nurl='http://x/y.zip'\nsha256='00'\n";
        assert!(FfmpegPins::parse("f.toml", bad).is_err());
        assert!(FfmpegPins::parse("f.toml", "[[shared]]\nbogus = 1\n").is_err());
    }
}
