//! Downloads that are what they claim to be, and archives that stay where they are put.
//!
//! A download is pinned by URL and sha256: it streams into a temporary file beside its
//! destination while hashing, and only a matching file is renamed into place (a mismatch leaves
//! nothing behind). A zip is checked entry by entry before anything is written (no `..`, no
//! absolute or drive-letter paths, no symlinks), extracted into a temporary directory next to
//! the target, and renamed into place. Shared FFmpeg builds (what TorchCodec needs on Windows)
//! are recognised by their layout.

mod cuda;
mod cuda_stub;
mod download;
mod extract;
mod ffmpeg;
mod sdist;
pub mod upstream;

use thiserror::Error;

pub use cuda::{
    install_cuda_toolkit, CudaInstall, CudaPins, CudaRoot, CudaToolkitPin, CudaWheel,
    BUILTIN_CUDA_PINS,
};
pub use download::{download, download_verified, get_text, sha256_file};
pub use extract::extract_zip_safely;
pub use ffmpeg::{
    fetch_shared_ffmpeg, find_ffmpeg_shared, FfmpegPin, FfmpegPins, FfmpegRequest, FfmpegShared,
    BUILTIN_FFMPEG_PINS,
};
pub use sdist::{extract_sdist, find_offline, sdist_file_name};

#[derive(Debug, Error, miette::Diagnostic)]
pub enum FetchError {
    #[error("`{given}` is not a sha256 (64 hex digits)")]
    #[diagnostic(
        code(rocbuild::fetch::bad_sha256),
        help(
            "give the archive's published SHA-256, e.g. from the release page or a winget manifest"
        )
    )]
    BadSha256 { given: String },
    #[error("cannot tell a file name from the URL {url}")]
    #[diagnostic(code(rocbuild::fetch::bad_url), help("the URL must end in the archive's file name, e.g. …/ffmpeg-7.1.1-full_build-shared.zip"))]
    BadUrl { url: String },
    #[error("downloading {url} failed: {reason}")]
    #[diagnostic(code(rocbuild::fetch::request), help("check the network connection and the URL; a proxy is taken from HTTPS_PROXY / HTTP_PROXY"))]
    Request { url: String, reason: String },
    #[error("{url} answered HTTP {status}")]
    #[diagnostic(
        code(rocbuild::fetch::http_status),
        help("the file may have moved: check the URL in the release page, or pass --url")
    )]
    HttpStatus { url: String, status: u16 },
    #[error("{url} does not have the pinned checksum: expected sha256 {expected}, got {actual}")]
    #[diagnostic(code(rocbuild::fetch::checksum), help("the download was removed. If the publisher replaced the file, verify the new one and pass its sha256 with --sha256; otherwise the download was corrupted or tampered with"))]
    ChecksumMismatch {
        url: String,
        expected: String,
        actual: String,
    },
    #[error("{archive} is not a readable .tar.gz archive: {reason}")]
    #[diagnostic(
        code(rocbuild::fetch::bad_archive),
        help(
            "download it again (remove the file from the cache's sdists/ or your sdist directory)"
        )
    )]
    BadArchive { archive: String, reason: String },
    #[error("{url} has no {what}")]
    #[diagnostic(
        code(rocbuild::fetch::not_on_index),
        help("check the name and the version; offline, put the file in a directory of sdists ($ROCBUILD_SDISTS)")
    )]
    NotOnIndex { what: String, url: String },
    #[error("{archive} is not a readable zip archive: {reason}")]
    #[diagnostic(
        code(rocbuild::fetch::bad_zip),
        help("download it again; the archive must be a .zip")
    )]
    BadZip { archive: String, reason: String },
    #[error("{archive} holds an entry `{entry}` that would be written outside {target}: {reason}")]
    #[diagnostic(code(rocbuild::fetch::unsafe_entry), help("nothing was extracted; this archive is malformed or malicious: do not extract it by hand either"))]
    UnsafeEntry {
        archive: String,
        entry: String,
        target: String,
        reason: String,
    },
    /// A link that leads out (through however many links), a loop of links, an entry written
    /// through a link, a hard link to anything but an earlier file, a device or a fifo (and,
    /// in an sdist, a name that escapes): refused before anything is written.
    #[error("{archive} is not safe to unpack: its entry `{entry}` {reason}")]
    #[diagnostic(code(rocbuild::fetch::unsafe_archive))]
    UnsafeArchive {
        archive: String,
        entry: String,
        reason: String,
        #[help]
        help: String,
    },
    #[error("cannot {action} {path}: {source}")]
    #[diagnostic(code(rocbuild::fetch::io))]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A write that found the disk full (or the quota spent): never a bad archive or a failed
    /// download.
    #[error("no space left on device: cannot {action} {path}{free}")]
    #[diagnostic(code(rocbuild::no_space), help("{help}"))]
    NoSpace {
        action: &'static str,
        path: String,
        /// ` (12.0 KiB free on that filesystem)`, or empty.
        free: String,
        help: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no pinned shared FFmpeg build for {platform}{wanted}")]
    #[diagnostic(code(rocbuild::fetch::no_pin))]
    NoPin {
        platform: String,
        wanted: String,
        #[help]
        help: String,
    },
    #[error("{archive} holds no shared FFmpeg build (no bin/avutil-NN.dll, lib/libavutil.so.NN or lib/libavutil.NN.dylib)")]
    #[diagnostic(code(rocbuild::fetch::not_shared_ffmpeg), help("TorchCodec needs the shared libraries, not a static ffmpeg.exe: download a \"shared\" build (gyan.dev full_build-shared, BtbN *-shared)"))]
    NotSharedFfmpeg { archive: String },
    #[error("the CUDA toolkit pin file {file} is invalid: {reason}")]
    #[diagnostic(code(rocbuild::fetch::cuda_pins))]
    CudaPins { file: String, reason: String },
    #[error("no pinned CUDA toolkit {version} for {platform}")]
    #[diagnostic(code(rocbuild::cuda::no_pin))]
    NoCudaPin {
        version: String,
        platform: String,
        #[help]
        help: String,
    },
    #[error("CUDA {version} cannot be installed from the package index: {why}")]
    #[diagnostic(
        code(rocbuild::cuda::no_compiler_wheel),
        help("install NVIDIA's CUDA {version} toolkit (developer.nvidia.com/cuda-downloads: its apt repository or the runfile) and set CUDA_HOME to it; or build with CUDA 13 from the index (--cuda 13.2)")
    )]
    NoCudaCompiler { version: String, why: String },
    #[error("cannot build the link-only libcuda.so stub: {reason}")]
    #[diagnostic(
        code(rocbuild::cuda::driver_stub),
        help("rocbuild builds it with the host C compiler; check that $CC or cc works")
    )]
    DriverStub { reason: String },
    #[error("the FFmpeg pin file {file} is invalid: {reason}")]
    #[diagnostic(code(rocbuild::fetch::pins))]
    Pins { file: String, reason: String },
}

