//! Format detection and the safety net around the parsers.
//!
//! goblin checks most counts against the buffer length, but a crafted file has made it panic
//! (slice indexing) in the past; `doctor` runs on whatever a user has in a venv, so every parse
//! runs under `catch_unwind` as a last resort, behind a size limit.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use crate::{Binary, NativeError, BYTES};

/// Larger files are refused. The biggest real library we know (CUDA torch's
/// `libtorch_cuda.so`, `torch_cuda.dll`) is about 1.5 GB.
pub const MAX_FILE_SIZE: u64 = 8 << 30;

/// How much work a read does beyond the structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Demangle every import and export name. Demangling is most of the cost of reading a big
    /// C++ library (0.6 s of CUDA torch's `libtorch_cuda.so`, whose structure parses in
    /// 0.07 s); loader emulation and the ABI check turn it off and demangle only what they
    /// report.
    pub demangle: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions { demangle: true }
    }
}

/// Read and parse the binary at `path` (ELF, PE or Mach-O, detected by magic), names
/// demangled.
///
/// The file is memory-mapped, so reading the dynamic section of a 1 GB library only touches
/// the pages holding it.
pub fn read_binary(path: &Path) -> Result<Binary, NativeError> {
    read_binary_with(path, &ReadOptions::default())
}

/// [`read_binary`] with [`ReadOptions`].
pub fn read_binary_with(path: &Path, opts: &ReadOptions) -> Result<Binary, NativeError> {
    let io = |source| NativeError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = rocbuild_platform::state_files::open_file(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if size > MAX_FILE_SIZE {
        return Err(NativeError::TooLarge {
            path: path.display().to_string(),
            size,
            limit: MAX_FILE_SIZE,
        });
    }
    if size == 0 {
        return parse_binary_with(&[], opts).map_err(|e| e.at(path));
    }
    // SAFETY: the map is read-only and private; a file truncated by someone else while we read
    // it could fault, which is the accepted risk of every mmap-based binary reader (goblin,
    // object, rattler-build) and far rarer than the cost of copying gigabytes.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    parse_binary_with(&map, opts).map_err(|e| e.at(path))
}

/// Parse a binary held in memory. Never panics; errors name the file as `<bytes>`.
pub fn parse_binary(bytes: &[u8]) -> Result<Binary, NativeError> {
    parse_binary_with(bytes, &ReadOptions::default())
}

/// [`parse_binary`] with [`ReadOptions`].
pub fn parse_binary_with(bytes: &[u8], opts: &ReadOptions) -> Result<Binary, NativeError> {
    if bytes.len() as u64 > MAX_FILE_SIZE {
        return Err(NativeError::TooLarge {
            path: BYTES.into(),
            size: bytes.len() as u64,
            limit: MAX_FILE_SIZE,
        });
    }
    let format = sniff(bytes).ok_or_else(|| NativeError::Unrecognized {
        path: BYTES.into(),
        magic: hex_prefix(bytes),
    })?;
    guarded(format, || match format {
        crate::Format::Elf => crate::elf::parse(bytes, opts),
        crate::Format::Pe => crate::pe::parse(bytes, opts),
        crate::Format::MachO => crate::macho::parse(bytes, opts),
    })
}

/// Run a parser, turning a panic into [`NativeError::Malformed`].
pub(crate) fn guarded<T>(
    format: crate::Format,
    f: impl FnOnce() -> Result<T, NativeError>,
) -> Result<T, NativeError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let reason = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "parser failed".into());
        Err(malformed(format, format!("parser gave up: {reason}")))
    })
}

pub(crate) fn malformed(format: crate::Format, reason: impl Into<String>) -> NativeError {
    NativeError::Malformed {
        path: BYTES.into(),
        format: format.to_string(),
        reason: reason.into(),
    }
}

/// The format by magic number.
/// The format of the file at `path` from its first bytes alone (no parse): which OS's loader
/// it is for. `None`: unreadable or not a native binary.
pub fn format_of(path: &Path) -> Option<crate::Format> {
    use std::io::Read;
    let mut head = [0u8; 8];
    let mut f = rocbuild_platform::state_files::open_file(path).ok()?;
    let n = f.read(&mut head).ok()?;
    sniff(&head[..n])
}

pub(crate) fn sniff(bytes: &[u8]) -> Option<crate::Format> {
    use crate::Format::*;
    let m4: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
    match m4 {
        [0x7f, b'E', b'L', b'F'] => Some(Elf),
        [b'M', b'Z', ..] => Some(Pe),
        // thin 32/64-bit, both byte orders
        [0xfe, 0xed, 0xfa, 0xce | 0xcf] | [0xce | 0xcf, 0xfa, 0xed, 0xfe] => Some(MachO),
        // universal (fat); Java class files share 0xcafebabe, but have a huge "arch count"
        [0xca, 0xfe, 0xba, 0xbe] | [0xca, 0xfe, 0xba, 0xbf] => {
            let n = u32::from_be_bytes(bytes.get(4..8)?.try_into().ok()?);
            (n > 0 && n < 64).then_some(MachO)
        }
        _ => None,
    }
}

fn hex_prefix(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "nothing (empty file)".into();
    }
    bytes
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Bounded, UTF-8-lossy string list helper shared by the format readers.
pub(crate) fn split_paths<S: AsRef<str>>(paths: &[S]) -> Vec<String> {
    paths
        .iter()
        .flat_map(|p| p.as_ref().split(':'))
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}
