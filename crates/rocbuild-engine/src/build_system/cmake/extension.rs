//! `[python] from = "extension"`: the Python part as a wheel rocbuild assembles itself. A small
//! CMake project that rocbuild writes compiles the native module (pybind11) with the library's
//! own toolchain (every `CMAKE_*` and `Python*` define of the library's configure: compilers,
//! flags, a cross toolchain file, the compiler cache), installs it beside the checkout's
//! pure-Python package, and rocbuild zips that tree into a wheel tagged for the venv's Python.
//! pip then installs the wheel into the transaction's stage, as for `from = "source"`.
//!
//! This is what builds a Python part for a Windows venv on Linux: setuptools compiles with the
//! host's compiler for the host and cannot drive clang-cl.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocbuild_probe::{Machine, Os};
use rocbuild_recipe::{PythonExtension, Recipe};
use rocbuild_venv::wheel::Tags;
use serde::Serialize;

use crate::command::Command;
use crate::error::{EngineError, Result};
use crate::paths::join;
use crate::source::plan::SourcePlan;
use crate::toolchain::tools::ToolsPlan;
use crate::vars::expand;

/// The steps of the module's build and the wheel they make.
#[derive(Debug, Clone, Serialize)]
pub struct ExtensionBuild {
    pub module: String,
    /// rocbuild's CMake project: its directory and its `CMakeLists.txt` (written at run time).
    pub project_dir: PathBuf,
    pub cmakelists: String,
    pub configure: Command,
    pub build: Command,
    /// `cmake --install` into `root`: the wheel's files, as they will sit in site-packages.
    pub install: Command,
    pub root: PathBuf,
    pub wheel_dir: PathBuf,
    /// The wheel's name part (`ctranslate2`), METADATA and tags.
    pub name: String,
    pub metadata: String,
    pub tags: Tags,
    /// The dist-info's other files: `top_level.txt`, and `entry_points.txt` when the package
    /// has console scripts.
    pub dist_info: Vec<(String, String)>,
}

/// What the extension's plan needs from the library's.
pub struct Inputs<'a> {
    pub recipe: &'a Recipe,
    pub machine: &'a Machine,
    pub version: &'a str,
    pub ext: &'a PythonExtension,
    pub vars: &'a BTreeMap<String, String>,
    pub source: &'a SourcePlan,
    pub build_dir: &'a Path,
    pub library_configure: &'a Command,
    pub tools: Option<&'a ToolsPlan>,
}

pub fn plan(i: Inputs) -> Result<ExtensionBuild> {
    let os = i.machine.target.platform.os;
    let host = i.machine.host.platform.os;
    let py = &i.machine.target.python;
    let dir = |leaf: &str| join(host, i.build_dir, &["rocbuild-python-extension", leaf]);
    let (project_dir, ext_build, root) = (dir("project"), dir("build"), dir("root"));
    let prefix = i.vars.get("prefix").cloned().unwrap_or_default();
    let mut configure = Command::new(i.library_configure.program.clone()).args([
        "-S".to_string(),
        project_dir.display().to_string(),
        "-B".into(),
        ext_build.display().to_string(),
        "-G".into(),
        "Ninja".into(),
    ]);
    configure.env = i.library_configure.env.clone();
    let mut define: BTreeMap<String, String> = toolchain_defines(i.library_configure);
    define.insert("ROCBUILD_SOURCE".into(), slashes(i.source.dir()));
    define.insert("ROCBUILD_PREFIX".into(), prefix.replace('\\', "/"));
    if let Some(t) = i.tools {
        let p = join(host, &t.dir, &["pybind11", "share", "cmake", "pybind11"]);
        define.insert("pybind11_DIR".into(), slashes(&p));
    }
    for k in ["Python3_EXECUTABLE", "Python_EXECUTABLE"] {
        define.entry(k.into()).or_insert_with(|| slashes(&py.exe));
    }
    define.remove("CMAKE_INSTALL_PREFIX");
    configure = configure.args(define.iter().map(|(k, v)| format!("-D{k}={v}")));
    let cmake = i.library_configure.program.clone();
    let mut build =
        Command::new(cmake.clone()).args(["--build".to_string(), ext_build.display().to_string()]);
    build.env = configure.env.clone();
    let install = Command::new(cmake).args([
        "--install".to_string(),
        ext_build.display().to_string(),
        "--prefix".into(),
        root.display().to_string(),
    ]);
    let raw = &i.recipe.raw;
    let name = rocbuild_probe::normalize_dist(&raw.package.distribution).replace('-', "_");
    Ok(ExtensionBuild {
        module: i.ext.module.clone(),
        cmakelists: cmakelists(i.recipe.name(), i.ext, i.vars, &py.ext_suffix)?,
        project_dir,
        configure,
        build,
        install,
        root,
        wheel_dir: dir("wheel"),
        metadata: metadata(i.recipe, i.version),
        tags: tags(&py.version, &py.ext_suffix, &py.platform, os),
        dist_info: dist_info(i.ext),
        name,
    })
}

