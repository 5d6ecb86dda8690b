//! The PEP 517 build system (`[build] system = "pep517"`) on a real package: torchsort 0.1.10,
//! a torch C++ extension (setuptools + `torch.utils.cpp_extension`), from its PyPI sdist
//! (pinned by sha256), built by its own backend against the real PyPI torch of
//! ROCBUILD_TEST_TORCH_VENV (in a venv of its own over it, without pip: the Python's bundled pip
//! runs the backend) with the TOML-only recipe `recipes/torchsort.toml`, installed as a
//! transaction, verified (it ranks and sorts), then restored. The recipe is the shipped one
//! with one line added in a recipe directory of the user's (`--recipes`): a PEP 517 config
//! setting (`[build] config-settings`) that setuptools, the real backend, reads (a build
//! number for the wheel): adding a build system's knobs is recipe data, as meson-python's and
//! scikit-build-core's are.
//! About 1.5 minutes on 2 busy cores (measured 85-97 s): one C++ file against torch's headers,
//! compiled each run (the venv is new, and its include path is on the compile line); the sdist
//! is kept in `cache/torchsort`. PyPI must be reachable (it is in CI).

use std::path::{Path, PathBuf};

use crate::common::*;
use crate::real_torch::{real_torch_venv, venv_over};

/// The repository's cache directory (kept between runs: the sdist and the build tree).
fn repo_cache(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../cache")
        .join(name)
}

#[test]
fn torchsort_is_built_from_its_sdist_by_its_own_backend_against_the_venvs_torch() {
    let Some(real) = real_torch_venv() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let site = venv_over(&real, &venv);
    let v = venv.to_str().unwrap();
    let cache = repo_cache("torchsort");
    let c = cache.to_str().unwrap();
    // The shipped recipe, with a config setting setuptools reads (`--build-option`, passed to
    // bdist_wheel): the wheel gets build number 7.
    let recipes = tmp.path().join("recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recipes/torchsort.toml"),
    )
    .unwrap();
    let text = shipped.replace(
        "system = \"pep517\"\n",
        "system = \"pep517\"\nconfig-settings = { \"--build-option\" = \"--build-number=7\" }\n",
    );
    assert_ne!(text, shipped);
    std::fs::write(recipes.join("torchsort.toml"), text).unwrap();
    let r = recipes.to_str().unwrap();

    // The plan names the build system and has no CMake in it.
    let plan = rocbuild(
        &[
            "--recipes",
            r,
            "torchsort",
            "--venv",
            v,
            "--cache",
            c,
            "--dry-run",
            "--json",
        ],
        &[],
    );
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let p: serde_json::Value = serde_json::from_str(&plan.stdout).unwrap();
    assert_eq!(p["build_system"], "pep517");
    assert_eq!(p["source"]["Sdist"]["project"], "torchsort");
    let args: Vec<&str> = p["configure"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    for a in ["wheel", "--no-deps", "--no-build-isolation"] {
        assert!(args.contains(&a), "{args:?}");
    }
    assert!(
        args.windows(2)
            .any(|w| w == ["--config-settings", "--build-option=--build-number=7"]),
        "{args:?}"
    );
    assert!(p.get("install_prefix").is_none(), "{}", plan.stdout);
    assert!(p["torch_cmake"].is_null(), "{}", plan.stdout);
    assert_eq!(p["defines"], serde_json::json!({}));

    let t = std::time::Instant::now();
    let out = rocbuild(
        &["--recipes", r, "torchsort", "--venv", v, "--cache", c],
        &[],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("verified: torchsort soft_rank [8, 1, 5, 4, 3, 2, 6, 7, 9] with torch"),
        "{}",
        out.stdout
    );
    eprintln!(
        "torchsort: built, installed and verified in {:?}",
        t.elapsed()
    );

    // The extension built here, linked to the venv's torch, and the Python files beside it.
    let ext = std::fs::read_dir(site.join("torchsort"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with("isotonic_cpu") && n.ends_with(".so")
            })
        })
        .expect("torchsort/isotonic_cpu*.so installed");
    let info = rocbuild_native::read_elf(&ext).unwrap();
    assert!(
        info.needed.iter().any(|n| n.starts_with("libc10")),
        "{:?}",
        info.needed
    );
    assert_eq!(info.runpath, ["$ORIGIN", "$ORIGIN/../torch/lib"]);
    for f in ["__init__.py", "ops.py"] {
        assert!(site.join("torchsort").join(f).is_file(), "{f}");
    }
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(site.join(".rocbuild/torchsort.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["version"], "0.1.10");
    // setuptools read the config setting: the wheel it built has build number 7.
    let wheel_meta = std::fs::read_to_string(site.join("torchsort-0.1.10.dist-info/WHEEL"))
        .expect("the wheel's dist-info installed");
    assert!(wheel_meta.contains("Build: 7"), "{wheel_meta}");

    let status = rocbuild(&["--recipes", r, "status", "--venv", v, "--cache", c], &[]);
    assert!(
        status.stdout.contains("torchsort 0.1.10: fresh"),
        "{}",
        status.stdout
    );
    let restore = rocbuild(
        &[
            "--recipes",
            r,
            "restore",
            "torchsort",
            "--venv",
            v,
            "--cache",
            c,
        ],
        &[],
    );
    assert_eq!(restore.code, 0, "{}\n{}", restore.stdout, restore.stderr);
    assert!(!site.join("torchsort").exists());
}
