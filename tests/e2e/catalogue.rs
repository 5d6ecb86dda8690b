//! The bad-input catalogue: every way a user can hand rocbuild something wrong, run through
//! the real binary. Each case snapshots the error the user sees (temp paths shown as [TMP])
//! and proves the venv is byte-identical afterwards and nothing that was in the cache before
//! changed. docs/errors.md lists every case with its message (`every_case_is_documented`).
//!
//! Scenes are as cheap as the case allows: a venv without pip unless pip must run, the git
//! fixture only where a source is fetched, a real build only for the three cases that fail
//! after one (build error, disk full while staging, verification failure).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use rocbuild_testkit::downloads::{pe_dll, sha256_hex, shared_ffmpeg_zip, zip_of, FileServer};

use crate::common::*;

/// Every case: (test name = snapshot name = docs/errors.md anchor, what the user did wrong).
pub const CASES: &[(&str, &str)] = &[
    ("malformed_toml", "A recipe that is not valid TOML"),
    ("unknown_key", "A recipe with an unknown key"),
    ("wrong_type", "A recipe value of the wrong type"),
    (
        "unknown_template_variable",
        "A recipe using an unknown template variable",
    ),
    ("unknown_recipe", "A recipe name that does not exist"),
    (
        "recipe_release_missing",
        "`--version` naming a release the recipe does not have",
    ),
    (
        "unlisted_release_new_major",
        "`--version` naming a new major release the recipe does not list",
    ),
    (
        "unlisted_release_not_tagged",
        "`--version` naming a release the recipe does not list and upstream never tagged",
    ),
    (
        "incompatible_torch",
        "A release that does not support the installed torch",
    ),
    (
        "release_not_for_this_ffmpeg",
        "`--version` naming a release that does not build against the FFmpeg found",
    ),
    (
        "system_library_missing",
        "A system library the build needs is not installed",
    ),
    (
        "define_drops_what_rocbuild_needs",
        "A `-D` that would take away something rocbuild's build needs",
    ),
    ("unknown_gfx", "An unknown GPU architecture name"),
    (
        "gfx_the_sdk_cannot_target",
        "A GPU architecture the ROCm SDK cannot compile for",
    ),
    (
        "cuda_13_for_a_release_without_it",
        "CUDA 13 for a CTranslate2 release that does not build with it",
    ),
    (
        "cuda_12_from_the_index",
        "`--cuda 12.9` with no CUDA 12 installed (the index has no CUDA 12 compiler)",
    ),
    (
        "cuda_arch_the_toolkit_cannot_build",
        "A CUDA architecture the toolkit's nvcc cannot compile for",
    ),
    (
        "cuda_no_host_compiler",
        "No host compiler the CUDA toolkit's nvcc accepts",
    ),
    (
        "arch_for_a_cpu_torch",
        "`--arch gfx…` for TorchCodec in a venv whose torch is a CPU build",
    ),
    (
        "arch_torch_has_no_code_for",
        "`--arch gfx…` for TorchCodec naming a GPU the ROCm torch has no code for",
    ),
    (
        "rocm_version_not_installed",
        "`--rocm` naming a version that is not installed",
    ),
    (
        "hip_path_pointing_nowhere",
        "`HIP_PATH` naming a directory that does not exist",
    ),
    (
        "venv_missing",
        "`--venv` naming a directory that does not exist",
    ),
    ("venv_without_torch", "A venv without torch"),
    (
        "isolated_python",
        "A Python with a `._pth` file (the embeddable CPython) without the build tools it imports",
    ),
    (
        "torch_cannot_be_imported",
        "A torch that cannot be imported",
    ),
    ("no_compiler", "No C/C++ compiler"),
    (
        "fresh_machine",
        "A fresh machine: no compiler, cmake, ninja or FFmpeg",
    ),
    (
        "build_tools_unobtainable",
        "No cmake or ninja, and PyPI out of reach",
    ),
    ("ffmpeg_missing", "No FFmpeg development files"),
    (
        "ffmpeg_static_on_windows",
        "A static FFmpeg for TorchCodec on Windows (plan)",
    ),
    (
        "no_compiler_on_windows",
        "No MSVC-ABI compiler on a Windows host (plan)",
    ),
    (
        "ffmpeg_missing_on_windows",
        "No FFmpeg for TorchCodec on a Windows host (plan)",
    ),
    ("unreachable_source", "A source that cannot be reached"),
    (
        "rev_that_is_no_release",
        "`--rev` naming no release's tag, without `--version`",
    ),
    (
        "mirror_without_the_release",
        "A `ROCBUILD_MIRROR` that does not hold the release",
    ),
    ("moved_tag", "A release tag that moved upstream"),
    ("corrupt_cache_clone", "A corrupt git clone in the cache"),
    ("build_error", "A build error"),
    (
        "verification_failure",
        "A build that fails the recipe's verification",
    ),
    (
        "disk_full_while_staging",
        "The disk filling up while the install is staged",
    ),
    (
        "second_concurrent_run",
        "A second run on a venv another run is working on",
    ),
    (
        "truncated_binary",
        "A truncated binary among the build's artifacts",
    ),
    (
        "zip_escaping_its_directory",
        "A downloaded zip with `../` entries",
    ),
    (
        "checksum_mismatch",
        "A download whose sha256 differs from the one given",
    ),
    (
        "manifest_outside_site_packages",
        "A manifest naming a file outside site-packages",
    ),
    (
        "planted_journal",
        "A `.rocbuild/journal.json` that rocbuild did not write (a wheel shipped it)",
    ),
    (
        "state_link",
        "A link in rocbuild's state (`.rocbuild/lock` pointing outside the venv)",
    ),
    (
        "backup_gone",
        "`restore` while the kept baseline (`.rocbuild/backup/<recipe>/`) is gone",
    ),
    (
        "backup_replaced_by_a_link",
        "`restore` while the kept baseline is a link to a folder outside the venv",
    ),
    (
        "json_error",
        "An error of a command given `--json`: one JSON object on stdout",
    ),
    (
        "index_unreachable",
        "`--index` naming a package index that does not answer",
    ),
    (
        "index_page_malformed",
        "`--index` naming a server whose project page is not a PEP 503 simple page",
    ),
    (
        "home_unset",
        "No cache directory: `HOME` (and `ROCBUILD_CACHE`, `XDG_CACHE_HOME`) unset",
    ),
    (
        "planted_manifest",
        "A wheel that ships `.rocbuild/NAME.json` claiming torch's files (with their real hashes)",
    ),
    (
        "key_not_private",
        "The key that seals rocbuild's state made readable and writable by everyone",
    ),
    (
        "cache_another_user_can_write",
        "A cache directory that another user owns and can write to (a shared `/tmp` cache)",
    ),
    (
        "repair_unknown_package",
        "`repair` naming a package that is not installed",
    ),
    (
        "repair_nothing_to_repair",
        "`repair` in a venv without TorchCodec or CTranslate2",
    ),
    (
        "repair_search_not_a_directory",
        "`repair --search` naming something that is not a directory",
    ),
    (
        "repair_a_rocbuild_build",
        "`repair` of a package rocbuild built",
    ),
    (
        "deps_given_a_folder",
        "`deps` (or `bundle`) given a package's folder instead of its library files",
    ),
    (
        "repair_rolled_back",
        "`repair` whose edited library then fails to load",
    ),
    (
        "test_without_a_test_table",
        "`test` of a recipe with no `[test]` table",
    ),
    (
        "test_source_gone",
        "`test` of a build whose source is gone from the cache and cannot be fetched",
    ),
];

/// A place for one bad run: a venv (or the path where one should be), a cache that already
/// holds earlier work, and a recipe directory.
struct Scene {
    tmp: tempfile::TempDir,
    venv: PathBuf,
    cache: PathBuf,
    recipes: PathBuf,
    /// Extra environment for every run.
    env: Vec<(String, String)>,
}

/// `python3 -m venv --without-pip`: a real venv, made in a tenth of a second.
fn light_venv(dir: &Path) -> PathBuf {
    run(Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(dir));
    site_packages(dir)
}

