//! ELF: the dynamic section, dynamic symbols with their GNU symbol versions, `.hip_fatbin`.

use std::path::Path;

use goblin::elf::header::{ET_DYN, ET_EXEC};
use goblin::elf::section_header::SHN_UNDEF;
use goblin::elf::sym::{STB_GLOBAL, STB_GNU_UNIQUE, STB_WEAK, STT_SECTION};
use goblin::elf::Elf;

use crate::demangle::demangle;
use crate::read::{malformed, split_paths};
use crate::{Binary, Export, Format, Import, NativeError, ReadOptions};

/// What the dynamic loader reads from an ELF shared object (the older, ELF-only view; new code
/// should use [`crate::read_binary`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ElfInfo {
    pub soname: Option<String>,
    pub needed: Vec<String>,
    /// DT_RPATH entries (searched before LD_LIBRARY_PATH, also for dependencies).
    pub rpath: Vec<String>,
    /// DT_RUNPATH entries (searched after LD_LIBRARY_PATH, only for direct dependencies).
    pub runpath: Vec<String>,
}

/// Read the dynamic section of the ELF file at `path`.
pub fn read_elf(path: &Path) -> Result<ElfInfo, NativeError> {
    let bin = crate::read_binary_with(path, &ReadOptions { demangle: false })?;
    if bin.format != Format::Elf {
        return Err(NativeError::Malformed {
            path: path.display().to_string(),
            format: "ELF".into(),
            reason: format!("it is a {} file", bin.format),
        });
    }
    Ok(ElfInfo {
        soname: bin.soname_or_install_name,
        needed: bin.needed,
        rpath: bin.rpath,
        runpath: bin.runpath,
    })
}

/// Does this library export C++ symbols built with the C++11 std::string ABI?
/// (`torch.compiled_with_cxx11_abi()` without importing torch.)
pub fn exports_cxx11_abi(path: &Path) -> Result<bool, NativeError> {
    let bin = crate::read_binary_with(path, &ReadOptions { demangle: false })?;
    Ok(bin
        .exports
        .iter()
        .any(|e| e.name.contains("B5cxx11") || e.name.contains("__cxx11")))
}

/// Parse an ELF image (called through [`crate::parse_binary`], which guards panics).
pub(crate) fn parse(bytes: &[u8], opts: &ReadOptions) -> Result<Binary, NativeError> {
    let elf = lean_parse(bytes)
        .or_else(|_| Elf::parse(bytes))
        .map_err(|e| malformed(Format::Elf, e.to_string()))?;
    binary(&elf, bytes, opts)
}

/// Both parses, each made into a [`Binary`] (tests: the lean parse must read what the whole one
/// reads). `None` where the lean parse does not apply.
#[cfg(all(test, target_os = "linux"))]
fn both_parses(bytes: &[u8]) -> Option<(Result<Binary, NativeError>, Result<Binary, NativeError>)> {
    let opts = ReadOptions { demangle: false };
    let lean = lean_parse(bytes).ok()?;
    let whole = Elf::parse(bytes).map_err(|e| malformed(Format::Elf, e.to_string()));
    Some((
        binary(&lean, bytes, &opts),
        whole.and_then(|e| binary(&e, bytes, &opts)),
    ))
}

