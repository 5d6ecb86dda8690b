use std::path::{Path, PathBuf};
use std::process::Command;

pub use rocbuild_testkit::*;

pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The real binary with `args`, in the environment every test starts from: none of the
/// user's venv, recipe, cache, mirror, library path or compiler variables, no colour.
pub fn rocbuild_command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rocbuild"));
    c.args(args);
    for k in [
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "ROCBUILD_RECIPES",
        "ROCBUILD_CACHE",
        "ROCBUILD_MIRROR",
        "LD_LIBRARY_PATH",
        "PYTHONPATH",
        // Set on some machines (CI images): it would hide a run writing `__pycache__` into
        // the venv, which the venv checks must see.
        "PYTHONDONTWRITEBYTECODE",
        // The compilers a test means are the ones it passes (the wheels' compiler is chosen
        // only when the user named none).
        "CC",
        "CXX",
    ] {
        c.env_remove(k);
    }
    c.env("NO_COLOR", "1");
    // Upstream is asked only by the tests of that (tests/e2e/upstream.rs): elsewhere a new
    // release on the network would change what a test sees.
    c.env("ROCBUILD_UPSTREAM", "off");
    c
}

/// Run the real binary ([`rocbuild_command`]) with `env` added: its exit code and output.
pub fn rocbuild(args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut c = rocbuild_command(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("run rocbuild");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

/// A complete fixture world in a temp dir: venv with a torch-like package, the git
/// repositories, a wheel of the Python part, a recipe.
pub struct World {
    pub tmp: tempfile::TempDir,
    pub venv: PathBuf,
    pub site: PathBuf,
    pub recipes: PathBuf,
    pub cache: PathBuf,
    pub wheels: PathBuf,
    pub commit: String,
    pub repos: PathBuf,
}

impl World {
    pub fn new(verify: &str) -> World {
        World::with_venv_named(verify, "venv")
    }

    /// A world whose venv directory is called `name` (spaces, non-ASCII, ...).
    pub fn with_venv_named(verify: &str, name: &str) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let venv = root.join(name);
        let site = make_venv(&venv);
        install_fake_torch(&site, "2.9.1");
        let repos = root.join("repos");
        let commit = make_git_fixture(&repos);
        let wheels = root.join("wheels");
        make_wheel(&wheels, "fakecodec", "1.0.0");
        let recipes = root.join("recipes");
        std::fs::create_dir_all(&recipes).unwrap();
        let git = repos.join("fakecodec.git");
        std::fs::write(
            recipes.join("fakecodec.toml"),
            fixture_recipe(git.to_str().unwrap(), true, verify),
        )
        .unwrap();
        World {
            venv,
            site,
            recipes,
            cache: root.join("cache"),
            wheels,
            commit,
            repos,
            tmp,
        }
    }

    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("PIP_NO_INDEX", "1".into()),
            ("PIP_FIND_LINKS", self.wheels.display().to_string()),
        ]
    }

    /// Every run log in the cache, one after the other.
    pub fn logs(&self) -> String {
        std::fs::read_dir(self.cache.join("logs"))
            .map(|rd| {
                rd.flatten()
                    .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn build(&self, extra: &[&str]) -> Out {
        let mut args = vec![
            "fakecodec",
            "--recipes",
            self.recipes.to_str().unwrap(),
            "--venv",
            self.venv.to_str().unwrap(),
            "--cache",
            self.cache.to_str().unwrap(),
            "-q",
        ];
        args.extend_from_slice(extra);
        let env = self.env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        rocbuild(&args, &env)
    }
}

/// Replace temp paths so snapshots are stable.
pub fn redact(text: &str, world: &Path) -> String {
    let t = text.replace(&world.display().to_string(), "[TMP]");
    t.lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}

impl World {
    /// Run a subcommand (`status`, `rebuild`, ...) on this world's venv, recipes and cache.
    pub fn cmd(&self, args: &[&str], extra_env: &[(&str, &str)]) -> Out {
        let mut all: Vec<&str> = args.to_vec();
        all.extend_from_slice(&[
            "--venv",
            self.venv.to_str().unwrap(),
            "--recipes",
            self.recipes.to_str().unwrap(),
            "--cache",
            self.cache.to_str().unwrap(),
        ]);
        let env = self.env();
        let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        env.extend_from_slice(extra_env);
        rocbuild(&all, &env)
    }

    /// The FFmpeg major pkg-config finds here (what the fixture builds against).
    pub fn ffmpeg_major(&self) -> u32 {
        let v = run(Command::new("pkg-config").args(["--modversion", "libavutil"]));
        v.split('.').next().unwrap().trim().parse::<u32>().unwrap() - 52
    }
}

pub fn ok(out: &Out) {
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
}

/// `pip install --no-deps` of `spec` from the fixture wheels into `venv`, as a user would.
pub fn pip_install(venv: &std::path::Path, wheels: &std::path::Path, spec: &str) {
    run(Command::new(venv.join("bin/python")).args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-index",
        "--no-deps",
        "--no-compile",
        "--find-links",
        wheels.to_str().unwrap(),
        spec,
    ]));
}