impl Scene {
    fn empty() -> Scene {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let cache = root.join("cache");
        // Earlier work in the cache that a failing run must leave alone.
        for (rel, text) in [
            ("logs/earlier-run.log", "an earlier run's log\n"),
            ("downloads/earlier.zip", "an earlier download\n"),
            ("build/earlier/CMakeCache.txt", "# an earlier build tree\n"),
        ] {
            let p = cache.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let recipes = root.join("recipes");
        std::fs::create_dir_all(&recipes).unwrap();
        Scene {
            venv: root.join("venv"),
            cache,
            recipes,
            env: Vec::new(),
            tmp,
        }
    }

    /// A venv (no pip) with the fake torch 2.9.1.
    fn with_torch() -> Scene {
        let s = Scene::empty();
        install_fake_torch(&light_venv(&s.venv), "2.9.1");
        s
    }

    /// With torch, the git fixture and its recipe (`fakecodec`, building from the fixture's
    /// bare repository); `pip`: a venv with pip and the wheel of the Python part.
    fn with_fixture(verify: &str, pip: bool) -> Scene {
        let mut s = Scene::empty();
        let site = if pip {
            make_venv(&s.venv)
        } else {
            light_venv(&s.venv)
        };
        install_fake_torch(&site, "2.9.1");
        let repos = s.root().join("repos");
        make_git_fixture(&repos);
        let wheels = s.root().join("wheels");
        make_wheel(&wheels, "fakecodec", "1.0.0");
        s.write_recipe(
            "fakecodec",
            &fixture_recipe(repos.join("fakecodec.git").to_str().unwrap(), true, verify),
        );
        s.env.push(("PIP_NO_INDEX".into(), "1".into()));
        s.env
            .push(("PIP_FIND_LINKS".into(), wheels.display().to_string()));
        s
    }

    fn root(&self) -> &Path {
        self.tmp.path()
    }

    fn site(&self) -> PathBuf {
        site_packages(&self.venv)
    }

    fn write_recipe(&self, name: &str, text: &str) {
        std::fs::write(self.recipes.join(format!("{name}.toml")), text).unwrap();
    }

    /// `rocbuild ARGS --venv --cache --recipes` with the scene's environment and `env`.
    fn rocbuild(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        let mut all = args.to_vec();
        all.extend_from_slice(&[
            "--venv",
            self.venv.to_str().unwrap(),
            "--cache",
            self.cache.to_str().unwrap(),
            "--recipes",
            self.recipes.to_str().unwrap(),
        ]);
        let mut e: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        e.extend_from_slice(env);
        rocbuild(&all, &e)
    }

    /// A copy of the fixture's source tree (submodule included) to build with `--source`.
    fn fixture_source(&self) -> PathBuf {
        let src = self.root().join("src");
        copy_dir(&fixture_dir().join("fakecodec"), &src);
        std::fs::create_dir_all(src.join("third_party/sub")).unwrap();
        std::fs::copy(
            fixture_dir().join("fakesub/answer.h"),
            src.join("third_party/sub/answer.h"),
        )
        .unwrap();
        src
    }

    /// A PATH holding links to these tools only.
    fn path_with(&self, tools: &[&str]) -> String {
        let bin = self.root().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for tool in tools {
            if let Some(p) = which(tool) {
                std::os::unix::fs::symlink(p, bin.join(tool)).unwrap();
            }
        }
        bin.display().to_string()
    }
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(tool))
        .find(|p| p.exists())
}

/// The tools a fixture build uses, so a case can take exactly one away.
const TOOLS: &[&str] = &[
    "cc",
    "c++",
    "gcc",
    "g++",
    "cmake",
    "ninja",
    "pkg-config",
    "git",
    "python3",
];

fn state(dir: &Path) -> Option<BTreeMap<String, String>> {
    dir.exists().then(|| tree_state(dir))
}

/// Run one case: the venv must be byte-identical afterwards (or still absent), every file
/// the cache held before must be there unchanged, the exit code must say failure and the
/// message must carry a way out (`help:`); then the text is snapshotted.
fn check(name: &str, scene: &Scene, code: i32, bad_run: impl FnOnce() -> Out) -> String {
    assert!(
        CASES.iter().any(|(n, _)| *n == name),
        "{name} is not in CASES"
    );
    let venv_before = state(&scene.venv);
    let cache_before = state(&scene.cache).unwrap_or_default();
    let out = bad_run();
    let text = format!(
        "exit code: {}\n--- stdout\n{}\n--- stderr\n{}",
        out.code,
        redact(&out.stdout, scene.root()),
        redact(&out.stderr, scene.root())
    );
    assert_eq!(out.code, code, "{text}");
    assert!(!out.stderr.contains("panicked"), "{text}");
    assert!(
        out.stderr.contains("help:"),
        "the message must say how to fix it:\n{text}"
    );
    assert_eq!(state(&scene.venv), venv_before, "the venv changed:\n{text}");
    let cache_after = state(&scene.cache).unwrap_or_default();
    for (k, v) in &cache_before {
        assert_eq!(
            cache_after.get(k),
            Some(v),
            "{k} in the cache changed or went away:\n{text}"
        );
    }
    // Left after [TMP]: a temp path that the 100-column wrapping cut in two, the build
    // tree's hash of those paths, the log's time stamp.
    insta::with_settings!({filters => vec![
        (r"\.tmp[A-Za-z0-9]{6}", ".tmpXXXXXX"),
        (r"(build[/\\][a-z0-9]+-[0-9.]+)-[0-9a-f]{12}", "$1-[HASH]"),
        (r"(git[/\\][a-z0-9]+)-[0-9a-f]{12}", "$1-[HASH]"),
        (r"(logs[/\\][a-z0-9]+)-[0-9]+\.log", "$1-[STAMP].log"),
        (r"\b[0-9a-f]{12}\.git\b", "[HASH].git"),
        (r"\b[0-9a-f]{40}\b", "[COMMIT]"),
        (r"\(pid\s+(\|\s+)?[0-9]+\)", "(pid [PID])"),
        (r"--parallel\s+(\|\s+)?[0-9]+", "--parallel [N]"),
        (r"127\.0\.0\.1:[0-9]+", "127.0.0.1:[PORT]"),
        // What is free where the disk was (simulated) full: this machine's, wrapped anywhere.
        (
            r"(?:\s|\|)+\([0-9.]+(?:\s|\|)+(?:bytes|[KMGTP]iB)(?:\s|\|)+free(?:\s|\|)+on(?:\s|\|)+that(?:\s|\|)+filesystem\)",
            " ([FREE] free on that filesystem)",
        ),
        // The tools area is keyed by the requirements and the Python version.
        (r"tools[/\\][0-9a-f]{16}", "tools/[HASH]"),
        // An assembled CUDA root is keyed by its wheels and where they were unpacked.
        (r"(cuda[/\\][0-9.]+)-[0-9a-f]{12}", "$1-[HASH]"),
        // The fixture zip's bytes carry the time it was made.
        (r"got\s+(\|\s+)?[0-9a-f]{64}", "got [SHA256 OF THE DOWNLOAD]"),
    ]}, {
        insta::assert_snapshot!(name, text);
    });
    // Unwrapped and without spaces, for the cases' own checks (see `said`).
    let unwrapped: String = out
        .stderr
        .lines()
        .map(|l| l.trim_start().trim_start_matches(['|', 'x']).trim())
        .collect::<Vec<_>>()
        .join(" ");
    squeeze(&unwrapped).replace(&squeeze(&scene.root().display().to_string()), "[TMP]")
}

/// Whether the message says `needle`, wherever the 100-column wrapping broke the lines.
fn said(err: &str, needle: &str) -> bool {
    err.contains(&squeeze(needle))
}

fn squeeze(s: &str) -> String {
    s.split_whitespace().collect()
}

/// A recipe that parses, for the recipe cases to break one thing of.
const GOOD: &str = "[package]\nname = \"bad\"\ndistribution = \"bad\"\nimport-dir = \"bad\"\n\n[source]\ngit = \"https://example.invalid/acme/bad\"\ntag = \"v{version}\"\n\n[[release]]\nversion = \"1.0\"\ntorch = \">=2.9\"\n\n[install]\nartifacts = [\"libbad*\"]\n";

fn recipe_case(name: &str, recipe: &str, expect: &[&str]) {
    let s = Scene::with_torch();
    s.write_recipe("bad", recipe);
    let err = check(name, &s, 1, || s.rocbuild(&["bad"], &[]));
    for e in expect {
        assert!(said(&err, e), "{e}\n{err}");
    }
}

#[test]
fn malformed_toml() {
    recipe_case(
        "malformed_toml",
        &GOOD.replace("tag = \"v{version}\"", "tag = \"v{version}"),
        &["bad.toml:8:", "not valid TOML"],
    );
}

#[test]
fn unknown_key() {
    recipe_case(
        "unknown_key",
        &GOOD.replace("artifacts = ", "artifact = "),
        &["did you mean `artifacts`?"],
    );
}

#[test]
fn wrong_type() {
    recipe_case(
        "wrong_type",
        &GOOD.replace("artifacts = [\"libbad*\"]", "artifacts = \"libbad*\""),
        &["bad.toml:15:13", "expected a sequence"],
    );
}

#[test]
fn unknown_template_variable() {
    recipe_case(
        "unknown_template_variable",
        &format!("{GOOD}finds = [\"{{torch.libb}}\"]\n"),
        &[
            "bad.toml:16:11: unknown template variable `{torch.libb}`",
            "did you mean `{torch.lib}`?",
        ],
    );
}

#[test]
fn unknown_recipe() {
    let s = Scene::with_torch();
    let err = check("unknown_recipe", &s, 1, || s.rocbuild(&["torchcodc"], &[]));
    assert!(said(&err, "did you mean `torchcodec`?"), "{err}");
}

#[test]
fn recipe_release_missing() {
    let s = Scene::with_torch();
    let err = check("recipe_release_missing", &s, 1, || {
        s.rocbuild(&["torchcodec", "--version", "0.1.0"], &[])
    });
    assert!(said(&err, "0.1.0"), "{err}");
    assert!(said(&err, "0.9.1"), "the releases it has are listed: {err}");
}

