//! What the FFmpeg step needs from PE files: their imports, renaming DLL names in place (import
//! directory and the export directory's own name), and a `.def` of their exports.

use goblin::pe::section_table::{SectionTable, IMAGE_SCN_MEM_EXECUTE};
use goblin::pe::PE;

use crate::util::Result;

fn parse(bytes: &[u8]) -> Result<PE<'_>> {
    PE::parse(bytes).map_err(|e| format!("not a readable PE file: {e}"))
}

/// The DLL names a PE file imports.
pub fn imports(bytes: &[u8]) -> Result<Vec<String>> {
    Ok(parse(bytes)?
        .libraries
        .iter()
        .map(|s| s.to_string())
        .collect())
}

/// The name delvewheel gave back: `avcodec-61-<32 hex>.dll` → `avcodec-61.dll`; None if the
/// name is not mangled.
pub fn plain_name(name: &str) -> Option<String> {
    let stem = name
        .strip_suffix(".dll")
        .or_else(|| name.strip_suffix(".DLL"))?;
    let (base, hash) = stem.rsplit_once('-')?;
    let is_hash = hash.len() == 32 && hash.bytes().all(|b| b.is_ascii_hexdigit());
    (is_hash && !base.is_empty()).then(|| format!("{base}.dll"))
}

/// The file offset of `rva`.
pub fn offset(sections: &[SectionTable], rva: u32) -> Option<usize> {
    sections.iter().find_map(|s| {
        let size = s.virtual_size.max(s.size_of_raw_data);
        (rva >= s.virtual_address && rva < s.virtual_address + size)
            .then(|| (rva - s.virtual_address + s.pointer_to_raw_data) as usize)
    })
}

/// Rename, in place, every imported DLL name (and the export directory's own name) for which
/// `rename` gives a new one, which must not be longer: the rest of the old string becomes NUL
/// bytes. The number of names changed.
pub fn rename_dlls(bytes: &mut [u8], rename: &dyn Fn(&str) -> Option<String>) -> Result<usize> {
    let mut patches: Vec<(usize, String, String)> = Vec::new();
    {
        let pe = parse(bytes)?;
        let mut add = |rva: u32, old: &str| -> Result<()> {
            let Some(new) = rename(old).filter(|n| n != old) else {
                return Ok(());
            };
            let at = offset(&pe.sections, rva)
                .ok_or_else(|| format!("the name {old} at RVA {rva:#x} is in no section"))?;
            patches.push((at, old.to_string(), new));
            Ok(())
        };
        if let Some(imports) = &pe.import_data {
            for entry in &imports.import_data {
                add(entry.import_directory_entry.name_rva, entry.name)?;
            }
        }
        if let Some(exports) = &pe.export_data {
            if let Some(name) = exports.name {
                add(exports.export_directory_table.name_rva, name)?;
            }
        }
    }
    for (at, old, new) in &patches {
        let end = at + old.len();
        if bytes.get(*at..end) != Some(old.as_bytes()) || bytes.get(end) != Some(&0) {
            return Err(format!("the string {old} is not at file offset {at:#x}"));
        }
        if new.len() > old.len() {
            return Err(format!(
                "{new} is longer than {old}: cannot rename in place"
            ));
        }
        bytes[*at..*at + new.len()].copy_from_slice(new.as_bytes());
        bytes[*at + new.len()..end].fill(0);
    }
    Ok(patches.len())
}

/// A module-definition file for `llvm-dlltool`: `LIBRARY <dll>`, then every named export;
/// those outside executable sections marked DATA (an import library must not give a
/// variable a call thunk). Forwarded exports are left out. (text, number of DATA exports)
pub fn exports_def(bytes: &[u8], dll: &str) -> Result<(String, usize)> {
    let pe = parse(bytes)?;
    let mut text = format!("LIBRARY {dll}\nEXPORTS\n");
    let mut data = 0;
    for e in &pe.exports {
        let (Some(name), None) = (e.name, &e.reexport) else {
            continue;
        };
        let exec = pe.sections.iter().any(|s| {
            let (start, size) = (s.virtual_address as usize, s.virtual_size as usize);
            (start..start + size).contains(&e.rva) && s.characteristics & IMAGE_SCN_MEM_EXECUTE != 0
        });
        if exec {
            text.push_str(&format!("  {name}\n"));
        } else {
            text.push_str(&format!("  {name} DATA\n"));
            data += 1;
        }
    }
    Ok((text, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delvewheel_names() {
        assert_eq!(
            plain_name("avcodec-61-1306a7df8fab62262dd7797a8fb9f1cc.dll").as_deref(),
            Some("avcodec-61.dll")
        );
        assert_eq!(
            plain_name("libwebp-403278ae07d03bce8ea1269128f80bb3.dll").as_deref(),
            Some("libwebp.dll")
        );
        assert_eq!(plain_name("avcodec-61.dll"), None);
        assert_eq!(plain_name("KERNEL32.dll"), None);
    }
}