/// `top_level.txt` and, with console scripts, `entry_points.txt`.
fn dist_info(ext: &PythonExtension) -> Vec<(String, String)> {
    let top = ext.module.split('.').next().unwrap_or_default();
    let mut out = vec![("top_level.txt".to_string(), format!("{top}\n"))];
    if !ext.console_scripts.is_empty() {
        let mut t = String::from("[console_scripts]\n");
        for (name, target) in &ext.console_scripts {
            t += &format!("{name} = {target}\n");
        }
        out.push(("entry_points.txt".into(), t));
    }
    out
}

/// The library configure's toolchain: its `CMAKE_*` and `Python*` defines.
fn toolchain_defines(c: &Command) -> BTreeMap<String, String> {
    c.args
        .iter()
        .filter_map(|a| a.strip_prefix("-D")?.split_once('='))
        .filter(|(k, _)| k.starts_with("CMAKE_") || k.starts_with("Python"))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn slashes(p: &Path) -> String {
    p.display().to_string().replace('\\', "/")
}

/// A CMake string literal.
fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "/").replace('"', "\\\""))
}

/// rocbuild's CMake project for the module.
fn cmakelists(
    recipe: &str,
    ext: &PythonExtension,
    vars: &BTreeMap<String, String>,
    suffix: &str,
) -> Result<String> {
    let (package, target) = ext
        .module
        .rsplit_once('.')
        .ok_or_else(|| EngineError::Usage {
            option: "[python.extension] module".into(),
            reason: format!("`{}` is not a module inside a package", ext.module),
            help: Some("name it as Python imports it, such as ctranslate2._ext".into()),
        })?;
    let dest = package.replace('.', "/");
    let expand_all =
        |v: &[String]| -> Result<Vec<String>> { v.iter().map(|s| expand(s, vars)).collect() };
    let globs: Vec<String> = expand_all(&ext.sources)?
        .iter()
        .map(|g| quoted(&format!("${{ROCBUILD_SOURCE}}/{g}")))
        .collect();
    let include: Vec<String> = expand_all(&ext.include)?
        .iter()
        .map(|s| quoted(s))
        .collect();
    let links = expand_all(&ext.link)?;
    let pkg_dir = quoted(&format!(
        "${{ROCBUILD_SOURCE}}/{}/",
        expand(&ext.package, vars)?
    ));
    let mut t = format!(
        "# Written by rocbuild for the recipe {recipe}: the Python module {module}, compiled with\n\
         # the library's own toolchain, installed beside the package's Python files.\n\
         cmake_minimum_required(VERSION 3.18)\n\
         project(rocbuild_python_extension CXX)\n\
         set(CMAKE_CXX_STANDARD {std})\n\
         set(CMAKE_CXX_STANDARD_REQUIRED ON)\n\
         find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)\n\
         find_package(pybind11 CONFIG REQUIRED)\n\
         file(GLOB rocbuild_sources CONFIGURE_DEPENDS {globs})\n\
         if(NOT rocbuild_sources)\n  \
           message(FATAL_ERROR \"rocbuild: no file of the checkout matches {plain}: check [python.extension] sources\")\n\
         endif()\n\
         pybind11_add_module({target} MODULE ${{rocbuild_sources}})\n",
        module = ext.module,
        std = ext.cxx_standard,
        globs = globs.join(" "),
        plain = ext.sources.join(", ").replace('"', "'"),
    );
    if !include.is_empty() {
        t += &format!(
            "target_include_directories({target} PRIVATE {})\n",
            include.join(" ")
        );
    }
    for lib in &links {
        let var = format!(
            "rocbuild_lib_{}",
            lib.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
        );
        t += &format!(
            "find_library({var} NAMES {lib} PATHS \"${{ROCBUILD_PREFIX}}/lib\" \"${{ROCBUILD_PREFIX}}/lib64\" NO_DEFAULT_PATH)\n\
             if(NOT {var})\n  \
               message(FATAL_ERROR \"rocbuild: the library {lib} is not in ${{ROCBUILD_PREFIX}}/lib: check [python.extension] link\")\n\
             endif()\n\
             target_link_libraries({target} PRIVATE ${{{var}}})\n"
        );
    }
    t += &format!(
        "set_target_properties({target} PROPERTIES PREFIX \"\" SUFFIX {suffix})\n\
         install(TARGETS {target} LIBRARY DESTINATION {dest} RUNTIME DESTINATION {dest})\n\
         install(DIRECTORY {pkg_dir} DESTINATION {dest} PATTERN \"__pycache__\" EXCLUDE PATTERN \"*.pyc\" EXCLUDE)\n",
        suffix = quoted(suffix),
    );
    Ok(t)
}

