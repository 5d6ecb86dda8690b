//! Recipes: what to build, from where, for which torch, and how to check it.
//!
//! `parse` turns TOML into a validated [`Recipe`]; [`Recipe::resolve`] applies the overlay
//! tables for one platform, flavor and version, giving the flat [`Resolved`] the planner uses.

mod error;
mod load;
pub mod names;
pub mod schema;
pub mod template;
pub mod test_suite;
pub mod upstream;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};
use serde::Serialize;

pub use error::{line_col, nearest, RecipeError};
pub use load::parse;
pub use schema::{BuildSystem, PythonFrom, RawRecipe, TorchCmake};

/// The compute backends a recipe may offer.
pub const BACKEND_NAMES: &[&str] = &["cpu", "rocm", "cuda"];
/// The HIP compatibility definitions rocbuild owns (`[build] hip-compat`).
pub const HIP_COMPAT_NAMES: &[&str] = &["syncwarp"];

/// Optional libraries a `[with.X]` overlay may key on.
pub const FEATURE_NAMES: &[&str] = &["mkl"];

/// What the overlays are chosen by.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub os: &'a str,
    /// The CPU architecture as Rust names it (`x86_64`, `aarch64`), for `[platform."os-arch"]`.
    pub arch: &'a str,
    pub flavor: &'a str,
    pub version: &'a str,
    pub backend: &'a str,
    /// The chosen ROCm SDK's version, for `[rocm-versions."…"]`.
    pub rocm_version: Option<&'a str>,
    /// The optional libraries found and used, for `[with.X]`.
    pub features: &'a [&'a str],
}

/// Whether a CMake variable is a list of compiler/linker flags (`CMAKE_CXX_FLAGS`,
/// `CMAKE_CXX_FLAGS_RELEASE`, `CMAKE_SHARED_LINKER_FLAGS`): those compose (overlays append to
/// them, a user's `-D` keeps them first), others replace.
pub fn is_flags_variable(name: &str) -> bool {
    name.starts_with("CMAKE_") && (name.ends_with("_FLAGS") || name.contains("_FLAGS_"))
}

/// Recipes compiled into the binary, so an installed `rocbuild` works anywhere: every
/// `recipes/*.toml` (build.rs), sorted by name.
pub const BUILTIN: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/builtin.rs"));

/// A validated recipe and the text it came from.
#[derive(Debug, Clone)]
pub struct Recipe {
    /// Where it was read from (`<builtin>/NAME.toml` for the embedded ones).
    pub file: String,
    pub text: String,
    /// sha256 of the text: a changed recipe makes earlier builds stale.
    pub hash: String,
    pub raw: RawRecipe,
}

/// One release a recipe can build.
#[derive(Debug, Clone, Serialize)]
pub struct ReleaseInfo {
    pub version: String,
    pub torch: String,
    pub commit: Option<String>,
    /// The sdist's sha256 (an sdist source).
    pub sha256: Option<String>,
    pub note: Option<String>,
    pub default: bool,
    /// FFmpeg majors it builds against (PEP 440 specifier), if the recipe says.
    pub ffmpeg: Option<String>,
    /// HIP versions it builds with (PEP 440 specifier), if the recipe says.
    pub hip: Option<String>,
    /// CUDA toolkit versions it builds with (PEP 440 specifier), if the recipe says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// Why not with other CUDA versions, and what works instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_why: Option<String>,
    /// The recipe's own fixes for this release.
    pub patches: Vec<ShippedPatch>,
    /// A release the recipe does not list, added for this run: the listed release whose
    /// rules build it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules_of: Option<String>,
}

/// A fix a recipe ships for a release (see [`schema::RecipePatch`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShippedPatch {
    pub name: String,
    pub why: String,
    pub diff: String,
}

/// The recipe's settings after overlays, for one (os, flavor, version).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Resolved {
    /// `[build] system`: the last table that says wins.
    pub build_system: schema::BuildSystem,
    pub cmake_source: String,
    pub generator: String,
    pub torch_cmake: Option<TorchCmake>,
    pub define: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
    /// `[build] config-settings`: a PEP 517 backend's `-C KEY=VALUE`, templates unexpanded.
    pub config_settings: BTreeMap<String, String>,
    pub artifacts: Vec<String>,
    /// `[install] artifacts-in`: the last table that says wins.
    pub artifacts_in: schema::ArtifactsIn,
    /// `[install] layout`: the last table that says wins.
    pub artifact_layout: schema::ArtifactLayout,
    pub finds: Vec<String>,
    pub park: Vec<String>,
    pub python_libs: Vec<String>,
    pub verify: Option<String>,
    pub python_from: PythonFrom,
    pub python_dir: Option<String>,
    pub python_env: BTreeMap<String, String>,
    /// `[python.extension]`, templates unexpanded.
    pub python_extension: Option<PythonExtension>,
    pub submodules: SubmoduleSel,
    /// `[build] hip-compat`: rocbuild's compatibility definitions the recipe asks for.
    pub hip_compat: Vec<String>,
}

