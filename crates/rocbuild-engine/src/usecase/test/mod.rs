//! `rocbuild test RECIPE`: upstream's own tests, from the exact source the installed build
//! was made from, run by the venv's Python against the installed build — and, with
//! `--compare`, against the index's wheel of the same release in a scratch venv that shares
//! the user's torch. The venv is never changed: what the tests need that it lacks goes into an
//! overlay folder under the cache, removed with the run's other files when it ends.

mod compare;
mod junit;
mod pytest;
mod source;

use std::path::{Path, PathBuf};
use std::time::Instant;

use rocbuild_probe::{Os, Venv};
use rocbuild_recipe::schema::Test;
use rocbuild_recipe::test_suite::{self, Known};
use rocbuild_recipe::RecipeSet;
use rocbuild_venv::manifest::{self, Manifest};
use serde::Serialize;

pub use crate::test_error::TestError;
pub use compare::Differences;
pub use junit::{Case, Outcome};

use crate::error::{EngineError, Result};
use crate::usecase::{locate, Reporter, Settings};

/// What `rocbuild test` was asked.
#[derive(Debug, Clone, Default)]
pub struct TestRequest {
    pub recipe: String,
    /// The recipe's smoke subset (`[test] quick`).
    pub quick: bool,
    /// Where to write pytest's JUnit XML.
    pub junit: Option<PathBuf>,
    /// Run the same tests on the index's wheel of the release and compare.
    pub compare: bool,
    /// Each line pytest prints is passed on to the reporter.
    pub progress: bool,
}

/// How one run went.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tally {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

/// A failure the recipe knows, with its reason.
#[derive(Debug, Clone, Serialize)]
pub struct KnownFailure {
    pub test: String,
    pub reason: String,
}

/// A failure the recipe does not know.
#[derive(Debug, Clone, Serialize)]
pub struct NewFailure {
    pub test: String,
    pub message: Option<String>,
}

/// What `--compare` found.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Comparison {
    /// The official wheel was tested too.
    Ran {
        wheel: String,
        official: Tally,
        differences: Differences,
    },
    /// No official wheel to compare with, and why.
    Unavailable { why: String },
}

/// The result of `rocbuild test`.
#[derive(Debug, Clone, Serialize)]
pub struct TestReport {
    pub recipe: String,
    pub version: String,
    pub commit: Option<String>,
    /// Where the tests came from.
    pub source: String,
    pub quick: bool,
    /// The venv's torch sees a GPU.
    pub gpu: bool,
    /// The venv has a torch at all (without one, no GPU can be seen through it).
    pub torch: bool,
    /// Device tests deselected because it does not (None: none deselected).
    pub device_deselected: Option<u64>,
    /// `[[test.optional-module]]`s the venv cannot import, each with how many tests that
    /// took away.
    pub missing_modules: Vec<MissingModule>,
    /// Requirements the venv lacked, installed into the overlay for this run.
    pub overlay: Vec<String>,
    /// Programs of `[test] tools` not on PATH.
    pub missing_tools: Vec<String>,
    /// The venv's Python ignores `PYTHONPATH` (`._pth`): the Pythons the tests start do not
    /// see the overlay.
    pub ignores_python_path: bool,
    pub tally: Tally,
    pub known: Vec<KnownFailure>,
    pub new_failures: Vec<NewFailure>,
    /// Known failures of this release that passed.
    pub known_passed: Vec<String>,
    pub junit: Option<PathBuf>,
    pub compare: Option<Comparison>,
    pub seconds: u64,
}

/// A module some tests import that the venv lacks: those tests were deselected.
#[derive(Debug, Clone, Serialize)]
pub struct MissingModule {
    pub module: String,
    pub deselected: u64,
}

impl TestReport {
    /// Every failure is a known one.
    pub fn ok(&self) -> bool {
        self.new_failures.is_empty()
    }
}

/// The run's own folder under the cache, removed when the run ends however it ends.
struct RunDir(PathBuf);

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

/// Remove the run folders (`run-RECIPE-PID`) under `runs` of runs whose process is gone: one
/// killed outright (SIGKILL, a power cut) had no chance to. Only real folders with that name
/// form are touched (the cache is untrusted: a link is left alone).
fn remove_dead_runs(runs: &Path) {
    let Ok(entries) = fs_err::read_dir(runs) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = run_folder_pid(&name) else {
            continue;
        };
        let real_dir = fs_err::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir());
        if real_dir && pid != std::process::id() && crate::interrupt::process_gone(pid) {
            let _ = fs_err::remove_dir_all(e.path());
        }
    }
}

