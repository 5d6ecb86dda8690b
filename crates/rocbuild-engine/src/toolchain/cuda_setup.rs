//! The CUDA toolkit a cuda build uses, found or installed before planning: the one step of a
//! CUDA build the pure planner cannot take, since what the toolkit can do (its version, the
//! archs its nvcc knows, the host compilers its `crt/host_config.h` accepts) is read from the
//! toolkit itself.
//!
//! A system toolkit wins (`CUDA_HOME`, `CUDA_PATH`, `/usr/local/cuda`, nvcc on `PATH`), the one
//! `--cuda X.Y` names when several are there. With none (or none of that version), the pinned
//! wheels of `recipes/downloads/cuda.toml` are installed into the tools area and assembled into
//! one root, as cmake and ninja are: by version and sha256, cached, offline from the cache.
//! Then the host compiler is chosen. The result goes into the machine (`toolkits.cuda`), where
//! the planner checks the archs and the release's CUDA range.

use std::path::{Path, PathBuf};

use rocbuild_fetch::{install_cuda_toolkit, CudaInstall, CudaPins};
use rocbuild_probe::{
    choose_host_compiler, host_candidates, read_cuda_toolkit, system_cuda_roots, CudaFound,
    CudaToolkit, Machine, ProbeEnv,
};
use rocbuild_recipe::Recipe;
use rocbuild_venv::{Backend, BackendOptions};

use crate::error::{EngineError, Result};

/// Whether this request builds the cuda backend with a toolkit rocbuild must find first:
/// `--backend cuda`, `--cuda X.Y`, or `--cuda-arch` without another backend, for a recipe
/// that has a cuda backend.
pub fn wanted(recipe: &Recipe, opts: &BackendOptions) -> bool {
    let has = recipe
        .raw
        .package
        .backends
        .iter()
        .any(|b| b.get_ref() == "cuda");
    let asked = match opts.backend {
        Some(b) => b == Backend::Cuda,
        None => opts.cuda.is_some() || !opts.cuda_arch.is_empty(),
    };
    has && asked
}

/// `13.2` names 13.2; `13` names any 13.x.
fn version_fits(found: &str, asked: &str) -> bool {
    found == asked
        || found
            .strip_prefix(asked)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// What the toolkit step needs besides the machine.
pub struct CudaRequest<'a> {
    pub cache: &'a Path,
    /// `ROCBUILD_CUDA_WHEELS`: directories holding the pinned wheels (offline use).
    pub wheels: &'a [PathBuf],
    /// A dry run installs nothing: a toolkit not yet assembled is said, not fetched.
    pub dry_run: bool,
    /// `--version`: the release to build (None: the newest default one).
    pub version: Option<&'a str>,
    /// The command's environment (`CUDA_HOME`, `CUDA_PATH`, `PATH`), read once by the
    /// settings step.
    pub env: &'a ProbeEnv,
}

