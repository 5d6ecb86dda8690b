//! One file per group of commands: each turns its arguments into one call of a library crate
//! and renders the result.

pub mod build;
pub mod doctor;
pub mod keep;
pub mod test;
