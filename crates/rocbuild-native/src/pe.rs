//! PE (Windows DLL / EXE / .pyd): import directory, export table with ordinals, `.hip_fat`.

use goblin::pe::export::ExportAddressTableEntry;
use goblin::pe::PE;
use scroll::Pread;

use crate::demangle::demangle;
use crate::read::malformed;
use crate::{Binary, Export, Format, Import, NativeError, ReadOptions};

/// Parse a PE image (called through [`crate::parse_binary`], which guards panics).
pub(crate) fn parse(bytes: &[u8], opts: &ReadOptions) -> Result<Binary, NativeError> {
    let demangle = |n: &str| if opts.demangle { demangle(n) } else { None };
    let pe = PE::parse(bytes).map_err(|e| malformed(Format::Pe, e.to_string()))?;

    let imports: Vec<Import> = pe
        .imports
        .iter()
        .map(|imp| {
            // goblin names an ordinal import "ORDINAL <n>"; keep the ordinal, drop the name.
            let by_ordinal = imp.name.starts_with("ORDINAL ");
            let name = (!by_ordinal).then(|| imp.name.to_string());
            Import {
                library: Some(imp.dll.to_string()),
                demangled: name.as_deref().and_then(&demangle),
                name,
                ordinal: by_ordinal.then_some(u32::from(imp.ordinal)),
                version: None,
                weak: false,
                delayed: false,
            }
        })
        .collect();

    let (delay_needed, delayed) = delay_imports(bytes, &pe, &demangle);
    let mut imports: Vec<Import> = imports;
    imports.extend(delayed);

    let exports = pe
        .export_data
        .as_ref()
        .map(|data| export_table(bytes, &pe, data, &demangle))
        .unwrap_or_default();

    let mut offload = Vec::new();
    for sec in &pe.sections {
        let name = sec.name().unwrap_or("");
        if !name.starts_with(".hip") {
            continue;
        }
        let start = sec.pointer_to_raw_data as usize;
        let len = sec
            .size_of_raw_data
            .min(sec.virtual_size.max(sec.size_of_raw_data)) as usize;
        let Some(data) = start.checked_add(len).and_then(|end| bytes.get(start..end)) else {
            return Err(malformed(
                Format::Pe,
                format!("section {name} lies outside the file"),
            ));
        };
        offload.extend(crate::offload::scan(data)?);
    }

    let machine = pe.header.coff_header.machine;
    Ok(Binary {
        format: Format::Pe,
        arch: match machine {
            goblin::pe::header::COFF_MACHINE_X86_64 => "x86_64".into(),
            goblin::pe::header::COFF_MACHINE_X86 => "x86".into(),
            goblin::pe::header::COFF_MACHINE_ARM64 => "aarch64".into(),
            other => format!("pe-machine-{other:#x}"),
        },
        is_64: pe.is_64,
        is_library: pe.is_lib,
        soname_or_install_name: pe.name.map(str::to_string),
        needed: pe.libraries.iter().map(|s| s.to_string()).collect(),
        delay_needed,
        weak_needed: Vec::new(),
        rpath: Vec::new(),
        runpath: Vec::new(),
        interpreter: None,
        imports,
        exports,
        gpu_targets: crate::offload::gpu_names(&offload),
        offload,
        universal_arches: Vec::new(),
    })
}

/// Every non-empty slot of the export address table is an export, named or not: its ordinal is
/// the slot index plus the ordinal base; the name table maps names to slots. (goblin's own
/// `exports` lists only the named ones, which would hide `NONAME` ordinal exports.)
fn export_table(
    bytes: &[u8],
    pe: &PE,
    data: &goblin::pe::export::ExportData,
    demangle: &dyn Fn(&str) -> Option<String>,
) -> Vec<Export> {
    let base = data.export_directory_table.ordinal_base;
    let align = pe
        .header
        .optional_header
        .map(|h| h.windows_fields.file_alignment)
        .unwrap_or(0x200);
    let opts = goblin::pe::options::ParseOptions::default();
    let mut names: Vec<Option<&str>> = vec![None; data.export_address_table.len()];
    for (&name_rva, &slot) in data
        .export_name_pointer_table
        .iter()
        .zip(&data.export_ordinal_table)
    {
        let name = goblin::pe::utils::find_offset(name_rva as usize, &pe.sections, align, &opts)
            .and_then(|off| bytes.get(off..))
            .and_then(|b| b.pread::<&str>(0).ok());
        if let (Some(n), Some(entry)) = (name, names.get_mut(slot as usize)) {
            *entry = Some(n);
        }
    }
    let mut out = Vec::new();
    for (slot, addr) in data.export_address_table.iter().enumerate() {
        let (rva, forwarded) = match addr {
            ExportAddressTableEntry::ExportRVA(r) => (*r, false),
            ExportAddressTableEntry::ForwarderRVA(r) => (*r, true),
        };
        if rva == 0 {
            continue;
        }
        let name = names[slot].unwrap_or("").to_string();
        let forwarder = forwarded.then(|| {
            goblin::pe::utils::find_offset(rva as usize, &pe.sections, align, &opts)
                .and_then(|off| bytes.get(off..))
                .and_then(|b| b.pread::<&str>(0).ok())
                .unwrap_or("?")
                .to_string()
        });
        out.push(Export {
            demangled: demangle(&name),
            name,
            version: None,
            ordinal: u32::try_from(slot).ok().and_then(|s| base.checked_add(s)),
            forwarder,
        });
    }
    out
}

