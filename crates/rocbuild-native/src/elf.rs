use std::path::Path;

use goblin::elf::Elf;

use crate::NativeError;

/// What the dynamic loader reads from an ELF shared object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ElfInfo {
    pub soname: Option<String>,
    pub needed: Vec<String>,
    /// DT_RPATH entries (searched before LD_LIBRARY_PATH, also for dependencies).
    pub rpath: Vec<String>,
    /// DT_RUNPATH entries (searched after LD_LIBRARY_PATH, only for direct dependencies).
    pub runpath: Vec<String>,
}

fn split(paths: &[&str]) -> Vec<String> {
    paths
        .iter()
        .flat_map(|p| p.split(':'))
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn parse<'a>(path: &Path, bytes: &'a [u8]) -> Result<Elf<'a>, NativeError> {
    Elf::parse(bytes).map_err(|e| NativeError::Malformed {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

fn read(path: &Path) -> Result<Vec<u8>, NativeError> {
    fs_err::read(path).map_err(|source| NativeError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Read the dynamic section of the ELF file at `path`.
pub fn read_elf(path: &Path) -> Result<ElfInfo, NativeError> {
    let bytes = read(path)?;
    let elf = parse(path, &bytes)?;
    Ok(ElfInfo {
        soname: elf.soname.map(str::to_string),
        needed: elf.libraries.iter().map(|s| s.to_string()).collect(),
        rpath: split(&elf.rpaths),
        runpath: split(&elf.runpaths),
    })
}

/// Does this library export C++ symbols built with the C++11 std::string ABI?
/// (`torch.compiled_with_cxx11_abi()` without importing torch.)
pub fn exports_cxx11_abi(path: &Path) -> Result<bool, NativeError> {
    let bytes = read(path)?;
    let elf = parse(path, &bytes)?;
    Ok(elf
        .dynsyms
        .iter()
        .filter(|s| s.st_shndx != 0)
        .filter_map(|s| elf.dynstrtab.get_at(s.st_name))
        .any(|n| n.contains("B5cxx11") || n.contains("__cxx11")))
}
