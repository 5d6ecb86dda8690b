//! The user's packages are never lost (issue 26), shown as a model-based test: proptest's
//! state machine drives random sequences of 5–15 real operations — rocbuild installs of two
//! versions (some killed with SIGKILL or interrupted with SIGINT at a random install step and
//! then run again), pip install / `--force-reinstall` / uninstall, `uv pip install`, a torch
//! upgrade, `rebuild --if-stale`, `restore` (some killed mid-way), `status` — on a real venv
//! with the fixture recipe and a real pip-installable wheel of the same package, built once per
//! test run. A reference model (which installer holds the package, at which version, and what
//! rocbuild took over) predicts every step; after each one the real venv is checked:
//!
//! - every dist-info's RECORD lists files that exist with the recorded hashes, and every file
//!   under the package folder (bytecode aside) is listed by a RECORD or by rocbuild's manifest;
//! - the package imports, at the model's version, whenever the model says it is installed, and
//!   neither its folder nor a dist-info is there when the model says it is not;
//! - `status --json` names the model's state, with the matching exit code;
//! - after `restore`, the package folder and dist-info are byte-identical to what they were
//!   just before rocbuild last took the package over.
//!
//! Hostile steps are part of the sequences (issue 38): a pip-installed wheel that plants a
//! `.rocbuild/journal.json` naming files outside the venv (an older rocbuild's format, or a
//! journal sealed with another key), a link swapped in for `.rocbuild/lock` that points at a
//! file outside, and a disk that fills up at a random step of an install or a restore. While a
//! planted journal or a link is there, every command that would change the venv refuses and
//! changes nothing, and `status` still tells the truth; after any step, a canary folder outside
//! the venv (which the planted state names) is byte-identical, and a full disk leaves the venv
//! as before or as after, with no journal, temporary file or staging area left.
//!
//! A failure shrinks to the shortest sequence, printed as the commands a person would type.
//! CI runs a fixed seed and one random case; `cargo xtask soak N` runs N random cases.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};

use crate::common::*;

const VERSIONS: [&str; 2] = ["1.0.0", "0.9.0"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Pip,
    Uv,
    Rocbuild,
}

/// The package as an installer left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pkg {
    Absent,
    Installed { owner: Owner, version: usize },
}

impl Pkg {
    fn version(self) -> Option<usize> {
        match self {
            Pkg::Absent => None,
            Pkg::Installed { version, .. } => Some(version),
        }
    }
    fn by_rocbuild(self) -> bool {
        matches!(
            self,
            Pkg::Installed {
                owner: Owner::Rocbuild,
                ..
            }
        )
    }
}

/// rocbuild's record of the package (its manifest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rb {
    version: usize,
    torch_built: u32,
}

/// Hostile state someone else put in the venv, which rocbuild must refuse to act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    /// A wheel shipped `.rocbuild/journal.json` (forged: `true` sealed with another key).
    Planted { forged: bool },
    /// `.rocbuild/lock` is a link to a file outside the venv.
    LockLink,
}

