//! A Windows venv built from another OS (`Host.cross`): everything that differs from a native
//! build, in one place. The CMake toolchain file rocbuild writes (clang-cl + lld-link + LLVM's
//! lib/rc/mt, the MSVC + SDK `/winsysroot`), the Python the configure may run (the host's
//! Python of the venv's version) and the target Python's headers and import library (made
//! from `pythonXY.dll` when its install has none), and Wine as the runner of the venv's
//! `python.exe` for the verification. Staging, the transaction, the manifest, the DLL preload
//! hook and the wheel are the same code as for a native Windows run.

pub mod prepare;

use std::path::{Path, PathBuf};

use rocbuild_probe::{CrossWindows, Machine};
use serde::Serialize;

use crate::command::Command;
use crate::context::Context;
use crate::error::{EngineError, Result};
use crate::paths::{hash_hex, join};

/// What a cross build adds to the plan.
#[derive(Debug, Clone, Serialize)]
pub struct CrossPlan {
    /// The CMake toolchain file (written before the configure) and its contents.
    pub toolchain_file: PathBuf,
    #[serde(skip)]
    pub toolchain: String,
    /// `pythonXY.lib`, made from the DLL's exports when the Python install has none.
    pub python_lib: PathBuf,
    pub make_python_lib: Option<ImportLib>,
    /// Runs the venv's `python.exe` (the verification); None: no Wine here, the install is
    /// kept unverified.
    pub runner: Option<Runner>,
    /// The host Python that stands in for the venv's at configure time.
    pub host_python: PathBuf,
    /// What every compile and link needs (the target, the sysroot): in the toolchain file's
    /// `*_FLAGS_INIT`, and in front of any `CMAKE_*_FLAGS` the recipe or the user sets (a set
    /// value replaces the INIT one).
    pub compile_flags: String,
    pub link_flags: String,
    /// A link with no space in its path to the SDK's `Include/<version>` (`Windows Kits` has
    /// one, and CMake's llvm-rc step splits `/I` paths at spaces): (link, SDK directory).
    pub sdk_include_link: Option<(PathBuf, PathBuf)>,
}

/// An import library made from a DLL's exports (`.def`, then `llvm-dlltool`).
#[derive(Debug, Clone, Serialize)]
pub struct ImportLib {
    pub dll: PathBuf,
    pub def: PathBuf,
    pub dlltool: PathBuf,
}

impl ImportLib {
    /// The `llvm-dlltool` command that turns the `.def` into `lib`.
    pub fn command(&self, lib: &Path) -> Command {
        Command::new(&self.dlltool).args([
            "-m".to_string(),
            "i386:x86-64".into(),
            "-d".into(),
            self.def.display().to_string(),
            "-l".into(),
            lib.display().to_string(),
        ])
    }
}

/// Wine, with the settings a Windows Python needs under it and a time limit.
#[derive(Debug, Clone, Serialize)]
pub struct Runner {
    pub wine: PathBuf,
    pub timeout_secs: u64,
}

/// Seconds a verification under Wine may take (`import torch` alone takes 25–35 s on two busy
/// cores); `ROCBUILD_WINE_TIMEOUT` overrides, read by the caller.
pub const WINE_TIMEOUT_SECS: u64 = 600;

impl Runner {
    /// `cmd` (the venv's `python.exe …`) run under Wine: `timeout` stops a hung Wine, and
    /// `wineserver -k` then ends what it left; the MSVC runtime the venv ships is preferred to
    /// Wine's own, no debugger starts on a crash, no Mono/Gecko prompt.
    pub fn wrap(&self, cmd: &Command) -> Command {
        // --foreground: timeout stays in rocbuild's child process group (it would make its
        // own otherwise), so a Ctrl-C that stops the group stops Wine's python.exe too.
        let script = "timeout --foreground -k 10 \"$0\" \"$@\"; rc=$?; if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo \"rocbuild: Wine did not finish within $0 s: stopped\" >&2; wineserver -k 2>/dev/null; fi; exit $rc";
        let mut c = Command::new("sh")
            .args([
                "-c".to_string(),
                script.into(),
                self.timeout_secs.to_string(),
            ])
            .arg(self.wine.display().to_string())
            .arg(cmd.program.display().to_string())
            .args(cmd.args.iter().cloned());
        c.env = cmd.env.clone();
        c.env_remove = cmd.env_remove.clone();
        c.cwd = cmd.cwd.clone();
        for (k, v) in rocbuild_probe::cross::WINE_ENV {
            c.env.entry(k.into()).or_insert(v.into());
        }
        c
    }
}

