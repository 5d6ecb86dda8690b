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

    #[error(transparent)]
    #[diagnostic(transparent)]
    Test(#[from] crate::test_error::TestError),

    #[error("no torch in {site}")]
    #[diagnostic(code(rocbuild::plan::no_torch), help("`{recipe}` is built against the venv's torch: install it first ({python} -m pip install torch), or pick the venv that has it with --venv"))]
    NoTorch {
        site: String,
        recipe: String,
        python: String,
    },

    #[error("{python} ignores PYTHONPATH ({pth} lies next to it), so {what} cannot import the build tools rocbuild would put there: {missing}")]
    #[diagnostic(code(rocbuild::plan::isolated_python), help("install them into that Python once (rocbuild then finds them there, and never changes its ._pth file): {install}"))]
    IsolatedPython {
        python: String,
        pth: String,
        what: String,
        missing: String,
        install: String,
    },

    #[error("the venv's Python {python} has no pip, and nothing else can install {what} into it")]
    #[diagnostic(code(rocbuild::plan::no_pip), help("{help}"))]
    NoPip {
        python: String,
        what: String,
        help: String,
    },

    #[error("{recipe} {version} does not support {what}")]
    #[diagnostic(code(rocbuild::plan::incompatible))]
    Incompatible {
        recipe: String,
        version: String,
        /// `torch 2.15.0: it needs torch >=2.9,<2.10`, `FFmpeg 9: it builds against …`.
        what: String,
        #[help]
        help: String,
    },

    #[error("no release of {recipe} supports {what}")]
    #[diagnostic(code(rocbuild::plan::no_compatible))]
    NoCompatible {
        recipe: String,
        /// `torch 1.0.0`, `torch 2.15.0 and FFmpeg 9`.
        what: String,
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

    #[error("{count} of {recipe} missing, all found before anything was fetched:\n{list}")]
    #[diagnostic(code(rocbuild::plan::prerequisites), help("{help}"))]
    Prerequisites {
        recipe: String,
        /// `1 prerequisite`, `3 prerequisites`.
        count: String,
        list: String,
        help: String,
    },

    #[error("the build tools could not be installed from PyPI ({why})\n{tail}")]
    #[diagnostic(
        code(rocbuild::tools::unavailable),
        help("nothing was fetched or built and the venv is unchanged. Install them from the system instead ({fallback}), or let pip reach PyPI (a proxy: HTTPS_PROXY; another index: PIP_INDEX_URL), then run again. Log: {log}")
    )]
    BuildTools {
        why: String,
        tail: String,
        fallback: String,
        log: String,
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

    #[error("the index {index} did not take {wheel}\n{output}")]
    #[diagnostic(code(rocbuild::publish::refused), help("twine's own words above. Credentials come from TWINE_USERNAME / TWINE_PASSWORD or the index's section in ~/.pypirc (pass its name as --index); a 409/400 'already exists' means this exact version is there already: indexes never replace a file, rebuild with other inputs or delete it on the index"))]
    Publish {
        index: String,
        wheel: String,
        output: String,
    },

    #[error("the install prefix has no file matching the recipe's artifacts {globs}")]
    #[diagnostic(code(rocbuild::install::no_artifacts), help("the build produced nothing to install; check the recipe's [install] artifacts against the files under {prefix}"))]
    NoArtifacts { globs: String, prefix: String },

    #[error("verification failed, the venv was rolled back to exactly what it was\n{output}")]
    #[diagnostic(code(rocbuild::verify::failed), help("this is the loader's/Python's own message above; run `rocbuild doctor` for a closer look. Log: {log}"))]
    Verify { output: String, log: String },

    #[error("interrupted by {name} during {during}")]
    #[diagnostic(code(rocbuild::interrupted), help("{undone}run the same command again to go on: the source and the build tree are kept, so it resumes where it stopped"))]
    Interrupted {
        signal: i32,
        name: String,
        during: String,
        /// What was undone, a sentence ending with a space (empty when nothing was).
        undone: String,
    },

    #[error("{action} {path}: {source}")]
    #[diagnostic(code(rocbuild::io), help("{}", io_help(source)))]
    Io {
        action: String,
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// A write that found the disk full (or the quota spent), whatever step it was: never a
    /// damaged artifact or an unreachable source (rocbuild_probe::space).
    #[error("no space left on device: cannot {action} {path}{free}")]
    #[diagnostic(code(rocbuild::no_space), help("{help}"))]
    NoSpace {
        action: String,
        path: String,
        /// ` (12.0 KiB free on that filesystem)`, or empty.
        free: String,
        help: String,
        /// The I/O error, when it came as one (libgit2's reach rocbuild as words).
        #[source]
        source: Option<std::io::Error>,
    },

    #[error(
        "the FFmpeg in {dir} has no DLLs next to it: a static build cannot be loaded at run time"
    )]
    #[diagnostic(
        code(rocbuild::plan::static_ffmpeg),
        help("Windows builds need a shared FFmpeg (bin\\avutil-N.dll …): run `rocbuild ffmpeg` to download a pinned shared build, or pass --ffmpeg DIR pointing at one")
    )]
    StaticFfmpeg { dir: String },

    #[error("cannot build {recipe} for the Windows venv {venv} from this {host} host: {what}")]
    #[diagnostic(code(rocbuild::plan::cross_windows))]
    CrossWindows {
        recipe: String,
        venv: String,
        host: String,
        what: String,
        #[help]
        help: String,
    },

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

    #[error("{option} names an AMD GPU, but the venv's torch {torch} is {what}: {recipe}'s code runs with that torch, which cannot use an AMD GPU")]
    #[diagnostic(code(rocbuild::plan::gpu_needs_rocm_torch), help("{help}"))]
    GpuNeedsRocmTorch {
        option: String,
        torch: String,
        what: String,
        recipe: String,
        help: String,
    },

    #[error("no host compiler that CUDA {version}'s nvcc accepts ({limits}):\n{refused}")]
    #[diagnostic(code(rocbuild::cuda::no_host_compiler), help("{help}"))]
    CudaNoHostCompiler {
        version: String,
        /// `gcc up to 15, clang 3 to 21`, from the toolkit's crt/host_config.h.
        limits: String,
        refused: String,
        help: String,
    },

    #[error("CUDA {version} ({root}) cannot build for what was asked:\n{problems}")]
    #[diagnostic(code(rocbuild::cuda::arch), help("{help}"))]
    CudaArch {
        version: String,
        root: String,
        problems: String,
        help: String,
    },

    #[error("{reason}")]
    #[diagnostic(code(rocbuild::cuda::toolkit), help("{help}"))]
    CudaToolkit { reason: String, help: String },

    #[error("torch {torch} has no GPU code for {missing}: it was built for {built}")]
    #[diagnostic(code(rocbuild::plan::torch_lacks_arch), help("{help}"))]
    TorchLacksArch {
        torch: String,
        missing: String,
        built: String,
        help: String,
    },

    #[error("--rocm {requested} is not the ROCm of the venv's torch {torch} (HIP {hip}): {recipe} compiles no HIP code, it runs on torch's own ROCm")]
    #[diagnostic(code(rocbuild::plan::rocm_not_torchs), help("{help}"))]
    RocmNotTorchs {
        requested: String,
        torch: String,
        hip: String,
        recipe: String,
        help: String,
    },

    #[error(
        "ROCm cannot build {recipe} as asked; {count} problems, all found in this one run:\n{list}"
    )]
    #[diagnostic(code(rocbuild::rocm::problems), help("{help}"))]
    RocmProblems {
        recipe: String,
        count: usize,
        list: String,
        help: String,
    },

    #[error("{recipe} needs {missing} at run time, and {site} does not have it")]
    #[diagnostic(
        code(rocbuild::plan::missing_python),
        help("install it first: {command} ({why})")
    )]
    MissingPython {
        recipe: String,
        missing: String,
        site: String,
        command: String,
        /// Why rocbuild does not install it itself.
        why: String,
    },

    #[error(transparent)]
    #[diagnostic(code(rocbuild::native))]
    Native(#[from] rocbuild_native::NativeError),

    #[error(transparent)]
    #[diagnostic(transparent)]
    Fetch(#[from] rocbuild_fetch::FetchError),

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

    #[error("the package index {index} cannot be read: {reason}")]
    #[diagnostic(
        code(rocbuild::index::unreachable),
        help("nothing was built or changed. Check the URL (the index's PEP 503 simple root, e.g. http://HOST:PORT/simple/ for pypiserver or devpi) and that the server is up; or leave out --index (and ROCBUILD_INDEX) to build from source")
    )]
    IndexUnreachable { index: String, reason: String },

    #[error("{page} is not a PEP 503 simple page: {reason}")]
    #[diagnostic(
        code(rocbuild::index::malformed),
        help("nothing was built or changed. --index takes the simple root of a package index (pypiserver, devpi: http://HOST:PORT/simple/; a static index made with `dumb-pypi` or `piprepo`): its pages are HTML with one <a href> per file. Check the URL, or use --find-links DIR for a directory of wheels")
    )]
    IndexMalformed { page: String, reason: String },

    #[error("--find-links {dir} cannot be read: {reason}")]
    #[diagnostic(
        code(rocbuild::index::find_links),
        help("nothing was built or changed: give a directory holding wheels (e.g. the --out of `rocbuild wheel`)")
    )]
    FindLinks { dir: String, reason: String },
}

