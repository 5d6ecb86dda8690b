//! rocbuild's state, round two (issue 54), on the real binary and a real venv: a planted
//! manifest, a cleared cache, a moved or copied venv, a torn journal, a sibling's journal,
//! planted FIFOs and links, an unsafe key or cache. Each either works or is refused, and
//! following rocbuild's own help literally never loses a byte of pip's files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::signals::{finish, spawn, wait_for};

/// What a command said, with miette's line wrapping undone (runs of white space as one).
fn said(out: &Out) -> String {
    format!("{}\n{}", out.stdout, out.stderr)
        .split_whitespace()
        .filter(|w| *w != "|" && *w != "│")
        .collect::<Vec<_>>()
        .join(" ")
}

/// The paths where two trees differ (at most 12), for a short failure message.
fn differ(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .take(12)
        .cloned()
        .collect()
}

macro_rules! assert_same {
    ($a:expr, $b:expr) => {{
        let (a, b) = (&$a, &$b);
        let d = differ(a, b);
        assert!(d.is_empty(), "the trees differ at {d:?}");
    }};
}

/// The venv's files outside rocbuild's own state directory.
fn outside_state(venv: &Path) -> BTreeMap<String, String> {
    tree_state(venv)
        .into_iter()
        .filter(|(k, _)| !k.contains("/.rocbuild/") && !k.ends_with("/.rocbuild/"))
        .collect()
}

