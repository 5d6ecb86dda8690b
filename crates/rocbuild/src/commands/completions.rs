//! `rocbuild completions SHELL`: the shell's completion script, from the clap structs.

use miette::{IntoDiagnostic, Result};

use crate::ExitStatus;

pub fn completions(shell: clap_complete::Shell) -> Result<ExitStatus> {
    let mut text = Vec::new();
    crate::reference::completions(shell, &mut text).into_diagnostic()?;
    crate::out::stdout_raw(&String::from_utf8_lossy(&text));
    Ok(ExitStatus::Success)
}
