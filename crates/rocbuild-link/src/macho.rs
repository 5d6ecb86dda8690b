//! macOS: LC_RPATH entries (`@loader_path`, …) added to every installed `.dylib` and `.so`,
//! then an ad-hoc re-sign (an edited Mach-O's signature is invalid and arm64 macOS refuses to
//! load it).

use std::path::{Path, PathBuf};

use rocbuild_native::Binary;

use crate::{magic, search_entries, Link, Placement, Relinker, Result};

/// LC_RPATH, added.
pub struct LoaderPath;

impl Relinker for LoaderPath {
    fn plan(&self, at: &Placement<'_>) -> Link {
        Link::MachO {
            rpaths: search_entries("@loader_path", at.dest, at.site, at.finds),
            resign: true,
        }
    }

    /// The `@loader_path/…` entries the file does not have yet.
    fn repair_entries(
        &self,
        site: &Path,
        file: &Path,
        bin: &Binary,
        dirs: &[PathBuf],
    ) -> Vec<String> {
        crate::entries("@loader_path", file.parent().unwrap_or(site), site, dirs)
            .into_iter()
            .filter(|e| !bin.rpath.contains(e))
            .collect()
    }

    fn with_entries(&self, entries: &[String]) -> Option<Link> {
        Some(Link::MachO {
            rpaths: entries.to_vec(),
            resign: true,
        })
    }

    fn apply(&self, link: &Link, file: &Path) -> Result<()> {
        match link {
            Link::MachO { rpaths, .. }
                if matches!(
                    u32::from_be_bytes(magic(file)),
                    0xfeedface | 0xfeedfacf | 0xcefaedfe | 0xcffaedfe | 0xcafebabe
                ) =>
            {
                Ok(rocbuild_native::add_macho_rpaths(file, rpaths)?)
            }
            _ => Ok(()),
        }
    }
}
