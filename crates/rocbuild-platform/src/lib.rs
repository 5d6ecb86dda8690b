//! Every OS difference rocbuild knows, in one crate.
//!
//! - The rules of a *target* OS, as values: one trait, [`PlatformRules`], with an
//!   implementation per OS ([`linux`], [`macos`], [`windows`]) chosen from an [`Os`] value at
//!   run time, so every OS's rules run in tests on any host (a Windows plan is made on Linux).
//!   File suffixes, a venv's layout read from its files (root, site-packages, interpreter,
//!   scripts; Linux/macOS/Windows venvs and conda envs), the loader's search rules and how
//!   installed libraries find their dependencies, and the words a user of that OS is told. No
//!   other file spells `Scripts`, `Lib/site-packages` or `lib/pythonX.Y` (a test checks).
//! - The calls *this host* makes to its own OS ([`host`], [`signal`]): links, permission bits,
//!   process groups, file locks and sharing, signals. They are chosen when rocbuild is
//!   compiled (`#[cfg]`), so the rest of the workspace never is.
//!
//! A file elsewhere that names an OS is counted by the architecture test (at most 8, each
//! with its reason in a comment).

pub mod host;
pub mod libname;
mod linux;
mod macos;
pub mod signal;
pub mod state_files;
mod unix;
mod windows;

use std::path::{Path, PathBuf};

/// How an installed native library finds the libraries it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMethod {
    /// ELF `DT_RUNPATH` entries (`$ORIGIN/../torch/lib`).
    Runpath,
    /// Mach-O `LC_RPATH` entries (`@loader_path/…`), then a new ad-hoc signature.
    LoaderPath,
    /// Windows DLLs hold no search path: a preload hook adds directories and loads them.
    Preload,
}

/// Where a build looks for system headers and libraries (after the venv's and the
/// variables every compiler reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevSearch {
    /// Prefixes holding `include/` and `lib/`, first first.
    pub prefixes: &'static [&'static str],
    /// Debian-style multiarch folders (`include/<triplet>`, `lib/<triplet>`) and `lib64`.
    pub multiarch: bool,
    /// A folder under each prefix whose subfolders are prefixes too (Homebrew's `opt`).
    pub kegs: Option<&'static str>,
    /// The variables listing include and library folders (MSVC's `INCLUDE`, `LIB`).
    pub compiler_vars: Option<(&'static str, &'static str)>,
}

