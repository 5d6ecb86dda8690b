//! The ABI check: imports no provider exports — what the loader reports as `undefined symbol`
//! (Linux), `[WinError 127] The specified procedure could not be found` (Windows) or
//! `Symbol not found` (macOS), found before loading anything.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use serde::Serialize;

use crate::{Binary, Closure, Format, Import};

/// An import nothing provides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingSymbol {
    /// The file whose import fails (set by [`Closure::abi_check`]; `None` from
    /// [`unresolved_imports`], which does not know paths).
    pub importer: Option<PathBuf>,
    /// The library it should come from (PE: the DLL; Mach-O: the dylib; ELF: from the symbol
    /// version when known).
    pub library: Option<String>,
    pub name: Option<String>,
    pub ordinal: Option<u32>,
    pub version: Option<String>,
    pub demangled: Option<String>,
}

impl MissingSymbol {
    /// `c10::foo(int)`, or the raw name, or `#7` for an ordinal.
    pub fn display_name(&self) -> String {
        match (&self.demangled, &self.name, self.ordinal) {
            (Some(d), _, _) => d.clone(),
            (None, Some(n), _) => n.clone(),
            (None, None, Some(o)) => format!("#{o}"),
            _ => "?".into(),
        }
    }
}

/// Imports of `binary` that its providers do not export. `providers` pairs the name the
/// loader resolved (DT_NEEDED / DLL name / install name) with the file found for it.
///
/// - ELF: every non-weak undefined symbol must be exported by some provider (ELF binds
///   globally); a versioned import (`foo@LIBB_1.0`) needs that version, an unversioned one any.
///   Pass the program (python) among the providers, or `Py*` symbols will show up.
/// - PE: every imported procedure (by name, or by ordinal) must be exported by the DLL it names;
///   imports from DLLs not among the providers (system DLLs, missing ones) are not checked.
/// - Mach-O: two-level namespace like PE (by the dylib of the symbol's library ordinal);
///   flat-namespace imports like ELF.
pub fn unresolved_imports(binary: &Binary, providers: &[(&str, &Binary)]) -> Vec<MissingSymbol> {
    match binary.format {
        Format::Elf => elf(binary, providers),
        Format::Pe | Format::MachO => by_library(binary, providers),
    }
}

fn missing(imp: &Import) -> MissingSymbol {
    MissingSymbol {
        importer: None,
        library: imp.library.clone(),
        name: imp.name.clone(),
        ordinal: imp.ordinal,
        version: imp.version.clone(),
        demangled: imp
            .demangled
            .clone()
            .or_else(|| imp.name.as_deref().and_then(crate::demangle)),
    }
}

/// ELF exports of all providers: name -> versions (None = unversioned). Built once per check.
struct ElfExports<'a>(HashMap<&'a str, Vec<Option<&'a str>>>);

impl<'a> ElfExports<'a> {
    fn new(providers: &[(&str, &'a Binary)]) -> Self {
        let mut exported: HashMap<&'a str, Vec<Option<&'a str>>> = HashMap::new();
        for (_, p) in providers {
            for e in &p.exports {
                exported
                    .entry(e.name.as_str())
                    .or_default()
                    .push(e.version.as_deref());
            }
        }
        ElfExports(exported)
    }

    fn missing_of(&self, binary: &Binary) -> Vec<MissingSymbol> {
        binary
            .imports
            .iter()
            .filter(|imp| !imp.weak)
            .filter(|imp| {
                let Some(name) = imp.name.as_deref() else {
                    return false;
                };
                match self.0.get(name) {
                    None => true,
                    Some(versions) => match imp.version.as_deref() {
                        None => false,
                        Some(v) => !versions.iter().any(|ev| *ev == Some(v) || ev.is_none()),
                    },
                }
            })
            .map(missing)
            .collect()
    }
}

fn elf(binary: &Binary, providers: &[(&str, &Binary)]) -> Vec<MissingSymbol> {
    ElfExports::new(providers).missing_of(binary)
}

fn by_library(binary: &Binary, providers: &[(&str, &Binary)]) -> Vec<MissingSymbol> {
    let norm = |s: &str| {
        if binary.format == Format::Pe {
            s.to_ascii_lowercase()
        } else {
            s.to_string()
        }
    };
    let mut by_name: HashMap<String, &Binary> = HashMap::new();
    for (name, p) in providers {
        by_name.insert(norm(name), p);
        if let Some(own) = &p.soname_or_install_name {
            by_name.entry(norm(own)).or_insert(p);
        }
    }
    let all_names: HashSet<&str> = providers
        .iter()
        .flat_map(|(_, p)| p.exports.iter().map(|e| e.name.as_str()))
        .collect();
    binary
        .imports
        .iter()
        .filter(|imp| !imp.weak)
        .filter(|imp| match &imp.library {
            Some(lib) => match by_name.get(&norm(lib)) {
                None => false, // not ours to judge: a system or missing library
                Some(p) => !provides(p, imp),
            },
            // Mach-O flat namespace: any provider
            None => {
                imp.name.as_deref().is_some_and(|n| !all_names.contains(n)) && !providers.is_empty()
            }
        })
        .map(missing)
        .collect()
}

fn provides(p: &Binary, imp: &Import) -> bool {
    if let Some(name) = &imp.name {
        return p.exports.iter().any(|e| &e.name == name);
    }
    imp.ordinal
        .is_some_and(|o| p.exports.iter().any(|e| e.ordinal == Some(o)))
}

impl Closure {
    /// [`unresolved_imports`] for the root and every found dependency, each against the files
    /// its loader would bind to: ELF against the whole closure plus the preloaded files and the
    /// program; PE and Mach-O against the libraries they name.
    pub fn abi_check(&self) -> Vec<MissingSymbol> {
        let mut providers: Vec<(&str, &Binary)> = Vec::new();
        for d in &self.found {
            if let Some(b) = &d.binary {
                providers.push((d.name.as_str(), b));
            }
        }
        for (p, b) in &self.preloaded {
            let name = p.file_name().and_then(|f| f.to_str()).unwrap_or("");
            providers.push((name, b));
        }
        let mut out = Vec::new();
        let files = std::iter::once((Some(self.root.clone()), &self.root_binary)).chain(
            self.found
                .iter()
                .filter(|d| !d.is_system())
                .filter_map(|d| d.binary.as_ref().map(|b| (d.path.clone(), b))),
        );
        let elf_index = (self.platform == Format::Elf).then(|| ElfExports::new(&providers));
        for (path, bin) in files {
            let found = match (&elf_index, bin.format) {
                (Some(index), Format::Elf) => index.missing_of(bin),
                _ => unresolved_imports(bin, &providers),
            };
            for mut m in found {
                m.importer = path.clone();
                out.push(m);
            }
        }
        out
    }
}
