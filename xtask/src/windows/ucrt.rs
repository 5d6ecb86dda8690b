//! Wine 8's ucrtbase.dll leaves C99's complex functions (`crealf`, `cabsf`, `cexp`, …) as
//! stubs that abort the process when called. numpy 2.x (the only numpy with cp313 wheels) calls
//! `crealf` while it is imported, so `import numpy`, and `import torch` with it, dies under
//! Wine. Real Windows has them all. So the prefix gets a native `ucrtbase.dll` that implements
//! those stubs and forwards every other export to Wine's own ucrtbase, copied beside it as
//! `ucrtwine.dll`; the prefix's registry prefers the native one (`ucrtbase=native,builtin`).
//! Nothing outside the prefix changes: the Python directories stay as a user's would be.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use goblin::pe::PE;
use serde_json::{json, Value};

use super::{pe, read_file, run_tool, write_file, Ctx, Wine};
use crate::util::Result;

/// The complex functions the shim implements (double; `f` and `l` variants derived).
const COMPLEX: &[&str] = &[
    "cabs", "cacos", "cacosh", "carg", "casin", "casinh", "catan", "catanh", "ccos", "ccosh",
    "cexp", "cimag", "clog", "clog10", "conj", "cpow", "cproj", "creal", "csin", "csinh", "csqrt",
    "ctan", "ctanh", "norm",
];

/// The shim's function for an export, if it implements one: `cabsf` → `shim_cabsf`; the
/// `l` variants take the double ones (MSVC's long double is a double).
fn shim_function(export: &str) -> Option<String> {
    let helpers = [
        ("_Cmulcc", "shim__Cmulcc"),
        ("_Cmulcr", "shim__Cmulcr"),
        ("_FCbuild", "shim__FCbuild"),
        ("_FCmulcc", "shim__FCmulcc"),
        ("_FCmulcr", "shim__FCmulcr"),
        ("_LCbuild", "shim__Cbuild"),
        ("_LCmulcc", "shim__Cmulcc"),
        ("_LCmulcr", "shim__Cmulcr"),
    ];
    if let Some((_, f)) = helpers.iter().find(|(n, _)| *n == export) {
        return Some(f.to_string());
    }
    if COMPLEX.contains(&export) {
        return Some(format!("shim_{export}"));
    }
    let (base, suffix) = export.split_at(export.len().checked_sub(1)?);
    match suffix {
        "f" if COMPLEX.contains(&base) => Some(format!("shim_{export}")),
        "l" if COMPLEX.contains(&base) => Some(format!("shim_{base}")),
        _ => None,
    }
}

/// The real math the shim takes from Wine's ucrtbase (as `ucrtwine.dll`).
const IMPORTS: &[&str] = &[
    "exp", "log", "sqrt", "sin", "cos", "sinh", "cosh", "atan2", "_hypot",
];

const SHIM_C: &str = include_str!("ucrt_shim.c");

/// Replace `prefix`'s ucrtbase.dll as described above; what was done.
pub fn install(ctx: &Ctx, wine: &Wine, prefix: &Path) -> Result<Value> {
    let system32 = prefix.join("drive_c/windows/system32");
    let builtin = read_file(&system32.join("ucrtbase.dll"))?;
    if builtin.get(0x40..0x50) != Some(b"Wine builtin DLL".as_slice()) {
        return Err(format!(
            "{} is not Wine's builtin ucrtbase.dll",
            system32.join("ucrtbase.dll").display()
        ));
    }
    let (exports, stubs) = exports_and_stubs(&builtin)?;
    let replaced: Vec<&String> = stubs
        .iter()
        .filter(|s| shim_function(s).is_some())
        .collect();
    let scratch = ctx.scratch("ucrt-shim")?;
    let dir = scratch.path();
    write_file(&dir.join("shim.c"), SHIM_C)?;
    write_file(&dir.join("ucrtbase.def"), shim_def(&exports, &stubs))?;
    let imports = format!(
        "LIBRARY ucrtwine.dll\nEXPORTS\n  {}\n",
        IMPORTS.join("\n  ")
    );
    write_file(&dir.join("ucrtwine.def"), imports)?;
    build(ctx, dir)?;
    write_file(&system32.join("ucrtwine.dll"), &builtin)?;
    let shim = read_file(&dir.join("ucrtbase.dll"))?;
    write_file(&system32.join("ucrtbase.dll"), shim)?;
    let key = "HKCU\\Software\\Wine\\DllOverrides";
    let args = [
        "add",
        key,
        "/v",
        "ucrtbase",
        "/t",
        "REG_SZ",
        "/d",
        "native,builtin",
        "/f",
    ];
    wine.run(
        Path::new("reg"),
        &args,
        prefix,
        &[],
        Duration::from_secs(60),
    )?;
    Ok(json!({
        "why": "Wine 8's ucrtbase aborts in C99 complex functions (numpy 2.x calls crealf at import)",
        "exports_forwarded_to_ucrtwine": exports.len() - replaced.len(),
        "stubs_implemented": replaced,
        "stubs_left": stubs.len() - replaced.len(),
    }))
}

