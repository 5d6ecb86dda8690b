//! The settings layer: every environment variable the CLI reads, declared once here, and the
//! one place they are read. `main` takes one snapshot of the process environment
//! ([`Vars::capture`]) and resolves it with the flags into one [`Settings`] value per command;
//! the commands read that value, never the environment. The GPU probe's variables are declared
//! in `rocbuild_probe::vars` and read from the same snapshot, handed on as a `ProbeEnv`
//! ([`Settings::probe_env`]).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use rocbuild_probe::{GpuTargets, ProbeEnv, Venv};

use crate::cli::Global;

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

/// `TWINE_USERNAME` / `TWINE_PASSWORD`: twine's credentials (only whether they are set is read).
pub const TWINE_VARS: [&str; 2] = ["TWINE_USERNAME", "TWINE_PASSWORD"];
/// `CC` / `CXX`: the user named the compilers.
pub const COMPILER_VARS: [&str; 2] = ["CC", "CXX"];

/// One snapshot of the process environment, taken once per command: every variable a command
/// reads is read from it. Names are compared as the host compares them (without case on
/// Windows, where `Path` is asked as `PATH`).
#[derive(Debug, Clone, Default)]
pub struct Vars {
    vars: Vec<(OsString, OsString)>,
    fold_case: bool,
}

impl Vars {
    /// The process environment, now.
    pub fn capture() -> Vars {
        Vars::of(std::env::vars_os())
    }

