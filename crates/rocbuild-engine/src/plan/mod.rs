//! `plan()`: recipe + machine + context -> every step spelled out. No I/O.
//!
//! The planner is the one place that asks each concern for its part of the plan, in order:
//! what is needed ([`needs`]), which release ([`release`]), which backend
//! ([`crate::toolchain`]), which optional libraries ([`crate::libraries`]), the tools, the
//! source ([`crate::source::plan`]), the template variables ([`vars`]), a cross build
//! ([`crate::cross`]), the build itself ([`crate::build_system`]), the install ([`install`]),
//! the Python part ([`python_part`]), the verification ([`verify`]) and the fingerprint
//! ([`fingerprint`]). What `run()` needs later (the defines, the toolkit, torch's SDK) are
//! fields of [`Plan`], never read back out of an argv or an environment.

mod fingerprint;
pub(crate) mod needs;
mod release;
pub mod stock;
pub(crate) mod vars;
mod verify;

use std::collections::BTreeMap;
use std::path::PathBuf;

use rocbuild_probe::{Flavor, Machine, Os};
use rocbuild_recipe::{Recipe, Resolved, Target};
use rocbuild_venv::BuildOptions;
use serde::Serialize;

use crate::build_system::cmake::dependency;
use crate::build_system::{self, cmake::torch::TorchCmakePlan, scratch};
use crate::command::Command;
use crate::compiler_cache;
use crate::context::Context;
use crate::cross;
use crate::error::Result;
use crate::install::python_part::{self, PythonPart};
use crate::install::{self, requirements, InstallPlan};
use crate::libraries::{self, ffmpeg_pc, OptionalLibrary};
use crate::paths::join;
use crate::source::plan::{self as source, SourcePlan};
use crate::toolchain::tools::{self, ToolsPlan};
use crate::toolchain::{self, hip_compat, wheel_compiler, BackendPlan};

