//! The repair use case: the venv's packages made to load (their search paths pointed at the
//! libraries found), under the venv's lock; a package that cannot be is left as it was.

use rocbuild_doctor::{DoctorError, RepairOptions, RepairReport};

/// Repair the packages `opts` names in its venv (every known one installed when none).
pub fn repair(opts: &RepairOptions) -> Result<RepairReport, DoctorError> {
    rocbuild_doctor::repair(opts)
}
