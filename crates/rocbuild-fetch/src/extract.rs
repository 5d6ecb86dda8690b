//! Unpacking archives that may have been written by an attacker: `extract_zip_safely` here,
//! the sdist unpacker in `sdist.rs`, and what they share.
//!
//! Every entry is checked before one byte is written. The entries are laid out as a model of
//! the tree they would make ([`Tree`]), and every link in it is followed on paper, through
//! every other link, with a bounded number of hops: a link that leads out of the root, a loop
//! of links, an entry below a link, a hard link to anything but an earlier file, and any device
//! or fifo refuse the whole archive. Then the entries are written into a fresh directory
//! beside the target ([`Staging`]), never through a link, and renamed into place, so a refused
//! or failed archive leaves the target as it was.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::{io, FetchError};

/// Why an entry name would escape the target directory, if it would.
pub(crate) fn unsafe_reason(name: &str) -> Option<&'static str> {
    if name.contains('\0') {
        return Some("a NUL byte in the name");
    }
    if name.starts_with('/') || name.starts_with('\\') {
        return Some("an absolute path");
    }
    let b = name.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Some("a drive letter");
    }
    for part in name.split(['/', '\\']) {
        if part == ".." {
            return Some("a `..` component");
        }
        if part.contains(':') {
            // `a:b` is an NTFS alternate data stream, `C:` a drive: neither is a plain name.
            return Some("a `:` in a path component");
        }
    }
    None
}

/// The most links one path may pass through: Linux's own limit (MAXSYMLINKS), past which the
/// system gives up too, so a longer chain is a loop or meant to look like one.
const MAX_LINKS: usize = 40;

/// The components of an entry's name or a link's target: `/` and `\` both separate them (a
/// Windows host reads `\` as one), and empty and `.` components are dropped; `..` is kept.
pub(crate) fn split(name: &str) -> Vec<String> {
    name.split(['/', '\\'])
        .filter(|p| !p.is_empty() && *p != ".")
        .map(str::to_string)
        .collect()
}

/// What an archive entry makes, as far as unpacking it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    /// A regular file, with its permission bits (rwx only) when the archive records them.
    File {
        mode: Option<u32>,
    },
    /// A symbolic link, with its target as written in the archive.
    Symlink(String),
    /// A hard link to an earlier file, by its components under the root.
    HardLink(Vec<String>),
}

/// One entry: its name as the archive spells it (for messages) and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Planned {
    pub name: String,
    /// Its components under the root it is unpacked into.
    pub rel: Vec<String>,
    pub kind: Kind,
}

/// What the tree holds at one path.
enum Node {
    Dir,
    File,
    Link(String),
}

/// The tree an archive would make, built entry by entry before anything is written, so that
/// links can be followed as the system would follow them: the archive's own entries are the
/// whole of that tree (the staging directory starts empty).
#[derive(Default)]
pub(crate) struct Tree {
    nodes: HashMap<String, Node>,
    /// Every symbolic link, in archive order: (its entry's name, its path).
    links: Vec<(String, Vec<String>)>,
}

fn key(rel: &[String]) -> String {
    rel.join("/")
}

impl Tree {
    /// Adds one entry, or says why it is refused: it would be written below a link or a file,
    /// it replaces a link or an entry of another kind, it is a link whose target cannot be
    /// trusted on its own, or a hard link to anything but an earlier file.
    pub(crate) fn add(&mut self, p: &Planned) -> Result<(), String> {
        if p.rel.is_empty() {
            return match p.kind {
                Kind::Dir => Ok(()),
                _ => Err("is the root it is unpacked into, yet not a directory".into()),
            };
        }
        for i in 1..p.rel.len() {
            let k = key(&p.rel[..i]);
            match self.nodes.get(&k) {
                None => {
                    self.nodes.insert(k, Node::Dir);
                }
                Some(Node::Dir) => {}
                Some(Node::File) => return Err(format!("is below `{k}`, which is a file")),
                Some(Node::Link(_)) => {
                    return Err(format!("would be written through `{k}`, which is a link"))
                }
            }
        }
        let node = match &p.kind {
            Kind::Dir => Node::Dir,
            Kind::File { .. } => Node::File,
            Kind::Symlink(t) => {
                if let Some(why) = link_target_reason(t) {
                    return Err(why);
                }
                Node::Link(t.clone())
            }
            Kind::HardLink(src) => {
                self.hard_link_source(src)?;
                Node::File
            }
        };
        let k = key(&p.rel);
        match (self.nodes.get(&k), &node, &p.kind) {
            (None, ..) | (Some(Node::Dir), Node::Dir, _) => {}
            // A file archived twice: the later one wins, as with tar itself.
            (Some(Node::File), _, Kind::File { .. }) => {}
            (Some(Node::Link(_)), ..) => return Err(format!("replaces the link `{k}`")),
            (Some(_), ..) => return Err(format!("replaces `{k}` with another kind of entry")),
        }
        if matches!(node, Node::Link(_)) {
            self.links.push((p.name.clone(), p.rel.clone()));
        }
        self.nodes.insert(k, node);
        Ok(())
    }