/// METADATA: the recipe's distribution and version, its run-time requirements.
fn metadata(recipe: &Recipe, version: &str) -> String {
    let raw = &recipe.raw;
    let mut m = format!(
        "Metadata-Version: 2.1\nName: {}\nVersion: {version}\nSummary: {}\n",
        raw.package.distribution, raw.package.description
    );
    for r in &raw.needs.python {
        m += &format!("Requires-Dist: {r}\n");
    }
    m
}

/// The wheel tags of the venv's Python, from what the probe read (no subprocess: the venv's
/// Python may be a Windows program on this host, and the probe asked it already). See
/// [`tags_of_venv`]. The ABI flags are the letters after the version in the extension suffix
/// (`.cpython-313td-…`: `t` free-threaded, `d` a debug build), as `sys.abiflags` says them.
pub fn tags(version: &str, ext_suffix: &str, platform: &str, os: Os) -> Tags {
    let nodot = version.replace('.', "");
    let abiflags: String = ext_suffix
        .find(&nodot)
        .map(|at| {
            ext_suffix[at + nodot.len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase())
                .collect()
        })
        .unwrap_or_default();
    let abiflags = abiflags.as_str();
    let platform = match (os.rules().default_platform_tag(), platform) {
        (Some(tag), "") => tag,
        (_, p) => p,
    };
    Tags::new(version, abiflags, platform)
}

