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

/// None when the recipe says nothing about its stock wheels.
pub fn judge(
    recipe: &Recipe,
    machine: &Machine,
    release: &ReleaseInfo,
    backend: &str,
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
    let Some(w) = raw.stock_wheel.iter().find(|w| {
        w.os.iter().any(|o| o.get_ref() == os) && in_range(w.versions.get_ref(), version)
    }) else {
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
    };
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
    judge(recipe, machine, &release, backend)
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
        let cpu = judge(&r, &m, &rel, "cpu").unwrap();
        assert!(cpu.works, "{cpu:?}");
        assert_eq!(cpu.pip.as_deref(), Some("pip install ctranslate2==4.8.1"));
        assert!(
            cpu.why.contains("is a cpu build like the one asked for"),
            "{cpu:?}"
        );
        assert!(judge(&r, &m, &rel, "cuda").unwrap().works);
        let rocm = judge(&r, &m, &rel, "rocm").unwrap();
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
        assert!(judge(&r, &m, &rel, "cpu").unwrap().works);
        // macOS: CPU builds only.
        let mac = machine(Os::Macos);
        assert!(!judge(&r, &mac, &rel, "cuda").unwrap().works);
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
        let v = judge(&r, &m, &release(&r, "0.16.0"), "cpu").unwrap();
        assert!(v.works, "{v:?}");
        assert_eq!(v.pip.as_deref(), Some("pip install torchcodec==0.16.0"));
        // CUDA 12 torch.
        m.target.torch.as_mut().unwrap().cuda = Some("12.8".into());
        let v = judge(&r, &m, &release(&r, "0.16.0"), "cpu").unwrap();
        assert!(!v.works && v.why.contains("CUDA 12.8"), "{v:?}");
        // A ROCm torch.
        let t = m.target.torch.as_mut().unwrap();
        t.flavor = Flavor::Rocm;
        t.cuda = None;
        let v = judge(&r, &m, &release(&r, "0.16.0"), "cpu").unwrap();
        assert!(
            !v.works && v.why.contains("do not load with a rocm torch"),
            "{v:?}"
        );
        // Windows: CPU wheels on the stable ABI, any flavour.
        let mut w = machine(Os::Windows);
        w.target.torch.as_mut().unwrap().version = "2.15.0+rocm7.2".into();
        w.target.torch.as_mut().unwrap().flavor = Flavor::Rocm;
        assert!(judge(&r, &w, &release(&r, "0.16.0"), "cpu").unwrap().works);
        // Before the stable ABI there is no such promise.
        let v = judge(&r, &w, &release(&r, "0.10.0"), "cpu").unwrap();
        assert!(!v.works, "{v:?}");
        // A recipe without the data: no verdict.
        let mut bare = recipe("ctranslate2");
        bare.raw.stock_wheel.clear();
        assert!(judge(&bare, &m, &release(&bare, "4.8.1"), "cpu").is_none());
    }
}
