//! Native binaries: what an ELF / PE / Mach-O file needs, where the loader would find it, which
//! GPU code it carries, and rpath editing.
//!
//! Everything here reads bytes, never loads them: a Windows DLL or a macOS dylib is read the same
//! way on a Linux host, so `doctor`, `deps` and `bundle` logic for every platform runs in tests
//! anywhere. Reading never panics on a malformed file: every problem is a [`NativeError`].
//!
//! # The API, in one screen
//!
//! Reading one file ([`read_binary`] / [`parse_binary`]; `_with` variants take [`ReadOptions`])
//! gives a [`Binary`]:
//! - [`Binary::needed`]: DT_NEEDED (ELF), the import directory's DLL names (PE), LC_LOAD_DYLIB
//!   and friends (Mach-O), in file order; [`Binary::weak_needed`]: LC_LOAD_WEAK_DYLIB ones.
//! - [`Binary::rpath`] / [`Binary::runpath`]: ELF DT_RPATH / DT_RUNPATH, Mach-O LC_RPATH (in
//!   `rpath`), split on `:` and unexpanded (`$ORIGIN`, `@loader_path` are kept as written).
//! - [`Binary::soname_or_install_name`]: DT_SONAME, the PE export directory's DLL name, LC_ID_DYLIB.
//! - [`Binary::imports`] / [`Binary::exports`]: dynamic symbols with ELF symbol versions
//!   (`GLIBC_2.34`, and the `vn_file` that defines them), PE ordinals (`NONAME` exports too) and
//!   forwarders, Mach-O two-level-namespace library; C++ names are demangled ([`demangle`]:
//!   Itanium and MSVC) unless [`ReadOptions::demangle`] is off (demangling is most of the cost
//!   of reading a big C++ library: 0.6 s for CUDA torch's `libtorch_cuda.so`).
//! - [`Binary::gpu_targets`] (`gfx1010`, sorted, unique) and [`Binary::offload`] (every bundle
//!   entry, e.g. `hipv4-amdgcn-amd-amdhsa--gfx1010:xnack-`), from `.hip_fatbin` (ELF), `.hip_fat`
//!   (PE), or a scan when an ELF file has no section table. [`offload_targets`] reads raw bytes
//!   (`__CLANG_OFFLOAD_BUNDLE__` and compressed `CCOB` v1/v2/v3, zstd or zlib).
//! - A universal Mach-O is described by its first slice; [`Binary::universal_arches`] lists all.
//!
//! Loader emulation: [`closure()`] (or [`closure_with`] over another [`FileSystem`]) with a
//! [`SearchContext`] walks the dependency tree breadth-first the way ld.so, the Windows loader
//! (LoadLibraryEx as Python uses it) or dyld would, and gives a [`Closure`]: every
//! [`Dependency`] found with its path, the [`Provider`] rule that found it (the RPATH entry and
//! the file holding it, `add_dll_directory`, System32, ...) and who needed it, plus every
//! [`MissingDependency`] with the directories searched. The platform is a value (the root's
//! [`Format`], or [`SearchContext::platform`]), never `#[cfg]`: Windows and macOS rules run on
//! Linux. [`SearchContext::linux_host`] fills in this machine's ELF context (LD_LIBRARY_PATH,
//! [`ld_so_cache`], default dirs). Put already-loaded libraries (torch's after `import torch`,
//! a preload hook's DLLs) in [`SearchContext::preloaded`] and the interpreter in
//! [`SearchContext::executable_path`] (its `Py*` exports satisfy an extension's imports).
//!
//! The ABI check: [`unresolved_imports`] (one file against named providers) and
//! [`Closure::abi_check`] (every non-system file of a closure against what its loader binds it
//! to) give [`MissingSymbol`]s, demangled: `undefined symbol` / `WinError 127` / `Symbol not
//! found` before anything is loaded.
//!
//! Editing: [`set_runpath`] (ELF, arwen then patchelf), [`add_macho_rpaths`] (arwen then
//! `install_name_tool`, then an ad-hoc signature written by [`adhoc_sign`] — the
//! `apple-codesign` crate, `codesign` as the fallback — checked with the crate's verifier), both
//! read back their result. [`is_python_c_api`] tells the interpreter's symbols in any format.
//!
//! `examples/native_info.rs` prints a [`Binary`]; `examples/native_deps.rs` prints a closure
//! and its ABI check with timings.

