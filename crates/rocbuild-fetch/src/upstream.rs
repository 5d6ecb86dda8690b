//! What upstream has released, asked at most once a day per source: the tags of a git
//! repository (`git ls-remote`, through libgit2) or the sdists a package index lists for a
//! project, each answer (or "unreachable") kept in the cache for a day.
//!
//! Asking never blocks a run: it happens on a thread of its own and is given up after a short
//! timeout (an unreachable source is then remembered for the day, so an offline machine pays
//! it at most once a day). The cache file is read as untrusted input (anything may write the
//! cache directory): a link or an oversized, malformed, foreign or future-dated file is
//! ignored, and a new answer is written beside it and renamed over it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How long an answer is good for.
pub const DAY_SECS: u64 = 24 * 60 * 60;
/// How long a run waits for upstream before going on without it.
pub const TIMEOUT: Duration = Duration::from_secs(3);
/// The largest cache file read (a repository with tens of thousands of tags fits).
const MAX_FILE: u64 = 4 << 20;
const MAX_ENTRIES: usize = 50_000;

/// Where to ask.
#[derive(Debug, Clone)]
pub enum Origin {
    /// A git repository: a URL, or the path of a local repository or mirror.
    Git(String),
    /// A package index's simple API root and a project on it: the files it lists.
    Index { index: String, project: String },
    /// A directory of files (a mirror's `pypi/`): their names.
    Dir(PathBuf),
}

/// One name upstream lists: a tag (with the commit it points to) or a file of an index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// An answer: what was listed, or `None` when the source could not be reached in time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The source the answer is for (the recipe's URL or index project, no password).
    pub key: String,
    /// Seconds since the epoch when it was asked.
    pub checked: u64,
    pub listed: Option<Vec<Listed>>,
    /// Taken from the cache (no request made by this run).
    #[serde(skip)]
    pub cached: bool,
}

/// The day's answer for `key`: the cached one when it is younger than a day (and `refresh`
/// is false), else a new one asked of `origin` within `timeout` and written to the cache.
pub fn daily(
    cache: &Path,
    key: &str,
    origin: &Origin,
    now: u64,
    timeout: Duration,
    refresh: bool,
) -> Answer {
    let file = cache_file(cache, key);
    if !refresh {
        if let Some(a) = read_cached(&file, key, now) {
            return a;
        }
    }
    let answer = Answer {
        key: key.to_string(),
        checked: now,
        listed: ask(origin, timeout).ok(),
        cached: false,
    };
    write_cached(&file, &answer);
    answer
}

/// `<cache>/upstream/<sha256 of the key, 16 digits>.json`.
pub fn cache_file(cache: &Path, key: &str) -> PathBuf {
    let h: String = Sha256::digest(key.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    cache.join("upstream").join(format!("{h}.json"))
}

/// The cached answer, if it is a plain file of ours for `key`, sane, and younger than a day.
fn read_cached(file: &Path, key: &str, now: u64) -> Option<Answer> {
    let meta = std::fs::symlink_metadata(file).ok()?;
    let dir = std::fs::symlink_metadata(file.parent()?).ok()?;
    if !meta.file_type().is_file() || !dir.file_type().is_dir() || meta.len() > MAX_FILE {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(file)
        .ok()?
        .take(MAX_FILE)
        .read_to_string(&mut text)
        .ok()?;
    let mut a: Answer = serde_json::from_str(&text).ok()?;
    let fresh = a.checked <= now && now - a.checked < DAY_SECS;
    let sane = a.key == key
        && a.listed.as_ref().is_none_or(|l| {
            l.len() <= MAX_ENTRIES
                && l.iter()
                    .all(|x| plain(&x.name) && x.commit.as_deref().is_none_or(hex_id))
        });
    a.cached = true;
    (fresh && sane).then_some(a)
}

/// A name as a tag or file name can be: short, printable, no path of its own.
fn plain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && !s.chars().any(|c| c.is_control() || c == '\\')
        && !s.contains("..")
}

fn hex_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Written beside the old file and renamed over it; nothing is written through a link.
fn write_cached(file: &Path, a: &Answer) {
    let Some(dir) = file.parent() else { return };
    if std::fs::symlink_metadata(dir).is_ok_and(|m| !m.file_type().is_dir()) {
        return;
    }
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let Ok(json) = serde_json::to_vec(a) else {
        return;
    };
    let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) else {
        return;
    };
    if tmp.write_all(&json).is_ok() && tmp.flush().is_ok() {
        let _ = tmp.persist(file);
    }
}

