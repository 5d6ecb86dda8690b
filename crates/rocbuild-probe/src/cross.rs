//! A venv for another OS than the host's, read from its files, and the host tools that build
//! and run code for it. The one place where "the host is not the target" is decided:
//! [`venv_os`] says which OS a venv is for, [`python_from_files`] describes its Python without
//! running it (version from `pyvenv.cfg` or `pythonXY.dll`, headers and import library from
//! the base install or `--python-headers`), and [`cross_windows`] finds the LLVM tools, the
//! MSVC + Windows SDK sysroot and Wine that build and run Windows binaries on Linux.
//!
//! Names an OS: the one cross target. A Windows venv is built from a Linux host with clang-cl,
//! lld-link and an MSVC sysroot, and run under Wine.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{
    probe_tools, vars, HostPip, Installer, Os, ProbeEnv, ProbeError, ProbeOptions, Python, Tool,
    Tools, Venv,
};

/// The host tools that build for (and run) a Windows venv from another OS: clang-cl and
/// lld-link with LLVM's librarian, resource compiler and manifest tool, all of one LLVM
/// version; the MSVC CRT + Windows SDK in the layout `/winsysroot` takes; Wine to run the
/// venv's Python for the verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrossWindows {
    /// The LLVM major the tools belong to (`19`), or `""` for unversioned names.
    pub llvm: String,
    pub clang_cl: Option<PathBuf>,
    pub lld_link: Option<PathBuf>,
    pub llvm_lib: Option<PathBuf>,
    pub llvm_rc: Option<PathBuf>,
    pub llvm_mt: Option<PathBuf>,
    pub llvm_dlltool: Option<PathBuf>,
    pub llvm_readobj: Option<PathBuf>,
    /// `--winsysroot DIR` or `$ROCBUILD_WINSYSROOT`: `VC/Tools/MSVC/<v>` and `Windows Kits/10`.
    pub winsysroot: Option<PathBuf>,
    /// Where the sysroot came from (`--winsysroot`, `$ROCBUILD_WINSYSROOT`).
    pub winsysroot_from: Option<String>,
    /// `$ROCBUILD_WINE` or `wine` on PATH: runs the venv's `python.exe`.
    pub wine: Option<PathBuf>,
}

/// The LLVM tools a Windows build needs, by their LLVM names.
pub const CROSS_TOOLS: [&str; 7] = [
    "clang-cl",
    "lld-link",
    "llvm-lib",
    "llvm-rc",
    "llvm-mt",
    "llvm-dlltool",
    "llvm-readobj",
];

/// The OS a venv is for: the one decider, asked by the probe, doctor, repair and the wheel
/// command alike. In this order:
/// 1. its binaries: the first native library (by name, any OS's) under `torch/lib`, then
///    under each import dir of `packages`, read by its first bytes (ELF, PE, Mach-O; nothing is
///    parsed). A macOS venv copied to Linux keeps a Linux-like layout but is macOS's;
/// 2. its layout: `Lib/site-packages` and a `python.exe` (at its root, or in `Scripts`) and no
///    `bin/python` is a Windows venv, whatever the host (one with no torch yet included);
/// 3. this host.
pub fn venv_os(root: &Path, packages: &[&str], host: Os) -> Os {
    let site = crate::platform::any_site_packages(root, host);
    if let Some(os) = site.as_deref().and_then(|s| os_of_binaries(s, packages)) {
        return os;
    }
    let rules = Os::Windows.rules();
    let windows_layout = rules.site_packages(root).is_some()
        && rules.venv_python(root).is_file()
        && !Os::Linux.rules().venv_python(root).exists();
    if windows_layout {
        Os::Windows
    } else {
        host
    }
}

/// The OS of the first native library under `site/torch/lib`, then under `site/<package>`.
fn os_of_binaries(site: &Path, packages: &[&str]) -> Option<Os> {
    std::iter::once(site.join("torch").join("lib"))
        .chain(packages.iter().map(|p| site.join(p)))
        .find_map(|d| first_native_os(&d, 0))
}

