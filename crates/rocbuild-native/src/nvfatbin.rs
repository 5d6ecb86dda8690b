//! NVIDIA fat binaries: which GPU code a CUDA library carries, read from its `.nv_fatbin`
//! section without NVIDIA's tools.
//!
//! The layout (as `cuobjdump` reads it; `fatbinary_section.h` names the magic): a section holds
//! one or more fat binaries, each 8-byte aligned: u32 magic `0xBA55ED50`, u16 version, u16
//! header size, u64 size of the entries that follow. Each entry: u16 kind (1 = PTX, 2 = ELF
//! cubin, i.e. SASS), u16, u32 entry-header size, u64 payload size, u32, u32, u16, u16, then
//! u32 arch at offset 28 (`86` for sm_86 / compute_86); the payload follows the entry header.
//! All little-endian. Checked on real nvcc 13.2 output against `cuobjdump --list-elf
//! --list-ptx` (the CUDA toolkit test in rocbuild-fetch).

use serde::Serialize;

use crate::NativeError;

const MAGIC: u32 = 0xBA55_ED50;

/// What one fat-binary entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum NvCodeKind {
    /// Machine code (a cubin) for exactly one compute capability.
    Sass,
    /// PTX, which the driver compiles for that capability and any later one.
    Ptx,
}

/// One entry of a `.nv_fatbin` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct NvCode {
    pub kind: NvCodeKind,
    /// `86` for sm_86 / compute_86.
    pub arch: u32,
}

impl NvCode {
    /// `sm_86` / `compute_90`.
    pub fn name(&self) -> String {
        match self.kind {
            NvCodeKind::Sass => format!("sm_{}", self.arch),
            NvCodeKind::Ptx => format!("compute_{}", self.arch),
        }
    }
}

fn bad(reason: String) -> NativeError {
    NativeError::Malformed {
        path: String::new(),
        format: "NVIDIA fat binary".into(),
        reason,
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Every entry of the fat binaries in `section` (the bytes of `.nv_fatbin`), in order; a
/// size that runs past the section is an error, never a read out of bounds.
pub fn parse_nv_fatbin(section: &[u8]) -> Result<Vec<NvCode>, NativeError> {
    let mut codes = Vec::new();
    let mut p = 0usize;
    while p + 16 <= section.len() {
        let magic = u32_at(section, p).unwrap_or(0);
        if magic != MAGIC {
            if magic == 0 {
                // Padding between fat binaries.
                p += 8;
                continue;
            }
            return Err(bad(format!(
                "no fat binary magic at offset {p:#x} ({magic:#x})"
            )));
        }
        let header = usize::from(u16_at(section, p + 6).unwrap_or(0));
        let size = u64_at(section, p + 8).unwrap_or(0);
        let end = usize::try_from(size)
            .ok()
            .and_then(|s| (p + header).checked_add(s))
            .filter(|e| *e <= section.len() && header >= 16)
            .ok_or_else(|| bad(format!("the fat binary at {p:#x} runs past its section")))?;
        let mut q = p + header;
        while q + 32 <= end {
            let kind = u16_at(section, q).unwrap_or(0);
            let eh = u32_at(section, q + 4).unwrap_or(0) as usize;
            let payload = u64_at(section, q + 8).unwrap_or(0);
            let arch = u32_at(section, q + 28).unwrap_or(0);
            let next = usize::try_from(payload)
                .ok()
                .and_then(|s| q.checked_add(eh)?.checked_add(s))
                .filter(|n| *n <= end && eh >= 32)
                .ok_or_else(|| bad(format!("the entry at {q:#x} runs past its fat binary")))?;
            let kind = match kind {
                1 => Some(NvCodeKind::Ptx),
                2 => Some(NvCodeKind::Sass),
                _ => None,
            };
            if let Some(kind) = kind {
                codes.push(NvCode { kind, arch });
            }
            q = next;
        }
        p = end.next_multiple_of(8);
    }
    Ok(codes)
}

/// The GPU code in the `.nv_fatbin` of the file at `path`, mapped rather than read (a CUDA
/// torch's libraries are gigabytes); empty for a file that is not ELF or has no such section.
pub fn nv_fatbin_codes_of(path: &std::path::Path) -> Result<Vec<NvCode>, NativeError> {
    let io = |source| NativeError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = rocbuild_platform::state_files::open_file(path).map_err(io)?;
    if file.metadata().map_err(io)?.len() < 64 {
        return Ok(Vec::new());
    }
    // SAFETY: read-only and private, as in `read_binary_with`: a file truncated by someone else
    // while it is read could fault, the accepted risk of every mmap-based binary reader.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    if !map.starts_with(b"\x7fELF") {
        return Ok(Vec::new());
    }
    nv_fatbin_codes(&map).map_err(|e| e.at(path))
}

/// The GPU code in an ELF file's `.nv_fatbin` section (empty when it has none).
pub fn nv_fatbin_codes(bytes: &[u8]) -> Result<Vec<NvCode>, NativeError> {
    let found = crate::elf_sections::sections(bytes, |n| n == ".nv_fatbin")
        .ok_or_else(|| bad("not an ELF file whose section headers can be read".into()))?
        .map_err(|n| bad(format!("{n} lies outside the file")))?;
    let mut codes = Vec::new();
    for (_, data) in found {
        codes.extend(parse_nv_fatbin(data)?);
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: u16, arch: u32, payload: &[u8]) -> Vec<u8> {
        let mut e = Vec::new();
        e.extend(kind.to_le_bytes());
        e.extend(0u16.to_le_bytes());
        e.extend(64u32.to_le_bytes());
        e.extend((payload.len() as u64).to_le_bytes());
        e.extend([0u8; 12]);
        e.extend(arch.to_le_bytes());
        e.resize(64, 0);
        e.extend(payload);
        e
    }

    fn fatbin(entries: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let mut f = Vec::new();
        f.extend(MAGIC.to_le_bytes());
        f.extend(1u16.to_le_bytes());
        f.extend(16u16.to_le_bytes());
        f.extend((body.len() as u64).to_le_bytes());
        f.extend(body);
        f
    }

    #[test]
    fn entries_are_read_and_lies_are_refused() {
        let f = fatbin(&[entry(2, 86, b"cubin"), entry(1, 90, b"ptx")]);
        let codes = parse_nv_fatbin(&f).unwrap();
        let names: Vec<String> = codes.iter().map(NvCode::name).collect();
        assert_eq!(names, ["sm_86", "compute_90"]);
        let mut lying = f.clone();
        lying[8] = 0xff; // the fat binary claims more than the section holds
        assert!(parse_nv_fatbin(&lying).is_err());
        let mut long_entry = f;
        long_entry[16 + 8] = 0xff; // an entry claims more than its fat binary
        assert!(parse_nv_fatbin(&long_entry).is_err());
    }
}
