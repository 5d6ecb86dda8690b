//! FFmpeg: TorchCodec ships one core library per FFmpeg major (`libtorchcodec_core7.so`) and
//! loads the first whose FFmpeg the loader finds. "Could not load libtorchcodec" hides which
//! majors exist on the system and which cores are present; this check says both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocbuild_probe::{soname_major_to_ffmpeg, Os};

use crate::finding::{Breaks, Check, Finding, Severity};
use crate::package::Subject;

/// The FFmpeg major a core library is for: `libtorchcodec_core7.so` -> 7,
/// `libtorchcodec_core8.dll` -> 8.
pub fn core_major(file_name: &str) -> Option<u32> {
    let stem = file_name.split('.').next()?;
    let digits = stem.rsplit_once("_core")?.1;
    digits.parse().ok()
}

/// libavutil's file name for an avutil major on `os`.
fn avutil_name(os: Os, avutil_major: u32) -> String {
    os.rules().versioned_lib_name("avutil", avutil_major)
}

/// FFmpeg majors whose libavutil is in one of `dirs` (first directory wins), major -> path.
pub fn available(os: Os, dirs: &[PathBuf]) -> BTreeMap<u32, PathBuf> {
    let mut out = BTreeMap::new();
    for avutil in 56..=61 {
        let Some(major) = soname_major_to_ffmpeg(avutil) else {
            continue;
        };
        let name = avutil_name(os, avutil);
        if let Some(p) = dirs.iter().map(|d| d.join(&name)).find(|p| p.exists()) {
            out.insert(major, p);
        }
    }
    out
}

/// The directories a loader would look in for FFmpeg, in order, for the machine's platform.
/// `ffmpeg_lib`: the probe's FFmpeg (pkg-config / `--ffmpeg`); `path`: PATH (Windows).
pub fn search_dirs(
    os: Os,
    package_dir: &Path,
    ffmpeg_lib: Option<&Path>,
    library_path: &[PathBuf],
    path: &[PathBuf],
) -> Vec<PathBuf> {
    // Windows: users copy FFmpeg's DLLs next to the core library; TorchCodec also adds the
    // directory of `ffmpeg.exe` found on PATH. rocbuild's DLL preload hook adds its
    // directories (`library_path` here).
    let rules = os.rules();
    let own_and_path = rules.searches_own_dir_and_path();
    let mut dirs: Vec<PathBuf> = Vec::new();
    if own_and_path {
        dirs.push(package_dir.to_path_buf());
    }
    dirs.extend(library_path.iter().cloned());
    dirs.extend(ffmpeg_lib.map(Path::to_path_buf));
    if own_and_path {
        dirs.extend(path.iter().cloned());
    }
    dirs.extend(rules.system_library_dirs().iter().map(PathBuf::from));
    dirs
}

/// The inputs of the FFmpeg check.
pub struct FfmpegFacts<'a> {
    pub os: Os,
    /// The subject's native libraries.
    pub libs: &'a [PathBuf],
    /// FFmpeg majors the loader would find, with where.
    pub available: &'a BTreeMap<u32, PathBuf>,
    /// Windows: the directory of the `ffmpeg.exe` on PATH, if any.
    pub ffmpeg_exe_dir: Option<&'a Path>,
}

