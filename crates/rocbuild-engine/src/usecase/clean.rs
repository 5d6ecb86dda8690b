//! The clean use case: what the cache holds by kind, and removing the kinds asked for.

use std::path::Path;

use crate::clean::{remove, usage, Kind, Usage};
use crate::error::Result;

/// What [`clean`] found and did.
pub struct Cleaned {
    /// Each kind's size and entries, before anything was removed.
    pub usage: Vec<Usage>,
    /// Bytes freed; None when nothing was asked for, or on a dry run.
    pub freed: Option<u64>,
}

/// The cache's usage; then, unless `dry_run` or `kinds` is empty, the kinds removed (each
/// entry under its lock, so a build running on it is never pulled from under it).
pub fn clean(cache: &Path, kinds: &[Kind], dry_run: bool) -> Result<Cleaned> {
    let usage = usage(cache);
    let freed = if kinds.is_empty() || dry_run {
        None
    } else {
        Some(remove(cache, kinds)?)
    };
    Ok(Cleaned { usage, freed })
}
