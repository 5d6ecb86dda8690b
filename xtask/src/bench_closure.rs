//! (d) Dependency closure over a large SDK-like tree: rocbuild's loader emulation against
//! `ldd` (glibc's own loader, in trace mode) on the same roots and search directories.
//!
//! The tree is made in a temp dir with `cc`: LIBS small shared libraries in `sdk/lib`, in
//! layers like a ROCm SDK (runtime at the bottom, math libraries on top), each needing 2–6
//! libraries of the layers below (DT_NEEDED chains up to the bottom), all with RUNPATH
//! `$ORIGIN`. Next to them the real PyPI torch's libraries (libtorch_cuda.so and its nvidia
//! wheels, found through their own RUNPATHs). Roots: the top layer plus every torch library.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::util::{run_capture, Result};

pub const ITERATIONS: usize = 10;
pub const LIBS: usize = 300;
const LAYERS: usize = 6;

pub struct ClosureBench {
    /// Seconds, in run order.
    pub rocbuild: Vec<f64>,
    pub ldd: Vec<f64>,
    pub roots: usize,
    pub torch_libs: usize,
    /// Libraries each side resolved (union over the roots), and whether the sets agree.
    pub found_rocbuild: usize,
    pub found_ldd: usize,
    pub agree: bool,
    pub only_rocbuild: Vec<String>,
    pub only_ldd: Vec<String>,
}

/// A tiny deterministic generator (no rand dependency): the same tree on every run.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

/// The SDK-like tree; returns (lib dir, top-layer roots).
fn make_tree(root: &Path) -> Result<(PathBuf, Vec<PathBuf>)> {
    let lib = root.join("sdk/lib");
    std::fs::create_dir_all(&lib).map_err(|e| e.to_string())?;
    let src = root.join("stub.c");
    std::fs::write(&src, "int rocbuild_bench_stub(void) { return 0; }\n")
        .map_err(|e| e.to_string())?;
    let obj = root.join("stub.o");
    run_capture(
        Command::new("cc")
            .args(["-c", "-fPIC", "-O0", "-o"])
            .arg(&obj)
            .arg(&src),
    )?;
    let per = LIBS / LAYERS;
    let name = |layer: usize, i: usize| format!("rb{layer}_{i}");
    let mut rng = Lcg(0x5eed);
    let mut roots = Vec::new();
    for layer in 0..LAYERS {
        for i in 0..per {
            let n = name(layer, i);
            let file = lib.join(format!("lib{n}.so.1"));
            let mut c = Command::new("cc");
            c.args(["-shared", "-o"])
                .arg(&file)
                .arg(&obj)
                .arg(format!("-Wl,-soname,lib{n}.so.1"))
                .args([
                    "-Wl,--no-as-needed",
                    "-Wl,--enable-new-dtags",
                    "-Wl,-rpath,$ORIGIN",
                ])
                .arg(format!("-L{}", lib.display()));
            if layer > 0 {
                let fan = 2 + rng.next(5);
                let mut deps = BTreeSet::new();
                for _ in 0..fan {
                    // Mostly the layer just below, sometimes deeper (as hipBLAS needs both
                    // rocBLAS and the runtime).
                    let below = if rng.next(3) == 0 {
                        rng.next(layer)
                    } else {
                        layer - 1
                    };
                    deps.insert(name(below, rng.next(per)));
                }
                for d in deps {
                    c.arg(format!("-l:lib{d}.so.1"));
                }
            }
            run_capture(&mut c)?;
            if layer == LAYERS - 1 {
                roots.push(file);
            }
        }
    }
    Ok((lib, roots))
}

/// Resolved paths (canonical) from `ldd`'s `name => path (addr)` lines.
fn ldd_found(out: &str) -> BTreeSet<String> {
    out.lines()
        .filter_map(|l| l.split("=> ").nth(1))
        .filter_map(|r| r.split(" (").next())
        .map(str::trim)
        .filter(|p| p.starts_with('/'))
        .map(canon)
        .collect()
}

fn canon(p: &str) -> String {
    std::fs::canonicalize(p)
        .map(|c| c.display().to_string())
        .unwrap_or_else(|_| p.to_string())
}

