//! The bundle use case: the smallest set of libraries the named files load, copied into a
//! folder a frozen app ships (for the GPUs named).

use std::path::{Path, PathBuf};

use rocbuild_doctor::{BundleReport, DoctorError, LoaderEnv};
use rocbuild_probe::GpuTargets;

/// `files` and what they load (found as their loader would, plus `search`) copied into `into`.
pub fn bundle(
    files: &[PathBuf],
    into: &Path,
    search: &[PathBuf],
    gpu: &GpuTargets,
    loader: &LoaderEnv,
) -> Result<BundleReport, DoctorError> {
    rocbuild_doctor::bundle(files, into, search, gpu, loader)
}
