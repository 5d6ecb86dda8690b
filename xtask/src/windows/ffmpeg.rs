//! FFmpeg 7.1 for Windows as shared DLLs, laid out `ffmpeg/{include,lib,bin}` (WINDOWS.md's
//! route A): the DLLs from PyPI av 15.1.0's win_amd64 wheel (`av.libs/`, named back from
//! delvewheel's mangled names, their imports patched to match), headers from Debian trixie's
//! `libav*-dev`, import libraries from the DLLs' exports; checked by a program that calls all
//! seven libraries under Wine.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::{copy_tree, fetch, pe, read_file, run_tool, sysroot, unzip, wine, write_file, Ctx};
use crate::util::Result;

/// The seven libraries, as `<lib>-<major>` DLL stems in FFmpeg 7.1.
const LIBS: &[&str] = &[
    "avutil-59",
    "avcodec-61",
    "avformat-61",
    "avfilter-10",
    "avdevice-61",
    "swscale-8",
    "swresample-5",
];

/// Debian's packages with their headers.
const DEV_PACKAGES: &[&str] = &[
    "libavcodec-dev",
    "libavformat-dev",
    "libavutil-dev",
    "libswscale-dev",
    "libswresample-dev",
    "libavfilter-dev",
    "libavdevice-dev",
];

pub fn make(ctx: &Ctx, tmp: &Path) -> Result<Value> {
    let scratch = ctx.scratch("ffmpeg")?;
    let (dlls, wheel_dlls) = dlls(ctx, scratch.path(), &tmp.join("bin"))?;
    verify_imports(ctx, &tmp.join("bin"), &wheel_dlls)?;
    let debian = headers(ctx, scratch.path(), &tmp.join("include"))?;
    let majors = check_majors(&tmp.join("include"))?;
    let data_exports = import_libs(ctx, scratch.path(), tmp)?;
    let run = run_check(ctx, tmp, &majors)?;
    Ok(json!({
        "dlls": dlls,
        "headers_from": debian,
        "majors": majors,
        "data_exports": data_exports,
        "check": run,
    }))
}

/// The seven DLLs and every av.libs DLL they load, directly or not, renamed and patched into
/// `bin`; their new names, and the (lower-case, plain) names of all DLLs in av.libs.
fn dlls(ctx: &Ctx, scratch: &Path, bin: &Path) -> Result<(Vec<String>, BTreeSet<String>)> {
    let whl = fetch::wheel(ctx, "av==15.1.0")?;
    let libs = scratch.join("av.libs");
    unzip(&whl, &libs, |n| {
        let f = n.strip_prefix("av.libs/")?;
        (!f.contains('/') && f.to_ascii_lowercase().ends_with(".dll")).then(|| PathBuf::from(f))
    })?;
    // lower-case wheel name → (wheel name, plain name)
    let mut names = BTreeMap::new();
    for e in std::fs::read_dir(&libs).map_err(|e| format!("{}: {e}", libs.display()))? {
        let n = e
            .map_err(|e| e.to_string())?
            .file_name()
            .to_string_lossy()
            .into_owned();
        let plain = pe::plain_name(&n).unwrap_or_else(|| n.clone());
        names.insert(n.to_ascii_lowercase(), (n, plain));
    }
    let mut todo: Vec<String> = Vec::new();
    for lib in LIBS {
        let want = format!("{lib}.dll");
        let (n, _) = names.values().find(|(_, p)| *p == want).ok_or_else(|| {
            format!(
                "{} has no {want} in av.libs (FFmpeg's majors changed?)",
                whl.display()
            )
        })?;
        todo.push(n.clone());
    }
    let mut done = BTreeSet::new();
    while let Some(n) = todo.pop() {
        if !done.insert(n.clone()) {
            continue;
        }
        let mut bytes = read_file(&libs.join(&n))?;
        for import in pe::imports(&bytes).map_err(|e| format!("{n}: {e}"))? {
            if let Some((dep, _)) = names.get(&import.to_ascii_lowercase()) {
                todo.push(dep.clone());
            }
        }
        let rename = |old: &str| names.get(&old.to_ascii_lowercase()).map(|(_, p)| p.clone());
        pe::rename_dlls(&mut bytes, &rename).map_err(|e| format!("patching {n}: {e}"))?;
        write_file(&bin.join(&names[&n.to_ascii_lowercase()].1), &bytes)?;
    }
    let made = done
        .iter()
        .map(|n| names[&n.to_ascii_lowercase()].1.clone())
        .collect();
    let all = names
        .values()
        .map(|(_, p)| p.to_ascii_lowercase())
        .collect();
    Ok((made, all))
}

