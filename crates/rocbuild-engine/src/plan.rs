//! `plan()`: recipe + machine + options -> every step spelled out. No I/O.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocbuild_probe::{install_hint, Flavor, Machine, Os};
use rocbuild_recipe::{
    template, torch_compatible, PythonFrom, Recipe, ReleaseInfo, SubmoduleSel, Target, TorchCmake,
};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::command::Command;
use crate::error::{EngineError, Result};
use crate::link::Link;
use crate::toolchain::{self, BackendOptions, BackendPlan};
use crate::torch_cmake;

/// What the user asked for on the command line.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BuildOptions {
    pub version: Option<String>,
    pub force: bool,
    /// A local directory (built as is unless `rev` is given) or a git URL.
    pub source: Option<String>,
    pub rev: Option<String>,
    pub jobs: Option<usize>,
    pub torch_cmake: Option<TorchCmake>,
    pub defines: Vec<(String, String)>,
    /// Where sources, build trees and logs live.
    pub cache: PathBuf,
    /// `ROCBUILD_MIRROR`: offline mirror of git repositories.
    pub mirror: Option<PathBuf>,
    /// `--backend`, `--rocm`, `--arch`, `--cuda-arch`.
    pub backend: BackendOptions,
    /// `--ffmpeg DIR` (the probe used it; recorded so `rebuild` uses it again).
    pub ffmpeg_dir: Option<PathBuf>,
}

/// Where the source comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum SourcePlan {
    Git {
        url: String,
        /// `refs/tags/v0.9.1`, or a user's `--rev` (branch, tag or commit).
        reference: String,
        expected_commit: Option<String>,
        submodules: SubmoduleSel,
        mirror: Option<PathBuf>,
        /// Bare clones, keyed by URL.
        git_cache: PathBuf,
        checkout: PathBuf,
    },
    /// A directory built as it is (`--source DIR` without `--rev`).
    Local { dir: PathBuf },
}

impl SourcePlan {
    pub fn dir(&self) -> &Path {
        match self {
            SourcePlan::Git { checkout, .. } => checkout,
            SourcePlan::Local { dir } => dir,
        }
    }
}

/// The pip requirements the build needs, installed into a directory of the cache.
#[derive(Debug, Clone, Serialize)]
pub struct ToolsPlan {
    pub dir: PathBuf,
    pub install: Command,
}

