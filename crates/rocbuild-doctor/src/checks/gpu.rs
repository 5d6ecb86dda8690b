//! GPU: a gfx target missing from a binary shows up only at the first kernel launch
//! (`hipErrorInvalidDeviceFunction`); two HIP runtimes in one process crash
//! (`libamdhip64.so.7: undefined symbol: hsa_amd_…`); a missing amd_comgr makes HIP report
//! "no ROCm-capable device". rocBLAS without Tensile kernels for the GPU aborts at the first
//! GEMM; on Windows, a binary built for another ROCm major than the driver's HIP runtime sees no
//! GPU. All of these can be read from the files before anything runs.

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

#[derive(Default)]
pub struct GpuFacts<'a> {
    /// Each native library with GPU code, with its gfx targets.
    pub binaries: &'a [(PathBuf, Vec<String>)],
    /// The GPU's architectures (`--gpu-arch`, `$PYTORCH_ROCM_ARCH`), when known.
    pub gpu: Option<&'a [String]>,
    /// Every HIP runtime the closure resolves to.
    pub hip_runtimes: &'a [PathBuf],
    /// amd_comgr was found (in the closure, or beside a HIP runtime).
    pub comgr: bool,
    /// Every rocBLAS the closure resolves to, with its Tensile kernel directory and the gfx
    /// targets it holds kernels for (`None`: the directory does not exist).
    pub rocblas: &'a [RocblasFacts],
    /// HIP runtime names the package's binaries need, with their ROCm major
    /// (`amdhip64_7.dll` -> 7).
    pub needed_runtimes: &'a [(String, u32)],
    /// Windows: the majors of the driver's HIP runtimes in System32 (empty: no AMD driver).
    /// `None` elsewhere.
    pub driver_majors: Option<&'a [u32]>,
    /// What the venv's ROCm (TheRock's packages) has no kernels for, for the GPU asked about:
    /// one sentence each, ending with the fix.
    pub kernel_gaps: &'a [String],
}

#[derive(Debug, Clone)]
pub struct RocblasFacts {
    pub library: PathBuf,
    pub tensile_dir: PathBuf,
    pub tensile_archs: Option<Vec<String>>,
}

/// Is this file name rocBLAS (`librocblas.so.4`, `rocblas.dll`, `librocblas.so`)?
pub fn is_rocblas(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.starts_with("librocblas.so")
        || l == "rocblas.dll"
        || l.starts_with("librocblas.") && l.ends_with(".dylib")
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
    out.extend(rocblas(subject, f));
    out.extend(kernel_gaps(subject, f));
    out.extend(driver(subject, f));
    out
}

/// Kernels the venv's ROCm packages lack for this GPU: the first GEMM or convolution fails
/// ("no kernels for this GPU"), whatever the package itself was built for.
fn kernel_gaps(subject: &Subject, f: &GpuFacts) -> Vec<Finding> {
    f.kernel_gaps
        .iter()
        .map(|gap| {
            let (what, fix) = gap.split_once(": ").unwrap_or((gap.as_str(), ""));
            Finding::new(Severity::Error, Check::Gpu, &subject.name, what.to_string())
                .why("the math libraries load a GPU's kernels at run time from these files; without them the first BLAS call or convolution on this GPU fails")
                .fix(fix.to_string())
        })
        .collect()
}

/// rocBLAS reads its GEMM kernels (Tensile) from `rocblas/library` at the first BLAS call; a GPU
/// without kernels there aborts the process. Community builds add kernels for gfx1010 & co.
fn rocblas(subject: &Subject, f: &GpuFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    let wanted: Vec<&str> = f
        .gpu
        .unwrap_or_default()
        .iter()
        .map(|g| processor(g))
        .collect();
    for r in f.rocblas {
        let Some(archs) = &r.tensile_archs else {
            out.push(
                Finding::new(
                    Severity::Error,
                    Check::Gpu,
                    &subject.name,
                    "rocBLAS has no Tensile kernel directory",
                )
                .details([
                    format!("library: {}", r.library.display()),
                    format!("missing: {}", r.tensile_dir.display()),
                ])
                .why("rocBLAS loads its GEMM kernels from there at the first BLAS call and aborts with \"rocBLAS error: Cannot read …TensileLibrary.dat\"")
                .fix("reinstall rocBLAS with its kernel files (the SDK's rocblas/library directory)"),
            );
            continue;
        };
        let missing: Vec<&str> = wanted
            .iter()
            .copied()
            .filter(|w| !archs.iter().any(|a| a == w))
            .collect();
        if missing.is_empty() {
            continue;
        }
        out.push(
            Finding::new(
                Severity::Error,
                Check::Gpu,
                &subject.name,
                format!("rocBLAS has no Tensile kernels for {}", missing.join(", ")),
            )
            .details([
                format!("library: {}", r.library.display()),
                format!(
                    "{} has kernels for {}",
                    r.tensile_dir.display(),
                    if archs.is_empty() { "no GPU".to_string() } else { archs.join(", ") }
                ),
            ])
            .why(format!(
                "rocBLAS aborts at the first GEMM on this GPU: \"rocBLAS error: Cannot read …TensileLibrary.dat … for GPU arch : {}\"",
                missing[0]
            ))
            .fix(format!(
                "put rocBLAS kernels built for {} into {} (community builds exist for the archs AMD dropped, e.g. gfx1010 on HIP SDK 6.2), or use an SDK whose rocBLAS has them",
                missing.join(", "),
                r.tensile_dir.display()
            )),
        );
    }
    out
}