    /// A hard link must name a regular file written before it: linking to a symbolic link
    /// would copy that link (and its target, read from a new place), linking to a later or
    /// missing path would link to whatever is there when it is written.
    fn hard_link_source(&self, src: &[String]) -> Result<(), String> {
        let k = key(src);
        match self.nodes.get(&k) {
            Some(Node::File) => Ok(()),
            Some(Node::Link(_)) => Err(format!("is a hard link to `{k}`, which is a link itself")),
            Some(Node::Dir) => Err(format!("is a hard link to the directory `{k}`")),
            None => Err(format!(
                "is a hard link to `{k}`, which is no file earlier in the archive"
            )),
        }
    }

    /// Follows every link to its end through the whole tree; the first that leads out of the
    /// root or into a loop is refused, with its entry's name and why.
    pub(crate) fn check_links(&self) -> Result<(), (String, String)> {
        for (name, rel) in &self.links {
            self.resolve(rel).map_err(|why| (name.clone(), why))?;
        }
        Ok(())
    }

    /// Whether the link at `rel` ends at a directory (a Windows host makes links to
    /// directories and to files differently).
    pub(crate) fn leads_to_dir(&self, rel: &[String]) -> bool {
        self.resolve(rel).unwrap_or(false)
    }

    /// Walks `rel` as the system would: a link met on the way (the last component included)
    /// is replaced by its target, read from the link's directory, at most [`MAX_LINKS`] times;
    /// `..` above the root is refused. Returns whether the walk ends at a directory.
    fn resolve(&self, rel: &[String]) -> Result<bool, String> {
        let mut at: Vec<String> = Vec::new();
        let mut todo: Vec<String> = rel.iter().rev().cloned().collect();
        let mut hops: Vec<String> = Vec::new();
        while let Some(part) = todo.pop() {
            if part == ".." {
                if at.pop().is_none() {
                    return Err(format!(
                        "is a link that leads outside the directory it is unpacked into ({})",
                        hops.join(", then ")
                    ));
                }
                continue;
            }
            at.push(part);
            let Some(Node::Link(target)) = self.nodes.get(&key(&at)) else {
                continue;
            };
            if hops.len() == MAX_LINKS {
                return Err(format!(
                    "is a link in a loop, or in a chain of more than {MAX_LINKS} links ({}, …)",
                    hops[..3].join(", then ")
                ));
            }
            hops.push(format!("`{}` -> `{target}`", key(&at)));
            at.pop();
            todo.extend(split(target).into_iter().rev());
        }
        Ok(at.is_empty() || matches!(self.nodes.get(&key(&at)), Some(Node::Dir)))
    }
}

/// Why a link's target is refused on its own, if it is: absolute, a drive, an NTFS stream,
/// or `..` after a name. The last is refused because `dir/..` is resolved differently by
/// different systems (Windows drops both lexically, POSIX follows `dir` first, and a
/// case-insensitive file system may find another link under `dir`'s name): with every `..` in
/// front, each link's target starts from a real directory the model knows.
fn link_target_reason(target: &str) -> Option<String> {
    if target.is_empty() {
        return Some("is a link with an empty target".into());
    }
    if target.contains('\0') {
        return Some("is a link with a NUL byte in its target".into());
    }
    let b = target.as_bytes();
    if target.starts_with(['/', '\\'])
        || (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':')
    {
        return Some(format!("is a link to the absolute path `{target}`"));
    }
    let mut named = false;
    for part in split(target) {
        if part == ".." && named {
            return Some(format!(
                "is a link to `{target}`, which climbs back up with `..` after a name"
            ));
        }
        if part.contains(':') {
            return Some(format!(
                "is a link to `{target}`, with a `:` in a component"
            ));
        }
        named |= part != "..";
    }
    None
}

/// Where a refused archive came from, for the help that says what to do instead.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source {
    Sdist,
    Zip,
}