/// Depth-first, in name order, to a few levels (native libraries are never deep).
fn first_native_os(dir: &Path, depth: usize) -> Option<Os> {
    if depth > 4 {
        return None;
    }
    let mut entries: Vec<std::fs::DirEntry> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    let (dirs, files): (Vec<_>, Vec<_>) = entries
        .into_iter()
        .partition(|e| e.file_type().is_ok_and(|t| t.is_dir()));
    let of_file = |e: &std::fs::DirEntry| {
        let name = e.file_name();
        if !crate::platform::libname::is_native(&name.to_string_lossy()) {
            return None;
        }
        let format = rocbuild_native::format_of(&e.path())?.to_string();
        Os::ALL
            .into_iter()
            .find(|o| o.rules().binary_format() == format)
    };
    files.iter().find_map(of_file).or_else(|| {
        dirs.iter()
            .find_map(|d| first_native_os(&d.path(), depth + 1))
    })
}

/// The host tools for a Windows target: the newest LLVM whose `clang-cl-N` and `lld-link-N`
/// are both on `path` (unversioned names last), the sysroot from `--winsysroot` or
/// `$ROCBUILD_WINSYSROOT`, and Wine.
pub fn cross_windows(env: &ProbeEnv, winsysroot: Option<&Path>) -> CrossWindows {
    let dirs: Vec<PathBuf> = env.dirs(vars::PATH);
    let find =
        |name: &str| -> Option<PathBuf> { dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()) };
    let mut majors: Vec<String> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let v = n.strip_prefix("clang-cl-")?;
            v.chars().all(|c| c.is_ascii_digit()).then(|| v.to_string())
        })
        .filter(|v| find(&format!("lld-link-{v}")).is_some())
        .collect();
    majors.sort_by_key(|v| crate::natural_key(v));
    majors.dedup();
    let llvm = majors.pop().unwrap_or_default();
    let tool = |name: &str| {
        let versioned = (!llvm.is_empty()).then(|| find(&format!("{name}-{llvm}")));
        versioned.flatten().or_else(|| find(name))
    };
    let (winsysroot, winsysroot_from) = match winsysroot {
        Some(d) => (Some(d.to_path_buf()), Some("--winsysroot".to_string())),
        None => match env.var(vars::ROCBUILD_WINSYSROOT) {
            Some(d) => (Some(PathBuf::from(d)), Some("$ROCBUILD_WINSYSROOT".into())),
            None => (None, None),
        },
    };
    // The compilers run in the build tree: an absolute path, whatever the caller's directory.
    let winsysroot = winsysroot.map(|d| std::path::absolute(&d).unwrap_or(d));
    let wine = wine_with(env, find);
    CrossWindows {
        clang_cl: tool("clang-cl"),
        lld_link: tool("lld-link"),
        llvm_lib: tool("llvm-lib"),
        llvm_rc: tool("llvm-rc"),
        llvm_mt: tool("llvm-mt"),
        llvm_dlltool: tool("llvm-dlltool"),
        llvm_readobj: tool("llvm-readobj"),
        llvm,
        winsysroot,
        winsysroot_from,
        wine,
    }
}

impl CrossWindows {
    /// The tools of [`CROSS_TOOLS`] that were not found (`llvm-mt` is optional: without it
    /// no manifest is embedded).
    pub fn missing(&self) -> Vec<&'static str> {
        let have = [
            &self.clang_cl,
            &self.lld_link,
            &self.llvm_lib,
            &self.llvm_rc,
            &self.llvm_mt,
            &self.llvm_dlltool,
            &self.llvm_readobj,
        ];
        CROSS_TOOLS
            .iter()
            .zip(have)
            .filter(|(n, p)| p.is_none() && **n != "llvm-mt")
            .map(|(n, _)| *n)
            .collect()
    }

    /// What is wrong with the sysroot, if anything: absent, or not the layout `/winsysroot`
    /// takes (`VC/Tools/MSVC/<v>/include` and `Windows Kits/10/Include/<v>/ucrt`).
    pub fn sysroot_problem(&self) -> Option<String> {
        let Some(d) = &self.winsysroot else {
            return Some("no MSVC + Windows SDK sysroot: neither --winsysroot DIR nor $ROCBUILD_WINSYSROOT is set".into());
        };
        let has = |parts: &[&str], leaf: &str| {
            std::fs::read_dir(parts.iter().fold(d.clone(), |p, s| p.join(s)))
                .ok()
                .is_some_and(|rd| rd.flatten().any(|e| e.path().join(leaf).is_dir()))
        };
        let vc = has(&["VC", "Tools", "MSVC"], "include");
        let sdk = has(&["Windows Kits", "10", "Include"], "ucrt");
        match (vc, sdk) {
            (true, true) => None,
            _ => Some(format!(
                "{} ({}) is not an MSVC + Windows SDK sysroot: it lacks {}",
                d.display(),
                self.winsysroot_from.as_deref().unwrap_or("given"),
                [
                    (!vc).then_some("VC/Tools/MSVC/<version>/include"),
                    (!sdk).then_some("Windows Kits/10/Include/<version>/ucrt"),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" and ")
            )),
        }
    }
}

