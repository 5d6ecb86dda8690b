//! rocbuild's state as an attacker would write it (issue 38): any bytes as
//! `.rocbuild/journal.json` (recovered), as the content of a journal sealed with the user's own
//! key (so the fuzzer gets past the seal and reaches the path checks and the replay), and as a
//! manifest (restored) — on a real site-packages beside a canary folder, with a link from
//! site-packages to the canary. Whatever happens (an error is fine, a panic is not), the
//! canary and the directory around the venv must be exactly as they were: no path outside is
//! created, written, renamed or removed.
#![no_main]
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rocbuild_venv::journal::Journal;
use rocbuild_venv::{install, layout, manifest, restore, state_key};

struct World {
    root: PathBuf,
    site: PathBuf,
    canary: PathBuf,
    before: BTreeMap<String, Vec<u8>>,
}

/// Every entry under `dir` (links as their target text), without following links.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            let ft = e.file_type().unwrap();
            if ft.is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                out.insert(rel, format!("link:{}", t.display()).into_bytes());
            } else if ft.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                stack.push(p);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    out
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        // One fixed place, emptied at start: a fuzzer that exits leaves one folder, never a pile.
        let root = std::env::temp_dir().join("rocbuild-fuzz-state");
        let _ = std::fs::remove_dir_all(&root);
        let canary = root.join("outside");
        std::fs::create_dir_all(canary.join("dir")).unwrap();
        std::fs::write(canary.join("precious"), b"keep").unwrap();
        std::fs::write(canary.join("dir/file"), b"keep too").unwrap();
        let keys = root.join("cache");
        std::fs::create_dir_all(&keys).unwrap();
        state_key::configure(Ok(keys));
        state_key::for_writing().unwrap();
        let site = root.join("venv/lib/python3.11/site-packages");
        let mut w = World { root, site, canary, before: BTreeMap::new() };
        reset(&w);
        w.before = outside(&w);
        w
    })
}

/// Everything but site-packages: the canary, the key, the venv's other folders.
fn outside(w: &World) -> BTreeMap<String, Vec<u8>> {
    snapshot(&w.root)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("venv/lib/python3.11/site-packages/"))
        .collect()
}

/// A fresh site-packages: a package, its backup, a manifest, and links to the canary.
fn reset(w: &World) {
    let _ = std::fs::remove_dir_all(&w.site);
    std::fs::create_dir_all(w.site.join("pkg")).unwrap();
    std::fs::write(w.site.join("pkg/a.so"), b"a").unwrap();
    std::fs::create_dir_all(layout::backup(&w.site, "pkg")).unwrap();
    std::fs::write(layout::backup(&w.site, "pkg").join("b"), b"b").unwrap();
    std::os::unix::fs::symlink(&w.canary, w.site.join("linkdir")).unwrap();
    std::os::unix::fs::symlink(w.canary.join("precious"), w.site.join("linkfile")).unwrap();
}

fn check(w: &World, what: &str) {
    assert!(outside(w) == w.before, "{what} touched something outside site-packages");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let w = world();
    // 1. The bytes as the journal file.
    reset(w);
    std::fs::write(layout::journal(&w.site), text).unwrap();
    let _ = install::recover(&w.site);
    check(w, "recovering a raw journal");
    // 2. The bytes as a journal's content, sealed with the user's key.
    if let Ok(j) = serde_json::from_str::<Journal>(text) {
        reset(w);
        let key = state_key::for_writing().unwrap();
        std::fs::write(layout::journal(&w.site), j.seal(&w.site, &key)).unwrap();
        let _ = install::recover(&w.site);
        check(w, "recovering a sealed journal");
    }
    // 3. The bytes as a manifest, restored: as they are (a planted manifest), and sealed with
    //    the user's key (rocbuild's own, with whatever it holds).
    if let Ok(m) = manifest::parse(text) {
        if manifest::is_plain_name(&m.recipe) {
            reset(w);
            std::fs::write(manifest::path(&w.site, &m.recipe), text).unwrap();
            let _ = restore::restore(&w.site, &m.recipe);
            check(w, "restoring a planted manifest");
            reset(w);
            let key = state_key::for_writing().unwrap();
            let sealed = manifest::sealed_text(&w.site, &m, &key);
            std::fs::write(manifest::path(&w.site, &m.recipe), sealed).unwrap();
            let _ = restore::restore(&w.site, &m.recipe);
            check(w, "restoring a sealed manifest");
        }
    }
});