/// What differs between operating systems, for the files rocbuild reads and writes.
pub trait PlatformRules: Sync {
    fn os(&self) -> Os;
    /// `linux`, `macos`, `windows`: the name in recipes, plans and `--machine` files.
    fn name(&self) -> &'static str;
    /// The command a user of this OS types to remove one file (`rm '…'`, `del "…"`).
    fn remove_file_command(&self, path: &Path) -> String;
    /// The command a user of this OS types to move one file to where nothing is, and that
    /// never overwrites what is there (`mkdir -p … && mv -n '…' '…'`, `move /-Y "…" "…"`).
    fn move_file_command(&self, from: &Path, to: &Path) -> String;
    /// Where a per-user cache goes, first set variable first: the variable and the folders
    /// under it (`XDG_CACHE_HOME`, then `HOME` + `.cache`; `LOCALAPPDATA` first on Windows).
    fn cache_bases(&self) -> &'static [(&'static str, &'static [&'static str])];
    /// The variables naming the user's home, first set first.
    fn home_vars(&self) -> &'static [&'static str];
    /// The per-user config folder: its variable, else these folders under home.
    fn config_base(&self) -> (&'static str, &'static [&'static str]);
    /// The folder of a prefix that holds its shared libraries: `lib`, or `bin` where DLLs
    /// live beside the programs that use them (Windows).
    fn shared_lib_dir(&self) -> &'static str;
    /// The file name of shared library `stem` of major `major` as its build systems name it
    /// (`libavutil.so.58`, `libavutil.58.dylib`, `avutil-58.dll`).
    fn versioned_lib_name(&self, stem: &str, major: u32) -> String;
    /// What the linker is given for library `name`: the files to look for, in order
    /// (`libz.so`, `libz.a`; `z.lib`, `libz.lib`).
    fn link_file_names(&self, name: &str) -> Vec<String>;
    /// A static library's file name (`libmkl_core.a`, `mkl_core.lib`).
    fn static_lib_name(&self, name: &str) -> String;
    /// What a program links against for shared library `name` and what is loaded at run
    /// time: (the shared library, the import library where the linker takes another file).
    fn linked_shared_lib(&self, name: &str) -> (String, Option<String>);
    /// Whether a file with this name is a native library or extension module here.
    fn is_native_name(&self, name: &str) -> bool;
    /// The separator of this OS's paths.
    fn path_separator(&self) -> char;
    /// The variables naming the temporary directory, as its compilers read them.
    fn temp_dir_vars(&self) -> &'static [&'static str];
    /// Whether C++ here is GNU's (libstdc++ and its OpenMP, libgomp): what decides MKL's GNU
    /// threading layer.
    fn gnu_cxx(&self) -> bool;
    /// Whether native code here is built with MSVC-style compilers (cl.exe, clang-cl) rather
    /// than GCC- or clang-style ones.
    fn msvc_style_compilers(&self) -> bool;
    /// The wheel platform tag when a venv names none (a Windows venv read from its files).
    fn default_platform_tag(&self) -> Option<&'static str>;
    /// The loader also searches the library's own folder and `PATH` (Windows' DLL search).
    fn searches_own_dir_and_path(&self) -> bool;
    /// Environment variable names are compared without case (Windows: `Path` is `PATH`).
    fn env_names_fold_case(&self) -> bool {
        false
    }
    /// The system's own library folders the loader searches last, in order.
    fn system_library_dirs(&self) -> &'static [&'static str];
    /// How a user of this OS installs a shared FFmpeg, in words.
    fn ffmpeg_install_hint(&self) -> &'static str;
    /// A Windows program cannot start from a path this long unless long paths are enabled
    /// (MAX_PATH); None where there is no such limit.
    fn program_path_limit(&self) -> Option<usize>;
    /// The object-file format of its programs and libraries, as `rocbuild_native::Format`
    /// shows it (`ELF`, `Mach-O`, `PE`).
    fn binary_format(&self) -> &'static str;
    /// Where a build looks for system headers and libraries.
    fn dev_search(&self) -> DevSearch;
    /// The 32-bit Program Files folder's variable and its usual value, where there is one.
    fn program_files_x86(&self) -> Option<(&'static str, &'static str)>;
    /// Intel oneAPI MKL's usual roots: absolute, or under [`Self::program_files_x86`].
    fn oneapi_mkl_dirs(&self) -> &'static [&'static str];
    /// Whether the GPU driver installs the HIP runtime itself (Windows: `amdhip64_N.dll` in
    /// System32), so that the driver's runtime major is a fact to check against.
    fn driver_ships_hip_runtime(&self) -> bool;
    /// Whether this OS's programs run under Wine on another host.
    fn runs_under_wine(&self) -> bool;
    /// The variables naming a ROCm/HIP SDK, the conventional one first.
    fn rocm_env_vars(&self) -> [&'static str; 2];
    /// How a user of this OS installs a ROCm/HIP SDK, in words.
    fn rocm_install_hint(&self) -> &'static str;
    /// Where a venv's or conda env's packaged C libraries go under its root (`Library` on
    /// Windows: intel-openmp, mkl-static); None where they go at the root.
    fn env_data_prefix(&self) -> Option<&'static str>;
    /// `""` or `".exe"`.
    fn exe_suffix(&self) -> &'static str;
    /// `.so`, `.dylib`, `.dll`.
    fn shared_lib_suffix(&self) -> &'static str;
    /// A Python extension module's suffix (`.so`, `.pyd`).
    fn extension_suffix(&self) -> &'static str;
    /// A venv's directory of executables (`bin`, `Scripts`).
    fn scripts_dir(&self) -> &'static str;
    /// The variable the loader searches (`LD_LIBRARY_PATH`, `DYLD_LIBRARY_PATH`, `PATH`).
    fn library_search_var(&self) -> &'static str;
    /// The separator of path lists (`:`, `;`).
    fn path_list_separator(&self) -> &'static str;
    fn link_method(&self) -> LinkMethod;
    /// site-packages of the venv or conda env at `root`, from its files only.
    fn site_packages(&self, root: &Path) -> Option<PathBuf>;
    /// The interpreter of the venv or conda env at `root`.
    fn venv_python(&self, root: &Path) -> PathBuf {
        self.venv_executable(root, "python")
    }
    /// An executable the venv at `root` installed (`bin/uv`, `Scripts\uv.exe`).
    fn venv_executable(&self, root: &Path, name: &str) -> PathBuf {
        root.join(self.scripts_dir())
            .join(format!("{name}{}", self.exe_suffix()))
    }
}