/// How to get a sysroot, for the errors that lack one.
pub const SYSROOT_HELP: &str = "pass --winsysroot DIR (or set ROCBUILD_WINSYSROOT) naming a directory that holds VC/Tools/MSVC/<version> and Windows Kits/10: a Visual Studio or Build Tools install copied from Windows, or the output of `xwin splat --use-winsysroot-style` (https://github.com/Jake-Shadle/xwin), which downloads Microsoft's CRT and SDK after you accept their licence";

/// The Python of a venv for `os` described from its files (its interpreter cannot run here):
/// for Windows, the version from `pyvenv.cfg` or `pythonXY.dll` (its name and file version),
/// the headers from the base install's `include` or `headers` (`--python-headers`), the DLL
/// and the import library directory (`libs`) when the base install has one; for another OS,
/// the version from `pyvenv.cfg` or `lib/pythonX.Y`.
pub fn python_from_files(root: &Path, site: &Path, os: Os, headers: Option<&Path>) -> Python {
    let cfg = crate::read_text(root.join("pyvenv.cfg")).unwrap_or_default();
    let cfg_version = cfg_value(&cfg, &["version", "version_info"]);
    let base = (os == Os::Windows)
        .then(|| windows_base(root, &cfg))
        .flatten();
    let dll = base.as_deref().and_then(python_dll);
    let full_version = cfg_version
        .filter(|v| v.split('.').count() >= 3)
        .or_else(|| dll.as_deref().and_then(dll_version))
        .or_else(|| {
            site.parent()?
                .file_name()?
                .to_string_lossy()
                .strip_prefix("python")
                .map(str::to_string)
        })
        .unwrap_or_default();
    let version = full_version
        .split('.')
        .take(2)
        .collect::<Vec<_>>()
        .join(".");
    let machine = (os == Os::Windows)
        .then(|| windows_machine(&os.rules().venv_python(root)))
        .flatten();
    let include = headers
        .map(|h| std::path::absolute(h).unwrap_or_else(|_| h.to_path_buf()))
        .or_else(|| base.as_ref().map(|b| b.join("include")))
        .unwrap_or_default();
    let nodot = version.replace('.', "");
    let (ext_suffix, platform) = match (os, machine.as_deref()) {
        (Os::Windows, Some(m)) => (format!(".cp{nodot}-win_{m}.pyd"), format!("win-{m}")),
        (os, _) => (String::new(), os.as_str().to_string()),
    };
    Python {
        exe: os.rules().venv_python(root),
        version,
        full_version,
        site_packages: site.to_path_buf(),
        include,
        ext_suffix,
        platform,
        distributions: crate::installed_distributions(site),
        shared_sites: Vec::new(),
        installer: Installer {
            pip: false,
            ..Installer::default()
        },
        libs: base
            .as_ref()
            .map(|b| b.join("libs"))
            .filter(|l| l.join(format!("python{nodot}.lib")).is_file()),
        dll,
        pth_file: ["python".to_string(), format!("python{nodot}")]
            .iter()
            .map(|n| root.join(format!("{n}._pth")))
            .find(|f| f.is_file()),
    }
}