mod abi;
mod closure;
mod closure_rules;
mod closure_walk;
mod codesign;
mod demangle;
mod dlopen;
mod elf;
mod elf_sections;
mod exports;
mod kpack;
mod macho;
mod nvfatbin;
mod offload;
mod pe;
mod read;
mod rpath;

pub use abi::{
    exported_by_any, unresolved_imports, unresolved_imports_indexed, MissingSymbol, Provided,
};
pub use closure::{
    closure, closure_with, ld_so_cache, parse_ld_so_cache, Closure, Dependency, FileSystem,
    MissingDependency, Provider, RealFs, RpathTried, SearchContext,
};
pub use closure_rules::{is_msvc_runtime, is_python_dll, is_windows_system_dll};
pub use codesign::{adhoc_sign, adhoc_sign_bytes, signature_problems, Signer};
pub use demangle::demangle;
pub use dlopen::{
    closure_with_dlopened, cuda_libraries_loaded_by_name, cuda_library_major, cuda_library_names,
};
pub use elf::{exports_cxx11_abi, read_elf, ElfInfo};
pub use exports::{symbol_hash, ExportIndex};
pub use kpack::{expand as expand_kpack_pattern, kpack_search_paths};
pub use macho::add_macho_rpaths;
pub use nvfatbin::{nv_fatbin_codes, nv_fatbin_codes_of, parse_nv_fatbin, NvCode, NvCodeKind};
pub use offload::{offload_targets, OffloadEntry, MAX_DECOMPRESSED};
pub use pe::{pe_file_version, pe_machine, runtime_dll_names};
pub use read::{
    format_of, parse_binary, parse_binary_with, read_binary, read_binary_with, ReadOptions,
    MAX_FILE_SIZE,
};
pub use rpath::set_runpath;

use serde::Serialize;
use thiserror::Error;

/// The object-file family, which is also the loader whose rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Linux and other ELF systems: ld.so rules.
    Elf,
    /// Windows DLL / EXE / .pyd: LoadLibraryEx rules.
    Pe,
    /// macOS dylib / bundle: dyld rules.
    MachO,
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Elf => "ELF",
            Format::Pe => "PE",
            Format::MachO => "Mach-O",
        })
    }
}

/// Everything rocbuild reads from one native binary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Binary {
    pub format: Format,
    /// Machine, normalised: `x86_64`, `aarch64` (ELF) / `arm64` (Mach-O), `x86`, `amdgpu`, ...
    pub arch: String,
    /// 64-bit file?
    pub is_64: bool,
    /// A shared library (ET_DYN without an interpreter, a DLL, MH_DYLIB/MH_BUNDLE) rather than a
    /// program.
    pub is_library: bool,
    /// ELF DT_SONAME, PE export-directory name, Mach-O LC_ID_DYLIB.
    pub soname_or_install_name: Option<String>,
    /// Libraries the loader must load first, in file order.
    pub needed: Vec<String>,
    /// The subset of `needed` the loader may skip when absent (Mach-O LC_LOAD_WEAK_DYLIB).
    pub weak_needed: Vec<String>,
    /// PE delay-loaded DLLs (`/DELAYLOAD`): mapped on first call, not at load time, so not in
    /// `needed` and not part of the load-time closure.
    pub delay_needed: Vec<String>,
    /// ELF DT_RPATH (only honoured when there is no DT_RUNPATH); Mach-O LC_RPATH.
    pub rpath: Vec<String>,
    /// ELF DT_RUNPATH (searched after LD_LIBRARY_PATH, for direct dependencies only).
    pub runpath: Vec<String>,
    /// ELF PT_INTERP (programs only).
    pub interpreter: Option<String>,
    /// Undefined dynamic symbols (ELF), imported procedures (PE), bound symbols (Mach-O).
    pub imports: Vec<Import>,
    /// Defined dynamic symbols (ELF), the export table (PE), the export trie (Mach-O).
    pub exports: Vec<Export>,
    /// GPU processors with code in the file (`gfx1010`), sorted and unique; empty when none.
    pub gpu_targets: Vec<String>,
    /// Every offload-bundle entry found (host entries included).
    pub offload: Vec<OffloadEntry>,
    /// For a universal (fat) Mach-O: every slice's arch. The other fields describe the first
    /// slice (the dependency lists of the slices are the same in practice).
    pub universal_arches: Vec<String>,
}

