//! `rocbuild repair PKG`: make an installed prebuilt package load without rebuilding it, when
//! what stops it is findability, not ABI.
//!
//! From the loader emulation doctor uses: each library a package file needs that the loader
//! does not find, but that is present elsewhere (torch/lib, another package's lib dir, the
//! package's own dir, a Homebrew or FFmpeg lib dir given with `--search`), is made findable the
//! way rocbuild's own builds are: a RUNPATH entry (ELF) or an LC_RPATH plus a new ad-hoc
//! signature (Mach-O), relative to the file (`$ORIGIN/../torch/lib`) when inside
//! site-packages. What an edit cannot fix — a library found nowhere, an import nothing exports —
//! is refused, naming the fix, and nothing of that package is touched.
//!
//! The OS rules are those of the files (ELF, Mach-O, PE), not of this host: a macOS venv is
//! repaired from Linux. The edit is an install transaction (journal, backups, verify, commit):
//! `status` sees pip overwriting it, `restore` gives pip's bytes back.
//!
//! Names an OS: the relinking seam. `doctor --repair` rewrites RUNPATHs, adds LC_RPATHs and re-
//! signs, or writes a DLL preload hook; it also knows what Windows supplies itself
//! (python3NN.dll, the MSVC runtime).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rocbuild_native::Format;
use rocbuild_probe::Os;
use rocbuild_venv::install::{self, NewFile};
use rocbuild_venv::manifest::{self, InstalledFile, Kind, Manifest};
use rocbuild_venv::{ownership, record};
use serde::Serialize;

use crate::linkage::{link, Reader, Search};
use crate::package::{native_libraries, Subject};
use crate::venv_os::locate;
use crate::DoctorError;

/// What to repair, where.
#[derive(Debug, Clone)]
pub struct RepairOptions {
    /// The venv the command chose (`--venv`, else `$VIRTUAL_ENV`, …).
    pub venv: rocbuild_probe::Venv,
    /// Packages (import names under site-packages); empty: torchcodec and ctranslate2 when
    /// installed.
    pub packages: Vec<String>,
    /// More directories a needed library may be in (`--search`: Homebrew's lib, an FFmpeg).
    pub search: Vec<PathBuf>,
    /// Say what would change, change nothing.
    pub dry_run: bool,
    /// Fail at once when another run holds the venv.
    pub no_wait: bool,
    /// What the loader reads of the environment (the command's one snapshot).
    pub loader: crate::linkage::LoaderEnv,
}

/// The program and the environment a package's files are loaded with.
pub(crate) struct Runtime {
    /// The venv's Python where it runs here (its exports satisfy `Py*` symbols).
    pub python: Option<PathBuf>,
    pub loader: crate::linkage::LoaderEnv,
}

/// One file's edit.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FileFix {
    /// Relative to site-packages, with `/`.
    pub path: String,
    pub format: String,
    /// Each library made findable and the directory it is in.
    pub found: Vec<(String, PathBuf)>,
    /// ELF: the whole RUNPATH after the edit. Mach-O: the LC_RPATHs added.
    pub entries: Vec<String>,
}

/// Why a file cannot be made to load by a search-path edit, and what to do instead.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Refusal {
    pub path: String,
    /// `missing` (found nowhere), `abi` (an import nothing exports), `other`.
    pub kind: String,
    pub problem: String,
    pub fix: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Every file already finds what it needs.
    NothingToDo,
    /// `--dry-run`: these edits would be made.
    WouldRepair,
    Repaired,
    /// Refused: nothing of the package was touched.
    CannotRepair,
}

#[derive(Debug, Clone, Serialize)]
pub struct PackageRepair {
    pub name: String,
    pub version: Option<String>,
    pub outcome: Outcome,
    pub fixes: Vec<FileFix>,
    /// Problems that stop the repair.
    pub refused: Vec<Refusal>,
    /// Files left as they are that the package does not need (a TorchCodec core for an FFmpeg
    /// major that is not installed, beside one that loads).
    pub alternatives: Vec<Refusal>,
    /// Files signed again (Mach-O), by which signer.
    pub signed: Vec<String>,
    /// Windows: the DLL preload hook written (no DLL is edited).
    pub hook: Option<Hook>,
}

/// The Windows DLL preload hook a repair wrote: a module run at start-up (through a `.pth`
/// line) that, when the package is first imported, adds `dirs` with `os.add_dll_directory`
/// and loads `dlls` by absolute path, dependencies first.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Hook {
    /// Relative to site-packages.
    pub module: String,
    pub pth: String,
    pub dirs: Vec<PathBuf>,
    pub dlls: Vec<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RepairReport {
    pub venv: PathBuf,
    pub site: PathBuf,
    /// Whose loader rules applied: read from the files.
    pub os: String,
    pub packages: Vec<PackageRepair>,
}

