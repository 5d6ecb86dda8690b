//! Kernel-pack references: a library TheRock's multi-arch packaging split carries no GPU code
//! of its own, but a section naming where its kernels are (ROCm's kpack design: the ELF section
//! `.rocm_kpack_ref`, on Windows the PE section `.kpackrf`, eight characters at most). Its
//! content is a MessagePack map with `kpack_search_paths`, paths relative to the library's own
//! directory in which `@GFXARCH@` stands for the GPU (`../.kpack/blas_lib_@GFXARCH@.kpack`).
//! The runtime resolves them from where the library is, so a copy of the library without the
//! archives beside it has no kernels.

use crate::NativeError;

/// The ELF section and the PE section holding the reference.
pub const ELF_SECTION: &str = ".rocm_kpack_ref";
pub const PE_SECTION: &str = ".kpackrf";

/// The search paths of the library's kernel-pack reference; empty when it has none. A
/// reference that is not the MessagePack map it should be is an error, not a panic.
pub fn kpack_search_paths(bytes: &[u8]) -> Result<Vec<String>, NativeError> {
    let Some(section) = reference_section(bytes) else {
        return Ok(Vec::new());
    };
    let bad = |reason: String| NativeError::Malformed {
        path: crate::BYTES.into(),
        format: "kernel-pack reference".into(),
        reason,
    };
    let value = rmpv::decode::read_value(&mut &section[..]).map_err(|e| bad(e.to_string()))?;
    let map = value
        .as_map()
        .ok_or_else(|| bad("not a MessagePack map".into()))?;
    let paths = map
        .iter()
        .find(|(k, _)| k.as_str() == Some("kpack_search_paths"))
        .and_then(|(_, v)| v.as_array())
        .ok_or_else(|| bad("no kpack_search_paths list".into()))?;
    Ok(paths
        .iter()
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect())
}

/// The bytes of the reference section of an ELF or PE file.
fn reference_section(bytes: &[u8]) -> Option<&[u8]> {
    match goblin::Object::parse(bytes).ok()? {
        goblin::Object::Elf(elf) => elf.section_headers.iter().find_map(|sh| {
            (elf.shdr_strtab.get_at(sh.sh_name) == Some(ELF_SECTION))
                .then(|| bytes.get(sh.file_range()?))
                .flatten()
        }),
        goblin::Object::PE(pe) => pe.sections.iter().find_map(|s| {
            (s.name().ok() == Some(PE_SECTION))
                .then(|| {
                    let start = s.pointer_to_raw_data as usize;
                    let len = (s.virtual_size.min(s.size_of_raw_data)) as usize;
                    bytes.get(start..start.checked_add(len)?)
                })
                .flatten()
        }),
        _ => None,
    }
}

/// `pattern` for `arch`: `../.kpack/blas_lib_@GFXARCH@.kpack` → `../.kpack/blas_lib_gfx1201.kpack`.
pub fn expand(pattern: &str, arch: &str) -> String {
    pattern.replace("@GFXARCH@", arch)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real ELF with `content` as its reference section (cc, then objcopy).
    fn elf_with_reference(dir: &std::path::Path, content: &[u8]) -> Vec<u8> {
        let src = dir.join("a.c");
        std::fs::write(&src, "int f(void) { return 1; }\n").unwrap();
        let lib = dir.join("liba.so");
        let ok = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(&src)
            .status()
            .unwrap();
        assert!(ok.success());
        let plain = std::fs::read(&lib).unwrap();
        let blob = dir.join("ref.bin");
        std::fs::write(&blob, content).unwrap();
        let ok = std::process::Command::new("objcopy")
            .arg(format!("--add-section={ELF_SECTION}={}", blob.display()))
            .arg(&lib)
            .status()
            .unwrap();
        assert!(ok.success());
        assert_eq!(kpack_search_paths(&plain).unwrap(), Vec::<String>::new());
        std::fs::read(&lib).unwrap()
    }

    #[test]
    #[cfg_attr(windows, ignore = "a Unix-host test: it makes its ELF with `cc`")]
    fn the_search_paths_are_read_and_a_broken_reference_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        let v = rmpv::Value::Map(vec![(
            "kpack_search_paths".into(),
            rmpv::Value::Array(vec!["../.kpack/blas_lib_@GFXARCH@.kpack".into()]),
        )]);
        let mut good = Vec::new();
        rmpv::encode::write_value(&mut good, &v).unwrap();
        let lib = elf_with_reference(t.path(), &good);
        let paths = kpack_search_paths(&lib).unwrap();
        assert_eq!(paths, ["../.kpack/blas_lib_@GFXARCH@.kpack"]);
        assert_eq!(
            expand(&paths[0], "gfx1201"),
            "../.kpack/blas_lib_gfx1201.kpack"
        );
        for broken in [&b"\xc1\xc1garbage"[..], &b"\x92\x01\x02"[..], &b""[..]] {
            let t = tempfile::tempdir().unwrap();
            let lib = elf_with_reference(t.path(), broken);
            assert!(kpack_search_paths(&lib).is_err(), "{broken:?}");
        }
    }
}