/// Every step of one build, concrete.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub recipe: String,
    pub recipe_file: String,
    pub recipe_hash: String,
    pub version: String,
    /// Why this version: `--version`, or the newest release compatible with torch X.
    pub version_reason: String,
    /// A release the recipe does not list: the listed release whose rules build it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules_of: Option<String>,
    /// Releases upstream has that are newer than the recipe's (set by the caller, who asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<rocbuild_recipe::upstream::Notice>,
    pub os: Os,
    pub venv: PathBuf,
    pub venv_chosen_by: String,
    pub python: PathBuf,
    /// torch, only when the build uses it: CTranslate2 does not go stale with a torch upgrade.
    pub torch_version: Option<String>,
    pub torch_git: Option<String>,
    /// The CUDA / HIP version torch was built with (its version.py), when the build uses torch.
    pub torch_cuda: Option<String>,
    pub torch_hip: Option<String>,
    pub flavor: Flavor,
    pub ffmpeg_major: Option<u32>,
    /// The compute backend and its toolchain (SDK, GPU archs).
    pub backend: BackendPlan,
    /// Optional libraries found (`[with.X]`), used or not.
    pub libraries: Vec<OptionalLibrary>,
    /// Libraries built from source into the cache before the configure (`[dependency.X]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<dependency::DependencyPlan>,
    /// This build's compiler is not the one upstream's wheels are built with, where the
    /// recipe says that changes results (`[wheel-compiler]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compiler: Option<wheel_compiler::CompilerParity>,
    /// The C++ compiler and where it was found (a Windows host's developer prompt, Visual
    /// Studio or LLVM; the HIP SDK's clang), when more than its path is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compiler_found: Option<tools::CompilerFound>,
    pub source: SourcePlan,
    /// A proxy is configured (from the settings step): the run skips its network check.
    #[serde(skip)]
    pub proxied: bool,
    pub tools: Option<ToolsPlan>,
    pub torch_cmake: Option<TorchCmakePlan>,
    /// rocBLAS/HIP compatibility header rocbuild writes and force-includes (HIP < 7).
    pub hip_compat: Option<hip_compat::HipCompatPlan>,
    /// Every CMake define of the configure step (recipe, toolchain, user), as given to CMake.
    pub defines: BTreeMap<String, String>,
    /// The GPU toolkit root handed to torch's own CMake package (ROCM_PATH / CUDA_HOME).
    pub toolkit: Option<PathBuf>,
    pub build_dir: PathBuf,
    /// The compilers' temp dir, in the build tree rather than the user's `/tmp`.
    pub scratch: scratch::Scratch,
    pub prefix: PathBuf,
    /// `[build] system`: how the source becomes artifacts (shown when not CMake).
    #[serde(skip_serializing_if = "is_cmake")]
    pub build_system: rocbuild_recipe::BuildSystem,
    pub configure: Command,
    pub build: Command,
    /// The build system's install into the staging prefix (CMake's `--install`); none when its
    /// build step leaves the files there itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub install_prefix: Option<Command>,
    pub python_part: Option<PythonPart>,
    /// The recipe's run-time Python requirements the venv lacks, installed with the package.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requirements: Option<requirements::RequirementsPlan>,
    /// The compiler cache the compilers run under, if any.
    pub compiler_cache: Option<compiler_cache::CompilerCache>,
    pub install: InstallPlan,
    pub verify: Option<Command>,
    pub log_dir: PathBuf,
    pub options: BuildOptions,
    /// Hash of everything that decides the result, apart from the source commit.
    pub fingerprint: String,
    /// `--index` / `--find-links`: where rebuilt wheels were looked for, and what was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<crate::index::IndexPlan>,
    /// The wheel installed instead of a build (chosen and checked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prebuilt: Option<crate::index::PrebuiltInstall>,
    /// The recipe has a verification that cannot run on this host (a Windows venv, no Wine):
    /// why. The install is kept and marked unverified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unverified: Option<String>,
    /// pkg-config files rocbuild writes for an `--ffmpeg DIR` that has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ffmpeg_pc: Option<ffmpeg_pc::FfmpegPc>,
    /// A Windows venv built from another OS: the toolchain file, the Python import library,
    /// Wine for the verification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross: Option<cross::CrossPlan>,
    /// Whether the index's own wheel of this release would load and work here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stock: Option<stock::StockVerdict>,
    /// What a build would need that this machine lacks (a compiler, pkg-config), when the
    /// user asked an index first (`--index`, `--find-links`): a wheel that fits compiles
    /// nothing, so this is refused only when none does (`usecase/build.rs`).
    #[serde(skip)]
    pub missing_prerequisites: Option<tools::Missing>,
}

