//! The doctor use case: why the packages of a venv load or do not, with the same advice a
//! build gives (the index's own wheel first, when it would load here). The recipes say what
//! each package is (its import dir, distribution, FFmpeg and torch needs, its Windows DLL
//! folders); rocbuild-doctor reads the binaries and runs the load tests.

use std::time::Duration;

use rocbuild_doctor::{DllDirs, DoctorError, DoctorOptions, Report, Subject};
use rocbuild_probe::{GpuTargets, Os, Venv};
use rocbuild_recipe::{Recipe, RecipeSet};

/// What `rocbuild doctor` asks.
pub struct DoctorRequest<'a> {
    pub recipes: &'a RecipeSet,
    pub venv: &'a Venv,
    /// The packages named (empty: every known one installed).
    pub packages: &'a [String],
    /// `--machine`: the venv is diagnosed as this OS's.
    pub os: Option<Os>,
    /// `--gpu-arch`, else `$PYTORCH_ROCM_ARCH` (the settings step reads it).
    pub gpu_arch: GpuTargets,
    pub timeout: Duration,
    /// Not `--no-load`.
    pub load_test: bool,
    /// The command's environment, read once by the settings step: the loader's search
    /// variable and PATH (used when the venv is this host's OS), and what the GPU and CUDA
    /// checks ask.
    pub env: &'a rocbuild_probe::ProbeEnv,
}

/// The recipe's `[package.windows-dll-dirs]`.
fn dll_dirs(r: &Recipe) -> Option<DllDirs> {
    r.raw.package.windows_dll_dirs.as_ref().map(|d| DllDirs {
        dirs: d.dirs.clone(),
        in_one_try: d.in_one_try,
    })
}

/// The packages doctor knows: its own list, each described by its recipe where there is one,
/// and every other recipe's package.
fn candidates(recipes: &RecipeSet) -> Vec<Subject> {
    let mut candidates = Subject::known();
    for r in recipes.iter() {
        let name = r.name().to_string();
        let p = &r.raw.package;
        if let Some(s) = candidates.iter_mut().find(|s| s.name == name) {
            s.import_dir = p.import_dir.clone();
            s.distribution = p.distribution.clone();
            s.recipe = Some(name);
            s.ffmpeg = r.raw.needs.ffmpeg;
            s.torch = r.raw.needs.torch;
            s.dll_dirs = dll_dirs(r);
            s.loads_one_of = p.loads_one_of.clone();
        } else {
            candidates.push(Subject {
                import_dir: p.import_dir.clone(),
                distribution: p.distribution.clone(),
                recipe: Some(name.clone()),
                ffmpeg: r.raw.needs.ffmpeg,
                torch: r.raw.needs.torch,
                stock_pip: None,
                dll_dirs: dll_dirs(r),
                loads_one_of: p.loads_one_of.clone(),
                name,
            });
        }
    }
    candidates
}

/// Probe the venv (FFmpeg only when a package asked about needs it), then diagnose.
pub fn doctor(req: &DoctorRequest) -> Result<Report, DoctorError> {
    let mut candidates = candidates(req.recipes);
    let wants_ffmpeg = candidates
        .iter()
        .any(|s| s.ffmpeg && (req.packages.is_empty() || req.packages.contains(&s.name)));
    let machine = rocbuild_doctor::probe(req.venv, wants_ffmpeg, req.os)?;
    // The same advice as a build: the index's own wheel first, when it would load here.
    for s in &mut candidates {
        let verdict = s
            .recipe
            .as_deref()
            .and_then(|r| req.recipes.get(r).ok())
            .and_then(|r| crate::stock::for_machine(r, &machine));
        s.stock_pip = verdict.filter(|v| v.works).and_then(|v| v.pip);
    }
    // This host's environment says where this host's loader looks, not another OS's.
    let os = machine.target.platform.os;
    let here = os == Os::current();
    let env_paths = |v: &str| if here { req.env.dirs(v) } else { Vec::new() };
    let opts = DoctorOptions {
        requested: req.packages.to_vec(),
        candidates,
        gpu_arch: req.gpu_arch.clone(),
        timeout: req.timeout,
        load_test: req.load_test,
        library_path: env_paths(os.rules().library_search_var()),
        path: env_paths("PATH"),
        env: req.env.clone(),
    };
    rocbuild_doctor::doctor(&machine, &opts)
}
