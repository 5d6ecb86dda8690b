//! An ELF file's sections by name, read from its section headers alone: no symbol or string
//! table is parsed. torch 2.15's CUDA library is 520 MB, with a symbol string table to match:
//! a full `goblin` parse of it for one section made `doctor` several times slower.

use goblin::container::{Container, Ctx, Endian};
use goblin::elf::header::{EI_CLASS, EI_DATA, ELFCLASS64, ELFDATA2MSB};
use goblin::elf::section_header::SHT_NOBITS;
use goblin::elf::{Elf, SectionHeader};

/// Sections found: each one's name and contents, or the name of one that lies outside the file.
pub(crate) type Found<'a> = Result<Vec<(&'a str, &'a [u8])>, String>;

/// The contents of each section whose name `wanted` accepts, in file order, with its name.
/// None when `bytes` is not an ELF file whose section headers and their names can be read; a
/// section that lies outside the file is an `Err` with its name.
pub(crate) fn sections(bytes: &[u8], wanted: impl Fn(&str) -> bool) -> Option<Found<'_>> {
    let h = Elf::parse_header(bytes).ok()?;
    let ctx = Ctx::new(
        if h.e_ident[EI_CLASS] == ELFCLASS64 {
            Container::Big
        } else {
            Container::Little
        },
        if h.e_ident[EI_DATA] == ELFDATA2MSB {
            Endian::Big
        } else {
            Endian::Little
        },
    );
    let shdrs = SectionHeader::parse(bytes, h.e_shoff as usize, h.e_shnum as usize, ctx).ok()?;
    let slice = |off: u64, size: u64| {
        let start = usize::try_from(off).ok()?;
        bytes.get(start..start.checked_add(usize::try_from(size).ok()?)?)
    };
    let names = shdrs.get(h.e_shstrndx as usize)?;
    let names = slice(names.sh_offset, names.sh_size)?;
    let name = |at: usize| {
        let rest = names.get(at..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        std::str::from_utf8(&rest[..end]).ok()
    };
    let mut out = Vec::new();
    for sh in shdrs.iter().filter(|sh| sh.sh_type != SHT_NOBITS) {
        let Some(n) = name(sh.sh_name).filter(|n| wanted(n)) else {
            continue;
        };
        match slice(sh.sh_offset, sh.sh_size) {
            Some(data) => out.push((n, data)),
            None => return Some(Err(n.to_string())),
        }
    }
    Some(Ok(out))
}
