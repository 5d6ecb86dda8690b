//! `rocbuild schedule`: the files of all four schedulers, snapshotted (written by the real
//! binary into a redirected HOME / XDG_CONFIG_HOME), `systemd-analyze verify` on the systemd
//! units when it is installed, and show / remove.

use std::path::Path;
use std::process::Command;

use crate::common::*;

const VENV: &str = "/opt/venvs/ml";

struct Home {
    tmp: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            tmp: tempfile::tempdir().unwrap(),
        }
    }
    fn home(&self) -> String {
        self.tmp.path().join("home").display().to_string()
    }
    fn config(&self) -> String {
        self.tmp.path().join("config").display().to_string()
    }
    fn run(&self, args: &[&str]) -> Out {
        let mut all = vec!["schedule"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--venv", VENV, "--no-activate", "--cache"]);
        let cache = self.tmp.path().join("cache").display().to_string();
        all.push(&cache);
        let (home, config) = (self.home(), self.config());
        rocbuild(
            &all,
            &[
                ("HOME", &home),
                ("XDG_CONFIG_HOME", &config),
                ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ],
        )
    }
    fn redact(&self, text: &str) -> String {
        let t = text.replace(env!("CARGO_BIN_EXE_rocbuild"), "[ROCBUILD]");
        redact(&t, self.tmp.path())
    }
}

/// Install `kind`, snapshot every file it wrote (decoded from UTF-16 for Task Scheduler).
fn snapshot_kind(kind: &str, every: &str) -> (Home, Vec<std::path::PathBuf>) {
    let h = Home::new();
    let out = h.run(&["install", "--kind", kind, "--every", every]);
    ok(&out);
    let files: Vec<std::path::PathBuf> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("wrote "))
        .map(std::path::PathBuf::from)
        .collect();
    assert!(!files.is_empty(), "{}", out.stdout);
    let mut text = format!("--- stdout\n{}\n", h.redact(&out.stdout));
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let contents = if bytes.starts_with(&[0xFF, 0xFE]) {
            let units: Vec<u16> = bytes[2..]
                .chunks(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).unwrap().replace("\r\n", "\n")
        } else {
            String::from_utf8(bytes).unwrap()
        };
        text.push_str(&format!(
            "--- {}\n{}\n",
            h.redact(&f.display().to_string()),
            h.redact(&contents)
        ));
    }
    insta::assert_snapshot!(format!("schedule_{kind}_{every}"), text);
    (h, files)
}

#[test]
fn systemd_user_timer_and_service() {
    let (h, files) = snapshot_kind("systemd", "daily");
    assert!(files[0].starts_with(h.tmp.path().join("config/systemd/user")));
    let Ok(sa) = which("systemd-analyze") else {
        eprintln!("SKIPPED: systemd-analyze is not installed; the unit files were not verified");
        return;
    };
    // The units refer to the real binary; verify them as systemd would load them.
    let out = Command::new(sa)
        .arg("verify")
        .args(&files)
        .env("SYSTEMD_LOG_LEVEL", "warning")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Complaints about this host (no running systemd, no user bus) are not about our files.
    let ours: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("rocbuild-rebuild-"))
        .collect();
    assert!(
        out.status.success() && ours.is_empty(),
        "systemd-analyze verify:\n{stderr}"
    );
}

fn which(name: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or(())
}

#[test]
fn launchd_agent() {
    let (h, files) = snapshot_kind("launchd", "weekly");
    assert!(files[0].starts_with(h.tmp.path().join("home/Library/LaunchAgents")));
}

#[test]
fn task_scheduler_xml() {
    let (_h, files) = snapshot_kind("schtasks", "hourly");
    // UTF-16LE with a BOM, as the XML declaration says (schtasks /Create /XML wants that).
    assert!(std::fs::read(&files[0])
        .unwrap()
        .starts_with(&[0xFF, 0xFE, b'<', 0]));
}

#[test]
fn cron_line() {
    snapshot_kind("cron", "daily");
}

#[test]
fn show_names_the_files_and_the_log_then_remove_deletes_them() {
    let h = Home::new();
    let out = h.run(&["show"]);
    ok(&out);
    assert!(
        out.stdout.starts_with(&format!("no schedule for {VENV}")),
        "{}",
        out.stdout
    );
    ok(&h.run(&["install", "--kind", "systemd"]));
    let out = h.run(&["show"]);
    ok(&out);
    insta::assert_snapshot!("schedule_show", h.redact(&out.stdout));
    let out = h.run(&["remove"]);
    ok(&out);
    assert!(
        out.stdout
            .contains("deactivate with: systemctl --user disable --now"),
        "{}",
        out.stdout
    );
    let unit_dir = Path::new(&h.config()).join("systemd/user");
    assert_eq!(std::fs::read_dir(unit_dir).unwrap().count(), 0);
    assert!(h.run(&["show"]).stdout.starts_with("no schedule for"));
}
