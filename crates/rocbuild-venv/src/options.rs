//! The options a build was made with: what the user asked for on the command line, stored as
//! is in the manifest so `rebuild` repeats the build exactly.

use std::fmt;
use std::path::PathBuf;

use rocbuild_recipe::TorchCmake;
use serde::{Deserialize, Serialize};

/// The compute backend of a build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cpu,
    Rocm,
    Cuda,
}

impl Backend {
    pub const ALL: [Backend; 3] = [Backend::Cpu, Backend::Rocm, Backend::Cuda];

    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Rocm => "rocm",
            Backend::Cuda => "cuda",
        }
    }

    pub fn parse(s: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.as_str() == s)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the user asked for about the backend.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BackendOptions {
    /// `--backend cpu|rocm|cuda`.
    #[serde(default)]
    pub backend: Option<Backend>,
    /// `--rocm 6.2`: the SDK version to use.
    #[serde(default)]
    pub rocm: Option<String>,
    /// `--arch gfx1100 --arch gfx1030` (each may be a `;`/`,` list or a family alias),
    /// split once by [`rocbuild_probe::GpuTargets::parse`].
    #[serde(default)]
    pub arch: rocbuild_probe::GpuTargets,
    /// `--cuda-arch 8.6 --cuda-arch "8.9;9.0"`, split once as `--arch` is (the same typed
    /// list: [`rocbuild_probe::GpuTargets::parse`]); which of them a toolkit can build is
    /// decided by the toolchain.
    #[serde(default)]
    pub cuda_arch: rocbuild_probe::GpuTargets,
    /// `--cuda 13.2`: the CUDA toolkit version to use (a system one, else from the index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
}

/// What the user asked for on the command line. Manifests before this type recorded the same
/// fields (`release` for `version`), so they load as they are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildOptions {
    /// `--version`; None: the newest release compatible with the torch found at build time.
    #[serde(default, alias = "release")]
    pub version: Option<String>,
    /// `--force`: build a release outside its torch range.
    #[serde(default)]
    pub force: bool,
    /// `--no-binary`: build even when the index's own wheel would work here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_binary: bool,
    /// `--no-deps`: refuse, as before, when a run-time Python requirement is missing, instead
    /// of installing it in the same transaction.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_deps: bool,
    /// `--source`: a local directory (built as is unless `rev` is given) or a git URL.
    #[serde(default)]
    pub source: Option<String>,
    /// `--rev`: branch, tag or commit.
    #[serde(default)]
    pub rev: Option<String>,
    /// `--jobs`: not repeated by `rebuild` (the machine decides).
    #[serde(skip)]
    pub jobs: Option<usize>,
    /// `--torch-cmake native|lite`.
    #[serde(default)]
    pub torch_cmake: Option<TorchCmake>,
    /// `--define KEY=VALUE`, in order.
    #[serde(default)]
    pub defines: Vec<(String, String)>,
    /// `--ffmpeg DIR` (or the FFmpeg `rocbuild ffmpeg` fetched).
    #[serde(default)]
    pub ffmpeg_dir: Option<PathBuf>,
    /// `--winsysroot DIR`: the MSVC + Windows SDK a Windows venv is built with from Linux.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winsysroot: Option<PathBuf>,
    /// `--python-headers DIR`: a Windows Python's headers when its install has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_headers: Option<PathBuf>,
    /// `--backend`, `--rocm`, `--arch`, `--cuda-arch`.
    #[serde(flatten)]
    pub backend: BackendOptions,
    /// `--patch FILE`, in order: applied to the checkout before configure.
    #[serde(default)]
    pub patches: Vec<Patch>,
    /// `--index URL` (PEP 503 simple index; also `ROCBUILD_INDEX`): a rebuilt wheel that fits
    /// this machine is installed from there instead of building. `rebuild` looks again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub index: Vec<String>,
    /// `--find-links DIR`: the same, from a directory of wheels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub find_links: Vec<PathBuf>,
}

/// A user's patch (`--patch FILE`): its absolute path and, once planned, the sha256 of its
/// contents (a changed patch makes the build stale; `rebuild` applies the file again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Patch {
    pub path: PathBuf,
    #[serde(default)]
    pub sha256: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_options_of_older_manifests_load() {
        let old = r#"{"release":"0.9.1","force":true,"source":null,"rev":null,
            "torch_cmake":"lite","defines":[["A","1"]],"ffmpeg_dir":null,
            "backend":"rocm","rocm":"6.4","arch":["gfx1010"],"cuda_arch":[]}"#;
        let o: BuildOptions = serde_json::from_str(old).unwrap();
        assert_eq!(o.version.as_deref(), Some("0.9.1"));
        assert_eq!(o.torch_cmake, Some(TorchCmake::Lite));
        assert_eq!(o.backend.backend, Some(Backend::Rocm));
        assert_eq!(o.backend.arch.names(), ["gfx1010"]);
        let back: BuildOptions = serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
        assert_eq!(back, o);
        assert_eq!(
            serde_json::from_str::<BuildOptions>("{}").unwrap(),
            BuildOptions::default()
        );
    }
}
