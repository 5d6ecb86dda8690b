//! Loader emulation: which file each dependency resolves to, and which cannot be found.
//!
//! Pure logic over a [`FileSystem`] and a [`SearchContext`] (plain data): the Windows and macOS
//! rules run in tests on Linux over real PE / Mach-O files in a temporary directory. Each
//! platform's order is documented on its function; they follow ld.so(8), the Windows
//! "Dynamic-link library search order" page and dyld(1).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::{Binary, Format, NativeError};

/// The filesystem as the loader sees it. [`RealFs`] is the machine's; tests may wrap it.
pub trait FileSystem {
    /// Is there a regular file (or a link to one) at `path`?
    fn is_file(&self, path: &Path) -> bool;
    /// File names in `dir` (for case-insensitive lookup on Windows); empty when unreadable.
    fn list_dir(&self, dir: &Path) -> Vec<String>;
    /// Parse the binary at `path` (demangling may be skipped: the closure and the ABI check
    /// demangle what they report).
    fn read_binary(&self, path: &Path) -> Result<Binary, NativeError>;
}

/// The real filesystem.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealFs;

impl FileSystem for RealFs {
    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }
    fn list_dir(&self, dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
    fn read_binary(&self, path: &Path) -> Result<Binary, NativeError> {
        // Symbols are matched by raw name; only reported ones get demangled.
        crate::read_binary_with(path, &crate::ReadOptions { demangle: false })
    }
}

/// Everything the loader's search depends on besides the files themselves.
///
/// One struct for the three loaders; each reads the fields that apply to it (the field docs
/// say which). Build it by hand for another machine, or with [`SearchContext::linux_host`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct SearchContext {
    /// Whose rules apply; `None`: the format of the root file.
    pub platform: Option<Format>,
    /// ELF: `LD_LIBRARY_PATH`. Mach-O: `DYLD_LIBRARY_PATH` (searched first, by leaf name).
    pub ld_library_path: Vec<PathBuf>,
    /// ELF: the ld.so cache as (soname, path) pairs ([`ld_so_cache`] reads the host's).
    pub ld_cache: Vec<(String, PathBuf)>,
    /// ELF: the trusted default dirs (`/lib/x86_64-linux-gnu`, `/usr/lib`, ...). Mach-O: the
    /// `DYLD_FALLBACK_LIBRARY_PATH` dirs (`/usr/local/lib`, `/usr/lib`).
    pub default_dirs: Vec<PathBuf>,
    /// ELF: what `$LIB` expands to (`lib/x86_64-linux-gnu` on Debian, `lib64` on Fedora).
    pub lib_expansion: String,
    /// ELF: what `$PLATFORM` expands to (`x86_64`, `haswell`).
    pub platform_expansion: String,
    /// Windows: `os.add_dll_directory` dirs — a package's `__init__.py` ones and those of
    /// rocbuild's preload hook — in the order they were added.
    pub dll_dirs: Vec<PathBuf>,
    /// Windows: `PATH`. Leave empty to model Python >= 3.8 loading an extension
    /// (LOAD_LIBRARY_SEARCH_DEFAULT_DIRS does not search PATH); fill it to model LoadLibrary.
    pub path: Vec<PathBuf>,
    /// Windows: the System32 directory, if there is one to look into.
    pub system32: Option<PathBuf>,
    /// Windows: the application's exe (its dir is searched). Mach-O: `@executable_path`.
    /// ELF: the program, whose exports also satisfy symbols (python's `Py*`).
    pub executable_path: Option<PathBuf>,
    /// Files already loaded in the process before the root (torch's libraries after `import
    /// torch`, DLLs a preload hook loaded by absolute path): a dependency with the same soname /
    /// DLL name / install name binds to them without a search, as the real loaders do.
    pub preloaded: Vec<PathBuf>,
}

