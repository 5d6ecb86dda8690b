//! Output of the commands that keep a build working: status, rebuild, schedule, restore,
//! wheel, clean. The work is in rocbuild-engine.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use miette::{IntoDiagnostic, Result, WrapErr};
use rocbuild_venv::lock::VenvLock;
use rocbuild_venv::status::{State, VenvStatus};
use rocbuild_engine::{schedule as sched, BuildOptions, EngineError};
use rocbuild_venv::{install, VenvError};
use rocbuild_probe::Os;
use rocbuild_recipe::{RecipeSet, TorchCmake};

use crate::cli::{
    CleanArgs, EveryArg, Global, RebuildArgs, RestoreArgs, ScheduleAction, ScheduleArgs,
    SchedulerKind, StatusArgs, WheelArgs,
};
use crate::{env, BuildRequest};

/// The venv's root and site-packages, found without running its Python.
fn venv_site(venv: Option<&Path>) -> Result<(PathBuf, PathBuf)> {
    let v = rocbuild_probe::choose_venv(venv)?;
    let os = Os::current();
    match rocbuild_probe::site_packages_of(&v.root, os) {
        Some(site) => Ok((v.root, site)),
        None => Err(rocbuild_probe::ProbeError::NotAVenv {
            exe: rocbuild_probe::python_in_venv(&v.root, os)
                .display()
                .to_string(),
            root: v.root.display().to_string(),
            chosen_by: format!("chosen by {}", v.chosen_by),
        })?,
    }
}

fn note_recovery(r: install::Recovered) {
    match r {
        install::Recovered::RolledBack => {
            eprintln!("note: an interrupted rocbuild run on this venv was rolled back")
        }
        install::Recovered::Completed => {
            eprintln!("note: an interrupted rocbuild run on this venv was completed")
        }
        install::Recovered::Nothing => {}
    }
}

fn lock(site: &Path, no_wait: bool) -> Result<VenvLock> {
    Ok(VenvLock::acquire(site, !no_wait, &mut |pid| {
        eprintln!(
            "waiting for another rocbuild run on this venv (pid {})…",
            pid.map_or("unknown".into(), |p| p.to_string())
        )
    })?)
}

