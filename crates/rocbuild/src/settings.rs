//! The settings layer: every environment variable the CLI reads, declared once here, and the
//! one place they are read (the GPU probe's are declared in `rocbuild_probe::vars`, which the
//! probe reads through its `ProbeEnv`).

use std::path::{Path, PathBuf};

use rocbuild_probe::Venv;

/// The active venv (`source V/bin/activate` sets it): the venv when `--venv` is not given.
pub const VIRTUAL_ENV: &str = "VIRTUAL_ENV";
/// The active conda environment: the venv when neither `--venv` nor `VIRTUAL_ENV` is given.
pub const CONDA_PREFIX: &str = "CONDA_PREFIX";
/// uv's tool environments (`uv tool install rocbuild`): never the user's venv.
pub const UV_TOOL_DIR: &str = "UV_TOOL_DIR";
/// pipx's environments (`pipx install rocbuild`): never the user's venv.
pub const PIPX_HOME: &str = "PIPX_HOME";

/// Extra recipe directories, separated like PATH. Same as `--recipes`.
pub const ROCBUILD_RECIPES: &str = "ROCBUILD_RECIPES";
/// Where sources, build trees, tools and logs are kept. Default: `$XDG_CACHE_HOME/rocbuild`,
/// else `~/.cache/rocbuild` (`%LOCALAPPDATA%\rocbuild` on Windows).
pub const ROCBUILD_CACHE: &str = "ROCBUILD_CACHE";
/// Offline git mirror: `https://HOST/OWNER/REPO` is read from `$ROCBUILD_MIRROR/HOST/OWNER/REPO.git`.
pub const ROCBUILD_MIRROR: &str = "ROCBUILD_MIRROR";
/// TEST ONLY: SIGKILL the process right after the N-th filesystem step of an install, so the
/// crash-safety test can stop a real run at every step. Never set it otherwise.
pub const ROCBUILD_TEST_KILL_AFTER_STEP: &str = "ROCBUILD_TEST_KILL_AFTER_STEP";
/// Tests: `1` stops after the command line is parsed (exit 0), so the documentation's command
/// lines are checked against the real parser.
pub const ROCBUILD_TEST_PARSE_ONLY: &str = "ROCBUILD_TEST_PARSE_ONLY";
/// The GPU architectures (`gfx1010;gfx1030`, `;`, `,` or space separated) for `doctor`'s GPU
/// check when `--gpu-arch` is not given; the same variable torch's own build reads.
pub const PYTORCH_ROCM_ARCH: &str = "PYTORCH_ROCM_ARCH";
/// TEST ONLY: after the N-th filesystem step of an install, fail every step that needs disk
/// space with ENOSPC, as a full disk would, so the bad-input catalogue can show that a disk
/// filling up while staging leaves the venv unchanged. Never set it otherwise.
pub const ROCBUILD_TEST_FAIL_AFTER_STEP: &str = "ROCBUILD_TEST_FAIL_AFTER_STEP";
/// The default of `--index`: package index URLs (PEP 503 simple roots), space separated.
pub const ROCBUILD_INDEX: &str = "ROCBUILD_INDEX";
/// The default of `--compiler-cache`.
pub const ROCBUILD_COMPILER_CACHE: &str = "ROCBUILD_COMPILER_CACHE";
/// Test-only: wait after the N-th filesystem step of an install until a signal comes.
pub const ROCBUILD_TEST_PAUSE_AFTER_STEP: &str = "ROCBUILD_TEST_PAUSE_AFTER_STEP";
/// Log filter for `tracing` (e.g. `rocbuild=debug`).
pub const ROCBUILD_LOG: &str = "ROCBUILD_LOG";
/// The PATH handed to a scheduled run, and where the wheels' compiler (`g++-14`) is looked for.
pub const PATH: &str = "PATH";
/// Seconds a verification under Wine may take (a Windows venv built from Linux).
pub const ROCBUILD_WINE_TIMEOUT: &str = "ROCBUILD_WINE_TIMEOUT";
/// Directories of sdists (separated like PATH), read before the index is asked.
pub const ROCBUILD_SDISTS: &str = "ROCBUILD_SDISTS";
/// Directories (separated like PATH) holding the pinned CUDA toolkit wheels, taken from there
/// before any download (offline use).
pub const ROCBUILD_CUDA_WHEELS: &str = "ROCBUILD_CUDA_WHEELS";
/// The simple API root sdists are downloaded from (default: `PIP_INDEX_URL`, else PyPI).
pub const ROCBUILD_SDIST_INDEX: &str = "ROCBUILD_SDIST_INDEX";
/// pip's index, the sdist index when `ROCBUILD_SDIST_INDEX` is not set.
pub const PIP_INDEX_URL: &str = "PIP_INDEX_URL";
/// `off`: never ask a recipe's source for releases newer than the recipe's (by default it is
/// asked at most once a day per source, with a short timeout).
pub const ROCBUILD_UPSTREAM: &str = "ROCBUILD_UPSTREAM";

