//! A release's source distribution, pinned by its sha256: a file already in a directory of
//! sdists (offline), and the safe unpacking of one.

use std::path::{Path, PathBuf};

use crate::extract::{refused, set_file_mode, split, Kind, Planned, Source, Staging, Tree};
use crate::{io, FetchError};

/// The file name an sdist of `project` `version` has (PEP 625: the normalized name with `_`).
pub fn sdist_file_name(project: &str, version: &str) -> String {
    let mut name = String::new();
    let mut last_sep = false;
    for c in project.chars() {
        if c == '-' || c == '_' || c == '.' {
            if !last_sep {
                name.push('_');
            }
            last_sep = true;
        } else {
            name.push(c.to_ascii_lowercase());
            last_sep = false;
        }
    }
    format!("{name}-{version}.tar.gz")
}

/// The sdist in one of `dirs` (its PEP 625 name, or the project's name as written), if its
/// sha256 is `sha256`. A file with another sha256 is an error: it would otherwise be
/// silently replaced by a download.
pub fn find_offline(
    dirs: &[PathBuf],
    project: &str,
    version: &str,
    sha256: &str,
) -> Result<Option<PathBuf>, FetchError> {
    let names = [
        sdist_file_name(project, version),
        format!("{project}-{version}.tar.gz"),
    ];
    for d in dirs {
        for n in &names {
            let p = d.join(n);
            if !p.is_file() {
                continue;
            }
            let got = crate::sha256_file(&p)?;
            if got != sha256.to_ascii_lowercase() {
                return Err(FetchError::ChecksumMismatch {
                    url: p.display().to_string(),
                    expected: sha256.to_string(),
                    actual: got,
                });
            }
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// Unpack the `.tar.gz` at `archive` into `target` (replaced as a whole), without its single
/// top directory (`name-1.0/`). Every entry is checked before one byte is written (see
/// `extract.rs`): no absolute path, no `..`, no link that leads out of the top directory
/// through however many other links, no loop of links, nothing written through a link, no
/// hard link but to an earlier file, no device or fifo; setuid, setgid and sticky bits are
/// dropped. A refused or failed archive leaves `target` as it was.
pub fn extract_sdist(archive: &Path, target: &Path) -> Result<PathBuf, FetchError> {
    let cx = Ctx { archive, target };
    let plan = cx.plan()?;
    let mut staging = Staging::beside(target, ".sdist-")?;
    cx.write(&plan, &mut staging)?;
    staging.replace(target)?;
    Ok(target.to_path_buf())
}

type TarGz = tar::Archive<flate2::read::GzDecoder<std::fs::File>>;

/// The entries to write and the tree they make.
struct Plan {
    entries: Vec<Planned>,
    tree: Tree,
}

/// One sdist being unpacked: where from and where to, for every message.
struct Ctx<'a> {
    archive: &'a Path,
    target: &'a Path,
}

impl Ctx<'_> {
    fn bad(&self, reason: impl std::fmt::Display) -> FetchError {
        FetchError::BadArchive {
            archive: self.archive.display().to_string(),
            reason: reason.to_string(),
        }
    }

    fn refuse(&self, entry: &str, reason: String) -> FetchError {
        refused(Source::Sdist, self.archive, self.target, entry, reason)
    }

    fn open(&self) -> Result<TarGz, FetchError> {
        let f = std::fs::File::open(self.archive).map_err(io("open", self.archive))?;
        Ok(tar::Archive::new(flate2::read::GzDecoder::new(f)))
    }

    /// First pass: every entry described, placed under the top directory and added to the
    /// tree, then every link followed through it.
    fn plan(&self) -> Result<Plan, FetchError> {
        let mut top = None;
        let mut plan = Plan {
            entries: Vec::new(),
            tree: Tree::default(),
        };
        for entry in self.open()?.entries().map_err(|e| self.bad(e))? {
            let entry = entry.map_err(|e| self.bad(e))?;
            let Some(p) = self.describe(&entry, &mut top)? else {
                continue;
            };
            plan.tree.add(&p).map_err(|why| self.refuse(&p.name, why))?;
            plan.entries.push(p);
        }
        if top.is_none() {
            return Err(self.bad("it is empty"));
        }
        let links = plan.tree.check_links();
        links.map_err(|(entry, why)| self.refuse(&entry, why))?;
        Ok(plan)
    }

    /// Second pass: the archive read again, each entry checked to be the one planned (the
    /// file may have been replaced in between), written; symbolic links last.
    fn write(&self, plan: &Plan, staging: &mut Staging) -> Result<(), FetchError> {
        let changed = || self.bad("it changed while it was being unpacked");
        let mut planned = plan.entries.iter();
        let mut top = None;
        for entry in self.open()?.entries().map_err(|e| self.bad(e))? {
            let mut entry = entry.map_err(|e| self.bad(e))?;
            let Some(p) = self.describe(&entry, &mut top)? else {
                continue;
            };
            if planned.next() != Some(&p) {
                return Err(changed());
            }
            match &p.kind {
                Kind::Dir => {
                    staging.dir(&p.rel)?;
                }
                Kind::File { mode } => {
                    let (mut f, path) = staging.create_file(&p.rel)?;
                    std::io::copy(&mut entry, &mut f).map_err(|e| {
                        // A full disk is said as such, not as an unreadable archive.
                        if rocbuild_probe::space::is_out_of_space(&e) {
                            crate::io("write", &path)(e)
                        } else {
                            self.bad(format!("{}: {e}", p.name))
                        }
                    })?;
                    set_file_mode(&f, &path, *mode)?;
                }
                Kind::HardLink(src) => staging.hard_link(&p.rel, src)?,
                Kind::Symlink(_) => {}
            }
        }
        if planned.next().is_some() {
            return Err(changed());
        }
        for p in &plan.entries {
            if let Kind::Symlink(t) = &p.kind {
                staging.symlink(&p.rel, t, plan.tree.leads_to_dir(&p.rel))?;
            }
        }
        Ok(())
    }

    /// The entry as unpacking sees it, placed under the top directory (which becomes the
    /// root: the top directory's own entry has no components), or why the archive is refused;
    /// `None` for a pax global header (it describes the archive, as `git archive` writes it)
    /// and for `./`.
    fn describe<R: std::io::Read>(
        &self,
        entry: &tar::Entry<R>,
        top: &mut Option<String>,
    ) -> Result<Option<Planned>, FetchError> {
        let ty = entry.header().entry_type();
        if ty.is_pax_global_extensions() {
            return Ok(None);
        }
        let name = utf8(entry.path_bytes().into_owned())
            .map_err(|lossy| self.refuse(&lossy, "has a name that is not UTF-8".into()))?;
        if let Some(why) = crate::extract::unsafe_reason(&name) {
            let why = format!("is named to be written outside the target: {why}");
            return Err(self.refuse(&name, why));
        }
        let mut rel = split(&name);
        if rel.is_empty() {
            // `./`: the archive's root, above the top directory.
            if ty.is_dir() {
                return Ok(None);
            }
            let why = "is the archive's root, yet not a directory".to_string();
            return Err(self.refuse(&name, why));
        }
        let first = rel.remove(0);
        match top {
            None => *top = Some(first),
            Some(t) if *t != first => {
                return Err(self.bad(format!("more than one top directory ({t}, {first})")))
            }
            Some(_) => {}
        }
        let kind = self.kind(entry, &name, top.as_deref().unwrap_or_default())?;
        Ok(Some(Planned { name, rel, kind }))
    }

    /// What the entry `name` makes: a directory, a file, or a link (a hard link's target
    /// placed under the top directory `top`); a device or a fifo is refused.
    fn kind<R: std::io::Read>(
        &self,
        entry: &tar::Entry<R>,
        name: &str,
        top: &str,
    ) -> Result<Kind, FetchError> {
        let ty = entry.header().entry_type();
        if ty.is_dir() {
            return Ok(Kind::Dir);
        }
        if ty.is_file() || ty.is_contiguous() || ty.is_gnu_sparse() {
            let mode = entry.header().mode().map_err(|e| self.bad(e))?;
            return Ok(Kind::File {
                mode: Some(mode & 0o777),
            });
        }
        if !(ty.is_symlink() || ty.is_hard_link()) {
            return Err(self.refuse(name, special(ty)));
        }
        let link = entry.link_name_bytes().map(|b| b.into_owned());
        let link = utf8(link.unwrap_or_default())
            .map_err(|_| self.refuse(name, "is a link to a name that is not UTF-8".into()))?;
        if ty.is_symlink() {
            return Ok(Kind::Symlink(link));
        }
        if let Some(why) = crate::extract::unsafe_reason(&link) {
            return Err(self.refuse(name, format!("is a hard link to `{link}`: {why}")));
        }
        let mut src = split(&link);
        if src.first().map(String::as_str) != Some(top) {
            let why = format!("is a hard link to `{link}`, outside the top directory `{top}`");
            return Err(self.refuse(name, why));
        }
        src.remove(0);
        Ok(Kind::HardLink(src))
    }
}

/// The name, or its lossy spelling as the error.
fn utf8(bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Why an entry that is neither a file, a directory nor a link is refused.
fn special(ty: tar::EntryType) -> String {
    let what = if ty.is_character_special() {
        "a character device".to_string()
    } else if ty.is_block_special() {
        "a block device".to_string()
    } else if ty.is_fifo() {
        "a fifo (named pipe)".to_string()
    } else {
        format!("a special entry (tar type {:?})", ty.as_byte() as char)
    };
    format!("is {what}: only files, directories and links are unpacked")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pep_625_names() {
        assert_eq!(
            sdist_file_name("llama-cpp-python", "0.3.36"),
            "llama_cpp_python-0.3.36.tar.gz"
        );
        assert_eq!(
            sdist_file_name("Foo.Bar__baz", "1.0"),
            "foo_bar_baz-1.0.tar.gz"
        );
    }

    fn targz(dir: &Path, entries: &[(&str, &[u8])]) -> PathBuf {
        let p = dir.join("a.tar.gz");
        let f = std::fs::File::create(&p).unwrap();
        let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
            f,
            flate2::Compression::fast(),
        ));
        for (name, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            // Written raw: `set_path` itself refuses `..`, which is what is being tested.
            let bytes = name.as_bytes();
            h.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap();
        p
    }

    #[test]
    fn an_sdist_is_unpacked_without_its_top_directory_and_a_bad_one_not_at_all() {
        let t = tempfile::tempdir().unwrap();
        let good = targz(
            t.path(),
            &[("pkg-1.0/setup.py", b"x"), ("pkg-1.0/src/a.c", b"int a;")],
        );
        let target = t.path().join("out");
        extract_sdist(&good, &target).unwrap();
        assert_eq!(std::fs::read(target.join("src/a.c")).unwrap(), b"int a;");
        let evil = targz(
            t.path(),
            &[("pkg-1.0/setup.py", b"x"), ("pkg-1.0/../../escape", b"!")],
        );
        let target2 = t.path().join("out2");
        assert!(matches!(
            extract_sdist(&evil, &target2),
            Err(FetchError::UnsafeArchive { .. })
        ));
        assert!(!target2.exists() && !t.path().join("escape").exists());
    }

    #[test]
    fn an_offline_file_with_another_checksum_is_refused() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("pkg-1.0.tar.gz"), b"not it").unwrap();
        let found = find_offline(&[t.path().to_path_buf()], "pkg", "1.0", &"0".repeat(64));
        assert!(matches!(found, Err(FetchError::ChecksumMismatch { .. })));
        assert!(
            find_offline(&[t.path().to_path_buf()], "pkg", "2.0", &"0".repeat(64))
                .unwrap()
                .is_none()
        );
    }
}
