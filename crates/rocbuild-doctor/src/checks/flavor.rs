//! Wrong flavor: a CUDA build of an extension next to a ROCm or CPU torch (or the reverse).
//! The prebuilt Linux wheels of TorchCodec are CUDA builds (NEEDED `libtorch_cuda.so`,
//! `libcudart.so.13`); on a ROCm torch they fail with `libnppicc.so.13: cannot open shared
//! object file`, which says nothing about the cause.

use std::path::PathBuf;

use rocbuild_probe::{Flavor, Torch};

use crate::finding::{Check, Finding, Severity};
use crate::package::Subject;

/// The GPU stack a library name belongs to, if any.
pub fn stack_of(library: &str) -> Option<Flavor> {
    let lower = library.to_ascii_lowercase();
    let base = lower.strip_prefix("lib").unwrap_or(&lower);
    let stem = base.split('.').next().unwrap_or(base);
    const CUDA: &[&str] = &[
        "torch_cuda",
        "c10_cuda",
        "caffe2_nvrtc",
        "cudart",
        "nvrtc",
        "npp",
        "cublas",
        "cudnn",
        "cufft",
        "curand",
        "cusolver",
        "cusparse",
        "nvjpeg",
        "nvcuvid",
        "nvjitlink",
        "nvtoolsext",
    ];
    const ROCM: &[&str] = &[
        "torch_hip",
        "c10_hip",
        "amdhip64",
        "hsa-runtime64",
        "rocblas",
        "hipblas",
        "miopen",
        "hiprand",
        "rocrand",
        "hipfft",
        "rocfft",
        "rccl",
        "hipsparse",
        "rocsparse",
        "rocsolver",
        "hipsolver",
        "amd_comgr",
    ];
    if stem == "cuda" || stem == "nvcuda" || CUDA.iter().any(|p| stem.starts_with(p)) {
        Some(Flavor::Cuda)
    } else if ROCM.iter().any(|p| stem.starts_with(p)) {
        Some(Flavor::Rocm)
    } else {
        None
    }
}

fn stack_name(f: Flavor) -> &'static str {
    match f {
        Flavor::Cuda => "CUDA",
        Flavor::Rocm => "ROCm/HIP",
        Flavor::Cpu => "CPU-only",
    }
}

/// `libs`: each native library of the subject with its direct NEEDED names.
pub fn check(subject: &Subject, torch: &Torch, libs: &[(PathBuf, Vec<String>)]) -> Vec<Finding> {
    // torch is the reference; a package that does not link torch (CTranslate2) may use any
    // GPU stack (two HIP runtimes in one process are the GPU check's business).
    if subject.name == "torch" || !subject.torch {
        return Vec::new();
    }
    let mut out = Vec::new();
    for wrong in [Flavor::Cuda, Flavor::Rocm] {
        if wrong == torch.flavor {
            continue;
        }
        let mut offenders = Vec::new();
        for (path, needed) in libs {
            let bad: Vec<&str> = needed
                .iter()
                .filter(|n| stack_of(n) == Some(wrong))
                .map(String::as_str)
                .collect();
            if !bad.is_empty() {
                let file = path.file_name().unwrap_or_default().to_string_lossy();
                offenders.push(format!("{file} needs {}", bad.join(", ")));
            }
        }
        if offenders.is_empty() {
            continue;
        }
        out.push(
            Finding::new(
                Severity::Error,
                Check::Flavor,
                &subject.name,
                format!(
                    "{} is a {} build, but torch {} is a {} build",
                    subject.name,
                    stack_name(wrong),
                    torch.version,
                    stack_name(torch.flavor)
                ),
            )
            .details(offenders)
            .why(format!(
                "its libraries link the {} runtime, which this torch neither ships nor loads; the loader \
                 stops at the first of them it cannot find",
                stack_name(wrong)
            ))
            .fix(format!("{} (builds it against this torch)", subject.rebuild_hint())),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_each_stack() {
        for n in [
            "libtorch_cuda.so",
            "libcudart.so.13",
            "libnppicc.so.13",
            "cudart64_13.dll",
            "libcuda.so.1",
            "nvcuda.dll",
        ] {
            assert_eq!(stack_of(n), Some(Flavor::Cuda), "{n}");
        }
        for n in [
            "libamdhip64.so.6",
            "amdhip64_6.dll",
            "libtorch_hip.so",
            "librocblas.so.4",
            "libhsa-runtime64.so.1",
        ] {
            assert_eq!(stack_of(n), Some(Flavor::Rocm), "{n}");
        }
        for n in [
            "libc10.so",
            "libtorch_cpu.so",
            "libavutil.so.57",
            "libcuda_helpers_are_not_me.so",
        ] {
            assert_ne!(stack_of(n), Some(Flavor::Rocm), "{n}");
        }
        assert_eq!(stack_of("libc10.so"), None);
    }
}