fn io_help(e: &std::io::Error) -> String {
    rocbuild_venv::io_help(e)
}

impl EngineError {
    /// The error of `action` on `path` failing with an I/O error: [`EngineError::NoSpace`]
    /// when the disk is full, else [`EngineError::Io`].
    pub fn io(
        action: &str,
        path: impl AsRef<std::path::Path>,
    ) -> impl FnOnce(std::io::Error) -> EngineError {
        let path = path.as_ref().to_path_buf();
        let action = action.to_string();
        move |source| EngineError::from_io(&action, &path, source)
    }

    /// [`EngineError::io`], called at once.
    pub fn from_io(action: &str, path: &std::path::Path, source: std::io::Error) -> EngineError {
        if rocbuild_probe::space::is_out_of_space(&source) {
            return EngineError::no_space(action, path, Some(source));
        }
        EngineError::Io {
            action: action.to_string(),
            path: path.display().to_string(),
            source,
        }
    }

    /// "no space left on device" for `action` on `path`, with what is free there now.
    pub fn no_space(
        action: &str,
        path: &std::path::Path,
        source: Option<std::io::Error>,
    ) -> EngineError {
        let at = rocbuild_probe::space::NoSpace::at(path);
        EngineError::NoSpace {
            action: action.to_string(),
            path: path.display().to_string(),
            free: at.free_text(),
            help: at.help(),
            source,
        }
    }