/// The delay-load import directory (data directory 13), which goblin does not read: DLLs the
/// loader maps on first call (`/DELAYLOAD`, torch uses it for CUDA/HIP drivers), so they are
/// not load-time dependencies, but a procedure missing from them still fails, later.
fn delay_imports(
    bytes: &[u8],
    pe: &PE,
    demangle: &dyn Fn(&str) -> Option<String>,
) -> (Vec<String>, Vec<Import>) {
    let mut dlls = Vec::new();
    let mut imports = Vec::new();
    let Some(oh) = pe.header.optional_header else {
        return (dlls, imports);
    };
    let Some(dd) = oh.data_directories.get_delay_import_descriptor() else {
        return (dlls, imports);
    };
    let align = oh.windows_fields.file_alignment;
    let opts = goblin::pe::options::ParseOptions::default();
    let image_base = pe.image_base;
    let at = |rva: u64| -> Option<usize> {
        goblin::pe::utils::find_offset(usize::try_from(rva).ok()?, &pe.sections, align, &opts)
    };
    let cstr = |off: usize| -> Option<&str> { bytes.get(off..)?.pread::<&str>(0).ok() };
    let Some(mut desc) = at(u64::from(dd.virtual_address)) else {
        return (dlls, imports);
    };
    for _ in 0..4096 {
        let word = |i: usize| bytes.pread_with::<u32>(desc + 4 * i, scroll::LE).ok();
        let (Some(attrs), Some(name_rva), Some(int_rva)) = (word(0), word(1), word(4)) else {
            break;
        };
        if name_rva == 0 {
            break;
        }
        // Attribute bit 0: RVAs; without it (old VC6 images) the fields are VAs.
        let fix = |v: u32| -> u64 {
            if attrs & 1 == 1 {
                u64::from(v)
            } else {
                u64::from(v).wrapping_sub(image_base)
            }
        };
        let Some(dll) = at(fix(name_rva)).and_then(cstr) else {
            break;
        };
        dlls.push(dll.to_string());
        let thunk_size = if pe.is_64 { 8 } else { 4 };
        if let Some(mut t) = at(fix(int_rva)) {
            for _ in 0..65536 {
                let thunk: u64 = if pe.is_64 {
                    match bytes.pread_with::<u64>(t, scroll::LE) {
                        Ok(v) => v,
                        Err(_) => break,
                    }
                } else {
                    match bytes.pread_with::<u32>(t, scroll::LE) {
                        Ok(v) => u64::from(v),
                        Err(_) => break,
                    }
                };
                if thunk == 0 {
                    break;
                }
                let by_ordinal = thunk & (1 << (thunk_size * 8 - 1)) != 0;
                let name = if by_ordinal {
                    None
                } else {
                    // IMAGE_IMPORT_BY_NAME: u16 hint, then the name.
                    at(fix(thunk as u32))
                        .and_then(|o| cstr(o + 2))
                        .map(str::to_string)
                };
                imports.push(Import {
                    library: Some(dll.to_string()),
                    demangled: name.as_deref().and_then(demangle),
                    ordinal: by_ordinal.then_some((thunk & 0xffff) as u32),
                    name,
                    version: None,
                    weak: false,
                    delayed: true,
                });
                t += thunk_size;
            }
        }
        desc += 32;
    }
    (dlls, imports)
}

