//! The ffmpeg use case: a pinned shared FFmpeg for this platform fetched into the cache (or
//! a folder named), and recorded as the FFmpeg later builds use when none is given.

use std::path::{Path, PathBuf};

use crate::error::{EngineError, Result};

/// Names the FFmpeg `rocbuild ffmpeg` fetched last, in `<cache>/ffmpeg/`.
pub const CURRENT: &str = "current";

/// Fetch the FFmpeg `req` asks for (its downloads and unpacked trees under `cache`), and
/// record it as the one later builds use ([`downloaded`]).
pub fn ffmpeg(
    cache: &Path,
    req: &rocbuild_fetch::FfmpegRequest,
) -> Result<rocbuild_fetch::FfmpegShared> {
    let found = rocbuild_fetch::fetch_shared_ffmpeg(&rocbuild_fetch::FfmpegPins::builtin(), req)?;
    let dir = cache.join("ffmpeg");
    let current = dir.join(CURRENT);
    std::fs::create_dir_all(&dir).map_err(EngineError::io("create", &dir))?;
    std::fs::write(&current, found.root.display().to_string())
        .map_err(EngineError::io("write", &current))?;
    Ok(found)
}

/// The FFmpeg `rocbuild ffmpeg` fetched into `cache`, when it is still there.
pub fn downloaded(cache: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(cache.join("ffmpeg").join(CURRENT)).ok()?;
    let dir = PathBuf::from(text.trim());
    dir.is_dir().then_some(dir)
}