/// The PID a run folder's name `run-RECIPE-PID` ends with.
fn run_folder_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("run-")?;
    let (recipe, pid) = rest.rsplit_once('-')?;
    (!recipe.is_empty() && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        .then(|| pid.parse().ok())?
}

/// Run `req.recipe`'s tests on the build installed in `venv`.
pub fn test(
    venv: &Venv,
    recipes: &RecipeSet,
    settings: &Settings,
    req: &TestRequest,
    reporter: &mut dyn Reporter,
) -> Result<TestReport> {
    let started = Instant::now();
    // The recipe first: one without tests is said before anything of the venv is read.
    let recipe = recipes.get(&req.recipe)?;
    let t = recipe
        .raw
        .test
        .as_ref()
        .ok_or_else(|| TestError::NoTestTable {
            recipe: recipe.name().to_string(),
            file: recipe.file.clone(),
        })?;
    let layout = locate(venv)?;
    let m = manifest::read_checked(&layout.site, recipe.name())?.ok_or_else(|| {
        TestError::NotBuilt {
            recipe: recipe.name().to_string(),
            venv: layout.root.display().to_string(),
        }
    })?;
    let py = rocbuild_probe::probe_python(venv, Os::current())?;
    let src = source::find(recipe, &m, settings)?;
    reporter.note(&format!(
        "tests of {} {}: {} ({})",
        m.recipe,
        m.version,
        src.how,
        src.dir.display()
    ));
    let runs = settings.cache.join("test");
    remove_dead_runs(&runs);
    let run = RunDir(runs.join(format!("run-{}-{}", m.recipe, std::process::id())));
    let _ = fs_err::remove_dir_all(&run.0);
    let work = run.0.join("tests");
    let files: Vec<String> = t.files.iter().map(|f| f.get_ref().clone()).collect();
    source::copy_files(&src.dir, &work, &files, &m)?;
    let overlay_dir = run.0.join("overlay");
    fs_err::create_dir_all(&overlay_dir).map_err(EngineError::io("create", &overlay_dir))?;
    let overlay = pytest::overlay(&py, &t.requirements, &overlay_dir)?;
    crate::interrupt::check("installing the test requirements")?;
    if !overlay.is_empty() {
        reporter.note(&format!(
            "test requirements the venv lacks, in an overlay outside it (removed after the run): {}",
            overlay.join(" ")
        ));
    }
    let ignores_python_path = pytest::ignores_python_path(&py.exe);
    if ignores_python_path && !overlay.is_empty() {
        reporter.note(
            "this venv's Python ignores PYTHONPATH (a `._pth` file next to it, as the embeddable Python has): pytest is given the overlay itself, but a Python the tests start is not, so a test that runs `python -c` needing a test requirement fails",
        );
    }
    let missing_tools: Vec<String> = t
        .tools
        .iter()
        .filter(|tool| {
            which::which_in(tool.as_str(), settings.env.path.clone(), &settings.env.cwd).is_err()
        })
        .cloned()
        .collect();
    if !missing_tools.is_empty() {
        reporter.note(&format!(
            "not on PATH: {}: the tests that run it will fail (install it to run them)",
            missing_tools.join(", ")
        ));
    }
    let sight = pytest::torch_sight(&py.exe);
    let wanted: Vec<&str> = t
        .optional_module
        .iter()
        .map(|o| o.module.as_str())
        .collect();
    let missing = pytest::missing_modules(&py.exe, &wanted);
    let plan = RunPlan::new(t, req, sight.gpu, &missing, reporter);
    let ours = plan.run(
        &py.exe,
        &work,
        &overlay_dir,
        &run.0.join("junit.xml"),
        &m.recipe,
        req.progress,
        reporter,
    )?;
    if let Some(to) = &req.junit {
        fs_err::copy(run.0.join("junit.xml"), to)
            .map_err(EngineError::io("write the JUnit XML to", to))?;
    }
    let os = Os::current().as_str();
    let known = test_suite::known_failures(t, &m.version, os, &m.flavor);
    let compare = if req.compare {
        Some(compared(
            &py,
            &layout.site,
            &m,
            recipe,
            &files,
            &src.dir,
            &run.0,
            &plan,
            &ours.cases,
            req,
            reporter,
        )?)
    } else {
        None
    };
    let mut r = summarize(
        &m, src.how, req, sight, ours, overlay, &known, compare, started,
    );
    r.missing_tools = missing_tools;
    r.ignores_python_path = ignores_python_path;
    Ok(r)
}

