//! What doctor, deps and bundle need from rocbuild-native, in one place: one library's
//! needs, where the loader finds each dependency, what is missing, and which imports no
//! provider exports.

use std::io::Read;
use std::path::{Path, PathBuf};

use rocbuild_native::{Closure, Format, NativeError, Provider, SearchContext};
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
}

/// The object format by magic number, without parsing the file (the context depends on it).
fn sniff(path: &Path) -> Option<Format> {
    let mut m = [0u8; 4];
    std::fs::File::open(path).ok()?.read_exact(&mut m).ok()?;
    match m {
        [0x7f, b'E', b'L', b'F'] => Some(Format::Elf),
        [b'M', b'Z', ..] => Some(Format::Pe),
        [0xfe, 0xed, 0xfa, 0xce | 0xcf] | [0xce | 0xcf, 0xfa, 0xed, 0xfe] | [0xca, 0xfe, 0xba, 0xbe | 0xbf] => {
            Some(Format::MachO)
        }
        _ => None,
    }
}

/// The loader's search context for a file of `format`, from this host's settings plus `search`.
pub fn context(format: Option<Format>, search: &Search) -> SearchContext {
    let mut ctx = match format {
        Some(Format::Elf) | None => SearchContext::linux_host(),
        Some(Format::MachO) => SearchContext {
            platform: Some(Format::MachO),
            default_dirs: vec!["/usr/local/lib".into(), "/usr/lib".into()],
            ..Default::default()
        },
        // On Windows itself System32 would be searched; from another host there is none to
        // read, and the system DLLs are recognised by name.
        Some(Format::Pe) => SearchContext {
            platform: Some(Format::Pe),
            system32: std::env::var_os("SystemRoot")
                .map(|r| PathBuf::from(r).join("System32"))
                .filter(|p| p.is_dir()),
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
    if format != Some(Format::Pe) {
        ctx.executable_path = search.executable.clone();
    }
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

/// Read `root` and resolve its dependency closure.
pub fn link(root: &Path, search: &Search) -> Result<Linkage, NativeError> {
    let ctx = context(sniff(root), search);
    let c = rocbuild_native::closure(root, &ctx)?;
    Ok(from_closure(&c))
}

fn from_closure(c: &Closure) -> Linkage {
    let found = c
        .found
        .iter()
        .filter(|d| !d.needed_by.is_empty())
        .map(|d| Found {
            name: d.name.clone(),
            path: d.path.clone(),
            how: describe(&d.provider),
            needed_by: d.needed_by.clone(),
            system: d.is_system(),
        })
        .collect();
    let missing = c
        .missing
        .iter()
        .filter(|m| !m.weak)
        .map(|m| Missing {
            name: m.name.clone(),
            needed_by: m.needed_by.clone(),
            searched: m.searched.clone(),
        })
        .collect();
    let unresolved = c
        .abi_check()
        .into_iter()
        .map(|m| Unresolved {
            name: match (&m.name, m.ordinal) {
                (Some(n), _) => n.clone(),
                (None, Some(o)) => format!("#{o}"),
                (None, None) => "?".into(),
            },
            demangled: m.demangled,
            library: m.library,
            version: m.version,
            importer: m.importer.unwrap_or_else(|| c.root.clone()),
        })
        .collect();
    Linkage {
        path: c.root.clone(),
        format: c.platform.to_string(),
        needed: c.root_binary.needed.clone(),
        gpu_targets: c.root_binary.gpu_targets.clone(),
        found,
        missing,
        unresolved,
    }
}
