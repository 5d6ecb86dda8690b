//! A real HTTP server on 127.0.0.1 serving fixed files, and archives shaped like the shared
//! FFmpeg builds people download for Windows (with real PE DLLs from the mingw-w64 compiler).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Serves `files` (URL path -> body) and answers 404 otherwise; counts requests. Stops when dropped.
pub struct FileServer {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    hits: Arc<AtomicUsize>,
    server: Arc<tiny_http::Server>,
}

impl FileServer {
    pub fn start(files: BTreeMap<String, Vec<u8>>) -> FileServer {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind 127.0.0.1"));
        let port = server.server_addr().to_ip().expect("an IP address").port();
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
        FileServer {
            base: format!("http://127.0.0.1:{port}"),
            hits,
            server,
        }
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.server.unblock();
    }
}

/// sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A real Windows DLL (PE), compiled once per process with x86_64-w64-mingw32-gcc.
pub fn pe_dll() -> &'static [u8] {
    static DLL: OnceLock<Vec<u8>> = OnceLock::new();
    DLL.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("rocbuild-pe-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let src = d.join("av.c");
        std::fs::write(
            &src,
            "__declspec(dllexport) unsigned avutil_version(void) { return (59u << 16) | (39u << 8) | 100u; }\n",
        )
        .unwrap();
        let out = d.join("av.dll");
        let st = std::process::Command::new("x86_64-w64-mingw32-gcc")
            .args(["-shared", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .expect("x86_64-w64-mingw32-gcc (apt-get install mingw-w64)");
        assert!(st.success());
        let bytes = std::fs::read(&out).unwrap();
        let _ = std::fs::remove_dir_all(&d);
        bytes
    })
}

/// A zip with these entries (names written as given, `../` included).
pub fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default();
    for (name, body) in entries {
        w.start_file(*name, opts).unwrap();
        w.write_all(body).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// Laid out like gyan.dev's `ffmpeg-7.1.1-full_build-shared.zip`: one top folder with
/// `bin/` (FFmpeg 7 DLLs: avutil-59, avcodec-61, …), `include/`, `lib/`.
pub fn shared_ffmpeg_zip() -> Vec<u8> {
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
    entries.push((
        format!("{top}/include/libavutil/version.h"),
        b"#define LIBAVUTIL_VERSION_MAJOR  59\n#define LIBAVUTIL_VERSION_MINOR  39\n#define LIBAVUTIL_VERSION_MICRO 100\n".to_vec(),
    ));
    entries.push((format!("{top}/lib/avutil.lib"), b"!<arch>\n".to_vec()));
    entries.push((format!("{top}/LICENSE"), b"GPL v3\n".to_vec()));
    let refs: Vec<(&str, &[u8])> = entries
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    zip_of(&refs)
}
