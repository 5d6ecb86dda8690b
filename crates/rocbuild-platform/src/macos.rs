//! Macos's rules.

use std::path::{Path, PathBuf};

use crate::{unix_site_packages, DevSearch, LinkMethod, Os, PlatformRules};

pub(crate) struct Macos;

impl PlatformRules for Macos {
    fn os(&self) -> Os {
        Os::Macos
    }
    fn name(&self) -> &'static str {
        "macos"
    }
    fn remove_file_command(&self, path: &Path) -> String {
        format!("rm '{}'", path.display())
    }
    fn cache_bases(&self) -> &'static [(&'static str, &'static [&'static str])] {
        &[("XDG_CACHE_HOME", &[]), ("HOME", &[".cache"])]
    }
    fn home_vars(&self) -> &'static [&'static str] {
        &["HOME"]
    }
    fn config_base(&self) -> (&'static str, &'static [&'static str]) {
        ("XDG_CONFIG_HOME", &[".config"])
    }
    fn shared_lib_dir(&self) -> &'static str {
        "lib"
    }
    fn versioned_lib_name(&self, stem: &str, major: u32) -> String {
        format!("lib{stem}.{major}.dylib")
    }
    fn link_file_names(&self, name: &str) -> Vec<String> {
        vec![format!("lib{name}.dylib"), format!("lib{name}.a")]
    }
    fn static_lib_name(&self, name: &str) -> String {
        format!("lib{name}.a")
    }
    fn linked_shared_lib(&self, name: &str) -> (String, Option<String>) {
        (format!("lib{name}.dylib"), None)
    }
    fn is_native_name(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        lower.ends_with(".dylib") || lower.ends_with(".so")
    }
    fn path_separator(&self) -> char {
        '/'
    }
    fn temp_dir_vars(&self) -> &'static [&'static str] {
        &["TMPDIR"]
    }
    fn gnu_cxx(&self) -> bool {
        false
    }
    fn default_platform_tag(&self) -> Option<&'static str> {
        None
    }
    fn searches_own_dir_and_path(&self) -> bool {
        false
    }
    fn system_library_dirs(&self) -> &'static [&'static str] {
        &["/opt/homebrew/lib", "/usr/local/lib"]
    }
    fn ffmpeg_install_hint(&self) -> &'static str {
        "brew install ffmpeg, then run doctor again"
    }
    fn program_path_limit(&self) -> Option<usize> {
        None
    }
    fn driver_ships_hip_runtime(&self) -> bool {
        false
    }
    fn runs_under_wine(&self) -> bool {
        false
    }
    fn rocm_env_vars(&self) -> [&'static str; 2] {
        ["$ROCM_PATH", "$HIP_PATH"]
    }
    fn rocm_install_hint(&self) -> &'static str {
        "ROCm does not exist for macOS: build with --backend cpu"
    }
    fn env_data_prefix(&self) -> Option<&'static str> {
        None
    }
    fn binary_format(&self) -> &'static str {
        "Mach-O"
    }
    fn dev_search(&self) -> DevSearch {
        DevSearch {
            prefixes: &["/opt/homebrew", "/usr/local"],
            multiarch: false,
            kegs: Some("opt"),
            compiler_vars: None,
        }
    }
    fn program_files_x86(&self) -> Option<(&'static str, &'static str)> {
        None
    }
    fn oneapi_mkl_dirs(&self) -> &'static [&'static str] {
        &["/opt/intel/oneapi/mkl/latest", "/opt/intel/mkl"]
    }
    fn msvc_style_compilers(&self) -> bool {
        false
    }
    fn exe_suffix(&self) -> &'static str {
        ""
    }
    fn shared_lib_suffix(&self) -> &'static str {
        ".dylib"
    }
    fn extension_suffix(&self) -> &'static str {
        ".so"
    }
    fn scripts_dir(&self) -> &'static str {
        "bin"
    }
    fn library_search_var(&self) -> &'static str {
        "DYLD_LIBRARY_PATH"
    }
    fn path_list_separator(&self) -> &'static str {
        ":"
    }
    fn link_method(&self) -> LinkMethod {
        LinkMethod::LoaderPath
    }
    fn site_packages(&self, root: &Path) -> Option<PathBuf> {
        unix_site_packages(root)
    }
}