/// Why a Windows Python's headers cannot build an extension, if they cannot: no `Python.h`, or
/// headers of another Python version (`patchlevel.h`).
pub fn headers_problem(py: &Python) -> Option<String> {
    let inc = &py.include;
    let Ok(patch) = crate::read_text(inc.join("patchlevel.h")) else {
        return Some(
            if inc.as_os_str().is_empty() || !inc.join("Python.h").is_file() {
                format!(
                "no Python headers for the venv's Python {}: {} has no Python.h (an embeddable Python has none)",
                py.full_version,
                if inc.as_os_str().is_empty() { "the base install".into() } else { inc.display().to_string() }
            )
            } else {
                format!("{} has Python.h but no patchlevel.h", inc.display())
            },
        );
    };
    let major = crate::c_define(&patch, "PY_MAJOR_VERSION").unwrap_or_default();
    let minor = crate::c_define(&patch, "PY_MINOR_VERSION").unwrap_or_default();
    let theirs = format!("{major}.{minor}");
    if theirs != py.version {
        return Some(format!(
            "the headers in {} are Python {theirs}'s, the venv's Python is {}",
            inc.display(),
            py.version
        ));
    }
    if !inc.join("pyconfig.h").is_file() {
        return Some(format!("{} has no pyconfig.h", inc.display()));
    }
    None
}

fn cfg_value(cfg: &str, keys: &[&str]) -> Option<String> {
    cfg.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| keys.contains(&k.trim()))
        .map(|(_, v)| v.trim().to_string())
}

/// The directory of the Python a Windows venv runs: the venv itself when it holds
/// `pythonXY.dll` (an embeddable or full install used directly), else `pyvenv.cfg`'s `home`
/// as this host sees it (`C:\…` under WSL's `/mnt/c`, Wine's `Z:\…` as `/…`).
fn windows_base(root: &Path, cfg: &str) -> Option<PathBuf> {
    if python_dll(root).is_some() {
        return Some(root.to_path_buf());
    }
    let home = cfg_value(cfg, &["home"])?;
    host_view_of_windows_path(&home)
        .into_iter()
        .find(|p| python_dll(p).is_some())
}

/// Where a Windows path may be on this host: as written, Wine's drive `Z:` as `/`, WSL's
/// `/mnt/<drive>`.
pub fn host_view_of_windows_path(p: &str) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from(p)];
    let b = p.as_bytes();
    if b.len() >= 2 && b[1] == b':' && b[0].is_ascii_alphabetic() {
        let rest = p[2..].replace('\\', "/");
        let drive = (b[0] as char).to_ascii_lowercase();
        if drive == 'z' {
            out.push(PathBuf::from(if rest.is_empty() {
                "/".into()
            } else {
                rest.clone()
            }));
        }
        out.push(PathBuf::from(format!("/mnt/{drive}{rest}")));
    }
    out
}

/// The environment a Windows Python needs under Wine: no debug noise, the MSVC runtime the
/// venv ships before Wine's own (`n,b`), no debugger on a crash, no Mono/Gecko prompts, and
/// libiomp5 without CPU pinning.
pub const WINE_ENV: [(&str, &str); 3] = [
    ("WINEDEBUG", "-all"),
    (
        "WINEDLLOVERRIDES",
        "vcruntime140,vcruntime140_1,msvcp140,msvcp140_1,msvcp140_2,msvcp140_atomic_wait=n,b;winedbg.exe=d;mscoree,mshtml=",
    ),
    ("KMP_AFFINITY", "disabled"),
];

/// Wine, when this host has it: `$ROCBUILD_WINE` (`none`: never), else `wine` on PATH.
pub fn find_wine(env: &ProbeEnv) -> Option<PathBuf> {
    wine_with(env, |n| which::which(n).ok())
}

/// [`find_wine`], looking programs up with `find`.
fn wine_with(env: &ProbeEnv, find: impl Fn(&str) -> Option<PathBuf>) -> Option<PathBuf> {
    match env.var(vars::ROCBUILD_WINE) {
        Some("none") => None,
        Some(v) => Some(PathBuf::from(v)),
        None => find("wine"),
    }
}

/// A path of this Unix host as a Windows program under Wine sees it (`/a/b` -> `Z:\a\b`);
/// any other path unchanged.
pub fn wine_path(p: &Path) -> PathBuf {
    let s = p.display().to_string();
    if s.starts_with('/') {
        PathBuf::from(format!("Z:{}", s.replace('/', "\\")))
    } else {
        p.to_path_buf()
    }
}