/// `bundle --format pyinstaller` output read by Python itself (`ast.literal_eval`): the
/// `(source, dest_dir)` pairs; panics, naming the text, when it is not a Python literal.
pub fn pyinstaller_pairs(literal: &str) -> Vec<(String, String)> {
    use std::io::Write as _;
    let mut py = std::process::Command::new("python3")
        .args([
            "-c",
            "import ast, json, sys; print(json.dumps(ast.literal_eval(sys.stdin.read())))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    py.stdin
        .take()
        .unwrap()
        .write_all(literal.as_bytes())
        .unwrap();
    let read = py.wait_with_output().unwrap();
    assert!(read.status.success(), "not a Python literal:\n{literal}");
    serde_json::from_slice(&read.stdout).unwrap()
}

/// `from` copied into `to`, recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// The findings of a `doctor --json` run whose `what` contains `needle`.
pub fn findings_about(out: &Out, needle: &str) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", out.stdout, out.stderr));
    v["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings: {}", out.stdout))
        .iter()
        .filter(|f| f["what"].as_str().unwrap_or("").contains(needle))
        .cloned()
        .collect()
}

/// Makes the venv's Python read a `bin/python._pth` (as Windows' embeddable CPython does, and
/// every CPython from 3.11 on): its own `sys.path` and `import site`. It then ignores
/// `PYTHONPATH` and every other `PYTHON*` variable.
pub fn give_pth_file(venv: &Path) {
    let paths = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import sys; print('\\n'.join(p for p in sys.path if p))",
        ])
        .output()
        .unwrap();
    let mut pth = String::from_utf8(paths.stdout).unwrap();
    pth.push_str("import site\n");
    std::fs::write(venv.join("bin/python._pth"), pth).unwrap();
}

/// Write `json` as the manifest rocbuild itself would have written into `site` with the key
/// in `cache` (made there, private, when it has none): a test's hand-made install that
/// rocbuild must treat as its own (manifests are sealed: see `rocbuild_venv::state_key`).
pub fn write_sealed_manifest(site: &Path, cache: &Path, json: &str) {
    use std::os::unix::fs::PermissionsExt;
    let key_file = cache.join(rocbuild_venv::state_key::KEY_FILE);
    if !key_file.exists() {
        std::fs::create_dir_all(cache).unwrap();
        let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
        let bytes: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(seed.as_bytes()).into();
        std::fs::write(&key_file, bytes).unwrap();
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let bytes: [u8; 32] = std::fs::read(&key_file).unwrap().try_into().unwrap();
    let key = rocbuild_venv::state_key::StateKey::from_bytes(bytes);
    let m: rocbuild_venv::manifest::Manifest = serde_json::from_str(json).unwrap();
    let dir = site.join(".rocbuild");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{}.json", m.recipe)),
        rocbuild_venv::manifest::sealed_text(site, &m, &key),
    )
    .unwrap();
}

/// The manifest of `recipe` in `site` as rocbuild reads it with the key in `cache`: `None`
/// when there is none or it is not rocbuild's own (not sealed with that key for this venv).
pub fn read_manifest(
    site: &Path,
    cache: &Path,
    recipe: &str,
) -> Option<rocbuild_venv::manifest::Manifest> {
    let key = std::fs::read(cache.join(rocbuild_venv::state_key::KEY_FILE))
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .map(rocbuild_venv::state_key::StateKey::from_bytes);
    let text = std::fs::read_to_string(rocbuild_venv::manifest::path(site, recipe)).ok()?;
    rocbuild_venv::manifest::open_sealed_with(site, recipe, &text, Ok(key)).ok()
}