/// A new major is refused from the recipe alone: upstream is not even asked.
#[test]
fn unlisted_release_new_major() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let err = check("unlisted_release_new_major", &s, 1, || {
        s.rocbuild(
            &["fakecodec", "--version", "2.0.0"],
            &[("ROCBUILD_UPSTREAM", "on")],
        )
    });
    assert!(
        said(&err, "fakecodec 2.0.0 is a new major release"),
        "{err}"
    );
    assert!(said(&err, "nothing was fetched"), "{err}");
}

/// A release the recipe does not list, which upstream (the fixture's repository) never tagged.
#[test]
fn unlisted_release_not_tagged() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let err = check("unlisted_release_not_tagged", &s, 2, || {
        s.rocbuild(
            &["fakecodec", "--version", "1.3.0"],
            &[("ROCBUILD_UPSTREAM", "on")],
        )
    });
    assert!(said(&err, "has no tag v1.3.0"), "{err}");
    assert!(said(&err, "releases upstream has: 1.0.0"), "{err}");
}

#[test]
fn release_not_for_this_ffmpeg() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let repo = s.root().join("repos/fakecodec.git");
    let text = fixture_recipe(repo.to_str().unwrap(), true, DECODE_WAV).replace(
        "version = \"0.9.0\"\ntorch = \">=2.8,<2.9\"",
        "version = \"0.9.0\"\ntorch = \">=2.8,<2.9\"\n\n[[release]]\nversion = \"2.0.0\"\ntorch = \">=2.9\"\nffmpeg = \">=9\"",
    );
    s.write_recipe("fakecodec", &text);
    let err = check("release_not_for_this_ffmpeg", &s, 1, || {
        s.rocbuild(&["fakecodec", "--version", "2.0.0"], &[])
    });
    assert!(
        said(&err, "fakecodec 2.0.0 does not support FFmpeg "),
        "{err}"
    );
    assert!(said(&err, "it builds against FFmpeg >=9"), "{err}");
    assert!(said(&err, "nothing was fetched"), "{err}");
    // The default skips it for the one that fits.
    let plan = s.rocbuild(&["fakecodec", "--dry-run"], &[]);
    assert!(
        plan.stdout.contains("plan: fakecodec 1.0.0"),
        "{}",
        plan.stdout
    );
}

#[test]
fn system_library_missing() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let repo = s.root().join("repos/fakecodec.git");
    let text = fixture_recipe(repo.to_str().unwrap(), true, DECODE_WAV).replace(
        "[needs]\nffmpeg = true\n",
        "[needs]\nffmpeg = true\n\n[[needs.library]]\nname = \"absent\"\ndescribe = \"libabsent (rocbuild's test)\"\nheaders = [\"rocbuild-absent/absent.h\"]\nlibs = [\"rocbuild_absent\"]\nwhen = { FAKECODEC_ABSENT = \"ON\" }\npackages = { debian = \"librocbuild-absent-dev\", fedora = \"rocbuild-absent-devel\" }\n",
    );
    s.write_recipe("fakecodec", &text);
    let err = check("system_library_missing", &s, 1, || {
        s.rocbuild(&["fakecodec", "-D", "FAKECODEC_ABSENT=ON"], &[])
    });
    assert!(
        said(&err, "libabsent (rocbuild's test): rocbuild-absent/absent.h, librocbuild_absent not found (needed with FAKECODEC_ABSENT=ON)"),
        "{err}"
    );
    // Without the define it is not needed.
    let plan = s.rocbuild(&["fakecodec", "--dry-run"], &[]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
}

#[test]
fn define_drops_what_rocbuild_needs() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let err = check("define_drops_what_rocbuild_needs", &s, 2, || {
        s.rocbuild(&["fakecodec", "-D", "CMAKE_INSTALL_PREFIX=/opt/mine"], &[])
    });
    assert!(said(&err, "-D CMAKE_INSTALL_PREFIX=/opt/mine"), "{err}");
    assert!(said(&err, "staging prefix"), "{err}");
}

#[test]
fn incompatible_torch() {
    let s = Scene::with_torch();
    let err = check("incompatible_torch", &s, 1, || {
        s.rocbuild(&["torchcodec", "--version", "0.15.0"], &[])
    });
    assert!(
        said(
            &err,
            "torchcodec 0.15.0 does not support torch 2.9.1: it needs torch >=2.11"
        ),
        "{err}"
    );
    assert!(said(&err, "0.9.1, 0.9.0"), "{err}");
    // --force overrides; without --version the newest compatible release is picked.
    let forced = s.rocbuild(
        &["torchcodec", "--version", "0.15.0", "--dry-run", "--force"],
        &[],
    );
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    assert!(
        forced
            .stdout
            .contains("plan: torchcodec 0.15.0 (--version (forced"),
        "{}",
        forced.stdout
    );
    let newest = s.rocbuild(&["torchcodec", "--dry-run"], &[]);
    assert!(
        newest.stdout.contains(
            "plan: torchcodec 0.9.1 (newest release compatible with torch 2.9.1 and FFmpeg "
        ),
        "{}\n{}",
        newest.stdout,
        newest.stderr
    );
}

#[test]
fn unknown_gfx() {
    let s = Scene::with_torch();
    let err = check("unknown_gfx", &s, 1, || {
        s.rocbuild(&["ctranslate2", "--arch", "gfx1013x"], &[])
    });
    assert!(said(&err, "gfx1013x"), "{err}");
    assert!(said(&err, "did you mean"), "{err}");
}

/// This machine's real SDK (Debian's ROCm 5.2, installed by `cargo xtask test`) has no
/// device library for gfx1100: refused before anything is fetched or built.
#[test]
fn gfx_the_sdk_cannot_target() {
    let s = Scene::with_torch();
    let err = check("gfx_the_sdk_cannot_target", &s, 1, || {
        s.rocbuild(&["ctranslate2", "--arch", "gfx1100"], &[])
    });
    assert!(said(&err, "oclc_isa_version_1100.bc"), "{err}");
    assert!(
        said(&err, "gfx1010"),
        "the targets it can build are listed: {err}"
    );
    assert!(!s.cache.join("git").exists(), "nothing was fetched");
}

/// No system CUDA here (CUDA_HOME cleared): the environment of the CUDA cases.
const NO_SYSTEM_CUDA: &[(&str, &str)] = &[("CUDA_HOME", ""), ("CUDA_PATH", "")];

/// CTranslate2 4.8.0 was not built with CUDA 13 here (upstream lists CUDA 12 only, issue 1933;
/// 4.8.1 was): refused with the recipe's why before the toolkit is installed (nothing is
/// downloaded).
#[test]
fn cuda_13_for_a_release_without_it() {
    let s = Scene::with_torch();
    let err = check("cuda_13_for_a_release_without_it", &s, 1, || {
        s.rocbuild(
            &[
                "ctranslate2",
                "--version",
                "4.8.0",
                "--backend",
                "cuda",
                "--cuda",
                "13.2",
                "--cuda-arch",
                "9.0",
            ],
            NO_SYSTEM_CUDA,
        )
    });
    assert!(said(&err, "CUDA 13.2"), "{err}");
    assert!(said(&err, "issue 1933"), "{err}");
    assert!(said(&err, "--version 4.8.1"), "{err}");
    assert!(
        !s.cache.join("tools/cuda").exists(),
        "nothing was installed"
    );
}

/// The index's CUDA 12 compiler wheel holds no nvcc: `--cuda 12.9` without a system CUDA 12 is
/// refused before any download, with what works instead.
#[test]
fn cuda_12_from_the_index() {
    let s = Scene::with_torch();
    let err = check("cuda_12_from_the_index", &s, 1, || {
        s.rocbuild(
            &[
                "ctranslate2",
                "--backend",
                "cuda",
                "--cuda",
                "12.9",
                "--cuda-arch",
                "8.6",
            ],
            NO_SYSTEM_CUDA,
        )
    });
    assert!(said(&err, "rocbuild::cuda::no_compiler_wheel"), "{err}");
    assert!(
        said(&err, "no nvcc, cicc, cudafe++, fatbinary or nvlink"),
        "{err}"
    );
    assert!(
        !s.cache.join("tools/cuda").exists(),
        "nothing was installed"
    );
}

/// A recipe with a cuda backend and no CUDA range (its source is never reached: the cases
/// are refused at plan time).
const FAKECUDA: &str = "[package]\nname = \"fakecuda\"\ndistribution = \"fakecuda\"\nimport-dir = \"fakecuda\"\nbackends = [\"cpu\", \"cuda\"]\n\n[source]\ngit = \"https://example.invalid/acme/fakecuda\"\ntag = \"v{version}\"\n\n[[release]]\nversion = \"1.0\"\ntorch = \">=0\"\n\n[needs]\ntorch = false\n\n[backend.cuda.build.define]\nCMAKE_CUDA_ARCHITECTURES = \"{cuda.cmake-archs}\"\n\n[install]\nartifacts = [\"libfakecuda*\"]\n";

