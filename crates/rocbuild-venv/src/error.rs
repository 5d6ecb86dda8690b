use miette::Diagnostic;
use thiserror::Error;

/// What can go wrong with the state rocbuild keeps in a venv. The codes and words are the
/// ones users and the bad-input catalogue know (they were the engine's before this crate).
#[derive(Debug, Error, Diagnostic)]
pub enum VenvError {
    #[error("{action} {path}: {source}")]
    #[diagnostic(code(rocbuild::io), help("{}", io_help(source)))]
    Io {
        action: String,
        path: String,
        #[source]
        source: std::io::Error,
    },

    #[error("bad option {option}: {reason}")]
    #[diagnostic(code(rocbuild::usage))]
    Usage {
        option: String,
        reason: String,
        #[help]
        help: Option<String>,
    },

    #[error("rocbuild has not installed {recipe} in {site}")]
    #[diagnostic(code(rocbuild::restore::not_installed))]
    NotInstalled {
        recipe: String,
        site: String,
        #[help]
        help: String,
    },

    #[error("another rocbuild run is working on {venv} (pid {pid})")]
    #[diagnostic(
        code(rocbuild::lock::busy),
        help("wait for it to finish, or drop --no-wait to wait for it")
    )]
    Locked { venv: String, pid: String },

    #[error("interrupted by {name} while waiting for the lock of {venv}")]
    #[diagnostic(
        code(rocbuild::interrupted),
        help("nothing was changed; run the command again when the other run is done")
    )]
    Interrupted {
        signal: i32,
        name: String,
        venv: String,
    },

    #[error("the manifest {path} cannot be used: {reason}")]
    #[diagnostic(
        code(rocbuild::manifest::invalid),
        help("rocbuild will not remove or replace any file on its word. If the cache that holds rocbuild's key was cleared or another is in use, run with that cache again (--cache / ROCBUILD_CACHE). Otherwise build again with `rocbuild {recipe}` (it writes a new manifest; pip's files kept in .rocbuild/backup/{recipe} stay what `rocbuild restore {recipe}` gives back), or give pip's package back with `pip install --force-reinstall --no-deps {recipe}`")
    )]
    BadManifest {
        path: String,
        recipe: String,
        reason: String,
    },

    #[error("refused to act on `{path}` under {root}: {why}")]
    #[diagnostic(
        code(rocbuild::state::escape),
        help("rocbuild only creates, moves or removes files below the venv's site-packages and never through a link; the state that named this path was damaged or planted: nothing was changed")
    )]
    Escape {
        path: String,
        root: String,
        why: String,
    },

    #[error("the journal {path} was not acted on: {why}")]
    #[diagnostic(code(rocbuild::journal::untrusted), help("{help}"))]
    UntrustedJournal {
        path: String,
        why: String,
        help: String,
    },

    #[error("the key that seals rocbuild's state ({path}) was refused: {why}")]
    #[diagnostic(code(rocbuild::state::key_refused), help("{help}"))]
    KeyRefused {
        path: String,
        why: String,
        help: String,
    },

    #[error("{package} holds a file whose name is not UTF-8: {path}")]
    #[diagnostic(
        code(rocbuild::venv::name_not_utf8),
        help("rocbuild records every file it backs up by name, as text, so it could not give this one back byte for byte; nothing was changed. Rename or remove it (or reinstall the package with pip, which never writes such a name), then run again")
    )]
    NameNotUtf8 { package: String, path: String },

    #[error(
        "{package} holds a file whose path is too long for rocbuild to keep a copy of: {path}"
    )]
    #[diagnostic(
        code(rocbuild::venv::path_too_long),
        help("its copy in .rocbuild/backup/ would need a path of {len} bytes, more than the {max} the OS opens, so `restore` could not give it back; nothing was changed. Move the venv to a shorter path, or remove the file (reinstall the package with pip), then run again")
    )]
    PathTooLong {
        package: String,
        path: String,
        len: usize,
        max: usize,
    },

    #[error("{what} of {recipe} cannot be restored: {why}")]
    #[diagnostic(code(rocbuild::restore::no_baseline), help("{help}"))]
    NoBaseline {
        what: String,
        recipe: String,
        why: String,
        help: String,
    },

    #[error("cannot {action}: {files} in use by another program (Windows lets no program replace or delete a DLL that a running process has loaded, or a file it holds open)")]
    #[diagnostic(
        code(rocbuild::venv::in_use),
        help("close every program that uses {packages} from this venv: a Python, a Jupyter kernel, an IDE's console, the app you are working on (Resource Monitor's \"Associated Handles\" search, or Sysinternals' `handle`, names the process that holds a file); then run rocbuild again. Nothing was changed")
    )]
    InUse {
        action: String,
        files: String,
        packages: String,
    },

    #[error("the unpacked wheel {path} was not installed: {why}")]
    #[diagnostic(
        code(rocbuild::wheel::tampered),
        help("its files must be exactly those its RECORD lists, with those hashes: something changed them after rocbuild checked the download, or the wheel was built wrong. Remove {path} (rocbuild unpacks the wheel again from its checked download) and run again; nothing in the venv was changed")
    )]
    BadWheel { path: String, why: String },

    #[error("{root} is not a venv: {reason}")]
    #[diagnostic(code(rocbuild::probe::not_a_venv))]
    NotAVenv {
        root: String,
        reason: String,
        #[help]
        help: String,
    },
}

/// What to do about a failed file operation, by its kind.
pub fn io_help(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::StorageFull => "the disk is full: free space on that filesystem (a build needs room in the cache, and an install stages its files beside site-packages), then run again; an install that stopped here was rolled back".into(),
        K::PermissionDenied | K::ReadOnlyFilesystem => "rocbuild may not write there: check the owner and permissions of that path (a system Python's venv may need to be recreated as your user)".into(),
        K::NotFound => "something removed that file while rocbuild ran (another program, a clean-up): run again".into(),
        _ => "run again with -v for every step; if it persists, the message above names the file and the operation that failed".into(),
    }
}

impl VenvError {
    /// `held` (paths under `site`) stop `action`: the files, and the packages they belong to
    /// (the first folder under site-packages) as what to close.
    pub fn in_use(action: &str, site: &std::path::Path, held: &[std::path::PathBuf]) -> VenvError {
        let files = held
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let mut packages: Vec<String> = held
            .iter()
            .filter_map(|p| p.strip_prefix(site).ok()?.components().next())
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        packages.dedup();
        VenvError::InUse {
            action: action.into(),
            files: format!("{files} {}", if held.len() == 1 { "is" } else { "are" }),
            packages: if packages.is_empty() {
                "its packages".into()
            } else {
                packages.join(", ")
            },
        }
    }

    pub fn io(
        action: &str,
        path: impl AsRef<std::path::Path>,
    ) -> impl FnOnce(std::io::Error) -> VenvError {
        let path = path.as_ref().display().to_string();
        let action = action.to_string();
        move |source| VenvError::Io {
            action,
            path,
            source,
        }
    }
}

pub type Result<T, E = VenvError> = std::result::Result<T, E>;
