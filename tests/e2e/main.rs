//! End-to-end tests: the real `rocbuild` binary on fixture projects, real venvs, real cmake,
//! ninja, compilers, FFmpeg and git repositories.

mod common;
mod errors;
mod ffmpeg_download;
mod fixture_build;
mod mirror;
mod plans;
mod real_torch;
