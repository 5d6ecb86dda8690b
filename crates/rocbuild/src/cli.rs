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
    /// Download a shared FFmpeg build (pinned by URL and sha256), extract it, and say how to use it.
    Ffmpeg(FfmpegArgs),
}

#[derive(Debug, Args)]
pub struct FfmpegArgs {
    /// Archive to download instead of the pinned one (a .zip of a shared build).
    #[arg(long, value_name = "URL", requires = "sha256")]
    pub url: Option<String>,
    /// The archive's sha256; a download that differs is refused and removed.
    #[arg(long, value_name = "HEX", requires = "url")]
    pub sha256: Option<String>,
    /// FFmpeg major of the pinned build to fetch [default: the first pinned for this platform].
    #[arg(long, value_name = "N", conflicts_with = "url")]
    pub major: Option<u32>,
    /// Extract into this directory (replaced as a whole) [default: <cache>/ffmpeg/<archive name>].
    #[arg(long, value_name = "DIR")]
    pub into: Option<PathBuf>,
    /// Print the result as JSON on stdout.
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