impl RepairReport {
    /// Something was refused.
    pub fn refused(&self) -> bool {
        self.packages
            .iter()
            .any(|p| p.outcome == Outcome::CannotRepair)
    }
    /// For the exit status: what the refusals were about (a library found nowhere, an import
    /// nothing exports, both, or something else).
    pub fn verdict(&self) -> crate::Verdict {
        let kinds = self
            .packages
            .iter()
            .flat_map(|p| &p.refused)
            .filter_map(|r| match r.kind.as_str() {
                "missing" | "missing-ffmpeg" => Some(crate::Breaks::MissingLibrary),
                "abi" => Some(crate::Breaks::Abi),
                _ => None,
            });
        crate::Verdict::of(self.refused(), kinds)
    }
}

/// File names of native libraries under site-packages (and the `--search` dirs), with every
/// directory holding one: where a missing library might be.
struct Index {
    by_name: BTreeMap<String, Vec<PathBuf>>,
}

impl Index {
    fn build(site: &Path, extra: &[PathBuf]) -> Index {
        let mut by_name: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        fn walk(dir: &Path, depth: usize, out: &mut BTreeMap<String, Vec<PathBuf>>) {
            if depth > 6 {
                return;
            }
            let Ok(rd) = std::fs::read_dir(dir) else {
                return;
            };
            let mut entries: Vec<_> = rd.flatten().collect();
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                let name = e.file_name().to_string_lossy().into_owned();
                let p = e.path();
                if p.is_dir() {
                    if !matches!(
                        name.as_str(),
                        "__pycache__" | "include" | "share" | ".rocbuild" | "tests" | "test"
                    ) {
                        walk(&p, depth + 1, out);
                    }
                } else if looks_native(&name) {
                    out.entry(name).or_default().push(dir.to_path_buf());
                }
            }
        }
        walk(site, 0, &mut by_name);
        for d in extra {
            walk(d, 5, &mut by_name);
        }
        Index { by_name }
    }

    fn dirs_of(&self, leaf: &str) -> &[PathBuf] {
        self.by_name.get(leaf).map(Vec::as_slice).unwrap_or(&[])
    }
}

fn looks_native(name: &str) -> bool {
    rocbuild_probe::platform::libname::is_native(name)
}

fn is_ffmpeg_lib(leaf: &str) -> bool {
    [
        "libavutil",
        "libavcodec",
        "libavformat",
        "libavdevice",
        "libavfilter",
        "libswscale",
        "libswresample",
        "libpostproc",
        "avutil-",
        "avcodec-",
        "avformat-",
        "avdevice-",
        "avfilter-",
        "swscale-",
        "swresample-",
    ]
    .iter()
    .any(|p| leaf.to_ascii_lowercase().starts_with(p))
}

/// The leaf name the loader looks for, when a search-path edit can change where it looks.
fn searchable(format: Format, name: &str) -> Option<String> {
    match format {
        Format::MachO => name.strip_prefix("@rpath/").map(str::to_string),
        Format::Elf | Format::Pe => (!name.contains('/')).then(|| name.to_string()),
    }
}

