//! The source of a recipe built from a PyPI sdist (`[source] sdist`): the release's file,
//! found offline or downloaded, checked against the recipe's sha256, unpacked once into the
//! cache. Another file under the same name is refused, never built.

use std::path::PathBuf;

use crate::error::Result;
use crate::plan::SourcePlan;
use crate::step::RunLog;

/// The unpacked source, and what the manifest records as its revision (`sdist sha256:…`).
pub fn prepare(source: &SourcePlan, log: &mut RunLog) -> Result<(PathBuf, Option<String>)> {
    let SourcePlan::Sdist {
        project,
        version,
        sha256,
        index,
        offline,
        downloads,
        unpacked,
    } = source
    else {
        return Ok((source.dir().to_path_buf(), None));
    };
    let revision = Some(format!("sdist sha256:{sha256}"));
    let marker = unpacked.join(".rocbuild-sdist-sha256");
    log.note(&format!(
        "source: {project} {version} (sdist, sha256 {})",
        &sha256[..12.min(sha256.len())]
    ));
    // Concurrent runs share the unpacked tree: one at a time prepares it.
    let _lock = crate::cache_lock::CacheLock::acquire(
        &downloads.join(format!("lock-{}", &sha256[..16.min(sha256.len())])),
    )?;
    if std::fs::read_to_string(&marker).is_ok_and(|s| s.trim() == sha256) {
        return Ok((unpacked.clone(), revision));
    }
    let file = match rocbuild_fetch::find_offline(offline, project, version, sha256)? {
        Some(f) => {
            log.note(&format!("sdist: {} (offline)", f.display()));
            f
        }
        None => {
            let url = rocbuild_fetch::index_url(index, project, version, sha256)?;
            log.note(&format!("sdist: {url}"));
            rocbuild_fetch::download_verified(&url, sha256, downloads)?
        }
    };
    rocbuild_fetch::extract_sdist(&file, unpacked)?;
    std::fs::write(&marker, sha256).map_err(crate::error::EngineError::io("write", &marker))?;
    Ok((unpacked.clone(), revision))
}
