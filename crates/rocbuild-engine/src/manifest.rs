//! What rocbuild installed into a venv, and against what: `site-packages/.rocbuild/<recipe>.json`.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{EngineError, Result};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InstalledFile {
    /// Relative to site-packages, with `/`.
    pub path: String,
    pub sha256: String,
    pub size: u64,
    /// sha256 of the build's file before rocbuild edited it (RUNPATH), for no-op detection.
    #[serde(default)]
    pub built_sha256: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub schema: u32,
    pub recipe: String,
    pub version: String,
    pub recipe_hash: String,
    pub fingerprint: String,
    pub source_url: Option<String>,
    pub source_commit: Option<String>,
    pub torch_version: Option<String>,
    pub torch_git: Option<String>,
    pub flavor: String,
    pub ffmpeg_major: Option<u32>,
    pub python: String,
    pub defines: BTreeMap<String, String>,
    pub runpath: Vec<String>,
    pub files: Vec<InstalledFile>,
    /// The wheel's files moved to the backup (relative to site-packages).
    pub parked: Vec<String>,
    /// Seconds since the epoch.
    pub installed_at: u64,
}

pub fn dir(site: &Path) -> PathBuf {
    site.join(".rocbuild")
}

pub fn path(site: &Path, recipe: &str) -> PathBuf {
    dir(site).join(format!("{recipe}.json"))
}

pub fn read(site: &Path, recipe: &str) -> Option<Manifest> {
    let text = fs_err::read_to_string(path(site, recipe)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Write atomically: a temp file beside, then rename.
pub fn write(site: &Path, m: &Manifest) -> Result<()> {
    let p = path(site, &m.recipe);
    let tmp = p.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(m).unwrap_or_default();
    fs_err::write(&tmp, text).map_err(EngineError::io("write", &tmp))?;
    fs_err::rename(&tmp, &p).map_err(EngineError::io("write", &p))
}

pub fn sha256_file(p: &Path) -> Result<(String, u64)> {
    let mut f = fs_err::File::open(p).map_err(EngineError::io("read", p))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(EngineError::io("read", p))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok((
        h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
        size,
    ))
}
