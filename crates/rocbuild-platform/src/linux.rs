//! Linux's rules.

use std::path::{Path, PathBuf};

use crate::{unix_site_packages, DevSearch, LinkMethod, Os, PlatformRules};

pub(crate) struct Linux;

impl PlatformRules for Linux {
    crate::unix::unix_conventions!();
    fn os(&self) -> Os {
        Os::Linux
    }
    fn name(&self) -> &'static str {
        "linux"
    }
    fn versioned_lib_name(&self, stem: &str, major: u32) -> String {
        format!("lib{stem}.so.{major}")
    }
    fn link_file_names(&self, name: &str) -> Vec<String> {
        vec![format!("lib{name}.so"), format!("lib{name}.a")]
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
    fn gnu_cxx(&self) -> bool {
        true
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
    fn rocm_install_hint(&self) -> &'static str {
        "install ROCm (/opt/rocm-X.Y.Z from AMD's packages, or Debian/Ubuntu's hipcc + rocm-device-libs + libamdhip64-dev), or set ROCM_PATH to an SDK root"
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
    fn shared_lib_suffix(&self) -> &'static str {
        ".so"
    }
    fn library_search_var(&self) -> &'static str {
        "LD_LIBRARY_PATH"
    }
    fn link_method(&self) -> LinkMethod {
        LinkMethod::Runpath
    }
}
