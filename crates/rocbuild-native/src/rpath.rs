use std::path::Path;

use crate::{read_elf, NativeError};

/// Set DT_RUNPATH of the ELF file at `path` to `entries` (replacing RPATH/RUNPATH).
///
/// Pure Rust first (arwen, as rattler-build does); `patchelf` when that fails. The result is
/// read back: success means the loader will really see these entries.
pub fn set_runpath(path: &Path, entries: &[String]) -> Result<(), NativeError> {
    let joined = entries.join(":");
    let err = |reason: String| NativeError::Edit {
        path: path.display().to_string(),
        reason,
    };
    // A file cut short or damaged is said as such by the reader, before either editor
    // tries (and fails with its own less telling words).
    read_elf(path)?;
    let first = with_arwen(path, &joined);
    if let Err(reason) = first {
        let patchelf = which::which("patchelf").map_err(|_| {
            err(format!(
                "{reason}; and patchelf is not installed (apt-get install patchelf)"
            ))
        })?;
        duct::cmd(
            patchelf,
            ["--set-rpath".as_ref(), joined.as_ref(), path.as_os_str()],
        )
        .stdout_null()
        .stderr_capture()
        .run()
        .map_err(|e| err(format!("{reason}; patchelf failed too: {e}")))?;
        tracing_fallback(&reason);
    }
    let info = read_elf(path)?;
    if info.runpath != entries || !info.rpath.is_empty() {
        return Err(err(format!(
            "after editing, RUNPATH reads {:?}",
            info.runpath
        )));
    }
    Ok(())
}

fn with_arwen(path: &Path, runpath: &str) -> Result<(), String> {
    let bytes = fs_err::read(path).map_err(|e| e.to_string())?;
    let mut elf = arwen::elf::ElfContainer::parse(&bytes).map_err(|e| format!("{e:?}"))?;
    // Dropping DT_RPATH first makes arwen add a DT_RUNPATH: RPATH would also apply to the
    // dependencies' dependencies and override LD_LIBRARY_PATH, which we do not want.
    elf.remove_runpath().map_err(|e| format!("{e:?}"))?;
    elf.set_runpath(runpath).map_err(|e| format!("{e:?}"))?;
    let mut out = Vec::with_capacity(bytes.len() + 4096);
    elf.write(&mut out).map_err(|e| format!("{e:?}"))?;
    // Write beside, then rename: a failure never leaves a half-written library.
    let tmp = path.with_extension("rocbuild-tmp");
    fs_err::write(&tmp, &out).map_err(|e| e.to_string())?;
    let perms = fs_err::metadata(path)
        .map_err(|e| e.to_string())?
        .permissions();
    fs_err::set_permissions(&tmp, perms).map_err(|e| e.to_string())?;
    fs_err::rename(&tmp, path).map_err(|e| e.to_string())
}

fn tracing_fallback(reason: &str) {
    tracing::warn!("pure-Rust RUNPATH edit failed ({reason}); used patchelf");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Build a real shared library with cc, set its RUNPATH, read it back.
    #[test]
    fn sets_runpath_on_a_real_library() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("a.c");
        std::fs::write(&src, "int f(void) { return 1; }\n").unwrap();
        let lib = dir.path().join("liba.so");
        let st = std::process::Command::new("cc")
            .args([
                "-shared",
                "-fPIC",
                "-Wl,--disable-new-dtags",
                "-Wl,-rpath,/old",
            ])
            .arg(&src)
            .arg("-o")
            .arg(&lib)
            .status()
            .unwrap();
        assert!(st.success());
        assert_eq!(read_elf(&lib).unwrap().rpath, ["/old"]);
        let want = vec![
            "$ORIGIN".to_string(),
            "$ORIGIN/../torch/lib".to_string(),
            "/usr/lib/ffmpeg-long-path-here".to_string(),
        ];
        set_runpath(&lib, &want).unwrap();
        let info = read_elf(&lib).unwrap();
        assert_eq!(info.runpath, want);
        assert!(info.rpath.is_empty(), "{info:?}");
    }

    #[test]
    fn malformed_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.so");
        std::fs::write(&p, b"\x7fELF\x02\x01\x01garbage").unwrap();
        assert!(matches!(read_elf(&p), Err(NativeError::Malformed { .. })));
        assert!(set_runpath(&p, &["$ORIGIN".into()]).is_err());
    }
}
