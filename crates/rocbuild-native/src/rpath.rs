use std::path::Path;

use crate::{read_elf, NativeError};

/// Set DT_RUNPATH of the ELF file at `path` to `entries` (replacing RPATH/RUNPATH).
///
/// When the new value fits where the old one is, it is written there and nothing else of the
/// file changes (two fields: the string, and the tag when it was DT_RPATH): a library packed
/// with GPU code or a kernel-pack reference is edited in exactly those bytes. Otherwise pure
/// Rust (arwen, as rattler-build does), `patchelf` when that fails. The result is read back:
/// success means the loader will really see these entries.
pub fn set_runpath(path: &Path, entries: &[String]) -> Result<(), NativeError> {
    let joined = entries.join(":");
    let err = |reason: String| NativeError::Edit {
        path: path.display().to_string(),
        reason,
    };
    // A file cut short or damaged is said as such by the reader, before either editor
    // tries (and fails with its own less telling words).
    read_elf(path)?;
    let bytes = rocbuild_platform::state_files::read_file_capped(path, crate::read::MAX_FILE_SIZE)
        .map_err(|e| err(e.to_string()))?;
    let first = match in_place(&bytes, &joined) {
        Some(edited) => write_beside(path, &edited),
        None => with_arwen(path, &joined),
    };
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
    let bytes = rocbuild_platform::state_files::read_file_capped(path, crate::read::MAX_FILE_SIZE)
        .map_err(|e| e.to_string())?;
    let mut elf = arwen::elf::ElfContainer::parse(&bytes).map_err(|e| format!("{e:?}"))?;
    // Dropping DT_RPATH first makes arwen add a DT_RUNPATH: RPATH would also apply to the
    // dependencies' dependencies and override LD_LIBRARY_PATH, which we do not want.
    elf.remove_runpath().map_err(|e| format!("{e:?}"))?;
    elf.set_runpath(runpath).map_err(|e| format!("{e:?}"))?;
    let mut out = Vec::with_capacity(bytes.len() + 4096);
    elf.write(&mut out).map_err(|e| format!("{e:?}"))?;
    write_beside(path, &out)
}

/// Write beside, then rename: a failure never leaves a half-written library.
fn write_beside(path: &Path, out: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("rocbuild-tmp");
    fs_err::write(&tmp, out).map_err(|e| e.to_string())?;
    let perms = fs_err::metadata(path)
        .map_err(|e| e.to_string())?
        .permissions();
    fs_err::set_permissions(&tmp, perms).map_err(|e| e.to_string())?;
    fs_err::rename(&tmp, path).map_err(|e| e.to_string())
}

const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;

/// The file with its one RPATH/RUNPATH string overwritten by `value` (NUL-padded) and the tag
/// made DT_RUNPATH, when `value` fits in the old string and no other name shares its bytes;
/// None otherwise (64-bit little-endian ELF only: every platform rocbuild edits).
fn in_place(bytes: &[u8], value: &str) -> Option<Vec<u8>> {
    use goblin::elf::{program_header::PT_DYNAMIC, Elf};
    let elf = Elf::parse(bytes).ok()?;
    if !elf.is_64 || !elf.little_endian {
        return None;
    }
    let dynamic = elf.dynamic.as_ref()?;
    let paths: Vec<(usize, u64)> = dynamic
        .dyns
        .iter()
        .enumerate()
        .filter(|(_, d)| d.d_tag == DT_RPATH || d.d_tag == DT_RUNPATH)
        .map(|(i, d)| (i, d.d_val))
        .collect();
    let [(index, name)] = paths[..] else {
        return None;
    };
    let strtab = vaddr_to_offset(&elf, dynamic.info.strtab as u64)?;
    let start = usize::try_from(strtab.checked_add(name)?).ok()?;
    let old_len = bytes.get(start..)?.iter().position(|&b| b == 0)?;
    if value.len() > old_len || value.as_bytes().contains(&0) {
        return None;
    }
    // Another name pointing into the old string (a linker's tail merging) would change too.
    let ours = name..name + old_len as u64;
    let shares = |off: u64| off != name && ours.contains(&off);
    let others = dynamic
        .dyns
        .iter()
        .filter(|d| matches!(d.d_tag, 1 | 14)) // DT_NEEDED, DT_SONAME
        .map(|d| d.d_val)
        .chain(elf.dynsyms.iter().map(|s| s.st_name as u64));
    if others.into_iter().any(shares) || versions_share(&elf, &shares) {
        return None;
    }
    let dyn_at = elf
        .program_headers
        .iter()
        .find(|p| p.p_type == PT_DYNAMIC)?
        .p_offset;
    let tag_at = usize::try_from(dyn_at).ok()?.checked_add(index * 16)?;
    let mut out = bytes.to_vec();
    out.get_mut(tag_at..tag_at + 8)?
        .copy_from_slice(&DT_RUNPATH.to_le_bytes());
    let slot = out.get_mut(start..start + old_len)?;
    slot.fill(0);
    slot[..value.len()].copy_from_slice(value.as_bytes());
    Some(out)
}

/// A version requirement's or definition's name inside the old string.
fn versions_share(elf: &goblin::elf::Elf, shares: &dyn Fn(u64) -> bool) -> bool {
    let mut names = Vec::new();
    for v in elf.verneed.iter() {
        for n in v.iter() {
            names.push(n.vn_file as u64);
            names.extend(n.iter().map(|a| a.vna_name as u64));
        }
    }
    for v in elf.verdef.iter() {
        for d in v.iter() {
            names.extend(d.iter().map(|a| a.vda_name as u64));
        }
    }
    names.into_iter().any(shares)
}

/// The file offset of a virtual address, through the PT_LOAD segment holding it.
fn vaddr_to_offset(elf: &goblin::elf::Elf, vaddr: u64) -> Option<u64> {
    elf.program_headers
        .iter()
        .filter(|p| p.p_type == goblin::elf::program_header::PT_LOAD)
        .find(|p| (p.p_vaddr..p.p_vaddr + p.p_filesz).contains(&vaddr))
        .map(|p| vaddr - p.p_vaddr + p.p_offset)
}

fn tracing_fallback(reason: &str) {
    tracing::warn!("pure-Rust RUNPATH edit failed ({reason}); used patchelf");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Build a real shared library with cc, set its RUNPATH, read it back.
    #[test]
    #[cfg_attr(windows, ignore = "a Unix-host test: it makes its ELF with `cc`")]
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
