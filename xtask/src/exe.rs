//! `cargo xtask exe`: rocbuild.exe for `x86_64-pc-windows-msvc`, built on this Linux machine
//! from trusted sources only, and its unit tests run under Wine (issue 39, points 1 and 2).
//!
//! - The compiler: Debian sid's rustc, cargo and `rust-src` (which match exactly), in a chroot
//!   made with mmdebstrap like the ROCm ones ([`crate::chroots::RUST_WIN`]). rustup cannot add
//!   a target here, so std is built from that source: `RUSTC_BOOTSTRAP=1 cargo build
//!   -Zbuild-std=std,panic_abort --target x86_64-pc-windows-msvc`. Nothing comes from an
//!   unknown uploader (no PyPI "segments" of rust-std).
//! - The link: `lld-link /winsysroot:SYSROOT` against the Windows world's MSVC CRT + Windows
//!   SDK (`cargo xtask windows`, cache/windows/sysroot), as cargo-xwin does; the C code of the
//!   -sys crates (libgit2, zlib, zstd, bzip2, lzma, ring) compiled by `clang-cl /winsysroot`,
//!   archived by `llvm-lib`. The CRT is linked statically (`+crt-static`, as uv's and ruff's
//!   Windows builds are): rocbuild.exe needs no Visual C++ redistributable.
//! - The workspace, the chroot cache and the world are bind-mounted at their own paths in a
//!   mount namespace of the build's own (they vanish with it), so every path cargo prints is
//!   a path on the host too; `CARGO_TARGET_DIR` and `CARGO_HOME` live under
//!   /var/cache/rocbuild-test/exe (`ROCBUILD_TEST_EXE_CACHE`), beside the chroots, so a warm
//!   build (std included) reuses them.
//! - The host's CA bundle is copied into the chroot and named by `CARGO_HTTP_CAINFO` (the
//!   chroot's own bundle does not trust a TLS-inspecting proxy's certificate).
//!
//! `cargo xtask exe test` builds the unit tests of every crate the same way (`cargo test
//! --workspace --exclude xtask --lib --bins --no-run`), takes the test executables from cargo's JSON messages and
//! runs each on the host under Wine (xtask/src/exe/wine_runner.rs): Wine is not in the chroot.

mod limits;
mod wine_runner;

/// Wine 8 has no `bcryptprimitives.dll`, whose `ProcessPrng` Rust's std imports on Windows
/// (10 and later have it): every std program that seeds a `HashMap` fails to start under Wine
/// (`c0000135`). This DLL, built here with clang-cl against the sysroot, gives it on top of
/// Wine's `BCryptGenRandom`; it is put beside each executable run under Wine (the program's
/// own folder comes first in the DLL search), never into the world's prefix, never shipped.
const PRNG_SHIM_C: &str = r#"#include <windows.h>
#include <bcrypt.h>
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (BCryptGenRandom(NULL, data, n, BCRYPT_USE_SYSTEM_PREFERRED_RNG) < 0) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
"#;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use crate::chroots::{self, Outcome};
use crate::util::{secs, workspace_root, Result};

/// The release target.
pub const TARGET: &str = "x86_64-pc-windows-msvc";

/// Where the target directory and cargo's home are cached unless `ROCBUILD_TEST_EXE_CACHE`
/// says otherwise.
const DEFAULT_CACHE: &str = "/var/cache/rocbuild-test/exe";

/// The host's CA bundle, and where its copy goes inside the chroot.
const HOST_CA: &str = "/etc/ssl/certs/ca-certificates.crt";
const CHROOT_CA: &str = "etc/ssl/certs/rocbuild-host-ca.crt";

const USAGE: &str = "\
usage: cargo xtask exe [build]        rocbuild.exe (release) into cache/exe/rocbuild.exe
       cargo xtask exe test [FILTER]  the unit tests of every crate for the Windows target,
                                      each test executable run under Wine (FILTER: only
                                      the executables whose crate name contains it)
";