/// `[python.extension]` after overlays (a later table replaces an earlier one whole).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PythonExtension {
    pub module: String,
    pub sources: Vec<String>,
    pub package: String,
    pub include: Vec<String>,
    pub link: Vec<String>,
    pub cxx_standard: u32,
    pub console_scripts: BTreeMap<String, String>,
}

/// Which submodules to check out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SubmoduleSel {
    #[default]
    None,
    All,
    /// These paths: each with all of its own submodules, unless nested paths under it are
    /// named too (`a`, `a/x`: of a's own submodules only x).
    Only(Vec<String>),
}

impl Recipe {
    pub fn name(&self) -> &str {
        &self.raw.package.name
    }

    /// Releases, newest first.
    pub fn releases(&self) -> Vec<ReleaseInfo> {
        let mut out: Vec<_> = self
            .raw
            .releases
            .iter()
            .map(|r| ReleaseInfo {
                version: r.version.get_ref().clone(),
                torch: r.torch.get_ref().clone(),
                commit: r.commit.as_ref().map(|c| c.get_ref().clone()),
                sha256: r.sha256.as_ref().map(|c| c.get_ref().clone()),
                note: r.note.clone(),
                default: r.default,
                ffmpeg: r.ffmpeg.as_ref().map(|t| t.get_ref().clone()),
                hip: r.hip.as_ref().map(|t| t.get_ref().clone()),
                cuda: r.cuda.as_ref().map(|t| t.get_ref().clone()),
                cuda_why: r.cuda_why.clone(),
                patches: r
                    .patch
                    .iter()
                    .map(|p| ShippedPatch {
                        name: p.name.clone(),
                        why: p.why.clone(),
                        diff: p.diff.clone(),
                    })
                    .collect(),
                rules_of: r.rules_of.clone(),
            })
            .collect();
        out.sort_by_key(|r| std::cmp::Reverse(Version::from_str(&r.version).ok()));
        out
    }