#[derive(Clone, Debug)]
struct Model {
    pkg: Pkg,
    /// Hostile state in the venv, until the user removes it.
    blocked: Option<Block>,
    rb: Option<Rb>,
    /// Torch upgrades so far (torch 2.9.(1 + n)).
    torch: u32,
    /// Takeovers so far: at each, the package as it was becomes the baseline.
    epoch: u32,
    /// The last operation was a restore that gave the baseline back.
    gave_back: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Signal {
    Kill,
    Int,
}

#[derive(Clone)]
enum Op {
    Install(usize),
    /// An install stopped after filesystem step `step`, then run again to the end.
    InstallStopped {
        version: usize,
        signal: Signal,
        step: u64,
    },
    PipInstall(usize),
    PipForce(usize),
    PipUninstall,
    UvInstall(usize),
    TorchUpgrade,
    RebuildIfStale,
    Restore,
    /// A restore SIGKILLed after filesystem step `step`; the next command finishes it.
    RestoreKilled(u64),
    Status,
    /// An install on a disk that fills up after filesystem step `step`, then run again.
    InstallDiskFull {
        version: usize,
        step: u64,
    },
    /// A restore on a disk that fills up after filesystem step `step`, then run again.
    RestoreDiskFull(u64),
    /// Someone puts hostile state into the venv (see [`Block`]).
    Hostile(Block),
    /// The user removes it (pip uninstalls the planting wheel; the link is deleted).
    Unblock,
}

/// The commands a person would type (V is the venv, W the wheel directory).
impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = |i: &usize| VERSIONS[*i];
        match self {
            Op::Install(i) => write!(f, "rocbuild fakecodec --version {} --venv V", v(i)),
            Op::InstallStopped {
                version,
                signal,
                step,
            } => write!(
                f,
                "rocbuild fakecodec --version {} --venv V  # {} after install step {step}, then again",
                v(version),
                match signal {
                    Signal::Kill => "kill -9",
                    Signal::Int => "Ctrl-C",
                }
            ),
            Op::PipInstall(i) => write!(f, "V/bin/pip install --no-deps -f W fakecodec=={}", v(i)),
            Op::PipForce(i) => write!(
                f,
                "V/bin/pip install --no-deps --force-reinstall -f W fakecodec=={}",
                v(i)
            ),
            Op::PipUninstall => write!(f, "V/bin/pip uninstall -y fakecodec"),
            Op::UvInstall(i) => write!(f, "uv pip install --python V -f W fakecodec=={}", v(i)),
            Op::TorchUpgrade => write!(f, "# torch upgraded (dist-info, version.py, libc10.so)"),
            Op::RebuildIfStale => write!(f, "rocbuild rebuild --if-stale --venv V"),
            Op::Restore => write!(f, "rocbuild restore fakecodec --venv V"),
            Op::RestoreKilled(step) => write!(
                f,
                "rocbuild restore fakecodec --venv V  # kill -9 after step {step}"
            ),
            Op::Status => write!(f, "rocbuild status --venv V"),
            Op::InstallDiskFull { version, step } => write!(
                f,
                "rocbuild fakecodec --version {} --venv V  # disk full after install step {step}, then again",
                v(version)
            ),
            Op::RestoreDiskFull(step) => write!(
                f,
                "rocbuild restore fakecodec --venv V  # disk full after step {step}, then again"
            ),
            Op::Hostile(Block::Planted { forged }) => write!(
                f,
                "V/bin/pip install --no-deps -f W planter  # ships .rocbuild/journal.json ({}) naming files outside",
                if *forged { "sealed with another key" } else { "an older rocbuild's format" }
            ),
            Op::Hostile(Block::LockLink) => {
                write!(f, "ln -sf OUTSIDE/lock-target V/.../.rocbuild/lock")
            }
            Op::Unblock => write!(f, "# the hostile file is removed (pip uninstall planter / rm the link)"),
        }
    }
}

impl Model {
    /// What `status` must say of the package, if rocbuild has a record of it.
    fn status(&self) -> Option<&'static str> {
        let rb = self.rb?;
        Some(match self.pkg {
            Pkg::Installed {
                owner: Owner::Rocbuild,
                ..
            } if rb.torch_built == self.torch => "fresh",
            Pkg::Installed {
                owner: Owner::Rocbuild,
                ..
            } => "stale",
            Pkg::Absent => "missing",
            Pkg::Installed { .. } => "overwritten",
        })
    }

    fn install(mut self, version: usize) -> Model {
        let current = Pkg::Installed {
            owner: Owner::Rocbuild,
            version,
        };
        let up_to_date =
            self.pkg == current && self.rb.is_some_and(|r| r.torch_built == self.torch);
        if !up_to_date {
            if !self.pkg.by_rocbuild() {
                self.epoch += 1;
            }
            self.pkg = current;
            self.rb = Some(Rb {
                version,
                torch_built: self.torch,
            });
        }
        self
    }
}

/// The package as it was at each takeover, as the model knows it (the SUT keeps the bytes).
#[derive(Clone, Debug)]
struct Reference {
    model: Model,
    baselines: Vec<Pkg>,
}

struct RefMachine;

impl ReferenceStateMachine for RefMachine {
    type State = Reference;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Reference> {
        // The venv starts with torch and, half the time, pip's install of the package.
        prop_oneof![
            Just(Pkg::Absent),
            (0..2usize).prop_map(|version| Pkg::Installed {
                owner: Owner::Pip,
                version
            })
        ]
        .prop_map(|pkg| Reference {
            model: Model {
                pkg,
                blocked: None,
                rb: None,
                torch: 0,
                epoch: 0,
                gave_back: false,
            },
            baselines: vec![pkg],
        })
        .boxed()
    }

    fn transitions(_: &Reference) -> BoxedStrategy<Op> {
        let v = 0..2usize;
        let v2 = 0..2usize;
        let sig = prop_oneof![Just(Signal::Kill), Just(Signal::Int)];
        prop_oneof![
            4 => v.clone().prop_map(Op::Install),
            1 => (v.clone(), sig, 1..40u64).prop_map(|(version, signal, step)| Op::InstallStopped { version, signal, step }),
            2 => v.clone().prop_map(Op::PipInstall),
            2 => v.clone().prop_map(Op::PipForce),
            1 => Just(Op::PipUninstall),
            1 => v.prop_map(Op::UvInstall),
            1 => Just(Op::TorchUpgrade),
            2 => Just(Op::RebuildIfStale),
            3 => Just(Op::Restore),
            1 => (1..12u64).prop_map(Op::RestoreKilled),
            1 => Just(Op::Status),
            1 => (v2.clone(), 1..40u64).prop_map(|(version, step)| Op::InstallDiskFull { version, step }),
            1 => (1..12u64).prop_map(Op::RestoreDiskFull),
            1 => any::<bool>().prop_map(|forged| Op::Hostile(Block::Planted { forged })),
            1 => Just(Op::Hostile(Block::LockLink)),
            2 => Just(Op::Unblock),
        ]
        .boxed()
    }

