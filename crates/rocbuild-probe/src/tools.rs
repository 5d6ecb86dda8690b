use std::path::Path;

use crate::{Os, Platform, Tool, Tools};

fn version_of(path: &Path, arg: &str) -> Option<String> {
    let out = duct::cmd(path, [arg])
        .stdout_capture()
        .stderr_null()
        .unchecked()
        .run()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().map(|l| l.trim().to_string())
}

fn find(names: &[&str], version_arg: &str) -> Option<Tool> {
    names
        .iter()
        .find_map(|n| which::which(n).ok())
        .map(|path| Tool {
            version: version_of(&path, version_arg),
            path,
        })
}

/// The C and C++ compilers the way the `cc` crate finds them (honouring CC/CXX, and on
/// Windows the MSVC tools), resolved to absolute paths.
fn compiler(cpp: bool) -> Option<Tool> {
    let target = current_target();
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .opt_level(2)
        .host(&target)
        .target(&target)
        .cpp(cpp)
        .try_get_compiler()
        .ok()?;
    let path = which::which(compiler.path()).ok()?;
    Some(Tool {
        version: version_of(&path, "--version"),
        path,
    })
}

fn current_target() -> String {
    let arch = std::env::consts::ARCH;
    match std::env::consts::OS {
        "windows" => format!("{arch}-pc-windows-msvc"),
        "macos" => format!("{arch}-apple-darwin"),
        _ => format!("{arch}-unknown-linux-gnu"),
    }
}

pub fn probe_tools() -> Tools {
    Tools {
        cmake: find(&["cmake"], "--version"),
        ninja: find(&["ninja", "ninja-build"], "--version"),
        cc: compiler(false),
        cxx: compiler(true),
        pkg_config: find(&["pkg-config", "pkgconf"], "--version"),
        msvc: msvc(),
        sccache: find(&["sccache"], "--version"),
        ccache: find(&["ccache"], "--version"),
    }
}

/// MSVC's cl.exe, rc.exe and their environment, as the `cc` crate finds them (registry,
/// vswhere, or an already set-up developer prompt).
#[cfg(windows)]
fn msvc() -> Option<crate::Msvc> {
    let target = format!("{}-pc-windows-msvc", std::env::consts::ARCH);
    let cl = cc::windows_registry::find_tool(&target, "cl.exe")?;
    let env = cl
        .env()
        .iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let rc = cc::windows_registry::find_tool(&target, "rc.exe").map(|t| t.path().to_path_buf());
    Some(crate::Msvc {
        cl: cl.path().to_path_buf(),
        rc,
        env,
    })
}

#[cfg(not(windows))]
fn msvc() -> Option<crate::Msvc> {
    None
}

/// The command that installs `tool` on this platform.
pub fn install_hint(platform: &Platform, tool: &str) -> String {
    let deb = |p: &str| format!("apt-get install {p}");
    match platform.os {
        Os::Linux => {
            let pkg = match tool {
                "cmake" => "cmake",
                "ninja" => "ninja-build",
                "pkg-config" => "pkg-config",
                "C compiler" => "gcc",
                _ => "g++",
            };
            match platform.distro.as_deref() {
                Some("fedora" | "rhel" | "centos" | "rocky" | "almalinux") => {
                    format!("dnf install {}", if pkg == "g++" { "gcc-c++" } else { pkg })
                }
                Some("arch" | "manjaro") => format!("pacman -S {}", if pkg == "ninja-build" { "ninja" } else { pkg }),
                _ => deb(pkg),
            }
        }
        Os::Macos => match tool {
            "C compiler" | "C++ compiler" => "xcode-select --install".into(),
            other => format!("brew install {other}"),
        },
        Os::Windows => match tool {
            "cmake" => "winget install Kitware.CMake".into(),
            "ninja" => "winget install Ninja-build.Ninja".into(),
            "pkg-config" => "winget install bloodrock.pkg-config-lite".into(),
            _ => "install Visual Studio Build Tools with the C++ workload (winget install Microsoft.VisualStudio.2022.BuildTools)".into(),
        },
    }
}
