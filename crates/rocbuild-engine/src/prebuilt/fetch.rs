//! Install from an index, the I/O half: read the index pages (`--index`, PEP 503) and the
//! `--find-links` directories, then download, unpack and check the candidates whose names
//! fit (see [`super`]) until one passes. Nothing here touches the venv: the
//! wheel is unpacked under the cache, and a wheel that passes is installed by `run()` through
//! the build's own transaction.

use std::path::{Path, PathBuf};

use rocbuild_doctor::Subject;
use rocbuild_probe::Machine;
use rocbuild_venv::wheel::Tags;

use super::{
    candidates, check_torch, project_page, torch_dist, wanted, Candidate, IndexPlan, Listed,
    PrebuiltInstall,
};
use crate::error::{EngineError, Result};
use crate::plan::Plan;

/// List every file the indexes and directories of the plan's options offer, judged by name.
pub fn look(plan: &Plan, tags: Option<Tags>) -> Result<IndexPlan> {
    let want = wanted(plan, tags);
    let mut sources = Vec::new();
    let mut listed: Vec<(String, Listed)> = Vec::new();
    for index in &plan.options.index {
        let page = project_page(index, &plan.install.distribution);
        match rocbuild_fetch::get_text(&page) {
            Ok(Some(html)) => {
                let files = crate::index::parse_simple_page(&page, &html).map_err(|reason| {
                    EngineError::IndexMalformed {
                        page: page.clone(),
                        reason,
                    }
                })?;
                listed.extend(files.into_iter().map(|l| (page.clone(), l)));
            }
            // PEP 503: no page, no such project on this index.
            Ok(None) => {}
            Err(rocbuild_fetch::FetchError::HttpStatus { status, .. }) => {
                return Err(EngineError::IndexUnreachable {
                    index: index.clone(),
                    reason: format!("{page} answered HTTP {status}"),
                })
            }
            Err(rocbuild_fetch::FetchError::Request { reason, .. }) => {
                return Err(EngineError::IndexUnreachable {
                    index: index.clone(),
                    reason: format!("GET {page}: {reason}"),
                })
            }
            Err(e) => {
                return Err(EngineError::IndexUnreachable {
                    index: index.clone(),
                    reason: e.to_string(),
                })
            }
        }
        sources.push(page);
    }
    for dir in &plan.options.find_links {
        let rd = std::fs::read_dir(dir).map_err(|e| EngineError::FindLinks {
            dir: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        let mut files: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "whl"))
            .collect();
        files.sort();
        let source = dir.display().to_string();
        for p in files {
            let file = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            listed.push((
                source.clone(),
                Listed {
                    file,
                    url: p.display().to_string(),
                    sha256: None,
                },
            ));
        }
        sources.push(source);
    }
    let name = plan.install.distribution.replace('-', "_");
    Ok(IndexPlan {
        sources,
        wanted: format!("{name}-{}+{}-…", want.version, want.local),
        candidates: candidates(listed, &want),
    })
}