pub fn plan(
    recipe: &Recipe,
    machine: &Machine,
    opts: &BuildOptions,
    ctx: &Context,
) -> Result<Plan> {
    debug_assert_eq!(ctx.host_os, machine.host.platform.os, "Context::host_os");
    let os = machine.target.platform.os;
    needs::torch(recipe, machine)?;
    let torch = machine.target.torch.as_ref();
    let flavor = torch.map_or(Flavor::Cpu, |t| t.flavor);
    let backend = toolchain::choose(recipe, machine, &opts.backend)?;
    let hip = backend.rocm.as_ref().and_then(|r| r.hip_version.as_deref());
    let cuda = backend.cuda.as_ref().and_then(|c| c.version.as_deref());
    let (release, version_reason) = release::choose(
        recipe,
        release::Against::of(recipe, machine, hip).with_cuda(cuda),
        opts,
    )?;
    let version = release.version.clone();
    let stock = stock::for_build(recipe, machine, &release, &backend);
    let requirements = requirements::plan(recipe, machine, opts, needs::python(recipe, machine))?;
    let cross = cross::plan(recipe.name(), machine, ctx)?;
    let mut libraries = libraries::found(recipe, machine, backend.backend.as_str());
    // Built from source for this target: its library is used whatever the machine has.
    let dependencies = recipe.dependencies(
        os.as_str(),
        machine.target.platform.arch.as_str(),
        backend.backend.as_str(),
        &opts.defines,
    );
    let features = (&libraries[..], &dependencies[..]);
    let resolved = resolve(recipe, machine, flavor, &version, &backend, features);
    let (toolset, missing_prerequisites) =
        tools::required_unless_index(recipe, machine, &backend, &resolved, opts)?;
    let (source, options) =
        source_and_options(recipe, &release, opts, ctx, (os, flavor), &resolved)?;
    let mut vars = vars::of(
        recipe, &version, machine, ctx, &libraries, &source, &backend,
    );
    let compiler_found = toolset.compiler_found();
    let (tools, toolset, compiler) =
        tools_and_compiler(recipe, machine, opts, ctx, &backend, toolset, &mut vars)?;
    let mut dependencies =
        dependency::plan(&dependencies, &toolset, &vars, ctx, machine, cross.as_ref())?;
    dependency::provide(&dependencies, ctx.host_os, &mut libraries, &mut vars);
    let needs_ffmpeg = recipe.raw.needs.ffmpeg;
    let ffmpeg = machine.target.ffmpeg.as_ref().filter(|_| needs_ffmpeg);
    let ffmpeg_pc = ffmpeg.and_then(|f| ffmpeg_pc::plan(f, &ctx.cache, ctx.host_os));
    let mut configured = build_system::of(resolved.build_system).plan(&build_system::Inputs {
        recipe,
        machine,
        opts,
        ctx,
        version: &version,
        resolved: &resolved,
        vars: &vars,
        source: &source,
        backend: &backend,
        toolset: &toolset,
        tools: tools.as_ref(),
        cross: cross.as_ref(),
        ffmpeg_pc: ffmpeg_pc.as_ref(),
    })?;
    let compiler_cache =
        through_compiler_cache(machine, ctx, &backend, &mut configured, &mut dependencies)?;
    vars.insert("build".into(), configured.build_dir.display().to_string());
    vars.insert("prefix".into(), configured.prefix.display().to_string());
    let prefixes: Vec<PathBuf> = dependencies.iter().map(|d| d.prefix.clone()).collect();
    let install = install::plan(recipe, machine, &resolved, &vars, &backend, &prefixes)?;
    let python_part = python_part_of(
        (recipe, machine, &version, &resolved, &vars, &source),
        &configured,
        tools.as_ref(),
        compiler.as_ref(),
    )?;
    let (verify, unverified) = cross::verification(
        verify::plan(machine, &resolved, &vars)?,
        cross.as_ref(),
        ctx.host_os,
    );
    let fingerprint = fingerprint::of(
        recipe,
        &version,
        &source,
        &configured.key,
        &install,
        verify.as_ref(),
        torch,
    );
    let used_torch = torch.filter(|_| recipe.raw.needs.torch);
    Ok(Plan {
        recipe: recipe.name().into(),
        recipe_file: recipe.file.clone(),
        recipe_hash: recipe.hash.clone(),
        version,
        version_reason,
        rules_of: release.rules_of.clone(),
        upstream: None,
        os,
        venv: machine.target.venv.root.clone(),
        venv_chosen_by: machine.target.venv.chosen_by.clone(),
        python: machine.target.python.exe.clone(),
        torch_version: used_torch.map(|t| t.version.clone()),
        torch_git: used_torch.and_then(|t| t.git_version.clone()),
        torch_cuda: used_torch.and_then(|t| t.cuda.clone()),
        torch_hip: used_torch.and_then(|t| t.hip.clone()),
        flavor,
        ffmpeg_major: ffmpeg.map(|f| f.major),
        backend,
        libraries,
        dependencies,
        compiler,
        compiler_found,
        source,
        proxied: ctx.proxied,
        tools,
        torch_cmake: configured.files.torch_cmake,
        hip_compat: configured.files.hip_compat,
        defines: configured.defines,
        toolkit: configured.toolkit,
        scratch: scratch::plan(ctx.host_os, &configured.build_dir),
        build_dir: configured.build_dir,
        prefix: configured.prefix,
        build_system: resolved.build_system,
        configure: configured.configure,
        build: configured.build,
        install_prefix: configured.install_prefix,
        python_part,
        requirements,
        install,
        verify,
        compiler_cache,
        log_dir: join(ctx.host_os, &ctx.cache, &["logs"]),
        options,
        fingerprint,
        index: None,
        prebuilt: None,
        unverified,
        ffmpeg_pc,
        cross,
        stock,
        missing_prerequisites,
    })
}

