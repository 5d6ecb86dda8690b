//! Windows's rules.

use std::path::{Path, PathBuf};

use crate::{windows_site_packages, DevSearch, LinkMethod, Os, PlatformRules};

pub(crate) struct Windows;

impl PlatformRules for Windows {
    fn os(&self) -> Os {
        Os::Windows
    }
    fn name(&self) -> &'static str {
        "windows"
    }
    fn remove_file_command(&self, path: &Path) -> String {
        format!("del \"{}\"", path.display())
    }
    fn move_file_command(&self, from: &Path, to: &Path) -> String {
        format!("move /-Y \"{}\" \"{}\"", from.display(), to.display())
    }
    fn cache_bases(&self) -> &'static [(&'static str, &'static [&'static str])] {
        &[
            ("LOCALAPPDATA", &[]),
            ("XDG_CACHE_HOME", &[]),
            ("HOME", &[".cache"]),
        ]
    }
    fn home_vars(&self) -> &'static [&'static str] {
        &["HOME", "USERPROFILE"]
    }
    fn config_base(&self) -> (&'static str, &'static [&'static str]) {
        ("APPDATA", &["AppData", "Roaming"])
    }
    fn shared_lib_dir(&self) -> &'static str {
        "bin"
    }
    /// FFmpeg's and most MinGW-built libraries' `stem-N.dll`.
    fn versioned_lib_name(&self, stem: &str, major: u32) -> String {
        format!("{stem}-{major}.dll")
    }
    fn link_file_names(&self, name: &str) -> Vec<String> {
        vec![format!("{name}.lib"), format!("lib{name}.lib")]
    }
    fn static_lib_name(&self, name: &str) -> String {
        format!("{name}.lib")
    }
    fn linked_shared_lib(&self, name: &str) -> (String, Option<String>) {
        (format!("{name}.dll"), Some(format!("{name}.lib")))
    }
    fn is_native_name(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        lower.ends_with(".dll") || lower.ends_with(".pyd")
    }
    fn path_separator(&self) -> char {
        '\\'
    }
    /// GetTempPath reads TMP, then TEMP; MSVC, clang-cl and Python read either.
    fn temp_dir_vars(&self) -> &'static [&'static str] {
        &["TMP", "TEMP"]
    }
    fn gnu_cxx(&self) -> bool {
        false
    }
    fn default_platform_tag(&self) -> Option<&'static str> {
        Some("win-amd64")
    }
    fn searches_own_dir_and_path(&self) -> bool {
        true
    }
    fn env_names_fold_case(&self) -> bool {
        true
    }
    fn system_library_dirs(&self) -> &'static [&'static str] {
        &[]
    }
    fn ffmpeg_install_hint(&self) -> &'static str {
        "install a *shared* FFmpeg build and put its bin directory on PATH"
    }
    fn program_path_limit(&self) -> Option<usize> {
        Some(260)
    }
    fn driver_ships_hip_runtime(&self) -> bool {
        true
    }
    fn runs_under_wine(&self) -> bool {
        true
    }
    fn rocm_env_vars(&self) -> [&'static str; 2] {
        ["$HIP_PATH", "$ROCM_PATH"]
    }
    fn rocm_install_hint(&self) -> &'static str {
        "install the AMD HIP SDK (C:\\Program Files\\AMD\\ROCm\\<version>) matching your driver's runtime, or TheRock's pip packages into the venv (pip install rocm-sdk-core rocm-sdk-devel, then rocm-sdk init)"
    }
    fn env_data_prefix(&self) -> Option<&'static str> {
        Some("Library")
    }
    fn binary_format(&self) -> &'static str {
        "PE"
    }
    fn dev_search(&self) -> DevSearch {
        DevSearch {
            prefixes: &[],
            multiarch: false,
            kegs: None,
            compiler_vars: Some(("INCLUDE", "LIB")),
        }
    }
    fn program_files_x86(&self) -> Option<(&'static str, &'static str)> {
        Some(("ProgramFiles(x86)", r"C:\Program Files (x86)"))
    }
    fn oneapi_mkl_dirs(&self) -> &'static [&'static str] {
        &[r"Intel\oneAPI\mkl\latest"]
    }
    fn msvc_style_compilers(&self) -> bool {
        true
    }
    fn exe_suffix(&self) -> &'static str {
        ".exe"
    }
    fn shared_lib_suffix(&self) -> &'static str {
        ".dll"
    }
    fn extension_suffix(&self) -> &'static str {
        ".pyd"
    }
    fn scripts_dir(&self) -> &'static str {
        "Scripts"
    }
    fn library_search_var(&self) -> &'static str {
        "PATH"
    }
    fn path_list_separator(&self) -> &'static str {
        ";"
    }
    fn link_method(&self) -> LinkMethod {
        LinkMethod::Preload
    }
    /// `Lib\site-packages` (a venv and a conda env alike).
    fn site_packages(&self, root: &Path) -> Option<PathBuf> {
        let p = windows_site_packages(root);
        p.is_dir().then_some(p)
    }
    /// `Scripts\python.exe` in a venv; a conda env keeps `python.exe` at its root.
    fn venv_python(&self, root: &Path) -> PathBuf {
        let scripts = self.venv_executable(root, "python");
        if scripts.exists() {
            scripts
        } else {
            root.join("python.exe")
        }
    }
}