/// The default cache directory; None when no variable names one (no `HOME`): then rocbuild
/// refuses rather than fill whatever directory it was started in.
pub fn cache_dir() -> Option<std::path::PathBuf> {
    if let Some(c) = var(ROCBUILD_CACHE) {
        return Some(c);
    }
    rules()
        .cache_bases()
        .iter()
        .find_map(|(k, under)| var(k).map(|d| under.iter().fold(d, |d, p| d.join(p))))
        .map(|d| d.join("rocbuild"))
}

fn rules() -> &'static dyn rocbuild_probe::PlatformRules {
    rocbuild_probe::Os::current().rules()
}

fn var(k: &str) -> Option<std::path::PathBuf> {
    std::env::var_os(k)
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
}

/// Home and per-user config directories for `rocbuild schedule`: `$HOME` (`%USERPROFILE%`),
/// and `$XDG_CONFIG_HOME` else `~/.config` (`%APPDATA%` on Windows). Tests redirect both.
pub fn user_dirs() -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let home = rules().home_vars().iter().find_map(|k| var(k))?;
    let (config_var, in_home) = rules().config_base();
    let config =
        var(config_var).unwrap_or_else(|| in_home.iter().fold(home.clone(), |d, p| d.join(p)));
    Some((home, config))
}

/// The cache directory: `--cache`, else [`cache_dir`], made absolute. Without either (HOME
/// unset) an error naming the ways to give one.
pub fn cache(g: &crate::cli::Global) -> miette::Result<std::path::PathBuf> {
    use miette::IntoDiagnostic;
    let dir = match g.cache.clone().or_else(cache_dir) {
        Some(d) => d,
        None => {
            let names: Vec<&str> = rules().cache_bases().iter().map(|(k, _)| *k).collect();
            let vars = format!(
                "{ROCBUILD_CACHE}, {} are",
                names.join(", ").replacen(", HOME", " and HOME", 1)
            );
            return Err(miette::miette!(
                code = "rocbuild::settings::no_cache",
                help = "set ROCBUILD_CACHE=DIR (or HOME), or pass --cache DIR",
                "no cache directory: {vars} all unset or empty, so rocbuild does not know where to keep sources, build trees and logs"
            ));
        }
    };
    let dir = std::path::absolute(dir).into_diagnostic()?;
    if let Err(why) = rocbuild_secret::check_cache_dir(&dir) {
        return Err(miette::miette!(
            code = "rocbuild::settings::unsafe_cache",
            help = "use a cache directory of your own: --cache DIR or ROCBUILD_CACHE=DIR (the default is ~/.cache/rocbuild)",
            "the cache directory is not safe: {why}"
        ));
    }
    Ok(dir)
}

/// The directory of the key that seals rocbuild's journals and manifests
/// (`rocbuild_venv::state_key`): the cache as [`cache`] finds it, or why there is none it can
/// use (no cache; a cache another user or group can write to, or inside a Python environment,
/// where a key would prove nothing).
pub fn state_key_dir(g: &crate::cli::Global) -> Result<std::path::PathBuf, String> {
    let Some(dir) = g.cache.clone().or_else(cache_dir) else {
        return Err(
            "no cache directory is known: set ROCBUILD_CACHE or HOME, or pass --cache".into(),
        );
    };
    let dir = std::path::absolute(dir).map_err(|e| e.to_string())?;
    rocbuild_secret::check_cache_dir(&dir)
        .map_err(|why| format!("the cache is not safe: {why}"))?;
    Ok(dir)
}

