//! Downloads from a real HTTP server on 127.0.0.1, zips written with the zip crate, and a
//! shared FFmpeg layout holding real PE DLLs built with the mingw-w64 cross compiler.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use rocbuild_fetch::{
    download_verified, extract_zip_safely, find_ffmpeg_shared, sha256_file, FetchError,
};
use rocbuild_testkit::downloads::{
    pe_dll, sha256_hex as sha, shared_ffmpeg_zip as gyan_like_zip, zip_of, FileServer as Server,
};

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn good_archive_downloads_verifies_extracts_and_is_recognised() {
    let zip = gyan_like_zip();
    let sum = sha(&zip);
    let name = "/GyanD/codexffmpeg/releases/download/7.1.1/ffmpeg-7.1.1-full_build-shared.zip";
    let srv = Server::start(BTreeMap::from([(name.to_string(), zip.clone())]));
    let d = tempfile::tempdir().unwrap();
    let downloads = d.path().join("downloads");
    let url = format!("{}{name}", srv.base);

    let file = download_verified(&url, &sum.to_ascii_uppercase(), &downloads).unwrap();
    assert_eq!(file, downloads.join("ffmpeg-7.1.1-full_build-shared.zip"));
    assert_eq!(std::fs::read(&file).unwrap(), zip);
    assert_eq!(sha256_file(&file).unwrap(), sum);
    assert_eq!(
        listing(&downloads),
        ["ffmpeg-7.1.1-full_build-shared.zip"],
        "no temporary files left"
    );
    assert_eq!(srv.hits(), 1);
    // Already there and verified: no second request.
    download_verified(&url, &sum, &downloads).unwrap();
    assert_eq!(srv.hits(), 1);

    let target = d.path().join("ffmpeg");
    assert_eq!(extract_zip_safely(&file, &target).unwrap(), target);
    let root = target.join("ffmpeg-7.1.1-full_build-shared");
    assert_eq!(
        std::fs::read(root.join("bin/avutil-59.dll")).unwrap(),
        pe_dll()
    );
    assert_eq!(
        listing(d.path()),
        ["downloads", "ffmpeg"],
        "no staging directory left"
    );

    let f = find_ffmpeg_shared(&target).unwrap();
    assert_eq!((f.avutil_major, f.major), (59, 7));
    assert_eq!(f.root, root);
    assert_eq!(f.lib_dir, root.join("bin"));
    assert_eq!(f.include, Some(root.join("include")));
    assert!(f.missing.is_empty(), "{:?}", f.missing);
    let libs: Vec<String> = f
        .libraries
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        libs,
        [
            "avcodec-61.dll",
            "avdevice-61.dll",
            "avfilter-10.dll",
            "avformat-61.dll",
            "avutil-59.dll",
            "postproc-58.dll",
            "swresample-5.dll",
            "swscale-8.dll"
        ]
    );

    // Extracting again replaces the whole tree (a stale file from before disappears).
    std::fs::write(root.join("bin/stale.dll"), b"old").unwrap();
    extract_zip_safely(&file, &target).unwrap();
    assert!(!root.join("bin/stale.dll").exists());
    assert_eq!(listing(d.path()), ["downloads", "ffmpeg"]);
}

