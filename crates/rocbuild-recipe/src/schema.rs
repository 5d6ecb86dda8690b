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
    /// Where the Python package comes from; without this table, from the package index.
    #[serde(default)]
    pub python: Python,
    /// Overlays per operating system: `linux`, `macos`, `windows`.
    #[serde(default)]
    pub os: BTreeMap<Text, Overlay>,
    /// Overlays per operating system and CPU architecture, keyed `<os>-<arch>`:
    /// `linux-x86_64`, `macos-aarch64`, `windows-x86_64` (applied after `[os.X]`).
    #[serde(default)]
    pub platform: BTreeMap<Text, Overlay>,
    /// Overlays per torch flavor: `cpu`, `cuda`, `rocm`.
    #[serde(default)]
    pub flavor: BTreeMap<Text, Overlay>,
    /// Overlays per recipe version range, keyed by a PEP 440 specifier such as `">=0.16"`.
    #[serde(default)]
    pub versions: BTreeMap<Text, Overlay>,
    /// Overlays per compute backend: `cpu`, `rocm`, `cuda` (only those in `package.backends`).
    #[serde(default)]
    pub backend: BTreeMap<Text, Overlay>,
    /// Overlays per ROCm SDK version range (for the `rocm` backend), such as `"<7"`.
    #[serde(default)]
    pub rocm_versions: BTreeMap<Text, Overlay>,
    /// Overlays applied when the machine has an optional library the build can use: `mkl`
    /// (Intel oneAPI MKL, `{mkl.root}`).
    #[serde(default)]
    pub with: BTreeMap<Text, Overlay>,
    /// The C++ compiler upstream's own wheels are built with, per OS, and what a build by
    /// another one changes in the results: the plan says so when this machine's differs.
    #[serde(default)]
    pub wheel_compiler: Option<WheelCompiler>,
    /// Libraries built from source into rocbuild's cache and linked statically, as upstream's
    /// wheels link them: `[dependency.dnnl]` stands for the optional `[[needs.library]]`
    /// named `dnnl`.
    #[serde(default)]
    pub dependency: BTreeMap<Text, Dependency>,
    /// `[[stock-wheel]]`: what the package's own wheels on the index run on. When the venv
    /// fits one, rocbuild says the stock wheel works (with its `pip install` line) and builds
    /// only when asked (`--no-binary`); when none fits, the plan says why a build is needed.
    #[serde(default)]
    pub stock_wheel: Vec<StockWheel>,
    /// `[test]`: upstream's own test suite, run by `rocbuild test` on the installed build.
    #[serde(default)]
    pub test: Option<Test>,
}

/// One kind of the index's wheels: for these OSes and releases, the torch flavours they load
/// with (and the CUDA major a CUDA build links), and what the wheels are, said to the user.
/// The torch range and the FFmpeg majors are the release's own (`[[release]]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StockWheel {
    pub os: Vec<Text>,
    /// Releases (a PEP 440 specifier) whose wheels are like this.
    pub versions: Text,
    /// torch flavours they load with: cpu, cuda, rocm. Empty: they do not link torch, so
    /// its flavour does not matter.
    #[serde(default)]
    pub flavors: Vec<Text>,
    /// The builds they are (cpu, cuda, rocm), for a package whose backend is not torch's:
    /// the stock wheel stands for a build of one of these only. Empty: as `flavors`.
    #[serde(default)]
    pub backends: Vec<Text>,
    /// For a CUDA torch: its CUDA version (a specifier such as ">=13,<14").
    #[serde(default)]
    pub cuda: Option<Text>,
    /// ROCm builds of a package that picks its library by torch's HIP version (bitsandbytes'
    /// `_rocm<MAJOR><MINOR>`): the HIP versions (`6.4`, `7.14`) these wheels carry one for.
    /// Only a rocm build is held to it. Empty: any.
    #[serde(default)]
    pub hip: Vec<Text>,
    /// ROCm builds: the GPU targets their code is for, read from the wheels' own libraries. A
    /// rocm build for a GPU outside them is not these wheels. Empty: not said (any).
    #[serde(default)]
    pub gpu_archs: Vec<Text>,
    /// What these wheels are (`CUDA 13 builds: they link libtorch_cuda and libcudart.so.13`).
    pub says: String,
}

