//! Print what rocbuild-native reads from binaries: `cargo run -p rocbuild-native --example
//! native_info -- FILE...` (a debugging aid; `rocbuild deps` is the user-facing command).
// A developer aid: its output is the point.
#![allow(clippy::print_stdout)]
fn main() {
    for arg in std::env::args().skip(1) {
        match rocbuild_native::read_binary(std::path::Path::new(&arg)) {
            Ok(mut b) => {
                b.exports.truncate(20);
                b.imports.truncate(20);
                println!("{arg}: {b:#?}");
            }
            Err(e) => println!("{arg}: error: {e}"),
        }
    }
}
