//! End-to-end tests: the real `rocbuild` binary on fixture projects, real venvs, real cmake,
//! ninja, compilers, FFmpeg and git repositories.

mod catalogue;
mod clean;
mod cli_text;
mod common;
mod crash;
mod ctranslate2_build;
mod deps;
mod doctor;
mod ffmpeg_download;
mod fixture_build;
mod hip_build;
mod locks;
mod mirror;
mod patch;
mod plans;
mod plans_gpu;
mod real_torch;
mod restore;
mod schedule;
mod status;
mod uv_venv;
mod wheel;
