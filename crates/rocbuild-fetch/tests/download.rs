//! Downloads from a real HTTP server on 127.0.0.1, zips written with the zip crate, and a
//! shared FFmpeg layout holding real PE DLLs built with the mingw-w64 cross compiler.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use rocbuild_fetch::{
    download_verified, extract_zip_safely, find_ffmpeg_shared, sha256_file, FetchError,
};
use sha2::{Digest, Sha256};

/// A server answering the given paths with the given bodies (404 otherwise), counting requests.
struct Server {
    base: String,
    hits: Arc<AtomicUsize>,
    server: Arc<tiny_http::Server>,
}

impl Server {
    fn start(files: BTreeMap<String, Vec<u8>>) -> Server {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let port = server.server_addr().to_ip().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let (s, h) = (server.clone(), hits.clone());
        std::thread::spawn(move || {
            for req in s.incoming_requests() {
                h.fetch_add(1, Ordering::SeqCst);
                let resp = match files.get(req.url()) {
                    Some(body) => tiny_http::Response::from_data(body.clone()),
                    None => tiny_http::Response::from_string("not found").with_status_code(404),
                };
                let _ = req.respond(resp);
            }
        });
        Server {
            base: format!("http://127.0.0.1:{port}"),
            hits,
            server,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.server.unblock();
    }
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A real Windows DLL (PE) compiled once with x86_64-w64-mingw32-gcc.
fn pe_dll() -> &'static [u8] {
    static DLL: OnceLock<Vec<u8>> = OnceLock::new();
    DLL.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("av.c");
        std::fs::write(&src, "__declspec(dllexport) unsigned avutil_version(void) { return (59u << 16) | (39u << 8) | 100u; }\n").unwrap();
        let out = d.path().join("av.dll");
        let st = std::process::Command::new("x86_64-w64-mingw32-gcc")
            .args(["-shared", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .expect("x86_64-w64-mingw32-gcc (apt-get install mingw-w64)");
        assert!(st.success());
        std::fs::read(out).unwrap()
    })
}

fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default();
    for (name, body) in entries {
        w.start_file(*name, opts).unwrap();
        w.write_all(body).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn gyan_like_zip() -> Vec<u8> {
    let dll = pe_dll();
    let top = "ffmpeg-7.1.1-full_build-shared";
    let names = [
        "avutil-59.dll",
        "avcodec-61.dll",
        "avformat-61.dll",
        "avfilter-10.dll",
        "avdevice-61.dll",
        "swresample-5.dll",
        "swscale-8.dll",
        "postproc-58.dll",
    ];
    let mut entries: Vec<(String, Vec<u8>)> = names
        .iter()
        .map(|n| (format!("{top}/bin/{n}"), dll.to_vec()))
        .collect();
    entries.push((format!("{top}/bin/ffmpeg.exe"), b"MZ".to_vec()));
    entries.push((
        format!("{top}/include/libavutil/avutil.h"),
        b"/* avutil */\n".to_vec(),
    ));
    entries.push((format!("{top}/lib/avutil.lib"), b"!<arch>\n".to_vec()));
    entries.push((format!("{top}/LICENSE"), b"GPL v3\n".to_vec()));
    let refs: Vec<(&str, &[u8])> = entries
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    zip_of(&refs)
}

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
    assert_eq!(srv.hits.load(Ordering::SeqCst), 1);
    // Already there and verified: no second request.
    download_verified(&url, &sum, &downloads).unwrap();
    assert_eq!(srv.hits.load(Ordering::SeqCst), 1);

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
    assert_eq!(srv.hits.load(Ordering::SeqCst), 2);
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