fn leaf(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Windows: DLLs a Windows machine running this venv supplies itself — the interpreter's
/// `python3NN.dll` (beside python.exe) and the MSVC runtime (beside python.exe, or System32
/// through the VC++ redistributable) — which the preload hook must not (and cannot) provide.
fn supplied_on_windows(os: Os, leaf: &str) -> bool {
    let l = leaf.to_ascii_lowercase();
    os == Os::Windows
        && (rocbuild_native::is_msvc_runtime(&l)
            || (l.starts_with("python3") && l.ends_with(".dll")))
}

/// Windows: torch's DLLs, which `import torch` (the package's own first import) loads before
/// the package's: a DLL needing `torch_cpu.dll` binds to the loaded one, no search involved.
fn torch_dlls(site: &Path, os: Os) -> Vec<PathBuf> {
    if os != Os::Windows {
        return Vec::new();
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(site.join("torch").join("lib"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("dll")))
        .collect();
    v.sort();
    v
}

/// What to do about a library found nowhere.
fn missing_fix(leaf: &str, os: Os, package: &Subject) -> String {
    if is_ffmpeg_lib(leaf) {
        let how = match os {
            Os::Macos => "`brew install ffmpeg` (or the ffmpeg@N matching this major)",
            Os::Linux => "your distribution's FFmpeg of that major",
            Os::Windows => "a shared FFmpeg build (`rocbuild ffmpeg --major N`)",
        };
        return format!(
            "install the FFmpeg that provides {leaf} ({how}) and pass its lib directory with --search DIR, or rebuild against the FFmpeg you have: {}",
            package.rebuild_hint()
        );
    }
    format!(
        "install what provides {leaf} and pass its directory with --search DIR; if it belongs to another GPU stack or torch build than yours, rebuild instead: {}",
        package.rebuild_hint()
    )
}

fn rel_of(site: &Path, p: &Path) -> String {
    p.strip_prefix(site)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Plan the repair of one package: an edit per file that needs one, or the refusals.
fn plan_package(
    site: &Path,
    os: Os,
    subject: &Subject,
    index: &Index,
    searched: bool,
    runtime: Runtime,
    reader: &Reader,
) -> Result<PackageRepair, DoctorError> {
    let files = native_libraries(site, subject, os);
    let p = Planning {
        site,
        os,
        subject,
        index,
        searched,
        reader,
        base: Search {
            executable: runtime.python.clone(),
            preloaded: torch_dlls(site, os),
            loader: runtime.loader,
            ..Search::default()
        },
    };
    let mut refused: Vec<Refusal> = Vec::new();
    let firsts = p.first_pass(&files, &mut refused)?;
    let (fixes, loads_with_ffmpeg) = p.second_pass(firsts, &mut refused)?;
    // TorchCodec ships one core per FFmpeg major and loads the first that works: the others
    // failing on their FFmpeg is expected once one loads.
    let (alternatives, refused): (Vec<Refusal>, Vec<Refusal>) = refused
        .into_iter()
        .partition(|r| r.kind == "missing-ffmpeg" && subject.ffmpeg && loads_with_ffmpeg);
    let outcome = if !refused.is_empty() {
        Outcome::CannotRepair
    } else if fixes.is_empty() {
        Outcome::NothingToDo
    } else {
        Outcome::WouldRepair
    };
    Ok(PackageRepair {
        name: subject.name.clone(),
        version: None,
        outcome,
        fixes,
        refused,
        alternatives,
        signed: Vec::new(),
        hook: None,
    })
}

/// What one repair plan looks at.
struct Planning<'a> {
    site: &'a Path,
    os: Os,
    subject: &'a Subject,
    index: &'a Index,
    /// `--search` directories were given.
    searched: bool,
    reader: &'a Reader,
    /// How the package's files are loaded today (after Python and torch).
    base: Search,
}

/// A file whose direct needs were all found somewhere in the venv (pass 1's answer).
struct Found {
    file: PathBuf,
    rel: String,
    linkage: crate::linkage::Linkage,
    /// Each missing need and the directory that has it.
    found: Vec<(String, PathBuf)>,
}

fn canon(p: &Path) -> PathBuf {
    dunce::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

impl Planning<'_> {
    /// Pass 1: each file's missing direct needs, and where each one is; a file with a need
    /// found nowhere (or a fixed path) is refused.
    fn first_pass(
        &self,
        files: &[PathBuf],
        refused: &mut Vec<Refusal>,
    ) -> Result<Vec<Found>, DoctorError> {
        let mut firsts = Vec::new();
        for file in files {
            let bin = self.reader.full(file);
            let Ok(bin) = bin.as_ref() else { continue };
            let rel = rel_of(self.site, file);
            let l = link(file, &self.base, self.reader)?;
            let me = canon(file);
            let mut found: Vec<(String, PathBuf)> = Vec::new();
            let mut nowhere: Vec<String> = Vec::new();
            for m in &l.missing {
                let direct = m.needed_by.iter().any(|p| canon(p) == me);
                if !direct || supplied_on_windows(self.os, &m.name) {
                    continue; // another file's need: that file is a root too, or not ours
                }
                let Some(key) = searchable(bin.format, &m.name) else {
                    refused.push(Refusal {
                        path: rel.clone(),
                        kind: "other".into(),
                        problem: format!(
                            "needs {}, a fixed path that no search path changes",
                            m.name
                        ),
                        fix: self.subject.rebuild_hint(),
                    });
                    continue;
                };
                match self.index.dirs_of(&key).first() {
                    Some(d) => found.push((m.name.clone(), d.clone())),
                    None => nowhere.push(key),
                }
            }
            if nowhere.is_empty() {
                firsts.push(Found {
                    file: file.clone(),
                    rel,
                    linkage: l,
                    found,
                });
            } else {
                refused.push(self.found_nowhere(rel, &nowhere));
            }
        }
        Ok(firsts)
    }

    fn found_nowhere(&self, rel: String, nowhere: &[String]) -> Refusal {
        let all_ffmpeg = nowhere.iter().all(|n| is_ffmpeg_lib(n));
        Refusal {
            path: rel,
            kind: if all_ffmpeg {
                "missing-ffmpeg"
            } else {
                "missing"
            }
            .into(),
            problem: format!(
                "needs {}, found nowhere in the venv{}",
                nowhere.join(", "),
                if self.searched {
                    ""
                } else {
                    " or the directories searched"
                }
            ),
            fix: missing_fix(&nowhere[0], self.os, self.subject),
        }
    }

    /// Pass 2: with the directories found, would each file load? The fixes for those that
    /// would, and whether one that needs FFmpeg loads.
    fn second_pass(
        &self,
        firsts: Vec<Found>,
        refused: &mut Vec<Refusal>,
    ) -> Result<(Vec<FileFix>, bool), DoctorError> {
        // What the package's own files will find once repaired: a file that needs another of
        // them (custom_ops needs core) is not blamed for what that one is about to find.
        let will_find: BTreeMap<PathBuf, BTreeSet<String>> = firsts
            .iter()
            .map(|f| {
                (
                    canon(&f.file),
                    f.found.iter().map(|(n, _)| n.clone()).collect(),
                )
            })
            .collect();
        // Every directory any of them will search: in the process, a file's dependencies that
        // are the package's own files find theirs through their own new entries.
        let mut all_dirs: Vec<PathBuf> = Vec::new();
        for (_, d) in firsts.iter().flat_map(|f| &f.found) {
            if !all_dirs.contains(d) {
                all_dirs.push(d.clone());
            }
        }
        let mut fixes = Vec::new();
        let mut loads_with_ffmpeg = false;
        for f in firsts {
            let bin = self.reader.full(&f.file);
            let Ok(bin) = bin.as_ref() else { continue };
            let mut dirs: Vec<PathBuf> = Vec::new();
            for (_, d) in &f.found {
                if !dirs.contains(d) {
                    dirs.push(d.clone());
                }
            }
            let after = if f.found.is_empty() {
                f.linkage
            } else {
                let mut extra = dirs.clone();
                extra.extend(all_dirs.iter().filter(|d| !dirs.contains(d)).cloned());
                let search = Search {
                    extra_dirs: extra,
                    ..self.base.clone()
                };
                link(&f.file, &search, self.reader)?
            };
            if let Some(r) = self.would_not_load(&f.rel, &after, &will_find) {
                refused.push(r);
                continue;
            }
            if bin.needed.iter().any(|n| is_ffmpeg_lib(leaf(n))) {
                loads_with_ffmpeg = true;
            }
            if f.found.is_empty() {
                continue;
            }
            let entries = self.entries(&f.file, bin, &dirs);
            fixes.push(FileFix {
                path: f.rel,
                format: bin.format.to_string(),
                found: f.found,
                entries,
            });
        }
        Ok((fixes, loads_with_ffmpeg))
    }

    /// Why a file would still not load with the directories found: a library still missing,
    /// or an import nothing exports.
    fn would_not_load(
        &self,
        rel: &str,
        after: &crate::linkage::Linkage,
        will_find: &BTreeMap<PathBuf, BTreeSet<String>>,
    ) -> Option<Refusal> {
        let missing: Vec<_> = after
            .missing
            .iter()
            .filter(|m| !supplied_on_windows(self.os, &m.name))
            .filter(|m| {
                !m.needed_by.iter().any(|p| {
                    will_find
                        .get(&canon(p))
                        .is_some_and(|names| names.contains(&m.name))
                })
            })
            .collect();
        // Only FFmpeg libraries of another major, through the package's own core of that major
        // (a Windows pybind_ops DLL imports its core): another variant, not a refusal.
        let only_ffmpeg =
            !missing.is_empty() && missing.iter().all(|m| is_ffmpeg_lib(leaf(&m.name)));
        let still: Vec<String> = missing
            .iter()
            .map(|m| {
                format!(
                    "{} (needed by {})",
                    m.name,
                    m.needed_by
                        .first()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                )
            })
            .collect();
        if !still.is_empty() {
            return Some(Refusal {
                path: rel.to_string(),
                kind: if only_ffmpeg {
                    "missing-ffmpeg"
                } else {
                    "missing"
                }
                .into(),
                problem: format!("would still miss {}", still.join(", ")),
                fix: self.subject.rebuild_hint(),
            });
        }
        let abi: Vec<String> = after
            .unresolved
            .iter()
            .filter(|u| !rocbuild_native::is_python_c_api(&u.name))
            .map(|u| u.demangled.clone().unwrap_or_else(|| u.name.clone()))
            .collect();
        (!abi.is_empty()).then(|| Refusal {
            path: rel.to_string(),
            kind: "abi".into(),
            problem: format!(
                "imports {} that nothing exports{}: built for another version of what it links to",
                abi.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
                if abi.len() > 3 {
                    format!(" (and {} more)", abi.len() - 3)
                } else {
                    String::new()
                }
            ),
            fix: self.subject.rebuild_hint(),
        })
    }

    /// The search entries a fixed file gets: its RUNPATH with the new `$ORIGIN/…` entries
    /// (ELF), the LC_RPATHs to add (`@loader_path/…`, Mach-O), or the directories for the
    /// preload hook (PE): the file's own format's relinker decides.
    fn entries(&self, file: &Path, bin: &rocbuild_native::Binary, dirs: &[PathBuf]) -> Vec<String> {
        rocbuild_link::relinker(self.os).repair_entries(self.site, file, bin, dirs)
    }
}

/// When `rocbuild repair NAME` would make the package load without a rebuild: it is not
/// rocbuild's own build, and its planned repair (the venv's files only, no `--search`) makes
/// every missing library findable with no refusal — nothing found nowhere, no import nothing
/// exports. Each library it would make findable, with its directory; `None` otherwise.
pub(crate) fn repair_would_fix(
    site: &Path,
    os: Os,
    subject: &Subject,
    runtime: Runtime,
) -> Option<Vec<(String, PathBuf)>> {
    if let Ok(Some(m)) = manifest::read_checked(site, &subject.name) {
        if m.kind == Kind::Build {
            return None;
        }
    }
    let index = Index::build(site, &[]);
    let p = plan_package(site, os, subject, &index, false, runtime, Reader::leaked()).ok()?;
    (p.outcome == Outcome::WouldRepair).then(|| p.fixes.into_iter().flat_map(|f| f.found).collect())
}

/// The version pip installed, from the dist-info directory's name.
fn dist_version(site: &Path, dist: &str) -> Option<String> {
    let want = rocbuild_probe::normalize_dist(dist);
    std::fs::read_dir(site).ok()?.flatten().find_map(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        let stem = n.strip_suffix(".dist-info")?;
        let (name, version) = stem.rsplit_once('-')?;
        (rocbuild_probe::normalize_dist(name) == want).then(|| version.to_string())
    })
}

fn subject_for(name: &str) -> Subject {
    Subject::known()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| Subject {
            name: name.to_string(),
            import_dir: name.to_string(),
            distribution: name.to_string(),
            recipe: None,
            ffmpeg: false,
            torch: false,
            stock_pip: None,
            dll_dirs: None,
            loads_one_of: Vec::new(),
        })
}

