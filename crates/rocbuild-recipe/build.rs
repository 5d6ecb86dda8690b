//! Every `recipes/*.toml` of the repository is compiled into the binary: a new recipe is a
//! new file there, and nothing in the code names it.

use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recipes");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.strip_suffix(".toml").map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
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