/// `[dependency.NAME]`: a CMake project built from source once per configuration into
/// rocbuild's cache (shared by every venv), installed into a prefix there and linked
/// statically. It stands for the optional `[[needs.library]]` of the same name: `[with.NAME]`
/// applies and `{lib.NAME.include}` / `{lib.NAME.dir}` point into its prefix, whatever copy of
/// the library the machine has. Nothing of it is installed into the venv.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Dependency {
    /// What it is and why it is built, for the plan (`oneDNN 3.1.1, as upstream's wheels link it`).
    pub describe: String,
    pub git: Text,
    /// The tag built (`v3.1.1`).
    pub tag: Text,
    /// The tag's commit: a tag that moved is refused.
    pub commit: Text,
    /// Built only for these backends (all when empty).
    #[serde(default)]
    pub backends: Vec<Text>,
    /// Built only on these `<os>-<arch>` platforms (all when empty).
    #[serde(default)]
    pub platforms: Vec<Text>,
    /// CMake defines of its configure (rocbuild adds the compilers, the generator, the install
    /// prefix, static libraries and position-independent code).
    #[serde(default)]
    pub define: BTreeMap<String, Text>,
    /// Not built when the user's `-D` gives one of these CMake variables of the package's
    /// build another value: `{ WITH_DNNL = "ON" }`.
    #[serde(default)]
    pub when: BTreeMap<String, String>,
    /// `[dependency.NAME.os.windows.define]`: defines added (or replaced) for one OS.
    #[serde(default)]
    pub os: BTreeMap<Text, DependencyOs>,
}

/// `[dependency.NAME.os.<os>]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DependencyOs {
    #[serde(default)]
    pub define: BTreeMap<String, Text>,
}

/// `[wheel-compiler]`: `linux = "gcc 14"` (a family — gcc, clang, apple-clang, msvc — and a
/// major version) for each OS whose wheels are known, the backends it matters for, and what
/// differs from the wheel's results when another compiler builds it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct WheelCompiler {
    #[serde(default)]
    pub linux: Option<Text>,
    #[serde(default)]
    pub macos: Option<Text>,
    #[serde(default)]
    pub windows: Option<Text>,
    /// Only builds for these backends (empty: every backend).
    #[serde(default)]
    pub backends: Vec<Text>,
    pub differs: String,
}

impl WheelCompiler {
    /// The wheels' compiler on this OS (`linux`, `macos`, `windows`), parsed.
    pub fn on(&self, os: &str) -> Option<CompilerSpec> {
        let t = match os {
            "linux" => &self.linux,
            "macos" => &self.macos,
            "windows" => &self.windows,
            _ => &None,
        };
        CompilerSpec::parse(t.as_ref()?.get_ref())
    }
}

/// A compiler family and major version, such as GCC 14.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompilerSpec {
    pub family: &'static str,
    pub major: u32,
}

impl CompilerSpec {
    pub const FAMILIES: &'static [&'static str] = &["gcc", "clang", "apple-clang", "msvc"];

    /// `gcc 14`, `clang 18`, `apple-clang 15`, `msvc 19`.
    pub fn parse(s: &str) -> Option<Self> {
        let (family, major) = s.trim().split_once(' ')?;
        let family = *Self::FAMILIES.iter().find(|f| **f == family)?;
        Some(CompilerSpec {
            family,
            major: major.trim().parse().ok()?,
        })
    }

    /// How people name the family: GCC, Clang, Apple Clang, MSVC.
    pub fn family_name(family: &str) -> &'static str {
        match family {
            "gcc" => "GCC",
            "clang" => "Clang",
            "apple-clang" => "Apple Clang",
            "msvc" => "MSVC",
            _ => "an unknown compiler",
        }
    }
}

