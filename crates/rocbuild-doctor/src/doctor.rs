//! `rocbuild doctor`: every check on every package, as data.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rocbuild_probe::{LinkMethod, Machine, Os};
use serde::Serialize;

use crate::error::DoctorError;
use crate::examine::Examiner;
use crate::finding::{order, Breaks, Check, Finding, Severity};
use crate::linkage::{self, Reader};
use crate::loadtest::{load_test_with, LoadReport, Step};
use crate::package::{native_libraries, Subject};
use crate::symptom;

/// What the caller (the CLI) decides.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// The packages asked for by name; empty: every candidate installed in the venv.
    pub requested: Vec<String>,
    /// What doctor can check: [`Subject::known`] plus the recipes' packages.
    pub candidates: Vec<Subject>,
    /// The GPU's architectures (`--gpu-arch`, `$PYTORCH_ROCM_ARCH`), if known.
    pub gpu_arch: rocbuild_probe::GpuTargets,
    /// Per package, for the load test's child Python.
    pub timeout: Duration,
    /// Run the load test (a child Python) at all.
    pub load_test: bool,
    /// LD_LIBRARY_PATH / DYLD_LIBRARY_PATH entries, PATH entries (for Windows' DLL search).
    pub library_path: Vec<PathBuf>,
    pub path: Vec<PathBuf>,
    /// The command's environment (read once by the caller's settings step): what the GPU,
    /// CUDA and Wine checks ask of it.
    pub env: rocbuild_probe::ProbeEnv,
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
    /// For the exit status: a missing library, an ABI break, both, something else, or well.
    pub fn verdict(&self) -> crate::Verdict {
        crate::finding::verdict(&self.findings)
    }
}

/// What doctor needs to know of the machine, and no more: the venv, its Python and torch, and
/// FFmpeg when a package loads it. Not the build tools (`rocbuild_probe::probe` asks cmake,
/// ninja and the compilers for their versions: processes doctor does not need).
///
/// The OS whose rules apply is `os` (`--machine FILE`), else the one the venv's binaries are
/// for (read from the files: a macOS venv copied to Linux is a macOS venv), else this host's.
/// A venv of another OS is described from its files: its Python cannot run here.
pub fn probe(
    venv: &rocbuild_probe::Venv,
    want_ffmpeg: bool,
    os: Option<Os>,
) -> Result<Machine, DoctorError> {
    let host = Os::current();
    let chosen = venv.clone();
    let forced = os.is_some();
    let os = os.unwrap_or_else(|| {
        rocbuild_probe::cross::venv_os(&chosen.root, &["torchcodec", "ctranslate2"], host)
    });
    // A venv of this host's OS is asked its own Python; given `--machine`, a venv whose
    // Python is not there (copied from another machine) is read from its files too.
    let runs_here =
        os == host && (!forced || rocbuild_probe::python_in_venv(&chosen.root, os).exists());
    let (venv, python) = if runs_here {
        let python = rocbuild_probe::probe_python(&chosen, os)?;
        (chosen, python)
    } else {
        let (v, site) = crate::venv_os::locate(&chosen)?;
        let python = crate::venv_os::python_from_files(&v.root, &site, os);
        (
            rocbuild_probe::Venv {
                root: v.root,
                chosen_by: chosen.chosen_by,
            },
            python,
        )
    };
    let torch = rocbuild_probe::probe_torch(&python.torch_site());
    // FFmpeg's development files are not needed to *run*: without pkg-config's answer the
    // FFmpeg check relies on the library directories alone. This host's FFmpeg says nothing
    // about another OS's venv.
    let ffmpeg = (want_ffmpeg && os == host)
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
    Ok(Machine::here(
        rocbuild_probe::Platform {
            os,
            arch: std::env::consts::ARCH.to_string(),
            distro: None,
            distro_like: Vec::new(),
        },
        rocbuild_probe::HostParts {
            tools: Default::default(),
            toolkits: Default::default(),
            rocm_sdks: Vec::new(),
            libraries: Default::default(),
        },
        rocbuild_probe::TargetParts {
            venv,
            python,
            torch,
            ffmpeg,
            ffmpeg_missing: None,
            hip_runtime: None,
            gpu: None,
            cuda_gpu: None,
        },
    ))
}

