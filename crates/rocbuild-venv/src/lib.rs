//! The state rocbuild keeps in a venv, and everything that reads or changes it: the layout
//! (`.rocbuild/` in site-packages), the install transaction and its filesystem interface,
//! pip's RECORD, manifests, staleness and status, restore, wheel, the venv lock.
//!
//! The engine installs through this crate; doctor reads it; neither re-derives a path.

pub mod confine;
mod error;
pub mod install;
pub mod journal;
pub mod layout;
pub mod lock;
pub mod manifest;
pub mod options;
pub mod ownership;
pub mod record;
pub mod restore;
pub mod salvage;
pub use rocbuild_probe::platform::signal;
pub mod stale;
pub mod state_key;
pub mod status;
pub mod txn_fs;
pub mod wheel;
pub mod wheel_install;

pub use error::{io_help, Result, VenvError};
pub use layout::{walk, VenvLayout};
pub use options::{Backend, BackendOptions, BuildOptions, Patch};
