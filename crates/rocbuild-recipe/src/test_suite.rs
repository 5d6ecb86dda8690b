//! `[test]` for one installed build: the known failures that apply to its release, OS and
//! torch flavour, and how a test id is matched against them.

use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};
use serde::Serialize;

use crate::schema::Test;

/// A known failure that applies here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Known {
    /// The recipe's node id pattern, as written.
    pub test: String,
    pub reason: String,
}

/// The known failures of `t` that apply to `version` on `os` with a torch of `flavor`.
pub fn known_failures(t: &Test, version: &str, os: &str, flavor: &str) -> Vec<Known> {
    let version = Version::from_str(version).ok();
    t.known_failure
        .iter()
        .filter(|k| match (&k.versions, &version) {
            (None, _) => true,
            (Some(spec), Some(v)) => VersionSpecifiers::from_str(spec.get_ref())
                .map(|s| s.contains(v))
                .unwrap_or(false),
            (Some(_), None) => false,
        })
        .filter(|k| k.os.is_empty() || k.os.iter().any(|o| o.get_ref() == os))
        .filter(|k| k.flavors.is_empty() || k.flavors.iter().any(|f| f.get_ref() == flavor))
        .map(|k| Known {
            test: k.test.get_ref().clone(),
            reason: k.reason.clone(),
        })
        .collect()
}

/// The recipe's text less its `[test]` tables (`[test]`, `[test.*]`, `[[test.*]]`) and the
/// comment and blank lines just above them: what the recipe hash covers, so that adding or
/// editing tests does not make earlier builds stale. A recipe without them is unchanged.
pub fn without_test_tables(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending = String::new();
    let mut in_test = false;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with('[') {
            let name = t.trim_start_matches('[').trim_start();
            in_test = name.starts_with("test]")
                || name.starts_with("test.")
                || name.starts_with("test ]");
            if in_test {
                pending.clear();
                continue;
            }
        }
        if in_test {
            continue;
        }
        if t.is_empty() || t.starts_with('#') {
            pending.push_str(line);
        } else {
            out.push_str(&pending);
            pending.clear();
            out.push_str(line);
        }
    }
    out.push_str(&pending);
    out
}

/// One form for a pytest node id (`test/test_ops.py::TestX::test_y[a]`) and a JUnit test
/// case (`classname="test.test_ops.TestX" name="test_y[a]"`): dotted, without `.py`.
pub fn dotted(node_id: &str) -> String {
    let (path, rest) = match node_id.split_once("::") {
        Some((p, r)) => (p, Some(r)),
        None => (node_id, None),
    };
    let path = path
        .trim_start_matches("./")
        .trim_end_matches(".py")
        .replace(['/', '\\'], ".");
    match rest {
        Some(r) => format!("{path}.{}", r.replace("::", ".")),
        None => path,
    }
}

/// Does the dotted test id `id` match the node id pattern `pattern` (`*` = any text)?
/// A pattern naming a file or a class matches every test under it.
pub fn matches(pattern: &str, id: &str) -> bool {
    let p = dotted(pattern);
    wildcard(&p, id) || (!p.contains('*') && id.starts_with(&format!("{p}.")))
}