pub fn status(recipes: &RecipeSet, a: &StatusArgs) -> Result<ExitCode> {
    let (root, site) = venv_site(a.venv.venv.as_deref())?;
    // Traces of a run (journal, staging area, a pid in the lock): one is going on, or one was
    // killed. Finish or undo the latter, so the status is the truth; say so for the former.
    let mut busy = None;
    if install::needs_recovery(&site) {
        match VenvLock::acquire(&site, false, &mut |_| {}) {
            Ok(_lock) => note_recovery(install::recover(&site)?),
            Err(VenvError::Locked { pid, .. }) => busy = Some(pid),
            Err(e) => return Err(e.into()),
        }
    }
    let st = rocbuild_venv::status::status(&site, recipes);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&st).into_diagnostic()?);
    } else {
        print_status(&root, &st, busy.as_deref());
    }
    Ok(if st.needs_action() || busy.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn print_status(root: &Path, st: &VenvStatus, busy: Option<&str>) {
    if let Some(pid) = busy {
        println!("a rocbuild run is installing into this venv now (pid {pid}); ask again when it is done");
    }
    if st.recipes.is_empty() && st.unreadable.is_empty() {
        println!("no rocbuild builds in {}", root.display());
        return;
    }
    for r in &st.recipes {
        println!("{} {}: {}", r.recipe, r.version, r.state.as_str());
        for why in &r.reasons {
            println!("  stale: {why}");
        }
        for f in &r.overwritten {
            println!("  overwritten: {f} (pip reinstalled the wheel?)");
        }
        for f in &r.missing {
            println!("  missing: {f}");
        }
        match r.state {
            State::Fresh => {}
            State::Missing => println!(
                "  fix: rocbuild rebuild {} (reinstall), or rocbuild restore {} (forget it)",
                r.recipe, r.recipe
            ),
            _ => println!("  fix: rocbuild rebuild {}", r.recipe),
        }
    }
    for u in &st.unreadable {
        println!("unreadable manifest {}: {}", u.manifest.display(), u.error);
    }
}

fn recorded_build_options(m: &rocbuild_venv::manifest::Manifest) -> BuildOptions {
    let o = &m.options;
    BuildOptions {
        version: o.release.clone(),
        force: o.force,
        source: o.source.clone(),
        rev: o.rev.clone(),
        torch_cmake: match o.torch_cmake.as_deref() {
            Some("native") => Some(TorchCmake::Native),
            Some("lite") => Some(TorchCmake::Lite),
            _ => None,
        },
        defines: o.defines.clone(),
        ffmpeg_dir: o.ffmpeg_dir.clone(),
        backend: rocbuild_engine::BackendOptions {
            backend: o.backend.clone(),
            rocm: o.rocm.clone(),
            arch: o.arch.clone(),
            cuda_arch: o.cuda_arch.clone(),
        },
        ..BuildOptions::default()
    }
}

pub fn rebuild(recipes: &RecipeSet, a: &RebuildArgs, g: &Global) -> Result<ExitCode> {
    let (root, site) = venv_site(a.venv.venv.as_deref())?;
    let _lock = lock(&site, a.no_wait)?;
    note_recovery(install::recover(&site)?);
    let st = rocbuild_venv::status::status(&site, recipes);
    for u in &st.unreadable {
        eprintln!(
            "warning: cannot read {}: {} (rebuild that recipe by name to replace it)",
            u.manifest.display(),
            u.error
        );
    }
    let mut chosen = Vec::new();
    if a.names.is_empty() {
        chosen.extend(st.recipes.iter());
    } else {
        for name in &a.names {
            match st.recipes.iter().find(|r| &r.recipe == name) {
                Some(r) => chosen.push(r),
                None => Err(VenvError::NotInstalled {
                    recipe: name.clone(),
                    site: site.display().to_string(),
                    help: format!("build it first: rocbuild {name} --venv {}", root.display()),
                })?,
            }
        }
    }
    if a.if_stale {
        chosen.retain(|r| r.needs_action());
    }
    let mut failed = 0;
    for r in chosen {
        let Some(m) = rocbuild_venv::manifest::read(&site, &r.recipe) else {
            continue;
        };
        let mut why: Vec<String> = r.reasons.clone();
        why.extend(r.overwritten.iter().map(|f| format!("{f} overwritten")));
        why.extend(r.missing.iter().map(|f| format!("{f} missing")));
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        println!(
            "[{stamp}] rebuilding {} ({}{})",
            r.recipe,
            r.state.as_str(),
            if why.is_empty() {
                String::new()
            } else {
                format!(": {}", why.join("; "))
            }
        );
        let result = recipes
            .get(&r.recipe)
            .map_err(miette::Report::from)
            .and_then(|recipe| {
                crate::build_locked(
                    recipe,
                    recorded_build_options(&m),
                    &BuildRequest {
                        venv: Some(root.clone()),
                        machine_file: None,
                        dry_run: false,
                        json: false,
                    },
                    g,
                )
            });
        if let Err(e) = result {
            eprintln!("{e:?}");
            failed += 1;
        }
    }
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

pub fn restore(a: &RestoreArgs) -> Result<ExitCode> {
    let (_root, site) = venv_site(a.venv.venv.as_deref())?;
    let _lock = lock(&site, a.no_wait)?;
    note_recovery(install::recover(&site)?);
    let r = rocbuild_venv::restore::restore(&site, &a.recipe)?;
    println!("{} restored to pip's files in {}", r.recipe, site.display());
    for f in &r.restored {
        println!("  restored: {f}");
    }
    for f in &r.removed {
        println!("  removed:  {f}");
    }
    for f in &r.left {
        println!("  left:     {f} (no longer rocbuild's: something replaced it since)");
    }
    Ok(ExitCode::SUCCESS)
}

/// The wheel tags of the venv's Python (one small subprocess).
fn tags(root: &Path) -> Result<rocbuild_venv::wheel::Tags> {
    let py = rocbuild_probe::python_in_venv(root, Os::current());
    let out = std::process::Command::new(&py)
        .args([
            "-I",
            "-c",
            "import sys, sysconfig; print('%d.%d' % sys.version_info[:2]); print(getattr(sys, 'abiflags', '')); print(sysconfig.get_platform())",
        ])
        .output()
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot run {}", py.display()))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    if !out.status.success() || lines.len() < 3 {
        Err(rocbuild_probe::ProbeError::Python {
            exe: py.display().to_string(),
            reason: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })?;
    }
    Ok(rocbuild_venv::wheel::Tags::new(
        lines[0], lines[1], lines[2],
    ))
}

pub fn wheel(a: &WheelArgs) -> Result<ExitCode> {
    let (root, site) = venv_site(a.venv.venv.as_deref())?;
    let _lock = lock(&site, false)?;
    note_recovery(install::recover(&site)?);
    let tags = tags(&root)?;
    let out = std::path::absolute(&a.out).into_diagnostic()?;
    let w = rocbuild_venv::wheel::build_wheel(&site, &a.recipe, &tags, &out)?;
    println!("{}", w.path.display());
    if let Some(t) = &w.requires_torch {
        eprintln!(
            "{} files; version {}; requires torch=={t}",
            w.files, w.version
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn clean(a: &CleanArgs, g: &Global) -> Result<ExitCode> {
    use rocbuild_engine::clean::{human, remove, usage, Kind};
    let cache = crate::cache(g)?;
    let mut kinds = Vec::new();
    if a.sources || a.all {
        kinds.push(Kind::Sources);
    }
    if a.builds || a.all {
        kinds.push(Kind::Builds);
    }
    if a.logs || a.all {
        kinds.push(Kind::Logs);
    }
    println!("cache: {}", cache.display());
    let u = usage(&cache);
    let mut total = 0;
    for x in &u {
        total += x.bytes;
        let mark = if kinds.contains(&x.kind) {
            if a.dry_run {
                "  (would remove)"
            } else {
                "  (removing)"
            }
        } else {
            ""
        };
        println!("  {:<8} {:>10}{mark}", x.kind.as_str(), human(x.bytes));
    }
    println!("  {:<8} {:>10}", "total", human(total));
    if kinds.is_empty() {
        println!("remove with --sources, --builds, --logs or --all (--dry-run to preview)");
    } else if !a.dry_run {
        let freed = remove(&cache, &kinds)?;
        println!("freed {}", human(freed));
    }
    Ok(ExitCode::SUCCESS)
}

fn job(a: &ScheduleArgs, g: &Global) -> Result<(sched::Job, sched::Dirs)> {
    let v = rocbuild_probe::choose_venv(a.venv.venv.as_deref())?;
    let (home, config) = env::user_dirs().ok_or_else(|| EngineError::Usage {
        option: "HOME".into(),
        reason: "no home directory: HOME is not set".into(),
        help: Some("set HOME (and XDG_CONFIG_HOME if the config lives elsewhere)".into()),
    })?;
    let cache = crate::cache(g)?;
    let id = sched::id_for(&v.root);
    let mut envs = Vec::new();
    if let Some(p) = std::env::var_os("PATH") {
        envs.push(("PATH".to_string(), p.to_string_lossy().into_owned()));
    }
    envs.push((env::ROCBUILD_CACHE.to_string(), cache.display().to_string()));
    let mut recipe_dirs: Vec<PathBuf> = std::env::var_os(env::ROCBUILD_RECIPES)
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    for d in &g.recipes {
        recipe_dirs.push(std::path::absolute(d).into_diagnostic()?);
    }
    if !recipe_dirs.is_empty() {
        let joined = std::env::join_paths(&recipe_dirs).into_diagnostic()?;
        envs.push((
            env::ROCBUILD_RECIPES.to_string(),
            joined.to_string_lossy().into_owned(),
        ));
    }
    if let Some(m) = std::env::var_os(env::ROCBUILD_MIRROR).filter(|m| !m.is_empty()) {
        envs.push((
            env::ROCBUILD_MIRROR.to_string(),
            m.to_string_lossy().into_owned(),
        ));
    }
    let job = sched::Job {
        venv: v.root,
        exe: std::env::current_exe().into_diagnostic()?,
        log: cache.join("logs").join(format!("{id}.log")),
        every: match a.every {
            EveryArg::Hourly => sched::Every::Hourly,
            EveryArg::Daily => sched::Every::Daily,
            EveryArg::Weekly => sched::Every::Weekly,
        },
        env: envs,
    };
    Ok((job, sched::Dirs { home, config }))
}

fn run_action(act: &sched::Action) -> std::result::Result<(), String> {
    use std::io::Write;
    let run = |argv: &[String], input: Option<&str>| -> std::result::Result<String, String> {
        let mut c = std::process::Command::new(&argv[0]);
        c.args(&argv[1..]);
        c.stdin(if input.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        });
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().map_err(|e| format!("{}: {e}", argv[0]))?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin
                .write_all(text.as_bytes())
                .map_err(|e| e.to_string())?;
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    };
    match act {
        sched::Action::Run(argv) => run(argv, None).map(|_| ()),
        sched::Action::CrontabAdd { id, line } => {
            let cur = run(&["crontab".into(), "-l".into()], None).unwrap_or_default();
            let new = sched::crontab_with(&cur, id, Some(line));
            run(&["crontab".into(), "-".into()], Some(&new)).map(|_| ())
        }
        sched::Action::CrontabRemove { id } => {
            let cur = run(&["crontab".into(), "-l".into()], None).unwrap_or_default();
            let new = sched::crontab_with(&cur, id, None);
            run(&["crontab".into(), "-".into()], Some(&new)).map(|_| ())
        }
    }
}

pub fn schedule(a: &ScheduleArgs, g: &Global) -> Result<ExitCode> {
    let (job, dirs) = job(a, g)?;
    let os = Os::current();
    let kind = match a.kind {
        Some(SchedulerKind::Systemd) => sched::Kind::Systemd,
        Some(SchedulerKind::Launchd) => sched::Kind::Launchd,
        Some(SchedulerKind::Schtasks) => sched::Kind::Schtasks,
        Some(SchedulerKind::Cron) => sched::Kind::Cron,
        None => sched::Kind::default_for(os, Path::new("/run/systemd/system").exists()),
    };
    match a.action {
        ScheduleAction::Install => {
            let s = sched::schedule(&job, kind, &dirs);
            for (p, text) in &s.files {
                if let Some(d) = p.parent() {
                    fs_create(d)?;
                }
                std::fs::write(p, sched::file_bytes(kind, text))
                    .into_diagnostic()
                    .wrap_err_with(|| format!("cannot write {}", p.display()))?;
                println!("wrote {}", p.display());
            }
            if let Some(d) = s.log.parent() {
                fs_create(d)?;
            }
            if a.no_activate {
                println!("activate with:");
                for act in &s.activate {
                    println!("  {act}");
                }
            } else {
                for act in &s.activate {
                    run_action(act).map_err(|e| EngineError::Usage {
                        option: format!("schedule install --kind {}", kind.as_str()),
                        reason: format!("`{act}` failed: {e}"),
                        help: Some(format!(
                            "the files are written; run the command by hand, or pick another scheduler with --kind (cron, systemd, launchd, schtasks)"
                        )),
                    })?;
                }
                println!("scheduled ({}, {})", kind.as_str(), job.every.as_str());
            }
            println!(
                "runs:  {} {}",
                job.exe.display(),
                shell_words::join(job.args())
            );
            println!("log:   {}", s.log.display());
            Ok(ExitCode::SUCCESS)
        }
        ScheduleAction::Remove => {
            let mut found = false;
            for k in sched::Kind::ALL {
                let s = sched::schedule(&job, k, &dirs);
                if !s.files.iter().any(|(p, _)| p.exists()) {
                    continue;
                }
                found = true;
                if a.no_activate {
                    for act in &s.deactivate {
                        println!("deactivate with: {act}");
                    }
                } else {
                    for act in &s.deactivate {
                        if let Err(e) = run_action(act) {
                            eprintln!("warning: `{act}` failed: {e}");
                        }
                    }
                }
                for (p, _) in &s.files {
                    if p.exists() {
                        std::fs::remove_file(p)
                            .into_diagnostic()
                            .wrap_err_with(|| format!("cannot remove {}", p.display()))?;
                        println!("removed {}", p.display());
                    }
                }
            }
            if !found {
                println!("no schedule for {}", job.venv.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        ScheduleAction::Show => {
            let mut found = false;
            for k in sched::Kind::ALL {
                let s = sched::schedule(&job, k, &dirs);
                let present: Vec<&PathBuf> = s
                    .files
                    .iter()
                    .map(|(p, _)| p)
                    .filter(|p| p.exists())
                    .collect();
                if present.is_empty() {
                    continue;
                }
                found = true;
                println!("{} schedule for {}", k.as_str(), job.venv.display());
                for p in present {
                    println!("  file: {}", p.display());
                }
                println!(
                    "  runs: {} {}",
                    job.exe.display(),
                    shell_words::join(job.args())
                );
                let state = if s.log.exists() { "" } else { " (no run yet)" };
                println!("  log:  {}{state}", s.log.display());
            }
            if !found {
                println!(
                    "no schedule for {} (rocbuild schedule install makes one; it would log to {})",
                    job.venv.display(),
                    job.log.display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn fs_create(d: &Path) -> Result<()> {
    std::fs::create_dir_all(d)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot create {}", d.display()))
}