fn is_cmake(s: &rocbuild_recipe::BuildSystem) -> bool {
    *s == rocbuild_recipe::BuildSystem::Cmake
}

impl Plan {
    /// The build system that planned the steps.
    pub(crate) fn system(&self) -> &'static dyn build_system::BuildSystem {
        build_system::of(self.build_system)
    }

    /// What the build systems' running half reads of this plan.
    pub(crate) fn to_build_run(&self) -> build_system::RunPart<'_> {
        build_system::RunPart {
            torch_cmake: self.torch_cmake.as_ref(),
            hip_compat: self.hip_compat.as_ref(),
            dependencies: &self.dependencies,
            recipe_file: &self.recipe_file,
        }
    }

    /// What staging the install reads of this plan.
    pub(crate) fn to_stage(&self) -> install::stage::StagePlan<'_> {
        install::stage::StagePlan {
            recipe: &self.recipe,
            version: &self.version,
            install: &self.install,
            python_part: self.python_part.as_ref(),
            requirements: self.requirements.as_ref(),
            scratch: &self.scratch,
            cross: self.cross.as_ref(),
        }
    }
}

impl Plan {
    /// The SDK as the build saw it: torch's (from the machine) and the toolkit given to CMake.
    pub(crate) fn sdk_record(&self) -> rocbuild_venv::manifest::SdkRecord {
        let plan = self;
        let toolkit: Option<PathBuf> = plan.toolkit.clone();
        rocbuild_venv::manifest::SdkRecord {
            torch_cuda: plan.torch_cuda.clone(),
            torch_hip: plan.torch_hip.clone(),
            toolkit_version: toolkit.as_deref().and_then(rocbuild_probe::toolkit_version),
            toolkit,
            backend: Some(plan.backend.backend.as_str().to_string()),
            rocm_version: plan.backend.rocm.as_ref().and_then(|r| r.version.clone()),
            gpu_archs: match (&plan.backend.rocm, &plan.backend.torch_gpu) {
                (Some(r), _) => r.archs.clone(),
                (None, Some(t)) => t.archs.clone(),
                (None, None) => Vec::new(),
            },
            cuda_archs: plan
                .backend
                .cuda
                .as_ref()
                .map(|c| c.archs.clone())
                .unwrap_or_default(),
            hip_version: plan
                .backend
                .rocm
                .as_ref()
                .and_then(|r| r.hip_version.clone()),
            hip_compat: plan
                .hip_compat
                .as_ref()
                .map(|h| h.names.clone())
                .unwrap_or_default(),
        }
    }
}

/// The source to build, and the options as recorded: each patch with the sha256 it was
/// applied with.
fn source_and_options(
    recipe: &Recipe,
    release: &rocbuild_recipe::ReleaseInfo,
    opts: &BuildOptions,
    ctx: &Context,
    (os, flavor): (Os, Flavor),
    resolved: &Resolved,
) -> Result<(SourcePlan, BuildOptions)> {
    let (source, patches) = source::plan(recipe, release, opts, ctx, os, flavor, resolved)?;
    let mut options = opts.clone();
    options.patches = patches;
    Ok((source, options))
}

/// The recipe resolved for this target: OS, arch, flavor, release, backend, ROCm version and
/// the features (system libraries found, dependencies built) its overlays may test.
fn resolve(
    recipe: &Recipe,
    machine: &Machine,
    flavor: Flavor,
    version: &str,
    backend: &toolchain::BackendPlan,
    (libraries, dependencies): (
        &[OptionalLibrary],
        &[(&str, &rocbuild_recipe::schema::Dependency)],
    ),
) -> Resolved {
    let mut features = libraries::used(libraries);
    for (name, _) in dependencies {
        if !features.contains(name) {
            features.push(name);
        }
    }
    recipe.resolve(&Target {
        os: machine.target.platform.os.as_str(),
        arch: machine.target.platform.arch.as_str(),
        flavor: flavor.as_str(),
        version,
        backend: backend.backend.as_str(),
        rocm_version: backend.rocm.as_ref().and_then(|r| r.version.as_deref()),
        features: &features,
    })
}

