//! Archives an attacker could have written, built for real with the `tar` and `zip` crates:
//! links that lead out through other links, loops, files written through a linked
//! directory, hard links out or to links, devices and fifos, setuid bits. Each is refused
//! before anything is written, naming the entry and why, and leaves both the target and a
//! canary directory beside it exactly as they were; a benign sdist with internal links still
//! unpacks as written.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use miette::Diagnostic;
use rocbuild_fetch::{extract_sdist, extract_zip_safely, FetchError};

/// One entry of a test archive.
enum E<'a> {
    File(&'a str, &'a [u8], u32),
    Dir(&'a str, u32),
    Sym(&'a str, &'a str),
    Hard(&'a str, &'a str),
    Special(&'a str, tar::EntryType),
    /// A pax global header, as `git archive` writes first.
    Global(&'a str),
}

fn targz(path: &Path, entries: &[E]) {
    let f = std::fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    for e in entries {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(0);
        match e {
            E::File(name, data, mode) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(*mode);
                h.set_size(data.len() as u64);
                b.append_data(&mut h, name, *data).unwrap();
            }
            E::Dir(name, mode) => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(*mode);
                b.append_data(&mut h, name, std::io::empty()).unwrap();
            }
            E::Sym(name, to) | E::Hard(name, to) => {
                let ty = match e {
                    E::Sym(..) => tar::EntryType::Symlink,
                    _ => tar::EntryType::Link,
                };
                h.set_entry_type(ty);
                b.append_link(&mut h, name, to).unwrap();
            }
            E::Special(name, ty) => {
                h.set_entry_type(*ty);
                h.set_device_major(1).unwrap();
                h.set_device_minor(3).unwrap();
                b.append_data(&mut h, name, std::io::empty()).unwrap();
            }
            E::Global(comment) => {
                let body = pax_record("comment", comment);
                h.set_entry_type(tar::EntryType::XGlobalHeader);
                h.set_size(body.len() as u64);
                b.append_data(&mut h, "pax_global_header", body.as_bytes())
                    .unwrap();
            }
        }
    }
    b.into_inner().unwrap().finish().unwrap();
}

/// `LEN key=value\n`, LEN counting the whole record.
fn pax_record(key: &str, value: &str) -> String {
    let rest = format!(" {key}={value}\n");
    let mut len = rest.len() + 1;
    while format!("{len}{rest}").len() != len {
        len += 1;
    }
    format!("{len}{rest}")
}

/// A scratch layout: `work/out` (the target, already holding the user's `keep.txt`) beside
/// `work/canary` (what an escaping link would reach: `../canary` from the target's root), the
/// archives outside `work`.
struct Scene {
    dir: tempfile::TempDir,
}

impl Scene {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join("out")).unwrap();
        std::fs::create_dir_all(work.join("canary")).unwrap();
        std::fs::write(work.join("out/keep.txt"), b"mine").unwrap();
        std::fs::write(work.join("canary/secret"), b"canary").unwrap();
        Scene { dir }
    }
    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }
    fn target(&self) -> PathBuf {
        self.work().join("out")
    }
    fn archive(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// Everything under `dir`, links not followed: path -> kind, mode and content or target.
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode();
            let what = if m.file_type().is_symlink() {
                format!("link -> {}", std::fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                todo.push(p.clone());
                format!("dir {mode:o}")
            } else {
                let body = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
                format!("file {mode:o} {body}")
            };
            out.insert(rel, what);
        }
    }
    out
}

/// Unpacks `entries` as an sdist into the scene's target, expecting a refusal naming
/// `entry` for a reason holding `why`, with nothing changed under `work/`.
fn refused_sdist(entries: &[E], entry: &str, why: &str) -> FetchError {
    let s = Scene::new();
    let archive = s.archive("evil-1.0.tar.gz");
    targz(&archive, entries);
    let before = snapshot(&s.work());
    let err = extract_sdist(&archive, &s.target()).expect_err("a hostile sdist was unpacked");
    match &err {
        FetchError::UnsafeArchive {
            entry: e, reason, ..
        } => {
            assert_eq!(e, entry, "{err}");
            assert!(reason.contains(why), "{reason}");
        }
        other => panic!("not refused as unsafe: {other:?}"),
    }
    assert_eq!(
        snapshot(&s.work()),
        before,
        "the target or the canary beside it changed, or something was left behind"
    );
    err
}

