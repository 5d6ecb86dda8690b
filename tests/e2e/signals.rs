//! Ctrl-C and SIGTERM: real signals sent to the real binary at several points of a real run
//! (the compile, a dependency built from source, pip fetching the Python part, the install's
//! file moves, the verification).
//! Each time: the children are gone (their whole process group), nothing is left in the
//! venv (byte for byte as before, no `.rocbuild/lock`, no staging), the run says what it
//! undid and exits with 128 + the signal; the next run goes on and finishes.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::common::*;

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

/// The real binary on the fixture package of `w`, started as [`rocbuild`] runs it, with its
/// stderr read line by line.
pub(crate) fn spawn(
    w: &World,
    extra: &[&str],
    env: &[(&str, String)],
) -> (Child, Receiver<String>) {
    let mut args = vec![
        "fakecodec",
        "--recipes",
        w.recipes.to_str().unwrap(),
        "--venv",
        w.venv.to_str().unwrap(),
        "--cache",
        w.cache.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    // The caller's environment after the world's: it may override it (PIP_FIND_LINKS).
    let mut all: Vec<(&str, String)> = w.env();
    all.extend_from_slice(env);
    spawn_args(&args, &all)
}

/// The real binary with `args`, started as [`rocbuild`] runs it, with its stderr read line
/// by line.
fn spawn_args(args: &[&str], env: &[(&str, String)]) -> (Child, Receiver<String>) {
    let mut c = rocbuild_command(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Wait (at most 120 s) until `ready` holds.
pub(crate) fn wait_for(what: &str, ready: impl FnMut() -> bool) {
    wait_within(120, what, ready)
}

/// Children must be gone with rocbuild, not after their own timeouts (the fixture's waiting
/// step gives up after 60 s, pip after 15 s per try): 5 s at most.
fn gone_soon(what: &str, ready: impl FnMut() -> bool) {
    wait_within(5, what, ready)
}

fn wait_within(secs: u64, what: &str, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(secs);
    while !ready() {
        assert!(Instant::now() < until, "never saw: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn send(child: &Child, signal: i32) {
    // SAFETY: kill(2) on our own child's pid; no pointers.
    let r = unsafe { libc::kill(child.id() as i32, signal) };
    assert_eq!(r, 0);
}

/// Wait for the run to end (at most 60 s); its exit code and everything it said on stderr.
pub(crate) fn finish(mut child: Child, rx: Receiver<String>) -> (i32, String) {
    let until = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("rocbuild did not end within 60 s of the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut text = String::new();
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(2)) {
        text.push_str(&l);
        text.push('\n');
    }
    (status.code().unwrap_or(-1), text)
}

/// Processes whose command line mentions `needle` (children that outlived the run).
fn processes_with(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                out.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
            }
        }
    }
    out
}

fn log_has(w: &World, text: &str) -> bool {
    w.logs().contains(text)
}

/// What must hold after any interrupted run.
fn assert_undone(
    w: &World,
    before: &std::collections::BTreeMap<String, String>,
    code: i32,
    signal: i32,
    said: &str,
) {
    assert_eq!(code, 128 + signal, "stderr:\n{said}");
    assert!(said.contains("interrupted by"), "{said}");
    assert!(
        said.contains("nothing was installed") || said.contains("the install was rolled back"),
        "{said}"
    );
    assert_eq!(
        &tree_state(&w.venv),
        before,
        "the venv changed; rocbuild said:\n{said}"
    );
    assert!(!w.site.join(".rocbuild/lock").exists());
    assert!(!w.site.join(".rocbuild/txn").exists());
}

#[test]
fn a_signal_during_the_compile_stops_the_compiler_and_leaves_the_venv_as_it_was() {
    let w = World::new(DECODE_WAV);
    pip_install(&w.venv, &w.wheels, "fakecodec==1.0.0");
    let before = tree_state(&w.venv);
    // The compile holds a build step that waits for a file that never comes.
    let never: PathBuf = w.tmp.path().join("never-appears-compile");
    let define = format!("FAKECODEC_WAIT_FOR={}", never.display());
    for signal in [SIGINT, SIGTERM] {
        let (child, rx) = spawn(&w, &["-D", &define], &[]);
        // The fixture's waiting build step (a `sh -c '... seq 600 ...'` under ninja), not
        // rocbuild itself, whose command line names the file too.
        let waiting = || {
            processes_with(never.to_str().unwrap())
                .into_iter()
                .filter(|p| p.contains("seq 600"))
                .count()
        };
        wait_for("the compile's waiting step", || waiting() > 0);
        send(&child, signal);
        let (code, said) = finish(child, rx);
        assert!(said.contains("during build"), "{said}");
        assert_undone(&w, &before, code, signal, &said);
        // ninja and the step it ran went with rocbuild.
        gone_soon("the compile's children to go", || waiting() == 0);
    }
    // The next run goes on from the kept build tree and finishes.
    ok(&w.build(&[]));
}

#[test]
fn a_signal_while_pip_fetches_the_python_part_stops_pip_and_leaves_no_staging() {
    // The venv never had the package: pip fetches its Python part beside the build, here
    // from an index that accepts the connection and never answers.
    let w = World::new(DECODE_WAV);
    let before = tree_state(&w.venv);
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/never/", server.local_addr().unwrap());
    let (tx, connected) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in server.incoming().flatten() {
            held.push(s); // held open, never answered
            let _ = tx.send(());
        }
    });
    let (child, rx) = spawn(&w, &[], &[("PIP_FIND_LINKS", url.clone())]);
    connected
        .recv_timeout(Duration::from_secs(120))
        .expect("pip never asked the index");
    send(&child, SIGTERM);
    let (code, said) = finish(child, rx);
    // pip runs beside the build: the signal comes during the compile or while rocbuild waits
    // for pip; either way pip is stopped (below) and nothing is installed.
    assert!(
        said.contains("python part: fakecodec==1.0.0 (pip"),
        "{said}"
    );
    assert_undone(&w, &before, code, SIGTERM, &said);
    assert!(
        !w.site.join(".rocbuild").exists(),
        "a first install leaves no .rocbuild/"
    );
    gone_soon("pip to go", || processes_with(&url).is_empty());
    ok(&w.build(&[]));
}

