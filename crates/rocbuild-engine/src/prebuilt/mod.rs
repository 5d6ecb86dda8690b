//! Install from an index (`--index URL`, `--find-links DIR`): which of the wheels listed
//! fits this machine, decided from their file names alone (pure), and the plan that installs
//! the one chosen through the same transaction as a build.
//!
//! A wheel fits when it is the planned release of the recipe's distribution, its local
//! version (see [`LocalVersion`]) names this machine's backend and SDK major.minor, its torch
//! and FFmpeg, and GPU architectures that include every one this build targets, and its tags
//! fit the venv's Python. What the name cannot say (the exact torch build, the native
//! libraries against the venv's torch) is checked after download, by [`fetch`].

pub mod fetch;

use rocbuild_probe::{normalize_dist, Machine};
use rocbuild_venv::manifest::Manifest;
use rocbuild_venv::wheel::{public_version, LocalVersion, Tags};
use serde::Serialize;

pub use crate::index::{project_page, Candidate, IndexPlan, Listed, PrebuiltInstall};

use crate::error::Result;
use crate::install::python_part::{PartInstall, PythonPart};
use crate::paths::join;
use crate::plan::Plan;

/// What this machine wants of a wheel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Wanted {
    pub distribution: String,
    pub version: String,
    pub local: LocalVersion,
    /// The venv's wheel tags; None when the venv's Python could not say (`--machine` plans).
    pub tags: Option<Tags>,
}

/// The same local version `rocbuild wheel` gives a build with this plan's inputs.
pub fn wanted(plan: &Plan, tags: Option<Tags>) -> Wanted {
    let m = Manifest {
        flavor: plan.flavor.as_str().into(),
        sdk: plan.sdk_record(),
        options: plan.options.clone(),
        defines: plan.defines.clone(),
        torch_version: plan.torch_version.clone(),
        ffmpeg_major: plan.ffmpeg_major,
        ..Manifest::default()
    };
    Wanted {
        distribution: normalize_dist(&plan.install.distribution),
        version: plan.version.clone(),
        local: LocalVersion::of(&m),
        tags,
    }
}

/// The parts of a wheel file name (PEP 427): name, version, python, abi, platform tags.
struct WheelName<'a> {
    name: &'a str,
    version: &'a str,
    python: &'a str,
    abi: &'a str,
    platform: &'a str,
}

fn wheel_name(file: &str) -> Option<WheelName<'_>> {
    let stem = file.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    let (name, version, rest) = match parts.len() {
        5 => (parts[0], parts[1], &parts[2..]),
        6 => (parts[0], parts[1], &parts[3..]), // with a build tag
        _ => return None,
    };
    Some(WheelName {
        name,
        version,
        python: rest[0],
        abi: rest[1],
        platform: rest[2],
    })
}

/// Does `tag` (possibly compressed: `cp311.cp312`) hold one of `ok`?
fn tag_fits(tag: &str, ok: &[&str]) -> bool {
    tag.split('.').any(|t| ok.contains(&t))
}

/// Why `file` does not fit `want`, or None when its name fits.
pub fn judge(file: &str, want: &Wanted) -> Option<String> {
    let Some(w) = wheel_name(file) else {
        return Some("not a wheel".into());
    };
    if normalize_dist(w.name) != want.distribution {
        return Some(format!("another package ({})", w.name));
    }
    let (public, local) = match w.version.split_once('+') {
        Some((p, l)) => (p, Some(l)),
        None => (w.version, None),
    };
    if public != want.version {
        return Some(format!(
            "release {public}, this build wants {}",
            want.version
        ));
    }
    let Some(local) = local else {
        return Some(
            "no local version: not a rocbuild build (it does not say what it was built for)".into(),
        );
    };
    let Some(have) = LocalVersion::parse(local) else {
        return Some(format!(
            "local version `{local}` is not rocbuild's: it does not say what it was built for"
        ));
    };
    let need = &want.local;
    if have.backend != need.backend {
        return Some(format!(
            "built for {}, this machine needs {}",
            have.backend, need.backend
        ));
    }
    if have.torch != need.torch {
        let t = |v: &Option<String>| {
            v.as_deref()
                .map_or("no torch".to_string(), |v| format!("torch {v}"))
        };
        return Some(format!(
            "built for {}, this venv has {}",
            t(&have.torch),
            t(&need.torch)
        ));
    }
    if need.ffmpeg.is_some() && have.ffmpeg != need.ffmpeg {
        return Some(format!(
            "built for FFmpeg {}, this machine has FFmpeg {}",
            have.ffmpeg.map_or("(not named)".into(), |n| n.to_string()),
            need.ffmpeg.unwrap_or_default()
        ));
    }
    let missing: Vec<&str> = need
        .archs
        .iter()
        .filter(|a| !have.archs.contains(a))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "no code for {} (built for {})",
            missing.join(", "),
            if have.archs.is_empty() {
                "no GPU".to_string()
            } else {
                have.archs.join(", ")
            }
        ));
    }
    if let Some(t) = &want.tags {
        let py_major = format!("py{}", t.python.get(2..3).unwrap_or("3"));
        let fits = tag_fits(w.python, &[&t.python, &py_major])
            && tag_fits(w.abi, &[&t.abi, "none"])
            && tag_fits(w.platform, &[&t.platform, "any"]);
        if !fits {
            return Some(format!(
                "for {}-{}-{}, this venv's Python is {}-{}-{}",
                w.python, w.abi, w.platform, t.python, t.abi, t.platform
            ));
        }
    }
    None
}

