//! GPU: a gfx target missing from a binary shows up only at the first kernel launch
//! (`hipErrorInvalidDeviceFunction`); two HIP runtimes in one process crash
//! (`libamdhip64.so.7: undefined symbol: hsa_amd_…`); a missing amd_comgr makes HIP report
//! "no ROCm-capable device". All three can be read from the files before anything runs.

use std::path::{Path, PathBuf};

use crate::finding::{Check, Finding, Severity};
use crate::package::Subject;

/// `gfx1010:xnack-` -> `gfx1010`: the processor, without target features.
fn processor(target: &str) -> &str {
    target.split(':').next().unwrap_or(target)
}

/// Is this file name the HIP runtime (`libamdhip64.so.6`, `amdhip64_6.dll`, `amdhip64.dll`)?
pub fn is_hip_runtime(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.starts_with("libamdhip64.") || l.starts_with("amdhip64")
}

/// Is this file name amd_comgr (`libamd_comgr.so.2`, `amd_comgr0602.dll`)?
pub fn is_comgr(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.starts_with("libamd_comgr") || l.starts_with("amd_comgr")
}

pub struct GpuFacts<'a> {
    /// Each native library with GPU code, with its gfx targets.
    pub binaries: &'a [(PathBuf, Vec<String>)],
    /// The GPU's architectures (`--gpu-arch`, `$PYTORCH_ROCM_ARCH`), when known.
    pub gpu: Option<&'a [String]>,
    /// Every HIP runtime the closure resolves to.
    pub hip_runtimes: &'a [PathBuf],
    /// amd_comgr was found (in the closure, or beside a HIP runtime).
    pub comgr: bool,
}

pub fn check(subject: &Subject, f: &GpuFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    let name = |p: &Path| {
        p.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    };
    match f.gpu {
        Some(gpu) if !gpu.is_empty() => {
            let wanted: Vec<&str> = gpu.iter().map(|g| processor(g)).collect();
            let mut lacking = Vec::new();
            for (path, targets) in f.binaries {
                if targets.is_empty() {
                    continue;
                }
                let has: Vec<&str> = targets.iter().map(|t| processor(t)).collect();
                let missing: Vec<&str> = wanted
                    .iter()
                    .copied()
                    .filter(|w| !has.contains(w))
                    .collect();
                if !missing.is_empty() {
                    lacking.push(format!(
                        "{} has code for {}; not for {}",
                        name(path),
                        targets.join(", "),
                        missing.join(", ")
                    ));
                }
            }
            if !lacking.is_empty() {
                out.push(
                    Finding::new(
                        Severity::Error,
                        Check::Gpu,
                        &subject.name,
                        format!("{} has no GPU code for {}", subject.name, wanted.join(", ")),
                    )
                    .details(lacking)
                    .why("HIP finds no kernel for this GPU and fails at the first launch (hipErrorInvalidDeviceFunction)")
                    .fix(format!("{} (builds for {})", subject.rebuild_hint(), wanted.join(";"))),
                );
            }
        }
        _ => {
            if f.binaries.iter().any(|(_, t)| !t.is_empty()) {
                let all: Vec<String> = f
                    .binaries
                    .iter()
                    .filter(|(_, t)| !t.is_empty())
                    .map(|(p, t)| format!("{}: {}", name(p), t.join(", ")))
                    .collect();
                out.push(
                    Finding::new(
                        Severity::Note,
                        Check::Gpu,
                        &subject.name,
                        "the GPU's architecture is unknown, so the GPU code could not be compared with it",
                    )
                    .details(all)
                    .fix("pass --gpu-arch gfxNNNN (or set PYTORCH_ROCM_ARCH)"),
                );
            }
        }
    }
    let mut roots: Vec<&Path> = f.hip_runtimes.iter().filter_map(|p| p.parent()).collect();
    roots.sort();
    roots.dedup();
    if roots.len() > 1 {
        out.push(
            Finding::new(
                Severity::Error,
                Check::Gpu,
                &subject.name,
                format!("two ROCm installations are loaded together ({} HIP runtimes)", roots.len()),
            )
            .details(f.hip_runtimes.iter().map(|p| p.display().to_string()))
            .why("one process can hold one HIP runtime: whichever loads first wins, and the other's libraries fail \
                  with undefined hsa_amd_* symbols or crash")
            .fix("make every library find the same ROCm: rebuild against one SDK, or remove the other from the search path"),
        );
    }
    if !f.hip_runtimes.is_empty() && !f.comgr {
        out.push(
            Finding::new(
                Severity::Warning,
                Check::Gpu,
                &subject.name,
                "amd_comgr is missing next to the HIP runtime",
            )
            .details(f.hip_runtimes.iter().map(|p| p.display().to_string()))
            .why("HIP loads amd_comgr to read code objects; without it, it reports \"no ROCm-capable device\"")
            .fix("install amd_comgr with the same ROCm (Debian: libamd-comgr2; TheRock wheels: rocm-sdk-core)"),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject() -> Subject {
        Subject::known()[2].clone()
    }

    #[test]
    fn arch_missing_from_the_binary() {
        let bins = [(
            PathBuf::from("/s/ctranslate2/libctranslate2.so.4"),
            vec!["gfx1030".to_string(), "gfx1100".into()],
        )];
        let gpu = ["gfx1010".to_string()];
        let f = check(
            &subject(),
            &GpuFacts {
                binaries: &bins,
                gpu: Some(&gpu),
                hip_runtimes: &[],
                comgr: false,
            },
        );
        assert_eq!(f[0].what, "ctranslate2 has no GPU code for gfx1010");
        assert_eq!(
            f[0].details,
            ["libctranslate2.so.4 has code for gfx1030, gfx1100; not for gfx1010"]
        );
        let gpu = ["gfx1030".to_string()];
        let f = check(
            &subject(),
            &GpuFacts {
                binaries: &bins,
                gpu: Some(&gpu),
                hip_runtimes: &[],
                comgr: false,
            },
        );
        assert!(f.is_empty(), "{f:?}");
        let bins = [(PathBuf::from("/s/x.so"), vec!["gfx1010:xnack-".to_string()])];
        let gpu = ["gfx1010".to_string()];
        assert!(check(
            &subject(),
            &GpuFacts {
                binaries: &bins,
                gpu: Some(&gpu),
                hip_runtimes: &[],
                comgr: true
            }
        )
        .is_empty());
    }

    #[test]
    fn two_rocm_roots_and_no_comgr() {
        let rt = [
            PathBuf::from("/opt/rocm-6.4/lib/libamdhip64.so.6"),
            PathBuf::from("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5"),
        ];
        let f = check(
            &subject(),
            &GpuFacts {
                binaries: &[],
                gpu: None,
                hip_runtimes: &rt,
                comgr: false,
            },
        );
        assert!(
            f.iter()
                .any(|f| f.what.starts_with("two ROCm installations")),
            "{f:?}"
        );
        assert!(
            f.iter().any(|f| f.what.starts_with("amd_comgr is missing")),
            "{f:?}"
        );
        let f = check(
            &subject(),
            &GpuFacts {
                binaries: &[],
                gpu: None,
                hip_runtimes: &rt[..1],
                comgr: true,
            },
        );
        assert!(f.is_empty(), "{f:?}");
    }
}
