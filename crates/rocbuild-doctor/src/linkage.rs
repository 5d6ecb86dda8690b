//! What doctor, deps and bundle need from rocbuild-native, in one place: one library's
//! needs, where the loader finds each dependency, what is missing, and which imports no
//! provider exports.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rocbuild_native::{
    Binary, Closure, ExportIndex, FileSystem, Format, NativeError, Provided, Provider, RealFs,
    SearchContext,
};
use serde::Serialize;

/// An import no library of the closure exports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unresolved {
    /// Raw (mangled) name, or `#ordinal` for a PE import by ordinal.
    pub name: String,
    pub demangled: Option<String>,
    /// The library it is imported from (PE, Mach-O; ELF only through a symbol version).
    pub library: Option<String>,
    /// ELF symbol version (`GLIBCXX_3.4.32`).
    pub version: Option<String>,
    /// The file whose import it is.
    pub importer: PathBuf,
}

/// A dependency the loader finds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    pub name: String,
    /// `None`: part of the OS without a file here (API sets, the dyld shared cache).
    pub path: Option<PathBuf>,
    /// Which loader rule found it (`runpath $ORIGIN/../torch/lib`, `ld.so cache`, ...).
    pub how: String,
    /// The first file that needs it (its loader), and how many need it.
    pub needed_by: Vec<PathBuf>,
    /// Part of the operating system: never bundled, never blamed.
    pub system: bool,
}

/// A dependency the loader does not find.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Missing {
    pub name: String,
    pub needed_by: Vec<PathBuf>,
    pub searched: Vec<PathBuf>,
    /// The RUNPATH / RPATH / LC_RPATH entries that applied, with what each expanded to;
    /// empty: the needing file has none; `None`: none could apply (PE, a path name).
    pub rpaths: Option<Vec<rocbuild_native::RpathTried>>,
}

