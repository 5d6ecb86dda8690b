//! Running Windows programs under Wine: every call has a timeout, stdin from /dev/null, its
//! output in files, and `wineserver -k` (same WINEPREFIX) after it, because a Wine process
//! waiting for a console or a debugger never exits by itself.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{round1, Ctx, Tools};
use crate::util::Result;

/// Booting a prefix: no Mono / Gecko install prompts, no debugger.
const BOOT_OVERRIDES: &str = "mscoree,mshtml=;winedbg.exe=d";

/// Running programs: the native MSVC runtime first (Wine's built-in one as the fallback), no
/// debugger on a crash, no Mono / Gecko.
const RUN_OVERRIDES: &str = "vcruntime140,vcruntime140_1,msvcp140,msvcp140_1,msvcp140_2,msvcp140_atomic_wait=n,b;winedbg.exe=d;mscoree,mshtml=";

/// The environment every program run under Wine gets (besides WINEPREFIX), for world.json.
pub fn run_env() -> Value {
    json!({
        "WINEDEBUG": "-all",
        "WINEDLLOVERRIDES": RUN_OVERRIDES,
        "KMP_AFFINITY": "disabled",
    })
}

/// A Wine prefix and the programs that drive it.
pub struct Wine {
    prefix: PathBuf,
    wine: PathBuf,
    wineserver: PathBuf,
}

/// What a finished program printed.
pub struct Ran {
    pub stdout: String,
    pub secs: f64,
}

/// A finished (or killed) process: its status (None: timed out and killed), output, time.
struct Finished {
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Wine {
    pub fn new(prefix: &Path, tools: &Tools) -> Wine {
        Wine {
            prefix: prefix.to_path_buf(),
            wine: tools.get("wine").to_path_buf(),
            wineserver: tools.get("wineserver").to_path_buf(),
        }
    }

    /// The same Wine on another prefix (the one being made).
    fn with_prefix(&self, prefix: &Path) -> Wine {
        Wine {
            prefix: prefix.to_path_buf(),
            wine: self.wine.clone(),
            wineserver: self.wineserver.clone(),
        }
    }

    fn env(&self, cmd: &mut Command, overrides: &str) {
        // XTASK_WINEDEBUG: Wine's debug channels for a look at a failing run.
        let debug = std::env::var("XTASK_WINEDEBUG").unwrap_or_else(|_| "-all".into());
        cmd.env("WINEPREFIX", &self.prefix)
            .env("WINEDEBUG", debug)
            .env("WINEDLLOVERRIDES", overrides)
            .env("KMP_AFFINITY", "disabled")
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY");
    }

    /// `wine PROGRAM ARGS...` in `cwd` with `extra` environment variables; an error unless it
    /// exits 0 within `timeout`. `wineserver -k` afterwards in every case.
    pub fn run(
        &self,
        program: &Path,
        args: &[&str],
        cwd: &Path,
        extra: &[(&str, String)],
        timeout: Duration,
    ) -> Result<Ran> {
        if program.is_absolute() && !program.is_file() {
            // Wine says only `c0000135` (a DLL not found) for a missing program.
            return Err(format!("{} does not exist", program.display()));
        }
        let mut cmd = Command::new(&self.wine);
        cmd.arg(program).args(args).current_dir(cwd);
        self.env(&mut cmd, RUN_OVERRIDES);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let what = format!("wine {} {}", program.display(), args.join(" "));
        let f = run_with_timeout(&mut cmd, timeout, &|| self.kill_server())?;
        check_finished(&what, &f, timeout)?;
        Ok(Ran {
            stdout: f.stdout.replace("\r\n", "\n"),
            secs: round1(f.elapsed.as_secs_f64()),
        })
    }

    /// `wineserver -k` for this prefix (its own timeout: it should return at once).
    pub fn kill_server(&self) {
        let mut cmd = Command::new(&self.wineserver);
        cmd.arg("-k");
        self.env(&mut cmd, RUN_OVERRIDES);
        let _ = run_with_timeout(&mut cmd, Duration::from_secs(20), &|| {});
    }
}

fn check_finished(what: &str, f: &Finished, timeout: Duration) -> Result<()> {
    let tail = |s: &str| {
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    };
    match f.status {
        None => Err(format!(
            "{what} did not finish within {} s (killed)\n--- stdout\n{}\n--- stderr\n{}",
            timeout.as_secs(),
            tail(&f.stdout),
            tail(&f.stderr)
        )),
        Some(s) if !s.success() => Err(format!(
            "{what} failed ({s})\n--- stdout\n{}\n--- stderr\n{}",
            tail(&f.stdout),
            tail(&f.stderr)
        )),
        Some(_) => Ok(()),
    }
}

/// Run `cmd` in its own process group with stdin from /dev/null and its output piped (Python
/// under Wine cannot set up its standard streams on a regular file: `[WinError 6] Invalid
/// handle`); on timeout kill the whole group. `after` runs once the process has ended (or has
/// been killed), before the output is collected: for Wine, `wineserver -k`, which also ends
/// whatever still holds the pipes.
fn run_with_timeout(cmd: &mut Command, timeout: Duration, after: &dyn Fn()) -> Result<Finished> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let t = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let stdout = reader(child.stdout.take());
    let stderr = reader(child.stderr.take());
    let status = wait_or_kill(&mut child, timeout, t);
    let elapsed = t.elapsed();
    after();
    let status = status.map_err(|e| format!("cannot wait for {cmd:?}: {e}"))?;
    // What still holds the pipes after `after` has had 10 s is not waited for.
    let collect = |rx: std::sync::mpsc::Receiver<Vec<u8>>| {
        let bytes = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Ok(Finished {
        status,
        stdout: collect(stdout),
        stderr: collect(stderr),
        elapsed,
    })
}

/// A thread reading `pipe` to its end; its bytes arrive on the channel.
fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> std::sync::mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        let _ = tx.send(buf);
    });
    rx
}