/// The cross plan for `machine`, or None when host and target are the same OS. Refuses, with
/// every missing piece named, a build that cannot work: LLVM tools, the sysroot, the Python
/// headers, a host Python of the venv's version.
pub fn plan(recipe: &str, machine: &Machine, ctx: &Context) -> Result<Option<CrossPlan>> {
    let Some(cross) = &machine.host.cross else {
        return Ok(None);
    };
    let py = &machine.target.python;
    let problems = problems(cross, machine);
    if !problems.is_empty() {
        return Err(EngineError::CrossWindows {
            recipe: recipe.into(),
            venv: machine.target.venv.root.display().to_string(),
            host: machine.host.platform.os.as_str().into(),
            what: problems
                .iter()
                .map(|(w, _)| w.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            help: problems
                .iter()
                .map(|(_, h)| h.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    let host_os = ctx.host_os;
    let nodot = py.version.replace('.', "");
    let dll = py.dll.clone().unwrap_or_default();
    let dll_key = std::fs::metadata(&dll)
        .map(|m| m.len().to_string())
        .unwrap_or_default();
    let (python_lib, make_python_lib) = match &py.libs {
        Some(libs) => (libs.join(format!("python{nodot}.lib")), None),
        None => {
            let dir = join(
                host_os,
                &ctx.cache,
                &[
                    "cross",
                    &format!(
                        "python{nodot}-{}",
                        &hash_hex(&[&dll.display().to_string(), &dll_key])[..12]
                    ),
                ],
            );
            (
                join(host_os, &dir, &[&format!("python{nodot}.lib")]),
                Some(ImportLib {
                    def: join(host_os, &dir, &[&format!("python{nodot}.def")]),
                    dll,
                    dlltool: cross.llvm_dlltool.clone().unwrap_or_default(),
                }),
            )
        }
    };
    let (compile_flags, link_flags) = flags(cross);
    let sdk_include_link = sdk_include(cross).map(|sdk| {
        let link = join(
            host_os,
            &ctx.cache,
            &[
                "cross",
                &format!(
                    "winsdk-include-{}",
                    &hash_hex(&[&sdk.display().to_string()])[..12]
                ),
            ],
        );
        (link, sdk)
    });
    let rc = sdk_include_link.as_ref().map(|(l, _)| l.as_path());
    let toolchain = toolchain_file(cross, &compile_flags, &link_flags, rc);
    let toolchain_file = join(
        host_os,
        &ctx.cache,
        &[
            "cross",
            &format!("windows-{}.cmake", &hash_hex(&[&toolchain])[..12]),
        ],
    );
    let host_python = py
        .installer
        .host
        .as_ref()
        .map(|h| h.python.clone())
        .unwrap_or_default();
    Ok(Some(CrossPlan {
        toolchain_file,
        toolchain,
        python_lib,
        make_python_lib,
        runner: cross.wine.clone().map(|wine| Runner {
            wine,
            timeout_secs: ctx.wine_timeout.unwrap_or(WINE_TIMEOUT_SECS),
        }),
        host_python,
        compile_flags,
        link_flags,
        sdk_include_link,
    }))
}

/// The newest `Windows Kits/10/Include/<version>` of the sysroot.
fn sdk_include(c: &CrossWindows) -> Option<PathBuf> {
    let dir = c.winsysroot.as_ref()?.join("Windows Kits/10/Include");
    std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .filter(|e| e.path().join("um").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .max_by(|a, b| rocbuild_probe::natural_key(a).cmp(&rocbuild_probe::natural_key(b)))
        .map(|v| dir.join(v))
}

/// The verification as it runs here: a Windows venv's Python under Wine; without Wine, none,
/// and why the install stays unverified.
pub fn verification(
    verify: Option<Command>,
    cross: Option<&CrossPlan>,
    host_os: rocbuild_probe::Os,
) -> (Option<Command>, Option<String>) {
    match (verify, cross) {
        (Some(v), Some(c)) => match &c.runner {
            Some(r) => (Some(r.wrap(&v)), None),
            None => (None, Some(format!(
                "the venv's Python is a Windows program and this {} host has no Wine to run it (install wine, or set ROCBUILD_WINE): built and installed, not loaded",
                host_os.as_str()
            ))),
        },
        (v, _) => (v, None),
    }
}

/// The compile and link flags of the target and the sysroot.
fn flags(c: &CrossWindows) -> (String, String) {
    let root = c
        .winsysroot
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let manifest = if c.llvm_mt.is_some() {
        ""
    } else {
        " /manifest:no"
    };
    (
        format!("--target=x86_64-pc-windows-msvc /winsysroot{root}"),
        format!("/winsysroot:{root}{manifest}"),
    )
}

/// Every reason the cross build cannot work, each with how to fix it.
fn problems(cross: &CrossWindows, machine: &Machine) -> Vec<(String, String)> {
    let py = &machine.target.python;
    let mut out = Vec::new();
    let missing = cross.missing();
    if !missing.is_empty() {
        out.push((
            format!("no {} on PATH", missing.join(", ")),
            "install one LLVM's tools (Debian/Ubuntu: apt-get install clang-19 lld-19 llvm-19)"
                .into(),
        ));
    }
    if let Some(p) = cross.sysroot_problem() {
        out.push((p, rocbuild_probe::cross::SYSROOT_HELP.into()));
    }
    if let Some(p) = rocbuild_probe::cross::headers_problem(py) {
        out.push((
            p,
            format!("pass --python-headers DIR naming Python {}'s headers for Windows (Include/ of its source or of a full Windows install, with the Windows pyconfig.h), or use a venv made from a full Python install (pyvenv.cfg's home with include/ and libs/)", py.version),
        ));
    }
    match &py.installer.host {
        Some(h) if h.same_version => {}
        _ => out.push(no_host_python(py)),
    }
    out
}

/// No host Python of the venv's version runs: what and how to fix it, with the ones found on
/// PATH that do not run (a pyenv shim of a version that is not active) and why.
fn no_host_python(py: &rocbuild_probe::Python) -> (String, String) {
    let v = &py.version;
    let mut what = format!("no Python {v} on this host: CMake runs the venv's Python at configure time, and a Windows python.exe cannot run here");
    let mut help = format!("install Python {v} on this host (python{v} on PATH: uv python install {v}, pyenv, or your distribution)");
    let skipped = &py.installer.host_skipped;
    if !skipped.is_empty() {
        what.push_str(&format!("; passed over: {}", skipped.join("; ")));
        help.push_str(&format!(", or make the one found run (a pyenv shim runs once its version is active: pyenv shell {v})"));
    }
    (what, help)
}

/// The toolchain file: Windows on x86_64, clang-cl for C and C++, lld-link, llvm-lib,
/// llvm-rc, llvm-mt (or no manifest), and the sysroot for every compile and link.
fn toolchain_file(c: &CrossWindows, compile: &str, link: &str, rc: Option<&Path>) -> String {
    let p = |t: &Option<PathBuf>| {
        t.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    let mut s = format!(
        "# Written by rocbuild: MSVC-ABI binaries for Windows x64 from this host, with LLVM {llvm}'s\n\
         # clang-cl and lld-link against the MSVC CRT + Windows SDK of /winsysroot.\n\
         set(CMAKE_SYSTEM_NAME Windows)\n\
         set(CMAKE_SYSTEM_PROCESSOR AMD64)\n\
         set(CMAKE_C_COMPILER \"{cl}\")\n\
         set(CMAKE_CXX_COMPILER \"{cl}\")\n\
         set(CMAKE_LINKER \"{lld}\")\n\
         set(CMAKE_AR \"{lib}\")\n\
         set(CMAKE_RC_COMPILER \"{rc}\")\n\
         set(CMAKE_C_FLAGS_INIT \"{compile}\")\n\
         set(CMAKE_CXX_FLAGS_INIT \"{compile} /EHsc\")\n\
         foreach(kind EXE SHARED MODULE)\n  set(CMAKE_${{kind}}_LINKER_FLAGS_INIT \"{link}\")\nendforeach()\n\
         set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)\n",
        llvm = c.llvm,
        cl = p(&c.clang_cl),
        lld = p(&c.lld_link),
        lib = p(&c.llvm_lib),
        rc = p(&c.llvm_rc),
    );
    if let Some(mt) = &c.llvm_mt {
        s.push_str(&format!("set(CMAKE_MT \"{}\")\n", mt.display()));
    }
    // Resource scripts (`version.rc`) include winver.h: the SDK's um/ and shared/.
    if let Some(l) = rc {
        s.push_str(&format!(
            "set(CMAKE_RC_FLAGS_INIT \"/I{0}/um /I{0}/shared\")\n",
            l.display()
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::cpu_machine;

    /// Resource scripts include winver.h from the newest SDK; its path goes through a link with
    /// no space (CMake's llvm-rc step splits `/I` values at spaces: "Windows Kits").
    #[test]
    fn resource_scripts_find_the_newest_sdk_through_a_path_without_spaces() {
        let t = tempfile::tempdir().unwrap();
        let inc = t.path().join("Windows Kits/10/Include");
        for v in ["10.0.9600.0", "10.0.26100.0", "10.0.22621.0"] {
            std::fs::create_dir_all(inc.join(v).join("um")).unwrap();
        }
        std::fs::create_dir_all(inc.join("10.0.99999.0")).unwrap(); // no um/: not an SDK
        let c = CrossWindows {
            llvm: "19".into(),
            clang_cl: None,
            lld_link: None,
            llvm_lib: None,
            llvm_rc: None,
            llvm_mt: None,
            llvm_dlltool: None,
            llvm_readobj: None,
            winsysroot: Some(t.path().to_path_buf()),
            winsysroot_from: None,
            wine: None,
        };
        assert_eq!(sdk_include(&c), Some(inc.join("10.0.26100.0")));
        let text = toolchain_file(&c, "", "", Some(Path::new("/cache/cross/winsdk-include-1")));
        assert!(
            text.contains("set(CMAKE_RC_FLAGS_INIT \"/I/cache/cross/winsdk-include-1/um /I/cache/cross/winsdk-include-1/shared\")"),
            "{text}"
        );
    }

    /// A host Python passed over because it does not run is named, with why, where the plan
    /// says no host Python of the venv's version runs.
    #[test]
    fn a_host_python_that_does_not_run_is_named_with_why() {
        let mut m = cpu_machine(Os::Windows);
        let py = &mut m.target.python;
        py.installer.host = None;
        py.installer.host_skipped = vec![format!(
            "/home/u/.pyenv/shims/python{v} does not run: exit code 127: pyenv: python{v}: command not found",
            v = py.version
        )];
        let (what, help) = no_host_python(&m.target.python);
        assert!(
            what.contains("passed over: /home/u/.pyenv/shims/python"),
            "{what}"
        );
        assert!(what.contains("command not found"), "{what}");
        assert!(help.contains("pyenv shell"), "{help}");
        m.target.python.installer.host_skipped.clear();
        let (what, help) = no_host_python(&m.target.python);
        assert!(!what.contains("passed over") && !help.contains("pyenv shell"));
    }

    #[test]
    fn wine_wraps_the_command_with_a_time_limit_and_its_settings() {
        let r = Runner {
            wine: "/usr/bin/wine".into(),
            timeout_secs: 42,
        };
        let c = r.wrap(&Command::new("/v/python.exe").args(["-c".to_string(), "1".into()]));
        assert_eq!(c.program, PathBuf::from("sh"));
        assert_eq!(
            &c.args[2..],
            ["42", "/usr/bin/wine", "/v/python.exe", "-c", "1"]
        );
        assert!(c.args[1].contains("wineserver -k"));
        assert_eq!(c.env["WINEDEBUG"], "-all");
        assert!(c.env["WINEDLLOVERRIDES"].contains("msvcp140"));
    }
}
