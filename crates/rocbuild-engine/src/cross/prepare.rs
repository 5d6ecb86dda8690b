//! Before a cross build's configure: the toolchain file written (when its contents changed)
//! and the venv's `pythonXY.lib` made from `pythonXY.dll` when its install has none.

use crate::cross::CrossPlan;
use crate::error::{EngineError, Result};
use crate::paths::write_if_changed;
use crate::step::RunLog;

pub fn prepare(c: &CrossPlan, log: &mut RunLog) -> Result<()> {
    write_if_changed(&c.toolchain_file, &c.toolchain)?;
    log.note(&format!("toolchain file -> {}", c.toolchain_file.display()));
    if let Some((link, sdk)) = &c.sdk_include_link {
        if std::fs::read_link(link).ok().as_ref() != Some(sdk) {
            let _ = std::fs::remove_file(link);
            // Cross builds run on a Linux host, where a link is ordinary.
            if rocbuild_probe::platform::host::LINKS_ARE_ORDINARY {
                rocbuild_probe::platform::host::symlink(sdk, link, true)
                    .map_err(EngineError::io("link", link))?;
            }
        }
    }
    let Some(make) = &c.make_python_lib else {
        return Ok(());
    };
    if c.python_lib.is_file() {
        return Ok(());
    }
    let binary = rocbuild_native::read_binary(&make.dll)?;
    let name = make
        .dll
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut def = format!("LIBRARY {name}\nEXPORTS\n");
    for e in binary
        .exports
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| !n.is_empty())
    {
        def.push_str(e);
        def.push('\n');
    }
    write_if_changed(&make.def, &def)?;
    log.note(&format!(
        "import library {} from the exports of {} ({} names)",
        c.python_lib.display(),
        make.dll.display(),
        binary.exports.len()
    ));
    log.run(
        "make the Python import library",
        &make.command(&c.python_lib),
    )?;
    Ok(())
}