/// The pinned CUDA 13.2 wheels (cached by `cargo xtask test`), unpacked once per test run in
/// the target's temp dir and hard-linked into a scene's cache: a case pays for linking, not
/// for unpacking 115 MB. False (SKIPPED said) when the wheels are not cached.
fn seed_cuda(cache: &Path) -> bool {
    static UNPACKED: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let tools = UNPACKED.get_or_init(|| {
        let wheels = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cache/wheels/cuda");
        let pins = rocbuild_fetch::CudaPins::builtin();
        let pin = pins.pick("linux", "x86_64", Some("13.2")).unwrap();
        if pin
            .wheel
            .iter()
            .filter(|w| w.part == "compiler")
            .any(|w| !wheels.join(w.file_name()).is_file())
        {
            eprintln!(
                "SKIPPED: the CUDA 13.2 wheels are not in {} (cargo xtask test downloads them)",
                wheels.display()
            );
            return None;
        }
        let tools = Path::new(env!("CARGO_TARGET_TMPDIR")).join("catalogue-cuda-tools");
        let req = rocbuild_fetch::CudaInstall {
            downloads: wheels.clone(),
            tools: tools.clone(),
            offline: vec![wheels],
            ..Default::default()
        };
        rocbuild_fetch::install_cuda_toolkit(pin, &req).unwrap();
        Some(tools)
    });
    let Some(tools) = tools else { return false };
    link_tree(&tools.join("cuda/wheels"), &cache.join("tools/cuda/wheels"));
    true
}

fn link_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        if m.is_dir() {
            link_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::hard_link(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// CUDA 13 dropped Volta (7.0): the toolkit's own nvcc list says so, before anything is
/// fetched, with what it can compile for.
#[test]
fn cuda_arch_the_toolkit_cannot_build() {
    let s = Scene::with_torch();
    if !seed_cuda(&s.cache) {
        return;
    }
    s.write_recipe("fakecuda", FAKECUDA);
    let err = check("cuda_arch_the_toolkit_cannot_build", &s, 1, || {
        s.rocbuild(
            &["fakecuda", "--cuda", "13.2", "--cuda-arch", "8.6;7.0"],
            NO_SYSTEM_CUDA,
        )
    });
    assert!(
        said(&err, "CUDA 13.2 cannot compile for 7.0 (sm_70)"),
        "{err}"
    );
    assert!(said(&err, "8.6, 8.7"), "the archs it can are listed: {err}");
    assert!(!s.cache.join("git").exists(), "nothing was fetched");
}

/// No C++ compiler at all on PATH (the toolkit's nvcc needs one of the gcc/clang versions its
/// crt/host_config.h accepts): each one looked at is named, with the package that brings one.
#[test]
fn cuda_no_host_compiler() {
    let s = Scene::with_torch();
    if !seed_cuda(&s.cache) {
        return;
    }
    s.write_recipe("fakecuda", FAKECUDA);
    let path = s.path_with(&["git", "cmake", "ninja", "python3"]);
    let env = [NO_SYSTEM_CUDA, &[("PATH", path.as_str())]].concat();
    let err = check("cuda_no_host_compiler", &s, 1, || {
        s.rocbuild(&["fakecuda", "--cuda", "13.2", "--cuda-arch", "8.6"], &env)
    });
    assert!(said(&err, "rocbuild::cuda::no_host_compiler"), "{err}");
    assert!(said(&err, "gcc up to 15"), "the limits are said: {err}");
    assert!(
        said(&err, "install a C++ compiler within those versions"),
        "{err}"
    );
}

/// The brief's usage line on a CPU torch: what, why and the fix (not "add --backend rocm",
/// which then fails with "torchcodec has no rocm backend").
#[test]
fn arch_for_a_cpu_torch() {
    let s = Scene::with_torch();
    let err = check("arch_for_a_cpu_torch", &s, 1, || {
        s.rocbuild(&["torchcodec", "--arch", "gfx1201"], &[])
    });
    assert!(said(&err, "is a CPU-only build"), "{err}");
    assert!(said(&err, "install a ROCm torch"), "{err}");
    assert!(!said(&err, "--backend rocm"), "{err}");
}

/// A ROCm torch whose own arch list (asked of the real torch module in a child Python) lacks
/// the GPU named: refused before anything is fetched, with torch's list.
#[test]
fn arch_torch_has_no_code_for() {
    let s = Scene::with_torch();
    let t = s.site().join("torch");
    std::fs::write(
        t.join("version.py"),
        "from typing import Optional\n\n__version__ = '2.9.1+rocm6.4'\ncuda: Optional[str] = None\ngit_version = '0123456789abcdef0123456789abcdef01234567'\nhip: Optional[str] = '6.4.43482'\n",
    )
    .unwrap();
    std::fs::write(
        t.join("__init__.py"),
        "import types\nfrom . import version\nfrom .version import __version__\n\
         _C = types.SimpleNamespace(_cuda_getArchFlags=lambda: 'gfx1030 gfx1100')\n\
         cuda = types.SimpleNamespace(device_count=lambda: 0, get_arch_list=lambda: [])\n",
    )
    .unwrap();
    let err = check("arch_torch_has_no_code_for", &s, 1, || {
        s.rocbuild(&["torchcodec", "--arch", "gfx1201"], &[])
    });
    assert!(said(&err, "has no GPU code for gfx1201"), "{err}");
    assert!(said(&err, "built for gfx1030;gfx1100"), "{err}");
    assert!(!s.cache.join("git").exists(), "nothing was fetched");
}

#[test]
fn rocm_version_not_installed() {
    let s = Scene::with_torch();
    let err = check("rocm_version_not_installed", &s, 1, || {
        s.rocbuild(&["ctranslate2", "--rocm", "6.2", "--arch", "gfx1010"], &[])
    });
    assert!(said(&err, "6.2"), "{err}");
    assert!(said(&err, "5.2"), "the versions found are listed: {err}");
    // One answer: what the SDK that was found lacks too, not in a second run.
    assert!(
        said(&err, "and ROCm 5.2.0 at /usr has none"),
        "the SDK found lacks hipBLAS: {err}"
    );
}

#[test]
fn hip_path_pointing_nowhere() {
    let s = Scene::with_torch();
    let nowhere = s.root().join("AMD/ROCm/6.2");
    let err = check("hip_path_pointing_nowhere", &s, 1, || {
        s.rocbuild(
            &["ctranslate2", "--rocm", "6.2", "--arch", "gfx1010"],
            &[("HIP_PATH", nowhere.to_str().unwrap())],
        )
    });
    assert!(said(&err, "HIP_PATH"), "{err}");
    assert!(
        said(&err, "[TMP]/AMD/ROCm/6.2") || said(&err, nowhere.to_str().unwrap()),
        "{err}"
    );
}

#[test]
fn venv_missing() {
    let s = Scene::empty();
    let err = check("venv_missing", &s, 1, || s.rocbuild(&["torchcodec"], &[]));
    assert!(said(&err, "python3 -m venv"), "{err}");
    assert!(!s.venv.exists());
}

#[test]
fn venv_without_torch() {
    let s = Scene::empty();
    light_venv(&s.venv);
    let err = check("venv_without_torch", &s, 1, || {
        s.rocbuild(&["torchcodec"], &[])
    });
    assert!(said(&err, "no torch in"), "{err}");
}

/// The embeddable CPython (ComfyUI's portable build) reads a `._pth` file and ignores
/// `PYTHONPATH`, where rocbuild puts the build tools a PEP 517 build imports: refused before
/// anything is fetched, naming them and the command that installs them.
#[test]
fn isolated_python() {
    let s = Scene::with_torch();
    give_pth_file(&s.venv);
    let err = check("isolated_python", &s, 1, || s.rocbuild(&["torchsort"], &[]));
    assert!(said(&err, "rocbuild::plan::isolated_python"), "{err}");
    assert!(said(&err, "-m pip install \"setuptools>=61\""), "{err}");
}

#[test]
fn torch_cannot_be_imported() {
    let s = Scene::with_torch();
    // A torch whose import fails the way a broken install does: a library it loads is gone.
    std::fs::write(
        s.site().join("torch/__init__.py"),
        "raise ImportError('libtorch_global_deps.so: cannot open shared object file: No such file or directory')\n",
    )
    .unwrap();
    // A checkout of its own (this machine may have no network: the source is not the point).
    let src = s.root().join("torchcodec-checkout");
    std::fs::create_dir_all(&src).unwrap();
    let err = check("torch_cannot_be_imported", &s, 1, || {
        s.rocbuild(&["torchcodec", "--source", src.to_str().unwrap()], &[])
    });
    assert!(
        said(&err, "libtorch_global_deps.so"),
        "the import error is shown: {err}"
    );
}

fn missing_tool_case(name: &str, tool_gone: &[&str], expect: &[&str]) {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let tools: Vec<&str> = TOOLS
        .iter()
        .copied()
        .filter(|t| !tool_gone.contains(t))
        .collect();
    let path = s.path_with(&tools);
    let err = check(name, &s, 1, || {
        s.rocbuild(&["fakecodec"], &[("PATH", &path)])
    });
    for e in expect {
        assert!(said(&err, e), "{e}\n{err}");
    }
    assert!(!s.cache.join("git").exists(), "nothing was fetched");
}

#[test]
fn no_compiler() {
    missing_tool_case("no_compiler", &["cc", "c++", "gcc", "g++"], &["compiler"]);
}

/// Everything a fresh machine lacks, in one run: the compilers and FFmpeg's development files
/// with one install command for this distribution; cmake and ninja are not asked for (they
/// come from PyPI). Nothing is fetched.
#[test]
fn fresh_machine() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let tools: Vec<&str> = TOOLS
        .iter()
        .copied()
        .filter(|t| !["cc", "c++", "gcc", "g++", "cmake", "ninja"].contains(t))
        .collect();
    let path = s.path_with(&tools);
    let empty = s.root().join("no-pkgconfig");
    std::fs::create_dir_all(&empty).unwrap();
    let empty = empty.to_str().unwrap();
    let err = check("fresh_machine", &s, 1, || {
        s.rocbuild(
            &["fakecodec"],
            &[
                ("PATH", &path),
                ("PKG_CONFIG_LIBDIR", empty),
                ("PKG_CONFIG_PATH", empty),
            ],
        )
    });
    for e in [
        "3 prerequisites of fakecodec missing",
        "a C compiler",
        "a C++ compiler",
        "FFmpeg's development files: pkg-config does not know libavutil",
        "install them with one command:",
        "libavcodec-dev",
        "cmake and ninja are not needed",
    ] {
        assert!(said(&err, e), "{e}\n{err}");
    }
    assert!(!said(&err, "cmake not found"), "{err}");
    assert!(!s.cache.join("git").exists(), "nothing was fetched");
}

/// cmake and ninja absent, and pip cannot reach an index that has them: said before the
/// fetch, with the system packages that would do instead.
#[test]
fn build_tools_unobtainable() {
    let s = Scene::with_fixture(DECODE_WAV, true);
    let tools: Vec<&str> = TOOLS
        .iter()
        .copied()
        .filter(|t| !["cmake", "ninja"].contains(t))
        .collect();
    let path = s.path_with(&tools);
    let err = check("build_tools_unobtainable", &s, 1, || {
        s.rocbuild(&["fakecodec"], &[("PATH", &path)])
    });
    assert!(said(&err, "could not be installed from PyPI"), "{err}");
    assert!(said(&err, "cmake: not on PATH"), "{err}");
    assert!(said(&err, "ninja: not on PATH"), "{err}");
    assert!(
        said(&err, "cmake ninja"),
        "the system packages instead: {err}"
    );
    assert!(!s.cache.join("git").exists(), "nothing was fetched");
}

#[test]
fn ffmpeg_missing() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let empty = s.root().join("no-pkgconfig");
    std::fs::create_dir_all(&empty).unwrap();
    let empty = empty.to_str().unwrap();
    let err = check("ffmpeg_missing", &s, 1, || {
        s.rocbuild(
            &["fakecodec"],
            &[("PKG_CONFIG_LIBDIR", empty), ("PKG_CONFIG_PATH", empty)],
        )
    });
    assert!(said(&err, "FFmpeg"), "{err}");
    assert!(said(&err, "--ffmpeg"), "{err}");
}

