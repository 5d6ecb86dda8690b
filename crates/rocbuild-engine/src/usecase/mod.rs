//! The use cases the CLI offers, each one function: build, rebuild, status (with recovery),
//! restore, wheel, publish, test, doctor, deps, bundle, repair, clean, ffmpeg, schedule. They take the [`Settings`] the CLI read and a [`Reporter`] for
//! what a user should see while they run; they return data the CLI renders.

mod build;
mod bundle;
mod clean;
mod deps;
mod doctor;
pub mod ffmpeg;
mod publish;
mod rebuild;
mod repair;
mod restore;
pub mod schedule;
mod status;
pub mod test;
pub mod upstream;
mod wheel;

use std::path::PathBuf;

pub use build::{build, BuildRequest, Built};
pub use bundle::bundle;
pub use clean::{clean, Cleaned};
pub use deps::deps;
pub use doctor::{doctor, DoctorRequest};
pub use ffmpeg::ffmpeg;
pub use publish::{publish, Published};
pub use rebuild::{rebuild, RebuildRequest, Rebuilt};
pub use repair::repair;
pub use restore::restore;
pub use schedule::schedule;
pub use status::{status, StatusReport};
pub use test::{test, TestReport, TestRequest};
pub use wheel::wheel;

use rocbuild_probe::{Os, Venv};
use rocbuild_venv::install::{self, Recovered};
use rocbuild_venv::lock::VenvLock;
use rocbuild_venv::VenvLayout;

use crate::error::Result;

/// What the environment and the global flags decided, read once by the CLI.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Sources, build trees, tools, logs.
    pub cache: PathBuf,
    /// `ROCBUILD_MIRROR`.
    pub mirror: Option<PathBuf>,
    /// The FFmpeg `rocbuild ffmpeg` fetched last, used when no `--ffmpeg` is given.
    pub downloaded_ffmpeg: Option<PathBuf>,
    /// `--compiler-cache` and the cache engine's settings.
    pub compiler_cache: crate::compiler_cache::Request,
    /// The environment, as far as a build depends on it.
    pub env: Environment,
    /// Ask the recipes' sources, once a day, for releases newer than the recipe's
    /// (`ROCBUILD_UPSTREAM` is not `off`).
    pub upstream: bool,
}

/// What this process's environment says, read once by the settings step (the CLI's
/// `settings.rs`): the planner and the no-op key read no environment of their own.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// `CC` or `CXX` is set: the user named the compilers.
    pub user_compiler: bool,
    /// `PATH`, where the wheels' compiler (`g++-14`) is looked for.
    pub path: Option<std::ffi::OsString>,
    /// The working directory (`PATH`'s relative entries are relative to it).
    pub cwd: PathBuf,
    /// `ROCBUILD_WINE_TIMEOUT`: seconds a verification under Wine may take.
    pub wine_timeout: Option<u64>,
    /// A proxy is configured (`https_proxy`, `HTTP_PROXY`, `ALL_PROXY`, …): the network check
    /// before a run is skipped (the connection would go through the proxy).
    pub proxied: bool,
    /// `ROCBUILD_SDISTS`: directories of sdists read before an index.
    pub sdists: Vec<PathBuf>,
    /// `ROCBUILD_SDIST_INDEX`, else `PIP_INDEX_URL`.
    pub sdist_index: Option<String>,
    /// `ROCBUILD_CUDA_WHEELS`: directories holding the pinned CUDA toolkit wheels (offline).
    pub cuda_wheels: Vec<PathBuf>,
    /// What every process a build starts inherits (cmake, the compilers, pip read `CFLAGS`,
    /// `CMAKE_PREFIX_PATH`, `PKG_CONFIG_PATH`, … that rocbuild never looks at), sorted, less
    /// what changes from shell to shell: part of the no-op key, since it can change a build.
    pub inherited: Vec<(String, String)>,
    /// The same snapshot as the GPU, CUDA and toolchain probes read it (`ROCM_PATH`,
    /// `HIP_PATH`, `PYTORCH_ROCM_ARCH`, `CUDA_HOME`, `PATH`, …): no probe reads the process's
    /// environment of its own.
    pub probe: rocbuild_probe::ProbeEnv,
}

/// What a running use case tells the user.
pub trait Reporter {
    /// A line for the user (stderr in the CLI), e.g. which venv, an interrupted run recovered.
    fn note(&mut self, line: &str);
    /// A warning: something failed that the use case goes on without (stderr in the CLI).
    fn warn(&mut self, line: &str) {
        self.note(line);
    }
    /// Another run holds the venv; this one waits for it.
    fn waiting(&mut self, pid: Option<u32>) {
        self.note(&format!(
            "waiting for another rocbuild run on this venv (pid {})…",
            pid.map_or("unknown".into(), |p| p.to_string())
        ));
    }
}

/// A reporter that says nothing (tests, `--json`).
pub struct Silent;

impl Reporter for Silent {
    fn note(&mut self, _line: &str) {}
}

/// The chosen venv's layout (site-packages from its files: `platform::any_site_packages`).
pub fn locate(venv: &Venv) -> Result<VenvLayout> {
    Ok(VenvLayout::locate(&venv.root, Os::current())?)
}

/// Lock the venv, then finish or undo what a killed run left.
fn lock_and_recover(
    layout: &VenvLayout,
    no_wait: bool,
    reporter: &mut dyn Reporter,
) -> Result<VenvLock> {
    let lock = VenvLock::acquire(&layout.site, !no_wait, &mut |pid| reporter.waiting(pid))?;
    note_recovery(install::recover(&layout.site)?, reporter);
    Ok(lock)
}

fn note_recovery(r: Recovered, reporter: &mut dyn Reporter) {
    match r {
        Recovered::RolledBack => {
            reporter.note("note: an interrupted rocbuild run on this venv was rolled back")
        }
        Recovered::Completed => {
            reporter.note("note: an interrupted rocbuild run on this venv was completed")
        }
        Recovered::Salvaged => reporter.note(
            "note: an interrupted rocbuild run on this venv left no journal rocbuild could trust: pip's files it had moved were put back where their RECORD proves them, the rest kept in .rocbuild/salvage/ (`rocbuild status` names them)",
        ),
        Recovered::Nothing => {}
    }
}
