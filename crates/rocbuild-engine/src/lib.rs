//! The engine: [`plan`] (pure) turns a recipe and a machine into concrete steps; [`run`]
//! executes them: fetch, configure, build, stage, install, verify, record.

pub mod cache_lock;
pub mod clean;
mod command;
mod error;
pub mod link;
mod plan;
mod render;
mod run;
pub mod schedule;
pub mod source;
mod step;
mod toolchain;
mod torch_cmake;

pub use command::Command;
pub use error::{EngineError, Result};
pub use plan::{hash_hex, join, plan, runpath_entries, BuildOptions, Plan, SourcePlan};
pub use run::{run, Outcome};
pub use step::Verbosity;
pub use toolchain::{BackendOptions, BackendPlan, CudaPlan, RocmPlan};
