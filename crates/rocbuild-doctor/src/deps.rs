//! `rocbuild deps`: the dependency tree of native files, the provider of each library, the
//! missing ones, and the imports nothing exports (what `WinError 127` should have said).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::DoctorError;
use crate::linkage::{self, Found, Missing, Reader, Search, Unresolved};
use crate::provider::{classify, Source};

#[derive(Debug, Clone, Serialize)]
pub struct Library {
    #[serde(flatten)]
    pub found: Found,
    pub provider: Source,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileDeps {
    pub file: PathBuf,
    pub format: String,
    pub gpu_targets: Vec<String>,
    /// In load order.
    pub libraries: Vec<Library>,
    pub missing: Vec<Missing>,
    pub unresolved: Vec<Unresolved>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DepsReport {
    pub files: Vec<FileDeps>,
}

impl DepsReport {
    /// Every dependency found and every import provided.
    pub fn complete(&self) -> bool {
        self.files
            .iter()
            .all(|f| f.missing.is_empty() && f.unresolved.is_empty())
    }
    /// For the exit status. On ELF a missing library hides every symbol it would have
    /// provided (symbols bind against the whole process), so its imports nothing exports are
    /// not counted as an ABI break; on PE and Mach-O each import names its library, and only
    /// those of libraries that were found are judged.
    pub fn verdict(&self) -> crate::Verdict {
        let kinds = self.files.iter().flat_map(|f| {
            let missing = !f.missing.is_empty();
            let abi = !f.unresolved.is_empty() && (!missing || f.format != "ELF");
            missing
                .then_some(crate::Breaks::MissingLibrary)
                .into_iter()
                .chain(abi.then_some(crate::Breaks::Abi))
        });
        crate::Verdict::of(!self.complete(), kinds)
    }
}

/// The venv `file` is in (a parent holding `pyvenv.cfg`), for its Python's `Py*` exports.
fn venv_python(file: &Path) -> Option<PathBuf> {
    let root = rocbuild_probe::platform::venv_root_of(file)?;
    rocbuild_probe::platform::any_venv_python(root)
}

/// Extension modules import the interpreter's `Py*` symbols (`__Py_NoneStruct` on Mach-O);
/// outside a venv there is no interpreter to check them against, so they are not reported.
fn python_symbol(u: &Unresolved) -> bool {
    rocbuild_native::is_python_c_api(&u.name)
}

pub fn deps(
    files: &[PathBuf],
    search_dirs: &[PathBuf],
    loader: &linkage::LoaderEnv,
) -> Result<DepsReport, DoctorError> {
    DoctorError::refuse_folders(files, "deps")?;
    let reader = Reader::leaked();
    // Paths are made absolute once, here at the edge: a relative and an absolute spelling of
    // the same file give the same tree and the same JSON (`needed_by` is always absolute).
    let files: Vec<PathBuf> = files.iter().map(|f| linkage::absolute(f)).collect();
    let search_dirs: Vec<PathBuf> = search_dirs.iter().map(|d| linkage::absolute(d)).collect();
    // The Python runtime of each venv, read once however many of its files are asked about.
    let mut pythons: HashMap<PathBuf, Vec<PathBuf>> = HashMap::new();
    for python in files.iter().filter_map(|f| venv_python(f)) {
        if let std::collections::hash_map::Entry::Vacant(e) = pythons.entry(python) {
            let runtime = linkage::python_runtime(e.key(), reader, loader);
            e.insert(runtime);
        }
    }
    // Every root on every core; the reader is shared, so a library in many closures is still
    // read (and its exports indexed) once.
    let results = linkage::par_map(&files, |file| {
        let python = venv_python(file);
        let search = Search {
            extra_dirs: search_dirs.clone(),
            preloaded: python
                .as_ref()
                .and_then(|p| pythons.get(p).cloned())
                .unwrap_or_default(),
            executable: None,
            loader: loader.clone(),
        };
        let l = linkage::link(file, &search, reader)?;
        let libraries = l
            .found
            .iter()
            .map(|f| Library {
                provider: classify(f),
                found: f.clone(),
            })
            .collect();
        let unresolved = l
            .unresolved
            .into_iter()
            .filter(|u| python.is_some() || !python_symbol(u))
            .collect();
        Ok::<_, DoctorError>(FileDeps {
            file: linkage::tidy(file),
            format: l.format,
            gpu_targets: l.gpu_targets,
            libraries,
            missing: l.missing,
            unresolved,
        })
    });
    let out = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(DepsReport { files: out })
}

/// What the platform's loader says for an import nothing exports.
fn loader_words(format: &str, u: &Unresolved) -> String {
    match format {
        "PE" => "[WinError 127] The specified procedure could not be found".into(),
        "Mach-O" => format!("Symbol not found: {}", u.name),
        _ => format!("undefined symbol: {}", u.name),
    }
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// The tree, each library under the first file that needs it (its loader), in load order.
pub fn human(r: &DepsReport) -> String {
    let mut o = String::new();
    for (i, f) in r.files.iter().enumerate() {
        if i > 0 {
            o.push('\n');
        }
        let gpu = if f.gpu_targets.is_empty() {
            String::new()
        } else {
            format!(", GPU code for {}", f.gpu_targets.join(", "))
        };
        let _ = writeln!(o, "{} ({}{gpu})", f.file.display(), f.format);
        let mut children: HashMap<PathBuf, Vec<&Library>> = HashMap::new();
        for l in &f.libraries {
            if let Some(parent) = l.found.needed_by.first() {
                children.entry(parent.clone()).or_default().push(l);
            }
        }
        let mut missing_under: HashMap<PathBuf, Vec<&Missing>> = HashMap::new();
        for m in &f.missing {
            for by in &m.needed_by {
                missing_under.entry(by.clone()).or_default().push(m);
            }
        }
        let mut seen = std::collections::HashSet::new();
        tree(&mut o, &f.file, 1, &children, &missing_under, &mut seen);
        if !f.missing.is_empty() {
            let _ = writeln!(o, "  missing:");
            for m in &f.missing {
                let by: Vec<String> = m.needed_by.iter().map(|p| name_of(p)).collect();
                let _ = writeln!(
                    o,
                    "    {} (needed by {}; {})",
                    m.name,
                    by.join(", "),
                    m.explain(&f.format)
                );
            }
        }
        if !f.unresolved.is_empty() {
            let _ = writeln!(
                o,
                "  imports nothing exports (the load would fail with the loader's message shown):"
            );
            for u in &f.unresolved {
                let shown = u.demangled.clone().unwrap_or_else(|| u.name.clone());
                let from = u
                    .library
                    .as_deref()
                    .map(|l| format!(" from {l}, which does not export it"))
                    .unwrap_or_default();
                let raw = if u.demangled.is_some() {
                    format!(" [{}]", u.name)
                } else {
                    String::new()
                };
                let _ = writeln!(o, "    {} imports {shown}{raw}{from}", name_of(&u.importer));
                let _ = writeln!(o, "      -> {}", loader_words(&f.format, u));
            }
        }
    }
    o
}

fn tree(
    o: &mut String,
    node: &Path,
    depth: usize,
    children: &HashMap<PathBuf, Vec<&Library>>,
    missing: &HashMap<PathBuf, Vec<&Missing>>,
    seen: &mut std::collections::HashSet<PathBuf>,
) {
    if !seen.insert(node.to_path_buf()) {
        return;
    }
    let pad = "  ".repeat(depth);
    for l in children.get(node).into_iter().flatten() {
        let at = match &l.found.path {
            Some(p) => format!(" => {}", p.display()),
            None => String::new(),
        };
        let how = if l.found.how == l.provider.to_string() {
            String::new()
        } else {
            format!("; {}", l.found.how)
        };
        let _ = writeln!(o, "{pad}{}{at}  [{}{how}]", l.found.name, l.provider);
        if let Some(p) = &l.found.path {
            if !matches!(l.provider, Source::System) {
                tree(o, p, depth + 1, children, missing, seen);
            }
        }
    }
    for m in missing.get(node).into_iter().flatten() {
        let _ = writeln!(o, "{pad}{}  MISSING", m.name);
    }
}
