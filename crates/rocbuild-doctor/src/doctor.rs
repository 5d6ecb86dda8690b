//! `rocbuild doctor`: every check on every package, as data.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rocbuild_probe::{Machine, Os};
use serde::Serialize;

use crate::checks::{self, ffmpeg};
use crate::error::DoctorError;
use crate::finding::{order, Check, Finding, Severity};
use crate::linkage::{self, Linkage, Reader, Search};
use crate::loadtest::{load_test, LoadReport, Step};
use crate::package::{native_libraries, Subject};

/// What the caller (the CLI) decides.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// The packages asked for by name; empty: every candidate installed in the venv.
    pub requested: Vec<String>,
    /// What doctor can check: [`Subject::known`] plus the recipes' packages.
    pub candidates: Vec<Subject>,
    /// The GPU's architectures (`--gpu-arch`, `$PYTORCH_ROCM_ARCH`), if known.
    pub gpu_arch: Option<Vec<String>>,
    /// Per package, for the load test's child Python.
    pub timeout: Duration,
    /// Run the load test (a child Python) at all.
    pub load_test: bool,
    /// LD_LIBRARY_PATH / DYLD_LIBRARY_PATH entries, PATH entries (for Windows' DLL search).
    pub library_path: Vec<PathBuf>,
    pub path: Vec<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PackageReport {
    pub name: String,
    pub version: Option<String>,
    pub dir: PathBuf,
    pub libraries: Vec<PathBuf>,
    /// `None`: not run (`--no-load`) or not installed.
    pub load: Option<LoadReport>,
    /// Library file names whose load failure is expected (a core for an FFmpeg major that is
    /// not on this system: the package's own loader skips it; a library that needs only the
    /// GPU driver) or follows from another (it needs a sibling that failed to load).
    pub expected_failures: Vec<String>,
    pub loads: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TorchSummary {
    pub version: String,
    pub flavor: String,
    pub lib: PathBuf,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub venv: PathBuf,
    pub chosen_by: String,
    pub python: String,
    pub torch: Option<TorchSummary>,
    pub packages: Vec<PackageReport>,
    /// Ordered: what to do first, first.
    pub findings: Vec<Finding>,
}

impl Report {
    /// All is well: no error and no warning.
    pub fn healthy(&self) -> bool {
        !self.findings.iter().any(Finding::is_problem)
    }
}

/// What doctor needs to know of the machine, and no more: the venv, its Python and torch, and
/// FFmpeg when a package loads it. Not the build tools (`rocbuild_probe::probe` asks cmake,
/// ninja and the compilers for their versions: processes doctor does not need).
pub fn probe(venv: Option<&Path>, want_ffmpeg: bool) -> Result<Machine, DoctorError> {
    let os = Os::current();
    let venv = rocbuild_probe::choose_venv(venv)?;
    let python = rocbuild_probe::probe_python(&venv, os)?;
    let torch = rocbuild_probe::probe_torch(&python.site_packages);
    // FFmpeg's development files are not needed to *run*: without pkg-config's answer the
    // FFmpeg check relies on the library directories alone.
    let ffmpeg = want_ffmpeg
        .then(|| {
            let pc = rocbuild_probe::Tool {
                path: PathBuf::from("pkg-config"),
                version: None,
            };
            rocbuild_probe::probe_ffmpeg(None, Some(&pc))
                .map_err(|e| tracing::debug!("no FFmpeg through pkg-config: {e}"))
                .ok()
        })
        .flatten();
    Ok(Machine {
        platform: rocbuild_probe::Platform {
            os,
            arch: std::env::consts::ARCH.to_string(),
            distro: None,
        },
        venv,
        python,
        torch,
        ffmpeg,
        tools: Default::default(),
        toolkits: Default::default(),
    })
}

/// Pick the subjects: the ones asked for (an unknown name is a usage error), or all installed.
fn choose(opts: &DoctorOptions, site: &Path) -> Result<Vec<Subject>, DoctorError> {
    if opts.requested.is_empty() {
        return Ok(opts
            .candidates
            .iter()
            .filter(|s| s.present(site))
            .cloned()
            .collect());
    }
    let mut out: Vec<Subject> = Vec::new();
    for name in &opts.requested {
        let s = opts
            .candidates
            .iter()
            .find(|s| &s.name == name || &s.import_dir == name)
            .ok_or_else(|| DoctorError::UnknownPackage {
                name: name.clone(),
                known: opts
                    .candidates
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    Ok(out)
}

/// The FFmpeg major a variant library is for: torchcodec's `…_core7`, `…_custom_ops7`,
/// `…_pybind_ops7`.
fn variant_major(file: &str) -> Option<u32> {
    let stem = file.split('.').next()?;
    ["_core", "_custom_ops", "_pybind_ops"]
        .iter()
        .find_map(|k| stem.rsplit_once(k).and_then(|(_, d)| d.parse().ok()))
}

pub fn doctor(machine: &Machine, opts: &DoctorOptions) -> Result<Report, DoctorError> {
    let site = &machine.python.site_packages;
    let os = machine.platform.os;
    let subjects = choose(opts, site)?;
    let torch = machine.torch.as_ref();
    let mut findings = Vec::new();
    let mut packages = Vec::new();

    // The load tests run first, all at once: each is a child process that mostly waits on
    // imports, and they are the slowest part.
    let plans: Vec<(Subject, Vec<PathBuf>, Vec<Step>)> = subjects
        .iter()
        .map(|s| {
            let libs = native_libraries(site, s, os);
            let mut steps = Vec::new();
            if s.name != "torch" && torch.is_some() {
                steps.push(Step::Import("torch".into()));
            }
            steps.push(Step::Import(s.import_dir.clone()));
            steps.extend(libs.iter().cloned().map(Step::Cdll));
            (s.clone(), libs, steps)
        })
        .collect();
    let loads: Vec<Option<LoadReport>> = std::thread::scope(|scope| {
        let handles: Vec<_> = plans
            .iter()
            .map(|(s, _, steps)| {
                let run = opts.load_test && s.present(site);
                let exe = &machine.python.exe;
                scope.spawn(move || run.then(|| load_test(exe, steps, opts.timeout)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(None))
            .collect()
    });

    let reader = Reader::leaked();
    let python = if os == Os::Windows {
        Vec::new()
    } else {
        linkage::python_runtime(&machine.python.exe, reader)
    };
    let ffmpeg_dirs_for = |s: &Subject| {
        ffmpeg::search_dirs(
            os,
            &s.dir(site),
            machine.ffmpeg.as_ref().map(|f| f.lib.as_path()),
            &opts.library_path,
            &opts.path,
        )
    };

    for ((subject, libs, _), load) in plans.into_iter().zip(loads) {
        let version = subject.version(machine);
        if !subject.present(site) {
            findings.push(
                Finding::new(
                    Severity::Error,
                    Check::Missing,
                    &subject.name,
                    format!("{} is not installed in this venv", subject.name),
                )
                .why(format!(
                    "{} has no {}/ directory",
                    site.display(),
                    subject.import_dir
                ))
                .fix(match &subject.recipe {
                    Some(r) => format!(
                        "run `rocbuild {r}` (or pip install {})",
                        subject.distribution
                    ),
                    None => format!("pip install {}", subject.distribution),
                }),
            );
            packages.push(PackageReport {
                name: subject.name.clone(),
                version,
                dir: subject.dir(site),
                libraries: libs,
                load: None,
                expected_failures: Vec::new(),
                loads: None,
            });
            continue;
        }

        // FFmpeg first: it decides which core libraries are live at all.
        let available = if subject.ffmpeg {
            ffmpeg::available(os, &ffmpeg_dirs_for(&subject))
        } else {
            BTreeMap::new()
        };
        let inactive = |p: &Path| -> bool {
            subject.ffmpeg
                && p.file_name()
                    .and_then(|n| variant_major(&n.to_string_lossy()))
                    .is_some_and(|m| !available.contains_key(&m))
        };
        if subject.ffmpeg {
            let exe_dir = (os == Os::Windows)
                .then(|| {
                    opts.path
                        .iter()
                        .find(|d| d.join("ffmpeg.exe").is_file())
                        .cloned()
                })
                .flatten();
            findings.extend(ffmpeg::check(
                &subject,
                &ffmpeg::FfmpegFacts {
                    os,
                    libs: &libs,
                    available: &available,
                    ffmpeg_exe_dir: exe_dir.as_deref(),
                },
            ));
        }

        // Read every live library and resolve its closure.
        // Already in the process when the package's libraries load: Python itself, and torch's
        // libraries (`import torch` loads them into the global scope first; for torch itself,
        // its libraries load as one group and resolve against each other).
        let mut search = Search {
            extra_dirs: opts.library_path.clone(),
            preloaded: python.clone(),
            executable: None,
        };
        if let Some(t) = torch {
            search.preloaded.extend(
                native_libraries(site, &Subject::torch(), os)
                    .into_iter()
                    .filter(|p| p.starts_with(&t.lib)),
            );
        }
        let live: Vec<PathBuf> = libs.iter().filter(|p| !inactive(p)).cloned().collect();
        // The package's own loader loads its libraries in order (TorchCodec: core, then
        // custom_ops, which NEEDs the core by a bare name no RUNPATH could find): a sibling
        // is already loaded when another asks for it.
        search.preloaded.extend(live.iter().cloned());
        let mut linkages: Vec<Linkage> = Vec::new();
        for (lib, r) in live.iter().zip(linkage::link_group(&live, &search, reader)) {
            match r {
                Ok(l) => linkages.push(l),
                Err(e) => findings.push(
                    Finding::new(
                        Severity::Error,
                        Check::Missing,
                        &subject.name,
                        format!("{} cannot be read", file_name(lib)),
                    )
                    .details([e.to_string()])
                    .why("the file is truncated or damaged, so no loader can load it")
                    .fix(format!("reinstall it: {}", subject.rebuild_hint())),
                ),
            }
        }

        if let Some(t) = torch {
            let needed: Vec<(PathBuf, Vec<String>)> = linkages
                .iter()
                .map(|l| (l.path.clone(), l.needed.clone()))
                .collect();
            findings.extend(checks::flavor::check(&subject, t, &needed));
        }
        for l in &linkages {
            let name = file_name(&l.path);
            findings.extend(checks::missing::check(
                &subject,
                &name,
                &l.missing,
                &searched(os),
            ));
            // A missing library hides every symbol it would have provided: its own finding says so.
            if l.missing.is_empty() {
                let own: Vec<_> = l
                    .unresolved
                    .iter()
                    .filter(|u| u.importer == l.path)
                    .cloned()
                    .collect();
                findings.extend(checks::abi::check(
                    &subject,
                    torch.map(|t| t.version.as_str()),
                    &name,
                    &own,
                ));
            }
        }
        let gpu_bins: Vec<(PathBuf, Vec<String>)> = linkages
            .iter()
            .map(|l| (l.path.clone(), l.gpu_targets.clone()))
            .collect();
        let mut hip: Vec<PathBuf> = linkages
            .iter()
            .flat_map(|l| &l.found)
            .filter(|f| checks::gpu::is_hip_runtime(&f.name))
            .filter_map(|f| f.path.clone())
            .collect();
        if subject.name != "torch" {
            // A ROCm torch carries its own HIP runtime in torch/lib; loaded with the package,
            // it is one of the runtimes in the process.
            hip.extend(
                search
                    .preloaded
                    .iter()
                    .filter(|p| torch.is_some_and(|t| p.starts_with(&t.lib)))
                    .filter(|p| checks::gpu::is_hip_runtime(&file_name(p)))
                    .cloned(),
            );
        }
        hip.sort();
        hip.dedup();
        let comgr = linkages
            .iter()
            .flat_map(|l| &l.found)
            .any(|f| checks::gpu::is_comgr(&f.name))
            || hip.iter().filter_map(|p| p.parent()).any(|d| {
                std::fs::read_dir(d)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|e| checks::gpu::is_comgr(&e.file_name().to_string_lossy()))
            });
        findings.extend(checks::gpu::check(
            &subject,
            &checks::gpu::GpuFacts {
                binaries: &gpu_bins,
                gpu: opts.gpu_arch.as_deref(),
                hip_runtimes: &hip,
                comgr,
            },
        ));
        findings.extend(checks::stale::check(site, &subject, torch));

        // The symptom, in the loader's words.
        let mut expected: Vec<String> = libs
            .iter()
            .filter(|p| inactive(p))
            .map(|p| file_name(p))
            .collect();
        // A library that fails only for lack of the GPU driver is expected to, on this machine;
        // one that fails because a sibling it needs failed first says nothing new.
        let siblings: Vec<String> = libs.iter().map(|p| file_name(p)).collect();
        if let Some(r) = &load {
            for s in &r.steps {
                if let (Step::Cdll(p), Some(e)) = (&s.step, &s.error) {
                    let missing_lib = e
                        .split(": cannot open shared object file")
                        .next()
                        .unwrap_or("");
                    let missing_lib = missing_lib.rsplit(": ").next().unwrap_or("");
                    if checks::missing::is_gpu_driver(missing_lib)
                        || siblings.iter().any(|n| n == missing_lib)
                    {
                        expected.push(file_name(p));
                    }
                }
            }
        }
        let loads = load.as_ref().map(|r| {
            r.aborted.is_none()
                && r.steps.iter().all(|s| {
                    s.ok || matches!(&s.step, Step::Cdll(p) if expected.contains(&file_name(p)))
                })
        });
        if let (Some(r), Some(false)) = (&load, loads) {
            let failed: Vec<String> = r
                .steps
                .iter()
                .filter(|s| {
                    !s.ok && !matches!(&s.step, Step::Cdll(p) if expected.contains(&file_name(p)))
                })
                .map(|s| format!("{}: {}", s.step, s.error.as_deref().unwrap_or("failed")))
                .collect();
            findings.push(
                Finding::new(
                    Severity::Error,
                    Check::Load,
                    &subject.name,
                    format!("{} does not load in a fresh Python", subject.name),
                )
                .details(
                    failed
                        .into_iter()
                        .chain(r.aborted.iter().map(|a| format!("the child Python: {a}"))),
                )
                .why("the messages are the loader's own (a child process of the venv's Python)"),
            );
        }
        packages.push(PackageReport {
            name: subject.name.clone(),
            version,
            dir: subject.dir(site),
            libraries: libs,
            load,
            expected_failures: expected,
            loads,
        });
    }
    order(&mut findings);
    Ok(Report {
        venv: machine.venv.root.clone(),
        chosen_by: machine.venv.chosen_by.clone(),
        python: machine.python.full_version.clone(),
        torch: torch.map(|t| TorchSummary {
            version: t.version.clone(),
            flavor: t.flavor.as_str().into(),
            lib: t.lib.clone(),
        }),
        packages,
        findings,
    })
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

fn searched(os: Os) -> String {
    match os {
        Os::Linux => "the library's RPATH/RUNPATH, LD_LIBRARY_PATH, torch/lib (loaded by `import torch`), the ld.so cache and /lib, /usr/lib".into(),
        Os::Macos => "the library's LC_RPATHs, @loader_path, DYLD_LIBRARY_PATH and /usr/lib".into(),
        Os::Windows => "the DLL's own directory, the add_dll_directory directories, System32 and PATH".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_majors() {
        assert_eq!(variant_major("libtorchcodec_core7.so"), Some(7));
        assert_eq!(variant_major("libtorchcodec_custom_ops6.so"), Some(6));
        assert_eq!(variant_major("libtorchcodec_pybind_ops5.so"), Some(5));
        assert_eq!(variant_major("libtorchcodec_pybind_ops.so"), None);
    }
}
