//! `rocbuild restore`: put back what a build replaced.

use miette::Result;
use rocbuild_engine::usecase;

use crate::cli::RestoreArgs;
use crate::settings::Settings;
use crate::{ExitStatus, Stderr};

pub fn restore(a: &RestoreArgs, st: &Settings) -> Result<ExitStatus> {
    let (site, r) = usecase::restore(&st.venv(&a.venv)?, &a.recipe, a.no_wait, &mut Stderr)?;
    if r.released {
        outln!(
            "{}: another installer replaced rocbuild's build since; its install is left as it is, \
             rocbuild's record of the package is gone ({})",
            r.recipe,
            site.display()
        );
    } else {
        outln!(
            "{} restored to the venv as it was before rocbuild took it over ({})",
            r.recipe,
            site.display()
        );
    }
    for f in &r.restored {
        outln!("  restored: {f}");
    }
    for f in &r.removed {
        outln!("  removed:  {f}");
    }
    for f in &r.left {
        outln!("  left:     {f} (not rocbuild's: another installer's, or added by hand)");
    }
    Ok(ExitStatus::Success)
}
