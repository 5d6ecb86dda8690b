//! Crash safety: the real binary SIGKILLs itself right after each filesystem step of an
//! install (ROCBUILD_TEST_KILL_AFTER_STEP, test-only). After every kill, the next rocbuild
//! command that touches the venv (`status`) leaves it byte-identical to before the install or
//! to after it, never in between; and the next run finishes cleanly.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

use crate::common::*;

/// The venv's exact state, fast enough to take ~500 times: every file and directory of the
/// venv is listed; the package, its dist-info, torch and `.rocbuild/` are hashed in full; the
/// venv's own tooling (pip, setuptools, the interpreter), which an install never writes, is
/// compared by size and mtime (any write would change those). The manifest records when it
/// was written (`installed_at`) and the mtimes of the files it installed, which differ from
/// run to run by nature: its other fields are compared exactly, those two (and the seal over
/// them) are left out.
fn state(w: &World) -> BTreeMap<String, String> {
    let site_rel = w.site.strip_prefix(&w.venv).unwrap().to_path_buf();
    let mut s = BTreeMap::new();
    let mut stack = vec![w.venv.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(&w.venv).unwrap().to_path_buf();
            let md = std::fs::symlink_metadata(&p).unwrap();
            if md.is_dir() {
                s.insert(format!("{}/", rel.display()), String::new());
                stack.push(p);
                continue;
            }
            let ours = rel.strip_prefix(&site_rel).is_ok_and(|r| {
                let top = r.iter().next().unwrap().to_string_lossy().into_owned();
                top.starts_with("fakecodec") || top.starts_with("torch") || top == ".rocbuild"
            });
            let v = if md.is_symlink() {
                format!("-> {}", std::fs::read_link(&p).unwrap().display())
            } else if ours {
                format!(
                    "{:x}",
                    <sha2::Sha256 as sha2::Digest>::digest(std::fs::read(&p).unwrap())
                )
            } else {
                format!("{} bytes, mtime {:?}", md.len(), md.modified().unwrap())
            };
            s.insert(rel.display().to_string(), v);
        }
    }
    let rel = w
        .site
        .join(".rocbuild/fakecodec.json")
        .strip_prefix(&w.venv)
        .unwrap()
        .display()
        .to_string();
    if let Some(v) = s.get_mut(&rel) {
        let mut m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(w.venv.join(&rel)).unwrap()).unwrap();
        m["installed_at"] = 0.into();
        // The seal covers those two as well: it differs with them.
        m["seal"] = serde_json::Value::Null;
        for f in m["files"].as_array_mut().unwrap() {
            f["mtime_ns"] = serde_json::Value::Null;
        }
        *v = m.to_string();
    }
    s
}

fn build_killed_after(w: &World, step: u64) -> std::process::ExitStatus {
    killed_after(w, &["fakecodec"], step)
}

fn killed_after(w: &World, args: &[&str], step: u64) -> std::process::ExitStatus {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rocbuild"));
    c.args(args);
    c.args([
        "--recipes",
        w.recipes.to_str().unwrap(),
        "--venv",
        w.venv.to_str().unwrap(),
        "--cache",
        w.cache.to_str().unwrap(),
        "-q",
    ]);
    for k in [
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "ROCBUILD_CACHE",
        "LD_LIBRARY_PATH",
        "PYTHONPATH",
    ] {
        c.env_remove(k);
    }
    for (k, v) in w.env() {
        c.env(k, v);
    }
    c.env("ROCBUILD_TEST_KILL_AFTER_STEP", step.to_string());
    c.output().unwrap().status
}

#[derive(Debug, PartialEq, Clone, Copy)]
enum Seen {
    Before,
    After,
}

