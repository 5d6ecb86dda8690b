//! Why a native Python extension will not load, and the libraries an app must ship.
//!
//! - [`doctor`]: for torch, torchcodec, ctranslate2 in a venv: a load test in a fresh child
//!   Python (the loader's exact words), missing dependencies, the ABI check (imports no
//!   provider exports, demangled), wrong flavor, FFmpeg majors, GPU targets and runtimes,
//!   staleness against rocbuild's manifest. Findings are data ([`Finding`]).
//! - [`deps`]: the dependency tree of any ELF / PE / Mach-O file with the provider of each
//!   library and the missing ones.
//! - [`bundle`]: copy the minimal non-system set, keeping the layout the loader expects.
//!
//! Nothing here loads native code into this process: the load test is a child process and
//! everything else reads bytes.

mod bundle;
mod bundle_kernels;
pub mod checks;
mod deps;
mod doctor;
mod error;
mod examine;
mod finding;
mod linkage;
mod loadtest;
mod package;
mod provider;
mod render;
mod repair;
mod symptom;
mod venv_os;

pub use bundle::{bundle, BundleReport, Copied, RuntimeLoaded};
pub use deps::{deps, DepsReport, FileDeps, Library};
pub use doctor::{
    check_libraries, doctor, probe, DoctorOptions, PackageReport, Report, TorchSummary,
};
pub use error::DoctorError;
pub use finding::{order, verdict, Breaks, Check, Finding, Severity, Verdict};
pub use linkage::{
    context, describe, link, python_runtime, Found, Linkage, LoaderEnv, Missing, Reader, Search,
    Unresolved,
};
pub use loadtest::{load_test, LoadReport, Step, StepResult};
pub use package::{is_native_name, native_libraries, DllDirs, Subject};
pub use provider::{classify, site_packages_of, Source};
pub use render::human;
pub use repair::{repair, FileFix, Outcome, PackageRepair, Refusal, RepairOptions, RepairReport};
pub use venv_os::{locate, python_from_files};

/// Human text for `deps` and `bundle`.
pub mod text {
    pub use crate::bundle::human as bundle;
    pub use crate::bundle::pyinstaller as bundle_pyinstaller;
    pub use crate::deps::human as deps;
    pub use crate::repair::human as repair;
}