/// `cargo xtask exe ...`.
pub fn main(args: &[String]) -> Result<ExitCode> {
    match args.first().map(String::as_str) {
        None | Some("build") => build().map(|_| ExitCode::SUCCESS),
        Some("test") => test(args.get(1).map(String::as_str)),
        Some("-h" | "--help" | "help") => {
            print!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        Some(other) => Err(format!("exe: unknown argument `{other}`\n{USAGE}")),
    }
}

fn cache_dir() -> PathBuf {
    std::env::var_os("ROCBUILD_TEST_EXE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE))
}

/// What a build needs: the chroot, the sysroot, the Wine prefix and the cache.
pub struct Env {
    chroot: PathBuf,
    workspace: PathBuf,
    sysroot: PathBuf,
    pub wineprefix: PathBuf,
    target_dir: PathBuf,
    cargo_home: PathBuf,
}

impl Env {
    /// Make (or reuse) the chroot and the Windows world; the cache directories.
    pub fn prepare() -> Result<Env> {
        match Env::prepare_or_skip()? {
            Ok(env) => Ok(env),
            Err(why) => Err(format!("rocbuild.exe cannot be built: {why}")),
        }
    }

    /// As [`Env::prepare`], but a machine that cannot make the chroot (not root, no
    /// mmdebstrap) is `Ok(Err(why))`: the test run says SKIPPED with it.
    pub fn prepare_or_skip() -> Result<std::result::Result<Env, String>> {
        let root = crate::setup::is_root();
        let chroot = match chroots::ensure(&chroots::RUST_WIN, root)? {
            Outcome::Ready(dir) => dir,
            Outcome::Skipped(why) => return Ok(Err(why)),
        };
        let workspace = workspace_root();
        let world = crate::windows::setup(&crate::windows::pip_python()?)?;
        let cache = cache_dir();
        let env = Env {
            chroot,
            sysroot: world.join("sysroot"),
            wineprefix: world.join("wineprefix"),
            workspace,
            target_dir: cache.join("target"),
            cargo_home: cache.join("cargo-home"),
        };
        for d in [&env.target_dir, &env.cargo_home] {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        // The host's resolver and CA bundle (which may hold a proxy's CA), fresh each time.
        for (from, to) in [
            (HOST_CA, CHROOT_CA),
            ("/etc/resolv.conf", "etc/resolv.conf"),
        ] {
            let to = env.chroot.join(to);
            let _ = std::fs::remove_file(&to);
            std::fs::copy(from, &to).map_err(|e| {
                format!("cannot copy {from} into the chroot ({}): {e}", to.display())
            })?;
        }
        Ok(Ok(env))
    }

    /// The `bcryptprimitives.dll` shim ([`PRNG_SHIM_C`]), built once into cache/exe/wine-shim
    /// (again when its source changes).
    pub fn prng_shim(&self) -> Result<PathBuf> {
        let dir = self.workspace.join("cache/exe/wine-shim");
        let src = dir.join("bcryptprimitives.c");
        let dll = dir.join("bcryptprimitives.dll");
        if dll.is_file() && std::fs::read_to_string(&src).is_ok_and(|t| t == PRNG_SHIM_C) {
            return Ok(dll);
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let _ = std::fs::remove_file(&src);
        std::fs::write(dir.join("shim.c"), PRNG_SHIM_C)
            .map_err(|e| format!("cannot write the shim's source in {}: {e}", dir.display()))?;
        let run = |cmd: &mut Command| crate::util::run_capture(cmd.current_dir(&dir)).map(|_| ());
        run(Command::new("clang-cl-19")
            .args(["/nologo", "/O2", "/MT", "/winsysroot"])
            .arg(&self.sysroot)
            .args(["/c", "/Fobcryptprimitives.obj", "shim.c"]))?;
        // No entry point and no CRT: the DLL imports only bcrypt.dll.
        run(Command::new("lld-link-19")
            .args(["/nologo", "/machine:x64", "/dll", "/noentry"])
            .arg(format!("/winsysroot:{}", self.sysroot.display()))
            .args([
                "/out:bcryptprimitives.dll",
                "/export:ProcessPrng",
                "bcryptprimitives.obj",
                "bcrypt.lib",
            ]))?;
        std::fs::write(&src, PRNG_SHIM_C)
            .map_err(|e| format!("cannot write {}: {e}", src.display()))?;
        Ok(dll)
    }

    /// Where cargo puts the target's artifacts of `profile` (`release`, `debug`).
    pub fn out_dir(&self, profile: &str) -> PathBuf {
        self.target_dir.join(TARGET).join(profile)
    }

    /// `cargo ARGS` in the chroot, in the workspace, with the Windows target's settings.
    pub fn cargo(&self, args: &[&str]) -> Command {
        let binds: Vec<&Path> = vec![&self.workspace, &self.target_dir, &self.cargo_home];
        let mut script = String::from(
            "set -e; r=\"$1\"; shift; mount -t proc proc \"$r/proc\"; mount --rbind /dev \"$r/dev\"; ",
        );
        for i in 0..binds.len() {
            script.push_str(&format!(
                "mkdir -p \"$r$BIND_{i}\"; mount --rbind \"$BIND_{i}\" \"$r$BIND_{i}\"; "
            ));
        }
        script.push_str("exec chroot \"$r\" env -C \"$WORKSPACE\" cargo \"$@\"");
        let mut c = Command::new("unshare");
        c.args(["--mount", "--fork", "sh", "-c", &script, "sh"])
            .arg(&self.chroot)
            .args(args);
        c.env_clear();
        for (i, b) in binds.iter().enumerate() {
            c.env(format!("BIND_{i}"), b);
        }
        for (k, v) in self.build_env() {
            c.env(k, v);
        }
        c
    }

    /// The environment of cargo in the chroot (the unshare/sh wrapper reads only BIND_* and
    /// the PATH to find `mount` and `chroot`, which are on it in both).
    fn build_env(&self) -> Vec<(String, String)> {
        let sysroot = self.sysroot.display().to_string();
        // clang-cl takes `/winsysroot DIR` (two words in CFLAGS, split on spaces by cc-rs; the
        // sysroot's path has none); lld-link `/winsysroot:DIR`.
        let cflags = format!("/winsysroot {sysroot} -Wno-unused-command-line-argument");
        let triple = TARGET.replace('-', "_");
        let upper = triple.to_uppercase();
        let mut v: Vec<(String, String)> = vec![
            (
                "PATH".into(),
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            ),
            ("HOME".into(), "/root".into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("WORKSPACE".into(), self.workspace.display().to_string()),
            ("RUSTC_BOOTSTRAP".into(), "1".into()),
            ("CARGO_HOME".into(), self.cargo_home.display().to_string()),
            (
                "CARGO_TARGET_DIR".into(),
                self.target_dir.display().to_string(),
            ),
            ("CARGO_HTTP_CAINFO".into(), format!("/{CHROOT_CA}")),
            ("CARGO_TERM_COLOR".into(), "never".into()),
            ("CARGO_INCREMENTAL".into(), "0".into()),
            (format!("CARGO_TARGET_{upper}_LINKER"), "lld-link".into()),
            (
                format!("CARGO_TARGET_{upper}_RUSTFLAGS"),
                format!("-Clink-arg=/winsysroot:{sysroot} -Ctarget-feature=+crt-static"),
            ),
            (format!("CC_{triple}"), "clang-cl".into()),
            (format!("CXX_{triple}"), "clang-cl".into()),
            (format!("AR_{triple}"), "llvm-lib".into()),
            (format!("CFLAGS_{triple}"), cflags.clone()),
            (format!("CXXFLAGS_{triple}"), cflags),
        ];
        // Passed through for a look at a failing build.
        for k in ["RUST_BACKTRACE", "CARGO_LOG", "CC_ENABLE_DEBUG_OUTPUT"] {
            if let Ok(val) = std::env::var(k) {
                v.push((k.into(), val));
            }
        }
        v
    }
}

/// The flags every cargo call for the target takes.
pub fn target_flags() -> [&'static str; 4] {
    [
        "--locked",
        "-Zbuild-std=std,panic_abort",
        "--target",
        TARGET,
    ]
}

/// `cargo xtask exe build`: rocbuild.exe (release), copied to cache/exe/rocbuild.exe, run once
/// under Wine (`--version`).
pub fn build() -> Result<PathBuf> {
    let env = Env::prepare()?;
    let mut args = vec!["build", "--release", "-p", "rocbuild", "--bin", "rocbuild"];
    args.extend(target_flags());
    println!(
        "xtask: exe: cargo {} (in {})",
        args.join(" "),
        env.chroot.display()
    );
    let t = Instant::now();
    let status = env
        .cargo(&args)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run unshare/chroot: {e}"))?;
    if !status.success() {
        return Err(format!("building rocbuild.exe failed ({status})"));
    }
    let took = t.elapsed();
    let built = env.out_dir("release").join("rocbuild.exe");
    let dest_dir = env.workspace.join("cache/exe");
    std::fs::create_dir_all(&dest_dir)
        .map_err(|e| format!("cannot create {}: {e}", dest_dir.display()))?;
    let dest = dest_dir.join("rocbuild.exe");
    std::fs::copy(&built, &dest)
        .map_err(|e| format!("cannot copy {} to {}: {e}", built.display(), dest.display()))?;
    let size = std::fs::metadata(&dest).map(|m| m.len()).unwrap_or(0);
    put_shim_beside(&env, &dest)?;
    let runner = wine_runner::Runner::new(&env.wineprefix)?;
    let ran = runner.run(&dest, &["--version"], std::time::Duration::from_secs(60))?;
    if ran.status != Some(0) {
        return Err(format!(
            "{} --version under Wine: {}\n{}",
            dest.display(),
            ran.describe(),
            ran.output_tail(30)
        ));
    }
    println!(
        "xtask: exe: {} ({:.1} MB, built in {}); under Wine `rocbuild.exe --version` says {:?} ({})",
        dest.display(),
        size as f64 / 1e6,
        secs(took),
        ran.stdout.trim(),
        secs(ran.elapsed)
    );
    Ok(dest)
}

/// The PRNG shim copied beside `exe` (for Wine only: on Windows `bcryptprimitives.dll` is a
/// known DLL, always loaded from System32).
fn put_shim_beside(env: &Env, exe: &Path) -> Result<()> {
    let shim = env.prng_shim()?;
    let to = exe.with_file_name("bcryptprimitives.dll");
    std::fs::copy(&shim, &to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", shim.display(), to.display()))
}

/// What the test run is given: the debug rocbuild.exe (the e2e tests of a Windows user's day
/// run it under Wine) and the unit-test executables of every crate, built for the target.
pub struct ForTests {
    env: Env,
    /// rocbuild.exe of the dev profile, with the PRNG shim beside it.
    pub rocbuild_exe: PathBuf,
    tests: Vec<(String, PathBuf)>,
}

/// `cargo xtask exe test`: build the unit tests with `--no-run`, run each under Wine.
fn test(filter: Option<&str>) -> Result<ExitCode> {
    let built = build_for_tests(Env::prepare()?)?;
    Ok(if run_unit_tests(&built, filter)? {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// For `cargo xtask test`: the build's environment, or why this machine cannot make it (not
/// root, no mmdebstrap, no Windows world).
pub fn env_for_tests() -> Result<std::result::Result<Env, String>> {
    match Env::prepare_or_skip()? {
        Ok(env) => Ok(Ok(env)),
        Err(why) => {
            println!("xtask: exe: SKIPPED: {why}");
            Ok(Err(why))
        }
    }
}

/// The unit tests of every crate (`--no-run`) and the dev-profile rocbuild.exe, which shares
/// their dependencies' builds: first rocbuild.exe alone ([`build_exe_for_tests`]), then the
/// unit tests ([`build_unit_tests`]). A build that fails is an error: a compile error in
/// `cfg(windows)` code fails the run.
pub fn build_for_tests(env: Env) -> Result<ForTests> {
    let exe = build_exe_for_tests(&env)?;
    build_unit_tests(env, exe)
}

/// The cargo arguments of the test build: with `unit_tests`, every crate's unit tests; without,
/// only the rocbuild package's small integration test, for which cargo builds rocbuild.exe
/// itself (`CARGO_BIN_EXE_rocbuild`). Both select the same packages and build a test target,
/// so cargo resolves the same features: the second build reuses every artifact of the first
/// (a separate `cargo build -p rocbuild` resolves features otherwise and rebuilt ~120
/// dependencies, 11 minutes here).
fn test_build_args(unit_tests: bool) -> Vec<&'static str> {
    let mut args = vec![
        "test",
        "--workspace",
        // As the release workflow's test job: the libraries' and the binary's unit tests;
        // xtask is a Linux developer tool (std::os::unix throughout).
        "--exclude",
        "xtask",
    ];
    if unit_tests {
        args.extend(["--lib", "--bins"]);
    }
    args.extend([
        // Not run under Wine: built for the rocbuild binary it needs.
        "--test",
        "architecture",
        "--no-run",
        // Every crate's compile errors at once, not the first crate's only (`cargo test`
        // takes no --keep-going; with --no-run this is what it means).
        "--no-fail-fast",
        "--message-format=json-render-diagnostics",
    ]);
    args.extend(target_flags());
    args
}

/// `cargo ARGS` for the target in the chroot; its JSON messages.
fn cargo_json(env: &Env, args: &[&str], what: &str) -> Result<String> {
    println!(
        "xtask: exe: cargo {} (in {})",
        args.join(" "),
        env.chroot.display()
    );
    let t = Instant::now();
    let out = env
        .cargo(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run unshare/chroot: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building {what} for {TARGET} failed ({})",
            out.status
        ));
    }
    println!("xtask: exe: {what} built in {}", secs(t.elapsed()));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The dev-profile rocbuild.exe, with the shim beside it: what the Windows day needs, built
/// before the unit tests so that the day can run while they compile (it leaves more than a
/// core idle).
pub fn build_exe_for_tests(env: &Env) -> Result<PathBuf> {
    cargo_json(env, &test_build_args(false), "rocbuild.exe")?;
    build_dev_exe(env)
}

/// Every crate's unit tests for the target, beside `exe` ([`build_exe_for_tests`]).
pub fn build_unit_tests(env: Env, exe: PathBuf) -> Result<ForTests> {
    let json = cargo_json(&env, &test_build_args(true), "the unit tests")?;
    Ok(ForTests {
        env,
        rocbuild_exe: exe,
        tests: test_executables(&json),
    })
}

/// The dev-profile rocbuild.exe the test build made (for its integration test); the shim
/// beside it.
fn build_dev_exe(env: &Env) -> Result<PathBuf> {
    let exe = env.out_dir("debug").join("rocbuild.exe");
    if !exe.is_file() {
        return Err(format!(
            "the test build made no {} (cargo builds it for the rocbuild package's integration test)",
            exe.display()
        ));
    }
    put_shim_beside(env, &exe)?;
    println!("xtask: exe: {}", exe.display());
    Ok(exe)
}

/// Run each unit-test executable (those whose crate name contains `filter`) under Wine; true
/// when every test passed or failed only as xtask/src/exe/limits.rs lists.
pub fn run_unit_tests(built: &ForTests, filter: Option<&str>) -> Result<bool> {
    let mut exes = built.tests.clone();
    if let Some(f) = filter {
        exes.retain(|(name, _)| name.contains(f));
    }
    if exes.is_empty() {
        return Err("cargo built no test executable".into());
    }
    for (_, exe) in &exes {
        put_shim_beside(&built.env, exe)?;
    }
    let runner = wine_runner::Runner::new(&built.env.wineprefix)?;
    let t = Instant::now();
    let summary = wine_runner::run_all(&runner, &built.env.workspace, &exes)?;
    runner.wait_for_server();
    println!("{}", summary.render());
    println!(
        "xtask: exe: unit tests ran under Wine in {}",
        secs(t.elapsed())
    );
    Ok(summary.ok())
}

/// (crate name, path) of each test executable in cargo's JSON messages.
fn test_executables(json_lines: &str) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for line in json_lines.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] != "compiler-artifact" || v["profile"]["test"] != true {
            continue;
        }
        // Integration tests (kind `test`) are built for the binary they need, not run here.
        if v["target"]["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == "test"))
        {
            continue;
        }
        let (Some(exe), Some(name)) = (v["executable"].as_str(), v["target"]["name"].as_str())
        else {
            continue;
        };
        out.push((name.to_string(), PathBuf::from(exe)));
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_executables_from_cargo_messages() {
        let lines = r#"{"reason":"compiler-artifact","target":{"name":"rocbuild_native","kind":["lib"]},"profile":{"test":true},"executable":"/t/x86_64-pc-windows-msvc/debug/deps/rocbuild_native-1.exe"}
{"reason":"compiler-artifact","target":{"name":"goblin","kind":["lib"]},"profile":{"test":false},"executable":null}
{"reason":"compiler-artifact","target":{"name":"architecture","kind":["test"]},"profile":{"test":true},"executable":"/t/architecture.exe"}
{"reason":"build-finished","success":true}
not json
{"reason":"compiler-artifact","target":{"name":"rocbuild_engine","kind":["lib"]},"profile":{"test":true},"executable":"/t/e.exe"}"#;
        let got = test_executables(lines);
        assert_eq!(
            got,
            vec![
                ("rocbuild_engine".to_string(), PathBuf::from("/t/e.exe")),
                (
                    "rocbuild_native".to_string(),
                    PathBuf::from("/t/x86_64-pc-windows-msvc/debug/deps/rocbuild_native-1.exe")
                ),
            ]
        );
    }
}