/// Finds or installs the toolkit and puts it into `machine` (with the host compiler chosen
/// for it); `notes` get one line each of what was done.
pub fn prepare(
    recipe: &Recipe,
    machine: &mut Machine,
    opts: &BackendOptions,
    req: &CudaRequest,
    notes: &mut Vec<String>,
) -> Result<()> {
    let env = req.env;
    let asked = opts.cuda.as_deref();
    let mut seen: Vec<String> = Vec::new();
    let mut system: Option<(CudaToolkit, String)> = None;
    for (root, from) in system_cuda_roots(env) {
        match read_cuda_toolkit(&root) {
            Ok(tk) if asked.is_none_or(|a| version_fits(&tk.version, a)) => {
                system = Some((tk, from));
                break;
            }
            Ok(tk) => seen.push(format!(
                "CUDA {} at {} ({from})",
                tk.version,
                root.display()
            )),
            Err(why) => seen.push(format!("{} ({from}): {why}", root.display())),
        }
    }
    let (toolkit, from, wheels) = match system {
        Some((tk, from)) => (tk, from, Vec::new()),
        None => {
            let platform = &machine.host.platform;
            let pins = CudaPins::builtin();
            let pin = pins.pick(platform.os.as_str(), &platform.arch, asked)?;
            // Nothing is downloaded for a dry run, nor for a toolkit no release can build with
            // (the planner refuses it, with the recipe's why).
            let usable = recipe.releases().iter().any(|r| {
                req.version.map_or(r.default, |v| r.version == v)
                    && rocbuild_recipe::cuda_compatible(r, &pin.version)
            });
            if req.dry_run || !usable {
                let at = req.cache.join("tools").join("cuda").join(&pin.release);
                if usable {
                    notes.push(format!(
                        "CUDA {} would be installed from the package index into {} when the build runs",
                        pin.version,
                        at.display()
                    ));
                }
                machine.host.toolkits.cuda_home = Some(at);
                machine.host.toolkits.cuda_version = Some(pin.version.clone());
                return Ok(());
            }
            let install = CudaInstall {
                downloads: req.cache.join("downloads"),
                tools: req.cache.join("tools"),
                offline: req.wheels.to_vec(),
                libraries: recipe.raw.needs.cuda_libraries.clone(),
                site_packages: Some(machine.target.python.site_packages.clone()),
                cc: machine.host.tools.cc.as_ref().map(|t| t.path.as_path()),
            };
            let root = install_cuda_toolkit(pin, &install).map_err(|e| match e {
                // Say which system toolkits were seen, so the user knows what else is there.
                rocbuild_fetch::FetchError::NoCudaCompiler { .. } if !seen.is_empty() => {
                    EngineError::CudaToolkit {
                        reason: e.to_string(),
                        help: format!(
                            "the system toolkits found are of other versions: {}; name one of them with --cuda, or install NVIDIA's CUDA {} and set CUDA_HOME",
                            seen.join("; "),
                            pin.version
                        ),
                    }
                }
                e => e.into(),
            })?;
            let tk = read_cuda_toolkit(&root.root).map_err(|reason| EngineError::CudaToolkit {
                reason: format!(
                    "the CUDA {} toolkit assembled from the package index does not work: {reason}",
                    pin.version
                ),
                help: format!(
                    "remove {} and run again; if it persists, report it with this message",
                    root.root.display()
                ),
            })?;
            (
                tk,
                "the package index (rocbuild's tools area)".to_string(),
                root.wheels,
            )
        }
    };
    let (host, host_refused) = match choose_host_compiler(&toolkit.host, &host_candidates(env)) {
        Ok(h) => (Some(h), Vec::new()),
        Err(refused) => (None, refused),
    };
    notes.push(format!(
        "CUDA {} at {} (from {from})",
        toolkit.version,
        toolkit.root.display()
    ));
    machine.host.toolkits.cuda_home = Some(toolkit.root.clone());
    machine.host.toolkits.cuda = Some(CudaFound {
        toolkit,
        from,
        wheels,
        host,
        host_refused,
    });
    Ok(())
}

/// The build use case's call: nothing unless [`wanted`]; each note goes to `note`.
pub fn for_build(
    recipe: &Recipe,
    machine: &mut Machine,
    opts: &rocbuild_venv::BuildOptions,
    req: &CudaRequest,
    note: &mut dyn FnMut(&str),
) -> Result<()> {
    if !wanted(recipe, &opts.backend) {
        return Ok(());
    }
    let mut notes = Vec::new();
    let done = prepare(recipe, machine, &opts.backend, req, &mut notes);
    for n in &notes {
        note(&format!("note: {n}"));
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_major_names_its_minors() {
        assert!(version_fits("13.2", "13.2"));
        assert!(version_fits("13.2", "13"));
        assert!(!version_fits("13.2", "1"));
        assert!(!version_fits("12.9", "13"));
    }
}