/// `llvm-readobj --coff-imports` on every DLL in `bin`: no mangled name is left, and every
/// import of a DLL that came from av.libs is in `bin`.
fn verify_imports(ctx: &Ctx, bin: &Path, wheel_dlls: &BTreeSet<String>) -> Result<()> {
    let files: Vec<String> = std::fs::read_dir(bin)
        .map_err(|e| format!("{}: {e}", bin.display()))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let present: BTreeSet<String> = files.iter().map(|f| f.to_ascii_lowercase()).collect();
    for dll in &files {
        let out = run_tool(
            "llvm-readobj-19 --coff-imports",
            ctx.tools
                .cmd("llvm_readobj")
                .arg("--coff-imports")
                .arg(bin.join(dll)),
        )?;
        for name in out.lines().filter_map(|l| l.trim().strip_prefix("Name: ")) {
            if !name.to_ascii_lowercase().ends_with(".dll") {
                continue;
            }
            if pe::plain_name(name).is_some() {
                return Err(format!("{dll} still imports the mangled name {name}"));
            }
            let lower = name.to_ascii_lowercase();
            if wheel_dlls.contains(&lower) && !present.contains(&lower) {
                return Err(format!(
                    "{dll} imports {name}, which is not in {}",
                    bin.display()
                ));
            }
        }
    }
    Ok(())
}

/// Debian trixie's `libav*-dev` headers into `include`; the packages' file names.
fn headers(ctx: &Ctx, scratch: &Path, include: &Path) -> Result<Vec<String>> {
    let debs = fetch::debs(ctx, DEV_PACKAGES)?;
    let root = scratch.join("deb");
    for deb in &debs {
        run_tool(
            &format!("unpacking {}", deb.display()),
            Command::new("dpkg-deb").arg("-x").arg(deb).arg(&root),
        )?;
    }
    for dir in [
        root.join("usr/include/x86_64-linux-gnu"),
        root.join("usr/include"),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("lib") && e.path().is_dir() {
                copy_tree(&e.path(), &include.join(&name))?;
            }
        }
    }
    Ok(debs
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect())
}

/// Each library's `LIB<X>_VERSION_MAJOR` in the headers equals its DLL's major; lib → major.
fn check_majors(include: &Path) -> Result<BTreeMap<String, u32>> {
    let mut out = BTreeMap::new();
    for lib in LIBS {
        let (name, major) = lib.split_once('-').unwrap();
        let macro_name = format!("LIB{}_VERSION_MAJOR", name.to_ascii_uppercase());
        let found = ["version_major.h", "version.h"].iter().find_map(|f| {
            let text = std::fs::read_to_string(include.join(format!("lib{name}/{f}"))).ok()?;
            text.lines().find_map(|l| {
                let rest = l.trim().strip_prefix("#define")?.trim();
                rest.strip_prefix(macro_name.as_str())?
                    .trim()
                    .parse::<u32>()
                    .ok()
            })
        });
        let found =
            found.ok_or_else(|| format!("no {macro_name} in {}/lib{name}/", include.display()))?;
        if found.to_string() != major {
            return Err(format!(
                "Debian's headers have {macro_name} {found} but the DLL is {lib}.dll: the headers do not match the DLLs"
            ));
        }
        out.insert(name.to_string(), found);
    }
    Ok(out)
}