/// The error for an archive refused at `entry`, saying why and what to do.
pub(crate) fn refused(
    source: Source,
    archive: &Path,
    target: &Path,
    entry: &str,
    reason: String,
) -> FetchError {
    let target = target.display();
    let help = match source {
        Source::Sdist => format!(
            "nothing was unpacked and {target} is as it was. This sdist is not safe to unpack: \
             report it to the project, and meanwhile build from its git repository \
             (--source <git URL> --rev <tag>)"
        ),
        Source::Zip => format!(
            "nothing was extracted and {target} is as it was. This archive is malformed or \
             malicious: do not extract it by hand either, and report it to whoever published it"
        ),
    };
    FetchError::UnsafeArchive {
        archive: archive.display().to_string(),
        entry: entry.to_string(),
        reason,
        help,
    }
}

/// A fresh directory beside the target that entries are written into without ever following
/// a link: every directory on the way to an entry was made here by this writer (or checked,
/// without following it, to be a real directory), files are created new (`O_EXCL` never
/// follows a link), and symbolic links are written last, after everything else.
pub(crate) struct Staging {
    dir: tempfile::TempDir,
    made: HashSet<PathBuf>,
}

impl Staging {
    pub(crate) fn beside(target: &Path, prefix: &str) -> Result<Self, FetchError> {
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(io("create", &parent))?;
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(&parent)
            .map_err(io("create a temporary directory in", &parent))?;
        Ok(Self {
            dir,
            made: HashSet::new(),
        })
    }

    /// The directory `rel` under the staging root, each component made here as a real
    /// directory (one already there, e.g. under another case of the same name, must be a
    /// real directory, not a link).
    pub(crate) fn dir(&mut self, rel: &[String]) -> Result<PathBuf, FetchError> {
        let mut p = self.dir.path().to_path_buf();
        for c in rel {
            p.push(c);
            if self.made.contains(&p) {
                continue;
            }
            match std::fs::create_dir(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if !std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
                        return Err(io("write below", &p)(std::io::Error::other(
                            "it is not a real directory",
                        )));
                    }
                }
                Err(e) => return Err(io("create", &p)(e)),
            }
            self.made.insert(p.clone());
        }
        Ok(p)
    }

    /// The path of a new entry at `rel`: its directory made real, nothing there yet.
    fn place(&mut self, rel: &[String]) -> Result<PathBuf, FetchError> {
        let Some((last, parents)) = rel.split_last() else {
            return Err(io("write", self.dir.path())(std::io::Error::other(
                "an entry with an empty name",
            )));
        };
        Ok(self.dir(parents)?.join(last))
    }

    /// A new regular file at `rel`; a file an earlier entry wrote there is replaced (removed,
    /// never written through: it may be a hard link's other name).
    pub(crate) fn create_file(
        &mut self,
        rel: &[String],
    ) -> Result<(std::fs::File, PathBuf), FetchError> {
        let path = self.place(rel)?;
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            std::fs::remove_file(&path).map_err(io("replace", &path))?;
        }
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io("create", &path))?;
        Ok((f, path))
    }

    /// A hard link at `rel` to the file at `src` (written here before, checked again without
    /// following it); a copy where the file system has no hard links.
    pub(crate) fn hard_link(&mut self, rel: &[String], src: &[String]) -> Result<(), FetchError> {
        let from = self.place(src)?;
        if !std::fs::symlink_metadata(&from).is_ok_and(|m| m.is_file()) {
            return Err(io("hard link to", &from)(std::io::Error::other(
                "it is not a regular file",
            )));
        }
        let path = self.place(rel)?;
        std::fs::hard_link(&from, &path)
            .or_else(|_| std::fs::copy(&from, &path).map(|_| ()))
            .map_err(io("create", &path))
    }

    /// A symbolic link at `rel` to `target` (already followed through the model and found
    /// inside), written with `/` between its components (`\` on Windows).
    pub(crate) fn symlink(
        &mut self,
        rel: &[String],
        target: &str,
        is_dir: bool,
    ) -> Result<(), FetchError> {
        let path = self.place(rel)?;
        let parts = split(target);
        let target = if parts.is_empty() {
            ".".to_string()
        } else {
            parts.join("/")
        };
        make_symlink(&target, &path, is_dir).map_err(io("create the link", &path))
    }

    /// Moves the staged tree to `target` (see [`replace_dir`]).
    pub(crate) fn replace(self, target: &Path) -> Result<(), FetchError> {
        replace_dir(self.dir, target)
    }
}

