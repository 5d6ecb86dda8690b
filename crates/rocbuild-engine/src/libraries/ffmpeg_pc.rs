//! pkg-config files for an FFmpeg given with `--ffmpeg DIR` that has none (a Windows build
//! made from DLLs and headers, a bare `include/` + `lib/` tree): the recipe's CMake finds FFmpeg
//! through pkg-config, and without these it would silently find the system's FFmpeg instead.
//! One `.pc` per library present under `include/`, its version read from that library's own
//! `version.h` / `version_major.h`, written under the cache before the configure.

use std::path::{Path, PathBuf};

use rocbuild_probe::Ffmpeg;
use serde::Serialize;

use crate::error::Result;
use crate::paths::{hash_hex, join, write_if_changed};
use crate::step::RunLog;

/// The libraries FFmpeg installs, as pkg-config names them.
const LIBRARIES: [&str; 7] = [
    "libavutil",
    "libavcodec",
    "libavformat",
    "libavfilter",
    "libavdevice",
    "libswscale",
    "libswresample",
];

#[derive(Debug, Clone, Serialize)]
pub struct FfmpegPc {
    /// The directory the files go to (the recipe's pkg-config searches only there).
    pub dir: PathBuf,
    #[serde(skip)]
    pub files: Vec<(String, String)>,
}

/// The files for `f`, when it came from `--ffmpeg DIR` without pkg-config files; None
/// otherwise (pkg-config describes it already).
pub fn plan(f: &Ffmpeg, cache: &Path, host_os: rocbuild_probe::Os) -> Option<FfmpegPc> {
    if f.pkg_config_path.is_some() || f.found_by == "pkg-config" {
        return None;
    }
    let prefix = f.include.parent()?.to_path_buf();
    let files: Vec<(String, String)> = LIBRARIES
        .iter()
        .filter_map(|name| Some((format!("{name}.pc"), pc_file(&prefix, f, name)?)))
        .collect();
    if files.is_empty() {
        return None;
    }
    let key: Vec<&str> = files.iter().map(|(_, t)| t.as_str()).collect();
    Some(FfmpegPc {
        dir: join(host_os, cache, &["ffmpeg-pc", &hash_hex(&key)[..16]]),
        files,
    })
}

/// `name.pc` for the library's headers under `f.include`, None when they are absent.
fn pc_file(prefix: &Path, f: &Ffmpeg, name: &str) -> Option<String> {
    let dir = f.include.join(name);
    let mut text = String::new();
    for h in ["version_major.h", "version.h"] {
        text.push_str(&std::fs::read_to_string(dir.join(h)).unwrap_or_default());
    }
    let upper = name.to_ascii_uppercase();
    let get = |part: &str| rocbuild_probe::c_define(&text, &format!("{upper}_VERSION_{part}"));
    let major = get("MAJOR")?;
    let version = format!(
        "{major}.{}.{}",
        get("MINOR").unwrap_or_else(|| "0".into()),
        get("MICRO").unwrap_or_else(|| "0".into())
    );
    let short = name.trim_start_matches("lib");
    let slash = |p: &Path| p.display().to_string().replace('\\', "/");
    Some(format!(
        "# Written by rocbuild for the FFmpeg in {prefix} (it has no pkg-config files).\n\
         prefix={prefix}\nlibdir={lib}\nincludedir={inc}\n\n\
         Name: {name}\nDescription: FFmpeg {name}\nVersion: {version}\n\
         Libs: -L${{libdir}} -l{short}\nCflags: -I${{includedir}}\n",
        prefix = slash(prefix),
        lib = slash(&f.lib),
        inc = slash(&f.include),
    ))
}

/// The pkg-config files of an FFmpeg that has none.
pub fn write_pc_files(pc: &FfmpegPc, log: &mut RunLog) -> Result<()> {
    for (name, text) in &pc.files {
        write_if_changed(&pc.dir.join(name), text)?;
    }
    log.note(&format!(
        "pkg-config files for the FFmpeg given -> {}",
        pc.dir.display()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_per_library_whose_headers_are_there_with_its_own_version() {
        let d = tempfile::tempdir().unwrap();
        let inc = d.path().join("include");
        for (lib, v) in [("libavutil", (59, 39, 100)), ("libavcodec", (61, 19, 101))] {
            std::fs::create_dir_all(inc.join(lib)).unwrap();
            let up = lib.to_ascii_uppercase();
            std::fs::write(
                inc.join(lib).join("version.h"),
                format!(
                    "#define {up}_VERSION_MAJOR {}\n#define {up}_VERSION_MINOR {}\n#define {up}_VERSION_MICRO {}\n",
                    v.0, v.1, v.2
                ),
            )
            .unwrap();
        }
        let f = Ffmpeg {
            avutil_version: "59.39.100".into(),
            major: 7,
            lib: d.path().join("lib"),
            include: inc,
            pkg_config_path: None,
            found_by: "--ffmpeg (headers)".into(),
            bin: None,
        };
        let p = plan(&f, Path::new("/cache"), rocbuild_probe::Os::Linux).unwrap();
        let names: Vec<&str> = p.files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["libavutil.pc", "libavcodec.pc"]);
        assert!(
            p.files[1].1.contains("Version: 61.19.101"),
            "{}",
            p.files[1].1
        );
        assert!(p.files[1].1.contains("-lavcodec"));
        let via_pc = Ffmpeg {
            found_by: "pkg-config".into(),
            ..f
        };
        assert!(plan(&via_pc, Path::new("/cache"), rocbuild_probe::Os::Linux).is_none());
    }
}
