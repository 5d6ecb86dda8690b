//! `rocbuild schedule`: run `rocbuild rebuild --if-stale --venv V` regularly, with the
//! machine's own scheduler: a systemd user timer (Linux), cron (Linux without systemd), a
//! launchd agent (macOS), a Task Scheduler task (Windows). The files are pure functions of a
//! [`Job`], so every kind is snapshot-tested on any host; only activation runs OS tools.
//!
//! Names an OS: the scheduling seam. launchd, schtasks, systemd timers and cron each belong to
//! one OS.

use std::path::{Path, PathBuf};

use rocbuild_probe::Os;
use serde::Serialize;

use crate::paths::hash_hex;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Systemd,
    Launchd,
    Schtasks,
    Cron,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Systemd, Kind::Launchd, Kind::Schtasks, Kind::Cron];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Systemd => "systemd",
            Kind::Launchd => "launchd",
            Kind::Schtasks => "schtasks",
            Kind::Cron => "cron",
        }
    }

    /// The scheduler of `os`: systemd where it runs (`/run/systemd/system` exists), else cron.
    pub fn default_for(os: Os, systemd_booted: bool) -> Kind {
        match os {
            Os::Macos => Kind::Launchd,
            Os::Windows => Kind::Schtasks,
            Os::Linux if systemd_booted => Kind::Systemd,
            Os::Linux => Kind::Cron,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Every {
    Hourly,
    Daily,
    Weekly,
}

impl Every {
    pub fn as_str(self) -> &'static str {
        match self {
            Every::Hourly => "hourly",
            Every::Daily => "daily",
            Every::Weekly => "weekly",
        }
    }
}

/// What to run, for which venv, how often, logging where.
#[derive(Debug, Clone, Serialize)]
pub struct Job {
    pub venv: PathBuf,
    /// The rocbuild executable.
    pub exe: PathBuf,
    pub log: PathBuf,
    pub every: Every,
    /// Environment the scheduled run needs (PATH for cmake/compilers, ROCBUILD_CACHE, ...).
    pub env: Vec<(String, String)>,
}

impl Job {
    /// `rocbuild-rebuild-<8 hex of the venv path>`: one schedule per venv.
    pub fn id(&self) -> String {
        id_for(&self.venv)
    }

    pub fn args(&self) -> Vec<String> {
        vec![
            "rebuild".into(),
            "--if-stale".into(),
            "--venv".into(),
            self.venv.display().to_string(),
        ]
    }
}

pub fn id_for(venv: &Path) -> String {
    format!(
        "rocbuild-rebuild-{}",
        &hash_hex(&[&venv.display().to_string()])[..8]
    )
}

/// Where the per-user scheduler files live.
#[derive(Debug, Clone, Serialize)]
pub struct Dirs {
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME` or `~/.config` (Linux), `%APPDATA%` (Windows).
    pub config: PathBuf,
}

/// One activation step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Action {
    Run(Vec<String>),
    /// Add this line to the user's crontab (replacing the line ending in `# <id>`).
    CrontabAdd {
        id: String,
        line: String,
    },
    CrontabRemove {
        id: String,
    },
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Run(argv) => write!(f, "{}", command_line(Os::current(), argv)),
            Action::CrontabAdd { line, .. } => {
                write!(
                    f,
                    "(crontab -l; echo {}) | crontab -",
                    shell_words::quote(line)
                )
            }
            Action::CrontabRemove { id } => {
                write!(f, "crontab -l | grep -v '# {id}$' | crontab -")
            }
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Schedule {
    pub kind: Kind,
    pub id: String,
    /// (path, contents) of every file to write.
    pub files: Vec<(PathBuf, String)>,
    pub activate: Vec<Action>,
    pub deactivate: Vec<Action>,
    pub log: PathBuf,
}

/// Everything `kind` needs for `job`.
pub fn schedule(job: &Job, kind: Kind, dirs: &Dirs) -> Schedule {
    let id = job.id();
    let (files, activate, deactivate) = match kind {
        Kind::Systemd => {
            let d = dirs.config.join("systemd").join("user");
            let timer = format!("{id}.timer");
            (
                vec![
                    (d.join(format!("{id}.service")), systemd_service(job)),
                    (d.join(&timer), systemd_timer(job)),
                ],
                vec![
                    Action::Run(argv(&["systemctl", "--user", "daemon-reload"])),
                    Action::Run(argv(&["systemctl", "--user", "enable", "--now", &timer])),
                ],
                vec![
                    Action::Run(argv(&["systemctl", "--user", "disable", "--now", &timer])),
                    Action::Run(argv(&["systemctl", "--user", "daemon-reload"])),
                ],
            )
        }
        Kind::Launchd => {
            let p = dirs
                .home
                .join("Library")
                .join("LaunchAgents")
                .join(format!("{}.plist", launchd_label(job)));
            let ps = p.display().to_string();
            (
                vec![(p, launchd_plist(job))],
                vec![Action::Run(argv(&["launchctl", "load", "-w", &ps]))],
                vec![Action::Run(argv(&["launchctl", "unload", "-w", &ps]))],
            )
        }
        Kind::Schtasks => {
            let p = state_dir(dirs).join(format!("{id}.xml"));
            let ps = p.display().to_string();
            (
                vec![(p, schtasks_xml(job))],
                vec![Action::Run(argv(&[
                    "schtasks", "/Create", "/TN", &id, "/XML", &ps, "/F",
                ]))],
                vec![Action::Run(argv(&[
                    "schtasks", "/Delete", "/TN", &id, "/F",
                ]))],
            )
        }
        Kind::Cron => {
            let line = cron_line(job);
            (
                vec![(
                    state_dir(dirs).join(format!("{id}.cron")),
                    format!("{line}\n"),
                )],
                vec![Action::CrontabAdd {
                    id: id.clone(),
                    line,
                }],
                vec![Action::CrontabRemove { id: id.clone() }],
            )
        }
    };
    Schedule {
        kind,
        id,
        files,
        activate,
        deactivate,
        log: job.log.clone(),
    }
}

/// rocbuild's own copy of the files that live in no scheduler directory (cron, schtasks).
pub fn state_dir(dirs: &Dirs) -> PathBuf {
    dirs.config.join("rocbuild").join("schedule")
}

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// A systemd unit-file word: quoted, with `%` and `$` (specifiers, variables) escaped.
fn sd_word(s: &str) -> String {
    let e = s
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%")
        .replace('$', "$$");
    format!("\"{e}\"")
}

fn sd_path(p: &Path) -> String {
    p.display().to_string().replace('%', "%%")
}

pub fn systemd_service(job: &Job) -> String {
    let mut s = format!(
        "[Unit]\nDescription=rocbuild: rebuild what changed under {}\n\n[Service]\nType=oneshot\n",
        sd_path(&job.venv)
    );
    for (k, v) in &job.env {
        s.push_str(&format!("Environment={}\n", sd_word(&format!("{k}={v}"))));
    }
    let mut cmd = vec![sd_word(&job.exe.display().to_string())];
    cmd.extend(job.args().iter().map(|a| sd_word(a)));
    s.push_str(&format!("ExecStart={}\n", cmd.join(" ")));
    let log = sd_path(&job.log);
    s.push_str(&format!(
        "StandardOutput=append:{log}\nStandardError=append:{log}\nNice=10\n"
    ));
    s
}

pub fn systemd_timer(job: &Job) -> String {
    let (cal, delay) = match job.every {
        Every::Hourly => ("hourly", "5min"),
        Every::Daily => ("daily", "30min"),
        Every::Weekly => ("weekly", "1h"),
    };
    format!(
        "[Unit]\nDescription=rocbuild: {} rebuild check of {}\n\n[Timer]\nOnCalendar={cal}\nPersistent=true\nRandomizedDelaySec={delay}\n\n[Install]\nWantedBy=timers.target\n",
        job.every.as_str(),
        sd_path(&job.venv)
    )
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

pub fn launchd_label(job: &Job) -> String {
    format!("dev.rocbuild.{}", job.id())
}

pub fn launchd_plist(job: &Job) -> String {
    let mut s = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n<plist version=\"1.0\">\n<dict>\n",
    );
    s.push_str(&format!(
        "  <key>Label</key>\n  <string>{}</string>\n  <key>ProgramArguments</key>\n  <array>\n",
        xml(&launchd_label(job))
    ));
    s.push_str(&format!(
        "    <string>{}</string>\n",
        xml(&job.exe.display().to_string())
    ));
    for a in job.args() {
        s.push_str(&format!("    <string>{}</string>\n", xml(&a)));
    }
    s.push_str("  </array>\n");
    if !job.env.is_empty() {
        s.push_str("  <key>EnvironmentVariables</key>\n  <dict>\n");
        for (k, v) in &job.env {
            s.push_str(&format!(
                "    <key>{}</key>\n    <string>{}</string>\n",
                xml(k),
                xml(v)
            ));
        }
        s.push_str("  </dict>\n");
    }
    match job.every {
        Every::Hourly => s.push_str("  <key>StartInterval</key>\n  <integer>3600</integer>\n"),
        Every::Daily | Every::Weekly => {
            s.push_str("  <key>StartCalendarInterval</key>\n  <dict>\n");
            if job.every == Every::Weekly {
                s.push_str("    <key>Weekday</key>\n    <integer>1</integer>\n");
            }
            s.push_str("    <key>Hour</key>\n    <integer>3</integer>\n    <key>Minute</key>\n    <integer>0</integer>\n  </dict>\n");
        }
    }
    let log = xml(&job.log.display().to_string());
    s.push_str(&format!(
        "  <key>RunAtLoad</key>\n  <false/>\n  <key>ProcessType</key>\n  <string>Background</string>\n  <key>StandardOutPath</key>\n  <string>{log}</string>\n  <key>StandardErrorPath</key>\n  <string>{log}</string>\n</dict>\n</plist>\n"
    ));
    s
}

/// `argv` as the user would type it in this OS's shell: POSIX quoting (`'…'`) on Unix; on
/// Windows double quotes, which cmd.exe and PowerShell both read (a single-quoted `'C:\…'`
/// is one word in neither).
pub fn command_line(os: Os, argv: &[String]) -> String {
    if os != Os::Windows {
        return shell_words::join(argv);
    }
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && !a.contains([
                    ' ', '\t', '"', '&', '(', ')', '^', '|', '<', '>', '\'', ';', ',',
                ]);
            if plain {
                a.clone()
            } else {
                format!("\"{}\"", a.replace('"', "\"\""))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A cmd.exe word.
fn cmd_word(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// Task Scheduler XML for `schtasks /Create /XML` (written as UTF-16 with a BOM, as declared).
pub fn schtasks_xml(job: &Job) -> String {
    let trigger = match job.every {
        Every::Hourly => "    <CalendarTrigger>\n      <StartBoundary>2025-01-01T00:00:00</StartBoundary>\n      <Repetition>\n        <Interval>PT1H</Interval>\n        <Duration>P1D</Duration>\n      </Repetition>\n      <ScheduleByDay>\n        <DaysInterval>1</DaysInterval>\n      </ScheduleByDay>\n    </CalendarTrigger>\n".to_string(),
        Every::Daily => "    <CalendarTrigger>\n      <StartBoundary>2025-01-01T03:00:00</StartBoundary>\n      <ScheduleByDay>\n        <DaysInterval>1</DaysInterval>\n      </ScheduleByDay>\n    </CalendarTrigger>\n".to_string(),
        Every::Weekly => "    <CalendarTrigger>\n      <StartBoundary>2025-01-01T03:00:00</StartBoundary>\n      <ScheduleByWeek>\n        <WeeksInterval>1</WeeksInterval>\n        <DaysOfWeek>\n          <Monday />\n        </DaysOfWeek>\n      </ScheduleByWeek>\n    </CalendarTrigger>\n".to_string(),
    };
    // cmd.exe redirects the output to the log; `set` passes rocbuild's variables (the
    // task inherits the user's PATH).
    let mut line = String::new();
    for (k, v) in job.env.iter().filter(|(k, _)| k != "PATH") {
        line.push_str(&format!("set {}&& ", cmd_word(&format!("{k}={v}"))));
    }
    let mut cmd = vec![cmd_word(&job.exe.display().to_string())];
    cmd.extend(job.args().iter().map(|a| {
        if a.contains([' ', '&', '(', ')', '^', '|', '<', '>']) || a.contains('\\') {
            cmd_word(a)
        } else {
            a.clone()
        }
    }));
    line.push_str(&format!(
        "{} >> {} 2>&1",
        cmd.join(" "),
        cmd_word(&job.log.display().to_string())
    ));
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-16\"?>\n<Task version=\"1.2\" xmlns=\"http://schemas.microsoft.com/windows/2004/02/mit/task\">\n  <RegistrationInfo>\n    <Description>{}</Description>\n  </RegistrationInfo>\n  <Triggers>\n{trigger}  </Triggers>\n  <Principals>\n    <Principal id=\"Author\">\n      <LogonType>InteractiveToken</LogonType>\n      <RunLevel>LeastPrivilege</RunLevel>\n    </Principal>\n  </Principals>\n  <Settings>\n    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>\n    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>\n    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>\n    <StartWhenAvailable>true</StartWhenAvailable>\n    <ExecutionTimeLimit>PT4H</ExecutionTimeLimit>\n    <Priority>7</Priority>\n    <Enabled>true</Enabled>\n  </Settings>\n  <Actions Context=\"Author\">\n    <Exec>\n      <Command>cmd.exe</Command>\n      <Arguments>{}</Arguments>\n    </Exec>\n  </Actions>\n</Task>\n",
        xml(&format!(
            "rocbuild: {} rebuild check of {}",
            job.every.as_str(),
            job.venv.display()
        )),
        xml(&format!("/d /s /c \"{line}\""))
    )
}

/// A POSIX shell word for a crontab line (`%` is special to cron: escaped).
fn cron_word(s: &str) -> String {
    shell_words::quote(s).replace('%', "\\%")
}

pub fn cron_line(job: &Job) -> String {
    let when = match job.every {
        Every::Hourly => "0 * * * *",
        Every::Daily => "0 3 * * *",
        Every::Weekly => "0 3 * * 1",
    };
    let mut parts = vec![when.to_string()];
    for (k, v) in &job.env {
        parts.push(format!("{k}={}", cron_word(v)));
    }
    parts.push(cron_word(&job.exe.display().to_string()));
    parts.extend(job.args().iter().map(|a| cron_word(a)));
    parts.push(format!(
        ">> {} 2>&1",
        cron_word(&job.log.display().to_string())
    ));
    parts.push(format!("# {}", job.id()));
    parts.join(" ")
}

/// The bytes to write for a schedule file (UTF-16LE with a BOM for Task Scheduler XML).
pub fn file_bytes(kind: Kind, contents: &str) -> Vec<u8> {
    if kind == Kind::Schtasks {
        let mut b = vec![0xFF, 0xFE];
        for u in contents.replace('\n', "\r\n").encode_utf16() {
            b.extend_from_slice(&u.to_le_bytes());
        }
        b
    } else {
        contents.as_bytes().to_vec()
    }
}

/// The user's crontab with the line of `id` replaced by `line` (or removed when None).
pub fn crontab_with(current: &str, id: &str, line: Option<&str>) -> String {
    let marker = format!("# {id}");
    let mut out: String = current
        .lines()
        .filter(|l| !l.trim_end().ends_with(&marker))
        .map(|l| format!("{l}\n"))
        .collect();
    if let Some(l) = line {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Carry out one activation step (a command, or a crontab edit).
pub fn perform(act: &Action) -> std::result::Result<(), String> {
    use std::io::Write;
    let run = |argv: &[String], input: Option<&str>| -> std::result::Result<String, String> {
        let mut c = std::process::Command::new(&argv[0]);
        c.args(&argv[1..]);
        c.stdin(if input.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        });
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().map_err(|e| format!("{}: {e}", argv[0]))?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin
                .write_all(text.as_bytes())
                .map_err(|e| e.to_string())?;
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    };
    match act {
        Action::Run(argv) => run(argv, None).map(|_| ()),
        Action::CrontabAdd { id, line } => {
            let cur = run(&["crontab".into(), "-l".into()], None).unwrap_or_default();
            let new = crontab_with(&cur, id, Some(line));
            run(&["crontab".into(), "-".into()], Some(&new)).map(|_| ())
        }
        Action::CrontabRemove { id } => {
            let cur = run(&["crontab".into(), "-l".into()], None).unwrap_or_default();
            let new = crontab_with(&cur, id, None);
            run(&["crontab".into(), "-".into()], Some(&new)).map(|_| ())
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_command_shown_is_quoted_for_the_users_shell() {
        let argv: Vec<String> = [
            "rebuild",
            "--if-stale",
            "--venv",
            "C:\\Users\\me\\my venv",
            "x\"y",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            command_line(Os::Windows, &argv),
            "rebuild --if-stale --venv \"C:\\Users\\me\\my venv\" \"x\"\"y\""
        );
        assert_eq!(
            command_line(Os::Linux, &argv),
            "rebuild --if-stale --venv 'C:\\Users\\me\\my venv' 'x\"y'"
        );
    }

    use super::*;

    #[test]
    fn crontab_lines_are_replaced_not_duplicated() {
        let cur = "MAILTO=me\n0 1 * * * backup\n0 3 * * * old # rocbuild-rebuild-1234abcd\n";
        assert_eq!(
            crontab_with(
                cur,
                "rocbuild-rebuild-1234abcd",
                Some("new # rocbuild-rebuild-1234abcd")
            ),
            "MAILTO=me\n0 1 * * * backup\nnew # rocbuild-rebuild-1234abcd\n"
        );
        assert_eq!(
            crontab_with(cur, "rocbuild-rebuild-1234abcd", None),
            "MAILTO=me\n0 1 * * * backup\n"
        );
    }

    #[test]
    fn the_default_kind_follows_the_os() {
        assert_eq!(Kind::default_for(Os::Linux, true), Kind::Systemd);
        assert_eq!(Kind::default_for(Os::Linux, false), Kind::Cron);
        assert_eq!(Kind::default_for(Os::Macos, false), Kind::Launchd);
        assert_eq!(Kind::default_for(Os::Windows, false), Kind::Schtasks);
    }

    #[test]
    fn task_xml_is_utf16_with_a_bom() {
        let b = file_bytes(Kind::Schtasks, "<a/>\n");
        assert_eq!(&b[..4], &[0xFF, 0xFE, b'<', 0]);
        assert_eq!(b.len(), 2 + 2 * "<a/>\r\n".len());
    }
}
