//! `rocbuild publish`: upload built wheels to the team's index.

use miette::Result;
use rocbuild_engine::usecase;

use crate::cli::PublishArgs;
use crate::settings::Settings;
use crate::{ExitStatus, Stderr};

pub fn publish(a: &PublishArgs, st: &Settings) -> Result<ExitStatus> {
    let cache = st.cache()?;
    let p = usecase::publish(
        &st.venv(&a.venv)?,
        &a.recipe,
        &a.index,
        &cache,
        a.dry_run,
        st.twine_configured,
        &mut Stderr,
    )?;
    if a.dry_run {
        outln!("{} (not uploaded)", p.wheel.display());
    } else {
        outln!("{} {} published to {}", a.recipe, p.version, p.index);
        outln!("  wheel: {}", p.wheel.display());
    }
    Ok(ExitStatus::Success)
}