impl Missing {
    /// Why the loader did not find it, in words: the rpaths the needing file has (none, or
    /// each with where it pointed), then how many other directories were searched.
    pub fn explain(&self, format: &str) -> String {
        let by = self
            .needed_by
            .first()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let others = |n: usize| match n {
            0 => String::new(),
            1 => "; searched 1 other directory".to_string(),
            n => format!("; searched {n} other directories"),
        };
        let Some(rpaths) = &self.rpaths else {
            let dirs: Vec<String> = self
                .searched
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            return if dirs.is_empty() {
                "no directory applies to this name".into()
            } else {
                format!("searched {}", dirs.join(", "))
            };
        };
        let tried: Vec<PathBuf> = rpaths.iter().filter_map(|r| r.dir.clone()).collect();
        let rest = self.searched.iter().filter(|d| !tried.contains(d)).count();
        if rpaths.is_empty() {
            let what = if format == "Mach-O" {
                "has no LC_RPATH, so @rpath/ resolves nowhere"
            } else {
                "has no RUNPATH or RPATH"
            };
            return format!("{by} {what}{}", others(rest));
        }
        let list: Vec<String> = rpaths
            .iter()
            .map(|r| {
                let of =
                    r.of.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                let whose = if of == by {
                    String::new()
                } else {
                    format!(" of {of}")
                };
                match &r.dir {
                    Some(d) if d.display().to_string() == r.entry => {
                        format!("{} {}{whose}", r.kind, r.entry)
                    }
                    Some(d) => format!("{} {}{whose} -> {}", r.kind, r.entry, d.display()),
                    None => format!("{} {}{whose} (cannot be expanded here)", r.kind, r.entry),
                }
            })
            .collect();
        format!(
            "not in {} ({}){}",
            if list.len() == 1 {
                "the rpath"
            } else {
                "any rpath"
            },
            list.join(", "),
            others(rest)
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Linkage {
    pub path: PathBuf,
    pub format: String,
    pub needed: Vec<String>,
    pub gpu_targets: Vec<String>,
    /// In load order; files that were only preloaded (and never needed) are left out.
    pub found: Vec<Found>,
    pub missing: Vec<Missing>,
    /// Imports nothing exports, for the root and every non-system dependency.
    pub unresolved: Vec<Unresolved>,
}

/// The Python program and the libpython it loads (when built with --enable-shared): they
/// export the `Py*` symbols every extension module imports.
pub fn python_runtime(exe: &Path, reader: &Reader, loader: &LoaderEnv) -> Vec<PathBuf> {
    let exe = dunce::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
    let mut out = vec![exe.clone()];
    let search = Search {
        loader: loader.clone(),
        ..Search::default()
    };
    if let Ok(c) = rocbuild_native::closure_with(&exe, &context(None, &search), reader) {
        out.extend(
            c.found
                .iter()
                .filter(|d| d.name.starts_with("libpython") || d.name.starts_with("python3"))
                .filter_map(|d| d.path.clone()),
        );
    }
    tracing::debug!("python runtime: {out:?}");
    out
}

/// What the loaders read of the environment, taken from the command's one snapshot (the
/// settings step's `ProbeEnv`), never from the process: `LD_LIBRARY_PATH` (ELF) and the
/// System32 of `%SystemRoot%` (Windows' system DLLs, on Windows itself).
#[derive(Debug, Clone, Default)]
pub struct LoaderEnv {
    pub ld_library_path: Vec<PathBuf>,
    pub system32: Option<PathBuf>,
}

impl LoaderEnv {
    pub fn of(env: &rocbuild_probe::ProbeEnv) -> LoaderEnv {
        LoaderEnv {
            ld_library_path: env.dirs("LD_LIBRARY_PATH"),
            system32: env
                .var(rocbuild_probe::vars::SYSTEM_ROOT)
                .map(|r| PathBuf::from(r).join("System32"))
                .filter(|p| p.is_dir()),
        }
    }
}

/// Where else the loader looks.
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// Searched like LD_LIBRARY_PATH / DYLD_LIBRARY_PATH (ELF, Mach-O) or like
    /// `os.add_dll_directory` (PE): `--search`, and the environment's own.
    pub extra_dirs: Vec<PathBuf>,
    /// Already loaded before the root: torch's libraries after `import torch`.
    pub preloaded: Vec<PathBuf>,
    /// The program (python), whose exports satisfy `Py*` symbols.
    pub executable: Option<PathBuf>,
    /// What the loader reads of the environment.
    pub loader: LoaderEnv,
}

/// The loader's search context for a file of `format`, from this host's settings plus `search`.
pub fn context(format: Option<Format>, search: &Search) -> SearchContext {
    let mut ctx = match format {
        Some(Format::Elf) | None => {
            SearchContext::linux_host(search.loader.ld_library_path.clone())
        }
        Some(Format::MachO) => SearchContext {
            platform: Some(Format::MachO),
            default_dirs: vec!["/usr/local/lib".into(), "/usr/lib".into()],
            ..Default::default()
        },
        // On Windows itself System32 would be searched; from another host there is none to
        // read, and the system DLLs are recognised by name.
        Some(Format::Pe) => SearchContext {
            platform: Some(Format::Pe),
            system32: search.loader.system32.clone(),
            ..Default::default()
        },
    };
    match format {
        Some(Format::Pe) => ctx.dll_dirs.extend(search.extra_dirs.iter().cloned()),
        _ => {
            // Given directories come first, as LD_LIBRARY_PATH entries set for the run would.
            let mut dirs = search.extra_dirs.clone();
            dirs.extend(std::mem::take(&mut ctx.ld_library_path));
            ctx.ld_library_path = dirs;
        }
    }
    ctx.preloaded = search.preloaded.clone();
    // Windows searches the application directory (the `python.exe` that started the process)
    // too: a Python distribution keeps its MSVC runtime and pythonXY.dll there.
    ctx.executable_path = search.executable.clone();
    ctx
}

/// How a provider rule reads in a report.
pub fn describe(p: &Provider) -> String {
    match p {
        Provider::Preloaded => "already loaded".into(),
        Provider::Rpath { entry, .. } => format!("rpath {entry}"),
        Provider::Runpath { entry, .. } => format!("runpath {entry}"),
        Provider::LdLibraryPath => "library path".into(),
        Provider::LdCache => "ld.so cache".into(),
        Provider::DefaultDir => "default dir".into(),
        Provider::Absolute => "absolute path".into(),
        Provider::LoaderDir => "beside its loader".into(),
        Provider::ExecutableDir => "executable dir".into(),
        Provider::DllDirectory => "dll directory".into(),
        Provider::System32 => "System32".into(),
        Provider::PathEnv => "PATH".into(),
        Provider::System => "system".into(),
    }
}

/// Reads each file once, however many closures it is part of, from any thread. torch's
/// libraries are hundreds of MB with ~100k symbols each; parsing them once per closure would
/// make `doctor torch` take seconds.
#[derive(Default)]
pub struct Reader {
    /// One cell per file: the first thread to ask parses it, the others wait for that result
    /// instead of parsing it again.
    cache: Mutex<HashMap<PathBuf, Arc<OnceLock<Parsed>>>>,
}

/// One file, parsed: whole, and without its symbol tables (what the closure walk copies),
/// and the index of its exports, built the first time an import is checked against it.
#[derive(Clone)]
struct Parsed {
    full: Arc<Result<Binary, String>>,
    light: Arc<Result<Binary, String>>,
    index: Arc<OnceLock<ExportIndex>>,
}

/// A parsed file with the index of its exports: what an import is checked against.
#[derive(Clone)]
pub struct Indexed {
    pub name: String,
    pub bin: Arc<Result<Binary, String>>,
    index: Arc<OnceLock<ExportIndex>>,
}

impl Indexed {
    /// The index, built now if no check needed it before.
    fn index(&self) -> Option<(&Binary, &ExportIndex)> {
        let b = self.bin.as_ref().as_ref().ok()?;
        Some((b, self.index.get_or_init(|| ExportIndex::new(b))))
    }
}

/// The providers as [`rocbuild_native::unresolved_imports_indexed`] takes them.
fn provided(files: &[Indexed]) -> Vec<Provided<'_>> {
    files
        .iter()
        .filter_map(|f| {
            let (b, ix) = f.index()?;
            Some((f.name.as_str(), b, ix))
        })
        .collect()
}

impl Reader {
    /// A reader that is never freed. Freeing the symbol tables of torch's libraries (hundreds
    /// of thousands of small strings) took a fifth of `doctor`'s time, right before the
    /// process exits anyway; the commands make one reader each.
    pub fn leaked() -> &'static Reader {
        Box::leak(Box::default())
    }

