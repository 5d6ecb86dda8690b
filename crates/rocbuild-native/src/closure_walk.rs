//! The breadth-first walk behind [`crate::closure`], with each loader's search order.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use crate::closure::{
    Closure, Dependency, FileSystem, Index, MissingDependency, Provider, SearchContext,
};
use crate::{Binary, Format, NativeError};

const MAX_NODES: usize = 10_000;

/// A file in the walk: its path, parsed binary and loader (index into `nodes`).
struct Node {
    path: PathBuf,
    bin: Binary,
    loader: Option<usize>,
}

/// One answer of a search rule.
struct Hit {
    path: Option<PathBuf>,
    provider: Provider,
}

pub(crate) fn walk(
    root: &Path,
    ctx: &SearchContext,
    fs: &dyn FileSystem,
) -> Result<Closure, NativeError> {
    let root_bin = fs.read_binary(root)?;
    let platform = ctx.platform.unwrap_or(root_bin.format);
    let mut preloaded = Vec::new();
    for p in ctx.preloaded.iter().chain(ctx.executable_path.iter()) {
        if let Ok(b) = fs.read_binary(p) {
            preloaded.push((p.clone(), b));
        }
    }
    let mut w = Walk {
        ctx,
        fs,
        platform,
        root_bin: root_bin.clone(),
        nodes: vec![Node {
            path: root.to_path_buf(),
            bin: root_bin.clone(),
            loader: None,
        }],
        found: Vec::new(),
        index: Index::new(),
        missing: Vec::new(),
    };
    // Preloaded files answer by every name they can be asked for.
    for (p, b) in &preloaded {
        let i = w.found.len();
        w.found.push(Dependency {
            name: file_name(p),
            path: Some(p.clone()),
            provider: Provider::Preloaded,
            needed_by: Vec::new(),
            binary: Some(b.clone()),
        });
        for key in names_of(p, b) {
            w.index.entry(w.key(&key)).or_insert(i);
        }
    }
    let mut queue = VecDeque::from([0usize]);
    while let Some(n) = queue.pop_front() {
        let needed = w.nodes[n].bin.needed.clone();
        for name in needed {
            if let Some(new_node) = w.resolve(n, &name)? {
                queue.push_back(new_node);
            }
            if w.nodes.len() > MAX_NODES {
                return Err(NativeError::Closure {
                    path: root.display().to_string(),
                    reason: format!("more than {MAX_NODES} libraries"),
                });
            }
        }
    }
    // Preloaded entries nobody asked for are not part of this closure.
    let found = w
        .found
        .into_iter()
        .filter(|d| !(d.provider == Provider::Preloaded && d.needed_by.is_empty()))
        .collect();
    Ok(Closure {
        root: root.to_path_buf(),
        platform,
        root_binary: root_bin,
        found,
        missing: w.missing,
        preloaded,
    })
}

struct Walk<'a> {
    ctx: &'a SearchContext,
    fs: &'a dyn FileSystem,
    platform: Format,
    root_bin: Binary,
    nodes: Vec<Node>,
    found: Vec<Dependency>,
    index: Index,
    missing: Vec<MissingDependency>,
}