#[test]
fn wrong_sha256_is_refused_and_nothing_is_kept() {
    let zip = gyan_like_zip();
    let srv = Server::start(BTreeMap::from([("/ffmpeg.zip".to_string(), zip.clone())]));
    let d = tempfile::tempdir().unwrap();
    let wrong = "0".repeat(64);
    let err = download_verified(&format!("{}/ffmpeg.zip", srv.base), &wrong, d.path()).unwrap_err();
    match &err {
        FetchError::ChecksumMismatch {
            expected, actual, ..
        } => {
            assert_eq!(expected, &wrong);
            assert_eq!(actual, &sha(&zip));
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains(&wrong) && msg.contains(&sha(&zip)), "{msg}");
    assert!(listing(d.path()).is_empty(), "{:?}", listing(d.path()));

    // A file already at the destination with another checksum is not trusted either.
    std::fs::write(d.path().join("ffmpeg.zip"), b"tampered").unwrap();
    let err = download_verified(&format!("{}/ffmpeg.zip", srv.base), &wrong, d.path()).unwrap_err();
    assert!(matches!(err, FetchError::ChecksumMismatch { .. }));
    assert_eq!(srv.hits(), 2);
}

#[test]
fn http_404_and_a_closed_port_are_errors() {
    let srv = Server::start(BTreeMap::new());
    let d = tempfile::tempdir().unwrap();
    let err = download_verified(
        &format!("{}/missing.zip", srv.base),
        &"a".repeat(64),
        d.path(),
    )
    .unwrap_err();
    assert!(
        matches!(err, FetchError::HttpStatus { status: 404, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("answered HTTP 404"));
    assert!(listing(d.path()).is_empty());

    // A port nothing listens on: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = download_verified(
        &format!("http://127.0.0.1:{port}/x.zip"),
        &"a".repeat(64),
        d.path(),
    )
    .unwrap_err();
    assert!(matches!(err, FetchError::Request { .. }), "{err:?}");
    assert!(err.to_string().to_lowercase().contains("connect"), "{err}");

    let err = download_verified("https://example.invalid/", &"a".repeat(64), d.path()).unwrap_err();
    assert!(matches!(err, FetchError::BadUrl { .. }));
}

fn served_then_extracted(
    zip: Vec<u8>,
    existing: bool,
) -> (tempfile::TempDir, PathBuf, Result<PathBuf, FetchError>) {
    let sum = sha(&zip);
    let srv = Server::start(BTreeMap::from([("/evil.zip".to_string(), zip)]));
    let d = tempfile::tempdir().unwrap();
    let file = download_verified(
        &format!("{}/evil.zip", srv.base),
        &sum,
        &d.path().join("dl"),
    )
    .unwrap();
    let target = d.path().join("out/ffmpeg");
    if existing {
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("keep.txt"), b"mine").unwrap();
    }
    let r = extract_zip_safely(&file, &target);
    (d, target, r)
}

#[test]
fn archives_with_escaping_entries_are_refused_before_writing_anything() {
    let dll = pe_dll();
    for (bad, why) in [
        ("../evil.dll", "`..`"),
        ("ffmpeg/../../evil.dll", "`..`"),
        ("/tmp/evil.dll", "absolute"),
        ("C:/Windows/System32/evil.dll", "drive letter"),
        ("..\\evil.dll", "`..`"),
    ] {
        // A good entry first: it must not be written either.
        let zip = zip_of(&[("ffmpeg/bin/avutil-59.dll", dll), (bad, b"payload")]);
        let (d, target, r) = served_then_extracted(zip, false);
        let err = r.unwrap_err();
        match &err {
            FetchError::UnsafeEntry { entry, reason, .. } => {
                assert_eq!(entry, bad);
                assert!(reason.contains(why), "{bad}: {reason}");
            }
            other => panic!("{bad}: {other:?}"),
        }
        assert!(!target.exists(), "{bad}: target created");
        assert_eq!(
            listing(&d.path().join("out")),
            Vec::<String>::new(),
            "{bad}: leftovers"
        );
        assert_eq!(listing(d.path()), ["dl"], "{bad}: written outside");
        assert!(!d.path().join("evil.dll").exists());
    }

    // A symlink entry, and an existing target left exactly as it was.
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default();
    w.start_file("ffmpeg/bin/avutil-59.dll", opts).unwrap();
    w.write_all(dll).unwrap();
    w.add_symlink("ffmpeg/bin/avcodec-61.dll", "/etc/passwd", opts)
        .unwrap();
    let zip = w.finish().unwrap().into_inner();
    let (_d, target, r) = served_then_extracted(zip, true);
    let err = r.unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(listing(&target), ["keep.txt"]);
    assert_eq!(std::fs::read(target.join("keep.txt")).unwrap(), b"mine");
}

#[test]
fn static_builds_and_other_layouts() {
    let d = tempfile::tempdir().unwrap();
    // A static build: only ffmpeg.exe. Not a shared FFmpeg.
    std::fs::create_dir_all(d.path().join("static/bin")).unwrap();
    std::fs::write(d.path().join("static/bin/ffmpeg.exe"), pe_dll()).unwrap();
    assert_eq!(find_ffmpeg_shared(&d.path().join("static")), None);
    // A Linux shared build (lib/libavutil.so.58 -> FFmpeg 6) without swscale.
    let lin = d.path().join("linux");
    std::fs::create_dir_all(lin.join("lib/pkgconfig")).unwrap();
    for n in [
        "libavutil.so.58.29.100",
        "libavcodec.so.60",
        "libavformat.so.60",
        "libswresample.so.4",
    ] {
        std::fs::write(lin.join("lib").join(n), b"").unwrap();
    }
    let f = find_ffmpeg_shared(&lin).unwrap();
    assert_eq!((f.avutil_major, f.major), (58, 6));
    assert_eq!(f.pkg_config, Some(lin.join("lib/pkgconfig")));
    assert_eq!(f.missing, ["swscale"]);
    // macOS Homebrew-style names.
    let mac = d.path().join("mac");
    std::fs::create_dir_all(mac.join("lib")).unwrap();
    std::fs::write(mac.join("lib/libavutil.60.dylib"), b"").unwrap();
    assert_eq!(find_ffmpeg_shared(&mac).unwrap().major, 8);
}
