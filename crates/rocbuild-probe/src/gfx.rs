//! AMD GPU architecture names: the known table, family aliases, target-id features
//! (`gfx1010:xnack-`), and the check that an SDK can really compile for a target.

use serde::{Deserialize, Serialize};

use crate::{GpuArchs, GpuTargets, RocmSdk};

/// One parsed target id: `gfx90a:sramecc+:xnack-` -> name `gfx90a`, features `sramecc+`, `xnack-`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GfxTarget {
    /// The processor name, `gfx1010`.
    pub name: String,
    /// Target features with their sign, `xnack-`, `sramecc+`.
    pub features: Vec<String>,
}

impl GfxTarget {
    /// The target id as compilers take it (`--offload-arch`, `CMAKE_HIP_ARCHITECTURES`).
    pub fn id(&self) -> String {
        let mut s = self.name.clone();
        for f in &self.features {
            s.push(':');
            s.push_str(f);
        }
        s
    }
}

/// The architectures to build for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchChoice {
    /// Target ids, for `CMAKE_HIP_ARCHITECTURES` (joined with `;`) and `--offload-arch`.
    pub archs: Vec<String>,
    pub targets: Vec<GfxTarget>,
    /// `--arch`, or the detection step that gave them.
    pub found_by: String,
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ArchError {
    #[error("unknown GPU architecture `{given}`")]
    #[diagnostic(code(rocbuild::arch::unknown))]
    Unknown {
        given: String,
        #[help]
        help: String,
    },
    #[error("`{given}` is not a valid GPU target id: {reason}")]
    #[diagnostic(
        code(rocbuild::arch::bad_target_id),
        help("write a target as gfxNNNN, optionally with features: gfx90a:xnack- or gfx90a:sramecc+:xnack-")
    )]
    BadTargetId { given: String, reason: String },
    #[error("ROCm {sdk_version} at {sdk_root} cannot compile for {arch}: its device library {missing} does not exist")]
    #[diagnostic(code(rocbuild::arch::not_in_sdk))]
    NotInSdk {
        arch: String,
        sdk_version: String,
        sdk_root: String,
        missing: String,
        #[help]
        help: String,
    },
    #[error("ROCm {sdk_version} at {sdk_root} has no device libraries, so no GPU target can be checked or built")]
    #[diagnostic(
        code(rocbuild::arch::no_device_libs),
        help("install the device libraries (Debian: apt-get install rocm-device-libs; AMD packages: rocm-device-libs), or choose another SDK with --rocm")
    )]
    NoDeviceLibs {
        sdk_version: String,
        sdk_root: String,
    },
    #[error("no GPU architecture given and none detected")]
    #[diagnostic(code(rocbuild::arch::none))]
    NoArch {
        #[help]
        help: String,
    },
}

/// One known processor: its LLVM name, what it is, and whether it is an integrated GPU (APU).
struct Known {
    name: &'static str,
    what: &'static str,
    igpu: bool,
}

const fn k(name: &'static str, what: &'static str, igpu: bool) -> Known {
    Known { name, what, igpu }
}