#[test]
fn a_run_killed_after_any_install_step_is_undone_or_finished() {
    let w = World::new(DECODE_WAV);
    // Many files, so the install has well over 100 steps: 36 data files beside the libraries.
    let recipe = w.recipes.join("fakecodec.toml");
    let text = std::fs::read_to_string(&recipe).unwrap();
    let text = text
        .replace("artifacts = [", "artifacts = [\"fakecodec_data_*\", ")
        .replace(
            "CMAKE_BUILD_TYPE = \"Release\"",
            "CMAKE_BUILD_TYPE = \"Release\", FAKECODEC_EXTRA_FILES = \"36\"",
        );
    std::fs::write(&recipe, text).unwrap();
    ok(&w.build(&[]));
    assert!(w.site.join("fakecodec/fakecodec_data_36.txt").exists());

    // Each round reinstalls over a file pip "overwrote" (the build tree is reused: only the
    // install repeats). One round first, so the backup holds its first original already.
    let major = w.ffmpeg_major();
    let core = w
        .site
        .join(format!("fakecodec/libfakecodec_core{major}.so"));
    let overwrite = || std::fs::write(&core, b"the wheel's prebuilt library").unwrap();
    overwrite();
    ok(&w.build(&[]));
    let after = state(&w);
    overwrite();
    let before = state(&w);
    assert_ne!(before, after);

    let mut seen = Vec::new();
    let mut step = 1;
    loop {
        overwrite();
        assert_eq!(
            state(&w),
            before,
            "step {step}: the round did not start from before"
        );
        let status = build_killed_after(&w, step);
        if status.success() {
            // Fewer steps than `step`: the whole install ran.
            assert_eq!(state(&w), after);
            break;
        }
        assert_eq!(
            status.signal(),
            Some(9),
            "step {step}: not killed by SIGKILL: {status:?}"
        );
        // The next command on the venv recovers it: before or after, nothing in between.
        let st = w.cmd(&["status"], &[]);
        let now = state(&w);
        let s = if now == before {
            Seen::Before
        } else if now == after {
            Seen::After
        } else {
            let diff: Vec<_> = now
                .iter()
                .filter(|(k, v)| before.get(*k) != Some(v) && after.get(*k) != Some(v))
                .map(|(k, _)| k.clone())
                .chain(
                    before
                        .keys()
                        .chain(after.keys())
                        .filter(|k| !now.contains_key(*k))
                        .cloned(),
                )
                .collect();
            panic!(
                "killed after step {step}: the venv is neither before nor after; differing: {diff:#?}\nstatus said:\n{}{}",
                st.stdout, st.stderr
            );
        };
        // status agrees with what it left: overwritten (before) or fresh (after).
        assert_eq!(
            st.code,
            if s == Seen::Before { 1 } else { 0 },
            "step {step}: {}",
            st.stdout
        );
        seen.push(s);
        // And the next run finishes cleanly, with the after state.
        ok(&w.build(&[]));
        assert_eq!(
            state(&w),
            after,
            "step {step}: the rerun did not reach the after state"
        );
        step += 1;
    }
    let steps = step - 1;
    assert!(steps >= 100, "only {steps} install steps were killed");
    // Undone up to the commit point, finished after it: one switch, both sides seen.
    let switch = seen
        .iter()
        .position(|s| *s == Seen::After)
        .expect("never after");
    assert!(switch > 0, "never before");
    assert!(seen[switch..].iter().all(|s| *s == Seen::After), "{seen:?}");
    eprintln!(
        "killed after each of {steps} steps; undone for the first {switch}, finished for the rest"
    );
}

#[test]
fn a_first_install_killed_at_sampled_steps_leaves_no_trace_or_finishes() {
    // The first install into a venv that never had the package: pip's part is staged too,
    // and `.rocbuild/` itself is new. Every 3rd step (pip makes each round slow).
    let w = World::new(DECODE_WAV);
    let before = state(&w);
    ok(&w.build(&[]));
    let after = state(&w);
    let reset = || {
        for e in std::fs::read_dir(&w.site).unwrap().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("fakecodec") || n == ".rocbuild" {
                let p = e.path();
                if p.is_dir() {
                    std::fs::remove_dir_all(p).unwrap();
                } else {
                    std::fs::remove_file(p).unwrap();
                }
            }
        }
    };
    let mut seen = Vec::new();
    for step in (1..).step_by(3) {
        reset();
        assert_eq!(state(&w), before);
        let status = build_killed_after(&w, step);
        if status.success() {
            assert_eq!(state(&w), after);
            break;
        }
        assert_eq!(status.signal(), Some(9), "step {step}: {status:?}");
        w.cmd(&["status"], &[]);
        let now = state(&w);
        let s = if now == before {
            Seen::Before
        } else if now == after {
            Seen::After
        } else {
            panic!("killed after step {step}: neither before nor after");
        };
        seen.push(s);
        ok(&w.build(&[]));
        assert_eq!(state(&w), after, "step {step}");
    }
    assert!(seen.len() >= 8 && seen[0] == Seen::Before, "{seen:?}");
}

#[test]
fn a_restore_killed_after_any_step_is_finished_by_the_next_command() {
    // pip installed the package; rocbuild replaced its libraries; `restore` is killed after
    // each of its filesystem steps. The next command (`status`) leaves the venv either as
    // rocbuild left it (killed before the restore's commit point) or exactly as pip left it.
    let w = World::new(DECODE_WAV);
    pip_install(&w.venv, &w.wheels, "fakecodec==1.0.0");
    let before = state(&w);
    ok(&w.build(&[]));
    let after = state(&w);
    let mut seen = Vec::new();
    for step in 1.. {
        let status = killed_after(&w, &["restore", "fakecodec"], step);
        if status.success() {
            assert_eq!(state(&w), before, "a whole restore");
            break;
        }
        assert_eq!(status.signal(), Some(9), "step {step}: {status:?}");
        w.cmd(&["status"], &[]);
        let now = state(&w);
        let s = if now == before {
            Seen::Before
        } else if now == after {
            Seen::After
        } else {
            panic!("restore killed after step {step}: the venv is neither installed nor restored");
        };
        seen.push(s);
        if s == Seen::Before {
            ok(&w.build(&[]));
        }
        assert_eq!(state(&w), after, "step {step}");
    }
    // Killed while writing its journal: not started; after that: finished.
    assert_eq!(seen.first(), Some(&Seen::After), "{seen:?}");
    assert!(
        seen.len() >= 6,
        "only {} restore steps: {seen:?}",
        seen.len()
    );
    assert!(seen[1..].iter().all(|s| *s == Seen::Before), "{seen:?}");
}