impl Walk<'_> {
    /// Lookup key: Windows names are case-insensitive.
    fn key(&self, name: &str) -> String {
        if self.platform == Format::Pe {
            name.to_ascii_lowercase()
        } else {
            name.to_string()
        }
    }

    /// Resolve `name` needed by node `n`; returns a new node to visit when a file was found
    /// for the first time.
    fn resolve(&mut self, n: usize, name: &str) -> Result<Option<usize>, NativeError> {
        let needer = self.nodes[n].path.clone();
        if let Some(&i) = self.index.get(&self.key(name)) {
            if !self.found[i].needed_by.contains(&needer) {
                self.found[i].needed_by.push(needer);
            }
            return Ok(None);
        }
        if let Some(m) = self.missing.iter_mut().find(|m| m.name == name) {
            m.needed_by.push(needer);
            return Ok(None);
        }
        let mut searched = Vec::new();
        let hit = match self.platform {
            Format::Elf => self.search_elf(n, name, &mut searched),
            Format::Pe => self.search_pe(name, &mut searched),
            Format::MachO => self.search_macho(n, name, &mut searched),
        };
        let Some((hit, bin)) = hit else {
            let weak = self.nodes[n].bin.weak_needed.iter().any(|w| w == name);
            self.missing.push(MissingDependency {
                name: name.to_string(),
                needed_by: vec![needer],
                searched,
                weak,
            });
            return Ok(None);
        };
        // The same file reached under another name (a symlink's target, `@rpath/x` vs path).
        if let Some(p) = &hit.path {
            if let Some(i) = self.found.iter().position(|d| d.path.as_ref() == Some(p)) {
                self.found[i].needed_by.push(needer);
                self.index.insert(self.key(name), i);
                return Ok(None);
            }
        }
        let i = self.found.len();
        self.found.push(Dependency {
            name: name.to_string(),
            path: hit.path.clone(),
            provider: hit.provider,
            needed_by: vec![needer],
            binary: bin.clone(),
        });
        self.index.insert(self.key(name), i);
        if let (Some(p), Some(b)) = (hit.path, bin) {
            for alias in names_of(&p, &b) {
                self.index.entry(self.key(&alias)).or_insert(i);
            }
            self.nodes.push(Node {
                path: p,
                bin: b,
                loader: Some(n),
            });
            return Ok(Some(self.nodes.len() - 1));
        }
        Ok(None)
    }

    /// A candidate file counts when it exists and is a binary the loader would accept (same
    /// format, machine and class as the root: ld.so skips "incompatible" files and goes on).
    fn try_file(&self, p: &Path) -> Option<Binary> {
        if !self.fs.is_file(p) {
            return None;
        }
        let b = self.fs.read_binary(p).ok()?;
        (b.format == self.root_bin.format
            && b.arch == self.root_bin.arch
            && b.is_64 == self.root_bin.is_64)
            .then_some(b)
    }

    fn try_dir(
        &self,
        dir: &Path,
        name: &str,
        searched: &mut Vec<PathBuf>,
    ) -> Option<(PathBuf, Binary)> {
        searched.push(dir.to_path_buf());
        let exact = dir.join(name);
        if let Some(b) = self.try_file(&exact) {
            return Some((exact, b));
        }
        if self.platform == Format::Pe {
            let lower = name.to_ascii_lowercase();
            let real = self
                .fs
                .list_dir(dir)
                .into_iter()
                .find(|f| f.to_ascii_lowercase() == lower)?;
            let p = dir.join(real);
            return self.try_file(&p).map(|b| (p, b));
        }
        None
    }

    /// ld.so: DT_RPATH of the loader chain (only while the needing file has no DT_RUNPATH;
    /// a chain member with DT_RUNPATH contributes nothing), LD_LIBRARY_PATH, the needing
    /// file's own DT_RUNPATH, the cache, the default dirs.
    fn search_elf(
        &self,
        n: usize,
        name: &str,
        searched: &mut Vec<PathBuf>,
    ) -> Option<(Hit, Option<Binary>)> {
        let found = |p: PathBuf, b: Binary, provider: Provider| {
            Some((
                Hit {
                    path: Some(p),
                    provider,
                },
                Some(b),
            ))
        };
        if name.contains('/') {
            let p = PathBuf::from(name);
            let p = if p.is_relative() {
                self.dir_of(n).join(p)
            } else {
                p
            };
            return self
                .try_file(&p)
                .and_then(|b| found(p, b, Provider::Absolute));
        }
        if self.nodes[n].bin.runpath.is_empty() {
            let mut cur = Some(n);
            while let Some(c) = cur {
                let node = &self.nodes[c];
                if node.bin.runpath.is_empty() {
                    for entry in &node.bin.rpath {
                        let dir = self.expand_elf(entry, c);
                        if let Some((p, b)) = self.try_dir(&dir, name, searched) {
                            return found(
                                p,
                                b,
                                Provider::Rpath {
                                    entry: entry.clone(),
                                    of: node.path.clone(),
                                },
                            );
                        }
                    }
                }
                cur = node.loader;
            }
        }
        for dir in &self.ctx.ld_library_path {
            if let Some((p, b)) = self.try_dir(dir, name, searched) {
                return found(p, b, Provider::LdLibraryPath);
            }
        }
        for entry in &self.nodes[n].bin.runpath {
            let dir = self.expand_elf(entry, n);
            if let Some((p, b)) = self.try_dir(&dir, name, searched) {
                return found(
                    p,
                    b,
                    Provider::Runpath {
                        entry: entry.clone(),
                        of: self.nodes[n].path.clone(),
                    },
                );
            }
        }
        for (soname, p) in &self.ctx.ld_cache {
            if soname == name {
                if let Some(b) = self.try_file(p) {
                    return found(p.clone(), b, Provider::LdCache);
                }
            }
        }
        for dir in &self.ctx.default_dirs {
            if let Some((p, b)) = self.try_dir(dir, name, searched) {
                return found(p, b, Provider::DefaultDir);
            }
        }
        None
    }

    fn dir_of(&self, n: usize) -> PathBuf {
        self.nodes[n]
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// `$ORIGIN`, `${ORIGIN}`, `$LIB`, `$PLATFORM` (ld.so's dynamic string tokens).
    fn expand_elf(&self, entry: &str, n: usize) -> PathBuf {
        let origin = self.dir_of(n).display().to_string();
        let mut s = entry.to_string();
        for (token, value) in [
            ("ORIGIN", origin.as_str()),
            ("LIB", self.ctx.lib_expansion.as_str()),
            ("PLATFORM", self.ctx.platform_expansion.as_str()),
        ] {
            s = s
                .replace(&format!("${{{token}}}"), value)
                .replace(&format!("${token}"), value);
        }
        PathBuf::from(s)
    }

    /// Windows (LoadLibraryEx with LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | _DLL_LOAD_DIR, as Python
    /// loads extensions): API sets and known DLLs are the system's; then the directory of the
    /// DLL being loaded (the root), the application dir, the `add_dll_directory` dirs,
    /// System32, and PATH when the context has one.
    fn search_pe(&self, name: &str, searched: &mut Vec<PathBuf>) -> Option<(Hit, Option<Binary>)> {
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("api-ms-win-")
            || lower.starts_with("ext-ms-")
            || KNOWN_DLLS.contains(&lower.as_str())
        {
            let path = self
                .ctx
                .system32
                .as_ref()
                .map(|d| d.join(name))
                .filter(|p| self.fs.is_file(p));
            return Some((
                Hit {
                    path,
                    provider: Provider::System,
                },
                None,
            ));
        }
        let found = |p: PathBuf, b: Binary, provider: Provider| {
            Some((
                Hit {
                    path: Some(p),
                    provider,
                },
                Some(b),
            ))
        };
        if let Some((p, b)) = self.try_dir(&self.dir_of(0), name, searched) {
            return found(p, b, Provider::LoaderDir);
        }
        if let Some(exe_dir) = self.ctx.executable_path.as_ref().and_then(|e| e.parent()) {
            if let Some((p, b)) = self.try_dir(exe_dir, name, searched) {
                return found(p, b, Provider::ExecutableDir);
            }
        }
        for dir in &self.ctx.dll_dirs {
            if let Some((p, b)) = self.try_dir(dir, name, searched) {
                return found(p, b, Provider::DllDirectory);
            }
        }
        if let Some(sys) = &self.ctx.system32 {
            if let Some((p, b)) = self.try_dir(sys, name, searched) {
                return found(p, b, Provider::System32);
            }
        }
        for dir in &self.ctx.path {
            if let Some((p, b)) = self.try_dir(dir, name, searched) {
                return found(p, b, Provider::PathEnv);
            }
        }
        None
    }

    /// dyld: `DYLD_LIBRARY_PATH` by leaf name; `@rpath/` through the LC_RPATHs of the needing
    /// image and then of its loaders up to the root; `@loader_path/`, `@executable_path/`;
    /// `/usr/lib` and `/System` are the OS's (shared cache); other absolute paths as written,
    /// then the fallback dirs by leaf name.
    fn search_macho(
        &self,
        n: usize,
        name: &str,
        searched: &mut Vec<PathBuf>,
    ) -> Option<(Hit, Option<Binary>)> {
        let found = |p: PathBuf, b: Binary, provider: Provider| {
            Some((
                Hit {
                    path: Some(p),
                    provider,
                },
                Some(b),
            ))
        };
        let leaf = name.rsplit('/').next().unwrap_or(name);
        for dir in &self.ctx.ld_library_path {
            if let Some((p, b)) = self.try_dir(dir, leaf, searched) {
                return found(p, b, Provider::LdLibraryPath);
            }
        }
        if let Some(rest) = name.strip_prefix("@rpath/") {
            let mut cur = Some(n);
            while let Some(c) = cur {
                let node = &self.nodes[c];
                for entry in &node.bin.rpath {
                    if let Some(dir) = self.expand_macho(entry, c) {
                        if let Some((p, b)) = self.try_dir(&dir, rest, searched) {
                            return found(
                                p,
                                b,
                                Provider::Rpath {
                                    entry: entry.clone(),
                                    of: node.path.clone(),
                                },
                            );
                        }
                    }
                }
                cur = node.loader;
            }
            return None;
        }
        if let Some(rest) = name.strip_prefix("@loader_path/") {
            let p = self.dir_of(n).join(rest);
            searched.push(self.dir_of(n));
            return self
                .try_file(&p)
                .and_then(|b| found(p, b, Provider::LoaderDir));
        }
        if let Some(rest) = name.strip_prefix("@executable_path/") {
            let dir = self.ctx.executable_path.as_ref()?.parent()?.to_path_buf();
            searched.push(dir.clone());
            let p = dir.join(rest);
            return self
                .try_file(&p)
                .and_then(|b| found(p, b, Provider::ExecutableDir));
        }
        if name.starts_with("/usr/lib/") || name.starts_with("/System/") {
            return Some((
                Hit {
                    path: None,
                    provider: Provider::System,
                },
                None,
            ));
        }
        let p = PathBuf::from(name);
        if let Some(b) = self.try_file(&p) {
            return found(p, b, Provider::Absolute);
        }
        for dir in &self.ctx.default_dirs {
            if let Some((p, b)) = self.try_dir(dir, leaf, searched) {
                return found(p, b, Provider::DefaultDir);
            }
        }
        None
    }

    fn expand_macho(&self, entry: &str, n: usize) -> Option<PathBuf> {
        if let Some(rest) = entry.strip_prefix("@loader_path") {
            return Some(join_rel(&self.dir_of(n), rest));
        }
        if let Some(rest) = entry.strip_prefix("@executable_path") {
            let exe_dir = self.ctx.executable_path.as_ref()?.parent()?;
            return Some(join_rel(exe_dir, rest));
        }
        Some(PathBuf::from(entry))
    }
}

