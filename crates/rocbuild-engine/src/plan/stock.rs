//! Is a rebuild needed at all? The recipe's `[[stock-wheel]]` data says what the package's
//! own wheels on the index run on; the release's torch range and FFmpeg majors are its
//! `[[release]]`'s. Judged from the probe's facts, no network.

use rocbuild_probe::Machine;
use rocbuild_recipe::{in_range, Recipe, ReleaseInfo};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct StockVerdict {
    /// The stock wheel of this release loads and works here.
    pub works: bool,
    /// Why, in one line.
    pub why: String,
    /// `pip install DIST==VERSION` (when it works).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pip: Option<String>,
}

/// None when the recipe says nothing about its stock wheels. `archs`: the GPU targets a rocm
/// build would be for (a ROCm stock wheel stands for it only when its code covers them all).
pub fn judge(
    recipe: &Recipe,
    machine: &Machine,
    release: &ReleaseInfo,
    backend: &str,
    archs: &[String],
) -> Option<StockVerdict> {
    let raw = &recipe.raw;
    if raw.stock_wheel.is_empty() {
        return None;
    }
    let os = machine.target.platform.os.as_str();
    let version = &release.version;
    let no = |why: String| {
        Some(StockVerdict {
            works: false,
            why,
            pip: None,
        })
    };
    let candidates: Vec<&rocbuild_recipe::schema::StockWheel> = raw
        .stock_wheel
        .iter()
        .filter(|w| {
            w.os.iter().any(|o| o.get_ref() == os) && in_range(w.versions.get_ref(), version)
        })
        .collect();
    if candidates.is_empty() {
        let known: Vec<String> = raw
            .stock_wheel
            .iter()
            .filter(|w| w.os.iter().any(|o| o.get_ref() == os))
            .map(|w| w.versions.get_ref().clone())
            .collect();
        return no(format!(
            "the recipe knows nothing of the index's {} {version} wheels for {os} (its stock-wheel data covers {})",
            raw.package.distribution,
            if known.is_empty() { "no release there".to_string() } else { known.join(", ") }
        ));
    }
    let w = match rocm_wheel(&candidates, machine, backend) {
        Ok(w) => w,
        Err(why) => return no(format!("{why} ({} {version})", raw.package.distribution)),
    };
    if let Some(why) = gpu_archs_outside(w, backend, archs, os) {
        return no(why);
    }
    let torch = machine.target.torch.as_ref();
    if let Some(why) = kind_mismatch(w, torch, backend, os) {
        return no(why);
    }
    if let (Some(spec), Some(t)) = (&w.cuda, torch.filter(|t| t.flavor.as_str() == "cuda")) {
        let cuda = t.cuda.as_deref().unwrap_or("");
        if !in_range(spec.get_ref(), cuda) {
            return no(format!(
                "this torch is built for CUDA {cuda}, and the index's {os} wheels are {}",
                w.says
            ));
        }
    }
    if let Some(t) = torch {
        if !in_range(&release.torch, public(&t.version)) {
            return no(format!(
                "{} {version} supports torch {}, and this one is {}",
                raw.package.distribution, release.torch, t.version
            ));
        }
    }
    if let (Some(spec), Some(f)) = (&release.ffmpeg, &machine.target.ffmpeg) {
        if !in_range(spec, &f.major.to_string()) {
            return no(format!(
                "its wheels carry FFmpeg {spec} cores, and FFmpeg here is {}",
                f.major
            ));
        }
    }
    Some(StockVerdict {
        works: true,
        why: if w.flavors.is_empty() {
            format!(
                "the index's {os} wheel of {} {version} is a {backend} build like the one asked for ({})",
                raw.package.distribution, w.says
            )
        } else {
            format!(
                "the index's {os} wheel of {} {version} loads with this torch{} ({})",
                raw.package.distribution,
                torch.map(|t| format!(" {}", t.version)).unwrap_or_default(),
                w.says
            )
        },
        pip: Some(format!(
            "pip install {}=={version}",
            raw.package.distribution
        )),
    })
}

