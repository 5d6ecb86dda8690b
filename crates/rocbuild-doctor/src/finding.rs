//! Findings are data: what the checks found, rendered later as short human text or JSON.

use serde::Serialize;

/// How bad a finding is. `Error` and `Warning` make `doctor` exit 1; a `Note` does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// It does not work (or will not once used).
    Error,
    /// It works today by luck, or will break on the next change.
    Warning,
    /// Context: a check that could not run, something worth knowing.
    Note,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// Which check produced a finding. The order of the variants is the order in which a user
/// should act: a library of the wrong flavor must be replaced before its missing CUDA
/// runtime matters, a missing dependency hides every ABI problem behind it, and so on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    Flavor,
    Missing,
    Abi,
    Ffmpeg,
    Gpu,
    Stale,
    /// The fresh-subprocess load test: the symptom, shown with the loader's own words.
    Load,
}

impl Check {
    pub fn as_str(self) -> &'static str {
        match self {
            Check::Flavor => "flavor",
            Check::Missing => "missing",
            Check::Abi => "abi",
            Check::Ffmpeg => "ffmpeg",
            Check::Gpu => "gpu",
            Check::Stale => "stale",
            Check::Load => "load",
        }
    }
}

/// What kind of breakage a finding (or a `deps` / `repair` result) is, for the exit status: a
/// script must tell "a library is not found" (install it, `rocbuild repair`) from "an import
/// nothing exports" (built for another version: rebuild).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Breaks {
    /// A library the loader does not find (a dependency, FFmpeg, a DLL).
    MissingLibrary,
    /// An import no library of the process exports.
    Abi,
}

/// The overall answer of `doctor`, `deps` and `repair`, one exit code each (docs/manual.md "Exit
/// status"): 0, 1, 3, 4, 5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// All is well.
    Ok,
    /// Something is wrong, but no missing library and no ABI break.
    Other,
    MissingLibrary,
    AbiBreak,
    /// Both a missing library and an ABI break.
    MissingLibraryAndAbiBreak,
}

impl Verdict {
    /// From what was found: any problem at all, and which kinds of breakage among them.
    pub fn of(problem: bool, kinds: impl IntoIterator<Item = Breaks>) -> Verdict {
        let (mut missing, mut abi) = (false, false);
        for k in kinds {
            match k {
                Breaks::MissingLibrary => missing = true,
                Breaks::Abi => abi = true,
            }
        }
        match (missing, abi) {
            (true, true) => Verdict::MissingLibraryAndAbiBreak,
            (true, false) => Verdict::MissingLibrary,
            (false, true) => Verdict::AbiBreak,
            (false, false) if problem => Verdict::Other,
            (false, false) => Verdict::Ok,
        }
    }
}

/// One thing `doctor` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    pub check: Check,
    /// The package (or file) it is about: `torchcodec`, `torch`.
    pub subject: String,
    /// One line: what is wrong.
    pub what: String,
    /// The evidence, one item a line (demangled symbols, loader messages, paths).
    pub details: Vec<String>,
    /// Why it happens.
    pub why: String,
    /// What to do; empty when there is nothing to do.
    pub fix: String,
    /// The native library (file name) this finding says cannot load, when it says that: the
    /// load test can disprove it (see `symptom::reconcile`).
    #[serde(skip)]
    pub library: Option<String>,
    /// A missing library or an ABI break (the exit status tells them apart); `None` for
    /// anything else.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaks: Option<Breaks>,
}

impl Finding {
    pub fn new(severity: Severity, check: Check, subject: &str, what: impl Into<String>) -> Self {
        Finding {
            severity,
            check,
            subject: subject.to_string(),
            what: what.into(),
            details: Vec::new(),
            why: String::new(),
            fix: String::new(),
            library: None,
            breaks: None,
        }
    }
    /// Mark it as a missing library or an ABI break.
    pub fn breaks(mut self, kind: Breaks) -> Self {
        self.breaks = Some(kind);
        self
    }
    /// The library this finding says cannot load.
    pub fn library(mut self, file_name: &str) -> Self {
        self.library = Some(file_name.to_string());
        self
    }
    pub fn details(mut self, d: impl IntoIterator<Item = String>) -> Self {
        self.details.extend(d);
        self
    }
    pub fn why(mut self, w: impl Into<String>) -> Self {
        self.why = w.into();
        self
    }
    pub fn fix(mut self, f: impl Into<String>) -> Self {
        self.fix = f.into();
        self
    }
    /// Does this finding make the venv "not well"?
    pub fn is_problem(&self) -> bool {
        self.severity != Severity::Note
    }
}

/// The verdict of a list of findings: only problems count (a finding the load test disproved
/// is a note by then).
pub fn verdict(findings: &[Finding]) -> Verdict {
    Verdict::of(
        findings.iter().any(Finding::is_problem),
        findings
            .iter()
            .filter(|f| f.is_problem())
            .filter_map(|f| f.breaks),
    )
}

/// Sort for "what to do first": errors before warnings before notes, then by check.
pub fn order(findings: &mut [Finding]) {
    findings
        .sort_by(|a, b| (a.severity, a.check, &a.subject).cmp(&(b.severity, b.check, &b.subject)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let f = |s, b: Option<Breaks>| {
            let f = Finding::new(s, Check::Missing, "p", "x");
            match b {
                Some(b) => f.breaks(b),
                None => f,
            }
        };
        assert_eq!(verdict(&[]), Verdict::Ok);
        assert_eq!(
            verdict(&[f(Severity::Note, Some(Breaks::Abi))]),
            Verdict::Ok
        );
        assert_eq!(verdict(&[f(Severity::Warning, None)]), Verdict::Other);
        assert_eq!(
            verdict(&[
                f(Severity::Error, Some(Breaks::MissingLibrary)),
                f(Severity::Warning, None)
            ]),
            Verdict::MissingLibrary
        );
        assert_eq!(
            verdict(&[f(Severity::Error, Some(Breaks::Abi))]),
            Verdict::AbiBreak
        );
        assert_eq!(
            verdict(&[
                f(Severity::Error, Some(Breaks::Abi)),
                f(Severity::Error, Some(Breaks::MissingLibrary))
            ]),
            Verdict::MissingLibraryAndAbiBreak
        );
    }
}
