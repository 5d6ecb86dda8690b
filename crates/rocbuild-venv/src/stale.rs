//! Is an install still what rocbuild installed, and still right for the venv? One answer for
//! `status` and `doctor`: the files (hashed only when their size or mtime changed) and what
//! the build was made against (torch, its flavor and SDK, FFmpeg, the GPU, the recipe).

use std::fmt;
use std::path::Path;

use rocbuild_probe::TorchVersion;
use rocbuild_recipe::RecipeSet;
use serde::Serialize;

use crate::manifest::{self, sha256_file, Manifest, SdkRecord};

/// What the venv and the machine hold now.
#[derive(Debug, Clone, Copy, Default)]
pub struct Now<'a> {
    /// `torch/version.py` of the venv.
    pub torch: Option<&'a TorchVersion>,
    /// The GPUs of the machine as far as is known cheaply (`$PYTORCH_ROCM_ARCH`, the KFD
    /// topology); empty when unknown (no GPU reason is given then).
    pub gpu_archs: &'a [String],
    /// The recipes: a changed recipe makes a build stale. None: not compared.
    pub recipes: Option<&'a RecipeSet>,
}

/// One reason a build is stale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reason {
    Torch {
        was: String,
        now: Option<String>,
    },
    TorchRebuilt {
        version: String,
        was_git: String,
        now_git: Option<String>,
    },
    Flavor {
        was: String,
        now: String,
    },
    Ffmpeg {
        was: u32,
        now: Option<u32>,
    },
    Sdk {
        was: String,
        now: String,
    },
    /// A `--patch` file changed (or went away) since it was applied.
    Patch {
        path: String,
    },
    /// GPUs of the machine the build has no code for.
    GpuArchs {
        built: Vec<String>,
        missing: Vec<String>,
    },
    RecipeChanged {
        file: String,
    },
    RecipeGone {
        recipe: String,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let none = |s: &Option<String>| s.clone().unwrap_or_else(|| "none".into());
        match self {
            Reason::Torch { was, now } => write!(f, "torch {was} → {}", none(now)),
            Reason::TorchRebuilt {
                version,
                was_git,
                now_git,
            } => write!(
                f,
                "torch {version} was rebuilt (git {} → {})",
                short(Some(was_git)),
                short(now_git.as_deref())
            ),
            Reason::Flavor { was, now } => write!(f, "torch flavor {was} → {now}"),
            Reason::Ffmpeg { was, now } => match now {
                Some(n) => write!(f, "FFmpeg {was} → {n}"),
                None => write!(f, "FFmpeg {was} → none found"),
            },
            Reason::Sdk { was, now } => write!(f, "SDK changed: {was} → {now}"),
            Reason::Patch { path } => write!(f, "patch {path} changed since it was applied"),
            Reason::GpuArchs { built, missing } => write!(
                f,
                "GPU {} has no code in this build (built for {})",
                missing.join(", "),
                built.join(", ")
            ),
            Reason::RecipeChanged { file } => write!(f, "recipe changed ({file})"),
            Reason::RecipeGone { recipe } => write!(f, "recipe `{recipe}` is no longer found"),
        }
    }
}

/// The files and the reasons of one install.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Staleness {
    /// Installed files that are gone.
    pub missing: Vec<String>,
    /// Installed files whose bytes are not the ones installed.
    pub overwritten: Vec<String>,
    /// Files hashed because their size or mtime changed (the rest were not read).
    pub hashed: usize,
    pub reasons: Vec<Reason>,
}

/// Compare one manifest with the venv and the machine now.
pub fn check(site: &Path, m: &Manifest, now: &Now) -> Staleness {
    let mut s = Staleness::default();
    for f in &m.files {
        let p = site.join(&f.path);
        let Ok(md) = std::fs::metadata(&p) else {
            s.missing.push(f.path.clone());
            continue;
        };
        if md.len() == f.size && f.mtime_ns.is_some() && manifest::mtime_ns(&md) == f.mtime_ns {
            continue;
        }
        s.hashed += 1;
        if sha256_file(&p).map_or(true, |(h, _)| h != f.sha256) {
            s.overwritten.push(f.path.clone());
        }
    }
    for f in &m.extra_files {
        if !site.join(f).exists() {
            s.missing.push(f.clone());
        }
    }
    // A repair changed only where pip's files look for their libraries: what they were
    // built against is pip's business, not a reason to rebuild.
    if m.kind == crate::manifest::Kind::Build {
        s.reasons = reasons(m, now);
    }
    s
}