    /// `self`, unless what it says (an error that reached rocbuild as words: libgit2's, a
    /// rewritten library's) is that the disk is full: then "no space left on device" for
    /// `action` on `path`. For the errors that carry such words: [`EngineError::Source`] and
    /// [`EngineError::BadArtifact`].
    pub fn or_no_space(self, action: &str, path: &std::path::Path) -> EngineError {
        let said = match &self {
            EngineError::Source { reason, .. } | EngineError::BadArtifact { reason, .. } => {
                rocbuild_probe::space::says_out_of_space(reason)
            }
            _ => false,
        };
        if said {
            EngineError::no_space(action, path, None)
        } else {
            self
        }
    }
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use miette::Diagnostic;

    /// Every I/O error path of the engine goes through `EngineError::io`/`from_io`: a full
    /// disk (by kind or raw code) is "no space left on device" with the path, what is free
    /// there and what to free; another I/O error stays an I/O error.
    #[test]
    fn a_full_disk_is_said_as_such_and_nothing_else_is() {
        let d = tempfile::tempdir().unwrap();
        let at = d.path().join("build/x/lib.so");
        #[cfg(unix)]
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        #[cfg(not(unix))]
        let full = std::io::Error::new(std::io::ErrorKind::StorageFull, "full");
        let e = EngineError::io("write", &at)(full);
        let text = e.to_string();
        let want = format!("no space left on device: cannot write {} (", at.display());
        assert!(text.starts_with(&want), "{text}");
        assert!(text.ends_with(" free on that filesystem)"), "{text}");
        assert_eq!(
            e.code().map(|c| c.to_string()).as_deref(),
            Some("rocbuild::no_space")
        );
        assert!(e
            .help()
            .is_some_and(|h| h.to_string().contains("rocbuild clean --builds")));
        let denied = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        assert!(matches!(
            EngineError::io("write", &at)(denied),
            EngineError::Io { .. }
        ));
    }

    /// libgit2 and the library editor say a full disk in words: a source or an artifact
    /// error that says so becomes "no space left"; one that does not stays what it was.
    #[test]
    fn words_of_a_full_disk_are_no_space_not_an_unreachable_source() {
        let d = tempfile::tempdir().unwrap();
        let source = |reason: &str| EngineError::Source {
            url: "https://example.invalid/a/b".into(),
            reason: reason.into(),
            help: "check the network".into(),
        };
        let e =
            source("tried mirror /m: cannot copy: failed to write pack: No space left on device")
                .or_no_space("write the clone", d.path());
        assert!(matches!(e, EngineError::NoSpace { .. }), "{e:?}");
        assert!(e.to_string().contains(&d.path().display().to_string()));
        let e = source("tried https://example.invalid/a/b: connection refused")
            .or_no_space("write the clone", d.path());
        assert!(matches!(e, EngineError::Source { .. }), "{e:?}");
        let e = EngineError::BadArtifact {
            file: "x.so".into(),
            reason: "cannot set the RUNPATH of it: No space left on device (os error 28)".into(),
        }
        .or_no_space("set the search paths of", d.path());
        assert!(matches!(e, EngineError::NoSpace { .. }), "{e:?}");
    }
}
