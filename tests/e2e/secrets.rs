//! Secrets stay home (issue 27): one canary string is every secret a user can hand rocbuild —
//! the password in a `--source` URL (served by a real git server on 127.0.0.1 that demands
//! it), in an `--index` URL, in the package index `publish` uploads to, in sccache's Redis
//! URL, in `TWINE_PASSWORD` and `GITHUB_TOKEN` — and every command that can see one runs:
//! a build, `--dry-run` and `--json`, an unreachable index, `publish`, `wheel`, `status`,
//! `doctor`. Then stdout, stderr, the cache, the venv and the built wheels are searched for the
//! canary: zero hits. A second test shows that the redaction hides only the secret: scheme,
//! user, host, port and path stay visible.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use crate::common::*;
use crate::publish::{pypi_wheels, Index};

const CANARY: &str = "CANARY-s3cr3t-7f2d9c";

/// `git http-backend` behind HTTP basic auth on 127.0.0.1: a request without user `bob` and
/// the canary as password gets 401 (so the credentials really travel), the rest is git's
/// smart HTTP protocol. The server logs nothing.
struct GitServer {
    child: Child,
    url: String,
}

const SERVER: &str = r#"
import base64, os, subprocess, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
root, port, want = sys.argv[1], int(sys.argv[2]), sys.argv[3]
backend = os.path.join(subprocess.check_output(["git", "--exec-path"], text=True).strip(), "git-http-backend")
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def handle_one(self):
        auth = self.headers.get("Authorization", "")
        if auth != "Basic " + base64.b64encode(("bob:" + want).encode()).decode():
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        env = dict(os.environ, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1", PATH_INFO=path,
                   QUERY_STRING=query, REQUEST_METHOD=self.command, REMOTE_USER="bob",
                   CONTENT_TYPE=self.headers.get("Content-Type", ""), CONTENT_LENGTH=str(len(body)))
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        out = subprocess.run([backend], input=body, env=env, capture_output=True).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode().split("\r\n"):
            if not line: continue
            k, _, v = line.partition(":")
            if k.lower() == "status": status = int(v.strip().split()[0])
            else: headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers: self.send_header(k, v)
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        self.wfile.write(rest)
    do_GET = handle_one
    do_POST = handle_one
ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"#;

