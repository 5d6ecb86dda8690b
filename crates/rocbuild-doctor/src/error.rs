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
                | DoctorError::Probe(
                    rocbuild_probe::ProbeError::NoVenv
                        | rocbuild_probe::ProbeError::NotAVenv { .. }
                )
        )
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