/// A library missing only from the loader's path, present elsewhere in the venv, needs no
/// rebuild: the fix of each missing-library finding becomes `rocbuild repair NAME` when that
/// repair would make the package load. Not with an import nothing exports or a wrong flavor
/// (those need a rebuild, and keep its fix), nor for rocbuild's own builds.
fn repair_fix(
    machine: &Machine,
    subject: &Subject,
    findings: &mut [Finding],
    loader: &linkage::LoaderEnv,
) {
    let ours = |f: &Finding| f.subject == subject.name;
    let missing = findings
        .iter()
        .any(|f| ours(f) && f.breaks == Some(Breaks::MissingLibrary));
    let rebuild = findings
        .iter()
        .any(|f| ours(f) && (f.breaks == Some(Breaks::Abi) || f.check == Check::Flavor));
    if !missing || rebuild {
        return;
    }
    let os = machine.target.platform.os;
    let python =
        Some(machine.target.python.exe.clone()).filter(|p| p.is_file() && os == Os::current());
    let site = &machine.target.python.site_packages;
    let runtime = crate::repair::Runtime {
        python,
        loader: loader.clone(),
    };
    let Some(found) = crate::repair::repair_would_fix(site, os, subject, runtime) else {
        return;
    };
    let mut made: Vec<String> = Vec::new();
    for (name, dir) in &found {
        // Who installed it there: the distribution whose RECORD lists it.
        let by = dir
            .join(name)
            .strip_prefix(site)
            .ok()
            .and_then(|rest| crate::provider::distribution_of(site, rest))
            .map(|d| format!(" (installed by {d})"))
            .unwrap_or_default();
        let at = format!(
            "{} findable from {}{by}",
            name,
            dir.strip_prefix(site).unwrap_or(dir).display()
        );
        if !made.contains(&at) {
            made.push(at);
        }
    }
    for f in findings
        .iter_mut()
        .filter(|f| ours(f) && f.breaks == Some(Breaks::MissingLibrary))
    {
        f.fix = format!(
            "run `rocbuild repair {}` (makes {}; no rebuild needed)",
            subject.name,
            made.join(", ")
        );
    }
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
pub(crate) fn variant_major(file: &str) -> Option<u32> {
    let stem = file.split('.').next()?;
    ["_core", "_custom_ops", "_pybind_ops"]
        .iter()
        .find_map(|k| stem.rsplit_once(k).and_then(|(_, d)| d.parse().ok()))
}

/// What every package's examination in `machine`'s venv shares: Python's runtime, torch's
/// libraries and what they load.
fn examiner<'a>(machine: &'a Machine, opts: &'a DoctorOptions, reader: &'a Reader) -> Examiner<'a> {
    let site = &machine.target.python.site_packages;
    let os = machine.target.platform.os;
    let preload = os.rules().link_method() == LinkMethod::Preload;
    let torch = machine.target.torch.as_ref();
    // A venv for another OS than this host's: its Python cannot run here.
    let foreign = os != Os::current() || !machine.target.python.exe.is_file();
    let torch_libs: Vec<PathBuf> = match torch {
        Some(t) => native_libraries(site, &Subject::torch(), os)
            .into_iter()
            .filter(|p| p.starts_with(&t.lib))
            .collect(),
        None => Vec::new(),
    };
    let loader = linkage::LoaderEnv::of(&opts.env);
    // What torch's libraries find through their own RPATH/RUNPATH (a PyPI CUDA torch's
    // `$ORIGIN/../../nvidia/cu13/lib`): loaded by `import torch` too.
    let torch_deps = linkage::found_through_rpaths(
        &torch_libs,
        &linkage::Search {
            extra_dirs: opts.library_path.clone(),
            preloaded: torch_libs.clone(),
            executable: crate::examine::application(machine),
            loader: loader.clone(),
        },
        reader,
    );
    Examiner {
        machine,
        opts,
        reader,
        // The interpreter's own libraries are read from its ELF or Mach-O needs; a DLL binds
        // by name to what is loaded (the Preload world), so there is nothing to read.
        python: if preload || !machine.target.python.exe.is_file() {
            Vec::new()
        } else {
            linkage::python_runtime(&machine.target.python.exe, reader, &loader)
        },
        loader,
        torch_libs,
        torch_deps,
        driver_majors: (os.rules().driver_ships_hip_runtime() && !foreign)
            .then(|| rocbuild_probe::driver_runtime_majors(&opts.env, os))
            .flatten(),
        venv_sdks: std::sync::OnceLock::new(),
    }
}

/// doctor's file checks (libraries the loader would not find, the ABI check: imports that
/// torch and the rest of the process do not export) for native libraries not installed yet,
/// such as a rebuilt wheel's, unpacked: as they would load into `machine`'s venv, after Python
/// and `import torch`. Nothing is loaded. The errors are what `doctor` would report once
/// they were installed.
pub fn check_libraries(
    machine: &Machine,
    subject: &Subject,
    libs: &[PathBuf],
    env: &rocbuild_probe::ProbeEnv,
) -> Vec<Finding> {
    let opts = DoctorOptions {
        requested: Vec::new(),
        candidates: Vec::new(),
        gpu_arch: Default::default(),
        timeout: Duration::from_secs(60),
        load_test: false,
        // The verification runs without LD_LIBRARY_PATH: so does this check.
        library_path: Vec::new(),
        path: Vec::new(),
        env: env.clone(),
    };
    let reader = Reader::leaked();
    let ctx = examiner(machine, &opts, reader);
    let mut findings = ctx.link(subject, libs).1;
    findings.retain(|f| f.severity == Severity::Error);
    order(&mut findings);
    findings
}

