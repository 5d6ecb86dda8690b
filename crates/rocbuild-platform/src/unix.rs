//! What every Unix rocbuild knows shares: one place for the answers Linux and macOS give
//! alike, expanded into each one's `impl PlatformRules`.

/// The `PlatformRules` methods whose answers are the same on every Unix.
macro_rules! unix_conventions {
    () => {
        fn remove_file_command(&self, path: &Path) -> String {
            format!("rm '{}'", path.display())
        }
        fn move_file_command(&self, from: &Path, to: &Path) -> String {
            let q = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
            match to.parent() {
                Some(dir) => format!("mkdir -p {} && mv -n {} {}", q(dir), q(from), q(to)),
                None => format!("mv -n {} {}", q(from), q(to)),
            }
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
        fn static_lib_name(&self, name: &str) -> String {
            format!("lib{name}.a")
        }
        fn path_separator(&self) -> char {
            '/'
        }
        fn temp_dir_vars(&self) -> &'static [&'static str] {
            &["TMPDIR"]
        }
        fn default_platform_tag(&self) -> Option<&'static str> {
            None
        }
        fn searches_own_dir_and_path(&self) -> bool {
            false
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
        fn env_data_prefix(&self) -> Option<&'static str> {
            None
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
        fn extension_suffix(&self) -> &'static str {
            ".so"
        }
        fn scripts_dir(&self) -> &'static str {
            "bin"
        }
        fn path_list_separator(&self) -> &'static str {
            ":"
        }
        fn site_packages(&self, root: &Path) -> Option<PathBuf> {
            unix_site_packages(root)
        }
    };
}
pub(crate) use unix_conventions;