/// The command that makes an install that is no longer fresh right again: a build is
/// rebuilt with the options it was built with; a repair of pip's files is made again on the
/// files pip put there (`rebuild` has no source to build a repair from).
pub fn fix_command(m: &Manifest) -> String {
    match m.kind {
        crate::manifest::Kind::Build => format!("rocbuild rebuild {}", m.recipe),
        crate::manifest::Kind::Repair => format!("rocbuild repair {}", m.recipe),
    }
}

/// The flavor of a torch from its version.py: `rocm`, `cuda` or `cpu`.
pub fn flavor_of(t: &TorchVersion) -> &'static str {
    match (&t.hip, &t.cuda) {
        (Some(_), _) => "rocm",
        (None, Some(_)) => "cuda",
        _ => "cpu",
    }
}

/// What changed since the build, apart from the files.
pub fn reasons(m: &Manifest, now: &Now) -> Vec<Reason> {
    let mut out = Vec::new();
    let torch = now.torch;
    // No torch recorded: the build does not use torch (CTranslate2), a torch change is not
    // a reason.
    if let Some(was) = &m.torch_version {
        let now_version = torch.map(|t| t.version.clone());
        if now_version.as_ref() != Some(was) {
            out.push(Reason::Torch {
                was: was.clone(),
                now: now_version,
            });
        } else if let Some(was_git) = &m.torch_git {
            let now_git = torch.and_then(|t| t.git_version.clone());
            if now_git.as_ref() != Some(was_git) {
                out.push(Reason::TorchRebuilt {
                    version: was.clone(),
                    was_git: was_git.clone(),
                    now_git,
                });
            }
        }
        if let Some(t) = torch {
            let f = flavor_of(t);
            if !m.flavor.is_empty() && m.flavor != f {
                out.push(Reason::Flavor {
                    was: m.flavor.clone(),
                    now: f.into(),
                });
            }
        }
    }
    if let Some(was) = m.ffmpeg_major {
        let now = rocbuild_probe::ffmpeg_major_now(m.options.ffmpeg_dir.as_deref());
        if now != Some(was) {
            out.push(Reason::Ffmpeg { was, now });
        }
    }
    for p in &m.options.patches {
        let now = std::fs::read(&p.path).ok().map(|b| {
            <sha2::Sha256 as sha2::Digest>::digest(&b)
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect::<String>()
        });
        if p.sha256.is_some() && now != p.sha256 {
            out.push(Reason::Patch {
                path: p.path.display().to_string(),
            });
        }
    }
    // Manifests of schema 1 did not record the SDK.
    if m.schema >= 2 {
        // A build that did not use torch (CTranslate2) does not go stale with it.
        let torch = torch.filter(|_| m.torch_version.is_some());
        let sdk_now = SdkRecord {
            torch_cuda: torch.and_then(|t| t.cuda.clone()),
            torch_hip: torch.and_then(|t| t.hip.clone()),
            toolkit: m.sdk.toolkit.clone(),
            toolkit_version: m
                .sdk
                .toolkit
                .as_deref()
                .and_then(rocbuild_probe::toolkit_version),
            ..m.sdk.clone()
        };
        if sdk_now != m.sdk {
            out.push(Reason::Sdk {
                was: m.sdk.describe(),
                now: sdk_now.describe(),
            });
        }
    }
    if let Some(r) = gpu_reason(&m.sdk, now.gpu_archs) {
        out.push(r);
    }
    if let Some(recipes) = now.recipes {
        match recipes.get(&m.recipe) {
            Ok(r) if r.hash != m.recipe_hash => out.push(Reason::RecipeChanged {
                file: r.file.clone(),
            }),
            Ok(_) => {}
            Err(_) => out.push(Reason::RecipeGone {
                recipe: m.recipe.clone(),
            }),
        }
    }
    out
}

