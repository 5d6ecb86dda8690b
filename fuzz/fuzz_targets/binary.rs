//! Any bytes through the ELF / PE / Mach-O reader, then the ABI check of the result against
//! itself and the demangler on every name it produced: Ok or Err, never a panic or a hang.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(b) = rocbuild_native::parse_binary(data) {
        for e in &b.exports {
            let _ = rocbuild_native::demangle(&e.name);
        }
        let _ = rocbuild_native::unresolved_imports(&b, &[("self", &b)]);
    }
});