/// AMDGPU processors LLVM knows (the ones a ROCm SDK may ship device libraries for).
const KNOWN: &[Known] = &[
    k("gfx600", "GCN1 Tahiti", false),
    k("gfx601", "GCN1 Pitcairn/Verde", false),
    k("gfx602", "GCN1 Oland/Hainan", false),
    k("gfx700", "GCN2 Kaveri", true),
    k("gfx701", "GCN2 Hawaii", false),
    k("gfx702", "GCN2 Hawaii", false),
    k("gfx703", "GCN2 Kabini", true),
    k("gfx704", "GCN2 Bonaire", false),
    k("gfx705", "GCN2 Mullins", true),
    k("gfx801", "GCN3 Carrizo", true),
    k("gfx802", "GCN3 Tonga/Iceland", false),
    k("gfx803", "Polaris / Fiji (RX 470-590, R9 Fury)", false),
    k("gfx805", "GCN3 Tongapro", false),
    k("gfx810", "GCN3 Stoney", true),
    k("gfx900", "Vega 10 (RX Vega 56/64, MI25)", false),
    k("gfx902", "Raven Ridge APU", true),
    k("gfx904", "Vega 12", false),
    k("gfx906", "Vega 20 (Radeon VII, MI50/60)", false),
    k("gfx908", "CDNA1 (MI100)", false),
    k("gfx909", "Raven2 APU", true),
    k("gfx90a", "CDNA2 (MI200)", false),
    k("gfx90c", "Renoir/Cezanne APU", true),
    k("gfx940", "CDNA3 (MI300 engineering)", false),
    k("gfx941", "CDNA3 (MI300 engineering)", false),
    k("gfx942", "CDNA3 (MI300X/A, MI325X)", false),
    k("gfx950", "CDNA4 (MI350)", false),
    k("gfx1010", "RDNA1 Navi 10 (RX 5700/5700 XT)", false),
    k("gfx1011", "RDNA1 Navi 12 (Pro 5600M, V520)", false),
    k("gfx1012", "RDNA1 Navi 14 (RX 5500/5300)", false),
    k("gfx1013", "RDNA1 Oberon APU", true),
    k("gfx1030", "RDNA2 Navi 21 (RX 6800/6900, W6800)", false),
    k("gfx1031", "RDNA2 Navi 22 (RX 6700/6750)", false),
    k("gfx1032", "RDNA2 Navi 23 (RX 6600)", false),
    k("gfx1033", "RDNA2 Van Gogh APU", true),
    k("gfx1034", "RDNA2 Navi 24 (RX 6500/6400)", false),
    k("gfx1035", "RDNA2 Rembrandt APU (680M)", true),
    k("gfx1036", "RDNA2 Raphael APU", true),
    k("gfx1100", "RDNA3 Navi 31 (RX 7900 XTX/XT, W7900)", false),
    k("gfx1101", "RDNA3 Navi 32 (RX 7800/7700)", false),
    k("gfx1102", "RDNA3 Navi 33 (RX 7600)", false),
    k("gfx1103", "RDNA3 Phoenix APU (780M)", true),
    k("gfx1150", "RDNA3.5 Strix Point APU (890M)", true),
    k("gfx1151", "RDNA3.5 Strix Halo APU (8060S)", true),
    k("gfx1152", "RDNA3.5 Krackan APU", true),
    k("gfx1153", "RDNA3.5 APU", true),
    k("gfx1200", "RDNA4 Navi 44 (RX 9060)", false),
    k("gfx1201", "RDNA4 Navi 48 (RX 9070/9070 XT)", false),
    k("gfx9-generic", "generic GFX9", false),
    k("gfx9-4-generic", "generic GFX9.4", false),
    k("gfx10-1-generic", "generic RDNA1", false),
    k("gfx10-3-generic", "generic RDNA2", false),
    k("gfx11-generic", "generic RDNA3", false),
    k("gfx12-generic", "generic RDNA4", false),
];

/// Family aliases `gfx110X` (also TheRock's `gfx110X-dgpu`, `-igpu`, `-all`).
const ALIASES: &[&str] = &[
    "gfx90X", "gfx94X", "gfx101X", "gfx103X", "gfx110X", "gfx115X", "gfx120X",
];

fn known(name: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|k| k.name == name)
}

/// A short description of a known gfx name ("RDNA1 Navi 10 (RX 5700/5700 XT)").
pub fn describe_gfx(name: &str) -> Option<&'static str> {
    known(name).map(|k| k.what)
}

fn is_generic(name: &str) -> bool {
    name.ends_with("-generic")
}

/// Which target features a processor has a setting for.
fn supports(name: &str, feature: &str) -> bool {
    let xnack = [
        "gfx801",
        "gfx810",
        "gfx900",
        "gfx902",
        "gfx904",
        "gfx906",
        "gfx908",
        "gfx909",
        "gfx90a",
        "gfx90c",
        "gfx940",
        "gfx941",
        "gfx942",
        "gfx950",
        "gfx1010",
        "gfx1011",
        "gfx1012",
        "gfx1013",
        "gfx9-generic",
        "gfx9-4-generic",
        "gfx10-1-generic",
    ];
    let sramecc = [
        "gfx906",
        "gfx908",
        "gfx90a",
        "gfx940",
        "gfx941",
        "gfx942",
        "gfx950",
        "gfx9-4-generic",
    ];
    match feature {
        "xnack" => xnack.contains(&name) || !KNOWN.iter().any(|k| k.name == name),
        "sramecc" => sramecc.contains(&name) || !KNOWN.iter().any(|k| k.name == name),
        _ => false,
    }
}