#[test]
fn a_chain_of_two_links_that_leads_out_is_refused() {
    // `a` alone is harmless, `lib/up` alone climbs one level above `lib`: the two together
    // reach `work/canary`.
    let err = refused_sdist(
        &[
            E::File("evil-1.0/setup.py", b"", 0o644),
            E::Sym("evil-1.0/a", "lib/up"),
            E::Sym("evil-1.0/lib/up", "../../canary"),
        ],
        "evil-1.0/a",
        "leads outside the directory it is unpacked into",
    );
    let FetchError::UnsafeArchive { reason, .. } = &err else {
        unreachable!()
    };
    assert!(
        reason.contains("`a` -> `lib/up`, then `lib/up` -> `../../canary`"),
        "{reason}"
    );
    // A link to the directory the target is in, one level up: out of it all the same.
    refused_sdist(
        &[E::Sym("evil-1.0/up", "..")],
        "evil-1.0/up",
        "leads outside",
    );
}

#[test]
fn a_link_through_a_link_to_a_directory_is_refused() {
    // `d` is a link to a directory that is itself a link; `d`'s own target has no `..`.
    refused_sdist(
        &[
            E::Dir("evil-1.0/", 0o755),
            E::Sym("evil-1.0/x/y/parent", "../.."),
            E::Sym("evil-1.0/x/y/d", "parent/../canary"),
        ],
        "evil-1.0/x/y/d",
        "`..` after a name",
    );
    refused_sdist(
        &[
            E::Sym("evil-1.0/x/parent", ".."),
            E::Sym("evil-1.0/x/d", "parent"),
            E::Sym("evil-1.0/e", "x/d/../canary"),
        ],
        "evil-1.0/e",
        "`..` after a name",
    );
    refused_sdist(
        &[
            E::Sym("evil-1.0/x/parent", ".."),
            E::Sym("evil-1.0/x/d", "parent"),
            E::Sym("evil-1.0/e", "x/d/up"),
            E::Sym("evil-1.0/up", "../canary"),
        ],
        "evil-1.0/e",
        "`x/d` -> `parent`, then `x/parent` -> `..`, then `up` -> `../canary`",
    );
}

#[test]
fn a_file_written_through_a_linked_directory_is_refused() {
    // The link alone passes a per-link `..` count; the file below it would land in the canary.
    refused_sdist(
        &[
            E::Sym("evil-1.0/sub/dir", "../../canary"),
            E::File("evil-1.0/sub/dir/secret", b"pwned", 0o644),
        ],
        "evil-1.0/sub/dir/secret",
        "would be written through `sub/dir`, which is a link",
    );
    // Even through a link that stays inside: nothing is ever written through a link.
    refused_sdist(
        &[
            E::Dir("evil-1.0/real/", 0o755),
            E::Sym("evil-1.0/alias", "real"),
            E::File("evil-1.0/alias/f", b"x", 0o644),
        ],
        "evil-1.0/alias/f",
        "written through `alias`",
    );
}

#[test]
fn a_hard_link_to_a_file_outside_is_refused() {
    // A tar hard link names its source from the archive's root.
    refused_sdist(
        &[
            E::File("evil-1.0/setup.py", b"", 0o644),
            E::Hard("evil-1.0/h", "../canary/secret"),
        ],
        "evil-1.0/h",
        "is a hard link to `../canary/secret`: a `..` component",
    );
    refused_sdist(
        &[
            E::File("other/x", b"", 0o644),
            E::Hard("other/h", "evil-1.0/x"),
        ],
        "other/h",
        "outside the top directory",
    );
    refused_sdist(
        &[
            E::Hard("evil-1.0/h", "evil-1.0/later"),
            E::File("evil-1.0/later", b"", 0o644),
        ],
        "evil-1.0/h",
        "no file earlier in the archive",
    );
}

#[test]
fn a_hard_link_to_a_link_is_refused() {
    // The link leads out on its own; the hard link would make a second one.
    refused_sdist(
        &[
            E::Sym("evil-1.0/sub/s", "../../canary/secret"),
            E::Hard("evil-1.0/h", "evil-1.0/sub/s"),
        ],
        "evil-1.0/h",
        "is a hard link to `sub/s`, which is a link itself",
    );
    // This link stays inside where it is, but its copy one level up would not.
    refused_sdist(
        &[
            E::File("evil-1.0/README", b"", 0o644),
            E::Sym("evil-1.0/a/s", "../README"),
            E::Hard("evil-1.0/h", "evil-1.0/a/s"),
        ],
        "evil-1.0/h",
        "which is a link itself",
    );
}