/// The child's status, or None if it ran past `timeout` (then its process group is killed).
fn wait_or_kill(
    child: &mut std::process::Child,
    timeout: Duration,
    t: Instant,
) -> std::io::Result<Option<ExitStatus>> {
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if t.elapsed() >= timeout {
            // The group we made: the program and whatever it started in it.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .stderr(Stdio::null())
                .status();
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Boot a new 64-bit prefix in `tmp` (`wineboot -i`, 60 s at most), then stop its server.
pub fn make_prefix(ctx: &Ctx, tmp: &Path) -> Result<Value> {
    let wine = ctx.wine.with_prefix(tmp);
    let wineboot = wine.wine.with_file_name("wineboot");
    let mut cmd = if wineboot.exists() {
        Command::new(wineboot)
    } else {
        let mut c = Command::new(&wine.wine);
        c.arg("wineboot");
        c
    };
    cmd.arg("-i").env("WINEARCH", "win64");
    wine.env(&mut cmd, BOOT_OVERRIDES);
    let timeout = Duration::from_secs(60);
    let f = run_with_timeout(&mut cmd, timeout, &|| wine.kill_server())?;
    check_finished("wineboot -i", &f, timeout)?;
    let system32 = tmp.join("drive_c/windows/system32");
    if !system32.join("kernel32.dll").exists() {
        return Err(format!(
            "wineboot -i exited 0 but {} has no kernel32.dll: the prefix is not usable",
            system32.display()
        ));
    }
    let version = crate::util::first_line(&wine.wine.display().to_string(), &["--version"]);
    Ok(json!({
        "wine_version": version,
        "boot_secs": round1(f.elapsed.as_secs_f64()),
    }))
}

/// Remove the prefix if Wine has changed since it was made: a new Wine would update it on the
/// first program a test runs (`wineboot -u`, inside that program's timeout), and the recorded
/// `wine_version` would no longer be true. A prefix from an earlier xtask that still holds its
/// ucrtbase shim (`ucrtwine.dll` beside it) goes too: the prefix is Wine's own. The next step
/// makes it anew.
pub fn drop_if_stale(ctx: &Ctx) -> Result<()> {
    let prefix = ctx.out("wineprefix");
    if !prefix.exists() {
        return Ok(());
    }
    let recorded = std::fs::read_to_string(ctx.out("checks").join("wineprefix.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["wine_version"].as_str().map(String::from));
    let current = crate::util::first_line(&ctx.wine.wine.display().to_string(), &["--version"]);
    let old_shim = prefix
        .join("drive_c/windows/system32/ucrtwine.dll")
        .exists();
    if recorded.as_deref() == Some(current.as_str()) && !old_shim {
        return Ok(());
    }
    println!(
        "xtask: windows: wineprefix: made with {} (now {current}){}: making it anew",
        recorded.as_deref().unwrap_or("an unknown Wine"),
        if old_shim {
            ", with an earlier xtask's ucrtbase shim"
        } else {
            ""
        }
    );
    super::remove_any(&prefix)
}

/// `Z:\…` for a Unix path, as Windows programs under Wine see it.
pub fn windows_path(p: &Path) -> String {
    format!("Z:{}", p.display()).replace('/', "\\")
}

/// The environment of a run with extra directories on the Windows PATH.
pub fn winepath(dirs: &[&Path]) -> Vec<(&'static str, String)> {
    let joined: Vec<String> = dirs.iter().map(|d| windows_path(d)).collect();
    vec![("WINEPATH", joined.join(";"))]
}

/// Summaries of several runs keyed by name, for a check's JSON.
pub fn timings(runs: &[(&str, &Ran)]) -> BTreeMap<String, f64> {
    runs.iter().map(|(n, r)| (n.to_string(), r.secs)).collect()
}
