//! Print the ROCm SDKs found on this machine (a developer aid: `cargo run -p rocbuild-probe --example rocm_probe`).
// A developer aid: its output is the point.
#![allow(clippy::print_stdout)]
fn main() {
    let env = rocbuild_probe::ProbeEnv::from_process();
    let sdks = rocbuild_probe::discover_sdks(&env, rocbuild_probe::Os::current(), None);
    println!(
        "{}",
        serde_json::to_string_pretty(&sdks).unwrap_or_default()
    );
}
