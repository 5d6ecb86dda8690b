//! Names an OS: on a Windows host the compiler is found by [`crate::windows_compiler`] (a
//! developer prompt, Visual Studio through the `cc` crate, LLVM), and install commands name
//! each OS's package manager (apt, dnf, brew, winget).

use std::path::Path;

use crate::{Os, Platform, Tool, Tools};

/// The first line a program prints for `arg` (`--version`), trimmed; None when it cannot run.
pub fn version_of(path: &Path, arg: &str) -> Option<String> {
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

/// A compiler's family (`gcc`, `clang`, `apple-clang`, `intel`, `msvc`) and full version, from
/// the first line of its `--version`: `c++ (Debian 12.2.0-14) 12.2.0`, `g++ (GCC) 14.2.1
/// 20250110 (Red Hat 14.2.1-7)`, `Debian clang version 14.0.6`, `Apple clang version 15.0.0
/// (clang-1500.3.9.4)`, `Intel(R) oneAPI DPC++/C++ Compiler 2025.3.0 (2025.3.0.20250923)`,
/// `cl.exe`'s banner `Microsoft (R) C/C++ Optimizing Compiler Version 19.44.35207 for x64`.
pub fn compiler_of(version_line: &str) -> Option<(&'static str, String)> {
    let dotted = |w: &str| {
        let w = w.trim_matches(|c: char| c == '(' || c == ')' || c == ',');
        (w.contains('.')
            && w.split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
        .then(|| w.to_string())
    };
    let after = |marker: &str| {
        let (_, rest) = version_line.split_once(marker)?;
        rest.split_whitespace().find_map(dotted)
    };
    if version_line.contains("Microsoft (R)") {
        return Some(("msvc", after("Version")?));
    }
    if version_line.contains("Intel(R)") {
        return Some(("intel", after("Compiler")?));
    }
    if version_line.contains("Apple clang") {
        return Some(("apple-clang", after("version")?));
    }
    if version_line.contains("clang version") {
        return Some(("clang", after("clang version")?));
    }
    // GCC names itself after the driver (gcc, g++, c++, cc, x86_64-linux-gnu-g++-12): the
    // version is the first dotted number after the parenthesised package name.
    let first = version_line.split_whitespace().next()?;
    let gnu = ["gcc", "g++", "c++", "cc"].iter().any(|d| {
        first == *d || first.ends_with(&format!("-{d}")) || first.contains(&format!("{d}-"))
    });
    if gnu && version_line.contains('(') {
        return Some(("gcc", after(")")?));
    }
    None
}

fn current_target() -> String {
    let arch = std::env::consts::ARCH;
    match std::env::consts::OS {
        "windows" => format!("{arch}-pc-windows-msvc"),
        "macos" => format!("{arch}-apple-darwin"),
        _ => format!("{arch}-unknown-linux-gnu"),
    }
}

pub fn probe_tools(env: &crate::ProbeEnv) -> Tools {
    // A Windows host: the compiler a developer prompt, Visual Studio or LLVM gives, and
    // where it was found; nothing else (a MinGW gcc on PATH builds no MSVC-ABI code).
    let (cc, cxx, msvc) = if cfg!(windows) {
        let msvc = crate::windows_compiler::discover_here(env).found;
        let tool = msvc.as_ref().map(|m| Tool {
            version: msvc_version(&m.cl),
            path: m.cl.clone(),
        });
        (tool.clone(), tool, msvc)
    } else {
        (compiler(false), compiler(true), None)
    };
    Tools {
        cmake: find(&["cmake"], "--version"),
        ninja: find(&["ninja", "ninja-build"], "--version"),
        cc,
        cxx,
        pkg_config: find(&["pkg-config", "pkgconf"], "--version"),
        msvc,
        sccache: find(&["sccache"], "--version"),
        ccache: find(&["ccache"], "--version"),
    }
}

/// The banner of `cl.exe` (printed on stderr: `Microsoft (R) C/C++ Optimizing Compiler
/// Version 19.44.35207 for x64`) or the first line of `clang-cl --version`.
fn msvc_version(path: &Path) -> Option<String> {
    let out = duct::cmd(path, ["--version"])
        .stdout_capture()
        .stderr_capture()
        .stdin_null()
        .unchecked()
        .run()
        .ok()?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .map(str::trim)
        .find(|l| l.contains("clang version") || l.contains("Compiler Version"))
        .map(str::to_string)
}

/// Visual Studio or the Build Tools, through the `cc` crate (vswhere, the setup API, the
/// registry).
#[cfg(windows)]
pub(crate) fn visual_studio(arch: &str) -> Option<crate::windows_compiler::VisualStudio> {
    let target = format!("{arch}-pc-windows-msvc");
    let cl = cc::windows_registry::find_tool(&target, "cl.exe")?;
    let env = cl
        .get_envs()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    Some(crate::windows_compiler::VisualStudio {
        cl: cl.path().to_path_buf(),
        env,
    })
}

#[cfg(not(windows))]
pub(crate) fn visual_studio(_arch: &str) -> Option<crate::windows_compiler::VisualStudio> {
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

/// A system prerequisite a user installs by hand: cmake and ninja are not among them,
/// rocbuild fetches those from PyPI into its tools area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prerequisite {
    CCompiler,
    CxxCompiler,
    PkgConfig,
    /// FFmpeg's headers, libraries and .pc files (libavcodec, libavformat, libavutil, …).
    FfmpegDev,
    /// Only when PyPI cannot supply them (rocbuild fetches both by itself).
    Cmake,
    Ninja,
}

impl Prerequisite {
    pub fn describe(self) -> &'static str {
        match self {
            Prerequisite::CCompiler => "a C compiler",
            Prerequisite::CxxCompiler => "a C++ compiler",
            Prerequisite::PkgConfig => "pkg-config",
            Prerequisite::FfmpegDev => "FFmpeg's development files",
            Prerequisite::Cmake => "cmake",
            Prerequisite::Ninja => "ninja",
        }
    }
}

/// The Linux distribution family whose package names and manager to use: `ID`, then `ID_LIKE`.
fn linux_family(platform: &Platform) -> Option<&'static str> {
    let ids = platform.distro.iter().chain(platform.distro_like.iter());
    for id in ids {
        let f = match id.as_str() {
            "debian" | "ubuntu" | "linuxmint" | "pop" | "raspbian" | "elementary" => "debian",
            "fedora" | "rhel" | "centos" | "rocky" | "almalinux" => "fedora",
            "arch" | "manjaro" | "endeavouros" => "arch",
            "alpine" => "alpine",
            _ => continue,
        };
        return Some(f);
    }
    None
}

