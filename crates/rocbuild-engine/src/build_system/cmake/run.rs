//! CMake's part of a run, before its configure: the files it planned (the TorchConfig.cmake of
//! a `torch-cmake = "lite"` build, the HIP compatibility header force-included into HIP
//! sources), written when their text changed, and the `[dependency.X]` builds
//! ([`super::dependency`] plans them).

use super::super::RunPart;
use crate::error::Result;
use crate::paths::write_if_changed;
use crate::step::RunLog;

/// Write the files the CMake plan holds (none for another build system).
pub fn write_files(plan: &RunPart, log: &mut RunLog) -> Result<()> {
    if let Some(tc) = plan.torch_cmake {
        if let Some(text) = &tc.contents {
            write_if_changed(&tc.dir.join("TorchConfig.cmake"), text)?;
        }
    }
    if let Some(hc) = plan.hip_compat {
        write_if_changed(&hc.path, &hc.contents)?;
        log.note(&format!(
            "HIP compatibility ({}) -> {}",
            hc.names.join(", "),
            hc.path.display()
        ));
    }
    Ok(())
}

/// Build each `[dependency.X]` not built before with these inputs: fetch, configure, build,
/// install into its prefix in the cache, then the stamp that says so (written last, so an
/// interrupted build is redone). One run at a time builds a given dependency.
pub fn build_dependencies(
    plan: &RunPart,
    log: &mut RunLog,
    build_env: &dyn Fn(&crate::command::Command) -> crate::command::Command,
) -> Result<()> {
    for d in plan.dependencies {
        let _lock = crate::cache_lock::CacheLock::acquire(&d.build_dir)?;
        if d.is_built() {
            log.note(&format!(
                "dependency {} ({}): built before, {}",
                d.name,
                d.tag,
                d.prefix.display()
            ));
            continue;
        }
        log.note(&format!(
            "dependency {} ({}) -> {}",
            d.name,
            d.tag,
            d.prefix.display()
        ));
        crate::source::prepare::prepare(&d.source, plan.recipe_file, log)?;
        crate::interrupt::check("the dependency's fetch")?;
        let what = |step: &str| format!("dependency {}: {step}", d.name);
        log.run(&what("configure"), &build_env(&d.configure))?;
        crate::interrupt::check("the dependency's configure")?;
        log.run(&what("build"), &build_env(&d.build))?;
        crate::interrupt::check("the dependency's build")?;
        log.run(&what("install"), &d.install)?;
        let stamp = d.stamp();
        fs_err::write(&stamp, d.stamp_text())
            .map_err(crate::error::EngineError::io("write", &stamp))?;
    }
    Ok(())
}