/// Judge every listed file; fitting ones first, the narrowest (fewest GPU archs) first, else
/// in the order listed.
pub fn candidates(listed: Vec<(String, Listed)>, want: &Wanted) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = listed
        .into_iter()
        .map(|(source, l)| Candidate {
            rejected: judge(&l.file, want),
            listed: l,
            source,
        })
        .collect();
    let archs = |c: &Candidate| {
        wheel_name(&c.listed.file)
            .and_then(|w| w.version.split_once('+').map(|(_, l)| l.to_string()))
            .and_then(|l| LocalVersion::parse(&l))
            .map_or(0, |l| l.archs.len())
    };
    out.sort_by_key(|c| (c.rejected.is_some(), archs(c)));
    out
}

/// The plan that installs `chosen` instead of building: the Python part is the wheel itself,
/// copied by rocbuild from its checked, unpacked copy into the transaction's staging directory
/// (no pip: a venv without one works), the native libraries come from that copy too;
/// staging, swap, verification and manifest are the build's.
pub fn install_plan(plan: &Plan, machine: &Machine, chosen: PrebuiltInstall) -> Result<Plan> {
    let py = &machine.target.python;
    let target = join(
        machine.venv_path_os(),
        &py.site_packages,
        &rocbuild_venv::layout::PIP_TARGET,
    );
    let version = wheel_name(&chosen.file).map_or(plan.version.clone(), |w| w.version.to_string());
    let mut out = plan.clone();
    out.python_part = Some(PythonPart {
        distribution: plan.install.distribution.clone(),
        replaces: py
            .distributions
            .get(&normalize_dist(&plan.install.distribution))
            .cloned(),
        version,
        build: None,
        extension: None,
        install: PartInstall::Unpacked {
            unpacked: chosen.unpacked.clone(),
        },
        target,
    });
    out.prebuilt = Some(chosen);
    Ok(out)
}

/// The public version of torch's distribution a wheel must require (`torch==X`): the venv's.
pub fn torch_dist(machine: &Machine) -> Option<String> {
    machine.target.python.distributions.get("torch").cloned()
}

