use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::{Installer, Os, ProbeError, Python, Venv};

/// The interpreter of a venv: `bin/python` or `Scripts\python.exe` (a conda env on Windows
/// keeps `python.exe` at its root).
pub fn python_in_venv(root: &Path, os: Os) -> PathBuf {
    os.rules().venv_python(root)
}

const DESCRIBE: &str = r#"
import glob, importlib.util, json, os, platform, sys, sysconfig
p = sysconfig.get_paths()
def bundled_pip():
    # Debian's pip wheel (a POSIX path: under Wine a Windows Python would find the host's).
    dirs = ["/usr/share/python-wheels"] if os.name == "posix" else []
    spec = importlib.util.find_spec("ensurepip")
    if spec and spec.origin:
        dirs.insert(0, os.path.join(os.path.dirname(spec.origin), "_bundled"))
    for d in dirs:
        wheels = sorted(glob.glob(os.path.join(d, "pip-*.whl")))
        if wheels:
            return wheels[-1]
    return None
def pth_file():
    # CPython 3.11+ (and Windows' since 3.6) reads `<executable>._pth` or `pythonXY._pth` next
    # to it: sys.path is then that file's, and PYTHON* variables are ignored (as under -I).
    d = os.path.dirname(sys.executable)
    stem = os.path.splitext(os.path.basename(sys.executable))[0]
    for n in (stem, "python%d%d" % sys.version_info[:2]):
        f = os.path.join(d, n + "._pth")
        if os.path.isfile(f):
            return f
    return None
print(json.dumps({
    "pip": importlib.util.find_spec("pip") is not None,
    "bundled_pip": bundled_pip(),
    "pth_file": pth_file(),
    "version": "%d.%d" % sys.version_info[:2],
    "full_version": platform.python_version(),
    "site_packages": p["platlib"],
    "include": p["include"],
    "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX") or "",
    "platform": sysconfig.get_platform(),
    "shared_sites": [d for d in sys.path if d and d not in (p["platlib"], p["purelib"])
                     and os.path.basename(d) in ("site-packages", "dist-packages")
                     and os.path.isdir(d)],
}))
"#;

#[derive(Deserialize)]
struct Described {
    version: String,
    full_version: String,
    site_packages: PathBuf,
    include: PathBuf,
    ext_suffix: String,
    platform: String,
    pip: bool,
    bundled_pip: Option<PathBuf>,
    #[serde(default)]
    pth_file: Option<PathBuf>,
    #[serde(default)]
    shared_sites: Vec<PathBuf>,
}

