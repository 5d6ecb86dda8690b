//! How rocbuild tells its own journals from planted ones.
//!
//! Everything under a venv can be written by any wheel pip installs (`site-packages/` by its
//! files, the venv root by its `.data/data/`), so a journal found in `.rocbuild/` proves
//! nothing by being there. Each journal is therefore sealed: an HMAC-SHA256, under a 32-byte
//! key that only this user's rocbuild holds, over the venv's site-packages path, the
//! transaction's random id and the journal's exact text. The key lives in rocbuild's cache
//! (`<cache>/journal.key`, mode 0600 on Unix), a directory the settings step has checked to
//! be this user's own and that no venv, wheel or recipe writes. A journal is replayed only
//! when its seal verifies; any other journal (planted, edited, copied from another venv, or
//! written by a rocbuild before journals were sealed) is reported and never acted on.
//!
//! The key's directory is given once, by the settings step ([`configure`]): commands that
//! write journals need it ([`for_writing`] creates the key on first use); commands that only
//! recover need it to exist ([`for_reading`]), and without it no journal can be trusted.

use rocbuild_probe::platform::host;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::{Result, VenvError};

/// The key file's name in the cache.
pub const KEY_FILE: &str = "journal.key";
const KEY_LEN: usize = 32;
/// Domain separation: a seal of anything else under the same key is never a journal's.
const CONTEXT: &[u8] = b"rocbuild journal seal v2\n";

static KEY_DIR: OnceLock<Option<PathBuf>> = OnceLock::new();

/// The settings step names the directory of the key (rocbuild's cache), once per process;
/// `None` when there is no cache (then journals can be neither written nor trusted).
pub fn configure(dir: Option<PathBuf>) {
    let _ = KEY_DIR.set(dir);
}

/// Unit tests: one private key directory for the whole test process.
#[cfg(test)]
pub(crate) fn configure_for_tests() {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let d = DIR.get_or_init(|| {
        // One fixed directory: every test run reuses the same key, nothing piles up.
        let d = std::env::temp_dir().join("rocbuild-venv-unit-test-key");
        let _ = std::fs::create_dir_all(&d);
        d
    });
    configure(Some(d.clone()));
}

fn key_dir() -> Option<&'static Path> {
    KEY_DIR.get().and_then(|d| d.as_deref())
}

/// A user's journal key.
#[derive(Clone)]
pub struct StateKey([u8; KEY_LEN]);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(****)")
    }
}

impl StateKey {
    /// A key from bytes (tests).
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> StateKey {
        StateKey(bytes)
    }

    /// The seal of `text`, a journal of the venv whose site-packages is `site`, in
    /// transaction `txn`.
    pub fn seal(&self, site: &Path, txn: &str, text: &str) -> String {
        let mac = self.mac(site, txn, text).finalize().into_bytes();
        hex(&mac)
    }

    /// Does `seal` seal exactly this? (Constant-time comparison.)
    pub fn verifies(&self, site: &Path, txn: &str, text: &str, seal: &str) -> bool {
        let Some(bytes) = unhex(seal) else {
            return false;
        };
        self.mac(site, txn, text).verify_slice(&bytes).is_ok()
    }

    fn mac(&self, site: &Path, txn: &str, text: &str) -> Hmac<Sha256> {
        // new_from_slice accepts a key of any length; ours is always 32 bytes.
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        m.update(CONTEXT);
        let site = site_identity(site);
        for part in [site.as_bytes(), txn.as_bytes(), text.as_bytes()] {
            m.update(&(part.len() as u64).to_le_bytes());
            m.update(part);
        }
        m
    }
}

