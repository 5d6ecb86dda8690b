//! macOS's rules.

use std::path::{Path, PathBuf};

use crate::{unix_site_packages, DevSearch, LinkMethod, Os, PlatformRules};

pub(crate) struct Macos;

impl PlatformRules for Macos {
    crate::unix::unix_conventions!();
    fn os(&self) -> Os {
        Os::Macos
    }
    fn name(&self) -> &'static str {
        "macos"
    }
    fn versioned_lib_name(&self, stem: &str, major: u32) -> String {
        format!("lib{stem}.{major}.dylib")
    }
    fn link_file_names(&self, name: &str) -> Vec<String> {
        vec![format!("lib{name}.dylib"), format!("lib{name}.a")]
    }
    fn linked_shared_lib(&self, name: &str) -> (String, Option<String>) {
        (format!("lib{name}.dylib"), None)
    }
    fn is_native_name(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        lower.ends_with(".dylib") || lower.ends_with(".so")
    }
    fn gnu_cxx(&self) -> bool {
        false
    }
    fn system_library_dirs(&self) -> &'static [&'static str] {
        &["/opt/homebrew/lib", "/usr/local/lib"]
    }
    fn ffmpeg_install_hint(&self) -> &'static str {
        "brew install ffmpeg, then run doctor again"
    }
    fn rocm_install_hint(&self) -> &'static str {
        "ROCm does not exist for macOS: build with --backend cpu"
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
    fn shared_lib_suffix(&self) -> &'static str {
        ".dylib"
    }
    fn library_search_var(&self) -> &'static str {
        "DYLD_LIBRARY_PATH"
    }
    fn link_method(&self) -> LinkMethod {
        LinkMethod::LoaderPath
    }
}
