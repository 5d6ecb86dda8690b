//! A user recipe's `name` and `import-dir` are plain names (issue 38): a `../` in either is
//! refused when the recipe is loaded, pointing at it, before anything is fetched, built or
//! installed. Run through the real binary on the fixture world (a real venv with pip, the git
//! fixture, the Python part's wheel): the exit status and the message, and neither the venv
//! nor a canary folder beside it changed. Without the check, the first case writes the run
//! log and the build tree into the canary folder and the second installs the libraries there.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::*;

/// Everything the test's temp dir holds but rocbuild's cache (which a refused run may create
/// for its state key): the venv, the canary, the recipes, the fixture's repositories.
fn outside_the_cache(root: &Path) -> BTreeMap<String, String> {
    tree_state(root)
        .into_iter()
        .filter(|(k, _)| k != "cache/" && !k.starts_with("cache/"))
        .collect()
}

/// A world whose recipe has `from` replaced by `to`, with a canary folder beside the venv.
fn world(from: &str, to: &str) -> World {
    let w = World::new(DECODE_WAV);
    let file = w.recipes.join("fakecodec.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(from), "{from}");
    std::fs::write(&file, text.replace(from, to)).unwrap();
    let canary = w.tmp.path().join("canary");
    std::fs::create_dir_all(&canary).unwrap();
    std::fs::write(canary.join("keep.txt"), "must not change\n").unwrap();
    w
}

/// Exit status and output, temp paths as [TMP], for the snapshot.
fn shown(w: &World, out: &Out) -> String {
    format!(
        "exit code: {}\n--- stdout\n{}\n--- stderr\n{}",
        out.code,
        redact(&out.stdout, w.tmp.path()),
        redact(&out.stderr, w.tmp.path())
    )
}

/// The 100-column wrapping undone: the message as one line.
fn unwrapped(s: &str) -> String {
    s.split_whitespace()
        .map(|w| w.trim_start_matches(['|', 'x']))
        .collect()
}

#[test]
fn a_recipe_name_that_climbs_out_of_the_cache_is_refused() {
    let w = world("name = \"fakecodec\"", "name = \"../../canary/evil\"");
    let before = outside_the_cache(w.tmp.path());
    // What the recipe calls itself: without the check, its log, checkout and build tree go
    // to `<cache>/logs/../../canary/…`.
    let out = w.cmd(&["../../canary/evil"], &[]);
    assert_eq!(out.code, 1, "{}", shown(&w, &out));
    assert_eq!(
        outside_the_cache(w.tmp.path()),
        before,
        "something outside the cache changed:\n{}",
        shown(&w, &out)
    );
    assert!(
        out.stderr.contains("is not a plain name"),
        "{}",
        shown(&w, &out)
    );
    // The file's name shows the whole diagnostic, pointing at the name.
    let out = w.cmd(&["fakecodec"], &[]);
    let text = shown(&w, &out);
    assert_eq!(out.code, 1, "{text}");
    let said = unwrapped(&out.stderr);
    for needle in [
        "fakecodec.toml:2:8:",
        "`name=\"../../canary/evil\"`isnotaplainname:itholds`/`",
        "didyoumean`evil`?",
    ] {
        assert!(said.contains(needle), "{needle}\n{text}");
    }
    assert_eq!(outside_the_cache(w.tmp.path()), before, "{text}");
    insta::with_settings!({filters => vec![(r"\.tmp[A-Za-z0-9]{6}", ".tmpXXXXXX")]}, {
        insta::assert_snapshot!("name_climbs_out", text);
    });
}

#[test]
fn an_import_dir_that_climbs_out_of_site_packages_is_refused() {
    // site-packages is venv/lib/pythonX.Y/site-packages: four levels up is the temp dir.
    let w = world(
        "import-dir = \"fakecodec\"",
        "import-dir = \"../../../../canary/fakecodec\"",
    );
    let before = outside_the_cache(w.tmp.path());
    let out = w.build(&[]);
    let text = shown(&w, &out);
    assert_eq!(out.code, 1, "{text}");
    assert_eq!(
        outside_the_cache(w.tmp.path()),
        before,
        "the venv or the canary changed:\n{text}"
    );
    let said = unwrapped(&out.stderr);
    for needle in [
        "fakecodec.toml:5:14:",
        "`import-dir=\"../../../../canary/fakecodec\"`isnotaplainname",
        "didyoumean`fakecodec`?",
        "directlyundersite-packages",
    ] {
        assert!(said.contains(needle), "{needle}\n{text}");
    }
    assert!(!w.site.join(".rocbuild").exists(), "{text}");
    insta::with_settings!({filters => vec![(r"\.tmp[A-Za-z0-9]{6}", ".tmpXXXXXX")]}, {
        insta::assert_snapshot!("import_dir_climbs_out", text);
    });
}