/// The pytest arguments of this run (less the JUnit file), its environment and the folders
/// it creates.
#[derive(Clone)]
struct RunPlan {
    args: Vec<String>,
    env: Vec<(String, String)>,
    dirs: Vec<String>,
    /// The device tests are deselected: the arguments that collect just them, to count them.
    device_only: Option<Vec<String>>,
    /// Each optional module the venv lacks, with the arguments that collect its tests.
    module_only: Vec<(String, Vec<String>)>,
}

/// One pytest run read back.
struct Results {
    cases: Vec<Case>,
    /// How many device tests pytest deselected (None: none were).
    device_deselected: Option<u64>,
    missing_modules: Vec<MissingModule>,
}

impl RunPlan {
    fn new(
        t: &Test,
        req: &TestRequest,
        gpu: bool,
        missing: &[String],
        reporter: &mut dyn Reporter,
    ) -> RunPlan {
        // A module that cannot be imported (a test dependency missing) is one failure, not
        // the end of the run.
        let mut args: Vec<String> = [
            "-p",
            "no:cacheprovider",
            "-rN",
            "--continue-on-collection-errors",
        ]
        .map(String::from)
        .to_vec();
        args.extend(t.args.iter().cloned());
        // The device tests without a GPU, and those that import a module the venv lacks (and
        // the package does not need): deselected, with the arguments that collect just them.
        let mut device_only = match (gpu, &t.device) {
            (false, Some(d)) => take_away(&mut args, &d.marker, &d.keyword),
            _ => None,
        };
        let mut module_only: Vec<(String, Vec<String>)> = t
            .optional_module
            .iter()
            .filter(|o| missing.contains(&o.module))
            .filter_map(|o| {
                let only = take_away(&mut args, &o.marker, &o.keyword)?;
                Some((o.module.clone(), only))
            })
            .collect();
        let targets = if req.quick && t.quick.is_empty() {
            reporter.note("the recipe names no quick subset ([test] quick): running all its tests");
            &t.run
        } else if req.quick {
            &t.quick
        } else {
            &t.run
        };
        args.extend(targets.iter().cloned());
        let collect = ["--collect-only", "-q"].map(String::from);
        for only in device_only
            .iter_mut()
            .chain(module_only.iter_mut().map(|(_, a)| a))
        {
            only.extend(targets.iter().cloned());
            only.extend(collect.iter().cloned());
        }
        RunPlan {
            args,
            env: t.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            dirs: t.dirs.iter().map(|d| d.get_ref().clone()).collect(),
            device_only,
            module_only,
        }
    }

    /// How many tests a selection (`--collect-only`) takes: collected, not run.
    fn count(&self, python: &Path, work: &Path, overlay: &Path, only: &[String]) -> Result<u64> {
        let mut n = 0;
        pytest::run(python, work, overlay, only, &self.env, &mut |l| {
            if let Some(c) = collected(l) {
                n = c;
            }
        })?;
        Ok(n)
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        python: &Path,
        work: &Path,
        overlay: &Path,
        junit_file: &Path,
        recipe: &str,
        progress: bool,
        reporter: &mut dyn Reporter,
    ) -> Result<Results> {
        for d in &self.dirs {
            let p = work.join(d);
            fs_err::create_dir_all(&p).map_err(EngineError::io("create", &p))?;
        }
        let device_deselected = match &self.device_only {
            Some(only) => Some(self.count(python, work, overlay, only)?),
            None => None,
        };
        let mut missing_modules = Vec::new();
        for (module, only) in &self.module_only {
            missing_modules.push(MissingModule {
                module: module.clone(),
                deselected: self.count(python, work, overlay, only)?,
            });
        }
        let mut args = self.args.clone();
        args.push(format!("--junitxml={}", junit_file.display()));
        let ran = pytest::run(python, work, overlay, &args, &self.env, &mut |l| {
            if progress {
                reporter.note(l);
            }
        })?;
        if let Some(e) = pytest::could_not_run(recipe, &ran, junit_file.is_file()) {
            return Err(e.into());
        }
        let xml = fs_err::read_to_string(junit_file).unwrap_or_default();
        Ok(Results {
            cases: junit::parse(&xml),
            device_deselected,
            missing_modules,
        })
    }
}

