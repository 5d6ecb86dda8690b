//! The template variables a recipe may use (`{torch.lib}`, `{ffmpeg.major}`, …), from the
//! machine and the plan so far (their expansion: [`crate::vars`]).

use std::collections::BTreeMap;

use rocbuild_probe::{Flavor, Machine};
use rocbuild_recipe::Recipe;

use crate::context::Context;
use crate::libraries::OptionalLibrary;
use crate::source::plan::SourcePlan;
use crate::toolchain::BackendPlan;
use crate::vars::base;

/// Every variable known once the source and the backend are chosen.
pub fn of(
    recipe: &Recipe,
    version: &str,
    machine: &Machine,
    ctx: &Context,
    libraries: &[OptionalLibrary],
    source: &SourcePlan,
    backend: &BackendPlan,
) -> BTreeMap<String, String> {
    let os = machine.target.platform.os;
    let torch = machine.target.torch.as_ref();
    let flavor = torch.map_or(Flavor::Cpu, |t| t.flavor);
    let py = &machine.target.python;
    let mut vars = base(recipe.name(), version, os, flavor);
    let mut set = |k: &str, v: String| {
        vars.insert(k.to_string(), v);
    };
    set("jobs", ctx.jobs.max(1).to_string());
    // Every `[[needs.library]]` found: where (a required one too: its overlays may point a
    // CMake variable at it). `bin`: the directory beside `lib` where Windows keeps the DLLs.
    for (name, f) in &machine.host.libraries {
        // What the library is, wherever it lies: the key of a dependency built from it.
        if let Some(d) = &f.digest {
            set(&format!("lib.{name}.digest"), d.clone());
        }
        if let Some(d) = &f.include_dir {
            set(&format!("lib.{name}.include"), d.display().to_string());
        }
        if let Some(d) = &f.lib_dir {
            set(&format!("lib.{name}.dir"), d.display().to_string());
            // Either separator: a Windows venv's path may be read on another OS.
            let text = d.display().to_string();
            if let Some((parent, _)) = text.trim_end_matches(['/', '\\']).rsplit_once(['/', '\\']) {
                let sep = if text.contains('\\') && !text.contains('/') {
                    '\\'
                } else {
                    '/'
                };
                set(&format!("lib.{name}.bin"), format!("{parent}{sep}bin"));
            }
        }
    }
    for l in libraries.iter().filter(|l| l.used) {
        set(&format!("{}.root", l.name), l.root.display().to_string());
        if let Some(d) = &l.include_dir {
            set(&format!("lib.{}.include", l.name), d.display().to_string());
        }
        if let Some(d) = &l.lib_dir {
            set(&format!("lib.{}.dir", l.name), d.display().to_string());
        }
    }
    set("source", source.dir().display().to_string());
    set("python.exe", py.exe.display().to_string());
    set("python.version", py.version.clone());
    set("python.site", py.site_packages.display().to_string());
    set("python.include", py.include.display().to_string());
    set("python.ext-suffix", py.ext_suffix.clone());
    if let Some(t) = torch {
        set("torch.version", t.version.clone());
        set("torch.dir", t.dir.display().to_string());
        set("torch.lib", t.lib.display().to_string());
        set("torch.include", t.include.display().to_string());
        set("torch.cmake", t.cmake.display().to_string());
        // The HIP a ROCm torch was built with (`6.4.43482`) and its major and minor run
        // together (`64`), as packages name per-ROCm libraries (`libfoo_rocm64.so`).
        if let Some(h) = &t.hip {
            set("torch.hip", h.clone());
            let mut n = h.split('.');
            if let (Some(a), Some(b)) = (n.next(), n.next()) {
                set("torch.hip-short", format!("{a}{b}"));
            }
        }
    }
    if let Some(f) = &machine.target.ffmpeg {
        set("ffmpeg.major", f.major.to_string());
        set("ffmpeg.version", f.avutil_version.clone());
        set("ffmpeg.lib", f.lib.display().to_string());
        set("ffmpeg.include", f.include.display().to_string());
    }
    if let Some(c) = &machine.host.toolkits.cuda_home {
        set("cuda.home", c.display().to_string());
    }
    if let Some(r) = &machine.host.toolkits.rocm_path {
        set("rocm.path", r.display().to_string());
    }
    if let Some(f) = &machine.target.ffmpeg {
        let runtime = f.bin.as_ref().unwrap_or(&f.lib);
        set("ffmpeg.runtime", runtime.display().to_string());
    }
    // A declared library not found: its overlays apply only where it is needed, and then the
    // prerequisite check has refused the build already; elsewhere its paths are empty.
    for l in &recipe.raw.needs.library {
        for what in ["include", "dir", "bin"] {
            vars.entry(format!("lib.{}.{what}", l.name)).or_default();
        }
    }
    backend.vars(&mut vars);
    vars
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::EngineError;
    use crate::plan::testing::{ctx, recipe};
    use crate::toolchain;
    use crate::vars::expand;
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::cpu_machine;
    use std::path::PathBuf;

    #[test]
    fn variables_come_from_the_machine_and_missing_ones_say_why() {
        let r = recipe("torchcodec");
        let mut m = cpu_machine(Os::Macos);
        let b = toolchain::choose(&r, &m, &Default::default()).unwrap();
        let src = SourcePlan::Local {
            dir: PathBuf::from("/src"),
        };
        let v = of(&r, "0.9.1", &m, &ctx(Os::Macos), &[], &src, &b);
        assert_eq!(
            v["torch.lib"],
            "/Users/me/venv/lib/python3.11/site-packages/torch/lib"
        );
        assert_eq!(v["ffmpeg.major"], "7");
        assert_eq!(v["ffmpeg.runtime"], "/opt/homebrew/opt/ffmpeg/lib");
        assert_eq!(v["jobs"], "2");
        assert_eq!(expand("{source}/x", &v).unwrap(), "/src/x");
        m.target.ffmpeg = None;
        let v = of(&r, "0.9.1", &m, &ctx(Os::Macos), &[], &src, &b);
        match expand("{ffmpeg.lib}", &v) {
            Err(EngineError::NoValue { variable, why, .. }) => {
                assert_eq!(variable, "ffmpeg.lib");
                assert_eq!(why, "no FFmpeg was found");
            }
            other => panic!("{other:?}"),
        }
    }
}