    /// Given variables (tests), compared as this host compares names.
    pub fn of(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Vars {
        Vars {
            vars: vars.into_iter().collect(),
            fold_case: rocbuild_probe::Os::current().rules().env_names_fold_case(),
        }
    }

    /// The value of `k`, set (even empty).
    pub fn os(&self, k: &str) -> Option<&OsStr> {
        let same = |n: &OsStr| match (self.fold_case, n.to_str()) {
            (true, Some(n)) => n.eq_ignore_ascii_case(k),
            _ => n == k,
        };
        self.vars
            .iter()
            .find(|(n, _)| same(n))
            .map(|(_, v)| v.as_os_str())
    }

    /// The value of `k`, set and not empty.
    fn set(&self, k: &str) -> Option<&OsStr> {
        self.os(k).filter(|v| !v.is_empty())
    }

    /// `k` as a path, set and not empty.
    fn path(&self, k: &str) -> Option<PathBuf> {
        self.set(k).map(PathBuf::from)
    }

    /// `k` as text, set and valid Unicode (as `std::env::var` reads it).
    fn text(&self, k: &str) -> Option<&str> {
        self.os(k).and_then(OsStr::to_str)
    }

    /// `k` as text, set, valid Unicode and not empty.
    fn nonempty_text(&self, k: &str) -> Option<&str> {
        self.text(k).filter(|v| !v.is_empty())
    }

    /// The directories `k` lists, separated like PATH (empty entries dropped).
    pub fn paths(&self, k: &str) -> Vec<PathBuf> {
        self.os(k)
            .map(|v| {
                std::env::split_paths(v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn all(&self) -> impl Iterator<Item = (&OsString, &OsString)> {
        self.vars.iter().map(|(k, v)| (k, v))
    }
}

/// A setting that could not be resolved: the error, kept to be given by the command that
/// needs the setting (a command that does not need it runs).
#[derive(Debug, Clone)]
struct Problem {
    code: &'static str,
    message: String,
    help: String,
}

impl Problem {
    fn report(&self) -> miette::Report {
        miette::Report::new(
            miette::MietteDiagnostic::new(self.message.clone())
                .with_code(self.code)
                .with_help(self.help.clone()),
        )
    }
}

/// Everything a command reads from the flags every command shares and from the environment,
/// resolved once in `main` ([`Settings::resolve`]) and handed to the command.
#[derive(Debug)]
pub struct Settings {
    vars: Vars,
    /// The flags every command shares (`--recipes`, `--cache`, `-v`, `-q`, `--compiler-cache`).
    pub global: Global,
    /// Recipe directories: `ROCBUILD_RECIPES` (like PATH), then `--recipes`.
    pub recipe_dirs: Vec<PathBuf>,
    /// `--cache`, else `ROCBUILD_CACHE`, else the per-user default, made absolute and checked.
    cache: Result<PathBuf, Problem>,
    /// `--compiler-cache`, else `ROCBUILD_COMPILER_CACHE`: (the option it came from, why it is
    /// not a kind) when it is not one.
    compiler_cache: Result<rocbuild_engine::compiler_cache::Request, (&'static str, String)>,
    /// `ROCBUILD_INDEX`: the indexes to look for rebuilt wheels on when no `--index` is given.
    pub index: Vec<String>,
    /// `ROCBUILD_MIRROR`, when set and not empty.
    pub mirror: Option<PathBuf>,
    /// Ask the recipes' sources for newer releases: unless `ROCBUILD_UPSTREAM=off`.
    pub upstream: bool,
    /// `TWINE_USERNAME` or `TWINE_PASSWORD` is set: twine has credentials of the user's
    /// (publish then gives it no placeholders). Only whether they are set is read.
    pub twine_configured: bool,
    /// `$PYTORCH_ROCM_ARCH` (`gfx1010;gfx1030`, `;`, `,` or spaces between, as torch's own
    /// build reads it), read by `ProbeEnv::pytorch_rocm_arch`: doctor's GPU targets when
    /// `--gpu-arch` is not given.
    pub pytorch_rocm_arch: GpuTargets,
    /// The environment as far as a build depends on it.
    pub environment: rocbuild_engine::usecase::Environment,
}

impl Settings {
    /// Resolve the shared flags `global` and the environment snapshot `vars`, once.
    pub fn resolve(global: &Global, vars: Vars) -> Settings {
        let mut recipe_dirs = vars.paths(ROCBUILD_RECIPES);
        recipe_dirs.extend(global.recipes.iter().cloned());
        let environment = environment(&vars);
        Settings {
            pytorch_rocm_arch: environment.probe.pytorch_rocm_arch(),
            recipe_dirs,
            cache: resolve_cache(global, &vars),
            compiler_cache: resolve_compiler_cache(global, &vars),
            index: vars
                .text(ROCBUILD_INDEX)
                .map(|v| v.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            mirror: vars.path(ROCBUILD_MIRROR),
            upstream: !vars
                .text(ROCBUILD_UPSTREAM)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("off")),
            twine_configured: TWINE_VARS.iter().any(|v| vars.set(v).is_some()),
            environment,
            global: global.clone(),
            vars,
        }
    }

    /// The cache directory, or an error naming the ways to give one (HOME unset) or why the
    /// one given is not safe.
    pub fn cache(&self) -> miette::Result<PathBuf> {
        self.cache.clone().map_err(|p| p.report())
    }

    /// The directory of the key that seals rocbuild's journals and manifests
    /// (`rocbuild_venv::state_key`): the cache, or why there is none it can use (no cache; a
    /// cache another user or group can write to, or inside a Python environment, where a key
    /// would prove nothing).
    pub fn state_key_dir(&self) -> Result<PathBuf, String> {
        self.cache.clone().map_err(|p| p.message)
    }

    /// `--compiler-cache`, else `ROCBUILD_COMPILER_CACHE`, else auto; with the cache engines'
    /// own variables (`SCCACHE_*`, `CCACHE_*`), which reach them unchanged.
    pub fn compiler_cache(&self) -> miette::Result<rocbuild_engine::compiler_cache::Request> {
        self.compiler_cache.clone().map_err(|(option, reason)| {
            rocbuild_engine::EngineError::Usage {
                option: option.into(),
                reason,
                help: Some("e.g. --compiler-cache sccache".into()),
            }
            .into()
        })
    }

    /// What the use cases need of the settings.
    pub fn engine(&self) -> miette::Result<rocbuild_engine::Settings> {
        let cache = self.cache()?;
        Ok(rocbuild_engine::Settings {
            downloaded_ffmpeg: rocbuild_engine::usecase::ffmpeg::downloaded(&cache),
            mirror: self.mirror.clone(),
            cache,
            compiler_cache: self.compiler_cache()?,
            env: self.environment.clone(),
            upstream: self.upstream,
        })
    }

    /// The environment as the GPU and toolchain probes read it (the same snapshot).
    pub fn probe_env(&self) -> &ProbeEnv {
        &self.environment.probe
    }

    /// A number in a TEST ONLY variable.
    pub fn test_hook(&self, name: &str) -> Option<u64> {
        self.vars.text(name).and_then(|v| v.parse().ok())
    }

    /// A test hook's `swap+N`: N counted from the install's swap.
    pub fn test_hook_in_swap(&self, name: &str) -> Option<u64> {
        self.vars
            .text(name)
            .and_then(|v| v.strip_prefix("swap+").and_then(|n| n.parse().ok()))
    }

    /// `ROCBUILD_LOG`, the log filter, when set.
    pub fn log_filter(&self) -> Option<&str> {
        self.vars.text(ROCBUILD_LOG)
    }

    /// Home and per-user config directories for `rocbuild schedule`: `$HOME`
    /// (`%USERPROFILE%`), and `$XDG_CONFIG_HOME` else `~/.config` (`%APPDATA%` on Windows).
    /// Tests redirect both.
    pub fn user_dirs(&self) -> Option<(PathBuf, PathBuf)> {
        let home = rules().home_vars().iter().find_map(|k| self.vars.path(k))?;
        let (config_var, in_home) = rules().config_base();
        let config = self
            .vars
            .path(config_var)
            .unwrap_or_else(|| in_home.iter().fold(home.clone(), |d, p| d.join(p)));
        Some((home, config))
    }

    /// The venv of this command, chosen once (`--venv`, `$VIRTUAL_ENV`, `$CONDA_PREFIX`, the
    /// venv rocbuild is installed in, `./.venv`) and handed down as it is: nothing below
    /// chooses again.
    pub fn venv(&self, a: &crate::cli::VenvArg) -> Result<Venv, rocbuild_probe::ProbeError> {
        let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        if let Some(p) = &a.venv {
            return Ok(Venv {
                root: absolute(p),
                chosen_by: "--venv".into(),
            });
        }
        for var in [VIRTUAL_ENV, CONDA_PREFIX] {
            if let Some(v) = self.vars.set(var) {
                return Ok(Venv {
                    root: absolute(Path::new(v)),
                    chosen_by: format!("${var}"),
                });
            }
        }
        // `pip install rocbuild` put the binary into the user's venv: that venv. Not the
        // private environment of a tool installer (`uv tool`, `uvx`, `pipx`), which holds
        // only rocbuild.
        if let Some(root) = std::env::current_exe()
            .ok()
            .and_then(|exe| self.venv_of_executable(&exe))
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
    /// environment: `uv tool install` (`…/uv/tools/NAME`), `uvx` (uv's cache,
    /// `…/archive-v0/…`), `pipx` (`…/pipx/venvs/NAME`). Those hold rocbuild alone, never the
    /// user's torch.
    fn venv_of_executable(&self, exe: &Path) -> Option<PathBuf> {
        let exe = dunce::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
        let dir = exe.parent()?;
        let name = dir.file_name()?.to_string_lossy().to_ascii_lowercase();
        if name != "bin" && name != "scripts" {
            return None;
        }
        let root = dir.parent()?;
        if !root.join("pyvenv.cfg").is_file() || self.is_tool_environment(root) {
            return None;
        }
        Some(root.to_path_buf())
    }

    /// Is `root` a tool installer's private environment (uv tool, uvx, pipx)?
    fn is_tool_environment(&self, root: &Path) -> bool {
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
                .any(|v| self.vars.os(v).is_some_and(|d| root.starts_with(d)))
    }
}

fn rules() -> &'static dyn rocbuild_probe::PlatformRules {
    rocbuild_probe::Os::current().rules()
}

/// The default cache directory; None when no variable names one (no `HOME`): then rocbuild
/// refuses rather than fill whatever directory it was started in.
fn cache_dir(vars: &Vars) -> Option<PathBuf> {
    if let Some(c) = vars.path(ROCBUILD_CACHE) {
        return Some(c);
    }
    rules()
        .cache_bases()
        .iter()
        .find_map(|(k, under)| vars.path(k).map(|d| under.iter().fold(d, |d, p| d.join(p))))
        .map(|d| d.join("rocbuild"))
}

/// The cache directory: `--cache`, else [`cache_dir`], made absolute and checked.
fn resolve_cache(g: &Global, vars: &Vars) -> Result<PathBuf, Problem> {
    let Some(dir) = g.cache.clone().or_else(|| cache_dir(vars)) else {
        let names: Vec<&str> = rules().cache_bases().iter().map(|(k, _)| *k).collect();
        let listed = format!(
            "{ROCBUILD_CACHE}, {} are",
            names.join(", ").replacen(", HOME", " and HOME", 1)
        );
        return Err(Problem {
            code: "rocbuild::settings::no_cache",
            message: format!("no cache directory: {listed} all unset or empty, so rocbuild does not know where to keep sources, build trees and logs"),
            help: "set ROCBUILD_CACHE=DIR (or HOME), or pass --cache DIR".into(),
        });
    };
    let dir = std::path::absolute(&dir).map_err(|e| Problem {
        code: "rocbuild::settings::cache",
        message: format!(
            "cannot make the cache directory {} absolute: {e}",
            dir.display()
        ),
        help: "pass --cache DIR with an absolute path".into(),
    })?;
    rocbuild_secret::check_cache_dir(&dir).map_err(|why| Problem {
        code: "rocbuild::settings::unsafe_cache",
        message: format!("the cache directory is not safe: {why}"),
        help: "use a cache directory of your own: --cache DIR or ROCBUILD_CACHE=DIR (the default is ~/.cache/rocbuild)".into(),
    })?;
    Ok(dir)
}

/// `--compiler-cache`, else `ROCBUILD_COMPILER_CACHE`, else auto; with `SCCACHE_*` and
/// `CCACHE_*`.
fn resolve_compiler_cache(
    g: &Global,
    vars: &Vars,
) -> Result<rocbuild_engine::compiler_cache::Request, (&'static str, String)> {
    use rocbuild_engine::compiler_cache::{Choice, Request};
    let (text, from) = match (&g.compiler_cache, vars.text(ROCBUILD_COMPILER_CACHE)) {
        (Some(t), _) => (Some(t.clone()), "--compiler-cache"),
        (None, Some(t)) => (Some(t.to_string()), ROCBUILD_COMPILER_CACHE),
        (None, None) => (None, ""),
    };
    let choice = match text {
        None => Choice::Auto,
        Some(t) => t
            .trim()
            .parse::<Choice>()
            .map_err(|reason| (from, reason))?,
    };
    let env = vars
        .all()
        .filter_map(|(k, v)| Some((k.to_str()?.to_string(), v.to_str()?.to_string())))
        .filter(|(k, _)| k.starts_with("SCCACHE_") || k.starts_with("CCACHE_"))
        .collect();
    Ok(Request { choice, env })
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
/// the working directory, `ROCBUILD_WINE_TIMEOUT`, `ROCBUILD_SDISTS`, the sdist index), what
/// the build's processes inherit, and the probes' view of the same snapshot.
fn environment(vars: &Vars) -> rocbuild_engine::usecase::Environment {
    let mut inherited: Vec<(String, String)> = vars
        .all()
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
        user_compiler: COMPILER_VARS.iter().any(|v| vars.set(v).is_some()),
        path: vars.os(PATH).map(OsStr::to_os_string),
        cwd: std::env::current_dir().unwrap_or_default(),
        wine_timeout: vars
            .nonempty_text(ROCBUILD_WINE_TIMEOUT)
            .and_then(|v| v.trim().parse().ok()),
        proxied: PROXY_VARS.iter().any(|v| vars.nonempty_text(v).is_some()),
        sdists: vars.paths(ROCBUILD_SDISTS),
        sdist_index: vars
            .nonempty_text(ROCBUILD_SDIST_INDEX)
            .or_else(|| vars.nonempty_text(PIP_INDEX_URL))
            .map(str::to_string),
        cuda_wheels: vars.paths(ROCBUILD_CUDA_WHEELS),
        probe: ProbeEnv::from_vars(vars.all().map(|(k, v)| (k.clone(), v.clone()))),
        inherited,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use rocbuild_probe::vars::PYTORCH_ROCM_ARCH;

    fn global(args: &[&str]) -> Global {
        let mut argv = vec!["rocbuild"];
        argv.extend_from_slice(args);
        argv.push("recipes");
        crate::cli::Cli::try_parse_from(argv).unwrap().global
    }

    fn vars(pairs: &[(&str, &str)]) -> Vars {
        Vars::of(
            pairs
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v))),
        )
    }

    /// Every setting comes from the snapshot it is given, never from the process: this
    /// process has none of these variables, and the value still says them.
    #[test]
    fn every_setting_is_resolved_from_the_one_snapshot() {
        let cache = tempfile::tempdir().unwrap();
        let c = cache.path().to_str().unwrap();
        let st = Settings::resolve(
            &global(&["--recipes", "/r2"]),
            vars(&[
                (ROCBUILD_CACHE, c),
                (ROCBUILD_RECIPES, "/r1"),
                (PYTORCH_ROCM_ARCH, "gfx1030;gfx1100"),
                (ROCBUILD_INDEX, "http://a/simple http://b/simple"),
                ("TWINE_USERNAME", "me"),
                (ROCBUILD_UPSTREAM, "OFF"),
                (ROCBUILD_MIRROR, "/m"),
                (ROCBUILD_SDISTS, "/s"),
                ("SCCACHE_REDIS", "redis://127.0.0.1"),
                ("ROCM_PATH", "/opt/rocm-test"),
                ("ROCBUILD_TEST_KILL_AFTER_STEP", "7"),
            ]),
        );
        assert_eq!(st.recipe_dirs, [PathBuf::from("/r1"), PathBuf::from("/r2")]);
        assert_eq!(
            st.cache().unwrap(),
            std::path::absolute(cache.path()).unwrap()
        );
        assert_eq!(st.state_key_dir().unwrap(), st.cache().unwrap());
        assert_eq!(st.pytorch_rocm_arch.names(), ["gfx1030", "gfx1100"]);
        assert_eq!(st.index, ["http://a/simple", "http://b/simple"]);
        assert!(st.twine_configured && !st.upstream);
        assert_eq!(st.mirror.as_deref(), Some(Path::new("/m")));
        assert_eq!(st.environment.sdists, [PathBuf::from("/s")]);
        assert_eq!(st.test_hook(ROCBUILD_TEST_KILL_AFTER_STEP), Some(7));
        let cc = st.compiler_cache().unwrap();
        assert_eq!(
            cc.env.get("SCCACHE_REDIS").map(String::as_str),
            Some("redis://127.0.0.1")
        );
        // The probes read the same snapshot.
        assert_eq!(st.probe_env().var("ROCM_PATH"), Some("/opt/rocm-test"));
        assert_eq!(
            st.probe_env().var(PYTORCH_ROCM_ARCH),
            Some("gfx1030;gfx1100")
        );
        let engine = st.engine().unwrap();
        assert_eq!(engine.cache, st.cache().unwrap());
        assert!(!engine.upstream);
    }

    /// A setting that cannot be resolved is kept as its error, given by what needs it: a bad
    /// `--compiler-cache` is a usage error (exit 2) naming where it came from; no cache
    /// directory is an error naming the ways to give one. What does not need them resolves.
    #[test]
    fn a_setting_that_cannot_be_resolved_is_given_as_an_error_by_what_needs_it() {
        let st = Settings::resolve(
            &global(&[]),
            vars(&[
                (ROCBUILD_COMPILER_CACHE, "distcc"),
                (ROCBUILD_INDEX, "http://i/simple"),
            ]),
        );
        let e = st.compiler_cache().unwrap_err();
        match e.downcast_ref::<rocbuild_engine::EngineError>() {
            Some(rocbuild_engine::EngineError::Usage { option, .. }) => {
                assert_eq!(option, ROCBUILD_COMPILER_CACHE)
            }
            other => panic!("{other:?}"),
        }
        let e = st.cache().unwrap_err();
        assert!(e.to_string().contains("no cache directory"), "{e}");
        assert!(st.state_key_dir().is_err());
        assert!(st.engine().is_err());
        assert_eq!(st.index, ["http://i/simple"]);
        // --compiler-cache wins over the variable, and is named when it is the bad one.
        let st = Settings::resolve(
            &global(&["--compiler-cache", "nope"]),
            vars(&[(ROCBUILD_COMPILER_CACHE, "sccache")]),
        );
        let e = st.compiler_cache().unwrap_err();
        assert!(
            matches!(e.downcast_ref::<rocbuild_engine::EngineError>(),
                Some(rocbuild_engine::EngineError::Usage { option, .. }) if option == "--compiler-cache"),
            "{e:?}"
        );
    }

    /// The venv named by `$VIRTUAL_ENV` in the snapshot, `--venv` first.
    #[test]
    fn the_venv_is_chosen_from_the_snapshot() {
        // An absolute path on every host (Windows makes "/v" absolute with its drive).
        let active = std::env::temp_dir().join("active");
        let st = Settings::resolve(
            &global(&[]),
            vars(&[(VIRTUAL_ENV, active.to_str().unwrap())]),
        );
        let v = st.venv(&crate::cli::VenvArg { venv: None }).unwrap();
        assert_eq!(
            (v.root.as_path(), v.chosen_by.as_str()),
            (active.as_path(), "$VIRTUAL_ENV")
        );
        let v = st
            .venv(&crate::cli::VenvArg {
                venv: Some("/v/named".into()),
            })
            .unwrap();
        assert_eq!(v.chosen_by, "--venv");
    }
}
