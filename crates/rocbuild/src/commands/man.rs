//! `rocbuild man`: the man page, from the clap structs.

use miette::{IntoDiagnostic, Result};

use crate::ExitStatus;

pub fn man() -> Result<ExitStatus> {
    let mut text = Vec::new();
    crate::reference::man(&mut text).into_diagnostic()?;
    crate::out::stdout_raw(&String::from_utf8_lossy(&text));
    Ok(ExitStatus::Success)
}
