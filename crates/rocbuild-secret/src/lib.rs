//! Secrets stay home: the one redaction rule for everything rocbuild shows or keeps.
//!
//! - The userinfo of any URL (`https://bob:TOKEN@host/…`, `redis://:PASS@host:6379`) is shown
//!   as pip and uv show it: `https://bob:****@host/…`, a lone token as `https://****@host/…`.
//!   Host, port, path and the user name stay visible: they are what a user needs to see.
//! - The value of a variable that holds a secret ([`is_secret_name`]: `TWINE_PASSWORD`,
//!   `AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`, anything ending in `_TOKEN`, `_PASSWORD`,
//!   `_SECRET`, `_KEY`, …) is shown as `****`.
//! - Every secret seen once (a URL's password, a secret variable's value) is registered, and
//!   [`redact`] replaces it wherever it appears later, in whatever form a lower layer printed
//!   it (an error chain of reqwest or git2, a subprocess's output, a percent-decoded URL).
//!
//! What rocbuild *keeps* (manifests, the wheel's metadata, git remotes) holds no userinfo at
//! all: [`strip_userinfo`]. A [`SecretUrl`] carries a credentialed URL through the program and
//! displays, debugs and serializes redacted; only [`SecretUrl::expose`] gives the full text,
//! for the one call that must send it.

use std::borrow::Cow;
use std::sync::{OnceLock, RwLock};

use regex::Regex;

/// What a secret is replaced with.
pub const MASK: &str = "****";

/// Secrets shorter than this are not registered for free-text replacement (a short value of
/// a `*_KEY` variable would garble every line it happens to appear in); their URLs and the
/// variables themselves are still redacted.
const MIN_REGISTERED: usize = 6;

fn url_userinfo() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    // scheme://userinfo@ — userinfo cannot hold `/`, `?`, `#`, `@`, whitespace or quotes.
    RE.get_or_init(|| {
        Regex::new(r#"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<info>[^/?#@\s"'<>]+)@"#)
            .expect("a valid regular expression")
    })
}

fn registry() -> &'static RwLock<Vec<String>> {
    static R: OnceLock<RwLock<Vec<String>>> = OnceLock::new();
    R.get_or_init(|| RwLock::new(Vec::new()))
}

/// Remember `secret` so that [`redact`] replaces it wherever it appears (and its
/// percent-encoded and percent-decoded forms).
pub fn register(secret: &str) {
    let mut forms = vec![
        secret.to_string(),
        percent_decode(secret),
        percent_encode(secret),
    ];
    forms.retain(|f| f.chars().count() >= MIN_REGISTERED);
    if forms.is_empty() {
        return;
    }
    let Ok(mut r) = registry().write() else {
        return;
    };
    for f in forms {
        if !r.contains(&f) {
            r.push(f);
        }
    }
    // Longest first: a secret that contains another is replaced whole.
    r.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// Is a variable of this name a secret (its value is never shown)?
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    const EXACT: &[&str] = &[
        "TWINE_PASSWORD",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "HF_TOKEN",
        "PYPI_TOKEN",
        "UV_PUBLISH_PASSWORD",
        "UV_PUBLISH_TOKEN",
        "SCCACHE_AZURE_CONNECTION_STRING",
        "SCCACHE_GCS_KEY_PATH",
    ];
    const SUFFIXES: &[&str] = &[
        "_TOKEN",
        "_PASSWORD",
        "_PASSWD",
        "_SECRET",
        "_KEY",
        "_CREDENTIALS",
        "_CONNECTION_STRING",
        "_AUTH",
    ];
    EXACT.contains(&n.as_str())
        || SUFFIXES.iter().any(|s| n.ends_with(s))
        || (n.starts_with("SCCACHE_")
            && ["KEY", "SECRET", "TOKEN", "PASSWORD"]
                .iter()
                .any(|w| n.contains(w)))
}

/// Register the secrets of this process's environment and arguments: the value of every
/// secret-named variable, and the userinfo of every URL in any variable or argument.
pub fn register_process<I, S>(args: I)
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    for (k, v) in std::env::vars_os() {
        let (Some(k), Some(v)) = (k.to_str(), v.to_str()) else {
            continue;
        };
        if is_secret_name(k) && !v.is_empty() {
            register(v);
        }
        register_urls_in(v);
    }
    for a in args {
        register_urls_in(a.as_ref());
    }
}

