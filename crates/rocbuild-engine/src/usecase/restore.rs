//! The restore use case: put back what a build replaced.

use std::path::PathBuf;

use rocbuild_probe::Venv;
use rocbuild_venv::restore::Restored;

use super::{locate, lock_and_recover, Reporter};
use crate::error::Result;

/// Give the venv back pip's files of `recipe`.
pub fn restore(
    venv: &Venv,
    recipe: &str,
    no_wait: bool,
    reporter: &mut dyn Reporter,
) -> Result<(PathBuf, Restored)> {
    let layout = locate(venv)?;
    let _lock = lock_and_recover(&layout, no_wait, reporter)?;
    let r = rocbuild_venv::restore::restore(&layout.site, recipe)?;
    Ok((layout.site, r))
}
