//! Every `recipes/*.toml` of the repository is compiled into the binary: a new recipe is a
//! new file there, and nothing in the code names it.

use std::path::Path;

fn main() {
    // The directory cargo runs this build for, read when it runs: `env!` would bake in where
    // the script was compiled, which a target directory shared between checkouts (the Windows
    // build's, xtask/src/exe.rs) can reuse for another checkout, and no recipe was embedded.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest).join("../../recipes");
    println!("cargo:rerun-if-changed={}", dir.display());
    let rd = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read the recipes at {}: {e}", dir.display()));
    let mut names: Vec<String> = rd
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_suffix(".toml").map(str::to_string)
        })
        .collect();
    assert!(
        !names.is_empty(),
        "no recipes/*.toml in {}: rocbuild would know no recipe",
        dir.display()
    );
    names.sort();
    let mut out = String::from("&[\n");
    for n in &names {
        let path = dir.join(format!("{n}.toml"));
        println!("cargo:rerun-if-changed={}", path.display());
        out.push_str(&format!(
            "    ({n:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    out.push(']');
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("builtin.rs");
    std::fs::write(dest, out).unwrap();
}
