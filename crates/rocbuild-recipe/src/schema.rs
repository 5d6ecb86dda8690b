//! The recipe file format, as serde reads it.
//!
//! Every table denies unknown keys so a typo is an error with a span, never a silently
//! ignored setting. Strings that may hold templates are `Spanned` so a bad placeholder can
//! be pointed at in the file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toml::Spanned;

/// A string from the recipe file with its byte range, so errors can point at it.
pub type Text = Spanned<String>;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawRecipe {
    pub package: Package,
    pub source: Source,
    #[serde(rename = "release")]
    pub releases: Vec<Release>,
    #[serde(default)]
    pub needs: Needs,
    #[serde(default)]
    pub build: Build,
    pub install: Install,
    #[serde(default)]
    pub verify: Verify,
    /// Overlays per operating system: `linux`, `macos`, `windows`.
    #[serde(default)]
    pub os: BTreeMap<Text, Overlay>,
    /// Overlays per torch flavor: `cpu`, `cuda`, `rocm`.
    #[serde(default)]
    pub flavor: BTreeMap<Text, Overlay>,
    /// Overlays per recipe version range, keyed by a PEP 440 specifier such as `">=0.16"`.
    #[serde(default)]
    pub versions: BTreeMap<Text, Overlay>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Package {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The pip distribution that carries the pure-Python part.
    pub distribution: String,
    /// Directory under site-packages where the artifacts land.
    pub import_dir: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Source {
    pub git: Text,
    /// Tag template, such as `v{version}`.
    pub tag: Text,
    #[serde(default)]
    pub submodules: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Release {
    pub version: Text,
    /// PEP 440 specifier for the torch versions this release works with.
    pub torch: Text,
    /// Expected commit of the tag; a tag that moved is refused.
    #[serde(default)]
    pub commit: Option<Text>,
    #[serde(default)]
    pub note: Option<String>,
    /// `false`: never picked as the default version (known broken, or no tag upstream).
    #[serde(default = "yes")]
    pub default: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Needs {
    #[serde(default = "yes")]
    pub torch: bool,
    #[serde(default)]
    pub ffmpeg: bool,
    /// pip requirements installed into a build-only directory (`{tools}`), never the venv.
    #[serde(default)]
    pub python_build: Vec<Text>,
}

fn yes() -> bool {
    true
}

/// A recipe without `[needs]` builds against torch.
impl Default for Needs {
    fn default() -> Self {
        Needs {
            torch: true,
            ffmpeg: false,
            python_build: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TorchCmake {
    /// torch's own TorchConfig.cmake, with the GPU toolkit it demands.
    Native,
    /// A minimal TorchConfig.cmake written by rocbuild: torch, torch_cpu, c10 and headers.
    Lite,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Build {
    /// Directory of the top-level CMakeLists.txt inside the source.
    pub cmake_source: Option<Text>,
    pub generator: Option<Text>,
    pub torch_cmake: Option<TorchCmake>,
    #[serde(default)]
    pub define: BTreeMap<String, Text>,
    #[serde(default)]
    pub env: BTreeMap<String, Text>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Install {
    /// File-name globs matched anywhere under the CMake install prefix.
    #[serde(default)]
    pub artifacts: Vec<Text>,
    /// Directories the artifacts must find at run time (RUNPATH / @rpath / DLL preload).
    #[serde(default)]
    pub finds: Vec<Text>,
    /// Globs (relative to the import dir) of the wheel's own libraries to park in the backup:
    /// they would shadow the rebuilt ones or fail to load on this machine.
    #[serde(default)]
    pub park: Vec<Text>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Verify {
    pub python: Option<Text>,
}

/// The tables an overlay may change. Maps merge key by key, lists append, scalars replace.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Overlay {
    #[serde(default)]
    pub build: Option<Build>,
    #[serde(default)]
    pub install: Option<Install>,
    #[serde(default)]
    pub verify: Option<Verify>,
}
