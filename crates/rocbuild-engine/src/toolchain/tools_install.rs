//! The build tools installed at run time, before the fetch ([`super::tools`] plans them).

use super::tools::ToolsPlan;
use crate::error::{EngineError, Result};
use crate::step::RunLog;

/// Install the tools (cmake and ninja from PyPI when the system has none, the recipe's
/// `python-build` requirements) once per set of requirements: a stamp says they are
/// complete. A failed pip install with a system fallback says that command.
pub(crate) fn install_once(t: &ToolsPlan, log: &mut RunLog) -> Result<()> {
    let ok = t.dir.join(".rocbuild-ok");
    if ok.exists() {
        return Ok(());
    }
    log.note(&format!("build tools -> {}", t.dir.display()));
    for w in &t.why {
        log.note(w);
    }
    if let Err(e) = log.run("install build tools", &t.install) {
        return Err(match (e, &t.fallback) {
            (EngineError::Step { tail, log, .. }, Some(fallback)) => EngineError::BuildTools {
                why: t.why.join("; "),
                tail,
                fallback: fallback.clone(),
                log,
            },
            (e, _) => e,
        });
    }
    fs_err::write(&ok, "").map_err(EngineError::io("write", &ok))
}
