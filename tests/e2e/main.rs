//! End-to-end tests: the real `rocbuild` binary on fixture projects, real venvs, real cmake,
//! ninja, compilers, FFmpeg and git repositories.

mod catalogue;
mod chroot_rocm;
mod clean;
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
mod plans;
mod plans_gpu;
mod real_torch;
mod restore;
mod schedule;
mod signals;
mod status;
mod wheel;