/// `lib/<lib>.lib` for the seven DLLs, from a `.def` of each one's exports; how many exports
/// were marked DATA per library.
fn import_libs(ctx: &Ctx, scratch: &Path, out: &Path) -> Result<BTreeMap<String, usize>> {
    std::fs::create_dir_all(out.join("lib")).map_err(|e| format!("cannot create lib: {e}"))?;
    let mut data = BTreeMap::new();
    for lib in LIBS {
        let name = lib.split_once('-').unwrap().0;
        let dll = format!("{lib}.dll");
        let (def, n) = pe::exports_def(&read_file(&out.join("bin").join(&dll))?, &dll)
            .map_err(|e| format!("{dll}: {e}"))?;
        let def_path = scratch.join(format!("{name}.def"));
        write_file(&def_path, def)?;
        run_tool(
            &format!("making {name}.lib with llvm-dlltool-19"),
            ctx.tools
                .cmd("llvm_dlltool")
                .args(["-m", "i386:x86-64", "-d"])
                .arg(&def_path)
                .arg("-l")
                .arg(out.join("lib").join(format!("{name}.lib"))),
        )?;
        data.insert(name.to_string(), n);
    }
    Ok(data)
}

const CHECK_C: &str = r#"#include <stdio.h>
#include <libavutil/avutil.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavfilter/avfilter.h>
#include <libavdevice/avdevice.h>
#include <libswscale/swscale.h>
#include <libswresample/swresample.h>
int main(void) {
    const AVCodec *h264 = avcodec_find_decoder(AV_CODEC_ID_H264);
    printf("ffmpeg %s\n", av_version_info());
    printf("majors %u %u %u %u %u %u %u\n", avutil_version() >> 16, avcodec_version() >> 16,
           avformat_version() >> 16, avfilter_version() >> 16, avdevice_version() >> 16,
           swscale_version() >> 16, swresample_version() >> 16);
    printf("h264 %s\n", h264 ? h264->name : "missing");
    return 0;
}
"#;

/// A program built against include/ and lib/ with the sysroot calls all seven DLLs from bin/
/// under Wine.
fn run_check(ctx: &Ctx, ff: &Path, majors: &BTreeMap<String, u32>) -> Result<Value> {
    let scratch = ctx.scratch("ffmpeg-check")?;
    let dir = scratch.path();
    let sysroot = ctx.out("sysroot");
    write_file(&dir.join("ffcheck.c"), CHECK_C)?;
    let inc = ff.join("include").display().to_string();
    sysroot::compile(ctx, &sysroot, dir, "ffcheck.c", &["/I", &inc])?;
    let libpath = format!("/libpath:{}", ff.join("lib").display());
    let mut inputs = vec!["ffcheck.obj", libpath.as_str(), "kernel32.lib"];
    let libs: Vec<String> = LIBS
        .iter()
        .map(|l| format!("{}.lib", l.split('-').next().unwrap()))
        .collect();
    inputs.extend(libs.iter().map(String::as_str));
    sysroot::link(ctx, &sysroot, dir, &inputs, "ffcheck.exe", false)?;
    let env = wine::winepath(&[&ff.join("bin")]);
    let ran = ctx.wine.run(
        &dir.join("ffcheck.exe"),
        &[],
        dir,
        &env,
        Duration::from_secs(120),
    )?;
    let order = [
        "avutil",
        "avcodec",
        "avformat",
        "avfilter",
        "avdevice",
        "swscale",
        "swresample",
    ];
    let want: Vec<String> = order.iter().map(|l| majors[*l].to_string()).collect();
    let want = format!("majors {}", want.join(" "));
    let out = ran.stdout.trim().to_string();
    if !out.lines().any(|l| l == want) || !out.contains("h264 h264") {
        return Err(format!(
            "the FFmpeg check program printed {out:?} under Wine; expected `{want}` and `h264 h264`"
        ));
    }
    Ok(json!({ "printed": out, "secs": ran.secs }))
}