/// The build tools from PyPI (`{tools}` set), and the wheels' compiler in the toolset.
fn tools_and_compiler(
    recipe: &Recipe,
    machine: &Machine,
    opts: &BuildOptions,
    ctx: &Context,
    backend: &toolchain::BackendPlan,
    toolset: tools::Found,
    vars: &mut BTreeMap<String, String>,
) -> Result<(
    Option<tools::ToolsPlan>,
    tools::Toolset,
    Option<wheel_compiler::CompilerParity>,
)> {
    let (tools, mut toolset) =
        tools::python_tools(recipe, machine, backend, &toolset, vars, &ctx.cache)?;
    let compiler = wheels_compiler(recipe, machine, opts, ctx, backend, &mut toolset);
    if let Some(t) = &tools {
        vars.insert("tools".into(), t.dir.display().to_string());
    }
    Ok((tools, toolset, compiler))
}

/// The wheels' compiler, when the recipe names one, it is on PATH and the user named none
/// (`CC`/`CXX` in the environment, `-D CMAKE_C(XX)_COMPILER`): it replaces the toolset's.
fn wheels_compiler(
    recipe: &Recipe,
    machine: &Machine,
    opts: &BuildOptions,
    ctx: &Context,
    backend: &toolchain::BackendPlan,
    toolset: &mut tools::Toolset,
) -> Option<wheel_compiler::CompilerParity> {
    let user_named = ctx.user_compiler
        || opts
            .defines
            .iter()
            .any(|(k, _)| k == "CMAKE_C_COMPILER" || k == "CMAKE_CXX_COMPILER");
    let compiler = wheel_compiler::check(
        recipe,
        machine,
        backend.backend.as_str(),
        &toolset.cxx,
        ctx.wheels_compiler.as_ref(),
        user_named,
    );
    if let Some(a) = compiler.as_ref().and_then(|c| c.chosen()) {
        toolset.cc = a.cc.clone();
        toolset.cxx = a.cxx.clone();
    }
    compiler
}