/// Ask `origin`, giving up after `timeout` (the asking thread is left to finish on its own).
pub fn ask(origin: &Origin, timeout: Duration) -> Result<Vec<Listed>, String> {
    let (tx, rx) = mpsc::channel();
    let o = origin.clone();
    std::thread::Builder::new()
        .name("upstream".into())
        .spawn(move || {
            let _ = tx.send(ask_now(&o, timeout));
        })
        .map_err(|e| e.to_string())?;
    rx.recv_timeout(timeout)
        .map_err(|_| format!("no answer within {} s", timeout.as_secs()))?
}

fn ask_now(origin: &Origin, timeout: Duration) -> Result<Vec<Listed>, String> {
    match origin {
        Origin::Git(url) => ls_remote(url),
        Origin::Index { index, project } => index_files(index, project, timeout),
        Origin::Dir(dir) => Ok(std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .map(|name| Listed { name, commit: None })
            .collect()),
    }
}

/// The tags of a repository with the commit each points to (an annotated tag peeled).
pub fn ls_remote(url: &str) -> Result<Vec<Listed>, String> {
    let mut remote = git2::Remote::create_detached(url).map_err(|e| e.message().to_string())?;
    let conn = remote
        .connect_auth(git2::Direction::Fetch, None, None)
        .map_err(|e| e.message().to_string())?;
    let mut out: Vec<Listed> = Vec::new();
    for h in conn.list().map_err(|e| e.message().to_string())? {
        let Some(rest) = h.name().strip_prefix("refs/tags/") else {
            continue;
        };
        let (name, peeled) = match rest.strip_suffix("^{}") {
            Some(n) => (n, true),
            None => (rest, false),
        };
        let commit = Some(h.oid().to_string());
        match out.iter_mut().find(|l| l.name == name) {
            Some(l) if peeled => l.commit = commit,
            Some(_) => {}
            None => out.push(Listed {
                name: name.to_string(),
                commit,
            }),
        }
    }
    Ok(out)
}

/// The file names the index's project page (PEP 503) links to.
fn index_files(index: &str, project: &str, timeout: Duration) -> Result<Vec<Listed>, String> {
    let url = format!("{}/{project}/", index.trim_end_matches('/'));
    let client = reqwest::blocking::Client::builder()
        .connect_timeout(timeout)
        .timeout(timeout)
        .user_agent(concat!("rocbuild/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| e.to_string())?;
    let resp = client
        .get(&url)
        .header("Accept", "text/html")
        .send()
        .map_err(|e| e.to_string())?;
    if resp.status().as_u16() == 404 {
        return Ok(Vec::new());
    }
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status().as_u16()));
    }
    let html = resp.text().map_err(|e| e.to_string())?;
    Ok(hrefs(&html)
        .filter_map(|h| {
            let path = h.split(['#', '?']).next()?;
            let name = path.rsplit('/').next()?;
            let name = percent_encoding::percent_decode_str(name)
                .decode_utf8()
                .ok()?
                .into_owned();
            plain(&name).then_some(Listed { name, commit: None })
        })
        .collect())
}

