//! Any bytes through the ld.so.cache parser.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = rocbuild_native::parse_ld_so_cache(data);
});