/// Windows: the HIP runtime comes with the GPU driver (System32). A binary that imports another
/// major's runtime loads it from an SDK's bin, and that runtime finds no device through this
/// driver.
fn driver(subject: &Subject, f: &GpuFacts) -> Vec<Finding> {
    let Some(driver) = f.driver_majors else {
        return Vec::new();
    };
    let mut needed: Vec<&(String, u32)> = f.needed_runtimes.iter().collect();
    needed.sort_by_key(|(_, m)| *m);
    needed.dedup_by_key(|(_, m)| *m);
    if needed.is_empty() {
        return Vec::new();
    }
    let have = |m: u32| driver.contains(&m);
    if driver.is_empty() {
        return vec![Finding::new(
            Severity::Error,
            Check::Gpu,
            &subject.name,
            "no AMD GPU driver HIP runtime in System32",
        )
        .details(needed.iter().map(|(n, _)| format!("needs {n}")))
        .why("on Windows the HIP runtime the process really uses is the one the AMD Adrenalin driver installs; without it HIP sees no device")
        .fix("install the AMD GPU driver (Adrenalin) for this GPU")];
    }
    let newest = driver.iter().copied().max().unwrap_or_default();
    needed
        .into_iter()
        .filter(|(_, m)| !have(*m))
        .map(|(name, m)| {
            Finding::new(
                Severity::Error,
                Check::Gpu,
                &subject.name,
                format!(
                    "built for the ROCm {m} HIP runtime ({name}), but the GPU driver provides ROCm {}",
                    driver.iter().map(u32::to_string).collect::<Vec<_>>().join(" and ")
                ),
            )
            .why(format!(
                "{name} is not the driver's: it would come from an SDK's bin, and a HIP runtime of another major than the driver's finds no GPU (\"no ROCm-capable device is detected\")"
            ))
            .fix(match &subject.recipe {
                Some(r) => format!(
                    "rebuild against a HIP SDK {newest}.x: run `rocbuild {r} --rocm {newest}` (or update the GPU driver to one that ships {name})"
                ),
                None => format!(
                    "rebuild {} against a HIP SDK {newest}.x (or update the GPU driver to one that ships {name})",
                    subject.name
                ),
            })
        })
        .collect()
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
                ..Default::default()
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
                ..Default::default()
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
                comgr: true,
                ..Default::default()
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
                ..Default::default()
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
                ..Default::default()
            },
        );
        assert!(f.is_empty(), "{f:?}");
    }

    fn rocblas_at(dir: &Path, archs: Option<&[&str]>) -> RocblasFacts {
        RocblasFacts {
            library: dir.join("librocblas.so.4"),
            tensile_dir: dir.join("rocblas/library"),
            tensile_archs: archs.map(|a| a.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it examines a Linux ROCm under /opt, whose paths a Windows host joins with `\\`"
    )]
    fn rocblas_without_kernels_for_the_gpu() {
        let lib = Path::new("/opt/rocm-6.2/lib");
        let gpu = ["gfx1010:xnack-".to_string()];
        let rb = [rocblas_at(lib, Some(&["gfx1030", "gfx1100"]))];
        let f = check(
            &subject(),
            &GpuFacts {
                gpu: Some(&gpu),
                rocblas: &rb,
                ..Default::default()
            },
        );
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].what, "rocBLAS has no Tensile kernels for gfx1010");
        assert_eq!(
            f[0].details[1],
            "/opt/rocm-6.2/lib/rocblas/library has kernels for gfx1030, gfx1100"
        );
        assert!(f[0].why.contains("GPU arch : gfx1010"));
        // With the kernels: nothing to say. Unknown GPU: nothing to compare.
        let rb = [rocblas_at(lib, Some(&["gfx1010", "gfx1030"]))];
        let facts = GpuFacts {
            gpu: Some(&gpu),
            rocblas: &rb,
            ..Default::default()
        };
        assert!(check(&subject(), &facts).is_empty());
        let rb = [rocblas_at(lib, Some(&["gfx1030"]))];
        assert!(check(
            &subject(),
            &GpuFacts {
                rocblas: &rb,
                ..Default::default()
            }
        )
        .is_empty());
        // No kernel directory at all: an error whatever the GPU.
        let rb = [rocblas_at(lib, None)];
        let f = check(
            &subject(),
            &GpuFacts {
                rocblas: &rb,
                ..Default::default()
            },
        );
        assert_eq!(f[0].what, "rocBLAS has no Tensile kernel directory");
    }

    #[test]
    fn windows_driver_runtime_against_the_sdk_the_binary_was_built_with() {
        // The real case: the driver ships amdhip64_6.dll, the build used HIP SDK 7.1.
        let needed = [("amdhip64_7.dll".to_string(), 7)];
        let f = check(
            &subject(),
            &GpuFacts {
                needed_runtimes: &needed,
                driver_majors: Some(&[6]),
                ..Default::default()
            },
        );
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].what,
            "built for the ROCm 7 HIP runtime (amdhip64_7.dll), but the GPU driver provides ROCm 6"
        );
        assert!(
            f[0].fix.contains("`rocbuild ctranslate2 --rocm 6`"),
            "{f:?}"
        );
        // A driver that ships both majors runs either.
        let facts = GpuFacts {
            needed_runtimes: &needed,
            driver_majors: Some(&[7, 6]),
            ..Default::default()
        };
        assert!(check(&subject(), &facts).is_empty());
        // No AMD driver at all.
        let f = check(
            &subject(),
            &GpuFacts {
                needed_runtimes: &needed,
                driver_majors: Some(&[]),
                ..Default::default()
            },
        );
        assert_eq!(f[0].what, "no AMD GPU driver HIP runtime in System32");
        // Linux and macOS: the runtime is not the driver's; nothing to compare.
        let facts = GpuFacts {
            needed_runtimes: &needed,
            driver_majors: None,
            ..Default::default()
        };
        assert!(check(&subject(), &facts).is_empty());
    }
}