    fn apply(mut r: Reference, op: &Op) -> Reference {
        let before = r.model.pkg;
        let m = r.model.clone();
        let mut m = Model {
            gave_back: false,
            ..m
        };
        let changes_the_venv = matches!(
            op,
            Op::Install(_)
                | Op::InstallStopped { .. }
                | Op::InstallDiskFull { .. }
                | Op::RebuildIfStale
                | Op::Restore
                | Op::RestoreKilled(_)
                | Op::RestoreDiskFull(_)
        );
        m = match *op {
            // rocbuild refuses while hostile state is there: nothing changes.
            _ if changes_the_venv && m.blocked.is_some() => m,
            Op::Hostile(b) if m.blocked.is_none() => Model {
                blocked: Some(b),
                ..m
            },
            Op::Hostile(_) => m,
            Op::Unblock => Model { blocked: None, ..m },
            Op::Install(v)
            | Op::InstallStopped { version: v, .. }
            | Op::InstallDiskFull { version: v, .. } => m.install(v),
            Op::PipInstall(v) | Op::UvInstall(v) if m.pkg.version() == Some(v) => m,
            Op::PipInstall(v) | Op::PipForce(v) => Model {
                pkg: Pkg::Installed {
                    owner: Owner::Pip,
                    version: v,
                },
                ..m
            },
            Op::UvInstall(v) => Model {
                pkg: Pkg::Installed {
                    owner: Owner::Uv,
                    version: v,
                },
                ..m
            },
            Op::PipUninstall => Model {
                pkg: Pkg::Absent,
                ..m
            },
            Op::TorchUpgrade => Model {
                torch: m.torch + 1,
                ..m
            },
            Op::RebuildIfStale => match (m.rb, m.status()) {
                (Some(rb), Some(s)) if s != "fresh" => m.install(rb.version),
                _ => m,
            },
            Op::Restore | Op::RestoreKilled(_) | Op::RestoreDiskFull(_) => match m.rb {
                None => m,
                Some(_) if m.pkg.by_rocbuild() => Model {
                    pkg: *r.baselines.last().unwrap_or(&Pkg::Absent),
                    rb: None,
                    gave_back: true,
                    ..m
                },
                Some(_) => Model { rb: None, ..m },
            },
            Op::Status => m,
        };
        if m.epoch != r.model.epoch {
            r.baselines.push(before);
        }
        r.model = m;
        r
    }
}

/// The wheels of the package pip and uv install: the fixture's real libraries (built once,
/// by rocbuild, then made different by a trailing note, as another build's would be) and
/// its Python part, at both versions.
struct Wheels {
    dir: PathBuf,
    _build: World,
}

fn wheels() -> &'static Wheels {
    static W: OnceLock<Wheels> = OnceLock::new();
    W.get_or_init(|| {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ownership-model");
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("wheels");
        let w = World::new(DECODE_WAV);
        ok(&w.build(&[]));
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        for e in std::fs::read_dir(w.site.join("fakecodec"))
            .unwrap()
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".so") {
                continue;
            }
            let mut bytes = std::fs::read(e.path()).unwrap();
            bytes.extend_from_slice(b"\0built by the package's own CI");
            files.push((format!("fakecodec/{name}"), bytes));
        }
        let init = std::fs::read(fixture_dir().join("fakecodec_init.py")).unwrap();
        files.push(("fakecodec/__init__.py".into(), init));
        // The fixture's libraries name the build venv's libtorch by its path: that venv
        // stays for the whole run (a static is never dropped).
        let refs: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_slice()))
            .collect();
        for v in VERSIONS {
            make_wheel_files(&dir, "fakecodec", v, &refs);
        }
        Wheels { dir, _build: w }
    })
}

/// The system under test: a real venv, its recipe, cache and wheels, and the bytes of the
/// package at each takeover.
struct Sut {
    w: World,
    baselines: Vec<BTreeMap<String, Vec<u8>>>,
    /// A folder outside the venv that hostile state names; it must never change.
    canary: PathBuf,
}

/// Every file under `dir`, byte for byte.
fn tree_bytes(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    rocbuild_venv::walk(dir)
        .into_iter()
        .map(|(rel, p)| (rel, std::fs::read(p).unwrap_or_default()))
        .collect()
}

