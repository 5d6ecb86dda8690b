//! End-to-end tests: the real `rocbuild` binary on fixture projects, real venvs, real cmake,
//! ninja, compilers, FFmpeg and git repositories.

mod catalogue;
mod chroot_rocm;
mod clean;
mod cli_text;
mod common;
mod compiler_cache;
mod crash;
mod ctranslate2_build;
mod deps;
mod doctor;
mod ffmpeg_download;
mod fixture_build;
mod fresh_machine;
mod hip_build;
mod index;
mod locks;
mod mirror;
mod ownership_model;
mod patch;
mod plans;
mod plans_gpu;
mod publish;
mod python_extension;
mod python_wheel;
mod real_torch;
mod real_wheels;
mod repair;
mod restore;
mod schedule;
mod secrets;
mod signals;
mod status;
mod uv_venv;
mod wheel;
mod windows;
