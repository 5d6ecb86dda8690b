//! What a probe may look at: environment variables and where the file system's well-known
//! directories are. The real machine fills it from the process; tests point it at fake trees,
//! which is how a Windows HIP SDK layout or a KFD topology is probed on any host.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::Os;

/// Environment variables the ROCm probe reads (declared once, here).
pub mod vars {
    /// The ROCm root a build should use (upstream CTranslate2 reads only this one).
    pub const ROCM_PATH: &str = "ROCM_PATH";
    /// The HIP SDK root; the Windows installer sets it to the last SDK installed (validated,
    /// never trusted: it may name an SDK the driver's runtime cannot run).
    pub const HIP_PATH: &str = "HIP_PATH";
    /// `HIP_PATH_62`, `HIP_PATH_71`, …: one per HIP SDK the Windows installer put down.
    pub const HIP_PATH_PREFIX: &str = "HIP_PATH_";
    /// Architectures torch's own build used; also a user's way to say which GPU they have.
    pub const PYTORCH_ROCM_ARCH: &str = "PYTORCH_ROCM_ARCH";
    /// Makes the Linux ROCm runtime report another gfx version (e.g. 10.3.0 -> gfx1030).
    pub const HSA_OVERRIDE_GFX_VERSION: &str = "HSA_OVERRIDE_GFX_VERSION";
    /// Where executables are looked up.
    pub const PATH: &str = "PATH";
    /// torch's list of CUDA compute capabilities (`8.6;8.9+PTX`): a CUDA user's own choice.
    pub const TORCH_CUDA_ARCH_LIST: &str = "TORCH_CUDA_ARCH_LIST";
    /// `C:\Program Files` on Windows.
    pub const PROGRAM_FILES: &str = "ProgramFiles";
    /// `C:\Windows` on Windows.
    pub const SYSTEM_ROOT: &str = "SystemRoot";
    /// The CUDA toolkit's root (`CUDA_PATH` is the Windows installer's name for it).
    pub const CUDA_HOME: &str = "CUDA_HOME";
    pub const CUDA_PATH: &str = "CUDA_PATH";
    /// The LLVM whose clang builds HIP, when it is not the SDK's own.
    pub const HIP_CLANG_PATH: &str = "HIP_CLANG_PATH";
    /// The MSVC + Windows SDK for a Windows venv built from another OS (`--winsysroot`).
    pub const ROCBUILD_WINSYSROOT: &str = "ROCBUILD_WINSYSROOT";
    /// Wine for a Windows venv's verification (`none`: never), else `wine` on PATH.
    pub const ROCBUILD_WINE: &str = "ROCBUILD_WINE";
    /// The active conda environment, whose `include/` and `lib/` a compiler searches.
    pub const CONDA_PREFIX: &str = "CONDA_PREFIX";
    /// The compilers' own search variables.
    pub const INCLUDE_PATHS: [&str; 3] = ["CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"];
    pub const LIBRARY_PATH: &str = "LIBRARY_PATH";
}

#[derive(Debug, Clone)]
pub struct ProbeEnv {
    pub vars: BTreeMap<String, String>,
    /// Prefix for absolute Unix paths (`/opt`, `/usr`, `/sys`): `/` on the real machine.
    pub fs_root: PathBuf,
    /// `C:\Program Files`.
    pub program_files: PathBuf,
    /// `C:\Windows\System32`, where the GPU driver puts `amdhip64_N.dll`.
    pub system32: PathBuf,
    /// How long a child process (torch in Python, rocminfo) may take.
    pub timeout: Duration,
}

/// Where `os` compares variable names without case (Windows keeps `Path`, asked as `PATH`),
/// each name is also given in capitals, so every lookup finds it as Windows would.
fn names_as_asked(mut vars: BTreeMap<String, String>, os: crate::Os) -> BTreeMap<String, String> {
    if os.rules().env_names_fold_case() {
        let upper: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_ascii_uppercase(), v.clone()))
            .collect();
        for (k, v) in upper {
            vars.entry(k).or_insert(v);
        }
    }
    vars
}

impl Default for ProbeEnv {
    fn default() -> ProbeEnv {
        ProbeEnv::empty()
    }
}

impl ProbeEnv {
    /// The real process environment, now. A command takes its snapshot once (the CLI's
    /// settings step) and hands it on ([`ProbeEnv::from_vars`]); this is for tools and tests.
    pub fn from_process() -> ProbeEnv {
        ProbeEnv::from_vars(std::env::vars_os())
    }