/// The canary: what hostile state in the venv points at.
fn make_canary(root: &Path) -> PathBuf {
    let c = root.join("outside the venv");
    std::fs::create_dir_all(c.join("photos")).unwrap();
    std::fs::write(c.join("thesis.tex"), b"years of work").unwrap();
    std::fs::write(c.join("photos/1.jpg"), b"\xff\xd8 a photo").unwrap();
    std::fs::write(c.join("lock-target"), b"a file the lock link points at").unwrap();
    c
}

fn canary_bytes(c: &Path) -> BTreeMap<String, Vec<u8>> {
    tree_bytes(c)
}

/// A wheel whose only file is `.rocbuild/journal.json` naming the canary's files: an older
/// rocbuild's plain format, or a sealed journal with another key (`forged`).
fn planter_wheel(dir: &Path, site: &Path, canary: &Path, forged: bool) -> PathBuf {
    let text = if forged {
        let mut j = rocbuild_venv::journal::Journal::committed("fakecodec").unwrap();
        j.drop.push("fakecodec".into());
        j.seal(
            site,
            &rocbuild_venv::state_key::StateKey::from_bytes([0x5a; 32]),
        )
    } else {
        serde_json::json!({
            "recipe": "fakecodec", "created_state_dir": false, "ops": [], "phase": "commit",
            "remove": [canary.join("thesis.tex")],
            "put_back": [[canary.join("lock-target"), site.join("evil")]],
            "drop": [canary.join("photos"), site.join("fakecodec")],
        })
        .to_string()
    };
    make_wheel_files(
        dir,
        "planter",
        "1.0",
        &[(".rocbuild/journal.json", text.as_bytes())],
    )
}

/// The package's folder and dist-infos, byte for byte (bytecode included).
fn package_bytes(site: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(site).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name != "fakecodec" && !(name.starts_with("fakecodec-") && name.ends_with(".dist-info"))
        {
            continue;
        }
        for (rel, p) in rocbuild_venv::walk(&e.path()) {
            out.insert(format!("{name}/{rel}"), std::fs::read(p).unwrap());
        }
    }
    out
}

impl Sut {
    fn rocbuild(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        self.w.cmd(args, env)
    }

    fn install(&self, version: usize) -> Out {
        self.w.build(&["--version", VERSIONS[version]])
    }

    fn pip(&self, args: &[&str]) {
        let mut c = Command::new(self.w.venv.join("bin/python"));
        c.args(["-m", "pip", "--disable-pip-version-check", "-q"])
            .args(args)
            .env_remove("PYTHONDONTWRITEBYTECODE");
        run(&mut c);
    }

    fn pip_install(&self, version: usize, force: bool) {
        let spec = format!("fakecodec=={}", VERSIONS[version]);
        let dir = wheels().dir.to_str().unwrap().to_string();
        let mut args = vec!["install", "--no-deps", "--no-index", "--find-links", &dir];
        if force {
            args.push("--force-reinstall");
        }
        args.push(&spec);
        self.pip(&args);
    }

    fn uv_install(&self, version: usize) {
        run(Command::new(uv_binary())
            .args([
                "pip",
                "install",
                "--no-config",
                "--no-deps",
                "--no-index",
                "--find-links",
            ])
            .arg(&wheels().dir)
            .arg("--python")
            .arg(self.w.venv.join("bin/python"))
            .arg(format!("fakecodec=={}", VERSIONS[version]))
            .env("UV_PYTHON_DOWNLOADS", "never")
            .env("UV_CACHE_DIR", self.w.tmp.path().join("uv-cache")));
    }

    fn torch_upgrade(&self, n: u32) {
        for e in std::fs::read_dir(&self.w.site).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with("torch-") {
                std::fs::remove_dir_all(e.path()).unwrap();
            }
        }
        install_fake_torch(&self.w.site, &format!("2.9.{}", 1 + n));
        let lib = self.w.site.join("torch/lib/libc10.so");
        let mut bytes = std::fs::read(&lib).unwrap();
        bytes.extend_from_slice(format!("\0upgrade {n}").as_bytes());
        std::fs::write(&lib, bytes).unwrap();
    }

    /// Run an install stopped by `signal` after filesystem step `step`: the next command
    /// leaves the venv as before the install or with the install complete, never between;
    /// then the install runs again to its end.
    fn install_stopped(&self, version: usize, signal: Signal, step: u64) {
        let before = package_bytes(&self.w.site);
        let step_s = step.to_string();
        let mut c = rocbuild_command(&[
            "fakecodec",
            "--version",
            VERSIONS[version],
            "--recipes",
            self.w.recipes.to_str().unwrap(),
            "--venv",
            self.w.venv.to_str().unwrap(),
            "--cache",
            self.w.cache.to_str().unwrap(),
            "-q",
        ]);
        for (k, v) in self.w.env() {
            c.env(k, v);
        }
        let hook = match signal {
            Signal::Kill => "ROCBUILD_TEST_KILL_AFTER_STEP",
            Signal::Int => "ROCBUILD_TEST_PAUSE_AFTER_STEP",
        };
        c.env(hook, &step_s)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        if signal == Signal::Int {
            interrupt_when_paused(&mut child);
        }
        let _ = child.wait_with_output().unwrap();
        let st = self.rocbuild(&["status", "--json"], &[]);
        assert!(
            st.code == 0 || st.code == 1,
            "status after a stopped install: {}{}",
            st.stdout,
            st.stderr
        );
        let now = package_bytes(&self.w.site);
        if now != before {
            let m = read_manifest(&self.w.site, &self.w.cache, "fakecodec")
                .expect("a venv changed by a stopped install holds its manifest");
            assert!(
                rocbuild_venv::ownership::holds(&self.w.site, &m),
                "a stopped install left the package half-changed"
            );
        }
        ok(&self.install(version));
    }
}

