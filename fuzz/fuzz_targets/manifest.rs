//! Any bytes through the manifest reader (`site-packages/.rocbuild/<recipe>.json`): an error
//! or a manifest whose every path stays inside site-packages, never a panic. What it accepts
//! must survive a write and a re-read unchanged.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rocbuild_venv::manifest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(m) = manifest::parse(text) else {
        return;
    };
    for f in &m.files {
        assert!(manifest::is_inside(&f.path), "{}", f.path);
    }
    let _ = m.sdk.describe();
    let again = serde_json::to_string_pretty(&m).expect("a manifest serializes");
    assert_eq!(manifest::parse(&again).as_ref(), Ok(&m));
});