#[derive(Debug, Clone, Serialize)]
pub struct TorchCmakePlan {
    pub mode: TorchCmake,
    /// The directory given as `Torch_DIR`.
    pub dir: PathBuf,
    /// For `lite`: the TorchConfig.cmake rocbuild writes.
    pub contents: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PythonPart {
    pub distribution: String,
    pub version: String,
    /// The version installed now, if any (its files are parked in the backup).
    pub replaces: Option<String>,
    /// For a package built from the checkout: `pip wheel` into the build tree.
    pub build: Option<Command>,
    /// `pip install --target` into the transaction's staging directory.
    pub install: Command,
    pub target: PathBuf,
}

#[derive(Debug, Clone, Serialize)]
pub struct InstallPlan {
    pub site: PathBuf,
    pub import_dir: String,
    pub dest: PathBuf,
    pub distribution: String,
    pub artifacts: Vec<String>,
    /// How the installed native files find their dependencies (RUNPATH, @rpath, preload).
    pub link: Link,
    /// Globs relative to site-packages of the wheel's files to park.
    pub park: Vec<String>,
    /// Globs relative to site-packages of the Python part's native files, linked like the
    /// artifacts.
    pub python_libs: Vec<String>,
    /// Directories the artifacts must find at run time (after templates).
    pub finds: Vec<PathBuf>,
}

/// An optional library a recipe can use (`[with.X]`), found on the machine.
#[derive(Debug, Clone, Serialize)]
pub struct OptionalLibrary {
    pub name: String,
    pub root: PathBuf,
    /// Used by this build; when not, `why` says why.
    pub used: bool,
    pub why: String,
}

/// The optional libraries the recipe can use that the machine has. MKL: upstream links it
/// statically with GNU OpenMP on Linux; on Windows it needs Intel's OpenMP runtime
/// (libiomp5md.dll) at run time, which rocbuild does not make findable yet.
fn optional_libraries(recipe: &Recipe, machine: &Machine) -> Vec<OptionalLibrary> {
    let mut out = Vec::new();
    if let (true, Some(root)) = (recipe.uses("mkl"), &machine.toolkits.mkl_root) {
        let (used, why) = match machine.platform.os {
            Os::Linux => (
                true,
                "Intel oneAPI MKL found: linked statically, with GNU OpenMP".to_string(),
            ),
            os => (
                false,
                format!(
                    "not used on {}: MKL needs Intel's OpenMP runtime there, which rocbuild does not make findable yet",
                    os.as_str()
                ),
            ),
        };
        out.push(OptionalLibrary {
            name: "mkl".into(),
            root: root.clone(),
            used,
            why,
        });
    }
    out
}

/// Every step of one build, concrete.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub recipe: String,
    pub recipe_file: String,
    pub recipe_hash: String,
    pub version: String,
    /// Why this version: `--version`, or the newest release compatible with torch X.
    pub version_reason: String,
    pub os: Os,
    pub venv: PathBuf,
    pub venv_chosen_by: String,
    pub python: PathBuf,
    pub torch_version: Option<String>,
    pub torch_git: Option<String>,
    pub flavor: Flavor,
    pub ffmpeg_major: Option<u32>,
    /// The compute backend and its toolchain (SDK, GPU archs).
    pub backend: BackendPlan,
    /// Optional libraries found (`[with.X]`), used or not.
    pub libraries: Vec<OptionalLibrary>,
    pub source: SourcePlan,
    pub tools: Option<ToolsPlan>,
    pub torch_cmake: Option<TorchCmakePlan>,
    pub build_dir: PathBuf,
    pub prefix: PathBuf,
    pub configure: Command,
    pub build: Command,
    pub install_prefix: Command,
    pub python_part: Option<PythonPart>,
    pub install: InstallPlan,
    pub verify: Option<Command>,
    pub log_dir: PathBuf,
    pub options: BuildOptions,
    /// Hash of everything that decides the result, apart from the source commit.
    pub fingerprint: String,
}