impl std::fmt::Display for CompilerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", Self::family_name(self.family), self.major)
    }
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
    /// Compute backends the recipe can build (`cpu`, `rocm`, `cuda`); the first is the
    /// fallback when nothing better is installed. Empty: no backend choice (CPU code only).
    #[serde(default)]
    pub backends: Vec<Text>,
    /// Windows: the directories upstream's `__init__.py` adds with `os.add_dll_directory`
    /// before loading its DLLs, so that doctor searches what the package really searches.
    #[serde(default)]
    pub windows_dll_dirs: Option<WindowsDllDirs>,
    /// File-name globs of native libraries of which the package loads one, picked at run
    /// time by what the machine has (one per backend): doctor expects the
    /// others not to load here, as long as one does.
    #[serde(default)]
    pub loads_one_of: Vec<String>,
}

/// `[package.windows-dll-dirs]`: directories relative to site-packages, in the order the
/// package adds them; `in-one-try`: they are added inside one `try` that swallows a missing
/// directory, so the first missing one stops the rest from being added.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct WindowsDllDirs {
    pub dirs: Vec<String>,
    #[serde(default)]
    pub in_one_try: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Source {
    /// A git repository (with `tag`), or
    #[serde(default)]
    pub git: Option<Text>,
    /// Tag template, such as `v{version}`.
    #[serde(default)]
    pub tag: Option<Text>,
    /// a PyPI project whose source distribution holds the whole source (`llama-cpp-python`
    /// carries llama.cpp's): each release's sdist, pinned by its `[[release]] sha256`, from
    /// the index, or offline from a directory of sdists (`$ROCBUILD_SDISTS`, or `pypi/` under
    /// `$ROCBUILD_MIRROR`).
    #[serde(default)]
    pub sdist: Option<Text>,
    /// `true`: every submodule, recursively; a list: only these paths (and their own
    /// submodules); overlays may add paths (`[backend.cuda.source] submodules = [...]`).
    #[serde(default)]
    pub submodules: Submodules,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Submodules {
    All(bool),
    Paths(Vec<String>),
}

impl Default for Submodules {
    fn default() -> Self {
        Submodules::All(false)
    }
}

/// What an overlay may add to `[source]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SourceOverlay {
    #[serde(default)]
    pub submodules: Vec<Text>,
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
    /// sha256 of the release's sdist (`[source] sdist`): another file is refused.
    #[serde(default)]
    pub sha256: Option<Text>,
    #[serde(default)]
    pub note: Option<String>,
    /// `false`: never picked as the default version (known broken, or no tag upstream).
    #[serde(default = "yes")]
    pub default: bool,
    /// PEP 440 specifier for the FFmpeg majors this release builds against (`">=4,<9"`);
    /// absent: any.
    #[serde(default)]
    pub ffmpeg: Option<Text>,
    /// PEP 440 specifier for the HIP versions this release builds with, counting the
    /// compatibility measures the recipe takes (`[rocm-versions.*]`); absent: any.
    #[serde(default)]
    pub hip: Option<Text>,
    /// PEP 440 specifier for the CUDA toolkit versions this release builds with (`"<13"`);
    /// absent: any.
    #[serde(default)]
    pub cuda: Option<Text>,
    /// Why it does not build with the other CUDA versions, and what works instead (said when
    /// a build is refused for it).
    #[serde(default)]
    pub cuda_why: Option<String>,
    /// Fixes of the recipe's own, applied by libgit2 (no `git` program) to this release's
    /// checkout before the user's `--patch` files.
    #[serde(default)]
    pub patch: Vec<RecipePatch>,
    /// Why releases upstream tags after this one, that the recipe does not list, must not be
    /// built with its rules (`--version NEWER` is then refused before anything is fetched).
    #[serde(default)]
    pub stop_newer: Option<Text>,
    /// Set by rocbuild, never read from a recipe: the listed release whose rules build this
    /// unlisted one ([`crate::Recipe::with_unlisted`]).
    #[serde(skip)]
    pub(crate) rules_of: Option<String>,
}