/// Wait for the paused run's "paused after install step" line, then send it SIGINT; a run
/// that finishes before its step comes is left to finish.
fn interrupt_when_paused(child: &mut std::process::Child) {
    use std::io::{BufRead, BufReader};
    let Some(err) = child.stderr.take() else {
        return;
    };
    let pid = child.id() as i32;
    for line in BufReader::new(err).lines() {
        let Ok(line) = line else { break };
        if line.contains("rocbuild-test: paused after install step") {
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(pid, libc::SIGINT);
            }
            break;
        }
    }
}

impl Sut {
    fn canary_at_start(&self) -> BTreeMap<String, Vec<u8>> {
        let mut want = BTreeMap::new();
        want.insert(
            "lock-target".to_string(),
            b"a file the lock link points at".to_vec(),
        );
        want.insert("photos/1.jpg".to_string(), b"\xff\xd8 a photo".to_vec());
        want.insert("thesis.tex".to_string(), b"years of work".to_vec());
        want
    }

    /// With hostile state in the venv, a command that would change it refuses, says why,
    /// and changes nothing. `false`: `op` is not such a command.
    fn refused(&self, op: &Op, before: &BTreeMap<String, Vec<u8>>) -> bool {
        let args: &[&str] = match op {
            Op::Install(v)
            | Op::InstallStopped { version: v, .. }
            | Op::InstallDiskFull { version: v, .. } => &["fakecodec", "--version", VERSIONS[*v]],
            Op::RebuildIfStale => &["rebuild", "--if-stale"],
            Op::Restore | Op::RestoreKilled(_) | Op::RestoreDiskFull(_) => {
                &["restore", "fakecodec"]
            }
            _ => return false,
        };
        let out = self.rocbuild(args, &[]);
        assert_ne!(
            out.code, 0,
            "{op:?} with hostile state: {}{}",
            out.stdout, out.stderr
        );
        assert!(
            out.stderr.contains("rocbuild::journal::untrusted")
                || out.stderr.contains("rocbuild::state::escape"),
            "{op:?} refused without saying why: {}",
            out.stderr
        );
        assert!(
            package_bytes(&self.w.site) == *before,
            "{op:?} changed the venv while refusing"
        );
        true
    }

    fn hostile(&self, b: Block) {
        if self.blocked_now() {
            return;
        }
        match b {
            Block::Planted { forged } => {
                let dir = self.w.tmp.path().join(if forged {
                    "planter-forged"
                } else {
                    "planter-old"
                });
                let dir = dir.to_str().unwrap().to_string();
                self.pip(&[
                    "install",
                    "--no-deps",
                    "--no-index",
                    "--find-links",
                    &dir,
                    "planter",
                ]);
                assert!(rocbuild_venv::layout::journal(&self.w.site).is_file());
            }
            Block::LockLink => {
                let state = rocbuild_venv::layout::state_dir(&self.w.site);
                std::fs::create_dir_all(&state).unwrap();
                std::os::unix::fs::symlink(self.canary.join("lock-target"), state.join("lock"))
                    .unwrap();
            }
        }
    }

    fn blocked_now(&self) -> bool {
        let state = rocbuild_venv::layout::state_dir(&self.w.site);
        state.join("lock").is_symlink() || self.w.site.join("planter-1.0.dist-info").exists()
    }

    fn unblock(&self) {
        if self.w.site.join("planter-1.0.dist-info").exists() {
            self.pip(&["uninstall", "-y", "planter"]);
        }
        let state = rocbuild_venv::layout::state_dir(&self.w.site);
        if state.join("lock").is_symlink() {
            std::fs::remove_file(state.join("lock")).unwrap();
            let _ = std::fs::remove_dir(&state);
        }
    }

