//! `rocbuild test`: upstream's own tests run on the installed build (issue 42). The fixture
//! package carries an upstream-style pytest suite in its source (tests/fixture/fakecodec/test:
//! one pass, one known failure, one new failure, one GPU test); the real binary builds it
//! into a real venv, then runs that suite from the commit the build recorded.

use std::path::{Path, PathBuf};

use crate::common::*;

/// The recipe's `[test]` table for the fixture.
const TEST_TABLE: &str = r#"
[test]
files = ["test"]
requirements = ["pytest"]
quick = ["test/test_fakecodec.py::test_decodes_a_wav"]
env = { FAKECODEC_TESTING = "1" }
dirs = ["test/output"]
tools = ["python3", "fakecodec-reference-encoder"]

[test.device]
marker = "needs_gpu"

[[test.optional-module]]
module = "fakecodec_extras"
keyword = "optional_package"

[[test.known-failure]]
test = "test/test_fakecodec.py::test_upstream_expectation"
reason = "upstream expects 5 on every build (fixture's own bug)"
versions = ">=1.0"

[[test.known-failure]]
test = "test/test_fakecodec.py::test_decodes_a_wav"
reason = "applies to 0.9 only: must not hide anything on 1.0.0"
versions = "<1.0"
"#;

/// pytest and its dependencies, fetched once by `cargo xtask` (setup: cache/wheels/pytest).
fn pytest_wheels() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cache/wheels/pytest");
    let has = std::fs::read_dir(&d)
        .ok()?
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("pytest-"));
    has.then_some(d)
}

/// The fixture world with the [test] table, built (or None, said).
pub(crate) fn world_with_tests() -> Option<World> {
    world(None)
}

/// The fixture world with the [test] table and pytest's wheels beside the fixture's.
fn world(init: Option<&str>) -> Option<World> {
    let Some(pytest) = pytest_wheels() else {
        rocbuild_testkit::skip::skipped(
            "no pytest wheels under cache/wheels/pytest (cargo xtask test fetches them)",
        );
        return None;
    };
    let w = World::new(DECODE_WAV);
    let recipe = w.recipes.join("fakecodec.toml");
    let mut text = std::fs::read_to_string(&recipe).unwrap();
    text.push_str(TEST_TABLE);
    std::fs::write(&recipe, text).unwrap();
    for e in std::fs::read_dir(&pytest).unwrap().flatten() {
        std::fs::copy(e.path(), w.wheels.join(e.file_name())).unwrap();
    }
    if let Some(init) = init {
        std::fs::remove_file(w.wheels.join("fakecodec-1.0.0-py3-none-any.whl")).unwrap();
        make_wheel_with(&w.wheels, "fakecodec", "1.0.0", init.as_bytes().to_vec());
    }
    ok(&w.build(&[]));
    Some(w)
}