/// Parse a target id: `gfx1010`, `gfx1010:xnack-`, `gfx90a:sramecc+:xnack-`.
///
/// The processor name is not checked against the table here (see [`resolve_archs`]).
pub fn parse_target_id(given: &str) -> Result<GfxTarget, ArchError> {
    let bad = |reason: String| ArchError::BadTargetId {
        given: given.to_string(),
        reason,
    };
    let mut parts = given.trim().split(':');
    let name = parts.next().unwrap_or_default().to_ascii_lowercase();
    if !name.starts_with("gfx") || name.len() < 6 {
        return Err(bad("the name must look like gfxNNNN".into()));
    }
    let mut features: Vec<String> = Vec::new();
    for f in parts {
        let (feat, sign) = match f
            .strip_suffix('+')
            .map(|n| (n, '+'))
            .or_else(|| f.strip_suffix('-').map(|n| (n, '-')))
        {
            Some(x) => x,
            None => return Err(bad(format!("feature `{f}` needs a + or - (e.g. xnack-)"))),
        };
        if feat != "xnack" && feat != "sramecc" {
            return Err(bad(format!(
                "unknown feature `{feat}` (only xnack and sramecc exist)"
            )));
        }
        if !supports(&name, feat) {
            return Err(bad(format!("{name} has no {feat} setting")));
        }
        if features.iter().any(|x| x[..x.len() - 1] == *feat) {
            return Err(bad(format!("feature `{feat}` given twice")));
        }
        features.push(format!("{feat}{sign}"));
    }
    // LLVM's canonical order is alphabetical (sramecc before xnack).
    features.sort();
    Ok(GfxTarget { name, features })
}

/// Expand a family alias (`gfx110X`, `gfx110X-dgpu`) into known names; None if not an alias.
pub fn expand_alias(given: &str) -> Option<Vec<&'static str>> {
    let lower = given.to_ascii_lowercase();
    let (family, filter) = match lower.rsplit_once('-') {
        Some((f, "dgpu")) => (f.to_string(), Some(false)),
        Some((f, "igpu")) => (f.to_string(), Some(true)),
        Some((f, "all")) => (f.to_string(), None),
        _ => (lower.clone(), None),
    };
    let alias = ALIASES.iter().find(|a| a.to_ascii_lowercase() == family)?;
    let prefix = &alias[..alias.len() - 1];
    let members = KNOWN
        .iter()
        .filter(|k| k.name.len() == alias.len() && k.name.starts_with(prefix))
        .filter(|k| filter.is_none_or(|igpu| k.igpu == igpu))
        .map(|k| k.name)
        .collect();
    Some(members)
}

/// Known names (and aliases) closest to `given`, best first.
pub fn nearest_names(given: &str, extra: &[String]) -> Vec<String> {
    let lower = given.to_ascii_lowercase();
    // Edit distance first; among equals, the longer shared prefix (gfx1101x is nearer gfx1101
    // than gfx101X, though both are one edit away).
    let mut scored: Vec<(usize, std::cmp::Reverse<usize>, String)> = KNOWN
        .iter()
        .map(|k| k.name.to_string())
        .chain(ALIASES.iter().map(|a| a.to_string()))
        .chain(extra.iter().cloned())
        .map(|n| {
            let l = n.to_ascii_lowercase();
            let prefix = lower
                .bytes()
                .zip(l.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            (
                strsim::levenshtein(&lower, &l),
                std::cmp::Reverse(prefix),
                n,
            )
        })
        .filter(|(d, _, _)| *d <= 2)
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.2 == b.2);
    scored.into_iter().take(3).map(|(_, _, n)| n).collect()
}

/// The device-library file an SDK needs to compile for `name` (`oclc_isa_version_1100.bc`).
pub fn isa_bitcode_file(name: &str) -> String {
    format!("oclc_isa_version_{}.bc", name.trim_start_matches("gfx"))
}

