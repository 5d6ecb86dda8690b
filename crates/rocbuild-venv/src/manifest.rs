//! What rocbuild installed into a venv, and against what: `site-packages/.rocbuild/<recipe>.json`.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Result, VenvError};
use rocbuild_probe::platform::state_files::{self as host_files, cap};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct InstalledFile {
    /// Relative to site-packages, with `/`.
    pub path: String,
    pub sha256: String,
    pub size: u64,
    /// sha256 of the build's file before rocbuild edited it (RUNPATH), for no-op detection.
    #[serde(default)]
    pub built_sha256: Option<String>,
    /// Modification time (ns since the epoch) as installed: `status` hashes a file only when
    /// its size or mtime differ from these.
    #[serde(default)]
    pub mtime_ns: Option<u64>,
}

/// The GPU SDK the build used: the one torch was built with (torch/version.py) and, for
/// torch's own CMake package, the toolkit rocbuild pointed CMake at.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SdkRecord {
    #[serde(default)]
    pub torch_cuda: Option<String>,
    #[serde(default)]
    pub torch_hip: Option<String>,
    #[serde(default)]
    pub toolkit: Option<PathBuf>,
    #[serde(default)]
    pub toolkit_version: Option<String>,
    /// The compute backend built (`cpu`, `rocm`, `cuda`), the ROCm SDK version it used and the
    /// GPU architectures it holds code for.
    #[serde(default)]
    pub backend: Option<String>,
    #[serde(default)]
    pub rocm_version: Option<String>,
    #[serde(default)]
    pub gpu_archs: Vec<String>,
    /// The CUDA compute capabilities a cuda build was compiled for, as asked (`8.6;9.0+PTX`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cuda_archs: Vec<String>,
    /// HIP's own version of the SDK built with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hip_version: Option<String>,
    /// rocbuild's HIP compatibility definitions force-included into the build (`syncwarp`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hip_compat: Vec<String>,
}

impl SdkRecord {
    /// For a cuda build: the toolkit's CUDA and the archs it compiled for
    /// (`CUDA 13.2.86 (its toolkit), for 8.6;9.0+PTX`); None for any other.
    pub fn cuda_build(&self) -> Option<String> {
        if self.backend.as_deref() != Some("cuda") {
            return None;
        }
        let cuda = match (&self.toolkit_version, &self.torch_cuda) {
            (Some(v), _) => format!("CUDA {v} (its toolkit)"),
            (None, Some(t)) => format!("CUDA {t} (torch's)"),
            (None, None) => "CUDA of unknown version".to_string(),
        };
        Some(match self.cuda_archs.is_empty() {
            true => cuda,
            false => format!("{cuda}, for {}", self.cuda_archs.join(";")),
        })
    }

    /// `cuda 13.2`, `rocm 6.2.41134 (toolkit /opt/rocm 6.2.4)`, or `cpu`.
    pub fn describe(&self) -> String {
        let mut s = match (&self.torch_hip, &self.torch_cuda) {
            (Some(h), _) => format!("rocm {h}"),
            (None, Some(c)) => format!("cuda {c}"),
            (None, None) => "cpu".to_string(),
        };
        if let Some(t) = &self.toolkit {
            s.push_str(&format!(
                " (toolkit {} {})",
                t.display(),
                self.toolkit_version
                    .as_deref()
                    .unwrap_or("of unknown version")
            ));
        }
        s
    }
}

/// The compiler cache a build ran under, and what it gave.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CompilerCacheRecord {
    /// `sccache` or `ccache`.
    pub kind: String,
    /// Where its entries live (no password).
    pub backend: String,
    pub hits: Option<u64>,
    pub misses: Option<u64>,
}

/// The pure-Python part rocbuild installed with pip (the package was not there, or was
/// another version).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PythonPartRecord {
    pub version: String,
    /// The version it replaced (its files are in the backup).
    #[serde(default)]
    pub replaced: Option<String>,
    /// The files pip installed (relative to site-packages).
    #[serde(default)]
    pub files: Vec<String>,
}