#[test]
fn a_loop_of_links_is_refused() {
    refused_sdist(
        &[E::Sym("evil-1.0/a", "b"), E::Sym("evil-1.0/b", "a")],
        "evil-1.0/a",
        "a link in a loop",
    );
    refused_sdist(
        &[E::Sym("evil-1.0/d/self", "../d/self")],
        "evil-1.0/d/self",
        "a link in a loop",
    );
}

#[test]
fn devices_and_fifos_are_refused() {
    for (ty, why) in [
        (tar::EntryType::Char, "is a character device"),
        (tar::EntryType::Block, "is a block device"),
        (tar::EntryType::Fifo, "is a fifo"),
    ] {
        let err = refused_sdist(
            &[
                E::File("evil-1.0/setup.py", b"", 0o644),
                E::Special("evil-1.0/dev", ty),
            ],
            "evil-1.0/dev",
            why,
        );
        assert!(
            err.to_string()
                .contains("only files, directories and links"),
            "{err}"
        );
    }
}

#[test]
fn a_refusal_says_which_archive_which_entry_why_and_what_to_do() {
    let s = Scene::new();
    let archive = s.archive("evil-1.0.tar.gz");
    targz(
        &archive,
        &[E::Sym("evil-1.0/a", "b"), E::Sym("evil-1.0/b", "a")],
    );
    let err = extract_sdist(&archive, &s.target()).unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with(&archive.display().to_string()), "{text}");
    assert!(
        text.contains("is not safe to unpack: its entry `evil-1.0/a` is a link in a loop"),
        "{text}"
    );
    let help = err.help().map(|h| h.to_string()).unwrap_or_default();
    assert!(
        help.contains(&format!(
            "nothing was unpacked and {} is as it was",
            s.target().display()
        )) && help.contains("report it to the project")
            && help.contains("--rev"),
        "{help}"
    );
    assert_eq!(
        err.code().map(|c| c.to_string()).as_deref(),
        Some("rocbuild::fetch::unsafe_archive")
    );
}

#[test]
fn setuid_setgid_and_sticky_bits_are_dropped() {
    let s = Scene::new();
    let archive = s.archive("pkg-1.0.tar.gz");
    targz(
        &archive,
        &[
            E::Dir("pkg-1.0/", 0o755),
            E::File("pkg-1.0/tool", b"#!/bin/sh\n", 0o4755),
            E::File("pkg-1.0/group", b"", 0o2755),
            E::File("pkg-1.0/sticky", b"", 0o1644),
            E::Dir("pkg-1.0/shared", 0o3777),
        ],
    );
    extract_sdist(&archive, &s.target()).unwrap();
    let got = snapshot(&s.target());
    assert_eq!(got["tool"], "file 100755 #!/bin/sh\n");
    assert_eq!(got["group"], "file 100755 ");
    assert_eq!(got["sticky"], "file 100644 ");
    let dir = got["shared"].strip_prefix("dir ").unwrap();
    assert_eq!(u32::from_str_radix(dir, 8).unwrap() & 0o7000, 0, "{dir}");
}