pub(crate) fn runs_left(cache: &Path) -> Vec<String> {
    std::fs::read_dir(cache.join("test"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("run-"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_suite_runs_on_the_build_known_and_new_failures_told_apart() {
    let Some(w) = world(None) else { return };
    // A pytest configuration above the cache (a user's home) must not apply to upstream's
    // tests: its option would stop pytest before it collects anything.
    let above = w.cache.parent().unwrap().join("pytest.ini");
    std::fs::write(
        &above,
        "[pytest]\naddopts = --not-an-option-of-upstreams-tests\n",
    )
    .unwrap();
    let venv_before = tree_state(&w.venv);
    let junit = w.tmp.path().join("out/junit.xml");
    std::fs::create_dir_all(junit.parent().unwrap()).unwrap();
    let t0 = std::time::Instant::now();
    let out = w.cmd(
        &["test", "fakecodec", "--junit", junit.to_str().unwrap()],
        &[],
    );
    eprintln!(
        "rocbuild test fakecodec: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let all = format!("{}\n{}", out.stdout, out.stderr);
    // A new failure: exit 1, and it is named with pytest's message.
    assert_eq!(out.code, 1, "{all}");
    assert!(
        out.stdout
            .contains("NEW FAILURE: test.test_fakecodec.test_reference_backend"),
        "{all}"
    );
    assert!(
        out.stdout.contains(
            "known failure: test.test_fakecodec.test_upstream_expectation (upstream expects 5"
        ),
        "{all}"
    );
    assert!(
        out.stdout
            .contains("device tests: the venv's torch sees no GPU: 1 deselected"),
        "{all}"
    );
    // A test that imports a package the venv lacks (and fakecodec does not need): deselected
    // and counted, not a new failure.
    assert!(
        out.stdout.contains(
            "tests that need fakecodec_extras: the venv has no fakecodec_extras: 1 deselected"
        ),
        "{all}"
    );
    // A program the tests run that is not on PATH is named before the run (python3 is).
    assert!(
        out.stderr
            .contains("not on PATH: fakecodec-reference-encoder: the tests that run it will fail"),
        "{all}"
    );
    assert!(
        out.stdout
            .contains("fakecodec 1.0.0: 1 passed, 2 failed (1 known, 1 new), 0 skipped"),
        "{all}"
    );
    // Progress: pytest's own lines, and where the tests came from.
    assert!(out.stderr.contains("test/test_fakecodec.py"), "{all}");
    assert!(
        out.stderr
            .contains(&format!("the build's checkout of {}", &w.commit[..12])),
        "{all}"
    );
    // The requirements went into the overlay, not the venv; the venv is byte for byte as it was.
    assert!(
        out.stderr
            .contains("in an overlay outside it (removed after the run): pytest"),
        "{all}"
    );
    assert_eq!(tree_state(&w.venv), venv_before, "the venv changed");
    assert!(
        runs_left(&w.cache).is_empty(),
        "the run's folder is removed"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("test_reference_backend") && xml.contains("<failure"),
        "{xml}"
    );

    // --quick --json: the smoke subset passes: exit 0.
    let out = w.cmd(&["test", "fakecodec", "--quick", "--json"], &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let j: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(j["tally"]["passed"], 1, "{j}");
    assert_eq!(j["tally"]["failed"], 0, "{j}");
    assert_eq!(j["quick"], true);
    assert_eq!(j["commit"], w.commit.as_str());

    // The build's checkout cleaned: the recorded commit is checked out again from the cache's
    // clone, and the same tests run.
    std::fs::remove_dir_all(w.cache.join("src")).unwrap();
    let out = w.cmd(&["test", "fakecodec", "--quick"], &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("fetched again"), "{}", out.stderr);
    assert_eq!(tree_state(&w.venv), venv_before, "the venv changed");

    // A venv whose Python cannot import torch (CTranslate2's faster-whisper venvs have none):
    // the device tests are deselected with that reason, not "torch sees no GPU".
    std::fs::write(
        w.site.join("torch/__init__.py"),
        "raise ImportError('no torch in this venv')\n",
    )
    .unwrap();
    let out = w.cmd(&["test", "fakecodec"], &[]);
    assert!(
        out.stdout
            .contains("device tests: the venv has no torch to see a GPU with: 1 deselected"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
}

/// The Python part of a package whose index wheel carries no loadable library (the
/// fixture's wheel holds a stand-in file): it falls back to pure-Python reference code.
const INIT_WITH_REFERENCE: &str = r#"import ctypes, os, wave
_here = os.path.dirname(os.path.abspath(__file__))
_core = None
ffmpeg_major = None
for _major in (9, 8, 7, 6, 5, 4):
    _path = os.path.join(_here, "libfakecodec_core%d.so" % _major)
    if os.path.exists(_path):
        try:
            _core = ctypes.CDLL(_path)
            ffmpeg_major = _major
            break
        except OSError:
            pass

def backend():
    return "native" if _core is not None else "reference"

def count_samples(path):
    if _core is None:
        with wave.open(path) as w:
            return w.getnframes()
    return _core.fakecodec_count_samples(path.encode())

def torch_check():
    return 4 if _core is None else _core.fakecodec_torch_check()
"#;

#[test]
fn compare_lists_what_passes_with_the_official_wheel_and_fails_with_the_rebuild() {
    let Some(w) = world(Some(INIT_WITH_REFERENCE)) else {
        return;
    };
    let venv_before = tree_state(&w.venv);
    let out = w.cmd(&["test", "fakecodec", "--compare"], &[]);
    let all = format!("{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 1, "{all}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines[0..2]
            .iter()
            .any(|l| l.starts_with("REGRESSION: test.test_fakecodec.test_reference_backend")),
        "regressions come first:\n{all}"
    );
    assert!(
        out.stdout.contains(
            "compare: official fakecodec==1.0.0: 2 passed, 1 failed, 0 skipped; 1 regressions"
        ),
        "{all}"
    );
    assert_eq!(tree_state(&w.venv), venv_before, "the venv changed");
    assert!(
        runs_left(&w.cache).is_empty(),
        "the scratch venv is removed"
    );

    // No wheel of the release on the index: said, and the rebuild's own result stands.
    std::fs::remove_file(w.wheels.join("fakecodec-1.0.0-py3-none-any.whl")).unwrap();
    let out = w.cmd(&["test", "fakecodec", "--compare", "--json"], &[]);
    let j: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(j["compare"]["state"], "unavailable", "{j}");
    assert!(
        j["compare"]["why"]
            .as_str()
            .unwrap()
            .contains("no wheel of fakecodec==1.0.0"),
        "{j}"
    );
}

/// A Python that cannot make a venv, as Windows' embeddable CPython (it has no `venv` module;
/// here a `venv` that cannot be imported comes first on the `._pth` path): `--compare` still
/// tests the index's wheel, put first on the path of the venv's own Python, ahead of the
/// rebuild, says so, and finds the regression a scratch venv finds; the venv is left as it was.
#[test]
fn compare_runs_where_the_python_makes_no_venv() {
    let Some(w) = world(Some(INIT_WITH_REFERENCE)) else {
        return;
    };
    give_pth_file(&w.venv);
    let no_venv = w.tmp.path().join("no-venv");
    std::fs::create_dir_all(no_venv.join("venv")).unwrap();
    std::fs::write(
        no_venv.join("venv/__init__.py"),
        "raise ImportError('No module named venv')\n",
    )
    .unwrap();
    let pth = w.venv.join("bin/python._pth");
    let text = std::fs::read_to_string(&pth).unwrap();
    std::fs::write(&pth, format!("{}\n{text}", no_venv.display())).unwrap();
    let made = std::process::Command::new(w.venv.join("bin/python"))
        .args(["-m", "venv", "--without-pip"])
        .arg(w.tmp.path().join("probe-venv"))
        .output()
        .unwrap();
    assert!(!made.status.success(), "this Python still makes a venv");
    let before = tree_state(&w.venv);
    let out = w.cmd(&["test", "fakecodec", "--compare", "--json"], &[]);
    let all = format!("{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 1, "{all}");
    assert!(
        out.stderr.contains(
            "--compare: this Python makes no venv: the index's wheel is put first on its path"
        ),
        "{all}"
    );
    let j: serde_json::Value = serde_json::from_str(&out.stdout).expect(&all);
    assert_eq!(j["compare"]["state"], "ran", "{j}");
    assert_eq!(j["compare"]["wheel"], "fakecodec==1.0.0", "{j}");
    assert!(
        j["compare"]["differences"]["regressions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r
                .as_str()
                .unwrap()
                .starts_with("test.test_fakecodec.test_reference_backend")),
        "the official wheel ran (its reference backend passes), not the rebuild: {j}"
    );
    assert_eq!(tree_state(&w.venv), before, "the venv changed");
    assert!(
        runs_left(&w.cache).is_empty(),
        "the scratch folder is removed"
    );
}

/// A Python with a `._pth` file: Windows' embeddable CPython (ComfyUI's portable build runs
/// on one), read by every CPython from 3.11 on when it lies next to the executable. It ignores
/// `PYTHONPATH` and `PYTHONDONTWRITEBYTECODE`, as `-I` does: pytest must still be found in the
/// overlay and the tests run, no bytecode be left in the venv, and the one thing that cannot
/// work be said: a Python the tests start does not see the overlay (the fixture's quick test
/// checks that a child Python imports pytest).
#[test]
fn a_python_with_a_pth_file_runs_the_suite_and_leaves_the_venv_as_it_was() {
    let Some(w) = world(None) else { return };
    let py = w.venv.join("bin/python");
    give_pth_file(&w.venv);
    let isolated = std::process::Command::new(&py)
        .args(["-c", "import sys; print(sys.flags.isolated)"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&isolated.stdout).trim(),
        "1",
        "the ._pth file is read"
    );
    let before = tree_state(&w.venv);
    let out = w.cmd(&["test", "fakecodec", "--quick", "--json"], &[]);
    let all = format!("{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("this venv's Python ignores PYTHONPATH (a `._pth` file next to it"),
        "{all}"
    );
    let j: serde_json::Value = serde_json::from_str(&out.stdout).expect(&all);
    assert_eq!(j["ignores_python_path"], true, "{j}");
    // pytest ran from the overlay and collected the test; it fails only at the child Python.
    assert_eq!(j["tally"]["failed"], 1, "{j}");
    assert_eq!(
        j["new_failures"][0]["test"], "test.test_fakecodec.test_decodes_a_wav",
        "{j}"
    );
    assert_eq!(
        j["new_failures"][0]["message"], "AssertionError: assert 1 == 0",
        "the child's `import pytest` failed, nothing else: {j}"
    );
    assert_eq!(tree_state(&w.venv), before, "the venv changed");
}

/// Point 4 of issue 42 where no GPU is lent: a venv whose torch sees a GPU (its `torch.cuda`
/// says one device, as a CUDA or ROCm torch on a GPU machine does) runs the recipe's device
/// tests instead of deselecting them, and counts them with the rest.
#[test]
fn the_device_tests_run_where_the_venvs_torch_sees_a_gpu() {
    let Some(w) = world(None) else { return };
    std::fs::write(
        w.site.join("torch/__init__.py"),
        "from .version import __version__\nimport types\n\
         cuda = types.SimpleNamespace(is_available=lambda: True, device_count=lambda: 1)\n",
    )
    .unwrap();
    let out = w.cmd(&["test", "fakecodec", "--json"], &[]);
    let all = format!("{}\n{}", out.stdout, out.stderr);
    let j: serde_json::Value = serde_json::from_str(&out.stdout).expect(&all);
    assert_eq!(j["gpu"], true, "{j}");
    assert!(j["device_deselected"].is_null(), "{j}");
    // The GPU test passed beside the one that passes without a GPU; the failures are as ever.
    assert_eq!(j["tally"]["passed"], 2, "{j}");
    assert_eq!(j["tally"]["failed"], 2, "{j}");
    assert!(!out.stderr.contains("device tests:"), "{all}");
}