/// `TWINE_USERNAME` or `TWINE_PASSWORD` is set: twine has credentials of the user's (publish
/// then gives it no placeholders). Only whether they are set is read, never their values.
pub fn twine_configured() -> bool {
    ["TWINE_USERNAME", "TWINE_PASSWORD"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
}

/// `ROCBUILD_INDEX`: the indexes to look for rebuilt wheels on when no `--index` is given.
pub fn index() -> Vec<String> {
    std::env::var(ROCBUILD_INDEX)
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// `ROCBUILD_MIRROR`, when set and not empty.
pub fn mirror() -> Option<std::path::PathBuf> {
    var(ROCBUILD_MIRROR)
}

/// Recipe directories: `ROCBUILD_RECIPES` (like PATH), then `--recipes`.
pub fn recipe_dirs(g: &crate::cli::Global) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<std::path::PathBuf> = std::env::var_os(ROCBUILD_RECIPES)
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    dirs.extend(g.recipes.iter().cloned());
    dirs
}

/// A number in a TEST ONLY variable.
pub fn test_hook(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// A test hook's `swap+N`: N counted from the install's swap.
pub fn test_hook_in_swap(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .and_then(|v| v.strip_prefix("swap+").and_then(|n| n.parse().ok()))
}

/// `$PYTORCH_ROCM_ARCH`: doctor's GPU targets when `--gpu-arch` is not given.
pub fn pytorch_rocm_arch() -> rocbuild_probe::GpuTargets {
    rocbuild_probe::GpuTargets::parse(&[std::env::var(PYTORCH_ROCM_ARCH).unwrap_or_default()])
}

/// Names the FFmpeg `rocbuild ffmpeg` fetched last, in `<cache>/ffmpeg/`.
pub const CURRENT_FFMPEG: &str = "current";

/// The FFmpeg `rocbuild ffmpeg` fetched, when it is still there.
pub fn downloaded_ffmpeg(cache: &std::path::Path) -> Option<std::path::PathBuf> {
    let text = std::fs::read_to_string(cache.join("ffmpeg").join(CURRENT_FFMPEG)).ok()?;
    let dir = std::path::PathBuf::from(text.trim());
    dir.is_dir().then_some(dir)
}

/// A variable that lists directories like PATH (`PATH`, the loader's `LD_LIBRARY_PATH` /
/// `DYLD_LIBRARY_PATH`), for doctor: where this host's loader looks. Empty entries dropped.
pub fn split_env_paths(var: &str) -> Vec<std::path::PathBuf> {
    std::env::var_os(var)
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The venv of this command, chosen once (`--venv`, `$VIRTUAL_ENV`, `$CONDA_PREFIX`, the venv
/// rocbuild is installed in, `./.venv`) and handed down as it is: nothing below chooses again.
pub fn venv(a: &crate::cli::VenvArg) -> Result<Venv, rocbuild_probe::ProbeError> {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    if let Some(p) = &a.venv {
        return Ok(Venv {
            root: absolute(p),
            chosen_by: "--venv".into(),
        });
    }
    for var in [VIRTUAL_ENV, CONDA_PREFIX] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            return Ok(Venv {
                root: absolute(Path::new(&v)),
                chosen_by: format!("${var}"),
            });
        }
    }
    // `pip install rocbuild` put the binary into the user's venv: that venv. Not the private
    // environment of a tool installer (`uv tool`, `uvx`, `pipx`), which holds only rocbuild.
    if let Some(root) = std::env::current_exe()
        .ok()
        .and_then(|exe| venv_of_executable(&exe))
    {
        return Ok(Venv {
            root,
            chosen_by: "the venv rocbuild is installed in".into(),
        });
    }
    let local = Path::new(".venv");
    if local.is_dir() {
        return Ok(Venv {
            root: absolute(local),
            chosen_by: "./.venv".into(),
        });
    }
    Err(rocbuild_probe::ProbeError::NoVenv)
}

/// The venv an executable was installed into (`<venv>/bin/rocbuild`, `<venv>\Scripts\
/// rocbuild.exe`, a `pyvenv.cfg` beside them), unless it is a tool installer's own
/// environment: `uv tool install` (`…/uv/tools/NAME`), `uvx` (uv's cache, `…/archive-v0/…`),
/// `pipx` (`…/pipx/venvs/NAME`). Those hold rocbuild alone, never the user's torch.
fn venv_of_executable(exe: &Path) -> Option<PathBuf> {
    let exe = dunce::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
    let dir = exe.parent()?;
    let name = dir.file_name()?.to_string_lossy().to_ascii_lowercase();
    if name != "bin" && name != "scripts" {
        return None;
    }
    let root = dir.parent()?;
    if !root.join("pyvenv.cfg").is_file() || is_tool_environment(root) {
        return None;
    }
    Some(root.to_path_buf())
}

/// Is `root` a tool installer's private environment (uv tool, uvx, pipx)?
fn is_tool_environment(root: &Path) -> bool {
    let parts: Vec<String> = root
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_ascii_lowercase())
        .collect();
    let has = |a: &str, b: &str| parts.windows(2).any(|w| w[0] == a && w[1] == b);
    has("uv", "tools")
        || has("pipx", "venvs")
        || parts.iter().any(|p| p.starts_with("archive-v"))
        || [UV_TOOL_DIR, PIPX_HOME]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|d| root.starts_with(d)))
}

