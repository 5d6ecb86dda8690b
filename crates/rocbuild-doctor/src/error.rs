use miette::Diagnostic;
use thiserror::Error;

/// What stops `doctor`, `deps` or `bundle` before any finding can be made.
#[derive(Debug, Error, Diagnostic)]
pub enum DoctorError {
    #[error("unknown package `{name}`")]
    #[diagnostic(code(rocbuild::doctor::unknown_package), help("doctor knows: {known}"))]
    UnknownPackage { name: String, known: String },

    #[error(transparent)]
    #[diagnostic(transparent)]
    Probe(#[from] rocbuild_probe::ProbeError),

    #[error(transparent)]
    #[diagnostic(
        code(rocbuild::native),
        help("give a native library or program (ELF .so, Windows .dll/.pyd/.exe, macOS .dylib); a truncated or damaged file must be reinstalled")
    )]
    Native(#[from] rocbuild_native::NativeError),

    #[error("{count} dependencies are missing; nothing was copied")]
    #[diagnostic(code(rocbuild::bundle::missing))]
    BundleMissing {
        count: usize,
        #[help]
        help: String,
    },

    #[error(transparent)]
    #[diagnostic(transparent)]
    Venv(#[from] rocbuild_venv::VenvError),

    #[error("nothing to repair in {site}: neither torchcodec nor ctranslate2 is installed")]
    #[diagnostic(
        code(rocbuild::repair::nothing),
        help("name the package to repair: rocbuild repair PACKAGE (its directory under site-packages)")
    )]
    NothingToRepair { site: String },

    #[error("`{name}` is not installed in {site}")]
    #[diagnostic(
        code(rocbuild::repair::not_installed),
        help("name a package by its directory under site-packages (torchcodec, ctranslate2, …); install it with pip first")
    )]
    NotInstalled { name: String, site: String },

    #[error("--search {path} is not a directory")]
    #[diagnostic(
        code(rocbuild::repair::bad_search),
        help(
            "give a directory holding the libraries, such as /opt/homebrew/lib or an FFmpeg's lib/"
        )
    )]
    BadSearchDir { path: String },

    #[error("{path} is a folder: {command} reads library files")]
    #[diagnostic(
        code(rocbuild::deps::folder),
        help("name the libraries or extension modules themselves (.so, .dll, .pyd, .dylib, or a program), e.g. {example}; for an installed package, `rocbuild doctor PACKAGE --venv VENV` reads all of its files")
    )]
    FolderNotFile {
        path: String,
        command: &'static str,
        example: String,
    },

    #[error("{name} is a build of rocbuild's, not pip's files: repair leaves it alone")]
    #[diagnostic(
        code(rocbuild::repair::built),
        help("`rocbuild rebuild {name}` makes it right for the venv again; `rocbuild restore {name}` gives pip's files back, which repair can then fix")
    )]
    BuiltByRocbuild { name: String },

    #[error("the repaired {name} does not load, so it was rolled back: {reason}")]
    #[diagnostic(
        code(rocbuild::repair::verify),
        help("the venv is as it was; `rocbuild doctor {name}` says what else stops it")
    )]
    RepairVerify { name: String, reason: String },

    #[error("cannot work out the DLL preload order: {reason}")]
    #[diagnostic(
        code(rocbuild::repair::hook),
        help(
            "a DLL in the directories found could not be read; reinstall the package it belongs to"
        )
    )]
    Hook { reason: String },

    #[error("cannot {action} {path}: {source}")]
    #[diagnostic(code(rocbuild::io))]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl DoctorError {
    /// A mistake in the command line (exit code 2), not a finding about the venv.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            DoctorError::UnknownPackage { .. }
                | DoctorError::NotInstalled { .. }
                | DoctorError::NothingToRepair { .. }
                | DoctorError::BadSearchDir { .. }
                | DoctorError::FolderNotFile { .. }
                | DoctorError::Probe(
                    rocbuild_probe::ProbeError::NoVenv
                        | rocbuild_probe::ProbeError::NotAVenv { .. }
                )
        )
    }

    /// Each of `files` that is a folder is refused before anything is read (a folder opened as a
    /// file says only "Access denied" on Windows and "Is a directory" or "No such device"
    /// elsewhere). `command` is the subcommand the user ran.
    pub fn refuse_folders(files: &[std::path::PathBuf], command: &'static str) -> Result<(), Self> {
        match files.iter().find(|f| f.is_dir()) {
            None => Ok(()),
            Some(dir) => Err(DoctorError::FolderNotFile {
                path: dir.display().to_string(),
                command,
                example: library_in(dir)
                    .unwrap_or_else(|| dir.join("LIBRARY"))
                    .display()
                    .to_string(),
            }),
        }
    }

    pub fn io(action: &'static str, path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.display().to_string();
        move |source| DoctorError::Io {
            action,
            path,
            source,
        }
    }
}

/// A native library or extension module directly in `dir` (the first by name), to show what
/// `deps` and `bundle` take instead of the folder.
fn library_in(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let mut libs: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_ascii_lowercase();
            p.is_file()
                && (n.contains(".so") || [".pyd", ".dll", ".dylib"].iter().any(|x| n.ends_with(x)))
        })
        .collect();
    libs.sort();
    libs.into_iter().next()
}