/// A pure-Python run-time requirement rocbuild installed with the package (it was missing from
/// the venv, `[needs] python`): `restore` removes its files again.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RequirementRecord {
    /// The distribution's name as its dist-info spells it.
    pub name: String,
    pub version: String,
    /// Its files (relative to site-packages).
    #[serde(default)]
    pub files: Vec<String>,
}

/// The wheel an install came from (`rocbuild RECIPE --index URL` / `--find-links DIR`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PrebuiltRecord {
    /// Where the wheel was found: its URL, or its path in a `--find-links` directory.
    pub url: String,
    /// The wheel's file name (its version says what it was built for).
    pub file: String,
    pub sha256: String,
    /// The index page or directory it was listed in.
    pub index: String,
}

/// What rocbuild did to the package a manifest describes.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Built from source and installed (`rocbuild RECIPE`).
    #[default]
    Build,
    /// The installed prebuilt files made findable, not rebuilt (`rocbuild repair PKG`): only
    /// their search paths (RUNPATH / LC_RPATH + signature) changed.
    Repair,
}

/// Fields added after schema 1 carry serde defaults, so manifests of older rocbuilds load.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub schema: u32,
    pub recipe: String,
    pub version: String,
    pub recipe_hash: String,
    pub fingerprint: String,
    pub source_url: Option<String>,
    pub source_commit: Option<String>,
    pub torch_version: Option<String>,
    pub torch_git: Option<String>,
    pub flavor: String,
    pub ffmpeg_major: Option<u32>,
    pub python: String,
    pub defines: BTreeMap<String, String>,
    pub runpath: Vec<String>,
    pub files: Vec<InstalledFile>,
    /// The wheel's files moved to the backup (relative to site-packages).
    pub parked: Vec<String>,
    /// Seconds since the epoch.
    pub installed_at: u64,
    /// The options of the build, for `rebuild`.
    #[serde(default)]
    pub options: crate::options::BuildOptions,
    #[serde(default)]
    pub sdk: SdkRecord,
    /// The dist-info `RECORD` rocbuild rewrote (relative to site-packages); pip's own is in
    /// the backup.
    #[serde(default)]
    pub record: Option<String>,
    /// Wheel files pip's part brought that were never installed (they match `park`); kept in
    /// the backup so `restore` gives back the wheel as pip installs it.
    #[serde(default)]
    pub dropped: Vec<String>,
    #[serde(default)]
    pub python_part: Option<PythonPartRecord>,
    /// The missing pure-Python run-time requirements installed in the same transaction.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<RequirementRecord>,
    /// Files rocbuild added beside `files` that are not build artifacts (a DLL preload hook,
    /// a `.pth`): `restore` removes them. Relative to site-packages.
    #[serde(default)]
    pub extra_files: Vec<String>,
    /// The compiler cache of the last build, if any.
    #[serde(default)]
    pub compiler_cache: Option<CompilerCacheRecord>,
    /// A build, or a repair of pip's own files.
    #[serde(default)]
    pub kind: Kind,
    /// Installed from a rebuilt wheel found on a package index or in a `--find-links`
    /// directory instead of built here (then `source_url` is the wheel's URL too).
    #[serde(default)]
    pub prebuilt: Option<PrebuiltRecord>,
    /// For a repair: each edited file (relative to site-packages) and the search path entries
    /// rocbuild gave it.
    #[serde(default)]
    pub search_added: BTreeMap<String, Vec<String>>,
    /// The recipe's own fixes applied to the source (`name sha256`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipe_fixes: Vec<String>,
    /// What rocbuild holds of the package (its footprint as left, with hashes): whether it
    /// still holds it decides what `restore` gives back (see [`crate::ownership`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<crate::ownership::Ownership>,
    /// Why the recipe's verification did not run (a Windows venv built on a host without
    /// Wine): the install is kept, and `status` says it was never proven to load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unverified: Option<String>,
    /// A release the recipe does not list, built with the rules of this listed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules_of: Option<String>,
}

pub fn dir(site: &Path) -> PathBuf {
    crate::layout::state_dir(site)
}

pub fn path(site: &Path, recipe: &str) -> PathBuf {
    crate::layout::manifest(site, recipe)
}

