//! CUDA: a library without code for the GPU fails at the first launch ("no kernel image is
//! available for execution on the device"); one read from its `.nv_fatbin` says which SASS and
//! PTX it holds. A cubin runs on its own major at the same or a later minor (sm_80 on 8.6), PTX
//! is compiled by the driver for its arch and any later one. Without an NVIDIA driver nothing
//! runs at all: said plainly, not as a broken build.

use std::path::{Path, PathBuf};

use rocbuild_native::{NvCode, NvCodeKind};

use crate::finding::{Check, Finding, Severity};
use crate::package::Subject;

pub struct CudaFacts<'a> {
    /// Each native library with NVIDIA GPU code, with what it holds.
    pub binaries: &'a [(PathBuf, Vec<NvCode>)],
    /// The GPUs' compute capabilities (`8.6`), when found.
    pub gpus: &'a [String],
    /// How they were found, or why none were (`nvidia-smi not found`).
    pub found_by: String,
}

/// `8.6` (or `8.6+PTX`, as `$TORCH_CUDA_ARCH_LIST` has it) -> 86.
fn cc(s: &str) -> Option<u32> {
    let (a, b) = s.trim_end_matches("+PTX").split_once('.')?;
    Some(a.parse::<u32>().ok()? * 10 + b.parse::<u32>().ok()?)
}

/// Whether code `c` runs on compute capability `gpu`.
fn runs_on(c: &NvCode, gpu: u32) -> bool {
    match c.kind {
        NvCodeKind::Sass => c.arch / 10 == gpu / 10 && c.arch <= gpu,
        NvCodeKind::Ptx => c.arch <= gpu,
    }
}

/// `sm_75, sm_86, sm_120, compute_120`: SASS then PTX, each by arch.
fn listed(codes: &[NvCode]) -> String {
    let mut sorted = codes.to_vec();
    sorted.sort();
    sorted.dedup();
    sorted
        .iter()
        .map(NvCode::name)
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn check(subject: &Subject, f: &CudaFacts) -> Vec<Finding> {
    let with_code: Vec<&(PathBuf, Vec<NvCode>)> =
        f.binaries.iter().filter(|(_, c)| !c.is_empty()).collect();
    if with_code.is_empty() {
        return Vec::new();
    }
    let name = |p: &Path| {
        p.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    };
    let details: Vec<String> = with_code
        .iter()
        .map(|(p, c)| format!("{}: {}", name(p), listed(c)))
        .collect();
    if f.gpus.is_empty() {
        return vec![Finding::new(
            Severity::Note,
            Check::Gpu,
            &subject.name,
            format!(
                "no NVIDIA driver here ({}): {}'s CUDA code ({}) cannot run on this machine",
                f.found_by,
                subject.name,
                details.join("; ")
            ),
        )
        .details(details)
        .why("this is not a broken build: the CUDA runtime reports no device (cudaErrorInsufficientDriver) where no NVIDIA driver is installed")
        .fix("on a machine with an NVIDIA GPU, install its driver; to compare the code with a GPU's compute capability here, set TORCH_CUDA_ARCH_LIST=X.Y")];
    }
    let mut lacking = Vec::new();
    let mut wanted = Vec::new();
    for g in f.gpus {
        let Some(n) = cc(g) else { continue };
        for (p, codes) in &with_code {
            if !codes.iter().any(|c| runs_on(c, n)) {
                lacking.push(format!(
                    "{} has {}; nothing that runs on {g} (sm_{n})",
                    name(p),
                    listed(codes)
                ));
                if !wanted.contains(g) {
                    wanted.push(g.clone());
                }
            }
        }
    }
    if lacking.is_empty() {
        return Vec::new();
    }
    let sm: Vec<String> = wanted
        .iter()
        .filter_map(|g| cc(g))
        .map(|n| format!("sm_{n}"))
        .collect();
    vec![Finding::new(
        Severity::Error,
        Check::Gpu,
        &subject.name,
        format!("{} has no code for {}", subject.name, sm.join(", ")),
    )
    .details(lacking)
    .why(format!(
        "CUDA finds no kernel image for this GPU ({}) and fails at the first launch (no kernel image is available for execution on the device)",
        f.found_by
    ))
    .fix(format!(
        "{} with --cuda-arch {}",
        subject.rebuild_hint(),
        wanted.join(";")
    ))]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sass(a: u32) -> NvCode {
        NvCode {
            kind: NvCodeKind::Sass,
            arch: a,
        }
    }

    fn subject() -> Subject {
        Subject::known()[2].clone()
    }

    #[test]
    fn code_is_compared_with_the_gpu_and_no_driver_is_said_plainly() {
        let bins = vec![(
            PathBuf::from("libctranslate2.so.4"),
            vec![
                sass(80),
                sass(90),
                NvCode {
                    kind: NvCodeKind::Ptx,
                    arch: 90,
                },
            ],
        )];
        let gpus = |g: &[&str]| g.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // 8.6 runs sm_80's cubin, 12.0 the compute_90 PTX: nothing to say.
        let f = CudaFacts {
            binaries: &bins,
            gpus: &gpus(&["8.6", "12.0"]),
            found_by: "nvidia-smi".into(),
        };
        assert!(check(&subject(), &f).is_empty());
        // 7.5 (older than any code): no kernel image.
        let f = CudaFacts {
            binaries: &bins,
            gpus: &gpus(&["7.5"]),
            found_by: "nvidia-smi".into(),
        };
        let out = check(&subject(), &f);
        assert_eq!(out[0].what, "ctranslate2 has no code for sm_75");
        assert!(
            out[0].fix.ends_with("with --cuda-arch 7.5"),
            "{}",
            out[0].fix
        );
        // Without PTX, the newest GPU finds nothing (sm_90 SASS does not run on 12.0).
        let no_ptx = vec![(PathBuf::from("lib.so"), vec![sass(86), sass(90)])];
        let f = CudaFacts {
            binaries: &no_ptx,
            gpus: &gpus(&["12.0"]),
            found_by: "nvidia-smi".into(),
        };
        assert_eq!(
            check(&subject(), &f)[0].what,
            "ctranslate2 has no code for sm_120"
        );
        // No driver: a note, not an error.
        let f = CudaFacts {
            binaries: &bins,
            gpus: &[],
            found_by: "nvidia-smi not found".into(),
        };
        let out = check(&subject(), &f);
        assert_eq!(out[0].severity, Severity::Note);
        assert!(
            out[0].what.starts_with("no NVIDIA driver here"),
            "{}",
            out[0].what
        );
    }
}
