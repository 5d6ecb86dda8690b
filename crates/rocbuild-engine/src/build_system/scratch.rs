//! Where the compilers write their temporary files during a build.
//!
//! hipcc (clang's HIP driver) leaves an empty `<file>-XXXXXX` directory in the temp dir for
//! every source file and GPU arch it compiles, and CMake's compiler check one more: a
//! CTranslate2 build for several archs leaves thousands in the user's `/tmp`. A HIP build's
//! temporaries (one device object per arch before bundling) can also outgrow a RAM-backed
//! `/tmp`. So the build's commands get a directory of the build tree as their temp dir, on
//! the cache's disk, emptied when the next build in that tree starts (kept until then, so that
//! a failed step's printed reproduce command, which sets it, works as pasted). The variable
//! names are the host's: the compilers run on the host, whatever OS the venv is for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocbuild_probe::Os;
use serde::Serialize;

use crate::command::Command;
use crate::paths::join;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scratch {
    /// Emptied (or made) before the first step of a build.
    pub dir: PathBuf,
    /// Set on every configure, build and install command of the build and its dependencies.
    pub env: BTreeMap<String, String>,
}

impl Scratch {
    /// `cmd` with the temp dir variables set.
    pub fn apply(&self, cmd: &Command) -> Command {
        let mut cmd = cmd.clone();
        cmd.env.extend(self.env.clone());
        cmd
    }
}

pub fn plan(host: Os, build_dir: &Path) -> Scratch {
    let dir = join(host, build_dir, &[".tmp"]);
    let names = host.rules().temp_dir_vars();
    let env = names
        .iter()
        .map(|n| (n.to_string(), dir.display().to_string()))
        .collect();
    Scratch { dir, env }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temp_dir_is_in_the_build_tree_under_the_hosts_own_names() {
        let linux = plan(Os::Linux, Path::new("/c/build/x"));
        assert_eq!(linux.dir, Path::new("/c/build/x/.tmp"));
        assert_eq!(linux.env.keys().collect::<Vec<_>>(), ["TMPDIR"]);
        let mac = plan(Os::Macos, Path::new("/c/build/x"));
        assert_eq!(mac.env.keys().collect::<Vec<_>>(), ["TMPDIR"]);
        let win = plan(Os::Windows, Path::new(r"C:\c\build\x"));
        assert_eq!(win.dir.display().to_string(), r"C:\c\build\x\.tmp");
        assert_eq!(win.env.keys().collect::<Vec<_>>(), ["TEMP", "TMP"]);
        assert!(win.env.values().all(|v| v == r"C:\c\build\x\.tmp"));
    }
}
