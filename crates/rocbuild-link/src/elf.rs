//! Linux: DT_RUNPATH on every installed ELF file (`$ORIGIN`, torch's lib dir relative to it,
//! outside directories absolute).

use std::path::{Path, PathBuf};

use rocbuild_native::Binary;

use crate::{magic, search_entries, Link, Placement, Relinker, Result};

/// DT_RUNPATH, rewritten.
pub struct Runpath;

impl Relinker for Runpath {
    fn plan(&self, at: &Placement<'_>) -> Link {
        Link::Runpath {
            entries: search_entries("$ORIGIN", at.dest, at.site, at.finds),
        }
    }

    /// The file's RUNPATH (or its old RPATH), then each new `$ORIGIN/…` entry.
    fn repair_entries(
        &self,
        site: &Path,
        file: &Path,
        bin: &Binary,
        dirs: &[PathBuf],
    ) -> Vec<String> {
        let mut all = if bin.runpath.is_empty() {
            bin.rpath.clone()
        } else {
            bin.runpath.clone()
        };
        for e in crate::entries("$ORIGIN", file.parent().unwrap_or(site), site, dirs) {
            if !all.contains(&e) {
                all.push(e);
            }
        }
        all
    }

    fn with_entries(&self, entries: &[String]) -> Option<Link> {
        Some(Link::Runpath {
            entries: entries.to_vec(),
        })
    }

    fn apply(&self, link: &Link, file: &Path) -> Result<()> {
        match link {
            Link::Runpath { entries } if magic(file) == *b"\x7fELF" => {
                Ok(rocbuild_native::set_runpath(file, entries)?)
            }
            _ => Ok(()),
        }
    }
}
