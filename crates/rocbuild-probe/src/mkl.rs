//! Intel oneAPI MKL: CTranslate2's fastest CPU backend, used only when it is really installed
//! (headers and the static libraries upstream links). Read from files; nothing is run.

use std::path::{Path, PathBuf};

use crate::probe_env::ProbeEnv;
use crate::Os;

/// Is `root` an MKL root as CTranslate2's CMake wants it: `include/mkl.h` and the core library?
pub fn is_mkl_root(root: &Path, os: Os) -> bool {
    root.join("include").join("mkl.h").is_file()
        && ["lib", "lib/intel64"].iter().any(|l| {
            root.join(l)
                .join(os.rules().static_lib_name("mkl_core"))
                .is_file()
        })
}

/// The first MKL root among: `$MKLROOT` (set by oneAPI's setvars), `$ONEAPI_ROOT/mkl/latest`,
/// the default oneAPI install (`/opt/intel/oneapi/mkl/latest`, `C:\Program Files
/// (x86)\Intel\oneAPI\mkl\latest`), the old `/opt/intel/mkl`, and the venv itself (PyPI's
/// `mkl-static` + `mkl-include` put `lib/` and `include/` there). MKL is x86-64 only.
pub fn find_mkl(env: &ProbeEnv, os: Os, cpu: &str, venv: Option<&Path>) -> Option<PathBuf> {
    if cpu != "x86_64" {
        return None;
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(r) = env.var("MKLROOT") {
        candidates.push(PathBuf::from(r));
    }
    if let Some(r) = env.var("ONEAPI_ROOT") {
        candidates.push(Path::new(r).join("mkl").join("latest"));
    }
    let rules = os.rules();
    match rules.program_files_x86() {
        Some((var, default)) => {
            let base = env
                .var(var)
                .map_or_else(|| PathBuf::from(default), PathBuf::from);
            candidates.extend(rules.oneapi_mkl_dirs().iter().map(|d| base.join(d)));
        }
        None => candidates.extend(rules.oneapi_mkl_dirs().iter().map(|d| env.unix(d))),
    }
    if let Some(v) = venv {
        candidates.push(match os.rules().env_data_prefix() {
            Some(d) => v.join(d),
            None => v.to_path_buf(),
        });
    }
    candidates.into_iter().find(|c| is_mkl_root(c, os))
}
