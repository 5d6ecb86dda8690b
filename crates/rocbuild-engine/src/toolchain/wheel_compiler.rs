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

/// This build's default compiler is not the wheels' one: what that changes, and how to match
/// them, or that rocbuild builds with the wheels' compiler it found instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompilerParity {
    /// The machine's C++ compiler, and its name with the full version (GCC 12.2.0).
    pub compiler: PathBuf,
    pub name: String,
    /// The wheels' compiler (GCC 14).
    pub wheels: String,
    /// What differs from the wheel's results (the recipe's words).
    pub differs: String,
    /// A compiler of the wheels' family and major version on PATH (gcc-14 and g++-14), checked
    /// by its `--version`.
    pub alternative: Option<Alternative>,
    /// The build uses `alternative`: the user named no compiler (CC, CXX) and it was found.
    #[serde(default)]
    pub chosen: bool,
}

/// The versioned drivers of the wheels' compiler, found on PATH.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alternative {
    pub cc: PathBuf,
    pub cxx: PathBuf,
    /// Its name with the full version, from `--version` (GCC 14.2.0).
    pub name: String,
}

impl CompilerParity {
    /// The compilers the build uses instead of the machine's default ones, if chosen.
    pub fn chosen(&self) -> Option<&Alternative> {
        self.alternative.as_ref().filter(|_| self.chosen)
    }

    /// One line for the plan and the run's notes.
    pub fn line(&self) -> String {
        match (&self.alternative, self.chosen) {
            (Some(a), true) => format!(
                "{} ({}), the wheels' {}, chosen over {} ({}), with which {}; set CC and CXX to build with another compiler",
                a.name,
                a.cxx.display(),
                self.wheels,
                self.name,
                self.compiler.display(),
                self.differs
            ),
            (Some(a), false) => format!(
                "{} ({}), not the wheels' {}: {}; for results identical to the wheel's, build with the {} found: CC={} CXX={} rocbuild ...",
                self.name,
                self.compiler.display(),
                self.wheels,
                self.differs,
                a.name,
                a.cc.display(),
                a.cxx.display()
            ),
            (None, _) => format!(
                "{} ({}), not the wheels' {}: {}; for results identical to the wheel's, install {} and name it in CC and CXX",
                self.name,
                self.compiler.display(),
                self.wheels,
                self.differs,
                self.wheels
            ),
        }
    }
}

/// The note, when the recipe names the wheels' compiler for this OS and backend and this
/// build's C++ compiler (`cxx`, as the toolset runs it) is known to be another one. When the
/// wheels' compiler was found on PATH as versioned drivers (g++-14: `found`, looked for
/// before planning by `crate::toolchain::compiler_scan`) and `user_named` is false (no CC or CXX in the
/// environment), it is chosen for the build.
pub fn check(
    recipe: &Recipe,
    machine: &Machine,
    backend: &str,
    cxx: &Path,
    found: Option<&Alternative>,
    user_named: bool,
) -> Option<CompilerParity> {
    let w = recipe.raw.wheel_compiler.as_ref()?;
    if !w.backends.is_empty() && !w.backends.iter().any(|b| b.get_ref() == backend) {
        return None;
    }
    let wheels = w.on(machine.target.platform.os.as_str())?;
    // Only the compiler the probe ran `--version` of (not an SDK's clang, not a
    // CMAKE_CXX_COMPILER of the user's).
    let tool = machine.host.tools.cxx.as_ref().filter(|t| t.path == cxx)?;
    let (family, version) = rocbuild_probe::compiler_of(tool.version.as_deref()?)?;
    if is(wheels, family, &version) {
        return None;
    }
    let alternative = found.cloned();
    Some(CompilerParity {
        compiler: tool.path.clone(),
        name: format!("{} {version}", CompilerSpec::family_name(family)),
        wheels: wheels.to_string(),
        differs: w.differs.clone(),
        chosen: alternative.is_some() && !user_named,
        alternative,
    })
}

