//! `doctor`, `deps` and `bundle`: options in, the report rendered; the work is in rocbuild-doctor.

use std::time::Duration;

use miette::{IntoDiagnostic, Result};
use rocbuild_doctor::{DoctorError, DoctorOptions, Subject};
use rocbuild_recipe::RecipeSet;

use crate::cli::{BundleArgs, DepsArgs, DoctorArgs, RepairArgs};
use crate::settings as env;
use crate::ExitStatus;

/// Usage errors (unknown package, no venv) exit 2 (with `--json`, also as one JSON object on
/// stdout); a bundle refused for a missing library 3; other errors 1.
fn fail(e: DoctorError, json: bool) -> Result<ExitStatus> {
    if e.is_usage() {
        let report = miette::Report::new(e);
        errln!("{report:?}");
        if json {
            crate::print_json_error(&crate::json_error(&report, ExitStatus::Usage));
        }
        Ok(ExitStatus::Usage)
    } else if matches!(e, DoctorError::BundleMissing { .. }) {
        let report = miette::Report::new(e);
        errln!("{report:?}");
        if json {
            crate::print_json_error(&crate::json_error(&report, ExitStatus::MissingLibrary));
        }
        Ok(ExitStatus::MissingLibrary)
    } else {
        Err(e.into())
    }
}

/// The recipe's `[package.windows-dll-dirs]`, for doctor.
fn dll_dirs(r: &rocbuild_recipe::Recipe) -> Option<rocbuild_doctor::DllDirs> {
    r.raw
        .package
        .windows_dll_dirs
        .as_ref()
        .map(|d| rocbuild_doctor::DllDirs {
            dirs: d.dirs.clone(),
            in_one_try: d.in_one_try,
        })
}

pub fn doctor(recipes: &RecipeSet, a: &DoctorArgs) -> Result<ExitStatus> {
    let mut candidates = Subject::known();
    for r in recipes.iter() {
        let name = r.name().to_string();
        if let Some(s) = candidates.iter_mut().find(|s| s.name == name) {
            s.import_dir = r.raw.package.import_dir.clone();
            s.distribution = r.raw.package.distribution.clone();
            s.recipe = Some(name);
            s.ffmpeg = r.raw.needs.ffmpeg;
            s.torch = r.raw.needs.torch;
            s.dll_dirs = dll_dirs(r);
            s.loads_one_of = r.raw.package.loads_one_of.clone();
        } else {
            candidates.push(Subject {
                import_dir: r.raw.package.import_dir.clone(),
                distribution: r.raw.package.distribution.clone(),
                recipe: Some(name.clone()),
                ffmpeg: r.raw.needs.ffmpeg,
                torch: r.raw.needs.torch,
                stock_pip: None,
                dll_dirs: dll_dirs(r),
                loads_one_of: r.raw.package.loads_one_of.clone(),
                name,
            });
        }
    }
    let wants_ffmpeg = candidates
        .iter()
        .any(|s| s.ffmpeg && (a.packages.is_empty() || a.packages.contains(&s.name)));
    let forced = a
        .machine
        .as_deref()
        .map(crate::commands::build::machine_file)
        .transpose()?
        .map(|m| m.target.platform.os);
    let venv = match env::venv(&a.venv) {
        Ok(v) => v,
        Err(e) => return fail(e.into(), a.json),
    };
    let machine = match rocbuild_doctor::probe(&venv, wants_ffmpeg, forced) {
        Ok(m) => m,
        Err(e) => return fail(e, a.json),
    };
    // The same advice as a build: the index's own wheel first, when it would load here.
    for s in &mut candidates {
        let verdict = s
            .recipe
            .as_deref()
            .and_then(|r| recipes.get(r).ok())
            .and_then(|r| rocbuild_engine::stock::for_machine(r, &machine));
        s.stock_pip = verdict.filter(|v| v.works).and_then(|v| v.pip);
    }
    // This host's environment says where this host's loader looks, not another OS's.
    let here = machine.target.platform.os == rocbuild_probe::Os::current();
    let library_var = machine.target.platform.os.rules().library_search_var();
    let split_env_paths = |v: &str| {
        if here {
            env::split_env_paths(v)
        } else {
            Vec::new()
        }
    };
    let opts = DoctorOptions {
        requested: a.packages.clone(),
        candidates,
        gpu_arch: rocbuild_probe::GpuTargets::parse(&a.gpu_arch).or(env::pytorch_rocm_arch()),
        timeout: Duration::from_secs(a.timeout.max(1)),
        load_test: !a.no_load,
        library_path: split_env_paths(library_var),
        path: split_env_paths("PATH"),
    };
    let report = match rocbuild_doctor::doctor(&machine, &opts) {
        Ok(r) => r,
        Err(e) => return fail(e, a.json),
    };
    print_out(a.json, &report, rocbuild_doctor::human(&report))?;
    Ok(report.verdict().into())
}

pub fn deps(a: &DepsArgs) -> Result<ExitStatus> {
    let report = match rocbuild_doctor::deps(&a.files, &a.search) {
        Ok(r) => r,
        Err(e) => return fail(e, a.json),
    };
    print_out(a.json, &report, rocbuild_doctor::text::deps(&report))?;
    Ok(report.verdict().into())
}

pub fn bundle(a: &BundleArgs) -> Result<ExitStatus> {
    let report = match rocbuild_doctor::bundle(
        &a.files,
        &a.into,
        &a.search,
        &rocbuild_probe::GpuTargets::parse(&a.gpu_arch),
    ) {
        Ok(r) => r,
        Err(e) => return fail(e, a.json()),
    };
    let text = if a.format == crate::cli::BundleFormat::Pyinstaller {
        rocbuild_doctor::text::bundle_pyinstaller(&report)
    } else {
        rocbuild_doctor::text::bundle(&report)
    };
    print_out(a.json(), &report, text)?;
    Ok(ExitStatus::Success)
}

/// `rocbuild repair`: exit 0 when every package loads (repaired, or nothing to do); when one
/// was refused (nothing of it changed): 3 for a library found nowhere, 4 for an import nothing
/// exports, 5 for both, 1 for anything else.
pub fn repair(a: &RepairArgs) -> Result<ExitStatus> {
    let venv = match env::venv(&a.venv) {
        Ok(v) => v,
        Err(e) => return fail(e.into(), a.json),
    };
    let opts = rocbuild_doctor::RepairOptions {
        venv,
        packages: a.packages.clone(),
        search: a.search.clone(),
        dry_run: a.dry_run,
        no_wait: a.no_wait,
    };
    let report = match rocbuild_doctor::repair(&opts) {
        Ok(r) => r,
        Err(e) => return fail(e, a.json),
    };
    print_out(a.json, &report, rocbuild_doctor::text::repair(&report))?;
    Ok(report.verdict().into())
}

/// JSON or the human text on stdout; a closed pipe (`| head`) is not an error.
fn print_out<T: serde::Serialize>(json: bool, value: &T, text: String) -> Result<()> {
    let text = if json {
        serde_json::to_string_pretty(value).into_diagnostic()? + "\n"
    } else {
        text
    };
    crate::out::stdout_raw(&text);
    Ok(())
}