/// Every `href="…"` (or `'…'`) value of a page.
fn hrefs(html: &str) -> impl Iterator<Item = &str> {
    html.match_indices("href=").filter_map(move |(i, _)| {
        let rest = &html[i + 5..];
        let q = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let rest = &rest[1..];
        rest.find(q).map(|end| &rest[..end])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(args: &[&str], dir: &Path) -> String {
        let o = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// A real repository: lightweight and annotated tags, each with its commit.
    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it makes its repositories with the `git` command"
    )]
    fn a_repository_lists_its_tags_with_their_commits() {
        let d = tempfile::tempdir().unwrap();
        git(&["init", "-q"], d.path());
        git(&["commit", "-q", "--allow-empty", "-m", "one"], d.path());
        let c = git(&["rev-parse", "HEAD"], d.path());
        git(&["tag", "v1.0.0"], d.path());
        git(&["tag", "-a", "v1.1.0", "-m", "x"], d.path());
        let mut l = ls_remote(d.path().to_str().unwrap()).unwrap();
        l.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(l.len(), 2);
        assert!(
            l.iter().all(|x| x.commit.as_deref() == Some(c.as_str())),
            "{l:?}"
        );
    }

    /// The second ask of the day is answered from the cache: the repository is gone and the
    /// answer stands. A day later, or with a damaged, foreign or linked file, it is asked
    /// again (and "unreachable" is an answer too).
    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it makes its repositories with the `git` command"
    )]
    fn the_answer_is_kept_for_a_day_and_a_bad_cache_file_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        git(&["init", "-q"], &repo);
        git(&["commit", "-q", "--allow-empty", "-m", "one"], &repo);
        git(&["tag", "v1.0.0"], &repo);
        let cache = d.path().join("cache");
        let o = Origin::Git(repo.display().to_string());
        let t = Duration::from_secs(5);
        let a = daily(&cache, "k", &o, 1000, t, false);
        assert!(!a.cached && a.listed.as_ref().unwrap().len() == 1);
        std::fs::remove_dir_all(&repo).unwrap();
        let b = daily(&cache, "k", &o, 1000 + DAY_SECS - 1, t, false);
        assert!(b.cached && b.listed == a.listed, "{b:?}");
        let c = daily(&cache, "k", &o, 1000 + DAY_SECS, t, false);
        assert!(!c.cached && c.listed.is_none(), "{c:?}");
        let file = cache_file(&cache, "k");
        for bad in [
            "{",
            r#"{"key":"other","checked":1000,"listed":[]}"#,
            r#"{"key":"k","checked":999999,"listed":[]}"#,
            r#"{"key":"k","checked":1000,"listed":[{"name":"../x"}]}"#,
            r#"{"key":"k","checked":1000,"listed":[{"name":"v1","commit":"nothex"}]}"#,
        ] {
            std::fs::write(&file, bad).unwrap();
            assert_eq!(read_cached(&file, "k", 1001), None, "{bad}");
        }
        #[cfg(unix)]
        {
            let elsewhere = d.path().join("elsewhere.json");
            std::fs::write(&elsewhere, r#"{"key":"k","checked":1000,"listed":[]}"#).unwrap();
            std::fs::remove_file(&file).unwrap();
            std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
            assert_eq!(read_cached(&file, "k", 1001), None);
            write_cached(&file, &a);
            assert!(!std::fs::symlink_metadata(&file)
                .unwrap()
                .file_type()
                .is_symlink());
            assert!(std::fs::read_to_string(&elsewhere)
                .unwrap()
                .contains("\"listed\":[]"));
        }
    }

    /// A source that accepts the connection and never answers costs the timeout, no more.
    #[test]
    fn a_silent_source_is_given_up_after_the_timeout() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let start = std::time::Instant::now();
        let o = Origin::Index {
            index: format!("http://127.0.0.1:{port}/simple"),
            project: "x".into(),
        };
        assert!(ask(&o, Duration::from_millis(500)).is_err());
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
        drop(l);
    }

    #[test]
    fn an_index_page_gives_its_file_names() {
        let html = r#"<html><body><a href="../../packages/p-1.0.tar.gz#sha256=00">p-1.0.tar.gz</a>
<a href='https://x.invalid/p/p-1.1%2Bx.tar.gz'>x</a><a href="..">up</a></body></html>"#;
        let names: Vec<&str> = hrefs(html).collect();
        assert_eq!(names.len(), 3);
        assert!(names[0].ends_with("p-1.0.tar.gz#sha256=00"));
    }
}
