//! The no-op fast path: a rerun that nothing can have changed answers "up to date" without
//! probing (no Python, no compiler, no pkg-config started) and without `cmake --build`.
//!
//! After every successful run (a build or a slow no-op) a record is written into the cache,
//! under a key made of the request: rocbuild's own executable, the recipe (its hash), the
//! options as given, the venv chosen, and the settings as the settings step resolved them
//! (`Settings`: the working directory and the environment a build's processes inherit are
//! among them, read there, never here). It holds the
//! file-system stamps (size, mtime, ctime, inode) of everything the run's outcome depended on:
//!
//! - every absolute path the probe reported or the plan uses (Python, torch, compilers,
//!   CMake, Ninja, FFmpeg's headers and libraries, the SDK, system libraries, patches) and the
//!   directory each lives in, so a newer library or compiler put beside them is noticed;
//! - every directory of `PATH` (a tool installed earlier in `PATH` changes it) and `/opt`
//!   (where SDKs appear), with the venv's `pyvenv.cfg` and site-packages;
//! - the manifest, the journal and staging area of an interrupted run (absent), and every
//!   installed file (pip overwriting one changes its stamps).
//!
//! The rerun reads the record for its key and stats those paths: one that differs (or a
//! record that cannot be read) sends it down the full path — probe, plan, build, compare —
//! which stays the authority. Sources that can move (a `--source` directory, a branch
//! `--rev`) and installs from an index never take the fast path.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::paths::hash_hex;
use crate::plan::Plan;
use crate::run::Outcome;
use crate::source::plan::SourcePlan;

const SCHEMA: u32 = 1;

/// What one path was when the record was written: absent, or its metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub len: u64,
    pub mtime_ns: i128,
    /// Unix: the inode's change time and number (a file replaced in place, or with its mtime
    /// kept, still changes them). Windows: the creation time.
    pub ctime_ns: i128,
    pub ino: u64,
    pub dir: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    schema: u32,
    key: String,
    dest: PathBuf,
    recipe: String,
    version: String,
    commit: Option<String>,
    installed: Vec<String>,
    parked: Vec<String>,
    manifest: PathBuf,
    log: PathBuf,
    stamps: Vec<(PathBuf, Option<Stamp>)>,
}

/// The request as far as it decides the result: see the module's comment.
pub fn key(
    recipe: &rocbuild_recipe::Recipe,
    options: &rocbuild_venv::BuildOptions,
    venv: Option<&Path>,
    settings: &impl std::fmt::Debug,
) -> String {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| stamp(&p).map(|s| format!("{}{s:?}", p.display())))
        .unwrap_or_default();
    let parts = [
        SCHEMA.to_string(),
        exe,
        recipe.name().to_string(),
        recipe.hash.clone(),
        serde_json::to_string(options).unwrap_or_default(),
        format!("{venv:?}"),
        format!("{settings:?}"),
    ];
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    hash_hex(&refs)
}

/// Whether this request may take the fast path at all.
pub fn eligible(options: &rocbuild_venv::BuildOptions) -> bool {
    let fixed_rev = options.rev.as_deref().is_none_or(|r| {
        (r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit())) || r.starts_with("refs/tags/")
    });
    // A `--source DIR` without `--rev` is built as it is: only the build can tell.
    let local_as_is = options.source.is_some() && options.rev.is_none();
    fixed_rev && !local_as_is && options.index.is_empty() && options.find_links.is_empty()
}

fn file(cache: &Path, key: &str) -> PathBuf {
    cache.join("quick").join(format!("{key}.json"))
}

pub fn stamp(p: &Path) -> Option<Stamp> {
    let md = std::fs::metadata(p).ok()?;
    let ns = |t: std::io::Result<std::time::SystemTime>| {
        t.ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128)
    };
    let (ctime_ns, ino) = rocbuild_probe::platform::host::change_stamp(&md);
    Some(Stamp {
        len: if md.is_dir() { 0 } else { md.len() },
        mtime_ns: ns(md.modified()),
        ctime_ns,
        ino,
        dir: md.is_dir(),
    })
}

/// The outcome of the last run for this request, when every path it depended on is as it
/// was; None sends the caller down the full path.
pub fn check(cache: &Path, key: &str) -> Option<(PathBuf, Outcome)> {
    let text = std::fs::read(file(cache, key)).ok()?;
    let r: Record = serde_json::from_slice(&text).ok()?;
    if r.schema != SCHEMA || r.key != key {
        return None;
    }
    if !r.stamps.iter().all(|(p, s)| &stamp(p) == s) {
        return None;
    }
    Some((
        r.dest,
        Outcome {
            recipe: r.recipe,
            version: r.version,
            commit: r.commit,
            changed: false,
            installed: r.installed,
            parked: r.parked,
            verify_output: Vec::new(),
            manifest: r.manifest,
            log: r.log,
            compiler_cache: None,
            wheel: None,
            unverified: None,
            upstream: None,
        },
    ))
}

