//! Dependency closure and ABI check of a Linux library with this host's loader rules, timed:
//! `cargo run --release -p rocbuild-native --example native_deps -- FILE [PRELOADED...]`
//! (a debugging aid; `rocbuild deps` / `doctor` are the user-facing commands).
// A developer aid: its output is the point.
#![allow(clippy::print_stdout, clippy::print_stderr)]
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1).map(PathBuf::from);
    let Some(root) = args.next() else {
        eprintln!("usage: native_deps FILE [PRELOADED...]");
        std::process::exit(2);
    };
    let ctx = rocbuild_native::SearchContext {
        preloaded: args.collect(),
        ..rocbuild_native::SearchContext::linux_host(
            std::env::var_os("LD_LIBRARY_PATH")
                .map(|v| std::env::split_paths(&v).collect())
                .unwrap_or_default(),
        )
    };
    let t = std::time::Instant::now();
    let c = match rocbuild_native::closure(&root, &ctx) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let t_closure = t.elapsed();
    let missing_syms = c.abi_check();
    let t_all = t.elapsed();
    for d in &c.found {
        println!("{:<40} {:?} {:?}", d.name, d.path, d.provider);
    }
    for m in &c.missing {
        println!("MISSING {} (needed by {:?})", m.name, m.needed_by);
    }
    for m in missing_syms.iter().take(20) {
        println!("UNDEFINED {} in {:?}", m.display_name(), m.importer);
    }
    println!(
        "{} found, {} missing, {} undefined symbols; closure {t_closure:?}, with ABI check {t_all:?}",
        c.found.len(),
        c.missing.len(),
        missing_syms.len()
    );
}
