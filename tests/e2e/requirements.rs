//! A package's missing pure-Python run-time requirements (`[needs] python`) are installed in
//! the same transaction (`pip install --prefix` in the transaction's directory, every installed
//! distribution pinned by a constraints file), said in the plan, recorded in the manifest and
//! removed by `restore`; `--no-deps` refuses as before. The requirement is a tiny wheel served
//! from a local directory (`PIP_FIND_LINKS`, no index).

use std::io::Write;
use std::path::Path;
use std::process::Command;

use crate::common::*;

/// `tinydep 0.1.0`, pure Python, requiring torch (which the venv has: pip must leave it be).
fn tinydep_wheel(dir: &Path) {
    use base64::Engine;
    use sha2::Digest;
    let di = "tinydep-0.1.0.dist-info";
    let files: Vec<(String, Vec<u8>)> = vec![
        ("tinydep/__init__.py".into(), b"ANSWER = 42\n".to_vec()),
        (
            format!("{di}/METADATA"),
            b"Metadata-Version: 2.1\nName: tinydep\nVersion: 0.1.0\nRequires-Dist: torch\n"
                .to_vec(),
        ),
        (
            format!("{di}/WHEEL"),
            b"Wheel-Version: 1.0\nGenerator: e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
                .to_vec(),
        ),
    ];
    let mut record = String::new();
    for (p, b) in &files {
        let h = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(b));
        record.push_str(&format!("{p},sha256={h},{}\n", b.len()));
    }
    record.push_str(&format!("{di}/RECORD,,\n"));
    let mut z = zip::ZipWriter::new(
        std::fs::File::create(dir.join("tinydep-0.1.0-py3-none-any.whl")).unwrap(),
    );
    let opts = zip::write::SimpleFileOptions::default();
    for (p, b) in files
        .iter()
        .chain([(format!("{di}/RECORD"), record.into_bytes())].iter())
    {
        z.start_file(p.as_str(), opts).unwrap();
        z.write_all(b).unwrap();
    }
    z.finish().unwrap();
}

/// The fixture world, its recipe needing `tinydep` at run time, the wheel beside fakecodec's.
fn world() -> World {
    let w = World::new(DECODE_WAV);
    let file = w.recipes.join("fakecodec.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let text = text.replace(
        "[needs]\nffmpeg = true\n",
        "[needs]\nffmpeg = true\npython = [\"tinydep\"]\n",
    );
    assert!(text.contains("python = [\"tinydep\"]"));
    std::fs::write(&file, text).unwrap();
    tinydep_wheel(&w.wheels);
    w
}

#[test]
fn missing_requirements_are_installed_in_the_transaction_pinned_recorded_and_restored() {
    let w = world();
    let before = tree_state(&w.venv);

    // The plan says what will be installed, and how the venv is pinned.
    let dry = w.build(&["--dry-run"]);
    ok(&dry);
    assert!(
        dry.stdout
            .contains("install the missing run-time requirements in the same transaction: tinydep"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("pinned as installed ("),
        "{}",
        dry.stdout
    );
    assert!(dry.stdout.contains("--prefix"), "{}", dry.stdout);
    let json = w.build(&["--dry-run", "--json"]);
    ok(&json);
    let plan: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let r = &plan["requirements"];
    assert_eq!(
        r["missing"],
        serde_json::json!(["tinydep"]),
        "{}",
        json.stdout
    );
    let pins: Vec<&str> = r["constraints"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c.as_str())
        .collect();
    assert!(pins.contains(&"torch==2.9.1"), "{pins:?}");
    assert_eq!(tree_state(&w.venv), before, "a dry run changed the venv");

    // The build installs it; everything the venv had is as it was (torch, pip, … not
    // reinstalled: not one file of theirs rewritten).
    ok(&w.build(&[]));
    let after = tree_state(&w.venv);
    for (path, hash) in &before {
        assert_eq!(after.get(path), Some(hash), "{path} changed");
    }
    assert!(w.site.join("tinydep/__init__.py").is_file());
    assert!(w.site.join("tinydep-0.1.0.dist-info/RECORD").is_file());
    assert!(
        !w.site.join(".rocbuild/txn/requirements").exists(),
        "pip's prefix was left behind"
    );
    let answer = run(Command::new(w.venv.join("bin/python"))
        .args(["-c", "import tinydep; print(tinydep.ANSWER)"]));
    assert_eq!(answer.trim(), "42");

    // The manifest records the new distribution and its files.
    let text = std::fs::read_to_string(w.site.join(".rocbuild/fakecodec.json")).unwrap();
    let m: serde_json::Value = serde_json::from_str(&text).unwrap();
    let req = &m["requirements"][0];
    assert_eq!(req["name"], "tinydep", "{text}");
    assert_eq!(req["version"], "0.1.0", "{text}");
    let files: Vec<&str> = req["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert!(files.contains(&"tinydep/__init__.py"), "{files:?}");
    assert!(
        files.contains(&"tinydep-0.1.0.dist-info/RECORD"),
        "{files:?}"
    );

    // restore gives the venv back byte for byte: tinydep gone with the package.
    let out = w.cmd(&["restore", "fakecodec"], &[]);
    ok(&out);
    assert_eq!(tree_state(&w.venv), before);
}

#[test]
fn no_deps_refuses_a_missing_requirement_as_before() {
    let w = world();
    let before = tree_state(&w.venv);
    let out = w.build(&["--no-deps"]);
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stderr.contains("fakecodec needs tinydep at run time"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("-m pip install tinydep"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--no-deps"), "{}", out.stderr);
    assert_eq!(tree_state(&w.venv), before);
}
