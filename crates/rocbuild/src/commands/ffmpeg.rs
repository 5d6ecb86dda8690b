//! `rocbuild ffmpeg`: a pinned shared FFmpeg for this platform.

use miette::{IntoDiagnostic, Result};

use crate::cli::FfmpegArgs;
use crate::settings::Settings;
use crate::ExitStatus;

/// `rocbuild ffmpeg`: the pinned shared FFmpeg for this platform (or `--url`/`--sha256`).
pub fn ffmpeg(a: &FfmpegArgs, st: &Settings) -> Result<ExitStatus> {
    let cache = st.cache()?;
    let os = rocbuild_probe::Os::current();
    let into = a
        .into
        .as_deref()
        .map(std::path::absolute)
        .transpose()
        .into_diagnostic()?;
    let req = rocbuild_fetch::FfmpegRequest {
        url: a.url.as_deref(),
        sha256: a.sha256.as_deref(),
        major: a.major,
        os: os.as_str(),
        arch: std::env::consts::ARCH,
        downloads: &cache.join("downloads"),
        into: into.as_deref(),
        ffmpeg_root: &cache.join("ffmpeg"),
    };
    let found = rocbuild_engine::usecase::ffmpeg(&cache, &req)?;
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&found).into_diagnostic()?
        );
    } else {
        outln!(
            "FFmpeg {} (libavutil {}), shared, in {}",
            found.major,
            found.avutil_major,
            found.root.display()
        );
        outln!(
            "libraries: {} ({} files)",
            found.lib_dir.display(),
            found.libraries.len()
        );
        if !found.missing.is_empty() {
            outln!(
                "missing (TorchCodec needs them): {}",
                found.missing.join(", ")
            );
        }
        outln!(
            "builds use it from now on (as if given --ffmpeg {}); another --ffmpeg DIR wins",
            found.root.display()
        );
    }
    Ok(ExitStatus::Success)
}