    fn parsed(&self, path: &Path) -> Parsed {
        let cell = match self.cache.lock() {
            Ok(mut c) => c.entry(path.to_path_buf()).or_default().clone(),
            Err(_) => Arc::default(),
        };
        cell.get_or_init(|| parse(path)).clone()
    }

    /// The whole binary (imports and exports included, names not demangled), parsed once.
    pub fn full(&self, path: &Path) -> Arc<Result<Binary, String>> {
        self.parsed(path).full
    }

    /// The whole binary with its (lazily built, shared) export index, as provider `name`.
    pub fn indexed(&self, name: String, path: &Path) -> Indexed {
        let p = self.parsed(path);
        Indexed {
            name,
            bin: p.full,
            index: p.index,
        }
    }
}

fn parse(path: &Path) -> Parsed {
    // Names are demangled only for what is reported: demangling every symbol of torch's
    // libraries would be most of doctor's time.
    let opts = rocbuild_native::ReadOptions { demangle: false };
    match rocbuild_native::read_binary_with(path, &opts) {
        Ok(mut b) => {
            let imports = std::mem::take(&mut b.imports);
            let exports = std::mem::take(&mut b.exports);
            let light = b.clone();
            b.imports = imports;
            b.exports = exports;
            Parsed {
                full: Arc::new(Ok(b)),
                light: Arc::new(Ok(light)),
                index: Arc::default(),
            }
        }
        Err(e) => {
            let e = Arc::new(Err(e.to_string()));
            Parsed {
                full: e.clone(),
                light: e,
                index: Arc::default(),
            }
        }
    }
}

impl FileSystem for Reader {
    fn is_file(&self, path: &Path) -> bool {
        RealFs.is_file(path)
    }
    fn list_dir(&self, dir: &Path) -> Vec<String> {
        RealFs.list_dir(dir)
    }
    /// What the walk needs (names, paths, rpaths): the symbol tables stay in the cache, so the
    /// closure does not copy them for every file it visits.
    fn read_binary(&self, path: &Path) -> Result<Binary, NativeError> {
        match &*self.parsed(path).light {
            Ok(b) => Ok(b.clone()),
            Err(reason) => Err(NativeError::Closure {
                path: path.display().to_string(),
                reason: reason.clone(),
            }),
        }
    }
}