/// Plan, and unless `dry_run`, apply the repair of each package.
pub fn repair(opts: &RepairOptions) -> Result<RepairReport, DoctorError> {
    let (venv, site) = locate(&opts.venv)?;
    let root = venv.root;
    let names: Vec<String> = if opts.packages.is_empty() {
        ["torchcodec", "ctranslate2"]
            .into_iter()
            .filter(|n| site.join(n).is_dir())
            .map(str::to_string)
            .collect()
    } else {
        opts.packages.clone()
    };
    if names.is_empty() {
        return Err(DoctorError::NothingToRepair {
            site: site.display().to_string(),
        });
    }
    for n in &names {
        if !manifest::is_inside(n) || n.contains('/') || !site.join(n).is_dir() {
            return Err(DoctorError::NotInstalled {
                name: n.clone(),
                site: site.display().to_string(),
            });
        }
    }
    for d in &opts.search {
        if !d.is_dir() {
            return Err(DoctorError::BadSearchDir {
                path: d.display().to_string(),
            });
        }
    }
    let packages: Vec<&str> = names.iter().map(String::as_str).collect();
    let os = rocbuild_probe::cross::venv_os(&root, &packages, Os::current());
    let python = Some(rocbuild_probe::python_in_venv(&root, os))
        .filter(|p| p.exists() && os == Os::current());
    let mut search = opts.search.clone();
    if os == Os::current() && os == Os::Macos {
        // Homebrew's prefixes (Apple silicon, then Intel).
        for d in ["/opt/homebrew/lib", "/usr/local/lib"] {
            search.push(PathBuf::from(d));
        }
    }
    let search: Vec<PathBuf> = search
        .into_iter()
        .map(|d| std::path::absolute(&d).unwrap_or(d))
        .collect();
    let reader = Reader::leaked();
    let index = Index::build(&site, &search);
    let _lock = if opts.dry_run {
        None
    } else {
        let lock = rocbuild_venv::lock::VenvLock::acquire(&site, !opts.no_wait, &mut |_| {})?;
        install::recover(&site)?;
        Some(lock)
    };
    let mut packages = Vec::new();
    for n in &names {
        let subject = subject_for(n);
        let mut p = plan_package(
            &site,
            os,
            &subject,
            &index,
            !search.is_empty(),
            Runtime {
                python: python.clone(),
                loader: opts.loader.clone(),
            },
            reader,
        )?;
        p.version = dist_version(&site, &subject.distribution);
        if p.outcome == Outcome::WouldRepair && !opts.dry_run {
            if let Some(prev) = manifest::read_checked(&site, n)? {
                if prev.kind == Kind::Build {
                    return Err(DoctorError::BuiltByRocbuild { name: n.clone() });
                }
            }
            p.signed = if os == Os::Windows {
                p.hook = Some(apply_hook(&site, &subject, &p, &opts.loader)?);
                Vec::new()
            } else {
                apply(&site, os, &subject, &p, python.as_deref())?
            };
            p.outcome = Outcome::Repaired;
        }
        packages.push(p);
    }
    Ok(RepairReport {
        venv: root,
        site,
        os: os.as_str().to_string(),
        packages,
    })
}