#[test]
fn ffmpeg_static_on_windows() {
    let s = Scene::empty();
    let mut m = crate::plans::machine("windows");
    m["ffmpeg"]["bin"] = serde_json::Value::Null;
    let file = s.root().join("machine.json");
    std::fs::write(&file, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    let err = check("ffmpeg_static_on_windows", &s, 1, || {
        rocbuild(
            &[
                "torchcodec",
                "--version",
                "0.9.1",
                "--dry-run",
                "--machine",
                file.to_str().unwrap(),
                "--cache",
                s.cache.to_str().unwrap(),
            ],
            &[],
        )
    });
    assert!(said(&err, "static build"), "{err}");
    assert!(said(&err, "rocbuild ffmpeg"), "{err}");
}

/// A dry run of TorchCodec for a Windows host described by `edit` (the fixture Windows
/// machine, changed).
fn windows_host_plan(name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let s = Scene::empty();
    let mut m = crate::plans::machine("windows");
    edit(&mut m);
    let file = s.root().join("machine.json");
    std::fs::write(&file, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    check(name, &s, 1, || {
        rocbuild(
            &[
                "torchcodec",
                "--version",
                "0.9.1",
                "--dry-run",
                "--machine",
                file.to_str().unwrap(),
                "--cache",
                s.cache.to_str().unwrap(),
            ],
            &[],
        )
    })
}

/// A Windows host where no developer prompt, Visual Studio or LLVM was found: refused at
/// plan time, naming where rocbuild looked and each way to get a compiler.
#[test]
fn no_compiler_on_windows() {
    let err = windows_host_plan("no_compiler_on_windows", |m| {
        m["tools"]["cc"] = serde_json::Value::Null;
        m["tools"]["cxx"] = serde_json::Value::Null;
    });
    for e in [
        "1 prerequisite of torchcodec missing",
        "a C and C++ compiler for Windows",
        "developer prompt",
        "vswhere",
        "Microsoft.VisualStudio.Workload.VCTools",
        "Native Tools Command Prompt",
        "winget install LLVM.LLVM",
    ] {
        assert!(said(&err, e), "{e}\n{err}");
    }
}

/// A Windows host without FFmpeg (pkg-config knows none, no --ffmpeg): what TorchCodec
/// loads, which majors, where rocbuild looked, and how a Windows user gets a shared build.
#[test]
fn ffmpeg_missing_on_windows() {
    let err = windows_host_plan("ffmpeg_missing_on_windows", |m| {
        m["ffmpeg"] = serde_json::Value::Null;
        m["ffmpeg_missing"] = "pkg-config does not know libavutil".into();
    });
    for e in [
        "FFmpeg's shared DLLs",
        "FFmpeg 4 to 8",
        "rocbuild looked at pkg-config",
        "rocbuild ffmpeg",
        "--ffmpeg DIR",
        "gyan.dev",
    ] {
        assert!(said(&err, e), "{e}\n{err}");
    }
}

#[test]
fn unreachable_source() {
    let mut s = Scene::with_fixture(DECODE_WAV, false);
    s.write_recipe(
        "fakecodec",
        &fixture_recipe("https://example.invalid/acme/fakecodec", true, DECODE_WAV),
    );
    let mirror = s.root().join("empty-mirror");
    std::fs::create_dir_all(&mirror).unwrap();
    s.env
        .push(("ROCBUILD_MIRROR".into(), mirror.display().to_string()));
    let err = check("unreachable_source", &s, 1, || {
        s.rocbuild(&["fakecodec", "-q"], &[])
    });
    // At once, before any tool or pip install: what works offline instead.
    assert!(said(&err, "example.invalid:443 cannot be reached"), "{err}");
    assert!(
        said(
            &err,
            "ROCBUILD_MIRROR=DIR holding DIR/example.invalid/acme/fakecodec.git"
        ),
        "{err}"
    );
    assert!(said(&err, "--source DIR"), "{err}");
    assert!(
        !s.cache.join("tools").exists(),
        "no build tool was installed"
    );
}

/// `--rev` without `--version`: the release is the one whose tag it names; a branch or a
/// commit names none, and rocbuild refuses before fetching anything (it would otherwise build
/// that source with the newest release's options and Python part).
#[test]
fn rev_that_is_no_release() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let err = check("rev_that_is_no_release", &s, 2, || {
        s.rocbuild(&["fakecodec", "--rev", "main"], &[])
    });
    assert!(
        said(&err, "main is not the tag of a release of fakecodec"),
        "{err}"
    );
    assert!(said(&err, "add --version"), "{err}");
    assert!(!s.cache.join("git").exists(), "nothing was fetched");
}

#[test]
fn mirror_without_the_release() {
    let mut s = Scene::with_fixture(DECODE_WAV, false);
    s.write_recipe(
        "fakecodec",
        &fixture_recipe("https://example.invalid/acme/fakecodec", true, DECODE_WAV),
    );
    // A mirror of the project made before v1.0.0 was tagged.
    let mirror = s.root().join("mirror");
    let owner = mirror.join("example.invalid/acme");
    std::fs::create_dir_all(&owner).unwrap();
    let repo = owner.join("fakecodec.git");
    std::fs::rename(s.root().join("repos/fakecodec.git"), &repo).unwrap();
    run(Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["tag", "-d", "v1.0.0"]));
    run(Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["tag", "v0.9.0"]));
    s.env
        .push(("ROCBUILD_MIRROR".into(), mirror.display().to_string()));
    let err = check("mirror_without_the_release", &s, 1, || {
        s.rocbuild(&["fakecodec", "-q"], &[])
    });
    assert!(
        said(
            &err,
            "mirror [TMP]/mirror/example.invalid/acme/fakecodec.git has no refs/tags/v1.0.0"
        ),
        "{err}"
    );
    assert!(said(&err, "tags it has: v0.9.0"), "{err}");
    assert!(
        said(
            &err,
            "fetch https://example.invalid/acme/fakecodec refs/tags/v1.0.0:refs/tags/v1.0.0"
        ),
        "{err}"
    );
    // Nothing was built.
    assert!(!s.cache.join("src/fakecodec-v1.0.0").exists());
}

