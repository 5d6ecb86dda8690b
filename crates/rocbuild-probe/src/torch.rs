//! torch, read from its files: importing a PyPI CUDA torch needs its nvidia wheels, and a
//! broken torch can crash the importer.

use std::path::Path;

use crate::{Flavor, Torch};

/// Read one `name = 'value'` / `name: Optional[str] = 'value'` assignment from version.py.
fn assignment(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (lhs, rhs) = line.split_once('=')?;
        let lhs = lhs.split(':').next()?.trim();
        if lhs != name {
            return None;
        }
        let v = rhs.trim();
        if v == "None" {
            return None;
        }
        Some(v.trim_matches(|c| c == '\'' || c == '"').to_string())
    })
}

/// What torch/version.py says: the light probe `status` uses (one small file read, no
/// library parsing, no import).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorchVersion {
    pub version: String,
    pub git_version: Option<String>,
    pub cuda: Option<String>,
    pub hip: Option<String>,
}

/// Read `site/torch/version.py` (None when there is no torch package).
pub fn torch_version(site: &Path) -> Option<TorchVersion> {
    let file = site.join("torch").join("version.py");
    // A regular file only: a FIFO planted there would block the read for ever.
    if !file.is_file() {
        return None;
    }
    let text = crate::read_text(file).ok()?;
    Some(TorchVersion {
        version: assignment(&text, "__version__")?,
        git_version: assignment(&text, "git_version"),
        cuda: assignment(&text, "cuda"),
        hip: assignment(&text, "hip"),
    })
}

/// torch as installed in `site` (None when there is no torch package).
pub fn probe_torch(site: &Path) -> Option<Torch> {
    let dir = site.join("torch");
    let TorchVersion {
        version,
        git_version,
        cuda,
        hip,
    } = torch_version(site)?;
    let flavor = if hip.is_some() {
        Flavor::Rocm
    } else if cuda.is_some() {
        Flavor::Cuda
    } else {
        Flavor::Cpu
    };
    let lib = dir.join("lib");
    let cxx11_abi = ["libc10.so", "libc10.dylib"]
        .iter()
        .map(|n| lib.join(n))
        .find(|p| p.exists())
        .and_then(|p| rocbuild_native::exports_cxx11_abi(&p).ok());
    Some(Torch {
        version,
        git_version,
        cuda,
        hip,
        flavor,
        cxx11_abi,
        include: dir.join("include"),
        cmake: dir.join("share").join("cmake"),
        lib,
        dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_version_py_without_importing() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("torch");
        std::fs::create_dir_all(&t).unwrap();
        std::fs::write(
            t.join("version.py"),
            "__version__ = '2.9.1+rocm6.4'\ncuda: Optional[str] = None\ngit_version = 'abc'\nhip: Optional[str] = '6.4.1'\n",
        )
        .unwrap();
        let torch = probe_torch(d.path()).unwrap();
        assert_eq!(torch.version, "2.9.1+rocm6.4");
        assert_eq!(torch.flavor, Flavor::Rocm);
        assert_eq!(torch.hip.as_deref(), Some("6.4.1"));
        assert_eq!(torch.cuda, None);
        assert_eq!(torch.git_version.as_deref(), Some("abc"));
        assert!(probe_torch(&d.path().join("nothing")).is_none());
    }
}
