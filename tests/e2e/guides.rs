//! The guides' transcripts are true (issue 30): every `$ rocbuild …` line of a guide's
//! ```console block that is followed by output is run, by the real binary, in a world this
//! file builds for that guide, and what it prints must match what the guide shows (snapbox's
//! matching: `...` on a line of its own stands for any lines, `[..]` for any text in a line).
//! A guide that shows output no world here can produce fails, so does a guide with no checked
//! transcript at all.
//!
//! How a world maps onto what a reader sees: its temp directory is shown as `/home/me`, and a
//! fixture that stands in for a real package (the `fakecodec` recipe, built in seconds, for
//! TorchCodec) is shown under the real package's name and version. Everything else is printed
//! as rocbuild printed it.

use std::path::{Path, PathBuf};

use crate::common::*;

/// One `$ rocbuild …` line of a guide and the lines the guide shows under it.
struct Shown {
    guide: String,
    line: usize,
    command: String,
    output: String,
}

/// The transcripts of one guide, in order.
fn transcripts(guide: &Path) -> Vec<Shown> {
    let name = guide.file_name().unwrap().to_string_lossy().to_string();
    let text = std::fs::read_to_string(guide).unwrap();
    let mut out: Vec<Shown> = Vec::new();
    let mut in_console = false;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            in_console = !in_console && line.trim() == "```console";
            continue;
        }
        if !in_console {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.push(Shown {
                guide: name.clone(),
                line: i + 1,
                command: cmd.to_string(),
                output: String::new(),
            });
        } else if let Some(last) = out.last_mut() {
            last.output.push_str(line);
            last.output.push('\n');
        }
    }
    out.retain(|s| !s.output.trim().is_empty());
    out
}

/// A world a guide's commands run in: extra arguments and variables for every command, and
/// what the reader sees instead of the world's own names.
struct Stage {
    _tmp: Option<tempfile::TempDir>,
    root: PathBuf,
    cwd: PathBuf,
    args: Vec<String>,
    /// Arguments for one command instead of `args` (its text as the guide writes it).
    args_when: Vec<(String, Vec<String>)>,
    env: Vec<(String, String)>,
    shown_as: Vec<(String, String)>,
    /// Run before the command of this (guide) text: the state the guide describes.
    before: Box<dyn FnMut(&str)>,
}

impl Stage {
    fn new() -> Stage {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        Stage {
            _tmp: Some(tmp),
            cwd: root.clone(),
            shown_as: vec![(root.display().to_string(), "/home/me".into())],
            root,
            args: Vec::new(),
            args_when: Vec::new(),
            env: Vec::new(),
            before: Box::new(|_| {}),
        }
    }

    fn env(&mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) {
        self.env
            .push((k.into(), v.as_ref().to_string_lossy().to_string()));
    }

    fn run(&mut self, s: &Shown) -> Out {
        (self.before)(&s.command);
        // A stand-in's own name where the guide names the package it stands in for.
        let words: Vec<String> = s
            .command
            .split_whitespace()
            .map(|w| {
                let real = self.shown_as.iter().find(|(_, shown)| shown == w);
                real.map_or(w, |(fixture, _)| fixture.as_str()).to_string()
            })
            .collect();
        assert_eq!(words[0], "rocbuild", "{}:{}", s.guide, s.line);
        let extra = self
            .args_when
            .iter()
            .find(|(cmd, _)| *cmd == s.command)
            .map_or(&self.args, |(_, a)| a);
        // stdout and stderr into one pipe, in the order a terminal shows them.
        let mut c = std::process::Command::new("sh");
        c.arg("-c").arg("exec \"$0\" \"$@\" 2>&1");
        c.arg(env!("CARGO_BIN_EXE_rocbuild"));
        for (k, v) in rocbuild_command(&[]).get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c.args(&words[1..]).args(extra).current_dir(&self.cwd);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        let o = c.output().expect("run rocbuild");
        let mut text = String::from_utf8_lossy(&o.stdout).to_string();
        let mut subs = self.shown_as.clone();
        subs.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        for (from, to) in subs {
            text = text.replace(&from, &to);
        }
        text = same_everywhere(&text);
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: text,
            stderr: String::new(),
        }
    }
}

