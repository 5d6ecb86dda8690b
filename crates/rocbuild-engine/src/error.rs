use miette::Diagnostic;
use thiserror::Error;

/// Everything that can stop a build. Each variant says what, where and how to fix it.
#[derive(Debug, Error, Diagnostic)]
pub enum EngineError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Recipe(#[from] rocbuild_recipe::RecipeError),

    #[error(transparent)]
    #[diagnostic(transparent)]
    Probe(#[from] rocbuild_probe::ProbeError),

    #[error(transparent)]
    #[diagnostic(transparent)]
    Rocm(#[from] rocbuild_probe::RocmError),

    #[error(transparent)]
    #[diagnostic(transparent)]
    Arch(#[from] rocbuild_probe::ArchError),

    #[error(transparent)]
    #[diagnostic(transparent)]
    Venv(#[from] rocbuild_venv::VenvError),

    #[error("no torch in {site}")]
    #[diagnostic(code(rocbuild::plan::no_torch), help("`{recipe}` is built against the venv's torch: install it first ({python} -m pip install torch), or pick the venv that has it with --venv"))]
    NoTorch {
        site: String,
        recipe: String,
        python: String,
    },

    #[error("the venv's Python {python} has no pip, and nothing else can install {what} into it")]
    #[diagnostic(code(rocbuild::plan::no_pip), help("{help}"))]
    NoPip {
        python: String,
        what: String,
        help: String,
    },

    #[error("{recipe} {version} does not support torch {torch}: it needs torch {range}")]
    #[diagnostic(code(rocbuild::plan::incompatible))]
    Incompatible {
        recipe: String,
        version: String,
        torch: String,
        range: String,
        #[help]
        help: String,
    },

    #[error("no release of {recipe} supports torch {torch}")]
    #[diagnostic(code(rocbuild::plan::no_compatible))]
    NoCompatible {
        recipe: String,
        torch: String,
        #[help]
        help: String,
    },

    #[error("{tool} not found on PATH (needed to {purpose})")]
    #[diagnostic(code(rocbuild::plan::missing_tool), help("install it: {hint}"))]
    MissingTool {
        tool: String,
        purpose: String,
        hint: String,
    },

    #[error("the recipe uses {{{variable}}} but {why}")]
    #[diagnostic(code(rocbuild::plan::no_value), help("{help}"))]
    NoValue {
        variable: String,
        why: String,
        help: String,
    },

    #[error("bad option {option}: {reason}")]
    #[diagnostic(code(rocbuild::usage))]
    Usage {
        option: String,
        reason: String,
        #[help]
        help: Option<String>,
    },

    #[error("cannot get the source {url}: {reason}")]
    #[diagnostic(code(rocbuild::source::unreachable))]
    Source {
        url: String,
        reason: String,
        #[help]
        help: String,
    },

    #[error("{what} of {url} is {found}, but the recipe pins {expected}")]
    #[diagnostic(code(rocbuild::source::moved), help("the tag moved upstream or the mirror is wrong: check the upstream release, then update `commit` in {recipe_file}, or build the pinned commit with --rev {expected}"))]
    Moved {
        what: String,
        url: String,
        found: String,
        expected: String,
        recipe_file: String,
    },

    #[error("{step} failed (exit code {code})\n{tail}")]
    #[diagnostic(
        code(rocbuild::build::failed),
        help("full log: {log}\nreproduce with:\n  {reproduce}")
    )]
    Step {
        step: String,
        code: String,
        tail: String,
        log: String,
        reproduce: String,
    },

    #[error("the install prefix has no file matching the recipe's artifacts {globs}")]
    #[diagnostic(code(rocbuild::install::no_artifacts), help("the build produced nothing to install; check the recipe's [install] artifacts against the files under {prefix}"))]
    NoArtifacts { globs: String, prefix: String },

    #[error("verification failed, the venv was rolled back to exactly what it was\n{output}")]
    #[diagnostic(code(rocbuild::verify::failed), help("this is the loader's/Python's own message above; run `rocbuild doctor` for a closer look. Log: {log}"))]
    Verify { output: String, log: String },

    #[error("{action} {path}: {source}")]
    #[diagnostic(code(rocbuild::io), help("{}", io_help(source)))]
    Io {
        action: String,
        path: String,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "the FFmpeg in {dir} has no DLLs next to it: a static build cannot be loaded at run time"
    )]
    #[diagnostic(
        code(rocbuild::plan::static_ffmpeg),
        help("Windows builds need a shared FFmpeg (bin\\avutil-N.dll …): run `rocbuild ffmpeg` to download a pinned shared build, or pass --ffmpeg DIR pointing at one")
    )]
    StaticFfmpeg { dir: String },

    #[error("{recipe}'s HIP build links {part}, and {sdk} has none")]
    #[diagnostic(
        code(rocbuild::plan::sdk_lacks),
        help("install {part} for that SDK, choose another SDK with --rocm X.Y, or build with --backend cpu. ROCm SDKs found:\n{found}")
    )]
    SdkLacks {
        recipe: String,
        part: String,
        sdk: String,
        found: String,
    },

    #[error("{recipe} needs {missing} at run time, and {site} does not have it")]
    #[diagnostic(
        code(rocbuild::plan::missing_python),
        help(
            "install it first: {command} (rocbuild installs only its own package, with --no-deps)"
        )
    )]
    MissingPython {
        recipe: String,
        missing: String,
        site: String,
        command: String,
    },

    #[error(transparent)]
    #[diagnostic(code(rocbuild::native))]
    Native(#[from] rocbuild_native::NativeError),

    #[error("torch {version} in {site} cannot be imported: {error}")]
    #[diagnostic(
        code(rocbuild::plan::torch_import),
        help("nothing was built or changed: a build against this torch could not be verified. Repair torch first ({python} -m pip install --force-reinstall torch, or the command you installed it with), check it with `{python} -c \"import torch\"`, then run again")
    )]
    TorchImport {
        site: String,
        version: String,
        error: String,
        python: String,
    },

    #[error("the build installed {file}, which the recipe's artifacts name, but it is not a usable library: {reason}")]
    #[diagnostic(
        code(rocbuild::install::bad_artifact),
        help("nothing was installed, the venv is as it was; the file is cut short or damaged: rebuild from scratch (`rocbuild clean --builds`, then run again), and if it comes back check the project's install rules or the recipe's [install] artifacts")
    )]
    BadArtifact { file: String, reason: String },
}

fn io_help(e: &std::io::Error) -> String {
    rocbuild_venv::io_help(e)
}

impl EngineError {
    pub fn io(
        action: &str,
        path: impl AsRef<std::path::Path>,
    ) -> impl FnOnce(std::io::Error) -> EngineError {
        let path = path.as_ref().display().to_string();
        let action = action.to_string();
        move |source| EngineError::Io {
            action,
            path,
            source,
        }
    }
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;
