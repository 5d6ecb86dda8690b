//! Shared-library file names read back, whatever OS named them: a venv rocbuild looks at may be
//! another OS's (a Windows venv seen from Linux), so these rules answer for every OS at once.
//! The names written for one OS are [`crate::PlatformRules`]' (`versioned_lib_name`, …).

use crate::Os;

/// A shared library's file name, taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LibName<'a> {
    /// The OS whose naming this is.
    pub os: Os,
    /// The name without prefix, version and suffix: `cublas`, `avutil`, `rocblas`.
    pub base: &'a str,
    /// The version the name carries (`12`, `4.4.1`, `59`), if any.
    pub version: Option<&'a str>,
    /// The name up to its version (`libcublas.so.`, `cublas64_`, `avutil-`): other versions
    /// of the same library start with it (compared without case on Windows).
    pub stem: &'a str,
}

impl LibName<'_> {
    /// The version's first number: `libcublas.so.12.8` -> 12.
    pub fn major(&self) -> Option<u32> {
        self.version?.split('.').next()?.parse().ok()
    }

    /// A Windows DLL's name?
    pub fn is_dll(&self) -> bool {
        self.os == Os::Windows
    }

    /// Whether the name has the versioned form NVIDIA gives CUDA's libraries: `libcublas.so.12`
    /// (Linux), `cublas64_12.dll` (Windows); macOS has none.
    pub fn is_cuda_form(&self, name: &str) -> bool {
        match self.os {
            Os::Linux => name.starts_with("lib") && self.version.is_some(),
            Os::Windows => self.stem.to_ascii_lowercase().ends_with("64_"),
            Os::Macos => false,
        }
    }

    /// Whether `other` names another version of this library (only names are compared).
    pub fn same_library(&self, other: &str) -> bool {
        let Some(o) = parse(other) else {
            return false;
        };
        o.os == self.os
            && o.version.is_some()
            && match self.os {
                Os::Windows => o.stem.eq_ignore_ascii_case(self.stem),
                _ => o.stem == self.stem,
            }
    }
}

fn all_digits_and_dots(v: &str) -> bool {
    !v.is_empty()
        && v.bytes().all(|c| c.is_ascii_digit() || c == b'.')
        && v.split('.').all(|p| !p.is_empty())
}

/// Take a library file name apart: `libcublas.so.12` and `libcublas.so` (Linux),
/// `libavutil.59.dylib` and `libc10.dylib` (macOS), `cublas64_12.dll` (CUDA's Windows names),
/// `avutil-59.dll` (FFmpeg's) and `c10.dll` (Windows). None for anything else.
pub fn parse(name: &str) -> Option<LibName<'_>> {
    if let Some(i) = name.find(".so.") {
        let version = &name[i + 4..];
        return all_digits_and_dots(version).then(|| LibName {
            os: Os::Linux,
            base: name[..i].strip_prefix("lib").unwrap_or(&name[..i]),
            version: Some(version),
            stem: &name[..i + 4],
        });
    }
    if let Some(base) = name.strip_suffix(".so") {
        return Some(LibName {
            os: Os::Linux,
            base: base.strip_prefix("lib").unwrap_or(base),
            version: None,
            stem: name,
        });
    }
    if let Some(stem) = name.strip_suffix(".dylib") {
        let plain = stem.strip_prefix("lib").unwrap_or(stem);
        let (base, version) = match plain.split_once('.') {
            Some((b, v)) if all_digits_and_dots(v) => (b, Some(v)),
            _ => (plain, None),
        };
        let stem_len = match version {
            Some(_) => stem.len() - plain.len() + base.len() + 1,
            None => name.len(),
        };
        return Some(LibName {
            os: Os::Macos,
            base,
            version,
            stem: &name[..stem_len],
        });
    }
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".dll") {
        let plain = &name[..name.len() - 4];
        let split = |sep: &str| {
            let (b, v) = plain.rsplit_once(sep)?;
            all_digits_and_dots(v).then_some((b, v, sep.len()))
        };
        return Some(match split("64_").or_else(|| split("-")) {
            Some((base, v, sep)) => LibName {
                os: Os::Windows,
                base,
                version: Some(v),
                stem: &name[..base.len() + sep],
            },
            None => LibName {
                os: Os::Windows,
                base: plain,
                version: None,
                stem: name,
            },
        });
    }
    None
}

/// Whether `name` is a native file on any OS: a shared library of [`parse`]'s forms, or a
/// Python extension module (`.pyd`).
pub fn is_native(name: &str) -> bool {
    parse(name).is_some() || name.to_ascii_lowercase().ends_with(".pyd")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_os_form_is_taken_apart() {
        let p = |n| {
            let l = parse(n).unwrap();
            (l.os, l.base, l.version, l.stem, l.major())
        };
        assert_eq!(
            p("libcublas.so.12.8.1"),
            (
                Os::Linux,
                "cublas",
                Some("12.8.1"),
                "libcublas.so.",
                Some(12)
            )
        );
        assert_eq!(p("libc10.so"), (Os::Linux, "c10", None, "libc10.so", None));
        assert_eq!(
            p("libavutil.59.dylib"),
            (Os::Macos, "avutil", Some("59"), "libavutil.", Some(59))
        );
        assert_eq!(
            p("libc10.dylib"),
            (Os::Macos, "c10", None, "libc10.dylib", None)
        );
        assert_eq!(
            p("cublas64_12.dll"),
            (Os::Windows, "cublas", Some("12"), "cublas64_", Some(12))
        );
        assert_eq!(
            p("CUDART64_13.DLL"),
            (Os::Windows, "CUDART", Some("13"), "CUDART64_", Some(13))
        );
        assert_eq!(
            p("avutil-59.dll"),
            (Os::Windows, "avutil", Some("59"), "avutil-", Some(59))
        );
        assert_eq!(p("c10.dll"), (Os::Windows, "c10", None, "c10.dll", None));
        for not in ["libfoo.so.x", "readme.txt", "libfoo.so.", "x.pyd"] {
            assert!(parse(not).is_none(), "{not}");
        }
        assert!(is_native("x.pyd") && is_native("libtorchcodec_core7.so"));
        assert!(!is_native("torchcodec/__init__.py"));
    }

    #[test]
    fn other_versions_of_the_same_library() {
        let l = parse("libcublas.so.12").unwrap();
        assert!(l.same_library("libcublas.so.13.1"));
        assert!(!l.same_library("libcublasLt.so.13") && !l.same_library("libcublas.so"));
        let w = parse("cublas64_12.dll").unwrap();
        assert!(w.same_library("CUBLAS64_13.dll"));
        assert!(!w.same_library("cublasLt64_13.dll"));
        let cuda = |n| parse(n).is_some_and(|l| l.is_cuda_form(n));
        assert!(cuda("libcublas.so.12") && cuda("cublas64_12.dll"));
        assert!(!cuda("libcublas.so") && !cuda("avutil-59.dll") && !cuda("libcublas.12.dylib"));
    }
}
