//! Any bytes through the offload-bundle reader (plain and `CCOB` compressed bundles).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = rocbuild_native::offload_targets(data);
});