/// A GPU build whose archs do not cover the machine's GPUs. Target features (`:xnack-`) are
/// compared by processor name.
fn gpu_reason(sdk: &SdkRecord, gpus: &[String]) -> Option<Reason> {
    // Only code compiled for a GPU can lack it: a CPU build made for a ROCm torch's GPU
    // (TorchCodec with --arch) runs on any.
    if sdk.gpu_archs.is_empty()
        || gpus.is_empty()
        || sdk.backend.as_deref().is_some_and(|b| b != "rocm")
    {
        return None;
    }
    let base = |a: &str| a.split(':').next().unwrap_or(a).to_string();
    let built: Vec<String> = sdk.gpu_archs.iter().map(|a| base(a)).collect();
    let mut missing: Vec<String> = Vec::new();
    for g in gpus.iter().map(|g| base(g)) {
        if !built.contains(&g) && !missing.contains(&g) {
            missing.push(g);
        }
    }
    (!missing.is_empty()).then(|| Reason::GpuArchs {
        built: sdk.gpu_archs.clone(),
        missing,
    })
}

fn short(s: Option<&str>) -> &str {
    match s {
        Some(s) => &s[..s.len().min(12)],
        None => "none",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rocm_manifest(archs: &[&str]) -> Manifest {
        Manifest {
            schema: 2,
            recipe: "ctranslate2".into(),
            sdk: SdkRecord {
                backend: Some("rocm".into()),
                rocm_version: Some("6.4.3".into()),
                gpu_archs: archs.iter().map(|a| a.to_string()).collect(),
                ..SdkRecord::default()
            },
            ..Manifest::default()
        }
    }

    #[test]
    fn a_gpu_the_build_has_no_code_for_is_a_reason() {
        let m = rocm_manifest(&["gfx1010"]);
        let gpus = vec!["gfx1100".to_string()];
        let r = reasons(
            &m,
            &Now {
                gpu_archs: &gpus,
                ..Now::default()
            },
        );
        assert_eq!(
            r,
            vec![Reason::GpuArchs {
                built: vec!["gfx1010".into()],
                missing: vec!["gfx1100".into()]
            }]
        );
        assert_eq!(
            r[0].to_string(),
            "GPU gfx1100 has no code in this build (built for gfx1010)"
        );
        // The same GPU, or one the fat binary covers (feature suffixes aside): fresh.
        let m = rocm_manifest(&["gfx1010", "gfx1100:xnack-"]);
        assert!(reasons(
            &m,
            &Now {
                gpu_archs: &gpus,
                ..Now::default()
            }
        )
        .is_empty());
        // Unknown GPU: nothing said.
        assert!(reasons(&rocm_manifest(&["gfx1010"]), &Now::default()).is_empty());
        // CPU code made for a GPU (TorchCodec --arch gfx1010) runs on any: nothing said.
        let mut cpu = rocm_manifest(&["gfx1010"]);
        cpu.sdk.backend = Some("cpu".into());
        assert!(reasons(
            &cpu,
            &Now {
                gpu_archs: &gpus,
                ..Now::default()
            }
        )
        .is_empty());
    }

    /// A repair is fixed by repairing again, a build by rebuilding; status says which.
    #[test]
    fn the_fix_is_the_command_that_works_for_the_kind() {
        let mut m = Manifest {
            recipe: "torchcodec".into(),
            ..Manifest::default()
        };
        assert_eq!(fix_command(&m), "rocbuild rebuild torchcodec");
        m.kind = crate::manifest::Kind::Repair;
        assert_eq!(fix_command(&m), "rocbuild repair torchcodec");
    }

    #[test]
    fn a_torch_change_and_its_flavor() {
        let m = Manifest {
            schema: 1,
            torch_version: Some("2.9.1".into()),
            flavor: "cpu".into(),
            ..Manifest::default()
        };
        let t = TorchVersion {
            version: "2.10.0".into(),
            git_version: None,
            cuda: None,
            hip: Some("6.4".into()),
        };
        let r = reasons(
            &m,
            &Now {
                torch: Some(&t),
                ..Now::default()
            },
        );
        assert_eq!(r[0].to_string(), "torch 2.9.1 → 2.10.0");
        assert_eq!(r[1].to_string(), "torch flavor cpu → rocm");
        // A build that did not use torch does not go stale with it.
        let m = Manifest {
            schema: 1,
            ..Manifest::default()
        };
        assert!(reasons(
            &m,
            &Now {
                torch: Some(&t),
                ..Now::default()
            }
        )
        .is_empty());
    }
}