/// Every absolute path in a JSON value (strings, and `;`-separated lists of them).
fn paths_in(v: &serde_json::Value, out: &mut BTreeSet<PathBuf>) {
    match v {
        serde_json::Value::String(s) => {
            for part in s.split(';') {
                let p = Path::new(part);
                if p.is_absolute() && !part.contains('\n') {
                    out.insert(p.to_path_buf());
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| paths_in(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| paths_in(x, out)),
        _ => {}
    }
}

/// The paths a run's outcome depended on (see the module's comment).
fn watched(
    machine: &rocbuild_probe::Machine,
    plan: &Plan,
    cache: &Path,
    path: Option<&std::ffi::OsStr>,
) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    if let Ok(v) = serde_json::to_value(machine) {
        paths_in(&v, &mut found);
    }
    if let Ok(v) = serde_json::to_value(plan) {
        paths_in(&v, &mut found);
    }
    let mut out = BTreeSet::new();
    for p in found {
        // The cache is rocbuild's own (build trees, checkouts, logs change with every run).
        if p.starts_with(cache) {
            continue;
        }
        if let Some(parent) = p.parent().filter(|q| q.parent().is_some()) {
            out.insert(parent.to_path_buf());
        }
        out.insert(p);
    }
    if let Some(path) = path {
        out.extend(std::env::split_paths(path).filter(|p| p.is_absolute()));
    }
    out.insert(PathBuf::from("/opt"));
    let site = &plan.install.site;
    out.insert(site.clone());
    // A journal or a staging area left by an interrupted run: the full path recovers it.
    // (Not `.rocbuild/` itself: the venv lock comes and goes in it.)
    let journal = rocbuild_venv::layout::journal(site);
    out.insert(journal.with_extension("json.tmp"));
    out.insert(journal);
    out.insert(rocbuild_venv::layout::txn(site));
    out.insert(rocbuild_venv::manifest::path(site, &plan.recipe));
    out.insert(machine.target.venv.root.join("pyvenv.cfg"));
    // torch rewritten in place (its version, a local rebuild) leaves its directory's mtime.
    out.insert(site.join("torch").join("version.py"));
    out.insert(site.join("torch").join("__init__.py"));
    if let Ok(exe) = dunce::canonicalize(&machine.target.python.exe) {
        out.insert(exe);
    }
    out
}

/// Write the record of a successful run. Best effort: without it the next run takes the
/// full path.
/// `path` is `PATH` as the settings step read it (a tool installed earlier in it is noticed).
pub fn record(
    cache: &Path,
    key: &str,
    machine: &rocbuild_probe::Machine,
    plan: &Plan,
    outcome: &Outcome,
    path: Option<&std::ffi::OsStr>,
) {
    if let SourcePlan::Local { .. } = plan.source {
        return;
    }
    let Some(m) = rocbuild_venv::manifest::read(&plan.install.site, &plan.recipe) else {
        return;
    };
    let mut paths = watched(machine, plan, cache, path);
    paths.extend(m.files.iter().map(|f| plan.install.site.join(&f.path)));
    let r = Record {
        schema: SCHEMA,
        key: key.to_string(),
        dest: plan.install.dest.clone(),
        recipe: outcome.recipe.clone(),
        version: outcome.version.clone(),
        commit: outcome.commit.clone(),
        installed: m.files.iter().map(|f| f.path.clone()).collect(),
        parked: m.parked.clone(),
        manifest: outcome.manifest.clone(),
        log: outcome.log.clone(),
        stamps: paths
            .into_iter()
            .map(|p| {
                let s = stamp(&p);
                (p, s)
            })
            .collect(),
    };
    let f = file(cache, key);
    let Ok(text) = serde_json::to_vec(&r) else {
        return;
    };
    if let Some(dir) = f.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // Written beside, then renamed: a reader never sees half a record.
    let tmp = f.with_extension(format!("json.{}", std::process::id()));
    if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, &f).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Forget the record (a failed run, or one that changed what the record describes).
pub fn forget(cache: &Path, key: &str) {
    let _ = std::fs::remove_file(file(cache, key));
}