#[test]
fn a_benign_sdist_with_internal_links_unpacks_as_written() {
    let s = Scene::new();
    let archive = s.archive("pkg-1.0.tar.gz");
    targz(
        &archive,
        &[
            E::Global("d7c0d1e5a2b4c6e8f0a1b3c5d7e9f1a3b5c7d9e1"),
            E::Dir("pkg-1.0/", 0o755),
            E::File("pkg-1.0/README", b"read me", 0o644),
            E::File("pkg-1.0/lib/libfoo.so.1", b"ELF", 0o755),
            E::Sym("pkg-1.0/lib/libfoo.so", "libfoo.so.1"),
            E::Sym("pkg-1.0/lib/libfoo.so.0", "./libfoo.so"),
            E::Sym("pkg-1.0/chain", "lib/libfoo.so"),
            // A link to a directory written before the directory's own entries.
            E::Sym("pkg-1.0/include", "src/include"),
            E::File("pkg-1.0/src/include/foo.h", b"int foo;", 0o644),
            E::Sym("pkg-1.0/src/include/top", "../.."),
            E::Sym("pkg-1.0/docs/readme", "../README"),
            E::Sym("pkg-1.0/here", "."),
            E::Hard("pkg-1.0/README.copy", "pkg-1.0/README"),
        ],
    );
    let canary = snapshot(&s.work().join("canary"));
    extract_sdist(&archive, &s.target()).unwrap();
    let t = s.target();
    let read = |p: &str| std::fs::read(t.join(p)).unwrap();
    let link = |p: &str| std::fs::read_link(t.join(p)).unwrap();
    assert_eq!(read("chain"), b"ELF");
    assert_eq!(read("lib/libfoo.so.0"), b"ELF");
    assert_eq!(link("lib/libfoo.so.0"), Path::new("libfoo.so"));
    assert_eq!(read("include/foo.h"), b"int foo;");
    assert_eq!(read("src/include/top/README"), b"read me");
    assert_eq!(read("docs/readme"), b"read me");
    assert_eq!(link("docs/readme"), Path::new("../README"));
    assert_eq!(read("here/here/lib/libfoo.so"), b"ELF");
    assert_eq!(read("README.copy"), b"read me");
    assert_eq!(snapshot(&t)["lib/libfoo.so.1"], "file 100755 ELF");
    assert!(
        !t.join("keep.txt").exists(),
        "the target is replaced as a whole"
    );
    assert!(!t.join("pax_global_header").exists());
    let mut left: Vec<_> = std::fs::read_dir(s.work())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["canary", "out"], "staging left behind");
    assert_eq!(snapshot(&s.work().join("canary")), canary);
}

/// A zip of `entries` whose central directory records `mode` (file type bits included) for
/// each entry that has one; the zip crate's writer keeps only the permission bits.
fn zip_with_modes(path: &Path, entries: &[(&str, &[u8], u32)]) {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, body, mode) in entries {
        let opts = zip::write::SimpleFileOptions::default().unix_permissions(mode & 0o777);
        w.start_file(*name, opts).unwrap();
        w.write_all(body).unwrap();
    }
    let mut bytes = w.finish().unwrap().into_inner();
    for (name, _, mode) in entries {
        // Central directory file header: signature, …, name length at 28, external
        // attributes at 38 (st_mode in the high half), the name at 46.
        let at = (0..bytes.len() - 46)
            .find(|&i| {
                bytes[i..i + 4] == [0x50, 0x4b, 0x01, 0x02]
                    && bytes[i + 46..].starts_with(name.as_bytes())
            })
            .unwrap();
        bytes[at + 38..at + 42].copy_from_slice(&(mode << 16).to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn zip_devices_and_fifos_are_refused() {
    for (mode, why) in [
        (0o010_644, "is a fifo"),
        (0o020_644, "is a character device"),
        (0o060_644, "is a block device"),
    ] {
        let s = Scene::new();
        let archive = s.archive("evil.zip");
        zip_with_modes(
            &archive,
            &[
                ("ffmpeg/bin/ok.dll", b"MZ", 0o100_644),
                ("ffmpeg/dev", b"", mode),
            ],
        );
        let before = snapshot(&s.work());
        let err = extract_zip_safely(&archive, &s.target()).unwrap_err();
        match &err {
            FetchError::UnsafeArchive { entry, reason, .. } => {
                assert_eq!(entry, "ffmpeg/dev");
                assert!(reason.contains(why), "{reason}");
            }
            other => panic!("{mode:o}: {other:?}"),
        }
        let help = err.help().map(|h| h.to_string()).unwrap_or_default();
        assert!(help.contains("nothing was extracted"), "{help}");
        assert_eq!(snapshot(&s.work()), before, "{mode:o}");
    }
}

#[test]
fn zip_setuid_bits_are_dropped_and_backslashes_separate_directories() {
    let s = Scene::new();
    let archive = s.archive("ok.zip");
    zip_with_modes(
        &archive,
        &[
            ("ffmpeg/bin/tool", b"#!/bin/sh\n", 0o104_755),
            ("ffmpeg\\bin\\avutil-59.dll", b"MZ", 0o100_644),
        ],
    );
    extract_zip_safely(&archive, &s.target()).unwrap();
    let got = snapshot(&s.target());
    assert_eq!(got["ffmpeg/bin/tool"], "file 100755 #!/bin/sh\n");
    assert_eq!(got["ffmpeg/bin/avutil-59.dll"], "file 100644 MZ");
}
