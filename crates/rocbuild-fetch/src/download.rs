//! `download_verified`: stream, hash, compare, then rename into place.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::{io, FetchError};

fn normalize_sha256(given: &str) -> Result<String, FetchError> {
    let s = given.trim().to_ascii_lowercase();
    if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(s)
    } else {
        Err(FetchError::BadSha256 {
            given: given.to_string(),
        })
    }
}

/// The last path segment of a URL, if it is a plain file name.
fn file_name_of(url: &str) -> Option<String> {
    let path = url.split(['?', '#']).next()?;
    let name = path.rsplit('/').next()?;
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['\\', ':'])
        && path.contains("://");
    // `fakecodec-1.0.0%2Bcpu-….whl` is saved as `fakecodec-1.0.0+cpu-….whl`.
    let name = percent_encoding::percent_decode_str(name)
        .decode_utf8()
        .ok()?
        .into_owned();
    (ok && !name.contains(['/', '\\', ':']) && name != "..").then_some(name)
}

/// sha256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, FetchError> {
    let mut f = std::fs::File::open(path).map_err(io("open", path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(io("read", path))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn request_error(url: &str) -> impl Fn(reqwest::Error) -> FetchError + '_ {
    move |e: reqwest::Error| FetchError::Request {
        url: url.to_string(),
        // reqwest's Display hides the cause (connection refused, DNS, TLS): show the chain.
        reason: {
            let mut s = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(c) = src {
                s.push_str(": ");
                s.push_str(&c.to_string());
                src = c.source();
            }
            s
        },
    }
}

fn client(url: &str, timeout: Duration) -> Result<reqwest::blocking::Client, FetchError> {
    reqwest::blocking::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .timeout(timeout)
        .user_agent(concat!("rocbuild/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(request_error(url))
}

/// The body of `url` as text (a package index's simple page). `Ok(None)` for HTTP 404 (PEP 503:
/// the index has no such project).
pub fn get_text(url: &str) -> Result<Option<String>, FetchError> {
    let resp = client(url, Duration::from_secs(120))?
        .get(url)
        .header("Accept", "text/html")
        .send()
        .map_err(request_error(url))?;
    let status = resp.status();
    if status.as_u16() == 404 {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(FetchError::HttpStatus {
            url: url.to_string(),
            status: status.as_u16(),
        });
    }
    resp.text().map(Some).map_err(request_error(url))
}

/// Download `url` into `dest_dir/<file name>`; checked against `sha256` when one is given
/// (an index's `#sha256=` fragment), as [`download_verified`] does. Without a checksum the
/// file is fetched again every time.
pub fn download(url: &str, sha256: Option<&str>, dest_dir: &Path) -> Result<PathBuf, FetchError> {
    match sha256 {
        Some(s) => download_verified(url, s, dest_dir),
        None => fetch(url, None, dest_dir),
    }
}

/// Download `url` into `dest_dir/<file name>` if its sha256 is `sha256`.
///
/// A file already there with the right checksum is reused (no request). The body streams into
/// a temporary file in `dest_dir`, hashed on the way; on a mismatch the temporary file is
/// removed and the error names both checksums. Only a verified file is renamed into place.
pub fn download_verified(url: &str, sha256: &str, dest_dir: &Path) -> Result<PathBuf, FetchError> {
    let expected = normalize_sha256(sha256)?;
    fetch(url, Some(&expected), dest_dir)
}

fn fetch(url: &str, expected: Option<&str>, dest_dir: &Path) -> Result<PathBuf, FetchError> {
    let url = url.split('#').next().unwrap_or(url);
    let name = file_name_of(url).ok_or_else(|| FetchError::BadUrl {
        url: url.to_string(),
    })?;
    std::fs::create_dir_all(dest_dir).map_err(io("create", dest_dir))?;
    let dest = dest_dir.join(&name);
    if let Some(expected) = expected {
        if dest.is_file() && sha256_file(&dest)? == expected {
            return Ok(dest);
        }
    }
    // Large archives on slow links: bound the whole transfer generously, not per chunk.
    let mut resp = client(url, Duration::from_secs(60 * 60))?
        .get(url)
        .send()
        .map_err(request_error(url))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(FetchError::HttpStatus {
            url: url.to_string(),
            status: status.as_u16(),
        });
    }

    let mut tmp = tempfile::Builder::new()
        .prefix(".rocbuild-download-")
        .tempfile_in(dest_dir)
        .map_err(io("create a temporary file in", dest_dir))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = resp.read(&mut buf).map_err(|e| FetchError::Request {
            url: url.to_string(),
            reason: format!("the transfer broke off: {e}"),
        })?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        tmp.write_all(&buf[..n]).map_err(io("write", tmp.path()))?;
    }
    let actual = hex(&hasher.finalize());
    if let Some(expected) = expected.filter(|e| *e != actual) {
        // Dropping the NamedTempFile deletes it.
        drop(tmp);
        return Err(FetchError::ChecksumMismatch {
            url: url.to_string(),
            expected: expected.to_string(),
            actual,
        });
    }
    tmp.as_file().sync_all().map_err(io("sync", tmp.path()))?;
    tmp.persist(&dest)
        .map_err(|e| io("move the download to", &dest)(e.error))?;
    Ok(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_and_checksums() {
        assert_eq!(
            file_name_of("https://x.org/a/ffmpeg-7.1.1-full_build-shared.zip?raw=1").as_deref(),
            Some("ffmpeg-7.1.1-full_build-shared.zip")
        );
        assert_eq!(file_name_of("https://x.org/a/"), None);
        assert_eq!(file_name_of("https://x.org/a/.."), None);
        assert_eq!(file_name_of("ffmpeg.zip"), None);
        assert_eq!(
            file_name_of("http://127.0.0.1:1/packages/a-1.0%2Bcpu-py3-none-any.whl#sha256=00")
                .as_deref(),
            Some("a-1.0+cpu-py3-none-any.whl")
        );
        assert_eq!(file_name_of("http://h/p/..%2F..%2Fx"), None);
        assert!(normalize_sha256(&"AB".repeat(32)).is_ok());
        assert!(matches!(
            normalize_sha256("abc"),
            Err(FetchError::BadSha256 { .. })
        ));
        assert!(normalize_sha256(&"g".repeat(64)).is_err());
    }
}
