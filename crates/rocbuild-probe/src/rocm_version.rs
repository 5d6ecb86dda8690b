//! An SDK's version, read from files in order of trust: `.info/version` (AMD's packages),
//! the directory name (`rocm-7.2.0`, `ROCm\6.2`), TheRock's dist-info, the HIP CMake package
//! version (Debian), then `hip_version.h` (major.minor only: HIP's patch is a build number, not
//! ROCm's patch).

use std::path::{Path, PathBuf};

use crate::rocm_scan::{file_name, sorted_dirs};
use crate::RocmSdk;

/// `rocm-7.2.0` -> 7.2.0, `6.2` -> 6.2; anything else -> None.
pub(crate) fn version_from_dir_name(name: &str) -> Option<String> {
    let v = name.strip_prefix("rocm-").unwrap_or(name);
    looks_like_version(v).then(|| v.to_string())
}

fn looks_like_version(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The ROCm version (best source first) and HIP's own version.
pub(crate) fn read_versions(
    sdk: &mut RocmSdk,
    parts: &[PathBuf],
    t: &dyn Fn(&str) -> Vec<String>,
    dir_version: Option<String>,
) {
    let hip = hip_version_h(parts).or_else(|| {
        ["bin/.hipVersion", "share/hip/version"]
            .iter()
            .find_map(|rel| parts.iter().find_map(|p| key_value_version(&p.join(rel))))
    });
    sdk.hip_version = hip.as_ref().map(|(v, _)| v.clone());
    let mut sources: Vec<(Option<String>, String)> = Vec::new();
    for p in parts {
        for f in [
            ".info/version",
            ".info/version-dev",
            ".info/version-hip-sdk",
        ] {
            sources.push((read_info_version(&p.join(f)), f.to_string()));
        }
    }
    sources.push((dir_version, "directory name".into()));
    for rel in t("cmake/hip/hip-config-version.cmake")
        .iter()
        .chain(["lib/cmake/hip/hip-config-version.cmake".to_string()].iter())
    {
        for p in parts {
            sources.push((cmake_package_version(&p.join(rel)), rel.clone()));
        }
    }
    sources.push((
        hip.as_ref().map(|(_, mm)| mm.clone()),
        "HIP version (major.minor)".into(),
    ));
    if let Some((v, src)) = sources.into_iter().find_map(|(v, s)| v.map(|v| (v, s))) {
        sdk.version = Some(v);
        sdk.version_source = Some(src);
    }
}

/// `.info/version`: "6.2.4-120" -> "6.2.4".
fn read_info_version(path: &Path) -> Option<String> {
    let text = crate::read_text(path).ok()?;
    let v = text
        .lines()
        .next()?
        .trim()
        .split(['-', '+', ' '])
        .next()?
        .to_string();
    looks_like_version(&v).then_some(v)
}

fn cmake_package_version(path: &Path) -> Option<String> {
    let text = crate::read_text(path).ok()?;
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("set(PACKAGE_VERSION "))?;
    let v = line.split('"').nth(1)?.to_string();
    looks_like_version(&v).then_some(v)
}

/// `include/hip/hip_version.h` -> (full "5.2.21153", major.minor "5.2").
fn hip_version_h(parts: &[PathBuf]) -> Option<(String, String)> {
    let text = parts
        .iter()
        .find_map(|p| crate::read_text(p.join("include/hip/hip_version.h")).ok())?;
    let def = |name: &str| crate::c_define(&text, name);
    mmp(
        def("HIP_VERSION_MAJOR")?,
        def("HIP_VERSION_MINOR")?,
        def("HIP_VERSION_PATCH"),
    )
}