fn make_symlink(target: &str, at: &Path, is_dir: bool) -> std::io::Result<()> {
    let target = target.replace('/', std::path::MAIN_SEPARATOR_STR);
    rocbuild_probe::platform::host::symlink(Path::new(&target), at, is_dir)
}

/// Sets a file's permission bits from the archive through its open handle (no path, so no
/// link, is involved): rwx only, never setuid, setgid or sticky.
pub(crate) fn set_file_mode(
    f: &std::fs::File,
    path: &Path,
    mode: Option<u32>,
) -> Result<(), FetchError> {
    if let Some(m) = mode {
        rocbuild_probe::platform::host::set_file_mode(f, m)
            .map_err(io("set permissions of", path))?;
    }
    Ok(())
}

/// `st_mode`'s file-type bits, as zips made on Unix record them.
const S_IFMT: u32 = 0o170_000;

/// What a zip entry makes, or why it is refused: a device, a fifo or a socket is no file.
fn zip_kind(is_dir: bool, mode: Option<u32>) -> Result<Kind, String> {
    let special = match mode.map_or(0, |m| m & S_IFMT) {
        0o020_000 => "a character device",
        0o060_000 => "a block device",
        0o010_000 => "a fifo (named pipe)",
        0o140_000 => "a socket",
        0o040_000 => return Ok(Kind::Dir),
        0 | 0o100_000 if is_dir => return Ok(Kind::Dir),
        0 | 0o100_000 => {
            return Ok(Kind::File {
                mode: mode.map(|m| m & 0o777),
            })
        }
        other => return Err(format!("is a special file (type {other:o})")),
    };
    Err(format!(
        "is {special}: only files and directories are extracted"
    ))
}

/// Every entry of the zip, checked: names that escape, symlinks (refused outright: zips we
/// read hold none), special files, and the tree they make.
fn zip_plan(
    archive: &mut zip::ZipArchive<std::fs::File>,
    zip_path: &Path,
    target: &Path,
) -> Result<Vec<Planned>, FetchError> {
    let mut plan = Vec::with_capacity(archive.len());
    let mut tree = Tree::default();
    for i in 0..archive.len() {
        let entry = archive.by_index_raw(i).map_err(|e| bad_zip(zip_path, e))?;
        let name = entry.name().to_string();
        let refuse = |reason: &str| FetchError::UnsafeEntry {
            archive: zip_path.display().to_string(),
            entry: name.clone(),
            target: target.display().to_string(),
            reason: reason.to_string(),
        };
        if let Some(reason) = unsafe_reason(&name) {
            return Err(refuse(reason));
        }
        if entry.is_symlink() {
            return Err(refuse("a symbolic link (it could point anywhere)"));
        }
        if entry.enclosed_name().is_none() {
            return Err(refuse(
                "a name the zip reader cannot place inside the target",
            ));
        }
        let unsafe_archive = |why| refused(Source::Zip, zip_path, target, &name, why);
        let kind = zip_kind(entry.is_dir(), entry.unix_mode()).map_err(unsafe_archive)?;
        let p = Planned {
            rel: split(&name),
            name: name.clone(),
            kind,
        };
        tree.add(&p).map_err(unsafe_archive)?;
        plan.push(p);
    }
    Ok(plan)
}

fn bad_zip(zip_path: &Path, e: impl std::fmt::Display) -> FetchError {
    FetchError::BadZip {
        archive: zip_path.display().to_string(),
        reason: e.to_string(),
    }
}

/// Extract `zip_path` into `target` (created, or replaced as a whole), refusing the archive
/// before writing anything if any entry is absolute, has a drive letter, climbs out with
/// `..`, is a symlink, a device or a fifo, or would be written below a file.
pub fn extract_zip_safely(zip_path: &Path, target: &Path) -> Result<PathBuf, FetchError> {
    let file = std::fs::File::open(zip_path).map_err(io("open", zip_path))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| bad_zip(zip_path, e))?;
    let plan = zip_plan(&mut archive, zip_path, target)?;

    let mut staging = Staging::beside(target, ".rocbuild-extract-")?;
    for (i, p) in plan.iter().enumerate() {
        let mode = match p.kind {
            Kind::File { mode } => mode,
            Kind::Dir => {
                staging.dir(&p.rel)?;
                continue;
            }
            // zip_plan refuses links; should one get here, it is refused all the same.
            Kind::Symlink(_) | Kind::HardLink(_) => {
                let why = "is a link".to_string();
                return Err(refused(Source::Zip, zip_path, target, &p.name, why));
            }
        };
        let mut entry = archive.by_index(i).map_err(|e| bad_zip(zip_path, e))?;
        let (mut f, path) = staging.create_file(&p.rel)?;
        std::io::copy(&mut entry, &mut f).map_err(|e| {
            // A full disk is said as such, not as an unreadable archive.
            if rocbuild_probe::space::is_out_of_space(&e) {
                crate::io("write", &path)(e)
            } else {
                bad_zip(zip_path, format!("{}: {e}", p.name))
            }
        })?;
        set_file_mode(&f, &path, mode)?;
    }
    staging.replace(target)?;
    Ok(target.to_path_buf())
}

