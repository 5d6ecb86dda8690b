//! Clang offload bundles: which GPU targets a HIP binary carries.
//!
//! Two layouts exist (clang's ClangOffloadBundler documentation and `OffloadBundle.h`):
//!
//! - uncompressed: `__CLANG_OFFLOAD_BUNDLE__` (24 bytes), u64 entry count, then per entry u64
//!   offset, u64 size, u64 id length and the id (`hipv4-amdgcn-amd-amdhsa--gfx1010:xnack-`);
//!   offsets are relative to the bundle start; all little-endian.
//! - compressed (clang 17+ `--compress`, ROCm 6.2+ libraries): `CCOB`, u16 version, u16 method
//!   (0 = zlib, 1 = zstd, llvm::compression::Format), then v1: u32 uncompressed size; v2: u32
//!   total size, u32 uncompressed size; v3: u64 total size, u64 uncompressed size; then an u64
//!   truncated MD5 hash and the compressed uncompressed-layout bundle.
//!
//! The entry table sits at the start of a bundle, so for a compressed one only the first
//! [`MAX_DECOMPRESSED`] bytes are inflated: reading the targets of a 500 MB rocBLAS bundle
//! costs a few kilobytes, and a decompression bomb costs nothing.

use std::io::Read;

use memchr::memmem;
use serde::Serialize;

use crate::{NativeError, BYTES};

/// At most this many bytes are decompressed from a `CCOB` bundle (its entry table).
pub const MAX_DECOMPRESSED: usize = 4 << 20;

const MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
const CCOB: &[u8] = b"CCOB";
const MAX_ENTRIES: u64 = 1 << 16;

/// One entry of an offload bundle.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct OffloadEntry {
    /// The full entry id, e.g. `hipv4-amdgcn-amd-amdhsa--gfx1010:xnack-`.
    pub id: String,
    /// Offload kind: `hipv4`, `hip`, `openmp`, `host`.
    pub kind: String,
    /// Target triple, e.g. `amdgcn-amd-amdhsa`.
    pub triple: String,
    /// Target id with features (`gfx1010:xnack-`), if the entry has one.
    pub target_id: Option<String>,
    /// The processor alone (`gfx1010`).
    pub processor: Option<String>,
    /// Size of the code object in bytes (uncompressed).
    pub size: u64,
    /// Found inside a compressed (`CCOB`) bundle.
    pub compressed: bool,
}

/// All offload-bundle entries in `bytes`: a native binary (its fat-binary section is read), a
/// bare bundle (`__CLANG_OFFLOAD_BUNDLE__` or `CCOB`), or any other blob (scanned).
pub fn offload_targets(bytes: &[u8]) -> Result<Vec<OffloadEntry>, NativeError> {
    if crate::read::sniff(bytes).is_some() {
        if let Ok(bin) = crate::parse_binary(bytes) {
            return Ok(bin.offload);
        }
    }
    crate::read::guarded(crate::Format::Elf, || scan(bytes)).map_err(|e| match e {
        NativeError::Malformed { reason, .. } => offload_err(reason),
        other => other,
    })
}

/// The sorted unique GPU processors (`gfx…`) of non-host entries.
pub(crate) fn gpu_names(entries: &[OffloadEntry]) -> Vec<String> {
    let mut v: Vec<String> = entries
        .iter()
        .filter(|e| e.kind != "host")
        .filter_map(|e| e.processor.clone())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Find and parse every bundle in `data`.
pub(crate) fn scan(data: &[u8]) -> Result<Vec<OffloadEntry>, NativeError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() {
        let rest = &data[pos..];
        let plain = memmem::find(rest, MAGIC);
        let packed = memmem::find(rest, CCOB);
        let (at, compressed) = match (plain, packed) {
            (Some(a), Some(b)) if b < a => (b, true),
            (Some(a), _) => (a, false),
            (None, Some(b)) => (b, true),
            (None, None) => break,
        };
        let start = pos + at;
        let here = &data[start..];
        let consumed = if compressed {
            match ccob_header(here) {
                Some(h) => {
                    out.extend(parse_ccob(here, &h)?);
                    h.total.unwrap_or(h.header_len).max(h.header_len)
                }
                None => CCOB.len(), // the four letters, not a bundle
            }
        } else {
            let (entries, end) = parse_plain(here, here.len() as u64)?;
            out.extend(entries);
            end.max(MAGIC.len())
        };
        pos = start.saturating_add(consumed);
    }
    Ok(out)
}

