//! End-to-end tests: the real `rocbuild` binary on fixture projects, real venvs, real cmake,
//! ninja, compilers, FFmpeg and git repositories.

mod clean;
mod common;
mod crash;
mod errors;
mod fixture_build;
mod locks;
mod mirror;
mod plans;
mod real_torch;
mod restore;
mod schedule;
mod status;
mod wheel;