pub fn doctor(machine: &Machine, opts: &DoctorOptions) -> Result<Report, DoctorError> {
    let site = &machine.target.python.site_packages;
    let os = machine.target.platform.os;
    let opts = &with_preload_dirs(opts, site, os);
    let torch = machine.target.torch.as_ref();
    let plans: Vec<(Subject, Vec<PathBuf>, Vec<Step>)> = choose(opts, site)?
        .into_iter()
        .map(|s| {
            let libs = native_libraries(site, &s, os);
            let mut steps = Vec::new();
            if s.name != "torch" && torch.is_some() {
                steps.push(Step::Import("torch".into()));
            }
            steps.push(Step::Import(s.import_dir.clone()));
            steps.extend(libs.iter().cloned().map(Step::Cdll));
            (s, libs, steps)
        })
        .collect();
    // A Windows venv on another host runs under Wine when there is one.
    let wine = (os != Os::current() && os.rules().runs_under_wine() && opts.load_test)
        .then(|| rocbuild_probe::cross::find_wine(&opts.env))
        .flatten()
        .filter(|_| machine.target.python.exe.is_file());
    // A venv for another OS than this host's: its Python cannot run here.
    let foreign = (wine.is_none() && (os != Os::current() || !machine.target.python.exe.is_file())).then(|| {
        Finding::new(
            Severity::Note,
            Check::Load,
            "venv",
            format!(
                "the venv's binaries are for {}, this host runs {}: read from the files with the {} loader's rules, not loaded",
                os.as_str(),
                Os::current().as_str(),
                os.as_str()
            ),
        )
        .why("a load test needs the venv's own Python, which runs only on its OS")
    });
    let reader = Reader::leaked();
    let mut findings = Vec::new();
    let mut packages = Vec::new();
    // The load tests (child processes that mostly wait on imports) start first and run while
    // every file is read: the static checks, torch's closure included, hide behind them.
    std::thread::scope(|scope| {
        let handles: Vec<_> = plans
            .iter()
            .map(|(s, _, steps)| {
                let run = opts.load_test && s.present(site) && foreign.is_none();
                let wine = wine.as_deref();
                scope.spawn(move || {
                    run.then(|| {
                        load_test_with(&machine.target.python.exe, steps, opts.timeout, wine)
                    })
                })
            })
            .collect();
        let ctx = examiner(machine, opts, reader);
        for ((subject, libs, _), handle) in plans.iter().zip(handles) {
            let mut examined = ctx.examine(subject, libs);
            repair_fix(machine, subject, &mut examined.findings, &ctx.loader);
            let load = handle.join().unwrap_or(None);
            if let Some(r) = &load {
                symptom::reconcile(&mut examined.findings, r);
                findings.extend(symptom::under_wine(&subject.name, r));
            }
            findings.extend(examined.findings);
            let verdict = symptom::judge(&subject.name, libs, examined.inactive, load.as_ref());
            findings.extend(verdict.finding);
            packages.push(PackageReport {
                name: subject.name.clone(),
                version: subject.version(machine),
                dir: subject.dir(site),
                libraries: libs.clone(),
                load,
                expected_failures: verdict.expected,
                loads: verdict.loads,
            });
        }
    });
    findings.extend(foreign);
    order(&mut findings);
    Ok(Report {
        venv: machine.target.venv.root.clone(),
        chosen_by: machine.target.venv.chosen_by.clone(),
        python: machine.target.python.full_version.clone(),
        torch: torch.map(|t| TorchSummary {
            version: t.version.clone(),
            flavor: t.flavor.as_str().into(),
            lib: t.lib.clone(),
        }),
        packages,
        findings,
    })
}

/// Windows: the directories rocbuild's DLL preload hooks in the venv add when their package
/// is imported, searched as `add_dll_directory` directories are.
fn with_preload_dirs(opts: &DoctorOptions, site: &Path, os: Os) -> DoctorOptions {
    let mut opts = opts.clone();
    if os.rules().link_method() != LinkMethod::Preload {
        return opts;
    }
    for p in preload_hook_dirs(site) {
        if !opts.library_path.contains(&p) {
            opts.library_path.push(p);
        }
    }
    opts
}

/// The directories the DLL preload hooks (`_rocbuild_preload_*.py`) in `site` add; a hook
/// written for Wine names them as `Z:\…`, read back as this host's paths.
pub fn preload_hook_dirs(site: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let Ok(rd) = std::fs::read_dir(site) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("_rocbuild_preload_") && name.ends_with(".py")) {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        for d in rocbuild_link::preload_dirs_in(&text) {
            let seen = rocbuild_probe::cross::host_view_of_windows_path(&d);
            if let Some(p) = seen.iter().find(|p| p.is_dir()).or(seen.first()) {
                if !out.contains(p) {
                    out.push(p.clone());
                }
            }
        }
    }
    out
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