    /// No journal, temporary journal or staging area left in `.rocbuild/`.
    fn no_leftovers(&self, what: &str) {
        let state = rocbuild_venv::layout::state_dir(&self.w.site);
        for name in ["journal.json", "journal.json.tmp", "txn"] {
            assert!(
                !state.join(name).exists(),
                "{what} left .rocbuild/{name} behind"
            );
        }
    }

    /// An install on a disk that fills up after `step`: the venv as before (and the message
    /// says no space and that it was rolled back) or complete; then the install again.
    fn install_disk_full(&self, version: usize, step: u64) {
        let before = package_bytes(&self.w.site);
        let out = self.w.cmd(
            &["fakecodec", "--version", VERSIONS[version], "-q"],
            &[("ROCBUILD_TEST_FAIL_AFTER_STEP", &step.to_string())],
        );
        if out.code != 0 {
            assert!(
                out.stderr.to_lowercase().contains("no space left"),
                "a full disk not said as such: {}",
                out.stderr
            );
            assert!(
                package_bytes(&self.w.site) == before,
                "a failed install changed the venv"
            );
        } else {
            let m = read_manifest(&self.w.site, &self.w.cache, "fakecodec").unwrap();
            assert!(rocbuild_venv::ownership::holds(&self.w.site, &m));
        }
        self.no_leftovers("an install on a full disk");
        ok(&self.install(version));
    }

    /// A restore on a disk that fills up after `step`: nothing changed (and no leftovers) or
    /// restored; then the restore again.
    fn restore_disk_full(&self, step: u64, r: &Reference) {
        let before = package_bytes(&self.w.site);
        let out = self.rocbuild(
            &["restore", "fakecodec"],
            &[("ROCBUILD_TEST_FAIL_AFTER_STEP", &step.to_string())],
        );
        if out.code != 0 && !out.stderr.contains("has not installed") {
            assert!(
                out.stderr.to_lowercase().contains("no space left"),
                "a full disk not said as such: {}",
                out.stderr
            );
            assert!(
                package_bytes(&self.w.site) == before,
                "a failed restore changed the venv"
            );
        }
        self.no_leftovers("a restore on a full disk");
        let _ = self.rocbuild(&["restore", "fakecodec"], &[]);
        if r.model.gave_back {
            assert!(
                package_bytes(&self.w.site) == *self.baselines.last().unwrap(),
                "restore after a full disk: not the baseline"
            );
        }
    }
}

struct OwnershipTest;

impl StateMachineTest for OwnershipTest {
    type SystemUnderTest = Sut;
    type Reference = RefMachine;

    fn init_test(r: &Reference) -> Sut {
        let w = World::new(DECODE_WAV);
        let wheels = wheels();
        // Both versions build from the fixture repository and need torch 2.9.
        let repo = w.repos.join("fakecodec.git");
        run(Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["tag", "v0.9.0", "v1.0.0"]));
        let recipe = w.recipes.join("fakecodec.toml");
        let text = std::fs::read_to_string(&recipe).unwrap().replace(
            "version = \"0.9.0\"\ntorch = \">=2.8,<2.9\"",
            "version = \"0.9.0\"\ntorch = \">=2.9,<2.10\"",
        );
        std::fs::write(&recipe, text).unwrap();
        for v in VERSIONS {
            let name = format!("fakecodec-{v}-py3-none-any.whl");
            std::fs::copy(wheels.dir.join(&name), w.wheels.join(&name)).unwrap();
        }
        let canary = make_canary(w.tmp.path());
        for forged in [false, true] {
            let dir = w.tmp.path().join(if forged {
                "planter-forged"
            } else {
                "planter-old"
            });
            planter_wheel(&dir, &w.site, &canary, forged);
        }
        let sut = Sut {
            w,
            baselines: Vec::new(),
            canary,
        };
        if let Pkg::Installed { version, .. } = r.model.pkg {
            sut.pip_install(version, false);
        }
        Sut {
            baselines: vec![package_bytes(&sut.w.site)],
            ..sut
        }
    }

    fn apply(mut sut: Sut, r: &Reference, op: Op) -> Sut {
        let before = package_bytes(&sut.w.site);
        if r.model.blocked.is_some() && sut.refused(&op, &before) {
            return sut;
        }
        match op {
            Op::Install(v) => ok(&sut.install(v)),
            Op::InstallStopped {
                version,
                signal,
                step,
            } => sut.install_stopped(version, signal, step),
            Op::PipInstall(v) => sut.pip_install(v, false),
            Op::PipForce(v) => sut.pip_install(v, true),
            Op::PipUninstall => sut.pip(&["uninstall", "-y", "fakecodec"]),
            Op::UvInstall(v) => sut.uv_install(v),
            Op::TorchUpgrade => sut.torch_upgrade(r.model.torch),
            Op::RebuildIfStale => {
                let out = sut.rocbuild(&["rebuild", "--if-stale"], &[]);
                ok(&out);
            }
            Op::Restore | Op::RestoreKilled(_) => {
                let had_record = read_manifest(&sut.w.site, &sut.w.cache, "fakecodec").is_some();
                if let Op::RestoreKilled(step) = op {
                    let _ = sut.rocbuild(
                        &["restore", "fakecodec"],
                        &[("ROCBUILD_TEST_KILL_AFTER_STEP", &step.to_string())],
                    );
                    // The next command finishes the killed restore; restoring again is
                    // harmless (it says there is nothing to restore).
                    let _ = sut.rocbuild(&["status"], &[]);
                    let _ = sut.rocbuild(&["restore", "fakecodec"], &[]);
                } else {
                    let out = sut.rocbuild(&["restore", "fakecodec"], &[]);
                    assert_eq!(
                        out.code,
                        if had_record { 0 } else { 1 },
                        "restore: {}{}",
                        out.stdout,
                        out.stderr
                    );
                }
                if r.model.gave_back {
                    let baseline = sut.baselines.last().unwrap();
                    assert_eq!(
                        package_bytes(&sut.w.site).keys().collect::<Vec<_>>(),
                        baseline.keys().collect::<Vec<_>>(),
                        "restore: the package's files are not the baseline's"
                    );
                    assert!(
                        package_bytes(&sut.w.site) == *baseline,
                        "restore: the package is not byte-identical to the baseline"
                    );
                }
            }
            Op::Status => {}
            Op::InstallDiskFull { version, step } => sut.install_disk_full(version, step),
            Op::RestoreDiskFull(step) => sut.restore_disk_full(step, r),
            Op::Hostile(b) => sut.hostile(b),
            Op::Unblock => sut.unblock(),
        }
        if sut.baselines.len() < r.baselines.len() {
            sut.baselines.push(before);
        }
        sut
    }

    fn check_invariants(sut: &Sut, r: &Reference) {
        assert!(
            canary_bytes(&sut.canary) == sut.canary_at_start(),
            "a file outside the venv changed"
        );
        check_records(&sut.w.site, &sut.w.cache);
        check_presence(sut, &r.model);
        check_status(sut, &r.model);
    }
}

