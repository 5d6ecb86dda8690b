//! `rocbuild wheel`: a wheel of what rocbuild installed, for another venv or machine.

use miette::Result;
use rocbuild_engine::usecase;

use crate::cli::WheelArgs;
use crate::settings::Settings;
use crate::{ExitStatus, Stderr};

pub fn wheel(a: &WheelArgs, st: &Settings) -> Result<ExitStatus> {
    let w = usecase::wheel(&st.venv(&a.venv)?, &a.recipe, &a.out, &mut Stderr)?;
    outln!("{}", w.path.display());
    if let Some(t) = &w.requires_torch {
        errln!(
            "{} files; version {}; requires torch=={t}",
            w.files,
            w.version
        );
    }
    Ok(ExitStatus::Success)
}