/// `f` over `items` on every core, results in order. Most of the time goes into parsing
/// torch's libraries and their dependencies: the reader's cache is shared, so each file is
/// still parsed once, by whichever thread asks first.
pub(crate) fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 8)
        .min(items.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        mine.push((i, f(item)));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

/// The full binary of `root`, or the precise error of reading it.
fn root_binary(root: &Path, reader: &Reader) -> Result<Arc<Result<Binary, String>>, NativeError> {
    let full = reader.full(root);
    match &*full {
        Ok(_) => Ok(full),
        // Read again for the precise error (the cache keeps only its text).
        Err(reason) => {
            Err(rocbuild_native::read_binary(root)
                .err()
                .unwrap_or_else(|| NativeError::Closure {
                    path: root.display().to_string(),
                    reason: reason.clone(),
                }))
        }
    }
}

/// Files of a closure that provide symbols: what it found plus what was already loaded.
fn provider_paths(c: &Closure) -> Vec<(String, PathBuf)> {
    c.found
        .iter()
        .filter_map(|d| Some((d.name.clone(), d.path.clone()?)))
        .chain(c.preloaded.iter().map(|(p, _)| {
            (
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                p.clone(),
            )
        }))
        .collect()
}

/// Read `root` and resolve its dependency closure; the ABI check covers the root and every
/// non-system dependency, each against the whole closure (ELF) or the library it names (PE,
/// Mach-O).
pub fn link(root: &Path, search: &Search, reader: &Reader) -> Result<Linkage, NativeError> {
    let full = root_binary(root, reader)?;
    let Ok(root_bin) = full.as_ref() else {
        unreachable!("root_binary returns Ok only for a parsed file")
    };
    let ctx = context(Some(root_bin.format), search);
    let c = rocbuild_native::closure_with(root, &ctx, reader)?;
    let mut l = from_closure(&c);
    let providers: Vec<Indexed> = provider_paths(&c)
        .into_iter()
        .map(|(n, p)| reader.indexed(n, &p))
        .collect();
    let refs = provided(&providers);
    let mut importers: Vec<(PathBuf, Arc<Result<Binary, String>>)> =
        vec![(root.to_path_buf(), full.clone())];
    for d in c
        .found
        .iter()
        .filter(|d| !d.needed_by.is_empty() && !d.is_system())
    {
        if let Some(p) = &d.path {
            importers.push((p.clone(), reader.full(p)));
        }
    }
    for (path, bin) in importers {
        let Ok(bin) = bin.as_ref() else { continue };
        let missing = rocbuild_native::unresolved_imports_indexed(bin, &refs);
        l.unresolved
            .extend(missing.into_iter().map(|m| unresolved(m, &path)));
    }
    Ok(l)
}

/// Of `names`, the CUDA libraries `root` loads by name at run time (CTranslate2's cuBLAS and
/// cuDNN, [`rocbuild_native::cuda_libraries_loaded_by_name`]), those the loader would not find,
/// searched as dependencies of `root`: each with the directories tried. Empty when every one
/// is found (or already loaded, as torch's are).
pub fn missing_loaded_by_name(
    root: &Path,
    names: &[String],
    search: &Search,
    reader: &Reader,
) -> Vec<(String, Vec<PathBuf>)> {
    let full = reader.full(root);
    let Ok(bin) = full.as_ref() else {
        return Vec::new();
    };
    if names.is_empty() {
        return Vec::new();
    }
    let ctx = context(Some(bin.format), search);
    let Ok(c) = rocbuild_native::closure_with_dlopened(root, names, &ctx, reader) else {
        return Vec::new();
    };
    c.missing
        .into_iter()
        .filter(|m| names.contains(&m.name))
        .map(|m| (m.name, m.searched))
        .collect()
}

/// What `roots` (loaded first: torch's libraries, by `import torch`) find through their own
/// RPATH/RUNPATH, at any depth. Those files are in the process once the roots are, so a library
/// loaded later that needs the same soname binds to them without a search: a PyPI CUDA torch's
/// `$ORIGIN/../../nvidia/cu13/lib` makes `libcudart.so.13` available to every extension
/// imported after it, though no extension's own RUNPATH leads there.
pub fn found_through_rpaths(roots: &[PathBuf], search: &Search, reader: &Reader) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = par_map(roots, |root| {
        match rocbuild_native::closure_with(root, &context(None, search), reader) {
            Ok(c) => c
                .found
                .iter()
                .filter(|d| {
                    matches!(
                        d.provider,
                        Provider::Rpath { .. } | Provider::Runpath { .. }
                    )
                })
                .filter_map(|d| d.path.clone())
                .filter(|p| !roots.contains(p))
                .collect(),
            Err(_) => Vec::new(),
        }
    })
    .into_iter()
    .flatten()
    .collect();
    out.sort();
    out.dedup();
    out
}