/// Every dist-info's RECORD names files that are there with those hashes; every file under
/// the package folder (bytecode aside) is someone's: a RECORD's or rocbuild's manifest's.
fn check_records(site: &Path, cache: &Path) {
    use base64::Engine;
    use sha2::Digest;
    let mut owned = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(site).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".dist-info") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path().join("RECORD")) else {
            continue;
        };
        for (path, hash, size) in rocbuild_venv::record::parse(&text) {
            owned.insert(path.clone());
            if hash.is_empty() {
                continue;
            }
            let bytes = std::fs::read(site.join(&path))
                .unwrap_or_else(|e| panic!("{name}/RECORD lists {path}, which is not there: {e}"));
            let want = format!(
                "sha256={}",
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(sha2::Sha256::digest(&bytes))
            );
            assert_eq!(hash, want, "{name}/RECORD: {path} has another hash");
            assert_eq!(
                size,
                bytes.len().to_string(),
                "{name}/RECORD: {path} has another size"
            );
        }
    }
    if let Some(m) = read_manifest(site, cache, "fakecodec") {
        owned.extend(m.files.iter().map(|f| f.path.clone()));
        owned.extend(m.extra_files.iter().cloned());
    }
    for (rel, _) in rocbuild_venv::walk(&site.join("fakecodec")) {
        let rel = format!("fakecodec/{rel}");
        if !rocbuild_venv::ownership::is_bytecode(&rel) {
            assert!(
                owned.contains(&rel),
                "{rel} is owned by nobody (no RECORD, no manifest)"
            );
        }
    }
}

/// The package imports at the model's version when the model says it is installed, and is
/// gone (folder and dist-info) when it says not.
fn check_presence(sut: &Sut, m: &Model) {
    let site = &sut.w.site;
    let infos = rocbuild_venv::ownership::dist_infos(site, "fakecodec");
    match m.pkg.version() {
        Some(v) => {
            assert_eq!(
                infos,
                vec![format!("fakecodec-{}.dist-info", VERSIONS[v])],
                "{m:?}"
            );
            let out = Command::new(sut.w.venv.join("bin/python"))
                .args(["-c", "import fakecodec; print(fakecodec.torch_check())"])
                .env_remove("PYTHONDONTWRITEBYTECODE")
                .env_remove("PYTHONPATH")
                .env_remove("LD_LIBRARY_PATH")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "import fakecodec fails with {m:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        None => {
            assert!(infos.is_empty(), "{infos:?} with {m:?}");
            let left: Vec<String> = rocbuild_venv::walk(&site.join("fakecodec"))
                .into_iter()
                .map(|(r, _)| r)
                .filter(|r| !rocbuild_venv::ownership::is_bytecode(r))
                .collect();
            assert!(left.is_empty(), "fakecodec/ holds {left:?} with {m:?}");
        }
    }
}

