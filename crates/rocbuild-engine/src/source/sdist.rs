//! The source of a recipe built from a PyPI sdist (`[source] sdist`): the release's file,
//! found offline or downloaded, checked against the recipe's sha256, unpacked once into the
//! cache. Another file under the same name is refused, never built.

use std::path::PathBuf;

use crate::error::Result;
use crate::source::plan::SourcePlan;
use crate::step::RunLog;

/// The sdist from the index's project page (PEP 503, as every index serves it), checked
/// against the pinned sha256 before and after the download.
fn download(
    index: &str,
    project: &str,
    version: &str,
    sha256: &str,
    downloads: &std::path::Path,
    log: &mut RunLog,
) -> Result<PathBuf> {
    let page = format!("{}/{project}/", index.trim_end_matches('/'));
    let not_there = |what: String| rocbuild_fetch::FetchError::NotOnIndex {
        what,
        url: page.clone(),
    };
    let html =
        rocbuild_fetch::get_text(&page)?.ok_or_else(|| not_there(format!("project {project}")))?;
    let listed = crate::index::parse_simple_page(&page, &html)
        .map_err(|e| not_there(format!("readable project page ({e})")))?;
    let names = [
        rocbuild_fetch::sdist_file_name(project, version),
        format!("{project}-{version}.tar.gz"),
    ];
    let file = listed
        .iter()
        .find(|l| names.contains(&l.file))
        .ok_or_else(|| not_there(format!("sdist of {project} {version} ({})", names[0])))?;
    if let Some(l) = &file.sha256 {
        if !l.eq_ignore_ascii_case(sha256) {
            return Err(rocbuild_fetch::FetchError::ChecksumMismatch {
                url: file.url.clone(),
                expected: sha256.to_string(),
                actual: l.clone(),
            }
            .into());
        }
    }
    log.note(&format!(
        "sdist: {}",
        rocbuild_secret::strip_userinfo(&file.url)
    ));
    Ok(rocbuild_fetch::download_verified(
        &file.url, sha256, downloads,
    )?)
}

/// The unpacked source, and what the manifest records as its revision (the sdist's sha256).
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
    // The sdist's sha256 stands where a commit id would: it names the exact source.
    let revision = Some(sha256.clone());
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
        None => match rocbuild_fetch::find_offline(
            std::slice::from_ref(downloads),
            project,
            version,
            sha256,
        )? {
            Some(f) => f,
            None => download(index, project, version, sha256, downloads, log)?,
        },
    };
    rocbuild_fetch::extract_sdist(&file, unpacked)?;
    std::fs::write(&marker, sha256).map_err(crate::error::EngineError::io("write", &marker))?;
    Ok((unpacked.clone(), revision))
}