/// The operating systems rocbuild knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Os {
    Linux,
    Macos,
    Windows,
}

impl Os {
    /// The OS this rocbuild was compiled for.
    pub fn current() -> Os {
        if cfg!(windows) {
            Os::Windows
        } else if cfg!(target_os = "macos") {
            Os::Macos
        } else {
            Os::Linux
        }
    }
    pub fn as_str(self) -> &'static str {
        self.rules().name()
    }
    /// This OS's rules.
    pub fn rules(self) -> &'static dyn PlatformRules {
        match self {
            Os::Linux => &linux::Linux,
            Os::Macos => &macos::Macos,
            Os::Windows => &windows::Windows,
        }
    }
    /// Every OS rocbuild knows, Linux first.
    pub const ALL: [Os; 3] = [Os::Linux, Os::Macos, Os::Windows];
}

/// Where a Windows venv's site-packages is, whether it is there or not (`Lib\site-packages`).
pub fn windows_site_packages(root: &Path) -> PathBuf {
    root.join("Lib").join("site-packages")
}

/// `lib/pythonX.Y/site-packages` for the X.Y its `pyvenv.cfg` names (`version`, or uv's
/// `version_info`) — the rule Python's own `site` module follows, so it names the directory
/// `sysconfig` gives even when an older Python left another `lib/python*` behind. A
/// free-threaded build's is `python3.13t`. Without a `pyvenv.cfg` (a conda env), the newest
/// `lib/python*/site-packages`.
pub(crate) fn unix_site_packages(root: &Path) -> Option<PathBuf> {
    if let Some((maj, min)) = pyvenv_version(root) {
        return [format!("python{maj}.{min}"), format!("python{maj}.{min}t")]
            .into_iter()
            .map(|d| root.join("lib").join(d).join("site-packages"))
            .find(|p| p.is_dir());
    }
    let mut found: Vec<(u32, u32, PathBuf)> = std::fs::read_dir(root.join("lib"))
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (maj, min) = name.strip_prefix("python")?.split_once('.')?;
            let min = min.trim_end_matches(|c: char| !c.is_ascii_digit());
            let sp = e.path().join("site-packages");
            sp.is_dir()
                .then(|| Some((maj.parse().ok()?, min.parse().ok()?, sp)))
                .flatten()
        })
        .collect();
    found.sort();
    found.pop().map(|(_, _, p)| p)
}

/// The Python version a venv was made with, from its `pyvenv.cfg`.
pub(crate) fn pyvenv_version(root: &Path) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string(root.join("pyvenv.cfg")).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        if !matches!(k.trim(), "version" | "version_info") {
            return None;
        }
        let mut it = v.trim().split('.');
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    })
}