#[test]
fn moved_tag() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    // The recipe pins the commit v1.0.0 had when it was written; upstream has retagged since.
    let text = std::fs::read_to_string(s.recipes.join("fakecodec.toml")).unwrap();
    let pinned = "0123456789abcdef0123456789abcdef01234567";
    s.write_recipe(
        "fakecodec",
        &text.replace(
            "version = \"1.0.0\"\n",
            &format!("version = \"1.0.0\"\ncommit = \"{pinned}\"\n"),
        ),
    );
    let err = check("moved_tag", &s, 1, || s.rocbuild(&["fakecodec", "-q"], &[]));
    assert!(said(&err, pinned), "{err}");
    assert!(said(&err, "tag moved upstream"), "{err}");
}

#[test]
fn corrupt_cache_clone() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let url = s.root().join("repos/fakecodec.git");
    let url = url.to_str().unwrap();
    // The cache's clone, as rocbuild names it, with its pack cut in half (a disk error, or a
    // clone killed while writing).
    let clone = s.cache.join("git").join(format!(
        "fakecodec-{}.git",
        &rocbuild_engine::hash_hex(&[url])[..12]
    ));
    run(Command::new("git")
        .args(["clone", "-q", "--bare", "--no-local", url])
        .arg(&clone));
    for e in std::fs::read_dir(clone.join("objects/pack")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "pack") {
            let bytes = std::fs::read(&p).unwrap();
            let mut perms = std::fs::metadata(&p).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            std::fs::set_permissions(&p, perms).unwrap();
            std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
        }
    }
    let err = check("corrupt_cache_clone", &s, 1, || {
        s.rocbuild(&["fakecodec", "-q"], &[])
    });
    assert!(said(&err, "is damaged"), "{err}");
    assert!(said(&err, "[TMP]/cache/git/fakecodec-"), "{err}");
}

#[test]
fn build_error() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let src = s.fixture_source();
    let core = src.join("src/core.cpp");
    let mut text = std::fs::read_to_string(&core).unwrap();
    text.push_str("\nint broken( { return 0; }\n");
    std::fs::write(&core, text).unwrap();
    let err = check("build_error", &s, 1, || {
        s.rocbuild(&["fakecodec", "-q", "--source", src.to_str().unwrap()], &[])
    });
    assert!(
        said(&err, "core.cpp"),
        "the compiler's own words are shown: {err}"
    );
    assert!(said(&err, "[TMP]/cache/logs/"), "the log is named: {err}");
}

#[test]
fn verification_failure() {
    let s = Scene::with_fixture(
        "raise SystemExit('loader says: libfoo.so: cannot open shared object file')",
        true,
    );
    let err = check("verification_failure", &s, 1, || {
        s.rocbuild(&["fakecodec", "-q"], &[])
    });
    assert!(
        said(&err, "verification failed, the venv was rolled back"),
        "{err}"
    );
    assert!(
        said(&err, "libfoo.so: cannot open shared object file"),
        "{err}"
    );
}

#[test]
fn disk_full_while_staging() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    // Step 1 makes the staging directory, step 2 copies the first library into it: the
    // second library finds the disk full.
    let err = check("disk_full_while_staging", &s, 1, || {
        s.rocbuild(
            &["fakecodec", "-q"],
            &[("ROCBUILD_TEST_FAIL_AFTER_STEP", "2")],
        )
    });
    assert!(said(&err, "no space left on device: cannot stage"), "{err}");
    assert!(said(&err, "rocbuild clean --builds"), "{err}");
}

#[test]
fn second_concurrent_run() {
    let s = Scene::with_torch();
    let site = s.site();
    // Another run holds the venv (the same advisory lock a rocbuild process takes).
    let held = rocbuild_venv::lock::VenvLock::acquire(&site, false, &mut |_| {}).unwrap();
    let err = check("second_concurrent_run", &s, 1, || {
        s.rocbuild(&["torchcodec", "--no-wait"], &[])
    });
    assert!(said(&err, "another rocbuild run"), "{err}");
    drop(held);
}

#[test]
fn truncated_binary() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let src = s.fixture_source();
    // The project also installs a library cut short (a failed download, a full disk) that
    // matches the recipe's artifacts: rocbuild's reader must refuse it, not crash.
    let whole = std::fs::read(s.site().join("torch/lib/libc10.so")).unwrap();
    std::fs::write(src.join("libfakecodec_core_cut.so"), &whole[..200]).unwrap();
    let cml = src.join("CMakeLists.txt");
    let mut text = std::fs::read_to_string(&cml).unwrap();
    text.push_str("\ninstall(FILES libfakecodec_core_cut.so DESTINATION fakecodec)\n");
    std::fs::write(&cml, text).unwrap();
    let err = check("truncated_binary", &s, 1, || {
        s.rocbuild(&["fakecodec", "-q", "--source", src.to_str().unwrap()], &[])
    });
    assert!(
        said(&err, "libfakecodec_core_cut.so"),
        "the file is named: {err}"
    );
}

fn ffmpeg_download_case(name: &str, zip: &[u8], sha256: &str) -> (Scene, String) {
    let srv = FileServer::start(BTreeMap::from([(
        "/ffmpeg-7.1.1-full_build-shared.zip".to_string(),
        zip.to_vec(),
    )]));
    let s = Scene::with_torch();
    let url = format!("{}/ffmpeg-7.1.1-full_build-shared.zip", srv.base);
    let into = s.root().join("a/b/ffmpeg");
    let err = check(name, &s, 1, || {
        let mut out = rocbuild(
            &[
                "ffmpeg",
                "--url",
                &url,
                "--sha256",
                sha256,
                "--into",
                into.to_str().unwrap(),
                "--cache",
                s.cache.to_str().unwrap(),
            ],
            &[],
        );
        out.stderr = out.stderr.replace(&srv.base, "http://[SERVER]");
        out
    });
    assert!(!s.root().join("a").exists(), "nothing was extracted");
    (s, err)
}

#[test]
fn zip_escaping_its_directory() {
    let zip = zip_of(&[
        ("ffmpeg/bin/avutil-59.dll", pe_dll()),
        ("../../escaped.dll", b"payload"),
    ]);
    let (s, err) = ffmpeg_download_case("zip_escaping_its_directory", &zip, &sha256_hex(&zip));
    assert!(said(&err, "rocbuild::fetch::unsafe_entry"), "{err}");
    assert!(
        said(&err, "escaped.dll") && said(&err, "a `..` component"),
        "{err}"
    );
    assert!(!s.root().join("escaped.dll").exists());
}

#[test]
fn checksum_mismatch() {
    let zip = shared_ffmpeg_zip();
    let wrong = "ab".repeat(32);
    let (s, err) = ffmpeg_download_case("checksum_mismatch", &zip, &wrong);
    let err = err.replace('\n', " ");
    assert!(said(&err, "rocbuild::fetch::checksum"), "{err}");
    let flat: String = err.split_whitespace().collect::<Vec<_>>().join("");
    assert!(
        flat.contains(&wrong) && flat.contains(&sha256_hex(&zip)),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(s.cache.join("downloads"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["earlier.zip"], "the bad download is not kept");
}

/// `--index` at a port where nothing listens: refused before anything is built.
#[test]
fn index_unreachable() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/simple/");
    let err = check("index_unreachable", &s, 1, || {
        s.rocbuild(&["fakecodec", "-q", "--index", &url], &[])
    });
    assert!(said(&err, "rocbuild::index::unreachable"), "{err}");
    assert!(said(&err, "/simple/fakecodec/"), "{err}");
    assert!(!s.cache.join("git").exists(), "nothing was fetched");
}

/// `--index` at a server that answers with something that is not a simple page (JSON).
#[test]
fn index_page_malformed() {
    let s = Scene::with_fixture(DECODE_WAV, false);
    let server = FileServer::start(BTreeMap::from([(
        "/simple/fakecodec/".to_string(),
        br#"{"files": []}"#.to_vec(),
    )]));
    let url = format!("{}/simple/", server.base);
    let err = check("index_page_malformed", &s, 1, || {
        s.rocbuild(&["fakecodec", "-q", "--index", &url], &[])
    });
    assert!(said(&err, "rocbuild::index::malformed"), "{err}");
    assert!(said(&err, "it is not HTML"), "{err}");
    assert!(!s.cache.join("git").exists(), "nothing was fetched");
}

/// A hand-edited (or corrupt) manifest naming a file outside site-packages: `restore` must
/// not remove or move it.
#[test]
fn manifest_outside_site_packages() {
    let s = Scene::with_torch();
    let victim = s.root().join("precious.txt");
    std::fs::write(&victim, "not rocbuild's").unwrap();
    let state_dir = s.site().join(".rocbuild");
    std::fs::create_dir_all(&state_dir).unwrap();
    let sha = "0".repeat(64);
    write_sealed_manifest(
        &s.site(),
        &s.cache,
        &format!(
            r#"{{"schema":1,"recipe":"fakecodec","version":"1.0.0","recipe_hash":"h","fingerprint":"f",
"source_url":null,"source_commit":null,"torch_version":"2.9.1","torch_git":null,"flavor":"cpu",
"ffmpeg_major":7,"python":"p","defines":{{}},"runpath":[],
"files":[{{"path":"../../../precious.txt","sha256":"{sha}","size":1}}],"parked":[],"installed_at":0}}"#
        ),
    );
    let err = check("manifest_outside_site_packages", &s, 1, || {
        s.rocbuild(&["restore", "fakecodec"], &[])
    });
    assert!(said(&err, "../../../precious.txt"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "not rocbuild's");
}

