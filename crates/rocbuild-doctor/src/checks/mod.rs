//! The checks. Each one is a function from facts (plain data read beforehand) to findings, so
//! every platform's logic runs in tests on any host.

pub mod abi;
pub mod cuda;
pub mod ffmpeg;
pub mod flavor;
pub mod gpu;
pub mod missing;
pub mod stale;