/// The compiler cache for the build and every dependency's build. It changes no output: it
/// is in neither the build tree's key nor the fingerprint, only in the commands.
fn through_compiler_cache(
    machine: &Machine,
    ctx: &Context,
    backend: &toolchain::BackendPlan,
    configured: &mut build_system::Steps,
    dependencies: &mut [dependency::DependencyPlan],
) -> Result<Option<compiler_cache::CompilerCache>> {
    let languages: &[&str] = match backend.backend {
        rocbuild_venv::Backend::Rocm => &["C", "CXX", "HIP"],
        rocbuild_venv::Backend::Cuda => &["C", "CXX", "CUDA"],
        _ => &["C", "CXX"],
    };
    let compiler_cache = compiler_cache::plan(&ctx.compiler_cache, machine, &ctx.cache, languages)?;
    if let Some(cc) = &compiler_cache {
        // The launcher reaches CMake projects (the build's, when it is CMake, and every
        // dependency's) as defines; a PEP 517 backend has no such setting.
        let cmake = is_cmake(&configured.system);
        let commands = std::iter::once((&mut configured.configure, &mut configured.build, cmake))
            .chain(
                dependencies
                    .iter_mut()
                    .map(|d| (&mut d.configure, &mut d.build, true)),
            );
        for (configure, build, cmake) in commands {
            for (k, v) in cc.defines().into_iter().filter(|_| cmake) {
                *configure = configure.clone().arg(format!("-D{k}={v}"));
            }
            for (k, v) in &cc.env {
                configure.env.insert(k.clone(), v.clone());
                build.env.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(compiler_cache)
}

/// The Python part: a PEP 517 build's wheel is the whole package, its files the Python part;
/// else the recipe's `[python]`, whose extension is compiled by the library's compiler.
fn python_part_of(
    (recipe, machine, version, resolved, vars, source): (
        &Recipe,
        &Machine,
        &str,
        &Resolved,
        &BTreeMap<String, String>,
        &SourcePlan,
    ),
    configured: &build_system::Steps,
    tools: Option<&ToolsPlan>,
    compiler: Option<&wheel_compiler::CompilerParity>,
) -> Result<Option<PythonPart>> {
    if let Some(w) = &configured.unpacked_wheel {
        return Ok(Some(wheel_part(recipe, machine, version, w)));
    }
    Ok(python_part::plan(
        recipe,
        machine,
        version,
        resolved,
        vars,
        source,
        &configured.build_dir,
        &configured.configure,
        tools,
    )?
    .map(|p| same_compiler(p, compiler)))
}

/// The Python part of a build system whose product is a wheel: its files, copied from where
/// the build unpacked it, each checked against the wheel's RECORD.
fn wheel_part(
    recipe: &Recipe,
    machine: &Machine,
    version: &str,
    unpacked: &std::path::Path,
) -> PythonPart {
    let py = &machine.target.python;
    let dist = &recipe.raw.package.distribution;
    PythonPart {
        distribution: dist.clone(),
        version: version.to_string(),
        replaces: py
            .distributions
            .get(&rocbuild_probe::normalize_dist(dist))
            .cloned(),
        build: None,
        extension: None,
        install: python_part::PartInstall::Unpacked {
            unpacked: unpacked.to_path_buf(),
        },
        target: join(
            machine.venv_path_os(),
            &py.site_packages,
            &rocbuild_venv::layout::PIP_TARGET,
        ),
    }
}

/// The Python part's extension compiled by the library's compiler (the wheels' one).
fn same_compiler(
    mut p: PythonPart,
    compiler: Option<&wheel_compiler::CompilerParity>,
) -> PythonPart {
    if let (Some(b), Some(a)) = (&mut p.build, compiler.and_then(|c| c.chosen())) {
        b.env.insert("CC".into(), a.cc.display().to_string());
        b.env.insert("CXX".into(), a.cxx.display().to_string());
    }
    p
}

#[cfg(test)]
pub(crate) mod testing {
    //! Recipes and contexts for the sub-plans' tests.
    use super::*;

    pub fn recipe(name: &str) -> Recipe {
        rocbuild_recipe::RecipeSet::load(&[])
            .expect("built-in recipes load")
            .get(name)
            .expect("built-in recipe")
            .clone()
    }

    pub fn ctx(os: Os) -> Context {
        Context {
            cache: PathBuf::from(if os == Os::Windows {
                r"C:\cache"
            } else {
                "/cache"
            }),
            mirror: None,
            compiler_cache: Default::default(),
            jobs: 2,
            user_compiler: false,
            wheels_compiler: None,
            host_os: os,
            wine_timeout: None,
            proxied: false,
            sdists: Vec::new(),
            sdist_index: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use rocbuild_testkit::machine::{cpu_machine, machine};

    #[test]
    fn a_whole_plan_reads_as_its_sub_plans() {
        let m = cpu_machine(Os::Linux);
        let p = plan(
            &recipe("torchcodec"),
            &m,
            &BuildOptions::default(),
            &ctx(Os::Linux),
        )
        .unwrap();
        assert!(
            p.version_reason.contains("torch 2.9.1"),
            "{}",
            p.version_reason
        );
        // The defines run() records are the plan's, the same the configure argv carries.
        for (k, v) in &p.defines {
            assert!(p.configure.args.contains(&format!("-D{k}={v}")), "{k}");
        }
        assert_eq!(p.torch_hip, None);
        assert!(p.build_dir.starts_with("/cache/build"));
    }

    #[test]
    fn torch_facts_of_a_rocm_torch_are_in_the_plan() {
        let m = machine(Os::Linux);
        let opts = BuildOptions {
            torch_cmake: Some(rocbuild_recipe::TorchCmake::Lite),
            ..BuildOptions::default()
        };
        let p = plan(&recipe("torchcodec"), &m, &opts, &ctx(Os::Linux)).unwrap();
        assert_eq!(p.torch_hip.as_deref(), Some("6.4.43482"));
        assert_eq!(p.toolkit, None, "lite mode hands no toolkit to CMake");
    }
}