/// `HIP_VERSION_MAJOR=5` lines (`bin/.hipVersion`, Debian's `share/hip/version`).
fn key_value_version(path: &Path) -> Option<(String, String)> {
    let text = crate::read_text(path).ok()?;
    let get = |k: &str| {
        text.lines().find_map(|l| {
            l.strip_prefix(k)?
                .strip_prefix('=')
                .map(|v| v.trim().to_string())
        })
    };
    mmp(
        get("HIP_VERSION_MAJOR")?,
        get("HIP_VERSION_MINOR")?,
        get("HIP_VERSION_PATCH"),
    )
}

fn mmp(major: String, minor: String, patch: Option<String>) -> Option<(String, String)> {
    let num = |s: &str| s.parse::<u32>().ok();
    let (ma, mi) = (num(&major)?, num(&minor)?);
    let full = match patch.as_deref().and_then(num) {
        Some(p) => format!("{ma}.{mi}.{p}"),
        None => format!("{ma}.{mi}"),
    };
    Some((full, format!("{ma}.{mi}")))
}

/// hipBLAS's version from `hipblas-version.h` (`hipblasVersionMajor 2`).
pub(crate) fn hipblas_version(parts: &[PathBuf]) -> Option<String> {
    let text = [
        "include/hipblas/hipblas-version.h",
        "include/hipblas-version.h",
    ]
    .iter()
    .find_map(|rel| {
        parts
            .iter()
            .find_map(|p| crate::read_text(p.join(rel)).ok())
    })?;
    let def = |name: &str| -> Option<u32> { crate::c_define(&text, name)?.parse().ok() };
    let major = def("hipblasVersionMajor")?;
    let minor = def("hipblasVersionMinor").unwrap_or(0);
    let patch = def("hipblasVersionPatch").unwrap_or(0);
    Some(format!("{major}.{minor}.{patch}"))
}

/// A distribution's version from its dist-info (`rocm_sdk_core-7.2.0.dist-info/METADATA`).
pub(crate) fn dist_version(site: &Path, normalized: &str) -> Option<String> {
    sorted_dirs(site).into_iter().find_map(|d| {
        let name = file_name(&d);
        let stem = name.strip_suffix(".dist-info")?;
        let (dist, version) = stem.split_once('-')?;
        if dist.to_ascii_lowercase().replace(['-', '.'], "_") != normalized {
            return None;
        }
        let from_metadata = crate::read_text(d.join("METADATA")).ok().and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("Version:").map(|v| v.trim().to_string()))
        });
        Some(from_metadata.unwrap_or_else(|| version.to_string()))
    })
}

/// A sort key that orders names the way versions order: digit runs by value, the rest as
/// text (`clang/9` < `clang/10`, `+rocm7.0` < `+rocm10.0`, `libamd_comgr.so.2` <
/// `libamd_comgr.so.10`). Every "newest" choice among names sorts by it, never by string.
pub fn natural_key(s: &str) -> Vec<NaturalPart> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        let digits = c.is_ascii_digit();
        let end = rest
            .find(|x: char| x.is_ascii_digit() != digits)
            .unwrap_or(rest.len());
        let (run, tail) = rest.split_at(end);
        out.push(if digits {
            let trimmed = run.trim_start_matches('0');
            // By length first, then digit by digit: any number of digits, no overflow.
            NaturalPart::Number(trimmed.len(), trimmed.to_string())
        } else {
            NaturalPart::Text(run.to_string())
        });
        rest = tail;
    }
    out
}

/// One run of a [`natural_key`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum NaturalPart {
    Number(usize, String),
    Text(String),
}

/// Sort paths by [`natural_key`] of their text, so the last is the newest.
pub fn sort_naturally(paths: &mut [PathBuf]) {
    paths.sort_by_cached_key(|p| natural_key(&p.to_string_lossy()));
}

#[cfg(test)]
mod natural {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn versions_in_names_sort_by_value() {
        let mut v: Vec<PathBuf> = [
            "lib/clang/9",
            "lib/clang/10",
            "lib/clang/19",
            "lib/clang/20",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        v.reverse();
        sort_naturally(&mut v);
        assert_eq!(v.last().unwrap(), &PathBuf::from("lib/clang/20"));
        assert!(natural_key("2.9.1+rocm10.0") > natural_key("2.9.1+rocm7.0"));
        assert!(natural_key("libamd_comgr.so.10") > natural_key("libamd_comgr.so.2"));
    }

