//! The engine: [`plan()`] (pure) turns a recipe and a machine into concrete steps; [`run()`]
//! executes them: fetch, configure, build, stage, install, verify, record.

mod build_system;
pub mod cache_lock;
pub mod clean;
mod command;
pub mod compiler_cache;
mod context;
mod cross;
mod error;
mod from_run;
mod index;
mod install;
pub mod interrupt;
mod libraries;
pub use rocbuild_link as link;
mod paths;
pub(crate) mod pip;
mod plan;
mod prebuilt;
mod quick;
mod render;
mod run;
pub mod schedule;
pub mod source;
mod step;
mod test_error;
mod toolchain;
pub mod usecase;
mod vars;
/// The upstream-release notice and unlisted releases: a use case's step (usecase/upstream.rs).
pub use usecase::upstream;

pub use command::Command;
pub use context::Context;
pub use error::{EngineError, Result};
pub use link::runpath_entries;
pub use paths::{hash_hex, join};
pub use plan::{plan, stock, Plan};
pub use rocbuild_venv::{Backend, BackendOptions, BuildOptions};
pub use run::{run, Outcome};
pub use source::plan::SourcePlan;
pub use step::Verbosity;
pub use toolchain::{BackendPlan, CudaPlan, RocmPlan};
pub use usecase::{Reporter, Settings};

#[cfg(test)]
mod structure {
    use std::collections::{BTreeMap, BTreeSet};

    /// The engine's top-level modules and the ones each names (`crate::x`), code only.
    fn graph() -> BTreeMap<String, BTreeSet<String>> {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut stack = vec![src.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let rel = p.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
                let top = rel
                    .split('/')
                    .next()
                    .unwrap()
                    .trim_end_matches(".rs")
                    .to_string();
                if top == "lib" {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap_or("");
                let deps = g.entry(top.clone()).or_default();
                for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
                    for part in line.split("crate::").skip(1) {
                        let m: String = part
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        if m != top {
                            deps.insert(m);
                        }
                    }
                }
            }
        }
        g
    }

    /// Data flows one way: no module of the engine reaches back to one that reaches it.
    #[test]
    fn no_module_cycles() {
        let g = graph();
        let reaches = |from: &str, to: &str| {
            let mut seen = BTreeSet::new();
            let mut todo = vec![from.to_string()];
            while let Some(m) = todo.pop() {
                if m == to {
                    return true;
                }
                if seen.insert(m.clone()) {
                    todo.extend(g.get(&m).into_iter().flatten().cloned());
                }
            }
            false
        };
        let mut cycles = Vec::new();
        for (a, deps) in &g {
            for b in deps.iter().filter(|b| g.contains_key(*b)) {
                if reaches(b, a) {
                    cycles.push(format!("{a} -> {b} -> … -> {a}"));
                }
            }
        }
        assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
    }
}