/// The manifest of `recipe` when there is one rocbuild can prove it wrote for this venv
/// (see [`read_checked`]); `None` otherwise.
pub fn read(site: &Path, recipe: &str) -> Option<Manifest> {
    read_checked(site, recipe).ok().flatten()
}

/// The manifest of `recipe`: `None` when there is none, an error when it is there but
/// cannot be used: not a regular file, too big, damaged, naming paths outside site-packages,
/// or not sealed by this user's rocbuild for this venv (see [`open_sealed`]). Nothing is
/// ever deleted or overwritten on the word of a manifest that is not rocbuild's own.
pub fn read_checked(site: &Path, recipe: &str) -> Result<Option<Manifest>> {
    let p = path(site, recipe);
    let bad = |reason: String| VenvError::BadManifest {
        path: p.display().to_string(),
        recipe: recipe.to_string(),
        reason,
    };
    let text = match host_files::read_capped_text(&p, cap::STATE) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData
            ) =>
        {
            return Err(bad(e.to_string()))
        }
        Err(e) => return Err(VenvError::io("read", &p)(e)),
    };
    let m = open_sealed(site, recipe, &text).map_err(bad)?;
    Ok(Some(m))
}

/// The manifest of `recipe` in `site` from its sealed text: rocbuild's own only when this
/// user's key exists and the seal verifies for this venv (its site-packages directory, not
/// its path: see `state_key`), this recipe and these exact contents; and then only when
/// [`parse`]'s checks pass.
pub fn open_sealed(site: &Path, recipe: &str, text: &str) -> std::result::Result<Manifest, String> {
    open_sealed_with(site, recipe, text, crate::state_key::for_reading())
}

/// As [`open_sealed`], with the key given (a tool or a test that reads another cache's state).
pub fn open_sealed_with(
    site: &Path,
    recipe: &str,
    text: &str,
    key: Result<Option<crate::state_key::StateKey>>,
) -> std::result::Result<Manifest, String> {
    let mut value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let seal = match value.as_object_mut().and_then(|o| o.remove(SEAL)) {
        Some(serde_json::Value::String(s)) => s,
        _ => return Err("it carries no seal, so rocbuild did not write it (a file a package planted, or one a rocbuild older than sealed manifests wrote)".into()),
    };
    let m: Manifest = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let canonical = serde_json::to_string(&m).map_err(|e| e.to_string())?;
    let key = match key {
        Ok(Some(k)) => k,
        Ok(None) => return Err("this user's key (journal.key in rocbuild's cache) does not exist, so rocbuild cannot tell its own manifest from a planted one: the cache was cleared, or another cache is in use (--cache / ROCBUILD_CACHE)".into()),
        Err(e) => return Err(format!("{e}")),
    };
    if !key.verifies_manifest(site, recipe, &canonical, &seal) {
        return Err("its seal does not verify: rocbuild did not write it for this venv and this recipe with this user's key (a file a package planted, an edited manifest, one copied from another venv, or sealed with a key from another cache)".into());
    }
    let m = parse(&canonical)?;
    if m.recipe != recipe {
        return Err(format!(
            "it names the recipe `{}`, not `{recipe}`",
            m.recipe
        ));
    }
    Ok(m)
}

/// The member of a manifest's JSON that holds its seal.
const SEAL: &str = "seal";

/// The text of `m` as written to `site`'s `.rocbuild/`: its JSON with a `seal` member, an
/// HMAC of the rest (as `serde_json` writes it) under this user's key, bound to this venv and
/// this recipe.
pub fn sealed_text(site: &Path, m: &Manifest, key: &crate::state_key::StateKey) -> String {
    #[derive(Serialize)]
    struct Sealed<'a> {
        #[serde(flatten)]
        manifest: &'a Manifest,
        seal: String,
    }
    let canonical = serde_json::to_string(m).unwrap_or_default();
    let sealed = Sealed {
        manifest: m,
        seal: key.seal_manifest(site, &m.recipe, &canonical),
    };
    serde_json::to_string_pretty(&sealed).unwrap_or_default()
}

