//! pytest's JUnit XML read back: one outcome per test case. pytest writes a plain, regular
//! file (`<testcase classname=… name=…>` holding `<failure>`, `<error>` or `<skipped>`), so a
//! small reader of just that is enough; anything it cannot read is reported, not guessed.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Passed,
    Failed,
    Skipped,
}

/// One test case: its dotted id (`test.test_ops.TestX.test_y[a]`), its outcome and, for a
/// failure, the first line of pytest's message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Case {
    pub id: String,
    pub outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The test cases of a JUnit XML text.
pub fn parse(xml: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find("<testcase") {
        rest = &rest[i + "<testcase".len()..];
        let Some(end) = rest.find('>') else { break };
        let head = &rest[..end];
        let self_closing = head.ends_with('/');
        let body = if self_closing {
            ""
        } else {
            rest.find("</testcase>").map_or("", |e| &rest[end..e])
        };
        let class = attr(head, "classname").unwrap_or_default();
        let name = attr(head, "name").unwrap_or_default();
        let id = match (class.is_empty(), name.is_empty()) {
            (true, _) => name,
            (false, true) => class,
            (false, false) => format!("{class}.{name}"),
        };
        let (outcome, message) = outcome_of(body);
        cases.push(Case {
            id,
            outcome,
            message,
        });
    }
    cases
}

fn outcome_of(body: &str) -> (Outcome, Option<String>) {
    for (tag, outcome) in [
        ("<failure", Outcome::Failed),
        ("<error", Outcome::Failed),
        ("<skipped", Outcome::Skipped),
    ] {
        if let Some(i) = body.find(tag) {
            let head = &body[i..];
            let head = &head[..head.find('>').unwrap_or(head.len())];
            let msg = attr(head, "message").map(|m| m.lines().next().unwrap_or("").to_string());
            return (outcome, msg.filter(|_| outcome == Outcome::Failed));
        }
    }
    (Outcome::Passed, None)
}

/// The value of `name="…"` in a tag's text, unescaped.
fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let len = tag[start..].find('"')?;
    Some(unescape(&tag[start..start + len]))
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(semi) = rest.find(';') else { break };
        let ent = &rest[1..semi];
        let c = match ent {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            e if e.starts_with("#x") => u32::from_str_radix(&e[2..], 16)
                .ok()
                .and_then(char::from_u32),
            e if e.starts_with('#') => e[1..].parse().ok().and_then(char::from_u32),
            _ => None,
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape pytest 8 writes (xunit2), with a parametrised name and an escaped message.
    #[test]
    fn pytest_junit_is_read_case_by_case() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="3"><testcase classname="t.test_a" name="test_ok" time="0.001" /><testcase classname="t.test_a" name="test_bad[x&amp;y]" time="0.001"><failure message="assert 1 == 2&#10;more">trace</failure></testcase><testcase classname="t.test_a.TestGpu" name="test_gpu" time="0"><skipped type="pytest.skip" message="no gpu">skip</skipped></testcase></testsuite></testsuites>"#;
        let c = parse(xml);
        assert_eq!(c.len(), 3);
        assert_eq!(
            c[0],
            Case {
                id: "t.test_a.test_ok".into(),
                outcome: Outcome::Passed,
                message: None
            }
        );
        assert_eq!(c[1].id, "t.test_a.test_bad[x&y]");
        assert_eq!(c[1].outcome, Outcome::Failed);
        assert_eq!(c[1].message.as_deref(), Some("assert 1 == 2"));
        assert_eq!(c[2].outcome, Outcome::Skipped);
        assert_eq!(c[2].message, None);
        // A collection error is a case with an <error> and no class.
        let e = parse(
            r#"<testcase classname="" name="t.test_b" time="0"><error message="collection failure">x</error></testcase>"#,
        );
        assert_eq!(e[0].id, "t.test_b");
        assert_eq!(e[0].outcome, Outcome::Failed);
    }
}