/// The venv a journal belongs to, as the seal names it: its site-packages, resolved (the same
/// venv reached through another path still verifies; a journal copied to another venv not).
fn site_identity(site: &Path) -> String {
    dunce::canonicalize(site)
        .unwrap_or_else(|_| site.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

/// A fresh random transaction id (16 bytes, hex).
pub fn new_txn_id() -> Result<String> {
    let mut b = [0u8; 16];
    getrandom::getrandom(&mut b).map_err(|e| VenvError::Io {
        action: "draw a random transaction id".into(),
        path: "the system's random source".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(hex(&b))
}

/// The key, created on first use: for commands that write journals.
pub fn for_writing() -> Result<StateKey> {
    let Some(dir) = key_dir() else {
        return Err(no_key_dir());
    };
    match read_key(dir)? {
        Some(k) => Ok(k),
        None => create_key(dir),
    }
}

/// The key if there is one: for recovery (no key file means no journal of this user's can
/// exist, so any journal found is not rocbuild's).
pub fn for_reading() -> Result<Option<StateKey>> {
    match key_dir() {
        Some(dir) => read_key(dir),
        None => Ok(None),
    }
}

fn no_key_dir() -> VenvError {
    VenvError::Io {
        action: "find rocbuild's cache, where the key that seals its journals lives".into(),
        path: "(no cache directory)".into(),
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no cache directory is known: set ROCBUILD_CACHE or HOME, or pass --cache",
        ),
    }
}

fn read_key(dir: &Path) -> Result<Option<StateKey>> {
    let p = dir.join(KEY_FILE);
    let mut f = match open_nofollow(&p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(VenvError::io("read the journal key", &p)(e)),
    };
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)
        .map_err(VenvError::io("read the journal key", &p))?;
    let bytes: [u8; KEY_LEN] = buf.try_into().map_err(|b: Vec<u8>| VenvError::Io {
        action: "read the journal key".into(),
        path: p.display().to_string(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "it holds {} bytes, not {KEY_LEN}: remove it (rocbuild makes a new one)",
                b.len()
            ),
        ),
    })?;
    Ok(Some(StateKey(bytes)))
}

/// Write a new key beside its final name and link it into place: two runs that start at once
/// end up with the same key (the loser reads the winner's).
fn create_key(dir: &Path) -> Result<StateKey> {
    fs_err::create_dir_all(dir).map_err(VenvError::io("create", dir))?;
    let mut bytes = [0u8; KEY_LEN];
    getrandom::getrandom(&mut bytes).map_err(|e| VenvError::Io {
        action: "draw a journal key".into(),
        path: dir.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })?;
    // A name of this attempt's own (two threads or processes may be making the key at once).
    let mut tag = [0u8; 8];
    let _ = getrandom::getrandom(&mut tag);
    let tmp = dir.join(format!("{KEY_FILE}.{}.tmp", hex(&tag)));
    let _ = std::fs::remove_file(&tmp);
    let written = (|| {
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create_new(true);
        host::owner_only(&mut o);
        let mut f = o.open(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(VenvError::io("write the journal key", &tmp)(e));
    }
    let p = dir.join(KEY_FILE);
    let linked = std::fs::hard_link(&tmp, &p);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(StateKey(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            read_key(dir)?.ok_or_else(|| VenvError::io("read the journal key", &p)(e))
        }
        Err(e) => Err(VenvError::io("write the journal key", &p)(e)),
    }
}

/// Open for reading without following a link at `p` itself.
pub(crate) fn open_nofollow(p: &Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    host::open_no_follow(o, p)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_verifies_only_for_its_own_venv_txn_text_and_key() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let k = StateKey::from_bytes([7; 32]);
        let seal = k.seal(&a, "t1", "{}");
        assert!(k.verifies(&a, "t1", "{}", &seal));
        assert!(!k.verifies(&b, "t1", "{}", &seal), "another venv");
        assert!(!k.verifies(&a, "t2", "{}", &seal), "another transaction");
        assert!(!k.verifies(&a, "t1", "{ }", &seal), "edited text");
        assert!(!StateKey::from_bytes([8; 32]).verifies(&a, "t1", "{}", &seal));
        assert!(!k.verifies(&a, "t1", "{}", "zz"));
    }

    #[test]
    fn the_key_is_made_once_private_and_read_back() {
        let d = tempfile::tempdir().unwrap();
        assert!(read_key(d.path()).unwrap().is_none());
        let k1 = create_key(d.path()).unwrap();
        let k2 = read_key(d.path()).unwrap().unwrap();
        assert_eq!(k1.0, k2.0);
        // A second creator (a concurrent first run) gets the same key.
        assert_eq!(create_key(d.path()).unwrap().0, k1.0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(d.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{mode:o}");
        }
        std::fs::write(d.path().join(KEY_FILE), b"short").unwrap();
        let e = read_key(d.path()).unwrap_err().to_string();
        assert!(e.contains("5 bytes"), "{e}");
    }
}