/// Whether a compiler of `family` and `version` (14.2.0) is the wheels' one.
pub(crate) fn is(wheels: CompilerSpec, family: &str, version: &str) -> bool {
    let major: Option<u32> = version.split('.').next().and_then(|m| m.parse().ok());
    family == wheels.family && major == Some(wheels.major)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::plan::testing::recipe;
    use rocbuild_probe::{Os, Tool};
    use rocbuild_testkit::machine::cpu_machine;

    fn with_cxx(os: Os, version: &str) -> Machine {
        let mut m = cpu_machine(os);
        m.host.tools.cxx = Some(Tool {
            path: PathBuf::from("/usr/bin/c++"),
            version: Some(version.into()),
        });
        m
    }

    /// A driver `name` in `dir` whose `--version` prints `version`.
    pub(crate) fn driver(dir: &Path, name: &str, version: &str) {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\necho '{version}'\n")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    #[test]
    fn a_cpu_ctranslate2_by_another_gcc_than_the_wheels_says_what_differs() {
        let r = recipe("ctranslate2");
        let cxx = Path::new("/usr/bin/c++");
        let m = with_cxx(Os::Linux, "c++ (Debian 12.2.0-14) 12.2.0");
        let check = |r: &Recipe, m: &Machine, backend: &str, cxx: &Path| {
            check(r, m, backend, cxx, None, false)
        };
        let p = check(&r, &m, "cpu", cxx).expect("GCC 12 is not the wheels' GCC 14");
        assert_eq!(p.name, "GCC 12.2.0");
        assert_eq!(p.wheels, "GCC 14");
        assert!(p.differs.contains("int8"), "{}", p.differs);
        assert!(
            !p.chosen && p.chosen().is_none(),
            "none on PATH: nothing chosen"
        );
        let line = p.line();
        assert!(
            line.starts_with("GCC 12.2.0 (/usr/bin/c++), not the wheels' GCC 14: "),
            "{line}"
        );
        assert!(
            line.contains("install GCC 14 and name it in CC and CXX"),
            "{line}"
        );
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

    /// gcc-N and g++-N side by side on PATH are the build's compilers when the user named none;
    /// with CC or CXX set they are only offered.
    #[test]
    #[cfg_attr(windows, ignore = "a Unix-host test: its `gcc` is a shell script")]
    fn the_wheels_gcc_on_path_is_chosen_unless_the_user_named_a_compiler() {
        let r = recipe("ctranslate2");
        let cxx = Path::new("/usr/bin/c++");
        let m = with_cxx(Os::Linux, "c++ (Debian 12.2.0-14) 12.2.0");
        let dir = tempfile::tempdir().unwrap();
        driver(dir.path(), "gcc-14", "gcc-14 (Debian 14.2.0-19) 14.2.0");
        driver(dir.path(), "g++-14", "g++-14 (Debian 14.2.0-19) 14.2.0");
        let found = crate::toolchain::compiler_scan::wheels_compiler(
            &r,
            &m,
            Some(dir.path().as_os_str()),
            dir.path(),
        );
        let p = check(&r, &m, "cpu", cxx, found.as_ref(), false).unwrap();
        let a = p.chosen().expect("chosen");
        assert_eq!(a.cc, dir.path().join("gcc-14"));
        assert_eq!(a.cxx, dir.path().join("g++-14"));
        assert_eq!(a.name, "GCC 14.2.0");
        let line = p.line();
        assert!(
            line.starts_with(&format!(
                "GCC 14.2.0 ({}), the wheels' GCC 14, chosen over GCC 12.2.0 (/usr/bin/c++), with which int8",
                a.cxx.display()
            )),
            "{line}"
        );
        assert!(
            line.ends_with("set CC and CXX to build with another compiler"),
            "{line}"
        );
        // CC or CXX in the environment: the user's choice stands; the line says how to match.
        let p = check(&r, &m, "cpu", cxx, found.as_ref(), true).unwrap();
        assert!(!p.chosen && p.chosen().is_none());
        let line = p.line();
        assert!(
            line.contains(&format!(
                "build with the GCC 14.2.0 found: CC={} CXX={} rocbuild ...",
                dir.path().join("gcc-14").display(),
                dir.path().join("g++-14").display()
            )),
            "{line}"
        );
    }
}