/// One imported symbol.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Import {
    /// PE: the DLL; Mach-O: the dylib of its library ordinal; ELF: the `vn_file` of its symbol
    /// version when it has one (`libc.so.6` for `GLIBC_2.34`), else `None` (ELF binds globally).
    pub library: Option<String>,
    /// Mangled (raw) name; `None` for a PE import by ordinal.
    pub name: Option<String>,
    /// PE import by ordinal (`NONAME` exports).
    pub ordinal: Option<u32>,
    /// ELF symbol version (`GLIBC_2.34`, `CXXABI_1.3.9`).
    pub version: Option<String>,
    /// Demangled C++ name when `name` is a mangled one.
    pub demangled: Option<String>,
    /// ELF STB_WEAK / Mach-O weak import: a missing provider is not an error.
    pub weak: bool,
    /// PE: from a delay-loaded DLL (fails at first call rather than at load).
    pub delayed: bool,
}

/// One exported symbol.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Export {
    /// Raw name; empty for a PE export by ordinal only (`NONAME`).
    pub name: String,
    pub demangled: Option<String>,
    /// ELF symbol version (the `verdef` name), e.g. `LIBB_1.0`.
    pub version: Option<String>,
    /// PE: the export ordinal (biased), so imports by ordinal can be matched.
    pub ordinal: Option<u32>,
    /// PE forwarder (`NTDLL.RtlAllocateHeap`).
    pub forwarder: Option<String>,
}

impl Import {
    /// The name to show a person: demangled if C++, else raw, else `#ordinal`.
    pub fn display_name(&self) -> String {
        match (&self.demangled, &self.name, self.ordinal) {
            (Some(d), _, _) => d.clone(),
            (None, Some(n), _) => n.clone(),
            (None, None, Some(o)) => format!("#{o}"),
            (None, None, None) => "?".into(),
        }
    }
}

/// One error enum for the crate; messages are lowercase and name the file.
#[derive(Debug, Error)]
pub enum NativeError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a readable {format} file: {reason}")]
    Malformed {
        path: String,
        format: String,
        reason: String,
    },
    #[error("{path} is not an ELF, PE or Mach-O file (starts with {magic})")]
    Unrecognized { path: String, magic: String },
    #[error("{path} is {size} bytes, more than the {limit}-byte limit for native binaries")]
    TooLarge { path: String, size: u64, limit: u64 },
    #[error("{path} has a malformed offload bundle: {reason}")]
    Offload { path: String, reason: String },
    #[error("cannot set the RUNPATH of {path}: {reason}")]
    Edit { path: String, reason: String },
    #[error("cannot add rpaths to {path}: {reason}")]
    MachOEdit { path: String, reason: String },
    #[error("cannot resolve the dependencies of {path}: {reason}")]
    Closure { path: String, reason: String },
}

impl NativeError {
    /// Replace the placeholder path (`<bytes>`) of errors from the byte-level parsers.
    pub(crate) fn at(self, p: &std::path::Path) -> Self {
        let shown = p.display().to_string();
        match self {
            NativeError::Malformed { format, reason, .. } => NativeError::Malformed {
                path: shown,
                format,
                reason,
            },
            NativeError::Unrecognized { magic, .. } => {
                NativeError::Unrecognized { path: shown, magic }
            }
            NativeError::TooLarge { size, limit, .. } => NativeError::TooLarge {
                path: shown,
                size,
                limit,
            },
            NativeError::Offload { reason, .. } => NativeError::Offload {
                path: shown,
                reason,
            },
            other => other,
        }
    }
}

/// Is `name` a symbol of the Python C API, which the interpreter (the program or libpython)
/// exports to every extension module? ELF and PE spell it `Py_…`/`_Py_…`; Mach-O adds its
/// leading underscore (`_PyLong_FromLong`, `__Py_NoneStruct`, `__Py_Dealloc`).
pub fn is_python_c_api(name: &str) -> bool {
    let bare = name
        .strip_prefix("__")
        .or_else(|| name.strip_prefix('_'))
        .unwrap_or(name);
    bare.starts_with("Py") || bare.starts_with("_Py")
}

/// Placeholder path for errors of parsers that get bytes, not a file.
pub(crate) const BYTES: &str = "<bytes>";