/// Every path of `v` as Wine sees it ([`wine_path`]): what a DLL preload hook written on this
/// Unix host for a Windows venv here must name.
pub fn wine_paths(v: &mut [PathBuf]) {
    for p in v.iter_mut() {
        *p = wine_path(p);
    }
}

/// `pythonXY.dll` in `dir` (not the stable-ABI `python3.dll`).
fn python_dll(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            let l = n.to_ascii_lowercase();
            l.strip_prefix("python")
                .and_then(|r| r.strip_suffix(".dll"))
                .is_some_and(|d| d.len() >= 3 && d.chars().all(|c| c.is_ascii_digit()))
        })
        .collect();
    found.sort_by_key(|n| crate::natural_key(n));
    found.pop().map(|n| dir.join(n))
}

/// `3.13.5` from `python313.dll`: the major and minor from its name, the micro from its file
/// version (CPython's third field is micro × 1000 + release level × 10 + serial).
fn dll_version(dll: &Path) -> Option<String> {
    let name = dll.file_stem()?.to_string_lossy().to_ascii_lowercase();
    let digits = name.strip_prefix("python")?;
    let (major, minor) = digits.split_at(1);
    let micro = std::fs::read(dll)
        .ok()
        .and_then(|b| rocbuild_native::pe_file_version(&b))
        .filter(|v| v[0].to_string() == major && v[1].to_string() == minor)
        .map(|v| format!(".{}", v[2] / 1000))
        .unwrap_or_default();
    Some(format!("{major}.{minor}{micro}"))
}

/// `amd64` / `arm64` from the machine field of an executable's PE header.
fn windows_machine(exe: &Path) -> Option<String> {
    let bytes = std::fs::read(exe).ok()?;
    match rocbuild_native::pe_machine(&bytes)? {
        0x8664 => Some("amd64".into()),
        0xAA64 => Some("arm64".into()),
        _ => None,
    }
}

/// The host Python whose pip installs the build tools and wheels for `py` (a Windows venv) and
/// which CMake runs at configure time: the first on `$PATH` that runs, every `pythonX.Y` of the
/// venv's version before every `python3`. Each is run (`-c` printing its version), so a shim
/// that cannot (pyenv's `python3.12` when that version is not active: "pyenv: python3.12:
/// command not found", exit 127) is passed over for the next; the second value says which
/// were and why (logged too, shown with `-v`). None when no host Python runs.
pub fn host_pip(py: &Python, env: &ProbeEnv) -> (Option<HostPip>, Vec<String>) {
    let host = Os::current();
    let mut skipped = Vec::new();
    let candidates: Vec<PathBuf> = [format!("python{}", py.version), "python3".into()]
        .iter()
        .flat_map(|name| env.which_all(name, host))
        .collect();
    let found = candidates
        .into_iter()
        .find_map(|python| match python_runs(env, &python) {
            Ok(version) => Some((python, version)),
            Err(why) => {
                let why = format!("{} does not run: {why}", python.display());
                tracing::info!("host Python skipped: {why}");
                skipped.push(why);
                None
            }
        });
    let Some((python, version)) = found else {
        return (None, skipped);
    };
    tracing::info!("host Python: {} (Python {version})", python.display());
    let nodot = py.version.replace('.', "");
    let platform = py.platform.replace('-', "_");
    let pip = HostPip {
        python,
        same_version: version == py.version,
        tags: vec![
            "--platform".into(),
            platform,
            "--python-version".into(),
            py.version.clone(),
            "--implementation".into(),
            "cp".into(),
            "--abi".into(),
            format!("cp{nodot}"),
        ],
    };
    (Some(pip), skipped)
}

/// Prints a Python's `major.minor`, and nothing else.
const VERSION_SCRIPT: &str = "import sys; print('%d.%d' % sys.version_info[:2])";