    pub fn release(&self, version: &str) -> Result<ReleaseInfo, RecipeError> {
        let wanted = Version::from_str(version).ok();
        let all = self.releases();
        all.iter()
            .find(|r| {
                r.version == version
                    || (wanted.is_some() && Version::from_str(&r.version).ok() == wanted)
            })
            .cloned()
            .ok_or_else(|| RecipeError::NoRelease {
                recipe: self.name().to_string(),
                version: version.to_string(),
                help: format!(
                    "releases in {}: {}; or pass --rev to build another commit",
                    self.file,
                    all.iter()
                        .map(|r| r.version.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }

    /// Does the recipe use this optional library (`[with.mkl]`)?
    pub fn uses(&self, feature: &str) -> bool {
        self.raw.with.keys().any(|k| k.get_ref() == feature)
    }

    /// The `[dependency.NAME]`s built for this OS, architecture and backend, unless the user's
    /// `-D` (`user_defines`) gives one of their `when` variables another value.
    pub fn dependencies(
        &self,
        os: &str,
        arch: &str,
        backend: &str,
        user_defines: &[(String, String)],
    ) -> Vec<(&str, &schema::Dependency)> {
        let platform = format!("{os}-{arch}");
        self.raw
            .dependency
            .iter()
            .filter(|(_, d)| {
                (d.backends.is_empty() || d.backends.iter().any(|b| b.get_ref() == backend))
                    && (d.platforms.is_empty()
                        || d.platforms.iter().any(|p| *p.get_ref() == platform))
                    && d.when.iter().all(|(k, v)| {
                        user_defines
                            .iter()
                            .rev()
                            .find(|(n, _)| n == k)
                            .is_none_or(|(_, u)| u.eq_ignore_ascii_case(v))
                    })
            })
            .map(|(k, d)| (k.get_ref().as_str(), d))
            .collect()
    }

    /// The backends this recipe can build (`["cpu"]` when it declares none).
    pub fn backends(&self) -> Vec<String> {
        if self.raw.package.backends.is_empty() {
            vec!["cpu".into()]
        } else {
            self.raw
                .package
                .backends
                .iter()
                .map(|b| b.get_ref().clone())
                .collect()
        }
    }

    /// Apply the base tables, then `[os.X]`, `[platform."X-arch"]`, `[flavor.Y]`, every
    /// matching `[versions."…"]`, `[backend.Z]`, every matching `[rocm-versions."…"]` and
    /// `[with.F]` for each feature, in that order.
    pub fn resolve(&self, t: &Target) -> Resolved {
        let raw = &self.raw;
        let mut r = Resolved {
            cmake_source: ".".into(),
            generator: "Ninja".into(),
            ..Resolved::default()
        };
        let base = schema::Overlay {
            build: Some(raw.build.clone()),
            install: Some(raw.install.clone()),
            verify: Some(raw.verify.clone()),
            python: Some(raw.python.clone()),
            source: None,
        };
        r.submodules = match &raw.source.submodules {
            schema::Submodules::All(true) => SubmoduleSel::All,
            schema::Submodules::All(false) => SubmoduleSel::None,
            schema::Submodules::Paths(p) => SubmoduleSel::Only(p.clone()),
        };
        r.apply(&base);
        let keyed = |map: &BTreeMap<schema::Text, schema::Overlay>, key: &str, r: &mut Resolved| {
            for (k, o) in map {
                if k.get_ref() == key {
                    r.apply(o);
                }
            }
        };
        let ranged =
            |map: &BTreeMap<schema::Text, schema::Overlay>, v: Option<&str>, r: &mut Resolved| {
                let Some(v) = v.and_then(|v| Version::from_str(v).ok()) else {
                    return;
                };
                for (k, o) in map {
                    if VersionSpecifiers::from_str(k.get_ref()).is_ok_and(|s| s.contains(&v)) {
                        r.apply(o);
                    }
                }
            };
        keyed(&raw.os, t.os, &mut r);
        keyed(&raw.platform, &format!("{}-{}", t.os, t.arch), &mut r);
        keyed(&raw.flavor, t.flavor, &mut r);
        ranged(&raw.versions, Some(t.version), &mut r);
        keyed(&raw.backend, t.backend, &mut r);
        ranged(&raw.rocm_versions, t.rocm_version, &mut r);
        for f in t.features {
            keyed(&raw.with, f, &mut r);
        }
        r
    }
}

impl Resolved {
    fn apply(&mut self, o: &schema::Overlay) {
        if let Some(b) = &o.build {
            if let Some(s) = b.system {
                self.build_system = s;
            }
            if let Some(s) = &b.cmake_source {
                self.cmake_source = s.get_ref().clone();
            }
            if let Some(g) = &b.generator {
                self.generator = g.get_ref().clone();
            }
            if b.torch_cmake.is_some() {
                self.torch_cmake = b.torch_cmake;
            }
            for (k, v) in &b.define {
                // Flags compose: `-msse4.1` for one platform and `-DHIPBLAS_V2` for one SDK
                // range both reach CMAKE_CXX_FLAGS, in the order the overlays apply.
                let v = v.get_ref();
                match self.define.get_mut(k) {
                    Some(old) if is_flags_variable(k) && !old.trim().is_empty() => {
                        if !old.split_whitespace().eq(v.split_whitespace()) {
                            old.push(' ');
                            old.push_str(v.trim());
                        }
                    }
                    _ => {
                        self.define.insert(k.clone(), v.clone());
                    }
                }
            }
            for (k, v) in &b.env {
                self.env.insert(k.clone(), v.get_ref().clone());
            }
            for (k, v) in &b.config_settings {
                self.config_settings.insert(k.clone(), v.get_ref().clone());
            }
            for c in &b.hip_compat {
                if !self.hip_compat.contains(c.get_ref()) {
                    self.hip_compat.push(c.get_ref().clone());
                }
            }
        }
        if let Some(i) = &o.install {
            self.artifacts
                .extend(i.artifacts.iter().map(|t| t.get_ref().clone()));
            if let Some(a) = i.artifacts_in {
                self.artifacts_in = a;
            }
            if let Some(l) = i.layout {
                self.artifact_layout = l;
            }
            self.finds
                .extend(i.finds.iter().map(|t| t.get_ref().clone()));
            self.park.extend(i.park.iter().map(|t| t.get_ref().clone()));
            self.python_libs
                .extend(i.python_libs.iter().map(|t| t.get_ref().clone()));
        }
        if let Some(src) = &o.source {
            let add = src.submodules.iter().map(|t| t.get_ref().clone());
            match &mut self.submodules {
                SubmoduleSel::All => {}
                SubmoduleSel::None => self.submodules = SubmoduleSel::Only(add.collect()),
                SubmoduleSel::Only(v) => {
                    for a in add {
                        if !v.contains(&a) {
                            v.push(a);
                        }
                    }
                }
            }
        }
        if let Some(p) = &o.python {
            if let Some(f) = p.from {
                self.python_from = f;
            }
            if let Some(d) = &p.dir {
                self.python_dir = Some(d.get_ref().clone());
            }
            for (k, v) in &p.env {
                self.python_env.insert(k.clone(), v.get_ref().clone());
            }
            if let Some(e) = &p.extension {
                let all = |v: &[schema::Text]| v.iter().map(|t| t.get_ref().clone()).collect();
                self.python_extension = Some(PythonExtension {
                    module: e.module.get_ref().clone(),
                    sources: all(&e.sources),
                    package: e.package.get_ref().clone(),
                    include: all(&e.include),
                    link: all(&e.link),
                    cxx_standard: e.cxx_standard.unwrap_or(17),
                    console_scripts: e
                        .console_scripts
                        .iter()
                        .map(|(k, v)| (k.clone(), v.get_ref().clone()))
                        .collect(),
                });
            }
        }
        if let Some(v) = &o.verify {
            if let Some(p) = &v.python {
                self.verify = Some(p.get_ref().clone());
            }
        }
    }
}

/// Does `torch_version` satisfy the release's torch range?
pub fn torch_compatible(release: &ReleaseInfo, torch_version: &str) -> bool {
    in_range(&release.torch, torch_version)
}

/// Whether the release builds against FFmpeg `major`: true when the recipe does not say.
pub fn ffmpeg_compatible(release: &ReleaseInfo, major: u32) -> bool {
    release
        .ffmpeg
        .as_deref()
        .is_none_or(|spec| in_range(spec, &major.to_string()))
}

/// Whether the release builds with HIP `version` (`6.4.43484`): true when the recipe does
/// not say.
pub fn hip_compatible(release: &ReleaseInfo, version: &str) -> bool {
    release
        .hip
        .as_deref()
        .is_none_or(|spec| in_range(spec, version))
}

/// Whether the release builds with the CUDA toolkit `version` (`13.2`): true when the recipe
/// does not say.
pub fn cuda_compatible(release: &ReleaseInfo, version: &str) -> bool {
    release
        .cuda
        .as_deref()
        .is_none_or(|spec| in_range(spec, version))
}

/// Whether `version` is in the PEP 440 `spec` (false when either does not parse).
pub fn in_range(spec: &str, version: &str) -> bool {
    let (Ok(spec), Ok(v)) = (
        VersionSpecifiers::from_str(spec),
        Version::from_str(version),
    ) else {
        return false;
    };
    spec.contains(&v)
}

/// All recipes known to this run: the built-in ones, overridden by user recipe directories.
#[derive(Debug, Default)]
pub struct RecipeSet {
    recipes: BTreeMap<String, Recipe>,
    /// User recipe files that did not load: skipped, so one typo does not block every command.
    skipped: Vec<Skipped>,
}

/// A user recipe file that could not be read or is invalid.
#[derive(Debug)]
struct Skipped {
    path: PathBuf,
    /// The file name without `.toml`: the name `rocbuild NAME` would most likely use for it.
    stem: String,
    /// One line: `FILE:LINE:COL: what is wrong`.
    summary: String,
}

/// Read and parse one recipe file.
fn load_file(path: &Path) -> Result<Recipe, RecipeError> {
    let text = fs_err::read_to_string(path).map_err(|source| RecipeError::Io {
        path: path.display().to_string(),
        source,
    })?;
    parse(&path.display().to_string(), &text)
}

impl RecipeSet {
    /// Load the built-ins, then every `*.toml` in `dirs` (later directories win). A user
    /// recipe that does not load is skipped with a warning (file, line, what); asking for it
    /// by name gives its whole diagnostic.
    pub fn load(dirs: &[PathBuf]) -> Result<Self, RecipeError> {
        let mut set = RecipeSet::default();
        for (name, text) in BUILTIN {
            let r = parse(&format!("<builtin>/{name}.toml"), text)?;
            set.recipes.insert(r.name().to_string(), r);
        }
        for dir in dirs {
            set.load_dir(dir)?;
        }
        Ok(set)
    }

    fn load_dir(&mut self, dir: &Path) -> Result<(), RecipeError> {
        let io = |source| RecipeError::Io {
            path: dir.display().to_string(),
            source,
        };
        let mut files: Vec<PathBuf> = fs_err::read_dir(dir)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        for path in files {
            match load_file(&path) {
                Ok(r) => {
                    self.recipes.insert(r.name().to_string(), r);
                }
                Err(e) => {
                    let s = Skipped {
                        stem: path
                            .file_stem()
                            .unwrap_or_default()
                            .to_string_lossy()
                            .into_owned(),
                        summary: e.to_string(),
                        path,
                    };
                    tracing::warn!(
                        "skipped {} (the other recipes are used; `rocbuild {}` shows the whole error)",
                        s.summary,
                        s.stem
                    );
                    self.skipped.push(s);
                }
            }
        }
        Ok(())
    }

    /// The user recipe files that did not load, as one line each (`FILE:LINE:COL: what`).
    pub fn skipped(&self) -> impl Iterator<Item = &str> {
        self.skipped.iter().map(|s| s.summary.as_str())
    }

    /// The recipe called `name`. A skipped file of that name gives its own error (file, line,
    /// column, the text around it), even when a built-in recipe has the name: the user's file
    /// was meant to replace it.
    pub fn get(&self, name: &str) -> Result<&Recipe, RecipeError> {
        if let Some(s) = self.skipped.iter().rev().find(|s| s.stem == name) {
            return Err(match load_file(&s.path) {
                Err(e) => e,
                Ok(_) => RecipeError::Io {
                    path: s.path.display().to_string(),
                    source: std::io::Error::other(
                        "the file changed while rocbuild read it; run again",
                    ),
                },
            });
        }
        self.recipes.get(name).ok_or_else(|| {
            let known = self
                .recipes
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ");
            let help = match nearest(name, self.recipes.keys().map(String::as_str)) {
                Some(n) => format!("did you mean `{n}`? known recipes: {known}"),
                None => format!("known recipes: {known}; add your own with --recipes DIR"),
            };
            RecipeError::Unknown {
                name: name.to_string(),
                help,
            }
        })
    }

    /// Every recipe that loaded.
    pub fn iter(&self) -> impl Iterator<Item = &Recipe> {
        self.recipes.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECIPE: &str = r#"
[package]
name = "x"
distribution = "x"
import-dir = "x"

[source]
git = "https://example.invalid/x"
tag = "v{version}"

[[release]]
version = "1.0.0"
torch = ">=0"

[build.define]
WITH_MKL = "OFF"
WITH_OPENBLAS = "ON"

[install]
artifacts = ["libx*"]

[with.mkl.build.define]
WITH_MKL = "ON"
WITH_OPENBLAS = "OFF"
MKL_ROOT = "{mkl.root}"
"#;

    /// A typo in one user recipe must not block the others, nor the built-ins; asking for
    /// that recipe by name still gives the whole diagnostic.
    #[test]
    fn a_broken_user_recipe_is_skipped_and_named() {
        let dir = std::env::temp_dir().join(format!("rocbuild-recipes-{}", std::process::id()));
        let _ = fs_err::remove_dir_all(&dir);
        fs_err::create_dir_all(&dir).unwrap();
        fs_err::write(dir.join("x.toml"), RECIPE).unwrap();
        let typo = RECIPE
            .replace("name = \"x\"", "name = \"y\"")
            .replace("artifacts = ", "artifact = ");
        fs_err::write(dir.join("y.toml"), typo).unwrap();
        let set = RecipeSet::load(std::slice::from_ref(&dir)).unwrap();
        assert_eq!(set.get("x").unwrap().name(), "x");
        assert_eq!(set.get("torchcodec").unwrap().name(), "torchcodec");
        let names: Vec<&str> = set.iter().map(Recipe::name).collect();
        let mut want: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).chain(["x"]).collect();
        want.sort();
        assert_eq!(names, want);
        assert!(names.contains(&"ctranslate2") && names.contains(&"torchcodec"));
        let skipped: Vec<&str> = set.skipped().collect();
        assert_eq!(skipped.len(), 1);
        let at = format!("{}:20:1:", dir.join("y.toml").display());
        assert!(skipped[0].starts_with(&at), "{}", skipped[0]);
        let err = set.get("y").expect_err("y is broken");
        assert!(err.to_string().starts_with(&at), "{err}");
        let help = miette::Diagnostic::help(&err).map(|h| h.to_string());
        assert!(help.is_some_and(|h| h.contains("did you mean `artifacts`")));
        let _ = fs_err::remove_dir_all(&dir);
    }

    #[test]
    fn the_wheels_compiler_is_a_family_and_a_major_version() {
        let with = |table: &str| parse("x.toml", &format!("{RECIPE}\n[wheel-compiler]\n{table}"));
        let r =
            with("linux = \"gcc 14\"\nbackends = [\"cpu\"]\ndiffers = \"int8 outputs\"").unwrap();
        let w = r.raw.wheel_compiler.as_ref().unwrap();
        let gcc14 = schema::CompilerSpec {
            family: "gcc",
            major: 14,
        };
        assert_eq!(w.on("linux"), Some(gcc14));
        assert_eq!(w.on("macos"), None);
        assert_eq!(gcc14.to_string(), "GCC 14");
        let err = with("linux = \"gcc\"\ndiffers = \"x\"").unwrap_err();
        assert!(
            err.to_string()
                .contains("`gcc` is not a compiler and major version"),
            "{err}"
        );
        let help = miette::Diagnostic::help(&err)
            .map(|h| h.to_string())
            .unwrap();
        assert!(help.contains("such as \"gcc 14\""), "{help}");
        let err = with("linux = \"icc 2021\"\ndiffers = \"x\"").unwrap_err();
        assert!(err.to_string().contains("not a compiler"), "{err}");
        let err = with("linux = \"gcc 14\"\nbackends = [\"gpu\"]\ndiffers = \"x\"").unwrap_err();
        assert!(err.to_string().contains("unknown backend `gpu`"), "{err}");
        // `differs` is what the plan tells the user: it cannot be left out.
        assert!(with("linux = \"gcc 14\"").is_err());
    }

    fn target<'a>(features: &'a [&'a str]) -> Target<'a> {
        Target {
            os: "linux",
            arch: "x86_64",
            flavor: "cpu",
            version: "1.0.0",
            backend: "cpu",
            rocm_version: None,
            features,
        }
    }

    #[test]
    fn with_overlays_apply_only_for_the_features_found() {
        let r = parse("x.toml", RECIPE).unwrap();
        assert!(r.uses("mkl"));
        let plain = r.resolve(&target(&[]));
        assert_eq!(plain.define["WITH_MKL"], "OFF");
        assert!(!plain.define.contains_key("MKL_ROOT"));
        let mkl = r.resolve(&target(&["mkl"]));
        assert_eq!(mkl.define["WITH_MKL"], "ON");
        assert_eq!(mkl.define["WITH_OPENBLAS"], "OFF");
        assert_eq!(mkl.define["MKL_ROOT"], "{mkl.root}");
    }

    /// `[build] system` names the build system (CMake when unsaid); an overlay may change it;
    /// a name rocbuild has no build system for is refused, naming the ones it has.
    #[test]
    fn the_build_system_is_cmake_unless_the_recipe_names_another() {
        let r = parse("x.toml", RECIPE).unwrap();
        assert_eq!(r.resolve(&target(&[])).build_system, BuildSystem::Cmake);
        let text = RECIPE.replace(
            "[build.define]",
            "[build]\nsystem = \"pep517\"\n\n[os.windows.build]\nsystem = \"cmake\"\n\n[build.define]",
        );
        let r = parse("x.toml", &text).unwrap();
        assert_eq!(r.resolve(&target(&[])).build_system, BuildSystem::Pep517);
        let windows = Target {
            os: "windows",
            ..target(&[])
        };
        assert_eq!(r.resolve(&windows).build_system, BuildSystem::Cmake);
        let err = parse("x.toml", &text.replace("\"pep517\"", "\"meson\""))
            .expect_err("an unknown build system is refused")
            .to_string();
        assert!(err.contains("cmake") && err.contains("pep517"), "{err}");
    }

    /// `[platform."linux-x86_64"]` applies to that OS and architecture only, after `[os.linux]`;
    /// CMake flag variables set by several overlays compose, other defines are replaced.
    #[test]
    fn platform_overlays_apply_per_os_and_architecture_and_flags_compose() {
        let text = format!(
            "{RECIPE}\n[os.linux.build.define]\nCMAKE_CXX_FLAGS = \"-DLINUX\"\nWITH_OPENBLAS = \"LINUX\"\n\
             [platform.\"linux-x86_64\".build.define]\nCMAKE_CXX_FLAGS = \"-msse4.1\"\nWITH_OPENBLAS = \"X86\"\n\
             [backend.cpu.build.define]\nCMAKE_CXX_FLAGS = \"-DCPU\"\n"
        );
        let text = text.replace(
            "import-dir = \"x\"\n",
            "import-dir = \"x\"\nbackends = [\"cpu\"]\n",
        );
        let r = parse("x.toml", &text).unwrap();
        let on = |os: &str, arch: &str| {
            r.resolve(&Target {
                os,
                arch,
                ..target(&[])
            })
        };
        let x86 = on("linux", "x86_64");
        assert_eq!(x86.define["CMAKE_CXX_FLAGS"], "-DLINUX -msse4.1 -DCPU");
        assert_eq!(
            x86.define["WITH_OPENBLAS"], "X86",
            "a plain define is replaced"
        );
        let arm = on("linux", "aarch64");
        assert_eq!(arm.define["CMAKE_CXX_FLAGS"], "-DLINUX -DCPU");
        assert_eq!(arm.define["WITH_OPENBLAS"], "LINUX");
        let mac = on("macos", "x86_64");
        assert_eq!(mac.define["CMAKE_CXX_FLAGS"], "-DCPU");
        // A key that names no OS-architecture pair is refused, with the nearest one.
        let e = parse(
            "x.toml",
            &text.replace("platform.\"linux-x86_64\"", "platform.\"linux-x64\""),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown platform"), "{e}");
        let help = miette::Diagnostic::help(
            &parse(
                "x.toml",
                &text.replace("platform.\"linux-x86_64\"", "platform.\"linux-x86-64\""),
            )
            .unwrap_err(),
        )
        .map(|h| h.to_string())
        .unwrap_or_default();
        assert!(help.contains("did you mean `linux-x86_64`"), "{help}");
    }

    /// `[dependency.NAME]` is built for its backends and platforms only, not when the user's
    /// `-D` turns its `when` variable off; it must stand for an optional library, pin a
    /// commit and name known platforms, each refused with where and what to write.
    #[test]
    fn dependencies_apply_per_target_and_bad_ones_are_refused_where_they_are() {
        let text = format!(
            "{RECIPE}\n[[needs.library]]\nname = \"blas\"\ndescribe = \"a BLAS\"\noptional = true\n\
             [dependency.blas]\ndescribe = \"BLAS from source\"\ngit = \"https://example.invalid/o/blas\"\n\
             tag = \"v1.0\"\ncommit = \"{}\"\nbackends = [\"cpu\"]\nplatforms = [\"linux-x86_64\"]\n\
             when = {{ WITH_BLAS = \"ON\" }}\n",
            "ab".repeat(20)
        )
        .replace(
            "import-dir = \"x\"\n",
            "import-dir = \"x\"\nbackends = [\"cpu\", \"rocm\"]\n",
        );
        let r = parse("x.toml", &text).unwrap();
        let names = |os: &str, arch: &str, backend: &str, d: &[(String, String)]| -> Vec<String> {
            r.dependencies(os, arch, backend, d)
                .into_iter()
                .map(|(n, _)| n.to_string())
                .collect()
        };
        assert_eq!(names("linux", "x86_64", "cpu", &[]), ["blas"]);
        assert!(names("linux", "aarch64", "cpu", &[]).is_empty());
        assert!(names("windows", "x86_64", "cpu", &[]).is_empty());
        assert!(names("linux", "x86_64", "rocm", &[]).is_empty());
        let off = [("WITH_BLAS".to_string(), "OFF".to_string())];
        assert!(names("linux", "x86_64", "cpu", &off).is_empty());
        let on = [("WITH_BLAS".to_string(), "on".to_string())];
        assert_eq!(names("linux", "x86_64", "cpu", &on), ["blas"]);
        let refused = |from: &str, to: &str| {
            let e = parse("x.toml", &text.replace(from, to)).unwrap_err();
            let help = miette::Diagnostic::help(&e)
                .map(|h| h.to_string())
                .unwrap_or_default();
            format!("{e} | {help}")
        };
        let e = refused("[dependency.blas]", "[dependency.blsa]");
        assert!(
            e.contains("stands for no optional `[[needs.library]]`")
                && e.contains("did you mean `blas`"),
            "{e}"
        );
        let e = refused(&"ab".repeat(20), "v1.0");
        assert!(e.contains("40-digit hex commit"), "{e}");
        let e = refused("\"linux-x86_64\"]", "\"linux-amd64\"]");
        assert!(e.contains("unknown platform"), "{e}");
        let e = refused(
            "backends = [\"cpu\"]\nplatforms",
            "backends = [\"cuda\"]\nplatforms",
        );
        assert!(e.contains("unknown backend of this recipe `cuda`"), "{e}");
    }

    /// The built-in CTranslate2 recipe compiles with upstream's `-msse4.1` on Linux x86-64
    /// only, and keeps it beside hipBLAS's v2 switch on ROCm 6.
    #[test]
    fn ctranslate2_uses_upstreams_sse41_on_linux_x86_64() {
        let set = RecipeSet::load(&[]).unwrap();
        let r = set.get("ctranslate2").unwrap();
        let rel = r.releases().into_iter().next().unwrap();
        let on = |os: &str, arch: &str, backend: &str, rocm: Option<&str>| {
            r.resolve(&Target {
                os,
                arch,
                flavor: "cpu",
                version: &rel.version,
                backend,
                rocm_version: rocm,
                features: &[],
            })
            .define
            .get("CMAKE_CXX_FLAGS")
            .cloned()
        };
        assert_eq!(
            on("linux", "x86_64", "cpu", None).as_deref(),
            Some("-msse4.1")
        );
        assert_eq!(on("linux", "aarch64", "cpu", None), None);
        assert_eq!(on("windows", "x86_64", "cpu", None), None);
        assert_eq!(
            on("linux", "x86_64", "rocm", Some("6.4.3")).as_deref(),
            Some("-msse4.1 -DHIPBLAS_V2")
        );
        assert_eq!(
            on("linux", "x86_64", "rocm", Some("7.2.0")).as_deref(),
            Some("-msse4.1")
        );
    }

    #[test]
    fn an_unknown_optional_library_is_refused_with_the_nearest_name() {
        let text = RECIPE.replace("[with.mkl.build.define]", "[with.mlk.build.define]");
        let e = parse("x.toml", &text).unwrap_err().to_string();
        assert!(e.contains("unknown optional library `mlk`"), "{e}");
    }

    /// ctranslate2's `[rocm-versions."<7"]` asks for rocbuild's `__syncwarp` on ROCm 6 only.
    #[test]
    fn ctranslate2_asks_for_syncwarp_below_rocm_7() {
        let set = RecipeSet::load(&[]).unwrap();
        let r = set.get("ctranslate2").unwrap();
        let rel = r.releases().into_iter().next().unwrap();
        let on = |rocm: &str| {
            r.resolve(&Target {
                os: "linux",
                arch: "x86_64",
                flavor: "cpu",
                version: &rel.version,
                backend: "rocm",
                rocm_version: Some(rocm),
                features: &[],
            })
            .hip_compat
        };
        assert_eq!(on("6.4.3"), ["syncwarp"]);
        assert!(on("7.2.4").is_empty());
    }

    #[test]
    fn an_unknown_hip_compat_name_is_refused() {
        let text = RECIPE.replace(
            "[install]",
            "[rocm-versions.\"<7\".build]\nhip-compat = [\"synwarp\"]\n\n[install]",
        );
        let e = parse("x.toml", &text).unwrap_err();
        let help = miette::Diagnostic::help(&e).map(|h| h.to_string());
        assert!(
            e.to_string()
                .contains("unknown HIP compatibility definition `synwarp`"),
            "{e}"
        );
        assert!(help.is_some_and(|h| h.contains("syncwarp")));
    }
}

/// docs/recipes.md, the recipe authors' guide, names every field a recipe may hold: a field
/// added to the schema without a word there fails here.
#[cfg(test)]
mod guide {
    #[test]
    fn the_guide_names_every_recipe_field() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let schema = std::fs::read_to_string(root.join("src/schema.rs")).unwrap();
        let guide = std::fs::read_to_string(root.join("../../docs/recipes.md")).unwrap();
        // The fields of every struct the TOML is read into (kebab-case keys).
        let mut missing = Vec::new();
        let mut in_toml_struct = false;
        for line in schema.lines() {
            if line.starts_with("#[serde(deny_unknown_fields") {
                in_toml_struct = true;
            } else if line.starts_with('}') {
                in_toml_struct = false;
            }
            let Some(field) = line
                .strip_prefix("    pub ")
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            if !in_toml_struct {
                continue;
            }
            let key = match field.0 {
                "releases" => "release".to_string(),
                f => f.replace('_', "-"),
            };
            let named = [
                format!("`{key}`"),
                format!("{key} ="),
                format!("[{key}"),
                format!(".{key}]"),
            ];
            if !named.iter().any(|n| guide.contains(n.as_str())) {
                missing.push(key);
            }
        }
        assert!(
            missing.is_empty(),
            "docs/recipes.md does not name: {missing:?}"
        );
    }
}
