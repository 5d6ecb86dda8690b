//! A real Redis (Debian's `redis-server`) on a free port of 127.0.0.1, without persistence,
//! stopped when dropped: the shared backend of the compiler-cache tests and benchmark.

use std::path::Path;
use std::process::{Child, Command, Stdio};

pub struct Redis {
    child: Child,
    /// `redis://127.0.0.1:PORT`
    pub url: String,
}

impl Redis {
    /// Start it with `dir` as its working directory; waits (at most 20 s) until it listens.
    pub fn start(dir: &Path) -> Result<Redis, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(dir)
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!("redis-server: {e} (apt-get install redis-server; `cargo xtask test` does)")
            })?;
        let mut redis = Redis {
            child,
            url: format!("redis://127.0.0.1:{port}"),
        };
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if std::time::Instant::now() > until {
                let _ = redis.child.kill();
                return Err("redis-server did not start within 20 s".into());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Ok(redis)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