fn binary(elf: &Elf, bytes: &[u8], opts: &ReadOptions) -> Result<Binary, NativeError> {
    let demangle = |n: &str| if opts.demangle { demangle(n) } else { None };
    let str_at = |off: usize| elf.dynstrtab.get_at(off).map(str::to_string);

    // Version index -> (version name, file that defines it) for imports (verneed), and
    // version index -> name for exports (verdef).
    let mut needed_versions: Vec<(u16, String, String)> = Vec::new();
    if let Some(verneed) = &elf.verneed {
        for need in verneed.iter().take(4096) {
            let file = str_at(need.vn_file).unwrap_or_default();
            for aux in need.iter().take(256) {
                if let Some(name) = str_at(aux.vna_name) {
                    needed_versions.push((aux.vna_other, name, file.clone()));
                }
            }
        }
    }
    let mut defined_versions: Vec<(u16, String)> = Vec::new();
    if let Some(verdef) = &elf.verdef {
        for def in verdef.iter().take(4096) {
            // The first aux entry is the version's own name (later ones are its parents).
            if let Some(name) = def.iter().next().and_then(|aux| str_at(aux.vda_name)) {
                defined_versions.push((def.vd_ndx, name));
            }
        }
    }

    let mut imports = Vec::new();
    let mut exports = Vec::new();
    for (i, sym) in elf.dynsyms.iter().enumerate() {
        let Some(name) = elf.dynstrtab.get_at(sym.st_name).filter(|n| !n.is_empty()) else {
            continue;
        };
        let bind = sym.st_bind();
        if !matches!(bind, STB_GLOBAL | STB_WEAK | STB_GNU_UNIQUE) || sym.st_type() == STT_SECTION {
            continue;
        }
        let ver = elf
            .versym
            .as_ref()
            .and_then(|v| v.get_at(i))
            .map(|v| v.version())
            .filter(|&v| v > 1); // 0 = local, 1 = global (unversioned)
        if sym.st_shndx == SHN_UNDEF as usize {
            let (version, library) =
                match ver.and_then(|v| needed_versions.iter().find(|(idx, _, _)| *idx == v)) {
                    Some((_, n, f)) => (Some(n.clone()), Some(f.clone())),
                    None => (None, None),
                };
            imports.push(Import {
                library,
                name: Some(name.to_string()),
                ordinal: None,
                version,
                demangled: demangle(name),
                weak: bind == STB_WEAK,
                delayed: false,
            });
        } else {
            let version = ver
                .and_then(|v| defined_versions.iter().find(|(idx, _)| *idx == v))
                .map(|(_, n)| n.clone());
            exports.push(Export {
                name: name.to_string(),
                demangled: demangle(name),
                version,
                ordinal: None,
                forwarder: None,
            });
        }
    }

    let offload = fatbin_entries(elf, bytes)?;
    let gpu_targets = crate::offload::gpu_names(&offload);
    Ok(Binary {
        format: Format::Elf,
        arch: normalise_machine(elf.header.e_machine),
        is_64: elf.is_64,
        is_library: elf.header.e_type == ET_DYN && elf.interpreter.is_none()
            || elf.header.e_type != ET_EXEC && elf.soname.is_some(),
        soname_or_install_name: elf.soname.map(str::to_string),
        needed: elf.libraries.iter().map(|s| s.to_string()).collect(),
        weak_needed: Vec::new(),
        delay_needed: Vec::new(),
        rpath: split_paths(&elf.rpaths),
        runpath: split_paths(&elf.runpaths),
        interpreter: elf.interpreter.map(str::to_string),
        imports,
        exports,
        gpu_targets,
        offload,
        universal_arches: Vec::new(),
    })
}

/// What the loader reads, and no more: goblin's `Elf::parse` also reads the static symbol
/// table and its strings (`.strtab`: 78 MB in torch 2.15's `libtorch_cpu.so`, most of doctor's
/// time) and every relocation. The dynamic symbols are counted by their section header; a file
/// without one (section headers stripped) is an error here, and the caller parses it whole.
fn lean_parse(bytes: &[u8]) -> goblin::error::Result<Elf<'_>> {
    use goblin::elf::section_header::{SHN_XINDEX, SHT_DYNSYM};
    use goblin::elf::{dynamic, program_header, Dynamic, ProgramHeader, SectionHeader, Symtab};
    use goblin::elf::{VerdefSection, VerneedSection, VersymSection};
    use goblin::strtab::Strtab;
    let header = Elf::parse_header(bytes)?;
    let mut elf = Elf::lazy_parse(header)?;
    let ctx = goblin::container::Ctx::new(header.container()?, header.endianness()?);
    let no = |what: &str| goblin::error::Error::Malformed(what.to_string());
    elf.program_headers =
        ProgramHeader::parse(bytes, header.e_phoff as usize, header.e_phnum as usize, ctx)?;
    for ph in &elf.program_headers {
        if ph.p_type == program_header::PT_INTERP && ph.p_filesz != 0 {
            let (offset, count) = (ph.p_offset as usize, (ph.p_filesz - 1) as usize);
            elf.interpreter = bytes
                .get(offset..offset.saturating_add(count))
                .and_then(|b| std::str::from_utf8(b).ok());
        }
    }
    elf.section_headers =
        SectionHeader::parse(bytes, header.e_shoff as usize, header.e_shnum as usize, ctx)?;
    let shdrs = &elf.section_headers;
    let dynsym = shdrs
        .iter()
        .find(|s| s.sh_type == SHT_DYNSYM && s.sh_entsize != 0)
        .ok_or_else(|| no("no .dynsym section header"))?;
    // The section names' index, in section 0's sh_link when there are too many sections.
    let names = match u32::from(header.e_shstrndx) {
        SHN_XINDEX => shdrs.first().map_or(0, |s| s.sh_link as usize),
        i => i as usize,
    };
    if let Some(s) = shdrs.get(names) {
        s.check_size(bytes.len())?;
        elf.shdr_strtab = Strtab::parse(bytes, s.sh_offset as usize, s.sh_size as usize, 0)?;
    }
    let Some(dynamic) = Dynamic::parse(bytes, &elf.program_headers, ctx)? else {
        return Err(no("no dynamic section"));
    };
    let info = &dynamic.info;
    elf.dynstrtab = Strtab::parse(bytes, info.strtab, info.strsz, 0)?;
    let strs = &elf.dynstrtab;
    elf.soname = (info.soname != 0)
        .then(|| strs.get_at(info.soname))
        .flatten();
    elf.libraries = dynamic.get_libraries(strs);
    for d in &dynamic.dyns {
        let at = || strs.get_at(d.d_val as usize);
        match d.d_tag {
            dynamic::DT_RPATH => elf.rpaths.extend(at()),
            dynamic::DT_RUNPATH => elf.runpaths.extend(at()),
            _ => {}
        }
    }
    let count = (dynsym.sh_size / dynsym.sh_entsize) as usize;
    elf.dynsyms = Symtab::parse(bytes, dynsym.sh_offset as usize, count, ctx)?;
    elf.versym = VersymSection::parse(bytes, shdrs, ctx)?;
    elf.verdef = VerdefSection::parse(bytes, shdrs, ctx)?;
    elf.verneed = VerneedSection::parse(bytes, shdrs, ctx)?;
    elf.dynamic = Some(dynamic);
    Ok(elf)
}