/// A fix a recipe ships for one release: a unified diff written for it (zero-context hunks
/// allowed), with why it is needed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RecipePatch {
    pub name: String,
    pub why: String,
    pub diff: String,
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
    /// Distributions the package needs at run time in the venv (rocbuild installs its own
    /// part with --no-deps and never changes the user's other packages): checked before the
    /// build, with the pip command that installs the missing ones.
    #[serde(default)]
    pub python: Vec<String>,
    /// The rocm backend links hipBLAS (CTranslate2): an SDK without it is refused before the
    /// build.
    #[serde(default)]
    pub hipblas: bool,
    /// The CUDA toolkit libraries the cuda backend links (`cublas`): a toolkit rocbuild
    /// installs from the package index gets their pinned wheels too (or the venv's own copy).
    #[serde(default)]
    pub cuda_libraries: Vec<String>,
    /// System libraries (headers, libraries) the build needs, or can use.
    #[serde(default)]
    pub library: Vec<NeededLibrary>,
}

/// A system library a build needs, looked for before anything is fetched (where a compiler
/// on this machine would find it, the ROCm SDK's directories included) and named with its
/// package when missing.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct NeededLibrary {
    /// Short name: the key of `[with.NAME]` overlays for an optional library.
    pub name: String,
    /// What it is, for messages (`OpenBLAS`, `LLVM's OpenMP runtime`).
    pub describe: String,
    #[serde(default)]
    pub headers: Vec<String>,
    #[serde(default)]
    pub libs: Vec<String>,
    /// Needed only when each of these CMake variables has this value in the configure
    /// (the user's `-D` included): `{ WITH_OPENBLAS = "ON" }`.
    #[serde(default)]
    pub when: BTreeMap<String, String>,
    /// Needed only for these backends (all when empty).
    #[serde(default)]
    pub backends: Vec<String>,
    /// Never required: when found, `[with.NAME]` applies (image codecs, say).
    #[serde(default)]
    pub optional: bool,
    /// For an optional library: what a build without it loses and how to get it, shown in
    /// the plan when it is not found.
    #[serde(default)]
    pub missing: Option<String>,
    /// Its package per family: `debian`, `fedora`, `arch`, `alpine`, `brew`, `windows`, and
    /// `rocm-repo` for AMD's own repository (an SDK under /opt/rocm).
    #[serde(default)]
    pub packages: BTreeMap<String, String>,
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
            python: Vec::new(),
            hipblas: false,
            cuda_libraries: Vec::new(),
            library: Vec::new(),
        }
    }
}

/// `[build] system`: the build system that turns the source into artifacts. Each is one
/// implementation of the engine's `BuildSystem` trait; a new one is a variant here and a file
/// there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BuildSystem {
    /// The source's CMake project, configured, built and installed by rocbuild.
    #[default]
    Cmake,
    /// The source's PEP 517 build backend (setuptools, scikit-build-core …), run by
    /// `pip wheel --no-build-isolation` against the venv's own packages (its torch).
    Pep517,
}

