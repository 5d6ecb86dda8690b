//! Missing dependencies, named: "(or one of its dependencies)" made specific.

use crate::checks::flavor::stack_of;
use crate::finding::{Breaks, Check, Finding, Severity};
use crate::linkage::Missing;
use crate::package::Subject;

/// The GPU driver's user-space library: present only where the GPU and its kernel driver are.
/// A CUDA torch on a machine without an NVIDIA GPU lacks it by design, and runs on CPU.
pub fn is_gpu_driver(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l == "libcuda.so.1"
        || l == "libcuda.so"
        || l == "nvcuda.dll"
        || l.starts_with("libnvidia-ml.so")
}

/// `lib`: the file name of the package's library; `missing`: what its closure lacks;
/// `searched`: a one-line description of where the loader looked; `format`: the files' format
/// (`ELF`, `Mach-O`, `PE`), for each library's own explanation (its rpaths).
pub fn check(
    subject: &Subject,
    lib: &str,
    missing: &[Missing],
    searched: &str,
    format: &str,
) -> Vec<Finding> {
    let (driver, missing): (Vec<&Missing>, Vec<&Missing>) =
        missing.iter().partition(|m| is_gpu_driver(&m.name));
    let mut out = Vec::new();
    if let Some(d) = driver.first() {
        out.push(
            Finding::new(
                Severity::Note,
                Check::Missing,
                &subject.name,
                format!("{lib} needs the GPU driver's {} and this machine has none: it loads only where that GPU is", d.name),
            )
            .why("the driver library comes with the GPU's kernel driver, not with any package"),
        );
    }
    if missing.is_empty() {
        return out;
    }
    let details = missing
        .iter()
        .map(|m| {
            let stack = match stack_of(&m.name) {
                Some(f) if f != rocbuild_probe::Flavor::Cpu => {
                    format!(", part of {}", f.as_str().to_uppercase())
                }
                _ => String::new(),
            };
            let by: Vec<String> = m
                .needed_by
                .iter()
                .map(|p| {
                    p.file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            format!(
                "{} (needed by {}{stack}; {})",
                m.name,
                by.join(", "),
                m.explain(format)
            )
        })
        .collect::<Vec<_>>();
    let names: Vec<&str> = missing.iter().map(|m| m.name.as_str()).collect();
    out.push(
        Finding::new(
            Severity::Error,
            Check::Missing,
            &subject.name,
            format!(
                "{lib} cannot load: {} not found",
                if names.len() == 1 {
                    names[0].to_string()
                } else {
                    format!("{} libraries", names.len())
                }
            ),
        )
        .details(details)
        .why(format!(
            "the loader searches {searched}, and none holds {}",
            if names.len() == 1 { "it" } else { "them" }
        ))
        .fix(format!(
            "install what provides {}, or {}",
            names.join(", "),
            subject.rebuild_hint()
        ))
        .library(lib)
        .breaks(Breaks::MissingLibrary),
    );
    out
}