/// Register the password (or lone token) of every URL in `text`.
pub fn register_urls_in(text: &str) {
    for c in url_userinfo().captures_iter(text) {
        if let Some(info) = c.name("info") {
            let (user, pass) = split_userinfo(info.as_str());
            match pass {
                Some(p) => register(p),
                None => register(user),
            }
        }
    }
}

/// `user:pass` -> (`user`, Some(`pass`)); `token` -> (`token`, None).
fn split_userinfo(info: &str) -> (&str, Option<&str>) {
    match info.split_once(':') {
        Some((u, p)) => (u, Some(p)),
        None => (info, None),
    }
}

/// Every URL's userinfo in `text` redacted (`bob:****`, or `****` for a lone token), then
/// every registered secret replaced by `****`.
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out: Cow<'_, str> = url_userinfo().replace_all(text, |c: &regex::Captures<'_>| {
        let scheme = c.name("scheme").map_or("", |m| m.as_str());
        let info = c.name("info").map_or("", |m| m.as_str());
        match split_userinfo(info) {
            (user, Some(_)) => format!("{scheme}{user}:{MASK}@"),
            (_, None) => format!("{scheme}{MASK}@"),
        }
    });
    if let Ok(r) = registry().read() {
        for s in r.iter() {
            if out.contains(s.as_str()) {
                out = Cow::Owned(out.replace(s.as_str(), MASK));
            }
        }
    }
    out
}

/// `NAME=value` as shown: the value redacted whole when the name is a secret's.
pub fn redact_setting(name: &str, value: &str) -> String {
    if is_secret_name(name) && !value.is_empty() {
        MASK.to_string()
    } else {
        redact(value).into_owned()
    }
}

/// A URL without its userinfo: what rocbuild stores (manifests, wheels, git remotes).
pub fn strip_userinfo(url: &str) -> String {
    url_userinfo()
        .replace_all(url, |c: &regex::Captures<'_>| {
            c.name("scheme").map_or("", |m| m.as_str()).to_string()
        })
        .into_owned()
}

/// The (user, password) of a URL's userinfo, percent-decoded; a lone token is the user.
pub fn credentials(url: &str) -> Option<(String, Option<String>)> {
    let c = url_userinfo().captures(url)?;
    let (u, p) = split_userinfo(c.name("info")?.as_str());
    Some((percent_decode(u), p.map(percent_decode)))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|c| match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (c as char).to_string()
            }
            _ => format!("%{c:02X}"),
        })
        .collect()
}

/// A URL that may carry credentials. It displays, debugs and serializes redacted; the full
/// text comes out only through [`SecretUrl::expose`].
#[derive(Clone, PartialEq, Eq, Default)]
pub struct SecretUrl(String);

impl SecretUrl {
    /// Wrap `url`, registering its password for [`redact`].
    pub fn new(url: impl Into<String>) -> SecretUrl {
        let url = url.into();
        register_urls_in(&url);
        SecretUrl(url)
    }
    /// The URL with its credentials: only for the call that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// The URL without userinfo: what may be stored.
    pub fn public(&self) -> String {
        strip_userinfo(&self.0)
    }
    pub fn has_credentials(&self) -> bool {
        url_userinfo().is_match(&self.0)
    }
}

impl std::fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact(&self.0))
    }
}

impl std::fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", redact(&self.0))
    }
}

impl serde::Serialize for SecretUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&redact(&self.0))
    }
}

/// A writer that redacts what passes through it, line by line (for the tracing subscriber
/// and log files): bytes are held until a newline so a secret is never cut in two.
pub struct Redacting<W: std::io::Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: std::io::Write> Redacting<W> {
    pub fn new(inner: W) -> Self {
        Redacting {
            inner,
            pending: Vec::new(),
        }
    }
}

impl<W: std::io::Write> std::io::Write for Redacting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if let Some(end) = self.pending.iter().rposition(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line);
            self.inner.write_all(redact(&text).as_bytes())?;
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            let text = String::from_utf8_lossy(&rest);
            self.inner.write_all(redact(&text).as_bytes())?;
        }
        self.inner.flush()
    }
}

