//! The command line: clap structs only.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "rocbuild",
    version,
    about = "Rebuild native Python ML extensions against the torch, GPU SDK and FFmpeg really installed",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    disable_version_flag = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub build: BuildArgs,
    #[command(flatten)]
    pub global: Global,
}

#[derive(Debug, Args)]
pub struct Global {
    /// Print rocbuild's own version (`--version` picks the recipe release to build).
    #[arg(short = 'V', long = "rocbuild-version", action = clap::ArgAction::Version)]
    pub rocbuild_version: Option<bool>,
    /// Extra recipe directory (repeatable; also ROCBUILD_RECIPES, separated like PATH).
    #[arg(long = "recipes", global = true, value_name = "DIR")]
    pub recipes: Vec<PathBuf>,
    /// Cache for sources, build trees and logs (also ROCBUILD_CACHE).
    #[arg(long, global = true, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// More output: every line of every build step.
    #[arg(short, long, global = true, conflicts_with = "quiet")]
    pub verbose: bool,
    /// Only errors and the final result.
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the recipes and their releases.
    Recipes {
        /// Also list the template variables a recipe may use.
        #[arg(long)]
        variables: bool,
    },
    /// Say why torch, torchcodec or ctranslate2 will not load in the venv, and what to do first.
    Doctor(DoctorArgs),
    /// The dependency tree of native libraries: where each one is found, who provides it, what is missing.
    Deps(DepsArgs),
    /// Copy the non-system libraries a frozen app needs into DIR, keeping their layout.
    Bundle(BundleArgs),
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Packages to check (torch, torchcodec, ctranslate2, or a recipe) [default: all that are installed].
    #[arg(value_name = "RECIPE")]
    pub packages: Vec<String>,
    /// The venv to check [default: $VIRTUAL_ENV, then $CONDA_PREFIX, then ./.venv].
    #[arg(long, value_name = "PATH")]
    pub venv: Option<PathBuf>,
    /// The GPU's architectures, e.g. gfx1010 (comma separated) [default: $PYTORCH_ROCM_ARCH].
    #[arg(long = "gpu-arch", value_name = "GFX", value_delimiter = ',')]
    pub gpu_arch: Vec<String>,
    /// Seconds the load test (a fresh Python) may take per package before it is killed.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub timeout: u64,
    /// Skip the load test: only read the files (no Python is started).
    #[arg(long)]
    pub no_load: bool,
    /// Print the findings as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DepsArgs {
    /// Native libraries or programs (ELF, PE or Mach-O).
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// More directories the loader searches (like LD_LIBRARY_PATH or os.add_dll_directory; repeatable).
    #[arg(long = "search", value_name = "DIR")]
    pub search: Vec<PathBuf>,
    /// Print the tree as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BundleArgs {
    /// The app's native libraries or extension modules.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Where to copy them (created if missing).
    #[arg(long, value_name = "DIR", required = true)]
    pub into: PathBuf,
    /// More directories the loader searches (repeatable).
    #[arg(long = "search", value_name = "DIR")]
    pub search: Vec<PathBuf>,
    /// Print what was copied as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TorchCmakeArg {
    Native,
    Lite,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The recipe to build (see `rocbuild recipes`).
    #[arg(required = true)]
    pub recipe: Option<String>,
    /// The venv to install into [default: $VIRTUAL_ENV, then $CONDA_PREFIX, then ./.venv].
    #[arg(long, value_name = "PATH")]
    pub venv: Option<PathBuf>,
    /// Release to build [default: the newest one compatible with the installed torch].
    #[arg(long = "version", value_name = "X")]
    pub release: Option<String>,
    /// Build a release even though the installed torch is outside its range.
    #[arg(long)]
    pub force: bool,
    /// Build another checkout: a local directory (as it is, unless --rev) or a git URL.
    #[arg(long, value_name = "PATH|URL")]
    pub source: Option<String>,
    /// Branch, tag or commit to build (of --source, or of the recipe's repository).
    #[arg(long, value_name = "REV")]
    pub rev: Option<String>,
    /// Parallel build jobs [default: the number of CPUs].
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Print the whole plan (every command, env var and path) and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// torch's CMake package: its own (native, needs the GPU toolkit) or rocbuild's minimal one (lite).
    #[arg(long, value_enum, value_name = "MODE")]
    pub torch_cmake: Option<TorchCmakeArg>,
    /// Extra CMake define, KEY=VALUE (repeatable; wins over the recipe).
    #[arg(short = 'D', long = "define", value_name = "KEY=VALUE")]
    pub defines: Vec<String>,
    /// Root of the FFmpeg to build against (holding include/ and lib/).
    #[arg(long, value_name = "DIR")]
    pub ffmpeg: Option<PathBuf>,
    /// Plan for the machine described in this JSON file instead of probing this one (with --dry-run).
    #[arg(long, value_name = "FILE", requires = "dry_run")]
    pub machine: Option<PathBuf>,
    /// Print the outcome as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}
