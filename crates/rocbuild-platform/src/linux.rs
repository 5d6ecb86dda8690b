//! Linux's rules.

use std::path::{Path, PathBuf};

use crate::{unix_site_packages, DevSearch, LinkMethod, Os, PlatformRules};

pub(crate) struct Linux;

impl PlatformRules for Linux {
    fn os(&self) -> Os {
        Os::Linux
    }
    fn name(&self) -> &'static str {
        "linux"
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
        format!("lib{stem}.so.{major}")
    }
    fn link_file_names(&self, name: &str) -> Vec<String> {
        vec![format!("lib{name}.so"), format!("lib{name}.a")]
    }
    fn static_lib_name(&self, name: &str) -> String {
        format!("lib{name}.a")
    }
    fn linked_shared_lib(&self, name: &str) -> (String, Option<String>) {
        (format!("lib{name}.so"), None)
    }
    /// `.so`, and versioned `.so.N[.N…]`.
    fn is_native_name(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        lower.ends_with(".so")
            || lower
                .split_once(".so.")
                .is_some_and(|(_, v)| v.split('.').all(|p| p.parse::<u32>().is_ok()))
    }
    fn path_separator(&self) -> char {
        '/'
    }
    fn temp_dir_vars(&self) -> &'static [&'static str] {
        &["TMPDIR"]
    }
    fn gnu_cxx(&self) -> bool {
        true
    }
    fn default_platform_tag(&self) -> Option<&'static str> {
        None
    }
    fn searches_own_dir_and_path(&self) -> bool {
        false
    }
    fn system_library_dirs(&self) -> &'static [&'static str] {
        &[
            "/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
            "/lib/aarch64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/lib64",
            "/usr/lib64",
            "/lib",
            "/usr/lib",
            "/usr/local/lib",
        ]
    }
    fn ffmpeg_install_hint(&self) -> &'static str {
        "install FFmpeg (Debian/Ubuntu: apt-get install ffmpeg), then run doctor again"
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
        "install ROCm (/opt/rocm-X.Y.Z from AMD's packages, or Debian/Ubuntu's hipcc + rocm-device-libs + libamdhip64-dev), or set ROCM_PATH to an SDK root"
    }
    fn env_data_prefix(&self) -> Option<&'static str> {
        None
    }
    fn binary_format(&self) -> &'static str {
        "ELF"
    }
    fn dev_search(&self) -> DevSearch {
        DevSearch {
            prefixes: &["/usr/local", "/usr"],
            multiarch: true,
            kegs: None,
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
        ".so"
    }
    fn extension_suffix(&self) -> &'static str {
        ".so"
    }
    fn scripts_dir(&self) -> &'static str {
        "bin"
    }
    fn library_search_var(&self) -> &'static str {
        "LD_LIBRARY_PATH"
    }
    fn path_list_separator(&self) -> &'static str {
        ":"
    }
    fn link_method(&self) -> LinkMethod {
        LinkMethod::Runpath
    }
    fn site_packages(&self, root: &Path) -> Option<PathBuf> {
        unix_site_packages(root)
    }
}
