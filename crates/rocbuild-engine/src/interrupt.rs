//! Ctrl-C and SIGTERM during a run. The handlers only record the signal; the run notices it
//! at its next step boundary (and every 100 ms while a child runs), stops its children (each
//! runs in its own process group, so a compiler under ninja goes too), undoes what is not
//! committed through the same paths as any other failure, and ends with 128 + the signal.
//! A second signal while that happens ends the process at once: the install journal lets the
//! next rocbuild command finish or undo whatever was in flight.

use crate::error::{EngineError, Result};
use rocbuild_probe::platform::host;

pub use rocbuild_venv::signal::{catch, name, received};

/// The error to stop with when a signal came, `during` naming what was running.
pub fn error(during: &str) -> Option<EngineError> {
    received().map(|signal| EngineError::Interrupted {
        signal,
        name: name(signal).into(),
        during: during.into(),
        undone: String::new(),
    })
}

/// Stop here if a signal came.
pub fn check(during: &str) -> Result<()> {
    match error(during) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Say what was undone on the way out of an interrupted run.
pub fn undone(e: EngineError, what: &str) -> EngineError {
    match e {
        EngineError::Interrupted {
            signal,
            name,
            during,
            undone,
        } if undone.is_empty() => EngineError::Interrupted {
            signal,
            name,
            during,
            undone: what.into(),
        },
        e => e,
    }
}

/// Stop a child and everything it started: SIGTERM to its process group, then SIGKILL to
/// what is left after a few seconds. Returns when the child is gone (or after the wait).
pub fn stop_group(pids: &[u32], mut gone: impl FnMut() -> bool) {
    host::signal_groups(pids, false);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !gone() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    host::signal_groups(pids, true);
}

/// Whether no process `pid` runs any more (a run folder of a run killed outright can go).
/// Unknown, so false, where this cannot be asked (Windows: such folders stay for `clean`).
pub fn process_gone(pid: u32) -> bool {
    host::process_gone(pid)
}