/// The gfx name a device-library file stands for (`oclc_isa_version_90a.bc` -> `gfx90a`).
pub fn gfx_of_bitcode_file(file: &str) -> Option<String> {
    let n = file
        .strip_prefix("oclc_isa_version_")?
        .strip_suffix(".bc")?;
    (!n.is_empty()).then(|| format!("gfx{n}"))
}

/// Decide the architectures to build for and check the SDK can compile each one.
///
/// `requested` (from `--arch`) wins; otherwise the detected ones. A target the SDK has no device
/// library for is refused here, before any build starts. Warnings (not errors): torch's own arch
/// list lacks it, or the SDK's rocBLAS has no Tensile kernels for it.
pub fn resolve_archs(
    requested: &GpuTargets,
    detected: Option<&GpuArchs>,
    sdk: &RocmSdk,
    torch_archs: Option<&[String]>,
) -> Result<ArchChoice, ArchError> {
    let sdk_version = sdk
        .version
        .clone()
        .unwrap_or_else(|| "(unknown version)".into());
    let sdk_root = sdk.root.display().to_string();
    let mut notes = Vec::new();
    let mut warnings = Vec::new();

    let (tokens, found_by) = {
        if !requested.is_empty() {
            (requested.names().to_vec(), "--arch".to_string())
        } else if let Some(d) = detected.filter(|d| !d.archs.is_empty()) {
            (d.archs.clone(), d.found_by.clone())
        } else {
            let steps = detected
                .map(|d| d.steps.join("; "))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "detection was not run".into());
            return Err(ArchError::NoArch {
                help: format!(
                    "pass --arch gfxNNNN (e.g. --arch gfx1100, or a list --arch \"gfx1100;gfx1030\"); \
                     `rocminfo` or `hipinfo` names your GPU's gfx target. Detection: {steps}"
                ),
            });
        }
    };
    if let Some(d) = detected {
        if let Some(n) = &d.hsa_override_note {
            notes.push(n.clone());
        }
    }

    let Some(dev_dir) = sdk.device_lib_dir.as_ref() else {
        return Err(ArchError::NoDeviceLibs {
            sdk_version,
            sdk_root,
        });
    };

    let mut targets: Vec<GfxTarget> = Vec::new();
    for token in &tokens {
        let from_alias = expand_alias(token);
        let candidates: Vec<GfxTarget> = match &from_alias {
            Some(names) => names
                .iter()
                .map(|n| GfxTarget {
                    name: n.to_string(),
                    features: Vec::new(),
                })
                .collect(),
            None => vec![parse_target_id(token).map_err(|e| match e {
                ArchError::BadTargetId { ref reason, .. } if reason.contains("gfxNNNN") => {
                    unknown(token, &sdk.targets)
                }
                other => other,
            })?],
        };
        let mut kept_from_alias = Vec::new();
        for t in candidates {
            if known(&t.name).is_none() && !sdk.targets.contains(&t.name) {
                return Err(unknown(token, &sdk.targets));
            }
            if is_generic(&t.name) && !sdk.targets.contains(&t.name) {
                notes.push(format!(
                    "{} is a generic target: the device libraries cannot confirm ROCm {sdk_version} supports it (it needs ROCm 6.3 or later)",
                    t.name
                ));
            } else if !sdk.targets.contains(&t.name) {
                if from_alias.is_some() {
                    continue;
                }
                return Err(not_in_sdk(&t.name, sdk, dev_dir, &sdk_version, &sdk_root));
            }
            kept_from_alias.push(t.name.clone());
            if !targets.iter().any(|x| x.name == t.name) {
                targets.push(t);
            }
        }
        if let Some(names) = &from_alias {
            if kept_from_alias.is_empty() {
                let first = names.first().copied().unwrap_or("gfx");
                return Err(not_in_sdk(first, sdk, dev_dir, &sdk_version, &sdk_root));
            }
            let dropped: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| !kept_from_alias.iter().any(|k| k == n))
                .collect();
            let mut note = format!("{token} means {}", kept_from_alias.join(";"));
            if !dropped.is_empty() {
                note.push_str(&format!(
                    " (ROCm {sdk_version} has no device libraries for {}: left out)",
                    dropped.join(", ")
                ));
            }
            notes.push(note);
        }
    }

    for t in &targets {
        if let Some(list) = torch_archs {
            let has = list
                .iter()
                .any(|a| a.split(':').next() == Some(t.name.as_str()));
            if !has {
                warnings.push(format!(
                    "torch was built for {} but not {}: torch's own GPU kernels will fail on it (hipErrorInvalidDeviceFunction); only code built here will run",
                    list.join(";"),
                    t.name
                ));
            }
        }
        if sdk.rocblas && !sdk.tensile_archs.contains(&t.name) {
            let dir = sdk
                .tensile_dir
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|| "rocblas/library".into());
            warnings.push(format!(
                "rocBLAS in ROCm {sdk_version} has no Tensile kernels for {} (no *{}* files in {dir}): hipBLAS/rocBLAS calls will fail with \"Cannot read TensileLibrary.dat\"; install rocBLAS kernels built for {} into that directory",
                t.name, t.name, t.name
            ));
        }
    }

    if let Some(over) = detected.and_then(|d| d.hsa_override_gfx.as_deref()) {
        if !targets.iter().any(|t| t.name == over) {
            let built: Vec<String> = targets.iter().map(GfxTarget::id).collect();
            warnings.push(format!(
                "HSA_OVERRIDE_GFX_VERSION is set: the ROCm runtime will look for {over} code, but this build is for {}; it will not run while the override is set (add {over} to --arch, or unset the override)",
                built.join(";")
            ));
        }
    }

    Ok(ArchChoice {
        archs: targets.iter().map(GfxTarget::id).collect(),
        targets,
        found_by,
        notes,
        warnings,
    })
}