/// What differs from machine to machine and run to run, as one value: the Python patch
/// release (Debian 12 has 3.11.2, this one may have another) and the time of day.
fn same_everywhere(text: &str) -> String {
    let python = regex::Regex::new(r"Python 3\.11\.\d+").unwrap();
    let time = regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ").unwrap();
    let text = python.replace_all(text, "Python 3.11.9");
    time.replace_all(&text, "2026-11-26T06:00:00Z").into_owned()
}

/// The world a guide's transcripts run in, or None when this machine lacks what it needs
/// (said, with why); `cargo xtask test` makes every one of them.
fn stage_for(guide: &str) -> Option<Stage> {
    match guide {
        "torchcodec-rocm.md" => torchcodec_rocm(),
        "import-fails.md" => Some(import_fails()),
        "keep-working.md" | "team.md" => Some(fixture_built()),
        "ctranslate2-rdna1.md" => Some(ctranslate2_rdna1()),
        "frozen-app.md" => frozen_app(),
        "macos-ffmpeg.md" => macos_ffmpeg(),
        "windows-from-linux.md" => windows_from_linux(),
        _ => None,
    }
}

#[test]
fn every_transcript_in_the_guides_prints_what_it_shows() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guides");
    let mut guides: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    guides.sort();
    let mut failures = Vec::new();
    let mut checked = 0;
    for guide in &guides {
        let shown = transcripts(guide);
        let name = guide.file_name().unwrap().to_string_lossy().to_string();
        if shown.is_empty() {
            failures.push(format!(
                "{name}: no transcript with output: show what a command prints"
            ));
            continue;
        }
        let Some(mut stage) = stage_for(&name) else {
            if known_guide(&name) {
                continue;
            }
            failures.push(format!(
                "{name}: shows output that no world in tests/e2e/guides.rs produces: add one"
            ));
            continue;
        };
        for s in &shown {
            let out = stage.run(s);
            if std::env::var_os("ROCBUILD_GUIDES_DUMP").is_some() {
                eprintln!("=== {}:{} $ {}\n{}", s.guide, s.line, s.command, out.stdout);
            }
            let label = format!("{}:{} `{}` (exit {})", s.guide, s.line, s.command, out.code);
            if let Err(e) = matches(&label, &out.stdout, &s.output) {
                failures.push(format!(
                    "{label}: the guide shows other output than rocbuild prints\n{e}"
                ));
            }
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(checked >= 10, "only {checked} transcripts checked");
}

/// snapbox's matching, with `\` kept (a shell line's continuation is not a path separator) and
/// the blank lines at the end not counted.
fn matches(label: &str, actual: &str, shown: &str) -> Result<(), snapbox::assert::Error> {
    snapbox::Assert::new().normalize_paths(false).try_eq(
        Some(&label),
        snapbox::Data::text(format!("{}\n", actual.trim_end())),
        snapbox::Data::text(format!("{}\n", shown.trim_end())),
    )
}

/// A guide whose world this machine cannot make (said by its maker) is skipped, not failed.
fn known_guide(name: &str) -> bool {
    matches!(
        name,
        "torchcodec-rocm.md" | "frozen-app.md" | "macos-ffmpeg.md" | "windows-from-linux.md"
    )
}

/// A matcher that would let a lying guide pass is no matcher: wrong text fails, `...` and
/// `[..]` match what they stand for.
#[test]
fn a_guide_that_lies_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let guide = tmp.path().join("g.md");
    std::fs::write(
        &guide,
        "text\n\n```console\n$ rocbuild --version\nrocbuild 0.0.0-not-this\n```\n\n```console\n$ rocbuild --version\nrocbuild [..]\n```\n",
    )
    .unwrap();
    let shown = transcripts(&guide);
    assert_eq!(shown.len(), 2);
    let mut stage = Stage::new();
    let results: Vec<bool> = shown
        .iter()
        .map(|s| {
            let out = stage.run(s);
            matches("g.md", &out.stdout, &s.output).is_ok()
        })
        .collect();
    assert_eq!(results, [false, true]);
}