/// Ask the venv's own Python about itself (no third-party import, so it cannot crash on a
/// broken torch).
pub fn probe_python(venv: &Venv, os: Os) -> Result<Python, ProbeError> {
    let exe = python_in_venv(&venv.root, os);
    if !exe.exists() {
        return Err(ProbeError::NotAVenv {
            root: venv.root.display().to_string(),
            exe: exe.display().to_string(),
            chosen_by: format!("chosen by {}", venv.chosen_by),
        });
    }
    let fail = |reason: String| ProbeError::Python {
        exe: exe.display().to_string(),
        reason: with_path_limit(&exe, os, reason),
    };
    // -B: nothing written into the venv (-I ignores PYTHONDONTWRITEBYTECODE).
    let out = duct::cmd(&exe, ["-I", "-B", "-c", DESCRIBE])
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        return Err(fail(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    let d: Described = serde_json::from_slice(&out.stdout).map_err(|e| fail(e.to_string()))?;
    let uv_venv = made_by_uv(&venv.root);
    let installer = Installer {
        pip: d.pip,
        uv_venv,
        uv: uv_venv.then(|| find_uv(&venv.root, os)).flatten(),
        bundled_pip: d.bundled_pip,
        host: None,
        host_skipped: Vec::new(),
    };
    Ok(Python {
        installer,
        distributions: d
            .shared_sites
            .iter()
            .rev()
            .chain([&d.site_packages])
            .flat_map(|s| installed_distributions(s))
            .collect(),
        shared_sites: d.shared_sites,
        exe,
        version: d.version,
        full_version: d.full_version,
        site_packages: d.site_packages,
        include: d.include,
        ext_suffix: d.ext_suffix,
        platform: d.platform,
        dll: None,
        libs: None,
        pth_file: d.pth_file,
    })
}

/// Windows starts no program from a path of 260 characters or more (MAX_PATH) unless long
/// paths are enabled, and then says only "file not found" (or Python's start-up says "failed
/// to join paths"): a venv that deep is named as the cause.
fn with_path_limit(exe: &Path, os: Os, reason: String) -> String {
    let n = exe.to_string_lossy().chars().count();
    if os
        .rules()
        .program_path_limit()
        .is_none_or(|limit| n < limit)
    {
        return reason;
    }
    format!(
        "{reason}; its path is {n} characters long, and Windows starts no program from a path of 260 characters or more (MAX_PATH) unless long paths are enabled (the LongPathsEnabled setting, which Python's installer offers as \"Disable path length limit\"): recreate the venv under a shorter path"
    )
}

/// pyvenv.cfg of a venv uv made has a `uv = 0.x.y` line.
pub fn made_by_uv(root: &Path) -> bool {
    crate::read_text(root.join("pyvenv.cfg")).is_ok_and(|text| {
        text.lines()
            .any(|l| l.split_once('=').is_some_and(|(k, _)| k.trim() == "uv"))
    })
}

/// The uv for a uv-made venv: one installed in the venv itself, else the first on PATH.
fn find_uv(root: &Path, os: Os) -> Option<PathBuf> {
    let own = os.rules().venv_executable(root, "uv");
    if own.is_file() {
        return Some(own);
    }
    which::which("uv").ok()
}

/// PEP 503 normalization: `Foo_Bar.baz` -> `foo-bar-baz`.
pub fn normalize_dist(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let c = if matches!(c, '_' | '.') {
            '-'
        } else {
            c.to_ascii_lowercase()
        };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out
}

/// `name-version.dist-info` directories in `site`.
pub fn installed_distributions(site: &Path) -> std::collections::BTreeMap<String, String> {
    let Ok(entries) = std::fs::read_dir(site) else {
        return Default::default();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            // Debian's own packages (python3-torch) carry `.egg-info`.
            let stem = name
                .strip_suffix(".dist-info")
                .or_else(|| name.strip_suffix(".egg-info"))?;
            let (dist, version) = stem.rsplit_once('-')?;
            Some((normalize_dist(dist), version.to_string()))
        })
        .collect()
}

/// The `Version:` of distribution `name`'s METADATA in `site` (what pip and uv compare a
/// requirement against; it can differ from the package's own `__version__`: PyPI's CUDA torch
/// is the distribution `2.15.0` whose `torch.__version__` is `2.15.0+cu132`). None when no
/// dist-info of that name is there.
pub fn distribution_version(site: &Path, name: &str) -> Option<String> {
    let want = normalize_dist(name);
    let entries = std::fs::read_dir(site).ok()?;
    entries.filter_map(|e| e.ok()).find_map(|e| {
        let file = e.file_name().to_string_lossy().into_owned();
        let (dist, _) = file.strip_suffix(".dist-info")?.rsplit_once('-')?;
        if normalize_dist(dist) != want {
            return None;
        }
        let text = crate::read_text(e.path().join("METADATA")).ok()?;
        text.lines()
            .take_while(|l| !l.is_empty())
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("version")
                    .then(|| v.trim().to_string())
            })
            .filter(|v| !v.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Windows venv 260 characters deep or more is named as the reason its Python did not
    /// start ("file not found" hides it); shorter ones and other OSes keep the words as they are.
    #[test]
    fn a_windows_python_beyond_max_path_is_named_as_the_cause() {
        let deep = PathBuf::from(format!(r"C:\{}\python.exe", "d".repeat(260)));
        let said = with_path_limit(&deep, Os::Windows, "File not found. (os error 2)".into());
        assert!(
            said.starts_with("File not found. (os error 2); its path is 274 characters long"),
            "{said}"
        );
        assert!(
            said.contains("recreate the venv under a shorter path"),
            "{said}"
        );
        let short = PathBuf::from(r"C:\venv\python.exe");
        assert_eq!(with_path_limit(&short, Os::Windows, "x".into()), "x");
        assert_eq!(with_path_limit(&deep, Os::Linux, "x".into()), "x");
    }

    #[test]
    fn a_venv_made_by_uv_says_so_in_pyvenv_cfg() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(!made_by_uv(tmp.path()));
        std::fs::write(
            tmp.path().join("pyvenv.cfg"),
            "home = /usr/bin\nimplementation = CPython\nuv = 0.9.5\nversion_info = 3.11.2\n",
        )
        .unwrap();
        assert!(made_by_uv(tmp.path()));
        std::fs::write(
            tmp.path().join("pyvenv.cfg"),
            "home = /usr/bin\ncommand = /usr/bin/python3 -m venv /x/uv\n",
        )
        .unwrap();
        assert!(!made_by_uv(tmp.path()));
    }

    #[test]
    fn the_distribution_version_is_read_from_metadata_not_the_directory_name() {
        let tmp = tempfile::tempdir().unwrap();
        let di = tmp.path().join("Torch-2.15.0.dist-info");
        std::fs::create_dir_all(&di).unwrap();
        std::fs::write(
            di.join("METADATA"),
            "Metadata-Version: 2.1\nName: torch\nVersion: 2.15.0\n\nVersion: not this\n",
        )
        .unwrap();
        std::fs::create_dir_all(tmp.path().join("torchcodec-0.1.dist-info")).unwrap();
        assert_eq!(
            distribution_version(tmp.path(), "torch").as_deref(),
            Some("2.15.0")
        );
        assert_eq!(distribution_version(tmp.path(), "torchcodec"), None);
        assert_eq!(distribution_version(tmp.path(), "numpy"), None);
    }
}
