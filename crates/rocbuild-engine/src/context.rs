//! What a build is given besides the recipe and the machine: where it works, how hard, and
//! the settings read once before planning (the planner reads no environment).

use std::path::PathBuf;

use rocbuild_probe::Os;
use serde::Serialize;

/// Where and how hard a build works: decided once by the caller, not by the user's options.
#[derive(Debug, Clone, Serialize)]
pub struct Context {
    /// Where sources, build trees, tools and logs live.
    pub cache: PathBuf,
    /// `ROCBUILD_MIRROR`: offline mirror of git repositories.
    pub mirror: Option<PathBuf>,
    /// Parallel compile jobs (`--jobs`, else the machine's cores).
    pub jobs: usize,
    /// `--compiler-cache` and the cache engine's own settings (not shown: they may hold a
    /// password).
    #[serde(skip)]
    pub compiler_cache: crate::compiler_cache::Request,
    /// The compilers the user named in the environment (`CC`, `CXX`), read once by the
    /// settings step: the planner reads no environment.
    #[serde(skip)]
    pub user_compiler: bool,
    /// The wheels' compiler (`g++-14`), found on PATH before planning
    /// (`crate::toolchain::compiler_scan`): the planner starts no process.
    #[serde(skip)]
    pub wheels_compiler: Option<crate::toolchain::wheel_compiler::Alternative>,
    /// `ROCBUILD_WINE_TIMEOUT`: seconds a verification under Wine may take.
    #[serde(skip)]
    pub wine_timeout: Option<u64>,
    /// A proxy is configured (the settings step read it): no network check before a run.
    #[serde(skip)]
    pub proxied: bool,
    /// Where sdists are read before the index is asked: `ROCBUILD_SDISTS` (the mirror's
    /// `pypi/` is added by the planner).
    #[serde(skip)]
    pub sdists: Vec<PathBuf>,
    /// The index's simple API root for sdists: `ROCBUILD_SDIST_INDEX`, else `PIP_INDEX_URL`
    /// (None: PyPI).
    #[serde(skip)]
    pub sdist_index: Option<String>,
    /// The host's OS: paths under the cache (sources, build trees, tools, logs) are the
    /// host's, whatever OS the venv is for. Set by [`crate::plan::plan`] from `machine.host`.
    #[serde(skip)]
    pub host_os: Os,
}