/// The site directories outside a venv that its Python also reads packages from, found from
/// its files without running it (the light commands: `status`, `wheel`), in the order `site`
/// adds them: those its `.pth` files name, then, with `include-system-site-packages = true`
/// in `pyvenv.cfg`, the base Python's that exist (`{prefix}/lib/pythonX.Y/site-packages`,
/// Debian's `{prefix}/local/lib/pythonX.Y/dist-packages` and `{prefix}/lib/python3/dist-packages`,
/// `{home}/Lib/site-packages`). Read from only. `site` is the venv's own site-packages.
pub fn shared_sites_of(site: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut push = |p: PathBuf| {
        if p.is_dir() && p != site && !out.contains(&p) {
            out.push(p);
        }
    };
    let mut pths: Vec<PathBuf> = std::fs::read_dir(site)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "pth") && p.is_file())
                .collect()
        })
        .unwrap_or_default();
    pths.sort();
    for pth in pths {
        let text = std::fs::File::open(&pth)
            .and_then(|f| {
                let mut s = String::new();
                std::io::Read::read_to_string(&mut std::io::Read::take(f, 64 * 1024), &mut s)
                    .map(|_| s)
            })
            .unwrap_or_default();
        for line in text.lines().map(str::trim) {
            if !(line.is_empty() || line.starts_with('#') || line.starts_with("import")) {
                push(site.join(line));
            }
        }
    }
    let Some(root) = venv_root_of(site) else {
        return out;
    };
    let cfg = std::fs::read_to_string(root.join("pyvenv.cfg")).unwrap_or_default();
    let value = |key: &str| {
        cfg.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    if value("include-system-site-packages").as_deref() != Some("true") {
        return out;
    }
    let (Some(home), Some((maj, min))) = (value("home"), pyvenv_version(root)) else {
        return out;
    };
    let home = PathBuf::from(home);
    if let Some(prefix) = home.parent() {
        let xy = format!("python{maj}.{min}");
        push(
            prefix
                .join("local")
                .join("lib")
                .join(&xy)
                .join("dist-packages"),
        );
        push(
            prefix
                .join("lib")
                .join(format!("python{maj}"))
                .join("dist-packages"),
        );
        push(prefix.join("lib").join(&xy).join("site-packages"));
    }
    push(windows_site_packages(&home));
    out
}

/// The layouts [`any_site_packages`] knows, in words (for an error that none was found).
pub const SITE_LAYOUTS: &str = "lib/pythonX.Y/site-packages from pyvenv.cfg, or Lib/site-packages";

/// site-packages of the venv at `root` whatever OS it is for: `first`'s layout, then the
/// others' (a Windows venv read from Linux). The one rule every command locates a venv by.
pub fn any_site_packages(root: &Path, first: Os) -> Option<PathBuf> {
    [first, Os::Linux, Os::Windows]
        .into_iter()
        .find_map(|os| os.rules().site_packages(root))
}

/// The venv `path` lies in: its nearest ancestor (itself included) that holds `pyvenv.cfg`.
/// The one place this rule is written (the probe, doctor, the linker, the venv state and the
/// cache check ask here).
pub fn venv_root_of(path: &Path) -> Option<&Path> {
    path.ancestors().find(|a| a.join("pyvenv.cfg").is_file())
}

/// The interpreter of a venv found from one of its files: the first of every OS's layouts
/// that exists (a file read from another OS's venv).
pub fn any_venv_python(root: &Path) -> Option<PathBuf> {
    [Os::Linux, Os::Windows]
        .into_iter()
        .map(|os| os.rules().venv_python(root))
        .find(|p| p.exists())
}

/// Join path parts with the separator of `os` (a Windows plan made on Linux shows `\`).
/// `base\part` as Windows writes it, on any host (a Windows machine's paths read from Linux).
pub fn windows_join(base: &Path, parts: &[&str]) -> PathBuf {
    join(Os::Windows, base, parts)
}