impl BuildSystem {
    pub fn as_str(self) -> &'static str {
        match self {
            BuildSystem::Cmake => "cmake",
            BuildSystem::Pep517 => "pep517",
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
    /// How the source becomes artifacts: `cmake` (the default) or `pep517` (the source's own
    /// build backend, through `pip wheel --no-build-isolation`).
    pub system: Option<BuildSystem>,
    /// Directory of the top-level CMakeLists.txt inside the source.
    pub cmake_source: Option<Text>,
    pub generator: Option<Text>,
    pub torch_cmake: Option<TorchCmake>,
    #[serde(default)]
    pub define: BTreeMap<String, Text>,
    #[serde(default)]
    pub env: BTreeMap<String, Text>,
    /// PEP 517 config settings for the source's build backend (`pip wheel -C KEY=VALUE`):
    /// what scikit-build-core (`cmake.define.X`, `cmake.build-type`) and meson-python
    /// (`setup-args`) read. `system = "pep517"` only.
    #[serde(default)]
    pub config_settings: BTreeMap<String, Text>,
    /// Compatibility definitions rocbuild owns, force-included into every HIP source when the
    /// SDK's HIP lacks them (`"syncwarp"`: `__syncwarp`, which HIP declares only from 7).
    #[serde(default)]
    pub hip_compat: Vec<Text>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Install {
    /// File-name globs matched anywhere under the CMake install prefix (or where
    /// `artifacts-in` says).
    #[serde(default)]
    pub artifacts: Vec<Text>,
    /// Where the build leaves the artifacts: `prefix` (the CMake install prefix, the default),
    /// `build` (the build tree: a project without install rules), `source` (the checkout: a
    /// project whose CMake writes its library into its own Python package directory).
    #[serde(default)]
    pub artifacts_in: Option<ArtifactsIn>,
    /// `site`: that root is laid out as site-packages (a scikit-build-core project installed
    /// with its platlib there): each artifact keeps its path under it (`pkg/lib/libx.so`) and
    /// every name it has (`libx.so` and `libx.so.0` alike). Default `flat`: into the import
    /// directory, one file per library under its SONAME.
    #[serde(default)]
    pub layout: Option<ArtifactLayout>,
    /// Directories the artifacts must find at run time (RUNPATH / @rpath / DLL preload).
    #[serde(default)]
    pub finds: Vec<Text>,
    /// Globs (relative to the import dir) of the wheel's own libraries to park in the backup:
    /// they would shadow the rebuilt ones or fail to load on this machine.
    #[serde(default)]
    pub park: Vec<Text>,
    /// Globs (relative to site-packages) of native files of the Python part that must find
    /// the artifacts and `finds` too (CTranslate2's `_ext` next to `libctranslate2`).
    #[serde(default)]
    pub python_libs: Vec<Text>,
}

/// `[install] layout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArtifactLayout {
    #[default]
    Flat,
    Site,
}

/// `[install] artifacts-in`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArtifactsIn {
    #[default]
    Prefix,
    Build,
    Source,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Verify {
    pub python: Option<Text>,
}

/// Where the Python part of the package comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PythonFrom {
    /// `pip install DIST==VERSION` from the index: its pure-Python files, the native ones
    /// replaced by the rebuilt artifacts.
    #[default]
    Pypi,
    /// A wheel built from a directory of the checkout after the CMake install (its native
    /// extension links the libraries just built).
    Source,
    /// A wheel rocbuild assembles itself: the checkout's pure-Python package plus the native
    /// module compiled by a small CMake project rocbuild writes (pybind11), with the same
    /// toolchain as the library. For when the package's own build cannot target this venv
    /// (setuptools on Linux cannot compile for a Windows venv). `[python.extension]` says what.
    Extension,
}

/// `[python.extension]`: the native module of a `from = "extension"` Python part.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Extension {
    /// The module's dotted name (`ctranslate2._ext`): its package is where it is installed.
    pub module: Text,
    /// Its C++ sources: CMake globs relative to the checkout (`python/cpp/*.cc`).
    pub sources: Vec<Text>,
    /// The pure-Python package, a directory of the checkout copied whole (`python/ctranslate2`).
    pub package: Text,
    /// Include directories (templates: `{prefix}/include`).
    #[serde(default)]
    pub include: Vec<Text>,
    /// Libraries linked, by name, found in `{prefix}/lib` (`ctranslate2`).
    #[serde(default)]
    pub link: Vec<Text>,
    /// The C++ standard (default 17).
    #[serde(default)]
    pub cxx_standard: Option<u32>,
    /// The package's console scripts, as its own build declares them (name = "module:func"):
    /// written to the wheel's `entry_points.txt`.
    #[serde(default)]
    pub console_scripts: BTreeMap<String, Text>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Python {
    pub from: Option<PythonFrom>,
    /// For `from = "source"`: the directory holding setup.py / pyproject.toml.
    pub dir: Option<Text>,
    /// Environment of the wheel build (`CTRANSLATE2_ROOT = "{prefix}"`).
    #[serde(default)]
    pub env: BTreeMap<String, Text>,
    /// For `from = "extension"`: the native module rocbuild compiles.
    pub extension: Option<Extension>,
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
    #[serde(default)]
    pub python: Option<Python>,
    #[serde(default)]
    pub source: Option<SourceOverlay>,
}