fn offload_err(reason: impl Into<String>) -> NativeError {
    NativeError::Offload {
        path: BYTES.into(),
        reason: reason.into(),
    }
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// Parse an uncompressed bundle at the start of `b`. `total` is the bundle's real length (for
/// a decompressed prefix, the declared uncompressed size). Returns the entries and the end of
/// the furthest entry (where the next bundle may start).
fn parse_plain(b: &[u8], total: u64) -> Result<(Vec<OffloadEntry>, usize), NativeError> {
    let trunc = || offload_err("bundle header is cut short");
    let n = u64_at(b, MAGIC.len()).ok_or_else(trunc)?;
    if n > MAX_ENTRIES || n.saturating_mul(24) > total {
        return Err(offload_err(format!("implausible entry count {n}")));
    }
    let mut at = MAGIC.len() + 8;
    let mut entries = Vec::new();
    let mut end = at as u64;
    for _ in 0..n {
        let off = u64_at(b, at).ok_or_else(trunc)?;
        let size = u64_at(b, at + 8).ok_or_else(trunc)?;
        let len = u64_at(b, at + 16).ok_or_else(trunc)?;
        at += 24;
        if len > 4096 {
            return Err(offload_err(format!("entry id of {len} bytes")));
        }
        let id_bytes = b.get(at..at + len as usize).ok_or_else(trunc)?;
        at += len as usize;
        let entry_end = off.checked_add(size).filter(|&e| e <= total);
        let Some(entry_end) = entry_end else {
            return Err(offload_err(format!(
                "entry at {off} of {size} bytes runs past the bundle ({total} bytes)"
            )));
        };
        end = end.max(entry_end);
        let id = String::from_utf8_lossy(id_bytes).into_owned();
        entries.push(entry(id, size, false));
    }
    Ok((entries, end.max(at as u64) as usize))
}

/// A parsed `CCOB` header.
#[derive(Debug)]
struct CcobHeader {
    method: u16,
    header_len: usize,
    total: Option<usize>,
    uncompressed: u64,
}

/// Recognise a `CCOB` header; `None` when the bytes only happen to spell `CCOB`.
fn ccob_header(b: &[u8]) -> Option<CcobHeader> {
    if !b.starts_with(CCOB) {
        return None;
    }
    let version = u16_at(b, 4)?;
    let method = u16_at(b, 6)?;
    if method > 1 {
        return None;
    }
    let (header_len, total, uncompressed) = match version {
        1 => (20, None, u64::from(u32_at(b, 8)?)),
        2 => (24, Some(u32_at(b, 8)? as usize), u64::from(u32_at(b, 12)?)),
        3 => (
            32,
            Some(usize::try_from(u64_at(b, 8)?).ok()?),
            u64_at(b, 16)?,
        ),
        _ => return None,
    };
    Some(CcobHeader {
        method,
        header_len,
        total,
        uncompressed,
    })
}

fn parse_ccob(b: &[u8], h: &CcobHeader) -> Result<Vec<OffloadEntry>, NativeError> {
    let end = match h.total {
        Some(t) if t < h.header_len || t > b.len() => {
            return Err(offload_err(format!(
                "compressed bundle says it is {t} bytes, {} are there",
                b.len()
            )))
        }
        Some(t) => t,
        // Version 1 has no total size: the bundle runs to the end of the section, which must
        // at least hold the header (found by the offload fuzz target).
        None if b.len() < h.header_len => {
            return Err(offload_err(format!(
                "compressed bundle header needs {} bytes, {} are there",
                h.header_len,
                b.len()
            )))
        }
        None => b.len(),
    };
    let payload = &b[h.header_len..end];
    let want = (h.uncompressed as usize).min(MAX_DECOMPRESSED);
    let mut prefix = Vec::with_capacity(want.min(1 << 16));
    let res = match h.method {
        0 => flate2::read::ZlibDecoder::new(payload)
            .take(want as u64)
            .read_to_end(&mut prefix),
        _ => zstd::stream::read::Decoder::with_buffer(payload)
            .map(|d| d.single_frame())
            .and_then(|d| d.take(want as u64).read_to_end(&mut prefix)),
    };
    // A bundle longer than the cap stops mid-stream: that is expected, only a failure to
    // produce the entry table is an error.
    if let Err(e) = res {
        if prefix.len() < MAGIC.len() + 8 {
            return Err(offload_err(format!("cannot decompress: {e}")));
        }
    }
    if !prefix.starts_with(MAGIC) {
        return Err(offload_err("decompressed data is not an offload bundle"));
    }
    let (mut entries, _) = parse_plain(&prefix, h.uncompressed)?;
    for e in &mut entries {
        e.compressed = true;
    }
    Ok(entries)
}

/// Split an entry id `<kind>-<triple>[-<target id>]` the way clang's `OffloadTargetInfo` does:
/// the triple has four components (the environment may be empty: `amdgcn-amd-amdhsa-`).
fn entry(id: String, size: u64, compressed: bool) -> OffloadEntry {
    let (kind, rest) = id.split_once('-').unwrap_or((id.as_str(), ""));
    let parts: Vec<&str> = rest.splitn(5, '-').collect();
    let (triple, target) = if parts.len() == 5 {
        (parts[..4].join("-"), Some(parts[4].to_string()))
    } else {
        (rest.to_string(), None)
    };
    let target_id = target.filter(|t| !t.is_empty());
    let processor = target_id
        .as_deref()
        .and_then(|t| t.split(':').next())
        .map(str::to_string);
    OffloadEntry {
        kind: kind.to_string(),
        triple: triple.trim_end_matches('-').to_string(),
        target_id,
        processor,
        size,
        compressed,
        id,
    }
}