pub fn check(subject: &Subject, f: &FfmpegFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut cores: Vec<u32> = f
        .libs
        .iter()
        .filter_map(|p| core_major(&p.file_name()?.to_string_lossy()))
        .collect();
    cores.sort_unstable();
    cores.dedup();
    let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    let have: Vec<u32> = f.available.keys().copied().collect();
    let usable: Vec<u32> = cores.iter().copied().filter(|c| have.contains(c)).collect();
    let details: Vec<String> = f
        .available
        .iter()
        .map(|(m, p)| format!("FFmpeg {m}: {}", p.display()))
        .collect();
    // A package that links one FFmpeg (no per-major cores, nothing of TorchCodec's: a team's
    // own extension) is not asked for TorchCodec's cores; its libraries' loading says the rest.
    let per_major = f.libs.iter().any(|p| {
        let n = p
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase());
        n.is_some_and(|n| n.contains("torchcodec") || n.contains("_core"))
    });
    if cores.is_empty() && !f.libs.is_empty() && !per_major {
        return out;
    }
    if cores.is_empty() {
        out.push(
            Finding::new(
                Severity::Error,
                Check::Ffmpeg,
                &subject.name,
                format!(
                    "{} has no core library (libtorchcodec_coreN) at all",
                    subject.name
                ),
            )
            .why("the package was installed without its native part, or it was removed")
            .fix(subject.rebuild_hint()),
        );
    } else if have.is_empty() {
        out.push(
            Finding::new(
                Severity::Error,
                Check::Ffmpeg,
                &subject.name,
                format!(
                    "no FFmpeg found; {} has core libraries for FFmpeg {}",
                    subject.name,
                    list(&cores)
                ),
            )
            .why("every core library needs FFmpeg's shared libraries (libavutil and friends), and the loader finds none")
            .fix(f.os.rules().ffmpeg_install_hint())
            .breaks(Breaks::MissingLibrary),
        );
    } else if usable.is_empty() {
        out.push(
            Finding::new(
                Severity::Error,
                Check::Ffmpeg,
                &subject.name,
                format!(
                    "{} has core libraries for FFmpeg {}, but this system has FFmpeg {}",
                    subject.name,
                    list(&cores),
                    list(&have)
                ),
            )
            .details(details)
            .why("a core library loads only with the FFmpeg major it was built for")
            .breaks(Breaks::MissingLibrary)
            .fix(format!(
                "{} (builds the core for FFmpeg {})",
                subject.rebuild_hint(),
                have.last().copied().unwrap_or_default()
            )),
        );
    } else {
        out.push(
            Finding::new(
                Severity::Note,
                Check::Ffmpeg,
                &subject.name,
                format!(
                    "uses FFmpeg {} (cores present: {}; FFmpeg on this system: {})",
                    usable.last().copied().unwrap_or_default(),
                    list(&cores),
                    list(&have)
                ),
            )
            .details(details),
        );
    }
    // TorchCodec adds the directory of the `ffmpeg` on PATH where the loader searches PATH.
    if f.os.rules().searches_own_dir_and_path() {
        if let Some(dir) = f.ffmpeg_exe_dir {
            let shared = (56..=61).any(|m| dir.join(avutil_name(f.os, m)).exists());
            if !shared {
                out.push(
                    Finding::new(
                        Severity::Error,
                        Check::Ffmpeg,
                        &subject.name,
                        format!("the ffmpeg.exe on PATH ({}) is a static build", dir.display()),
                    )
                    .why("its directory holds no avutil-NN.dll: a static ffmpeg.exe carries FFmpeg inside itself, and \
                          the core libraries cannot load it (`Could not find module ... (or one of its dependencies)`)")
                    .fix("install a full-shared FFmpeg build (its bin/ holds avutil-NN.dll, avcodec-NN.dll, ...) and put it first on PATH")
                    .breaks(Breaks::MissingLibrary),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"").unwrap();
    }

    /// A team's extension that links one FFmpeg (winext: a torch op DLL and a module) has no
    /// TorchCodec cores and is not told it lacks them; a TorchCodec without them is.
    #[test]
    fn a_package_without_per_major_cores_is_not_asked_for_them() {
        let have = BTreeMap::from([(7, PathBuf::from("/ffmpeg/avutil-59.dll"))]);
        let facts = |libs: &'static [&'static str]| -> Vec<PathBuf> {
            libs.iter().map(PathBuf::from).collect()
        };
        let subject = &Subject::known()[1];
        for (libs, errors) in [
            (facts(&["/x/libwinext_ops.dll", "/x/_winext.pyd"]), 0),
            (facts(&["/x/libtorchcodec_custom_ops7.dll"]), 1),
            (facts(&[]), 1),
        ] {
            let found = check(
                subject,
                &FfmpegFacts {
                    os: Os::Windows,
                    libs: &libs,
                    available: &have,
                    ffmpeg_exe_dir: None,
                },
            );
            assert_eq!(found.len(), errors, "{libs:?}: {found:?}");
        }
    }

    #[test]
    fn core_majors() {
        assert_eq!(core_major("libtorchcodec_core7.so"), Some(7));
        assert_eq!(core_major("libtorchcodec_core8.dll"), Some(8));
        assert_eq!(core_major("libtorchcodec_custom_ops7.so"), None);
        assert_eq!(core_major("libtorchcodec_pybind_ops.so"), None);
    }

    #[test]
    fn core_for_another_major_is_an_error_naming_both() {
        let d = tempfile::tempdir().unwrap();
        touch(&d.path().join("sys/libavutil.so.57"));
        let have = available(Os::Linux, &[d.path().join("sys")]);
        assert_eq!(have.keys().copied().collect::<Vec<_>>(), [5]);
        let libs = [
            PathBuf::from("/x/libtorchcodec_core7.so"),
            PathBuf::from("/x/libtorchcodec_core8.so"),
        ];
        let subject = &Subject::known()[1];
        let f = check(
            subject,
            &FfmpegFacts {
                os: Os::Linux,
                libs: &libs,
                available: &have,
                ffmpeg_exe_dir: None,
            },
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        assert_eq!(
            f[0].what,
            "torchcodec has core libraries for FFmpeg 7, 8, but this system has FFmpeg 5"
        );
        let libs = [PathBuf::from("/x/libtorchcodec_core5.so")];
        let f = check(
            subject,
            &FfmpegFacts {
                os: Os::Linux,
                libs: &libs,
                available: &have,
                ffmpeg_exe_dir: None,
            },
        );
        assert_eq!(f[0].severity, Severity::Note, "{f:?}");
    }

    #[test]
    fn static_ffmpeg_on_windows_path_is_named() {
        let d = tempfile::tempdir().unwrap();
        let stat = d.path().join("ffmpeg-static/bin");
        touch(&stat.join("ffmpeg.exe"));
        let shared = d.path().join("ffmpeg-shared/bin");
        touch(&shared.join("ffmpeg.exe"));
        touch(&shared.join("avutil-59.dll"));
        let libs = [PathBuf::from("C:/site/torchcodec/libtorchcodec_core7.dll")];
        let subject = &Subject::known()[1];
        let none = BTreeMap::new();
        let f = check(
            subject,
            &FfmpegFacts {
                os: Os::Windows,
                libs: &libs,
                available: &none,
                ffmpeg_exe_dir: Some(&stat),
            },
        );
        assert!(
            f.iter().any(|f| f.what.contains("is a static build")),
            "{f:?}"
        );
        let have = available(Os::Windows, std::slice::from_ref(&shared));
        let f = check(
            subject,
            &FfmpegFacts {
                os: Os::Windows,
                libs: &libs,
                available: &have,
                ffmpeg_exe_dir: Some(&shared),
            },
        );
        assert!(f.iter().all(|f| f.severity == Severity::Note), "{f:?}");
    }
}
