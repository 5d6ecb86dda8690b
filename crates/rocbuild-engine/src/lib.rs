//! The engine: [`plan`] (pure) turns a recipe and a machine into concrete steps; [`run`]
//! executes them: fetch, configure, build, stage, install, verify, record.

pub mod cache_lock;
pub mod clean;
mod command;
mod compiler_cache_run;
mod error;
mod from_run;
pub mod interrupt;
pub use rocbuild_link as link;
mod paths;
mod plan;
mod prebuilt;
mod quick;
mod render;
mod run;
pub mod schedule;
pub mod source;
mod stage;
mod step;
mod toolchain;
pub mod usecase;

pub use command::Command;
pub use error::{EngineError, Result};
pub use link::runpath_entries;
pub use paths::{hash_hex, join};
pub use plan::{compiler_cache, plan, prebuilt as index, Context, Plan, SourcePlan};
pub use rocbuild_venv::{Backend, BackendOptions, BuildOptions};
pub use run::{run, Outcome};
pub use step::Verbosity;
pub use toolchain::{BackendPlan, CudaPlan, RocmPlan};
pub use usecase::{Reporter, Settings};