/// The edit as an install transaction: stage edited copies and the package's RECORD listing
/// their new hashes, journal + back up + swap, check that every edited file now finds
/// everything (and, for a venv of this host, loads in a fresh Python), then commit with a
/// manifest of kind `repair`, or roll back (the old RECORD comes back with pip's files).
fn apply(
    site: &Path,
    os: Os,
    subject: &Subject,
    p: &PackageRepair,
    python: Option<&Path>,
) -> Result<Vec<String>, DoctorError> {
    let venv_err = DoctorError::from;
    let created = install::begin(site).map_err(venv_err)?;
    let staged = stage_edits(site, os, p).and_then(|(mut new, signed)| {
        new.extend(stage_records(site, &subject.distribution, &new)?);
        Ok((new, signed))
    });
    let (new, signed) = match staged {
        Ok(s) => s,
        Err(e) => {
            install::abandon(site, created);
            return Err(e);
        }
    };
    let previous = manifest::read_checked(site, &p.name).ok().flatten();
    let swapped = swap_in(site, &p.name, created, &new, previous.as_ref())?;
    if let Err(reason) = verify(site, os, p, python) {
        swapped.roll_back().map_err(venv_err)?;
        return Err(DoctorError::RepairVerify {
            name: p.name.clone(),
            reason,
        });
    }
    let (files, search_added) = repaired_files(site, p, previous.as_ref())?;
    let mut m = repair_manifest(p, p.version.clone().unwrap_or_default(), search_added);
    m.python = python.map(|p| p.display().to_string()).unwrap_or_default();
    m.files = files;
    swapped.commit(&m, None).map_err(venv_err)?;
    Ok(signed)
}

