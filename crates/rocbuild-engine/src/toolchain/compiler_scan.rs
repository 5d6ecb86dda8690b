//! The wheels' compiler on PATH (`[wheel-compiler]`): looked for before planning, as the
//! probe looks for the other tools (`which` and the driver's `--version`), so the planner
//! starts no process and reads no PATH of its own.

use std::path::Path;

use rocbuild_probe::Machine;
use rocbuild_recipe::schema::CompilerSpec;
use rocbuild_recipe::Recipe;

use crate::toolchain::wheel_compiler::Alternative;

/// The versioned drivers of the compiler the recipe says its wheels are built with on the
/// target's OS, when both are on `path` and say they are that compiler; None when the recipe
/// names none there.
pub fn wheels_compiler(
    recipe: &Recipe,
    machine: &Machine,
    path: Option<&std::ffi::OsStr>,
    cwd: &Path,
) -> Option<Alternative> {
    let w = recipe.raw.wheel_compiler.as_ref()?;
    alternative(w.on(machine.target.platform.os.as_str())?, path, cwd)
}

/// The versioned drivers distributions install side by side (`gcc-14`/`g++-14`,
/// `clang-18`/`clang++-18`), when both are on `path` (PATH) and the C++ one says it is the
/// wheels' compiler.
pub fn alternative(
    wheels: CompilerSpec,
    path: Option<&std::ffi::OsStr>,
    cwd: &Path,
) -> Option<Alternative> {
    let (c, cxx) = match wheels.family {
        "gcc" => ("gcc", "g++"),
        "clang" => ("clang", "clang++"),
        _ => return None,
    };
    let found = |name: &str| which::which_in(format!("{name}-{}", wheels.major), path, cwd).ok();
    let (cc, cxx) = (found(c)?, found(cxx)?);
    let line = rocbuild_probe::version_of(&cxx, "--version")?;
    let (family, version) = rocbuild_probe::compiler_of(&line)?;
    crate::toolchain::wheel_compiler::is(wheels, family, &version).then(|| Alternative {
        cc,
        cxx,
        name: format!("{} {version}", CompilerSpec::family_name(family)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolchain::wheel_compiler::tests::driver;

    /// Both drivers are needed, and the C++ one must say it is the wheels' version.
    #[test]
    #[cfg_attr(windows, ignore = "a Unix-host test: its `gcc-14` is a shell script")]
    fn a_versioned_driver_is_taken_only_when_its_version_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let spec = CompilerSpec {
            family: "gcc",
            major: 14,
        };
        let path = Some(dir.path().as_os_str());
        assert_eq!(alternative(spec, path, dir.path()), None);
        driver(
            dir.path(),
            "g++-14",
            "g++-14 (GCC) 14.2.1 20250110 (Red Hat 14.2.1-7)",
        );
        assert_eq!(
            alternative(spec, path, dir.path()),
            None,
            "g++-14 without gcc-14"
        );
        driver(
            dir.path(),
            "gcc-14",
            "gcc-14 (GCC) 14.2.1 20250110 (Red Hat 14.2.1-7)",
        );
        assert_eq!(
            alternative(spec, path, dir.path()),
            Some(Alternative {
                cc: dir.path().join("gcc-14"),
                cxx: dir.path().join("g++-14"),
                name: "GCC 14.2.1".into()
            })
        );
        // A g++-14 that is another compiler (a wrapper, a mislabelled link) is not taken.
        driver(dir.path(), "g++-14", "g++-14 (Debian 13.3.0-1) 13.3.0");
        assert_eq!(alternative(spec, path, dir.path()), None);
        driver(
            dir.path(),
            "clang-18",
            "Ubuntu clang version 18.1.3 (1ubuntu1)",
        );
        driver(
            dir.path(),
            "clang++-18",
            "Ubuntu clang version 18.1.3 (1ubuntu1)",
        );
        let clang = CompilerSpec {
            family: "clang",
            major: 18,
        };
        assert_eq!(
            alternative(clang, path, dir.path()).map(|a| (a.cc, a.cxx, a.name)),
            Some((
                dir.path().join("clang-18"),
                dir.path().join("clang++-18"),
                "Clang 18.1.3".into()
            ))
        );
        // MSVC has no versioned drivers on PATH.
        assert_eq!(
            alternative(
                CompilerSpec {
                    family: "msvc",
                    major: 19
                },
                path,
                dir.path()
            ),
            None
        );
    }
}