// ---- the worlds ----

/// The plans' machine description (`--machine`): a Linux box with a ROCm 6.4 torch.
fn planned(stage: &mut Stage, m: &serde_json::Value) {
    let file = stage.root.join("machine.json");
    std::fs::write(&file, serde_json::to_string_pretty(m).unwrap()).unwrap();
    stage.args = [
        "--machine",
        file.to_str().unwrap(),
        "--cache",
        "/home/me/.cache/rocbuild",
        "--jobs",
        "8",
    ]
    .map(String::from)
    .to_vec();
}

fn torchcodec_rocm() -> Option<Stage> {
    let mut stage = Stage::new();
    // A 2026 ROCm torch, with Debian's libjpeg-turbo and libpng development files.
    let mut m = crate::plans::machine("linux");
    m["torch"]["version"] = "2.11.0+rocm7.2".into();
    m["torch"]["hip"] = "7.2.26015".into();
    m["python"]["distributions"]["torch"] = "2.11.0".into();
    m["gpu"] = serde_json::json!({"archs": [], "found_by": "", "steps": [],
        "torch_arch_list": ["gfx1100", "gfx1101", "gfx1200", "gfx1201"]});
    for (name, at) in [
        ("jpeg", "/usr/include/jpeglib.h"),
        ("png", "/usr/include/png.h"),
    ] {
        m["libraries"][name] = serde_json::json!({"at": at});
    }
    planned(&mut stage, &m);
    // The stock-wheel answer is about the real PyPI torch (a CUDA 13 build): that command
    // runs on this machine, in the venv `cargo xtask test` installed it in.
    let real = crate::real_torch::real_torch_venv()?;
    let cache = stage.root.join("cache").display().to_string();
    let venv = real.display().to_string();
    stage
        .args_when
        .push(("rocbuild torchcodec".into(), vec!["--cache".into(), cache]));
    stage.env("VIRTUAL_ENV", &real);
    stage.shown_as.push((venv, "/home/me/.venv".into()));
    Some(stage)
}

fn import_fails() -> Stage {
    let v = crate::doctor::Venv::new();
    v.torchcodec(true, &[]);
    let mut stage = Stage::new();
    stage.root = v.root().to_path_buf();
    stage.cwd = stage.root.clone();
    stage.shown_as = vec![
        (v.root().display().to_string(), "/home/me".into()),
        (v.venv.display().to_string(), "/home/me/.venv".into()),
    ];
    stage.env("VIRTUAL_ENV", &v.venv);
    stage._tmp = Some(v.tmp);
    stage
}

/// The fixture recipe built into a venv, shown as TorchCodec 0.16.0; the torch it was built
/// against is upgraded before `status` (the story of keep-working.md).
fn fixture_built() -> Stage {
    let w = World::new(DECODE_WAV);
    // The fixture's release supports the torch the story upgrades to.
    let recipe = w.recipes.join("fakecodec.toml");
    let text = std::fs::read_to_string(&recipe).unwrap();
    std::fs::write(&recipe, text.replace("<2.10", "<2.11")).unwrap();
    ok(&w.build(&[]));
    let mut stage = Stage::new();
    let root = w.tmp.path().to_path_buf();
    stage.cwd = root.clone();
    stage.root = root.clone();
    stage.shown_as = vec![
        (root.display().to_string(), "/home/me".into()),
        ("fakecodec 1.0.0".into(), "torchcodec 0.16.0".into()),
        ("fakecodec-1.0.0".into(), "torchcodec-0.16.0".into()),
        ("version 1.0.0".into(), "version 0.16.0".into()),
        ("fakecodec".into(), "torchcodec".into()),
        (w.venv.display().to_string(), "/home/me/.venv".into()),
    ];
    stage.env("VIRTUAL_ENV", &w.venv);
    stage.env("ROCBUILD_RECIPES", &w.recipes);
    stage.env("ROCBUILD_CACHE", &w.cache);
    for (k, v) in w.env() {
        stage.env(k, v);
    }
    let site = w.site.clone();
    stage.before = Box::new(move |cmd| {
        if cmd_is(cmd, "status") {
            let version_py = site.join("torch/version.py");
            let t = std::fs::read_to_string(&version_py).unwrap();
            std::fs::write(&version_py, t.replace("'2.9.1'", "'2.10.0'")).unwrap();
        }
    });
    stage._tmp = Some(w.tmp);
    stage
}

