//! End-to-end tests: the real `rocbuild` binary on fixture projects, real venvs, real cmake,
//! ninja, compilers, FFmpeg and git repositories.

mod common;
mod deps;
mod doctor;
mod errors;
mod fixture_build;
mod mirror;
mod plans;
mod real_torch;