/// `exe`: the release `rocbuild`; A is `rocbuild deps ROOTS… --search DIR… --json`.
pub fn run(exe: &Path, torch_venv: &Path, tmp: &Path) -> Result<ClosureBench> {
    let root = tmp.join("closure");
    println!(
        "xtask: bench: an SDK-like tree of {LIBS} libraries in {}",
        root.display()
    );
    let (lib, mut roots) = make_tree(&root)?;
    let torch_lib = torch_venv.join("lib/python3.11/site-packages/torch/lib");
    // Without the real torch (no `cargo xtask setup`), the SDK-like tree alone.
    let mut torch_libs: Vec<PathBuf> = std::fs::read_dir(&torch_lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.to_string_lossy().contains(".so"))
        .collect();
    torch_libs.sort();
    let n_torch = torch_libs.len();
    roots.extend(torch_libs);
    let search = [lib.clone(), torch_lib.clone()];
    let search_path = std::env::join_paths(&search).map_err(|e| e.to_string())?;

    let a_cmd = || {
        let mut c = Command::new(exe);
        c.arg("deps").args(&roots);
        for d in &search {
            c.arg("--search").arg(d);
        }
        c.arg("--json")
            .env_remove("LD_LIBRARY_PATH")
            .stdin(Stdio::null());
        c
    };
    // `deps` exits 3/4/5 when something is missing or an import is unresolved (torch's
    // libcaffe2_nvrtc needs the driver's libcuda.so.1, which no machine without an NVIDIA
    // driver has), 1 for other findings: only the JSON counts.
    let a_out = |c: &mut Command| -> Result<String> {
        let o = c
            .output()
            .map_err(|e| format!("cannot run rocbuild deps: {e}"))?;
        if matches!(o.status.code(), Some(0 | 1 | 3 | 4 | 5)) {
            Ok(String::from_utf8_lossy(&o.stdout).into_owned())
        } else {
            Err(format!(
                "rocbuild deps failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            ))
        }
    };
    let b_cmd = || {
        let mut c = Command::new("ldd");
        c.args(&roots)
            .env("LD_LIBRARY_PATH", &search_path)
            .stdin(Stdio::null());
        c
    };
    // ldd exits 1 when one of many files is "not a dynamic executable"; only the output counts.
    let b_out = |c: &mut Command| -> Result<String> {
        let o = c.output().map_err(|e| format!("cannot run ldd: {e}"))?;
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    };

    // What each side finds (untimed), so the two are known to do the same work.
    let a_json: serde_json::Value = serde_json::from_str(&a_out(&mut a_cmd())?)
        .map_err(|e| format!("rocbuild deps --json printed no JSON: {e}"))?;
    let found_a: BTreeSet<String> = a_json["files"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|f| f["libraries"].as_array().into_iter().flatten())
        .filter_map(|l| l["path"].as_str())
        .map(canon)
        .collect();
    let found_b = ldd_found(&b_out(&mut b_cmd())?);
    // ldd also lists the roots' loader and vdso-provided objects; compare what both can name.
    let loader = |p: &String| p.contains("/ld-linux") || p.contains("linux-vdso");
    let only_a: Vec<String> = found_a
        .difference(&found_b)
        .filter(|p| !loader(p))
        .cloned()
        .collect();
    let only_b: Vec<String> = found_b
        .difference(&found_a)
        .filter(|p| !loader(p))
        .cloned()
        .collect();

    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for i in 0..ITERATIONS {
        let t = Instant::now();
        a_out(&mut a_cmd())?;
        ta.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        b_out(&mut b_cmd())?;
        tb.push(t.elapsed().as_secs_f64());
        println!(
            "xtask: bench: closure {}/{ITERATIONS}: rocbuild {:.3} s, ldd {:.3} s, ratio {:.3}",
            i + 1,
            ta[i],
            tb[i],
            ta[i] / tb[i]
        );
    }
    Ok(ClosureBench {
        rocbuild: ta,
        ldd: tb,
        roots: roots.len(),
        torch_libs: n_torch,
        found_rocbuild: found_a.len(),
        found_ldd: found_b.len(),
        agree: only_a.is_empty() && only_b.is_empty(),
        only_rocbuild: only_a,
        only_ldd: only_b,
    })
}