impl<W: std::io::Write> Drop for Redacting<W> {
    fn drop(&mut self) {
        let _ = std::io::Write::flush(self);
    }
}

/// Refuse a cache directory that another user can write to: it would hand them the sources
/// rocbuild builds and the libraries it installs (a shared `/tmp/rocbuild` made by someone
/// else is the classic way in). The directory, when it exists, must be this user's, or
/// root's and writable by root alone; when it does not exist yet, the directory it will be
/// made in must not let others replace it (this user's or root's, and if others can write
/// there, sticky, like `/tmp`). `Err` says what and why.
pub fn check_cache_dir(dir: &std::path::Path) -> Result<(), String> {
    if let Some(venv) = enclosing_environment(dir) {
        return Err(format!(
            "{} is inside the Python environment {}: any wheel pip installs there can write into it (its key and its sources included)",
            dir.display(),
            venv.display()
        ));
    }
    rocbuild_platform::host::check_private_dir(dir)
}

/// The venv or conda environment (a directory with `pyvenv.cfg` or `conda-meta/`), or the
/// `site-packages` / `dist-packages` directory, that `dir` lies in, if any.
fn enclosing_environment(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    if let Some(venv) = rocbuild_platform::venv_root_of(dir) {
        return Some(venv.to_path_buf());
    }
    dir.ancestors().find_map(|a| {
        let named = a
            .file_name()
            .is_some_and(|n| n == "site-packages" || n == "dist-packages");
        (named || a.join("conda-meta").is_dir()).then(|| a.to_path_buf())
    })
}

/// Open `path` for writing, new or truncated, as `0o644` minus the user's umask on Unix (a
/// log, a manifest, a journal: readable by those who share the venv, never writable by
/// others, whatever the umask says).
pub fn create_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    open_private(o, path)
}

/// As [`create_file`], but only a new file: fails when anything (a link included, which is
/// never followed) is at `path` already.
pub fn create_new_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    open_private(o, path)
}