    /// The environment of these variables (a snapshot of the process's), on the real
    /// machine's file system.
    pub fn from_vars(
        vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
    ) -> ProbeEnv {
        let vars: BTreeMap<String, String> = vars
            .into_iter()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.to_string_lossy().into_owned())))
            .collect();
        let vars = names_as_asked(vars, crate::Os::current());
        let program_files = vars
            .get(vars::PROGRAM_FILES)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(r"C:\Program Files"));
        let system32 = vars
            .get(vars::SYSTEM_ROOT)
            .map(|r| Path::new(r).join("System32"))
            .unwrap_or_else(|| PathBuf::from(r"C:\Windows\System32"));
        ProbeEnv {
            vars,
            fs_root: PathBuf::from("/"),
            program_files,
            system32,
            timeout: Duration::from_secs(30),
        }
    }

    /// No variables, on the real machine's file system.
    pub fn empty() -> ProbeEnv {
        ProbeEnv::from_vars(std::iter::empty())
    }

    /// An empty environment rooted at `root` (tests): `root/opt`, `root/usr`, `root/sys`,
    /// `root/Program Files`, `root/Windows/System32`.
    pub fn rooted(root: &Path) -> ProbeEnv {
        ProbeEnv {
            vars: BTreeMap::new(),
            fs_root: root.to_path_buf(),
            program_files: root.join("Program Files"),
            system32: root.join("Windows").join("System32"),
            timeout: Duration::from_secs(30),
        }
    }

    pub fn with_var(mut self, name: &str, value: impl Into<String>) -> ProbeEnv {
        self.vars.insert(name.to_string(), value.into());
        self
    }

    /// `$PYTORCH_ROCM_ARCH` as the GPU list it names (`;`, `,` or spaces between): the one
    /// reading of it, for the probe's GPU cascade, status and doctor's default alike.
    pub fn pytorch_rocm_arch(&self) -> crate::GpuTargets {
        crate::GpuTargets::parse(&[self.var(vars::PYTORCH_ROCM_ARCH).unwrap_or_default()])
    }

    /// A variable's value, when set and not empty.
    pub fn var(&self, name: &str) -> Option<&str> {
        // Where names fold case (Windows), every name is also held in capitals: `SystemRoot`
        // is found however the environment spelled it.
        let folded = || {
            crate::Os::current()
                .rules()
                .env_names_fold_case()
                .then(|| self.vars.get(&name.to_ascii_uppercase()))
                .flatten()
        };
        self.vars
            .get(name)
            .or_else(folded)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }

    /// The directories a variable lists, separated as this host separates PATH (empty entries
    /// dropped).
    pub fn dirs(&self, name: &str) -> Vec<PathBuf> {
        self.var(name)
            .map(|v| {
                std::env::split_paths(v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// An absolute Unix path under `fs_root` (`/opt` -> `<fs_root>/opt`).
    pub fn unix(&self, abs: &str) -> PathBuf {
        self.fs_root.join(abs.trim_start_matches('/'))
    }

    /// The directories of `$PATH`, split the way `os` splits them.
    pub fn path_dirs(&self, os: Os) -> Vec<PathBuf> {
        let sep = os.rules().path_list_separator();
        self.var(vars::PATH)
            .map(|p| {
                p.split(sep)
                    .filter(|d| !d.is_empty())
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// An executable named `name` in `$PATH` (`name.exe` on Windows).
    pub fn which(&self, name: &str, os: Os) -> Option<PathBuf> {
        self.which_all(name, os).into_iter().next()
    }

    /// Every file named `name` in `$PATH` (`name.exe` on Windows), in `$PATH`'s order, each
    /// once: where the first does not run (a shim), the next may.
    pub fn which_all(&self, name: &str, os: Os) -> Vec<PathBuf> {
        let file = format!("{name}{}", os.rules().exe_suffix());
        let mut found: Vec<PathBuf> = Vec::new();
        for p in self.path_dirs(os).into_iter().map(|d| d.join(&file)) {
            if p.is_file() && !found.contains(&p) {
                found.push(p);
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Windows keeps `Path` and compares names without case: the probe's `PATH` finds it. A
    /// Linux `Path` is another variable.
    #[test]
    fn windows_variable_names_are_found_in_any_case() {
        let vars = BTreeMap::from([("Path".to_string(), r"C:\x".to_string())]);
        let w = names_as_asked(vars.clone(), crate::Os::Windows);
        assert_eq!(w.get("PATH").map(String::as_str), Some(r"C:\x"));
        assert!(!names_as_asked(vars, crate::Os::Linux).contains_key("PATH"));
    }
}