/// Compare a wheel's `Requires-Dist: torch==X` and its rocbuild.json with the venv's torch.
pub fn check_torch(
    plan: &Plan,
    venv_dist: Option<&str>,
    requires: Option<&str>,
    info: &serde_json::Value,
) -> Option<String> {
    let Some(want) = &plan.torch_version else {
        return None;
    };
    let dist = venv_dist.unwrap_or(public_version(want));
    match requires {
        Some(r) if r == dist => {}
        Some(r) => {
            return Some(format!(
                "its METADATA requires torch=={r}, this venv has torch {dist}"
            ))
        }
        None => return Some("its METADATA pins no torch: not built against one".into()),
    }
    let built = info.get("torch").and_then(|v| v.as_str());
    if built != Some(want.as_str()) {
        return Some(format!(
            "built against torch {} (rocbuild.json), this venv has {want}",
            built.unwrap_or("(not recorded)")
        ));
    }
    let git = info.get("torch_git").and_then(|v| v.as_str());
    if let (Some(g), Some(now)) = (git, plan.torch_git.as_deref()) {
        if g != now {
            return Some(format!(
                "built against another build of torch {want} (git {}, this venv's is {})",
                &g[..12.min(g.len())],
                &now[..12.min(now.len())]
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(local: &str, torch: Option<&str>, archs: &[&str], ffmpeg: Option<u32>) -> Wanted {
        Wanted {
            distribution: "fakecodec".into(),
            version: "1.0.0".into(),
            local: LocalVersion {
                backend: local.into(),
                archs: archs.iter().map(|a| a.to_string()).collect(),
                ffmpeg,
                torch: torch.map(Into::into),
            },
            tags: Some(Tags::new("3.11", "", "linux-x86_64")),
        }
    }

    const TAGS: &str = "cp311-cp311-linux_x86_64.whl";

    #[test]
    fn a_wheel_fits_by_release_backend_torch_ffmpeg_archs_and_tags() {
        let w = want("cpu", Some("2.9.1"), &[], Some(5));
        assert_eq!(
            judge(
                &format!("fakecodec-1.0.0+cpu.ffmpeg5.torch2.9.1-{TAGS}"),
                &w
            ),
            None
        );
        let j = |f: &str| judge(&format!("{f}-{TAGS}"), &w).unwrap();
        assert_eq!(
            j("fakecodec-1.0.0+cpu.ffmpeg5.torch2.9.2"),
            "built for torch 2.9.2, this venv has torch 2.9.1"
        );
        assert_eq!(
            j("fakecodec-0.9.0+cpu.ffmpeg5.torch2.9.1"),
            "release 0.9.0, this build wants 1.0.0"
        );
        assert_eq!(
            j("fakecodec-1.0.0+cu132.ffmpeg5.torch2.9.1"),
            "built for cu132, this machine needs cpu"
        );
        assert_eq!(
            j("fakecodec-1.0.0+cpu.ffmpeg7.torch2.9.1"),
            "built for FFmpeg 7, this machine has FFmpeg 5"
        );
        assert!(j("fakecodec-1.0.0").contains("not a rocbuild build"));
        assert!(j("fakecodec-1.0.0+ubuntu1").contains("is not rocbuild's"));
        assert_eq!(
            j("othercodec-1.0.0+cpu.ffmpeg5.torch2.9.1"),
            "another package (othercodec)"
        );
        assert_eq!(
            judge(
                "fakecodec-1.0.0+cpu.ffmpeg5.torch2.9.1-cp312-cp312-linux_x86_64.whl",
                &w
            )
            .unwrap(),
            "for cp312-cp312-linux_x86_64, this venv's Python is cp311-cp311-linux_x86_64"
        );
        assert_eq!(judge("fakecodec-1.0.0.tar.gz", &w).unwrap(), "not a wheel");
        // Names are compared normalized; a build tag is allowed.
        assert_eq!(
            judge(
                &format!("FakeCodec-1.0.0+cpu.ffmpeg5.torch2.9.1-1-{TAGS}"),
                &w
            ),
            None
        );
    }

    #[test]
    fn a_fat_wheel_fits_any_of_its_archs_and_the_narrowest_is_tried_first() {
        let fat = format!("fakecodec-1.0.0+rocm6.4.gfx1010.gfx1030.gfx1100.torch2.9.1-{TAGS}");
        let one = format!("fakecodec-1.0.0+rocm6.4.gfx1030.torch2.9.1-{TAGS}");
        for arch in ["gfx1010", "gfx1030", "gfx1100"] {
            assert_eq!(
                judge(&fat, &want("rocm6.4", Some("2.9.1"), &[arch], None)),
                None
            );
        }
        let w = want("rocm6.4", Some("2.9.1"), &["gfx1201"], None);
        assert_eq!(
            judge(&fat, &w).unwrap(),
            "no code for gfx1201 (built for gfx1010, gfx1030, gfx1100)"
        );
        // Another SDK minor is another build.
        let w = want("rocm6.2", Some("2.9.1"), &["gfx1030"], None);
        assert_eq!(
            judge(&fat, &w).unwrap(),
            "built for rocm6.4, this machine needs rocm6.2"
        );
        let w = want("rocm6.4", Some("2.9.1"), &["gfx1030"], None);
        let listed = |f: &str| {
            (
                "page".to_string(),
                Listed {
                    file: f.into(),
                    url: format!("http://x/{f}"),
                    sha256: None,
                },
            )
        };
        let c = candidates(
            vec![listed("fakecodec-1.0.0.tar.gz"), listed(&fat), listed(&one)],
            &w,
        );
        let files: Vec<&str> = c.iter().map(|c| c.listed.file.as_str()).collect();
        assert_eq!(
            files,
            [one.as_str(), fat.as_str(), "fakecodec-1.0.0.tar.gz"]
        );
        assert!(c[2].rejected.is_some());
    }

    #[test]
    fn the_local_version_wanted_is_the_one_rocbuild_wheel_gives() {
        use crate::plan::testing::{ctx, recipe};
        use rocbuild_probe::{GpuArchs, Os};
        let mut m = rocbuild_testkit::machine::machine(Os::Linux);
        m.target.gpu = Some(GpuArchs {
            archs: vec!["gfx1201".into()],
            found_by: "--arch".into(),
            torch_arch_list: Some(vec!["gfx1100".into(), "gfx1201".into()]),
            ..GpuArchs::default()
        });
        let opts = rocbuild_venv::BuildOptions {
            torch_cmake: Some(rocbuild_recipe::TorchCmake::Lite),
            backend: rocbuild_venv::BackendOptions {
                arch: rocbuild_probe::GpuTargets::parse(&["gfx1201"]),
                ..Default::default()
            },
            ..Default::default()
        };
        let plan = crate::plan::plan(&recipe("torchcodec"), &m, &opts, &ctx(Os::Linux)).unwrap();
        let w = wanted(&plan, None);
        let torch = plan.torch_version.as_deref().map(public_version).unwrap();
        let ffmpeg = plan
            .ffmpeg_major
            .map_or(String::new(), |n| format!(".ffmpeg{n}"));
        assert_eq!(
            w.local.to_string(),
            format!("rocm6.4.gfx1201{ffmpeg}.torch{torch}")
        );
    }
}