fn open_private(o: std::fs::OpenOptions, path: &std::path::Path) -> std::io::Result<std::fs::File> {
    rocbuild_platform::host::open_private(o, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn urls_show_host_path_and_user_but_not_the_password() {
        assert_eq!(
            redact("clone https://bob:ghp_T0KEN@github.com/org/torchcodec failed"),
            "clone https://bob:****@github.com/org/torchcodec failed"
        );
        assert_eq!(
            redact("https://ghp_T0KEN@github.com/org/x.git"),
            "https://****@github.com/org/x.git"
        );
        assert_eq!(
            redact("redis://:pa55@127.0.0.1:6379/0"),
            "redis://:****@127.0.0.1:6379/0"
        );
        assert_eq!(
            redact("see https://pypi.org/simple/"),
            "see https://pypi.org/simple/"
        );
        assert_eq!(redact("mail bob@example.com"), "mail bob@example.com");
        assert_eq!(
            strip_userinfo("https://alice:pw@index.example/simple"),
            "https://index.example/simple"
        );
        assert_eq!(
            credentials("https://alice:p%40ss@h/x"),
            Some(("alice".into(), Some("p@ss".into())))
        );
    }

    #[test]
    fn a_registered_secret_is_replaced_in_any_form() {
        register("s3cr3t/v@lue");
        assert_eq!(redact("token s3cr3t/v@lue here"), "token **** here");
        assert_eq!(redact("url-encoded s3cr3t%2Fv%40lue"), "url-encoded ****");
        let u = SecretUrl::new("https://u:another-pass@h.example/r");
        assert_eq!(u.to_string(), "https://u:****@h.example/r");
        assert_eq!(format!("{u:?}"), "\"https://u:****@h.example/r\"");
        assert_eq!(
            redact("git said: auth failed for another-pass"),
            "git said: auth failed for ****"
        );
        assert_eq!(u.public(), "https://h.example/r");
    }

    /// The umask is the process's: [`a_cache_others_can_write_to_is_refused`] sets it to 0 for
    /// a moment, and a directory another test thread made then came out world-writable (seen
    /// in a quick loop). The tests that make files hold this.
    static UMASK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn umask_held() -> std::sync::MutexGuard<'static, ()> {
        UMASK.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn a_cache_inside_a_python_environment_is_refused() {
        let _held = umask_held();
        let d = tempfile::tempdir().unwrap();
        let venv = d.path().join("venv");
        std::fs::create_dir_all(venv.join("lib/python3.11/site-packages")).unwrap();
        assert_eq!(check_cache_dir(&venv.join("cache")), Ok(()));
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        for inside in [
            venv.join("cache"),
            venv.join("lib/python3.11/site-packages/x/.cache"),
        ] {
            let e = check_cache_dir(&inside).unwrap_err();
            assert!(e.contains("inside the Python environment"), "{e}");
        }
        let e = check_cache_dir(&d.path().join("usr/lib/python3/dist-packages/c")).unwrap_err();
        assert!(e.contains("dist-packages"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_cache_others_can_write_to_is_refused() {
        let _held = umask_held();
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let mine = d.path().join("cache");
        std::fs::create_dir(&mine).unwrap();
        assert_eq!(check_cache_dir(&mine), Ok(()));
        assert_eq!(check_cache_dir(&mine.join("not-yet")), Ok(()));
        // A world-writable parent without the sticky bit, even ours: anyone could make the
        // cache there first.
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_cache_dir(&mine.join("x")).unwrap_err();
        assert!(e.contains("without the sticky bit"), "{e}");
        // Ours, but others can write to it: refused as OpenSSH refuses such a ~/.ssh.
        let e = check_cache_dir(&mine).unwrap_err();
        assert!(
            e.contains("everyone can write") && e.contains("chmod go-w"),
            "{e}"
        );
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o770)).unwrap();
        let e = check_cache_dir(&mine).unwrap_err();
        assert!(e.contains("your group can write"), "{e}");
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(check_cache_dir(&mine.join("x")), Ok(()));
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
        // /tmp is root's and sticky: a new cache there is fine; /tmp itself as the cache is not
        // (others write there), not even for root.
        assert_eq!(
            check_cache_dir(std::path::Path::new("/tmp/rocbuild-cache-test-none")),
            Ok(())
        );
        assert!(check_cache_dir(std::path::Path::new("/tmp")).is_err());
        // A file never comes out world-writable, whatever the umask.
        let f = mine.join("log");
        let old = unsafe { libc::umask(0) };
        let made = create_file(&f).map(|_| ());
        unsafe { libc::umask(old) };
        made.unwrap();
        let mode = std::fs::metadata(&f).unwrap().permissions().mode();
        assert_eq!(mode & 0o022, 0, "{mode:o}");
    }

    #[test]
    fn secret_names() {
        for n in [
            "TWINE_PASSWORD",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "MY_API_KEY",
            "sccache_redis_password",
            "SCCACHE_AZURE_CONNECTION_STRING",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "PATH",
            "HOME",
            "SCCACHE_DIR",
            "CMAKE_BUILD_TYPE",
            "SCCACHE_BUCKET",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
        assert_eq!(redact_setting("TWINE_PASSWORD", "x"), "****");
        assert_eq!(
            redact_setting("SCCACHE_REDIS", "redis://:pw@h:1"),
            "redis://:****@h:1"
        );
    }

    proptest! {
        /// Whatever the password and the text around the URL, the password is never in the
        /// redacted text, and host and path always are.
        #[test]
        fn the_password_never_survives(
            user in "[a-z]{0,6}",
            pass in "[A-Za-z0-9_.~!$&()+,;=%-]{1,24}",
            host in "[a-z]{3,10}\\.example",
            path in "(/[a-z0-9]{1,8}){0,3}",
            before in "[ -~]{0,20}",
        ) {
            let url = format!("https://{user}:{pass}@{host}{path}");
            let text = format!("{before} {url} end");
            let out = redact(&text).into_owned();
            let shown = format!("https://{user}:****@{host}{path}");
            prop_assert!(out.contains(&shown), "{out}");
            prop_assert!(!out.contains(&format!(":{pass}@")), "{out}");
        }
    }
}
