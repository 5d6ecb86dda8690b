//! HIP compatibility definitions rocbuild owns (`[build] hip-compat` in a recipe): what a
//! release's HIP code needs from a newer HIP than the SDK's, defined in one header that
//! rocbuild writes into its cache and force-includes (`-include`) into every HIP source.
//! Each definition states from which HIP major on the SDK has it; on such an SDK it is left
//! out, and with nothing left no header is used.

use std::path::PathBuf;

use serde::Serialize;

use crate::paths::{hash_hex, join};
use rocbuild_probe::Os;

/// The header to write and force-include.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HipCompatPlan {
    /// The definitions it holds (`syncwarp`).
    pub names: Vec<String>,
    /// Why each is needed ("HIP 6.4 declares no __syncwarp (HIP 7 does)").
    pub reasons: Vec<String>,
    pub path: PathBuf,
    pub contents: String,
}

/// (name, the first HIP major that has it, why, definition).
const SHIMS: &[(&str, u32, &str, &str)] = &[(
    "syncwarp",
    7,
    "__syncwarp",
    // A warp (wavefront) barrier between release and acquire fences at workgroup scope:
    // every lane's earlier writes are visible to the lanes that pass the barrier. The mask is
    // accepted for source compatibility; the whole wavefront synchronizes, which is what a
    // full mask asks and a superset of any other.
    r#"#if defined(__HIPCC__) || defined(__HIP__)
#include <hip/hip_runtime.h>
#ifndef ROCBUILD_HIP_COMPAT_SYNCWARP
#define ROCBUILD_HIP_COMPAT_SYNCWARP 1
__device__ static inline void __syncwarp(unsigned long long mask = ~0ull) {
  (void)mask;
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
#endif
#endif
"#,
)];

/// The compatibility header for `names` on an SDK whose HIP is `hip_version` (or ROCm
/// `rocm_version` when HIP's own is unknown); None when the SDK has everything.
pub fn plan(
    names: &[String],
    hip_version: Option<&str>,
    rocm_version: Option<&str>,
    cache: &std::path::Path,
    os: Os,
) -> Option<HipCompatPlan> {
    let shown = hip_version.or(rocm_version).unwrap_or("(unknown version)");
    let major = hip_version
        .or(rocm_version)
        .and_then(|v| rocbuild_probe::version_key(v).first().copied());
    let mut chosen = Vec::new();
    let mut reasons = Vec::new();
    let mut body = String::from(
        "// Written by rocbuild: definitions this HIP SDK lacks, force-included into every HIP source.\n#pragma once\n",
    );
    for (name, since, what, def) in SHIMS {
        if !names.iter().any(|n| n == name) {
            continue;
        }
        // Only when the major is known to lack it: a HIP that declares it would clash.
        if major.is_none_or(|m| m >= *since) {
            continue;
        }
        chosen.push(name.to_string());
        reasons.push(format!(
            "HIP {shown} declares no {what} (HIP {since} does): rocbuild's definition is force-included"
        ));
        body.push_str(&format!("// {name}\n{def}"));
    }
    if chosen.is_empty() {
        return None;
    }
    let dir = join(
        os,
        cache,
        &["hip-compat", &hash_hex(&[body.as_str()])[..16]],
    );
    Some(HipCompatPlan {
        names: chosen,
        reasons,
        path: join(os, &dir, &["rocbuild-hip-compat.h"]),
        contents: body,
    })
}

/// The flag that force-includes the header (quoted when the path has a space: CMake splits
/// CMAKE_HIP_FLAGS at spaces).
pub fn include_flag(p: &HipCompatPlan) -> String {
    let s = p.path.display().to_string().replace('\\', "/");
    if s.contains(' ') {
        format!("-include \"{s}\"")
    } else {
        format!("-include {s}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn names() -> Vec<String> {
        vec!["syncwarp".to_string()]
    }

    #[test]
    fn hip_6_gets_syncwarp_hip_7_does_not() {
        let p = plan(
            &names(),
            Some("6.4.43484"),
            Some("6.4.3"),
            Path::new("/c"),
            Os::Linux,
        )
        .unwrap();
        assert_eq!(p.names, ["syncwarp"]);
        assert!(p.contents.contains("__syncwarp"));
        assert!(p.contents.contains("__builtin_amdgcn_wave_barrier"));
        assert!(p.contents.contains("__ATOMIC_RELEASE") && p.contents.contains("__ATOMIC_ACQUIRE"));
        assert!(p.path.starts_with("/c/hip-compat"));
        assert!(p.reasons[0].contains("HIP 6.4.43484 declares no __syncwarp"));
        // With `/` on every host (a Windows host's Path::join writes `\\`): CMake reads the flag.
        assert_eq!(
            include_flag(&p),
            format!("-include {}", p.path.display()).replace('\\', "/")
        );
        assert_eq!(
            plan(
                &names(),
                Some("7.2.26015"),
                Some("7.2.4"),
                Path::new("/c"),
                Os::Linux
            ),
            None
        );
        assert_eq!(
            plan(&[], Some("6.4.1"), None, Path::new("/c"), Os::Linux),
            None
        );
        // HIP's own version unknown: the ROCm version decides.
        assert!(plan(&names(), None, Some("6.2.4"), Path::new("/c"), Os::Linux).is_some());
    }
}