/// `ucrtbase.def`: every export forwarded to `ucrtwine`, except the stubs the shim implements.
fn shim_def(exports: &[String], stubs: &BTreeSet<String>) -> String {
    let mut def = String::from("LIBRARY ucrtbase.dll\nEXPORTS\n");
    for name in exports {
        match shim_function(name).filter(|_| stubs.contains(name)) {
            Some(f) => def.push_str(&format!("  {name} = {f}\n")),
            None => def.push_str(&format!("  {name} = ucrtwine.{name}\n")),
        }
    }
    def
}

/// Compile and link the shim in `dir` (no CRT: it takes its math from ucrtwine.dll).
fn build(ctx: &Ctx, dir: &Path) -> Result<()> {
    run_tool(
        "making ucrtwine.lib with llvm-dlltool-19",
        ctx.tools.cmd("llvm_dlltool").current_dir(dir).args([
            "-m",
            "i386:x86-64",
            "-d",
            "ucrtwine.def",
            "-l",
            "ucrtwine.lib",
        ]),
    )?;
    run_tool(
        "compiling the ucrtbase shim with clang-cl-19",
        ctx.tools.cmd("clang_cl").current_dir(dir).args([
            "/nologo",
            "/O2",
            "/Zl",
            "/GS-",
            "/c",
            "/Foshim.obj",
            "shim.c",
        ]),
    )?;
    run_tool(
        "linking the ucrtbase shim with lld-link-19",
        ctx.tools.cmd("lld_link").current_dir(dir).args([
            "/nologo",
            "/machine:x64",
            "/dll",
            "/noentry",
            "/nodefaultlib",
            "/def:ucrtbase.def",
            "/out:ucrtbase.dll",
            "shim.obj",
            "ucrtwine.lib",
        ]),
    )?;
    Ok(())
}

/// The named exports of Wine's ucrtbase, and those that are winebuild stubs: code
/// `sub rsp,0x28; lea rcx,[rip+module]; lea rdx,[rip+name]; call __wine_spec_unimplemented_stub`
/// whose name string is the export's own name.
fn exports_and_stubs(bytes: &[u8]) -> Result<(Vec<String>, BTreeSet<String>)> {
    let pe = PE::parse(bytes).map_err(|e| format!("Wine's ucrtbase.dll: {e}"))?;
    let mut names = Vec::new();
    let mut stubs = BTreeSet::new();
    for e in &pe.exports {
        let Some(name) = e.name else { continue };
        names.push(name.to_string());
        if is_stub(bytes, &pe, e.rva as u32, name) {
            stubs.insert(name.to_string());
        }
    }
    Ok((names, stubs))
}

fn is_stub(bytes: &[u8], pe: &PE, rva: u32, name: &str) -> bool {
    let Some(code) = pe::offset(&pe.sections, rva).and_then(|o| bytes.get(o..o + 23)) else {
        return false;
    };
    let shape = code[..4] == [0x48, 0x83, 0xec, 0x28]
        && code[4..7] == [0x48, 0x8d, 0x0d]
        && code[11..14] == [0x48, 0x8d, 0x15]
        && code[18] == 0xe8;
    if !shape {
        return false;
    }
    let disp = i32::from_le_bytes(code[14..18].try_into().unwrap());
    let target = (rva as i64 + 18 + disp as i64) as u32;
    let Some(at) = pe::offset(&pe.sections, target) else {
        return false;
    };
    let s = &bytes[at..];
    s.starts_with(name.as_bytes()) && s.get(name.len()) == Some(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shim_names() {
        assert_eq!(shim_function("crealf").as_deref(), Some("shim_crealf"));
        assert_eq!(shim_function("creall").as_deref(), Some("shim_creal"));
        assert_eq!(shim_function("clog10f").as_deref(), Some("shim_clog10f"));
        assert_eq!(shim_function("_LCmulcc").as_deref(), Some("shim__Cmulcc"));
        assert_eq!(shim_function("cosf"), None);
        assert_eq!(shim_function("sinl"), None);
        let stubs: BTreeSet<String> = ["crealf".to_string()].into();
        let def = shim_def(&["crealf".into(), "creal".into()], &stubs);
        assert!(def.contains("  crealf = shim_crealf\n  creal = ucrtwine.creal\n"));
    }
}
