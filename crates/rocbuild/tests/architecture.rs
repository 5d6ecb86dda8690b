//! docs/architecture.md tells the truth: every claim it makes about where a thing is, or that
//! no X is outside Y, is checked here against the sources and the Cargo.toml files. A test
//! fails when the code and the page part; then mend the code, or the page and this file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// A source file's code: the text before its unit tests, less comment lines, numbered.
struct Source {
    /// From the repository's root, with `/`.
    path: String,
    lines: Vec<(usize, String)>,
}

/// Every `.rs` file of the crates' `src/` (and their `build.rs`), code only.
fn sources() -> Vec<Source> {
    let mut out = Vec::new();
    let mut stack = vec![root().join("crates")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let rel = p
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if p.is_dir() {
                let name = p.file_name().unwrap_or_default();
                if !["tests", "target", "snapshots", "examples", "benches"]
                    .iter()
                    .any(|n| name == *n)
                {
                    stack.push(p);
                }
                continue;
            }
            let is_code =
                rel.ends_with(".rs") && (rel.contains("/src/") || rel.ends_with("build.rs"));
            if !is_code {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            // Code only: every `#[cfg(test)]` module is left out wherever it sits (code after
            // it is read: a test module in the middle of a file hides nothing).
            let code = without_test_modules(&text);
            let lines = code
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim_start().starts_with("//"))
                .map(|(i, l)| (i + 1, l.to_string()))
                .collect();
            out.push(Source { path: rel, lines });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// `text` with each `#[cfg(test)] mod … { … }` (or `pub(crate) mod`) blanked out, line
/// numbers kept: the module's braces are matched outside strings, chars and comments.
fn without_test_modules(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let start = ["#[cfg(test)]\nmod ", "#[cfg(test)]\npub(crate) mod "]
            .iter()
            .filter_map(|m| rest.find(m))
            .min();
        let Some(start) = start else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..start]);
        let end = match rest[start..].find('{') {
            Some(open) => start + open + matching_brace(&rest[start + open..]),
            None => rest.len(),
        };
        // Blank the module, keeping its newlines so line numbers stay true.
        out.extend(rest[start..end].chars().filter(|c| *c == '\n'));
        rest = &rest[end..];
    }
}

