//! Human text for a doctor [`Report`]: the symptoms first (what loads, what does not, in the
//! loader's words), then what to do, first things first. Short: evidence is cut, the JSON
//! output has it all.

use std::fmt::Write as _;

use crate::doctor::Report;
use crate::finding::{Check, Severity};
use crate::loadtest::Step;

/// Lines of evidence shown per finding.
const DETAILS: usize = 8;

pub fn human(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "venv: {} (from {}), Python {}",
        r.venv.display(),
        r.chosen_by,
        r.python
    );
    match &r.torch {
        Some(t) => {
            let _ = writeln!(o, "torch {} ({})", t.version, t.flavor);
        }
        None => {
            let _ = writeln!(o, "torch: not installed");
        }
    }
    o.push('\n');
    packages_human(&mut o, r);
    let unexplained = findings_human(&mut o, r);
    notes_human(&mut o, r);
    let errors = r
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error && f.check != Check::Load)
        .count()
        + unexplained;
    let warnings = r
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .count();
    o.push('\n');
    if r.packages.is_empty() {
        o.push_str(
            "nothing to check: none of the packages doctor knows is installed in this venv\n",
        );
    } else if errors + warnings == 0 {
        o.push_str("all is well\n");
    } else {
        let _ = writeln!(
            o,
            "{errors} {}, {warnings} {}",
            if errors == 1 { "error" } else { "errors" },
            if warnings == 1 { "warning" } else { "warnings" }
        );
    }
    o
}

/// One line a package: loads, does not load (with each failing step), skipped, absent.
fn packages_human(o: &mut String, r: &Report) {
    for p in &r.packages {
        let v = p
            .version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        let n = p.libraries.len();
        let libs = format!(
            "{n} native {}",
            if n == 1 { "library" } else { "libraries" }
        );
        match (&p.load, p.loads) {
            (_, Some(true)) => {
                let _ = writeln!(o, "ok    {}{v}: loads ({libs})", p.name);
            }
            (Some(load), Some(false)) => {
                let _ = writeln!(o, "FAIL  {}{v}: does not load ({libs})", p.name);
                for s in &load.steps {
                    let expected = matches!(&s.step, Step::Cdll(path) if p.expected_failures.iter().any(|e| path.ends_with(e)));
                    if s.ok || expected {
                        continue;
                    }
                    let _ = writeln!(
                        o,
                        "        {}: {}",
                        s.step,
                        first_line(s.error.as_deref().unwrap_or("failed"))
                    );
                }
                if let Some(a) = &load.aborted {
                    let _ = writeln!(o, "        the child Python: {a}");
                }
            }
            _ if p.libraries.is_empty() && !p.dir.exists() => {
                let _ = writeln!(o, "--    {}: not installed", p.name);
            }
            _ => {
                let _ = writeln!(o, "--    {}{v}: load test skipped ({libs})", p.name);
            }
        }
    }
}

/// The problems, numbered in the order to act on them; returns how many load failures no
/// check explains.
fn findings_human(o: &mut String, r: &Report) -> usize {
    let todo: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.is_problem() && f.check != Check::Load)
        .collect();
    let unexplained: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.check == Check::Load && f.is_problem())
        .filter(|f| !todo.iter().any(|t| t.subject == f.subject))
        .collect();
    if !todo.is_empty() || !unexplained.is_empty() {
        o.push_str("\nWhat to do, first things first:\n");
    }
    for (i, f) in todo.iter().enumerate() {
        let _ = writeln!(
            o,
            "\n{}. {} [{}] {}: {}",
            i + 1,
            f.severity.as_str(),
            f.check.as_str(),
            f.subject,
            f.what
        );
        for d in f.details.iter().take(DETAILS) {
            let _ = writeln!(o, "     {d}");
        }
        if f.details.len() > DETAILS {
            let _ = writeln!(
                o,
                "     … {} more (--json has them all)",
                f.details.len() - DETAILS
            );
        }
        if !f.why.is_empty() {
            let _ = writeln!(o, "   why: {}", f.why);
        }
        if !f.fix.is_empty() {
            let _ = writeln!(o, "   fix: {}", f.fix);
        }
    }
    for (j, f) in unexplained.iter().enumerate() {
        let _ = writeln!(
            o,
            "\n{}. error [load] {}: {} — none of the checks explains it; the loader's message above is the lead",
            todo.len() + j + 1,
            f.subject,
            f.what
        );
    }
    unexplained.len()
}

/// The notes: context, checks that could not run.
fn notes_human(o: &mut String, r: &Report) {
    let notes: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Note)
        .collect();
    if !notes.is_empty() {
        o.push_str("\nnotes:\n");
        for f in notes {
            let _ = writeln!(o, "  {}: {}", f.subject, f.what);
            if !f.fix.is_empty() {
                let _ = writeln!(o, "    ({})", f.fix);
            }
        }
    }
}

/// The first line of a multi-line exception (TorchCodec's RuntimeError carries whole
/// tracebacks); the loader's own message for each library is shown on its own line anyway.
fn first_line(msg: &str) -> String {
    let mut lines = msg.lines();
    let first = lines.next().unwrap_or("").trim_end().to_string();
    let more = lines.filter(|l| !l.trim().is_empty()).count();
    if more == 0 {
        first
    } else {
        format!("{first} (… {more} more lines: --json has the whole message)")
    }
}