/// Read a manifest's text. Besides the JSON, every path in it must be a plain relative path
/// inside site-packages (no `..`, no root, no drive, no backslash) and every sha256 64 hex
/// digits: `restore` and `status` join these paths onto site-packages and move or remove
/// what they name, so a corrupt or hand-edited manifest must never reach outside the venv.
pub fn parse(text: &str) -> std::result::Result<Manifest, String> {
    let m: Manifest = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut paths: Vec<(&str, &str)> = Vec::new();
    for f in &m.files {
        paths.push(("files", &f.path));
        check_sha256(&f.sha256)?;
        if let Some(b) = &f.built_sha256 {
            check_sha256(b)?;
        }
    }
    paths.extend(m.parked.iter().map(|p| ("parked", p.as_str())));
    paths.extend(m.dropped.iter().map(|p| ("dropped", p.as_str())));
    paths.extend(m.extra_files.iter().map(|p| ("extra_files", p.as_str())));
    paths.extend(m.record.iter().map(|p| ("record", p.as_str())));
    paths.extend(m.search_added.keys().map(|p| ("search_added", p.as_str())));
    if let Some(pp) = &m.python_part {
        paths.extend(pp.files.iter().map(|p| ("python_part.files", p.as_str())));
    }
    for r in &m.requirements {
        paths.extend(r.files.iter().map(|p| ("requirements.files", p.as_str())));
    }
    if let Some(o) = &m.ownership {
        paths.extend(o.roots.iter().map(|p| ("ownership.roots", p.as_str())));
        for (p, sha) in &o.held {
            paths.push(("ownership.held", p.as_str()));
            check_sha256(sha)?;
        }
        for (p, sha) in o.baseline.iter().flatten() {
            paths.push(("ownership.baseline", p.as_str()));
            check_sha256(sha)?;
        }
    }
    for (field, p) in paths {
        if !is_inside(p) {
            return Err(format!(
                "`{field}` names `{p}`, which is not a relative path inside site-packages"
            ));
        }
    }
    if !is_plain_name(&m.recipe) {
        return Err(format!(
            "the recipe name `{}` is not a plain name",
            m.recipe
        ));
    }
    Ok(m)
}

pub use crate::confine::{is_inside, is_plain_name};

fn check_sha256(s: &str) -> std::result::Result<(), String> {
    if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(format!("`{s}` is not a sha256 (64 hex digits)"))
    }
}

/// Every manifest in `site` (one per recipe rocbuild installed), sorted by recipe; manifests
/// that do not parse are returned as errors with their path.
pub fn read_all(site: &Path) -> Vec<std::result::Result<Manifest, (PathBuf, String)>> {
    let Ok(rd) = std::fs::read_dir(dir(site)) else {
        return Vec::new();
    };
    let mut recipes: Vec<(PathBuf, String)> = rd
        .flatten()
        .filter_map(|e| {
            // A name that is not UTF-8 is no recipe's (rocbuild writes plain names).
            let name = e.file_name().into_string().ok()?;
            if !crate::layout::is_manifest_name(&name) || e.file_type().is_ok_and(|t| t.is_dir()) {
                return None;
            }
            Some((e.path(), name.strip_suffix(".json")?.to_string()))
        })
        .collect();
    recipes.sort();
    recipes
        .into_iter()
        .map(|(p, recipe)| match read_checked(site, &recipe) {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err((p, "it went while rocbuild read it".into())),
            Err(VenvError::BadManifest { reason, .. }) => Err((p, reason)),
            Err(e) => Err((p, e.to_string())),
        })
        .collect()
}

/// Nanoseconds since the epoch of a file's mtime.
pub fn mtime_ns(md: &std::fs::Metadata) -> Option<u64> {
    let d = md
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    u64::try_from(d.as_nanos()).ok()
}

/// Write atomically (a temp file beside, then a rename), sealed with this user's key.
pub fn write(site: &Path, m: &Manifest) -> Result<()> {
    let key = crate::state_key::for_writing()?;
    let p = path(site, &m.recipe);
    crate::txn_fs::write_atomic(&p, sealed_text(site, m, &key).as_bytes())
        .map_err(VenvError::io("write", &p))
}

