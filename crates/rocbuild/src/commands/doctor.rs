//! `doctor`, `deps`, `bundle` and `repair`: options in, the report rendered; doctor's work is
//! its use case's (`usecase::doctor`), the others' rocbuild-doctor's.

use std::time::Duration;

use miette::{IntoDiagnostic, Result};
use rocbuild_doctor::DoctorError;
use rocbuild_recipe::RecipeSet;

use crate::cli::{BundleArgs, DepsArgs, DoctorArgs, RepairArgs};
use crate::settings::Settings;
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

pub fn doctor(recipes: &RecipeSet, a: &DoctorArgs, st: &Settings) -> Result<ExitStatus> {
    let os = a
        .machine
        .as_deref()
        .map(crate::commands::build::machine_file)
        .transpose()?
        .map(|m| m.target.platform.os);
    let venv = match st.venv(&a.venv) {
        Ok(v) => v,
        Err(e) => return fail(e.into(), a.json),
    };
    let req = rocbuild_engine::usecase::DoctorRequest {
        recipes,
        venv: &venv,
        packages: &a.packages,
        os,
        gpu_arch: rocbuild_probe::GpuTargets::parse(&a.gpu_arch).or(st.pytorch_rocm_arch.clone()),
        timeout: Duration::from_secs(a.timeout.max(1)),
        load_test: !a.no_load,
        env: st.probe_env(),
    };
    let report = match rocbuild_engine::usecase::doctor(&req) {
        Ok(r) => r,
        Err(e) => return fail(e, a.json),
    };
    print_out(a.json, &report, rocbuild_doctor::human(&report))?;
    Ok(report.verdict().into())
}

pub fn deps(a: &DepsArgs, st: &Settings) -> Result<ExitStatus> {
    let loader = rocbuild_doctor::LoaderEnv::of(st.probe_env());
    let report = match rocbuild_engine::usecase::deps(&a.files, &a.search, &loader) {
        Ok(r) => r,
        Err(e) => return fail(e, a.json),
    };
    print_out(a.json, &report, rocbuild_doctor::text::deps(&report))?;
    Ok(report.verdict().into())
}

pub fn bundle(a: &BundleArgs, st: &Settings) -> Result<ExitStatus> {
    let report = match rocbuild_engine::usecase::bundle(
        &a.files,
        &a.into,
        &a.search,
        &rocbuild_probe::GpuTargets::parse(&a.gpu_arch),
        &rocbuild_doctor::LoaderEnv::of(st.probe_env()),
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
pub fn repair(a: &RepairArgs, st: &Settings) -> Result<ExitStatus> {
    let venv = match st.venv(&a.venv) {
        Ok(v) => v,
        Err(e) => return fail(e.into(), a.json),
    };
    let opts = rocbuild_doctor::RepairOptions {
        venv,
        packages: a.packages.clone(),
        search: a.search.clone(),
        dry_run: a.dry_run,
        no_wait: a.no_wait,
        loader: rocbuild_doctor::LoaderEnv::of(st.probe_env()),
    };
    let report = match rocbuild_engine::usecase::repair(&opts) {
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