/// The length of `s` (which starts with `{`) up to and including its matching `}`.
fn matching_brace(s: &str) -> usize {
    let b = s.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b'r' if matches!(b.get(i + 1), Some(b'#') | Some(b'"'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
                if b.get(i + 1 + hashes) == Some(&b'"') {
                    let close = format!("\"{}", "#".repeat(hashes));
                    let from = i + 2 + hashes;
                    i = s[from..]
                        .find(&close)
                        .map_or(b.len(), |k| from + k + close.len())
                        - 1;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => i += 2,
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                // '\n', '\'', '\u{…}'
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

#[test]
fn test_modules_are_left_out_wherever_they_sit() {
    let text = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn t() { let s = \"}\"; let c = '}'; }\n    // }\n}\nfn b() { std::env::var(\"X\"); }\n";
    let code = without_test_modules(text);
    assert!(code.contains("fn a()") && code.contains("fn b()"), "{code}");
    assert!(!code.contains("fn t()"), "{code}");
    assert_eq!(code.lines().count(), text.lines().count());
}

/// The files whose code has a line with one of `needles`, each with its first such line.
fn files_with(needles: &[&str], under: &str) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for s in sources().into_iter().filter(|s| s.path.starts_with(under)) {
        if let Some((n, l)) = s
            .lines
            .iter()
            .find(|(_, l)| needles.iter().any(|x| l.contains(x)))
        {
            found.insert(s.path.clone(), format!("{}:{n}: {}", s.path, l.trim()));
        }
    }
    found
}

/// `found` is exactly `allowed` (file -> why): a new file fails, and so does an exception
/// that is no longer needed (the page lists them).
fn only_in(what: &str, found: BTreeMap<String, String>, allowed: &[(&str, &str)]) {
    let allowed: BTreeMap<&str, &str> = allowed.iter().copied().collect();
    let extra: Vec<&String> = found
        .iter()
        .filter(|(f, _)| !allowed.contains_key(f.as_str()))
        .map(|(_, line)| line)
        .collect();
    let stale: Vec<&&str> = allowed
        .keys()
        .filter(|f| !found.contains_key(**f))
        .collect();
    assert!(
        extra.is_empty() && stale.is_empty(),
        "{what}\noutside the files allowed:\n{}\nallowed, but no longer there (drop them from the list and docs/architecture.md):\n{}",
        extra.iter().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n"),
        stale.iter().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n"),
    );
}

/// The crates and what each uses, as docs/architecture.md's "## Crates" block says
/// (`NAME  words…  uses A B C`, `uses` naming crates without their `rocbuild-` prefix).
fn crates_on_the_page() -> BTreeMap<String, BTreeSet<String>> {
    let doc = read("docs/architecture.md");
    let block = doc
        .split(
            "<!-- crates: checked against Cargo.toml by crates/rocbuild/tests/architecture.rs -->",
        )
        .nth(1)
        .and_then(|s| s.split("```text").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("docs/architecture.md has the crate block");
    let mut out = BTreeMap::new();
    let mut below: Vec<String> = block
        .lines()
        .filter(|l| l.starts_with("rocbuild"))
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_string())
        .collect();
    for line in block.lines().filter(|l| l.starts_with("rocbuild")) {
        let name = line
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
        let uses: BTreeSet<String> = line
            .split_once(" uses ")
            .map(|(_, u)| {
                u.split_whitespace()
                    .map(|c| format!("rocbuild-{c}"))
                    .collect()
            })
            .unwrap_or_default();
        below.retain(|b| *b != name);
        for u in &uses {
            assert!(
                below.contains(u),
                "docs/architecture.md: {name} uses {u}, which is not listed below it (the dependencies point down)"
            );
        }
        out.insert(name, uses);
    }
    out
}

/// Each crate's `rocbuild-*` dependencies, from its Cargo.toml (`[dependencies]` and
/// `[target.….dependencies]`; not dev- or build-dependencies).
fn crates_in_cargo() -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(root().join("crates")).unwrap().flatten() {
        let toml = e.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&toml) else {
            continue;
        };
        let name = e.file_name().to_string_lossy().into_owned();
        let mut deps = BTreeSet::new();
        let mut in_deps = false;
        for l in text.lines().map(str::trim) {
            if l.starts_with('[') {
                in_deps = l == "[dependencies]"
                    || (l.starts_with("[target.") && l.ends_with(".dependencies]"));
                continue;
            }
            if in_deps && l.starts_with("rocbuild-") {
                let dep: String = l
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '-')
                    .collect();
                deps.insert(dep);
            }
        }
        out.insert(name, deps);
    }
    out
}

#[test]
fn the_crate_diagram_is_what_the_cargo_tomls_say() {
    let page = crates_on_the_page();
    let cargo = crates_in_cargo();
    let mut wrong = Vec::new();
    for name in page.keys().chain(cargo.keys()).collect::<BTreeSet<_>>() {
        let (p, c) = (page.get(name), cargo.get(name));
        match (p, c) {
            (None, _) => wrong.push(format!("{name}: a crate the page does not show")),
            (_, None) => wrong.push(format!("{name}: on the page, but no such crate")),
            (Some(p), Some(c)) => {
                for d in c.difference(p) {
                    wrong.push(format!("{name} uses {d}: the page does not show it"));
                }
                for d in p.difference(c) {
                    wrong.push(format!("{name} uses {d} on the page only"));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/architecture.md's crate block is not the Cargo.toml files:\n{}",
        wrong.join("\n")
    );
}

/// The page: "every environment variable is read in a settings module"; the exceptions it
/// lists are these, each with its reason.
#[test]
fn the_environment_is_read_only_in_the_settings_modules() {
    only_in(
        "environment variables are read in the settings step",
        files_with(
            &["env::var(", "env::var_os(", "env::vars(", "env::vars_os("],
            "crates/",
        ),
        &[
            ("crates/rocbuild/src/settings.rs", "the CLI's settings step"),
            (
                "crates/rocbuild-probe/src/probe_env.rs",
                "the probe's settings (ProbeEnv): tests root it in a temporary directory",
            ),
            (
                "crates/rocbuild/src/main.rs",
                "COLUMNS, the terminal's width for help text: output, not an input of a build",
            ),
            (
                "crates/rocbuild-recipe/build.rs",
                "a build script: OUT_DIR, from cargo",
            ),
            (
                "crates/rocbuild-secret/src/lib.rs",
                "redaction must know every value of the environment to hide it from logs",
            ),
        ],
    );
}

/// The page: "one snapshot of the environment per command": `Vars::capture` is called once,
/// in `main`, and nothing else in the settings step reads the process environment; every
/// probe, doctor and status takes the `ProbeEnv` made from that snapshot
/// (`ProbeEnv::from_process` is for tools and tests only).
#[test]
fn the_environment_is_read_once_per_command() {
    let calls = |needle: &str| -> Vec<String> {
        sources()
            .into_iter()
            .flat_map(|s| {
                s.lines
                    .iter()
                    .filter(|(_, l)| l.contains(needle))
                    .map(|(n, l)| format!("{}:{n}: {}", s.path, l.trim()))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let capture = calls("Vars::capture()");
    let in_main: Vec<&String> = capture
        .iter()
        .filter(|l| l.starts_with("crates/rocbuild/src/main.rs:"))
        .collect();
    assert_eq!(
        (in_main.len(), capture.len()),
        (1, 1),
        "main takes the one snapshot, and nothing else does: {capture:#?}"
    );
    let settings: Vec<String> = calls("env::var")
        .into_iter()
        .filter(|l| l.starts_with("crates/rocbuild/src/settings.rs:"))
        .collect();
    assert_eq!(
        settings.len(),
        1,
        "the settings step reads the process environment in Vars::capture only: {settings:#?}"
    );
    let from_process: Vec<String> = calls("ProbeEnv::from_process(")
        .into_iter()
        .filter(|l| !l.contains("pub fn from_process"))
        .collect();
    assert!(
        from_process.is_empty(),
        "a probe, doctor or status reads the command's snapshot (Settings::probe_env), not the process: {from_process:#?}"
    );
}

/// The page: "plan() reads no environment and starts no process; the files it reads are
/// these".
#[test]
fn the_planner_reads_no_environment_and_starts_no_process() {
    let planner = planner_files();
    let only_planner = |found: BTreeMap<String, String>| -> BTreeMap<String, String> {
        found
            .into_iter()
            .filter(|(f, _)| planner.contains(f))
            .collect()
    };
    only_in(
        "the planner reads no environment and starts no process",
        only_planner(files_with(
            &[
                "std::env::",
                "std::process",
                "which::",
                "version_of(",
                "duct::",
                "current_dir",
                "current_exe",
            ],
            ENGINE,
        )),
        &[],
    );
    only_in(
        "the files the planner reads",
        only_planner(files_with(
            &[
                "std::fs::",
                "fs::read",
                "fs_err::read",
                "read_dir(",
                ".exists()",
                ".is_file()",
                ".is_dir()",
            ],
            ENGINE,
        )),
        &[
            (
                "crates/rocbuild-engine/src/source/plan.rs",
                "the --patch files, whose sha256 is part of the plan",
            ),
            (
                "crates/rocbuild-engine/src/cross/mod.rs",
                "pythonXY.dll's size and time (the import library's key); the winsysroot's SDK versions",
            ),
            (
                "crates/rocbuild-engine/src/libraries/ffmpeg_pc.rs",
                "FFmpeg's version headers, for the .pc files a Windows FFmpeg lacks",
            ),
            (
                "crates/rocbuild-engine/src/build_system/cmake/dependency.rs",
                "a dependency build's stamp, asked (`is_built`) before it is built again",
            ),
        ],
    );
}

const ENGINE: &str = "crates/rocbuild-engine/src/";

/// The engine's concern folders (and single-file concerns below the planner): each holds the
/// planning of its concern, and its running half, if any, in a file named in [`RUN_HALVES`].
const CONCERNS: &[&str] = &[
    "plan/",
    "build_system/",
    "cross/",
    "install/",
    "libraries/",
    "prebuilt/",
    "source/",
    "toolchain/",
    "context.rs",
    "index.rs",
    "vars.rs",
];

/// The files of a concern folder that run, not plan (docs/architecture.md lists them).
const RUN_HALVES: &[(&str, &str)] = &[
    (
        "source/mod.rs",
        "git: clones, checkouts, submodules, mirrors",
    ),
    (
        "source/sdist.rs",
        "an sdist downloaded, checked and unpacked",
    ),
    (
        "source/apply.rs",
        "a recipe's fix or a --patch file applied to the checkout by libgit2",
    ),
    (
        "source/prepare.rs",
        "the source made ready: fetched or unpacked, the recipe's fixes and --patch files applied",
    ),
    (
        "build_system/cmake/run.rs",
        "CMake's files written (TorchConfig.cmake, the HIP header) and its [dependency.X] built",
    ),
    (
        "toolchain/tools_install.rs",
        "the build tools installed from PyPI, once per set of requirements",
    ),
    (
        "cross/prepare.rs",
        "the toolchain file and pythonXY.lib written before configure",
    ),
    ("install/stage.rs", "the transaction's staging area filled"),
    (
        "prebuilt/fetch.rs",
        "an index read, a wheel downloaded and checked",
    ),
    (
        "toolchain/compiler_scan.rs",
        "the wheels' compiler looked for on PATH before planning (an input)",
    ),
    (
        "toolchain/cuda_setup.rs",
        "a CUDA toolkit found or installed before planning (an input)",
    ),
];

/// The planner's files: every file of the concerns, less their run halves.
fn planner_files() -> BTreeSet<String> {
    let files: BTreeSet<String> = sources()
        .into_iter()
        .map(|s| s.path)
        .filter(|p| p.starts_with(ENGINE))
        .collect();
    for (half, _) in RUN_HALVES {
        assert!(
            files.contains(&format!("{ENGINE}{half}")),
            "RUN_HALVES names {half}, which is not there"
        );
    }
    files
        .into_iter()
        .filter(|p| {
            let rel = &p[ENGINE.len()..];
            CONCERNS.iter().any(|c| rel.starts_with(c))
                && !RUN_HALVES.iter().any(|(h, _)| *h == rel)
        })
        .collect()
}

/// The page: "`run.rs` only sequences the steps": each concern runs its own part (the source
/// its fetch and patches, the build system its files and dependency builds, the toolchain its
/// tools, staging its artifacts), so run.rs names no build system and none of their
/// internals, and an outcome is made in one place.
#[test]
fn run_sequences_steps_and_names_no_build_system() {
    let run = without_test_modules(&read("crates/rocbuild-engine/src/run.rs"));
    let named: Vec<&str> = [
        "cmake",
        "CMake",
        "TorchConfig",
        "git_apply",
        "patch",
        "hip_compat",
        "torch_cmake",
        "dependenc",
        ".rocbuild-ok",
        "collect_artifacts",
        "write_if_changed",
    ]
    .into_iter()
    .filter(|w| run.contains(w))
    .collect();
    assert!(
        named.is_empty(),
        "run.rs does a concern's work: it names {named:?}"
    );
    assert_eq!(
        run.lines()
            .filter(|l| l.trim_start().starts_with("Outcome {") || l.contains("(Outcome {"))
            .count(),
        1,
        "run.rs builds an Outcome in more than one place"
    );
    assert!(
        read("docs/architecture.md").contains("`run.rs` only sequences the steps"),
        "docs/architecture.md does not say what run.rs is"
    );
}

/// The commands render what a use case returns: the CLI neither probes a machine nor asks the
/// planner's stock advice itself (doctor did both in its command file before its use case).
#[test]
fn commands_leave_the_work_to_the_use_cases() {
    only_in(
        "the CLI's commands call use cases, not the probe, the planner or the doctor's core",
        files_with(
            &[
                "rocbuild_doctor::probe(",
                "rocbuild_doctor::doctor(",
                "stock::for_machine(",
                "rocbuild_engine::plan(",
                "rocbuild_probe::probe(",
                "rocbuild_doctor::deps(",
                "rocbuild_doctor::bundle(",
                "rocbuild_doctor::repair(",
                "fetch_shared_ffmpeg(",
                "clean::remove",
                "clean::{human, remove",
                "sched::perform(",
                "sched::file_bytes(",
            ],
            "crates/rocbuild/src/",
        ),
        &[],
    );
}

/// One decider per fact: a build asks the venv's Python once (the probe), and what it said
/// is handed on; the wheel tags an index is searched with come from it, not from a second run
/// of the interpreter (`Tags::of_python`, `tags_of_venv`).
#[test]
fn a_build_asks_the_venvs_python_once() {
    let build = without_test_modules(&read("crates/rocbuild-engine/src/usecase/build.rs"));
    for second in ["tags_of_venv", "of_python"] {
        assert!(
            !build.contains(second),
            "usecase/build.rs runs the venv's Python again ({second})"
        );
    }
}

/// One folder per concern: no file at the engine's top names a concern that has a folder
/// (`source.rs` beside `source/`, `cross_prepare.rs` beside `cross/`), no concern's folder
/// holds a file named after another concern (`plan/source.rs`), and the page lists every run
/// half.
#[test]
fn concerns_are_folders_without_twins() {
    let tops: Vec<String> = sources()
        .into_iter()
        .filter_map(|s| s.path.strip_prefix(ENGINE).map(str::to_string))
        .filter(|r| !r.contains('/'))
        .collect();
    let folders: Vec<&str> = CONCERNS
        .iter()
        .filter_map(|c| c.strip_suffix('/'))
        .collect();
    let twins: Vec<&String> = tops
        .iter()
        .filter(|t| {
            let stem = t.trim_end_matches(".rs");
            folders.iter().any(|f| {
                stem == *f || stem.starts_with(&format!("{f}_")) || stem.ends_with(&format!("_{f}"))
            })
        })
        .collect();
    assert!(
        twins.is_empty(),
        "files at the engine's top beside their concern's folder: {twins:?}"
    );
    // A file directly in one concern's folder named after another concern (`plan/source.rs`
    // beside `source/`) is that concern split in two.
    let split: Vec<String> = sources()
        .into_iter()
        .filter_map(|s| s.path.strip_prefix(ENGINE).map(str::to_string))
        .filter(|rel| {
            let parts: Vec<&str> = rel.split('/').collect();
            parts.len() == 2
                && folders.contains(&parts[0])
                && folders
                    .iter()
                    // (`plan/` asks the concerns; a concern's `plan.rs` is its planning half.)
                    .any(|f| {
                        *f != parts[0] && *f != "plan" && parts[1].trim_end_matches(".rs") == *f
                    })
        })
        .collect();
    assert!(
        split.is_empty(),
        "a concern's file in another concern's folder: {split:?}"
    );
    let page = read("docs/architecture.md");
    for (half, _) in RUN_HALVES {
        assert!(
            page.contains(&format!("`{half}`")),
            "docs/architecture.md does not list the run half {half}"
        );
    }
}

/// The page: "`--venv` is declared once and chosen once per command".
#[test]
fn the_venv_is_declared_once_and_chosen_in_the_settings_step() {
    let cli = read("crates/rocbuild/src/cli.rs");
    let declared = cli
        .lines()
        .filter(|l| l.trim() == "pub venv: Option<PathBuf>,")
        .count();
    assert_eq!(
        declared, 1,
        "crates/rocbuild/src/cli.rs: --venv is declared {declared} times; flatten VenvArg instead"
    );
    // Chosen in the settings step: the variables that name the venv are read there only, and
    // the probe takes the chosen venv as its argument (it has no choice of its own).
    only_in(
        "the venv is chosen in the settings step",
        files_with(&["\"VIRTUAL_ENV\"", "venv_of_executable("], "crates/"),
        &[("crates/rocbuild/src/settings.rs", "the settings step")],
    );
    let probe = read("crates/rocbuild-probe/src/lib.rs");
    assert!(
        probe.contains("pub fn probe(venv: &Venv, opts: &ProbeOptions, env: &ProbeEnv)"),
        "the probe takes the venv the settings step chose"
    );
}

/// The page: "one parser of GPU target lists (`;`, `,`, whitespace)".
#[test]
fn gpu_target_lists_are_split_in_one_place() {
    only_in(
        "GPU target lists are split by rocbuild_probe::GpuTargets / split_list",
        files_with(
            &[
                "split([';', ','])",
                "c == ';' || c == ','",
                "value_delimiter = ','",
            ],
            "crates/",
        ),
        &[(
            "crates/rocbuild-probe/src/gpu_targets.rs",
            "the one splitter",
        )],
    );
}

/// One decider per fact: which OS a venv is for is decided by `rocbuild_probe::cross::venv_os`
/// alone (its binaries, then its layout, then the host); the probe, doctor, repair and the
/// venv's layout (whose `os` the wheel command's tags come from) ask it, and no second reading
/// of binary formats or layouts decides it elsewhere.
#[test]
fn the_venvs_os_is_decided_in_one_place() {
    only_in(
        "a venv's OS is decided by rocbuild_probe::cross::venv_os",
        files_with(
            &["binary_format() ==", "fn venv_os(", "fn os_of_files("],
            "crates/",
        ),
        &[("crates/rocbuild-probe/src/cross.rs", "the one decider")],
    );
    only_in(
        "the callers of the one decider",
        files_with(&["venv_os("], "crates/"),
        &[
            ("crates/rocbuild-probe/src/cross.rs", "the decider"),
            ("crates/rocbuild-probe/src/lib.rs", "the probe"),
            ("crates/rocbuild-doctor/src/doctor.rs", "doctor"),
            ("crates/rocbuild-doctor/src/repair.rs", "repair"),
            (
                "crates/rocbuild-venv/src/layout.rs",
                "VenvLayout::locate / at_site",
            ),
        ],
    );
}

/// One decider per fact: `$PYTORCH_ROCM_ARCH` is read as a GPU list in one place
/// (`ProbeEnv::pytorch_rocm_arch`), for the probe's cascade, status and doctor's default.
#[test]
fn pytorch_rocm_arch_is_read_in_one_place() {
    only_in(
        "$PYTORCH_ROCM_ARCH is read by ProbeEnv::pytorch_rocm_arch",
        files_with(
            &["(vars::PYTORCH_ROCM_ARCH)", "(PYTORCH_ROCM_ARCH)"],
            "crates/",
        ),
        &[(
            "crates/rocbuild-probe/src/probe_env.rs",
            "ProbeEnv::pytorch_rocm_arch",
        )],
    );
}

/// The body of `fn name` in `text`: from its line to the closing brace at its indent.
fn body_of(text: &str, name: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().position(|l| {
        let t = l.trim_start();
        let at = t
            .find(&format!("fn {name}("))
            .or_else(|| t.find(&format!("fn {name}<")));
        at.is_some_and(|i| t[..i].split_whitespace().all(|w| w.starts_with("pub")))
    })?;
    let indent = lines[start].len() - lines[start].trim_start().len();
    let end = (start + 1..lines.len())
        .find(|&i| lines[i].len() == indent + 1 && lines[i].ends_with('}'))?;
    Some(lines[start..=end].join("\n"))
}

/// The page's routes ("Two routes, hop by hop"): each hop names `FILE:FUNCTION`, a function
/// that is in that file; each heading's count is the number of its hops; and the list leaves
/// no function out: every hop after the first is called by one before it (the one that hands
/// the value on, or the caller a value was returned to, which hands it on next).
#[test]
fn the_routes_name_real_functions() {
    let doc = read("docs/architecture.md");
    let section = doc
        .split("## Two routes, hop by hop")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/architecture.md has its routes");
    let mut wrong = Vec::new();
    let mut routes = 0;
    for route in section.split("\n`--").skip(1) {
        routes += 1;
        let said: usize = route
            .split_once(" hops")
            .and_then(|(head, _)| head.rsplit(['(', ' ']).next()?.parse().ok())
            .unwrap_or_else(|| panic!("a route without its count of hops: {route}"));
        let hops: Vec<&str> = route
            .lines()
            .filter(|l| {
                l.split_once(". `")
                    .is_some_and(|(n, _)| n.parse::<usize>().is_ok())
            })
            .collect();
        if hops.len() != said {
            wrong.push(format!(
                "`--{}: says {said} hops, lists {}",
                route.lines().next().unwrap_or(""),
                hops.len()
            ));
        }
        let mut bodies: Vec<String> = Vec::new();
        for h in hops {
            let named = h.split('`').nth(1).unwrap_or_default();
            let Some((file, function)) = named.split_once(".rs:") else {
                wrong.push(format!("a hop without FILE:FUNCTION: {h}"));
                continue;
            };
            let text =
                std::fs::read_to_string(root().join(format!("{file}.rs"))).unwrap_or_default();
            let Some(body) = body_of(&text, function) else {
                wrong.push(format!("{file}.rs has no fn {function}: {h}"));
                continue;
            };
            let called = |b: &String| {
                [format!("{function}("), format!("{function}::<")]
                    .iter()
                    .any(|c| b.lines().skip(1).any(|l| l.contains(c.as_str())))
            };
            if !bodies.is_empty() && !bodies.iter().any(called) {
                wrong.push(format!(
                    "no hop before it calls {function}: a function that hands the value on is left out: {h}"
                ));
            }
            bodies.push(body);
        }
    }
    assert_eq!(routes, 2, "the page's routes: --arch and --venv");
    assert!(
        wrong.is_empty(),
        "docs/architecture.md's routes:\n{}",
        wrong.join("\n")
    );
}

/// The files outside the `rocbuild-platform` crate that name an OS themselves (`Os::Windows`,
/// `cfg!(windows)`, `#[cfg(unix)]`, …): the per-OS seams, each saying why in a `Names an OS:`
/// comment. A new one is a rule for `PlatformRules` or `host`; the page lists these.
const SEAMS_NAMING_AN_OS: &[(&str, &str)] = &[
    ("crates/rocbuild-doctor/src/examine.rs", "loader search"),
    ("crates/rocbuild-doctor/src/repair.rs", "relinking"),
    ("crates/rocbuild-engine/src/schedule.rs", "scheduling"),
    (
        "crates/rocbuild-probe/src/cross.rs",
        "the Windows cross target",
    ),
    ("crates/rocbuild-probe/src/gpu.rs", "asking the GPU"),
    (
        "crates/rocbuild-probe/src/rocm_scan.rs",
        "finding ROCm SDKs",
    ),
    (
        "crates/rocbuild-probe/src/runtime.rs",
        "finding the HIP runtime",
    ),
    (
        "crates/rocbuild-probe/src/tools.rs",
        "MSVC and package managers",
    ),
];

#[test]
fn os_names_do_not_spread_beyond_the_platform_module() {
    let found: BTreeMap<String, String> = files_with(
        &[
            "Os::Windows",
            "Os::Linux",
            "Os::Macos",
            "cfg!(windows)",
            "cfg!(unix)",
            "cfg!(target_os",
            "cfg(windows)",
            "cfg(unix)",
            "cfg(target_os",
            "cfg(not(windows",
            "cfg(not(unix",
            "cfg(not(target_os",
        ],
        "crates/",
    )
    .into_iter()
    .filter(|(f, _)| !f.starts_with("crates/rocbuild-platform/"))
    .collect();
    assert!(
        SEAMS_NAMING_AN_OS.len() <= 8,
        "issue 40: at most 8 files outside the platform crate name an OS"
    );
    only_in(
        "files outside the platform crate that name an OS (the rule belongs in PlatformRules or platform::host)",
        found,
        SEAMS_NAMING_AN_OS,
    );
    let doc = read("docs/architecture.md");
    for (file, seam) in SEAMS_NAMING_AN_OS {
        assert!(
            read(file).contains("Names an OS: "),
            "{file} names an OS ({seam}) and must say why in a `Names an OS:` comment"
        );
        assert!(
            doc.contains(&format!("`{file}`")),
            "docs/architecture.md lists {file} ({seam})"
        );
    }
}

/// `commands/` holds one command per file: every arm of `main.rs`'s dispatch calls into a
/// file of its own under `commands/`, and no file but `doctor.rs` (doctor, deps, bundle, repair: one venv's native files)
/// is called for two commands.
#[test]
fn commands_are_one_per_file() {
    let main = read("crates/rocbuild/src/main.rs");
    let dispatch = main
        .split("fn dispatch(")
        .nth(1)
        .and_then(|s| s.split("\n}\n").next())
        .expect("main.rs has dispatch");
    let mut by_file: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for arm in dispatch.split("Some(Command::").skip(1) {
        let name: String = arm.chars().take_while(|c| c.is_alphanumeric()).collect();
        let call = arm
            .split("=>")
            .nth(1)
            .and_then(|body| {
                body.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .find(|w| w.matches("::").count() >= 1 && !w.starts_with("crate::out"))
            })
            .unwrap_or_default()
            .trim_start_matches("commands::")
            .to_string();
        let Some((file, func)) = call.split_once("::") else {
            wrong.push(format!("{name}: implemented in main.rs"));
            continue;
        };
        if !root()
            .join(format!("crates/rocbuild/src/commands/{file}.rs"))
            .is_file()
        {
            wrong.push(format!(
                "{name}: calls {file}::{func}, not a file under commands/"
            ));
        }
        by_file
            .entry(file.to_string())
            .or_default()
            .insert(func.to_string());
    }
    for (file, funcs) in &by_file {
        if funcs.len() > 1 && file != "doctor" {
            wrong.push(format!(
                "commands/{file}.rs holds {} commands: {funcs:?}",
                funcs.len()
            ));
        }
    }
    assert!(by_file.len() >= 10, "dispatch read wrong: {by_file:?}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The engine's `usecase/` holds one use case per file: each module `usecase/mod.rs`
/// re-exports gives one function (the use case, named as its file) and only types besides.
#[test]
fn use_cases_are_one_per_file() {
    let text = read("crates/rocbuild-engine/src/usecase/mod.rs");
    let mut wrong = Vec::new();
    let mut seen = 0;
    for line in text.lines().filter(|l| l.starts_with("pub use ")) {
        let Some((module, names)) = line["pub use ".len()..].split_once("::") else {
            continue;
        };
        let functions: Vec<&str> = names
            .trim_matches(|c| c == '{' || c == '}' || c == ';')
            .split(',')
            .map(str::trim)
            .filter(|n| n.chars().next().is_some_and(|c| c.is_lowercase()))
            .collect();
        seen += 1;
        if functions != [module] {
            wrong.push(format!(
                "usecase/{module} gives {functions:?}, not one use case named {module}"
            ));
        }
    }
    assert!(seen >= 7, "usecase/mod.rs read wrong ({seen} re-exports)");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Relinking is one `Relinker` per OS in rocbuild-link (ELF, Mach-O, the Windows hook), used by
/// the install and by `repair`: no other file edits a search path (`set_runpath`,
/// `add_macho_rpaths`) or spells the loaders' origin words, and no file outside the platform
/// crate takes a library's file name apart by its OS's pattern (`platform::libname` does).
#[test]
fn relinking_is_one_trait_per_os_and_library_names_are_read_in_the_platform_crate() {
    let lib = read("crates/rocbuild-link/src/lib.rs");
    assert!(
        lib.contains("pub trait Relinker"),
        "rocbuild-link defines Relinker"
    );
    for (file, ty) in [
        ("elf.rs", "Runpath"),
        ("macho.rs", "LoaderPath"),
        ("windows.rs", "PreloadHook"),
    ] {
        let text = read(&format!("crates/rocbuild-link/src/{file}"));
        assert!(
            text.contains(&format!("impl Relinker for {ty}")),
            "rocbuild-link/src/{file} implements Relinker for {ty}"
        );
    }
    let outside_link = |needles: &[&str]| -> BTreeMap<String, String> {
        files_with(needles, "crates/")
            .into_iter()
            .filter(|(f, _)| {
                !f.starts_with("crates/rocbuild-link/") && !f.starts_with("crates/rocbuild-native/")
            })
            .collect()
    };
    only_in(
        "files outside rocbuild-link that edit a search path or spell a loader's origin",
        outside_link(&[
            "set_runpath(",
            "add_macho_rpaths(",
            "\"$ORIGIN",
            "\"@loader_path",
        ]),
        &[],
    );
    let users: BTreeSet<String> = files_with(&["relinker(", "Link::plan("], "crates/")
        .into_keys()
        .filter(|f| !f.starts_with("crates/rocbuild-link/"))
        .collect();
    assert_eq!(
        users,
        BTreeSet::from([
            "crates/rocbuild-doctor/src/repair.rs".to_string(),
            "crates/rocbuild-engine/src/install/mod.rs".to_string(),
        ]),
        "the install and repair plan through the relinkers"
    );
    let parsed: BTreeMap<String, String> =
        files_with(&["split_once(\".so.\")", "rsplit_once(\"64_\")"], "crates/")
            .into_iter()
            .filter(|(f, _)| !f.starts_with("crates/rocbuild-platform/"))
            .collect();
    only_in(
        "files outside the platform crate that take a library name apart (platform::libname does)",
        parsed,
        &[],
    );
}

/// The page: "no field of `Inputs` is one build system's": what every build system is given
/// names no CMake part (torch's CMake package, the HIP header CMake force-includes, the cmake
/// program); CMake plans those itself and hands its files back in `Steps.files`.
#[test]
fn build_system_inputs_hold_no_cmake_field() {
    let text = read("crates/rocbuild-engine/src/build_system/mod.rs");
    let start = text
        .find("pub struct Inputs<'a> {")
        .expect("build_system/mod.rs has pub struct Inputs");
    let end = text[start..].find("\n}\n").expect("Inputs ends") + start;
    let inputs = &text[start..end];
    let fields: Vec<&str> = inputs
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("pub ") && l.contains(':'))
        .collect();
    assert!(fields.len() >= 8, "Inputs read wrong: {fields:?}");
    let cmake_only: Vec<&&str> = fields
        .iter()
        .filter(|f| {
            let l = f.to_ascii_lowercase();
            l.contains("cmake") || l.contains("torchcmake") || l.contains("hip_compat")
        })
        .collect();
    assert!(
        cmake_only.is_empty(),
        "BuildSystem's Inputs carry CMake's own parts: {cmake_only:?}; plan them in build_system/cmake/ and return them in Steps.files"
    );
    let cmake = read("crates/rocbuild-engine/src/build_system/cmake/mod.rs");
    assert!(
        cmake.contains("torch::plan(") && cmake.contains("hip_compat_of("),
        "CMake plans torch's CMake package and the HIP header itself"
    );
}