/// Edited copies of the files to fix, in the stage: what goes where, and the Mach-O files
/// that were signed again.
fn stage_edits(
    site: &Path,
    os: Os,
    p: &PackageRepair,
) -> Result<(Vec<NewFile>, Vec<String>), DoctorError> {
    let relinker = rocbuild_link::relinker(os);
    let stage = rocbuild_venv::layout::stage(site);
    let mut new = Vec::new();
    let mut signed = Vec::new();
    for (i, f) in p.fixes.iter().enumerate() {
        let from = site.join(&f.path);
        let name = from
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let to = stage.join(format!("{i}-{name}"));
        fs_err::copy(&from, &to).map_err(DoctorError::io("copy", &from))?;
        if let Some(link) = relinker.with_entries(&f.entries) {
            rocbuild_link::apply(&link, &to)?;
            if link.resigns() {
                signed.push(f.path.clone());
            }
        }
        new.push(NewFile {
            rel: f.path.clone(),
            staged: to,
        });
    }
    Ok((new, signed))
}

/// The RECORDs of `distribution` listing each of `new` (edited or added) with the hash and
/// size of its staged bytes, staged beside them: pip's RECORD stays true after a repair,
/// and is swapped (and backed up, and rolled back) with the files it lists.
fn stage_records(
    site: &Path,
    distribution: &str,
    new: &[NewFile],
) -> Result<Vec<NewFile>, DoctorError> {
    let files: Vec<(String, PathBuf)> = new
        .iter()
        .map(|n| (n.rel.clone(), n.staged.clone()))
        .collect();
    let stage = rocbuild_venv::layout::stage(site);
    let mut out = Vec::new();
    for (i, (rel, text)) in record::relisted(site, distribution, &files)?
        .into_iter()
        .enumerate()
    {
        let to = stage.join(format!("RECORD-{i}"));
        fs_err::write(&to, text).map_err(DoctorError::io("write", &to))?;
        out.push(NewFile { rel, staged: to });
    }
    Ok(out)
}