/// The kind of wheel that stands for the build asked for: for a rocm build of a package that
/// picks its library by torch's HIP version (some kinds say `hip`), the kind carrying a library
/// for this torch's HIP, or why none does; else the first kind for this OS and release.
fn rocm_wheel<'a>(
    candidates: &[&'a rocbuild_recipe::schema::StockWheel],
    machine: &Machine,
    backend: &str,
) -> Result<&'a rocbuild_recipe::schema::StockWheel, String> {
    if backend != "rocm" || candidates.iter().all(|w| w.hip.is_empty()) {
        return Ok(candidates[0]);
    }
    let hip = machine
        .target
        .torch
        .as_ref()
        .and_then(|t| t.hip.as_deref())
        .map(|h| h.split('.').take(2).collect::<Vec<_>>().join("."));
    let fits = |w: &&&rocbuild_recipe::schema::StockWheel| {
        hip.as_deref()
            .is_some_and(|h| w.hip.iter().any(|x| x.get_ref() == h))
    };
    if let Some(w) = candidates.iter().find(fits) {
        return Ok(w);
    }
    let carried: Vec<&str> = candidates
        .iter()
        .flat_map(|w| w.hip.iter().map(|h| h.get_ref().as_str()))
        .collect();
    Err(match hip {
        Some(h) => format!(
            "this torch is built with HIP {h}, and the index's wheels carry ROCm libraries for HIP {} only",
            carried.join(", ")
        ),
        None => format!(
            "a rocm build was asked for without a ROCm torch, and the index's wheels pick their ROCm library by torch's HIP version ({})",
            carried.join(", ")
        ),
    })
}

/// Why these wheels' ROCm code does not stand for a rocm build for `archs`: a target outside
/// the ones the recipe read from them, or no target known at all.
fn gpu_archs_outside(
    w: &rocbuild_recipe::schema::StockWheel,
    backend: &str,
    archs: &[String],
    os: &str,
) -> Option<String> {
    if backend != "rocm" || w.gpu_archs.is_empty() {
        return None;
    }
    let theirs: Vec<&str> = w.gpu_archs.iter().map(|a| a.get_ref().as_str()).collect();
    if archs.is_empty() {
        return Some(format!(
            "no GPU target is known here, and the index's {os} wheels' ROCm code is only for {}",
            theirs.join(", ")
        ));
    }
    let outside: Vec<&str> = archs
        .iter()
        .map(String::as_str)
        .filter(|a| !theirs.contains(a))
        .collect();
    (!outside.is_empty()).then(|| {
        format!(
            "a build for {} was asked for, and the index's {os} wheels' ROCm code is for {} only",
            outside.join(", "),
            theirs.join(", ")
        )
    })
}

/// [`judge`] for the build a plan chose: its backend, and the GPUs of its ROCm SDK.
pub fn for_build(
    recipe: &Recipe,
    machine: &Machine,
    release: &ReleaseInfo,
    backend: &crate::toolchain::BackendPlan,
) -> Option<StockVerdict> {
    let archs: &[String] = backend.rocm.as_ref().map_or(&[], |r| &r.archs);
    judge(recipe, machine, release, backend.backend.as_str(), archs)
}

/// Why wheels of this kind are not the build asked for: another torch flavour, another backend.
fn kind_mismatch(
    w: &rocbuild_recipe::schema::StockWheel,
    torch: Option<&rocbuild_probe::Torch>,
    backend: &str,
    os: &str,
) -> Option<String> {
    let has =
        |list: &[rocbuild_recipe::schema::Text], v: &str| list.iter().any(|x| x.get_ref() == v);
    let flavor = torch.map_or("cpu", |t| t.flavor.as_str());
    if !w.flavors.is_empty() && !has(&w.flavors, flavor) {
        return Some(format!(
            "the index's {os} wheels ({}) do not load with a {flavor} torch",
            w.says
        ));
    }
    let builds = if w.backends.is_empty() {
        &w.flavors
    } else {
        &w.backends
    };
    let asked = backend != "cpu" || !w.backends.is_empty();
    (asked && !has(builds, backend)).then(|| {
        format!(
            "a {backend} build was asked for, and the index's {os} wheels are not one ({})",
            w.says
        )
    })
}