/// The targets `--arch` names (or those detected), checked without an SDK (for a build that
/// compiles no GPU code but is made for a GPU): each token with what it stands for, a known
/// processor with valid features, or a family alias expanded into its members.
pub fn named_targets(tokens: &[String]) -> Result<Vec<(String, Vec<GfxTarget>)>, ArchError> {
    let mut out = Vec::new();
    for token in tokens.iter().cloned() {
        let targets = match expand_alias(&token) {
            Some(names) => names
                .iter()
                .map(|n| GfxTarget {
                    name: n.to_string(),
                    features: Vec::new(),
                })
                .collect(),
            None => {
                let t = parse_target_id(&token).map_err(|e| match e {
                    ArchError::BadTargetId { ref reason, .. } if reason.contains("gfxNNNN") => {
                        unknown(&token, &[])
                    }
                    other => other,
                })?;
                if known(&t.name).is_none() {
                    return Err(unknown(&token, &[]));
                }
                vec![t]
            }
        };
        out.push((token, targets));
    }
    Ok(out)
}

fn unknown(given: &str, extra: &[String]) -> ArchError {
    let near = nearest_names(given, extra);
    let help = if near.is_empty() {
        "GPU targets look like gfx1100 (RX 7900), gfx1030 (RX 6800), gfx1010 (RX 5700 XT); `rocminfo` or `hipinfo` shows yours".to_string()
    } else {
        let named: Vec<String> = near
            .iter()
            .map(|n| match describe_gfx(n) {
                Some(w) => format!("{n} ({w})"),
                None if ALIASES.contains(&n.as_str()) => format!("{n} (family alias)"),
                None => n.clone(),
            })
            .collect();
        format!("did you mean {}?", named.join(", or "))
    };
    ArchError::Unknown {
        given: given.to_string(),
        help,
    }
}

fn not_in_sdk(
    name: &str,
    sdk: &RocmSdk,
    dev_dir: &std::path::Path,
    sdk_version: &str,
    sdk_root: &str,
) -> ArchError {
    let missing = dev_dir.join(isa_bitcode_file(name)).display().to_string();
    let shown: Vec<&str> = sdk.targets.iter().map(String::as_str).collect();
    ArchError::NotInSdk {
        arch: name.to_string(),
        sdk_version: sdk_version.to_string(),
        sdk_root: sdk_root.to_string(),
        missing,
        help: format!(
            "this SDK can compile for: {}. Choose one of those, or a newer ROCm with --rocm (gfx11xx needs ROCm 5.3+, gfx115x 6.2+, gfx12xx 6.3+)",
            shown.join(", ")
        ),
    }
}
