//! `rocbuild publish RECIPE --index URL|NAME`: the installed build as a wheel, uploaded with
//! twine (the standard upload API that PyPI, devpi, pypiserver and artifact registries take;
//! credentials from `TWINE_USERNAME`/`TWINE_PASSWORD` or `~/.pypirc`, as twine reads them).
//! twine comes from PyPI into rocbuild's tools area once; it never enters the venv.

use std::path::{Path, PathBuf};

use rocbuild_probe::Os;

use super::{wheel, Reporter};
use crate::command::Command;
use crate::error::{EngineError, Result};

/// The twine rocbuild installs into its tools area.
pub const TWINE: &str = "twine>=6,<8";

#[derive(Debug, Clone, serde::Serialize)]
pub struct Published {
    pub wheel: PathBuf,
    pub version: String,
    pub index: String,
}

/// twine's arguments for `index`: a URL, or the name of a `.pypirc` section.
fn repository_args(index: &str) -> Vec<String> {
    if index.contains("://") {
        vec!["--repository-url".into(), index.into()]
    } else {
        vec!["--repository".into(), index.into()]
    }
}

pub fn publish(
    venv: &rocbuild_probe::Venv,
    recipe: &str,
    index: &str,
    cache: &Path,
    dry_run: bool,
    twine_configured: bool,
    reporter: &mut dyn Reporter,
) -> Result<Published> {
    if index.trim().is_empty() {
        return Err(EngineError::Usage {
            option: "--index".into(),
            reason: "empty".into(),
            help: Some("the upload URL (e.g. http://127.0.0.1:8080/ for pypiserver, https://upload.pypi.org/legacy/) or a section of ~/.pypirc".into()),
        });
    }
    let out = cache.join("wheels").join(recipe);
    let built = wheel::wheel(venv, recipe, &out, reporter)?;
    if dry_run {
        reporter.note(&format!(
            "would upload {} to {index} (twine, {})",
            built.path.display(),
            TWINE
        ));
        return Ok(Published {
            wheel: built.path,
            version: built.version,
            index: index.into(),
        });
    }
    let layout = super::locate(venv)?;
    let py = rocbuild_probe::python_in_venv(&layout.root, Os::current());
    let tools = cache.join("tools").join("twine");
    let ok = tools.join(".rocbuild-ok");
    if !ok.exists() {
        reporter.note(&format!("twine from PyPI -> {}", tools.display()));
        let machine_py = rocbuild_probe::probe_python(
            &rocbuild_probe::Venv {
                root: layout.root.clone(),
                chosen_by: "--venv".into(),
            },
            Os::current(),
        )?;
        let pip = crate::pip::installer(&machine_py, "twine")?;
        let install = crate::pip::install_into(&pip, &machine_py, Os::current(), &tools, false)
            .args(["--quiet", TWINE]);
        run(&install, "install twine")?;
        fs_err::write(&ok, "").map_err(EngineError::io("write", &ok))?;
    }
    let mut upload = Command::new(&py)
        .args([
            "-m",
            "twine",
            "upload",
            "--non-interactive",
            "--disable-progress-bar",
        ])
        .args(repository_args(index))
        .arg(built.path.display().to_string());
    upload
        .env
        .insert("PYTHONPATH".into(), tools.display().to_string());
    upload
        .env
        .extend(anonymous_credentials(index, twine_configured));
    reporter.note(&format!("upload {} -> {index}", built.path.display()));
    run(&upload, "upload the wheel").map_err(|e| match e {
        EngineError::Step { tail, .. } => EngineError::Publish {
            index: index.into(),
            wheel: built.path.display().to_string(),
            output: tail,
        },
        e => e,
    })?;
    Ok(Published {
        wheel: built.path,
        version: built.version,
        index: index.into(),
    })
}

/// An open index (pypiserver without authentication, a devpi index open to all) takes any
/// credentials, but twine in non-interactive mode refuses to upload without a username. When
/// the user configured none — no `TWINE_USERNAME`/`TWINE_PASSWORD`, no userinfo in the URL,
/// the index a URL rather than a `~/.pypirc` section — placeholders go: an index that does
/// want credentials answers 401/403, and the error says where credentials are looked up.
/// (`configured`: the settings step found `TWINE_USERNAME` or `TWINE_PASSWORD` set.)
fn anonymous_credentials(index: &str, configured: bool) -> Vec<(String, String)> {
    let is_url = index.contains("://");
    if configured || !is_url || rocbuild_secret::credentials(index).is_some() {
        return Vec::new();
    }
    vec![
        ("TWINE_USERNAME".into(), "anonymous".into()),
        ("TWINE_PASSWORD".into(), "anonymous".into()),
    ]
}

/// Run `cmd` to the end; its output is the error's when it fails.
fn run(cmd: &Command, what: &str) -> Result<()> {
    let out = cmd
        .to_duct()
        .stderr_to_stdout()
        .stdout_capture()
        .stdin_null()
        .unchecked()
        .run()
        .map_err(EngineError::io("run", &cmd.program))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let tail: Vec<&str> = text.lines().rev().take(15).collect();
    Err(EngineError::Step {
        step: what.into(),
        code: out.status.code().map_or("signal".into(), |c| c.to_string()),
        tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        log: String::new(),
        reproduce: cmd.shell_line(),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_index_is_a_url_or_a_pypirc_section() {
        assert_eq!(
            super::repository_args("http://127.0.0.1:8080/"),
            ["--repository-url", "http://127.0.0.1:8080/"]
        );
        assert_eq!(super::repository_args("lab"), ["--repository", "lab"]);
    }
}