fn wildcard(p: &str, s: &str) -> bool {
    let parts: Vec<&str> = p.split('*').collect();
    if parts.len() == 1 {
        return p == s;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !s.starts_with(first) || s.len() < first.len() + last.len() || !s.ends_with(last) {
        return false;
    }
    let mut rest = &s[first.len()..s.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_and_junit_cases_meet_in_one_form() {
        assert_eq!(
            dotted("test/test_ops.py::TestX::test_y[a]"),
            "test.test_ops.TestX.test_y[a]"
        );
        assert!(matches(
            "test/test_ops.py::test_y[*]",
            "test.test_ops.test_y[cpu-1]"
        ));
        assert!(matches("test/test_ops.py", "test.test_ops.TestX.test_y"));
        assert!(!matches(
            "test/test_ops.py::test_y",
            "test.test_ops.test_yz"
        ));
        assert!(matches("*::test_cmake*", "test.test_build.test_cmake_cuda"));
        assert!(!matches("a*b*c", "ab"));
        // torchcodec's known failures, against the ids pytest's JUnit XML gives.
        assert!(matches(
            "test/test_samplers.py::test_index_based_sampler[*-clips_at_regular_indices]",
            "test.test_samplers.test_index_based_sampler[5-clips_at_regular_indices]"
        ));
        assert!(matches(
            "test/test_transform_ops.py",
            "test.test_transform_ops"
        ));
    }

    const RECIPE: &str = r#"
[package]
name = "x"
distribution = "x"
import-dir = "x"

[source]
git = "https://example.invalid/x"
tag = "v{version}"

[[release]]
version = "1.0"
torch = ">=0"

[install]
artifacts = ["libx*"]

[test]
files = ["t"]
requirements = ["pytest"]
dirs = ["t/out"]
@@

[[test.known-failure]]
test = "t/test_a.py::test_all"
reason = "upstream's own"

[[test.known-failure]]
test = "t/test_a.py::test_old"
reason = "fixed in 2.0"
versions = "<2"

[[test.known-failure]]
test = "t/test_a.py::test_rocm"
reason = "a ROCm torch"
os = ["linux"]
flavors = ["rocm"]
"#;

    #[test]
    fn the_recipe_hash_does_not_cover_the_test_tables() {
        let text = RECIPE.replace("@@", "");
        let before = &text[..text.find("\n\n[test]").unwrap() + 1];
        assert_eq!(without_test_tables(&text), before);
        let commented = format!("{before}\n# upstream's tests\n[test]\nfiles = [\"t\"]\n\n[build]\ngenerator = \"Ninja\"\n");
        assert_eq!(
            without_test_tables(&commented),
            format!("{before}[build]\ngenerator = \"Ninja\"\n")
        );
        assert_eq!(without_test_tables("a = 1\n# end\n"), "a = 1\n# end\n");
    }

    #[test]
    fn known_failures_apply_by_release_os_and_flavor() {
        let t = crate::parse("x.toml", &RECIPE.replace("@@", ""))
            .unwrap()
            .raw
            .test
            .unwrap();
        let ids = |v: Vec<Known>| v.into_iter().map(|k| k.test).collect::<Vec<_>>();
        assert_eq!(
            ids(known_failures(&t, "1.0", "linux", "cpu")),
            ["t/test_a.py::test_all", "t/test_a.py::test_old"]
        );
        assert_eq!(
            ids(known_failures(&t, "2.0", "linux", "rocm")),
            ["t/test_a.py::test_all", "t/test_a.py::test_rocm"]
        );
        assert_eq!(
            ids(known_failures(&t, "2.0", "windows", "rocm")),
            ["t/test_a.py::test_all"]
        );
    }

    /// The table is checked when the recipe loads: paths stay inside the run's folder, ranges
    /// and names are real, a device selection says how it selects.
    #[test]
    fn a_bad_test_table_is_refused_where_it_is_wrong() {
        let bad = |from: &str, to: &str| {
            let text = RECIPE.replace("@@", "").replace(from, to);
            crate::parse("x.toml", &text).unwrap_err().to_string()
        };
        assert!(bad("files = [\"t\"]", "files = [\"../t\"]").contains("files"));
        assert!(bad("dirs = [\"t/out\"]", "dirs = [\"/tmp/out\"]").contains("dirs"));
        assert!(bad("versions = \"<2\"", "versions = \"<<2\"").contains("not a version range"));
        assert!(
            bad("flavors = [\"rocm\"]", "flavors = [\"rcom\"]").contains("unknown torch flavor")
        );
        let both = RECIPE.replace("@@", "[test.device]\nmarker = \"gpu\"\nkeyword = \"cuda\"");
        assert!(crate::parse("x.toml", &both)
            .unwrap_err()
            .to_string()
            .contains("exactly one"));
        let typo = RECIPE.replace("@@", "pytest-args = []");
        assert!(crate::parse("x.toml", &typo).is_err());
        // An optional module names what is imported, and how its tests are selected.
        let module =
            |body: &str| RECIPE.replace("@@", &format!("[[test.optional-module]]\n{body}"));
        assert!(crate::parse("x.toml", &module("module = \"torch\"\nkeyword = \"torch\"")).is_ok());
        for wrong in [
            "module = \"torch\"",
            "module = \"torch\"\nmarker = \"t\"\nkeyword = \"t\"",
            "module = \"torch; rm -rf\"\nkeyword = \"torch\"",
            "module = \"\"\nkeyword = \"torch\"",
        ] {
            let e = crate::parse("x.toml", &module(wrong))
                .unwrap_err()
                .to_string();
            assert!(e.contains("optional-module"), "{wrong}: {e}");
        }
    }
}
