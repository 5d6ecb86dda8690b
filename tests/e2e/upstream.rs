//! Releases newer than the recipe (issue 43), on real parts: the fixture's upstream git
//! repository gains tags while the recipe stays put; a real package index (pypiserver on
//! 127.0.0.1) gains an sdist. The notice appears in `rocbuild recipes`, the plan, `status`
//! and their `--json`; `--version NEW` builds with the older release's rules and says so; a
//! new major is refused before anything is fetched; the answer is kept for a day (the source
//! can vanish and the answer stands); an unreachable source costs no more than the timeout,
//! once a day.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::publish::Index;

/// Upstream is asked (the other tests turn it off).
const ASK: (&str, &str) = ("ROCBUILD_UPSTREAM", "on");
/// No index answers here (the built-in llama-cpp-python recipe is an sdist): a refused
/// connection, at once.
const NO_INDEX: (&str, &str) = ("ROCBUILD_SDIST_INDEX", "http://127.0.0.1:9/simple");

fn git(dir: &Path, args: &[&str]) -> String {
    run(Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
        .args(args)
        .current_dir(dir))
    .trim()
    .to_string()
}

/// Upstream tags `tag` on a new commit (annotated, as releases are): returns the commit.
fn tag_release(w: &World, tag: &str) -> String {
    let work = w.tmp.path().join(format!("work-{tag}"));
    git(
        w.tmp.path(),
        &[
            "clone",
            "-q",
            w.repos.join("fakecodec.git").to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    git(&work, &["commit", "-q", "--allow-empty", "-m", tag]);
    git(&work, &["tag", "-a", tag, "-m", tag]);
    git(&work, &["push", "-q", "origin", tag]);
    git(&work, &["rev-parse", "HEAD"])
}

fn upstream_lines(out: &Out, recipe: &str) -> Vec<String> {
    out.stdout
        .lines()
        .chain(out.stderr.lines())
        .filter(|l| l.contains(&format!("upstream has {recipe} ")))
        .map(str::to_string)
        .collect()
}

/// `rocbuild recipes` (which takes no venv) with the world's recipes and cache.
fn list(w: &World, extra: &[&str], env: &[(&str, &str)]) -> Out {
    let mut args = vec![
        "recipes",
        "--recipes",
        w.recipes.to_str().unwrap(),
        "--cache",
        w.cache.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = rocbuild(&args, env);
    ok(&out);
    out
}

fn clear_answers(cache: &Path) {
    let _ = std::fs::remove_dir_all(cache.join("upstream"));
}

#[test]
fn a_new_tag_is_told_once_a_day_and_built_with_the_older_releases_rules() {
    let w = World::new(DECODE_WAV);
    let recipes = |extra: &[(&str, &str)]| {
        let mut env = vec![ASK, NO_INDEX];
        env.extend_from_slice(extra);
        list(&w, &[], &env)
    };
    // Upstream has only what the recipe knows: nothing is said.
    let out = recipes(&[]);
    ok(&out);
    assert!(
        upstream_lines(&out, "fakecodec").is_empty(),
        "{}",
        out.stdout
    );

    // Upstream tags 1.1.0; the day's answer stands (no new request) until it is a day old.
    let commit = tag_release(&w, "v1.1.0");
    assert!(upstream_lines(&recipes(&[]), "fakecodec").is_empty());
    clear_answers(&w.cache);
    let out = recipes(&[]);
    assert_eq!(
        upstream_lines(&out, "fakecodec"),
        ["  upstream: upstream has fakecodec 1.1.0; this recipe knows up to 1.0.0 (build it with --version 1.1.0)"],
        "{}",
        out.stdout
    );
    // The repository vanishes: the day's answer is still told, so no request was made.
    let gone = w.tmp.path().join("gone.git");
    std::fs::rename(w.repos.join("fakecodec.git"), &gone).unwrap();
    assert_eq!(upstream_lines(&recipes(&[]), "fakecodec").len(), 1);
    std::fs::rename(&gone, w.repos.join("fakecodec.git")).unwrap();
    // Turned off, nothing is asked or said.
    assert!(upstream_lines(&list(&w, &[], &[NO_INDEX]), "fakecodec").is_empty());

    // --json carries it; the plan says it.
    let out = list(&w, &["--json"], &[ASK, NO_INDEX]);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let fake = v
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "fakecodec")
        .unwrap();
    assert_eq!(fake["upstream"]["newer"], serde_json::json!(["1.1.0"]));
    assert_eq!(fake["upstream"]["recipe_newest"], "1.0.0");
    assert_eq!(fake["upstream"]["cached"], true);
    let out = w.cmd(&["fakecodec", "--dry-run", "--json"], &[ASK]);
    ok(&out);
    let plan: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(plan["upstream"]["newer"], serde_json::json!(["1.1.0"]));
    assert_eq!(plan["version"], "1.0.0");
    // A real run's --json outcome carries it too (here the recipe's 1.0.0 is installed).
    let out = w.cmd(&["fakecodec", "--json"], &[ASK]);
    ok(&out);
    let outcome: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(outcome["version"], "1.0.0");
    assert_eq!(outcome["upstream"]["newer"], serde_json::json!(["1.1.0"]));

    // --version 1.1.0: the tag's commit, built with 1.0.0's rules, labelled and recorded.
    make_wheel(&w.wheels, "fakecodec", "1.1.0");
    let out = w.cmd(&["fakecodec", "--version", "1.1.0", "--dry-run"], &[ASK]);
    ok(&out);
    assert!(
        out.stdout.contains("plan: fakecodec 1.1.0 (--version; 1.1.0 is not in the recipe: built with 1.0.0's rules)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&commit),
        "the tag's commit is pinned:\n{}",
        out.stdout
    );
    let start = Instant::now();
    let out = w.cmd(&["fakecodec", "--version", "1.1.0"], &[ASK]);
    ok(&out);
    eprintln!("build of the unlisted 1.1.0: {:?}", start.elapsed());
    assert!(
        out.stdout.contains("fakecodec 1.1.0 installed"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("verified: decoded 16000 samples"),
        "{}",
        out.stdout
    );
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(w.site.join(".rocbuild/fakecodec.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["version"], "1.1.0");
    assert_eq!(m["rules_of"], "1.0.0");
    assert_eq!(m["source_commit"], commit.as_str());
    let out = w.cmd(&["status"], &[ASK]);
    assert!(
        out.stdout
            .contains("  release: 1.1.0 is not in the recipe: built with 1.0.0's rules"),
        "{}",
        out.stdout
    );
    assert_eq!(upstream_lines(&out, "fakecodec").len(), 1, "{}", out.stdout);
    let out = w.cmd(&["status", "--json"], &[ASK]);
    let st: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(st["recipes"][0]["rules_of"], "1.0.0");
    assert_eq!(
        st["recipes"][0]["upstream"]["newer"],
        serde_json::json!(["1.1.0"])
    );

    // A new major is refused before anything is fetched; the venv stays as it is.
    tag_release(&w, "v2.0.0");
    let before = tree_state(&w.venv);
    let out = w.cmd(&["fakecodec", "--version", "2.0.0"], &[ASK]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("fakecodec 2.0.0 is a new major release"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("nothing was fetched"), "{}", out.stderr);
    assert_eq!(before, tree_state(&w.venv));
    // A version upstream never tagged is refused too, naming what it has.
    let out = w.cmd(&["fakecodec", "--version", "1.2.0"], &[ASK]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("has no tag v1.2.0"), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("releases upstream has: 2.0.0, 1.1.0, 1.0.0"),
        "{}",
        out.stderr
    );
    assert_eq!(before, tree_state(&w.venv));
}

/// A `[[release]] stop-newer` refuses what would be built with its rules, saying why.
#[test]
fn a_release_that_says_stop_refuses_the_next_one() {
    let w = World::new(DECODE_WAV);
    let file = w.recipes.join("fakecodec.toml");
    let text = std::fs::read_to_string(&file).unwrap().replacen(
        "version = \"1.0.0\"\n",
        "version = \"1.0.0\"\nstop-newer = \"1.1 moves its build to meson\"\n",
        1,
    );
    std::fs::write(&file, text).unwrap();
    tag_release(&w, "v1.1.0");
    let out = w.cmd(&["fakecodec", "--version", "1.1.0", "--dry-run"], &[ASK]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("1.0.0's rules are not for releases after it: 1.1 moves its build to meson"),
        "{}",
        out.stderr
    );
}

/// An unreachable source (a server that never answers) costs the timeout once, then nothing
/// for the day; a refused connection costs nothing. Neither says anything or fails.
#[test]
fn an_unreachable_source_says_nothing_and_costs_at_most_the_timeout_once() {
    let w = World::new(DECODE_WAV);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let file = w.recipes.join("fakecodec.toml");
    let local = w.repos.join("fakecodec.git").display().to_string();
    let text = std::fs::read_to_string(&file).unwrap();
    let dry = |env: &[(&str, &str)]| {
        let start = Instant::now();
        let out = w.cmd(&["fakecodec", "--dry-run"], env);
        ok(&out);
        assert!(
            upstream_lines(&out, "fakecodec").is_empty(),
            "{}",
            out.stdout
        );
        start.elapsed()
    };
    let off = dry(&[]);
    std::fs::write(
        &file,
        text.replace(&local, &format!("http://127.0.0.1:{port}/acme/fakecodec")),
    )
    .unwrap();
    let first = dry(&[ASK]);
    let second = dry(&[ASK]);
    eprintln!("off {off:?}, silent source: first {first:?}, second {second:?}");
    assert!(
        first < off + Duration::from_secs(6),
        "the timeout bounds it: {first:?}"
    );
    assert!(
        second < off + Duration::from_millis(1500),
        "answered from the day's cache: {second:?}"
    );
    std::fs::write(
        &file,
        text.replace(&local, "http://127.0.0.1:9/acme/fakecodec"),
    )
    .unwrap();
    clear_answers(&w.cache);
    let refused = dry(&[ASK]);
    assert!(refused < off + Duration::from_millis(1500), "{refused:?}");
    drop(silent);
}

/// An sdist recipe: the package index (pypiserver) gains a release; the notice appears, and
/// the day's answer stands after the index is gone.
#[test]
fn an_index_that_lists_a_newer_sdist_is_told() {
    let w = World::new(DECODE_WAV);
    let packages = w.tmp.path().join("index-packages");
    let index = Index::start(w.tmp.path(), &packages);
    std::fs::write(packages.join("fakesdist-1.0.0.tar.gz"), b"not read").unwrap();
    std::fs::write(
        w.recipes.join("fakesdist.toml"),
        format!(
            "[package]\nname = \"fakesdist\"\ndistribution = \"fakesdist\"\nimport-dir = \"fakesdist\"\n\n[source]\nsdist = \"fakesdist\"\n\n[[release]]\nversion = \"1.0.0\"\ntorch = \">=0\"\nsha256 = \"{}\"\n\n[install]\nartifacts = [\"libfakesdist*\"]\n",
            "0".repeat(64)
        ),
    )
    .unwrap();
    let simple = format!("{}simple", index.url);
    let env = [ASK, ("ROCBUILD_SDIST_INDEX", simple.as_str())];
    assert!(upstream_lines(&list(&w, &[], &env), "fakesdist").is_empty());
    std::fs::write(packages.join("fakesdist-1.1.0.tar.gz"), b"not read").unwrap();
    std::fs::write(packages.join("fakesdist-1.2.0rc1.tar.gz"), b"not read").unwrap();
    assert!(
        upstream_lines(&list(&w, &[], &env), "fakesdist").is_empty(),
        "the day's answer"
    );
    clear_answers(&w.cache);
    let out = list(&w, &[], &env);
    assert_eq!(
        upstream_lines(&out, "fakesdist"),
        ["  upstream: upstream has fakesdist 1.1.0; this recipe knows up to 1.0.0 (build it with --version 1.1.0)"],
        "{}",
        out.stdout
    );
    drop(index);
    assert_eq!(upstream_lines(&list(&w, &[], &env), "fakesdist").len(), 1);
    // Building it needs its sha256: refused before anything is fetched, saying so.
    let out = w.cmd(&["fakesdist", "--version", "1.1.0", "--dry-run"], &env);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("built from an sdist"), "{}", out.stderr);
}
