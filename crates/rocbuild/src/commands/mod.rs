//! One file per command (`doctor.rs` holds doctor and its three siblings over one venv's
//! native files: deps, bundle, repair): each turns its arguments into one call of a library
//! crate and renders the result.

pub mod build;
pub mod clean;
pub mod completions;
pub mod doctor;
pub mod ffmpeg;
pub mod man;
pub mod publish;
pub mod rebuild;
pub mod recipes;
pub mod restore;
pub mod schedule;
pub mod status;
pub mod test;
pub mod wheel;
