//! The dist-info `RECORD`, kept true so `pip uninstall` removes exactly what is there.

use std::collections::BTreeMap;

use base64::Engine;

/// `sha256=<urlsafe base64, no padding>` from a hex digest.
pub fn record_hash(hex: &str) -> String {
    // By bytes, not by str slices: a non-ASCII character in a damaged digest must not panic.
    let bytes: Vec<u8> = hex
        .as_bytes()
        .chunks_exact(2)
        .filter_map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect();
    format!(
        "sha256={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// Rows of a RECORD: path -> (hash, size), in file order.
pub fn parse(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.rsplitn(3, ',');
            let size = it.next().unwrap_or("").to_string();
            let hash = it.next().unwrap_or("").to_string();
            let path = it.next().unwrap_or("").trim_matches('"').to_string();
            (path, hash, size)
        })
        .collect()
}

/// RECORD with `removed` paths dropped and `set` rows added or replaced.
pub fn update(text: &str, removed: &[String], set: &BTreeMap<String, (String, u64)>) -> String {
    let mut out = String::new();
    let mut seen = std::collections::BTreeSet::new();
    for (path, hash, size) in parse(text) {
        if removed.contains(&path) {
            continue;
        }
        let line = match set.get(&path) {
            Some((h, s)) => {
                seen.insert(path.clone());
                format!("{},{},{}", quote(&path), record_hash(h), s)
            }
            None => format!("{},{},{}", quote(&path), hash, size),
        };
        out.push_str(&line);
        out.push('\n');
    }
    for (path, (h, s)) in set {
        if !seen.contains(path) {
            out.push_str(&format!("{},{},{}\n", quote(path), record_hash(h), s));
        }
    }
    out
}

fn quote(p: &str) -> String {
    if p.contains(',') {
        format!("\"{p}\"")
    } else {
        p.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_rows() {
        let text = "pkg/__init__.py,sha256=abc,10\npkg/libold.so,sha256=def,20\npkg-1.0.dist-info/RECORD,,\n";
        let set = BTreeMap::from([("pkg/libnew.so".to_string(), ("00ff".to_string(), 5u64))]);
        let out = update(text, &["pkg/libold.so".to_string()], &set);
        assert_eq!(out, "pkg/__init__.py,sha256=abc,10\npkg-1.0.dist-info/RECORD,,\npkg/libnew.so,sha256=AP8,5\n");
    }
}
