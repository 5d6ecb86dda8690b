//! Native binaries: what an ELF file needs and where it looks, and rpath editing.
//!
//! Reading never panics on a malformed file: every problem is a [`NativeError`].

mod elf;
mod rpath;

pub use elf::{exports_cxx11_abi, read_elf, ElfInfo};
pub use rpath::set_runpath;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum NativeError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a readable ELF file: {reason}")]
    Malformed { path: String, reason: String },
    #[error("cannot set the RUNPATH of {path}: {reason}")]
    Edit { path: String, reason: String },
}