/// Download (or take from the directory), unpack and check one candidate whose name fits:
/// its sha256 (when the index gave one), its `Requires-Dist` torch and rocbuild.json against
/// the venv's torch, and its native libraries with doctor's ABI check. Why it does not pass,
/// as one line, when it does not.
pub fn fetch_and_check(
    plan: &Plan,
    machine: &Machine,
    c: &Candidate,
    cache: &Path,
    env: &rocbuild_probe::ProbeEnv,
) -> std::result::Result<PrebuiltInstall, String> {
    let dir = cache.join("index").join(&plan.recipe);
    let wheel = if c.listed.url.contains("://") {
        rocbuild_fetch::download(
            &c.listed.url,
            c.listed.sha256.as_deref(),
            &dir.join("wheels"),
        )
        .map_err(|e| match e {
            rocbuild_fetch::FetchError::ChecksumMismatch {
                expected, actual, ..
            } => format!("its sha256 is {actual}, the index says {expected}: not downloaded"),
            e @ rocbuild_fetch::FetchError::NoSpace { .. } => e.to_string(),
            e => format!("download failed: {e}"),
        })?
    } else {
        PathBuf::from(&c.listed.url)
    };
    let sha256 = rocbuild_fetch::sha256_file(&wheel).map_err(|e| e.to_string())?;
    let unpacked = dir.join("unpacked").join(&sha256[..16]);
    // A full disk while unpacking is no fault of the wheel's.
    rocbuild_fetch::extract_zip_safely(&wheel, &unpacked).map_err(|e| match e {
        e @ rocbuild_fetch::FetchError::NoSpace { .. } => e.to_string(),
        e => format!("not a readable wheel: {e}"),
    })?;
    let di = std::fs::read_dir(&unpacked)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "dist-info"))
        .ok_or("no .dist-info in it: not a wheel")?;
    let metadata = std::fs::read_to_string(di.join("METADATA")).unwrap_or_default();
    let info: serde_json::Value = std::fs::read_to_string(di.join("rocbuild.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or("no rocbuild.json in its dist-info: not made by `rocbuild wheel`")?;
    if let Some(r) = check_torch(
        plan,
        torch_dist(machine).as_deref(),
        requires_torch(&metadata).as_deref(),
        &info,
    ) {
        return Err(r);
    }
    let libs: Vec<PathBuf> = crate::install::stage::collect_artifacts(
        &unpacked.join(&plan.install.import_dir),
        &plan.install.artifacts,
    )
    .map_err(|e| e.to_string())?
    .into_values()
    .collect();
    if libs.is_empty() {
        return Err(format!(
            "none of its files is a library the recipe installs ({})",
            plan.install.artifacts.join(", ")
        ));
    }
    let subject = Subject {
        name: plan.recipe.clone(),
        import_dir: plan.install.import_dir.clone(),
        distribution: plan.install.distribution.clone(),
        recipe: Some(plan.recipe.clone()),
        ffmpeg: plan.ffmpeg_major.is_some(),
        torch: plan.torch_version.is_some(),
        stock_pip: None,
        // The folders the install's DLL preload hook adds (`[install] finds`: torch's and
        // FFmpeg's DLLs on Windows): the wheel's DLLs find theirs there once installed.
        dll_dirs: (!plan.install.finds.is_empty()).then(|| rocbuild_doctor::DllDirs {
            dirs: plan
                .install
                .finds
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            in_one_try: false,
        }),
        loads_one_of: Vec::new(),
    };
    if let Some(f) = rocbuild_doctor::check_libraries(machine, &subject, &libs, env)
        .into_iter()
        .next()
    {
        return Err(match f.details.first() {
            Some(d) => format!("ABI check: {}: {d}", f.what),
            None => format!("ABI check: {}", f.what),
        });
    }
    Ok(PrebuiltInstall {
        file: c.listed.file.clone(),
        url: c.listed.url.clone(),
        sha256,
        index: c.source.clone(),
        wheel,
        unpacked,
        commit: info
            .get("source_commit")
            .and_then(|v| v.as_str())
            .map(str::to_string),
    })
}

/// `Requires-Dist: torch==X` of a METADATA: X.
fn requires_torch(metadata: &str) -> Option<String> {
    let headers = metadata.split("\n\n").next().unwrap_or("");
    headers.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if !k.trim().eq_ignore_ascii_case("requires-dist") {
            return None;
        }
        let v = v.split(';').next()?.trim();
        let name_end = v
            .find(|c: char| !(c.is_alphanumeric() || "-_.".contains(c)))
            .unwrap_or(v.len());
        if rocbuild_probe::normalize_dist(&v[..name_end]) != "torch" {
            return None;
        }
        v[name_end..]
            .trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .strip_prefix("==")
            .map(|x| x.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_torch_pin_is_read_from_metadata() {
        let m = "Metadata-Version: 2.1\nName: x\nRequires-Dist: numpy\nRequires-Dist: torch==2.9.1\n\nRequires-Dist: torch==0\n";
        assert_eq!(super::requires_torch(m).as_deref(), Some("2.9.1"));
        assert_eq!(
            super::requires_torch("Name: x\nRequires-Dist: torch>=2\n"),
            None
        );
        assert_eq!(super::requires_torch("Name: x\n"), None);
    }
}