/// Offload bundles in `.hip_fatbin` (and `__CLANG_OFFLOAD_BUNDLE__` sections of any name
/// starting with `.hip`); a stripped file without section headers is scanned instead.
fn fatbin_entries(elf: &Elf, bytes: &[u8]) -> Result<Vec<crate::OffloadEntry>, NativeError> {
    if elf.section_headers.is_empty() {
        return crate::offload::scan(bytes);
    }
    let mut out = Vec::new();
    for sh in &elf.section_headers {
        let name = elf.shdr_strtab.get_at(sh.sh_name).unwrap_or("");
        if !(name == ".hip_fatbin" || name.starts_with(".hip_fat")) {
            continue;
        }
        let start = sh.sh_offset as usize;
        let Some(data) = start
            .checked_add(sh.sh_size as usize)
            .and_then(|end| bytes.get(start..end))
        else {
            return Err(malformed(
                Format::Elf,
                format!("section {name} lies outside the file"),
            ));
        };
        out.extend(crate::offload::scan(data)?);
    }
    Ok(out)
}

fn normalise_machine(m: u16) -> String {
    use goblin::elf::header::*;
    match m {
        EM_X86_64 => "x86_64".into(),
        EM_386 => "x86".into(),
        EM_AARCH64 => "aarch64".into(),
        EM_ARM => "arm".into(),
        EM_PPC64 => "ppc64".into(),
        EM_RISCV => "riscv".into(),
        EM_AMDGPU => "amdgpu".into(),
        other => machine_to_str(other).to_lowercase(),
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::both_parses;

    /// Every ELF file of this machine's library and program folders (Debian's own, hundreds of
    /// them: libraries with symbol versions, RUNPATHs, executables with an interpreter) reads the
    /// same through the lean parse as through goblin's whole one.
    #[test]
    fn the_lean_parse_reads_what_the_whole_parse_reads_on_this_machines_files() {
        let mut compared = 0;
        for dir in [
            "/usr/lib/x86_64-linux-gnu",
            "/usr/bin",
            "/usr/lib/python3.11/lib-dynload",
        ] {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                let is_file = std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file());
                let Some(bytes) = is_file.then(|| std::fs::read(&p).ok()).flatten() else {
                    continue;
                };
                if !bytes.starts_with(b"\x7fELF") {
                    continue;
                }
                let Some((lean, whole)) = both_parses(&bytes) else {
                    continue;
                };
                if let Ok(whole) = whole {
                    assert_eq!(
                        lean.expect("the lean parse fails where the whole one reads"),
                        whole,
                        "{}",
                        p.display()
                    );
                    compared += 1;
                }
            }
        }
        assert!(compared >= 200, "only {compared} ELF files compared");
    }
}