/// The tests pytest's `--collect-only` selected, from its last line, whatever the
/// verbosity: `12/1794 tests collected (1782 deselected) in 2.7s`, `1 test collected`.
fn collected(line: &str) -> Option<u64> {
    let i = line
        .find(" tests collected")
        .or_else(|| line.find(" test collected"))?;
    let word = line[..i].rsplit([' ', '=']).next()?;
    word.split('/').next()?.parse().ok()
}

/// Deselect from `args` the tests a marker (`-m`) or `-k` expression selects; the arguments
/// that select just them are returned, to count them. Neither given: nothing.
fn take_away(
    args: &mut Vec<String>,
    marker: &Option<String>,
    keyword: &Option<String>,
) -> Option<Vec<String>> {
    let (flag, expr) = match (marker, keyword) {
        (Some(m), _) => ("-m", m.clone()),
        (None, Some(k)) => ("-k", format!("({k})")),
        (None, None) => return None,
    };
    let mut only = args.clone();
    deselect(&mut only, flag, &expr);
    deselect(args, flag, &format!("not {expr}"));
    Some(only)
}

/// Add `expr` to the selection of `flag` (`-m` or `-k`): joined with `and` to the recipe's
/// own (`-m "not slow"`), since pytest keeps only the last one given.
fn deselect(args: &mut Vec<String>, flag: &str, expr: &str) {
    match args.iter().rposition(|a| a == flag) {
        Some(i) if i + 1 < args.len() => args[i + 1] = format!("({}) and {expr}", args[i + 1]),
        _ => args.extend([flag.to_string(), expr.to_string()]),
    }
}

fn tally(cases: &[Case]) -> Tally {
    let n = |o: Outcome| cases.iter().filter(|c| c.outcome == o).count();
    Tally {
        passed: n(Outcome::Passed),
        failed: n(Outcome::Failed),
        skipped: n(Outcome::Skipped),
    }
}