pub fn join(os: Os, base: &Path, parts: &[&str]) -> PathBuf {
    if os == Os::Windows {
        let mut s = base
            .display()
            .to_string()
            .trim_end_matches(['\\', '/'])
            .to_string();
        for p in parts {
            s.push('\\');
            s.push_str(&p.replace('/', "\\"));
        }
        PathBuf::from(s)
    } else {
        parts.iter().fold(base.to_path_buf(), |acc, p| acc.join(p))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_venv_shares_the_sites_its_pth_files_name_and_with_system_site_packages_the_base_ones() {
        let d = tempfile::tempdir().unwrap();
        let (root, base) = (d.path().join("venv"), d.path().join("usr"));
        let site = root.join("lib/python3.13/site-packages");
        let debian = base.join("lib/python3/dist-packages");
        let named = d.path().join("shared");
        for p in [&site, &debian, &named] {
            std::fs::create_dir_all(p).unwrap();
        }
        let cfg = |system: bool| {
            format!(
                "home = {}\ninclude-system-site-packages = {system}\nversion = 3.13.5\n",
                base.join("bin").display()
            )
        };
        std::fs::write(root.join("pyvenv.cfg"), cfg(false)).unwrap();
        assert!(shared_sites_of(&site).is_empty());
        std::fs::write(
            site.join("a.pth"),
            format!(
                "# a comment\nimport os\n{}\n/no/such/dir\n",
                named.display()
            ),
        )
        .unwrap();
        assert_eq!(shared_sites_of(&site), std::slice::from_ref(&named));
        std::fs::write(root.join("pyvenv.cfg"), cfg(true)).unwrap();
        assert_eq!(shared_sites_of(&site), [named, debian]);
    }

    use super::*;

    #[test]
    fn each_os_has_its_layout_and_suffixes() {
        let r = Path::new("/v");
        assert_eq!(Os::Linux.rules().venv_python(r), r.join("bin/python"));
        assert_eq!(
            Os::Windows.rules().venv_executable(r, "uv"),
            r.join("Scripts").join("uv.exe")
        );
        assert_eq!(Os::Macos.rules().shared_lib_suffix(), ".dylib");
        assert_eq!(Os::Windows.rules().extension_suffix(), ".pyd");
        assert_eq!(Os::Macos.rules().library_search_var(), "DYLD_LIBRARY_PATH");
        assert_eq!(Os::Windows.rules().link_method(), LinkMethod::Preload);
        for os in [Os::Linux, Os::Macos, Os::Windows] {
            assert_eq!(os.rules().os(), os);
        }
    }

    /// No file of the workspace's crates but this crate's spells a venv's layout.
    #[test]
    fn no_other_file_spells_a_venv_layout() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut bad = Vec::new();
        let mut stack = vec![crates];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    if !p.ends_with("tests") && !p.ends_with("target") {
                        stack.push(p);
                    }
                    continue;
                }
                let here = p.components().any(|c| c.as_os_str() == "rocbuild-platform");
                if here || p.extension().is_none_or(|x| x != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                // Code only: stop at the unit tests, skip comments and doc text.
                let code = text.split("#[cfg(test)]").next().unwrap_or("");
                for (i, line) in code.lines().enumerate() {
                    let l = line.trim_start();
                    if l.starts_with("//") {
                        continue;
                    }
                    for m in [
                        "\"Scripts\"",
                        "Lib/site-packages",
                        "join(\"Lib\")",
                        "join(\"site-packages\")",
                        "\"lib/python",
                        "\"bin/python",
                        "Scripts/python",
                    ] {
                        if l.contains(m) {
                            bad.push(format!("{}:{}: {}", p.display(), i + 1, l));
                        }
                    }
                }
            }
        }
        assert!(
            bad.is_empty(),
            "ask Os::rules() instead:\n{}",
            bad.join("\n")
        );
    }
}
