use std::path::{Path, PathBuf};

use crate::{Ffmpeg, ProbeError, Tool};

/// FFmpeg major from libavutil's major: 56->4, 57->5, 58->6, 59->7, 60->8, 61->9.
pub fn soname_major_to_ffmpeg(avutil_major: u32) -> Option<u32> {
    (56..=61).contains(&avutil_major).then(|| avutil_major - 52)
}

/// FFmpeg through pkg-config (optionally pointed at `dir/lib/pkgconfig`), else from the
/// headers under `dir/include` when `dir` has no .pc files (some Windows builds).
pub fn probe_ffmpeg(dir: Option<&Path>, pkg_config: Option<&Tool>) -> Result<Ffmpeg, ProbeError> {
    find_ffmpeg(dir, pkg_config)?.map_err(|reason| ProbeError::Ffmpeg {
        reason,
        help: "install FFmpeg's development files (Debian/Ubuntu: apt-get install pkg-config libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libswresample-dev libavfilter-dev libavdevice-dev; macOS: brew install ffmpeg pkg-config), or pass --ffmpeg DIR".into(),
    })
}

/// [`probe_ffmpeg`], with "not installed" (no `dir` given, pkg-config does not know it or is
/// missing) as `Ok(Err(why))`: a prerequisite to name with the others, not an error yet.
pub fn find_ffmpeg(
    dir: Option<&Path>,
    pkg_config: Option<&Tool>,
) -> Result<Result<Ffmpeg, String>, ProbeError> {
    let pc_path = dir.map(|d| d.join("lib").join("pkgconfig"));
    if let Some(pc) = pkg_config {
        if pc_path.as_ref().is_none_or(|p| p.is_dir()) {
            if let Some(f) = via_pkg_config(&pc.path, pc_path.as_deref(), dir.is_some())? {
                return Ok(Ok(f));
            }
        }
    }
    if let Some(d) = dir {
        return from_headers(d).map(Ok);
    }
    Ok(Err(match pkg_config {
        Some(_) => "pkg-config does not know libavutil".into(),
        None => "pkg-config is not installed, so FFmpeg cannot be found".into(),
    }))
}

/// A Windows user's FFmpeg as the builds they download are laid out: a shared build's `bin\`
/// on PATH (ffmpeg.exe with its DLLs, which Windows' loader also finds through PATH), its
/// headers and import libraries beside it (`include\`, `lib\`). None on other hosts, whose
/// FFmpeg pkg-config finds, and when that folder holds no headers.
pub fn beside_program_on_path(env: &crate::ProbeEnv, host: crate::Os) -> Option<Ffmpeg> {
    if !host.rules().searches_own_dir_and_path() {
        return None;
    }
    let exe = env.which("ffmpeg", host)?;
    let root = exe.parent()?.parent()?;
    let mut f = from_headers(root).ok()?;
    f.found_by = format!("ffmpeg.exe on PATH ({})", exe.display());
    Some(f)
}

