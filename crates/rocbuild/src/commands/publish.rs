//! `rocbuild publish`: upload built wheels to the team's index.

use miette::Result;
use rocbuild_engine::usecase;

use crate::cli::{Global, PublishArgs};
use crate::settings as env;
use crate::{ExitStatus, Stderr};

pub fn publish(a: &PublishArgs, g: &Global) -> Result<ExitStatus> {
    let cache = env::cache(g)?;
    let p = usecase::publish(
        &env::venv(&a.venv)?,
        &a.recipe,
        &a.index,
        &cache,
        a.dry_run,
        env::twine_configured(),
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