/// The manifest's files after a repair: those an earlier repair left that are still as it
/// left them, and those edited now; with the search paths added to each.
fn repaired_files(
    site: &Path,
    p: &PackageRepair,
    previous: Option<&Manifest>,
) -> Result<(Vec<InstalledFile>, SearchAdded), DoctorError> {
    let mut files: Vec<InstalledFile> = Vec::new();
    let mut search_added = BTreeMap::new();
    if let Some(prev) = previous {
        for f in &prev.files {
            let ours = manifest::sha256_file(&site.join(&f.path)).is_ok_and(|(h, _)| h == f.sha256);
            if ours && !p.fixes.iter().any(|x| x.path == f.path) {
                files.push(f.clone());
                if let Some(e) = prev.search_added.get(&f.path) {
                    search_added.insert(f.path.clone(), e.clone());
                }
            }
        }
    }
    for f in &p.fixes {
        let path = site.join(&f.path);
        let (sha256, size) = manifest::sha256_file(&path)?;
        let md = std::fs::metadata(&path).map_err(DoctorError::io("read", &path))?;
        files.push(InstalledFile {
            path: f.path.clone(),
            sha256,
            size,
            built_sha256: None,
            mtime_ns: manifest::mtime_ns(&md),
        });
        search_added.insert(f.path.clone(), f.entries.clone());
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((files, search_added))
}

/// The search paths a repair added, per file (the manifest's `search_added`).
type SearchAdded = BTreeMap<String, Vec<String>>;

/// A `repair` manifest of `p` (its files and extra files are the caller's).
fn repair_manifest(p: &PackageRepair, version: String, search_added: SearchAdded) -> Manifest {
    Manifest {
        schema: 2,
        recipe: p.name.clone(),
        version,
        installed_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        kind: Kind::Repair,
        search_added,
        ownership: Some(repaired_ownership(&p.name)),
        ..Manifest::default()
    }
}

/// A repaired package's footprint: its dist-info and what its RECORD lists.
fn repaired_package(name: &str) -> ownership::Package {
    ownership::Package {
        distribution: name.to_string(),
        roots: Vec::new(),
    }
}

/// The ownership record of a repair (`held` is filled in at the commit).
fn repaired_ownership(name: &str) -> ownership::Ownership {
    let package = repaired_package(name);
    ownership::Ownership {
        distribution: package.distribution,
        roots: package.roots,
        held: BTreeMap::new(),
        baseline: None,
    }
}

/// Swap a repair's staged files in. rocbuild takes the package over (its files as they are
/// become the baseline `restore` gives back) unless its earlier repair still holds it.
fn swap_in(
    site: &Path,
    name: &str,
    created: bool,
    new: &[NewFile],
    previous: Option<&Manifest>,
) -> Result<install::Swapped, DoctorError> {
    let package = repaired_package(name);
    let holds = previous.is_some_and(|m| ownership::holds(site, m));
    install::swap(site, name, created, new, &[], (!holds).then_some(&package))
        .map_err(DoctorError::from)
}

/// Windows: no DLL holds a search path, so nothing is edited; the preload hook rocbuild's
/// own Windows builds use (`rocbuild_link`) is written instead, as a transaction:
/// staged with the package's RECORD listing it, journaled, swapped in, checked (every fixed
/// file finds everything with the hook's directories added, by Windows' rules), committed
/// with a manifest of kind `repair` listing the two files in `extra_files` — or rolled back.
/// `restore` removes them; so does pip's uninstall, which reads the RECORD.
fn apply_hook(
    site: &Path,
    subject: &Subject,
    p: &PackageRepair,
    loader: &crate::linkage::LoaderEnv,
) -> Result<Hook, DoctorError> {
    use rocbuild_link::{self as link, Link};
    let venv_err = DoctorError::from;
    let mut dirs: Vec<PathBuf> = Vec::new();
    for f in &p.fixes {
        for (_, d) in &f.found {
            if !dirs.contains(d) {
                dirs.push(d.clone());
            }
        }
    }
    let dest = site.join(&subject.import_dir);
    // torch adds torch/lib itself (its `__init__`), and must load its DLLs first.
    let own = [site.join("torch").join("lib")];
    let at = link::Placement {
        recipe: &p.name,
        import_dir: &subject.import_dir,
        dest: &dest,
        site,
        finds: &dirs,
        own: &own,
    };
    let Link::Preload(pre) = link::relinker(Os::Windows).plan(&at) else {
        unreachable!("Windows plans a preload hook")
    };
    let files: Vec<PathBuf> = p.fixes.iter().map(|f| site.join(&f.path)).collect();
    let dlls = link::preload_order(&files, &pre.dirs).map_err(|e| DoctorError::Hook {
        reason: e.to_string(),
    })?;
    let version = p.version.clone().unwrap_or_default();
    let created = install::begin(site).map_err(venv_err)?;
    let new = match stage_hook(site, subject, p, &pre, &dlls) {
        Ok(new) => new,
        Err(e) => {
            install::abandon(site, created);
            return Err(e);
        }
    };
    let previous = manifest::read_checked(site, &p.name).ok().flatten();
    let swapped = swap_in(site, &p.name, created, &new, previous.as_ref())?;
    if let Err(reason) = hook_finds_everything(site, &files, &pre, loader) {
        swapped.roll_back().map_err(venv_err)?;
        return Err(DoctorError::RepairVerify {
            name: p.name.clone(),
            reason,
        });
    }
    let mut search_added = BTreeMap::new();
    search_added.insert(
        pre.module_rel.clone(),
        pre.dirs.iter().map(|d| d.display().to_string()).collect(),
    );
    let mut m = repair_manifest(p, version, search_added);
    m.extra_files = vec![pre.module_rel.clone(), pre.pth_rel.clone()];
    swapped.commit(&m, None).map_err(venv_err)?;
    Ok(Hook {
        module: pre.module_rel,
        pth: pre.pth_rel,
        dirs: pre.dirs,
        dlls,
    })
}

/// The hook's module and `.pth` in the stage, and the package's RECORD listing them.
fn stage_hook(
    site: &Path,
    subject: &Subject,
    p: &PackageRepair,
    pre: &rocbuild_link::Preload,
    dlls: &[PathBuf],
) -> Result<Vec<NewFile>, DoctorError> {
    use rocbuild_link as link;
    // The hook's text: a Windows venv on this Unix host runs under Wine, which sees `/` as
    // `Z:\` (the checks read the host's paths).
    let (mut shown, mut shown_dlls) = (pre.clone(), dlls.to_vec());
    if Os::current() != Os::Windows {
        rocbuild_probe::cross::wine_paths(&mut shown.dirs);
        rocbuild_probe::cross::wine_paths(&mut shown_dlls);
    }
    let version = p.version.clone().unwrap_or_default();
    let stage = rocbuild_venv::layout::stage(site);
    let mut new = Vec::new();
    for (rel, text) in [
        (
            &pre.module_rel,
            link::preload_module(&shown, &p.name, &version, &shown_dlls),
        ),
        (&pre.pth_rel, link::preload_pth(pre)),
    ] {
        let path = stage.join(rel);
        fs_err::write(&path, text).map_err(DoctorError::io("write", &path))?;
        new.push(NewFile {
            rel: rel.clone(),
            staged: path,
        });
    }
    new.extend(stage_records(site, &subject.distribution, &new)?);
    Ok(new)
}

/// With the hook's directories added (as `add_dll_directory` does), every fixed file finds
/// what it needs by Windows' rules; else which file misses what.
fn hook_finds_everything(
    site: &Path,
    files: &[PathBuf],
    pre: &rocbuild_link::Preload,
    loader: &crate::linkage::LoaderEnv,
) -> Result<(), String> {
    let reader = Reader::default();
    for f in files {
        let search = Search {
            extra_dirs: pre.dirs.clone(),
            preloaded: torch_dlls(site, Os::Windows),
            loader: loader.clone(),
            ..Search::default()
        };
        let still = match link(f, &search, &reader) {
            Ok(l) => l
                .missing
                .into_iter()
                .map(|m| m.name)
                .find(|n| !supplied_on_windows(Os::Windows, n)),
            Err(e) => Some(e.to_string()),
        };
        if let Some(n) = still {
            return Err(format!("{} still misses {n}", rel_of(site, f)));
        }
    }
    Ok(())
}

/// After the swap: the loader emulation finds every need of every edited file (Mach-O: and the
/// new signature verifies); for a venv of this host's OS, a fresh Python loads them with
/// `ctypes.CDLL` (no `LD_LIBRARY_PATH`, nothing imported first).
fn verify(site: &Path, os: Os, p: &PackageRepair, python: Option<&Path>) -> Result<(), String> {
    let reader = Reader::default();
    let mut paths = Vec::new();
    for f in &p.fixes {
        let path = site.join(&f.path);
        let l = link(&path, &Search::default(), &reader).map_err(|e| e.to_string())?;
        if let Some(m) = l.missing.first() {
            return Err(format!("{} still misses {}", f.path, m.name));
        }
        if f.format == Format::MachO.to_string() {
            let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
            let problems = rocbuild_native::signature_problems(&bytes);
            if !problems.is_empty() {
                return Err(format!("{}: {}", f.path, problems.join("; ")));
            }
        }
        paths.push(path);
    }
    if let (Some(py), true) = (python, os == Os::current()) {
        let out = std::process::Command::new(py)
            .args([
                "-I",
                "-B",
                "-c",
                "import ctypes, sys\nfor p in sys.argv[1:]:\n    ctypes.CDLL(p)\n",
            ])
            .args(&paths)
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("DYLD_LIBRARY_PATH")
            .current_dir(site)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", py.display()))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "a fresh Python cannot load them: {}",
                err.lines().last().unwrap_or("").trim()
            ));
        }
    }
    Ok(())
}

