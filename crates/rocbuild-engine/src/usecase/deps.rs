//! The deps use case: what the named native files load, and from where. rocbuild-doctor reads
//! the files; nothing is loaded or changed.

use std::path::PathBuf;

use rocbuild_doctor::{DepsReport, DoctorError, LoaderEnv};

/// Each of `files` with the libraries it needs, found as its loader would (plus `search`,
/// and what `loader` says of the command's environment).
pub fn deps(
    files: &[PathBuf],
    search: &[PathBuf],
    loader: &LoaderEnv,
) -> Result<DepsReport, DoctorError> {
    rocbuild_doctor::deps(files, search, loader)
}
