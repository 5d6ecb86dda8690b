//! The build-system seam: how a source becomes artifacts. Between the toolchain (backend,
//! compilers, tools: `crate::toolchain`, [`crate::toolchain::tools`]) and the plan, one trait,
//! [`BuildSystem`], with an implementation per `[build] system` of the recipe:
//!
//! - [`cmake`]: the source's CMake project, configured by rocbuild with the toolchain's defines
//!   (and what else is CMake's: `[dependency.X]` builds, rocbuild's extension project);
//! - [`pep517`]: the source's own build backend, run by `pip wheel --no-build-isolation` with
//!   the toolchain as environment variables (setuptools torch extensions, scikit-build-core).
//!
//! A new one (meson-python, say) is one file here implementing the trait, one variant of
//! `rocbuild_recipe::BuildSystem` and its arm in [`of`]. Like the rest of the planner, an
//! implementation does no I/O: it spells out commands that `run()` executes.

pub mod cmake;
pub mod pep517;
pub mod scratch;

use std::collections::BTreeMap;
use std::path::PathBuf;

use rocbuild_probe::Machine;
use rocbuild_recipe::{Recipe, Resolved};
use rocbuild_venv::BuildOptions;

use crate::command::Command;
use crate::context::Context;
use crate::error::Result;
use crate::source::plan::SourcePlan;
use crate::toolchain::tools::Toolset;
use crate::toolchain::BackendPlan;
use cmake::torch::TorchCmakePlan;

/// How the source becomes files under the staging prefix.
pub trait BuildSystem: Sync {
    /// How the plan titles its steps.
    fn titles(&self) -> Titles;
    /// The file a configured build tree holds (CMake's `CMakeCache.txt`): with it, and the
    /// configure's stamp saying the same inputs, `run()` skips the configure. None: the
    /// configure always runs.
    fn configured_marker(&self) -> Option<&'static str>;
    /// The steps, every argv and environment variable spelled out.
    fn plan(&self, i: &Inputs) -> Result<Steps>;
}

/// The titles of a build system's steps as `--dry-run` shows them, and their short names in
/// the run's log and errors.
pub struct Titles {
    pub configure: &'static str,
    pub build: &'static str,
    pub install: &'static str,
    pub configure_step: &'static str,
    pub build_step: &'static str,
}

/// The implementation the recipe names.
pub fn of(system: rocbuild_recipe::BuildSystem) -> &'static dyn BuildSystem {
    match system {
        rocbuild_recipe::BuildSystem::Cmake => &cmake::Cmake,
        rocbuild_recipe::BuildSystem::Pep517 => &pep517::Pep517,
    }
}

/// What the build systems' running half reads of a plan (`Plan::to_build_run` makes it): the
/// files and builds they planned, not the whole plan.
pub struct RunPart<'a> {
    pub torch_cmake: Option<&'a TorchCmakePlan>,
    pub hip_compat: Option<&'a crate::toolchain::hip_compat::HipCompatPlan>,
    pub dependencies: &'a [cmake::dependency::DependencyPlan],
    /// The recipe's file, named when a dependency's source moved.
    pub recipe_file: &'a str,
}

/// Run time, before the source is configured: the files the build system planned (CMake's
/// TorchConfig.cmake and HIP compatibility header). `run()` calls this and [`build_first`],
/// then the planned steps, and names no build system.
pub fn write_planned_files(plan: &RunPart, log: &mut crate::step::RunLog) -> Result<()> {
    cmake::run::write_files(plan, log)
}

/// Run time, under the build tree's lock and the compiler cache's settings (`build_env`): the
/// projects the build needs built first (`[dependency.X]`, CMake projects whatever builds the
/// main one), each once per configuration.
pub fn build_first(
    plan: &RunPart,
    log: &mut crate::step::RunLog,
    build_env: &dyn Fn(&Command) -> Command,
) -> Result<()> {
    cmake::run::build_dependencies(plan, log, build_env)
}

/// What every build system is given: the recipe as resolved for this target, the machine,
/// the toolchain chosen (backend, compilers, tools) and the source.
pub struct Inputs<'a> {
    pub recipe: &'a Recipe,
    pub machine: &'a Machine,
    pub opts: &'a BuildOptions,
    pub ctx: &'a Context,
    pub version: &'a str,
    pub resolved: &'a Resolved,
    pub vars: &'a BTreeMap<String, String>,
    pub source: &'a SourcePlan,
    pub backend: &'a BackendPlan,
    /// The tools found (the cmake to run, the compilers, ninja, pkg-config).
    pub toolset: &'a Toolset,
    /// The build-only Python tools (`{tools}`): on a PEP 517 backend's `PYTHONPATH`.
    pub tools: Option<&'a crate::toolchain::tools::ToolsPlan>,
    /// A Windows venv built from another OS.
    pub cross: Option<&'a crate::cross::CrossPlan>,
    /// pkg-config files rocbuild writes (before any build system runs) for an FFmpeg that has
    /// none: a library's concern, for any build system that asks pkg-config.
    pub ffmpeg_pc: Option<&'a crate::libraries::ffmpeg_pc::FfmpegPc>,
}

/// The files a build system plans to write before its configure (CMake's TorchConfig.cmake
/// and HIP compatibility header; none for PEP 517), kept in the plan for `--dry-run` and the
/// manifest, and written by [`write_planned_files`].
#[derive(Debug, Default)]
pub struct PlannedFiles {
    pub torch_cmake: Option<TorchCmakePlan>,
    pub hip_compat: Option<crate::toolchain::hip_compat::HipCompatPlan>,
}

/// The steps a build system plans: `configure`, then `build`, then (when it has one)
/// `install_prefix` leave the build's files under `prefix`, where `[install] artifacts` finds
/// them. `run()` runs them and knows nothing else of the build system.
pub struct Steps {
    /// Which build system planned them.
    pub system: rocbuild_recipe::BuildSystem,
    /// CMake's `-D` defines as given (recorded in the manifest); empty for others.
    pub defines: BTreeMap<String, String>,
    pub toolkit: Option<PathBuf>,
    /// Hash of the configure's inputs (not the install prefix): names the build tree.
    pub key: String,
    pub build_dir: PathBuf,
    pub prefix: PathBuf,
    pub configure: Command,
    pub build: Command,
    pub install_prefix: Option<Command>,
    /// A build system whose product is a wheel (PEP 517) leaves it unpacked here: its files
    /// are the Python part (copied into the stage against the wheel's RECORD), the native ones
    /// among them replaced by the artifacts as rocbuild links them.
    pub unpacked_wheel: Option<PathBuf>,
    /// What it writes before its configure.
    pub files: PlannedFiles,
}