impl Source {
    /// Where the source is, as said to the user: the git URL template, or the sdist's project
    /// page.
    pub fn origin(&self) -> String {
        match (&self.git, &self.sdist) {
            (Some(g), _) => g.get_ref().clone(),
            (None, Some(p)) => format!("https://pypi.org/project/{}/", p.get_ref()),
            (None, None) => String::new(),
        }
    }
}

/// `[test]`: how upstream's own tests run against an installed build (`rocbuild test`). They
/// are taken from the checkout the build was made from, copied into a folder of the run's own
/// (so nothing of the checkout shadows the installed package), and run by pytest.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Test {
    /// Folders and files of the checkout the tests need (tests and the resources they read),
    /// relative to the checkout.
    pub files: Vec<Text>,
    /// What pytest needs beyond the venv (pip requirement strings), installed into an overlay
    /// outside the venv when the venv lacks them.
    #[serde(default)]
    pub requirements: Vec<String>,
    /// What pytest runs (paths or node ids, relative to the copied files) [default: all].
    #[serde(default)]
    pub run: Vec<String>,
    /// What `--quick` runs instead: a smoke subset.
    #[serde(default)]
    pub quick: Vec<String>,
    /// More pytest arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment of the test run.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Folders to create (relative to the copied files) before the run.
    #[serde(default)]
    pub dirs: Vec<Text>,
    /// Programs the tests run (`ffmpeg`, `ffprobe`): one missing from PATH is said before the
    /// run, since its tests will fail.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Which tests need a GPU: deselected when the venv's torch sees none.
    #[serde(default)]
    pub device: Option<TestDevice>,
    /// Failures that are upstream's own, not the build's.
    #[serde(default)]
    pub known_failure: Vec<KnownFailure>,
    /// Tests that import a package the package itself does not need (CTranslate2's that
    /// convert torch weights): deselected, and said, when the venv cannot import it.
    #[serde(default)]
    pub optional_module: Vec<OptionalModule>,
}

/// `[[test.optional-module]]`: the tests that need `module`, by pytest marker or by `-k`
/// expression.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct OptionalModule {
    /// What the tests import (`torch`).
    pub module: String,
    /// A pytest marker (`-m "not MARKER"` deselects them).
    pub marker: Option<String>,
    /// A pytest `-k` expression (`-k "not (EXPR)"` deselects them).
    pub keyword: Option<String>,
}

/// `[test.device]`: the tests that need a GPU, by pytest marker or by `-k` expression.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TestDevice {
    /// A pytest marker (`-m "not MARKER"` deselects them).
    pub marker: Option<String>,
    /// A pytest `-k` expression (`-k "not (EXPR)"` deselects them).
    pub keyword: Option<String>,
}

/// `[[test.known-failure]]`: a test that fails for a reason of upstream's (or the machine's),
/// with where it applies.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct KnownFailure {
    /// A pytest node id (`test/test_ops.py::test_x[cpu]`), `*` matching any text.
    pub test: Text,
    /// Why it fails, said beside it.
    pub reason: String,
    /// Releases it fails on (PEP 440) [default: all].
    pub versions: Option<Text>,
    /// Operating systems it fails on [default: all].
    #[serde(default)]
    pub os: Vec<Text>,
    /// Torch flavours it fails with [default: all].
    #[serde(default)]
    pub flavors: Vec<Text>,
}