/// A folder outside the venv that hostile state points at, with its bytes.
fn canary(s: &Scene) -> (PathBuf, BTreeMap<String, String>) {
    let c = s.root().join("outside");
    std::fs::create_dir_all(c.join("photos")).unwrap();
    std::fs::write(c.join("thesis.tex"), "years of work").unwrap();
    std::fs::write(c.join("photos/1.jpg"), "a photo").unwrap();
    let st = tree_state(&c);
    (c, st)
}

/// A wheel can ship `.rocbuild/evil.json` claiming torch's files with their public hashes:
/// `restore evil` removes none of them (it is not sealed by this user's rocbuild).
#[test]
fn planted_manifest() {
    let s = Scene::with_torch();
    let site = s.site();
    let files: Vec<serde_json::Value> = ["torch/version.py", "torch/__init__.py"]
        .iter()
        .filter(|p| site.join(p).exists())
        .map(|p| {
            let sha = sha256_hex(&std::fs::read(site.join(p)).unwrap());
            serde_json::json!({"path": p, "sha256": sha, "size": 1})
        })
        .collect();
    assert!(!files.is_empty());
    let m = serde_json::json!({
        "schema": 1, "recipe": "evil", "version": "1.0", "recipe_hash": "h", "fingerprint": "f",
        "source_url": null, "source_commit": null, "torch_version": "2.9.1", "torch_git": null,
        "flavor": "cpu", "ffmpeg_major": 7, "python": "p", "defines": {}, "runpath": [],
        "files": files, "parked": [], "installed_at": 0,
    });
    std::fs::create_dir_all(site.join(".rocbuild")).unwrap();
    std::fs::write(site.join(".rocbuild/evil.json"), m.to_string()).unwrap();
    let err = check("planted_manifest", &s, 1, || {
        s.rocbuild(&["restore", "evil"], &[])
    });
    assert!(said(&err, "carries no seal"), "{err}");
}

/// `chmod 666` on the key: refused as OpenSSH refuses such a private key.
#[test]
fn key_not_private() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scene::with_torch();
    held_install(&s, true);
    let key = s.cache.join(rocbuild_venv::state_key::KEY_FILE);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o666)).unwrap();
    let err = check("key_not_private", &s, 1, || {
        s.rocbuild(&["restore", "pkg"], &[])
    });
    assert!(said(&err, "chmod 600"), "{err}");
}

/// A wheel can ship `.rocbuild/journal.json`: one naming files outside the venv, in the
/// format an older rocbuild wrote, is reported and never replayed.
#[test]
fn planted_journal() {
    let s = Scene::with_torch();
    let (c, before) = canary(&s);
    let state_dir = s.site().join(".rocbuild");
    std::fs::create_dir_all(&state_dir).unwrap();
    let planted = serde_json::json!({
        "recipe": "fakecodec", "created_state_dir": false, "ops": [], "phase": "commit",
        "remove": [c.join("thesis.tex")], "drop": [c.join("photos")],
    });
    std::fs::write(state_dir.join("journal.json"), planted.to_string()).unwrap();
    let err = check("planted_journal", &s, 1, || {
        s.rocbuild(&["restore", "fakecodec"], &[])
    });
    assert!(said(&err, "not a sealed rocbuild journal"), "{err}");
    assert_eq!(tree_state(&c), before);
    // `status` says the same, tells the truth about the builds, and changes nothing either.
    let out = s.rocbuild(&["status"], &[]);
    assert!(
        squeeze(&out.stderr).contains(&squeeze("was not acted on")),
        "{}",
        out.stderr
    );
    assert_eq!(tree_state(&c), before);
}

/// A link swapped in for `.rocbuild/lock`: the lock is never opened through it (the pid
/// would be written into whatever it points to).
#[test]
fn state_link() {
    let s = Scene::with_torch();
    let (c, before) = canary(&s);
    let state_dir = s.site().join(".rocbuild");
    std::fs::create_dir_all(&state_dir).unwrap();
    std::os::unix::fs::symlink(c.join("thesis.tex"), state_dir.join("lock")).unwrap();
    let err = check("state_link", &s, 1, || {
        s.rocbuild(&["restore", "fakecodec"], &[])
    });
    assert!(said(&err, "is a link"), "{err}");
    assert_eq!(tree_state(&c), before);
}

/// A hand-made install of `pkg` that rocbuild holds: its manifest (with the baseline it kept
/// recorded), its file, and the baseline in `.rocbuild/backup/pkg/` unless `backup` is false.
fn held_install(s: &Scene, backup: bool) {
    let site = s.site();
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    std::fs::write(site.join("pkg/lib.so"), "rocbuild's build").unwrap();
    if backup {
        std::fs::create_dir_all(site.join(".rocbuild/backup/pkg/pkg")).unwrap();
        std::fs::write(site.join(".rocbuild/backup/pkg/pkg/lib.so"), "pip's").unwrap();
    }
    std::fs::create_dir_all(site.join(".rocbuild")).unwrap();
    let m = serde_json::json!({
        "schema": 1, "recipe": "pkg", "version": "1.0", "recipe_hash": "h", "fingerprint": "f",
        "source_url": null, "source_commit": null, "torch_version": "2.9.1", "torch_git": null,
        "flavor": "cpu", "ffmpeg_major": 7, "python": "p", "defines": {}, "runpath": [],
        "files": [], "parked": [], "installed_at": 0,
        "ownership": {
            "distribution": "pkg", "roots": ["pkg"],
            "held": {"pkg/lib.so": sha256_hex(b"rocbuild's build")},
            "baseline": {"pkg/lib.so": sha256_hex(b"pip's"), "pkg-1.0.dist-info/METADATA": sha256_hex(b"m")},
        },
    });
    write_sealed_manifest(&site, &s.cache, &m.to_string());
}

/// `restore` with the kept baseline gone (a clean-up removed `.rocbuild/backup/`): it refuses
/// and changes nothing, instead of removing the build and saying it restored pip's files.
#[test]
fn backup_gone() {
    let s = Scene::with_torch();
    held_install(&s, false);
    let err = check("backup_gone", &s, 1, || {
        s.rocbuild(&["restore", "pkg"], &[])
    });
    assert!(said(&err, "is gone"), "{err}");
    assert!(
        said(&err, "pip install --force-reinstall --no-deps pkg==1.0"),
        "{err}"
    );
}

/// The kept baseline replaced by a link to a folder outside: `restore` would move that
/// folder's files into site-packages. It refuses; the folder stays as it was.
#[test]
fn backup_replaced_by_a_link() {
    let s = Scene::with_torch();
    let (c, before) = canary(&s);
    held_install(&s, true);
    let backup = s.site().join(".rocbuild/backup/pkg");
    std::fs::remove_dir_all(&backup).unwrap();
    std::os::unix::fs::symlink(&c, &backup).unwrap();
    let err = check("backup_replaced_by_a_link", &s, 1, || {
        s.rocbuild(&["restore", "pkg"], &[])
    });
    assert!(said(&err, "is a link, which rocbuild never makes"), "{err}");
    assert_eq!(tree_state(&c), before);
}

/// With `--json`, an error is one JSON object on stdout (its code, message and help), for every
/// command that takes `--json`, clap's own usage errors included; the human text stays on stderr.
#[test]
fn json_error() {
    let s = Scene::empty();
    check("json_error", &s, 1, || {
        s.rocbuild(&["status", "--json"], &[])
    });
    let cases: &[(&[&str], i32, &str)] = &[
        (&["status", "--json"], 1, "rocbuild::probe::not_a_venv"),
        (&["torchcodec", "--json"], 1, "rocbuild::probe::not_a_venv"),
        (&["nosuch", "--json"], 1, "rocbuild::recipe::unknown"),
        (&["doctor", "--json"], 2, "rocbuild::probe::not_a_venv"),
        (&["status", "--json", "--bogus"], 2, "rocbuild::usage"),
    ];
    for (args, code, want) in cases {
        let out = s.rocbuild(args, &[]);
        assert_eq!(out.code, *code, "{args:?}: {}\n{}", out.stdout, out.stderr);
        let v: serde_json::Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not one JSON object ({e}):\n{}", out.stdout));
        assert_eq!(v["error"]["code"], *want, "{args:?}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{v}"
        );
        assert!(
            v["error"]["help"].as_str().is_some_and(|m| !m.is_empty()),
            "{v}"
        );
        assert_eq!(v["exit_code"], *code, "{v}");
        assert!(!out.stderr.is_empty(), "the human text stays on stderr");
    }
}