/// `status --json` and its exit code agree with the model.
fn check_status(sut: &Sut, m: &Model) {
    let out = sut.rocbuild(&["status", "--json"], &[]);
    let v: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("status --json: {e}\n{}{}", out.stdout, out.stderr));
    let states: Vec<String> = v["recipes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| r["state"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    let want: Vec<String> = m.status().into_iter().map(String::from).collect();
    assert_eq!(states, want, "status with {m:?}: {}", out.stdout);
    let code = i32::from(m.status().is_some_and(|s| s != "fresh"));
    assert_eq!(out.code, code, "status exit code with {m:?}");
}

fn config(cases: u32, seed: Option<u64>) -> Config {
    Config {
        cases,
        rng_seed: seed.map_or(RngSeed::Random, RngSeed::Fixed),
        failure_persistence: None,
        max_shrink_iters: 64,
        ..Config::default()
    }
}

fn run_cases(cases: u32, seed: Option<u64>) {
    let cfg = config(cases, seed);
    let mut runner = proptest::test_runner::TestRunner::new(cfg.clone());
    let strategy = RefMachine::sequential_strategy(5..16);
    let result = runner.run(&strategy, |(init, ops, seen)| {
        OwnershipTest::test_sequential(cfg.clone(), init, ops, seen);
        Ok(())
    });
    match result {
        Ok(()) => {}
        Err(proptest::test_runner::TestError::Fail(why, (init, ops, _))) => {
            let mut script = String::from("python3 -m venv V   # with torch 2.9.1\n");
            if let Pkg::Installed { version, .. } = init.model.pkg {
                script.push_str(&format!("{:?}\n", Op::PipInstall(version)));
            }
            for op in &ops {
                script.push_str(&format!("{op:?}\n"));
            }
            panic!(
                "the shortest failing sequence ({} steps):\n{script}\n{why}",
                ops.len()
            );
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn ownership_model_fixed_seed() {
    run_cases(1, Some(0x726f_6362_7569_6c64));
}

/// More random cases: `ROCBUILD_MODEL_CASES=N` (what `cargo xtask soak N` sets).
#[test]
fn ownership_model_random() {
    let cases = std::env::var("ROCBUILD_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    run_cases(cases, None);
}

/// Sequences the random runs found, kept as they were shrunk.
#[test]
fn ownership_model_regressions() {
    let cases: &[(Pkg, &[Op])] = &[
        // An install of another version left pip's emptied `fakecodec-1.0.0.dist-info/`
        // behind; importlib.metadata then said 1.0.0 was installed, so the next
        // `--version 1.0.0` skipped the Python part and left 0.9.0's files.
        (
            Pkg::Installed {
                owner: Owner::Pip,
                version: 0,
            },
            &[Op::Install(1), Op::Install(0)],
        ),
        // A disk that filled up while the baseline of a uv-installed package was being
        // staged left `.rocbuild/txn` behind after the refusal.
        (
            Pkg::Installed {
                owner: Owner::Uv,
                version: 0,
            },
            &[Op::InstallDiskFull {
                version: 0,
                step: 11,
            }],
        ),
    ];
    for (pkg, ops) in cases {
        let init = Reference {
            model: Model {
                pkg: *pkg,
                blocked: None,
                rb: None,
                torch: 0,
                epoch: 0,
                gave_back: false,
            },
            baselines: vec![*pkg],
        };
        OwnershipTest::test_sequential(config(1, None), init, ops.to_vec(), None);
    }
}

/// Every hostile step at least once, in one fixed sequence (the random runs mix them in).
#[test]
fn ownership_model_hostile_steps() {
    let ops = vec![
        Op::Hostile(Block::Planted { forged: false }),
        Op::Install(0),
        Op::Status,
        Op::Unblock,
        Op::Install(0),
        Op::Hostile(Block::Planted { forged: true }),
        Op::Restore,
        Op::RebuildIfStale,
        Op::Unblock,
        Op::Hostile(Block::LockLink),
        Op::Install(1),
        Op::Status,
        Op::Unblock,
        Op::InstallDiskFull {
            version: 1,
            step: 3,
        },
        Op::InstallDiskFull {
            version: 0,
            step: 12,
        },
        Op::RestoreDiskFull(2),
        Op::Install(1),
        Op::RestoreDiskFull(5),
    ];
    let pkg = Pkg::Installed {
        owner: Owner::Pip,
        version: 0,
    };
    let init = Reference {
        model: Model {
            pkg,
            blocked: None,
            rb: None,
            torch: 0,
            epoch: 0,
            gave_back: false,
        },
        baselines: vec![pkg],
    };
    OwnershipTest::test_sequential(config(1, None), init, ops, None);
}
