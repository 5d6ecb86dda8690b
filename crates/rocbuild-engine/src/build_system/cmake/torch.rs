//! torch's CMake package: `native` (torch's own TorchConfig.cmake; a CUDA or ROCm torch then
//! demands its toolkit) or `lite` (a minimal one rocbuild writes, enough for CPU code on any
//! torch).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocbuild_probe::{Flavor, Machine};
use rocbuild_recipe::{Recipe, Resolved, TorchCmake};
use rocbuild_venv::BuildOptions;
use serde::Serialize;

use super::torch_lite;
use crate::error::{EngineError, Result};
use crate::paths::{hash_hex, join};

#[derive(Debug, Clone, Serialize)]
pub struct TorchCmakePlan {
    pub mode: TorchCmake,
    /// The directory given as `Torch_DIR`.
    pub dir: PathBuf,
    /// For `lite`: the TorchConfig.cmake rocbuild writes.
    pub contents: Option<String>,
}

/// `--torch-cmake`, else the recipe's choice, else `native`. None when the build does not
/// use torch.
pub fn plan(
    recipe: &Recipe,
    machine: &Machine,
    opts: &BuildOptions,
    resolved: &Resolved,
    cache: &Path,
) -> Option<TorchCmakePlan> {
    let os = machine.target.platform.os;
    let t = machine
        .target
        .torch
        .as_ref()
        .filter(|_| recipe.raw.needs.torch)?;
    let mode = opts
        .torch_cmake
        .or(resolved.torch_cmake)
        .unwrap_or(TorchCmake::Native);
    Some(match mode {
        TorchCmake::Native => TorchCmakePlan {
            mode,
            dir: join(os, &t.cmake, &["Torch"]),
            contents: None,
        },
        TorchCmake::Lite => {
            let contents = torch_lite::lite_config(os, t);
            let dir = join(
                machine.host.platform.os,
                cache,
                &["torch-lite", &hash_hex(&[&contents])[..16]],
            );
            TorchCmakePlan {
                mode,
                dir,
                contents: Some(contents),
            }
        }
    })
}

/// torch's own CMake package demands the toolkit it was built with: its root goes into the
/// environment and the defines; returned so the manifest can record it.
pub fn native_toolkit(
    machine: &Machine,
    flavor: Flavor,
    define: &mut BTreeMap<String, String>,
    env: &mut BTreeMap<String, String>,
) -> Result<Option<PathBuf>> {
    let tk = &machine.host.toolkits;
    match flavor {
        Flavor::Cpu => Ok(None),
        Flavor::Cuda => {
            let home = tk.cuda_home.as_ref().ok_or_else(|| EngineError::NoValue {
                variable: "cuda.home".into(),
                why: "torch's own CMake package for a CUDA torch needs a CUDA toolkit and none was found".into(),
                help: "set CUDA_HOME to a CUDA toolkit, or use --torch-cmake lite (no GPU toolkit needed for CPU code)".into(),
            })?;
            env.insert("CUDA_HOME".into(), home.display().to_string());
            define.insert("CUDAToolkit_ROOT".into(), home.display().to_string());
            Ok(Some(home.clone()))
        }
        Flavor::Rocm => {
            let root = tk.rocm_path.as_ref().ok_or_else(|| EngineError::NoValue {
                variable: "rocm.path".into(),
                why: "torch's own CMake package for a ROCm torch needs a ROCm root and none was found".into(),
                help: "set ROCM_PATH (or HIP_PATH) to a ROCm SDK, or use --torch-cmake lite".into(),
            })?;
            let r = root.display().to_string();
            env.insert("ROCM_PATH".into(), r.clone());
            env.insert("HIP_PATH".into(), r.clone());
            let clang = tk
                .hip_clang_path
                .clone()
                .unwrap_or_else(|| join(machine.target.platform.os, root, &["lib", "llvm", "bin"]));
            env.insert("HIP_CLANG_PATH".into(), clang.display().to_string());
            define.insert("CMAKE_PREFIX_PATH".into(), r);
            Ok(Some(root.clone()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::recipe;
    use rocbuild_probe::Os;
    use rocbuild_testkit::machine::machine;

    #[test]
    fn lite_writes_its_own_config_native_points_at_torch() {
        let r = recipe("torchcodec");
        let m = machine(Os::Linux);
        let lite = BuildOptions {
            torch_cmake: Some(TorchCmake::Lite),
            ..BuildOptions::default()
        };
        let p = plan(&r, &m, &lite, &Resolved::default(), Path::new("/cache")).unwrap();
        assert!(p.dir.starts_with("/cache/torch-lite"));
        assert!(p.contents.unwrap().contains("libtorch_cpu.so"));
        let p = plan(
            &r,
            &m,
            &BuildOptions::default(),
            &Resolved::default(),
            Path::new("/cache"),
        )
        .unwrap();
        assert_eq!(p.dir, m.target.torch.unwrap().cmake.join("Torch"));
        // A recipe that does not use torch has no torch CMake package.
        assert!(plan(
            &recipe("ctranslate2"),
            &machine(Os::Linux),
            &lite,
            &Resolved::default(),
            Path::new("/c")
        )
        .is_none());
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "a Unix-host test: it plans a Linux ROCm build, whose paths a Windows host (which never builds for Linux) joins with `\\`"
    )]
    fn a_rocm_torch_needs_its_root_for_the_native_package() {
        let mut m = machine(Os::Linux);
        let (mut d, mut e) = (BTreeMap::new(), BTreeMap::new());
        assert!(matches!(
            native_toolkit(&m, Flavor::Rocm, &mut d, &mut e),
            Err(EngineError::NoValue { .. })
        ));
        m.host.toolkits.rocm_path = Some(PathBuf::from("/opt/rocm-6.4.3"));
        let tk = native_toolkit(&m, Flavor::Rocm, &mut d, &mut e).unwrap();
        assert_eq!(tk, Some(PathBuf::from("/opt/rocm-6.4.3")));
        assert_eq!(e["HIP_CLANG_PATH"], "/opt/rocm-6.4.3/lib/llvm/bin");
        assert_eq!(d["CMAKE_PREFIX_PATH"], "/opt/rocm-6.4.3");
    }
}