/// HOME unset and no other cache variable: refused, naming the variables and `--cache`,
/// instead of a `./cache` in whatever directory rocbuild was started from.
#[test]
fn home_unset() {
    let s = Scene::empty();
    let root = s.root().join("started-here");
    std::fs::create_dir_all(&root).unwrap();
    let err = check("home_unset", &s, 1, || {
        let o = Command::new(env!("CARGO_BIN_EXE_rocbuild"))
            .arg("clean")
            .current_dir(&root)
            .env_remove("HOME")
            .env_remove("ROCBUILD_CACHE")
            .env_remove("XDG_CACHE_HOME")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into(),
            stderr: String::from_utf8_lossy(&o.stderr).into(),
        }
    });
    assert!(said(&err, "ROCBUILD_CACHE"), "{err}");
    assert!(said(&err, "--cache DIR"), "{err}");
    assert_eq!(
        std::fs::read_dir(&root).unwrap().count(),
        0,
        "nothing made where it started"
    );
}

#[test]
fn cache_another_user_can_write() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scene::empty();
    // Made by someone else (user `nobody`), writable by all: whoever made it could swap the
    // sources rocbuild builds. As root the test can hand it to another user; otherwise the
    // world-writable parent without the sticky bit is the same trap.
    let shared = s.root().join("shared-tmp");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let cache = shared.join("rocbuild-cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        std::os::unix::fs::chown(&cache, Some(65534), Some(65534)).unwrap();
    } else {
        std::fs::remove_dir(&cache).unwrap();
    }
    let err = check("cache_another_user_can_write", &s, 1, || {
        rocbuild(&["clean", "--cache", cache.to_str().unwrap()], &[])
    });
    assert!(said(&err, "the cache directory is not safe"), "{err}");
    assert!(said(&err, "--cache DIR"), "{err}");
}

/// A venv (no pip, fake torch) whose `torchcodec/libtorchcodec_core7.so` needs
/// `libhelper.so.1`, which is in site-packages (`helper/`) but on no search path: what repair
/// fixes with a RUNPATH. `ctor`: C code added to the library (an initializer).
fn repairable(ctor: &str) -> Scene {
    let s = Scene::with_torch();
    let site = s.site();
    let helper = site.join("helper");
    rocbuild_testkit::native::stub_library(&helper, "libhelper.so.1");
    let src = s.root().join("core.c");
    std::fs::write(&src, format!("int core(void) {{ return 7; }}\n{ctor}")).unwrap();
    let l = format!("-L{}", helper.display());
    rocbuild_testkit::native::shared_library(
        "cc",
        &src,
        &site.join("torchcodec/libtorchcodec_core7.so"),
        &["-Wl,--no-as-needed", &l, "-l:libhelper.so.1"],
    );
    std::fs::write(site.join("torchcodec/__init__.py"), "").unwrap();
    s
}

#[test]
fn repair_unknown_package() {
    let s = Scene::with_torch();
    let err = check("repair_unknown_package", &s, 2, || {
        s.rocbuild(&["repair", "torchcodex"], &[])
    });
    assert!(said(&err, "`torchcodex` is not installed"), "{err}");
}

#[test]
fn repair_nothing_to_repair() {
    let s = Scene::with_torch();
    let err = check("repair_nothing_to_repair", &s, 2, || {
        s.rocbuild(&["repair"], &[])
    });
    assert!(
        said(&err, "neither torchcodec nor ctranslate2 is installed"),
        "{err}"
    );
}

#[test]
fn repair_search_not_a_directory() {
    let s = repairable("");
    let file = s.root().join("core.c");
    let err = check("repair_search_not_a_directory", &s, 2, || {
        s.rocbuild(
            &["repair", "torchcodec", "--search", file.to_str().unwrap()],
            &[],
        )
    });
    assert!(said(&err, "is not a directory"), "{err}");
}

/// A folder where a library file belongs: refused up front with what to name instead (it used
/// to say "No such device" here and "Access denied" on Windows, from opening the folder).
#[test]
fn deps_given_a_folder() {
    let s = repairable("");
    let folder = s.site().join("torchcodec");
    let err = check("deps_given_a_folder", &s, 2, || {
        crate::common::rocbuild(&["deps", folder.to_str().unwrap()], &[])
    });
    assert!(said(&err, "is a folder: deps reads library files"), "{err}");
    assert!(said(&err, "rocbuild::deps::folder"), "{err}");
    let into = s.root().join("bundle-out");
    let bundle = crate::common::rocbuild(
        &[
            "bundle",
            folder.to_str().unwrap(),
            "--into",
            into.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(bundle.code, 2, "{}", bundle.stderr);
    assert!(
        bundle.stderr.contains("is a folder: bundle reads library"),
        "{}",
        bundle.stderr
    );
    assert!(!into.exists(), "bundle made its folder before refusing");
}

/// A manifest of kind `build` (rocbuild built it): repair leaves it to `rebuild`.
#[test]
fn repair_a_rocbuild_build() {
    let s = repairable("");
    let state_dir = s.site().join(".rocbuild");
    std::fs::create_dir_all(&state_dir).unwrap();
    write_sealed_manifest(
        &s.site(),
        &s.cache,
        r#"{"schema":2,"recipe":"torchcodec","version":"0.17.0","recipe_hash":"h","fingerprint":"f",
"source_url":null,"source_commit":null,"torch_version":"2.9.1","torch_git":null,"flavor":"cpu",
"ffmpeg_major":7,"python":"p","defines":{},"runpath":[],"files":[],"parked":[],"installed_at":0,
"kind":"build"}"#,
    );
    let err = check("repair_a_rocbuild_build", &s, 1, || {
        s.rocbuild(&["repair", "torchcodec"], &[])
    });
    assert!(said(&err, "rocbuild rebuild torchcodec"), "{err}");
}

/// The edit is made (RUNPATH to `$ORIGIN/../helper`), the loader emulation is satisfied, but
/// the library's initializer fails in the fresh Python that loads it: the swap is rolled
/// back and the venv is byte for byte as before.
#[test]
fn repair_rolled_back() {
    let s = repairable(
        "#include <stdio.h>\n#include <unistd.h>\n__attribute__((constructor)) static void init(void) { fputs(\"core: cannot initialise\\n\", stderr); _exit(3); }\n",
    );
    let err = check("repair_rolled_back", &s, 1, || {
        s.rocbuild(&["repair", "torchcodec"], &[])
    });
    assert!(said(&err, "so it was rolled back"), "{err}");
    assert!(!s.site().join(".rocbuild/torchcodec.json").exists());
}

/// docs/errors.md has a section for every case, named after it, and no section for a case
/// that is gone.
#[test]
fn test_without_a_test_table() {
    let s = Scene::with_torch();
    s.write_recipe("bad", GOOD);
    let err = check("test_without_a_test_table", &s, 1, || {
        s.rocbuild(&["test", "bad"], &[])
    });
    assert!(said(&err, "has no [test] table"), "{err}");
    assert!(said(&err, "docs/recipes.md"), "{err}");
}

/// A real build, then its checkout, the cache's clone and the repository itself gone.
#[test]
fn test_source_gone() {
    let s = Scene::with_fixture(DECODE_WAV, true);
    let recipe = s.recipes.join("fakecodec.toml");
    let mut text = std::fs::read_to_string(&recipe).unwrap();
    text.push_str("\n[test]\nfiles = [\"test\"]\nrequirements = [\"pytest\"]\n");
    std::fs::write(&recipe, text).unwrap();
    let built = s.rocbuild(&["fakecodec", "-q"], &[]);
    assert_eq!(built.code, 0, "{}", built.stderr);
    for gone in [
        s.cache.join("src"),
        s.cache.join("git"),
        s.root().join("repos"),
    ] {
        std::fs::remove_dir_all(gone).unwrap();
    }
    let err = check("test_source_gone", &s, 1, || {
        s.rocbuild(&["test", "fakecodec"], &[])
    });
    assert!(
        said(&err, "is gone from the cache and cannot be fetched again"),
        "{err}"
    );
    assert!(said(&err, "ROCBUILD_MIRROR"), "{err}");
}

#[test]
fn every_case_is_documented() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/errors.md"))
            .expect("docs/errors.md");
    let documented: Vec<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("### `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    for (name, title) in CASES {
        assert!(
            documented.contains(name),
            "docs/errors.md has no `### `{name}`` section ({title})"
        );
    }
    for d in &documented {
        assert!(
            CASES.iter().any(|(n, _)| n == d),
            "docs/errors.md documents `{d}`, which is not a catalogue case"
        );
    }
    assert!(CASES.len() >= 25);
}
