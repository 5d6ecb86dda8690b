//! The checks that read files, for one package: FFmpeg, closure, flavor, missing libraries,
//! ABI, GPU, staleness. No native code is loaded; the load test runs beside, in a child.
//!
//! Names an OS: the loader-search seam. Each OS's loader searches its own way (RUNPATH and
//! ld.so, LC_RPATH and dyld, the DLL search order), and what doctor says uses that OS's words.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocbuild_probe::{Machine, Os};

use crate::checks::{self, ffmpeg};
use crate::doctor::{variant_major, DoctorOptions};
use crate::finding::{Check, Finding, Severity};
use crate::linkage::{self, Linkage, Reader, Search};
use crate::package::Subject;

/// What every package's examination shares.
pub struct Examiner<'a> {
    pub machine: &'a Machine,
    pub opts: &'a DoctorOptions,
    pub reader: &'a Reader,
    /// What the loader reads of the command's environment, taken once.
    pub loader: crate::linkage::LoaderEnv,
    /// The Python program and its libpython: they export the `Py*` symbols.
    pub python: Vec<PathBuf>,
    /// torch's libraries under torch/lib: `import torch` loads them before any extension.
    pub torch_libs: Vec<PathBuf>,
    /// What torch's libraries find through their own RPATH/RUNPATH outside torch/lib (the
    /// nvidia-* wheels of a PyPI CUDA torch): loaded by `import torch` as well, so another
    /// package's library that needs the same soname binds to them without any search.
    pub torch_deps: Vec<PathBuf>,
    /// Windows: the GPU driver's HIP runtime majors in System32; `None` elsewhere.
    pub driver_majors: Option<Vec<u32>>,
    /// The ROCm SDKs inside the venv (TheRock's packages), found once per run when a
    /// package needs them.
    pub venv_sdks: std::sync::OnceLock<Vec<rocbuild_probe::RocmSdk>>,
}

pub struct Examined {
    pub findings: Vec<Finding>,
    /// Libraries the package's own loader skips on this machine (cores for an FFmpeg major
    /// that is not here): not examined, and their load failures are expected.
    pub inactive: Vec<String>,
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

fn searched(os: Os) -> &'static str {
    match os {
        Os::Linux => "the library's RPATH/RUNPATH, LD_LIBRARY_PATH, torch/lib (loaded by `import torch`), the ld.so cache and /lib, /usr/lib",
        Os::Macos => "the library's LC_RPATHs, @loader_path, DYLD_LIBRARY_PATH and /usr/lib",
        Os::Windows => "the DLL's own directory, the add_dll_directory directories, System32 and PATH",
    }
}