impl SearchContext {
    /// The ELF search context of this Linux machine: `ld_library_path` (the command's
    /// `LD_LIBRARY_PATH`, from its one snapshot of the environment), the ld.so cache, and
    /// glibc's default dirs for x86_64/aarch64 multiarch systems.
    pub fn linux_host(ld_library_path: Vec<PathBuf>) -> Self {
        let triplet = if cfg!(target_arch = "aarch64") {
            "aarch64-linux-gnu"
        } else {
            "x86_64-linux-gnu"
        };
        SearchContext {
            platform: Some(Format::Elf),
            ld_library_path,
            ld_cache: ld_so_cache(),
            default_dirs: [
                format!("/lib/{triplet}"),
                format!("/usr/lib/{triplet}"),
                "/lib64".into(),
                "/usr/lib64".into(),
                "/lib".into(),
                "/usr/lib".into(),
            ]
            .into_iter()
            .map(PathBuf::from)
            .collect(),
            lib_expansion: format!("lib/{triplet}"),
            platform_expansion: std::env::consts::ARCH.into(),
            ..Default::default()
        }
    }
}

/// How a dependency was found: the rule that matched, which is what a user must change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Provider {
    /// Already loaded ([`SearchContext::preloaded`] or earlier in this closure).
    Preloaded,
    /// ELF DT_RPATH / Mach-O LC_RPATH entry, as written, of `of` (the file holding it).
    Rpath { entry: String, of: PathBuf },
    /// ELF DT_RUNPATH entry, as written.
    Runpath { entry: String, of: PathBuf },
    /// `LD_LIBRARY_PATH` / `DYLD_LIBRARY_PATH`.
    LdLibraryPath,
    /// The ld.so cache.
    LdCache,
    /// The loader's default dirs (ELF) / fallback dirs (Mach-O).
    DefaultDir,
    /// The name was a path (ELF name with `/`, Mach-O absolute install name).
    Absolute,
    /// Windows: the directory of the DLL being loaded. Mach-O: `@loader_path`.
    LoaderDir,
    /// Windows: the application's dir. Mach-O: `@executable_path`.
    ExecutableDir,
    /// Windows: an `add_dll_directory` dir.
    DllDirectory,
    /// Windows: System32.
    System32,
    /// Windows: `PATH`.
    PathEnv,
    /// Part of the OS, not a file to look for: api-ms-win-* API sets and known DLLs on Windows,
    /// `/usr/lib` and `/System` on macOS (in the dyld shared cache, not on disk).
    System,
}

/// One resolved dependency.
#[derive(Debug, Clone, Serialize)]
pub struct Dependency {
    /// The name as the needing files wrote it (DT_NEEDED, DLL name, install name).
    pub name: String,
    /// Where it resolved; `None` for [`Provider::System`] entries without a file.
    pub path: Option<PathBuf>,
    pub provider: Provider,
    /// Files that need it, in discovery order (the first one is its loader).
    pub needed_by: Vec<PathBuf>,
    /// The parsed file (for the ABI check); not serialised.
    #[serde(skip)]
    pub binary: Option<Binary>,
}

impl Dependency {
    /// Part of the operating system: not something to bundle or to blame.
    pub fn is_system(&self) -> bool {
        match self.provider {
            Provider::System => true,
            // The VC++ runtime in System32 came with some installer, not with Windows.
            Provider::System32 => !crate::closure_rules::is_msvc_runtime(&self.name),
            Provider::LdCache | Provider::DefaultDir => self.path.as_deref().is_some_and(|p| {
                ["/lib", "/usr/lib", "/lib64", "/usr/lib64"]
                    .iter()
                    .any(|d| p.parent().is_some_and(|parent| parent.starts_with(d)))
            }),
            _ => false,
        }
    }
}

/// A dependency no rule found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingDependency {
    pub name: String,
    pub needed_by: Vec<PathBuf>,
    /// Directories searched, in order (what the loader would have tried).
    pub searched: Vec<PathBuf>,
    /// Weak (Mach-O LC_LOAD_WEAK_DYLIB): the loader carries on without it.
    pub weak: bool,
    /// The search-path entries that applied to the first file that needs it, with what each
    /// expanded to: ELF the DT_RUNPATH of that file, or (without one) the DT_RPATHs of it and
    /// its loaders; Mach-O (an `@rpath/` name) the LC_RPATHs of that image and its loaders.
    /// Empty: the file has none, which is the explanation. `None`: no such entry could apply
    /// (a PE DLL, a name that is a path).
    pub rpaths: Option<Vec<RpathTried>>,
}

