//! Mach-O (macOS dylibs, Python extension bundles): install name, LC_LOAD_DYLIB and friends,
//! LC_RPATH, two-level-namespace imports, the export trie; and adding LC_RPATHs.

use std::path::Path;

use goblin::mach::load_command::CommandVariant;
use goblin::mach::{Mach, MachO, SingleArch};

use crate::demangle::demangle;
use crate::read::malformed;
use crate::{Binary, Export, Format, Import, NativeError, ReadOptions};

const MAX_SLICES: usize = 16;

/// Parse a (thin or universal) Mach-O image; a universal file is described by its first slice.
pub(crate) fn parse(bytes: &[u8], opts: &ReadOptions) -> Result<Binary, NativeError> {
    let bad = |e: goblin::error::Error| malformed(Format::MachO, e.to_string());
    match Mach::parse(bytes).map_err(bad)? {
        Mach::Binary(m) => describe(&m, opts),
        Mach::Fat(multi) => {
            let mut first = None;
            let mut arches = Vec::new();
            for i in 0..multi.narches.min(MAX_SLICES) {
                match multi.get(i).map_err(bad)? {
                    SingleArch::MachO(m) => {
                        let b = describe(&m, opts)?;
                        arches.push(b.arch.clone());
                        first.get_or_insert(b);
                    }
                    SingleArch::Archive(_) => arches.push("archive".into()),
                }
            }
            let mut b = first
                .ok_or_else(|| malformed(Format::MachO, "universal file without a Mach-O slice"))?;
            b.universal_arches = arches;
            Ok(b)
        }
    }
}

fn describe(m: &MachO, opts: &ReadOptions) -> Result<Binary, NativeError> {
    let demangle = |n: &str| if opts.demangle { demangle(n) } else { None };
    use goblin::mach::header::{MH_BUNDLE, MH_DYLIB};
    // libs[0] is the file itself ("self" or its LC_ID_DYLIB), as in two-level ordinals.
    let needed: Vec<String> = m.libs.iter().skip(1).map(|s| s.to_string()).collect();
    // goblin lists dylib load commands in file order into `libs`; pair them to find the weak
    // ones (LC_LOAD_WEAK_DYLIB: dyld carries on when they are missing).
    let mut weak_needed = Vec::new();
    let dylib_cmds = m.load_commands.iter().filter(|lc| {
        matches!(
            lc.command,
            CommandVariant::LoadDylib(_)
                | CommandVariant::LoadUpwardDylib(_)
                | CommandVariant::ReexportDylib(_)
                | CommandVariant::LoadWeakDylib(_)
                | CommandVariant::LazyLoadDylib(_)
        )
    });
    for (lc, name) in dylib_cmds.zip(&needed) {
        if matches!(lc.command, CommandVariant::LoadWeakDylib(_)) {
            weak_needed.push(name.clone());
        }
    }

    let mut imports = Vec::new();
    let mut sym_exports = Vec::new();
    if let Some(symbols) = &m.symbols {
        for (name, nlist) in symbols.iter().take(1 << 20).map_while(Result::ok) {
            if name.is_empty() || !nlist.is_global() {
                continue;
            }
            if nlist.is_undefined() {
                // Two-level namespace: the high byte of n_desc is the library ordinal.
                let ordinal = (nlist.n_desc >> 8) & 0xff;
                let library = match ordinal {
                    0 => None,           // self
                    0xfe | 0xff => None, // flat lookup / the main executable
                    n => m.libs.get(n as usize).map(|s| s.to_string()),
                };
                imports.push(Import {
                    library,
                    name: Some(name.to_string()),
                    ordinal: None,
                    version: None,
                    demangled: demangle(name),
                    weak: nlist.n_desc & 0x40 != 0, // N_WEAK_REF
                    delayed: false,
                });
            } else {
                sym_exports.push(export(name.to_string(), &demangle));
            }
        }
    }
    // The export trie is what dyld binds against; the symbol table is the fallback.
    let trie: Vec<Export> = m
        .exports()
        .map(|v| v.into_iter().map(|e| export(e.name, &demangle)).collect())
        .unwrap_or_default();
    let exports = if trie.is_empty() { sym_exports } else { trie };

    let arch = goblin::mach::constants::cputype::get_arch_name_from_types(
        m.header.cputype,
        m.header.cpusubtype,
    )
    .map(str::to_string)
    .unwrap_or_else(|| format!("cputype-{}", m.header.cputype));
    Ok(Binary {
        format: Format::MachO,
        arch: if arch.starts_with("arm64") {
            "arm64".into()
        } else {
            arch
        },
        is_64: m.is_64,
        is_library: matches!(m.header.filetype, MH_DYLIB | MH_BUNDLE),
        soname_or_install_name: m.name.map(str::to_string),
        needed,
        weak_needed,
        delay_needed: Vec::new(),
        rpath: m.rpaths.iter().map(|s| s.to_string()).collect(),
        runpath: Vec::new(),
        interpreter: None,
        imports,
        exports,
        gpu_targets: Vec::new(),
        offload: Vec::new(),
        universal_arches: Vec::new(),
    })
}

fn export(name: String, demangle: &dyn Fn(&str) -> Option<String>) -> Export {
    Export {
        demangled: demangle(&name),
        name,
        version: None,
        ordinal: None,
        forwarder: None,
    }
}