#[test]
fn a_signal_during_the_installs_file_moves_rolls_them_back() {
    let w = World::new(DECODE_WAV);
    pip_install(&w.venv, &w.wheels, "fakecodec==1.0.0");
    let before = tree_state(&w.venv);
    // Build once and restore, so each round below is only the install.
    ok(&w.build(&[]));
    ok(&w.cmd(&["restore", "fakecodec"], &[]));
    assert_eq!(tree_state(&w.venv), before);
    // `swap+N`: N steps after the swap's journal was written, files already moved in.
    for (step, signal) in [
        ("2", SIGINT),
        ("5", SIGTERM),
        ("9", SIGINT),
        ("swap+2", SIGINT),
    ] {
        let (child, rx) = spawn(
            &w,
            &[],
            &[("ROCBUILD_TEST_PAUSE_AFTER_STEP", step.to_string())],
        );
        let mut said = String::new();
        wait_for("the pause", || {
            while let Ok(l) = rx.try_recv() {
                said.push_str(&l);
                said.push('\n');
            }
            said.contains("paused after install step")
        });
        send(&child, signal);
        let (code, rest) = finish(child, rx);
        let said = said + &rest;
        assert!(said.contains("during the install"), "step {step}: {said}");
        if step.starts_with("swap+") {
            assert!(
                said.contains("the install was rolled back"),
                "step {step}: {said}"
            );
        }
        assert_undone(&w, &before, code, signal, &said);
    }
    ok(&w.build(&[]));
}

#[test]
fn a_signal_during_the_verification_rolls_the_install_back() {
    // A verification that takes its time: the install is live while it runs.
    let verify = format!("{DECODE_WAV}\nimport time\ntime.sleep(300)  # rocbuild-signal-test");
    let w = World::new(&verify);
    pip_install(&w.venv, &w.wheels, "fakecodec==1.0.0");
    let before = tree_state(&w.venv);
    let (child, rx) = spawn(&w, &[], &[]);
    wait_for("the verification", || log_has(&w, "==> verify"));
    // The new files are in place while the verification runs.
    wait_for("the install to be live", || tree_state(&w.venv) != before);
    send(&child, SIGINT);
    let (code, said) = finish(child, rx);
    assert!(said.contains("during verify"), "{said}");
    assert_undone(&w, &before, code, SIGINT, &said);
    assert!(said.contains("the install was rolled back"), "{said}");
    gone_soon("the verifying Python to go", || {
        processes_with("rocbuild-signal-test").is_empty()
    });
}