/// One search-path entry the loader tried for a missing library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RpathTried {
    /// `RUNPATH`, `RPATH` (ELF) or `LC_RPATH` (Mach-O).
    pub kind: String,
    /// As written in the file (`$ORIGIN/../lib`, `@loader_path/../torch/lib`).
    pub entry: String,
    /// The file holding it.
    pub of: PathBuf,
    /// The directory it expanded to; `None` when it cannot be expanded here
    /// (`@executable_path` without a known program).
    pub dir: Option<PathBuf>,
}

/// The dependency closure of one file.
#[derive(Debug, Clone, Serialize)]
pub struct Closure {
    pub root: PathBuf,
    pub platform: Format,
    /// The root itself, parsed.
    #[serde(skip)]
    pub root_binary: Binary,
    /// Found dependencies in load (breadth-first) order.
    pub found: Vec<Dependency>,
    pub missing: Vec<MissingDependency>,
    /// Parsed [`SearchContext::preloaded`] files and the executable (symbol providers).
    #[serde(skip)]
    pub preloaded: Vec<(PathBuf, Binary)>,
}

/// Resolve every dependency of `root`, recursively, with the platform's loader rules.
pub fn closure(root: &Path, ctx: &SearchContext) -> Result<Closure, NativeError> {
    closure_with(root, ctx, &RealFs)
}

/// [`closure`] over any [`FileSystem`].
pub fn closure_with(
    root: &Path,
    ctx: &SearchContext,
    fs: &dyn FileSystem,
) -> Result<Closure, NativeError> {
    crate::closure_walk::walk(root, ctx, fs)
}

/// Read the host's ld.so cache: `/etc/ld.so.cache`, or `ldconfig -p` when that cannot be
/// parsed; empty when neither works (the default dirs still apply).
pub fn ld_so_cache() -> Vec<(String, PathBuf)> {
    if let Ok(bytes) = std::fs::read("/etc/ld.so.cache") {
        if let Ok(v) = parse_ld_so_cache(&bytes) {
            return v;
        }
    }
    let out = which::which("ldconfig")
        .or_else(|_| which::which("/sbin/ldconfig"))
        .ok()
        .and_then(|p| duct::cmd(p, ["-p"]).stderr_null().read().ok())
        .unwrap_or_default();
    out.lines()
        .filter_map(|l| {
            let (left, path) = l.split_once(" => ")?;
            let name = left.trim().split(' ').next()?;
            Some((name.to_string(), PathBuf::from(path.trim())))
        })
        .collect()
}

/// Parse the glibc ld.so cache (`glibc-ld.so.cache1.1` format, possibly after the old
/// `ld.so-1.7.0` table): (soname, path) pairs in cache (priority) order.
pub fn parse_ld_so_cache(bytes: &[u8]) -> Result<Vec<(String, PathBuf)>, NativeError> {
    const NEW: &[u8] = b"glibc-ld.so.cache1.1";
    let bad = |reason: &str| NativeError::Malformed {
        path: "ld.so.cache".into(),
        format: "ld.so cache".into(),
        reason: reason.into(),
    };
    let start =
        memchr::memmem::find(bytes, NEW).ok_or_else(|| bad("no glibc-ld.so.cache1.1 header"))?;
    let b = &bytes[start..];
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let n = u32_at(20).ok_or_else(|| bad("header cut short"))? as usize;
    const HEADER: usize = 48;
    const ENTRY: usize = 24;
    if n > b.len() / ENTRY {
        return Err(bad("entry count larger than the file"));
    }
    let cstr = |off: u32| -> Option<String> {
        let s = b.get(off as usize..)?;
        let end = memchr::memchr(0, s)?;
        Some(String::from_utf8_lossy(&s[..end]).into_owned())
    };
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let at = HEADER + i * ENTRY;
        let (Some(key), Some(value)) = (u32_at(at + 4), u32_at(at + 8)) else {
            return Err(bad("entries cut short"));
        };
        if let (Some(k), Some(v)) = (cstr(key), cstr(value)) {
            out.push((k, PathBuf::from(v)));
        }
    }
    Ok(out)
}

/// Index of found entries by lookup key.
pub(crate) type Index = HashMap<String, usize>;
