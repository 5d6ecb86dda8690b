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
use rocbuild_probe::platform::state_files as host_files;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::{Result, VenvError};

/// The key file's name in the cache.
pub const KEY_FILE: &str = "journal.key";
const KEY_LEN: usize = 32;
/// Domain separation: a seal of a journal is never a manifest's, nor the other way round.
const JOURNAL: &[u8] = b"rocbuild journal seal v3\n";
const MANIFEST: &[u8] = b"rocbuild manifest seal v1\n";

/// Where the key lives, or why there is no safe place for it.
static KEY_DIR: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();

/// The settings step names the directory of the key (rocbuild's cache), once per process,
/// or says why there is none it can use (no cache; a cache others can write to or inside a
/// venv): then journals and manifests can be neither written nor trusted, and the error says
/// that reason.
pub fn configure(dir: std::result::Result<PathBuf, String>) {
    let _ = KEY_DIR.set(dir);
}

/// Unit tests: one private key directory for the whole test process.
#[cfg(test)]
pub(crate) fn configure_for_tests() {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let d = DIR.get_or_init(|| {
        // One directory per test process, private as the checks require.
        let d = std::env::temp_dir().join(format!(
            "rocbuild-venv-unit-test-key-{}",
            std::process::id()
        ));
        let _ = std::fs::create_dir_all(&d);
        d
    });
    configure(Ok(d.clone()));
}

fn key_dir() -> std::result::Result<&'static Path, &'static str> {
    match KEY_DIR.get() {
        Some(Ok(d)) => Ok(d),
        Some(Err(why)) => Err(why),
        None => Err("no cache directory is known: set ROCBUILD_CACHE or HOME, or pass --cache"),
    }
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
        hex(&self.mac(JOURNAL, site, txn, text).finalize().into_bytes())
    }

    /// Does `seal` seal exactly this journal? (Constant-time comparison.)
    pub fn verifies(&self, site: &Path, txn: &str, text: &str, seal: &str) -> bool {
        self.check(JOURNAL, site, txn, text, seal)
    }

    /// The seal of `text`, the manifest of `recipe` in the venv whose site-packages is `site`.
    pub fn seal_manifest(&self, site: &Path, recipe: &str, text: &str) -> String {
        hex(&self
            .mac(MANIFEST, site, recipe, text)
            .finalize()
            .into_bytes())
    }

    /// Does `seal` seal exactly this manifest?
    pub fn verifies_manifest(&self, site: &Path, recipe: &str, text: &str, seal: &str) -> bool {
        self.check(MANIFEST, site, recipe, text, seal)
    }

    fn check(&self, context: &[u8], site: &Path, id: &str, text: &str, seal: &str) -> bool {
        let Some(bytes) = unhex(seal) else {
            return false;
        };
        self.mac(context, site, id, text)
            .verify_slice(&bytes)
            .is_ok()
    }

    fn mac(&self, context: &[u8], site: &Path, id: &str, text: &str) -> Hmac<Sha256> {
        // new_from_slice accepts a key of any length; ours is always 32 bytes.
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        m.update(context);
        let site = site_identity(site);
        for part in [site.as_slice(), id.as_bytes(), text.as_bytes()] {
            m.update(&(part.len() as u64).to_le_bytes());
            m.update(part);
        }
        m
    }
}

/// The venv a seal belongs to: its site-packages directory itself (device, inode and birth
/// time; Windows: volume, file index and creation time), not its path. A renamed or moved
/// venv keeps its state; a copy of the state in another venv never verifies, even once that
/// venv is renamed into the first one's path. A site-packages that cannot be identified (it
/// is gone) is named by its path's bytes, never converted lossily.
fn site_identity(site: &Path) -> Vec<u8> {
    match host_files::dir_identity(site) {
        Ok(id) => id,
        Err(_) => {
            let mut v = b"path\0".to_vec();
            v.extend_from_slice(site.as_os_str().as_encoded_bytes());
            v
        }
    }
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
    let dir = key_dir().map_err(no_key_dir)?;
    match read_key(dir)? {
        Some(k) => Ok(k),
        None => create_key(dir),
    }
}

/// The key if there is one: for recovery (no key file means no journal of this user's can
/// exist, so any journal found is not rocbuild's). A cache or key that fails the checks is
/// an error that says why and how to fix it.
pub fn for_reading() -> Result<Option<StateKey>> {
    read_key(key_dir().map_err(no_key_dir)?)
}

fn no_key_dir(why: &str) -> VenvError {
    VenvError::KeyRefused {
        path: "rocbuild's cache".into(),
        why: why.to_string(),
        help: "give rocbuild a cache directory of your own that no one else can write to and that is not inside a Python environment: --cache DIR or ROCBUILD_CACHE=DIR (the default is ~/.cache/rocbuild)".into(),
    }
}

fn key_refused(p: &Path, why: String) -> VenvError {
    VenvError::KeyRefused {
        path: p.display().to_string(),
        help: "rocbuild changed nothing; fix the key as said, then run the command again".into(),
        why,
    }
}

fn read_key(dir: &Path) -> Result<Option<StateKey>> {
    // A first run making the key links it into place, then unlinks its temp name: for that
    // instant the key has two links. Look again a few times before refusing it.
    let mut tries = 0;
    loop {
        match read_key_once(dir) {
            Err(Refused::Checks(_)) if tries < 10 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(Refused::Checks(e) | Refused::Other(e)) => return Err(e),
            Ok(k) => return Ok(k),
        }
    }
}

enum Refused {
    /// The key failed the owner, mode or link-count checks.
    Checks(VenvError),
    Other(VenvError),
}

fn read_key_once(dir: &Path) -> std::result::Result<Option<StateKey>, Refused> {
    let p = dir.join(KEY_FILE);
    let f = match host_files::open_regular(&p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            return Err(Refused::Other(key_refused(
                &p,
                format!(
                    "{e}; remove it (`rm '{}'`): rocbuild makes a new one",
                    p.display()
                ),
            )))
        }
        Err(e) => return Err(Refused::Other(VenvError::io("read the journal key", &p)(e))),
    };
    host_files::check_private_file(&f, &p).map_err(|why| Refused::Checks(key_refused(&p, why)))?;
    let mut buf = Vec::new();
    f.take(KEY_LEN as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Refused::Other(VenvError::io("read the journal key", &p)(e)))?;
    let bytes: [u8; KEY_LEN] = buf.try_into().map_err(|b: Vec<u8>| {
        Refused::Other(key_refused(
            &p,
            format!(
                "it holds {}{} bytes, not {KEY_LEN}: remove it (`rm '{}'`): rocbuild makes a new one",
                if b.len() > KEY_LEN { "more than " } else { "" },
                b.len().min(KEY_LEN),
                p.display()
            ),
        ))
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
        // A link to /dev/zero is neither followed nor read without bound.
        std::fs::remove_file(d.path().join(KEY_FILE)).unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/dev/zero", d.path().join(KEY_FILE)).unwrap();
            let e = read_key(d.path()).unwrap_err().to_string();
            assert!(e.contains("a link") && e.contains("rm "), "{e}");
        }
    }
}