/// `dir` + `/../lib` without requiring the path to exist (no canonicalisation).
fn join_rel(dir: &Path, rest: &str) -> PathBuf {
    let mut p = dir.to_path_buf();
    for part in rest.split('/').filter(|s| !s.is_empty() && *s != ".") {
        if part == ".." {
            p.pop();
        } else {
            p.push(part);
        }
    }
    p
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Every name a loaded file answers to: its file name, its soname / DLL name / install name.
fn names_of(p: &Path, b: &Binary) -> Vec<String> {
    let mut v = vec![file_name(p)];
    v.extend(b.soname_or_install_name.clone());
    v
}

/// Windows "known DLLs" (HKLM\...\Session Manager\KnownDLLs, plus the core set that is always
/// loaded from System32): never searched for, always the system's.
const KNOWN_DLLS: &[&str] = &[
    "kernel32.dll",
    "kernelbase.dll",
    "ntdll.dll",
    "user32.dll",
    "gdi32.dll",
    "gdiplus.dll",
    "advapi32.dll",
    "shell32.dll",
    "shlwapi.dll",
    "ole32.dll",
    "oleaut32.dll",
    "comdlg32.dll",
    "ws2_32.dll",
    "msvcrt.dll",
    "rpcrt4.dll",
    "sechost.dll",
    "setupapi.dll",
    "imm32.dll",
    "psapi.dll",
    "normaliz.dll",
    "nsi.dll",
    "wldap32.dll",
    "difxapi.dll",
    "clbcatq.dll",
    "combase.dll",
    "coml2.dll",
    "imagehlp.dll",
    "msctf.dll",
    "wow64.dll",
    "bcrypt.dll",
    "crypt32.dll",
    "version.dll",
    "dbghelp.dll",
    "winmm.dll",
    "ucrtbase.dll",
    "shcore.dll",
    "cfgmgr32.dll",
    "iphlpapi.dll",
    "secur32.dll",
    "userenv.dll",
    "dxgi.dll",
    "d3d11.dll",
    "d3d12.dll",
    "opengl32.dll",
    "dwmapi.dll",
    "uxtheme.dll",
    "winhttp.dll",
    "wininet.dll",
    "ncrypt.dll",
    "powrprof.dll",
    "mswsock.dll",
    "comctl32.dll",
];
