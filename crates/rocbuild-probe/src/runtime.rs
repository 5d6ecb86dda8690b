//! The HIP runtime that will really run the built code, which is not always the SDK's.
//!
//! On Windows the GPU driver installs `amdhip64_N.dll` into System32; on Linux a ROCm torch
//! ships its own `libamdhip64.so`. Whichever loads first in a process wins (faster-whisper 1370:
//! `libamdhip64.so.7: undefined symbol: hsa_amd_…`), so the SDK must match its major.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HipRuntime {
    pub path: PathBuf,
    /// The ROCm major of the runtime (`amdhip64_6.dll` -> 6, `libamdhip64.so.7` -> 7).
    pub major: u32,
    /// "the driver (System32)", "torch/lib", "TheRock _rocm_sdk_core", "system library".
    pub found_by: String,
    /// Other runtimes seen (a driver may ship both amdhip64_6.dll and amdhip64_7.dll).
    #[serde(default)]
    pub also_present: Vec<PathBuf>,
}