/// The error of `action` on `path` failing with an I/O error: [`FetchError::NoSpace`] when the
/// disk is full (with what is free there), else [`FetchError::Io`].
pub(crate) fn io(
    action: &'static str,
    path: &std::path::Path,
) -> impl FnOnce(std::io::Error) -> FetchError {
    let path = path.to_path_buf();
    move |source| {
        if rocbuild_probe::space::is_out_of_space(&source) {
            let at = rocbuild_probe::space::NoSpace::at(&path);
            return FetchError::NoSpace {
                action,
                path: path.display().to_string(),
                free: at.free_text(),
                help: at.help(),
                source,
            };
        }
        FetchError::Io {
            action,
            path: path.display().to_string(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full disk under any fetch step (a download's write, an archive's unpacking) is said
    /// as such, with the path and what is free there; another I/O error stays what it is.
    #[test]
    fn a_full_disk_is_no_space_not_an_io_error() {
        let d = tempfile::tempdir().unwrap();
        let at = d.path().join("downloads/x.zip");
        let full = std::io::Error::new(std::io::ErrorKind::StorageFull, "full");
        let e = io("write", &at)(full);
        let text = e.to_string();
        let want = format!("no space left on device: cannot write {} (", at.display());
        assert!(text.starts_with(&want), "{text}");
        assert!(text.ends_with(" free on that filesystem)"), "{text}");
        let help = miette::Diagnostic::help(&e).map(|h| h.to_string());
        assert!(help.is_some_and(|h| h.contains("rocbuild clean")));
        let denied = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        assert!(matches!(io("write", &at)(denied), FetchError::Io { .. }));
    }
}
