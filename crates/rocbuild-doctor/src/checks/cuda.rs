//! CUDA: a library without code for the GPU fails at the first launch ("no kernel image is
//! available for execution on the device"); one read from its `.nv_fatbin` says which SASS and
//! PTX it holds. A cubin runs on its own major at the same or a later minor (sm_80 on 8.6), PTX
//! is compiled by the driver for its arch and any later one. Without an NVIDIA driver nothing
//! runs at all: said plainly, not as a broken build.

use std::path::{Path, PathBuf};

use rocbuild_native::{NvCode, NvCodeKind};

use crate::finding::{Check, Finding, Severity};
use crate::package::Subject;

pub struct CudaFacts<'a> {
    /// Each native library with NVIDIA GPU code, with what it holds.
    pub binaries: &'a [(PathBuf, Vec<NvCode>)],
    /// The GPUs' compute capabilities (`8.6`), when found.
    pub gpus: &'a [String],
    /// How they were found, or why none were (`nvidia-smi not found`).
    pub found_by: String,
}

/// `8.6` (or `8.6+PTX`, as `$TORCH_CUDA_ARCH_LIST` has it) -> 86.
fn cc(s: &str) -> Option<u32> {
    let (a, b) = s.trim_end_matches("+PTX").split_once('.')?;
    Some(a.parse::<u32>().ok()? * 10 + b.parse::<u32>().ok()?)
}

/// Whether code `c` runs on compute capability `gpu`.
fn runs_on(c: &NvCode, gpu: u32) -> bool {
    match c.kind {
        NvCodeKind::Sass => c.arch / 10 == gpu / 10 && c.arch <= gpu,
        NvCodeKind::Ptx => c.arch <= gpu,
    }
}