/// Human text.
pub fn human(r: &RepairReport) -> String {
    let mut s = format!("venv {} ({} files)\n", r.venv.display(), r.os);
    for p in &r.packages {
        let v = p
            .version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        let what = match p.outcome {
            Outcome::NothingToDo => "finds every library it needs: nothing to repair",
            Outcome::WouldRepair => "would be repaired (--dry-run: nothing changed)",
            Outcome::Repaired => "repaired",
            Outcome::CannotRepair => "cannot be repaired: nothing was changed",
        };
        s.push_str(&format!("{}{v}: {what}\n", p.name));
        for f in &p.fixes {
            let libs: BTreeSet<String> = f.found.iter().map(|(n, _)| leaf(n).to_string()).collect();
            s.push_str(&format!(
                "  {}: {} {} (for {})\n",
                f.path,
                match f.format.as_str() {
                    "ELF" => "RUNPATH",
                    "PE" => "needs DLLs from",
                    _ => "+LC_RPATH",
                },
                f.entries.join(":"),
                libs.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        if let Some(h) = &p.hook {
            s.push_str(&format!(
                "  preload hook {} (+ {}): add_dll_directory {}; preloads {} DLLs\n",
                h.module,
                h.pth,
                h.dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                h.dlls.len()
            ));
        }
        for f in &p.signed {
            s.push_str(&format!("  {f}: signed again (ad hoc)\n"));
        }
        for a in &p.alternatives {
            s.push_str(&format!(
                "  left as is: {}: {} (another FFmpeg major loads)\n",
                a.path, a.problem
            ));
        }
        for r in &p.refused {
            s.push_str(&format!(
                "  {}: {}\n    fix: {}\n",
                r.path, r.problem, r.fix
            ));
        }
        if p.outcome == Outcome::Repaired {
            s.push_str(&format!("  undo: rocbuild restore {}\n", p.name));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_a_search_path_can_change_are_fixable() {
        assert_eq!(
            searchable(Format::MachO, "@rpath/libavutil.59.dylib").as_deref(),
            Some("libavutil.59.dylib")
        );
        assert_eq!(searchable(Format::MachO, "/opt/x/libavutil.59.dylib"), None);
        assert_eq!(
            searchable(Format::Elf, "libc10.so").as_deref(),
            Some("libc10.so")
        );
        assert!(is_ffmpeg_lib("libavutil.59.dylib") && is_ffmpeg_lib("avutil-59.dll"));
        assert!(!is_ffmpeg_lib("libc10.so"));
    }
}