/// Move the staged tree to `target`; an existing `target` is moved aside first and restored
/// if the move fails, then deleted.
fn replace_dir(staging: tempfile::TempDir, target: &Path) -> Result<(), FetchError> {
    if !target.exists() {
        let staged = staging.keep();
        return std::fs::rename(&staged, target).map_err(|e| {
            let _ = std::fs::remove_dir_all(&staged);
            io("move the extracted files to", target)(e)
        });
    }
    let parent = target.parent().unwrap_or(Path::new("."));
    let aside = tempfile::Builder::new()
        .prefix(".rocbuild-old-")
        .tempdir_in(parent)
        .map_err(io("create a temporary directory in", parent))?;
    let old = aside.path().join("old");
    std::fs::rename(target, &old).map_err(io("move aside", target))?;
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, target) {
        let _ = std::fs::rename(&old, target);
        let _ = std::fs::remove_dir_all(&staged);
        return Err(io("move the extracted files to", target)(e));
    }
    // `aside` (holding the old tree) is removed when dropped.
    drop(aside);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{link_target_reason, split, unsafe_reason, Kind, Planned, Tree, MAX_LINKS};

    fn entry(name: &str, kind: Kind) -> Planned {
        Planned {
            name: name.to_string(),
            rel: split(name),
            kind,
        }
    }

    #[test]
    fn a_chain_as_long_as_the_system_follows_is_followed_and_one_more_link_is_a_loop() {
        for (n, ok) in [(MAX_LINKS, true), (MAX_LINKS + 1, false)] {
            let mut t = Tree::default();
            t.add(&entry("f", Kind::File { mode: None })).unwrap();
            for i in 0..n {
                let next = if i + 1 < n {
                    format!("l{}", i + 1)
                } else {
                    "f".into()
                };
                t.add(&entry(&format!("l{i}"), Kind::Symlink(next)))
                    .unwrap();
            }
            let r = t.check_links();
            assert_eq!(r.is_ok(), ok, "{n} links: {r:?}");
            if let Err((name, why)) = r {
                assert_eq!(name, "l0");
                assert!(why.contains("a link in a loop"), "{why}");
            }
        }
    }

    #[test]
    fn link_targets_refused_on_their_own() {
        for (t, why) in [
            ("/etc/passwd", "absolute"),
            ("\\server\\share", "absolute"),
            ("C:/Windows", "absolute"),
            ("a/../b", "`..` after a name"),
            ("../a/./../b", "`..` after a name"),
            ("lib/a:stream", "`:`"),
            ("", "empty"),
        ] {
            let r = link_target_reason(t).unwrap_or_else(|| panic!("{t} accepted"));
            assert!(r.contains(why), "{t}: {r}");
        }
        for ok in ["a", "../../a/b", "./a", ".", "..", "a/./b"] {
            assert_eq!(link_target_reason(ok), None, "{ok}");
        }
    }

    #[test]
    fn names_that_escape() {
        for (name, why) in [
            ("../evil.dll", "`..`"),
            ("ffmpeg/../../evil", "`..`"),
            ("ffmpeg\\..\\..\\evil", "`..`"),
            ("/etc/passwd", "absolute"),
            ("\\Windows\\System32\\x.dll", "absolute"),
            ("C:/Windows/x.dll", "drive letter"),
            ("c:evil", "drive letter"),
            ("bin/avutil.dll:stream", "`:`"),
        ] {
            let r = unsafe_reason(name).unwrap_or_else(|| panic!("{name} accepted"));
            assert!(r.contains(why), "{name}: {r}");
        }
        for ok in [
            "ffmpeg-7.1.1/bin/avutil-59.dll",
            "a/./b",
            "dir/",
            "..hidden/file",
            "x..y",
        ] {
            assert_eq!(unsafe_reason(ok), None, "{ok}");
        }
    }
}
