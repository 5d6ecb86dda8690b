//! The load test's verdict: does the package load, which failures are expected, and the
//! finding that carries the loader's own words.

use std::path::{Path, PathBuf};

use crate::checks::missing::is_gpu_driver;
use crate::finding::{Breaks, Check, Finding, Severity};
use crate::loadtest::{LoadReport, Step};

pub struct Verdict {
    /// `None` when the load test did not run.
    pub loads: Option<bool>,
    /// File names whose failure to load is expected or follows from another failure.
    pub expected: Vec<String>,
    pub finding: Option<Finding>,
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// The library a `cannot open shared object file` message names.
fn missing_in(message: &str) -> &str {
    let head = message
        .split(": cannot open shared object file")
        .next()
        .unwrap_or("");
    head.rsplit(": ").next().unwrap_or("")
}

/// The kind of failure a loader message names: a library not found, or a symbol not found.
fn breaks_in(message: &str) -> Option<Breaks> {
    const MISSING: [&str; 4] = [
        "cannot open shared object file",
        "Library not loaded",
        "Could not find module",
        "[WinError 126]",
    ];
    // Under Wine a missing export is a stub that aborts when called: Python then shows
    // [WinError 317] (Windows itself says 127 at load).
    const ABI: [&str; 6] = [
        "undefined symbol",
        "Symbol not found",
        "[WinError 127]",
        "specified procedure could not be found",
        "[WinError 317]",
        "unimplemented function",
    ];
    if ABI.iter().any(|p| message.contains(p)) {
        Some(Breaks::Abi)
    } else if MISSING.iter().any(|p| message.contains(p)) {
        Some(Breaks::MissingLibrary)
    } else {
        None
    }
}

/// `inactive`: libraries the package's own loader skips here (a core for an FFmpeg major
/// this system lacks). Besides those, a library that fails only for lack of the GPU driver is
/// expected to on this machine, and one that fails because a sibling it needs failed first says
/// nothing new.
pub fn judge(
    subject: &str,
    libs: &[PathBuf],
    inactive: Vec<String>,
    load: Option<&LoadReport>,
) -> Verdict {
    let mut expected = inactive;
    let Some(r) = load else {
        return Verdict {
            loads: None,
            expected,
            finding: None,
        };
    };
    let siblings: Vec<String> = libs.iter().map(|p| file_name(p)).collect();
    for s in &r.steps {
        if let (Step::Cdll(p), Some(e)) = (&s.step, &s.error) {
            let lib = missing_in(e);
            if is_gpu_driver(lib) || siblings.iter().any(|n| n == lib) {
                expected.push(file_name(p));
            }
        }
    }
    let counts = |s: &&crate::loadtest::StepResult| {
        !s.ok && !matches!(&s.step, Step::Cdll(p) if expected.contains(&file_name(p)))
    };
    let failed: Vec<String> = r
        .steps
        .iter()
        .filter(counts)
        .map(|s| format!("{}: {}", s.step, s.error.as_deref().unwrap_or("failed")))
        .collect();
    let loads = r.aborted.is_none() && failed.is_empty();
    let kinds: Vec<Breaks> = failed.iter().filter_map(|m| breaks_in(m)).collect();
    let finding = (!loads).then(|| {
        let f = Finding::new(
            Severity::Error,
            Check::Load,
            subject,
            format!("{subject} does not load in a fresh Python"),
        )
        .details(
            failed
                .into_iter()
                .chain(r.aborted.iter().map(|a| format!("the child Python: {a}"))),
        )
        .why("the messages are the loader's own (a child process of the venv's Python)");
        // The loader's words say which kind it is; an ABI break wins over a missing library
        // in the one finding (the exit status sees both through the static checks).
        match kinds.iter().max() {
            Some(k) => f.breaks(*k),
            None => f,
        }
    });
    Verdict {
        loads: Some(loads),
        expected,
        finding,
    }
}

/// A static finding that says a library cannot load, when the load test loaded that very
/// library in a fresh Python, is the static model's mistake (a loader rule it does not know),
/// not the user's problem: it must not be reported as an error beside "loads". It becomes a
/// note that keeps the evidence and says that the load test disproved it.
pub fn reconcile(findings: &mut [Finding], load: &LoadReport) {
    let loaded: Vec<String> = load
        .steps
        .iter()
        .filter(|s| s.ok)
        .filter_map(|s| match &s.step {
            Step::Cdll(p) => Some(file_name(p)),
            Step::Import(_) => None,
        })
        .collect();
    for f in findings.iter_mut() {
        // Wine binds an import nothing exports to a stub that aborts only when called: a
        // library with an ABI break loads there, which disproves nothing.
        let wine_stub = load.wine.is_some() && f.check == Check::Abi;
        let disproved = f.severity != Severity::Note
            && matches!(f.check, Check::Missing | Check::Abi)
            && !wine_stub
            && f.library.as_ref().is_some_and(|l| loaded.contains(l));
        if disproved {
            f.severity = Severity::Note;
            f.what = format!(
                "{} (read from the files), yet it loaded in a fresh Python",
                f.what
            );
            f.why = format!(
                "the load test is what the loader really does, and it loaded the library: the static check missed how this one is found ({})",
                f.why
            );
            f.fix = String::new();
        }
    }
}

/// A load test run under Wine that failed: what Wine said, and what Windows itself does, which
/// Wine does not show (a missing export fails the load there, `WinError 127`).
pub fn under_wine(subject: &str, load: &LoadReport) -> Option<Finding> {
    let words = load.wine.as_ref()?;
    if load.ok() {
        return None;
    }
    // `wine: Call from 0000… to unimplemented function torch_cpu.dll.?def@Library@…, aborting`
    let stubs: Vec<String> = words
        .iter()
        .filter_map(|w| {
            let f = w.split("unimplemented function ").nth(1)?;
            let f = f.trim_end_matches(", aborting").trim();
            let (dll, sym) = f.split_once(".dll.")?;
            let shown = rocbuild_native::demangle(sym).unwrap_or_else(|| sym.to_string());
            Some(format!("{dll}.dll: {shown}  [{sym}]"))
        })
        .collect();
    let f = Finding::new(
        Severity::Note,
        Check::Load,
        subject,
        if stubs.is_empty() {
            format!("{subject}'s load test ran under Wine, and failed there")
        } else {
            format!(
                "under Wine, {subject} died calling an export that does not exist ({}); Windows itself refuses to load such a library: [WinError 127] The specified procedure could not be found",
                stubs.join("; ")
            )
        },
    )
    .details(words.iter().cloned());
    Some(if stubs.is_empty() {
        f.why("Wine is not Windows (no GPU, no real ROCm DLLs, no KnownDLLs or SxS); a DLL that Wine does not find is missing on Windows too")
    } else {
        f.why("Wine binds an import that no DLL exports to a stub that aborts when it is called, so there the failure comes late (an abort, or [WinError 317] from Python); Windows checks every import at load. The missing exports are the ABI errors above")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadtest::StepResult;

    fn cdll(path: &str, ok: bool) -> StepResult {
        StepResult {
            step: Step::Cdll(PathBuf::from(path)),
            ok,
            error: (!ok).then(|| format!("{path}: cannot open shared object file")),
        }
    }

    #[test]
    fn a_library_that_loaded_is_not_an_error() {
        let missing = |lib: &str| {
            Finding::new(
                Severity::Error,
                Check::Missing,
                "pkg",
                format!("{lib} cannot load"),
            )
            .why("the loader searches here")
            .fix("install it")
            .library(lib)
        };
        let mut findings = vec![
            missing("liba.so"),
            missing("libb.so"),
            Finding::new(Severity::Error, Check::Gpu, "pkg", "no code for gfx1010")
                .library("liba.so"),
        ];
        let load = LoadReport {
            steps: vec![cdll("/s/pkg/liba.so", true), cdll("/s/pkg/libb.so", false)],
            aborted: None,
            wine: None,
        };
        reconcile(&mut findings, &load);
        assert_eq!(findings[0].severity, Severity::Note);
        assert!(
            findings[0].what.contains("yet it loaded"),
            "{}",
            findings[0].what
        );
        assert!(findings[0].fix.is_empty());
        // It did not load: the static finding stands.
        assert_eq!(findings[1].severity, Severity::Error);
        // Loading says nothing about GPU code objects.
        assert_eq!(findings[2].severity, Severity::Error);
    }
}
