//! The ABI check: imports no provider exports — what the loader reports as `undefined symbol`
//! (Linux), `[WinError 127] The specified procedure could not be found` (Windows) or
//! `Symbol not found` (macOS), found before loading anything.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::exports::{symbol_hash, ExportIndex};
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
///
/// Each provider's exports are indexed for the call; [`unresolved_imports_indexed`] takes
/// indexes built once ([`ExportIndex::new`]) for checks that share providers.
pub fn unresolved_imports(binary: &Binary, providers: &[(&str, &Binary)]) -> Vec<MissingSymbol> {
    // Only the providers an import can bind to are indexed: on PE and Mach-O the ones an
    // import names (a flat-namespace import needs all).
    let wanted = |name: &str, p: &Binary| match binary.format {
        Format::Elf => true,
        _ => binary.imports.iter().any(|i| match &i.library {
            None => true,
            Some(l) => {
                same_lib(binary.format, l, name)
                    || p.soname_or_install_name
                        .as_deref()
                        .is_some_and(|own| same_lib(binary.format, l, own))
            }
        }),
    };
    let indexes: Vec<Option<ExportIndex>> = providers
        .iter()
        .map(|(n, p)| wanted(n, p).then(|| ExportIndex::new(p)))
        .collect();
    let empty = ExportIndex::default();
    let with: Vec<Provided> = providers
        .iter()
        .zip(&indexes)
        .map(|((n, p), ix)| (*n, *p, ix.as_ref().unwrap_or(&empty)))
        .collect();
    unresolved_imports_indexed(binary, &with)
}

/// One provider for [`unresolved_imports_indexed`]: the name the loader resolved, the file,
/// and the index of its exports.
pub type Provided<'a> = (&'a str, &'a Binary, &'a ExportIndex);

/// [`unresolved_imports`] with each provider's [`ExportIndex`] given (built once per file and
/// shared by every importer that binds to it).
pub fn unresolved_imports_indexed(binary: &Binary, providers: &[Provided]) -> Vec<MissingSymbol> {
    match binary.format {
        Format::Elf => elf(binary, providers),
        Format::Pe | Format::MachO => by_library(binary, providers),
    }
}

fn same_lib(format: Format, a: &str, b: &str) -> bool {
    if format == Format::Pe {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
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

/// Does any provider export `name` (with `version`, ELF rules)?
pub fn exported_by_any(providers: &[Provided], name: &str, version: Option<&str>) -> bool {
    let h = symbol_hash(name);
    providers
        .iter()
        .any(|(_, b, ix)| ix.has_version(&b.exports, h, name, version))
}

fn elf(binary: &Binary, providers: &[Provided]) -> Vec<MissingSymbol> {
    binary
        .imports
        .iter()
        .filter(|imp| !imp.weak)
        .filter(|imp| {
            imp.name
                .as_deref()
                .is_some_and(|name| !exported_by_any(providers, name, imp.version.as_deref()))
        })
        .map(missing)
        .collect()
}

fn by_library(binary: &Binary, providers: &[Provided]) -> Vec<MissingSymbol> {
    let norm = |s: &str| {
        if binary.format == Format::Pe {
            s.to_ascii_lowercase()
        } else {
            s.to_string()
        }
    };
    let mut by_name: HashMap<String, (&Binary, &ExportIndex)> = HashMap::new();
    for (name, p, ix) in providers {
        by_name.insert(norm(name), (p, ix));
        if let Some(own) = &p.soname_or_install_name {
            by_name.entry(norm(own)).or_insert((p, ix));
        }
    }
    binary
        .imports
        .iter()
        .filter(|imp| !imp.weak)
        .filter(|imp| match &imp.library {
            Some(lib) => match by_name.get(&norm(lib)) {
                None => false, // not ours to judge: a system or missing library
                Some((p, ix)) => !provides(p, ix, imp),
            },
            // Mach-O flat namespace: any provider
            None => {
                imp.name.as_deref().is_some_and(|n| {
                    let h = symbol_hash(n);
                    !providers.iter().any(|(_, b, ix)| ix.has(&b.exports, h, n))
                }) && !providers.is_empty()
            }
        })
        .map(missing)
        .collect()
}

fn provides(p: &Binary, ix: &ExportIndex, imp: &Import) -> bool {
    if let Some(name) = &imp.name {
        return ix.has(&p.exports, symbol_hash(name), name);
    }
    imp.ordinal.is_some_and(|o| ix.has_ordinal(o))
}

impl Closure {
    /// [`unresolved_imports`] for the root and every found dependency, each against the files
    /// its loader would bind to: ELF against the whole closure plus the preloaded files and the
    /// program; PE and Mach-O against the libraries they name. Each provider is indexed once.
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
        let indexes: Vec<ExportIndex> =
            providers.iter().map(|(_, b)| ExportIndex::new(b)).collect();
        let with: Vec<Provided> = providers
            .iter()
            .zip(&indexes)
            .map(|((n, b), ix)| (*n, *b, ix))
            .collect();
        let mut out = Vec::new();
        let files = std::iter::once((Some(self.root.clone()), &self.root_binary)).chain(
            self.found
                .iter()
                .filter(|d| !d.is_system())
                .filter_map(|d| d.binary.as_ref().map(|b| (d.path.clone(), b))),
        );
        for (path, bin) in files {
            for mut m in unresolved_imports_indexed(bin, &with) {
                m.importer = path.clone();
                out.push(m);
            }
        }
        out
    }
}