    proptest! {
        /// Any two versions (dotted numbers, an optional `+rocmX.Y` local tag, under any name
        /// prefix) sort as their numbers do, and as `version_key` says.
        #[test]
        fn names_sort_as_their_versions(
            a in proptest::collection::vec(0u32..2000, 1..5),
            b in proptest::collection::vec(0u32..2000, 1..5),
            prefix in "[a-z_/]{0,8}",
        ) {
            let fmt = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(".");
            let (sa, sb) = (format!("{prefix}{}", fmt(&a)), format!("{prefix}{}", fmt(&b)));
            prop_assert_eq!(natural_key(&sa).cmp(&natural_key(&sb)), a.cmp(&b), "{} vs {}", sa, sb);
            prop_assert_eq!(crate::version_key(&fmt(&a)).cmp(&crate::version_key(&fmt(&b))), a.cmp(&b));
            let (ta, tb) = (format!("2.9.1+rocm{}", fmt(&a)), format!("2.9.1+rocm{}", fmt(&b)));
            prop_assert_eq!(natural_key(&ta).cmp(&natural_key(&tb)), a.cmp(&b));
        }
    }

    /// A ROCm version as TheRock writes them: release numbers, then a nightly `aYYYYMMDD`, a
    /// candidate `rcN`, a `.devN`, or nothing (the release).
    fn rocm_version() -> impl Strategy<Value = (Vec<u32>, u32, u32, String)> {
        (
            proptest::collection::vec(0u32..20, 3..4),
            0u32..4,
            20250101u32..20261231,
        )
            .prop_map(|(nums, kind, n)| {
                let base = nums
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(".");
                let text = match kind {
                    0 => format!("{base}.dev{}", n % 3),
                    1 => format!("{base}a{n}"),
                    2 => format!("{base}rc{}", n % 5),
                    _ => base,
                };
                // dev < a < rc < release, then the number within the kind.
                let within = match kind {
                    0 => n % 3,
                    1 => n,
                    2 => n % 5,
                    _ => 0,
                };
                (nums, kind, within, text)
            })
    }

    proptest! {
        /// ROCm versions (`10.0.0` and `7.15.0a20260630` and `7.2.1rc2` alike) order by their
        /// numbers, then dev < nightly < candidate < release; `version_key` has the numbers.
        #[test]
        fn rocm_versions_order_by_number_then_kind(a in rocm_version(), b in rocm_version()) {
            let want = (&a.0, a.1, a.2).cmp(&(&b.0, b.1, b.2));
            prop_assert_eq!(crate::rocm::version_cmp(&a.3, &b.3), want, "{} vs {}", a.3, b.3);
            prop_assert_eq!(crate::version_key(&a.3), a.0.clone(), "{}", a.3);
        }
    }

    #[test]
    fn the_rock_versions_are_never_compared_as_strings() {
        use crate::rocm::version_cmp;
        use std::cmp::Ordering::*;
        assert_eq!(version_cmp("10.0.0", "7.15.0a20260630"), Greater);
        assert_eq!(version_cmp("7.10.0a20251124", "7.9.0"), Greater);
        assert_eq!(version_cmp("7.10.0a20251124", "7.10.0"), Less);
        assert_eq!(
            version_cmp("10.1.0a20260811+bkc.20260814", "10.0.0"),
            Greater
        );
        // Not PEP 440 (a HIP patch with a git hash): by the numbers.
        assert_eq!(version_cmp("6.4.43482-0f2d60242", "6.10.1"), Less);
        assert_eq!(crate::version_key("7.10.1a20251124"), [7, 10, 1]);
    }
}
