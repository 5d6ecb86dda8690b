//! The dependency closure of several files with this host's loader rules and extra search
//! directories, the way `rocbuild deps FILE... --search DIR` walks them (used by
//! `cargo xtask bench` until `deps` is in the CLI):
//! `cargo run --release -p rocbuild-native --example native_closure -- FILE... [--search DIR]...`
//! Prints one resolved path per line (sorted, unique), then `missing NAME` lines.
use std::collections::BTreeSet;
use std::path::PathBuf;

fn main() {
    let mut files = Vec::new();
    let mut search = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--search" {
            match args.next() {
                Some(d) => search.push(PathBuf::from(d)),
                None => {
                    eprintln!("--search needs a directory");
                    std::process::exit(2);
                }
            }
        } else {
            files.push(PathBuf::from(a));
        }
    }
    if files.is_empty() {
        eprintln!("usage: native_closure FILE... [--search DIR]...");
        std::process::exit(2);
    }
    let ctx = rocbuild_native::SearchContext {
        ld_library_path: search,
        ..rocbuild_native::SearchContext::linux_host()
    };
    let mut found = BTreeSet::new();
    let mut missing = BTreeSet::new();
    for f in &files {
        match rocbuild_native::closure(f, &ctx) {
            Ok(c) => {
                found.extend(c.found.iter().filter_map(|d| d.path.clone()));
                missing.extend(c.missing.iter().map(|m| m.name.clone()));
            }
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    }
    let mut out = String::new();
    for p in &found {
        out.push_str(&format!("{}\n", p.display()));
    }
    for m in &missing {
        out.push_str(&format!("missing {m}\n"));
    }
    print!("{out}");
}
