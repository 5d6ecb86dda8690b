//! The ABI check: every symbol (ELF) or procedure (PE) a library imports that no library the
//! loader would give it exports. This is `undefined symbol: …` / `WinError 127` before the
//! loader says it, with the C++ name a person can read and the reason.

use crate::finding::{Breaks, Check, Finding, Severity};
use crate::linkage::Unresolved;
use crate::package::Subject;

/// At most this many names per library in the report; the JSON has them all in `details` too
/// (the human text cuts, the data does not).
const SHOWN: usize = 12;

/// Does this symbol belong to torch's C++ API (c10, at, torch, caffe2)?
pub fn is_torch_symbol(u: &Unresolved) -> bool {
    let d = u.demangled.as_deref().unwrap_or(&u.name);
    let d = d
        .trim_start_matches("non-virtual thunk to ")
        .trim_start_matches("vtable for ")
        .trim_start_matches("typeinfo for ");
    [
        "c10::",
        "at::",
        "torch::",
        "caffe2::",
        "aoti_torch_",
        "torch_",
    ]
    .iter()
    .any(|p| d.starts_with(p))
        || u.library.as_deref().is_some_and(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("c10") || l.contains("torch")
        })
}

/// Versioned references to the C/C++ runtime (`GLIBC_2.38`, `GLIBCXX_3.4.32`, `CXXABI_1.3.15`):
/// the library was built on a newer system than this one.
fn is_runtime_version(u: &Unresolved) -> bool {
    u.version.as_deref().is_some_and(|v| {
        v.starts_with("GLIBC_") || v.starts_with("GLIBCXX_") || v.starts_with("CXXABI_")
    })
}

fn shown(u: &Unresolved) -> String {
    let mut s = match &u.demangled {
        Some(d) => format!("{d}  [{}]", u.name),
        None => u.name.clone(),
    };
    if let Some(v) = &u.version {
        s.push_str(&format!(" @{v}"));
    }
    if let Some(l) = &u.library {
        s.push_str(&format!(" (from {l})"));
    }
    s
}

fn listing(v: &[&Unresolved]) -> Vec<String> {
    let mut out: Vec<String> = v.iter().take(SHOWN).map(|u| shown(u)).collect();
    if v.len() > SHOWN {
        out.push(format!("… and {} more", v.len() - SHOWN));
    }
    out
}

/// `torch_version`: the venv's torch, for the conclusion. `lib`: the file name.
pub fn check(
    subject: &Subject,
    torch_version: Option<&str>,
    lib: &str,
    unresolved: &[Unresolved],
) -> Vec<Finding> {
    let mut out = Vec::new();
    let torch: Vec<&Unresolved> = unresolved.iter().filter(|u| is_torch_symbol(u)).collect();
    let runtime: Vec<&Unresolved> = unresolved
        .iter()
        .filter(|u| !is_torch_symbol(u) && is_runtime_version(u))
        .collect();
    let other: Vec<&Unresolved> = unresolved
        .iter()
        .filter(|u| !is_torch_symbol(u) && !is_runtime_version(u))
        .collect();
    let n = |v: &[&Unresolved]| {
        if v.len() == 1 {
            "1 symbol".to_string()
        } else {
            format!("{} symbols", v.len())
        }
    };
    if !torch.is_empty() {
        let tv = torch_version.unwrap_or("?");
        let minor: String = tv.split('.').take(2).collect::<Vec<_>>().join(".");
        let conclusion = if subject.name == "torch" {
            "torch's own libraries do not match each other: a partial upgrade or a mix of two torch installs".to_string()
        } else {
            format!("built for another torch than {minor} (torch's C++ symbols change between releases)")
        };
        out.push(
            Finding::new(
                Severity::Error,
                Check::Abi,
                &subject.name,
                format!("{lib} needs {} that torch {tv} does not export", n(&torch)),
            )
            .details(listing(&torch))
            .library(lib)
            .breaks(Breaks::Abi)
            .why(conclusion)
            .fix(if subject.name == "torch" {
                subject.rebuild_hint()
            } else {
                format!(
                    "{} (rebuilds it against torch {tv})",
                    subject.rebuild_hint()
                )
            }),
        );
    }
    if !runtime.is_empty() {
        out.push(
            Finding::new(
                Severity::Error,
                Check::Abi,
                &subject.name,
                format!(
                    "{lib} needs {} newer than this system's C/C++ runtime",
                    n(&runtime)
                ),
            )
            .details(listing(&runtime))
            .library(lib)
            .breaks(Breaks::Abi)
            .why("it was built on a newer Linux (glibc / libstdc++) than this one")
            .fix(format!(
                "{} (builds it with this system's compiler)",
                subject.rebuild_hint()
            )),
        );
    }
    if !other.is_empty() {
        out.push(
            Finding::new(
                Severity::Error,
                Check::Abi,
                &subject.name,
                format!("{lib} needs {} that none of its dependencies export", n(&other)),
            )
            .details(listing(&other))
            .library(lib)
            .breaks(Breaks::Abi)
            .why("it was linked against other versions of its dependencies than the ones the loader finds here")
            .fix(subject.rebuild_hint()),
        );
    }
    out
}