/// For `doctor`: the verdict on the release a build would choose here (the newest default one
/// whose torch and FFmpeg ranges hold), for the backend of this torch's flavour, when the
/// recipe has stock-wheel data.
pub fn for_machine(recipe: &Recipe, machine: &Machine) -> Option<StockVerdict> {
    let torch = machine
        .target
        .torch
        .as_ref()
        .map(|t| public(&t.version).to_string());
    let ffmpeg = machine.target.ffmpeg.as_ref().map(|f| f.major);
    let release = recipe.releases().into_iter().find(|r| {
        r.default
            && torch
                .as_deref()
                .is_none_or(|t| rocbuild_recipe::torch_compatible(r, t))
            && ffmpeg.is_none_or(|m| rocbuild_recipe::ffmpeg_compatible(r, m))
    })?;
    // The build a user of this torch wants: a ROCm torch's user a ROCm build, and so on.
    let backend = machine
        .target
        .torch
        .as_ref()
        .map_or("cpu", |t| t.flavor.as_str());
    let archs: Vec<String> = machine
        .target
        .gpu
        .as_ref()
        .map(|g| g.archs.clone())
        .unwrap_or_default();
    judge(recipe, machine, &release, backend, &archs)
}

/// `2.15.0+cu132` → `2.15.0`.
fn public(v: &str) -> &str {
    v.split('+').next().unwrap_or(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testing::recipe;
    use rocbuild_probe::{Flavor, Os};
    use rocbuild_testkit::machine::machine;

    fn release(r: &Recipe, v: &str) -> ReleaseInfo {
        r.release(v).unwrap()
    }

    /// CTranslate2 does not link torch: its index wheels are judged by the build asked for,
    /// whatever the torch (a ROCm one here): CPU and CUDA work, ROCm needs a build.
    #[test]
    fn the_stock_ctranslate2_wheel_is_judged_by_the_backend() {
        let r = recipe("ctranslate2");
        let mut m = machine(Os::Linux);
        m.target.torch.as_mut().unwrap().flavor = Flavor::Rocm;
        let rel = release(&r, "4.8.1");
        let cpu = judge(&r, &m, &rel, "cpu", &[]).unwrap();
        assert!(cpu.works, "{cpu:?}");
        assert_eq!(cpu.pip.as_deref(), Some("pip install ctranslate2==4.8.1"));
        assert!(
            cpu.why.contains("is a cpu build like the one asked for"),
            "{cpu:?}"
        );
        assert!(judge(&r, &m, &rel, "cuda", &[]).unwrap().works);
        let rocm = judge(&r, &m, &rel, "rocm", &[]).unwrap();
        assert!(
            !rocm.works && rocm.why.contains("a rocm build was asked for"),
            "{rocm:?}"
        );
        // doctor asks for the build of the torch's flavour: a ROCm torch's user is not told
        // to install the CPU/CUDA wheel.
        assert!(!for_machine(&r, &m).unwrap().works);
        m.target.torch.as_mut().unwrap().flavor = Flavor::Cpu;
        assert!(for_machine(&r, &m).unwrap().works);
        // No torch at all: the same.
        m.target.torch = None;
        assert!(judge(&r, &m, &rel, "cpu", &[]).unwrap().works);
        // macOS: CPU builds only.
        let mac = machine(Os::Macos);
        assert!(!judge(&r, &mac, &rel, "cuda", &[]).unwrap().works);
    }

    /// TorchCodec 0.12+ on Linux: the index's wheels are CUDA 13 builds on torch's stable ABI;
    /// they work on a CUDA 13 torch >= 2.11, not on a ROCm or CPU torch, not for 0.10.
    #[test]
    fn the_stock_torchcodec_wheel_is_judged_from_the_probe() {
        let r = recipe("torchcodec");
        let mut m = machine(Os::Linux);
        let t = m.target.torch.as_mut().unwrap();
        t.version = "2.15.0+cu132".into();
        t.flavor = Flavor::Cuda;
        t.cuda = Some("13.2".into());
        t.hip = None;
        let v = judge(&r, &m, &release(&r, "0.16.0"), "cpu", &[]).unwrap();
        assert!(v.works, "{v:?}");
        assert_eq!(v.pip.as_deref(), Some("pip install torchcodec==0.16.0"));
        // CUDA 12 torch.
        m.target.torch.as_mut().unwrap().cuda = Some("12.8".into());
        let v = judge(&r, &m, &release(&r, "0.16.0"), "cpu", &[]).unwrap();
        assert!(!v.works && v.why.contains("CUDA 12.8"), "{v:?}");
        // A ROCm torch.
        let t = m.target.torch.as_mut().unwrap();
        t.flavor = Flavor::Rocm;
        t.cuda = None;
        let v = judge(&r, &m, &release(&r, "0.16.0"), "cpu", &[]).unwrap();
        assert!(
            !v.works && v.why.contains("do not load with a rocm torch"),
            "{v:?}"
        );
        // Windows: CPU wheels on the stable ABI, any flavour.
        let mut w = machine(Os::Windows);
        w.target.torch.as_mut().unwrap().version = "2.15.0+rocm7.2".into();
        w.target.torch.as_mut().unwrap().flavor = Flavor::Rocm;
        assert!(
            judge(&r, &w, &release(&r, "0.16.0"), "cpu", &[])
                .unwrap()
                .works
        );
        // Before the stable ABI there is no such promise.
        let v = judge(&r, &w, &release(&r, "0.10.0"), "cpu", &[]).unwrap();
        assert!(!v.works, "{v:?}");
        // A recipe without the data: no verdict.
        let mut bare = recipe("ctranslate2");
        bare.raw.stock_wheel.clear();
        assert!(judge(&bare, &m, &release(&bare, "4.8.1"), "cpu", &[]).is_none());
    }

    /// bitsandbytes 0.50.x on Linux: PyPI's wheels carry a ROCm library per torch HIP version,
    /// each for its own GPUs (read from the real wheels into the recipe): a rocm build for
    /// gfx1100 on HIP 6.4 is the stock wheel; for gfx1010 on 6.4 it is not (RDNA1 needs a
    /// build), on 7.14 it is in 0.50.2 and not in 0.50.1; an unlisted HIP needs a build.
    #[test]
    fn the_stock_bitsandbytes_rocm_library_is_judged_by_hip_and_gpu() {
        let r = recipe("bitsandbytes");
        let mut m = machine(Os::Linux);
        let t = m.target.torch.as_mut().unwrap();
        t.flavor = Flavor::Rocm;
        t.hip = Some("6.4.43484".into());
        let archs = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let v501 = release(&r, "0.50.1");
        let v502 = release(&r, "0.50.2");
        let ok = judge(&r, &m, &v501, "rocm", &archs(&["gfx1100"])).unwrap();
        assert!(ok.works, "{ok:?}");
        assert!(ok.why.contains("ROCm library for HIP 6.4"), "{ok:?}");
        let rdna1 = judge(&r, &m, &v501, "rocm", &archs(&["gfx1010", "gfx1100"])).unwrap();
        assert!(!rdna1.works, "{rdna1:?}");
        assert!(
            rdna1.why.starts_with("a build for gfx1010 was asked for"),
            "{rdna1:?}"
        );
        // gfx1030 joined HIP 6.4's library in 0.50.2.
        assert!(
            !judge(&r, &m, &v501, "rocm", &archs(&["gfx1030"]))
                .unwrap()
                .works
        );
        assert!(
            judge(&r, &m, &v502, "rocm", &archs(&["gfx1030"]))
                .unwrap()
                .works
        );
        // No GPU known: no promise.
        assert!(!judge(&r, &m, &v501, "rocm", &[]).unwrap().works);
        // HIP 7.14 (TheRock): gfx1010 in 0.50.2 only.
        m.target.torch.as_mut().unwrap().hip = Some("7.14.0".into());
        assert!(
            !judge(&r, &m, &v501, "rocm", &archs(&["gfx1010"]))
                .unwrap()
                .works
        );
        assert!(
            judge(&r, &m, &v502, "rocm", &archs(&["gfx1010"]))
                .unwrap()
                .works
        );
        // A HIP no library is for.
        m.target.torch.as_mut().unwrap().hip = Some("6.1.40091".into());
        let old = judge(&r, &m, &v502, "rocm", &archs(&["gfx1100"])).unwrap();
        assert!(!old.works);
        assert!(
            old.why.starts_with("this torch is built with HIP 6.1, and the index's wheels carry ROCm libraries for HIP 6.4, 7.0, 7.1, 7.2, 7.14, 7.15 only"),
            "{old:?}"
        );
        // The CPU build is the stock wheel whatever the HIP; Windows has no ROCm library.
        assert!(judge(&r, &m, &v502, "cpu", &[]).unwrap().works);
        let mut w = machine(Os::Windows);
        w.target.torch.as_mut().unwrap().flavor = Flavor::Rocm;
        let win = judge(&r, &w, &v501, "rocm", &archs(&["gfx1100"])).unwrap();
        assert!(
            !win.works && win.why.contains("a rocm build was asked for"),
            "{win:?}"
        );
    }
}