/// rocbuild on `venv` (not necessarily the world's own: it may have moved) with the world's
/// recipes and `cache`.
fn on(w: &World, venv: &Path, cache: &Path, args: &[&str]) -> Out {
    let mut c = rocbuild_command(args);
    c.args([
        "--recipes",
        w.recipes.to_str().unwrap(),
        "--venv",
        venv.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
    ]);
    for (k, v) in w.env() {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

/// An install SIGKILLed in its swap once some of pip's files are in `.rocbuild/txn/backup`
/// and rocbuild's new ones in place; a sealed journal says so. (The step is found by trying
/// later and later ones: each attempt that stops too early is rolled back by `status`.)
fn killed_in_the_swap(w: &World) {
    for k in [3, 6, 10, 16, 25, 40, 60] {
        let (mut child, rx) = spawn(
            w,
            &[],
            &[("ROCBUILD_TEST_PAUSE_AFTER_STEP", format!("swap+{k}"))],
        );
        let mut said = String::new();
        let mut paused = false;
        wait_for("the pause in the swap, or the end", || {
            while let Ok(l) = rx.try_recv() {
                said.push_str(&l);
                said.push('\n');
            }
            paused = said.contains("paused after install step");
            paused || child.try_wait().ok().flatten().is_some()
        });
        let _ = child.kill();
        let _ = finish(child, rx);
        assert!(paused, "the install ended before step swap+{k}: {said}");
        let backup = w.site.join(".rocbuild/txn/backup");
        if backup.exists() && !tree_state(&backup).keys().all(|k| k.ends_with('/')) {
            assert!(w.site.join(".rocbuild/journal.json").exists());
            return;
        }
        ok(&w.cmd(&["status"], &[]));
    }
    panic!("no step of the swap had moved pip's files");
}

/// The one command in `help` that removes the journal, run as the user would paste it.
fn follow_the_help(help: &str) {
    let start = help.find("rm '").expect(help);
    let end = help[start + 4..].find('\'').unwrap() + start + 5;
    let cmd = &help[start..end];
    assert!(cmd.ends_with("journal.json'"), "{cmd}");
    let st = Command::new("sh").args(["-c", cmd]).status().unwrap();
    assert!(st.success(), "{cmd}");
}

/// After a kill in the swap and a journal rocbuild cannot trust: status says why and what to
/// do; done literally, the next command gives pip's package back byte for byte, keeps what
/// rocbuild had put in its place, and says so.
fn untrusted_then_help_followed(
    w: &World,
    venv: &Path,
    cache: &Path,
    pips: &BTreeMap<String, String>,
) {
    let out = on(w, venv, cache, &["status"]);
    assert!(said(&out).contains("was not acted on"), "{}", said(&out));
    follow_the_help(&said(&out));
    let out = on(w, venv, cache, &["status"]);
    let said = said(&out);
    assert!(said.contains("salvage"), "{said}");
    assert_same!(outside_state(venv), *pips);
    // What rocbuild had moved in went aside, not away.
    let site = rocbuild_probe_site(venv);
    let kept = tree_state(&site.join(".rocbuild/salvage"));
    assert!(
        kept.keys().any(|k| k.contains("placed/fakecodec/")),
        "{kept:?}"
    );
    assert!(said.contains("put it back: mkdir -p"), "{said}");
    // And the next build works from there.
    ok(&on(w, venv, cache, &["fakecodec"]));
}

fn rocbuild_probe_site(venv: &Path) -> PathBuf {
    std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .unwrap()
}

#[test]
fn following_the_help_after_a_cleared_cache_loses_nothing() {
    let w = World::new(DECODE_WAV);
    pip_install(&w.venv, &w.wheels, "fakecodec==1.0.0");
    let pips = outside_state(&w.venv);
    killed_in_the_swap(&w);
    // The user clears ~/.cache: the key that sealed the journal goes with it.
    std::fs::remove_file(w.cache.join("journal.key")).unwrap();
    untrusted_then_help_followed(&w, &w.venv, &w.cache, &pips);
}

#[test]
fn a_renamed_venv_keeps_its_state_and_a_copied_one_is_salvaged() {
    let w = World::new(DECODE_WAV);
    pip_install(&w.venv, &w.wheels, "fakecodec==1.0.0");
    let pips = outside_state(&w.venv);
    killed_in_the_swap(&w);
    // Moved with `mv` (same file system): the journal still verifies and is rolled back.
    let moved = w.tmp.path().join("moved project/venv");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(&w.venv, &moved).unwrap();
    let out = on(&w, &moved, &w.cache, &["status"]);
    assert!(said(&out).contains("rolled back"), "{}", said(&out));
    assert_same!(outside_state(&moved), pips);
    std::fs::rename(&moved, &w.venv).unwrap();
    // Interrupted again, then copied elsewhere (another disk, a restored backup): the copy's
    // site-packages is another directory, so its journal is not replayed; the help, followed,
    // gives pip's package back all the same.
    killed_in_the_swap(&w);
    let copy = w.tmp.path().join("copy");
    let st = Command::new("cp")
        .args(["-a", w.venv.to_str().unwrap(), copy.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    // (tree_state's paths are relative to the venv: the copy compares as the original.)
    untrusted_then_help_followed(&w, &copy, &w.cache, &pips);
}

#[test]
fn a_torn_journal_and_the_help_leave_pips_package_as_pip_installed_it() {
    let w = World::new(DECODE_WAV);
    pip_install(&w.venv, &w.wheels, "fakecodec==1.0.0");
    let pips = outside_state(&w.venv);
    killed_in_the_swap(&w);
    let j = w.site.join(".rocbuild/journal.json");
    let text = std::fs::read(&j).unwrap();
    std::fs::write(&j, &text[..text.len() / 2]).unwrap();
    untrusted_then_help_followed(&w, &w.venv, &w.cache, &pips);
}

#[test]
fn a_sibling_venvs_journal_renamed_into_this_path_is_not_replayed() {
    let w = World::new(DECODE_WAV);
    pip_install(&w.venv, &w.wheels, "fakecodec==1.0.0");
    killed_in_the_swap(&w);
    // A sibling venv with the same packages, made the same way, gets this one's state...
    let sibling = w.tmp.path().join("sibling");
    let st = Command::new("cp")
        .args(["-a", w.venv.to_str().unwrap(), sibling.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    // ...and once this one is gone, is renamed into its path.
    let old = w.tmp.path().join("old");
    std::fs::rename(&w.venv, &old).unwrap();
    std::fs::rename(&sibling, &w.venv).unwrap();
    let before = outside_state(&w.venv);
    let out = w.cmd(&["status"], &[]);
    assert!(
        said(&out).contains("seal does not verify"),
        "{}",
        said(&out)
    );
    assert_same!(outside_state(&w.venv), before);
    assert!(w.site.join(".rocbuild/journal.json").exists());
    assert!(w.site.join(".rocbuild/txn/backup").exists());
}

#[test]
fn a_planted_manifest_claiming_torchs_files_removes_none_of_them() {
    let w = World::new(DECODE_WAV);
    ok(&w.build(&[]));
    let torch_files: Vec<(String, String)> = ["torch/version.py", "torch/__init__.py"]
        .iter()
        .filter(|p| w.site.join(p).exists())
        .map(|p| {
            let bytes = std::fs::read(w.site.join(p)).unwrap();
            let sha = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(&bytes));
            (p.to_string(), sha)
        })
        .collect();
    assert!(!torch_files.is_empty());
    // What a wheel would ship as `.rocbuild/evil.json`: the right shape, the right hashes.
    let mut m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(w.site.join(".rocbuild/fakecodec.json")).unwrap(),
    )
    .unwrap();
    m["recipe"] = "evil".into();
    m["files"] = torch_files
        .iter()
        .map(|(p, sha)| serde_json::json!({"path": p, "sha256": sha, "size": 1}))
        .collect();
    m["ownership"] = serde_json::Value::Null;
    std::fs::write(w.site.join(".rocbuild/evil.json"), m.to_string()).unwrap();
    // Even with the seal of another manifest copied in.
    let before = tree_state(&w.venv);
    let out = w.cmd(&["restore", "evil"], &[]);
    assert_ne!(out.code, 0);
    assert!(said(&out).contains("seal"), "{}", said(&out));
    assert_same!(tree_state(&w.venv), before);
    let out = w.cmd(&["status"], &[]);
    assert!(out.stdout.contains("unreadable manifest"), "{}", out.stdout);
    assert!(out.stdout.contains("fakecodec 0.9.1: fresh") || out.stdout.contains("fakecodec"));
}

#[test]
fn planted_fifos_and_links_make_no_command_block() {
    let w = World::new(DECODE_WAV);
    ok(&w.build(&[]));
    let mkfifo = |p: &Path| {
        let _ = std::fs::remove_file(p);
        assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
    };
    let state = w.site.join(".rocbuild");
    // A FIFO as the journal, as a manifest, and torch/version.py; /dev/zero as the key.
    mkfifo(&state.join("journal.json"));
    mkfifo(&state.join("other.json"));
    std::fs::remove_file(w.cache.join("journal.key")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", w.cache.join("journal.key")).unwrap();
    // And a FIFO among the package's libraries, which doctor reads.
    mkfifo(&w.site.join("fakecodec/libfakecodec_fifo.so"));
    let t = std::time::Instant::now();
    for args in [&["status"][..], &["restore", "fakecodec"]] {
        let out = w.cmd(args, &[]);
        let said = said(&out);
        assert_ne!(out.code, 0, "{args:?}: {said}");
        assert!(said.contains("a link"), "{args:?}: {said}");
    }
    // doctor reads no state of rocbuild's: it finishes, whatever it finds.
    let _ = w.cmd(&["doctor", "--no-load"], &[]);
    assert!(t.elapsed().as_secs() < 120, "a command blocked");
}

#[test]
fn a_key_or_cache_others_could_change_is_refused_with_how_to_fix_it() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new(DECODE_WAV);
    ok(&w.build(&[]));
    let key = w.cache.join("journal.key");
    let before = tree_state(&w.venv);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = w.cmd(&["restore", "fakecodec"], &[]);
    assert!(said(&out).contains("chmod 600"), "{}", said(&out));
    assert_same!(tree_state(&w.venv), before);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::hard_link(&key, w.tmp.path().join("stolen.key")).unwrap();
    let out = w.cmd(&["restore", "fakecodec"], &[]);
    assert!(said(&out).contains("2 hard links"), "{}", said(&out));
    assert_same!(tree_state(&w.venv), before);
    std::fs::remove_file(w.tmp.path().join("stolen.key")).unwrap();
    // A cache anyone can write to, and a cache inside the venv.
    std::fs::set_permissions(&w.cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = w.cmd(&["restore", "fakecodec"], &[]);
    assert!(said(&out).contains("chmod go-w"), "{}", said(&out));
    std::fs::set_permissions(&w.cache, std::fs::Permissions::from_mode(0o755)).unwrap();
    let inside = w.venv.join("cache");
    let out = on(&w, &w.venv, &inside, &["restore", "fakecodec"]);
    assert!(
        said(&out).contains("inside the Python environment"),
        "{}",
        said(&out)
    );
    assert!(!inside.exists());
    assert_same!(tree_state(&w.venv), before);
    // Fixed as said: it works.
    ok(&w.cmd(&["restore", "fakecodec"], &[]));
}

/// A process that swaps `.rocbuild/` with a link to a folder outside the venv, over and over
/// (renameat2 RENAME_EXCHANGE), while `restore` runs: rocbuild creates its lock and journal in
/// the directory it holds open, never where the link points. (Before, 5 runs in 32 left a
/// lock or a journal outside.)
#[test]
fn a_racing_swap_of_the_state_folder_for_a_link_puts_no_file_outside() {
    use std::ffi::CString;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let w = World::new(DECODE_WAV);
    let outside = w.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let state = w.site.join(".rocbuild");
    let link = w.site.join(".rocbuild-swap");
    for round in 0..32 {
        // A held install to restore (its manifest sealed with this world's key).
        std::fs::create_dir_all(w.site.join("pkg")).unwrap();
        std::fs::write(w.site.join("pkg/lib.so"), "rocbuild's build").unwrap();
        let m = serde_json::json!({
            "schema": 1, "recipe": "pkg", "version": "1.0", "recipe_hash": "h",
            "fingerprint": "f", "source_url": null, "source_commit": null,
            "torch_version": "2.9.1", "torch_git": null, "flavor": "cpu", "ffmpeg_major": 7,
            "python": "p", "defines": {}, "runpath": [], "parked": [], "installed_at": 0,
            "files": [{"path": "pkg/lib.so", "size": 16,
                "sha256": format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(b"rocbuild's build"))}],
        });
        write_sealed_manifest(&w.site, &w.cache, &m.to_string());
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (stop, a, b) = (
                stop.clone(),
                CString::new(state.to_str().unwrap()).unwrap(),
                CString::new(link.to_str().unwrap()).unwrap(),
            );
            std::thread::spawn(move || {
                let mut swapped = false;
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: NUL-terminated paths; the call changes only those two names.
                    let r = unsafe {
                        libc::renameat2(
                            libc::AT_FDCWD,
                            a.as_ptr(),
                            libc::AT_FDCWD,
                            b.as_ptr(),
                            libc::RENAME_EXCHANGE,
                        )
                    };
                    if r == 0 {
                        swapped = !swapped;
                    }
                }
                if swapped {
                    // SAFETY: as above: swap back, so the real folder is at `.rocbuild` again.
                    unsafe {
                        libc::renameat2(
                            libc::AT_FDCWD,
                            a.as_ptr(),
                            libc::AT_FDCWD,
                            b.as_ptr(),
                            libc::RENAME_EXCHANGE,
                        )
                    };
                }
            })
        };
        let _ = w.cmd(&["restore", "pkg"], &[]);
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        let made: Vec<_> = std::fs::read_dir(&outside)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            made.is_empty(),
            "round {round}: rocbuild made {made:?} outside the venv"
        );
        // Whatever the race did to this round's restore, start the next from a clean state.
        let _ = std::fs::remove_file(&link);
        if state.is_dir() {
            std::fs::remove_dir_all(&state).unwrap();
        }
    }
}