pub fn hash_hex(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Join path parts with the separator of `os` (a Windows plan made on Linux shows `\`).
pub fn join(os: Os, base: &Path, parts: &[&str]) -> PathBuf {
    if os == Os::Windows {
        let mut s = base
            .display()
            .to_string()
            .trim_end_matches(['\\', '/'])
            .to_string();
        for p in parts {
            s.push('\\');
            s.push_str(&p.replace('/', "\\"));
        }
        PathBuf::from(s)
    } else {
        parts.iter().fold(base.to_path_buf(), |acc, p| acc.join(p))
    }
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Pick the release: `--version` (refused when torch is outside its range, unless --force),
/// else the newest default-eligible release whose range holds the installed torch.
fn choose_release(
    recipe: &Recipe,
    machine: &Machine,
    opts: &BuildOptions,
) -> Result<(ReleaseInfo, String)> {
    let torch = machine.torch.as_ref().map(|t| t.version.as_str());
    if let Some(v) = &opts.version {
        let r = recipe.release(v)?;
        match torch {
            Some(t) if !torch_compatible(&r, t) && !opts.force => {
                let ok: Vec<_> = recipe
                    .releases()
                    .into_iter()
                    .filter(|r| torch_compatible(r, t))
                    .map(|r| r.version)
                    .collect();
                Err(EngineError::Incompatible {
                    recipe: recipe.name().into(),
                    version: r.version.clone(),
                    torch: t.into(),
                    range: r.torch.clone(),
                    help: if ok.is_empty() {
                        "no release of this recipe supports this torch; --force builds it anyway (it will likely fail to load)".into()
                    } else {
                        format!("releases that support torch {t}: {}; or pass --force to build {} anyway", ok.join(", "), r.version)
                    },
                })
            }
            Some(t) if !torch_compatible(&r, t) => Ok((
                r,
                format!(
                    "--version (forced: torch {t} is outside {})",
                    recipe.release(v)?.torch
                ),
            )),
            _ => Ok((r, "--version".into())),
        }
    } else {
        let t = torch.unwrap_or("0");
        let all = recipe.releases();
        let found = all.iter().find(|r| r.default && torch_compatible(r, t));
        match found {
            Some(r) if torch.is_none() || !recipe.raw.needs.torch => {
                Ok((r.clone(), "newest release".into()))
            }
            Some(r) => Ok((r.clone(), format!("newest release compatible with torch {t}"))),
            None => Err(EngineError::NoCompatible {
                recipe: recipe.name().into(),
                torch: t.into(),
                help: format!(
                    "releases and the torch they need: {}; pick one with --version (and --force to override the check)",
                    all.iter().map(|r| format!("{} (torch {})", r.version, r.torch)).collect::<Vec<_>>().join(", ")
                ),
            }),
        }
    }
}

/// Directories the dynamic loader searches anyway: no RUNPATH entry needed.
fn is_default_lib_dir(p: &Path) -> bool {
    matches!(
        p.to_str().unwrap_or("").trim_end_matches('/'),
        "/lib"
            | "/lib64"
            | "/usr/lib"
            | "/usr/lib64"
            | "/usr/lib/x86_64-linux-gnu"
            | "/lib/x86_64-linux-gnu"
            | "/usr/lib/aarch64-linux-gnu"
            | "/lib/aarch64-linux-gnu"
    )
}

/// Search entries for files installed in `dest`: `origin` (`$ORIGIN`, `@loader_path`), then
/// each directory they must find, relative to `origin` when inside the venv (the venv stays
/// relocatable), absolute otherwise.
pub fn search_entries(origin: &str, dest: &Path, site: &Path, finds: &[PathBuf]) -> Vec<String> {
    let mut out = vec![origin.to_string()];
    for f in finds {
        if f.as_os_str().is_empty() || is_default_lib_dir(f) {
            continue;
        }
        let entry = if f.starts_with(site) {
            match pathdiff::diff_paths(f, dest) {
                Some(rel) if rel.as_os_str().is_empty() => origin.to_string(),
                Some(rel) => format!("{origin}/{}", rel.display()),
                None => f.display().to_string(),
            }
        } else {
            f.display().to_string()
        };
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    out
}

/// Linux RUNPATH entries for artifacts installed in `dest`.
pub fn runpath_entries(dest: &Path, site: &Path, finds: &[PathBuf]) -> Vec<String> {
    search_entries("$ORIGIN", dest, site, finds)
}

pub fn plan(recipe: &Recipe, machine: &Machine, opts: &BuildOptions) -> Result<Plan> {
    let os = machine.platform.os;
    let raw = &recipe.raw;
    let py = &machine.python;
    let needs = &raw.needs;
    let torch = machine.torch.as_ref();
    if needs.torch && torch.is_none() {
        return Err(EngineError::NoTorch {
            site: py.site_packages.display().to_string(),
            recipe: recipe.name().into(),
            python: py.exe.display().to_string(),
        });
    }
    let (release, version_reason) = choose_release(recipe, machine, opts)?;
    let version = release.version.clone();
    let flavor = torch.map_or(Flavor::Cpu, |t| t.flavor);
    let backend = toolchain::choose(
        recipe.name(),
        &recipe.backends(),
        needs.hipblas,
        machine,
        &opts.backend,
    )?;
    let missing: Vec<&str> = needs
        .python
        .iter()
        .filter(|d| {
            !py.distributions
                .contains_key(&rocbuild_probe::normalize_dist(d))
        })
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(EngineError::MissingPython {
            recipe: recipe.name().into(),
            missing: missing.join(", "),
            site: py.site_packages.display().to_string(),
            command: format!("{} -m pip install {}", py.exe.display(), missing.join(" ")),
        });
    }
    let libraries = optional_libraries(recipe, machine);
    let features: Vec<&str> = libraries
        .iter()
        .filter(|l| l.used)
        .map(|l| l.name.as_str())
        .collect();
    let resolved = recipe.resolve(&Target {
        os: os.as_str(),
        flavor: flavor.as_str(),
        version: &version,
        backend: &backend.backend,
        rocm_version: backend.rocm.as_ref().and_then(|r| r.version.as_deref()),
        features: &features,
    });

    // Tools, in the order a user would install them.
    let tool = |t: &Option<rocbuild_probe::Tool>, name: &str, purpose: &str| -> Result<PathBuf> {
        t.as_ref()
            .map(|t| t.path.clone())
            .ok_or_else(|| EngineError::MissingTool {
                tool: name.into(),
                purpose: purpose.into(),
                hint: install_hint(&machine.platform, name),
            })
    };
    let cmake = tool(&machine.tools.cmake, "cmake", "configure the build")?;
    let ninja = tool(&machine.tools.ninja, "ninja", "run the build")?;
    // With ROCm the SDK's clang compiles everything.
    let (cc, cxx) = match &backend.rocm {
        Some(r) => (r.clang.clone(), r.clangxx.clone()),
        None => (
            tool(&machine.tools.cc, "C compiler", "compile the sources")?,
            tool(&machine.tools.cxx, "C++ compiler", "compile the sources")?,
        ),
    };
    if needs.ffmpeg
        && machine
            .ffmpeg
            .as_ref()
            .is_some_and(|f| f.pkg_config_path.is_none() && f.found_by == "pkg-config")
    {
        tool(&machine.tools.pkg_config, "pkg-config", "find FFmpeg")?;
    }
    let ffmpeg = machine.ffmpeg.as_ref();
    if needs.ffmpeg && ffmpeg.is_none() {
        return Err(EngineError::NoValue {
            variable: "ffmpeg".into(),
            why: "no FFmpeg was found".into(),
            help: "install FFmpeg's development files or pass --ffmpeg DIR".into(),
        });
    }
    if let (Os::Windows, true, Some(f)) = (os, needs.ffmpeg, ffmpeg) {
        // The libraries load FFmpeg's DLLs at run time: a static build (or one without its
        // bin/ directory) links but can never load (torchcodec issues 912, 1108, 1289).
        if f.bin.is_none() {
            return Err(EngineError::StaticFfmpeg {
                dir: f.lib.display().to_string(),
            });
        }
    }

    let cache = &opts.cache;
    let name = recipe.name();
    let jobs = opts.jobs.unwrap_or(4).max(1);

    // Source.
    let source = match (&opts.source, &opts.rev) {
        (Some(s), None) if !looks_like_url(s) => SourcePlan::Local {
            dir: PathBuf::from(s),
        },
        (src, rev) => {
            let url = match src {
                Some(s) => s.clone(),
                None => expand(
                    raw.source.git.get_ref(),
                    &base_vars(name, &version, os, flavor),
                )?,
            };
            let (reference, expected_commit) = match rev {
                Some(r) => (r.clone(), None),
                None => (
                    format!(
                        "refs/tags/{}",
                        expand(
                            raw.source.tag.get_ref(),
                            &base_vars(name, &version, os, flavor)
                        )?
                    ),
                    if src.is_none() {
                        release.commit.clone()
                    } else {
                        None
                    },
                ),
            };
            let label = match &expected_commit {
                Some(c) => c[..12].to_string(),
                None => sanitize(reference.trim_start_matches("refs/tags/")),
            };
            SourcePlan::Git {
                checkout: join(os, cache, &["src", &format!("{name}-{label}")]),
                git_cache: join(os, cache, &["git"]),
                url,
                reference,
                expected_commit,
                submodules: resolved.submodules.clone(),
                mirror: opts.mirror.clone(),
            }
        }
    };

    // Template variables.
    let mut vars = base_vars(name, &version, os, flavor);
    let mut set = |k: &str, v: String| {
        vars.insert(k.to_string(), v);
    };
    set("jobs", jobs.to_string());
    for l in libraries.iter().filter(|l| l.used) {
        set(&format!("{}.root", l.name), l.root.display().to_string());
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
    }
    if let Some(f) = ffmpeg {
        set("ffmpeg.major", f.major.to_string());
        set("ffmpeg.version", f.avutil_version.clone());
        set("ffmpeg.lib", f.lib.display().to_string());
        set("ffmpeg.include", f.include.display().to_string());
    }
    if let Some(c) = &machine.toolkits.cuda_home {
        set("cuda.home", c.display().to_string());
    }
    if let Some(r) = &machine.toolkits.rocm_path {
        set("rocm.path", r.display().to_string());
    }
    if let Some(f) = ffmpeg {
        let runtime = f.bin.as_ref().unwrap_or(&f.lib);
        set("ffmpeg.runtime", runtime.display().to_string());
    }
    backend.vars(&mut vars);

    // Build-only pip requirements, keyed by what they are and the Python they serve.
    let mut reqs: Vec<String> = needs
        .python_build
        .iter()
        .map(|t| expand(t.get_ref(), &vars))
        .collect::<Result<_>>()?;
    // CMake's HIP language reads a multiarch ROCm (Debian's /usr) only from 3.27: an older
    // system CMake is replaced for this build by CMake from PyPI, in the build-only tools.
    let old_cmake = backend.rocm.as_ref().is_some_and(|r| r.multiarch)
        && machine
            .tools
            .cmake
            .as_ref()
            .and_then(|t| t.version.as_deref())
            .and_then(cmake_version)
            .is_some_and(|v| v < (3, 27));
    if old_cmake {
        reqs.push("cmake>=3.27,<4".into());
    }
    let tools = (!reqs.is_empty()).then(|| {
        let mut key: Vec<&str> = reqs.iter().map(String::as_str).collect();
        key.push(&py.version);
        let dir = join(os, cache, &["tools", &hash_hex(&key)[..16]]);
        let install = Command::new(&py.exe)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--quiet",
                "--target",
            ])
            .arg(dir.display().to_string())
            .args(reqs.clone());
        ToolsPlan { dir, install }
    });
    if let Some(t) = &tools {
        vars.insert("tools".into(), t.dir.display().to_string());
    }
    let cmake = match (&tools, old_cmake) {
        (Some(t), true) => join(os, &t.dir, &["cmake", "data", "bin", "cmake"]),
        _ => cmake,
    };

    // torch's CMake package.
    let torch_cmake = match torch {
        Some(t) if needs.torch => {
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
                    let contents = torch_cmake::lite_config(os, t);
                    let dir = join(os, cache, &["torch-lite", &hash_hex(&[&contents])[..16]]);
                    TorchCmakePlan {
                        mode,
                        dir,
                        contents: Some(contents),
                    }
                }
            })
        }
        _ => None,
    };

    // Configure.
    let mut define: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in &resolved.define {
        define.insert(k.clone(), expand(v, &vars)?);
    }
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in &resolved.env {
        env.insert(k.clone(), expand(v, &vars)?);
    }
    if let Some(f) = ffmpeg.and_then(|f| f.pkg_config_path.as_ref()) {
        env.insert("PKG_CONFIG_PATH".into(), f.display().to_string());
    }
    if let Some(tc) = &torch_cmake {
        define.insert("Torch_DIR".into(), tc.dir.display().to_string());
        if tc.mode == TorchCmake::Native {
            native_toolkit(machine, flavor, &mut define, &mut env)?;
        }
    }
    backend.apply(os, &mut define, &mut env);
    define.insert("CMAKE_MAKE_PROGRAM".into(), ninja.display().to_string());
    define
        .entry("CMAKE_C_COMPILER".into())
        .or_insert(cc.display().to_string());
    define
        .entry("CMAKE_CXX_COMPILER".into())
        .or_insert(cxx.display().to_string());
    if os == Os::Windows {
        if let Some(rc) = machine.tools.msvc.as_ref().and_then(|m| m.rc.as_ref()) {
            define
                .entry("CMAKE_RC_COMPILER".into())
                .or_insert(rc.display().to_string());
        }
        for (k, v) in msvc_env(machine) {
            env.entry(k).or_insert(v);
        }
    }
    for (k, v) in &opts.defines {
        define.insert(k.clone(), v.clone());
    }
    let cmake_src = match expand(&resolved.cmake_source, &vars)?.as_str() {
        "." | "" => source.dir().to_path_buf(),
        sub => join(os, source.dir(), &[sub]),
    };
    let configure_key = {
        let mut parts: Vec<String> =
            vec![cmake_src.display().to_string(), resolved.generator.clone()];
        parts.extend(
            define
                .iter()
                .filter(|(k, _)| k.as_str() != "CMAKE_INSTALL_PREFIX")
                .map(|(k, v)| format!("{k}={v}")),
        );
        parts.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        parts.extend(torch_cmake.iter().filter_map(|t| t.contents.clone()));
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        hash_hex(&refs)
    };
    let build_dir = join(
        os,
        cache,
        &[
            "build",
            &format!("{name}-{}-{}", sanitize(&version), &configure_key[..12]),
        ],
    );
    let prefix = join(os, &build_dir, &["rocbuild-prefix"]);
    define.insert("CMAKE_INSTALL_PREFIX".into(), prefix.display().to_string());
    if os == Os::Windows {
        // CMake reads `\` in a -D value as an escape in some contexts: forward slashes only.
        for v in define.values_mut() {
            *v = v.replace('\\', "/");
        }
    }
    let mut configure = Command::new(&cmake)
        .args([
            "-S".to_string(),
            cmake_src.display().to_string(),
            "-B".into(),
            build_dir.display().to_string(),
            "-G".into(),
            resolved.generator.clone(),
        ])
        .args(define.iter().map(|(k, v)| format!("-D{k}={v}")));
    configure.env = env.clone();
    let mut build = Command::new(&cmake).args([
        "--build".to_string(),
        build_dir.display().to_string(),
        "--parallel".into(),
        jobs.to_string(),
    ]);
    build.env = env.clone();
    let install_prefix = Command::new(&cmake).args([
        "--install".to_string(),
        build_dir.display().to_string(),
        "--prefix".into(),
        prefix.display().to_string(),
    ]);
    vars.insert("build".into(), build_dir.display().to_string());
    vars.insert("prefix".into(), prefix.display().to_string());

    // Install.
    let site = py.site_packages.clone();
    let dest = join(os, &site, &[&raw.package.import_dir]);
    let finds: Vec<PathBuf> = resolved
        .finds
        .iter()
        .map(|f| expand(f, &vars).map(PathBuf::from))
        .collect::<Result<_>>()?;
    // A GPU build finds its SDK's runtime where the SDK keeps it (never copied).
    let mut finds = finds;
    for d in backend.rocm.iter().flat_map(|r| r.runtime.iter()) {
        if !finds.contains(d) {
            finds.push(d.clone());
        }
    }
    let own: Vec<PathBuf> = torch.map(|t| t.lib.clone()).into_iter().collect();
    let link = Link::plan(
        os,
        name,
        &raw.package.import_dir,
        &dest,
        &site,
        &finds,
        &own,
    );
    let artifacts: Vec<String> = resolved
        .artifacts
        .iter()
        .map(|a| expand(a, &vars))
        .collect::<Result<_>>()?;
    let park: Vec<String> = resolved
        .park
        .iter()
        .map(|a| expand(a, &vars))
        .collect::<Result<_>>()?;
    let python_libs: Vec<String> = resolved
        .python_libs
        .iter()
        .map(|a| expand(a, &vars))
        .collect::<Result<_>>()?;
    let dist = rocbuild_probe::normalize_dist(&raw.package.distribution);
    let installed = py.distributions.get(&dist).cloned();
    let txn = join(os, &site, &[".rocbuild", "txn"]);
    let pip_install = |target: &Path| {
        Command::new(&py.exe)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--no-deps",
                "--no-compile",
                "--target",
            ])
            .arg(target.display().to_string())
    };
    let python_part = match resolved.python_from {
        // The index's wheel carries the pure-Python files; needed only when another version
        // (or none) is installed.
        PythonFrom::Pypi => (installed.as_deref() != Some(version.as_str())).then(|| {
            let target = join(os, &txn, &["pip"]);
            PythonPart {
                distribution: raw.package.distribution.clone(),
                version: version.clone(),
                replaces: installed.clone(),
                build: None,
                install: pip_install(&target)
                    .arg(format!("{}=={version}", raw.package.distribution)),
                target,
            }
        }),
        // A wheel built from the checkout against the libraries just built: always installed,
        // whatever version pip had (its native extension was built for other libraries).
        PythonFrom::Source => {
            let dir = resolved.python_dir.clone().unwrap_or_else(|| ".".into());
            let dir = match expand(&dir, &vars)?.as_str() {
                "." | "" => source.dir().to_path_buf(),
                sub => join(os, source.dir(), &[sub]),
            };
            let wheel_dir = join(os, &build_dir, &["rocbuild-wheel"]);
            let mut build = Command::new(&py.exe)
                .args([
                    "-m",
                    "pip",
                    "wheel",
                    "--disable-pip-version-check",
                    "--no-input",
                    "--no-deps",
                    "--no-build-isolation",
                    "--wheel-dir",
                ])
                .arg(wheel_dir.display().to_string())
                .arg(dir.display().to_string());
            for (k, v) in &resolved.python_env {
                build.env.insert(k.clone(), expand(v, &vars)?);
            }
            if let Some(t) = &tools {
                build
                    .env
                    .insert("PYTHONPATH".into(), t.dir.display().to_string());
            }
            build.env.extend(msvc_env(machine));
            let target = join(os, &txn, &["pip"]);
            let install = pip_install(&target)
                .args(["--no-index", "--find-links"])
                .arg(wheel_dir.display().to_string())
                .arg(format!("{}=={version}", raw.package.distribution));
            Some(PythonPart {
                distribution: raw.package.distribution.clone(),
                version: version.clone(),
                replaces: installed.clone(),
                build: Some(build),
                install,
                target,
            })
        }
    };
    let install = InstallPlan {
        site: site.clone(),
        import_dir: raw.package.import_dir.clone(),
        dest,
        distribution: raw.package.distribution.clone(),
        artifacts,
        link,
        park,
        python_libs,
        finds,
    };

    // Verify, in a fresh interpreter that has neither LD_LIBRARY_PATH nor bytecode writing
    // (so the venv is untouched when it fails).
    let verify = match &resolved.verify {
        Some(snippet) => {
            let mut c = Command::new(&py.exe).args(["-c".to_string(), expand(snippet, &vars)?]);
            c.env.insert("PYTHONDONTWRITEBYTECODE".into(), "1".into());
            c.env.insert("PYTHONNOUSERSITE".into(), "1".into());
            c.env_remove = vec!["LD_LIBRARY_PATH".into(), "PYTHONPATH".into()];
            Some(c)
        }
        None => None,
    };

    let fingerprint = {
        let parts = [
            recipe.hash.clone(),
            version.clone(),
            serde_json::to_string(&source).unwrap_or_default(),
            configure_key.clone(),
            serde_json::to_string(&install).unwrap_or_default(),
            serde_json::to_string(&verify).unwrap_or_default(),
            torch
                .map(|t| format!("{}{:?}", t.version, t.git_version))
                .unwrap_or_default(),
        ];
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        hash_hex(&refs)
    };

    Ok(Plan {
        recipe: name.into(),
        recipe_file: recipe.file.clone(),
        recipe_hash: recipe.hash.clone(),
        version,
        version_reason,
        os,
        venv: machine.venv.root.clone(),
        venv_chosen_by: machine.venv.chosen_by.clone(),
        python: py.exe.clone(),
        // Only when the build uses torch: CTranslate2 does not go stale with a torch upgrade.
        torch_version: torch.filter(|_| needs.torch).map(|t| t.version.clone()),
        torch_git: torch
            .filter(|_| needs.torch)
            .and_then(|t| t.git_version.clone()),
        flavor,
        ffmpeg_major: ffmpeg.filter(|_| needs.ffmpeg).map(|f| f.major),
        backend,
        libraries,
        source,
        tools,
        torch_cmake,
        build_dir,
        prefix,
        configure,
        build,
        install_prefix,
        python_part,
        install,
        verify,
        log_dir: join(os, cache, &["logs"]),
        options: opts.clone(),
        fingerprint,
    })
}

/// torch's own CMake package demands the toolkit it was built with.
fn native_toolkit(
    machine: &Machine,
    flavor: Flavor,
    define: &mut BTreeMap<String, String>,
    env: &mut BTreeMap<String, String>,
) -> Result<()> {
    let tk = &machine.toolkits;
    match flavor {
        Flavor::Cpu => Ok(()),
        Flavor::Cuda => {
            let home = tk.cuda_home.as_ref().ok_or_else(|| EngineError::NoValue {
                variable: "cuda.home".into(),
                why: "torch's own CMake package for a CUDA torch needs a CUDA toolkit and none was found".into(),
                help: "set CUDA_HOME to a CUDA toolkit, or use --torch-cmake lite (no GPU toolkit needed for CPU code)".into(),
            })?;
            env.insert("CUDA_HOME".into(), home.display().to_string());
            define.insert("CUDAToolkit_ROOT".into(), home.display().to_string());
            Ok(())
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
                .unwrap_or_else(|| join(machine.platform.os, root, &["lib", "llvm", "bin"]));
            env.insert("HIP_CLANG_PATH".into(), clang.display().to_string());
            define.insert("CMAKE_PREFIX_PATH".into(), r);
            Ok(())
        }
    }
}

/// `cmake version 3.25.1` -> (3, 25).
fn cmake_version(text: &str) -> Option<(u32, u32)> {
    let v = text
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let mut it = v.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// MSVC's environment (INCLUDE, LIB, PATH) for a Windows build; empty elsewhere.
fn msvc_env(machine: &Machine) -> BTreeMap<String, String> {
    match (&machine.platform.os, &machine.tools.msvc) {
        (Os::Windows, Some(m)) => {
            let mut env = m.env.clone();
            // setuptools: use the environment as set up instead of looking for MSVC again.
            env.insert("DISTUTILS_USE_SDK".into(), "1".into());
            env.insert("MSSdk".into(), "1".into());
            env
        }
        _ => BTreeMap::new(),
    }
}

fn looks_like_url(s: &str) -> bool {
    s.contains("://") || s.starts_with("git@")
}

fn base_vars(name: &str, version: &str, os: Os, flavor: Flavor) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("name".to_string(), name.to_string()),
        ("version".to_string(), version.to_string()),
        ("os".to_string(), os.as_str().to_string()),
        ("flavor".to_string(), flavor.as_str().to_string()),
    ])
}

fn expand(s: &str, vars: &BTreeMap<String, String>) -> Result<String> {
    template::expand(s, vars).map_err(|missing| EngineError::NoValue {
        why: match missing.split('.').next() {
            Some("ffmpeg") => "no FFmpeg was found".into(),
            Some("torch") => "no torch was found".into(),
            Some("cuda") => "no CUDA toolkit was found (set CUDA_HOME)".into(),
            Some("rocm") => "no ROCm root was found (set ROCM_PATH)".into(),
            Some("tools") => "the recipe declares no [needs] python-build".into(),
            _ => "it has no value at this point of the plan".into(),
        },
        help: "install what it names, or change the recipe".into(),
        variable: missing,
    })
}
