//! The signals a run that changes a venv catches (SIGINT, SIGTERM): the handlers only record
//! which came; the run stops at its next step boundary (see the engine's `interrupt`), and
//! so does a wait for a lock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

static RECEIVED: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

fn cell() -> &'static Arc<AtomicUsize> {
    RECEIVED.get_or_init(|| Arc::new(AtomicUsize::new(0)))
}

/// Catch SIGINT and SIGTERM from now on (commands that change a venv call this first). A
/// second signal while the first is being handled ends the process at once, with 128 + it.
pub fn catch() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGINT, SIGTERM};
        use std::sync::atomic::AtomicBool;
        let got = cell().clone();
        let once = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM] {
            // Registered first, so it sees `once` as it was before this signal.
            signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, once.clone())?;
            signal_hook::flag::register(sig, once.clone())?;
            signal_hook::flag::register_usize(sig, got.clone(), sig as usize)?;
        }
    }
    Ok(())
}

/// The signal received, if any.
pub fn received() -> Option<i32> {
    match cell().load(Ordering::SeqCst) {
        0 => None,
        s => i32::try_from(s).ok(),
    }
}

/// The signal's name as a user knows it.
pub fn name(signal: i32) -> &'static str {
    match signal {
        2 => "SIGINT (Ctrl-C)",
        15 => "SIGTERM",
        1 => "SIGHUP",
        _ => "a signal",
    }
}
