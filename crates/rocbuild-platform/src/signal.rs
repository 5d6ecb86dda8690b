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
    #[cfg(windows)]
    {
        #[link(name = "kernel32")]
        extern "system" {
            fn SetConsoleCtrlHandler(
                handler: Option<extern "system" fn(u32) -> i32>,
                add: i32,
            ) -> i32;
        }
        // SAFETY: `on_console_event` is a plain function for the whole life of the process;
        // Windows calls it on a thread of its own, and it only touches an atomic.
        if unsafe { SetConsoleCtrlHandler(Some(on_console_event), 1) } == 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Windows' console control events: Ctrl-C and Ctrl-Break are recorded as SIGINT and
/// SIGBREAK (the numbers the C runtime gives them), so the run stops at its next step and
/// undoes what is not committed, as on Unix; without a handler Windows ends the process at
/// once, in the middle of an install. A second one while the first is handled ends the
/// process with 128 + it. Closing the console, logging off and shutting down are left to
/// Windows' default (it ends the process right after any handler returns): the next run
/// finishes or undoes what the journal says.
#[cfg(windows)]
extern "system" fn on_console_event(event: u32) -> i32 {
    const CTRL_C_EVENT: u32 = 0;
    const CTRL_BREAK_EVENT: u32 = 1;
    let sig = match event {
        CTRL_C_EVENT => 2,
        CTRL_BREAK_EVENT => 21,
        _ => return 0,
    };
    if cell().swap(sig, Ordering::SeqCst) != 0 {
        std::process::exit(128 + sig as i32);
    }
    1
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
        21 => "SIGBREAK (Ctrl-Break)",
        1 => "SIGHUP",
        _ => "a signal",
    }
}