/// Run `python -c VERSION_SCRIPT`: its `3.12`, or why it did not run (its exit code and the
/// first line it said on stderr, a timeout, a start that failed, output that is no version).
fn python_runs(env: &ProbeEnv, python: &Path) -> Result<String, String> {
    // -B: the venv's `.pth` files run at start-up (setuptools' `distutils-precedence.pth`
    // imports `_distutils_hack`); nothing of theirs may be compiled into the venv.
    let handle = duct::cmd(python, ["-B", "-c", VERSION_SCRIPT])
        .full_env(&env.vars)
        .stdin_null()
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .start()
        .map_err(|e| format!("cannot start it: {e}"))?;
    let out = match handle.wait_timeout(env.timeout) {
        Ok(Some(out)) => out.clone(),
        Ok(None) => {
            let _ = handle.kill();
            return Err(format!("no answer in {} s", env.timeout.as_secs()));
        }
        Err(e) => return Err(e.to_string()),
    };
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = stderr.lines().map(str::trim).find(|l| !l.is_empty());
        let code = out.status.code().map_or_else(
            || "killed by a signal".to_string(),
            |c| format!("exit code {c}"),
        );
        return Err(match said {
            Some(line) => format!("{code}: {line}"),
            None => code,
        });
    }
    let number = |p: &str| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit());
    let is_version = stdout
        .split_once('.')
        .is_some_and(|(a, b)| number(a) && number(b));
    if is_version {
        Ok(stdout)
    } else {
        Err(format!("it printed {stdout:?}, not its version"))
    }
}

/// A venv for `os` that cannot run here, or whose Python does not describe itself: the error
/// [`python_from_files`] does not raise itself (a Windows venv without `pythonXY.dll`).
pub fn check_windows_python(root: &Path, py: &Python) -> Result<(), ProbeError> {
    if py.dll.is_some() {
        return Ok(());
    }
    Err(ProbeError::WindowsPython {
        root: root.display().to_string(),
        reason: "neither the venv nor its pyvenv.cfg `home` holds a pythonXY.dll".into(),
        help: "point --venv at a Windows venv whose base Python is reachable from this host (pyvenv.cfg's home, under /mnt/<drive> or Wine's Z:), or at a Windows Python directory itself (python.exe, pythonXY.dll, Lib\\site-packages)".into(),
    })
}

