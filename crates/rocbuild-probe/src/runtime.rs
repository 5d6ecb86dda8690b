//! The HIP runtime that will really run the built code, which is not always the SDK's.
//!
//! On Windows the GPU driver installs `amdhip64_N.dll` into System32; on Linux a ROCm torch
//! ships its own `libamdhip64.so`. Whichever loads first in a process wins (faster-whisper 1370:
//! `libamdhip64.so.7: undefined symbol: hsa_amd_…`), so the SDK must match its major. The
//! major is in the file name on Windows and in the SONAME on Linux (read from the ELF, not
//! from a symlink's name).
//!
//! Names an OS: finding the HIP runtime. On Windows the GPU driver installs it (System32,
//! amdhip64_N.dll); on Linux it comes with the SDK or torch (libamdhip64.so.N); macOS has none.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::probe_env::ProbeEnv;
use crate::Os;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HipRuntime {
    pub path: PathBuf,
    /// The ROCm major of the runtime (`amdhip64_6.dll` -> 6, `libamdhip64.so.7` -> 7).
    pub major: u32,
    /// "the GPU driver (System32)", "torch/lib", "TheRock _rocm_sdk_core in the venv", "system library".
    pub found_by: String,
    /// Other runtimes beside it (a driver may ship both amdhip64_6.dll and amdhip64_7.dll:
    /// a binary imports one by name, so either major runs).
    #[serde(default)]
    pub also_present: Vec<RuntimeFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeFile {
    pub path: PathBuf,
    pub major: u32,
}

impl HipRuntime {
    /// Every ROCm major this runtime location can serve.
    pub fn majors(&self) -> Vec<u32> {
        let mut v = vec![self.major];
        v.extend(self.also_present.iter().map(|f| f.major));
        v
    }
}

/// The major in a HIP runtime file name: `amdhip64_6.dll` -> 6, `amdhip64.dll` -> 5 (ROCm 5
/// had no major in the name), `libamdhip64.so.7.2.0` -> 7.
pub fn runtime_major_from_name(name: &str, os: Os) -> Option<u32> {
    if os == Os::Windows {
        let lower = name.to_ascii_lowercase();
        let stem = lower.strip_prefix("amdhip64")?.strip_suffix(".dll")?;
        if stem.is_empty() {
            return Some(5);
        }
        return stem.strip_prefix('_')?.parse().ok();
    }
    let rest = name.strip_prefix("libamdhip64.so.")?;
    rest.split('.').next()?.parse().ok()
}

/// The major of a Linux runtime file: its SONAME (`libamdhip64.so.6`) when it is a readable
/// ELF, else its name. torch wheels carry an unversioned `libamdhip64.so`.
fn linux_major(path: &Path) -> Option<u32> {
    let soname = rocbuild_native::read_elf(path).ok().and_then(|i| i.soname);
    soname
        .as_deref()
        .and_then(|s| runtime_major_from_name(s, Os::Linux))
        .or_else(|| runtime_major_from_name(&path.file_name()?.to_string_lossy(), Os::Linux))
}

/// All HIP runtimes in `dir`, highest major first.
fn runtimes_in(dir: &Path, os: Os) -> Vec<RuntimeFile> {
    let mut v: Vec<RuntimeFile> = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let major = match os {
            Os::Windows => runtime_major_from_name(&name, os),
            _ if name.starts_with("libamdhip64.so") => linux_major(&path),
            _ => None,
        };
        if let Some(major) = major {
            // Keep one file per major (libamdhip64.so, .so.6, .so.6.2.41134 are one library).
            if !v.iter().any(|f| f.major == major) {
                v.push(RuntimeFile { path, major });
            } else if let Some(f) = v.iter_mut().find(|f| f.major == major) {
                if name.len() < f.path.file_name().map(|n| n.len()).unwrap_or(usize::MAX) {
                    f.path = path;
                }
            }
        }
    }
    v.sort_by_key(|f| std::cmp::Reverse(f.major));
    v
}

/// The ROCm majors of the HIP runtimes the GPU driver installed (Windows: `amdhip64_N.dll` in
/// System32), highest first; `None` on other systems, where the runtime comes with the SDK or
/// with torch rather than with the kernel driver.
pub fn driver_runtime_majors(env: &ProbeEnv, os: Os) -> Option<Vec<u32>> {
    (os == Os::Windows).then(|| {
        runtimes_in(&env.system32, os)
            .into_iter()
            .map(|f| f.major)
            .collect()
    })
}

/// The HIP runtime a process will load, first match wins: torch's own copy (it loads before
/// anything rocbuild builds), TheRock's runtime in the venv, then the driver's (Windows,
/// System32) or the system's (Linux: `/opt/rocm/lib`, `/usr/lib/<triplet>`).
pub fn find_hip_runtime(
    env: &ProbeEnv,
    os: Os,
    torch_lib: Option<&Path>,
    venv_site: Option<&Path>,
) -> Option<HipRuntime> {
    if os == Os::Macos {
        return None;
    }
    let mut places: Vec<(PathBuf, &str)> = Vec::new();
    if let Some(t) = torch_lib {
        places.push((
            t.to_path_buf(),
            "torch/lib (torch's own runtime, loaded first)",
        ));
    }
    if let Some(site) = venv_site {
        let sub = os.rules().shared_lib_dir();
        places.push((
            site.join("_rocm_sdk_core").join(sub),
            "TheRock _rocm_sdk_core in the venv",
        ));
    }
    match os {
        Os::Windows => places.push((env.system32.clone(), "the GPU driver (System32)")),
        _ => {
            places.push((env.unix("/opt/rocm/lib"), "system library (/opt/rocm)"));
            let usr_lib = env.unix("/usr/lib");
            let mut triplets: Vec<PathBuf> = std::fs::read_dir(&usr_lib)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().contains("-linux-gnu"))
                })
                .collect();
            triplets.sort();
            for t in triplets {
                places.push((t, "system library"));
            }
            places.push((env.unix("/usr/lib64"), "system library"));
        }
    }
    places.into_iter().find_map(|(dir, found_by)| {
        let mut files = runtimes_in(&dir, os);
        if files.is_empty() {
            return None;
        }
        let primary = files.remove(0);
        Some(HipRuntime {
            path: primary.path,
            major: primary.major,
            found_by: found_by.to_string(),
            also_present: files,
        })
    })
}
