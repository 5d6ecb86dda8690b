//! Each loader's search order, as methods of the closure walk: ELF (ld.so(8)), Windows
//! (LoadLibraryEx with the flags Python uses), Mach-O (dyld(1)).

use std::path::{Path, PathBuf};

use crate::closure::{Provider, RpathTried};
use crate::closure_walk::{Hit, Walk};
use crate::Binary;

impl Walk<'_> {
    /// ld.so: DT_RPATH of the loader chain (only while the needing file has no DT_RUNPATH;
    /// a chain member with DT_RUNPATH contributes nothing), LD_LIBRARY_PATH, the needing
    /// file's own DT_RUNPATH, the cache, the default dirs.
    pub(crate) fn search_elf(
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
        if s.starts_with('/') {
            join_rel(Path::new("/"), &s)
        } else {
            PathBuf::from(s)
        }
    }

    /// Windows (LoadLibraryEx with LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | _DLL_LOAD_DIR, as Python
    /// loads extensions): API sets and known DLLs are the system's; then the directory of the
    /// DLL being loaded (the root), the application dir, the `add_dll_directory` dirs,
    /// System32, and PATH when the context has one.
    pub(crate) fn search_pe(
        &self,
        name: &str,
        searched: &mut Vec<PathBuf>,
    ) -> Option<(Hit, Option<Binary>)> {
        let lower = name.to_ascii_lowercase();
        if is_windows_system_dll(&lower) {
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
    pub(crate) fn search_macho(
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

    /// The rpath entries the loader tried for `name` needed by node `n` (see
    /// [`crate::MissingDependency::rpaths`]).
    pub(crate) fn rpaths_tried(&self, n: usize, name: &str) -> Option<Vec<RpathTried>> {
        let mut out = Vec::new();
        let tried = |kind: &str, entry: &String, c: usize, dir: Option<PathBuf>| RpathTried {
            kind: kind.to_string(),
            entry: entry.clone(),
            of: self.nodes[c].path.clone(),
            dir,
        };
        match self.platform {
            crate::Format::Pe => return None,
            crate::Format::Elf => {
                if name.contains('/') {
                    return None;
                }
                let own = &self.nodes[n].bin;
                if !own.runpath.is_empty() {
                    for e in &own.runpath {
                        out.push(tried("RUNPATH", e, n, Some(self.expand_elf(e, n))));
                    }
                    return Some(out);
                }
                let mut cur = Some(n);
                while let Some(c) = cur {
                    let node = &self.nodes[c];
                    if node.bin.runpath.is_empty() {
                        for e in &node.bin.rpath {
                            out.push(tried("RPATH", e, c, Some(self.expand_elf(e, c))));
                        }
                    }
                    cur = node.loader;
                }
            }
            crate::Format::MachO => {
                name.strip_prefix("@rpath/")?;
                let mut cur = Some(n);
                while let Some(c) = cur {
                    for e in &self.nodes[c].bin.rpath {
                        out.push(tried("LC_RPATH", e, c, self.expand_macho(e, c)));
                    }
                    cur = self.nodes[c].loader;
                }
            }
        }
        Some(out)
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

/// `dir` + `/../lib`, normalised by text (the path need not exist; symlinks are not resolved,
/// so `a/../r` reports as `r`, which is what a person wants to read).
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

/// The DLLs of every Windows 10/11 install (System32), kept as data with its source.
const WINDOWS_SYSTEM_DLLS: &str = include_str!("../data/windows-system-dlls.txt");

/// Part of every Windows install: an API set (`api-ms-win-*`, `ext-ms-*`) or a System32 DLL of
/// the list. Never the MSVC runtime, which a clean Windows lacks.
pub fn is_windows_system_dll(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if is_msvc_runtime(&lower) {
        return false;
    }
    lower.starts_with("api-ms-win-")
        || lower.starts_with("ext-ms-")
        || WINDOWS_SYSTEM_DLLS
            .lines()
            .map(str::trim)
            .any(|l| !l.starts_with('#') && l == lower)
}

/// The Python interpreter's own DLL (`python311.dll`, `python3.dll`, a debug `python311_d.dll`):
/// the process has it before any extension loads.
pub fn is_python_dll(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower
        .strip_prefix("python")
        .and_then(|r| r.strip_suffix(".dll"))
        .map(|r| r.trim_end_matches("_d"))
        .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()))
}

/// The Visual C++ runtime (`MSVCP140.dll`, `VCRUNTIME140.dll`, `VCRUNTIME140_1.dll`, …):
/// installed by the VC++ redistributable, not by Windows: a frozen app must ship it.
pub fn is_msvc_runtime(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [
        "msvcp140",
        "vcruntime140",
        "concrt140",
        "vccorlib140",
        "vcomp140",
    ]
    .iter()
    .any(|p| lower.starts_with(p))
        && lower.ends_with(".dll")
}