/// `[dependency.X]`: a signal while the dependency compiles (before the package's own
/// configure) stops its build tool and the step it ran, installs nothing, marks nothing
/// built in the shared cache; the next run resumes the kept build tree and finishes.
#[test]
fn a_signal_during_a_dependency_build_stops_it_and_marks_nothing_built() {
    use crate::ctranslate2_build::{fakegemm_recipe, fakegemm_repo, fixture_recipes};
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let repos = root.join("repos");
    std::fs::create_dir_all(&repos).unwrap();
    let never = root.join("never-appears-dependency");
    let commit = fakegemm_repo(
        &repos,
        "fakegemm",
        &format!(
            "add_custom_target(wait ALL COMMAND sh ${{CMAKE_CURRENT_SOURCE_DIR}}/wait.sh {})\n",
            never.display()
        ),
    );
    let recipes = fixture_recipes(root, &fakegemm_recipe(&repos.join("fakegemm.git"), &commit));
    let cache = root.join("cache");
    let venv = root.join("venv");
    make_venv(&venv);
    let before = tree_state(&venv);
    let args = [
        "faketrans",
        "--recipes",
        recipes.to_str().unwrap(),
        "--venv",
        venv.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
    ];
    let waiting = || {
        processes_with(never.to_str().unwrap())
            .into_iter()
            .filter(|p| p.contains("wait.sh"))
            .count()
    };
    let (child, rx) = spawn_args(&args, &[]);
    wait_for("the dependency's waiting build step", || waiting() > 0);
    send(&child, SIGINT);
    let (code, said) = finish(child, rx);
    assert_eq!(code, 128 + SIGINT, "{said}");
    assert!(
        said.contains("interrupted by SIGINT")
            && said.contains("during dependency fakegemm: build")
            && said.contains("nothing was installed"),
        "{said}"
    );
    assert_eq!(tree_state(&venv), before, "the venv changed:\n{said}");
    gone_soon("the dependency's build step to go", || waiting() == 0);
    let stamps: Vec<_> = std::fs::read_dir(cache.join("deps"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("prefix/.rocbuild-built").exists())
        .collect();
    assert!(
        stamps.is_empty(),
        "an interrupted dependency is marked built"
    );
    // Resumed: the kept build tree is reused, the dependency built and linked.
    std::fs::write(&never, "").unwrap();
    let out = rocbuild(&args, &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("translated with the cpu with fakegemm 1.0 backend"),
        "{}",
        out.stdout
    );
}

/// `rocbuild test` killed with SIGTERM while upstream's suite runs (a test hangs): pytest and
/// the Python it runs stop with it, its run folder (the overlay of test requirements, which
/// holds what the venv lacks and nothing the venv has) is gone,
/// it ends with 143 saying what it stopped. A run killed outright (SIGKILL) leaves its folder:
/// the next `rocbuild test` removes it, because its process is gone.
#[test]
fn a_signal_during_rocbuild_test_stops_pytest_and_removes_its_run_folder() {
    let Some(w) = crate::test_suite::world_with_tests() else {
        return;
    };
    // The venv has one of pytest's own requirements (the real `packaging` wheel, unpacked as
    // pip would): the overlay must not get a second copy of it.
    let packaging = std::fs::read_dir(&w.wheels)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("packaging-")
        })
        .expect("the packaging wheel beside pytest's");
    crate::windows::unpack(&packaging, &site_packages(&w.venv));
    let venv_before = tree_state(&w.venv);
    let marker = w.tmp.path().join("hanging-test-pid");
    let args = [
        "test",
        "fakecodec",
        "--recipes",
        w.recipes.to_str().unwrap(),
        "--venv",
        w.venv.to_str().unwrap(),
        "--cache",
        w.cache.to_str().unwrap(),
    ];
    let mut env: Vec<(&str, String)> = w.env();
    env.push(("FAKECODEC_TEST_HANG", marker.display().to_string()));
    for (signal, code) in [(SIGTERM, 143), (9, -1)] {
        let _ = std::fs::remove_file(&marker);
        let (child, rx) = spawn_args(&args, &env);
        wait_for("the hanging test", || {
            std::fs::read_to_string(&marker).is_ok_and(|p| !p.is_empty())
        });
        let test_pid = std::fs::read_to_string(&marker).unwrap();
        let runs = crate::test_suite::runs_left(&w.cache);
        assert_eq!(runs.len(), 1);
        // What the venv lacks of the test requirements, and only that, is in the overlay.
        let overlay = w.cache.join("test").join(&runs[0]).join("overlay");
        assert!(overlay.join("pytest").is_dir() && overlay.join("pluggy").is_dir());
        assert!(
            !overlay.join("packaging").exists(),
            "the venv's packaging again"
        );
        send(&child, signal);
        let (got, said) = finish(child, rx);
        assert_eq!(got, code, "{said}");
        if signal == SIGTERM {
            gone_soon("the test's Python", || {
                !Path::new("/proc").join(test_pid.trim()).exists()
            });
            assert!(
                said.contains("pytest and what it started were stopped"),
                "{said}"
            );
            assert_eq!(crate::test_suite::runs_left(&w.cache), Vec::<String>::new());
        } else {
            // SIGKILL: nothing of rocbuild ran; its pytest is an orphan until killed here.
            assert_eq!(crate::test_suite::runs_left(&w.cache).len(), 1);
            // SAFETY: kill(2) of the orphaned test Python this test started; no pointers.
            unsafe {
                libc::kill(test_pid.trim().parse::<i32>().unwrap(), 9);
            }
        }
    }
    // The next run removes the killed run's folder, and its own.
    let out = w.cmd(&["test", "fakecodec", "--quick"], &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(crate::test_suite::runs_left(&w.cache), Vec::<String>::new());
    assert_eq!(tree_state(&w.venv), venv_before);
}
