//! The breadth-first walk behind [`crate::closure`], with each loader's search order.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use crate::closure::{
    Closure, Dependency, FileSystem, Index, MissingDependency, Provider, SearchContext,
};
use crate::{Binary, Format, NativeError};

const MAX_NODES: usize = 10_000;

/// A file in the walk: its path, parsed binary and loader (index into `nodes`).
pub(crate) struct Node {
    pub(crate) path: PathBuf,
    pub(crate) bin: Binary,
    pub(crate) loader: Option<usize>,
}

/// One answer of a search rule.
pub(crate) struct Hit {
    pub(crate) path: Option<PathBuf>,
    pub(crate) provider: Provider,
}

pub(crate) fn walk(
    root: &Path,
    ctx: &SearchContext,
    fs: &dyn FileSystem,
) -> Result<Closure, NativeError> {
    // Absolute, so `$ORIGIN` and `@loader_path` expand to paths that read the same everywhere.
    let root = &std::path::absolute(root).map_err(|source| NativeError::Io {
        path: root.display().to_string(),
        source,
    })?;
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

pub(crate) struct Walk<'a> {
    pub(crate) ctx: &'a SearchContext,
    pub(crate) fs: &'a dyn FileSystem,
    pub(crate) platform: Format,
    pub(crate) root_bin: Binary,
    pub(crate) nodes: Vec<Node>,
    pub(crate) found: Vec<Dependency>,
    pub(crate) index: Index,
    pub(crate) missing: Vec<MissingDependency>,
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
            let rpaths = self.rpaths_tried(n, name);
            self.missing.push(MissingDependency {
                name: name.to_string(),
                needed_by: vec![needer],
                searched,
                weak,
                rpaths,
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
    pub(crate) fn try_file(&self, p: &Path) -> Option<Binary> {
        if !self.fs.is_file(p) {
            return None;
        }
        let b = self.fs.read_binary(p).ok()?;
        (b.format == self.root_bin.format
            && b.arch == self.root_bin.arch
            && b.is_64 == self.root_bin.is_64)
            .then_some(b)
    }

    pub(crate) fn try_dir(
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

    pub(crate) fn dir_of(&self, n: usize) -> PathBuf {
        self.nodes[n]
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }
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