/// `--compare`: the same tests with the index's wheel, in a scratch venv under the run's folder.
#[allow(clippy::too_many_arguments)]
fn compared(
    py: &rocbuild_probe::Python,
    user_site: &Path,
    m: &Manifest,
    recipe: &rocbuild_recipe::Recipe,
    files: &[String],
    src: &Path,
    run: &Path,
    plan: &RunPlan,
    ours: &[Case],
    req: &TestRequest,
    reporter: &mut dyn Reporter,
) -> Result<Comparison> {
    let pkg = &recipe.raw.package;
    reporter.note(&format!(
        "--compare: the index's wheel of {}=={} in a scratch venv sharing this venv's torch",
        pkg.distribution, m.version
    ));
    let scratch = match compare::prepare(
        py,
        user_site,
        &run.join("official-venv"),
        &pkg.distribution,
        &m.version,
        &pkg.import_dir,
    )? {
        Ok(s) => s,
        // Said once, with the result (the command's summary).
        Err(why) => return Ok(Comparison::Unavailable { why }),
    };
    let work = run.join("official-tests");
    source::copy_files(src, &work, files, m)?;
    let mut plan = plan.clone();
    if let Some(first) = &scratch.first_on_path {
        reporter.note(&format!(
            "--compare: this Python makes no venv: the index's wheel is put first on its path ({}), ahead of the rebuild{}",
            first.display(),
            if py.pth_file.is_some() {
                "; a Python the tests start imports the rebuild (a `._pth` Python reads no PYTHONPATH)"
            } else {
                ""
            }
        ));
        plan.env
            .push(("ROCBUILD_TEST_FIRST".into(), first.display().to_string()));
    }
    let theirs = plan.run(
        &scratch.python,
        &work,
        &run.join("overlay"),
        &run.join("official.xml"),
        &m.recipe,
        req.progress,
        reporter,
    )?;
    Ok(Comparison::Ran {
        wheel: scratch.wheel,
        official: tally(&theirs.cases),
        differences: compare::differences(ours, &theirs.cases),
    })
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    m: &Manifest,
    source: String,
    req: &TestRequest,
    sight: pytest::TorchSight,
    ours: Results,
    overlay: Vec<String>,
    known: &[Known],
    compare: Option<Comparison>,
    started: Instant,
) -> TestReport {
    let mut known_hit = Vec::new();
    let mut new_failures = Vec::new();
    for c in ours.cases.iter().filter(|c| c.outcome == Outcome::Failed) {
        match known.iter().find(|k| test_suite::matches(&k.test, &c.id)) {
            Some(k) => known_hit.push(KnownFailure {
                test: c.id.clone(),
                reason: k.reason.clone(),
            }),
            None => new_failures.push(NewFailure {
                test: c.id.clone(),
                message: c.message.clone(),
            }),
        }
    }
    let known_passed = known
        .iter()
        .filter(|k| {
            let mut hits = ours
                .cases
                .iter()
                .filter(|c| test_suite::matches(&k.test, &c.id));
            let mut any = false;
            let all_passed = hits.all(|c| {
                any = true;
                c.outcome == Outcome::Passed
            });
            any && all_passed
        })
        .map(|k| k.test.clone())
        .collect();
    TestReport {
        recipe: m.recipe.clone(),
        version: m.version.clone(),
        commit: m.source_commit.clone(),
        source,
        quick: req.quick,
        gpu: sight.gpu,
        torch: sight.torch,
        device_deselected: ours.device_deselected,
        missing_modules: ours.missing_modules,
        overlay,
        missing_tools: Vec::new(),
        ignores_python_path: false,
        tally: tally(&ours.cases),
        known: known_hit,
        new_failures,
        known_passed,
        junit: req.junit.clone(),
        compare,
        seconds: started.elapsed().as_secs(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_folders_of_dead_runs_go_and_nothing_else() {
        assert_eq!(super::run_folder_pid("run-torchcodec-123"), Some(123));
        assert_eq!(super::run_folder_pid("run-llama-cpp-python-9"), Some(9));
        for other in ["run--12", "run-x-", "run-x-1a", "runs-x-1", "keep"] {
            assert_eq!(super::run_folder_pid(other), None, "{other}");
        }
        let tmp = tempfile::tempdir().unwrap();
        let runs = tmp.path();
        // A child that has exited and been reaped: its pid is free (nobody reuses it this
        // quickly on a test machine).
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .arg("--list")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let own = std::process::id();
        for name in [
            format!("run-a-{dead}"),
            format!("run-a-{own}"),
            "notes".into(),
        ] {
            std::fs::create_dir_all(runs.join(name).join("overlay")).unwrap();
        }
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(&outside, runs.join(format!("run-b-{dead}"))).unwrap();
        super::remove_dead_runs(runs);
        let mut left: Vec<String> = std::fs::read_dir(runs)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut want = vec![format!("run-a-{own}"), "notes".into(), "outside".into()];
        if cfg!(unix) {
            want.push(format!("run-b-{dead}"));
        } else {
            // Where a process cannot be asked about, a dead run's folder stays for `clean`.
            want.push(format!("run-a-{dead}"));
        }
        want.sort();
        assert_eq!(left, want);
        assert!(outside.is_dir());
    }

    #[test]
    fn collected_tests_are_read_from_the_last_line() {
        assert_eq!(
            super::collected("12/1794 tests collected (1782 deselected) in 2.70s"),
            Some(12)
        );
        assert_eq!(
            super::collected("===== 1 test collected in 0.01s ====="),
            Some(1)
        );
        assert_eq!(
            super::collected("==== 3/5 tests collected (2 deselected) in 0.1s ===="),
            Some(3)
        );
        assert_eq!(super::collected("no tests collected"), None);
    }

    #[test]
    fn the_device_selection_joins_the_recipes_own() {
        let mut a: Vec<String> = ["-m", "not slow", "-x"].map(String::from).to_vec();
        super::deselect(&mut a, "-m", "not needs_cuda");
        assert_eq!(a, ["-m", "(not slow) and not needs_cuda", "-x"]);
        let mut b: Vec<String> = vec!["-x".into()];
        super::deselect(&mut b, "-k", "not (cuda)");
        assert_eq!(b, ["-x", "-k", "not (cuda)"]);
    }
}