impl GitServer {
    fn start(root: &Path, repos: &Path) -> GitServer {
        let script = root.join("git-server.py");
        std::fs::write(&script, SERVER).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("python3")
            .arg(&script)
            .arg(repos)
            .arg(port.to_string())
            .arg(CANARY)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < until,
                "the git server did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        GitServer {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every file under `dir` (zip files opened: a wheel's members too) that holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    for (_, p) in rocbuild_venv::walk(dir) {
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        if contains(&bytes, needle.as_bytes()) {
            hits.push(p.clone());
        }
        if p.extension().is_some_and(|x| x == "whl" || x == "zip") {
            if let Ok(mut z) = zip::ZipArchive::new(std::io::Cursor::new(bytes)) {
                for i in 0..z.len() {
                    let mut f = z.by_index(i).unwrap();
                    let mut b = Vec::new();
                    std::io::Read::read_to_end(&mut f, &mut b).unwrap();
                    if contains(&b, needle.as_bytes()) {
                        hits.push(p.join(f.name()));
                    }
                }
            }
        }
    }
    hits
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn no_command_leaks_the_canary_anywhere() {
    let w = World::new(DECODE_WAV);
    let server = GitServer::start(w.tmp.path(), &w.repos);
    let source =
        format!("{}/fakecodec.git", server.url).replacen("://", &format!("://bob:{CANARY}@"), 1);
    let index_wheels = pypi_wheels("index", &["pypiserver", "twine"]);
    let links = format!("{} {}", w.wheels.display(), index_wheels.display());
    let redis = format!("redis://:{CANARY}@127.0.0.1:1/0");
    let env = [
        ("PIP_FIND_LINKS", links.as_str()),
        ("TWINE_USERNAME", "lab"),
        ("TWINE_PASSWORD", CANARY),
        ("GITHUB_TOKEN", CANARY),
        ("SCCACHE_REDIS", redis.as_str()),
    ];
    let mut outs: Vec<(String, Out)> = Vec::new();
    let mut run = |what: &str, args: &[&str]| {
        let out = w.cmd(args, &env);
        outs.push((what.to_string(), out));
        outs.last().map(|(_, o)| o.code).unwrap_or(-1)
    };
    // The plan, as text and as JSON, with the compiler cache on Redis.
    run(
        "dry-run",
        &[
            "fakecodec",
            "--source",
            &source,
            "--dry-run",
            "--compiler-cache",
            "sccache",
        ],
    );
    run(
        "dry-run --json",
        &["fakecodec", "--source", &source, "--dry-run", "--json"],
    );
    // A real build from the credentialed URL: the server refuses without the canary.
    let built = run(
        "build",
        &["fakecodec", "--source", &source, "--compiler-cache", "none"],
    );
    assert_eq!(
        built,
        0,
        "{}\n{}",
        outs.last().unwrap().1.stdout,
        outs.last().unwrap().1.stderr
    );
    // An index that cannot be reached, with a password in its URL.
    let bad_index = format!("http://alice:{CANARY}@127.0.0.1:1/simple");
    let code = run("unreachable index", &["fakecodec", "--index", &bad_index]);
    assert_ne!(code, 0);
    run("status", &["status"]);
    run("status --json", &["status", "--json"]);
    run("doctor", &["doctor", "fakecodec"]);
    let wheels_out = w.tmp.path().join("built-wheels");
    run(
        "wheel",
        &["wheel", "fakecodec", "--out", wheels_out.to_str().unwrap()],
    );
    // publish to a real index, with the password in the upload URL too.
    let packages = w.tmp.path().join("index-packages");
    let index = Index::start(w.tmp.path(), &packages);
    let upload = index.url.replacen("://", &format!("://lab:{CANARY}@"), 1);
    run("publish", &["publish", "fakecodec", "--index", &upload]);

    let mut leaks = Vec::new();
    for (what, o) in &outs {
        for (stream, text) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
            if text.contains(CANARY) {
                leaks.push(format!("{what}: {stream}:\n{text}"));
            }
        }
    }
    for dir in [&w.cache, &w.venv, &wheels_out, &packages] {
        for p in files_holding(dir, CANARY) {
            leaks.push(format!("file {}", p.display()));
        }
    }
    assert!(leaks.is_empty(), "the canary leaked:\n{}", leaks.join("\n"));
    // It did travel where it had to: the build fetched through the server that demands it,
    // and the publish reached the index.
    assert!(
        std::fs::read_dir(&packages)
            .map(|rd| rd.count())
            .unwrap_or(0)
            > 0,
        "publish uploaded nothing: {}",
        outs.last().unwrap().1.stderr
    );
}

#[test]
fn redaction_keeps_what_the_user_needs_to_see() {
    let w = World::new(DECODE_WAV);
    let source = format!("https://bob:{CANARY}@git.example.org:8443/team/fakecodec.git");
    let out = w.cmd(&["fakecodec", "--source", &source, "--dry-run"], &[]);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(!all.contains(CANARY), "{all}");
    assert!(
        all.contains("https://bob:****@git.example.org:8443/team/fakecodec.git"),
        "{all}"
    );
    let token = format!("https://{CANARY}@git.example.org/team/fakecodec.git");
    let out = w.cmd(
        &["fakecodec", "--source", &token, "--dry-run", "--json"],
        &[],
    );
    assert!(!out.stdout.contains(CANARY), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("https://****@git.example.org/team/fakecodec.git"),
        "{}",
        out.stdout
    );
}