/// The sha256 and size of the regular file `p` (never through a link at `p`, never waiting
/// on a FIFO or a device).
pub fn sha256_file(p: &Path) -> Result<(String, u64)> {
    let mut f = host_files::open_regular(p).map_err(VenvError::io("read", p))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(VenvError::io("read", p))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok((
        h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
        size,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cuda_build_says_its_cuda_and_archs_and_no_other_does() {
        let mut sdk = SdkRecord {
            backend: Some("cuda".into()),
            toolkit_version: Some("13.2.86".into()),
            cuda_archs: vec!["8.6".into(), "12.0+PTX".into()],
            ..SdkRecord::default()
        };
        assert_eq!(
            sdk.cuda_build().as_deref(),
            Some("CUDA 13.2.86 (its toolkit), for 8.6;12.0+PTX")
        );
        sdk.toolkit_version = None;
        sdk.torch_cuda = Some("13.0".into());
        sdk.cuda_archs.clear();
        assert_eq!(sdk.cuda_build().as_deref(), Some("CUDA 13.0 (torch's)"));
        sdk.backend = Some("cpu".into());
        assert_eq!(sdk.cuda_build(), None);
    }

    #[test]
    fn a_manifest_of_schema_1_without_the_newer_fields_loads() {
        let old = r#"{"schema":1,"recipe":"r","version":"1","recipe_hash":"h","fingerprint":"f",
            "source_url":null,"source_commit":null,"torch_version":"2.9.1","torch_git":null,
            "flavor":"cpu","ffmpeg_major":7,"python":"/v/bin/python","defines":{},"runpath":[],
            "files":[{"path":"p/a.so","sha256":"00","size":1}],"parked":[],"installed_at":0}"#;
        let m: Manifest = serde_json::from_str(old).unwrap();
        assert_eq!(m.files[0].mtime_ns, None);
        assert_eq!(m.options, crate::options::BuildOptions::default());
        assert!(m.extra_files.is_empty() && m.python_part.is_none());
    }

    #[test]
    fn a_manifest_naming_a_path_outside_site_packages_is_refused() {
        let good = Manifest {
            schema: 1,
            recipe: "r".into(),
            files: vec![InstalledFile {
                path: "p/a.so".into(),
                sha256: "0".repeat(64),
                ..InstalledFile::default()
            }],
            ..Manifest::default()
        };
        let text = serde_json::to_string(&good).unwrap();
        assert_eq!(parse(&text).unwrap(), good);
        for bad in [
            "../../etc/passwd",
            "/etc/passwd",
            "p/../../x",
            "C:/x",
            "p\\..\\x",
            "",
            "p//a",
        ] {
            let mut m = good.clone();
            m.parked = vec![bad.to_string()];
            let e = parse(&serde_json::to_string(&m).unwrap()).unwrap_err();
            assert!(e.contains("`parked`"), "{bad}: {e}");
        }
        let mut m = good.clone();
        m.files[0].sha256 = "zz".into();
        assert!(parse(&serde_json::to_string(&m).unwrap()).is_err());
        let mut m = good;
        m.recipe = "../r".into();
        assert!(parse(&serde_json::to_string(&m).unwrap()).is_err());
    }

    /// A name in `.rocbuild/` that is not UTF-8 is no manifest of rocbuild's (it writes plain
    /// names): skipped, and the others still read.
    #[cfg(unix)]
    #[test]
    fn a_manifest_name_that_is_not_utf8_is_skipped() {
        use std::os::unix::ffi::OsStrExt;
        crate::state_key::configure_for_tests();
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        std::fs::create_dir_all(dir(site)).unwrap();
        let m = Manifest {
            schema: 1,
            recipe: "good".into(),
            ..Manifest::default()
        };
        write(site, &m).unwrap();
        let odd = dir(site).join(std::ffi::OsStr::from_bytes(b"\xff.json"));
        std::fs::write(odd, "{}").unwrap();
        let all = read_all(site);
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0].as_ref().unwrap().recipe, "good");
    }
}