/// Add LC_RPATH entries (those not already present) to every slice of the Mach-O at `path`,
/// then ad-hoc re-sign it (an edited arm64 binary with a stale signature is killed by the
/// kernel; [`crate::adhoc_sign`] writes the signature itself, from any host), then read it back.
///
/// Pure Rust first (arwen), `install_name_tool -add_rpath` as the fallback. New load commands
/// must fit in the header padding: a file linked without room is refused, with the linker flag
/// that makes room, before anything is written.
pub fn add_macho_rpaths(path: &Path, rpaths: &[String]) -> Result<(), NativeError> {
    let err = |reason: String| NativeError::MachOEdit {
        path: path.display().to_string(),
        reason,
    };
    let before = crate::read_binary(path)?;
    if before.format != Format::MachO {
        return Err(err(format!("it is a {} file, not Mach-O", before.format)));
    }
    let mut todo: Vec<&String> = Vec::new();
    for r in rpaths {
        if !before.rpath.contains(r) && !todo.contains(&r) {
            todo.push(r);
        }
    }
    if todo.is_empty() {
        return Ok(());
    }
    let bytes = rocbuild_platform::state_files::read_file_capped(path, crate::read::MAX_FILE_SIZE)
        .map_err(|e| err(e.to_string()))?;
    let need: usize = todo
        .iter()
        .map(|r| (12 + r.len() + 1 + 8).next_multiple_of(8))
        .sum();
    let room = crate::read::guarded(Format::MachO, || header_room(&bytes))?;
    if room < need {
        return Err(err(format!(
            "only {room} bytes are free after the load commands and {need} are needed; \
             relink it with -Wl,-headerpad_max_install_names"
        )));
    }
    match with_arwen(&bytes, &todo) {
        Ok(out) => write_atomically(path, &out).map_err(err)?,
        Err(reason) => {
            let tool = which::which("install_name_tool")
                .map_err(|_| err(format!("{reason}; and install_name_tool is not installed")))?;
            for r in &todo {
                duct::cmd(&tool, ["-add_rpath".as_ref(), r.as_ref(), path.as_os_str()])
                    .stdout_null()
                    .stderr_capture()
                    .run()
                    .map_err(|e| err(format!("{reason}; install_name_tool failed too: {e}")))?;
            }
            tracing::warn!("pure-Rust rpath edit failed ({reason}); used install_name_tool");
        }
    }
    // An edited file's signature no longer matches its pages: sign it again (ad hoc).
    crate::codesign::adhoc_sign(path)?;
    let after = crate::read_binary(path)?;
    let lost: Vec<&String> = rpaths.iter().filter(|r| !after.rpath.contains(r)).collect();
    if !lost.is_empty() || after.needed != before.needed {
        return Err(err(format!(
            "after editing, LC_RPATHs read {:?}",
            after.rpath
        )));
    }
    Ok(())
}

/// Add each rpath, re-parsing in between (arwen works from the parsed header it was given).
fn with_arwen(bytes: &[u8], rpaths: &[&String]) -> Result<Vec<u8>, String> {
    let mut data = bytes.to_vec();
    for r in rpaths {
        let res = std::panic::catch_unwind(|| {
            let mut c = arwen::macho::MachoContainer::parse(&data).map_err(|e| e.to_string())?;
            c.add_rpath(r).map_err(|e| e.to_string())?;
            Ok::<_, String>(c.data)
        });
        data = res.map_err(|_| "arwen failed on this file".to_string())??;
    }
    Ok(data)
}

/// Bytes free between the end of the load commands and the first section's data, in the
/// tightest slice.
fn header_room(bytes: &[u8]) -> Result<usize, NativeError> {
    let bad = |e: goblin::error::Error| malformed(Format::MachO, e.to_string());
    let room_of = |m: &MachO| -> usize {
        let hdr = if m.is_64 { 32 } else { 28 };
        let used = hdr + m.header.sizeofcmds as usize;
        let first_data = m
            .segments
            .iter()
            .flat_map(|seg| seg.sections().unwrap_or_default())
            .filter(|(s, _)| s.offset != 0 && s.size != 0)
            .map(|(s, _)| s.offset as usize)
            .min()
            .unwrap_or(used);
        first_data.saturating_sub(used)
    };
    match Mach::parse(bytes).map_err(bad)? {
        Mach::Binary(m) => Ok(room_of(&m)),
        Mach::Fat(multi) => {
            let mut room = usize::MAX;
            for i in 0..multi.narches.min(MAX_SLICES) {
                if let SingleArch::MachO(m) = multi.get(i).map_err(bad)? {
                    room = room.min(room_of(&m));
                }
            }
            Ok(if room == usize::MAX { 0 } else { room })
        }
    }
}

pub(crate) fn write_atomically(path: &Path, data: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("rocbuild-tmp");
    fs_err::write(&tmp, data).map_err(|e| e.to_string())?;
    let perms = fs_err::metadata(path)
        .map_err(|e| e.to_string())?
        .permissions();
    fs_err::set_permissions(&tmp, perms).map_err(|e| e.to_string())?;
    fs_err::rename(&tmp, path).map_err(|e| e.to_string())
}
