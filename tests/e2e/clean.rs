//! `rocbuild clean`: the cache's sizes by kind, then removal of the kinds asked for.

use crate::common::*;

#[test]
fn clean_reports_sizes_by_kind_and_removes_only_what_is_asked() {
    let w = World::new(DECODE_WAV);
    ok(&w.build(&[]));
    let cache = w.cache.to_str().unwrap();
    let clean = |args: &[&str]| {
        let mut all = vec!["clean", "--cache", cache];
        all.extend_from_slice(args);
        rocbuild(&all, &[])
    };
    let out = clean(&[]);
    ok(&out);
    for kind in ["sources", "builds", "logs", "total"] {
        assert!(
            out.stdout.lines().any(|l| l.trim_start().starts_with(kind)),
            "{}",
            out.stdout
        );
    }
    assert!(out
        .stdout
        .contains("remove with --sources, --builds, --logs or --all"));
    // Sizes are real: the build trees hold the compiled libraries (well over a KiB).
    let builds_line = out
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("builds"))
        .unwrap();
    assert!(
        builds_line.contains("KiB") || builds_line.contains("MiB"),
        "{builds_line}"
    );

    let before = tree_state(&w.cache);
    let out = clean(&["--builds", "--dry-run"]);
    ok(&out);
    assert!(out.stdout.contains("(would remove)"), "{}", out.stdout);
    assert_eq!(tree_state(&w.cache), before);

    let out = clean(&["--builds", "--logs"]);
    ok(&out);
    assert!(out.stdout.contains("freed "), "{}", out.stdout);
    assert!(!w.cache.join("build").exists() && !w.cache.join("logs").exists());
    assert!(w.cache.join("git").exists() && w.cache.join("src").exists());

    // The venv is untouched: the same request is still a no-op, which needs no build tree.
    ok(&w.cmd(&["status"], &[]));
    ok(&w.build(&[]));
    assert!(!w.cache.join("build").exists());
    // Once something it depended on is touched (the installed files rewritten as they were),
    // the rerun builds again, from the kept sources, fetching nothing.
    for e in std::fs::read_dir(w.site.join("fakecodec")).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::write(&p, std::fs::read(&p).unwrap()).unwrap();
        }
    }
    let git_before = tree_state(&w.cache.join("git"));
    let again = w.build(&[]);
    ok(&again);
    assert!(w.cache.join("build").exists(), "{}", again.stdout);
    assert_eq!(tree_state(&w.cache.join("git")), git_before);

    ok(&clean(&["--all"]));
    assert!(!w.cache.join("git").exists() && !w.cache.join("src").exists());
}