/// A venv of another OS than the host's: its Python from its files, and the host's tools
/// for that OS (clang-cl, lld-link, … as the C and C++ compilers).
pub(crate) fn probe_cross(
    venv: &Venv,
    os: Os,
    opts: &ProbeOptions,
    env: &ProbeEnv,
) -> Result<(Python, Tools, Option<CrossWindows>), ProbeError> {
    // Windows is the one cross target: a macOS venv on Linux (or a Linux one on Windows) is
    // refused, naming where it builds.
    if os != Os::Windows {
        return Err(ProbeError::OtherOs {
            root: venv.root.display().to_string(),
            os: os.as_str(),
            host: Os::current().as_str(),
        });
    }
    let windows = Os::Windows.rules();
    let site = windows
        .site_packages(&venv.root)
        .unwrap_or_else(|| crate::platform::windows_site_packages(&venv.root));
    let mut python = python_from_files(
        &venv.root,
        &site,
        Os::Windows,
        opts.python_headers.as_deref(),
    );
    check_windows_python(&venv.root, &python)?;
    let (host, skipped) = host_pip(&python, env);
    python.installer.host = host;
    python.installer.host_skipped = skipped;
    let cross = cross_windows(env, opts.winsysroot.as_deref());
    let mut tools = probe_tools(env);
    let cl = cross.clang_cl.clone().map(|path| Tool {
        version: Some(format!("clang-cl (LLVM {})", cross.llvm)),
        path,
    });
    tools.cc = cl.clone();
    tools.cxx = cl;
    tools.msvc = None;
    Ok((python, tools, Some(cross)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_paths_as_this_host_sees_them() {
        let v = host_view_of_windows_path(r"Z:\opt\py");
        assert!(v.contains(&PathBuf::from("/opt/py")));
        let v = host_view_of_windows_path(r"C:\Users\a\Python313");
        assert!(v.contains(&PathBuf::from("/mnt/c/Users/a/Python313")));
        assert_eq!(host_view_of_windows_path("/x").len(), 1);
    }

    #[test]
    fn a_windows_layout_is_a_windows_venv_on_linux() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        assert_eq!(venv_os(r, &[], Os::Linux), Os::Linux);
        std::fs::create_dir_all(r.join("Lib/site-packages")).unwrap();
        std::fs::write(r.join("python.exe"), b"MZ").unwrap();
        // No torch, no package yet: the layout decides.
        assert_eq!(venv_os(r, &[], Os::Linux), Os::Windows);
        std::fs::create_dir_all(r.join("bin")).unwrap();
        std::fs::write(r.join("bin/python"), b"").unwrap();
        assert_eq!(
            venv_os(r, &[], Os::Linux),
            Os::Linux,
            "a Linux venv that also holds a python.exe"
        );
    }

    /// The binaries come first: a macOS venv copied to Linux has Linux's layout, and its
    /// Mach-O libraries say whose it is; torch's first, then the packages named, in name order,
    /// a few levels down; files that are no native library by name are not read.
    #[test]
    fn the_binaries_say_whose_a_venv_is_before_its_layout() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let site = r.join("lib/python3.11/site-packages");
        std::fs::create_dir_all(&site).unwrap();
        std::fs::create_dir_all(r.join("bin")).unwrap();
        std::fs::write(r.join("bin/python"), b"").unwrap();
        std::fs::write(r.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        assert_eq!(venv_os(r, &["pkg"], Os::Linux), Os::Linux);
        let deep = site.join("pkg/a/b");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(site.join("pkg/README.so.txt"), [0x7f, b'E', b'L', b'F']).unwrap();
        std::fs::write(
            deep.join("_core.cpython-311-darwin.so"),
            [0xcf, 0xfa, 0xed, 0xfe],
        )
        .unwrap();
        assert_eq!(venv_os(r, &["pkg"], Os::Linux), Os::Macos);
        assert_eq!(
            venv_os(r, &[], Os::Linux),
            Os::Linux,
            "only torch and the packages named are read"
        );
        std::fs::create_dir_all(site.join("torch/lib")).unwrap();
        std::fs::write(site.join("torch/lib/c10.dll"), b"MZ\x90\x00").unwrap();
        assert_eq!(
            venv_os(r, &["pkg"], Os::Linux),
            Os::Windows,
            "torch's first"
        );
    }

    /// A venv made on Windows from a full install: `Scripts\python.exe` (the launcher), its
    /// base install named by pyvenv.cfg's `home` as Wine writes it (`Z:\…`), which holds the
    /// DLL, `include/` and `libs/pythonXY.lib`.
    #[test]
    fn a_windows_venv_finds_its_base_install_through_pyvenv_home() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("Python311");
        std::fs::create_dir_all(base.join("include")).unwrap();
        std::fs::create_dir_all(base.join("libs")).unwrap();
        std::fs::write(base.join("python311.dll"), b"MZ").unwrap();
        std::fs::write(base.join("python3.dll"), b"MZ").unwrap();
        std::fs::write(base.join("libs/python311.lib"), b"!<arch>").unwrap();
        let venv = d.path().join("venv");
        std::fs::create_dir_all(venv.join("Scripts")).unwrap();
        std::fs::create_dir_all(venv.join("Lib/site-packages")).unwrap();
        std::fs::write(venv.join("Scripts/python.exe"), b"MZ").unwrap();
        let home = format!("Z:{}", base.display().to_string().replace('/', "\\"));
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {home}\ninclude-system-site-packages = false\nversion = 3.11.9\n"),
        )
        .unwrap();
        let site = venv.join("Lib/site-packages");
        let py = python_from_files(&venv, &site, Os::Windows, None);
        assert_eq!(
            (py.version.as_str(), py.full_version.as_str()),
            ("3.11", "3.11.9")
        );
        assert_eq!(py.dll, Some(base.join("python311.dll")));
        assert_eq!(py.include, base.join("include"));
        assert_eq!(py.libs, Some(base.join("libs")));
        assert_eq!(py.exe, venv.join("Scripts/python.exe"));
        assert!(check_windows_python(&venv, &py).is_ok());
        // No Python.h there: the headers are named as missing, with the version.
        assert!(headers_problem(&py).unwrap().contains("3.11.9"));
        // An unreachable home: the error says where a pythonXY.dll was looked for.
        std::fs::write(
            venv.join("pyvenv.cfg"),
            "home = C:\\Nowhere\nversion = 3.11.9\n",
        )
        .unwrap();
        let py = python_from_files(&venv, &site, Os::Windows, None);
        assert!(check_windows_python(&venv, &py).is_err());
    }

    /// A Windows venv of Python `version` (`3.11`), described from its files.
    #[cfg(unix)]
    fn windows_venv_of(dir: &Path, version: &str) -> Python {
        let venv = dir.join("winvenv");
        let site = venv.join("Lib/site-packages");
        std::fs::create_dir_all(&site).unwrap();
        std::fs::write(venv.join("python.exe"), b"MZ").unwrap();
        let cfg = format!("home = C:\\Nowhere\nversion = {version}.1\n");
        std::fs::write(venv.join("pyvenv.cfg"), cfg).unwrap();
        python_from_files(&venv, &site, Os::Windows, None)
    }

    /// An executable shell script `name` in `dir`.
    #[cfg(unix)]
    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// pyenv's shim of a version that is not active, on PATH ahead of a real Python of that
    /// version (issue 38: rocbuild ran the shim to install the build tools and gave it to
    /// CMake, and both failed): the shim is run, fails, and is passed over, with pyenv's own
    /// words, for the real Python, which pip and CMake then get.
    #[cfg(unix)]
    #[test]
    fn a_host_python_that_cannot_run_is_skipped_for_one_that_can() {
        // The interpreter itself, not a shim in front of it (this machine may use pyenv).
        let out = std::process::Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 on PATH");
        let real = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let version = python_runs(&ProbeEnv::from_process(), &real).unwrap();
        let d = tempfile::tempdir().unwrap();
        let name = format!("python{version}");
        let shim = script(
            &d.path().join("shims"),
            &name,
            &format!("echo 'pyenv: {name}: command not found' >&2\necho >&2\nexit 127"),
        );
        let bin = d.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(&real, bin.join(&name)).unwrap();
        let path = format!("{}:{}", shim.parent().unwrap().display(), bin.display());
        let env = ProbeEnv::rooted(d.path()).with_var("PATH", path);
        let py = windows_venv_of(d.path(), &version);

        let (host, skipped) = host_pip(&py, &env);
        let host = host.unwrap_or_else(|| panic!("no host Python; skipped: {skipped:?}"));
        assert_eq!(host.python, bin.join(&name));
        assert!(host.same_version);
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(
            skipped[0].contains(&shim.display().to_string()),
            "{skipped:?}"
        );
        assert!(
            skipped[0].contains(&format!("exit code 127: pyenv: {name}: command not found")),
            "{skipped:?}"
        );

        // Only the shim and a python3 that prints no version: nothing runs, both said.
        let odd = script(&d.path().join("odd"), "python3", "echo hello");
        let path = format!(
            "{}:{}",
            shim.parent().unwrap().display(),
            odd.parent().unwrap().display()
        );
        let env = ProbeEnv::rooted(d.path()).with_var("PATH", path);
        let (host, skipped) = host_pip(&py, &env);
        assert_eq!(host, None);
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(
            skipped[1].contains("\"hello\", not its version"),
            "{skipped:?}"
        );
    }

    #[test]
    fn the_newest_llvm_with_both_clang_cl_and_lld_link_is_chosen() {
        let d = tempfile::tempdir().unwrap();
        for n in [
            "clang-cl-15",
            "lld-link-15",
            "clang-cl-19",
            "lld-link-19",
            "clang-cl-20",
            "llvm-lib-19",
            "wine",
        ] {
            std::fs::write(d.path().join(n), b"").unwrap();
        }
        let c = cross_windows(
            &ProbeEnv::rooted(Path::new("/")).with_var(vars::PATH, d.path().display().to_string()),
            Some(Path::new("/nowhere")),
        );
        assert_eq!(c.llvm, "19", "clang-cl-20 has no lld-link-20");
        assert_eq!(c.clang_cl, Some(d.path().join("clang-cl-19")));
        assert_eq!(c.llvm_lib, Some(d.path().join("llvm-lib-19")));
        assert_eq!(c.missing(), ["llvm-rc", "llvm-dlltool", "llvm-readobj"]);
        assert!(c.sysroot_problem().unwrap().contains("lacks VC/Tools/MSVC"));
        assert_eq!(c.winsysroot_from.as_deref(), Some("--winsysroot"));
    }
}