fn cmd_is(cmd: &str, sub: &str) -> bool {
    cmd.split_whitespace().nth(1) == Some(sub)
}

fn ctranslate2_rdna1() -> Stage {
    use rocbuild_probe::{discover_sdks, find_hip_runtime, Os, ProbeEnv};
    use rocbuild_testkit::rocm::{fake_opt_rocm, FakeSdk};
    let mut stage = Stage::new();
    let env = ProbeEnv::rooted(&stage.root);
    let sdk = FakeSdk {
        version: "6.2.4",
        targets: &["gfx1010", "gfx1030", "gfx1100"],
        tensile: &["gfx1010", "gfx1030", "gfx1100"],
        hipblas: Some((2, 2, 0)),
        ..FakeSdk::default()
    };
    fake_opt_rocm(&stage.root, "rocm-6.2.4", &sdk);
    let mut m = crate::plans::machine("linux");
    m["rocm_sdks"] = serde_json::to_value(discover_sdks(&env, Os::Linux, None)).unwrap();
    m["hip_runtime"] = serde_json::to_value(find_hip_runtime(&env, Os::Linux, None, None)).unwrap();
    stage.shown_as = vec![(stage.root.display().to_string(), "".into())];
    planned(&mut stage, &m);
    stage
}

fn frozen_app() -> Option<Stage> {
    let ct2 = upstream::wheel(&upstream::CTRANSLATE2_WINDOWS)?;
    let rt = upstream::wheel(&upstream::MSVC_RUNTIME)?;
    let stage = Stage::new();
    let venv = stage.root.join(".venv");
    upstream::unpack(&ct2, &venv.join("Lib/site-packages"));
    let rt_dir = stage.root.join("rt");
    upstream::unpack(&rt, &rt_dir);
    std::fs::rename(
        rt_dir.join("msvc_runtime-14.51.36231.data/data/Scripts"),
        venv.join("Scripts"),
    )
    .unwrap();
    std::fs::write(
        venv.join("pyvenv.cfg"),
        "home = C:\\Python312\nversion = 3.12.7\n",
    )
    .unwrap();
    Some(stage)
}

/// The real macOS wheel with no LC_RPATH, seen from this Linux host: it cannot be loaded here,
/// so the guide shows what is read from the files (doctor's static checks, repair's edits).
fn macos_ffmpeg() -> Option<Stage> {
    let mut stage = Stage::new();
    let (venv, brew) = crate::repair::macos_torchcodec_venv(&stage.root)?;
    stage.shown_as = vec![
        (venv.display().to_string(), "/Users/me/.venv".into()),
        (brew.display().to_string(), "/opt/homebrew/lib".into()),
    ];
    stage.env("VIRTUAL_ENV", &venv);
    Some(stage)
}

fn windows_from_linux() -> Option<Stage> {
    let w = crate::windows::world()?;
    let mut stage = Stage::new();
    crate::windows::windows_venv(&w, &stage.root);
    stage.env("ROCBUILD_WINSYSROOT", "");
    stage.args = vec![
        "--cache".into(),
        stage.root.join("cache").display().to_string(),
    ];
    Some(stage)
}