/// The wheel tags of the venv `layout` found (for the OS it decided): asked of its Python
/// when it runs on this host, read from its files when the venv is another OS's (a Windows
/// venv on Linux).
pub fn tags_of_venv(layout: &rocbuild_venv::layout::VenvLayout) -> Result<Tags> {
    let os = layout.os;
    if os == Os::current() {
        let py = rocbuild_probe::python_in_venv(&layout.root, os);
        return Ok(Tags::of_python(&py)?);
    }
    let py = rocbuild_probe::cross::python_from_files(&layout.root, &layout.site, os, None);
    Ok(tags(&py.version, &py.ext_suffix, &py.platform, os))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext() -> PythonExtension {
        PythonExtension {
            module: "pkg.sub._ext".into(),
            sources: vec!["python/cpp/*.cc".into()],
            package: "python/pkg".into(),
            include: vec!["{prefix}/include".into()],
            link: vec!["core-lib".into()],
            cxx_standard: 20,
            console_scripts: BTreeMap::from([(
                "pkg-tool".to_string(),
                "pkg.tool:main".to_string(),
            )]),
        }
    }

    #[test]
    fn the_project_installs_the_module_in_its_package_beside_the_python_files() {
        let vars = BTreeMap::from([("prefix".to_string(), "/b/prefix".to_string())]);
        let t = cmakelists("r", &ext(), &vars, ".cp311-win_amd64.pyd").unwrap();
        assert!(t.contains("pybind11_add_module(_ext MODULE"), "{t}");
        assert!(t.contains("\"${ROCBUILD_SOURCE}/python/cpp/*.cc\""), "{t}");
        assert!(
            t.contains("target_include_directories(_ext PRIVATE \"/b/prefix/include\")"),
            "{t}"
        );
        assert!(
            t.contains("find_library(rocbuild_lib_core_lib NAMES core-lib"),
            "{t}"
        );
        assert!(t.contains("SUFFIX \".cp311-win_amd64.pyd\""), "{t}");
        assert!(
            t.contains("DESTINATION pkg/sub RUNTIME DESTINATION pkg/sub"),
            "{t}"
        );
        assert!(
            t.contains("install(DIRECTORY \"${ROCBUILD_SOURCE}/python/pkg/\" DESTINATION pkg/sub"),
            "{t}"
        );
        assert!(t.contains("set(CMAKE_CXX_STANDARD 20)"), "{t}");
    }

    #[test]
    fn the_console_scripts_go_to_entry_points_txt() {
        let d = dist_info(&ext());
        assert_eq!(d[0], ("top_level.txt".to_string(), "pkg\n".to_string()));
        assert_eq!(
            d[1],
            (
                "entry_points.txt".to_string(),
                "[console_scripts]\npkg-tool = pkg.tool:main\n".to_string()
            )
        );
    }

    #[test]
    fn only_the_toolchain_of_the_library_configure_is_kept() {
        let c = Command::new("cmake").args([
            "-S",
            "/src",
            "-DCMAKE_TOOLCHAIN_FILE=/t.cmake",
            "-DWITH_MKL=OFF",
            "-DPython3_LIBRARY=/p.lib",
            "-DCMAKE_CXX_FLAGS=-O2 -x=y",
        ]);
        let d = toolchain_defines(&c);
        assert_eq!(
            d.keys().collect::<Vec<_>>(),
            ["CMAKE_CXX_FLAGS", "CMAKE_TOOLCHAIN_FILE", "Python3_LIBRARY"]
        );
        assert_eq!(d["CMAKE_CXX_FLAGS"], "-O2 -x=y");
    }

    #[test]
    fn tags_come_from_the_probed_python_without_running_it() {
        let t = tags("3.11", ".cp311-win_amd64.pyd", "win-amd64", Os::Windows);
        assert_eq!(
            (t.python.as_str(), t.abi.as_str(), t.platform.as_str()),
            ("cp311", "cp311", "win_amd64")
        );
        let t = tags(
            "3.13",
            ".cpython-313t-x86_64-linux-gnu.so",
            "linux-x86_64",
            Os::Linux,
        );
        assert_eq!(
            (t.abi.as_str(), t.platform.as_str()),
            ("cp313t", "linux_x86_64")
        );
        // A debug build's flags, as `sys.abiflags` says them (`Tags::of_python` asks it).
        let t = tags(
            "3.13",
            ".cpython-313td-x86_64-linux-gnu.so",
            "linux-x86_64",
            Os::Linux,
        );
        assert_eq!(t.abi.as_str(), "cp313td");
        let t = tags(
            "3.11",
            ".cpython-311-x86_64-linux-gnu.so",
            "linux-x86_64",
            Os::Linux,
        );
        assert_eq!(t.abi.as_str(), "cp311");
    }
}
