//! Whether this build's C++ compiler is the one upstream's wheels are built with, for the
//! recipes whose results depend on it (`[wheel-compiler]`). CTranslate2's int8 AVX2 kernels
//! are compiled with `-mfma`, and which multiply-adds are fused is the compiler's choice: built
//! with GCC 12 they give int8 outputs that part from PyPI's wheel (GCC 14) after some tokens;
//! built with GCC 14 they are the wheel's, bit for bit (BENCHMARKS.md, bench (g)).

use std::path::{Path, PathBuf};

use rocbuild_probe::Machine;
use rocbuild_recipe::schema::CompilerSpec;
use rocbuild_recipe::Recipe;
use serde::{Deserialize, Serialize};

/// This build's compiler is not the wheels' one: what that changes, and how to match them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompilerParity {
    /// This build's C++ compiler, and its name with the full version (GCC 12.2.0).
    pub compiler: PathBuf,
    pub name: String,
    /// The wheels' compiler (GCC 14).
    pub wheels: String,
    /// What differs from the wheel's results (the recipe's words).
    pub differs: String,
    /// A compiler of the wheels' family and major version on PATH (g++-14, then gcc-14).
    pub alternative: Option<(PathBuf, PathBuf)>,
}

impl CompilerParity {
    /// One line for the plan and the run's notes.
    pub fn line(&self) -> String {
        let how = match &self.alternative {
            Some((cc, cxx)) => format!(
                "for results identical to the wheel's, build with the {} found: CC={} CXX={} rocbuild ...",
                self.wheels,
                cc.display(),
                cxx.display()
            ),
            None => format!(
                "for results identical to the wheel's, install {} and name it in CC and CXX",
                self.wheels
            ),
        };
        format!(
            "{} ({}), not the wheels' {}: {}; {how}",
            self.name,
            self.compiler.display(),
            self.wheels,
            self.differs
        )
    }
}

/// The note, when the recipe names the wheels' compiler for this OS and backend and this
/// build's C++ compiler (`cxx`, as the toolset runs it) is known to be another one.
pub fn check(
    recipe: &Recipe,
    machine: &Machine,
    backend: &str,
    cxx: &Path,
) -> Option<CompilerParity> {
    let w = recipe.raw.wheel_compiler.as_ref()?;
    if !w.backends.is_empty() && !w.backends.iter().any(|b| b.get_ref() == backend) {
        return None;
    }
    let wheels = w.on(machine.platform.os.as_str())?;
    // Only the compiler the probe ran `--version` of (not an SDK's clang, not a
    // CMAKE_CXX_COMPILER of the user's).
    let tool = machine.tools.cxx.as_ref().filter(|t| t.path == cxx)?;
    let (family, version) = rocbuild_probe::compiler_of(tool.version.as_deref()?)?;
    let major: u32 = version.split('.').next()?.parse().ok()?;
    if family == wheels.family && major == wheels.major {
        return None;
    }
    Some(CompilerParity {
        compiler: tool.path.clone(),
        name: format!("{} {version}", CompilerSpec::family_name(family)),
        wheels: wheels.to_string(),
        differs: w.differs.clone(),
        alternative: alternative(wheels, std::env::var_os("PATH").as_deref()),
    })
}

/// The versioned drivers distributions install side by side (`gcc-14`/`g++-14`,
/// `clang-18`/`clang++-18`), when both are on `path` (PATH).
fn alternative(wheels: CompilerSpec, path: Option<&std::ffi::OsStr>) -> Option<(PathBuf, PathBuf)> {
    let (c, cxx) = match wheels.family {
        "gcc" => ("gcc", "g++"),
        "clang" => ("clang", "clang++"),
        _ => return None,
    };
    let cwd = std::env::current_dir().ok()?;
    let found = |name: &str| which::which_in(format!("{name}-{}", wheels.major), path, &cwd).ok();
    Some((found(c)?, found(cxx)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::recipe;
    use rocbuild_probe::{Os, Tool};
    use rocbuild_testkit::machine::cpu_machine;

    fn with_cxx(os: Os, version: &str) -> Machine {
        let mut m = cpu_machine(os);
        m.tools.cxx = Some(Tool {
            path: PathBuf::from("/usr/bin/c++"),
            version: Some(version.into()),
        });
        m
    }

    #[test]
    fn a_cpu_ctranslate2_by_another_gcc_than_the_wheels_says_what_differs() {
        let r = recipe("ctranslate2");
        let cxx = Path::new("/usr/bin/c++");
        let m = with_cxx(Os::Linux, "c++ (Debian 12.2.0-14) 12.2.0");
        let p = check(&r, &m, "cpu", cxx).expect("GCC 12 is not the wheels' GCC 14");
        assert_eq!(p.name, "GCC 12.2.0");
        assert_eq!(p.wheels, "GCC 14");
        assert!(p.differs.contains("int8"), "{}", p.differs);
        let line = p.line();
        assert!(
            line.starts_with("GCC 12.2.0 (/usr/bin/c++), not the wheels' GCC 14: "),
            "{line}"
        );
        assert!(line.contains("CC") && line.contains("CXX"), "{line}");
        // The wheels' own major version: nothing to say, whatever the minor and the vendor.
        let same = with_cxx(Os::Linux, "g++ (Debian 14.2.0-19) 14.2.0");
        assert_eq!(check(&r, &same, "cpu", cxx), None);
        let clang = with_cxx(Os::Linux, "Debian clang version 14.0.6");
        assert_eq!(check(&r, &clang, "cpu", cxx).unwrap().name, "Clang 14.0.6");
        // GPU builds: the GEMMs and kernels are the GPU's; the recipe does not claim more.
        assert_eq!(check(&r, &m, "rocm", cxx), None);
        // An OS whose wheels' compiler the recipe does not name; a compiler it did not probe;
        // a version line it cannot read; a recipe without the table.
        assert_eq!(
            check(
                &r,
                &with_cxx(Os::Macos, "Apple clang version 15.0.0"),
                "cpu",
                cxx
            ),
            None
        );
        assert_eq!(check(&r, &m, "cpu", Path::new("/opt/other/g++")), None);
        assert_eq!(
            check(&r, &with_cxx(Os::Linux, "wrapper 1.0"), "cpu", cxx),
            None
        );
        assert_eq!(check(&recipe("torchcodec"), &m, "cpu", cxx), None);
    }

    /// gcc-N and g++-N side by side on PATH are offered, by their paths; one alone is not.
    #[test]
    fn a_versioned_gcc_on_path_is_offered() {
        let dir = tempfile::tempdir().unwrap();
        let spec = CompilerSpec {
            family: "gcc",
            major: 14,
        };
        let path = Some(dir.path().as_os_str());
        let put = |n: &str| {
            let p = dir.path().join(n);
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        };
        assert_eq!(alternative(spec, path), None);
        put("g++-14");
        assert_eq!(alternative(spec, path), None, "g++-14 without gcc-14");
        put("gcc-14");
        assert_eq!(
            alternative(spec, path),
            Some((dir.path().join("gcc-14"), dir.path().join("g++-14")))
        );
        put("clang-18");
        put("clang++-18");
        let clang = CompilerSpec {
            family: "clang",
            major: 18,
        };
        assert_eq!(
            alternative(clang, path),
            Some((dir.path().join("clang-18"), dir.path().join("clang++-18")))
        );
        // MSVC has no versioned drivers on PATH.
        assert_eq!(
            alternative(
                CompilerSpec {
                    family: "msvc",
                    major: 19
                },
                path
            ),
            None
        );
    }
}