/// One command that installs every one of `missing` on this platform, with its
/// distribution's package manager (from /etc/os-release), Homebrew on macOS, winget on Windows.
pub fn install_command(platform: &Platform, missing: &[Prerequisite]) -> String {
    install_command_with(platform, missing, &[])
}

/// Which package names apply here: `debian`, `fedora`, `arch`, `alpine` (from
/// /etc/os-release), `brew` on macOS, `windows`; None for an unknown Linux.
pub fn package_family(platform: &Platform) -> Option<&'static str> {
    match platform.os {
        Os::Linux => linux_family(platform),
        Os::Macos => Some("brew"),
        Os::Windows => Some("windows"),
    }
}

/// [`install_command`], plus `extra` packages of this platform's family (a recipe's
/// system libraries, already named for it).
pub fn install_command_with<'a>(
    platform: &Platform,
    missing: &[Prerequisite],
    extra: &'a [String],
) -> String {
    use Prerequisite::*;
    let mut pkgs: Vec<&str> = Vec::new();
    let mut add = |names: &[&'a str]| {
        for n in names {
            if !pkgs.contains(n) {
                pkgs.push(n);
            }
        }
    };
    match platform.os {
        Os::Linux => {
            let family = linux_family(platform);
            for m in missing {
                match (family, m) {
                    (_, Cmake) => add(&["cmake"]),
                    (Some("arch"), Ninja) => add(&["ninja"]),
                    (Some("alpine"), Ninja) => add(&["samurai"]),
                    (_, Ninja) => add(&["ninja-build"]),
                    (Some("debian"), CCompiler) => add(&["gcc"]),
                    (Some("debian"), CxxCompiler) => add(&["g++"]),
                    (Some("debian"), PkgConfig) => add(&["pkg-config"]),
                    (Some("debian"), FfmpegDev) => add(&[
                        "pkg-config",
                        "libavcodec-dev",
                        "libavformat-dev",
                        "libavutil-dev",
                        "libswscale-dev",
                        "libswresample-dev",
                        "libavfilter-dev",
                        "libavdevice-dev",
                    ]),
                    (Some("fedora"), CCompiler) => add(&["gcc"]),
                    (Some("fedora"), CxxCompiler) => add(&["gcc-c++"]),
                    (Some("fedora"), PkgConfig) => add(&["pkgconf-pkg-config"]),
                    (Some("fedora"), FfmpegDev) => {
                        add(&["pkgconf-pkg-config", "ffmpeg-free-devel"])
                    }
                    (Some("arch"), CCompiler | CxxCompiler) => add(&["gcc"]),
                    (Some("arch"), PkgConfig) => add(&["pkgconf"]),
                    (Some("arch"), FfmpegDev) => add(&["pkgconf", "ffmpeg"]),
                    (Some("alpine"), CCompiler) => add(&["gcc", "musl-dev"]),
                    (Some("alpine"), CxxCompiler) => add(&["g++"]),
                    (Some("alpine"), PkgConfig) => add(&["pkgconf"]),
                    (Some("alpine"), FfmpegDev) => add(&["pkgconf", "ffmpeg-dev"]),
                    _ => {}
                }
            }
            for e in extra {
                add(&[e.as_str()]);
            }
            let list = pkgs.join(" ");
            match family {
                Some("debian") => format!("sudo apt-get install {list}"),
                Some("fedora") => format!("sudo dnf install {list}"),
                Some("arch") => format!("sudo pacman -S --needed {list}"),
                Some("alpine") => format!("sudo apk add {list}"),
                _ => {
                    let what: Vec<&str> = missing
                        .iter()
                        .map(|m| m.describe())
                        .chain(extra.iter().map(String::as_str))
                        .collect();
                    format!(
                        "install {} with your distribution's package manager (Debian/Ubuntu: apt-get, Fedora: dnf, Arch: pacman; FFmpeg's are the libavcodec/libavformat/libavutil/libswscale/libswresample/libavfilter/libavdevice development packages)",
                        what.join(", ")
                    )
                }
            }
        }
        Os::Macos => {
            let mut parts: Vec<String> = Vec::new();
            if missing.iter().any(|m| matches!(m, CCompiler | CxxCompiler)) {
                parts.push("xcode-select --install".into());
            }
            for m in missing {
                match m {
                    PkgConfig => add(&["pkg-config"]),
                    FfmpegDev => add(&["pkg-config", "ffmpeg"]),
                    Cmake => add(&["cmake"]),
                    Ninja => add(&["ninja"]),
                    _ => {}
                }
            }
            for e in extra {
                add(&[e.as_str()]);
            }
            if !pkgs.is_empty() {
                parts.push(format!("brew install {}", pkgs.join(" ")));
            }
            parts.join(" && ")
        }
        Os::Windows => {
            let mut parts: Vec<String> = Vec::new();
            if missing.iter().any(|m| matches!(m, CCompiler | CxxCompiler)) {
                parts.push("winget install Microsoft.VisualStudio.2022.BuildTools --override \"--add Microsoft.VisualStudio.Workload.VCTools --includeRecommended --passive\"".into());
            }
            if missing.contains(&PkgConfig) {
                parts.push("winget install bloodrock.pkg-config-lite".into());
            }
            if missing.contains(&Cmake) {
                parts.push("winget install Kitware.CMake".into());
            }
            if missing.contains(&Ninja) {
                parts.push("winget install Ninja-build.Ninja".into());
            }
            if missing.contains(&FfmpegDev) {
                // A pinned shared build that later runs use by themselves.
                parts.push("rocbuild ffmpeg".into());
            }
            if !extra.is_empty() {
                parts.push(format!("install {}", extra.join(", ")));
            }
            parts.join(" && ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Prerequisite::*;

    fn linux(id: &str, like: &[&str]) -> Platform {
        Platform {
            os: Os::Linux,
            arch: "x86_64".into(),
            distro: Some(id.into()),
            distro_like: like.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn compilers_are_named_from_their_version_line() {
        let cases = [
            ("c++ (Debian 12.2.0-14) 12.2.0", Some(("gcc", "12.2.0"))),
            (
                "g++ (GCC) 14.2.1 20250110 (Red Hat 14.2.1-7)",
                Some(("gcc", "14.2.1")),
            ),
            ("g++-14 (Debian 14.2.0-19) 14.2.0", Some(("gcc", "14.2.0"))),
            (
                "x86_64-linux-gnu-g++-12 (Debian 12.2.0-14) 12.2.0",
                Some(("gcc", "12.2.0")),
            ),
            (
                "g++ (Ubuntu 13.2.0-23ubuntu4) 13.2.0",
                Some(("gcc", "13.2.0")),
            ),
            ("Debian clang version 14.0.6", Some(("clang", "14.0.6"))),
            (
                "clang version 18.1.8 (https://github.com/llvm/llvm-project 3b5b5c1)",
                Some(("clang", "18.1.8")),
            ),
            (
                "Apple clang version 15.0.0 (clang-1500.3.9.4)",
                Some(("apple-clang", "15.0.0")),
            ),
            (
                "Intel(R) oneAPI DPC++/C++ Compiler 2025.3.0 (2025.3.0.20250923)",
                Some(("intel", "2025.3.0")),
            ),
            (
                "Microsoft (R) C/C++ Optimizing Compiler Version 19.44.35207 for x64",
                Some(("msvc", "19.44.35207")),
            ),
            ("", None),
            ("some-wrapper 1.0", None),
        ];
        for (line, want) in cases {
            let got = compiler_of(line);
            assert_eq!(got.as_ref().map(|(f, v)| (*f, v.as_str())), want, "{line}");
        }
    }

    #[test]
    fn one_command_installs_everything_missing() {
        let all = [CCompiler, CxxCompiler, PkgConfig, FfmpegDev];
        assert_eq!(
            install_command(&linux("debian", &[]), &all),
            "sudo apt-get install gcc g++ pkg-config libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libswresample-dev libavfilter-dev libavdevice-dev"
        );
        // Derivatives by ID_LIKE.
        assert!(
            install_command(&linux("linuxmint", &["ubuntu", "debian"]), &[CxxCompiler])
                .starts_with("sudo apt-get install g++")
        );
        assert_eq!(
            install_command(&linux("rocky", &["rhel", "centos", "fedora"]), &all),
            "sudo dnf install gcc gcc-c++ pkgconf-pkg-config ffmpeg-free-devel"
        );
        assert_eq!(
            install_command(&linux("endeavouros", &["arch"]), &all),
            "sudo pacman -S --needed gcc pkgconf ffmpeg"
        );
        assert!(install_command(&linux("gentoo", &[]), &[FfmpegDev]).contains("package manager"));
        let mac = Platform {
            os: Os::Macos,
            arch: "aarch64".into(),
            distro: None,
            distro_like: Vec::new(),
        };
        assert_eq!(
            install_command(&mac, &all),
            "xcode-select --install && brew install pkg-config ffmpeg"
        );
        let win = Platform {
            os: Os::Windows,
            ..mac
        };
        let w = install_command(&win, &[CCompiler, FfmpegDev]);
        assert!(
            w.starts_with("winget install Microsoft.VisualStudio.2022.BuildTools"),
            "{w}"
        );
        assert!(w.ends_with("&& rocbuild ffmpeg"), "{w}");
    }
}
