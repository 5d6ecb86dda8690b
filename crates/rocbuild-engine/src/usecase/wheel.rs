//! The wheel use case: a wheel of what rocbuild installed.

use std::path::Path;

use rocbuild_probe::Venv;

use super::{locate, lock_and_recover, Reporter};
use crate::error::{EngineError, Result};

/// A wheel of what rocbuild installed for `recipe`, tagged for the venv's Python.
pub fn wheel(
    venv: &Venv,
    recipe: &str,
    out: &Path,
    reporter: &mut dyn Reporter,
) -> Result<rocbuild_venv::wheel::Built> {
    let layout = locate(venv)?;
    let _lock = lock_and_recover(&layout, false, reporter)?;
    let tags = crate::build_system::cmake::extension::tags_of_venv(&layout)?;
    let out = std::path::absolute(out).map_err(EngineError::io("resolve", out))?;
    Ok(rocbuild_venv::wheel::build_wheel(
        &layout.site,
        recipe,
        &tags,
        &out,
    )?)
}
