//! PEP 503 simple index pages: the files a project page lists, read by the prebuilt-wheel
//! search and by the sdist download alike; and what a search for a prebuilt wheel found,
//! as the plan records it ([`crate::prebuilt`] searches).

use std::path::PathBuf;

use rocbuild_probe::normalize_dist;
use serde::Serialize;

/// A file an index page or a `--find-links` directory lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listed {
    /// The file name (the anchor's text on a simple page).
    pub file: String,
    /// Absolute URL without its fragment, or a path.
    pub url: String,
    /// From the URL's `#sha256=` fragment.
    pub sha256: Option<String>,
}

/// One listed file and what the name check said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    #[serde(flatten)]
    pub listed: Listed,
    /// Where it was listed (the simple page or the directory).
    pub source: String,
    /// None: its name fits; it is checked after download. Else why it does not.
    pub rejected: Option<String>,
}

/// The index part of a plan: where it looked and what it found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IndexPlan {
    /// The pages and directories read.
    pub sources: Vec<String>,
    /// The file name a fitting wheel would have (for the plan's reader).
    pub wanted: String,
    /// Fitting candidates first, in the order they are tried.
    pub candidates: Vec<Candidate>,
}

/// The wheel chosen, downloaded, unpacked and checked: what `run()` installs instead of a
/// build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrebuiltInstall {
    pub file: String,
    pub url: String,
    pub sha256: String,
    pub index: String,
    /// The wheel on disk and where it was unpacked (outside the venv).
    pub wheel: PathBuf,
    pub unpacked: PathBuf,
    /// The source commit it was built from (its rocbuild.json), when it says.
    pub commit: Option<String>,
}

/// `&amp;` and friends, as HTML writes them in attributes and text.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&amp;", "&")
}

/// The value of attribute `name` in a start tag's attribute text.
fn attribute(attrs: &str, name: &str) -> Option<String> {
    let lower = attrs.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(name) {
        let at = from + i;
        from = at + name.len();
        let before_ok = at == 0 || lower.as_bytes()[at - 1].is_ascii_whitespace();
        let rest = attrs[at + name.len()..].trim_start();
        if !before_ok || !rest.starts_with('=') {
            continue;
        }
        let v = rest[1..].trim_start();
        let value = match v.chars().next()? {
            q @ ('"' | '\'') => &v[1..1 + v[1..].find(q)?],
            _ => v.split(|c: char| c.is_ascii_whitespace()).next()?,
        };
        return Some(unescape(value));
    }
    None
}

/// The files of a PEP 503 project page at `page_url`: one `<a href="URL#sha256=…">file</a>`
/// per file, relative URLs resolved against the page. Anything else in the page is ignored;
/// an anchor without href, an anchor never closed, or a body that is not HTML is an error.
pub fn parse_simple_page(page_url: &str, html: &str) -> std::result::Result<Vec<Listed>, String> {
    let base = url::Url::parse(page_url).map_err(|e| format!("bad URL: {e}"))?;
    let lower = html.to_ascii_lowercase();
    if !(lower.contains("<html") || lower.contains("<!doctype html") || lower.contains("<a ")) {
        let start: String = html.trim().chars().take(60).collect();
        return Err(format!(
            "it is not HTML (it begins with `{}`)",
            start.replace('\n', " ")
        ));
    }
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = lower[from..].find("<a") {
        let at = from + i;
        let after = lower.as_bytes().get(at + 2).copied();
        from = at + 2;
        if !matches!(after, Some(b' ' | b'\t' | b'\n' | b'\r' | b'>')) {
            continue; // <abbr>, <area>, …
        }
        let end = lower[at..]
            .find('>')
            .map(|e| at + e)
            .ok_or_else(|| format!("the tag at byte {at} is never closed with `>`"))?;
        let attrs = &html[at + 2..end];
        let close = lower[end..]
            .find("</a>")
            .map(|e| end + e)
            .ok_or_else(|| format!("the <a> at byte {at} has no </a>"))?;
        let href =
            attribute(attrs, "href").ok_or_else(|| format!("the <a> at byte {at} has no href"))?;
        let text = unescape(html[end + 1..close].trim());
        let mut u = base
            .join(&href)
            .map_err(|e| format!("the href `{href}` is not a URL: {e}"))?;
        let sha256 = u
            .fragment()
            .and_then(|f| f.strip_prefix("sha256="))
            .map(str::to_ascii_lowercase);
        u.set_fragment(None);
        let file = if text.is_empty() {
            u.path_segments()
                .and_then(|mut s| s.next_back())
                .map(|s| {
                    percent_encoding::percent_decode_str(s)
                        .decode_utf8_lossy()
                        .into_owned()
                })
                .unwrap_or_default()
        } else {
            text
        };
        out.push(Listed {
            file,
            url: u.to_string(),
            sha256,
        });
        from = close + 4;
    }
    Ok(out)
}

/// The project page of `distribution` under the simple root `index` (PEP 503: the normalized
/// name, with a trailing slash).
pub fn project_page(index: &str, distribution: &str) -> String {
    let root = if index.ends_with('/') {
        index.to_string()
    } else {
        format!("{index}/")
    };
    format!("{root}{}/", normalize_dist(distribution))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_pages_are_read_and_bad_ones_refused() {
        let page = r#"<!DOCTYPE html><html><body><h1>Links for fakecodec</h1>
<a href="../../packages/fakecodec-1.0.0%2Bcpu.torch2.9.1-cp311-cp311-linux_x86_64.whl#sha256=ABCDEF">fakecodec-1.0.0+cpu.torch2.9.1-cp311-cp311-linux_x86_64.whl</a><br>
<a data-requires-python="&gt;=3.9" href='https://files.example/f/fakecodec-0.9.0.tar.gz'>fakecodec-0.9.0.tar.gz</a>
<abbr>x</abbr></body></html>"#;
        let l = parse_simple_page("http://127.0.0.1:8080/simple/fakecodec/", page).unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(
            l[0].url,
            "http://127.0.0.1:8080/packages/fakecodec-1.0.0%2Bcpu.torch2.9.1-cp311-cp311-linux_x86_64.whl"
        );
        assert_eq!(l[0].sha256.as_deref(), Some("abcdef"));
        assert_eq!(
            l[0].file,
            "fakecodec-1.0.0+cpu.torch2.9.1-cp311-cp311-linux_x86_64.whl"
        );
        assert_eq!(l[1].url, "https://files.example/f/fakecodec-0.9.0.tar.gz");
        assert_eq!(l[1].sha256, None);
        // An empty project page is a page.
        assert_eq!(
            parse_simple_page("http://h/simple/x/", "<html><body></body></html>").unwrap(),
            []
        );
        let bad = |html: &str| parse_simple_page("http://h/simple/x/", html).unwrap_err();
        assert!(bad(r#"{"files": []}"#).contains("not HTML"));
        assert!(bad("<html><a title=x>f.whl</a>").contains("has no href"));
        assert!(bad("<html><a href=f.whl>f.whl").contains("has no </a>"));
        assert_eq!(
            project_page("http://h/simple", "Fake_Codec"),
            "http://h/simple/fake-codec/"
        );
    }
}
