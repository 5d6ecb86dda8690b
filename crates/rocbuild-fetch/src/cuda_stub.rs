//! The link-only driver stub `lib/stubs/libcuda.so`: a library with the driver's soname
//! (`libcuda.so.1`) that defines every `CUresult cu…(` function `include/cuda.h` declares (after
//! the preprocessor, so the `_v2` names the headers map to are the ones defined). A program
//! links against it on a machine without the NVIDIA driver; at run time the real driver's
//! `libcuda.so.1` is loaded instead. Every function returns CUDA_ERROR_STUB_LIBRARY (34), as
//! NVIDIA's own stub does, should it ever be loaded.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::{io, FetchError};

/// The driver functions `cuda.h` declares, as the preprocessor leaves them.
pub(crate) fn driver_functions(preprocessed: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = preprocessed;
    while let Some(i) = rest.find("CUresult ") {
        rest = &rest[i + "CUresult ".len()..];
        let t = rest.trim_start();
        let name: String = t
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let after = t[name.len()..].trim_start();
        if name.starts_with("cu") && name.len() > 2 && after.starts_with('(') {
            names.insert(name);
        }
    }
    names
}

fn failed(what: &str, cc: &Path, out: &std::process::Output) -> FetchError {
    FetchError::DriverStub {
        reason: format!(
            "{} {what} failed ({}): {}",
            cc.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
}

/// Build `root/lib/stubs/libcuda.so` with the host C compiler `cc`. False when the root has
/// no `include/cuda.h` (nothing to build the stub from).
pub(crate) fn make_driver_stub(cc: &Path, root: &Path) -> Result<bool, FetchError> {
    let header = root.join("include/cuda.h");
    if !header.is_file() {
        return Ok(false);
    }
    let run = |args: &[&std::ffi::OsStr]| {
        Command::new(cc)
            .args(args)
            .output()
            .map_err(|e| FetchError::DriverStub {
                reason: format!("cannot run {}: {e}", cc.display()),
            })
    };
    let pp = run(&[
        "-E".as_ref(),
        "-P".as_ref(),
        "-x".as_ref(),
        "c".as_ref(),
        header.as_os_str(),
    ])?;
    if !pp.status.success() {
        return Err(failed("-E include/cuda.h", cc, &pp));
    }
    let names = driver_functions(&String::from_utf8_lossy(&pp.stdout));
    if names.is_empty() {
        return Err(FetchError::DriverStub {
            reason: format!("{} declares no driver function", header.display()),
        });
    }
    let stubs = root.join("lib/stubs");
    std::fs::create_dir_all(&stubs).map_err(io("create", &stubs))?;
    let src = stubs.join("libcuda-stub.c");
    let mut text =
        String::from("/* Written by rocbuild: a link-only stand-in for the NVIDIA driver. */\n");
    for n in &names {
        text.push_str(&format!("int {n}(void) {{ return 34; }}\n"));
    }
    std::fs::write(&src, text).map_err(io("write", &src))?;
    let lib = stubs.join("libcuda.so");
    let out = run(&[
        "-shared".as_ref(),
        "-fPIC".as_ref(),
        "-o".as_ref(),
        lib.as_os_str(),
        "-Wl,-soname,libcuda.so.1".as_ref(),
        src.as_os_str(),
    ])?;
    if !out.status.success() {
        return Err(failed("-shared (the libcuda stub)", cc, &out));
    }
    std::fs::remove_file(&src).map_err(io("remove", &src))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_functions_are_the_declared_ones_after_the_preprocessor() {
        let pp = "typedef int CUresult;\nCUresult cuInit(unsigned int Flags);\n\
                  extern CUresult  cuCtxCreate_v4 (CUcontext *p);\n\
                  typedef CUresult (*PFN_cuInit)(unsigned int);\nCUresult x(void);\n";
        let names: Vec<String> = driver_functions(pp).into_iter().collect();
        assert_eq!(names, ["cuCtxCreate_v4", "cuInit"]);
    }
}
