//! `rocbuild publish`: the build's wheel uploaded to a real package index (pypiserver from
//! PyPI, on 127.0.0.1, started and stopped here) through the standard upload API (twine,
//! installed by rocbuild into its tools area), then fetched back by pip from that index.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use crate::common::*;

/// Wheels of `specs` and their dependencies, downloaded once into the workspace's cache.
pub fn pypi_wheels(name: &str, specs: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../cache/wheels")
        .join(name);
    let stamp = dir.join(format!(
        ".complete-{}",
        specs.join("_").replace(['<', '>', '=', ','], "-")
    ));
    if !stamp.exists() {
        let mut c = Command::new("python3");
        c.args([
            "-m",
            "pip",
            "download",
            "--disable-pip-version-check",
            "-q",
            "-d",
        ])
        .arg(&dir)
        .args(specs);
        run(&mut c);
        std::fs::write(&stamp, "").unwrap();
    }
    dir
}

/// pypiserver on a free port, serving (and taking uploads into) `packages`; no auth.
pub(crate) struct Index {
    child: Child,
    /// `http://127.0.0.1:PORT/` (upload URL; the simple root is `simple/` under it).
    pub url: String,
}

impl Index {
    pub fn start(root: &Path, packages: &Path) -> Index {
        let wheels = pypi_wheels("index", &["pypiserver", "twine"]);
        let venv = root.join("index-venv");
        make_venv(&venv);
        run(Command::new(venv.join("bin/python")).args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-index",
            "--find-links",
            wheels.to_str().unwrap(),
            "pypiserver",
        ]));
        std::fs::create_dir_all(packages).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(venv.join("bin/pypi-server"))
            .args([
                "run",
                "-i",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-a",
                ".",
                "-P",
                ".",
            ])
            .arg(packages)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < until,
                "pypiserver did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Index {
            child,
            url: format!("http://127.0.0.1:{port}/"),
        }
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn publish_uploads_the_wheel_to_a_real_index_and_pip_gets_it_back() {
    let w = World::new(DECODE_WAV);
    ok(&w.build(&[]));
    let packages = w.tmp.path().join("index-packages");
    let index = Index::start(w.tmp.path(), &packages);
    // rocbuild installs twine from these wheels (offline, like every wheel of the tests).
    let index_wheels = pypi_wheels("index", &["pypiserver", "twine"]);
    let links = format!("{} {}", w.wheels.display(), index_wheels.display());
    let env = [
        ("PIP_FIND_LINKS", links.as_str()),
        ("TWINE_USERNAME", "lab"),
        ("TWINE_PASSWORD", "unused"),
    ];
    let before = tree_state(&w.venv);

    let out = w.cmd(&["publish", "fakecodec", "--index", &index.url], &env);
    ok(&out);
    assert!(out.stdout.contains("published to"), "{}", out.stdout);
    let wheel = PathBuf::from(
        out.stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("wheel: "))
            .unwrap(),
    );
    let name = wheel.file_name().unwrap();
    // The index holds exactly that wheel, byte for byte.
    let served = packages.join(name);
    assert_eq!(
        std::fs::read(&served).unwrap(),
        std::fs::read(&wheel).unwrap()
    );
    // pip finds it on the index's simple API and downloads the same bytes.
    let got = w.tmp.path().join("got");
    let version = name
        .to_string_lossy()
        .split('-')
        .nth(1)
        .unwrap()
        .to_string();
    run(Command::new(w.venv.join("bin/python"))
        .args([
            "-m",
            "pip",
            "download",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
        ])
        .args(["--index-url", &format!("{}simple/", index.url), "-d"])
        .arg(&got)
        .arg(format!("fakecodec=={version}"))
        .env_remove("PIP_FIND_LINKS")
        .env_remove("PIP_NO_INDEX"));
    assert_eq!(
        std::fs::read(got.join(name)).unwrap(),
        std::fs::read(&wheel).unwrap()
    );
    // Publishing changes nothing in the venv.
    assert_eq!(tree_state(&w.venv), before);

    // The same version again: the index refuses (an index never replaces a file); rocbuild
    // says so with twine's own words and how to go on.
    let again = w.cmd(&["publish", "fakecodec", "--index", &index.url], &env);
    assert_eq!(again.code, 1, "{}{}", again.stdout, again.stderr);
    assert!(again.stderr.contains("did not take"), "{}", again.stderr);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
}

/// Publishing to an open index (pypiserver with no authentication, devpi's open indexes) needs
/// no credentials at all (issue 30): with no `TWINE_*` variable, no userinfo and no
/// `~/.pypirc`, the upload goes through; twine is never left to ask for a username.
#[test]
fn publish_to_an_open_index_needs_no_credentials() {
    let w = World::new(DECODE_WAV);
    ok(&w.build(&[]));
    let packages = w.tmp.path().join("index-packages");
    let index = Index::start(w.tmp.path(), &packages);
    let index_wheels = pypi_wheels("index", &["pypiserver", "twine"]);
    let links = format!("{} {}", w.wheels.display(), index_wheels.display());
    let home = w.tmp.path().join("home-without-pypirc");
    std::fs::create_dir_all(&home).unwrap();
    let home_s = home.display().to_string();
    let out = w.cmd(
        &["publish", "fakecodec", "--index", &index.url],
        &[
            ("PIP_FIND_LINKS", links.as_str()),
            ("HOME", home_s.as_str()),
        ],
    );
    ok(&out);
    assert!(
        std::fs::read_dir(&packages).unwrap().count() > 0,
        "{}{}",
        out.stdout,
        out.stderr
    );
}