/// `sm_75, sm_86, sm_120, compute_120`: SASS then PTX, each by arch.
fn listed(codes: &[NvCode]) -> String {
    let mut sorted = codes.to_vec();
    sorted.sort();
    sorted.dedup();
    sorted
        .iter()
        .map(NvCode::name)
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn check(subject: &Subject, f: &CudaFacts) -> Vec<Finding> {
    let with_code: Vec<&(PathBuf, Vec<NvCode>)> =
        f.binaries.iter().filter(|(_, c)| !c.is_empty()).collect();
    if with_code.is_empty() {
        return Vec::new();
    }
    let name = |p: &Path| {
        p.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    };
    let details: Vec<String> = with_code
        .iter()
        .map(|(p, c)| format!("{}: {}", name(p), listed(c)))
        .collect();
    if f.gpus.is_empty() {
        return vec![Finding::new(
            Severity::Note,
            Check::Gpu,
            &subject.name,
            format!(
                "no NVIDIA driver here ({}): {}'s CUDA code ({}) cannot run on this machine",
                f.found_by,
                subject.name,
                details.join("; ")
            ),
        )
        .details(details)
        .why("this is not a broken build: the CUDA runtime reports no device (cudaErrorInsufficientDriver) where no NVIDIA driver is installed")
        .fix("on a machine with an NVIDIA GPU, install its driver; to compare the code with a GPU's compute capability here, set TORCH_CUDA_ARCH_LIST=X.Y")];
    }
    let mut lacking = Vec::new();
    let mut wanted = Vec::new();
    for g in f.gpus {
        let Some(n) = cc(g) else { continue };
        for (p, codes) in &with_code {
            if !codes.iter().any(|c| runs_on(c, n)) {
                lacking.push(format!(
                    "{} has {}; nothing that runs on {g} (sm_{n})",
                    name(p),
                    listed(codes)
                ));
                if !wanted.contains(g) {
                    wanted.push(g.clone());
                }
            }
        }
    }
    if lacking.is_empty() {
        return Vec::new();
    }
    let sm: Vec<String> = wanted
        .iter()
        .filter_map(|g| cc(g))
        .map(|n| format!("sm_{n}"))
        .collect();
    vec![Finding::new(
        Severity::Error,
        Check::Gpu,
        &subject.name,
        format!("{} has no code for {}", subject.name, sm.join(", ")),
    )
    .details(lacking)
    .why(format!(
        "CUDA finds no kernel image for this GPU ({}) and fails at the first launch (no kernel image is available for execution on the device)",
        f.found_by
    ))
    .fix(format!(
        "{} with --cuda-arch {}",
        subject.rebuild_hint(),
        wanted.join(";")
    ))]
}

/// A CUDA library a package loads by name and the loader does not find.
pub struct NotFoundByName {
    /// The package's file that asks for it (`libctranslate2-….so.4.8.5`).
    pub asked_by: String,
    /// What it asks for (`libcublas.so.12`, `cublas64_12.dll`).
    pub name: String,
    /// Where the loader looked.
    pub searched: Vec<PathBuf>,
    /// Other versions of the same library the venv has (`nvidia/cu13/lib/libcublas.so.13`).
    pub elsewhere: Vec<PathBuf>,
}

/// `libcublas.so.12` -> (`cublas`, 12); `cublas64_12.dll` -> (`cublas`, 12).
fn base_and_major(name: &str) -> Option<(&str, u32)> {
    let l = rocbuild_probe::platform::libname::parse(name)?;
    l.is_cuda_form(name).then_some((l.base, l.major()?))
}

/// NVIDIA's pip package holding a CUDA library of that CUDA major (cuDNN's own major is not
/// CUDA's: none is named for it).
fn pip_package(base: &str, major: u32) -> Option<String> {
    let pkg = match base {
        "cublas" | "cublasLt" => "cublas",
        "cudart" => "cuda-runtime",
        "nvrtc" => "cuda-nvrtc",
        "nvJitLink" => "nvjitlink",
        "cufft" | "curand" | "cusolver" | "cusparse" => base,
        _ => return None,
    };
    Some(if major >= 13 {
        format!("nvidia-{pkg}=={major}.*")
    } else {
        format!("nvidia-{pkg}-cu{major}")
    })
}

/// CUDA libraries the package loads by name at its first CUDA call, which the loader will not
/// find: an error where a GPU is there to use, a warning where none is (the CPU path works).
pub fn not_found_by_name(
    subject: &Subject,
    missing: &[NotFoundByName],
    gpu_present: bool,
    windows: bool,
) -> Vec<Finding> {
    if missing.is_empty() {
        return Vec::new();
    }
    let mut names: Vec<&str> = missing.iter().map(|m| m.name.as_str()).collect();
    names.dedup();
    let mut details = Vec::new();
    for m in missing {
        details.push(format!(
            "{} loads {} by name; searched: {}",
            m.asked_by,
            m.name,
            if m.searched.is_empty() {
                "nothing (no search path applies)".to_string()
            } else {
                m.searched
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
        for e in &m.elsewhere {
            let same = e
                .file_name()
                .is_some_and(|n| n.to_string_lossy().eq_ignore_ascii_case(&m.name));
            details.push(if same {
                format!(
                    "the venv has {}, in a folder no search path reaches",
                    e.display()
                )
            } else {
                format!(
                    "the venv has {} (another version, which a loader asked for {} does not take)",
                    e.display(),
                    m.name
                )
            });
        }
    }
    let first = &missing[0];
    let path_var = if windows {
        "PATH (or os.add_dll_directory)"
    } else {
        "LD_LIBRARY_PATH"
    };
    let install = base_and_major(&first.name)
        .and_then(|(b, m)| pip_package(b, m))
        .map(|p| format!(" (`pip install {p}`)"))
        .unwrap_or_default();
    let asked_major = base_and_major(&first.name).map(|(_, m)| m);
    let other_major = first
        .elsewhere
        .iter()
        .filter_map(|e| base_and_major(&e.file_name()?.to_string_lossy()).map(|(_, m)| m))
        .find(|m| Some(*m) != asked_major);
    let there = first.elsewhere.iter().find(|e| {
        e.file_name()
            .is_some_and(|n| n.to_string_lossy().eq_ignore_ascii_case(&first.name))
    });
    // The index's own wheel is no answer here: it loads the same names.
    let cuda = other_major
        .map(|m| format!(" (CUDA {m})"))
        .unwrap_or_default();
    let rebuild = match &subject.recipe {
        Some(r) => {
            format!("or rebuild it for the CUDA this venv has{cuda}: `rocbuild {r} --backend cuda`")
        }
        None => format!(
            "or install a build of {} made for the CUDA this venv has{cuda}",
            subject.name
        ),
    };
    vec![Finding::new(
        if gpu_present { Severity::Error } else { Severity::Warning },
        Check::Missing,
        &subject.name,
        format!(
            "{} loads {} at its first CUDA call, and the loader finds none",
            subject.name,
            names.join(", ")
        ),
    )
    .details(details)
    .why(format!(
        "a library loaded by name is not needed at import: `import {}` works and the CPU path runs, and the first CUDA call fails (\"Library {} is not found or cannot be loaded\")",
        subject.name, first.name
    ))
    .fix(match there.and_then(|t| t.parent()) {
        Some(dir) => format!("put {} on {path_var}, {rebuild}", dir.display()),
        None => format!("install it{install} and put its folder on {path_var}, {rebuild}"),
    })]
}

/// A CUDA runtime the package's process uses: torch's (`13.0`, from torch/version.py) or the
/// package's own (`12`, read from the toolkit library names it links or loads).
pub struct Runtime {
    pub who: String,
    pub major: u32,
    /// How it is known: `torch/version.py`, `loads libcublas.so.12`.
    pub from: String,
}

/// `13.0` -> (13, 0).
fn major_minor(v: &str) -> Option<(u32, u32)> {
    let mut it = v.split('.');
    Some((
        it.next()?.parse().ok()?,
        it.next().unwrap_or("0").parse().ok()?,
    ))
}

/// A CUDA runtime of a newer major than the driver runs refuses it at the first CUDA call
/// (within a major, minor-version compatibility lets a 12.8 runtime run on a 12.4 driver).
pub fn driver_too_old(
    subject: &Subject,
    driver: &rocbuild_probe::CudaDriver,
    runtimes: &[Runtime],
) -> Vec<Finding> {
    let Some((dmajor, _)) = major_minor(&driver.cuda) else {
        return Vec::new();
    };
    let newer: Vec<&Runtime> = runtimes.iter().filter(|r| r.major > dmajor).collect();
    let Some(newest) = newer.iter().map(|r| r.major).max() else {
        return Vec::new();
    };
    let who: Vec<String> = newer
        .iter()
        .map(|r| format!("{}'s CUDA {}", r.who, r.major))
        .collect();
    vec![Finding::new(
        Severity::Error,
        Check::Gpu,
        &subject.name,
        format!(
            "the NVIDIA driver {} runs CUDA up to {}: {} needs a newer driver",
            driver.version,
            driver.cuda,
            who.join(" and ")
        ),
    )
    .details(
        runtimes
            .iter()
            .map(|r| format!("{}: CUDA {} ({})", r.who, r.major, r.from))
            .chain([format!(
                "driver {}: CUDA {} (nvidia-smi)",
                driver.version, driver.cuda
            )]),
    )
    .why("a CUDA runtime runs on a driver of its own major or newer: on an older one its first call fails with cudaErrorInsufficientDriver (\"CUDA driver version is insufficient for CUDA runtime version\"), and torch.cuda.is_available() is False")
    .fix(format!(
        "install an NVIDIA driver for CUDA {newest} or newer, or use builds for the driver's CUDA {dmajor}: a torch built for CUDA {dmajor} and {}",
        match &subject.recipe {
            Some(r) => format!("`rocbuild {r} --backend cuda --cuda {dmajor}.x`"),
            None => format!("a build of {} for CUDA {dmajor}", subject.name),
        }
    ))]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sass(a: u32) -> NvCode {
        NvCode {
            kind: NvCodeKind::Sass,
            arch: a,
        }
    }

    fn subject() -> Subject {
        Subject::known()[2].clone()
    }

    #[test]
    fn code_is_compared_with_the_gpu_and_no_driver_is_said_plainly() {
        let bins = vec![(
            PathBuf::from("libctranslate2.so.4"),
            vec![
                sass(80),
                sass(90),
                NvCode {
                    kind: NvCodeKind::Ptx,
                    arch: 90,
                },
            ],
        )];
        let gpus = |g: &[&str]| g.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // 8.6 runs sm_80's cubin, 12.0 the compute_90 PTX: nothing to say.
        let f = CudaFacts {
            binaries: &bins,
            gpus: &gpus(&["8.6", "12.0"]),
            found_by: "nvidia-smi".into(),
        };
        assert!(check(&subject(), &f).is_empty());
        // 7.5 (older than any code): no kernel image.
        let f = CudaFacts {
            binaries: &bins,
            gpus: &gpus(&["7.5"]),
            found_by: "nvidia-smi".into(),
        };
        let out = check(&subject(), &f);
        assert_eq!(out[0].what, "ctranslate2 has no code for sm_75");
        assert!(
            out[0].fix.ends_with("with --cuda-arch 7.5"),
            "{}",
            out[0].fix
        );
        // Without PTX, the newest GPU finds nothing (sm_90 SASS does not run on 12.0).
        let no_ptx = vec![(PathBuf::from("lib.so"), vec![sass(86), sass(90)])];
        let f = CudaFacts {
            binaries: &no_ptx,
            gpus: &gpus(&["12.0"]),
            found_by: "nvidia-smi".into(),
        };
        assert_eq!(
            check(&subject(), &f)[0].what,
            "ctranslate2 has no code for sm_120"
        );
        // No driver: a note, not an error.
        let f = CudaFacts {
            binaries: &bins,
            gpus: &[],
            found_by: "nvidia-smi not found".into(),
        };
        let out = check(&subject(), &f);
        assert_eq!(out[0].severity, Severity::Note);
        assert!(
            out[0].what.starts_with("no NVIDIA driver here"),
            "{}",
            out[0].what
        );
    }

    #[test]
    fn a_library_loaded_by_name_is_an_error_only_where_a_gpu_would_use_it() {
        let m = |elsewhere: &[&str]| NotFoundByName {
            asked_by: "libctranslate2.so.4".into(),
            name: "libcublas.so.12".into(),
            searched: vec![PathBuf::from("/usr/lib")],
            elsewhere: elsewhere.iter().map(PathBuf::from).collect(),
        };
        let s = subject();
        assert!(not_found_by_name(&s, &[], true, false).is_empty());
        let gpu = not_found_by_name(
            &s,
            &[m(&["/v/nvidia/cu13/lib/libcublas.so.13"])],
            true,
            false,
        );
        assert_eq!(gpu[0].severity, Severity::Error);
        assert!(
            gpu[0].fix.contains("`pip install nvidia-cublas-cu12`"),
            "{}",
            gpu[0].fix
        );
        assert!(gpu[0].fix.contains("(CUDA 13)"), "{}", gpu[0].fix);
        assert_eq!(
            not_found_by_name(&s, &[m(&[])], false, false)[0].severity,
            Severity::Warning
        );
        // Installed but on no search path: the fix names that folder.
        let there = not_found_by_name(
            &s,
            &[m(&["/v/nvidia/cublas/lib/libcublas.so.12"])],
            true,
            false,
        );
        assert!(
            there[0]
                .fix
                .starts_with("put /v/nvidia/cublas/lib on LD_LIBRARY_PATH"),
            "{}",
            there[0].fix
        );
        let win = NotFoundByName {
            name: "cublas64_13.dll".into(),
            ..m(&[])
        };
        let w = not_found_by_name(&s, &[win], true, true);
        assert!(
            w[0].fix.contains("`pip install nvidia-cublas==13.*`"),
            "{}",
            w[0].fix
        );
        assert!(
            w[0].fix.contains("PATH (or os.add_dll_directory)"),
            "{}",
            w[0].fix
        );
    }

    #[test]
    fn a_runtime_of_a_newer_major_than_the_driver_is_an_error_and_a_newer_minor_is_not() {
        let rt = |who: &str, major| Runtime {
            who: who.into(),
            major,
            from: "test".into(),
        };
        let driver = rocbuild_probe::CudaDriver {
            version: "550.54.14".into(),
            cuda: "12.4".into(),
        };
        let s = subject();
        // 12.x runtimes (12.8 included) run on a 12.4 driver.
        assert!(driver_too_old(&s, &driver, &[rt("ctranslate2", 12)]).is_empty());
        let f = driver_too_old(
            &s,
            &driver,
            &[rt("torch 2.15.0", 13), rt("ctranslate2", 12)],
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        assert_eq!(
            f[0].what,
            "the NVIDIA driver 550.54.14 runs CUDA up to 12.4: torch 2.15.0's CUDA 13 needs a newer driver"
        );
        assert!(
            f[0].fix
                .starts_with("install an NVIDIA driver for CUDA 13 or newer"),
            "{}",
            f[0].fix
        );
        assert!(f[0].fix.contains("--cuda 12.x"), "{}", f[0].fix);
    }
}