fn via_pkg_config(
    exe: &Path,
    pc_path: Option<&Path>,
    explicit: bool,
) -> Result<Option<Ffmpeg>, ProbeError> {
    let query = |args: &[&str]| -> Option<String> {
        let mut cmd = duct::cmd(exe, args)
            .stdout_capture()
            .stderr_null()
            .unchecked();
        if let Some(p) = pc_path {
            cmd = cmd.env("PKG_CONFIG_PATH", p);
        }
        let out = cmd.run().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let Some(version) = query(&["--modversion", "libavutil"]) else {
        return Ok(None);
    };
    let major = major_of(&version)?;
    let lib = query(&["--variable=libdir", "libavutil"]).unwrap_or_default();
    let include = query(&["--variable=includedir", "libavutil"]).unwrap_or_default();
    Ok(Some(Ffmpeg {
        avutil_version: version,
        major,
        lib: PathBuf::from(lib),
        include: PathBuf::from(include),
        pkg_config_path: pc_path.map(Path::to_path_buf),
        found_by: if explicit {
            "--ffmpeg (pkg-config)".into()
        } else {
            "pkg-config".into()
        },
        bin: pc_path
            .and_then(|pc| pc.ancestors().nth(2))
            .and_then(|root| shared_bin(&root.join("bin"))),
    }))
}

fn major_of(avutil_version: &str) -> Result<u32, ProbeError> {
    let m: Option<u32> = avutil_version
        .split('.')
        .next()
        .and_then(|s| s.parse().ok());
    m.and_then(soname_major_to_ffmpeg)
        .ok_or_else(|| ProbeError::Ffmpeg {
            reason: format!(
                "libavutil {avutil_version} is not an FFmpeg release rocbuild knows (4 to 9)"
            ),
            help: "install FFmpeg 4 to 9, or pass --ffmpeg DIR pointing at one".into(),
        })
}

/// Read LIBAVUTIL_VERSION_MAJOR/MINOR/MICRO from the headers (version_major.h since FFmpeg 6).
fn from_headers(dir: &Path) -> Result<Ffmpeg, ProbeError> {
    let inc = dir.join("include");
    let mut text = String::new();
    for f in ["version_major.h", "version.h"] {
        text.push_str(&crate::read_text(inc.join("libavutil").join(f)).unwrap_or_default());
    }
    let get = |name: &str| crate::c_define(&text, name);
    let Some(major) = get("LIBAVUTIL_VERSION_MAJOR") else {
        return Err(ProbeError::Ffmpeg {
            reason: format!(
                "{} has neither lib/pkgconfig/libavutil.pc nor include/libavutil/version.h",
                dir.display()
            ),
            help:
                "point --ffmpeg at the root of a *shared* FFmpeg build (holding include/ and lib/)"
                    .into(),
        });
    };
    let version = format!(
        "{major}.{}.{}",
        get("LIBAVUTIL_VERSION_MINOR").unwrap_or_default(),
        get("LIBAVUTIL_VERSION_MICRO").unwrap_or_default()
    );
    Ok(Ffmpeg {
        major: major_of(&version)?,
        avutil_version: version,
        lib: dir.join("lib"),
        include: inc,
        pkg_config_path: None,
        found_by: "--ffmpeg (headers)".into(),
        bin: shared_bin(&dir.join("bin")),
    })
}

/// `dir` when it holds FFmpeg's DLLs (`avutil-59.dll`): a shared Windows build.
fn shared_bin(dir: &Path) -> Option<PathBuf> {
    let rd = std::fs::read_dir(dir).ok()?;
    let shared = rd.flatten().any(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        crate::platform::libname::parse(&n)
            .is_some_and(|l| l.is_dll() && l.base.eq_ignore_ascii_case("avutil"))
    });
    shared.then(|| dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majors() {
        assert_eq!(soname_major_to_ffmpeg(57), Some(5));
        assert_eq!(soname_major_to_ffmpeg(60), Some(8));
        assert_eq!(soname_major_to_ffmpeg(40), None);
    }

    /// A Windows host whose PATH holds a shared build's bin\ (as users set it up) gives that
    /// build; a Linux host never looks there, and a bin\ without headers beside it is no
    /// build to compile against.
    #[test]
    fn a_windows_hosts_ffmpeg_is_found_beside_ffmpeg_exe_on_path() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("ffmpeg-7.1-full_build-shared");
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for f in ["ffmpeg.exe", "avutil-59.dll", "avcodec-61.dll"] {
            std::fs::write(bin.join(f), b"MZ").unwrap();
        }
        let env = crate::ProbeEnv::rooted(d.path()).with_var("PATH", bin.display().to_string());
        assert!(beside_program_on_path(&env, crate::Os::Windows).is_none());
        headers(&root, 59);
        assert!(beside_program_on_path(&env, crate::Os::Linux).is_none());
        let f = beside_program_on_path(&env, crate::Os::Windows).unwrap();
        assert_eq!(f.major, 7);
        assert_eq!(f.bin.as_deref(), Some(bin.as_path()));
        assert!(
            f.found_by.starts_with("ffmpeg.exe on PATH"),
            "{}",
            f.found_by
        );
    }

    fn headers(root: &Path, avutil: u32) {
        let h = root.join("include/libavutil");
        std::fs::create_dir_all(&h).unwrap();
        std::fs::write(
            h.join("version_major.h"),
            format!("#define LIBAVUTIL_VERSION_MAJOR  {avutil}\n"),
        )
        .unwrap();
        std::fs::write(
            h.join("version.h"),
            "#define LIBAVUTIL_VERSION_MINOR  39\n#define LIBAVUTIL_VERSION_MICRO 100\n",
        )
        .unwrap();
    }

    #[test]
    fn reads_headers_of_a_windows_style_build() {
        let d = tempfile::tempdir().unwrap();
        let h = d.path().join("include/libavutil");
        std::fs::create_dir_all(&h).unwrap();
        std::fs::write(
            h.join("version_major.h"),
            "#define LIBAVUTIL_VERSION_MAJOR  59\n",
        )
        .unwrap();
        std::fs::write(
            h.join("version.h"),
            "#define LIBAVUTIL_VERSION_MINOR  39\n#define LIBAVUTIL_VERSION_MICRO 100\n",
        )
        .unwrap();
        let f = probe_ffmpeg(Some(d.path()), None).unwrap();
        assert_eq!((f.major, f.avutil_version.as_str()), (7, "59.39.100"));
    }
}