impl Examiner<'_> {
    pub fn examine(&self, subject: &Subject, libs: &[PathBuf]) -> Examined {
        let site = &self.machine.target.python.site_packages;
        if !subject.present(site) {
            return Examined {
                findings: vec![not_installed(subject, site)],
                inactive: Vec::new(),
            };
        }
        let mut findings = Vec::new();
        // FFmpeg first: it decides which core libraries are live at all.
        let available = if subject.ffmpeg {
            let (found, f) = self.ffmpeg(subject, libs);
            findings.extend(f);
            found
        } else {
            BTreeMap::new()
        };
        let is_inactive = |p: &Path| {
            subject.ffmpeg
                && variant_major(&file_name(p)).is_some_and(|m| !available.contains_key(&m))
        };
        let mut inactive: Vec<String> = libs
            .iter()
            .filter(|p| is_inactive(p))
            .map(|p| file_name(p))
            .collect();
        let live: Vec<PathBuf> = libs.iter().filter(|p| !is_inactive(p)).cloned().collect();
        let (live, unchosen) = self.one_of(subject, live);
        inactive.extend(unchosen);

        let (linkages, linked) = self.link(subject, &live);
        let missing_found = linked.iter().any(|f| f.check == Check::Missing);
        findings.extend(linked);
        findings.extend(self.dll_dirs(subject, missing_found));
        if subject.ffmpeg && available.is_empty() {
            findings.extend(self.torch_abi_without_ffmpeg(subject, libs));
        }
        if let Some(t) = self.machine.target.torch.as_ref() {
            let needed: Vec<(PathBuf, Vec<String>)> = linkages
                .iter()
                .map(|l| (l.path.clone(), l.needed.clone()))
                .collect();
            findings.extend(checks::flavor::check(subject, t, &needed));
        }
        findings.extend(self.gpu(subject, &linkages));
        findings.extend(self.cuda(subject, &live, &linkages));
        findings.extend(checks::stale::check(
            site,
            subject,
            self.machine.target.torch.as_ref(),
        ));
        Examined { findings, inactive }
    }

    /// No FFmpeg at all makes every FFmpeg variant inactive, but must not hide an ABI break
    /// with torch behind it: the newest variant's libraries are linked anyway and their torch
    /// imports that torch does not export are reported (their FFmpeg imports are the FFmpeg
    /// finding's business).
    fn torch_abi_without_ffmpeg(&self, subject: &Subject, libs: &[PathBuf]) -> Vec<Finding> {
        let Some(newest) = libs
            .iter()
            .filter_map(|p| variant_major(&file_name(p)))
            .max()
        else {
            return Vec::new();
        };
        let group: Vec<PathBuf> = libs
            .iter()
            .filter(|p| variant_major(&file_name(p)).is_none_or(|m| m == newest))
            .cloned()
            .collect();
        let (_, found) = self.link(subject, &group);
        found
            .into_iter()
            .filter(|f| f.check == Check::Abi)
            .collect()
    }

    /// Of the libraries the package picks one of at run time (`loads_one_of`), those that cannot
    /// load here, when another one can: set aside like an absent FFmpeg major's cores.
    fn one_of(&self, subject: &Subject, live: Vec<PathBuf>) -> (Vec<PathBuf>, Vec<String>) {
        let Ok(globs) = subject
            .loads_one_of
            .iter()
            .try_fold(globset::GlobSetBuilder::new(), |mut b, g| {
                b.add(globset::Glob::new(g)?);
                Ok::<_, globset::Error>(b)
            })
            .and_then(|b| b.build())
        else {
            return (live, Vec::new());
        };
        if subject.loads_one_of.is_empty() {
            return (live, Vec::new());
        }
        let search = self.search(subject, &live);
        let loads = |p: &PathBuf| {
            linkage::link_group(std::slice::from_ref(p), &search, self.reader)
                .into_iter()
                .all(|r| r.is_ok_and(|l| l.missing.is_empty()))
        };
        let (alternatives, rest): (Vec<PathBuf>, Vec<PathBuf>) =
            live.into_iter().partition(|p| globs.is_match(file_name(p)));
        let (usable, not_here): (Vec<PathBuf>, Vec<PathBuf>) =
            alternatives.into_iter().partition(|p| loads(p));
        if usable.is_empty() {
            let mut all = rest;
            all.extend(not_here);
            return (all, Vec::new());
        }
        let mut live = rest;
        live.extend(usable);
        (live, not_here.iter().map(|p| file_name(p)).collect())
    }

    /// The linkage of `live` (loaded together, after Python and torch) and what it shows: files
    /// that cannot be read, libraries the loader does not find, imports nothing exports.
    pub fn link(&self, subject: &Subject, live: &[PathBuf]) -> (Vec<Linkage>, Vec<Finding>) {
        let mut findings = Vec::new();
        let search = self.search(subject, live);
        let mut linkages: Vec<Linkage> = Vec::new();
        for (lib, r) in live
            .iter()
            .zip(linkage::link_group(live, &search, self.reader))
        {
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
        let torch = self.machine.target.torch.as_ref();
        for l in &linkages {
            let name = file_name(&l.path);
            findings.extend(checks::missing::check(
                subject,
                &name,
                &l.missing,
                searched(self.machine.target.platform.os),
                &l.format,
            ));
            // A missing library hides every symbol it would have provided: its own finding says
            // so. torch's symbols can come only from torch, which is there: those are checked
            // whatever else is missing.
            let torch_missing = l.missing.iter().any(|m| {
                let m = m.name.to_ascii_lowercase();
                m.contains("torch") || m.contains("c10")
            });
            if !l.missing.is_empty() && torch_missing {
                continue;
            }
            let only_torch = !l.missing.is_empty();
            // Without the venv's Python to read (a venv of another OS), the interpreter's
            // `Py*` symbols cannot be checked: they are not reported.
            let own: Vec<_> = l
                .unresolved
                .iter()
                .filter(|u| u.importer == l.path)
                .filter(|u| match only_torch {
                    true => checks::abi::is_torch_symbol(u),
                    false => !self.python.is_empty() || !rocbuild_native::is_python_c_api(&u.name),
                })
                .cloned()
                .collect();
            findings.extend(checks::abi::check(
                subject,
                torch.map(|t| t.version.as_str()),
                &name,
                &own,
            ));
        }
        (linkages, findings)
    }

    /// Already in the process when the package's libraries load: Python itself; torch's
    /// libraries (`import torch` loads them into the global scope first; for torch itself, its
    /// libraries load as one group and resolve against each other) and, for another package,
    /// what they found through their RUNPATHs; and the package's own
    /// (its loader loads them in order: TorchCodec's custom_ops NEEDs the core by a bare name
    /// no RUNPATH could find, and the core is already loaded by then).
    /// Windows: what the package's own `__init__.py` adds with `os.add_dll_directory`, and
    /// the finding when a directory it names is missing and stops the rest (a `try` around
    /// them all), when that leaves a library unfound.
    fn dll_dirs(&self, subject: &Subject, missing_found: bool) -> Vec<Finding> {
        let site = &self.machine.target.python.site_packages;
        let Some(d) = subject.dll_dirs.as_ref().filter(|_| self.windows()) else {
            return Vec::new();
        };
        let (added, Some((stopped_at, rest))) = d.added(site) else {
            return Vec::new();
        };
        if !missing_found {
            return Vec::new();
        }
        let others: Vec<String> = std::fs::read_dir(site)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("_rocm_sdk_libraries") && site.join(n).join("bin").is_dir())
            .map(|n| format!("{n}\\bin"))
            .collect();
        let shown =
            |v: &[PathBuf]| -> Vec<String> { v.iter().map(|p| p.display().to_string()).collect() };
        vec![Finding::new(
            Severity::Error,
            Check::Missing,
            &subject.name,
            format!("{}'s __init__.py adds {} with os.add_dll_directory, which this venv does not have, so it stops there", subject.name, stopped_at),
        )
        .details(
            std::iter::once(format!("added: {}", shown(&added).join(", ")))
                .chain((!rest.is_empty()).then(|| format!("not added after it: {}", rest.join(", "))))
                .chain((!others.is_empty()).then(|| format!("the ROCm libraries here are in: {}", others.join(", ")))),
        )
        .why("upstream adds its DLL directories inside one try that swallows the error of a missing one: the ROCm library DLLs are then found nowhere (WinError 126)")
        .fix(format!(
            "run `rocbuild repair {}` (a preload hook adds the directories this venv has), or `rocbuild {}`",
            subject.name,
            subject.recipe.as_deref().unwrap_or(&subject.name)
        ))]
    }

    fn windows(&self) -> bool {
        self.machine.target.platform.os == Os::Windows
    }

    fn search(&self, subject: &Subject, live: &[PathBuf]) -> Search {
        let mut extra_dirs = self.opts.library_path.clone();
        if let Some(d) = subject.dll_dirs.as_ref().filter(|_| self.windows()) {
            let site = &self.machine.target.python.site_packages;
            extra_dirs.extend(d.added(site).0);
        }
        let mut preloaded = self.python.clone();
        preloaded.extend(self.torch_libs.iter().cloned());
        if subject.name != "torch" {
            preloaded.extend(self.torch_deps.iter().cloned());
        }
        preloaded.extend(live.iter().cloned());
        Search {
            extra_dirs,
            preloaded,
            executable: application(self.machine),
            loader: self.loader.clone(),
        }
    }

    /// FFmpeg majors the loader would find, and the FFmpeg findings.
    fn ffmpeg(
        &self,
        subject: &Subject,
        libs: &[PathBuf],
    ) -> (BTreeMap<u32, PathBuf>, Vec<Finding>) {
        let os = self.machine.target.platform.os;
        let site = &self.machine.target.python.site_packages;
        let dirs = ffmpeg::search_dirs(
            os,
            &subject.dir(site),
            self.machine.target.ffmpeg.as_ref().map(|f| f.lib.as_path()),
            &self.opts.library_path,
            &self.opts.path,
        );
        let available = ffmpeg::available(os, &dirs);
        let exe_dir = (os == Os::Windows)
            .then(|| {
                self.opts
                    .path
                    .iter()
                    .find(|d| d.join("ffmpeg.exe").is_file())
                    .cloned()
            })
            .flatten();
        let findings = ffmpeg::check(
            subject,
            &ffmpeg::FfmpegFacts {
                os,
                libs,
                available: &available,
                ffmpeg_exe_dir: exe_dir.as_deref(),
            },
        );
        (available, findings)
    }

    /// For the GPU asked about: what TheRock's SDK in this venv has no kernels for, when the
    /// package runs on a HIP runtime (one sentence each, with the fix).
    fn kernel_gaps(&self, hip: &[PathBuf]) -> Vec<String> {
        let (Some(archs), false) = (self.opts.gpu_arch.named(), hip.is_empty()) else {
            return Vec::new();
        };
        let sdks = self.venv_sdks.get_or_init(|| {
            let site = &self.machine.target.python.site_packages;
            let os = self.machine.target.platform.os;
            rocbuild_probe::discover_sdks(&self.opts.env, os, Some(site))
                .into_iter()
                .filter(|s| s.root.starts_with(site))
                .collect()
        });
        sdks.iter()
            .flat_map(|sdk| {
                archs
                    .iter()
                    .filter_map(|a| rocbuild_probe::kernels::missing_for(sdk, a, &[]))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The NVIDIA GPU code of the package's libraries (their `.nv_fatbin`) against the GPUs
    /// `nvidia-smi` (or `$TORCH_CUDA_ARCH_LIST`) names, and the CUDA libraries they load by name
    /// at their first CUDA call; nothing is asked when no library has either.
    fn cuda(&self, subject: &Subject, live: &[PathBuf], linkages: &[Linkage]) -> Vec<Finding> {
        let bins: Vec<(PathBuf, Vec<rocbuild_native::NvCode>)> = linkages
            .iter()
            .filter_map(|l| {
                let codes = rocbuild_native::nv_fatbin_codes_of(&l.path).ok()?;
                (!codes.is_empty()).then(|| (l.path.clone(), codes))
            })
            .collect();
        // What each library loads by name, read from its bytes once for both uses.
        let loaded: Vec<Vec<String>> = linkages
            .iter()
            .map(|l| match self.reader.full(&l.path).as_ref() {
                Ok(bin) => rocbuild_native::cuda_libraries_loaded_by_name(&l.path, bin),
                Err(_) => Vec::new(),
            })
            .collect();
        let by_name = self.cuda_not_found_by_name(subject, live, linkages, &loaded);
        let runtimes = self.cuda_runtimes(subject, linkages, &loaded);
        if bins.is_empty() && by_name.is_empty() && runtimes.is_empty() {
            return Vec::new();
        }
        let os = self.machine.target.platform.os;
        let g = rocbuild_probe::detect_cuda_gpu(&self.opts.env, os);
        let found_by = if g.archs.is_empty() {
            g.steps.last().cloned().unwrap_or_default()
        } else {
            g.found_by.clone()
        };
        let gpu_present = g.found_by == "nvidia-smi";
        let mut out =
            checks::cuda::not_found_by_name(subject, &by_name, gpu_present, self.windows());
        let driver = gpu_present
            .then(|| rocbuild_probe::detect_cuda_driver(&self.opts.env, os))
            .flatten();
        if let Some(d) = driver.filter(|_| !runtimes.is_empty()) {
            let mut all = runtimes;
            if let Some(cuda) = self.machine.target.torch.as_ref().and_then(|t| {
                let (major, _) = t.cuda.as_deref()?.split_once('.')?;
                Some((t.version.clone(), major.parse::<u32>().ok()?))
            }) {
                all.insert(
                    0,
                    checks::cuda::Runtime {
                        who: format!("torch {}", cuda.0),
                        major: cuda.1,
                        from: "torch/version.py".into(),
                    },
                );
            }
            out.extend(checks::cuda::driver_too_old(subject, &d, &all));
        }
        out.extend(checks::cuda::check(
            subject,
            &checks::cuda::CudaFacts {
                binaries: &bins,
                gpus: &g.archs,
                found_by,
            },
        ));
        out
    }

    /// The CUDA runtimes the package's own files use, by major: read from the toolkit library
    /// names they link (`libcudart.so.13`) or load by name (`libcublas.so.12`).
    fn cuda_runtimes(
        &self,
        subject: &Subject,
        linkages: &[Linkage],
        loaded: &[Vec<String>],
    ) -> Vec<checks::cuda::Runtime> {
        let mut out: Vec<checks::cuda::Runtime> = Vec::new();
        for (l, by_name) in linkages.iter().zip(loaded) {
            let named = l
                .needed
                .iter()
                .map(|n| (n, "links"))
                .chain(by_name.iter().map(|n| (n, "loads")));
            for (name, how) in named {
                let Some(major) = rocbuild_native::cuda_library_major(name) else {
                    continue;
                };
                if !out.iter().any(|r| r.major == major) {
                    out.push(checks::cuda::Runtime {
                        who: subject.name.clone(),
                        major,
                        from: format!("{} {how} {name}", file_name(&l.path)),
                    });
                }
            }
        }
        out
    }

    /// The CUDA libraries the package's own files load by name that the loader would not find,
    /// each with the other versions of it the venv holds.
    fn cuda_not_found_by_name(
        &self,
        subject: &Subject,
        live: &[PathBuf],
        linkages: &[Linkage],
        loaded: &[Vec<String>],
    ) -> Vec<checks::cuda::NotFoundByName> {
        let mut out = Vec::new();
        if loaded.iter().all(Vec::is_empty) {
            return out;
        }
        let search = self.search(subject, live);
        let site = &self.machine.target.python.site_packages;
        for (l, names) in linkages.iter().zip(loaded) {
            let missing = linkage::missing_loaded_by_name(&l.path, names, &search, self.reader);
            for (name, searched) in missing {
                out.push(checks::cuda::NotFoundByName {
                    asked_by: file_name(&l.path),
                    elsewhere: crate::venv_os::cuda_library_versions(site, &name),
                    name,
                    searched,
                });
            }
        }
        out
    }

    fn gpu(&self, subject: &Subject, linkages: &[Linkage]) -> Vec<Finding> {
        let bins: Vec<(PathBuf, Vec<String>)> = linkages
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
                self.torch_libs
                    .iter()
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
        let mut rocblas: Vec<checks::gpu::RocblasFacts> = Vec::new();
        for path in linkages
            .iter()
            .flat_map(|l| &l.found)
            .filter(|f| checks::gpu::is_rocblas(&f.name))
            .filter_map(|f| f.path.clone())
        {
            if rocblas.iter().any(|r| r.library == path) {
                continue;
            }
            // The lookup rocBLAS itself does (versioned in Debian's layout), shared with the
            // planner's SDK scan.
            let dir = rocbuild_probe::rocblas_tensile_dir(
                &path,
                self.opts.env.var("ROCBLAS_TENSILE_LIBPATH").map(Path::new),
                None,
            );
            rocblas.push(checks::gpu::RocblasFacts {
                tensile_archs: dir.is_dir().then(|| rocbuild_probe::tensile_archs(&dir)),
                tensile_dir: dir,
                library: path,
            });
        }
        let os = self.machine.target.platform.os;
        let needed_runtimes: Vec<(String, u32)> = linkages
            .iter()
            .flat_map(|l| &l.needed)
            .filter(|n| checks::gpu::is_hip_runtime(n))
            .filter_map(|n| Some((n.clone(), rocbuild_probe::runtime_major_from_name(n, os)?)))
            .collect();
        let kernel_gaps = self.kernel_gaps(&hip);
        checks::gpu::check(
            subject,
            &checks::gpu::GpuFacts {
                kernel_gaps: &kernel_gaps,
                binaries: &bins,
                gpu: self.opts.gpu_arch.named(),
                hip_runtimes: &hip,
                comgr,
                rocblas: &rocblas,
                needed_runtimes: &needed_runtimes,
                driver_majors: self.driver_majors.as_deref(),
            },
        )
    }
}

fn not_installed(subject: &Subject, site: &Path) -> Finding {
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
    })
}

/// Windows: the program whose directory the loader searches first (the application
/// directory): the `python.exe` beside `pythonXY.dll` (a venv's `Scripts\python.exe` is a
/// launcher that starts its base install's), where the MSVC runtime of the Python
/// distribution sits. None on other OSes.
pub fn application(machine: &rocbuild_probe::Machine) -> Option<std::path::PathBuf> {
    let py = &machine.target.python;
    (machine.target.platform.os == Os::Windows).then(|| {
        py.dll
            .as_ref()
            .and_then(|d| d.parent())
            .map(|d| d.join("python.exe"))
            .unwrap_or_else(|| py.exe.clone())
    })
}