/// Environment variables that change from shell to shell without changing anything a build
/// depends on.
const VOLATILE_ENV: &[&str] = &[
    "_",
    "OLDPWD",
    "PWD",
    "SHLVL",
    "TERM",
    "TERM_PROGRAM",
    "TERM_PROGRAM_VERSION",
    "COLORTERM",
    "COLUMNS",
    "LINES",
    "PS1",
    "PROMPT_COMMAND",
    "SSH_CLIENT",
    "SSH_CONNECTION",
    "SSH_TTY",
    "SSH_AUTH_SOCK",
    "DISPLAY",
    "WINDOWID",
    "TMUX_PANE",
    "STY",
    "XDG_SESSION_ID",
    "LS_COLORS",
    "NO_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
];

/// The proxy variables git and the downloads honour: when one is set, the network check
/// before a run is skipped.
const PROXY_VARS: [&str; 6] = [
    "https_proxy",
    "HTTPS_PROXY",
    "http_proxy",
    "HTTP_PROXY",
    "ALL_PROXY",
    "all_proxy",
];

/// The environment as far as a build depends on it: the planner's inputs (`CC`/`CXX`, `PATH`,
/// the working directory, `ROCBUILD_WINE_TIMEOUT`, `ROCBUILD_SDISTS`, the sdist index) and
/// what the build's processes inherit, read here once.
pub fn environment() -> rocbuild_engine::usecase::Environment {
    let text = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut inherited: Vec<(String, String)> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .filter(|(k, _)| !VOLATILE_ENV.contains(&k.as_str()))
        .collect();
    inherited.sort();
    rocbuild_engine::usecase::Environment {
        user_compiler: ["CC", "CXX"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty())),
        path: std::env::var_os(PATH),
        cwd: std::env::current_dir().unwrap_or_default(),
        wine_timeout: text(ROCBUILD_WINE_TIMEOUT).and_then(|v| v.trim().parse().ok()),
        proxied: PROXY_VARS.iter().any(|v| text(v).is_some()),
        sdists: std::env::var_os(ROCBUILD_SDISTS)
            .filter(|v| !v.is_empty())
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default(),
        sdist_index: text(ROCBUILD_SDIST_INDEX).or_else(|| text(PIP_INDEX_URL)),
        cuda_wheels: std::env::var_os(ROCBUILD_CUDA_WHEELS)
            .filter(|v| !v.is_empty())
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default(),
        inherited,
    }
}

/// What the use cases need of the settings.
pub fn settings(g: &crate::cli::Global) -> miette::Result<rocbuild_engine::Settings> {
    let cache = cache(g)?;
    Ok(rocbuild_engine::Settings {
        downloaded_ffmpeg: downloaded_ffmpeg(&cache),
        mirror: mirror(),
        cache,
        compiler_cache: compiler_cache(g)?,
        env: environment(),
        upstream: upstream(),
    })
}

/// Whether to ask the recipes' sources for newer releases: unless `ROCBUILD_UPSTREAM=off`.
pub fn upstream() -> bool {
    !std::env::var(ROCBUILD_UPSTREAM).is_ok_and(|v| v.trim().eq_ignore_ascii_case("off"))
}

/// `--compiler-cache`, else `ROCBUILD_COMPILER_CACHE`, else auto; with the cache engines' own
/// variables (`SCCACHE_*`, `CCACHE_*`), which reach them unchanged.
pub fn compiler_cache(
    g: &crate::cli::Global,
) -> miette::Result<rocbuild_engine::compiler_cache::Request> {
    use rocbuild_engine::compiler_cache::{Choice, Request};
    let (text, from) = match (
        &g.compiler_cache,
        std::env::var(ROCBUILD_COMPILER_CACHE).ok(),
    ) {
        (Some(t), _) => (Some(t.clone()), "--compiler-cache"),
        (None, Some(t)) => (Some(t), ROCBUILD_COMPILER_CACHE),
        (None, None) => (None, ""),
    };
    let choice =
        match text {
            None => Choice::Auto,
            Some(t) => t.trim().parse::<Choice>().map_err(|reason| {
                rocbuild_engine::EngineError::Usage {
                    option: from.into(),
                    reason,
                    help: Some("e.g. --compiler-cache sccache".into()),
                }
            })?,
        };
    let env = std::env::vars()
        .filter(|(k, _)| k.starts_with("SCCACHE_") || k.starts_with("CCACHE_"))
        .collect();
    Ok(Request { choice, env })
}