/// DLL names a PE image holds as data (`LoadLibraryA("cublas64_12.dll")`,
/// `LoadLibraryW(L"nvcuda.dll")`): NUL-started strings ending in `.dll`, ASCII or UTF-16LE, in
/// its initialised data sections (`.rdata`, `.data`), that are neither in its import or
/// delay-import tables, nor its own name, nor a Windows system DLL. What the image may load at
/// run time by name, which no import-table walk follows. Sorted, without duplicates (by
/// lowercased name).
pub fn runtime_dll_names(bytes: &[u8]) -> Result<Vec<String>, NativeError> {
    crate::read::guarded(Format::Pe, || {
        let pe = PE::parse(bytes).map_err(|e| malformed(Format::Pe, e.to_string()))?;
        let (delay_needed, _) = delay_imports(bytes, &pe, &|_: &str| None);
        let known: std::collections::BTreeSet<String> = pe
            .libraries
            .iter()
            .map(|s| s.to_string())
            .chain(delay_needed)
            .chain(pe.name.map(str::to_string))
            .map(|s| s.to_ascii_lowercase())
            .collect();
        let mut found = std::collections::BTreeMap::new();
        for sec in &pe.sections {
            let name = sec.name().unwrap_or("");
            if name != ".rdata" && name != ".data" {
                continue;
            }
            let start = sec.pointer_to_raw_data as usize;
            let len = sec.size_of_raw_data as usize;
            let Some(data) = start.checked_add(len).and_then(|end| bytes.get(start..end)) else {
                continue;
            };
            for s in dll_strings(data) {
                let lower = s.to_ascii_lowercase();
                if known.contains(&lower) || crate::is_windows_system_dll(&lower) {
                    continue;
                }
                found.entry(lower).or_insert(s);
            }
        }
        Ok(found.into_values().collect())
    })
}

fn dll_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'+')
}

/// A whole string `s` that is a DLL file name (`name.dll`, name characters only).
fn as_dll_name(s: &[u8]) -> Option<String> {
    let stem_len = s.len().checked_sub(4)?;
    (stem_len > 0
        && s[stem_len..].eq_ignore_ascii_case(b".dll")
        && s.iter().all(|&b| dll_name_byte(b)))
    .then(|| String::from_utf8_lossy(s).into_owned())
}

/// NUL-delimited strings of `data` that are DLL file names: narrow (`name.dll\0`) and wide
/// (`n\0a\0m\0e\0.\0d\0l\0l\0\0\0`), each starting at the section's start or after a NUL.
fn dll_strings(data: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    // Narrow: split at NUL; a string preceded by other bytes is part of something else.
    for s in data.split(|&b| b == 0) {
        if let Some(n) = as_dll_name(s) {
            out.push(n);
        }
    }
    // Wide: runs of (printable ASCII, 0) pairs, at either alignment, starting after a NUL.
    let mut i = 0;
    while i + 1 < data.len() {
        let starts = i == 0 || data[i - 1] == 0;
        if starts && dll_name_byte(data[i]) && data[i + 1] == 0 {
            let mut j = i;
            let mut s = Vec::new();
            while j + 1 < data.len() && dll_name_byte(data[j]) && data[j + 1] == 0 {
                s.push(data[j]);
                j += 2;
            }
            // A wide string ends with a 0 u16 (or the section's end).
            if s.len() > 1 && (j + 1 >= data.len() || (data[j] == 0 && data[j + 1] == 0)) {
                if let Some(n) = as_dll_name(&s) {
                    out.push(n);
                }
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// The file version of a PE image's version resource (its `VS_FIXEDFILEINFO`: major, minor,
/// build, revision), found by the structure's signature; None without one.
pub fn pe_file_version(bytes: &[u8]) -> Option<[u16; 4]> {
    const SIGNATURE: [u8; 4] = 0xFEEF_04BDu32.to_le_bytes();
    let at = bytes.windows(4).position(|w| w == SIGNATURE)?;
    let word = |o: usize| -> Option<u32> {
        let b = bytes.get(at + o..at + o + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (ms, ls) = (word(8)?, word(12)?);
    let hi = |v: u32| u16::try_from(v >> 16).unwrap_or(0);
    let lo = |v: u32| u16::try_from(v & 0xFFFF).unwrap_or(0);
    Some([hi(ms), lo(ms), hi(ls), lo(ls)])
}

/// The machine field of a PE image's COFF header (`0x8664` x64, `0xAA64` arm64).
pub fn pe_machine(bytes: &[u8]) -> Option<u16> {
    goblin::pe::header::Header::parse(bytes)
        .ok()
        .map(|h| h.coff_header.machine)
}

#[cfg(test)]
mod runtime_names_tests {
    use super::dll_strings;

    #[test]
    fn finds_narrow_and_wide_dll_names_at_string_starts() {
        let mut data =
            b"\0\0cublas64_12.dll\0libs are here\0\"memkind\".dll\0x6;6self.dll\0".to_vec();
        for c in "nvcuda.dll".bytes() {
            data.extend([c, 0]);
        }
        data.extend([0, 0]);
        data.extend(b"not a dll.dll\0MKL_DEF.2.DLL\0");
        assert_eq!(
            dll_strings(&data),
            ["cublas64_12.dll", "MKL_DEF.2.DLL", "nvcuda.dll"]
        );
    }
}