/// Libraries that load into one process together (a package's libraries, after Python and
/// `search.preloaded`): each one's closure, and the ABI check of each root. On ELF every
/// undefined symbol binds against the whole process, so the providers are the union of all
/// the closures (including those of the preloaded files, whose own dependencies are loaded
/// too); on PE and Mach-O each import names its library. Only the roots' own imports are
/// checked: the dependencies belong to other packages, which are checked on their own.
pub fn link_group(
    roots: &[PathBuf],
    search: &Search,
    reader: &Reader,
) -> Vec<Result<Linkage, NativeError>> {
    // The preloaded files' own dependencies are in the process too.
    let mut bare = search.clone();
    bare.preloaded.clear();
    let mut process: Vec<(String, PathBuf)> = par_map(&search.preloaded, |p| {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        match rocbuild_native::closure_with(p, &context(None, &bare), reader) {
            Ok(c) => std::iter::once((name, p.clone()))
                .chain(provider_paths(&c))
                .collect(),
            Err(_) => Vec::new(),
        }
    })
    .into_iter()
    .flatten()
    .collect();
    let out: Vec<Result<(Linkage, Closure), NativeError>> = par_map(roots, |root| {
        root_binary(root, reader).and_then(|full| {
            let format = full.as_ref().as_ref().map(|b| b.format).ok();
            let c = rocbuild_native::closure_with(root, &context(format, search), reader)?;
            Ok((from_closure(&c), c))
        })
    });
    for (_, c) in out.iter().flatten() {
        process.extend(provider_paths(c));
    }
    process.sort();
    process.dedup();
    let paths: Vec<PathBuf> = process.iter().map(|(_, p)| p.clone()).collect();
    par_map(&paths, |p| {
        reader.full(p);
    });
    let bins: Vec<Indexed> = process
        .iter()
        .map(|(n, p)| reader.indexed(n.clone(), p))
        .collect();
    // The indexes, built on every core (each once, however many roots bind to it).
    par_map(&bins, |b| {
        b.index();
    });
    let everything = provided(&bins);
    out.into_iter()
        .map(|r| {
            let (mut l, c) = r?;
            let full = reader.full(&c.root);
            let Ok(root_bin) = full.as_ref() else {
                return Ok(l);
            };
            let missing = if c.platform == Format::Elf {
                rocbuild_native::unresolved_imports_indexed(root_bin, &everything)
            } else {
                let own: Vec<Indexed> = provider_paths(&c)
                    .into_iter()
                    .map(|(n, p)| reader.indexed(n, &p))
                    .collect();
                rocbuild_native::unresolved_imports_indexed(root_bin, &provided(&own))
            };
            l.unresolved = missing
                .into_iter()
                .map(|m| unresolved(m, &c.root))
                .collect();
            Ok(l)
        })
        .collect()
}

fn unresolved(m: rocbuild_native::MissingSymbol, importer: &Path) -> Unresolved {
    Unresolved {
        name: match (&m.name, m.ordinal) {
            (Some(n), _) => n.clone(),
            (None, Some(o)) => format!("#{o}"),
            (None, None) => "?".into(),
        },
        demangled: m
            .demangled
            .or_else(|| m.name.as_deref().and_then(rocbuild_native::demangle)),
        library: m.library,
        version: m.version,
        importer: tidy(&m.importer.unwrap_or_else(|| importer.to_path_buf())),
    }
}

/// `p` made absolute against the current directory (symlinks kept, as the loader sees them)
/// and tidied: the one spelling of a path the user gave.
pub fn absolute(p: &Path) -> PathBuf {
    tidy(&std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
}

/// `a/pkg/../torch/lib/x.so` -> `a/torch/lib/x.so` when both name the same file (a symlinked
/// `pkg` could make them differ; then the loader's spelling stays).
pub fn tidy(p: &Path) -> PathBuf {
    if !p.components().any(|c| c == std::path::Component::ParentDir) {
        return p.to_path_buf();
    }
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    if same_file(p, &out) {
        out
    } else {
        p.to_path_buf()
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (dunce::canonicalize(a), dunce::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

fn from_closure(c: &Closure) -> Linkage {
    let found = c
        .found
        .iter()
        .filter(|d| !d.needed_by.is_empty())
        .map(|d| Found {
            name: d.name.clone(),
            path: d.path.as_deref().map(tidy),
            how: describe(&d.provider),
            needed_by: d.needed_by.iter().map(|p| tidy(p)).collect(),
            system: d.is_system(),
        })
        .collect();
    let missing = c
        .missing
        .iter()
        .filter(|m| !m.weak)
        .map(|m| Missing {
            name: m.name.clone(),
            needed_by: m.needed_by.iter().map(|p| tidy(p)).collect(),
            searched: m.searched.clone(),
            rpaths: m.rpaths.clone(),
        })
        .collect();
    Linkage {
        path: c.root.clone(),
        format: c.platform.to_string(),
        needed: c.root_binary.needed.clone(),
        gpu_targets: c.root_binary.gpu_targets.clone(),
        found,
        missing,
        unresolved: Vec::new(),
    }
}
